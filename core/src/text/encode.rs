//! The canonical serde form of a [`Text`].
//!
//! Its encoding does not depend on how the rope happens to be chunked
//! (which varies with edit history): the UTF-8 bytes are written as a
//! sequence of byte pieces cut at fixed [`PIECE`] offsets. That makes a
//! snapshot canonical, so `State::hash` can hash the snapshot encoding
//! itself, and it lets both directions stream without first gathering the
//! text into one `String`.

use super::{Leaves, Text};
use serde::de::{self, DeserializeSeed, SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// Bytes per piece of the encoding.
pub const PIECE: usize = 64 * 1024;

/// An upper bound on the size of `text`'s encoding: its bytes, and a
/// length prefix of at most 10 bytes per piece and for the sequence.
pub fn encoded_size_bound(text: &Text) -> usize {
    let len = text.len_bytes();
    len + 10 * (len.div_ceil(PIECE) + 1)
}

/// The exact size of `text`'s encoding, from its length alone: postcard
/// writes the count of pieces, then each piece's length and bytes, every
/// length a varint.
pub fn encoded_size(text: &Text) -> usize {
    let varint = |n: usize| (usize::BITS - n.max(1).leading_zeros()).div_ceil(7) as usize;
    let len = text.len_bytes();
    let (full, rest) = (len / PIECE, len % PIECE);
    let last = if rest > 0 { varint(rest) + rest } else { 0 };
    varint(len.div_ceil(PIECE)) + full * (varint(PIECE) + PIECE) + last
}

/// Appends `n` as postcard writes a length: 7 bits a byte, low first.
fn varint(mut n: usize, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push(n as u8 | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Appends bytes `start..end` of `text`'s encoding (what `Serialize`
/// writes) to `out`: the length prefixes made from the text's length, and
/// only the text bytes in range copied out of the rope, so a range of a
/// 100 MB text's encoding costs its own size. Past the end reads as
/// nothing.
pub fn copy_encoded(text: &Text, start: usize, end: usize, out: &mut Vec<u8>) {
    let len = text.len_bytes();
    let end = end.min(encoded_size(text));
    if start >= end {
        return;
    }
    let pieces = len.div_ceil(PIECE);
    let mut head = Vec::with_capacity(10);
    // Copies what of `bytes`, which sit at `at` in the encoding, is in range.
    let prefix = |bytes: &[u8], at: usize, out: &mut Vec<u8>| {
        let (from, to) = (start.max(at), end.min(at + bytes.len()));
        if from < to {
            out.extend_from_slice(&bytes[from - at..to - at]);
        }
    };
    varint(pieces, &mut head);
    prefix(&head, 0, out);
    // Every piece but the last is as long as every other: skip to the one
    // `start` is in.
    let full = {
        let mut h = Vec::new();
        varint(PIECE, &mut h);
        h.len() + PIECE
    };
    let mut piece = (start.saturating_sub(head.len()) / full).min(pieces.saturating_sub(1));
    let mut at = head.len() + piece * full;
    while piece < pieces && at < end {
        let from = piece * PIECE;
        let n = PIECE.min(len - from);
        head.clear();
        varint(n, &mut head);
        prefix(&head, at, out);
        at += head.len();
        let (s, e) = (start.max(at), end.min(at + n));
        if s < e {
            text.copy_bytes(from + (s - at), from + (e - at), out);
        }
        at += n;
        piece += 1;
    }
}

/// Where a state's encoding goes on this thread when it is not written
/// out whole (`snap`: the hash's blocks, or a snapshot's parts): what
/// postcard writes through a flavor that calls [`bytes_apart`], and each
/// text handed over itself, to be copied from its rope or kept shared,
/// while postcard writes nothing for it.
pub(crate) trait Apart: std::any::Any {
    fn bytes(&mut self, bytes: &[u8]);
    fn text(&mut self, text: &Text);
    /// Itself, to be had back as what it is.
    fn into_any(self: Box<Self>) -> Box<dyn std::any::Any>;
}

thread_local! {
    static APART: std::cell::RefCell<Option<Box<dyn Apart>>> = const { std::cell::RefCell::new(None) };
}

/// Runs `encode` with `apart` taking what it encodes on this thread, and
/// gives `apart` back; it is let go even if `encode` panics.
pub(crate) fn encode_apart<A: Apart>(apart: A, encode: impl FnOnce()) -> A {
    struct LetGo;
    impl Drop for LetGo {
        fn drop(&mut self) {
            APART.with(|a| a.borrow_mut().take());
        }
    }
    APART.with(|a| {
        let mut a = a.borrow_mut();
        assert!(a.is_none(), "one encoding apart at a time on a thread");
        *a = Some(Box::new(apart));
    });
    let let_go = LetGo;
    encode();
    let apart = APART.with(|a| a.borrow_mut().take()).expect("still taking");
    drop(let_go);
    *apart.into_any().downcast::<A>().expect("the one given")
}

/// Passes `bytes` to this thread's [`Apart`].
pub(crate) fn bytes_apart(bytes: &[u8]) {
    APART.with(|a| a.borrow_mut().as_mut().expect("an encoding apart is under way").bytes(bytes));
}

/// Hands `text` to this thread's [`Apart`], if one takes it; false when
/// none does, and the text is encoded as it always is.
fn text_apart(text: &Text) -> bool {
    APART.with(|a| a.borrow_mut().as_mut().map(|a| a.text(text)).is_some())
}

struct Piece<'a>(&'a [u8]);

impl Serialize for Piece<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(self.0)
    }
}

