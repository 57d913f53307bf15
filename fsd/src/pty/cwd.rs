//! Where a terminal's program is: the directory a relative name in its
//! output is relative to. The kernel says it for the foreground process
//! group (`/proc/PID/cwd`); a shell may say it too, with OSC 7
//! (`ESC ] 7 ; file://HOST/PATH BEL`, as VTE's and foot's shells do on
//! every prompt), which is what is left when `/proc` cannot be read.

use std::path::PathBuf;

/// The longest OSC 7 looked at; a longer one is dropped.
const OSC_MAX: usize = 4096;

/// How an OSC 7 starts.
const START: &[u8] = b"\x1b]7;";

/// Finds OSC 7 reports in a program's output, across reads.
#[derive(Default)]
pub struct Osc7 {
    /// The end of the last read when it may begin a report not yet ended.
    carry: Vec<u8>,
}

impl Osc7 {
    /// The directory the last complete OSC 7 so far reports, if one ends
    /// in `bytes` and names this machine.
    pub fn scan(&mut self, bytes: &[u8]) -> Option<PathBuf> {
        let data: std::borrow::Cow<[u8]> = match self.carry.is_empty() {
            true => bytes.into(),
            false => [std::mem::take(&mut self.carry).as_slice(), bytes].concat().into(),
        };
        let mut found = None;
        let mut at = 0;
        while let Some(start) = find(&data[at..], START).map(|i| at + i) {
            match end_of(&data[start + START.len()..]) {
                Some((body, after)) => {
                    found = parse(body).or(found);
                    at = data.len() - after.len();
                }
                None => {
                    if data.len() - start <= OSC_MAX {
                        self.carry = data[start..].to_vec();
                    }
                    return found;
                }
            }
        }
        // A start cut by the end of the read.
        let tail = &data[at..];
        if let Some(n) = (1..START.len()).rev().find(|n| tail.len() >= *n && START.starts_with(&tail[tail.len() - n..]))
        {
            self.carry = tail[tail.len() - n..].to_vec();
        }
        found
    }
}

/// The report's body and what follows its terminator (BEL or ST).
fn end_of(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let bel = bytes.iter().position(|b| *b == 0x07).map(|i| (i, i + 1));
    let st = find(bytes, b"\x1b\\").map(|i| (i, i + 2));
    let (end, after) = [bel, st].into_iter().flatten().min()?;
    Some((&bytes[..end], &bytes[after..]))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// `file://HOST/PATH`, percent-decoded, when HOST is this machine.
fn parse(seq: &[u8]) -> Option<PathBuf> {
    let url = std::str::from_utf8(seq).ok()?;
    let rest = url.strip_prefix("file://")?;
    let slash = rest.find('/')?;
    let (host, path) = rest.split_at(slash);
    if !(host.is_empty() || host == "localhost" || Some(host) == hostname().as_deref()) {
        return None;
    }
    // Percent-encoded as a URL is, as a ctl word is.
    apex_core::ctlword::decode(path).map(PathBuf::from)
}

/// This machine's name.
fn hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname(2) writes at most `buf.len()` bytes into `buf`.
    if unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) } != 0 {
        return None;
    }
    let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
    String::from_utf8(buf[..end].to_vec()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_is_found_whole_or_cut_anywhere() {
        let report = b"out\x1b]7;file://localhost/home/glenda/my%20src\x07more";
        let want = Some(PathBuf::from("/home/glenda/my src"));
        assert_eq!(Osc7::default().scan(report), want);
        for cut in 1..report.len() {
            let mut o = Osc7::default();
            let first = o.scan(&report[..cut]);
            let second = o.scan(&report[cut..]);
            assert_eq!(first.or(second), want, "cut at {cut}");
        }
        let st = b"\x1b]7;file:///tmp\x1b\\";
        assert_eq!(Osc7::default().scan(st), Some(PathBuf::from("/tmp")), "ended by ST, no host");
        let mut o = Osc7::default();
        assert_eq!(o.scan(b"\x1b]7;file:///a\x07\x1b]7;file:///b\x07"), Some(PathBuf::from("/b")), "the last");
        assert_eq!(o.scan(b"\x1b]7;file://elsewhere.example/c\x07"), None, "another machine's");
        assert_eq!(o.scan(b"\x1b]7;file:///d%zz\x07"), None, "bad escapes");
        assert_eq!(o.scan(b"\x1b]0;title\x07 plain"), None, "other OSCs");
    }
}
