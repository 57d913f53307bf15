//! The files of `buffers/`: `new` (opening it makes a window and reads its
//! body's number), and each buffer's `body` (appends; OTRUNC or a wstat
//! of length 0 empties it), `name`, `ctl`, `addr`, `data` (read and write
//! at the addr, as acme's) and `event` (a stream of its changes).

use crate::buffers::{self, BufferCtl};
use crate::error::{Error, Result};
use crate::fsys::error::FsError;
use crate::fsys::fid::{utf8, Content, Fid, Opened};
use crate::fsys::made::Made;
use crate::fsys::place::{BufferFile, Place};
use crate::fsys::stream::Source;
use crate::fsys::tree::Fsys;
use crate::host;
use crate::session::Session;
use apex_core::{BufferId, Proposal, Shard};
use apex_ninep::fcall::OTRUNC;

/// A buffer file's content now.
pub fn content(s: &Session, b: BufferId, file: BufferFile) -> Result<Made> {
    let buffer = || s.view().state.buffer(b);
    Ok(match file {
        BufferFile::Body => Made::Text(buffer()?.text.clone()),
        BufferFile::Name => format!("{}\n", buffer()?.name).into(),
        BufferFile::Ctl => buffers::ctl_read(s, b)?.into(),
        BufferFile::Addr => buffers::addr_read(s, b)?.into(),
        BufferFile::Data | BufferFile::Event => Made::Bytes(Vec::new()),
    })
}

impl Fsys {
    /// Opening `buffers/new` makes a window; the fid reads its body's number.
    pub(crate) async fn buffers_new(&self, n: u64) -> Result<Opened> {
        let p = Proposal::CreateWindow { body: None, column: None, name: String::new(), near: None };
        let made = self.daemon.propose(n, "buffers/new", p).await?;
        let body = match made.created {
            apex_core::propose::Created::Window(w) => w.body,
            _ => return Err(FsError::NoWindowMade("buffers/new").into()),
        };
        Ok(Opened::Content(Content::made(format!("{}\n", body.0).into_bytes())))
    }

    pub(crate) async fn buffer_open(&self, n: u64, b: BufferId, file: BufferFile, mode: u8) -> Result<Opened> {
        let place = Place::Buffer1(n, b, file);
        Ok(match file {
            BufferFile::Event => self.open_reader(n, &[Shard::Buffer(b)], Source::Event(n, b), None)?,
            BufferFile::Data => Opened::Data { body: b, ends_nomark: false },
            BufferFile::Body => {
                if mode & OTRUNC != 0 {
                    self.truncate(n, b).await?;
                }
                let made = self.made_in(place, |s| content(s, b, file))?;
                Opened::Text { content: Content::of(made.version().await), tail: Vec::new() }
            }
            BufferFile::Addr => {
                self.daemon.change(n, |s, _| buffers::addr_open(s, b))??;
                let made = self.made_in(place, |s| content(s, b, file))?;
                Opened::Addr { content: Content::made(made.made().await), body: b }
            }
            BufferFile::Name | BufferFile::Ctl => {
                Opened::Content(Content::made(self.made_in(place, |s| content(s, b, file))?.made().await))
            }
        })
    }

    pub(crate) async fn buffer_write(
        &self,
        fid: &Fid,
        n: u64,
        b: BufferId,
        file: BufferFile,
        data: Vec<u8>,
    ) -> Result<()> {
        if file == BufferFile::Body {
            return self.body_write(fid, n, b, data).await;
        }
        let text = utf8(data)?;
        match file {
            BufferFile::Name => {
                let name = text.trim_end_matches('\n');
                crate::fsys::ctl::fit_name(name)?;
                let p = Proposal::Name { buffer: b, name: name.to_string() };
                self.daemon.propose(n, "name write", p).await?;
                self.note_buffer_name(n, b)
            }
            BufferFile::Ctl => {
                self.buffer_ctl(n, b, &text).await?;
                self.note_buffer_name(n, b)
            }
            BufferFile::Addr => self.addr_write(n, b, &text).await,
            BufferFile::Data => self.data_write(n, b, &text).await,
            BufferFile::Event => Err(FsError::EventWriteBack.into()),
            BufferFile::Body => unreachable!("handled above"),
        }
    }

