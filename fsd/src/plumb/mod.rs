//! The session's plumber: plumber(4)'s files over rules kept in the
//! metalog, so every UI and the daemon agree on them and they outlive
//! every client and the daemon.
//!
//! - Rules: the session's own (owner SERVER; `plumb/rules`, kept for good)
//!   and an attachment's (a tool's claim, `ClientMsg::Rules`; gone at its
//!   Detach, as `Meta::apply` drops them). A message is matched against
//!   the attachments' rules first, in the order added, then the session's.
//!   Each text is read with core's parser: the session's own first, the
//!   attachments' starting from its variables. `include` reads `$PLAN9/
//!   plumb/NAME` where `$PLAN9` is set, else apex's own `basic` and
//!   `fileaddr` (`apex_core::plumb::builtin_rules`).
//! - `send`: a message is routed (core's `Rules::route`, `isfile` and
//!   `isdir` asked of this machine off the session's lock), then goes to
//!   every reader of its port; with none, the rule's `plumb start` runs
//!   (the message dropped) or its `plumb client` (held for the port's next
//!   reader), as the plumber does.
//! - Ports: one file per port the rules name; each open fid is a reader
//!   with its own queue (bounded: a reader that stops reading loses its
//!   oldest messages, the sender never waits).
//!
//! Nothing here is in the session's state: readers, queues and held
//! messages are the daemon's, and go with it.

pub mod error;
pub mod files;
pub mod ports;
pub mod rules;

pub use error::PlumbFsError;
pub use ports::{Plumber, HELD_MAX, MESSAGE_MAX, QUEUED_MAX, RULES_MAX};

use crate::daemon::Daemon;
use crate::error::Error;
use apex_core::plumb::route::Files;
use apex_core::plumb::{Message, Routed};

/// `isfile` and `isdir` on this machine.
struct Disk;

impl Files for Disk {
    fn is_dir(&mut self, path: &str) -> Option<bool> {
        std::fs::metadata(path).ok().map(|m| m.is_dir())
    }
}

/// Sends `message` through session `n`'s plumber: routed, then delivered
/// or a program started. An error says why no one got it.
pub async fn send(daemon: &Daemon, n: u64, message: Message) -> Result<Routed, Error> {
    // A port's reader (the UI's edit port: it opens the files named) acts
    // on a message as the user's own.
    crate::access::require_full("plumbing a message (its readers act on it as yours)")?;
    let rules = daemon.read(n, |s| s.plumber().rules(&s.view().state.meta))?;
    // `isfile` stats files: off the session's lock and the async workers.
    let routed = tokio::task::spawn_blocking(move || rules.route(&message, &mut Disk))
        .await
        .map_err(|source| Error::Task { what: "plumb", source })?
        .map_err(|e| Error::Plumb(e.into()))?;
    let port = routed.message.dst.clone();
    let (delivered, known) = daemon.tend(n, |s| {
        let known = port.is_empty() || s.plumber().ports(&s.view().state.meta).contains(&port);
        let delivered = known && !port.is_empty() && s.plumber_mut().deliver(&port, &routed.message);
        (delivered, known)
    })?;
    if !known {
        return Err(Error::Plumb(PlumbFsError::NoPort(port)));
    }
    if delivered {
        daemon.changed_in(n);
        return Ok(routed);
    }
    let Some(start) = &routed.start else {
        return Err(Error::Plumb(match port.is_empty() {
            true => PlumbFsError::NoDestination,
            false => PlumbFsError::NoReader(port),
        }));
    };
    if start.client && port.is_empty() {
        return Err(Error::Plumb(PlumbFsError::ClientWithoutPort));
    }
    crate::access::require_full("a plumbing rule that starts a program")?;
    // Held before the client starts, so a client quick to open the port
    // finds it there.
    let held = start.client && daemon.tend(n, |s| s.plumber_mut().hold(&port, &routed.message))?;
    if start.client {
        // A reader that came meanwhile has it.
        daemon.changed_in(n);
    }
    if let Err(e) = run(&start.argv, &routed.message.wdir) {
        if held {
            let _ = daemon.tend(n, |s| s.plumber_mut().unhold(&port));
        }
        return Err(Error::Plumb(e));
    }
    Ok(routed)
}

/// B3's message as acme's look3 sends it: to session `n`'s plumber, and
/// if no rule there takes it, to the plumber posted at `system` (another
/// program's); whether one took it. Data too long for a plumber's
/// message is not plumbed, as in acme.
pub async fn send_first(daemon: &Daemon, system: Option<&std::path::Path>, n: u64, m: Message) -> bool {
    if m.data.len() >= apex_link::plumber::MESSAGE_SIZE - 1024 {
        return false;
    }
    let packed = m.pack();
    if Box::pin(send(daemon, n, m)).await.is_ok() {
        return true;
    }
    match system.filter(|p| p.exists() && crate::access::require_full("another program's plumber").is_ok()) {
        Some(socket) => apex_link::plumber::send_to(&format!("unix!{}", socket.display()), &packed).await.is_ok(),
        None => false,
    }
}

/// Starts a rule's program, as the plumber does: its arguments as the
/// rule expanded them, no shell, stdin from /dev/null, in a process group
/// of its own; in the message's directory where there is one.
fn run(argv: &[String], wdir: &str) -> Result<(), PlumbFsError> {
    let Some(program) = argv.first() else { return Err(PlumbFsError::EmptyCommand) };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(&argv[1..]).stdin(std::process::Stdio::null()).process_group(0);
    if !wdir.is_empty() && std::path::Path::new(wdir).is_dir() {
        cmd.current_dir(wdir);
    }
    let mut child = cmd.spawn().map_err(|e| PlumbFsError::Start { program: program.clone(), err: e.to_string() })?;
    tokio::spawn(async move {
        let _ = child.wait().await;
    });
    Ok(())
}
