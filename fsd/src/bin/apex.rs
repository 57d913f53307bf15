//! apex: a 9P client for scripts, in the shape of plan9port's 9p(1).
//!
//! `apex [-a ADDR] ls [-l] PATH`, `read PATH`, `write [-l] PATH`, `rdwr
//! PATH`, `stat PATH`, plus `apex new [NAME]`, `apex sessions`, `apex open
//! FILE[:ADDR]` and `apex edit FILE` (open, then wait for the window to
//! close: an $EDITOR).
//! Without `-a`, a PATH whose first element names a service posted in the
//! namespace directory is a path in that service (`acme/index`, as 9p
//! reads it); any other PATH is in the posted `apex`. With `-a ADDR`
//! (`unix!PATH`, `tcp!HOST!PORT`, or a service name) PATH starts at that
//! server's root. Errors go to stderr as `apex: ...` with exit status 1,
//! as 9p's do.

use apex_ninep::fcall::{Stat, DMAPPEND, DMAUTH, DMDIR, DMEXCL, ORDWR, OREAD, OWRITE};
use apex_ninep::{dial, Client, File};
use clap::{Parser, Subcommand};
use std::io::{BufRead, Read, Write};
use std::os::unix::fs::FileTypeExt;

#[derive(Parser, Debug)]
#[command(name = "apex", about = "Read and write an apex daemon's files (like 9p(1))", version)]
struct Args {
    /// Server address: unix!PATH, tcp!HOST!PORT, a service name posted
    /// in the namespace directory, or ssh!HOST (its import, made if there
    /// is none: see import). Without it, a path's first element
    /// names a posted service if there is one of that name, else the path
    /// is in the posted apex.
    #[arg(short = 'a', value_name = "ADDR")]
    addr: Option<String>,
    /// Attach name: "" for the root, NAME for a session.
    #[arg(short = 'A', value_name = "ANAME", default_value = "")]
    aname: String,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// List a directory (or name a file); -l for the long form.
    Ls {
        #[arg(short = 'l')]
        long: bool,
        path: Vec<String>,
    },
    /// Copy a file to standard output, until a 0-byte read.
    Read { path: String },
    /// Copy standard input to a file in writes filled to the iounit while
    /// input keeps coming (-l: one write per line, newline included).
    Write {
        #[arg(short = 'l')]
        lines: bool,
        path: String,
    },
    /// Alternately print what a read returns (and a newline) and write a
    /// line of input without its newline; refusals are reported and the
    /// loop goes on.
    Rdwr { path: String },
    /// Print a file's directory entry.
    Stat { path: String },
    /// Make a session (named NAME, or a fresh name) and print its name.
    New { name: Option<String> },
    /// List the sessions (the root's index).
    Sessions,
    /// Show each FILE in its window in the session (made and loaded if
    /// there is none), at ADDR if given, as B3 on file:addr or the
    /// plumber opens it; the windows appear in the session's UI, in the
    /// order given (as plan9port's B takes many). Prints each window's
    /// acme number, a line a file.
    Open {
        /// The session (default main).
        #[arg(short = 's', default_value = "main")]
        session: String,
        /// FILE or FILE:ADDR (file.c:12, file.c:/main/); relative to the
        /// current directory.
        #[arg(required = true)]
        files: Vec<String>,
    },
    /// As open, then wait until the window is closed: for $EDITOR (as
    /// plan9port's E), so `git commit` edits its message in apex.
    Edit {
        /// The session (default main).
        #[arg(short = 's', default_value = "main")]
        session: String,
        /// FILE or FILE:ADDR.
        file: String,
    },
    /// Reach the sessions of another machine over ssh: run `apexd
    /// --stdio` there (through the system's ssh, its config, keys and
    /// agent) and post the connection here as apex.HOST, and acme.HOST
    /// for its acme tree, for apex, 9p, 9pfuse, apex-mnt and apex-ui to
    /// use. It stays in the background, reconnecting when ssh drops,
    /// until --stop. $APEX_SSH is the ssh command (default ssh).
    Import {
        /// Post the connection as NAME instead (acme, or acme.*, serves
        /// the acme tree: win dials acme).
        #[arg(short = 'n', value_name = "NAME")]
        name: Option<String>,
        /// apexd on the remote machine, where it is not on the PATH
        /// there (nor uploaded).
        #[arg(long, value_name = "PATH")]
        remote_apexd: Option<String>,
        /// First copy this machine's apexd there, into
        /// ~/.local/lib/apex/apexd-VERSION, which imports then use.
        #[arg(long)]
        upload: bool,
        /// End the import of ADDR (or of -n NAME).
        #[arg(long)]
        stop: bool,
        /// The importer itself, started in the background by the others.
        #[arg(long, hide = true)]
        foreground: bool,
        /// The message size asked of the remote.
        #[arg(long, default_value_t = 1 << 20, hide = true)]
        msize: u32,
        /// With tcp!: the daemon's certificate, as apexd prints it at
        /// start (sha256:...).
        #[arg(long, value_name = "sha256:HEX")]
        pin: Option<String>,
        /// With tcp!: the file holding the token (apex token new prints
        /// it).
        #[arg(long, value_name = "FILE")]
        token: Option<std::path::PathBuf>,
        /// ssh!HOST (ssh!USER@HOST!PORT), or tcp!HOST!PORT for a daemon
        /// listening with TLS.
        addr: String,
    },
    /// Tokens for apexd's TLS listener: new [-s read|edit|full] NAME
    /// (prints what the client keeps, once), ls, rm NAME.
    Token {
        /// The daemon's state directory (default: $XDG_STATE_HOME/apex,
        /// else ~/.local/state/apex).
        #[arg(long, value_name = "DIR")]
        state: Option<std::path::PathBuf>,
        #[command(subcommand)]
        cmd: TokenCmd,
    },
    /// Attach to SESSION as a UI, lead it, make a window named NAME and
    /// type into it one rune every -i milliseconds until interrupted: a
    /// headless leader for scripts and tests. Reports `window N`,
    /// `typed SEQ`, `acked SEQ`, `fenced`, `recovered N`, `error TEXT` and, when quiet
    /// and not leading, `hash H` on standard output.
    Lead {
        /// Milliseconds between runes.
        #[arg(short = 'i', default_value_t = 10)]
        interval: u64,
        /// Milliseconds between flushes, as a UI flushes once a frame
        /// (0: after every rune).
        #[arg(short = 'f', default_value_t = 0)]
        flush: u64,
        session: String,
        name: String,
    },
}

