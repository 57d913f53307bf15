//! TLS 1.3's record layer once the handshake is done (RFC 8446 5), for
//! the import's client and the daemon alike: records opened and sealed
//! here with the keys rustls derived and hands over through its
//! interface for kTLS ([`KernelConnection`]). A record is opened where it
//! lies, shifted down over its head as it is decrypted, so a bulk read is
//! opened straight into the 9P frame it belongs to; a reply's data is
//! sealed where it lies ([`Sealer::seal_in_place`]). rustls's own record
//! layer copies each record's plaintext into a buffer of its own first.
//! rustls keeps what needs its state: the keys after a key update, the
//! session tickets.

use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_128_GCM, AES_256_GCM, CHACHA20_POLY1305, NONCE_LEN};
use rustls::client::ClientConnectionData;
use rustls::kernel::KernelConnection;
use rustls::server::ServerConnectionData;
use rustls::{ConnectionTrafficSecrets, ExtractedSecrets, SupportedCipherSuite};

/// A record's head: its type, the legacy version, its body's length.
const HEAD: usize = 5;
/// The AEAD's tag at the end of each record's body.
const TAG: usize = 16;
/// The most plaintext a record carries.
const PLAINTEXT_MAX: usize = 1 << 14;
/// The most a record's body may be: 16 KiB of plaintext, its inner type,
/// padding, and the tag (RFC 8446 5.2: 2^14 + 256).
const BODY_MAX: usize = PLAINTEXT_MAX + 256;
/// The most a record takes on the wire.
pub const RECORD_MAX: usize = HEAD + BODY_MAX;

/// Content types (RFC 8446 5.1): every record after the handshake says
/// application data outside; the real type is inside, at the end.
const ALERT: u8 = 21;
const HANDSHAKE: u8 = 22;
const APPLICATION_DATA: u8 = 23;
/// TLS 1.2's number, which TLS 1.3 records carry for compatibility.
const LEGACY_VERSION: [u8; 2] = [3, 3];

/// Handshake messages after the handshake (RFC 8446 4.6).
const NEW_SESSION_TICKET: u8 = 4;
const KEY_UPDATE: u8 = 24;
/// The longest post-handshake message held while its records come: a
/// session ticket is a few hundred bytes.
const MESSAGE_MAX: usize = 1 << 16;

/// Alerts sent (RFC 8446 6).
const CLOSE_NOTIFY: u8 = 0;
const UNEXPECTED_MESSAGE: u8 = 10;
const BAD_RECORD_MAC: u8 = 20;
const RECORD_OVERFLOW: u8 = 22;
const ILLEGAL_PARAMETER: u8 = 47;
const DECODE_ERROR: u8 = 50;
const INTERNAL_ERROR: u8 = 80;

