//! apexd: serves apex sessions as a 9P2000 file system.
//!
//! Posts a Unix socket named `apex` in the plan9port namespace directory
//! (and, when asked, listens on TCP), starts with one session, `main`, and
//! serves each connection until it hangs up. Logs go through tracing
//! (`RUST_LOG=info` to see sessions and refused requests).

use anyhow::Context;
use apex_fsd::fsys::Fsys;
use apex_fsd::registry::Registry;
use apex_ninep::srv::{serve_unix, Config};
use clap::Parser;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Parser, Debug)]
#[command(name = "apexd", about = "Serve apex sessions as a 9P2000 file system", version)]
struct Args {
    /// Namespace directory to post the `apex` socket in (default:
    /// $NAMESPACE, else /tmp/ns.$USER.$DISPLAY as plan9port names it).
    #[arg(long, value_name = "DIR")]
    namespace: Option<PathBuf>,
    /// Also listen on TCP, as tcp!HOST!PORT: TLS 1.3, where a client
    /// proves a token (apex token new) and pins the certificate whose
    /// fingerprint is printed at start; with --insecure, plain 9P on a
    /// loopback address.
    #[arg(long, value_name = "tcp!HOST!PORT")]
    listen: Vec<String>,
    /// Largest 9P message size to offer, in bytes (at least 256).
    #[arg(long, default_value_t = apex_ninep::version::DEFAULT_MSIZE, value_name = "BYTES")]
    msize: u32,
    /// Name of the session made at start.
    #[arg(long, default_value = "main", value_name = "NAME")]
    session: String,
    /// How long a leader has to hand over a lease another UI asked for
    /// before the server reclaims it, in milliseconds.
    #[arg(long, default_value_t = 3000, value_name = "MS")]
    lease_deadline: u64,
    /// How long an attachment whose connection dropped may resume, in
    /// seconds.
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    resume_grace: f64,
    /// The session whose acme(4) tree is posted as `acme` in the namespace
    /// directory, as acme posts itself, so unmodified acme clients (win,
    /// acme-lsp, 9p read acme/index) find it (default: --session's). The
    /// session is made if missing. Where a live server (a running acme)
    /// holds `acme` already, it is left alone.
    #[arg(long, value_name = "NAME")]
    acme: Option<String>,
    /// Post no `acme` service.
    #[arg(long, conflicts_with = "acme")]
    no_acme: bool,
    /// Post session NAME's plumber (its `plumb/` tree) as `plumb` in the
    /// namespace directory, as plan9port's plumber posts itself, so
    /// plumb(1), `9p write plumb/send` and every program that opens a
    /// plumber's port work with no plumber running. Where a live plumber
    /// holds `plumb` already, it is left alone. The session is made if
    /// missing.
    #[arg(long, value_name = "NAME")]
    plumb: Option<String>,
    /// Serve 9P on standard input and output, relayed to this user's
    /// daemon on this machine (started detached, with the other flags
    /// given here, when none answers in the namespace directory): what
    /// `ssh HOST apexd --stdio` runs, so a session outlives the ssh
    /// connection.
    #[arg(long, conflicts_with_all = ["check", "listen"])]
    stdio: bool,
    /// With --stdio: the version of the apex at the other end, which must
    /// be this one's (`apex import` says it); a different one is refused,
    /// saying both.
    #[arg(long, value_name = "VERSION", requires = "stdio")]
    client_version: Option<String>,
    /// Serve --listen as plain TCP, on loopback only, with no
    /// authentication: every user of this machine can reach it and act as
    /// you.
    #[arg(long)]
    insecure: bool,
    /// Say nothing at start (where it posted, what to try).
    #[arg(short = 'q', long)]
    quiet: bool,
    /// Keep sessions in DIR, and bring back the ones there at start
    /// (default: $XDG_STATE_HOME/apex, else ~/.local/state/apex).
    #[arg(long, value_name = "DIR", conflicts_with = "ephemeral")]
    state: Option<PathBuf>,
    /// Keep nothing: sessions end with the daemon.
    #[arg(long)]
    ephemeral: bool,
    /// When the log reaches the disk: `interval` (a sync every second,
    /// behind the acknowledgements) or `always` (each acknowledgement waits
    /// for it; writers waiting at once share one).
    #[arg(long, default_value = "interval", value_name = "POLICY")]
    sync: String,
    /// Verify the state directory (checksums; each snapshot decodes to its
    /// hash; each log replays) and report per session, changing nothing.
    #[arg(long)]
    check: bool,
    /// Start a session whose log is damaged from the entries before the
    /// damage, moving the rest aside.
    #[arg(long)]
    salvage: bool,
    /// The most bytes of one file a command reads (get, Edit's e and r,
    /// Load); larger files are refused with a message (default: the
    /// smaller of 4 GiB and half the machine's memory).
    #[arg(long, value_name = "BYTES")]
    max_file: Option<u64>,
    /// The most one command may add to a window (B2's output into
    /// +Errors, Edit's < and |); past it the command is killed and that
    /// is said.
    #[arg(long, default_value_t = apex_sys::shell::OUTPUT_MAX, value_name = "BYTES")]
    max_output: u64,
    /// Write a session's snapshot once its log has grown by this much and
    /// the session pauses (or by twice this, however busy).
    #[arg(long, default_value_t = 64 << 20, value_name = "BYTES", hide = true)]
    snapshot_bytes: u64,
    /// The most bytes open `snapshot` files of different moments may hold
    /// at once (their texts apart).
    #[arg(long, default_value_t = apex_fsd::fsys::made::SNAPSHOTS_HELD_MAX, value_name = "BYTES", hide = true)]
    snapshots_held: usize,
}

