//! A plumb(7) message: its fields, how it is read from a plumber's file
//! and written to one, and its attributes.

/// A message as a plumber takes it on `send` and delivers it on a port.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Message {
    pub src: String,
    pub dst: String,
    pub wdir: String,
    /// Its type (`text` for everything acme acts on).
    pub kind: String,
    pub attr: Vec<(String, String)>,
    pub data: Vec<u8>,
}

/// Bytes that are not a plumb(7) message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlumbError {
    #[error("plumb message: {0} is not UTF-8")]
    NotText(&'static str),
    #[error("plumb message: the data length {0:?} is not a number")]
    Length(String),
    #[error("plumb message: {0} bytes after the message's data; write one message at a time")]
    Trailing(usize),
    #[error("plumb message: it ends before its {0} field (src, dst, wdir, type, attr, ndata, then the data)")]
    Short(&'static str),
}

const FIELDS: [&str; 6] = ["src", "dst", "wdir", "type", "attr", "ndata"];

impl Message {
    /// A text message from `src` in `wdir`.
    pub fn text(src: &str, wdir: &str, data: &str) -> Message {
        Message {
            src: src.into(),
            wdir: wdir.into(),
            kind: "text".into(),
            data: data.as_bytes().to_vec(),
            ..Message::default()
        }
    }

    /// The first message in `bytes`, and how many bytes it took; none if
    /// `bytes` holds only a part of one yet.
    pub fn parse(bytes: &[u8]) -> Result<Option<(Message, usize)>, PlumbError> {
        let mut fields = Vec::with_capacity(FIELDS.len());
        let mut at = 0;
        for name in FIELDS {
            let Some(nl) = bytes[at..].iter().position(|b| *b == b'\n') else { return Ok(None) };
            let field = std::str::from_utf8(&bytes[at..at + nl]).map_err(|_| PlumbError::NotText(name))?;
            fields.push(field.to_string());
            at += nl + 1;
        }
        let n: usize = fields[5].trim().parse().map_err(|_| PlumbError::Length(fields[5].clone()))?;
        if bytes.len() - at < n {
            return Ok(None);
        }
        let message = Message {
            src: fields[0].clone(),
            dst: fields[1].clone(),
            wdir: fields[2].clone(),
            kind: fields[3].clone(),
            attr: attributes(&fields[4]),
            data: bytes[at..at + n].to_vec(),
        };
        Ok(Some((message, at + n)))
    }

    /// Exactly one message: what a write to `send` must hold once whole.
    /// A message cut short is `Ok(None)` (more may come).
    pub fn parse_one(bytes: &[u8]) -> Result<Option<Message>, PlumbError> {
        match Message::parse(bytes)? {
            None => Ok(None),
            // A final newline after the data is what `echo` adds: allowed.
            Some((m, used)) if used == bytes.len() || &bytes[used..] == b"\n" => Ok(Some(m)),
            Some((_, used)) => Err(PlumbError::Trailing(bytes.len() - used)),
        }
    }

    /// Why `bytes`, all there is, is no whole message.
    pub fn short(bytes: &[u8]) -> PlumbError {
        let fields = bytes.iter().filter(|b| **b == b'\n').count().min(FIELDS.len() - 1);
        match bytes.iter().filter(|b| **b == b'\n').count() >= FIELDS.len() {
            true => PlumbError::Short("data"),
            false => PlumbError::Short(FIELDS[fields]),
        }
    }

    /// The message in plumb(7)'s form.
    pub fn pack(&self) -> Vec<u8> {
        let mut out = format!(
            "{}\n{}\n{}\n{}\n{}\n{}\n",
            self.src,
            self.dst,
            self.wdir,
            self.kind,
            pack_attributes(&self.attr),
            self.data.len()
        )
        .into_bytes();
        out.extend_from_slice(&self.data);
        out
    }

    /// The value of attribute `name`.
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attr.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// Adds attributes after those it has (plumb(3)'s `plumbaddattr`: a
    /// name it has already keeps its first value, which is what
    /// [`Message::attr`] finds).
    pub fn add_attributes(&mut self, add: Vec<(String, String)>) {
        self.attr.extend(add);
    }

    /// Deletes the first attribute `name`; whether there was one.
    pub fn delete_attribute(&mut self, name: &str) -> bool {
        match self.attr.iter().position(|(n, _)| n == name) {
            Some(i) => {
                self.attr.remove(i);
                true
            }
            None => false,
        }
    }

    /// The data as text (a message's data is text for every rule).
    pub fn data_text(&self) -> String {
        String::from_utf8_lossy(&self.data).into_owned()
    }

    /// `name` as an absolute path: relative to the message's `wdir`.
    pub fn path(&self, name: &str) -> String {
        match name.starts_with('/') || self.wdir.is_empty() {
            true => name.to_string(),
            false => format!("{}/{name}", self.wdir.trim_end_matches('/')),
        }
    }
}

/// plumb(7)'s attributes: `name=value` separated by blanks, a value in
/// single quotes when it holds blanks (a doubled quote is a quote). A
/// word with no `=` ends them, as plumb(3)'s `plumbunpackattr` stops.
pub fn attributes(s: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut chars = s.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut name = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            name.push(c);
        }
        if name.is_empty() || chars.peek() != Some(&'=') {
            return out;
        }
        let mut value = String::new();
        if chars.next_if_eq(&'=').is_some() {
            let mut quoted = false;
            while let Some(&c) = chars.peek() {
                match c {
                    '\'' if quoted && chars.clone().nth(1) == Some('\'') => {
                        value.push('\'');
                        chars.next();
                    }
                    '\'' => quoted = !quoted,
                    c if c.is_whitespace() && !quoted => break,
                    c => value.push(c),
                }
                chars.next();
            }
        }
        out.push((name, value));
    }
}

