//! acme's dump file (`rows.c`'s `rowdump` and `rowload`), what `Dump`
//! writes and `Load` reads: the directory, the two fonts, the columns'
//! left edges in percent, the row and column tags, then one record per
//! window: `f` a clean file to get again, `F` a changed one with its text,
//! `x` a Zerox copy of an earlier record, `e` a window a tool owns,
//! restored by running its dump command.
//!
//! Percentages are written from the layout's integer fractions with
//! integer arithmetic (seven decimals, as acme's `%11.7f`), so a dump of
//! one state is the same bytes everywhere.

use crate::frac::Frac;

/// The variable-width font acme starts with (dump line 2).
pub const FONT_VAR: &str = "/lib/font/bit/lucsans/euro.8.font";
/// The fixed-width font `Font` switches to (dump line 3).
pub const FONT_FIX: &str = "/lib/font/bit/lucm/unicode.9.font";

/// What kind of window record a line starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `f`: a clean file, loaded again from its name.
    File,
    /// `F`: a changed window; its text follows the tag line.
    Text,
    /// `x`: another window on the buffer of record `dumpid`.
    Zerox,
    /// `e`: a tool's window, restored by running `command` in `dir`.
    Command,
}

/// One window record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowRecord {
    pub kind: Kind,
    pub column: usize,
    /// The window's id in the dump (`f`, `F`), or the id of the record it
    /// copies (`x`).
    pub id: u64,
    pub q0: u64,
    pub q1: u64,
    pub y: Frac,
    pub font: String,
    /// The tag line (its first word is the window's name).
    pub tag: String,
    /// `F`: the body's text.
    pub text: String,
    /// `e`: where and what to run.
    pub dir: String,
    pub command: String,
}

/// A whole dump file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Dump {
    pub dir: String,
    pub fonts: [String; 2],
    pub columns: Vec<Frac>,
    pub row_tag: String,
    pub column_tags: Vec<(usize, String)>,
    pub windows: Vec<WindowRecord>,
}

/// Why a dump file could not be read: acme's `bad load file FILE:LINE`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad load file line {line}: {why}")]
pub struct LoadError {
    pub line: usize,
    pub why: String,
}

/// A fraction as acme's `%11.7f` of a percentage.
pub fn percent(f: Frac) -> String {
    let f = f.0.min(Frac::ONE.0);
    format!("{:>11}", format!("{}.{:07}", f / 10_000, (f % 10_000) * 1_000))
}

fn parse_percent(s: &str, line: usize) -> Result<Frac, LoadError> {
    let bad = || LoadError { line, why: format!("{:?} is not a percentage", s.trim()) };
    let p: f64 = s.trim().parse().map_err(|_| bad())?;
    if !(0.0..100.0).contains(&p) {
        return Err(bad());
    }
    Ok(Frac((p * 10_000.0).round() as u32))
}

fn first_line(s: &str) -> &str {
    s.split('\n').next().unwrap_or_default()
}

