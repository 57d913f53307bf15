//! Bytes cut at a byte offset (a piece of a snapshot's encoding, a write
//! cut at the iounit) as text: whole runes, and the start of a rune the
//! cut split, which waits for the bytes after it; bytes made runes as
//! acme makes them, never refused (`acme_runes`); and the byte where a
//! rune starts.

/// `bytes` as text up to a rune cut at their end, and the cut rune's
/// bytes (empty when none was); `None` when they are not UTF-8 for any
/// other reason. simdutf8 checks several times faster than
/// `std::str::from_utf8` (the check is a good part of a restore's time
/// and of a body write's); only bytes that fail its fast check are looked
/// at again, for where.
pub fn text_and_cut(bytes: &[u8]) -> Option<(&str, &[u8])> {
    if let Ok(text) = simdutf8::basic::from_utf8(bytes) {
        return Some((text, &[]));
    }
    match simdutf8::compat::from_utf8(bytes) {
        Ok(text) => Some((text, &[])),
        Err(e) if e.error_len().is_none() => {
            let (good, cut) = bytes.split_at(e.valid_up_to());
            Some((simdutf8::basic::from_utf8(good).ok()?, cut))
        }
        Err(_) => None,
    }
}
/// The byte offset of rune `n` of `s` (its length past the end).
#[inline]
pub fn byte_of_rune(s: &str, n: usize) -> usize {
    // ASCII up to there (most text): the rune is the byte.
    if s.as_bytes()[..n.min(s.len())].is_ascii() {
        return n.min(s.len());
    }
    s.char_indices().nth(n).map_or(s.len(), |(b, _)| b)
}

/// Appends `piece` to `out`: a piece of one byte (ASCII, in a `str`)
/// pushed inline rather than copied by a call. A whole-file Edit appends
/// millions of pieces that small (a substitution's `b`, the newline a
/// `y/\n/` keeps): 6-10% of its apply.
#[inline]
pub fn push_piece(out: &mut String, piece: &str) {
    match piece.as_bytes() {
        &[byte] => out.push(char::from(byte)),
        _ => out.push_str(piece),
    }
}

/// What [`acme_runes`] did to the bytes it was given.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Decoded {
    /// Bytes that started no valid UTF-8 sequence, each now U+FFFD.
    pub replaced: usize,
    /// NUL bytes, dropped.
    pub nuls: usize,
}

/// Bytes as acme makes them runes (`cvttorunes`): a NUL is dropped, a
/// byte that starts no valid UTF-8 sequence becomes U+FFFD (one per
/// byte, as Plan 9's `chartorune` steps), and an incomplete sequence at
/// the end is returned apart, to wait for more bytes (a file's end has
/// none to wait for: its caller makes them U+FFFD too).
pub fn acme_runes(bytes: &[u8]) -> (String, &[u8], Decoded) {
    let mut out = String::with_capacity(bytes.len());
    let mut said = Decoded::default();
    // Most text is UTF-8 throughout: one fast check.
    if let Some((text, cut)) = text_and_cut(bytes) {
        said.nuls = push_without_nul(&mut out, text);
        return (out, cut, said);
    }
    // Else a step at a time, each check stopping at the next bad byte.
    let mut rest = bytes;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(text) => {
                said.nuls += push_without_nul(&mut out, text);
                rest = &[];
            }
            Err(e) => {
                let (good, bad) = rest.split_at(e.valid_up_to());
                said.nuls += push_without_nul(&mut out, std::str::from_utf8(good).unwrap_or_default());
                if e.error_len().is_none() {
                    // Cut short by the end: it may yet be whole.
                    return (out, bad, said);
                }
                out.push(char::REPLACEMENT_CHARACTER);
                said.replaced += 1;
                rest = &bad[1..];
            }
        }
    }
    (out, &[], said)
}

/// Appends `text` to `out` without its NULs, a run between them at a time
/// (a rune at a time made a 100 MB write spend most of its time here);
/// how many there were.
fn push_without_nul(out: &mut String, text: &str) -> usize {
    let mut runs = text.split('\0');
    out.push_str(runs.next().unwrap_or_default());
    let mut nuls = 0;
    for run in runs {
        out.push_str(run);
        nuls += 1;
    }
    nuls
}

/// A whole file's bytes as acme loads them ([`acme_runes`], a sequence
/// cut short by the file's end made U+FFFD a byte each).
pub fn acme_file_runes(bytes: &[u8]) -> (String, Decoded) {
    let (mut text, cut, mut said) = acme_runes(bytes);
    for _ in cut {
        text.push(char::REPLACEMENT_CHARACTER);
    }
    said.replaced += cut.len();
    (text, said)
}

/// [`acme_file_runes`] of bytes given up: text that is UTF-8 throughout
/// with no NUL (most files) becomes the text with no copy, so a 1 GB
/// file is held once while it is loaded, not twice.
pub fn acme_file_text(bytes: Vec<u8>) -> (String, Decoded) {
    if memchr::memchr(0, &bytes).is_none() {
        match String::from_utf8(bytes) {
            Ok(text) => return (text, Decoded::default()),
            Err(e) => return acme_file_runes(e.as_bytes()),
        }
    }
    acme_file_runes(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn bad_bytes_are_one_u_fffd_each_nuls_go_and_a_cut_waits() {
        let (text, cut, said) = acme_runes(b"\xffa\xfe\0b\n\xe2\x82");
        assert_eq!((text.as_str(), cut), ("\u{FFFD}a\u{FFFD}b\n", &b"\xe2\x82"[..]));
        assert_eq!(said, Decoded { replaced: 2, nuls: 1 });
        // At a file's end nothing more comes: the cut bytes are bad too.
        let (text, said) = acme_file_runes(b"\xffa\xfe\0b\n\xe2\x82");
        assert_eq!(text, "\u{FFFD}a\u{FFFD}b\n\u{FFFD}\u{FFFD}");
        assert_eq!(said, Decoded { replaced: 4, nuls: 1 });
        // An overlong or surrogate encoding is bad byte by byte.
        assert_eq!(acme_file_runes(b"\xc0\x80\xed\xa0\x80").1.replaced, 5);
    }

    proptest! {
        /// Text without NULs is itself; any bytes give text whose bad
        /// bytes and NULs account for every byte that is not in it.
        #[test]
        fn text_is_itself_and_every_byte_is_accounted_for(s in "[^\0]*", bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            prop_assert_eq!(acme_file_runes(s.as_bytes()), (s.clone(), Decoded::default()));
            prop_assert_eq!(acme_file_text(s.clone().into_bytes()), (s.clone(), Decoded::default()));
            prop_assert_eq!(acme_file_text(bytes.clone()), acme_file_runes(&bytes));
            let (text, said) = acme_file_runes(&bytes);
            let kept = text.len() - said.replaced * '\u{FFFD}'.len_utf8();
            prop_assert_eq!(kept + said.replaced + said.nuls, bytes.len());
        }
    }
}
