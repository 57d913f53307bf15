//! apex: a 9P client for scripts, in the shape of plan9port's 9p(1).
//!
//! `apex [-a ADDR] ls [-l] PATH`, `read PATH`, `write PATH`, `rdwr PATH`,
//! `stat PATH`, plus `apex new [NAME]` and `apex sessions`. PATH starts at
//! the service root. ADDR is `unix!PATH`, `tcp!HOST!PORT`, or a service
//! name in the namespace directory; the default is the posted `apex`.
//! Errors go to stderr as `apex: ...` with exit status 1, as 9p's do.

use apex_ninep::fcall::{Stat, DMDIR, ORDWR, OREAD, OWRITE};
use apex_ninep::{dial, Client, File};
use clap::{Parser, Subcommand};
use std::io::{BufRead, Read, Write};

#[derive(Parser, Debug)]
#[command(name = "apex", about = "Read and write an apex daemon's files (like 9p(1))", version)]
struct Args {
    /// Server address: unix!PATH, tcp!HOST!PORT, or a service name posted
    /// in the namespace directory (default: apex).
    #[arg(short = 'a', value_name = "ADDR", default_value = "apex")]
    addr: String,
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
    /// Copy standard input to a file, one write per input read.
    Write { path: String },
    /// Alternately print what a read returns and write a line of input.
    Rdwr { path: String },
    /// Print a file's directory entry.
    Stat { path: String },
    /// Make a session (named NAME, or a fresh name) and print its name.
    New { name: Option<String> },
    /// List the sessions (the root's index).
    Sessions,
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

fn names(path: &str) -> Vec<&str> {
    path.split('/').filter(|s| !s.is_empty()).collect()
}

async fn open(c: &Client, root: u32, path: &str, mode: u8) -> anyhow::Result<File> {
    c.open_path(root, path, mode).await.map_err(|e| anyhow::anyhow!("open {path}: {e}"))
}

/// `9p stat`'s format, as plan9port's dirfmt prints it.
fn stat_line(d: &Stat) -> String {
    format!(
        "'{}' '{}' '{}' '{}' q ({:016x} {} {:02X}) m {:#o} at {} mt {} l {} t {} d {}",
        d.name, d.uid, d.gid, d.muid, d.qid.path, d.qid.vers, d.qid.ty, d.mode, d.atime, d.mtime, d.length, d.ty, d.dev
    )
}

/// `ls -l`'s line: mode letters, then as 9p prints them.
fn long_line(d: &Stat) -> String {
    let mut m = String::new();
    m.push(if d.mode & DMDIR != 0 { 'd' } else { '-' });
    m.push('-');
    for shift in [6, 3, 0] {
        let bits = (d.mode >> shift) & 7;
        m.push(if bits & 4 != 0 { 'r' } else { '-' });
        m.push(if bits & 2 != 0 { 'w' } else { '-' });
        m.push(if bits & 1 != 0 { 'x' } else { '-' });
    }
    format!("{m} M {} {} {} {} {} {}", d.dev, d.uid, d.gid, d.length, d.mtime, d.name)
}

async fn run(args: Args) -> anyhow::Result<()> {
    let c = dial(&apex_ninep::ns::service_address(&args.addr), 1 << 20)
        .await
        .map_err(|e| anyhow::anyhow!("dial {}: {e}", args.addr))?;
    let user = apex_ninep::ns::user_name();
    let root = c.attach(&user, &args.aname).await.map_err(|e| anyhow::anyhow!("attach: {e}"))?;
    let mut out = std::io::stdout().lock();
    match args.cmd {
        Cmd::Ls { long, path } => {
            let paths = if path.is_empty() { vec![String::new()] } else { path };
            for p in paths {
                let (fid, _) = c.walk(root, &names(&p)).await.map_err(|e| anyhow::anyhow!("ls {p}: {e}"))?;
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
                for d in entries {
                    writeln!(out, "{}", if long { long_line(&d) } else { d.name })?;
                }
            }
        }
        Cmd::Read { path } => {
            let f = open(&c, root, &path, OREAD).await?;
            let mut offset = 0u64;
            loop {
                let chunk = c.read(f.fid, offset, f.iounit).await.map_err(|e| anyhow::anyhow!("read {path}: {e}"))?;
                if chunk.is_empty() {
                    break;
                }
                offset += chunk.len() as u64;
                out.write_all(&chunk)?;
                out.flush()?;
            }
        }
        Cmd::Write { path } => {
            let f = open(&c, root, &path, OWRITE).await?;
            let mut stdin = std::io::stdin().lock();
            let mut buf = vec![0u8; f.iounit as usize];
            let mut offset = 0u64;
            loop {
                let n = stdin.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                c.write(f.fid, offset, &buf[..n]).await.map_err(|e| anyhow::anyhow!("write {path}: {e}"))?;
                offset += n as u64;
            }
        }
        Cmd::Rdwr { path } => {
            let f = open(&c, root, &path, ORDWR).await?;
            let mut lines = std::io::stdin().lock();
            loop {
                let chunk = c.read(f.fid, 0, f.iounit).await.map_err(|e| anyhow::anyhow!("read {path}: {e}"))?;
                out.write_all(&chunk)?;
                out.flush()?;
                let mut line = String::new();
                if lines.read_line(&mut line)? == 0 {
                    break;
                }
                c.write(f.fid, 0, line.as_bytes()).await.map_err(|e| anyhow::anyhow!("write {path}: {e}"))?;
            }
        }
        Cmd::Stat { path } => {
            let (fid, _) = c.walk(root, &names(&path)).await.map_err(|e| anyhow::anyhow!("stat {path}: {e}"))?;
            let st = c.stat(fid).await?;
            c.clunk(fid).await?;
            writeln!(out, "{}", stat_line(&st))?;
        }
        Cmd::New { name } => match name {
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
        },
        Cmd::Sessions => {
            let f = open(&c, root, "index", OREAD).await?;
            out.write_all(&c.read_all(&f).await?)?;
        }
        Cmd::Lead { interval, flush, session, name } => {
            drop(out);
            lead(&c, &session, &name, interval, flush).await?;
        }
    }
    Ok(())
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
            let h = att.with(|l| l.node().map(|n| n.state.hash().to_hex().to_string()).unwrap_or_default());
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

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args = Args::parse();
    if let Err(e) = run(args).await {
        eprintln!("apex: {e}");
        std::process::exit(1);
    }
}