/// Why a record did not open, or the connection's keys could not go on.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("a TLS record's head is not a TLS 1.3 record of application data (type {kind}, length {length})")]
    Head { kind: u8, length: usize },
    #[error("a TLS record did not open: its tag does not match (bad_record_mac)")]
    Opened,
    #[error("a TLS record has no content type (all zeros)")]
    NoType,
    #[error("a TLS record holds {0} bytes, more than 16 KiB")]
    Overflow(usize),
    #[error("a TLS record of an unknown type {0}")]
    Kind(u8),
    #[error("a handshake message of type {0} after the handshake")]
    Message(u8),
    #[error("a TLS record out of place: {0}")]
    Unexpected(&'static str),
    #[error("a key update asking {0}, not 0 (no update) or 1 (update)")]
    KeyUpdate(u8),
    #[error("a post-handshake message is malformed: {0}")]
    Malformed(&'static str),
    #[error("the peer sent TLS alert {0}")]
    Alert(u8),
    #[error("the negotiated cipher suite has no key here")]
    Suite,
    #[error("the AEAD refused to seal a record")]
    Sealing,
    #[error("the connection ended with an alert: nothing more is sent on it")]
    Ended,
    #[error("rustls: {0}")]
    Rustls(#[from] rustls::Error),
}

impl RecordError {
    /// The alert that tells the peer this error, if one does.
    fn alert(&self) -> Option<u8> {
        Some(match self {
            RecordError::Head { length, .. } if *length > BODY_MAX => RECORD_OVERFLOW,
            RecordError::Overflow(_) => RECORD_OVERFLOW,
            RecordError::Head { .. }
            | RecordError::NoType
            | RecordError::Kind(_)
            | RecordError::Message(_)
            | RecordError::Unexpected(_) => UNEXPECTED_MESSAGE,
            RecordError::Opened => BAD_RECORD_MAC,
            RecordError::KeyUpdate(_) => ILLEGAL_PARAMETER,
            RecordError::Malformed(_) => DECODE_ERROR,
            RecordError::Alert(_) | RecordError::Ended => return None,
            RecordError::Suite | RecordError::Sealing | RecordError::Rustls(_) => INTERNAL_ERROR,
        })
    }
}

/// One direction's keys: the AEAD key, the IV, and the sequence number of
/// the next record, which makes each record's nonce (RFC 8446 5.3).
pub struct Keys {
    key: LessSafeKey,
    iv: [u8; NONCE_LEN],
    seq: u64,
}

impl Keys {
    fn new((seq, secrets): (u64, ConnectionTrafficSecrets)) -> Result<Keys, RecordError> {
        let (algorithm, key, iv) = match &secrets {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (&AES_128_GCM, key, iv),
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (&AES_256_GCM, key, iv),
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => (&CHACHA20_POLY1305, key, iv),
            _ => return Err(RecordError::Suite),
        };
        let key = UnboundKey::new(algorithm, key.as_ref()).map_err(|_| RecordError::Suite)?;
        let iv = iv.as_ref().try_into().map_err(|_| RecordError::Suite)?;
        Ok(Keys { key: LessSafeKey::new(key), iv, seq })
    }

    /// The next record's nonce: the IV with the sequence number, which
    /// moves on, so no nonce is ever used twice with a key.
    fn next_nonce(&mut self) -> Nonce {
        let mut nonce = self.iv;
        for (n, s) in nonce[NONCE_LEN - 8..].iter_mut().zip(self.seq.to_be_bytes()) {
            *n ^= s;
        }
        self.seq += 1;
        Nonce::assume_unique_for_key(nonce)
    }

    /// Seals `content` of type `kind` as one record onto the end of `out`.
    fn seal(&mut self, kind: u8, content: &[u8], out: &mut Vec<u8>) -> Result<(), RecordError> {
        let head = record_head(content.len());
        out.extend_from_slice(&head);
        let at = out.len();
        out.extend_from_slice(content);
        out.push(kind);
        let nonce = self.next_nonce();
        match self.key.seal_in_place_separate_tag(nonce, Aad::from(head), &mut out[at..]) {
            Ok(tag) => {
                out.extend_from_slice(tag.as_ref());
                Ok(())
            }
            Err(_) => {
                out.truncate(at - HEAD);
                Err(RecordError::Sealing)
            }
        }
    }
}

/// The head of a record of `content` bytes (and its type and tag).
fn record_head(content: usize) -> [u8; HEAD] {
    let [hi, lo] = ((content + 1 + TAG) as u16).to_be_bytes();
    [APPLICATION_DATA, LEGACY_VERSION[0], LEGACY_VERSION[1], hi, lo]
}

/// A piece of what a reply sealed where it lies is written as, in order:
/// bytes of `meta` (records' heads and tags, and records sealed whole),
/// or of the data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    Meta(std::ops::Range<usize>),
    Data(std::ops::Range<usize>),
}

/// Adds `meta[range]` to what is written, joined to the piece before when
/// that ends where it begins.
pub fn push_meta(parts: &mut Vec<Part>, range: std::ops::Range<usize>) {
    if range.is_empty() {
        return;
    }
    if let Some(Part::Meta(last)) = parts.last_mut() {
        if last.end == range.start {
            last.end = range.end;
            return;
        }
    }
    parts.push(Part::Meta(range));
}

/// The length of the record whose head begins `bytes`, once the head is
/// in: `None` before.
pub fn record_len(bytes: &[u8]) -> Result<Option<usize>, RecordError> {
    let Some(head) = bytes.get(..HEAD) else { return Ok(None) };
    // The legacy version is not looked at (RFC 8446 5.1).
    let length = u16::from_be_bytes([head[3], head[4]]) as usize;
    if head[0] != APPLICATION_DATA || length > BODY_MAX || length <= TAG {
        return Err(RecordError::Head { kind: head[0], length });
    }
    Ok(Some(HEAD + length))
}

/// What a record held, once opened.
#[derive(Debug, PartialEq, Eq)]
pub enum Opened {
    /// Application data: this many bytes where it was opened to.
    Data(usize),
    /// A handshake message, or a part of one: this many bytes where it
    /// was opened to, for [`Sealer::take_handshake`].
    Handshake(usize),
    /// The peer said the end (close_notify).
    Closed,
}

/// The reading direction: records opened.
pub struct Opener {
    rx: Keys,
    /// Whether a handshake message is partly read: nothing else may come
    /// before its rest (RFC 8446 5.1).
    inside_message: bool,
    /// Empty records of data, and key updates, since the last data: a
    /// peer that sends them without end is cut off (as rustls does).
    empty_records: u32,
    key_updates: u32,
}

/// The most empty records, and the most key updates, in a row.
const IN_A_ROW: u32 = 32;

#[cfg(test)]
impl Opener {
    fn with(rx: Keys) -> Opener {
        Opener { rx, inside_message: false, empty_records: 0, key_updates: 0 }
    }
}

impl Opener {
    /// Opens the whole record at `buf[from..]` to `buf[to..]` (`to` at or
    /// before `from`: the plaintext is decrypted down over the record's
    /// head and whatever lies between). Returns what it held and the
    /// record's length.
    pub fn open(&mut self, buf: &mut [u8], to: usize, from: usize) -> Result<(Opened, usize), RecordError> {
        self.open_whole(buf, to, from)?.ok_or(RecordError::Malformed("a record cut short"))
    }

    /// As [`Opener::open`], when the record at `buf[from..]` is whole:
    /// `None` while more of it must be read.
    pub fn open_whole(
        &mut self,
        buf: &mut [u8],
        to: usize,
        from: usize,
    ) -> Result<Option<(Opened, usize)>, RecordError> {
        let length = match record_len(&buf[from..])? {
            Some(length) if from + length <= buf.len() => length,
            _ => return Ok(None),
        };
        if to > from {
            return Err(RecordError::Malformed("a record opened to after where it lies"));
        }
        let head: [u8; HEAD] = buf[from..from + HEAD].try_into().expect("a head");
        let nonce = self.rx.next_nonce();
        let inner = self
            .rx
            .key
            .open_within(nonce, Aad::from(head), &mut buf[to..from + length], from + HEAD - to..)
            .map_err(|_| RecordError::Opened)?;
        // The type is the last byte not zero; zeros after it are padding.
        let at = inner.iter().rposition(|&b| b != 0).ok_or(RecordError::NoType)?;
        if at > PLAINTEXT_MAX {
            return Err(RecordError::Overflow(at));
        }
        let opened = match inner[at] {
            APPLICATION_DATA | ALERT if self.inside_message => {
                return Err(RecordError::Unexpected("data or an alert inside a handshake message"))
            }
            APPLICATION_DATA if at == 0 => {
                self.empty_records += 1;
                if self.empty_records > IN_A_ROW {
                    return Err(RecordError::Unexpected("too many empty records in a row"));
                }
                Opened::Data(0)
            }
            APPLICATION_DATA => {
                (self.empty_records, self.key_updates) = (0, 0);
                Opened::Data(at)
            }
            HANDSHAKE if at == 0 => return Err(RecordError::Unexpected("a handshake record of nothing")),
            HANDSHAKE => Opened::Handshake(at),
            ALERT => match inner[..at] {
                [_, CLOSE_NOTIFY] => Opened::Closed,
                [_, description] => return Err(RecordError::Alert(description)),
                _ => return Err(RecordError::Malformed("an alert not of two bytes")),
            },
            other => return Err(RecordError::Kind(other)),
        };
        Ok(Some((opened, length)))
    }
}

/// A connection's side: what it does with a session ticket.
pub trait Side: Sized + Send + 'static {
    fn ticket(kernel: &mut KernelConnection<Self>, body: &[u8]) -> Result<(), RecordError>;
}

