//! A Get's proposals (`exec::get_proposals`): the text replaced or not,
//! the buffer named and cleaned, each window kept where it was, a file
//! read in pieces, and another's change coming between.

use super::exec::{host, TestHost};
use apex_core::exec;
use apex_core::exec::Host;
use apex_core::propose::Proposal;
use apex_core::*;

#[test]
fn get_replaces_the_text_unless_it_is_the_same_names_and_cleans() {
    let mut h = host();
    let w = h.window("/tmp/g.txt", "");
    let buf = |h: &TestHost| h.node.state.buffer(w.body).unwrap().clone();
    let kinds = |ps: &[Proposal]| {
        ps.iter().map(|p| format!("{p:?}").split([' ', '{']).next().unwrap().to_string()).collect::<Vec<_>>()
    };
    // Into an empty buffer: an insert, then clean, and no Undo across a
    // Get (acme's textreset).
    let ps = exec::get_proposals(&buf(&h), w.body, "/tmp/g.txt", false, vec!["one\n".into()]);
    assert_eq!(kinds(&ps), ["Insert", "Clean", "ForgetUndo"]);
    for p in ps {
        h.propose(p).unwrap();
    }
    // The same text again: nothing but clean (no edit, no undo step).
    assert_eq!(kinds(&exec::get_proposals(&buf(&h), w.body, "/tmp/g.txt", false, vec!["one\n".into()])), ["Clean"]);
    // Other text: replaced, the window's place kept by lines; an empty
    // file: deleted; a named other file: renamed too.
    assert_eq!(
        kinds(&exec::get_proposals(&buf(&h), w.body, "/tmp/g.txt", false, vec!["two\n".into()])),
        ["Replace", "Clean", "ForgetUndo", "Select", "SetOrigin"]
    );
    assert_eq!(
        kinds(&exec::get_proposals(&buf(&h), w.body, "/tmp/g.txt", false, Vec::new())),
        ["Delete", "Clean", "ForgetUndo"]
    );
    assert_eq!(
        kinds(&exec::get_proposals(&buf(&h), w.body, "/tmp/h.txt", true, vec!["one\n".into()])),
        ["Name", "Clean", "ForgetUndo"],
        "the same text under another name"
    );
    assert_eq!(
        exec::file_or_name("get", None, "").unwrap_err().to_string(),
        "get: the buffer has no name; give a file"
    );
    assert!(exec::file_or_name("put", Some("rel.txt".into()), "/x")
        .unwrap_err()
        .to_string()
        .contains("not an absolute path"));
    assert_eq!(exec::file_or_name("get", None, "/x/y").unwrap(), "/x/y");
}

