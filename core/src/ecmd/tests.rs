//! The Edit language run on texts: each command, loops, dots, pipes and
//! files, what a failing or killed Edit leaves (nothing).

use super::*;

/// Two commands and a machine's files.
#[derive(Default)]
struct NoPipes {
    files: BTreeMap<String, Vec<u8>>,
}

impl Pipes for NoPipes {
    fn run(&mut self, command: &str, input: Option<&str>, _: &EditFile) -> std::result::Result<String, PipeError> {
        match command {
            "upper" => Ok(input.unwrap_or_default().to_uppercase()),
            "date" => Ok("today\n".into()),
            _ => Err(PipeError::NotFound(command.into())),
        }
    }

    fn load(&mut self, path: &str) -> std::result::Result<Vec<u8>, PipeError> {
        self.files.get(path).cloned().ok_or_else(|| PipeError::System("No such file or directory".into()))
    }

    fn save(&mut self, path: &str, bytes: &[u8]) -> std::result::Result<(), PipeError> {
        self.files.insert(path.to_string(), bytes.to_vec());
        Ok(())
    }
}

/// One run with no regexp before it.
fn run0(cmd: &str, files: &[EditFile], current: usize, pipes: &mut NoPipes) -> Result<Outcome> {
    run(cmd, files, current, pipes, &mut None)
}

fn file(name: &str, text: &str) -> EditFile {
    EditFile { name: name.into(), text: Rope::from_str(text), dot: Range::at(0), dirty: false, warned: false }
}

/// Runs `cmd` on `text` (dot #0) and returns the new text and dot.
fn edit(text: &str, cmd: &str) -> Result<(String, Range, String)> {
    let files = [file("/f", text)];
    let out = run0(cmd, &files, 0, &mut NoPipes::default())?;
    let changed = apply(text, out.changes.get(&0).unwrap_or(&Changes::new()));
    Ok((changed, out.dots.get(&0).copied().unwrap_or(files[0].dot), out.printed))
}

/// A loop runs its command on each range as it finds it: one that
/// fails partway, or is killed partway, leaves no change made (acme's
/// editerror), as when it found every range first; `y` still runs on
/// the text after its last match.
#[test]
fn a_loop_that_fails_or_is_killed_partway_changes_nothing() {
    let lines = "a\n".repeat(10);
    // `+5` from each of the last five lines' `a` is past the end.
    assert!(edit(&lines, ",x/a/ +5 d").is_err(), "fails at the sixth match");
    assert_eq!(edit(&lines, "1,5x/a/ +5 d").map(|e| e.0).unwrap(), "a\n".repeat(5), "each +5 there is a line");
    assert_eq!(text_after("a,b,c", ",y/,/ c/[&]/"), "[&],[&],[&]");
    assert_eq!(text_after("a,b,c", ",y/,/ a/./"), "a.,b.,c.");

    /// Says the Edit was killed from the second time it is asked.
    #[derive(Default)]
    struct KilledPartway {
        asked: usize,
    }
    impl Pipes for KilledPartway {
        fn run(&mut self, c: &str, _: Option<&str>, _: &EditFile) -> std::result::Result<String, PipeError> {
            Err(PipeError::NotFound(c.into()))
        }
        fn load(&mut self, path: &str) -> std::result::Result<Vec<u8>, PipeError> {
            Err(PipeError::NotFound(path.into()))
        }
        fn save(&mut self, path: &str, _: &[u8]) -> std::result::Result<(), PipeError> {
            Err(PipeError::NotFound(path.into()))
        }
        fn interrupted(&mut self) -> bool {
            self.asked += 1;
            self.asked > 1
        }
    }
    let many = "a\n".repeat(3 * ASK_EVERY);
    let files = [file("/f", &many)];
    for cmd in [",x/a/ c/b/", ",y/\\n/ c/b/"] {
        let mut killed = KilledPartway::default();
        let ran = run(cmd, &files, 0, &mut killed, &mut None);
        assert!(matches!(ran, Err(EditError::Killed)), "{cmd}: {ran:?}");
        assert_eq!(killed.asked, 2, "{cmd}: asked at the start and again {ASK_EVERY} ranges on");
    }
}

