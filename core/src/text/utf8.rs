//! Bytes cut at a byte offset (a piece of a snapshot's encoding, a write
//! cut at the iounit) as text: whole runes, and the start of a rune the
//! cut split, which waits for the bytes after it; and the byte where a
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
pub fn byte_of_rune(s: &str, n: usize) -> usize {
    // ASCII up to there (most text): the rune is the byte.
    if s.as_bytes()[..n.min(s.len())].is_ascii() {
        return n.min(s.len());
    }
    s.char_indices().nth(n).map_or(s.len(), |(b, _)| b)
}
