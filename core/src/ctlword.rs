//! A word of a ctl message that may hold blanks (a font's name, `Go
//! Regular 11`): ctl messages split words at blanks, so a blank is
//! written `%20`, a tab `%09`, a newline `%0A` and `%` itself `%25`.

/// `text` as one ctl word.
pub fn encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '%' => out.push_str("%25"),
            ' ' => out.push_str("%20"),
            '\t' => out.push_str("%09"),
            '\n' => out.push_str("%0A"),
            c => out.push(c),
        }
    }
    out
}

/// The text a ctl word stands for; `None` for a `%` not followed by two
/// hex digits.
pub fn decode(word: &str) -> Option<String> {
    let mut out = Vec::with_capacity(word.len());
    let mut bytes = word.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'%' => {
                let hex = [bytes.next()?, bytes.next()?];
                let hex = std::str::from_utf8(&hex).ok()?;
                out.push(u8::from_str_radix(hex, 16).ok()?);
            }
            b => out.push(b),
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_with_blanks_and_percents_come_back() {
        for text in ["Go Regular 11", "/lib/font/bit/lucsans/euro.8.font", "100% a\tb\nc", ""] {
            let word = encode(text);
            assert!(!word.contains([' ', '\t', '\n']), "{word:?}");
            assert_eq!(decode(&word).as_deref(), Some(text));
        }
        assert_eq!(decode("50%"), None);
        assert_eq!(decode("%zz"), None);
    }
}