/// The state directory the flags name, or none for `--ephemeral`.
fn state_dir(args: &Args) -> anyhow::Result<Option<PathBuf>> {
    if args.ephemeral {
        return Ok(None);
    }
    match args.state.clone().or_else(apex_fsd::persist::default_dir) {
        Some(d) => Ok(Some(d)),
        None => anyhow::bail!("no state directory: set $XDG_STATE_HOME or $HOME, give --state DIR, or run --ephemeral"),
    }
}

/// The largest msize the `acme` service offers: as large as any client
/// asks in practice (plan9port's 9pserve and the Go client ask 8192 and
/// 131072).
const ACME_MSIZE: u32 = 64 << 20;

/// Serves every connection to `listener`, for as long as the daemon runs.
async fn serve_listener(listener: tokio::net::UnixListener, tree: Arc<Fsys>, config: Config) {
    let mut failing = Failing::default();
    loop {
        if let Some((conn, _)) = failing.accepted(listener.accept().await, "acme").await {
            spawn_unix(conn, tree.clone(), config.clone());
        }
    }
}

/// How long the daemon waits after an accept failed before the next.
const ACCEPT_BACKOFF: std::time::Duration = std::time::Duration::from_millis(100);

/// An accept loop's failures: said when they start (and how many there
/// were when they end), never the end of the daemon.
#[derive(Default)]
struct Failing {
    since: Option<std::time::Instant>,
    count: u64,
}

impl Failing {
    /// What an accept gave; on a failure (descriptors run out, `EMFILE`
    /// or `ENFILE`) it is said, the loop backs off and serves on.
    async fn accepted<T>(&mut self, r: std::io::Result<T>, listener: &str) -> Option<T> {
        match r {
            Ok(conn) => {
                if let Some(since) = self.since.take() {
                    tracing::error!(
                        listener,
                        refused = self.count,
                        for_ms = since.elapsed().as_millis() as u64,
                        "accepting again"
                    );
                    self.count = 0;
                }
                Some(conn)
            }
            Err(e) => {
                if self.since.is_none() {
                    let short = matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE));
                    let fds = apex_sys::fds::usage().map(|(open, limit)| format!("{open} of {limit} open"));
                    tracing::error!(
                        listener,
                        error = %e,
                        descriptors = fds.unwrap_or_default(),
                        out_of_descriptors = short,
                        "cannot accept a connection; backing off and serving on"
                    );
                    self.since = Some(std::time::Instant::now());
                }
                self.count += 1;
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                None
            }
        }
    }
}

/// Serves one Unix connection (Topenfd included) in a task of its own.
fn spawn_unix(conn: tokio::net::UnixStream, tree: Arc<Fsys>, config: Config) {
    tokio::spawn(async move {
        if let Err(e) = serve_unix(tree, conn, config).await {
            tracing::info!(error = %e, "connection closed");
        }
    });
}

/// Posts `acme`, serving session `name`'s acme tree, and says whether it
/// did. A live server holding `acme` (a running plan9port acme) is left
/// alone, and so is any other reason it cannot be posted: apexd serves on
/// without it, and says why.
fn post_acme(dir: &std::path::Path, tree: &Arc<Fsys>, name: &str, quiet: bool) -> bool {
    post_service(dir, "acme", Arc::new(tree.acme_service(name)), name, quiet)
}