#[derive(Subcommand, Debug)]
enum TokenCmd {
    /// Make token NAME and print it (NAME:SECRET), for the client's
    /// --token FILE; the secret is not shown again.
    New {
        /// read (reads only), edit (text and layout; nothing that runs a
        /// program or touches the daemon's files), or full.
        #[arg(short = 's', default_value = "full")]
        scope: String,
        name: String,
    },
    /// List the tokens: name and scope.
    Ls,
    /// Remove token NAME: it proves nothing from now on.
    Rm { name: String },
}

fn names(path: &str) -> Vec<&str> {
    path.split('/').filter(|s| !s.is_empty()).collect()
}

async fn open(c: &Client, root: u32, path: &str, mode: u8) -> anyhow::Result<File> {
    c.open_path(root, path, mode).await.map_err(|e| anyhow::anyhow!("open {path}: {e}"))
}

/// How many Treads `apex read` keeps in flight on a file read at its
/// offsets: enough that a TLS link seals the next reply while this one
/// is opened, and that a long link carries several replies a round trip.
const READ_AHEAD: usize = 4;

/// Whether `path` names one of the daemon's files that are read at their
/// offsets and may be big, by its shape: a buffer's or an acme window's
/// `N/body`, a terminal's `terms/N/text` or `scrollback`, a session's
/// `snapshot`. So reads may be sent ahead. Never a stream (event, log,
/// cons, a shard's entries, a plumb port, whatever its name), where a
/// read sent ahead would take what a later one was for, nor acme's data,
/// read at its addr.
fn reads_at_offsets(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let number = |p: &str| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit());
    match parts.as_slice() {
        [.., n, "body"] => number(n),
        [.., "terms", n, "text" | "scrollback"] => number(n),
        [_, "snapshot"] => true,
        _ => false,
    }
}

