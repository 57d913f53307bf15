//! The 9P2000 wire format: framing, decoding and encoding, sans I/O.
//!
//! Decoding is two steps, as mini-redis does it: [`check`] looks at the
//! bytes received so far and says whether a whole message is there (an
//! incomplete message is `Ok(None)`, a value, not an error) or whether the
//! framing itself is broken, which no reply can fix: the connection must
//! close. [`parse`] then decodes one whole frame. Its errors carry the
//! message's tag whenever the frame got that far, so a server can answer
//! Rerror on it and go on serving.
//!
//! Every length on the wire is checked against the bytes that remain
//! before anything is allocated, so a frame of n bytes allocates at most
//! about n bytes, whatever its fields claim.

use crate::error::{DecodeError, FrameError};
use crate::fcall::{Fcall, Msg, Name, Qid, Stat, MAXWELEM};

/// size[4] type[1] tag[2]: the smallest frame.
pub const HEADER: usize = 7;
/// The stat record's fixed part after its own size[2]: type[2] dev[4]
/// qid[13] mode[4] atime[4] mtime[4] length[8] and four string lengths.
const STAT_FIXED: usize = 2 + 4 + 13 + 4 + 4 + 4 + 8 + 4 * 2;

/// Whether `buf` starts with a whole message no larger than `msize`:
/// `Ok(Some(len))` if so, `Ok(None)` if more bytes are needed.
pub fn check(buf: &[u8], msize: u32) -> Result<Option<usize>, FrameError> {
    let Some(size) = buf.get(..4) else { return Ok(None) };
    let size = u32::from_le_bytes(size.try_into().expect("four bytes"));
    if (size as usize) < HEADER {
        return Err(FrameError::TooSmall(size));
    }
    if size > msize {
        return Err(FrameError::TooLarge { size, msize });
    }
    match buf.len() >= size as usize {
        true => Ok(Some(size as usize)),
        false => Ok(None),
    }
}

/// A bounds-checked reader over one frame.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    tag: Option<u16>,
}