fn text_after(text: &str, cmd: &str) -> String {
    edit(text, cmd).unwrap_or_else(|e| panic!("{cmd:?}: {e}")).0
}

/// A plain string's loops and substitutions, found in the rope's
/// chunks, do what the same through the regexp (a group makes it no
/// plain string) does, over a text of many chunks and runes of every
/// width, matches across chunks included.
#[test]
fn a_plain_strings_loops_and_substitutions_are_the_regexps() {
    let text: String = (0..4000).map(|i| ["é✓ab\n", "aé", "b✓\n", "𝄞a\n\n", "ab"][i % 5]).collect();
    assert!(Rope::from_str(&text).chunks().count() > 20, "a text of many chunks");
    for (plain, regexp) in [
        (",s/é✓/X/g", ",s/(é✓)/X/g"),
        (",s/✓\\n𝄞/Y/g", ",s/(✓\\n𝄞)/Y/g"),
        (",s/b/Q/", ",s/(b)/Q/"),
        ("/𝄞/,$s/a/QQ/g", "/𝄞/,$s/(a)/QQ/g"),
        (",x/ab/c/Z/", ",x/(ab)/c/Z/"),
        (",y/\\n/c/-/", ",y/(\\n)/c/-/"),
        ("/✓/,/𝄞/y/a/d", "/✓/,/𝄞/y/(a)/d"),
    ] {
        let (a, b) = (edit(&text, plain).unwrap(), edit(&text, regexp).unwrap());
        assert!(a.0 != text, "{plain} changed the text");
        assert!(a == b, "{plain} is not {regexp}");
    }
}

/// A file's text is made one string only when a command looks in it:
/// an Edit in one window copies no other window's text, and a loop
/// over the windows (`X`) copies only those it runs in.
#[test]
fn only_the_files_searched_are_made_one_string() {
    let files = [file("/a", "one a\n"), file("/b", "two b\n"), file("/c", "three a\n")];
    let mut pipes = NoPipes::default();
    let mut r = Runner::new(&files, 0, &mut pipes, None);
    let made = |r: &Runner| r.flats.iter().map(|f| f.get().is_some()).collect::<Vec<_>>();
    // A plain string, replaced as it is or looped over, is found in
    // the rope's chunks: no file is made one string for it.
    for command in [",s/a/x/g", ",y/\\n/ c/b/", ",x/a/ c/b/"] {
        for cmd in &edit::parse(command).unwrap() {
            let dot = r.dot(0);
            r.cmd(cmd, 0, dot).unwrap();
        }
    }
    assert_eq!(made(&r), [false, false, false]);
    for cmd in &edit::parse(",s/a+/x/g").unwrap() {
        let dot = r.dot(0);
        r.cmd(cmd, 0, dot).unwrap();
    }
    assert_eq!(made(&r), [true, false, false]);
    for cmd in &edit::parse("X/\\/c/ ,s/a+/y/g").unwrap() {
        let dot = r.dot(0);
        r.cmd(cmd, 0, dot).unwrap();
    }
    assert_eq!(made(&r), [true, false, true], "the X loop ran in /c alone");
    assert_eq!(text_after("one a\n", ",s/a/x/g"), "one x\n");
}