/// `9p stat`'s format, as plan9port's dirfmt prints it.
fn stat_line(d: &Stat) -> String {
    format!(
        "'{}' '{}' '{}' '{}' q ({:016x} {} {:02X}) m {:#o} at {} mt {} l {} t {} d {}",
        d.name, d.uid, d.gid, d.muid, d.qid.path, d.qid.vers, d.qid.ty, d.mode, d.atime, d.mtime, d.length, d.ty, d.dev
    )
}

/// plan9's `%M`: `d` (or `a` append-only, `A` auth), `l` if exclusive,
/// then rwx for owner, group and others.
fn mode_letters(mode: u32) -> String {
    let mut m = String::new();
    m.push(match mode {
        m if m & DMDIR != 0 => 'd',
        m if m & DMAPPEND != 0 => 'a',
        m if m & DMAUTH != 0 => 'A',
        _ => '-',
    });
    m.push(if mode & DMEXCL != 0 { 'l' } else { '-' });
    for shift in [6, 3, 0] {
        let bits = (mode >> shift) & 7;
        m.push(if bits & 4 != 0 { 'r' } else { '-' });
        m.push(if bits & 2 != 0 { 'w' } else { '-' });
        m.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    m
}

const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/// 9p's `%T`: `Dec  3 16:19` in local time for the last six months,
/// `Dec  3  2025` before.
fn time_of(mtime: u32, now: i64) -> String {
    let t = mtime as libc::time_t;
    // SAFETY: an all-zero tm is a valid value to be overwritten.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are to memory we own for the call.
    if unsafe { libc::localtime_r(&t, &mut tm) }.is_null() {
        return format!("{mtime}");
    }
    let month = MONTHS[tm.tm_mon.clamp(0, 11) as usize];
    match now - i64::from(mtime) < 6 * 30 * 86400 {
        true => format!("{month} {:2} {:02}:{:02}", tm.tm_mday, tm.tm_hour, tm.tm_min),
        false => format!("{month} {:2} {:5}", tm.tm_mday, tm.tm_year + 1900),
    }
}

/// A name as plan9's `%q` prints it: quoted when it has blanks or quotes.
fn quoted(name: &str) -> String {
    match name.is_empty() || name.chars().any(|c| c.is_whitespace() || c == '\'' || c == '`') {
        true => format!("'{}'", name.replace('\'', "''")),
        false => name.to_string(),
    }
}

/// `9p ls -l`'s lines: mode, type `M`, dev, owner, group, length and name,
/// the middle columns padded to their widest, as 9p prints them.
fn long_lines(entries: &[Stat], now: i64) -> Vec<String> {
    let width = |f: &dyn Fn(&Stat) -> String| entries.iter().map(|d| f(d).len()).max().unwrap_or(0);
    let (wu, wg, wl) = (width(&|d| d.uid.to_string()), width(&|d| d.gid.to_string()), width(&|d| d.length.to_string()));
    entries
        .iter()
        .map(|d| {
            format!(
                "{} M 0 {:<wu$} {:<wg$} {:>wl$} {} {}",
                mode_letters(d.mode),
                d.uid,
                d.gid,
                d.length,
                time_of(d.mtime, now),
                quoted(&d.name)
            )
        })
        .collect()
}

/// Where a dial went wrong, said so a new user knows what to do.
fn dial_error(addr: &str, e: impl std::fmt::Display) -> anyhow::Error {
    let Some(path) = addr.strip_prefix("unix!") else { return anyhow::anyhow!("dial {addr}: {e}") };
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            anyhow::anyhow!("dial {addr}: permission denied: {path} is not yours to reach")
        }
        Err(_) => anyhow::anyhow!("dial {addr}: no socket at {path}: start the daemon with apexd (or give -a)"),
        Ok(_) => anyhow::anyhow!(
            "dial {addr}: {e}: nobody serves {path}; it is stale if apexd died (start apexd again: it replaces it)"
        ),
    }
}

/// One attached connection.
struct Mount {
    c: Client,
    root: u32,
}

/// The connections a run uses, one per server, made on first use.
struct Mounts {
    addr: Option<String>,
    aname: String,
    made: Vec<(String, Mount)>,
}

