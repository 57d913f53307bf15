//! The files of `/`: `index` (a line per session), `ctl` (the registry's
//! commands), `new` (opening it makes a session and reads its name),
//! `registry` (the registry log as it grows), `machine` (which machine
//! this is, for a client to tell whether the daemon's files are its own)
//! and `services` (what is posted beside `apex`, for whom).

use crate::daemon::Daemon;
use crate::error::Result;
use crate::fsys::fid::{utf8, Content, Opened};
use crate::fsys::made::Made;
use crate::fsys::place::RootFile;
use crate::fsys::stream::Cursor;
use crate::fsys::tree::Fsys;
use crate::registry::parse_ctl;

/// A root file's content now: `index` takes no session's lock (each
/// session's line is kept beside it, [`crate::session::Shared`]), so a
/// session busy with a long proposal holds up no look at the daemon.
pub fn content(daemon: &Daemon, file: RootFile) -> Made {
    match file {
        RootFile::Index => {
            let reg = daemon.reg();
            let lines = reg.state.sessions.keys().filter_map(|n| reg.get(*n)).map(|s| s.index_line());
            lines.collect::<String>().into()
        }
        RootFile::Machine => apex_sys::machine::describe().into(),
        RootFile::Services => {
            let services = daemon.services.lock().expect("services lock");
            services.iter().map(|(service, session)| format!("{service} {session}\n")).collect::<String>().into()
        }
        _ => Made::Bytes(Vec::new()),
    }
}

impl Fsys {
    pub(crate) async fn root_open(&self, file: RootFile) -> Result<Opened> {
        Ok(match file {
            RootFile::New => {
                let number = self.daemon.reg().create(None)?;
                let name = self.daemon.read(number, |s| s.label().to_string())?;
                self.daemon.changed();
                tracing::info!(session = %name, "session created through /new");
                Opened::Content(Content::made(format!("{name}\n").into_bytes()))
            }
            RootFile::Registry => {
                let cursor = Cursor::registry();
                Opened::Stream { cursor, reading: Vec::new(), event_of: None }
            }
            file => {
                let made = content(&self.daemon, file);
                Opened::Content(Content::made(made.made().await))
            }
        })
    }

    pub(crate) fn root_write(&self, file: RootFile, data: Vec<u8>) -> Result<()> {
        match file {
            RootFile::Ctl => {
                let cmds = parse_ctl(&utf8(data)?)?;
                if cmds.iter().any(|c| matches!(c, crate::registry::Command::Del(_))) {
                    // Ends its terminals and deletes what the disk keeps.
                    crate::access::require_full("del (ending a session)")?;
                }
                // Said whatever the outcome: a command after a `del` may
                // still fail (the disk), and the deleted session's readers
                // must wake to find it gone.
                let ran = self.daemon.reg().run(&cmds);
                self.daemon.changed();
                Ok(ran?)
            }
            _ => Err(crate::fsys::place::not_writable(crate::fsys::place::Place::Root1(file)).into()),
        }
    }
}
