//! A window's `ctl` messages (acme-fs.md §2), parsed as acme parses them
//! ([`crate::fsys::ctl::parse_prefix`]): each matched by prefix, the argument-less ones with the newline
//! optional, the others running to the next newline, runs of newlines
//! skipped. The tree applies them in order and stops at the first bad one,
//! keeping the earlier ones (`win` sends `name DIR/-host\n0\n` and needs the
//! name to stick).

use crate::fsys::ctl::{self, Arg, CtlError, Verb};
use apex_core::error::acme::EBADCTL;

/// One ctl message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WinCtl {
    AddrDot,
    DotAddr,
    LimitAddr,
    Clean,
    Dirty,
    Cleartag,
    Del,
    Delete,
    Dump(String),
    Dumpdir(String),
    Font(String),
    Get,
    Put,
    Mark,
    Nomark,
    Menu,
    Nomenu,
    Name(String),
    Show,
    /// Plan 9 acme's; plan9port rejects them but `win` sends `scroll`.
    Scroll,
    Noscroll,
    /// Take the window's ctl for this fid alone (until `unlock` or the
    /// fid's clunk).
    Lock,
    Unlock,
}

/// The verbs, in the order acme's usage gives them; matched by the
/// longest prefix (`delete` over `del`).
const VERBS: &[Verb<WinCtl>] = &[
    Verb { name: "addr=dot", args: &[], make: |_| WinCtl::AddrDot },
    Verb { name: "dot=addr", args: &[], make: |_| WinCtl::DotAddr },
    Verb { name: "limit=addr", args: &[], make: |_| WinCtl::LimitAddr },
    Verb { name: "clean", args: &[], make: |_| WinCtl::Clean },
    Verb { name: "dirty", args: &[], make: |_| WinCtl::Dirty },
    Verb { name: "cleartag", args: &[], make: |_| WinCtl::Cleartag },
    Verb { name: "del", args: &[], make: |_| WinCtl::Del },
    Verb { name: "delete", args: &[], make: |_| WinCtl::Delete },
    Verb { name: "dump", args: &[Arg::Rest("CMD")], make: |v| WinCtl::Dump(v[0].word()) },
    Verb { name: "dumpdir", args: &[Arg::Rest("DIR")], make: |v| WinCtl::Dumpdir(v[0].word()) },
    Verb { name: "font", args: &[Arg::Rest("PATH")], make: |v| WinCtl::Font(v[0].word()) },
    Verb { name: "get", args: &[], make: |_| WinCtl::Get },
    Verb { name: "put", args: &[], make: |_| WinCtl::Put },
    Verb { name: "mark", args: &[], make: |_| WinCtl::Mark },
    Verb { name: "nomark", args: &[], make: |_| WinCtl::Nomark },
    Verb { name: "menu", args: &[], make: |_| WinCtl::Menu },
    Verb { name: "nomenu", args: &[], make: |_| WinCtl::Nomenu },
    Verb { name: "name", args: &[Arg::Rest("NAME")], make: |v| WinCtl::Name(v[0].word()) },
    Verb { name: "show", args: &[], make: |_| WinCtl::Show },
    Verb { name: "scroll", args: &[], make: |_| WinCtl::Scroll },
    Verb { name: "noscroll", args: &[], make: |_| WinCtl::Noscroll },
    Verb { name: "lock", args: &[], make: |_| WinCtl::Lock },
    Verb { name: "unlock", args: &[], make: |_| WinCtl::Unlock },
];

/// Parses the message at the start of `text` (which does not start with a
/// newline); returns it and the bytes it used, trailing newlines included.
pub fn parse_one(text: &str) -> Result<(WinCtl, usize), CtlError> {
    ctl::parse_prefix(VERBS, text, EBADCTL)
}

/// Whether acme's `name` calls `name` bad: a control character in it
/// (`r[i] < ' '`; a blank is fine). acme sets such a name all the same
/// and then answers with the error.
fn bad_name(name: &str) -> bool {
    name.chars().any(|c| c < ' ')
}