impl Mounts {
    /// The server a PATH is on, and the path there (see the module doc).
    fn resolve<'p>(&self, path: &'p str) -> anyhow::Result<(String, &'p str)> {
        if let Some(a) = self.addr.as_ref().filter(|a| a.starts_with("ssh!")) {
            // Another machine's: its import, brought up if it is not.
            let dir = apex_ninep::ns::namespace_dir(None);
            return Ok((format!("unix!{}", apex_sys::remote::import(a, &dir)?.display()), path));
        }
        if let Some(a) = &self.addr {
            return Ok((apex_ninep::ns::service_address(a)?, path));
        }
        let trimmed = path.trim_start_matches('/');
        let (first, rest) = trimmed.split_once('/').unwrap_or((trimmed, ""));
        let dir = apex_ninep::ns::namespace_dir(None);
        apex_ninep::ns::check_dir(&dir)?;
        let posted = dir.join(first);
        if !first.is_empty() && std::fs::symlink_metadata(&posted).is_ok_and(|m| m.file_type().is_socket()) {
            return Ok((format!("unix!{}", posted.display()), rest));
        }
        Ok((apex_ninep::ns::service_address("apex")?, path))
    }

    async fn at(&mut self, addr: &str) -> anyhow::Result<&Mount> {
        if let Some(i) = self.made.iter().position(|(a, _)| a == addr) {
            return Ok(&self.made[i].1);
        }
        let c = dial(addr, 1 << 20).await.map_err(|e| dial_error(addr, e))?;
        let user = apex_ninep::ns::user_name();
        let root = c.attach(&user, &self.aname).await.map_err(|e| anyhow::anyhow!("attach {addr}: {e}"))?;
        self.made.push((addr.to_string(), Mount { c, root }));
        Ok(&self.made.last().expect("just pushed").1)
    }

    /// The connection and the path there for a user's PATH.
    async fn path<'p>(&mut self, path: &'p str) -> anyhow::Result<(Client, u32, &'p str)> {
        let (addr, rest) = self.resolve(path)?;
        let m = self.at(&addr).await?;
        Ok((m.c.clone(), m.root, rest))
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let mut mounts = Mounts { addr: args.addr, aname: args.aname, made: Vec::new() };
    let mut out = std::io::stdout().lock();
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
    match args.cmd {
        // Its own runtimes (the importer's, many threads), on a thread
        // outside this one's.
        cmd @ Cmd::Import { .. } => {
            let said =
                std::thread::spawn(move || import(cmd)).join().map_err(|_| anyhow::anyhow!("import panicked"))??;
            if !said.is_empty() {
                writeln!(out, "{said}")?;
            }
        }
        Cmd::Token { state, cmd } => {
            let said = token(cmd, state)?;
            if !said.is_empty() {
                writeln!(out, "{said}")?;
            }
        }
        Cmd::Ls { long, path } => {
            let paths = if path.is_empty() { vec![String::new()] } else { path };
            for p in paths {
                let (c, root, at) = mounts.path(&p).await?;
                let (fid, _) = c.walk(root, &names(at)).await.map_err(|e| anyhow::anyhow!("ls {p}: {e}"))?;
                let st = c.stat(fid).await?;
                let entries = if st.mode & DMDIR != 0 {
                    let f = c.open(fid, OREAD).await?;
                    let mut v = c.read_dir(&f).await?;
                    v.sort_by(|a, b| a.name.cmp(&b.name));
                    v
                } else {
                    vec![st]
                };
                c.clunk(fid).await?;
                let lines = match long {
                    true => long_lines(&entries, now),
                    false => entries.into_iter().map(|d| d.name.into_string()).collect(),
                };
                for line in lines {
                    writeln!(out, "{line}")?;
                }
            }
        }
        Cmd::Read { path } => {
            let (c, root, at) = mounts.path(&path).await?;
            let f = open(&c, root, at, OREAD).await?;
            let failed = |e| anyhow::anyhow!("read {path}: {e}");
            if reads_at_offsets(at) {
                c.read_ahead(&f, READ_AHEAD, |chunk| out.write_all(chunk).and_then(|()| out.flush()))
                    .await
                    .map_err(failed)?;
            } else {
                let mut offset = 0u64;
                loop {
                    let chunk = c.read(f.fid, offset, f.iounit).await.map_err(failed)?;
                    if chunk.is_empty() {
                        break;
                    }
                    offset += chunk.len() as u64;
                    out.write_all(&chunk)?;
                    out.flush()?;
                }
            }
        }
        Cmd::Write { lines, path } => {
            let (c, root, at) = mounts.path(&path).await?;
            let f = open(&c, root, at, OWRITE).await?;
            let mut stdin = std::io::stdin().lock();
            let mut offset = 0u64;
            let mut write = async |data: &[u8]| -> anyhow::Result<()> {
                c.write(f.fid, offset, data).await.map_err(|e| anyhow::anyhow!("write {path}: {e}"))?;
                offset += data.len() as u64;
                Ok(())
            };
            if lines {
                // One write per line, its newline included, as 9p write -l;
                // a refused line is reported and the rest go on.
                let mut line = Vec::new();
                while stdin.read_until(b'\n', &mut line)? > 0 {
                    if let Err(e) = write(&line).await {
                        eprintln!("apex: {e}");
                    }
                    line.clear();
                }
            } else {
                // Each write filled to the iounit while more input comes
                // at once (a pipe's reads come 64 KiB at a time, and a bulk
                // copy should not go in writes that small); what came is
                // written when no more does for a moment, so typed lines
                // go as they are typed.
                let mut buf = vec![0u8; f.iounit as usize];
                let mut ended = false;
                while !ended {
                    let mut n = 0;
                    // A trickle (`tail -f`) is held no longer than 50 ms
                    // from its first byte.
                    let mut first: Option<std::time::Instant> = None;
                    let fresh = |first: Option<std::time::Instant>| {
                        first.is_some_and(|t| t.elapsed() < std::time::Duration::from_millis(50))
                    };
                    while n < buf.len() && (n == 0 || (fresh(first) && more_input_soon())) {
                        match stdin.read(&mut buf[n..]) {
                            Ok(0) => {
                                ended = true;
                                break;
                            }
                            Ok(k) => {
                                first.get_or_insert_with(std::time::Instant::now);
                                n += k;
                            }
                            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                            Err(e) => return Err(e.into()),
                        }
                    }
                    if n > 0 {
                        write(&buf[..n]).await?;
                    }
                }
            }
        }
        Cmd::Rdwr { path } => {
            let (c, root, at) = mounts.path(&path).await?;
            let f = open(&c, root, at, ORDWR).await?;
            let mut lines = std::io::stdin().lock();
            loop {
                match c.read(f.fid, 0, f.iounit).await {
                    Ok(chunk) => {
                        out.write_all(&chunk)?;
                        out.write_all(b"\n")?;
                    }
                    Err(e) => eprintln!("apex: read {path}: {e}"),
                }
                out.flush()?;
                let mut line = Vec::new();
                if lines.read_until(b'\n', &mut line)? == 0 {
                    break;
                }
                if line.last() == Some(&b'\n') {
                    line.pop();
                }
                if let Err(e) = c.write(f.fid, 0, &line).await {
                    eprintln!("apex: write {path}: {e}");
                }
            }
        }
        Cmd::Stat { path } => {
            let (c, root, at) = mounts.path(&path).await?;
            let (fid, _) = c.walk(root, &names(at)).await.map_err(|e| anyhow::anyhow!("stat {path}: {e}"))?;
            let st = c.stat(fid).await?;
            c.clunk(fid).await?;
            writeln!(out, "{}", stat_line(&st))?;
        }
        Cmd::New { name } => {
            let (c, root, _) = mounts.path("").await?;
            match name {
                Some(n) => {
                    let f = open(&c, root, "ctl", OWRITE).await?;
                    c.write(f.fid, 0, format!("new {n}\n").as_bytes())
                        .await
                        .map_err(|e| anyhow::anyhow!("new {n}: {e}"))?;
                    writeln!(out, "{n}")?;
                }
                None => {
                    let f = open(&c, root, "new", OREAD).await?;
                    out.write_all(&c.read_all(&f).await?)?;
                }
            }
        }
        Cmd::Sessions => {
            let (c, root, _) = mounts.path("").await?;
            let f = open(&c, root, "index", OREAD).await?;
            out.write_all(&c.read_all(&f).await?)?;
        }
        Cmd::Open { session, files } => {
            let (c, root, _) = mounts.path("").await?;
            open_files(&c, root, &session, &files, &mut out).await?;
        }
        Cmd::Edit { session, file } => {
            let (c, root, _) = mounts.path("").await?;
            // The log is opened first: the window's del cannot come
            // before it is read from.
            let log = open(&c, root, &format!("{session}/acme/log"), OREAD).await?;
            let number = open_file(&c, root, &session, &file).await?;
            wait_for_del(&c, &log, number).await?;
        }
        Cmd::Lead { interval, flush, session, name } => {
            drop(out);
            let (c, _, _) = mounts.path("").await?;
            lead(&c, &session, &name, interval, flush).await?;
        }
    }
    Ok(())
}

