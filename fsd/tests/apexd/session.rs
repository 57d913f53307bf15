//! A session's files: buffers, addresses, proposals, meta tables, shards,
//! and the replay of `shards/*/entries` to the daemon's hash.

use super::*;
use apex_core::{AttachmentId, Log, Node, RecordingHook, Shard, State};
use apex_fsd::shards::entrytext::parse_entry;

pub async fn hash(c: &Client, root: u32) -> String {
    text(read(c, root, "main/hash").await.unwrap())
}

/// Makes a buffer in a new window through `buffers/new`; returns its id.
pub async fn new_buffer(c: &Client, root: u32) -> String {
    let id = text(read(c, root, "main/buffers/new").await.unwrap());
    id.trim().to_string()
}

/// Reads `path` (a stream) until `lines` whole lines have come.
pub async fn read_lines(c: &Client, f: &File, offset: &mut u64, lines: usize) -> String {
    let mut out = String::new();
    while out.matches('\n').count() < lines {
        let got = tokio::time::timeout(Duration::from_secs(10), c.read(f.fid, *offset, 8192))
            .await
            .expect("stream read timed out")
            .unwrap();
        assert!(!got.is_empty(), "stream ended early after {out:?}");
        *offset += got.len() as u64;
        out.push_str(std::str::from_utf8(&got).unwrap());
    }
    out
}