impl Side for ClientConnectionData {
    /// Kept by rustls, as any client's.
    fn ticket(kernel: &mut KernelConnection<Self>, body: &[u8]) -> Result<(), RecordError> {
        Ok(kernel.handle_new_session_ticket(body)?)
    }
}

impl Side for ServerConnectionData {
    /// Only a server sends them.
    fn ticket(_: &mut KernelConnection<Self>, _: &[u8]) -> Result<(), RecordError> {
        Err(RecordError::Message(NEW_SESSION_TICKET))
    }
}

/// The writing direction, and rustls's state for what comes after the
/// handshake (which changes the reading direction's keys too).
pub struct Sealer<D: Side> {
    kernel: KernelConnection<D>,
    tx: Keys,
    /// Records sealed under one key before it is changed for another.
    limit: u64,
    /// A post-handshake message whose records are still coming.
    message: Vec<u8>,
    /// Whether the peer asked for a key update of ours: said before the
    /// next data sealed (one answer for any number of asks, RFC 8446
    /// 4.6.3), never piled up while nothing is sent.
    update_owed: bool,
    /// Whether nothing more is sealed: after an alert, either side's, or
    /// a record that would not seal.
    ended: bool,
}

/// Both directions of a connection whose handshake is done and whose
/// handshake records are all written.
pub fn split<D: Side>(
    (secrets, kernel): (ExtractedSecrets, KernelConnection<D>),
) -> Result<(Opener, Sealer<D>), RecordError> {
    #[allow(unreachable_patterns)]
    let limit = match kernel.negotiated_cipher_suite() {
        SupportedCipherSuite::Tls13(suite) => suite.common.confidentiality_limit,
        _ => return Err(RecordError::Suite),
    };
    let opener = Opener { rx: Keys::new(secrets.rx)?, inside_message: false, empty_records: 0, key_updates: 0 };
    let sealer =
        Sealer { tx: Keys::new(secrets.tx)?, kernel, limit, message: Vec::new(), update_owed: false, ended: false };
    Ok((opener, sealer))
}