impl<'a> Reader<'a> {
    #[inline]
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        match self.buf.get(self.pos..self.pos.saturating_add(n)) {
            Some(b) => {
                self.pos += n;
                Ok(b)
            }
            None => Err(self.overrun(n, what)),
        }
    }
    /// Kept out of the way of the readers above, which run for every
    /// field of every message.
    #[cold]
    #[inline(never)]
    fn overrun(&self, need: usize, what: &'static str) -> DecodeError {
        DecodeError::Overrun { tag: self.tag, what, need, have: self.buf.len() - self.pos }
    }
    #[inline]
    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], DecodeError> {
        Ok(self.take(N, what)?.try_into().expect("N bytes"))
    }
    #[inline]
    fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        Ok(self.take(1, what)?[0])
    }
    #[inline]
    fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        self.array(what).map(u16::from_le_bytes)
    }
    #[inline]
    fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        self.array(what).map(u32::from_le_bytes)
    }
    #[inline]
    fn u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        self.array(what).map(u64::from_le_bytes)
    }
    #[inline]
    fn text(&mut self, what: &'static str) -> Result<&'a str, DecodeError> {
        let n = self.u16(what)? as usize;
        let bytes = self.take(n, what)?;
        if bytes.is_ascii() {
            // Most names are: checked a word at a time, where UTF-8's
            // check goes byte by byte over a short string.
            // SAFETY: ASCII is UTF-8.
            return Ok(unsafe { std::str::from_utf8_unchecked(bytes) });
        }
        std::str::from_utf8(bytes).map_err(|_| DecodeError::NotUtf8 { tag: self.tag, what })
    }
    /// A string, its bytes unchecked.
    ///
    /// # Safety
    ///
    /// Every byte left to read must be ASCII (the caller checked).
    #[inline]
    unsafe fn ascii(&mut self, what: &'static str) -> Result<&'a str, DecodeError> {
        let n = self.u16(what)? as usize;
        let bytes = self.take(n, what)?;
        debug_assert!(bytes.is_ascii());
        // SAFETY: ASCII, as the caller promised, is UTF-8.
        Ok(unsafe { std::str::from_utf8_unchecked(bytes) })
    }
    fn string(&mut self, what: &'static str) -> Result<String, DecodeError> {
        self.text(what).map(str::to_string)
    }
    #[inline]
    fn name(&mut self, what: &'static str) -> Result<Name, DecodeError> {
        self.text(what).map(Name::from)
    }
    fn qid(&mut self) -> Result<Qid, DecodeError> {
        Ok(Qid { ty: self.u8("qid")?, vers: self.u32("qid")?, path: self.u64("qid")? })
    }
    fn data(&mut self) -> Result<Vec<u8>, DecodeError> {
        let n = self.u32("count")? as usize;
        Ok(self.take(n, "data")?.to_vec())
    }
    /// A stat[n] field: n[2], then a stat record that must fill exactly n.
    fn stat_field(&mut self) -> Result<Stat, DecodeError> {
        let n = self.u16("stat")? as usize;
        let inner = self.take(n, "stat")?;
        let mut r = Reader { buf: inner, pos: 0, tag: self.tag };
        let stat = r.stat()?;
        r.end("stat")?;
        Ok(stat)
    }
    /// A stat record: size[2] and what it counts.
    fn stat(&mut self) -> Result<Stat, DecodeError> {
        let size = self.u16("stat size")? as usize;
        if size < STAT_FIXED {
            return Err(DecodeError::BadStat { tag: self.tag, size });
        }
        let body = self.take(size, "stat")?;
        // The fixed fields are all there (the size covers them), at fixed
        // offsets: read with no check each (a Tstat's reply is most of a
        // small request's decoding).
        let (fixed, names) = body.split_at(STAT_FIXED - 4 * 2);
        let fixed: &[u8; STAT_FIXED - 4 * 2] = fixed.try_into().expect("the fixed part");
        fn le<const N: usize>(fixed: &[u8; STAT_FIXED - 4 * 2], at: usize) -> [u8; N] {
            fixed[at..at + N].try_into().expect("N bytes")
        }
        let mut r = Reader { buf: names, pos: 0, tag: self.tag };
        // All four names and their lengths ASCII (lengths under 128), as
        // nearly always: each name is then UTF-8, with no check of its own.
        let ascii = names.is_ascii();
        let mut name = |what| match ascii {
            // SAFETY: `r` reads only `names`, all ASCII.
            true => unsafe { r.ascii(what) }.map(Name::from),
            false => r.name(what),
        };
        let stat = Stat {
            ty: u16::from_le_bytes(le(fixed, 0)),
            dev: u32::from_le_bytes(le(fixed, 2)),
            qid: Qid { ty: fixed[6], vers: u32::from_le_bytes(le(fixed, 7)), path: u64::from_le_bytes(le(fixed, 11)) },
            mode: u32::from_le_bytes(le(fixed, 19)),
            atime: u32::from_le_bytes(le(fixed, 23)),
            mtime: u32::from_le_bytes(le(fixed, 27)),
            length: u64::from_le_bytes(le(fixed, 31)),
            name: name("stat name")?,
            uid: name("stat uid")?,
            gid: name("stat gid")?,
            muid: name("stat muid")?,
        };
        r.end("stat")?;
        Ok(stat)
    }
    fn end(&self, what: &'static str) -> Result<(), DecodeError> {
        match self.pos == self.buf.len() {
            true => Ok(()),
            false => Err(DecodeError::Trailing { tag: self.tag, what, extra: self.buf.len() - self.pos }),
        }
    }
}

/// Decodes one whole frame (as `check` measured it).
pub fn parse(frame: &[u8]) -> Result<Msg, DecodeError> {
    let mut r = Reader { buf: frame, pos: 0, tag: None };
    let size = r.u32("size")? as usize;
    if size != frame.len() {
        return Err(DecodeError::SizeMismatch { size, len: frame.len() });
    }
    let ty = r.u8("type")?;
    let tag = r.u16("tag")?;
    r.tag = Some(tag);
    use Fcall::*;
    let body = match ty {
        98 => Topenfd { fid: r.u32("fid")?, mode: r.u8("mode")? },
        99 => Ropenfd { qid: r.qid()?, iounit: r.u32("iounit")?, unixfd: r.u32("unixfd")? },
        100 => Tversion { msize: r.u32("msize")?, version: r.string("version")? },
        101 => Rversion { msize: r.u32("msize")?, version: r.string("version")? },
        102 => Tauth { afid: r.u32("afid")?, uname: r.string("uname")?, aname: r.string("aname")? },
        103 => Rauth { aqid: r.qid()? },
        104 => {
            Tattach { fid: r.u32("fid")?, afid: r.u32("afid")?, uname: r.string("uname")?, aname: r.string("aname")? }
        }
        105 => Rattach { qid: r.qid()? },
        107 => Rerror { ename: r.string("ename")? },
        108 => Tflush { oldtag: r.u16("oldtag")? },
        109 => Rflush,
        110 => {
            let (fid, newfid) = (r.u32("fid")?, r.u32("newfid")?);
            let n = r.u16("nwname")? as usize;
            if n > MAXWELEM {
                return Err(DecodeError::TooManyNames { tag, n });
            }
            let wnames = (0..n).map(|_| r.string("wname")).collect::<Result<_, _>>()?;
            Twalk { fid, newfid, wnames }
        }
        111 => {
            let n = r.u16("nwqid")? as usize;
            if n > MAXWELEM {
                return Err(DecodeError::TooManyNames { tag, n });
            }
            Rwalk { wqids: (0..n).map(|_| r.qid()).collect::<Result<_, _>>()? }
        }
        112 => Topen { fid: r.u32("fid")?, mode: r.u8("mode")? },
        113 => Ropen { qid: r.qid()?, iounit: r.u32("iounit")? },
        114 => Tcreate { fid: r.u32("fid")?, name: r.string("name")?, perm: r.u32("perm")?, mode: r.u8("mode")? },
        115 => Rcreate { qid: r.qid()?, iounit: r.u32("iounit")? },
        116 => Tread { fid: r.u32("fid")?, offset: r.u64("offset")?, count: r.u32("count")? },
        117 => Rread { data: r.data()? },
        118 => Twrite { fid: r.u32("fid")?, offset: r.u64("offset")?, data: r.data()? },
        119 => Rwrite { count: r.u32("count")? },
        120 => Tclunk { fid: r.u32("fid")? },
        121 => Rclunk,
        122 => Tremove { fid: r.u32("fid")? },
        123 => Rremove,
        124 => Tstat { fid: r.u32("fid")? },
        125 => Rstat { stat: Box::new(r.stat_field()?) },
        126 => Twstat { fid: r.u32("fid")?, stat: Box::new(r.stat_field()?) },
        127 => Rwstat,
        _ => return Err(DecodeError::UnknownType { tag, ty }),
    };
    r.end("message")?;
    Ok(Msg { tag, body })
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    let s = cut(s, u16::MAX as usize);
    out.extend_from_slice(&(s.len() as u16).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

/// `s` in at most `max` bytes (a 9P string holds 65535), cut at a rune
/// boundary rather than written with a wrong length.
fn cut(s: &str, max: usize) -> &str {
    let mut n = s.len().min(max);
    while !s.is_char_boundary(n) {
        n -= 1;
    }
    &s[..n]
}

fn put_qid(out: &mut Vec<u8>, q: &Qid) {
    out.push(q.ty);
    out.extend_from_slice(&q.vers.to_le_bytes());
    out.extend_from_slice(&q.path.to_le_bytes());
}

/// Appends one stat record (size[2] first), as directory reads return them.
pub fn put_stat(out: &mut Vec<u8>, s: &Stat) {
    // The record's size is 16 bits too, and so is Rstat's and Twstat's
    // count of it with its size: the strings share what is left of that
    // after the fixed fields, each cut to what remains.
    let mut room = u16::MAX as usize - 2 - STAT_FIXED;
    let strings = [s.name.as_str(), s.uid.as_str(), s.gid.as_str(), s.muid.as_str()].map(|f| {
        let f = cut(f, room);
        room -= f.len();
        f
    });
    let size = STAT_FIXED + strings.iter().map(|f| f.len()).sum::<usize>();
    // One allocation at most, and the fixed fields made apart and added
    // in one piece: a stat is answered on every `ls` and every getattr of
    // a mount.
    out.reserve(2 + size);
    let mut head = [0u8; 2 + STAT_FIXED - 4 * 2];
    let fields: [&[u8]; 10] = [
        &(size as u16).to_le_bytes(),
        &s.ty.to_le_bytes(),
        &s.dev.to_le_bytes(),
        &[s.qid.ty],
        &s.qid.vers.to_le_bytes(),
        &s.qid.path.to_le_bytes(),
        &s.mode.to_le_bytes(),
        &s.atime.to_le_bytes(),
        &s.mtime.to_le_bytes(),
        &s.length.to_le_bytes(),
    ];
    let mut at = 0;
    for f in fields {
        head[at..at + f.len()].copy_from_slice(f);
        at += f.len();
    }
    out.extend_from_slice(&head);
    for f in strings {
        out.extend_from_slice(&(f.len() as u16).to_le_bytes());
        out.extend_from_slice(f.as_bytes());
    }
}

/// Decodes the stat records of a directory read: whole records only.
pub fn parse_stats(data: &[u8]) -> Result<Vec<Stat>, DecodeError> {
    let mut r = Reader { buf: data, pos: 0, tag: None };
    let mut out = Vec::new();
    while r.pos < data.len() {
        out.push(r.stat()?);
    }
    Ok(out)
}

/// Data this large is written from where it lies, not copied into a
/// frame buffer (`encode_frame`), and read into a buffer of its own, not
/// copied out of the stream's ([`data_head`]).
pub const LARGE: usize = 256 * 1024;

/// When `buf` begins an Rread or Twrite of at least [`LARGE`] bytes of
/// data and holds its head and at least `least` bytes of its data, but
/// not all of it: the length of the frame's head (all before the data)
/// and the data's count. The data can then be read straight into a
/// buffer of its own ([`with_data`] makes the message), instead of into
/// the stream's buffer and copied out. (That buffer is the data's whole
/// size at once: a server, which cannot trust its peer, asks for some of
/// the data first, so a head alone, stalled, holds no more than the bytes
/// it sent.) The frame's size must already have been checked ([`check`]).
pub fn data_head(buf: &[u8], least: usize) -> Option<(usize, usize)> {
    let size = u32::from_le_bytes(buf.get(..4)?.try_into().expect("four bytes")) as usize;
    // Rread: size[4] type[1] tag[2] count[4]; Twrite: size[4] type[1]
    // tag[2] fid[4] offset[8] count[4].
    let head = match *buf.get(4)? {
        117 => 11,
        118 => 23,
        _ => return None,
    };
    let count = u32::from_le_bytes(buf.get(head - 4..head)?.try_into().expect("four bytes")) as usize;
    (size == head + count && count >= LARGE && buf.len() < size && buf.len() >= head + least).then_some((head, count))
}

/// The message of a frame whose head ([`data_head`]) and data were read
/// apart.
pub fn with_data(head: &[u8], data: Vec<u8>) -> Result<Msg, DecodeError> {
    // The head parsed as a frame of no data, then given its data.
    let mut empty = head.to_vec();
    let n = empty.len();
    empty[..4].copy_from_slice(&(n as u32).to_le_bytes());
    empty[n - 4..].copy_from_slice(&0u32.to_le_bytes());
    let mut msg = parse(&empty)?;
    match &mut msg.body {
        Fcall::Rread { data: d } | Fcall::Twrite { data: d, .. } => *d = data,
        _ => unreachable!("data_head finds only Rread and Twrite"),
    }
    Ok(msg)
}

/// Appends `msg`'s frame to `out`.
pub fn encode(msg: &Msg, out: &mut Vec<u8>) {
    encode_frame(msg, out, usize::MAX);
}

/// Appends `msg`'s frame to `out`, except that the data of an Rread or
/// Twrite of at least `large` bytes is left for the caller to send right
/// after `out` (the frame's size counts it): bulk data is then written
/// from where it lies instead of being copied into `out`.
pub fn encode_frame<'m>(msg: &'m Msg, out: &mut Vec<u8>, large: usize) -> Option<&'m [u8]> {
    let left = encode_head(msg, out, large);
    left.then_some(match &msg.body {
        Fcall::Rread { data } | Fcall::Twrite { data, .. } => data.as_slice(),
        _ => &[],
    })
}

/// As [`encode_frame`], the large data left given mutably: for a writer
/// that seals it where it lies (the message is not used again).
pub fn encode_frame_mut<'m>(msg: &'m mut Msg, out: &mut Vec<u8>, large: usize) -> Option<&'m mut [u8]> {
    let left = encode_head(msg, out, large);
    left.then_some(match &mut msg.body {
        Fcall::Rread { data } | Fcall::Twrite { data, .. } => data.as_mut_slice(),
        _ => &mut [],
    })
}