#[test]
fn text_commands() {
    let t = "one\ntwo\nthree\n";
    assert_eq!(text_after(t, "2a/x\\n/"), "one\ntwo\nx\nthree\n");
    assert_eq!(text_after(t, "2i/x\\n/"), "one\nx\ntwo\nthree\n");
    assert_eq!(text_after(t, "2c/2\\n/"), "one\n2\nthree\n");
    assert_eq!(text_after(t, "2d"), "one\nthree\n");
    assert_eq!(text_after(t, ",d"), "");
    assert_eq!(text_after(t, "$a\nfour\nfive\n.\n"), "one\ntwo\nthree\nfour\nfive\n");
    assert_eq!(text_after(t, "1m$"), "two\nthree\none\n");
    assert_eq!(text_after(t, "3t0"), "three\none\ntwo\nthree\n");
    let (_, dot, _) = edit(t, "2c/TWO\\n/").unwrap();
    assert_eq!(dot, Range::new(4, 8));
    let (_, dot, _) = edit(t, "1d\n3").unwrap();
    assert_eq!(dot, Range::new(4, 10), "dot maps past earlier changes");
    let (_, dot, _) = edit(t, ",c/X/\n/thr/").unwrap();
    assert_eq!(dot, Range::at(0), "a dot inside a replaced range goes to its start");
    let (_, dot, _) = edit(t, "2c/TWO\\n/\n/wo\\nth/").unwrap();
    assert_eq!(dot, Range::new(4, 10), "a dot from inside a change keeps its end past it");
}

#[test]
fn lines_end_only_at_newlines() {
    // As in acme and sam: a carriage return, a vertical tab, a form
    // feed, NEL and the Unicode separators do not end a line.
    let t = "a\rb\u{b}c\u{c}d\u{85}e\u{2028}f\u{2029}g\nh\n";
    let (_, _, printed) = edit(t, "/h/=").unwrap();
    assert!(printed.ends_with(":2\n"), "{printed:?}");
    let (_, _, printed) = edit(t, "/g/=+").unwrap();
    assert!(printed.ends_with(":1+#12\n"), "{printed:?}");
}

#[test]
fn substitutions() {
    let t = "foo bar foo baz foo\n";
    assert_eq!(text_after(t, ",s/foo/X/"), "X bar foo baz foo\n");
    assert_eq!(text_after(t, ",s/foo/X/g"), "X bar X baz X\n");
    assert_eq!(text_after(t, ",s2/foo/X/"), "foo bar X baz foo\n");
    assert_eq!(text_after(t, ",s/b(a)(.)/<\\2\\1&>/g"), "foo <rabar> foo <zabaz> foo\n");
    assert_eq!(text_after(t, ",s/ /\\n/g"), "foo\nbar\nfoo\nbaz\nfoo\n");
    assert_eq!(text_after(t, ",s/foo/[&]/g"), "[foo] bar [foo] baz [foo]\n");
    assert!(matches!(edit(t, ",s/zzz/X/"), Err(EditError::NoSubstitution(_))));
}