impl<D: Side> Sealer<D> {
    /// Takes a handshake record's content, and deals with the messages
    /// that are whole: a session ticket kept, a key update followed (the
    /// opener's key changed; ours owed when asked).
    pub fn take_handshake(&mut self, content: &[u8], opener: &mut Opener) -> Result<(), RecordError> {
        if self.message.len() + content.len() > MESSAGE_MAX {
            return Err(RecordError::Malformed("a message longer than 64 KiB"));
        }
        self.message.extend_from_slice(content);
        while let [kind, a, b, c, ref rest @ ..] = self.message[..] {
            let length = u32::from_be_bytes([0, a, b, c]) as usize;
            let Some(body) = rest.get(..length) else { break };
            match kind {
                NEW_SESSION_TICKET => D::ticket(&mut self.kernel, body)?,
                KEY_UPDATE => {
                    let requested = match body {
                        [0] => false,
                        [1] => true,
                        [other] => return Err(RecordError::KeyUpdate(*other)),
                        _ => return Err(RecordError::Malformed("a key update not of one byte")),
                    };
                    // A key changes between records, never inside one.
                    if rest.len() > length {
                        return Err(RecordError::Unexpected("a key update with more after it in its record"));
                    }
                    opener.key_updates += 1;
                    if opener.key_updates > IN_A_ROW {
                        return Err(RecordError::Unexpected("too many key updates with no data between them"));
                    }
                    opener.rx = Keys::new(self.kernel.update_rx_secret()?)?;
                    self.update_owed |= requested;
                }
                other => return Err(RecordError::Message(other)),
            }
            self.message.drain(..4 + length);
        }
        opener.inside_message = !self.message.is_empty();
        Ok(())
    }