    /// The acme tree's record of window names after a buffer was renamed.
    fn note_buffer_name(&self, n: u64, b: BufferId) -> Result<()> {
        self.daemon.change(n, |s, _| {
            let (acme, view) = s.acme_and_view();
            acme.note_buffer_name(&view.state, b)
        })
    }

    /// A write to `buffers/N/ctl`.
    async fn buffer_ctl(&self, n: u64, b: BufferId, text: &str) -> Result<()> {
        let msgs = self.daemon.read(n, |s| buffers::parse_ctl(text, s, b))??;
        for msg in msgs {
            match msg {
                BufferCtl::Get(file) => host::get(&self.daemon, n, b, file, host::Reading::Apart).await?,
                BufferCtl::Put { version, file } => host::put(&self.daemon, n, b, version, file).await?,
                msg => {
                    let p = self.daemon.read(n, |s| buffers::ctl_proposal(s, b, &msg))??;
                    self.daemon.propose(n, &format!("ctl {} {msg:?}", b.0), p).await?;
                }
            }
        }
        Ok(())
    }

    /// Empties a body (open with OTRUNC, wstat length 0).
    pub(crate) async fn truncate(&self, n: u64, b: BufferId) -> Result<()> {
        match self.daemon.read(n, |s| buffers::truncate(s, b))?? {
            Some(p) => self.daemon.propose(n, &format!("body truncate {}", b.0), p).await.map(|_| ()),
            None => Ok(()),
        }
    }

    /// A body write: appended at the end; a rune cut by the write boundary
    /// waits for the fid's next write. Text that is not UTF-8 is refused
    /// here; acme's body takes any bytes as acme does (`Fid::acme_text`).
    pub(crate) async fn body_write(&self, fid: &Fid, n: u64, b: BufferId, data: Vec<u8>) -> Result<()> {
        let (text, waited) = match fid.place.in_acme() {
            true => (fid.acme_text(data), None),
            false => fid.whole_runes(data, "body").map(|(text, waited)| (text, Some(waited)))?,
        };
        let request = format!("body write {} ({} bytes)", b.0, text.len());
        // Built and queued under one lock; its outcome awaited after.
        let written: Result<()> =
            self.daemon.propose_from(n, &request, |s| buffers::body_append(s, b, text)).await.map(|_| ());
        if let (Err(_), Some(waited)) = (&written, waited) {
            // Refused: the rune this write cut is not carried either.
            fid.put_back(waited);
        }
        written
    }

    /// An `addr` write (of `buffers/N/addr` or acme's): the search runs
    /// with no lock held, so a regular expression over a big body holds up
    /// no other request; it is made again if the buffer or its address
    /// changed meanwhile, and the third time under the lock.
    pub(crate) async fn addr_write(&self, n: u64, b: BufferId, addr: &str) -> Result<()> {
        for _ in 0..2 {
            let search = self.daemon.tend(n, |s| buffers::addr_search(s, b))??;
            let found = match search.is_big() {
                true => {
                    let addr = addr.to_string();
                    tokio::task::spawn_blocking(move || search.eval(&addr))
                        .await
                        .map_err(|source| Error::Task { what: "addr", source })?
                }
                false => search.eval(addr),
            }?;
            if self.daemon.change(n, |s, _| buffers::addr_found(s, found))?? {
                return Ok(());
            }
        }
        self.daemon.change(n, |s, _| buffers::addr_write(s, b, addr))?
    }

    /// A `data` read (of `buffers/N/data`, acme's `data` or `xdata`).
    pub(crate) fn data_read(&self, n: u64, b: BufferId, count: u32, x: bool) -> Result<Vec<u8>> {
        self.daemon.change(n, |s, _| buffers::data_read(s, b, count, x))?
    }

    /// A `data` write: the proposal at the address's version, then the
    /// address follows the new text.
    pub(crate) async fn data_write(&self, n: u64, b: BufferId, text: &str) -> Result<()> {
        let Some((p, at)) = self.daemon.read(n, |s| buffers::data_write(s, b, text))?? else { return Ok(()) };
        let request = format!("data write {} ({} bytes)", b.0, text.len());
        self.daemon.propose(n, &request, p).await?;
        let moves = self.daemon.read(n, |s| buffers::selections_past(s, b, at, text))??;
        for p in moves {
            // Best effort: the user may have moved the selection meanwhile.
            let _ = self.daemon.propose(n, "data write (selection)", p).await;
        }
        self.daemon.change(n, |s, _| buffers::data_written(s, b, at, text))?
    }
}