/// At most how many files one write of the session's ctl opens: the
/// daemon opens a write's files one after another, in order, and answers
/// with their windows' numbers, so a batch costs one round trip, not one
/// a file.
const OPENS_PER_WRITE: usize = 64;

/// `apex open` of `files`, in the order given (so their windows are
/// placed in that order, as plan9port's B places them), in batches of
/// [`OPENS_PER_WRITE`] through one fid of the session's ctl; each
/// window's number printed, a line a file. A batch the daemon refuses is
/// said, then opened again a file at a time (a file already shown is
/// found, not opened twice), so the rest are still opened and each file
/// that cannot be is said; the command then fails.
async fn open_files(
    c: &Client,
    root: u32,
    session: &str,
    files: &[String],
    out: &mut impl Write,
) -> anyhow::Result<()> {
    let ctl = format!("{session}/ctl");
    let f = open(c, root, &ctl, ORDWR).await?;
    let mut failed = 0;
    let mut rest = files;
    while !rest.is_empty() {
        // As many as fit one write (a line cut between writes would be
        // two ctl messages).
        let mut lines = String::new();
        let mut n = 0;
        for file in rest.iter().take(OPENS_PER_WRITE) {
            let line = format!("open {}\n", absolute(file)?);
            if n > 0 && lines.len() + line.len() > f.iounit as usize {
                break;
            }
            lines.push_str(&line);
            n += 1;
        }
        let (batch, after) = rest.split_at(n);
        rest = after;
        let answered = async {
            c.write(f.fid, 0, lines.as_bytes()).await?;
            let reply = c.read(f.fid, 0, f.iounit).await?;
            Ok::<_, apex_ninep::ClientError>(String::from_utf8_lossy(&reply).into_owned())
        };
        let numbers = match answered.await {
            Ok(reply) => reply.lines().map(|l| l.trim().parse::<u32>().ok()).collect::<Option<Vec<u32>>>(),
            Err(e) => {
                // The daemon's refusal names the file it stopped at (whose
                // window acme's way is made, empty: found again below).
                out.flush()?;
                eprintln!("apex: {e}");
                failed += 1;
                None
            }
        };
        match numbers.filter(|ns| ns.len() == batch.len()) {
            Some(ns) => ns.iter().try_for_each(|n| writeln!(out, "{n}"))?,
            None => {
                for file in batch {
                    match open_file(c, root, session, file).await {
                        Ok(number) => writeln!(out, "{number}")?,
                        Err(e) => {
                            out.flush()?;
                            eprintln!("apex: {file}: {e}");
                            failed += 1;
                        }
                    }
                }
            }
        }
    }
    let _ = c.clunk(f.fid).await;
    out.flush()?;
    match failed {
        0 => Ok(()),
        n => anyhow::bail!("open: {n} of {} files not opened", files.len()),
    }
}