    /// Asks the peer for a key update, and updates ours.
    #[cfg(test)]
    pub fn ask_update(&mut self, out: &mut Vec<u8>) {
        self.tx.seal(HANDSHAKE, &[KEY_UPDATE, 0, 0, 1, 1], out).unwrap();
        self.tx = Keys::new(self.kernel.update_tx_secret().unwrap()).unwrap();
    }

    /// Says a key update of ours (under the old key), then seals under
    /// the new one.
    fn update_tx(&mut self, out: &mut Vec<u8>) -> Result<(), RecordError> {
        self.tx.seal(HANDSHAKE, &[KEY_UPDATE, 0, 0, 1, 0], out)?;
        self.tx = Keys::new(self.kernel.update_tx_secret()?)?;
        self.update_owed = false;
        Ok(())
    }

    /// Before a record of data: the key update owed, or one for a key
    /// near its limit (`records` more records about to be sealed).
    fn before_data(&mut self, records: u64, out: &mut Vec<u8>) -> Result<(), RecordError> {
        match self.update_owed || self.tx.seq + records > self.limit {
            true => self.update_tx(out),
            false => Ok(()),
        }
    }

    /// Runs `sealing` unless the connection ended; if it fails, `out` is
    /// cut back to what it was (no part of a frame is sent) and nothing
    /// more is sealed.
    fn sealing<T>(
        &mut self,
        out: &mut Vec<u8>,
        sealing: impl FnOnce(&mut Self, &mut Vec<u8>) -> Result<T, RecordError>,
    ) -> Result<T, RecordError> {
        if self.ended {
            return Err(RecordError::Ended);
        }
        let len = out.len();
        let sealed = sealing(self, out);
        if sealed.is_err() {
            out.truncate(len);
            self.ended = true;
        }
        sealed
    }

    /// Seals `plaintext` onto the end of `out`, 16 KiB a record.
    pub fn seal(&mut self, plaintext: &[u8], out: &mut Vec<u8>) -> Result<(), RecordError> {
        self.sealing(out, |me, out| {
            out.reserve(sealed_len(plaintext.len()));
            for chunk in plaintext.chunks(PLAINTEXT_MAX) {
                me.before_data(1, out)?;
                me.tx.seal(APPLICATION_DATA, chunk, out)?;
            }
            Ok(())
        })
    }

    /// Seals `data` where it lies: each record's content is the data up
    /// to a byte, which is kept and then holds the record's type (TLS
    /// 1.3 puts it after the content, RFC 8446 5.2); the byte kept goes in
    /// a record of its own after it. So nothing is copied but a byte in
    /// 16 KiB, and the data's last piece (with no byte after it), sealed
    /// whole onto `meta`. `meta` takes the records' heads and tags, and
    /// `parts` says what to write, in order.
    pub fn seal_in_place(
        &mut self,
        data: &mut [u8],
        meta: &mut Vec<u8>,
        parts: &mut Vec<Part>,
    ) -> Result<(), RecordError> {
        let count = parts.len();
        let sealed = self.sealing(meta, |me, meta| me.seal_data_in_place(data, meta, parts));
        if sealed.is_err() {
            parts.truncate(count);
        }
        sealed
    }