impl Serialize for Text {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // Being hashed or cut into parts (`snap`): the text goes there
        // itself, and postcard writes nothing for a unit.
        if text_apart(self) {
            return s.serialize_unit();
        }
        let rope = self.rope();
        let len = rope.len_bytes();
        let mut seq = s.serialize_seq(Some(len.div_ceil(PIECE)))?;
        let mut piece: Vec<u8> = Vec::with_capacity(PIECE.min(len));
        for chunk in rope.chunks() {
            let mut bytes = chunk.as_bytes();
            while !bytes.is_empty() {
                let take = (PIECE - piece.len()).min(bytes.len());
                piece.extend_from_slice(&bytes[..take]);
                bytes = &bytes[take..];
                if piece.len() == PIECE {
                    seq.serialize_element(&Piece(&piece))?;
                    piece.clear();
                }
            }
        }
        if !piece.is_empty() {
            seq.serialize_element(&Piece(&piece))?;
        }
        seq.end()
    }
}

/// One piece, fed to the rope as it is read: from the input in place
/// when the format allows, or from the deserializer's own buffer when the
/// input arrives in parts (a Welcome decoded as it is read).
struct PieceInto<'a> {
    out: &'a mut Leaves,
    carry: &'a mut Vec<u8>,
}

impl<'de> DeserializeSeed<'de> for PieceInto<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        // `byte_buf`, not `bytes`: it asks for nothing that must outlive
        // the call, so a deserializer reading from parts need not keep
        // every part, and postcard still lends a slice of its input.
        d.deserialize_byte_buf(self)
    }
}

impl<'de> Visitor<'de> for PieceInto<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a piece of UTF-8 bytes")
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<(), E> {
        feed(self.out, self.carry, v)
    }
}

/// Appends `bytes` to `out`, carrying an incomplete trailing rune in `carry`
/// to the next piece (pieces are cut at byte offsets, not rune boundaries).
fn feed<E: de::Error>(out: &mut Leaves, carry: &mut Vec<u8>, mut bytes: &[u8]) -> Result<(), E> {
    while !carry.is_empty() && !bytes.is_empty() {
        carry.push(bytes[0]);
        bytes = &bytes[1..];
        match std::str::from_utf8(carry) {
            Ok(s) => {
                out.append(s);
                carry.clear();
            }
            Err(e) if e.error_len().is_some() || carry.len() >= 4 => {
                return Err(E::custom("text is not UTF-8"));
            }
            Err(_) => {}
        }
    }
    let Some((text, cut)) = super::text_and_cut(bytes) else { return Err(E::custom("text is not UTF-8")) };
    out.append(text);
    carry.extend_from_slice(cut);
    Ok(())
}

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Text, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Text;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a sequence of text pieces")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Text, A::Error> {
                let mut out = Leaves::new();
                let mut carry = Vec::new();
                while seq.next_element_seed(PieceInto { out: &mut out, carry: &mut carry })?.is_some() {}
                if !carry.is_empty() {
                    return Err(de::Error::custom("text ends inside a rune"));
                }
                Ok(Text::from_rope(out.finish()))
            }
        }
        d.deserialize_seq(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoding_ignores_chunking_and_round_trips() {
        // Multi-byte runes straddle piece boundaries on purpose.
        let s: String = "aé€😀".repeat(PIECE / 3);
        let whole = Text::from(s.as_str());
        let mut built = Text::new();
        for (i, c) in s.chars().enumerate() {
            built.splice(i, i, c.encode_utf8(&mut [0; 4]));
        }
        let a = postcard::to_allocvec(&whole).unwrap();
        let b = postcard::to_allocvec(&built).unwrap();
        assert_eq!(a, b);
        let back: Text = postcard::from_bytes(&a).unwrap();
        assert_eq!(back, whole);
    }

    #[test]
    fn the_size_of_an_encoding_is_known_from_the_length() {
        for len in [0, 1, 127, 128, PIECE - 1, PIECE, PIECE + 1, 3 * PIECE, 200 * PIECE + 17] {
            let text = Text::from("x".repeat(len).as_str());
            assert_eq!(encoded_size(&text), postcard::to_allocvec(&text).unwrap().len(), "{len} bytes");
        }
    }

    #[test]
    fn any_range_of_an_encoding_is_made_as_the_whole_would_be() {
        for len in [0, 1, 127, PIECE - 1, PIECE, PIECE + 1, 3 * PIECE + 17] {
            let s: String = "aé€😀"
                .chars()
                .cycle()
                .scan(0, |n, c| {
                    *n += c.len_utf8();
                    (*n <= len).then_some(c)
                })
                .collect();
            let text = Text::from(s.as_str());
            let whole = postcard::to_allocvec(&text).unwrap();
            let n = whole.len();
            for start in [0, 1, 2, 3, 4, 5, PIECE - 2, PIECE + 3, PIECE + 4, 2 * PIECE + 5, n - 1, n, n + 9] {
                for count in [0, 1, 2, 5, 1000, PIECE, 2 * PIECE + 3, usize::MAX] {
                    let mut got = Vec::new();
                    copy_encoded(&text, start, start.saturating_add(count), &mut got);
                    let want = &whole[start.min(n)..start.saturating_add(count).min(n)];
                    assert!(got == want, "{len} bytes of text: {start}+{count}");
                }
            }
        }
    }

    #[test]
    fn bad_utf8_is_refused() {
        let bad = postcard::to_allocvec(&vec![Piece(&[0xff, 0x41])]).unwrap();
        assert!(postcard::from_bytes::<Text>(&bad).is_err());
        let cut = postcard::to_allocvec(&vec![Piece("é".as_bytes().split_at(1).0)]).unwrap();
        assert!(postcard::from_bytes::<Text>(&cut).is_err());
    }
}