/// Attributes as plumb(7) writes them: a value quoted when it holds a
/// blank, a quote or an equals sign.
pub fn pack_attributes(attr: &[(String, String)]) -> String {
    let mut out = String::new();
    for (name, value) in attr {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(name);
        out.push('=');
        let quote = value.is_empty() || value.chars().any(|c| c.is_whitespace() || c == '\'' || c == '=');
        match quote {
            true => {
                out.push('\'');
                // A newline cannot be in an attribute: it would end the field.
                out.push_str(&value.replace('\'', "''").replace('\n', " "));
                out.push('\'');
            }
            false => out.push_str(value),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_parses_whole_or_waits_for_the_rest() {
        let bytes = b"plumb\nedit\n/home/g\ntext\naddr=12 click='a b' q='it''s'\n9\nmain.go:1rest";
        let (m, used) = Message::parse(bytes).unwrap().unwrap();
        assert_eq!(used, bytes.len() - 4);
        assert_eq!(
            (m.src.as_str(), m.dst.as_str(), m.wdir.as_str(), m.kind.as_str()),
            ("plumb", "edit", "/home/g", "text")
        );
        assert_eq!(m.attr("addr"), Some("12"));
        assert_eq!(m.attr("click"), Some("a b"));
        assert_eq!(m.attr("q"), Some("it's"));
        assert_eq!(m.data, b"main.go:1");
        assert_eq!(m.path("main.go"), "/home/g/main.go");
        assert_eq!(m.path("/x"), "/x");
        for cut in [0, 3, 20, bytes.len() - 6] {
            assert_eq!(Message::parse(&bytes[..cut]).unwrap(), None, "{cut} bytes are not a message yet");
        }
        assert!(matches!(Message::parse(b"a\nb\nc\ntext\n\nlots\n"), Err(PlumbError::Length(_))));
        assert!(matches!(Message::parse_one(&bytes[..]), Err(PlumbError::Trailing(4))));
        assert_eq!(Message::short(b"a\nb\n"), PlumbError::Short("wdir"));
    }

    #[test]
    fn a_message_packs_as_it_parses() {
        let mut m = Message::text("me", "/tmp", "it's a b");
        m.dst = "edit".into();
        m.add_attributes(vec![("addr".into(), "3".into()), ("q".into(), "it's x=y".into()), ("e".into(), "".into())]);
        m.add_attributes(vec![("addr".into(), "4".into())]);
        let bytes = m.pack();
        assert_eq!(Message::parse_one(&bytes).unwrap(), Some(m.clone()));
        assert!(String::from_utf8_lossy(&bytes).contains("addr=3 q='it''s x=y' e='' addr=4\n8\n"));
        // As plumb(3): the first of a name is the one that counts.
        assert_eq!(m.attr("addr"), Some("3"));
        assert!(m.delete_attribute("addr"));
        assert_eq!(m.attr("addr"), Some("4"));
        assert!(m.delete_attribute("q"));
        assert!(!m.delete_attribute("q"));
    }
}
