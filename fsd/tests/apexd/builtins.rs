//! Every acme built-in executed through a window's event file on a real
//! `apexd --acme main` with no UI: the daemon runs core's built-ins
//! headless, with acme's semantics, and the files show what they did.

use crate::acme::{acme_client, acme_daemon, id_of, open, put, read_file, write_file};
use crate::attach::until;
use apex_ninep::fcall::*;
use apex_ninep::{Client, ClientError, File};

/// An acme window a test drives, with its event file open.
struct Win<'a> {
    c: &'a Client,
    root: u32,
    id: u32,
    name: String,
    ctl: File,
    ev: File,
}

impl<'a> Win<'a> {
    async fn new(c: &'a Client, root: u32, name: &str, text: &str) -> Win<'a> {
        let ctl = open(c, root, "new/ctl", ORDWR).await;
        let id = id_of(&crate::text(c.read(ctl.fid, 0, 12).await.unwrap()));
        put(c, &ctl, &format!("name {name}\n")).await.unwrap();
        if !text.is_empty() {
            write_file(c, root, &format!("{id}/body"), text).await.unwrap();
        }
        let ev = open(c, root, &format!("{id}/event"), ORDWR).await;
        Win { c, root, id, name: name.to_string(), ctl, ev }
    }

    /// Puts `cmd` in the tag after the bar and executes it there, as B2
    /// would (the event written back).
    async fn x(&self, cmd: &str) -> Result<(), ClientError> {
        put(self.c, &self.ctl, "cleartag\n").await.unwrap();
        let q0 = self.file("tag").await.chars().count() + 1;
        write_file(self.c, self.root, &format!("{}/tag", self.id), &format!(" {cmd}")).await.unwrap();
        let q1 = q0 + cmd.chars().count();
        put(self.c, &self.ev, &format!("Mx{q0} {q1}\n")).await.map(|_| ())
    }

    /// Executes `cmd` as [`Win::x`] does, which must succeed, and returns
    /// what it added to the +Errors window of the window's directory:
    /// where acme's xfideventwrite puts a failed command's message.
    async fn x_err(&self, cmd: &str) -> String {
        let before = self.errors().await;
        self.x(cmd).await.unwrap_or_else(|e| panic!("the event write of {cmd:?} was refused: {e}"));
        let after = self.errors().await;
        after.strip_prefix(&before).unwrap_or(&after).to_string()
    }

    /// The body of `DIR/+Errors` for this window's directory, or "".
    async fn errors(&self) -> String {
        let dir = self.name.rsplit_once('/').map_or("", |(d, _)| d);
        let errors = format!("{dir}/+Errors");
        let index = read_file(self.c, self.root, "index").await;
        match index.lines().find(|l| l.split_whitespace().nth(5) == Some(errors.as_str())) {
            Some(line) => read_file(self.c, self.root, &format!("{}/body", id_of(line))).await,
            None => String::new(),
        }
    }

    /// B3 on `text` written at the end of the body.
    async fn look(&self, text: &str) -> Result<(), ClientError> {
        let q0 = self.file("body").await.chars().count();
        write_file(self.c, self.root, &format!("{}/body", self.id), text).await.unwrap();
        let q1 = q0 + text.chars().count();
        put(self.c, &self.ev, &format!("ML{q0} {q1}\n")).await.map(|_| ())
    }

    async fn file(&self, name: &str) -> String {
        read_file(self.c, self.root, &format!("{}/{name}", self.id)).await
    }

    async fn select(&self, addr: &str) {
        write_file(self.c, self.root, &format!("{}/addr", self.id), addr).await.unwrap();
        put(self.c, &self.ctl, "dot=addr\n").await.unwrap();
    }

    /// The body's selection, through `addr=dot`.
    async fn dot(&self) -> (u64, u64) {
        let addr = open(self.c, self.root, &format!("{}/addr", self.id), OREAD).await;
        put(self.c, &self.ctl, "addr=dot\n").await.unwrap();
        let s = crate::text(self.c.read(addr.fid, 0, 64).await.unwrap());
        self.c.clunk(addr.fid).await.unwrap();
        let v: Vec<u64> = s.split_whitespace().map(|n| n.parse().unwrap()).collect();
        (v[0], v[1])
    }

    /// ctl field `i` (0-based).
    async fn ctl_field(&self, i: usize) -> String {
        let f = open(self.c, self.root, &format!("{}/ctl", self.id), OREAD).await;
        let s = crate::text(self.c.read(f.fid, 0, 512).await.unwrap());
        self.c.clunk(f.fid).await.unwrap();
        s.split_whitespace().nth(i).unwrap().to_string()
    }
}

/// The windows listed in `index` by name.
async fn names(c: &Client, root: u32) -> Vec<String> {
    read_file(c, root, "index").await.lines().map(|l| l.split_whitespace().nth(5).unwrap_or("").to_string()).collect()
}

/// How many window directories the acme root lists (Zerox copies too,
/// which `index` lists once).
async fn windows(c: &Client, root: u32) -> usize {
    let dir = open(c, root, "", OREAD).await;
    let data = c.read_all(&dir).await.unwrap();
    c.clunk(dir.fid).await.unwrap();
    let stats = apex_ninep::parse_stats(&data).unwrap();
    stats.iter().filter(|s| s.name.bytes().all(|b| b.is_ascii_digit())).count()
}

/// The body of the window named `name`, once it holds `want`.
async fn body_of(c: &Client, root: u32, name: &str, want: &str) -> String {
    until(
        || format!("{name} never held {want:?}"),
        async || {
            let index = read_file(c, root, "index").await;
            let line = index.lines().find(|l| l.split_whitespace().nth(5) == Some(name))?;
            let body = read_file(c, root, &format!("{}/body", id_of(line))).await;
            body.contains(want).then_some(body)
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snarf_cut_paste_send_undo_redo_look() {
    let d = acme_daemon("builtins-text");
    let dir = d.dir.display().to_string();
    let (c, root) = acme_client(&d, 8192).await;
    let w = Win::new(&c, root, &format!("{dir}/text"), "hello world\n").await;
    w.select("#0,#5").await;
    w.x("Snarf").await.unwrap();
    w.select("#6,#11").await;
    w.x("Cut").await.unwrap();
    assert_eq!(w.file("body").await, "hello \n");
    w.select("#0,#5").await;
    w.x("Paste").await.unwrap();
    assert_eq!(w.file("body").await, "world \n", "Paste puts back what Cut took");
    assert_eq!(w.dot().await, (0, 5));
    w.select("#0,#5").await;
    w.x("Send").await.unwrap();
    assert_eq!(w.file("body").await, "world \nworld\n", "Send appends the selection with a newline");
    w.x("Undo").await.unwrap();
    assert_eq!(w.file("body").await, "world \n");
    w.x("Redo").await.unwrap();
    assert_eq!(w.file("body").await, "world \nworld\n");
    // With nothing to redo, acme's undo does nothing and says nothing.
    assert_eq!(w.x_err("Redo").await, "");
    assert_eq!(w.file("body").await, "world \nworld\n");
    w.select("#0").await;
    w.x("Look world").await.unwrap();
    assert_eq!(w.dot().await, (0, 5));
    w.x("Look").await.unwrap();
    assert_eq!(w.dot().await, (7, 12), "Look finds the selection again");
    // A Look that finds nothing says nothing and moves nothing (look3).
    assert_eq!(w.x_err("Look nowhere").await, "");
    assert_eq!(w.dot().await, (7, 12));
    // B3 on a file name opens it at the address.
    std::fs::write(d.dir.join("f.c"), "int\nmain\n").unwrap();
    w.look(" f.c:2").await.unwrap();
    assert!(names(&c, root).await.contains(&format!("{dir}/f.c")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn del_delete_get_put_putall_zerox_new_newcol_delcol_sort() {
    let d = acme_daemon("builtins-windows");
    let dir = d.dir.display().to_string();
    let (c, root) = acme_client(&d, 8192).await;
    let file = d.dir.join("a.txt");
    std::fs::write(&file, "on disk\n").unwrap();
    let w = Win::new(&c, root, &format!("{dir}/a.txt"), "").await;
    w.x("Get").await.unwrap();
    assert_eq!(w.file("body").await, "on disk\n");
    write_file(&c, root, &format!("{}/body", w.id), "more\n").await.unwrap();
    w.x("Put").await.unwrap();
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "on disk\nmore\n");
    w.x("Put b.txt").await.unwrap();
    assert_eq!(std::fs::read_to_string(d.dir.join("b.txt")).unwrap(), "on disk\nmore\n");
    // Putall writes changed files no tool reads the events of.
    std::fs::write(d.dir.join("p.txt"), "").unwrap();
    let p = open(&c, root, "new/ctl", ORDWR).await;
    let pid = id_of(&crate::text(c.read(p.fid, 0, 12).await.unwrap()));
    put(&c, &p, &format!("name {dir}/p.txt\n")).await.unwrap();
    write_file(&c, root, &format!("{pid}/body"), "putall\n").await.unwrap();
    write_file(&c, root, &format!("{}/body", w.id), "putall\n").await.unwrap();
    let other = Win::new(&c, root, &format!("{dir}/c.txt"), "").await;
    other.x("Putall").await.unwrap();
    assert_eq!(std::fs::read_to_string(d.dir.join("p.txt")).unwrap(), "putall\n");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "on disk\nmore\n", "a tool's window is the tool's to put");
    // Get warns about the change once (conservative, even with events open).
    write_file(&c, root, &format!("{}/body", w.id), "x").await.unwrap();
    let e = w.x_err("Get").await;
    assert!(e.contains("a.txt modified"), "{e}");
    w.x("Get").await.unwrap();
    assert_eq!(w.file("body").await, "on disk\nmore\n");

    let before = windows(&c, root).await;
    w.x("Zerox").await.unwrap();
    w.x("New").await.unwrap();
    w.x("Newcol").await.unwrap();
    assert_eq!(windows(&c, root).await, before + 3, "Zerox, New and Newcol each make a window");
    w.x("Sort").await.unwrap();
    // With the event file open Del closes without asking (the tool decides).
    write_file(&c, root, &format!("{}/body", other.id), "changed").await.unwrap();
    other.x("Del").await.unwrap();
    assert!(!names(&c, root).await.contains(&format!("{dir}/c.txt")));
    let z = Win::new(&c, root, &format!("{dir}/z.txt"), "").await;
    z.x("Delete").await.unwrap();
    assert!(!names(&c, root).await.contains(&format!("{dir}/z.txt")));
    // Delcol refuses while a tool runs in the column, in acme's words.
    let e = w.x_err("Delcol").await;
    assert!(e.contains("can't delete column") && e.contains("running an application"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn font_tab_indent_incl_id_local_kill_exit_abort_dump_load() {
    let d = acme_daemon("builtins-settings");
    let dir = d.dir.display().to_string();
    let (c, root) = acme_client(&d, 8192).await;
    let w = Win::new(&c, root, &format!("{dir}/s.txt"), "text\n").await;
    w.x("Font").await.unwrap();
    assert_eq!(w.ctl_field(6).await, apex_core::dump::FONT_FIX);
    w.x("Tab 8").await.unwrap();
    assert_eq!(w.ctl_field(7).await, "64", "eight characters of 8 pixels");
    w.x("Tab").await.unwrap();
    let errors = format!("{dir}/+Errors");
    body_of(&c, root, &errors, "s.txt: Tab 8\n").await;
    w.x("Indent on").await.unwrap();
    w.x("Incl /usr/include").await.unwrap();
    w.x("Incl").await.unwrap();
    body_of(&c, root, &errors, "/usr/include\n").await;
    w.x("ID").await.unwrap();
    body_of(&c, root, &errors, &format!("/mnt/acme/{}/\n", w.id)).await;
    assert!(w.x_err("Indent sideways").await.contains("say on, off"));
    // Local runs a command in the window's directory; Kill ends it.
    w.x("Local echo local-ran > local.out").await.unwrap();
    until(|| "Local did not run".into(), async || d.dir.join("local.out").exists().then_some(())).await;
    let apex = d.client().await;
    let top = apex.attach("glenda", "").await.unwrap();
    w.x("sleep 30").await.unwrap();
    let processes = async || crate::text(crate::read(&apex, top, "main/meta/processes").await.unwrap());
    until(|| "sleep is not listed".into(), async || processes().await.contains("sleep 30").then_some(())).await;
    w.x("Kill sleep").await.unwrap();
    until(|| "Kill did not end sleep".into(), async || (!processes().await.contains("sleep 30")).then_some(())).await;
    let e = w.x_err("Kill nosuch").await;
    assert!(e.contains("Kill: no process nosuch"), "{e}");
    // Exit and Abort leave the session running and say so.
    assert!(w.x_err("Exit").await.contains("s.txt modified"));
    put(&c, &w.ctl, "clean\n").await.unwrap();
    w.x("Exit").await.unwrap();
    w.x("Abort").await.unwrap();
    body_of(&c, root, &errors, "Abort: apexd has no window to close").await;
    // Dump writes acme's format; Load makes its windows again.
    let dump = d.dir.join("session.dump");
    w.x(&format!("Dump {}", dump.display())).await.unwrap();
    let bytes = std::fs::read(&dump).unwrap();
    let parsed = apex_core::dump::Dump::parse(&bytes).unwrap();
    // A window whose events a tool reads is the tool's to restore.
    assert!(!parsed.windows.iter().any(|r| r.tag.starts_with(&format!("{dir}/s.txt"))), "{parsed:?}");
    assert!(parsed.windows.iter().any(|r| r.tag.starts_with(&errors)), "{parsed:?}");
    assert_eq!(parsed.columns.len(), 2);
    let before = names(&c, root).await.len();
    w.x(&format!("Load {}", dump.display())).await.unwrap();
    assert!(names(&c, root).await.len() > before, "Load made the dumped windows again");
    let e = w.x_err(&format!("Load {dir}/missing.dump")).await;
    assert!(e.contains("can't open load file"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn putall_puts_many_side_by_side_and_says_which_it_could_not() {
    let d = acme_daemon("builtins-putall");
    let dir = d.dir.display().to_string();
    let (c, root) = acme_client(&d, 8192).await;
    // More changed files than the daemon puts at once.
    let mut ids = Vec::new();
    for i in 0..20 {
        std::fs::write(d.dir.join(format!("m{i}.txt")), "old\n").unwrap();
        let ctl = open(&c, root, "new/ctl", ORDWR).await;
        let id = id_of(&crate::text(c.read(ctl.fid, 0, 12).await.unwrap()));
        put(&c, &ctl, &format!("name {dir}/m{i}.txt\nget\n")).await.unwrap();
        write_file(&c, root, &format!("{id}/body"), &format!("new {i}\n")).await.unwrap();
        c.clunk(ctl.fid).await.unwrap();
        ids.push(id);
    }
    // One has become a directory: its put fails, and only its.
    std::fs::remove_file(d.dir.join("m7.txt")).unwrap();
    std::fs::create_dir(d.dir.join("m7.txt")).unwrap();
    let runner = Win::new(&c, root, &format!("{dir}/runner"), "").await;
    runner.x("Putall").await.unwrap();
    // Said where acme's Putall says it (`warning(nil, …)`): the +Errors
    // of no window's directory.
    let errors = names(&c, root).await.into_iter().find(|n| n.ends_with("+Errors")).expect("an +Errors window");
    let said = body_of(&c, root, &errors, "m7.txt").await;
    assert_eq!(said.lines().count(), 1, "only the one not written is said: {said}");
    for (i, id) in ids.iter().enumerate() {
        let ctl = open(&c, root, &format!("{id}/ctl"), OREAD).await;
        let fields = crate::text(c.read(ctl.fid, 0, 512).await.unwrap());
        c.clunk(ctl.fid).await.unwrap();
        let dirty = fields.split_whitespace().nth(4).unwrap().to_string();
        if i == 7 {
            assert_eq!(dirty, "1", "the one not written stays dirty");
            continue;
        }
        assert_eq!(std::fs::read_to_string(d.dir.join(format!("m{i}.txt"))).unwrap(), format!("old\nnew {i}\n"));
        assert_eq!(dirty, "0", "m{i}.txt is clean once put");
    }
}