/// `file` (`FILE` or `FILE:ADDR`) with its name made absolute: the daemon
/// has no current directory of ours.
fn absolute(file: &str) -> anyhow::Result<String> {
    let (name, address) = apex_core::look::file_and_addr(file);
    let path = std::env::current_dir()?.join(name).display().to_string();
    Ok(match address {
        Some(a) => format!("{path}:{a}"),
        None => path,
    })
}

/// `apex open`: asks session `session`'s ctl to open `file` (made
/// absolute here: the daemon has no current directory of ours); the
/// window's acme number.
async fn open_file(c: &Client, root: u32, session: &str, file: &str) -> anyhow::Result<u32> {
    let path = absolute(file)?;
    let ctl = format!("{session}/ctl");
    let f = open(c, root, &ctl, ORDWR).await?;
    c.write(f.fid, 0, format!("open {path}\n").as_bytes()).await.map_err(|e| anyhow::anyhow!("open {file}: {e}"))?;
    let reply = c.read(f.fid, 0, f.iounit).await?;
    c.clunk(f.fid).await?;
    let reply = String::from_utf8_lossy(&reply);
    reply.trim().parse().map_err(|_| anyhow::anyhow!("open {file}: {ctl} answered {reply:?}, not a window number"))
}

/// `apex edit`: reads acme's `log` until window `number` is deleted (a
/// line `N del NAME`), as plan9port's E waits.
async fn wait_for_del(c: &Client, log: &File, number: u32) -> anyhow::Result<()> {
    loop {
        let line = c.read(log.fid, 0, log.iounit).await?;
        if line.is_empty() {
            anyhow::bail!("edit: the session ended before window {number} was closed");
        }
        let line = String::from_utf8_lossy(&line);
        let mut words = line.split_whitespace();
        if words.next() == Some(&number.to_string()) && words.next() == Some("del") {
            return Ok(());
        }
    }
}