#[test]
fn get_of_its_own_file_keeps_each_window_s_place_by_lines_as_acme() {
    let mut h = host();
    let old: String = (1..=100).map(|i| format!("line {i}\n")).collect();
    let w = h.window("/tmp/places.txt", &old);
    let line_start =
        |t: &str, n: usize| t.split_inclusive('\n').take(n - 1).map(|l| l.chars().count() as u64).sum::<u64>();
    // The selection: `ne 5` of line 50; the window shows from line 40.
    let at = line_start(&old, 50);
    h.select(&w, at + 2, at + 6);
    let version = h.node.state.buffer(w.body).unwrap().version;
    let org = line_start(&old, 40);
    h.propose(Proposal::SetOrigin { buffer: w.body, view: ViewId::WindowBody(w.window), version, org }).unwrap();
    h.propose(Proposal::Clean { buffer: w.body }).unwrap();
    // The file changed on disk: a line more at the top.
    let new = format!("a new first line\n{old}");
    h.machine.files.insert("/tmp/places.txt".into(), new.clone().into_bytes());
    h.run("Get", Some(&w), "").unwrap();
    assert_eq!(h.text(w.body), new);
    let at = line_start(&new, 50);
    assert_eq!(h.sel(&w), (at + 2, at + 6), "the same line and runes, as acme's get");
    let v = h.node.state.buffer(w.body).unwrap().views[&ViewId::WindowBody(w.window)];
    assert_eq!(v.org, line_start(&new, 40), "the window still shows from line 40");

    // A file over an entry's limit goes in several entries: the place is
    // kept past the first of them too.
    let lines = 2 * apex_core::op::SPLICE_MAX / 10;
    let old: String = (1..=lines).map(|i| format!("l{i:07}\n")).collect();
    assert!(old.len() > apex_core::op::SPLICE_MAX * 3 / 2);
    let w = h.window("/tmp/big-places.txt", &old);
    let far = lines - 10;
    let at = line_start(&old, far);
    h.select(&w, at + 2, at + 6);
    let version = h.node.state.buffer(w.body).unwrap().version;
    let org = line_start(&old, far - 5);
    h.propose(Proposal::SetOrigin { buffer: w.body, view: ViewId::WindowBody(w.window), version, org }).unwrap();
    h.propose(Proposal::Clean { buffer: w.body }).unwrap();
    let new = format!("a new first line\n{old}");
    h.machine.files.insert("/tmp/big-places.txt".into(), new.clone().into_bytes());
    h.run("Get", Some(&w), "").unwrap();
    assert!(h.text(w.body) == new, "the big file's text");
    let at = line_start(&new, far);
    assert_eq!(h.sel(&w), (at + 2, at + 6), "the same line and runes, past the first entry's text");
    let v = h.node.state.buffer(w.body).unwrap().views[&ViewId::WindowBody(w.window)];
    assert_eq!(v.org, line_start(&new, far - 5));
}