#[test]
fn file_commands_read_write_and_name_windows_as_acme_does() {
    let mut machine = NoPipes::default();
    machine.files.insert("/d/e.txt".into(), b"disk\0 one\n".to_vec());
    let files = [file("/d/a.txt", "a\nb\n"), file("/d/b.txt", "two\n"), file("", "x\n")];
    let machine = std::cell::RefCell::new(machine);
    let run_on = |cmd: &str, current: usize| run0(cmd, &files, current, &mut machine.borrow_mut());
    // e: the whole text becomes the file's (NULs dropped); a relative
    // name is the window's directory's and renames it; clean after.
    let out = run_on("e e.txt", 0).unwrap();
    assert_eq!(out.changes[&0], Changes::from_iter([(0, 4, "disk one\n")]));
    assert_eq!(out.renamed.get(&0).map(String::as_str), Some("/d/e.txt"));
    assert_eq!(out.cleaned, vec![0]);
    // r: the range becomes the file's text; the name stays.
    let out = run_on("2r e.txt", 0).unwrap();
    assert_eq!(out.changes[&0], Changes::from_iter([(2, 4, "disk one\n")]));
    assert!(out.renamed.is_empty() && out.cleaned.is_empty());
    assert!(matches!(run_on("r nosuch", 0), Err(EditError::CantOpen { .. })));
    assert!(matches!(run_on("1e", 0), Err(EditError::Syntax(e)) if e.starts_with("command takes no address")));
    // w: the range (all by default) as it was before this Edit.
    let out = run_on("a/more/\nw /d/out.txt\n2w /d/two.txt", 0).unwrap();
    assert!(out.cleaned.is_empty(), "another name: not clean");
    let out = run_on("w", 0).unwrap();
    assert_eq!(out.cleaned, vec![0], "all of it to its own name: clean");
    let out = run_on("w\n$a/more/", 0).unwrap();
    assert!(out.cleaned.is_empty(), "changed after the write: dirty again");
    // An unnamed window takes the name w gives it.
    let out = run_on("w /d/named.txt", 2).unwrap();
    assert_eq!(out.renamed.get(&2).map(String::as_str), Some("/d/named.txt"));
    assert!(matches!(run_on("w", 2), Err(EditError::Syntax(e)) if e.contains("no name specified")));
    // b: later commands work on the window named, its line printed.
    let out = run_on("b /d/b.txt\n,s/two/TWO/", 0).unwrap();
    assert_eq!(out.changes[&1], Changes::from_iter([(0, 3, "TWO")]));
    assert_eq!(out.printed, " +  /d/b.txt\n");
    assert!(matches!(run_on("b /nope", 0), Err(EditError::NoSuchFile(_))));
    // B opens, D closes (relative names in the window's directory).
    let out = run_on("B b.txt /x/new.txt\nD b.txt", 0).unwrap();
    assert_eq!(out.open, vec!["/d/b.txt".to_string(), "/x/new.txt".to_string()]);
    assert_eq!(out.close, vec![1]);
    assert_eq!(run_on("D", 1).unwrap().close, vec![1]);
    assert!(matches!(run_on("D gone.txt", 0), Err(EditError::NoSuchFile(n)) if n == "/d/gone.txt"));
    let machine = machine.into_inner();
    assert_eq!(machine.files["/d/out.txt"], b"a\nb\n");
    assert_eq!(machine.files["/d/two.txt"], b"b\n");
    assert_eq!(machine.files["/d/a.txt"], b"a\nb\n");
    // e on a changed file is refused once (acme's winclean).
    let dirty = [EditFile { dirty: true, ..file("/d/a.txt", "a\n") }];
    let e = run0("e", &dirty, 0, &mut NoPipes::default()).unwrap_err();
    assert_eq!(e.to_string(), "/d/a.txt modified");
    let warned = [EditFile { warned: true, ..dirty[0].clone() }];
    assert!(matches!(run0("e", &warned, 0, &mut NoPipes::default()), Err(EditError::CantOpen { .. })));
}

#[test]
fn line_ends_match_as_in_acme() {
    // regx.c: `$` only before a newline, `^` after the final newline
    // only for a search begun at the end (s_cmd, looper).
    assert_eq!(text_after("a\nb\n", ",s/^/> /g"), "> a\n> b\n");
    assert_eq!(text_after("a\nb\n", ",s/$/;/g"), "a;\nb;\n");
    assert_eq!(text_after("a\nb", ",s/$/;/g"), "a;\nb");
    assert_eq!(text_after("a\nb\n", ",x/^/i/> /"), "> a\n> b\n");
    assert_eq!(text_after("a\nb\n", ",x/$/a/;/"), "a;\nb;\n");
    // `$` does not match at the end of the range a loop hands on.
    assert!(edit("ab\ncd\n", ",x/.*/ s/$/;/").is_ok());
    assert_eq!(text_after("ab\ncd\n", ",x/.*/ s/$/;/"), "ab\ncd\n");
    // s///g passes over an empty match right after a match.
    assert_eq!(text_after("hello", ",x/l+/s/l*/L/g"), "heLo");
    assert_eq!(text_after("hello", ",s/l*/-/g"), "-h-e-o-");
    assert_eq!(text_after("hello", ",s2/l*/-/g"), "h-e-o-");
    // y passes over an empty match at the start of its range, and
    // hands on no last piece when the steps ran past the end.
    assert_eq!(text_after("ab", ",y/x*/i/|/"), "|a|b");
    assert_eq!(text_after("a,b", ",y/,/i/|/"), "|a,|b");
    assert_eq!(text_after("xx", ",y/x*/i/|/"), "|xx");
    assert_eq!(text_after("a\n\n", ",s/^/> /g"), "> a\n> \n> ", "acme's quirk after an empty line");
    // Matches are leftmost-longest.
    assert_eq!(text_after("ab|ac", ",x/a|ab/c/X/"), "X|Xc");
    assert_eq!(text_after("abcd", ",s/(a|ab)(c|bcd)/[\\1][\\2]/"), "[a][bcd]");
    assert_eq!(text_after("aaa", ",s/(a*)(a)/[\\1][\\2]/"), "[aa][a]");
}