impl Dump {
    /// The file's bytes, as acme writes them (a tag's newlines become the
    /// byte 0xff, so the output is bytes, not text).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = String::new();
        out += &format!("{}\n{}\n{}\n", self.dir, self.fonts[0], self.fonts[1]);
        let xs: Vec<String> = self.columns.iter().map(|x| percent(*x)).collect();
        out += &format!("{}\n", xs.join(" "));
        out += &format!("w {}\n", first_line(&self.row_tag));
        for (i, tag) in &self.column_tags {
            out += &format!("c{i:11} {}\n", first_line(tag));
        }
        let mut bytes = out.into_bytes();
        for w in &self.windows {
            let head = match w.kind {
                Kind::File => {
                    format!("f{:11} {:11} {:11} {:11} {} {}\n", w.column, w.id, w.q0, w.q1, percent(w.y), w.font)
                }
                Kind::Zerox => {
                    format!("x{:11} {:11} {:11} {:11} {} {}\n", w.column, w.id, w.q0, w.q1, percent(w.y), w.font)
                }
                Kind::Command => format!("e{:11} {:11} {:11} {:11} {} {}\n", w.column, 0, 0, 0, percent(w.y), w.font),
                Kind::Text => format!(
                    "F{:11} {:11} {:11} {:11} {} {:11} {}\n",
                    w.column,
                    w.id,
                    w.q0,
                    w.q1,
                    percent(w.y),
                    w.text.chars().count(),
                    w.font
                ),
            };
            bytes.extend_from_slice(head.as_bytes());
            // The window's ctl fields (acme's winctlprint without fonts),
            // then the tag with its newlines as 0xff.
            let ctl = format!("{:11} {:11} {:11} {:11} {:11} ", w.id, w.tag.chars().count(), 0, 0, 0);
            bytes.extend_from_slice(ctl.as_bytes());
            for (i, piece) in w.tag.split('\n').enumerate() {
                if i > 0 {
                    bytes.push(0xff);
                }
                bytes.extend_from_slice(piece.as_bytes());
            }
            bytes.push(b'\n');
            match w.kind {
                Kind::Text => bytes.extend_from_slice(w.text.as_bytes()),
                Kind::Command => bytes.extend_from_slice(format!("{}\n{}\n", w.dir, w.command).as_bytes()),
                _ => {}
            }
        }
        bytes
    }

    /// Reads a dump file's bytes.
    pub fn parse(bytes: &[u8]) -> Result<Dump, LoadError> {
        let mut r = Reader { bytes, at: 0, line: 0 };
        let mut d = Dump { dir: r.text_line()?, ..Dump::default() };
        d.fonts = [r.text_line()?, r.text_line()?];
        let xs = r.text_line()?;
        // Each percentage is 11 wide and ends in a blank or the newline.
        let n = (xs.len() + 1) / 12;
        if n == 0 || n > 10 {
            return Err(r.err("the column line must hold 1 to 10 percentages of 12 characters each"));
        }
        for i in 0..n {
            let at = xs.get(i * 12..(i * 12 + 11).min(xs.len())).unwrap_or_default();
            d.columns.push(parse_percent(at, r.line)?);
        }
        let mut line = r.raw_line();
        while let Some(l) = line {
            match l.first() {
                Some(b'w') => d.row_tag = r.utf8(l.get(2..).unwrap_or_default())?,
                Some(b'c') => {
                    let i = r.field(l, 0)? as usize;
                    d.column_tags.push((i, r.utf8(l.get(13..).unwrap_or_default())?));
                }
                _ => break,
            }
            line = r.raw_line();
        }
        while let Some(l) = line {
            let kind = match l.first() {
                Some(b'f') => Kind::File,
                Some(b'F') => Kind::Text,
                Some(b'x') => Kind::Zerox,
                Some(b'e') => Kind::Command,
                _ => return Err(r.err("a window record starts with f, F, x or e")),
            };
            let fields = if kind == Kind::Text { 6 } else { 5 };
            if l.len() < 1 + fields * 12 {
                return Err(r.err("the window record is too short"));
            }
            let column = r.field(l, 0)? as usize;
            if column > 10 {
                return Err(r.err("column out of range"));
            }
            let y = parse_percent(&r.utf8(&l[1 + 4 * 12..1 + 4 * 12 + 11])?, r.line)?;
            let font = r.utf8(&l[1 + fields * 12..])?;
            let mut w = WindowRecord {
                kind,
                column,
                id: r.field(l, 1)?,
                q0: r.field(l, 2)?,
                q1: r.field(l, 3)?,
                y,
                font,
                tag: String::new(),
                text: String::new(),
                dir: String::new(),
                command: String::new(),
            };
            let tag = r.raw_line().ok_or_else(|| r.err("the tag line is missing"))?;
            let tag: Vec<u8> = tag.iter().map(|b| if *b == 0xff { b'\n' } else { *b }).collect();
            w.tag = r.utf8(tag.get(60..).unwrap_or_default())?;
            match kind {
                Kind::Text => w.text = r.runes(r.field(l, 5)? as usize)?,
                Kind::Command => {
                    w.dir = r.text_line()?;
                    w.command = r.text_line()?;
                }
                _ => {}
            }
            d.windows.push(w);
            line = r.raw_line();
        }
        Ok(d)
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    line: usize,
}

impl<'a> Reader<'a> {
    fn err(&self, why: &str) -> LoadError {
        LoadError { line: self.line, why: why.to_string() }
    }