/// Posts `service` (`acme` or `plumb`), serving `tree` (its root: session
/// `name`'s acme tree or plumber), and says whether it did. A live server
/// holding the name (a running acme or plumber) is left alone, and so is
/// any other reason it cannot be posted: apexd serves on without it, and
/// says why.
fn post_service(dir: &std::path::Path, service: &str, tree: Arc<Fsys>, name: &str, quiet: bool) -> bool {
    let listener = match apex_fsd::fsys::post::post(dir, service) {
        Ok(l) => l,
        Err(e) => {
            let why = match e {
                apex_fsd::fsys::post::PostError::Live { path } => format!(
                    "{} is served already (a running {}?): left alone; session {name}'s is at {name}/{service} in apex",
                    path.display(),
                    if service == "plumb" { "plumber" } else { service },
                ),
                e => format!("{service} not posted: {e}"),
            };
            tracing::warn!("{why}");
            if !quiet {
                eprintln!("apexd: {why}");
            }
            return false;
        }
    };
    let no_auth = format!("{service}: authentication not required");
    let config = Config { msize: ACME_MSIZE, no_auth, auth: None };
    tracing::info!(socket = %dir.join(service).display(), session = %name, "serving {service}");
    tree.daemon.services.lock().expect("services lock").push((service.to_string(), name.to_string()));
    tokio::spawn(serve_listener(listener, tree, config));
    true
}

/// What apexd says when it starts: where it is, and what to try.
/// What a TCP listener gives away, said at start whenever one is open
/// (until authenticated remote access replaces it).
fn tcp_warning(addr: &std::net::SocketAddr) -> String {
    format!(
        "apexd: WARNING: tcp!{}!{} has no authentication: every user of this machine can connect to it and act \
         as you: run commands (exec, term), and read and write your files (get, put). Use the namespace \
         directory's socket to keep sessions to yourself.",
        addr.ip(),
        addr.port()
    )
}

fn greeting(session: &str, acme: Option<&str>, posted: &[std::path::PathBuf]) -> String {
    let mut g = String::new();
    for p in posted {
        g += &format!("apexd: posted unix!{}\n", p.display());
    }
    g += &format!("apexd: serving session {session}; try, in another terminal:\n");
    // The tools are built beside apexd; say where if the shell would not
    // find them.
    let beside = std::env::current_exe().ok().and_then(|e| e.parent().map(|d| d.to_path_buf()));
    let on_path = |name: &str| {
        std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
    };
    if let Some(dir) = beside.filter(|d| d.join("apex").is_file() && !on_path("apex")) {
        g += &format!("    {:<32} # apex and apex-mnt are there\n", format!("export PATH={}:$PATH", dir.display()));
    }
    let tries = [
        (format!("apex ls {session}"), "its files".to_string()),
        (format!("apex read {session}/acme/index"), "its windows, as acme lists them".to_string()),
        ("apex read acme/index".to_string(), "the same from the posted acme service, as 9p reads it".to_string()),
        ("apex-mnt /tmp/apex &".to_string(), "mount it (mkdir /tmp/apex first), then ls /tmp/apex".to_string()),
    ];
    for (cmd, what) in tries.iter().filter(|(c, _)| acme.is_some() || !c.contains(" acme/")) {
        g += &format!("    {cmd:<32} # {what}\n");
    }
    g += "apexd: Ctrl-C stops it; -q says nothing; RUST_LOG=info logs every connection\n";
    g
}

fn main() -> anyhow::Result<()> {
    // A terminal's keeper: this binary, run by apexd itself.
    let argv: Vec<String> = std::env::args().collect();
    if argv.get(1).map(String::as_str) == Some(apex_fsd::pty::keeper::ARG) {
        apex_fsd::pty::keeper::main(&argv[2..]);
    }
    let args = Args::parse();
    if args.stdio {
        // The daemon's flags, for one started here; --stdio is this
        // relay's alone.
        if let Some(theirs) = &args.client_version {
            apex_fsd::stdio::check_version(theirs)?;
        }
        let mut flags = apex_fsd::stdio::daemon_flags(&argv[1..]);
        if !flags.iter().any(|a| a == "-q" || a == "--quiet") {
            flags.push("-q".into());
        }
        let dir = apex_fsd::stdio::namespace_dir(args.namespace.as_deref());
        apex_fsd::stdio::relay(&dir, &flags)?;
        return Ok(());
    }
    // Before the runtime starts its threads: TLS's copies at full speed
    // (this may start the daemon again, as it was started), and the
    // malloc policy.
    apex_sys::tunables::copy_without_slow_rep_movsb();
    apex_sys::malloc::keep_freed_memory();
    // Room for many connections and terminals; what it runs gets the
    // limit back.
    let limits = apex_sys::fds::raise();
    tokio::runtime::Runtime::new()?.block_on(run(limits))
}

