//! apex-mnt: mounts a 9P2000 server with FUSE.
//!
//! `apex-mnt [-a ANAME] [ADDR] MOUNTPOINT`: ADDR is `unix!PATH`,
//! `tcp!HOST!PORT`, or a service posted in the namespace directory
//! (default `apex`). Runs in the foreground until SIGINT or SIGTERM, the
//! server going away, or an unmount from outside; then it leaves the
//! mount point as it found it.

mod attr;
mod errno;
mod fs;
mod handles;
mod inflight;
mod inodes;
mod readahead;

use anyhow::Context;
use clap::Parser;
use fuse3::raw::Session;
use fuse3::MountOptions;
use std::path::{Path, PathBuf};

#[derive(Parser, Debug)]
#[command(name = "apex-mnt", about = "Mount a 9P2000 server (apexd by default) with FUSE", version)]
struct Args {
    /// Attach name: "" for the root of apexd's tree, NAME for a session.
    #[arg(short = 'a', value_name = "ANAME", default_value = "")]
    aname: String,
    /// Largest 9P message to ask for, in bytes.
    #[arg(long, default_value_t = 1 << 20, value_name = "BYTES")]
    msize: u32,
    /// [ADDR] MOUNTPOINT: ADDR is unix!PATH, tcp!HOST!PORT, a posted
    /// service name (default: apex), or ssh!HOST (ssh!USER@HOST!PORT):
    /// another machine's sessions, imported first (apex import).
    #[arg(num_args = 1..=2, value_name = "ADDR MOUNTPOINT", required = true)]
    places: Vec<String>,
}

/// Whether SIGHUP is ignored (started under nohup).
fn hangup_ignored() -> bool {
    // SAFETY: sigaction with no new action only writes the current one
    // into `old`, a zeroed local of the right type.
    unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        libc::sigaction(libc::SIGHUP, std::ptr::null(), &mut old) == 0 && old.sa_sigaction == libc::SIG_IGN
    }
}

/// Detaches the mount even while it is busy, so a server that went away
/// leaves a usable directory, not "Transport endpoint is not connected".
/// Nothing to do if it is no longer mounted.
fn detach(path: &Path) {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else { return };
    // SAFETY: umount2 reads a NUL-terminated path we own.
    let r = unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
    if r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM) {
        // Without root, fusermount3 does it.
        let _ = std::process::Command::new("fusermount3").arg("-u").arg("-z").arg(path).status();
    }
}

fn main() -> anyhow::Result<()> {
    // Before the runtime starts its threads.
    apex_sys::malloc::keep_freed_memory();
    tokio::runtime::Runtime::new()?.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let args = Args::parse();
    let (addr, mountpoint) = match args.places.as_slice() {
        [m] => ("apex".to_string(), PathBuf::from(m)),
        [a, m] => (a.clone(), PathBuf::from(m)),
        _ => unreachable!("clap takes one or two"),
    };
    // Another machine's sessions: imported (apex import, in the
    // background), then mounted through the posted connection.
    let address = match addr.starts_with("ssh!") {
        true => format!("unix!{}", apex_sys::remote::import(&addr, &apex_ninep::ns::namespace_dir(None))?.display()),
        false => apex_ninep::ns::service_address(&addr)?,
    };
    let client = apex_ninep::dial(&address, args.msize).await.with_context(|| format!("dial {address}"))?;
    let user = apex_ninep::ns::user_name();
    let root = client.attach(&user, &args.aname).await.with_context(|| format!("attach {:?}", args.aname))?;
    let mount = fs::Mount::new(client.clone(), root).await.context("stat the root")?;
    let inflight = mount.inflight();

    let mut options = MountOptions::default();
    // SAFETY: getuid/getgid cannot fail.
    let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
    options.fs_name("apex").uid(uid).gid(gid);
    let session = Session::new(options);
    let mut handle = match uid {
        0 => session.mount(mount, &mountpoint).await,
        _ => session.mount_with_unprivileged(mount, &mountpoint).await,
    }
    .with_context(|| format!("mount on {}", mountpoint.display()))?;
    tracing::info!(%address, mountpoint = %mountpoint.display(), "mounted");

    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    // The terminal that runs it closed: unmount, as for Ctrl-C, rather than
    // die and leave "Transport endpoint is not connected"; unless SIGHUP
    // is ignored (nohup), when it goes on.
    let mut hangup = match hangup_ignored() {
        true => None,
        false => Some(tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?),
    };
    let hung_up = async {
        match &mut hangup {
            Some(signal) => _ = signal.recv().await,
            None => std::future::pending().await,
        }
    };
    let (why, server_gone) = tokio::select! {
        r = &mut handle => {
            // Unmounted from outside (umount, fusermount3 -u): done.
            r.context("fuse session")?;
            return Ok(());
        }
        _ = client.closed() => ("the server went away", true),
        _ = tokio::signal::ctrl_c() => ("interrupted", false),
        _ = term.recv() => ("terminated", false),
        _ = hung_up => ("hung up", false),
    };
    tracing::info!(why, "unmounting");
    // Blocked readers are answered EINTR, the mount point is detached at
    // once (usable again even while files are open), and then the session
    // is given a moment to end; leaving closes /dev/fuse, which ends
    // whatever is left.
    inflight.interrupt_all();
    detach(&mountpoint);
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), handle.unmount()).await;
    if server_gone {
        eprintln!("apex-mnt: {why}; unmounted {}", mountpoint.display());
    }
    // Exit now rather than return: the runtime would wait for the session's
    // thread blocked reading /dev/fuse while a detached file is still open,
    // and exiting closes /dev/fuse, which ends the connection for good.
    std::process::exit(0)
}
