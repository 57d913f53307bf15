//! Edit commands and addresses on arbitrary input: every command text
//! either runs or is refused with an error, never a panic, and what runs
//! gives changes that apply in order and a dot inside the new text.

use apex_core::addr::{self, Dialect, Range};
use apex_core::ecmd::{self, EditFile, Pipes};
use proptest::prelude::*;
use ropey::Rope;

struct Echo;

impl Pipes for Echo {
    fn run(&mut self, _: &str, input: Option<&str>, _: &EditFile) -> Result<String, ecmd::PipeError> {
        Ok(input.unwrap_or("out\n").to_string())
    }
    fn load(&mut self, _: &str) -> Result<Vec<u8>, ecmd::PipeError> {
        Ok(b"file\n".to_vec())
    }
    fn save(&mut self, _: &str, _: &[u8]) -> Result<(), ecmd::PipeError> {
        Ok(())
    }
}

/// Command texts made of the language's own pieces, glued at random.
fn command() -> impl Strategy<Value = String> {
    let piece = prop::sample::select(vec![
        ",",
        ";",
        "#",
        "0",
        "1",
        "3",
        "$",
        ".",
        "+",
        "-",
        "/a/",
        "/b+/",
        "?a?",
        "//",
        "a/x/",
        "i/y\\n/",
        "c/z/",
        "d",
        "s/a/A/",
        "s/(b)/[\\1]/g",
        "s2/a/&&/",
        "m0",
        "t$",
        "p",
        "=",
        "=#",
        "=+",
        "x/a/",
        "x",
        "y/ /",
        "g/a/",
        "v/b/",
        "X",
        "Y/z/",
        "u",
        "u-1",
        "|up",
        ">up",
        "<up",
        "{\n",
        "}\n",
        "\n",
        " ",
        "k",
        "/",
        "\\",
        "é",
    ]);
    prop::collection::vec(piece, 0..8).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn edit_commands_run_or_are_refused(cmd in command(), text in "[ab \\né]{0,40}", dot in 0usize..50) {
        let len = text.chars().count() as u64;
        let dot = Range::at((dot as u64).min(len));
        let files = [
            EditFile { name: "/f".into(), text: Rope::from_str(&text), dot, dirty: false, warned: false },
            EditFile { name: "/g".into(), text: Rope::from_str("a\nb\n"), dot: Range::at(0), dirty: true, warned: false },
        ];
        if let Ok(out) = ecmd::run(&cmd, &files, 0, &mut Echo, &mut None) {
            for (f, changes) in &out.changes {
                let original = files[*f].text.to_string();
                let mut end = 0;
                for (q0, q1, _) in changes.iter() {
                    prop_assert!(q0 >= end && q0 <= q1, "{cmd:?}: {changes:?}");
                    end = q1;
                }
                prop_assert!(end <= original.chars().count() as u64);
                let after = ecmd::apply(&original, changes);
                if let Some(d) = out.dots.get(f) {
                    prop_assert!(d.q0 <= d.q1 && d.q1 <= after.chars().count() as u64, "{cmd:?}: dot {d:?} in {after:?}");
                }
            }
        }
    }

    /// A loop's and a substitution's matches land on the runes they
    /// matched, counted on from the range's start: in ASCII text (each
    /// rune a byte) and in text with wider runes before and among them.
    #[test]
    fn s_and_x_change_the_runes_they_matched(text in "[ab \\né]{0,40}", ascii in any::<bool>(), from in 0usize..50) {
        let text = if ascii { text.replace('é', "e") } else { text };
        let from = from.min(text.chars().count());
        let want: String =
            text.chars().enumerate().map(|(i, c)| if i >= from && c == 'b' { 'X' } else { c }).collect();
        for cmd in [format!("#{from},$s/b/X/g"), format!("#{from},$x/b/c/X/")] {
            let files =
                [EditFile { name: "/f".into(), text: Rope::from_str(&text), dot: Range::at(0), dirty: false, warned: false }];
            // `s` that finds nothing says so, as sam does.
            let Ok(out) = ecmd::run(&cmd, &files, 0, &mut Echo, &mut None) else {
                prop_assert_eq!(&text, &want, "{} failed on {:?}", cmd, text);
                continue;
            };
            let got = match out.changes.iter().find(|(f, _)| **f == 0) {
                Some((_, changes)) => ecmd::apply(&text, changes),
                None => text.clone(),
            };
            prop_assert_eq!(&got, &want, "{} on {:?}", cmd, text);
        }
    }

    #[test]
    fn addresses_evaluate_or_are_refused(src in command(), text in "[ab \\né]{0,40}", q in 0usize..50) {
        let rope = Rope::from_str(&text);
        let q = (q as u64).min(rope.len_chars() as u64);
        for dialect in [Dialect::AddrFile, Dialect::Sam] {
            if let Ok(r) = addr::eval(&rope, &src, Range::at(q), dialect, &mut None) {
                // Only the addr file takes a backwards pair, as acme does.
                let ordered = r.q0 <= r.q1 || dialect == Dialect::AddrFile;
                prop_assert!(ordered && r.q0.max(r.q1) <= rope.len_chars() as u64, "{src:?} gave {r:?}");
            }
        }
    }
}