/// `apex lead`: see its help.
async fn lead(c: &Client, session: &str, name: &str, interval: u64, flush_every: u64) -> anyhow::Result<()> {
    use apex_core::{make, AttachmentKind, BufferOp, Op, Origin, Shard};
    use apex_fsd::attach::{conn::Attached, link::Event};
    use std::time::Duration;
    let att = Attached::open(c, session, AttachmentKind::Ui, "apex lead").await.map_err(anyhow::Error::msg)?;
    if !att.wait_for(Duration::from_secs(30), |l| l.leads(Shard::Layout)).await {
        anyhow::bail!("lead: the layout lease was not granted (is another UI holding it?)");
    }
    let body = att
        .with(|l| make::new_window(l.node_mut().expect("welcomed"), None, None, name).map(|w| w.body))
        .map_err(|e| anyhow::anyhow!("lead: {e}"))?;
    att.flush().await.map_err(anyhow::Error::msg)?;
    let mut out = std::io::stdout();
    writeln!(out, "window {}", body.0)?;
    let shard = Shard::Buffer(body);
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    let (mut count, mut acked, mut fenced, mut hash) = (0u64, 0, false, String::new());
    let mut last_flush = std::time::Instant::now();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(interval)) => {}
            _ = tokio::signal::ctrl_c() => break,
            _ = term.recv() => break,
        }
        let typed = att.with(|l| {
            if l.leads(shard) {
                let len = l.node().and_then(|n| n.state.buffer(body).ok()).map_or(0, |b| b.len());
                let rune = if count % 60 == 59 { "\n".to_string() } else { (count % 10).to_string() };
                let op = BufferOp::Splice { q0: len, q1: len, text: rune, origin: Origin::Keyboard };
                count += 1;
                if let Some(n) = l.node_mut() {
                    return n.append(shard, Op::Buffer(op)).ok().map(|e| e.seq);
                }
            }
            None
        });
        if let Some(seq) = typed {
            writeln!(out, "typed {seq}")?;
        }
        if last_flush.elapsed() >= Duration::from_millis(flush_every) {
            let _ = att.flush().await;
            last_flush = std::time::Instant::now();
        }
        // Acks count while it leads: after a Welcome the marks are the
        // daemon's, others' entries included.
        let (now_acked, now_fenced, events, quiet) =
            att.with(|l| (if l.leads(shard) { l.acked(shard) } else { 0 }, l.fenced(), l.events(), l.quiet()));
        if now_acked > acked {
            acked = now_acked;
            writeln!(out, "acked {acked}")?;
        }
        if now_fenced && !fenced {
            writeln!(out, "fenced")?;
        }
        fenced = now_fenced;
        for e in events {
            match e {
                Event::Recovered { into, .. } => writeln!(out, "recovered {}", into.0)?,
                Event::Error(text) => writeln!(out, "error {text}")?,
                _ => {}
            }
        }
        if quiet && fenced {
            let h = att.with(|l| {
                l.node().map(|n| apex_sys::statehash::state_hash(&n.state).to_hex().to_string()).unwrap_or_default()
            });
            if h != hash {
                writeln!(out, "hash {h}")?;
                hash = h;
            }
        }
        out.flush()?;
    }
    att.close().await;
    Ok(())
}