    fn seal_data_in_place(
        &mut self,
        data: &mut [u8],
        meta: &mut Vec<u8>,
        parts: &mut Vec<Part>,
    ) -> Result<(), RecordError> {
        const CONTENT: usize = PLAINTEXT_MAX - 1;
        let mut at = 0;
        while data.len() - at > CONTENT {
            let m = meta.len();
            // Two records a step.
            self.before_data(2, meta)?;
            let end = at + CONTENT;
            let kept = std::mem::replace(&mut data[end], APPLICATION_DATA);
            let head = record_head(CONTENT);
            meta.extend_from_slice(&head);
            push_meta(parts, m..meta.len());
            let nonce = self.tx.next_nonce();
            let tag = self
                .tx
                .key
                .seal_in_place_separate_tag(nonce, Aad::from(head), &mut data[at..=end])
                .map_err(|_| RecordError::Sealing)?;
            parts.push(Part::Data(at..end + 1));
            let m = meta.len();
            meta.extend_from_slice(tag.as_ref());
            self.tx.seal(APPLICATION_DATA, &[kept], meta)?;
            push_meta(parts, m..meta.len());
            at = end + 1;
        }
        let m = meta.len();
        for chunk in data[at..].chunks(PLAINTEXT_MAX) {
            self.before_data(1, meta)?;
            self.tx.seal(APPLICATION_DATA, chunk, meta)?;
        }
        push_meta(parts, m..meta.len());
        Ok(())
    }

    /// Seals `plaintext` onto `meta`, as a piece to write.
    pub fn seal_meta(
        &mut self,
        plaintext: &[u8],
        meta: &mut Vec<u8>,
        parts: &mut Vec<Part>,
    ) -> Result<(), RecordError> {
        let m = meta.len();
        self.seal(plaintext, meta)?;
        push_meta(parts, m..meta.len());
        Ok(())
    }

    /// An alert onto `out`: close_notify, or the one that tells the peer
    /// `error` (after which nothing more is sealed).
    /// Either way nothing more is sealed after it; an error that is the
    /// peer's own alert (or the end already) is answered with nothing.
    pub fn alert(&mut self, error: Option<&RecordError>, out: &mut Vec<u8>) {
        if std::mem::replace(&mut self.ended, true) {
            return;
        }
        let (level, description) = match error.map(RecordError::alert) {
            None => (1, CLOSE_NOTIFY),
            Some(None) => return,
            Some(Some(description)) => (2, description),
        };
        // A two-byte record seals unless the key is past the AEAD's
        // limits, which `seal` keeps it far from.
        let _ = self.tx.seal(ALERT, &[level, description], out);
    }
}