fn ctl_field(ctl: &str, key: &str) -> String {
    ctl.lines()
        .find_map(|l| l.strip_prefix(&format!("{key} ")))
        .unwrap_or_else(|| panic!("no {key} in {ctl:?}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buffers_addresses_and_proposals() {
    let d = Daemon::start("buffers");
    let c = d.client().await;
    let root = c.attach("glenda", "").await.unwrap();
    let n = new_buffer(&c, root).await;
    let b = |f: &str| format!("main/buffers/{n}/{f}");

    // body: writes append; a rune split across writes is joined, and a
    // write refused in between (not UTF-8) changes nothing, the carried
    // half of the rune included.
    let f = c.open_path(root, &b("body"), OWRITE).await.unwrap();
    c.write(f.fid, 0, b"hello world\ncaf").await.unwrap();
    c.write(f.fid, 0, &[0xc3]).await.unwrap();
    let e = c.write(f.fid, 0, &[0xff]).await.unwrap_err();
    assert!(e.to_string().contains("body: write is not UTF-8 text"), "{e}");
    c.write(f.fid, 0, &[0xa9, b'\n']).await.unwrap();
    c.clunk(f.fid).await.unwrap();
    assert_eq!(text(read(&c, root, &b("body")).await.unwrap()), "hello world\ncafé\n");
    // A wstat may empty a body (length 0) but set no other length.
    let (fid, _) = c.walk(root, &["main", "buffers", &n, "body"]).await.unwrap();
    let five = apex_ninep::fcall::Stat { length: 5, ..apex_ninep::fcall::Stat::dont_touch() };
    let e = c.wstat(fid, five).await.unwrap_err().to_string();
    assert!(e.contains("body: wstat sets no length but 0"), "{e}");
    c.clunk(fid).await.unwrap();
    let ctl = text(read(&c, root, &b("ctl")).await.unwrap());
    assert_eq!(ctl_field(&ctl, "length"), "17");
    assert_eq!(ctl_field(&ctl, "dirty"), "1");
    let body_qid = c.open_path(root, &b("body"), OREAD).await.unwrap();
    assert_eq!(body_qid.qid.vers as u64, ctl_field(&ctl, "version").parse::<u64>().unwrap(), "qid.vers is the version");
    // Its writes append, wherever they are made (as acme's body's): it is
    // append-only, which a mount reads ahead by (and never a stream).
    assert_eq!(body_qid.qid.ty & apex_ninep::fcall::QTAPPEND, apex_ninep::fcall::QTAPPEND);
    let (fid, _) = c.walk(root, &["main", "buffers", &n, "body"]).await.unwrap();
    assert_ne!(c.stat(fid).await.unwrap().mode & apex_ninep::fcall::DMAPPEND, 0);
    c.clunk(fid).await.unwrap();
    for stream in ["event", "data", "addr"] {
        let f = c.open_path(root, &b(stream), OREAD).await.unwrap();
        assert_eq!(f.qid.ty & apex_ninep::fcall::QTAPPEND, 0, "{stream} is not append-only");
        c.clunk(f.fid).await.unwrap();
    }

    // addr and data, acme's way: one address shared by every fid.
    let addr = c.open_path(root, &b("addr"), ORDWR).await.unwrap();
    assert_eq!(text(c.read(addr.fid, 0, 100).await.unwrap()), "          0           0 ");
    c.write(addr.fid, 0, b"#6,#11").await.unwrap();
    assert_eq!(text(c.read(addr.fid, 0, 100).await.unwrap()), "          6          11 ");
    write(&c, root, &b("data"), "there").await.unwrap();
    assert_eq!(text(read(&c, root, &b("body")).await.unwrap()), "hello there\ncafé\n");
    assert_eq!(text(c.read(addr.fid, 0, 100).await.unwrap()), "         11          11 ");
    c.write(addr.fid, 0, b"/caf/").await.unwrap();
    c.write(addr.fid, 0, b"2").await.unwrap();
    // A data read returns whole runes and moves the address past them.
    let data = c.open_path(root, &b("data"), OREAD).await.unwrap();
    assert_eq!(text(c.read(data.fid, 0, 4).await.unwrap()), "caf");
    assert_eq!(text(c.read(data.fid, 0, 4).await.unwrap()), "é\n");
    assert_eq!(c.read(data.fid, 0, 4).await.unwrap(), b"");
    c.clunk(data.fid).await.unwrap();
    // A zero-length data write deletes the addressed text.
    c.write(addr.fid, 0, b"1").await.unwrap();
    let dataw = c.open_path(root, &b("data"), OWRITE).await.unwrap();
    c.write(dataw.fid, 0, b"").await.unwrap();
    c.clunk(dataw.fid).await.unwrap();
    assert_eq!(text(read(&c, root, &b("body")).await.unwrap()), "café\n");

    // Refused writes say why and change nothing.
    let before = hash(&c, root).await;
    for (bad, says) in
        [("#99", "address out of range"), ("/zzz/", "address out of range"), ("#1\n", "bad address syntax")]
    {
        let e = c.write(addr.fid, 0, bad.as_bytes()).await.unwrap_err().to_string();
        assert!(e.starts_with(says), "{bad:?}: {e}");
    }
    let e = write(&c, root, "main/proposals", "insrt 1 0 0\nx").await.unwrap_err().to_string();
    assert!(e.contains("unknown verb \"insrt\"; expected insert|delete|replace|"), "{e}");
    let e = write(&c, root, "main/proposals", &format!("insert {n} 9999 0\nx")).await.unwrap_err().to_string();
    assert!(e.contains("newer"), "{e}");
    let e = write(&c, root, "main/proposals", &format!("delete {n} 0 0 99")).await.unwrap_err().to_string();
    assert!(e.contains("address out of range"), "{e}");
    let e = write(&c, root, &b("ctl"), "frob").await.unwrap_err().to_string();
    assert!(e.contains("expected name NAME, clean"), "{e}");
    let e = write(&c, root, "main/ctl", "frob").await.unwrap_err().to_string();
    assert!(e.contains("expected window [NAME]"), "{e}");
    let e = write(&c, root, "main/shards/layout/lease", "grab").await.unwrap_err().to_string();
    assert!(e.contains("expected \"reclaim\""), "{e}");
    assert!(write(&c, root, &b("event"), "Mx0 0\n").await.is_err());
    assert!(write(&c, root, "main/hash", "x").await.is_err());
    assert_eq!(hash(&c, root).await, before, "refused writes leave the hash as it was");

    // A proposal made at an old version is rebased through later edits.
    let ctl = text(read(&c, root, &b("ctl")).await.unwrap());
    let v = ctl_field(&ctl, "version");
    write(&c, root, "main/proposals", &format!("insert {n} {v} 5\n!")).await.unwrap();
    write(&c, root, "main/proposals", &format!("insert {n} 0 0\n>")).await.unwrap();
    write(&c, root, "main/proposals", &format!("insert {n} {v} 0\n<")).await.unwrap();
    // The two inserts at 0 land in the order sequenced: a point at an
    // insertion does not move, as acme's selections do not.
    assert_eq!(text(read(&c, root, &b("body")).await.unwrap()), "<>café\n!");
    let outcomes = text(read(&c, root, "main/proposals").await.unwrap());
    assert!(outcomes.lines().any(|l| l.contains(" ok insert ") && l.contains(&format!("buffer.{n}:"))), "{outcomes}");
    assert!(outcomes.lines().any(|l| l.contains(" refused insrt 1 0 0 -> ")), "{outcomes}");
    write(&c, root, &b("ctl"), "undo\n").await.unwrap();
    assert_eq!(text(read(&c, root, &b("body")).await.unwrap()), ">café\n!");
    write(&c, root, &b("ctl"), "redo").await.unwrap();
    write(&c, root, &b("name"), "/tmp/notes\n").await.unwrap();
    assert_eq!(text(read(&c, root, &b("name")).await.unwrap()), "/tmp/notes\n");
    // A name is one line of index and of acme's log: no control character.
    for bad in ["/tmp/a\nb", "/tmp/bell\u{7}", "/tmp/tab\tname"] {
        let e = write(&c, root, &b("name"), bad).await.unwrap_err().to_string();
        assert!(e.contains("bad character in file name"), "{bad:?}: {e}");
        // (In ctl a newline ends the message: the rest is another.)
        let want = if bad.contains('\n') { "unknown message" } else { "bad character in file name" };
        let e = write(&c, root, &b("ctl"), &format!("name {bad}")).await.unwrap_err().to_string();
        assert!(e.contains(want), "{bad:?}: {e}");
    }
    assert_eq!(text(read(&c, root, &b("name")).await.unwrap()), "/tmp/notes\n");
    write(&c, root, &b("ctl"), "clean").await.unwrap();
    assert_eq!(ctl_field(&text(read(&c, root, &b("ctl")).await.unwrap()), "dirty"), "0");
    // OTRUNC empties the body.
    let t = c.open_path(root, &b("body"), OWRITE | OTRUNC).await.unwrap();
    c.write(t.fid, 0, b"fresh\n").await.unwrap();
    c.clunk(t.fid).await.unwrap();
    assert_eq!(text(read(&c, root, &b("body")).await.unwrap()), "fresh\n");

    // Session ctl and proposals make buffers and windows.
    write(&c, root, "main/ctl", "buffer scratch").await.unwrap();
    write(&c, root, "main/proposals", "buffer other\nwith text").await.unwrap();
    let dir = c.open_path(root, "main/buffers", OREAD).await.unwrap();
    let ids: Vec<String> = c.read_dir(&dir).await.unwrap().into_iter().map(|s| s.name.into_string()).collect();
    c.clunk(dir.fid).await.unwrap();
    let mut names = Vec::new();
    for id in ids.iter().filter(|i| *i != "new") {
        names.push(text(read(&c, root, &format!("main/buffers/{id}/name")).await.unwrap()));
    }
    assert!(names.contains(&"scratch\n".to_string()) && names.contains(&"other\n".to_string()), "{names:?}");
    let snap = apex_core::State::from_snapshot(&read(&c, root, "main/snapshot").await.unwrap()).unwrap();
    let windows = snap.layout.numbers.len();
    write(&c, root, "main/ctl", "window /tmp/w").await.unwrap();
    let snap = apex_core::State::from_snapshot(&read(&c, root, "main/snapshot").await.unwrap()).unwrap();
    assert_eq!(snap.layout.numbers.len(), windows + 1);
    let number = *snap.layout.numbers.values().max().unwrap();
    write(&c, root, "main/ctl", &format!("delwindow {number}")).await.unwrap();
    let snap = apex_core::State::from_snapshot(&read(&c, root, "main/snapshot").await.unwrap()).unwrap();
    assert_eq!(snap.windows.len(), windows);

    // A body of many of the encoding's pieces, runes cut across them: the
    // snapshot, each read made from its parts, is the state hashed. Its
    // writes are large (read into buffers of their own) and cut runes
    // too, which the next write completes: it reads back as written.
    let t = c.open_path(root, &b("body"), OWRITE | OTRUNC).await.unwrap();
    let body = "naïve 文字 𝄞\n".repeat(140_000);
    c.write_all(&t, 0, body.as_bytes()).await.unwrap();
    c.clunk(t.fid).await.unwrap();
    assert!(text(read(&c, root, &b("body")).await.unwrap()) == body, "the body reads back as written");
    let snap = apex_core::State::from_snapshot(&read(&c, root, "main/snapshot").await.unwrap()).unwrap();
    assert_eq!(format!("{}\n", snap.hash().to_hex()), hash(&c, root).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn meta_tables_leases_and_a_replay_of_every_shard() {
    let d = Daemon::start("replay");
    let c = d.client().await;
    let root = c.attach("glenda", "").await.unwrap();
    let n = new_buffer(&c, root).await;
    write(&c, root, &format!("main/buffers/{n}/body"), "some text\nmore\n").await.unwrap();
    write(&c, root, "main/proposals", &format!("replace {n} 1 0 4\nSOME")).await.unwrap();

    // meta/: one line per item.
    let leases = text(read(&c, root, "main/meta/leases").await.unwrap());
    assert!(leases.lines().any(|l| l == format!("buffer.{n} 0 0 0 held")), "{leases}");
    assert!(leases.starts_with("meta 0 0 0 held\n"), "{leases}");
    assert_eq!(text(read(&c, root, "main/meta/attachments").await.unwrap()), "");
    for table in ["rules", "notifications", "processes", "settings"] {
        read(&c, root, &format!("main/meta/{table}")).await.unwrap();
    }
    // The server takes a lease back: the epoch moves on.
    let info = text(read(&c, root, &format!("main/shards/buffer.{n}/info")).await.unwrap());
    let last: u64 = info.lines().find_map(|l| l.strip_prefix("last ")).unwrap().parse().unwrap();
    assert!(info.starts_with("base 0\n"), "{info}");
    write(&c, root, &format!("main/shards/buffer.{n}/lease"), "reclaim\n").await.unwrap();
    assert_eq!(
        text(read(&c, root, &format!("main/shards/buffer.{n}/lease")).await.unwrap()),
        format!("0 1 {last} held\n")
    );
    write(&c, root, &format!("main/buffers/{n}/body"), "after the reclaim\n").await.unwrap();

    // Every shard's entries, replayed by a node of our own, give the
    // daemon's hash.
    let dir = c.open_path(root, "main/shards", OREAD).await.unwrap();
    let shards: Vec<String> = c.read_dir(&dir).await.unwrap().into_iter().map(|s| s.name.into_string()).collect();
    c.clunk(dir.fid).await.unwrap();
    assert_eq!(shards[0], "meta", "the metalog first");
    assert!(shards.contains(&"layout".to_string()) && shards.contains(&format!("buffer.{n}")), "{shards:?}");
    let mut node =
        Node::new(AttachmentId(77), State::new(), Log::mirror(&State::new(), Box::new(RecordingHook::default())));
    for name in &shards {
        let shard: Shard = name.parse().unwrap();
        let info = text(read(&c, root, &format!("main/shards/{name}/info")).await.unwrap());
        let last: usize = info.lines().find_map(|l| l.strip_prefix("last ")).unwrap().parse().unwrap();
        let f = c.open_path(root, &format!("main/shards/{name}/entries"), OREAD).await.unwrap();
        let mut offset = 0;
        let lines = read_lines(&c, &f, &mut offset, last).await;
        c.clunk(f.fid).await.unwrap();
        for line in lines.lines() {
            let entry = parse_entry(line).unwrap_or_else(|e| panic!("{name}: {e}: {line}"));
            node.accept(shard, entry).unwrap_or_else(|e| panic!("{name}: {e}: {line}"));
        }
    }
    assert_eq!(node.state.hash().to_hex().to_string(), hash(&c, root).await.trim());
}

/// Names are bounded wherever they enter: a session's at 255 bytes (the
/// registry is rewritten whole on every change), a buffer's at 4,096,
/// through the registry's ctl, a buffer's ctl and acme's; each refusal
/// says the bound and changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_are_bounded_where_they_enter() {
    let d = Daemon::start("names");
    let c = d.client().await;
    let root = c.attach("glenda", "").await.unwrap();
    let long_session = "s".repeat(256);
    for msg in [format!("new {long_session}\n"), format!("rename main {long_session}\n")] {
        let e = write(&c, root, "ctl", &msg).await.unwrap_err().to_string();
        assert!(e.contains("256 bytes is too long: at most 255"), "{e}");
    }
    write(&c, root, "ctl", &format!("new {}\n", "s".repeat(255))).await.unwrap();
    let index = text(read(&c, root, "index").await.unwrap());
    assert!(index.contains("main") && !index.contains(&long_session), "{index}");

    let n = new_buffer(&c, root).await;
    let long_file = format!("/{}", "f".repeat(4096));
    let e = write(&c, root, &format!("main/buffers/{n}/ctl"), &format!("name {long_file}\n")).await.unwrap_err();
    assert!(e.to_string().contains("4097 bytes is too long: at most 4096"), "{e}");
    let before = text(read(&c, root, "main/acme/index").await.unwrap());
    let f = c.open_path(root, "main/acme/new/ctl", ORDWR).await.unwrap();
    let e = c.write(f.fid, 0, format!("name {long_file}\n").as_bytes()).await.unwrap_err().to_string();
    assert!(e.contains("too long"), "{e}");
    c.clunk(f.fid).await.unwrap();
    let index = text(read(&c, root, "main/acme/index").await.unwrap());
    assert!(!index.contains(&long_file) && index.len() >= before.len(), "{index}");
}