fn main() {
    // As 9p does: a reader that goes away (`apex read f | sed 1q`) ends
    // this quietly, by SIGPIPE, rather than with "Broken pipe" said; a
    // server that goes away is still an error, said (the 9P client's
    // writes never raise SIGPIPE).
    // SAFETY: a signal's disposition set to its default, before any
    // thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // Large reads and writes reuse their buffers (see the daemon's policy).
    apex_sys::malloc::keep_freed_memory();
    let args = Args::parse();
    if matches!(args.cmd, Cmd::Import { foreground: true, .. }) {
        // The importer: TLS's copies at full speed.
        apex_sys::tunables::copy_without_slow_rep_movsb();
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    if let Err(e) = rt.block_on(run(args)) {
        eprintln!("apex: {e}");
        std::process::exit(1);
    }
}

/// Whether standard input has more to read within a moment (or has
/// ended): a writer that keeps a pipe full refills it well within that.
fn more_input_soon() -> bool {
    let mut fd = libc::pollfd { fd: 0, events: libc::POLLIN, revents: 0 };
    // SAFETY: poll(2) on one pollfd that lives for the call.
    unsafe { libc::poll(&mut fd, 1, 10) > 0 }
}

/// `apex import`: starts the importer in the background (or is it, with
/// --foreground), or stops it; what it did, to say.
fn import(cmd: Cmd) -> anyhow::Result<String> {
    let Cmd::Import { name, remote_apexd, upload, stop, foreground, msize, pin, token, addr } = cmd else {
        unreachable!("called for import only")
    };
    let command =
        apex_fsd::import::start::Command { name, remote_apexd, upload, stop, foreground, msize, pin, token, addr };
    if foreground {
        // Writes to a local client that went away fail, and are no signal.
        // SAFETY: a signal's disposition set; no handler of ours runs.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_IGN);
        }
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()))
            .with_writer(std::io::stderr)
            .init();
    }
    Ok(apex_fsd::import::start::command(command)?)
}

/// `apex token`: tokens for the TLS listener, in the state directory.
fn token(cmd: TokenCmd, state: Option<std::path::PathBuf>) -> anyhow::Result<String> {
    use apex_fsd::access::{tokens::Tokens, Scope};
    let dir = state
        .or_else(apex_fsd::persist::default_dir)
        .ok_or_else(|| anyhow::anyhow!("no state directory: set $XDG_STATE_HOME or $HOME, or give --state DIR"))?;
    let tokens = Tokens::new(&dir);
    Ok(match cmd {
        TokenCmd::New { scope, name } => tokens.create(&name, Scope::parse(&scope)?)?,
        TokenCmd::Ls => {
            tokens.list()?.iter().map(|t| format!("{} {}", t.name, t.scope.name())).collect::<Vec<_>>().join("\n")
        }
        TokenCmd::Rm { name } => {
            tokens.remove(&name)?;
            format!("apex token: removed {name}")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::reads_at_offsets;

    #[test]
    fn only_files_read_at_their_offsets_are_read_ahead() {
        for path in ["main/buffers/3/body", "acme/12/body", "work/acme/1/body", "main/terms/2/text"] {
            assert!(reads_at_offsets(path), "{path}");
        }
        assert!(reads_at_offsets("main/terms/2/scrollback") && reads_at_offsets("main/snapshot"));
        for path in [
            "main/plumb/body",
            "main/plumb/text",
            "main/plumb/snapshot",
            "acme/12/event",
            "acme/log",
            "main/shards/buffer-3/entries",
            "main/terms/2/cons",
            "acme/12/data",
            "body",
        ] {
            assert!(!reads_at_offsets(path), "{path}");
        }
    }
}