/// Splits a write into its messages, in order, ending with the first
/// refusal if there is one: the tree applies each until then. Newlines
/// after a message are skipped; a write that starts with one is refused,
/// as acme's `xfidctlwrite` refuses it.
pub fn parse_all(text: &str) -> Vec<Result<WinCtl, CtlError>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < text.len() {
        match parse_one(&text[at..]) {
            Ok((WinCtl::Name(name), _)) if bad_name(&name) => {
                out.push(Ok(WinCtl::Name(name.clone())));
                out.push(Err(CtlError::BadName { name }));
                break;
            }
            Ok((msg, used)) => {
                out.push(Ok(msg));
                at += used;
            }
            Err(e) => {
                out.push(Err(e));
                break;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> Vec<WinCtl> {
        parse_all(text).into_iter().map(|r| r.unwrap()).collect()
    }

    #[test]
    fn messages_as_acme_matches_them() {
        use WinCtl::*;
        let table: &[(&str, &[WinCtl])] = &[
            ("clean", &[Clean]),
            ("clean\n", &[Clean]),
            ("mark", &[Mark]),
            ("nomark", &[Nomark]),
            ("delete\n", &[Delete]),
            ("del\n", &[Del]),
            ("nomenu\nmenu\n", &[Nomenu, Menu]),
            ("cleandirty", &[Clean, Dirty]),
            ("show\n\n\nscroll", &[Show, Scroll]),
            ("name /tmp/a\n", &[Name("/tmp/a".into())]),
            (
                "name /x/-host\ndumpdir /x/\ndump win\nscroll",
                &[Name("/x/-host".into()), Dumpdir("/x/".into()), Dump("win".into()), Scroll],
            ),
            ("addr=dot\ndot=addr\nlimit=addr\n", &[AddrDot, DotAddr, LimitAddr]),
            ("font /lib/font/bit/pelm/unicode.9.font\n", &[Font("/lib/font/bit/pelm/unicode.9.font".into())]),
            ("get\nput\ncleartag\ndirty\nnoscroll", &[Get, Put, Cleartag, Dirty, Noscroll]),
            ("lock\nunlock", &[Lock, Unlock]),
        ];
        for (text, want) in table {
            assert_eq!(ok(text), *want, "{text:?}");
        }
    }

    #[test]
    fn a_name_with_a_control_character_is_set_then_refused_and_a_blank_is_a_name_s() {
        // acme: `r[i] < ' '` is refused; a blank is part of the name.
        assert_eq!(parse_all("name /tmp/a b\n"), vec![Ok(WinCtl::Name("/tmp/a b".into()))]);
        for bad in ["name /tmp/a\tb\nclean\n", "name a\u{7}b\nclean\n"] {
            let got = parse_all(bad);
            assert!(matches!(&got[0], Ok(WinCtl::Name(_))), "{bad:?}: {got:?}");
            assert!(got[1].as_ref().unwrap_err().to_string().contains("bad character in file name"));
            assert_eq!(got.len(), 2, "nothing after it is applied");
        }
    }

    #[test]
    fn the_first_bad_message_ends_the_write_after_the_good_ones() {
        // win's name message: the name is kept, the "0" line refused.
        let got = parse_all("name /home/u/-host\n0\n");
        assert_eq!(got[0], Ok(WinCtl::Name("/home/u/-host".into())));
        assert!(got[1].as_ref().unwrap_err().to_string().starts_with("ill-formed control message"));
        assert_eq!(got.len(), 2);
        let errors: &[(&str, &str)] = &[
            ("name \n", "needs an argument"),
            ("name", "ill-formed"),
            ("dump \n", "needs an argument"),
            ("\n", "ill-formed"),
            ("\nclean", "ill-formed"),
            ("name /tmp/x", "must end with a newline"),
            ("font /lib/font", "must end with a newline"),
            ("dumpdir /tmp", "must end with a newline"),
            ("dump win", "must end with a newline"),
            ("name a\u{7}b\n", "bad character in file name"),
            ("name a\tb\n", "bad character in file name"),
            ("frobnicate\n", "expected addr=dot"),
        ];
        for (text, want) in errors {
            let got = parse_all(text);
            let e = got.last().unwrap().as_ref().unwrap_err().to_string();
            // acme's own words first: its ill-formed message, or for a
            // bad name, "bad character in file name" (xfidctlwrite).
            let prefix = match want.starts_with("bad character") {
                true => "bad character in file name",
                false => "ill-formed control message",
            };
            assert!(e.contains(want) && e.starts_with(prefix), "{text:?}: {e}");
        }
    }
}