    fn raw_line(&mut self) -> Option<&'a [u8]> {
        if self.at >= self.bytes.len() {
            return None;
        }
        let rest = &self.bytes[self.at..];
        let end = rest.iter().position(|b| *b == b'\n').unwrap_or(rest.len());
        self.at += (end + 1).min(rest.len());
        self.line += 1;
        Some(&rest[..end])
    }

    fn utf8(&self, b: &[u8]) -> Result<String, LoadError> {
        String::from_utf8(b.to_vec()).map_err(|_| self.err("not UTF-8 text"))
    }

    fn text_line(&mut self) -> Result<String, LoadError> {
        let l = self.raw_line().ok_or_else(|| LoadError { line: self.line + 1, why: "the file ends early".into() })?;
        self.utf8(l)
    }

    /// Field `i` (11 wide, after the record's letter) as a number.
    fn field(&self, l: &[u8], i: usize) -> Result<u64, LoadError> {
        let s = l.get(1 + i * 12..(1 + i * 12 + 11).min(l.len())).unwrap_or_default();
        let s = std::str::from_utf8(s).unwrap_or_default().trim();
        s.parse().map_err(|_| self.err(&format!("field {} ({s:?}) is not a number", i + 1)))
    }

    /// The next `n` runes, whatever they are (later records may hold
    /// bytes that are not UTF-8, so only these are decoded).
    fn runes(&mut self, n: usize) -> Result<String, LoadError> {
        let rest = &self.bytes[self.at..];
        let mut end = 0;
        for _ in 0..n {
            let width = match rest.get(end) {
                None => return Err(self.err("the file ends inside a window's text")),
                Some(b) if *b < 0x80 => 1,
                Some(b) if b >> 5 == 0b110 => 2,
                Some(b) if b >> 4 == 0b1110 => 3,
                Some(b) if b >> 3 == 0b11110 => 4,
                Some(_) => return Err(self.err("the text is not UTF-8")),
            };
            end += width;
        }
        let text =
            std::str::from_utf8(rest.get(..end).unwrap_or(rest)).map_err(|_| self.err("the text is not UTF-8"))?;
        self.line += text.matches('\n').count();
        self.at += end;
        Ok(text.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dump_reads_back_as_written() {
        let rec = |kind, id, text: &str| WindowRecord {
            kind,
            column: 1,
            id,
            // acme writes a tool's window without a selection.
            q0: if kind == Kind::Command { 0 } else { 1 },
            q1: if kind == Kind::Command { 0 } else { 2 },
            y: Frac(250_000),
            font: String::new(),
            tag: format!("/tmp/f{id} Del Snarf | Look\nsecond"),
            text: text.into(),
            dir: if kind == Kind::Command { "/tmp".into() } else { String::new() },
            command: if kind == Kind::Command { "win".into() } else { String::new() },
        };
        let d = Dump {
            dir: "/home/glenda".into(),
            fonts: [FONT_VAR.into(), FONT_FIX.into()],
            columns: vec![Frac(0), Frac(500_000)],
            row_tag: "Newcol Kill Putall Dump Exit".into(),
            column_tags: vec![(0, "New Cut Paste".into()), (1, "New Cut".into())],
            windows: vec![
                rec(Kind::File, 1, ""),
                rec(Kind::Text, 2, "changed\ntext é"),
                rec(Kind::Zerox, 2, ""),
                rec(Kind::Command, 0, ""),
            ],
        };
        let bytes = d.to_bytes();
        let text = String::from_utf8_lossy(&bytes);
        assert!(text.starts_with("/home/glenda\n"));
        assert!(text.contains("\n  0.0000000  50.0000000\n"), "{text}");
        assert!(text.contains(&format!("\nF{:11} {:11} {:11} {:11}  25.0000000 {:11} \n", 1, 2, 1, 2, 14)), "{text}");
        assert_eq!(Dump::parse(&bytes).unwrap(), d);
        let one = Dump { columns: vec![Frac(0)], ..d.clone() };
        assert_eq!(Dump::parse(&one.to_bytes()).unwrap(), one);
    }

    #[test]
    fn bad_files_say_which_line() {
        assert_eq!(Dump::parse(b"/\nf\n").unwrap_err().line, 3);
        let e = Dump::parse(b"/\nf\ng\n  0.0000000\nq\n").unwrap_err();
        assert_eq!(e.line, 5, "{e}");
        assert!(Dump::parse(b"/\nf\ng\n 200.0000000\n").is_err());
    }
}