#[test]
fn loops_and_groups() {
    let t = "a1 b2 a3\nb4\n";
    assert_eq!(text_after(t, ",x/a[0-9]/c/A/"), "A b2 A\nb4\n");
    assert_eq!(text_after(t, ",y/ /d"), "  ");
    assert_eq!(text_after(t, ",x g/b/ d"), "");
    assert_eq!(text_after(t, ",x v/b2/ d"), "a1 b2 a3\n");
    assert_eq!(text_after(t, ",x/[0-9]/ {\ni/(/\na/)/\n}"), "a(1) b(2) a(3)\nb(4)\n");
    // All changes are against the original text: the second command's
    // address does not see the first's change.
    assert_eq!(text_after("abc\n", "1d\n1a/x/"), "x");
    let (_, _, printed) = edit(t, ",x/b[0-9]/ p").unwrap();
    assert_eq!(printed, "b2b4");
    // s inside a loop may find nothing.
    assert_eq!(text_after(t, ",x s/zz/y/"), t);
    assert!(matches!(edit(t, "1d\n1c/x/"), Err(EditError::Overlap(_))));
}

#[test]
fn positions_windows_pipes_and_undo() {
    let t = "one\ntwo\nthree\n";
    let printed = |cmd| edit(t, cmd).unwrap().2;
    assert_eq!(printed("2="), "/f:2\n");
    assert_eq!(printed("2,3="), "/f:2,3\n");
    assert_eq!(printed("2=#"), "/f:#4,#8\n");
    assert_eq!(printed("#6=+"), "/f:2+#2\n");
    assert_eq!(printed("#5,#6=+"), "/f:2+#1\n", "one line: the start");
    assert_eq!(printed("2=+"), "/f:2+#0,3+#0\n", "a line and its newline: to the next line's start");
    assert_eq!(text_after(t, "2|upper"), "one\nTWO\nthree\n");
    assert_eq!(text_after(t, "0<date"), "today\none\ntwo\nthree\n");
    assert_eq!(printed("1>upper"), "ONE\n");
    assert!(matches!(edit(t, "1|nosuch"), Err(EditError::Pipe(e)) if e.to_string().contains("not found")));
    let files = [file("/a.c", "x\n"), file("/b.h", "y\n"), file("/c.c", "z\n")];
    let out = run0("X/\\.c$/ ,s/./Q/", &files, 1, &mut NoPipes::default()).unwrap();
    assert_eq!(out.changes.keys().copied().collect::<Vec<_>>(), [0, 2]);
    let out = run0("Y/\\.c$/ ,d", &files, 0, &mut NoPipes::default()).unwrap();
    assert_eq!(out.changes.keys().copied().collect::<Vec<_>>(), [1]);
    let out = run0("X", &files, 0, &mut NoPipes::default()).unwrap();
    assert_eq!(out.printed, " +. /a.c\n +  /b.h\n +  /c.c\n");
    let out = run0("u 2", &files, 1, &mut NoPipes::default()).unwrap();
    assert_eq!(out.undo, [(1, 2)]);
}