/// A Get of a text read in pieces replaces it with `ReplacePieces`, one
/// entry a piece as it is, and ends where the same text in one would: the
/// same text, and each window's place kept by lines and runes. A piece
/// over an entry's size is refused, with nothing changed.
#[test]
fn a_get_in_pieces_ends_as_the_same_get_in_one_text() {
    let line = "a line of the file, é and 日本 in it\n";
    let old: String = (0..40_000).map(|i| format!("{i} {line}")).collect();
    let new: String = (0..80_000).map(|i| format!("{} {line}", i * 2)).collect();
    let mut cuts = vec![0];
    while new.len() - cuts.last().unwrap() > apex_core::op::SPLICE_MAX / 2 {
        // Half an entry each: twice the entries one text would make, so
        // a count of the entries by the whole text's size is caught.
        let mut at = cuts.last().unwrap() + apex_core::op::SPLICE_MAX / 2 + 8;
        while !new.is_char_boundary(at) {
            at -= 1;
        }
        cuts.push(at);
    }
    cuts.push(new.len());
    let pieces: Vec<String> = cuts.windows(2).map(|w| new[w[0]..w[1]].to_string()).collect();
    // Packed as entries, they are still more than one text would make.
    let entries = apex_core::op::packed(pieces.clone()).len();
    assert!(entries > apex_core::op::pieces(&new).len(), "{entries} entries of {} pieces", pieces.len());
    let kinds = |ps: &[Proposal]| {
        ps.iter().map(|p| format!("{p:?}").split([' ', '{']).next().unwrap().to_string()).collect::<Vec<_>>()
    };
    let mut ends = Vec::new();
    for read in [vec![new.clone()], pieces.clone()] {
        let mut h = host();
        let w = h.window("/tmp/big.txt", &old);
        let version = h.node.state.buffer(w.body).unwrap().version;
        let select =
            Proposal::Select { buffer: w.body, view: ViewId::WindowBody(w.window), version, q0: 500_000, q1: 500_010 };
        h.propose(select).unwrap();
        let ps = exec::get_proposals(h.node.state.buffer(w.body).unwrap(), w.body, "/tmp/big.txt", false, read);
        let first =
            if ps.len() > 1 && matches!(ps[0], Proposal::ReplacePieces { .. }) { "ReplacePieces" } else { "Replace" };
        assert_eq!(kinds(&ps), [first, "Clean", "ForgetUndo", "Select", "SetOrigin"]);
        for p in ps {
            h.propose(p).unwrap();
        }
        let b = h.node.state.buffer(w.body).unwrap();
        assert_eq!(b.text.to_string(), new);
        ends.push((first, b.views[&ViewId::WindowBody(w.window)]));
    }
    assert_eq!((ends[0].0, ends[1].0), ("Replace", "ReplacePieces"));
    assert_eq!(ends[0].1, ends[1].1, "the window's place, kept the same way");
    assert_ne!(ends[0].1.q0, 500_000, "kept by lines, not by runes");
    // A file of the buffer's length whose piece ends inside one of the
    // buffer's runes: a different text, replaced.
    let max = apex_core::op::SPLICE_MAX;
    let mut h = host();
    let w = h.window("/tmp/same-size.txt", &format!("{}é{}", "a".repeat(max - 1), "b".repeat(10)));
    let pieces = vec!["a".repeat(max), format!("a{}", "b".repeat(10))];
    let ps = exec::get_proposals(h.node.state.buffer(w.body).unwrap(), w.body, "/tmp/same-size.txt", false, pieces);
    assert_eq!(kinds(&ps)[0], "ReplacePieces");
    for p in ps {
        h.propose(p).unwrap();
    }
    assert_eq!(
        h.node.state.buffer(w.body).unwrap().text.to_string(),
        format!("{}{}", "a".repeat(max + 1), "b".repeat(10))
    );
    // A thousand tiny pieces (a client's proposal): one entry, not a
    // thousand.
    let mut h = host();
    let w = h.window("/tmp/tiny.txt", "old\n");
    let version = h.node.state.buffer(w.body).unwrap().version;
    let pieces: Vec<String> = (0..1000).map(|i| format!("{}", i % 10)).collect();
    let p = Proposal::ReplacePieces {
        buffer: w.body,
        version,
        q0: 0,
        q1: 4,
        pieces: pieces.clone(),
        origin: Origin::OtherFile,
    };
    h.propose(p).unwrap();
    let b = h.node.state.buffer(w.body).unwrap();
    assert_eq!((b.text.to_string(), b.version), (pieces.concat(), version + 1));
    // A piece longer than an entry: refused, nothing changed.
    let mut h = host();
    let w = h.window("/tmp/big.txt", "old\n");
    let before = h.node.state.buffer(w.body).unwrap().clone();
    let pieces = vec!["x".to_string(), "y".repeat(apex_core::op::SPLICE_MAX + 1)];
    let p = Proposal::ReplacePieces {
        buffer: w.body,
        version: before.version,
        q0: 0,
        q1: 4,
        pieces,
        origin: Origin::OtherFile,
    };
    let e = h.propose(p).unwrap_err();
    assert!(e.to_string().contains("1048577"), "{e}");
    assert_eq!(h.node.state.buffer(w.body).unwrap().version, before.version);
    assert_eq!(h.node.state.buffer(w.body).unwrap().text.to_string(), "old\n");
}

/// A Get's places are put back only where its replacement came right
/// after what it read: with another's change between, they are of a text
/// that never was, and a host proposes none.
#[test]
fn a_get_knows_whether_another_s_change_came_between_its_read_and_its_text() {
    let mut h = host();
    let w = h.window("/tmp/race.txt", "one\ntwo\n");
    let shard = Shard::Buffer(w.body);
    for between in [false, true] {
        let buf = h.node.state.buffer(w.body).unwrap().clone();
        let last = h.node.log.last(shard);
        let ps = exec::get_proposals(&buf, w.body, "/tmp/race.txt", false, vec![format!("zero\n{between}\n")]);
        if between {
            let version = h.node.state.buffer(w.body).unwrap().version;
            let typed = Proposal::Insert { buffer: w.body, version, q0: 0, text: "x".into(), origin: Origin::Keyboard };
            h.propose(typed).unwrap();
        }
        let replace = ps.into_iter().find(exec::replaces_text).expect("the text differs");
        let applied = h.propose(replace).unwrap();
        assert_eq!(exec::replaced_as_read(&applied, w.body, last), !between, "another's change between: {between}");
    }
}