/// The frame of `msg` onto `out`, but for the data of an Rread or
/// Twrite of at least `large` bytes: true when that is left out.
fn encode_head(msg: &Msg, out: &mut Vec<u8>, large: usize) -> bool {
    let start = out.len();
    let mut after = false;
    out.extend_from_slice(&[0, 0, 0, 0]);
    out.push(msg.body.ty());
    out.extend_from_slice(&msg.tag.to_le_bytes());
    let u32s = |out: &mut Vec<u8>, vs: &[u32]| vs.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
    use Fcall::*;
    match &msg.body {
        Topenfd { fid, mode } | Topen { fid, mode } => {
            u32s(out, &[*fid]);
            out.push(*mode);
        }
        Ropenfd { qid, iounit, unixfd } => {
            put_qid(out, qid);
            u32s(out, &[*iounit, *unixfd]);
        }
        Tversion { msize, version } | Rversion { msize, version } => {
            u32s(out, &[*msize]);
            put_str(out, version);
        }
        Tauth { afid, uname, aname } => {
            u32s(out, &[*afid]);
            put_str(out, uname);
            put_str(out, aname);
        }
        Rauth { aqid: qid } | Rattach { qid } => put_qid(out, qid),
        Tattach { fid, afid, uname, aname } => {
            u32s(out, &[*fid, *afid]);
            put_str(out, uname);
            put_str(out, aname);
        }
        Rerror { ename } => put_str(out, ename),
        Tflush { oldtag } => out.extend_from_slice(&oldtag.to_le_bytes()),
        Rflush | Rclunk | Rremove | Rwstat => {}
        Twalk { fid, newfid, wnames } => {
            u32s(out, &[*fid, *newfid]);
            out.extend_from_slice(&(wnames.len() as u16).to_le_bytes());
            wnames.iter().for_each(|w| put_str(out, w));
        }
        Rwalk { wqids } => {
            out.extend_from_slice(&(wqids.len() as u16).to_le_bytes());
            wqids.iter().for_each(|q| put_qid(out, q));
        }
        Ropen { qid, iounit } | Rcreate { qid, iounit } => {
            put_qid(out, qid);
            u32s(out, &[*iounit]);
        }
        Tcreate { fid, name, perm, mode } => {
            u32s(out, &[*fid]);
            put_str(out, name);
            u32s(out, &[*perm]);
            out.push(*mode);
        }
        Tread { fid, offset, count } => {
            u32s(out, &[*fid]);
            out.extend_from_slice(&offset.to_le_bytes());
            u32s(out, &[*count]);
        }
        Rread { data } => {
            u32s(out, &[data.len() as u32]);
            match data.len() >= large {
                true => after = true,
                false => out.extend_from_slice(data),
            }
        }
        Twrite { fid, offset, data } => {
            u32s(out, &[*fid]);
            out.extend_from_slice(&offset.to_le_bytes());
            u32s(out, &[data.len() as u32]);
            match data.len() >= large {
                true => after = true,
                false => out.extend_from_slice(data),
            }
        }
        Rwrite { count } => u32s(out, &[*count]),
        Tclunk { fid } | Tremove { fid } | Tstat { fid } => u32s(out, &[*fid]),
        Rstat { stat } => put_stat_field(out, stat),
        Twstat { fid, stat } => {
            u32s(out, &[*fid]);
            put_stat_field(out, stat);
        }
    }
    let left = match &msg.body {
        Rread { data } | Twrite { data, .. } if after => data.len(),
        _ => 0,
    };
    let size = (out.len() - start + left) as u32;
    out[start..start + 4].copy_from_slice(&size.to_le_bytes());
    after
}

/// stat[n]: the record's length, then the record.
fn put_stat_field(out: &mut Vec<u8>, s: &Stat) {
    // The record is written in place and its length set after.
    let start = out.len();
    out.extend_from_slice(&[0, 0]);
    put_stat(out, s);
    let size = (out.len() - start - 2) as u16;
    out[start..start + 2].copy_from_slice(&size.to_le_bytes());
}

/// `msg` as a new frame.
pub fn to_bytes(msg: &Msg) -> Vec<u8> {
    let mut out = Vec::new();
    encode(msg, &mut out);
    out
}
