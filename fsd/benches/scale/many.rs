//! The rows of a session of many windows: a daemon of its own holding
//! [`MANY`] files of [`EACH`] bytes, opened, welcomed and put.

use super::*;

/// How many files, and of what size, the session of many windows holds.
const MANY: usize = 1000;
const EACH: usize = 100 << 10;

/// `vim` or `nvim` opening every one of `files` (`argdo`, buffers kept),
/// running `then` and quitting.
fn ex_all(program: &str, then: &str, files: &[std::path::PathBuf]) -> Command {
    let mut c = Command::new(program);
    c.args(["-u", "NONE", "-i", "NONE", "-n", "-es", "--cmd", "set hidden", "-c", "silent argdo normal! Gox"]);
    c.args(["-c", then, "-c", "qa!"]).args(files);
    c
}
/// The daemon `pid`'s memory now, beyond `before` MiB, against `mib` MiB
/// of files.
fn held_row(when: &str, pid: u32, before: f64, mib: f64) {
    let (held, _) = memory(pid);
    println!(
        "{:<26} daemon memory{when}: {:.0} MiB more for {mib:.0} MiB of files ({:.2}x; goal 1.3x)",
        "",
        held - before,
        (held - before) / mib
    );
}

/// A session of [`MANY`] windows of [`EACH`] bytes, in a daemon of its
/// own: the windows opened through their ctl files, beside vim and nvim
/// opening as many files and reading them into ropes in process; the
/// daemon's memory for them; a Welcome of the session beside its floor
/// (its snapshot encoded and decoded in process); `Putall` of them all,
/// each changed, beside vim's `:wa` and writing the files in process.
pub async fn many_files(base: &Path) {
    let dir = base.join("many");
    let files = dir.join("files");
    std::fs::create_dir_all(&files).unwrap();
    let text = ordinary_text(EACH);
    let paths: Vec<std::path::PathBuf> = (0..MANY)
        .map(|i| {
            let p = files.join(format!("f{i:04}.txt"));
            std::fs::write(&p, format!("file {i}\n{text}")).unwrap();
            p
        })
        .collect();
    let size: u64 = paths.iter().map(|p| std::fs::metadata(p).unwrap().len()).sum();
    let mib = size as f64 / (1 << 20) as f64;
    let apexd = Apexd::start(&dir, &[]);
    let (c, root) = apexd.client().await;
    let (before, _) = memory(apexd.pid());
    let t = Instant::now();
    let mut windows = Vec::new();
    for p in &paths {
        let new = c.open_path(root, "main/acme/new/ctl", ORDWR).await.unwrap();
        let number = String::from_utf8(c.read(new.fid, 0, 64).await.unwrap()).unwrap();
        c.write(new.fid, 0, format!("name {}\nget\n", p.display()).as_bytes()).await.unwrap();
        c.clunk(new.fid).await.unwrap();
        windows.push(number.split_whitespace().next().unwrap().to_string());
    }
    let opened = t.elapsed();
    // The session's snapshot, put off while the files came in, written
    // before the peers are timed, not beside them.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let last = Window { c: &c, root, number: windows.last().unwrap().clone() };
    assert_eq!(last.read("body").await, format!("file {}\n{text}", MANY - 1).into_bytes(), "the last file read");
    let in_process = {
        let t = Instant::now();
        for p in &paths {
            std::hint::black_box(ropey::Rope::from_str(&std::fs::read_to_string(p).unwrap()));
        }
        t.elapsed()
    };
    let vim_opens = ["vim", "nvim"].map(|p| (p, time_peer(&mut ex_all(p, "silent", &paths))));
    let [(vim, vim_took), (nvim, nvim_took)] = vim_opens;
    let name = format!("open {MANY} files of {} KB", EACH >> 10);
    row(&name, opened, &[(vim, vim_took.clone()), (nvim, nvim_took.clone()), ("read+rope in process", Ok(in_process))]);
    held_row("", apexd.pid(), before, mib);
    println!("{:<26} (above: acme's way, new/ctl then `name` and `get`, one file at a time)", "");
    // `apex open` of them all, as a user opens many files (B's way), in
    // a daemon of its own so the session after it is the same.
    let by_apex_open = {
        let base = dir.join("open");
        std::fs::create_dir_all(&base).unwrap();
        let other = Apexd::start(&base, &[]);
        let mut open = Command::new(env!("CARGO_BIN_EXE_apex"));
        open.arg("open").args(&paths).env("NAMESPACE", base.join("ns")).stdout(Stdio::null());
        let took = time_peer(&mut open);
        let (c2, root2) = other.client().await;
        let index = c2.open_path(root2, "main/acme/index", OREAD).await.unwrap();
        let listed = String::from_utf8(c2.read_all(&index).await.unwrap()).unwrap();
        assert_eq!(listed.lines().count(), MANY, "apex open made a window a file");
        other.stop();
        took.unwrap()
    };
    row(&format!("{name}, apex open"), by_apex_open, &[(vim, vim_took), (nvim, nvim_took)]);

    // A Welcome of the whole session, as a UI's attach takes it.
    let address = format!("unix!{}", apexd.socket().display());
    let mut welcomes = Vec::new();
    let mut state = None;
    for i in 0..3 {
        let wc = apex_ninep::dial(&address, 1 << 20).await.unwrap();
        let t = Instant::now();
        let a = apex_link::Attached::open(&wc, "main", apex_core::AttachmentKind::Tool, &format!("welcome{i}")).await;
        let a = a.unwrap();
        assert!(a.wait_for(Duration::from_secs(120), |l| l.node().is_some()).await, "welcomed");
        welcomes.push(t.elapsed());
        state.get_or_insert_with(|| a.with(|l| l.node().unwrap().state.clone()));
        a.close().await;
    }
    let state = state.unwrap();
    assert_eq!(state.windows.len(), MANY, "the Welcome holds every window");
    let floor = (0..3)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(apex_core::State::from_snapshot(&state.to_snapshot()).unwrap());
            t.elapsed()
        })
        .min()
        .unwrap();
    welcomes.sort();
    row(&format!("welcome, {MANY} windows"), welcomes[1], &[("snapshot encode+decode in process", Ok(floor))]);
    tokio::time::sleep(Duration::from_secs(1)).await;
    held_row(" after 3 Welcomes", apexd.pid(), before, mib);

    // Putall of every window, each changed at its end.
    for number in &windows {
        Window { c: &c, root, number: number.clone() }.write("body", b"x").await;
    }
    // From a window of its own: acme's Putall passes by a window whose
    // event file is open, as the one it runs from is here.
    let new = c.open_path(root, "main/acme/new/ctl", ORDWR).await.unwrap();
    let number = String::from_utf8(c.read(new.fid, 0, 64).await.unwrap()).unwrap();
    c.clunk(new.fid).await.unwrap();
    let from = Window { c: &c, root, number: number.split_whitespace().next().unwrap().to_string() };
    let put = from.run("Putall").await;
    for (i, p) in paths.iter().enumerate() {
        let on_disk = std::fs::read(p).unwrap();
        let meant = format!("file {i}\n{text}x");
        let tail = |b: &[u8]| String::from_utf8_lossy(&b[b.len().saturating_sub(20)..]).to_string();
        assert!(
            on_disk == meant.as_bytes(),
            "Putall wrote {p:?}: {} bytes ending {:?}, not {} ending {:?}",
            on_disk.len(),
            tail(&on_disk),
            meant.len(),
            tail(meant.as_bytes())
        );
    }
    let written = {
        let out = dir.join("written");
        std::fs::create_dir_all(&out).unwrap();
        let t = Instant::now();
        for (i, p) in paths.iter().enumerate() {
            std::fs::write(out.join(p.file_name().unwrap()), format!("file {i}\n{text}x")).unwrap();
        }
        t.elapsed()
    };
    // vim's `:wa` alone: its run with the write, less the same without.
    let wa = ["vim", "nvim"].map(|p| {
        let with = time_peer(&mut ex_all(p, "wa", &paths));
        let without = time_peer(&mut ex_all(p, "silent", &paths));
        (p, with.and_then(|w| without.map(|wo| w.saturating_sub(wo))))
    });
    let [(vim, vim_wa), (nvim, nvim_wa)] = wa;
    row(
        &format!("Putall of {MANY} windows"),
        put,
        &[(vim, vim_wa), (nvim, nvim_wa), ("write in process, no sync", Ok(written))],
    );
    let (end, peak) = memory(apexd.pid());
    println!("{:<26} daemon memory at the end: {:.0} MiB more than before (peak {peak:.0} MiB)", "", end - before);
    apexd.stop();
}
