//! `apex-ui [-b] [-f FONT] [-F FIXEDFONT] [-a ADDR | -r ssh!HOST] [-s SESSION] [FILE ...]`: the
//! acme-like window onto an apex session. With `-r` it imports another
//! machine's sessions first (`apex import`). Without `-a` or `-r` it uses
//! the posted `apex` service and,
//! when none answers, starts `apexd` detached first (as tmux starts its
//! server), so one command gives a working editor. Files named on the
//! command line open in windows, as `acme FILE` does.

use apex_core::{exec, AttachmentKind, Shard};
use apex_link::Attached;
use apex_ui::error::UiError;
use apex_ui::host::{UiHost, WAIT};
use clap::Parser;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Parser, Debug)]
#[command(name = "apex-ui", about = "The acme-like window onto an apex session", version)]
struct Args {
    /// Server address: unix!PATH, tcp!HOST!PORT, or a posted service name.
    #[arg(short = 'a', value_name = "ADDR")]
    addr: Option<String>,
    /// Another machine's sessions: ssh!HOST (or ssh!USER@HOST!PORT),
    /// imported with `apex import` (which stays in the background,
    /// reconnecting when ssh drops) and attached through it.
    #[arg(short = 'r', value_name = "ssh!HOST", conflicts_with = "addr")]
    remote: Option<String>,
    /// The session to open.
    #[arg(short = 's', value_name = "SESSION", default_value = "main")]
    session: String,
    /// Click to type: typing goes to the text last clicked, not to the
    /// one under the pointer (acme's -b).
    #[arg(short = 'b')]
    click_to_type: bool,
    /// The variable-width font: a family and size ('Go Regular 11'), a
    /// font file, or a plan9port name (mapped to the nearest here).
    #[arg(short = 'f', value_name = "FONT")]
    font: Option<String>,
    /// The fixed-width font, named as for -f ('DejaVu Sans Mono 10').
    #[arg(short = 'F', value_name = "FIXEDFONT")]
    fixed_font: Option<String>,
    /// Columns a new session starts with (acme's -c; a session that has
    /// windows keeps its own).
    #[arg(short = 'c', value_name = "NCOL", value_parser = clap::value_parser!(u16).range(1..=64))]
    columns: Option<u16>,
    /// Files and directories to open in windows.
    files: Vec<PathBuf>,
}

/// Starts `apexd` in a session of its own, detached from this terminal,
/// serving `session` (and posting its `acme`, and its plumber as `plumb`
/// where no plumber runs), and waits for its socket to answer
/// (`apex_sys::daemon`).
fn start_daemon(socket: &Path, session: &str) -> Result<(), UiError> {
    let mut args: Vec<String> = vec!["-q".into(), "--session".into(), session.into()];
    // The session is the plumber where no other runs: plumb(1), B and
    // every program that opens a plumber's port reach it.
    let plumber = socket.with_file_name("plumb");
    if std::os::unix::net::UnixStream::connect(&plumber).is_err() {
        args.extend(["--plumb".into(), session.into()]);
    }
    apex_sys::daemon::start_detached(&apex_sys::daemon::apexd_program(), &args, socket, WAIT)?;
    Ok(())
}

/// The faces `-f` and `-F` name; what was mapped to another face is
/// said on standard error.
fn fonts(args: &Args) -> Result<apex_ui::font::Choice, UiError> {
    let mut choice = apex_ui::font::Choice::default();
    for (name, fixed) in [(&args.font, false), (&args.fixed_font, true)] {
        let Some(name) = name else { continue };
        let (source, note) = apex_ui::font::resolve(name, fixed)
            .map_err(|why| UiError::Font { flag: if fixed { 'F' } else { 'f' }, why })?;
        if let Some(note) = note {
            eprintln!("apex-ui: {note}");
        }
        match fixed {
            true => choice.fixed = source,
            false => choice.proportional = source,
        }
    }
    Ok(choice)
}

/// The column the `i`th file named at start opens in, as acme places
/// them: eight to a column from the left, a guide and what the columns
/// cannot hold in the last.
fn start_column(host: &UiHost, i: usize, path: &str) -> Option<apex_core::ColumnId> {
    let st = exec::Host::state(host).ok()?;
    let columns = &st.layout.columns;
    let guide = path.rsplit('/').next() == Some("guide");
    let c = match guide {
        true => columns.last(),
        false => columns.get(i / START_PER_COLUMN).or(columns.last()),
    };
    c.map(|c| c.id)
}

