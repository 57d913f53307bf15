//! The files of `/`: `index` (a line per session), `ctl` (the registry's
//! commands), `new` (opening it makes a session and reads its name) and
//! `registry` (the registry log as it grows).

use super::fid::{utf8, Content, Opened};
use super::made::Made;
use super::place::RootFile;
use super::stream::{Cursor, Source};
use super::Fsys;
use crate::registry::{parse_ctl, Registry};
use apex_ninep::srv;

/// A root file's content now.
pub fn content(reg: &Registry, file: RootFile) -> Made {
    match file {
        RootFile::Index => reg.sessions().map(|s| s.index_line()).collect::<String>().into(),
        _ => Made::Bytes(Vec::new()),
    }
}

impl Fsys {
    pub(super) async fn root_open(&self, file: RootFile) -> srv::Result<Opened> {
        Ok(match file {
            RootFile::New => {
                let name = {
                    let mut reg = self.daemon.reg();
                    let number = reg.create(None)?;
                    reg.get(number).map(|s| s.label().to_string()).unwrap_or_default()
                };
                self.daemon.changed();
                tracing::info!(session = %name, "session created through /new");
                Opened::Content(Content::made(format!("{name}\n").into_bytes()))
            }
            RootFile::Registry => {
                let cursor = Cursor::open(Source::Registry, &self.daemon.reg())?;
                Opened::Stream { cursor, reading: Vec::new(), event_of: None }
            }
            file => {
                let made = content(&self.daemon.reg(), file);
                Opened::Content(Content::made(made.made().await))
            }
        })
    }

    pub(super) fn root_write(&self, file: RootFile, data: Vec<u8>) -> srv::Result<()> {
        match file {
            RootFile::Ctl => {
                let cmds = parse_ctl(&utf8(data)?)?;
                self.daemon.reg().run(&cmds)?;
                self.daemon.changed();
                Ok(())
            }
            _ => Err(super::not_writable(super::place::Place::Root1(file))),
        }
    }
}