/// Bytes `plaintext` bytes take sealed.
pub fn sealed_len(plaintext: usize) -> usize {
    plaintext + plaintext.div_ceil(PLAINTEXT_MAX) * (HEAD + 1 + TAG)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::crypto::cipher::{AeadKey, Iv};

    fn keys(secret: u8) -> Keys {
        let secrets = ConnectionTrafficSecrets::Aes256Gcm {
            key: AeadKey::from([secret; 32]),
            iv: Iv::from([secret.wrapping_add(1); NONCE_LEN]),
        };
        Keys::new((7, secrets)).unwrap()
    }

    /// Three records (data, a handshake message, data) opened one after
    /// another, each shifted down to just after the data before it: what
    /// comes out is the data, whole and in order, as a frame gets it.
    #[test]
    fn records_open_down_over_their_heads_in_order() {
        let (mut tx, mut opener) = (keys(3), Opener::with(keys(3)));
        let mut wire = Vec::new();
        let first: Vec<u8> = (0..PLAINTEXT_MAX).map(|i| (i % 251) as u8).collect();
        tx.seal(APPLICATION_DATA, &first, &mut wire).unwrap();
        tx.seal(HANDSHAKE, &[KEY_UPDATE, 0, 0, 1, 0], &mut wire).unwrap();
        tx.seal(APPLICATION_DATA, b"the rest", &mut wire).unwrap();
        assert_eq!(wire.len(), sealed_len(PLAINTEXT_MAX) + sealed_len(5) + sealed_len(8));
        let (mut to, mut from, mut got) = (0, 0, Vec::new());
        while from < wire.len() {
            let (opened, length) = opener.open(&mut wire, to, from).unwrap();
            match opened {
                Opened::Data(n) => {
                    got.extend_from_slice(&wire[to..to + n]);
                    to += n;
                }
                Opened::Handshake(n) => assert_eq!(&wire[to..to + n], &[KEY_UPDATE, 0, 0, 1, 0]),
                Opened::Closed => panic!("no close was sealed"),
            }
            from += length;
        }
        assert_eq!(got, [first, b"the rest".to_vec()].concat());
        assert_eq!(&wire[..to], &got[..], "opened in place, in order");
    }

    #[test]
    fn a_record_changed_on_the_way_or_out_of_order_does_not_open() {
        let mut tx = keys(5);
        let (mut one, mut two) = (Vec::new(), Vec::new());
        tx.seal(APPLICATION_DATA, b"one", &mut one).unwrap();
        tx.seal(APPLICATION_DATA, b"two", &mut two).unwrap();
        let mut changed = one.clone();
        changed[HEAD + 1] ^= 1;
        assert!(matches!(Opener::with(keys(5)).open(&mut changed, 0, 0), Err(RecordError::Opened)));
        // The second record first: its nonce is not the one expected.
        assert!(matches!(Opener::with(keys(5)).open(&mut two.clone(), 0, 0), Err(RecordError::Opened)));
        // Under another key.
        assert!(matches!(Opener::with(keys(6)).open(&mut one.clone(), 0, 0), Err(RecordError::Opened)));
        let mut opener = Opener::with(keys(5));
        assert_eq!(opener.open(&mut one, 0, 0).unwrap(), (Opened::Data(3), one.len()));
        assert_eq!(opener.open(&mut two, 0, 0).unwrap(), (Opened::Data(3), two.len()));
    }

    #[test]
    fn heads_that_are_not_tls_1_3_records_are_refused() {
        assert_eq!(record_len(&[23, 3, 3, 0]).unwrap(), None, "a head not yet whole");
        assert_eq!(record_len(&[23, 3, 3, 0, 17]).unwrap(), Some(HEAD + 17));
        for head in [[22, 3, 3, 0, 40], [23, 3, 3, 0x41, 1], [23, 3, 3, 0, 16]] {
            let e = record_len(&head).unwrap_err();
            assert!(matches!(e, RecordError::Head { .. }), "{head:?}: {e}");
        }
        assert_eq!(RecordError::Head { kind: 23, length: 1 << 15 }.alert(), Some(RECORD_OVERFLOW));
    }

    /// Padding after the type is taken off; a record of zeros alone has
    /// no type; an alert says which, a close_notify the end.
    #[test]
    fn types_padding_and_alerts() {
        let mut tx = keys(9);
        let mut wire = Vec::new();
        tx.seal(APPLICATION_DATA, b"ab", &mut wire).unwrap();
        tx.seal(ALERT, &[2, BAD_RECORD_MAC], &mut wire).unwrap();
        tx.seal(ALERT, &[1, CLOSE_NOTIFY], &mut wire).unwrap();
        tx.seal(0, &[0, 0], &mut wire).unwrap();
        let mut opener = Opener::with(keys(9));
        let (opened, first) = opener.open(&mut wire, 0, 0).unwrap();
        assert_eq!(opened, Opened::Data(2));
        let (e, second) = (opener.open(&mut wire, first, first).unwrap_err(), sealed_len(2));
        assert!(matches!(e, RecordError::Alert(BAD_RECORD_MAC)), "{e}");
        let (opened, third) = opener.open(&mut wire, first + second, first + second).unwrap();
        assert_eq!(opened, Opened::Closed);
        let at = first + second + third;
        assert!(matches!(opener.open(&mut wire, at, at), Err(RecordError::NoType)));
    }
}