/// acme's `-c`: a session with no windows yet gets `n` columns (made as
/// `Newcol` makes them, or empty ones taken away from the right).
fn set_columns(host: &mut UiHost, n: usize) -> Result<(), exec::ExecError> {
    let (fresh, have) = {
        let st = exec::Host::state(host)?;
        (st.windows.is_empty(), st.layout.columns.iter().map(|c| c.id).collect::<Vec<_>>())
    };
    if !fresh {
        return Ok(());
    }
    for _ in have.len()..n {
        exec::Host::propose(host, apex_core::Proposal::CreateColumn { x: None })?;
    }
    for column in have.iter().skip(n).rev() {
        exec::Host::propose(host, apex_core::Proposal::DeleteColumn { column: *column })?;
    }
    Ok(())
}

/// How many of the files named at start acme puts in a column.
const START_PER_COLUMN: usize = 8;

fn run(mut args: Args, started: Instant) -> Result<(), UiError> {
    // acme's default font is $font, when set.
    if args.font.is_none() {
        args.font = std::env::var("font").ok().filter(|f| !f.trim().is_empty());
    }
    let fonts = fonts(&args)?;
    std::thread::spawn(apex_ui::fontconfig::warm);
    let address = match (&args.addr, &args.remote) {
        (Some(a), _) => apex_ninep::ns::service_address(a).map_err(UiError::Namespace)?,
        (None, Some(r)) => {
            let dir = apex_ninep::ns::namespace_dir(None);
            format!("unix!{}", apex_sys::remote::import(r, &dir)?.display())
        }
        (None, None) => {
            let dir = apex_ninep::ns::namespace_dir(None);
            apex_ninep::ns::check_dir(&dir).map_err(UiError::Namespace)?;
            let socket = dir.join("apex");
            if std::os::unix::net::UnixStream::connect(&socket).is_err() {
                start_daemon(&socket, &args.session)?;
            }
            format!("unix!{}", socket.display())
        }
    };
    // Where there is no display, the daemon alone: it runs on, and we say
    // how to reach it.
    let display = ["DISPLAY", "WAYLAND_DISPLAY"].iter().any(|v| std::env::var_os(v).is_some_and(|d| !d.is_empty()));
    if !display {
        eprintln!("apex-ui: no display (DISPLAY and WAYLAND_DISPLAY are unset): the daemon alone serves {address}");
        eprintln!("    apex ls {}                # its files; the session goes on until apexd stops", args.session);
        return Ok(());
    }
    let rt = tokio::runtime::Runtime::new().map_err(UiError::Runtime)?;
    let session = args.session.clone();
    let att = rt.block_on(async {
        let client = apex_ninep::dial(&address, 1 << 20)
            .await
            .map_err(|e| UiError::Dial { address: address.clone(), why: e.to_string() })?;
        let att = Attached::open(&client, &session, AttachmentKind::Ui, "apex-ui")
            .await
            .map_err(|why| UiError::Attach { session: session.clone(), why })?;
        // The leases come by cooperative transfer from whoever has them.
        if !att.wait_for(WAIT, |l| l.leads(Shard::Layout)).await {
            return Err(UiError::NoLease(session.clone()));
        }
        Ok::<_, UiError>(att)
    })?;
    let mut host = UiHost::new(att, &address, &session, rt.handle().clone(), apex_ninep::ns::namespace_dir(None));
    // Get, Put and Edit's files are the daemon's machine's: read here
    // only where they are the same files, and relative names are its.
    host.find_the_daemons_machine();
    if let Some(n) = args.columns {
        set_columns(&mut host, n.into())?;
    }
    let cwd = match &host.far {
        Some(_) => PathBuf::from(exec::Host::cwd(&host)),
        None => std::env::current_dir().map_err(UiError::Cwd)?,
    };
    for (i, f) in args.files.iter().enumerate() {
        let mut path = cwd.join(f).display().to_string();
        // (A far daemon's directories are not looked at here: `open_in`
        // asks it.)
        if host.far.is_none() && Path::new(&path).is_dir() && !path.ends_with('/') {
            path.push('/');
        }
        let column = start_column(&host, i, &path);
        if let Err(e) = exec::open_in(&mut host, &path, None, column, None) {
            let _ = exec::warn(&mut host, None, &format!("{}: {e}\n", f.display()));
        }
    }
    host.listen_to_plumber();
    host.font = args.font.clone();
    let title = format!("apex {}", args.session);
    let att = host.att.clone();
    let options = apex_ui::shell::Options { click_to_type: args.click_to_type, fonts, started };
    let shown = apex_ui::shell::run(host, title, options);
    // Leaving detaches; the session goes on in apexd.
    rt.block_on(async {
        let _ = att.flush().await;
        att.close().await;
    });
    shown
}

fn main() {
    let started = Instant::now();
    // A big buffer's Welcome or reload is built in memory a dropped one
    // freed, as in the daemon, not faulted in page by page again.
    apex_sys::malloc::keep_freed_memory();
    let args = Args::parse();
    if let Err(e) = run(args, started) {
        eprintln!("apex-ui: {e}");
        std::process::exit(1);
    }
}
