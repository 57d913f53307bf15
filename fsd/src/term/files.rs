//! The files of `terms/`: `index` (a line per terminal), and each
//! terminal's `cons` (writes type into the pty; reads stream its raw
//! output from the open on, blocking), `screen`, `scrollback` and `text`
//! (the grid as text), and `ctl` (resize, signal, kill, close; reading it
//! describes the terminal).

use crate::error::{Error, Result};
use crate::fsys::error::FsError;
use crate::fsys::fid::{Fid, Opened};
use crate::fsys::made::{Made, TermText};
use crate::fsys::place::{Place, TermFile};
use crate::fsys::tree::Fsys;
use crate::pty::output::Got;
use crate::pty::proc::Running;
use crate::session::Session;
use crate::term::ctl::TermCtl;
use apex_core::term::Term;
use apex_core::TermId;
use std::sync::Arc;

/// How long a resize may wait for the terminal's driver to log the new
/// screen before the write is answered anyway.
const RESIZE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

fn term(s: &Session, id: TermId) -> Result<&Term, Error> {
    s.view().state.terms.get(&id).ok_or(Error::NoTerm(id.0))
}

/// A terminal's state as a word: `running`, or `exit:STATUS`.
fn status(t: &Term) -> String {
    match t.exit {
        None => "running".into(),
        Some(status) => format!("exit:{status}"),
    }
}

/// `terms/index`: number, pid (`-` without a process), size, status,
/// directory and command, one terminal per line.
pub fn index(s: &Session) -> String {
    let mut out = String::new();
    for (id, t) in &s.view().state.terms {
        // No pid once exited: it may be another process's by now.
        let pid = match (s.terms().get(id), t.exit) {
            (Some(r), None) => r.pid.to_string(),
            _ => "-".to_string(),
        };
        out += &format!("{} {pid} {}x{} {} {} {}\n", id.0, t.cols, t.rows, status(t), t.dir, t.command);
    }
    out
}

/// A terminal file's content now.
pub fn content(s: &Session, id: TermId, file: TermFile) -> Result<Made> {
    let t = term(s, id)?;
    Ok(match file {
        // The screen is small; the scrollback's rows are shared, not copied.
        TermFile::Screen => t.screen().into(),
        TermFile::Scrollback => Made::Term(Box::new(t.clone()), TermText::Scrollback),
        TermFile::Text => Made::Term(Box::new(t.clone()), TermText::All),
        TermFile::Ctl => {
            let mut out = format!("command {}\ndir {}\nsize {}x{}\n", t.command, t.dir, t.cols, t.rows);
            // The pid its program had, beside its exit once exited (index
            // drops it then: a script may take the pid from there).
            if let Some(r) = s.terms().get(&id) {
                out += &format!("pid {}\n", r.pid);
                // The shell's current directory, for relative names in
                // its output (what a UI's button 2 and 3 resolve against).
                if let Some(cwd) = r.cwd() {
                    out += &format!("cwd {}\n", cwd.display());
                }
            }
            out += &format!("scrollback {} of {}\n", t.scrollback.len(), t.limit);
            if !t.title.is_empty() {
                out += &format!("title {}\n", t.title);
            }
            if let Some(status) = t.exit {
                out += &format!("exit {status}\n");
            }
            out.into()
        }
        TermFile::Cons => Made::Bytes(Vec::new()),
    })
}

impl Fsys {
    /// A terminal's process, if it is running (`ended` refuses otherwise).
    fn running(&self, n: u64, id: TermId) -> Result<Arc<Running>, Error> {
        self.daemon.read(n, |s| {
            let t = term(s, id)?;
            match (s.terms().get(&id), t.exit) {
                (Some(r), None) => Ok(r.clone()),
                _ => Err(Error::Term(crate::pty::proc::ProcError::Exited(id.0))),
            }
        })?
    }

    pub(crate) async fn term_open(&self, n: u64, id: TermId, file: TermFile) -> Result<Opened> {
        if file == TermFile::Cons {
            // A reader reads what comes from now on.
            let at = self.daemon.read(n, |s| s.terms().get(&id).map_or(0, |r| r.output.now()))?;
            return Ok(Opened::Cons { at });
        }
        // Its text and scrollback as their rows, shared: not a copy per open.
        let version = self.made_in(Place::Term1(n, id, file), |s| content(s, id, file))?.version().await;
        Ok(Opened::Content(crate::fsys::fid::Content::of(version)))
    }

    /// Reads a terminal's output, waiting until there is some; end of file
    /// once its pty closed (or it has none).
    pub(crate) async fn term_read_cons(&self, n: u64, id: TermId, fid: &Fid, count: u32) -> Result<Vec<u8>> {
        let Some(output) = self.daemon.read(n, |s| s.terms().get(&id).map(|r| r.output.clone()))? else {
            return Ok(Vec::new());
        };
        loop {
            let at = match &*fid.lock() {
                Opened::Cons { at } => *at,
                _ => return Err(FsError::Unopened("cons").into()),
            };
            match output.read(at, count as usize) {
                Got::Bytes(bytes, next) => {
                    if let Opened::Cons { at } = &mut *fid.lock() {
                        *at = next;
                    }
                    return Ok(bytes);
                }
                Got::End => return Ok(Vec::new()),
                Got::Wait(mut rx) => {
                    if rx.changed().await.is_err() {
                        return Ok(Vec::new());
                    }
                }
            }
        }
    }

    pub(crate) async fn term_write(&self, n: u64, id: TermId, file: TermFile, data: Vec<u8>) -> Result<()> {
        match file {
            TermFile::Cons => Ok(self.running(n, id)?.input(id.0, data).map_err(Error::from)?),
            TermFile::Ctl => {
                let text = crate::fsys::fid::utf8(data)?;
                let msgs = crate::term::ctl::parse(&text).map_err(Error::from)?;
                // Checked whole before any is done: a message that needs
                // the program refuses the write if it has exited.
                if msgs.iter().any(|m| *m != TermCtl::Close) {
                    self.running(n, id)?;
                }
                for msg in msgs {
                    self.term_ctl(n, id, msg).await?;
                }
                Ok(())
            }
            _ => Err(crate::fsys::place::not_writable(Place::Term1(n, id, file)).into()),
        }
    }

    async fn term_ctl(&self, n: u64, id: TermId, msg: TermCtl) -> Result<(), Error> {
        match msg {
            TermCtl::Resize { cols, rows } => {
                let deadline = tokio::time::Instant::now() + RESIZE_WAIT;
                let running = self.running(n, id)?;
                // The driver's queue is full under a flood: wait for room
                // without holding a worker.
                let logged = loop {
                    match running.resize(id.0, cols, rows)? {
                        Some(rx) => break rx,
                        None if tokio::time::Instant::now() < deadline => {
                            tokio::time::sleep(std::time::Duration::from_millis(5)).await
                        }
                        None => return Err(Error::Term(crate::pty::proc::ProcError::Busy(id.0))),
                    }
                };
                match tokio::time::timeout_at(deadline, logged).await {
                    Ok(Ok(())) | Err(_) => Ok(()),
                    Ok(Err(_)) => Err(Error::Term(crate::pty::proc::ProcError::Exited(id.0))),
                }
            }
            TermCtl::Signal(signal) => Ok(self.running(n, id)?.signal(id.0, signal)?),
            TermCtl::Kill => Ok(self.running(n, id)?.kill(id.0)?),
            TermCtl::Close => crate::term::drive::close_shown(&self.daemon, n, id).await,
        }
    }
}