async fn run(limits: Option<(u64, u64)>) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    if let Some((before, after)) = limits {
        tracing::info!(before, after, "descriptor limit");
    }
    let args = Args::parse();
    anyhow::ensure!(args.max_output > 0, "--max-output 0: give the most bytes one command may add");
    apex_sys::shell::set_output_max(args.max_output);
    if let Some(bytes) = args.max_file {
        anyhow::ensure!(bytes > 0, "--max-file 0: give the most bytes of one file a command may read");
        apex_sys::files::set_max_file(bytes);
    }
    if args.check {
        let Some(dir) = state_dir(&args)? else {
            anyhow::bail!("--check reads a state directory; --ephemeral has none")
        };
        let (report, ok) = apex_fsd::persist::check::check(&dir);
        print!("{report}");
        std::process::exit(if ok { 0 } else { 1 });
    }
    let sync = apex_fsd::persist::durable::SyncPolicy::parse(&args.sync).map_err(anyhow::Error::msg)?;
    anyhow::ensure!(args.msize >= apex_ninep::version::MIN_MSIZE, "--msize {} is too small: at least 256", args.msize);
    // Each TCP listener's address and, unless --insecure, its TLS
    // identity: made (or refused) before anything is posted.
    let mut listen = Vec::new();
    for given in &args.listen {
        let addr = apex_fsd::listen::parse(given, args.insecure)?;
        let tls = match args.insecure {
            true => None,
            false => Some(apex_fsd::listen::Tls::new(given, state_dir(&args)?)?),
        };
        listen.push((given.clone(), addr, tls));
    }
    let dir = apex_ninep::ns::namespace_dir(args.namespace.as_deref());
    let mut registry = Registry::new(Box::new(|| *uuid::Uuid::new_v4().as_bytes()));
    anyhow::ensure!(
        args.resume_grace.is_finite() && args.resume_grace >= 0.0,
        "--resume-grace {} is not a number of seconds",
        args.resume_grace
    );
    registry.attach = apex_fsd::attach::hub::HubConfig {
        deadline_ms: args.lease_deadline,
        grace_ms: (args.resume_grace * 1000.0) as u64,
    };
    if let Some(dir) = state_dir(&args)? {
        let started = std::time::Instant::now();
        let options = apex_fsd::persist::Options { sync, snapshot_bytes: args.snapshot_bytes, salvage: args.salvage };
        let store = apex_fsd::persist::Store::open(&dir, options)?;
        let r = registry.restore(store)?;
        tracing::info!(
            state = %dir.display(),
            sessions = r.sessions,
            entries = r.entries,
            held_back = r.held_back,
            took_ms = started.elapsed().as_millis() as u64,
            "restored"
        );
        if r.sessions > 0 && !args.quiet {
            eprintln!(
                "apexd: restored {} session(s), {} log entries, from {} in {} ms",
                r.sessions,
                r.entries,
                dir.display(),
                started.elapsed().as_millis()
            );
        }
    }
    let acme_session = (!args.no_acme).then(|| args.acme.clone().unwrap_or_else(|| args.session.clone()));
    for name in std::iter::once(args.session.as_str()).chain(acme_session.as_deref()).chain(args.plumb.as_deref()) {
        // A session kept but not brought back keeps its name (said above).
        if registry.by_name(name).is_none() && !registry.is_held_back(name) {
            registry.create(Some(name)).map_err(anyhow::Error::msg)?;
        }
    }
    let mut tree = Fsys::new(registry, &apex_ninep::ns::user_name());
    tree.snapshots = apex_fsd::fsys::made::SharedSnapshots::at_most(args.snapshots_held);
    // A plumber another program posts is the one B3 tries after the
    // session's; where this daemon posts its own, there is no other.
    let plumb_socket = dir.join("plumb");
    let plumber_runs = std::os::unix::net::UnixStream::connect(&plumb_socket).is_ok();
    tree.system_plumber = (args.plumb.is_none() || plumber_runs).then(|| plumb_socket.clone());
    let tree = Arc::new(tree);
    // Terminals their keepers kept while no daemon ran go on.
    apex_fsd::term::drive::start_taken_up(&tree.daemon);
    // A log that grew past the snapshot size over restarts is snapshotted.
    tree.daemon.snapshot_restored();
    let config = Config { msize: args.msize, ..Config::default() };
    // `acme` first, then `apex`: whoever finds `apex` answering (apex-ui,
    // waiting for the daemon it started) finds `acme` there too. Both
    // once the state directory is ours and read: a second daemon on it,
    // refused, leaves no socket behind.
    let apex_socket = dir.join("apex");
    if std::os::unix::net::UnixStream::connect(&apex_socket).is_ok() {
        return Err(apex_fsd::fsys::post::PostError::Live { path: apex_socket }.into());
    }
    let acme_posted = match &acme_session {
        Some(name) => post_acme(&dir, &tree, name, args.quiet).then_some(name.as_str()),
        None => None,
    };
    let plumb_posted = match &args.plumb {
        Some(name) => post_service(&dir, "plumb", Arc::new(tree.plumb_service(name)), name, args.quiet),
        None => false,
    };
    let unix = match apex_fsd::fsys::post::post(&dir, "apex") {
        Ok(l) => l,
        Err(e) => {
            if acme_posted.is_some() {
                let _ = std::fs::remove_file(dir.join("acme"));
            }
            if plumb_posted {
                let _ = std::fs::remove_file(&plumb_socket);
            }
            return Err(e.into());
        }
    };
    tracing::info!(socket = %dir.join("apex").display(), "serving");
    let mut posted = vec![dir.join("apex")];
    if acme_posted.is_some() {
        posted.push(dir.join("acme"));
    }
    if plumb_posted {
        posted.push(plumb_socket.clone());
    }
    for (given, addr, tls) in listen {
        let listener = tokio::net::TcpListener::bind(&addr).await.with_context(|| format!("listen on {addr}"))?;
        match &tls {
            // Said even with -q: this is the daemon's account, open to all.
            None => eprintln!("{}", tcp_warning(&addr)),
            Some(tls) => {
                // Said even with -q: what a client pins.
                eprintln!("apexd: serving TLS on {given}; its certificate is {}", tls.fingerprint);
                let line = (format!("tls {given}"), tls.fingerprint.clone());
                tree.daemon.services.lock().expect("services lock").push(line);
            }
        }
        tracing::info!(%addr, tls = tls.is_some(), "serving on tcp");
        tokio::spawn(apex_fsd::listen::serve(listener, tree.clone(), config.clone(), tls));
    }
    if !args.quiet {
        eprint!("{}", greeting(&args.session, acme_posted, &posted));
    }
    let stop = async {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("signal handler");
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {},
            _ = term.recv() => {},
        }
    };
    tokio::pin!(stop);
    let mut failing = Failing::default();
    loop {
        tokio::select! {
            accepted = unix.accept() => {
                if let Some((conn, _)) = failing.accepted(accepted, "apex").await {
                    spawn_unix(conn, tree.clone(), config.clone());
                }
            }
            _ = &mut stop => break,
        }
    }
    for socket in posted {
        let _ = std::fs::remove_file(&socket);
    }
    // A long Edit running stops at its next look, changing nothing,
    // rather than hold the exit.
    apex_fsd::host::stop_jobs(&tree.daemon);
    let kept = state_dir(&args)?.is_some();
    if kept {
        // What the terminals' programs wrote is logged or left in the pty.
        apex_fsd::term::drive::stop_reading(&tree.daemon);
    }
    // A clean stop: every session's log on disk before exiting.
    for session in tree.daemon.all() {
        let persisted = session.lock().expect("session lock").persisted().map(|p| (p.durable(), p.wal.clone()));
        if let Some((d, wal)) = persisted {
            d.sync();
            // The segment is closed: its room to spare goes back.
            wal.lock().expect("wal lock").release_room();
        }
    }
    // A kept session's terminals live on in their keepers, for the next
    // daemon to take up: nothing here ends them on the way out.
    if kept {
        std::process::exit(0);
    }
    Ok(())
}
