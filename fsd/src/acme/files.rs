//! The tree's side of the acme(4) files (`acme` for their meaning):
//! walks (numbers from anywhere, `new` making a window), opens, reads and
//! writes of `acme/` and `acme/N/`, and what a clunk ends.
//!
//! Every change is a proposal through `Daemon::propose`, awaited outside
//! any lock; a ctl write applies its messages one by one and stops at
//! the first refusal with the earlier ones kept, as acme does.

use crate::acme::ctl::{self, WinCtl};
use crate::acme::event::{self, Act, WriteBack};
use crate::acme::{fields, termwin};
use crate::buffers;
use crate::daemon::gone;
use crate::error::{Error, Result};
use crate::fsys::error::FsError;
use crate::fsys::fid::{utf8, Content, Fid, Opened};
use crate::fsys::made::Made;
use crate::fsys::place::{lookup, AcmeFile, Place, SessionDir, WinFile, ACME, WINDOW};
use crate::fsys::stream::Source;
use crate::fsys::tree::Fsys;
use crate::host;
use crate::session::Session;
use apex_core::addr::Range;
use apex_core::exec::{self, ExecError};
use apex_core::look;
use apex_core::plumb::Plumb;
use apex_core::propose::Created;
use apex_core::{AcmeNumber, AttachmentId, BufferId, Origin, Proposal, Seq, Shard, TermId, ViewId, WindowId};

/// A window's ids as the tree needs them.
#[derive(Clone, Copy, Debug)]
pub struct Win {
    pub id: WindowId,
    pub tag: BufferId,
    pub body: BufferId,
    pub number: u32,
}

/// The live window numbered `number` in session `s`.
pub fn window(s: &Session, number: u32) -> Result<Win> {
    let id = s.view().state.layout.window_numbered(AcmeNumber(number)).ok_or_else(deleted)?;
    let w = s.view().state.window(id).map_err(|_| deleted())?;
    Ok(Win { id, tag: w.tag, body: w.body, number })
}

fn deleted() -> Error {
    Error::WindowDeleted
}

/// The files a terminal's window has.
const TERM_FILES: &[WinFile] = &[WinFile::Body, WinFile::Ctl, WinFile::Tag];

/// Whether `number` names a terminal's window (which has no core
/// window); a layout's window of that number, should there ever be one,
/// comes first.
fn is_term(s: &Session, number: u32) -> bool {
    termwin::term_of(&s.view().state, number).is_some() && window(s, number).is_err()
}

/// Whether a walk from `place` may resolve root names and window numbers
/// (the acme root, `acme/` and `draw/`).
fn is_root_like(place: Place) -> Option<u64> {
    match place {
        Place::Dir(n, SessionDir::Acme) | Place::Acme1(n, AcmeFile::Acme | AcmeFile::Draw) => Some(n),
        _ => None,
    }
}

/// One walk step inside the acme tree (`new` is the walk's to handle).
pub fn step(s: &Session, place: Place, name: &str) -> Option<Place> {
    if let Some(n) = is_root_like(place) {
        if let Some(f) = lookup(ACME, name) {
            return Some(Place::Acme1(n, f));
        }
        let number = u32::try_from(crate::fsys::place::number(name)?).ok()?;
        return (window(s, number).is_ok() || is_term(s, number)).then_some(Place::Win(n, number));
    }
    match place {
        Place::Win(n, number) if is_term(s, number) => {
            lookup(WINDOW, name).filter(|f| TERM_FILES.contains(f)).map(|f| Place::Win1(n, number, f))
        }
        Place::Win(n, number) => lookup(WINDOW, name).map(|f| Place::Win1(n, number, f)),
        _ => None,
    }
}

/// The session whose `new` a walk from `place` through `name` goes into.
pub fn walks_into_new(place: Place, name: &str) -> Option<u64> {
    is_root_like(place).filter(|_| name == "new")
}

/// What the acme tree's directories list: acme's files, then the windows
/// by number.
pub fn children(s: &Session, place: Place) -> Result<Vec<Place>> {
    Ok(match place {
        Place::Dir(n, SessionDir::Acme) => {
            let mut v: Vec<Place> = ACME.iter().map(|(_, f, _)| Place::Acme1(n, *f)).collect();
            let mut numbers: Vec<u32> = s.view().state.layout.numbers.values().map(|a| a.0).collect();
            numbers.extend(s.view().state.terms.keys().map(|t| termwin::number(*t)));
            numbers.sort_unstable();
            v.extend(numbers.into_iter().map(|m| Place::Win(n, m)));
            v
        }
        Place::Acme1(_, AcmeFile::Acme | AcmeFile::Draw | AcmeFile::New) => Vec::new(),
        Place::Win(n, number) if is_term(s, number) => TERM_FILES.iter().map(|f| Place::Win1(n, number, *f)).collect(),
        Place::Win(n, number) => WINDOW.iter().map(|(_, f, _)| Place::Win1(n, number, *f)).collect(),
        _ => return Err(FsError::NotADirectory.into()),
    })
}

/// The terminal a layout window numbered `number` shows, if it shows one:
/// its body is the terminal's text, read-only, as a terminal's own
/// window's is.
fn shown_term(s: &Session, number: u32) -> Option<TermId> {
    let id = s.view().state.layout.window_numbered(AcmeNumber(number))?;
    s.view().state.window(id).ok()?.term.filter(|t| s.view().state.terms.contains_key(t))
}

/// Whether an acme place still exists.
pub fn check(s: &Session, place: Place) -> Result<()> {
    match place {
        Place::Win(_, number) if is_term(s, number) => Ok(()),
        Place::Win1(_, number, file) if is_term(s, number) => match TERM_FILES.contains(&file) {
            true => Ok(()),
            false => Err(deleted()),
        },
        Place::Win(_, number) | Place::Win1(_, number, _) => window(s, number).map(|_| ()),
        _ => Ok(()),
    }
}

/// A plain acme file's content now.
pub fn content(s: &Session, place: Place) -> Result<Made> {
    let state = &s.view().state;
    // A body is copied (its rope shared) and made into bytes after the lock.
    let text_of = |b: BufferId| state.buffer(b).map(|b| Made::Text(b.text.clone())).map_err(|_| deleted());
    Ok(match place {
        Place::Acme1(_, AcmeFile::Index) => fields::index(state).into(),
        Place::Win1(_, number, file) if is_term(s, number) => {
            let (id, t) = termwin::term_of(state, number).ok_or_else(deleted)?;
            match file {
                WinFile::Body => Made::Term(Box::new(t.clone()), crate::fsys::made::TermText::All),
                WinFile::Tag => termwin::tag(id, t).into(),
                WinFile::Ctl => fields::term_ctl(id, t).into(),
                _ => Made::Bytes(Vec::new()),
            }
        }
        Place::Win1(_, number, file) => {
            let w = window(s, number)?;
            match file {
                WinFile::Ctl => fields::ctl(state, w.id, number).ok_or_else(deleted)?.into(),
                WinFile::Addr => buffers::addr_read(s, w.body)?.into(),
                WinFile::Body => match shown_term(s, number).and_then(|t| state.terms.get(&t)) {
                    Some(t) => Made::Term(Box::new(t.clone()), crate::fsys::made::TermText::All),
                    None => text_of(w.body)?,
                },
                WinFile::Tag => text_of(w.tag)?,
                _ => Made::Bytes(Vec::new()),
            }
        }
        _ => Made::Bytes(Vec::new()),
    })
}

/// The body view of a window, where its selection (dot) is.
fn body_view(w: &Win) -> ViewId {
    ViewId::WindowBody(w.id)
}

/// The body's selection as of its version.
fn selection(s: &Session, w: &Win) -> Result<(Range, u64)> {
    let b = s.view().state.buffer(w.body).map_err(|_| deleted())?;
    let v = b.views.get(&body_view(w)).map(|v| Range::new(v.q0, v.q1)).unwrap_or_default();
    Ok((v, b.version))
}

impl Fsys {
    /// Makes a window through `new` and returns its directory.
    pub(crate) async fn acme_new(&self, n: u64) -> Result<Place> {
        let p = Proposal::CreateWindow { body: None, column: None, name: String::new(), near: None };
        match self.daemon.propose(n, "acme/new", p).await?.created {
            Created::Window(w) => Ok(Place::Win(n, w.number.0)),
            _ => Err(FsError::NoWindowMade("acme/new").into()),
        }
    }

    fn acme_window(&self, n: u64, number: u32) -> Result<Win> {
        self.daemon.read(n, |s| window(s, number))?
    }

    /// Opens an acme file: what each one does at open beyond its content.
    pub(crate) async fn acme_open(&self, place: Place, mode: u8) -> Result<Opened> {
        if mode & 3 == apex_ninep::fcall::OEXEC || mode & apex_ninep::fcall::ORCLOSE != 0 {
            return Err(FsError::AcmeOpenMode.into());
        }
        // Taken under the lock; made into bytes after it.
        let made = || async {
            let made = self.daemon.read(place.session().ok_or_else(gone)?, |s| content(s, place))??;
            Ok::<_, Error>(Content::of(made.version().await))
        };
        let term_window = match place {
            Place::Win1(n, number, _) => self.daemon.read(n, |s| is_term(s, number))?,
            _ => false,
        };
        // A layout window showing a terminal: its text is the terminal's.
        let shows = match place {
            Place::Win1(n, number, WinFile::Body | WinFile::Data | WinFile::Xdata | WinFile::Wrsel) => {
                self.daemon.read(n, |s| shown_term(s, number))?
            }
            _ => None,
        };
        match place {
            Place::Win1(_, number, _) if term_window && mode & 3 != apex_ninep::fcall::OREAD => {
                Err(FsError::TermWindowReadOnly(number - termwin::TERMS_FROM).into())
            }
            Place::Win1(..) if shows.is_some() && mode & 3 != apex_ninep::fcall::OREAD => {
                Err(FsError::TermWindowReadOnly(shows.map_or(0, |t| t.0 as u32)).into())
            }
            Place::Win1(..) if term_window => Ok(Opened::Content(made().await?)),
            Place::Acme1(_, AcmeFile::Editout) | Place::Win1(_, _, WinFile::Editout) => {
                Err(FsError::EditoutClosed.into())
            }
            Place::Acme1(n, AcmeFile::Log) => Ok(Opened::Log { next: self.daemon.read(n, |s| s.acme().log_end())? }),
            Place::Acme1(_, AcmeFile::Cons) => Ok(Opened::Text { content: made().await?, tail: Vec::new() }),
            Place::Win1(n, number, file) => {
                let w = self.acme_window(n, number)?;
                match file {
                    WinFile::Addr => {
                        self.daemon.change(n, |s, _| buffers::addr_open(s, w.body))??;
                        Ok(Opened::Addr { content: made().await?, body: w.body })
                    }
                    WinFile::Data | WinFile::Xdata => Ok(Opened::Data { body: w.body, ends_nomark: true }),
                    WinFile::Event => self.acme_event_open(n, &w).await,
                    WinFile::Rdsel => {
                        let (sel, _) = self.daemon.read(n, |s| selection(s, &w))??;
                        // The text and the claim under one lock (nothing is
                        // left claimed if the open fails); the text a copy
                        // of the rope (its nodes shared), the selection
                        // made of it with no lock held: it may be big.
                        let text = self.daemon.change(n, |s, _| {
                            let b = s.view().state.buffer(w.body).map_err(|_| deleted())?;
                            let text = b.check_range(sel.q0, sel.q1).ok().map(|()| b.text.rope().clone());
                            let st = s.acme_mut().windows.entry(w.id).or_default();
                            if st.rdsel_open {
                                return Err(Error::from(FsError::RdselInUse));
                            }
                            st.rdsel_open = true;
                            Ok(text)
                        })??;
                        let bytes = text
                            .map(|t| t.slice(sel.q0 as usize..sel.q1 as usize).to_string().into_bytes())
                            .unwrap_or_default();
                        Ok(Opened::Rdsel { content: Content::made(bytes), window: w.id })
                    }
                    WinFile::Wrsel => {
                        let (sel, version) = self.daemon.read(n, |s| selection(s, &w))??;
                        if sel.q1 > sel.q0 {
                            let p = Proposal::Delete {
                                buffer: w.body,
                                version,
                                q0: sel.q0,
                                q1: sel.q1,
                                origin: Origin::OtherFile,
                            };
                            self.daemon.propose(n, "wrsel open", p).await?;
                        }
                        let (_, version) = self.daemon.read(n, |s| selection(s, &w))??;
                        // Its close ends nomark, as a data fid's does.
                        Ok(Opened::Wrsel { window: w.id, body: w.body, at: (sel.q0, version), from: (sel.q0, version) })
                    }
                    WinFile::Body | WinFile::Errors => Ok(Opened::Text { content: made().await?, tail: Vec::new() }),
                    _ => Ok(Opened::Content(made().await?)),
                }
            }
            _ => Ok(Opened::Content(made().await?)),
        }
    }

    /// The first open of a window's event file tells the window's leader
    /// (the UI then reports B2/B3 actions instead of acting).
    async fn acme_event_open(&self, n: u64, w: &Win) -> Result<Opened> {
        let shards = [Shard::Buffer(w.tag), Shard::Buffer(w.body)];
        let opened = self.open_reader(n, &shards, Source::Window(n, w.id), Some(w.id))?;
        let first = self.daemon.change(n, |s, _| {
            let st = s.acme_mut().windows.entry(w.id).or_default();
            st.event_opens += 1;
            st.event_opens == 1
        });
        let first = match first {
            Ok(first) => first,
            Err(e) => {
                self.stop_reading(n, &shards);
                self.acme_clunk(n, Some(w.id), None, None).await;
                return Err(e);
            }
        };
        if first {
            let p = Proposal::EventReader { window: w.id, reader: Some(AttachmentId::SERVER) };
            if let Err(e) = self.daemon.propose(n, "event open", p).await {
                // No fid comes of this open: give back what it took.
                self.stop_reading(n, &shards);
                self.acme_clunk(n, Some(w.id), None, None).await;
                return Err(e);
            }
        }
        Ok(opened)
    }

    /// What closing an acme fid ends: the event reader, nomark (any data
    /// fid), rdsel's claim.
    /// After a body write dot moves to the end of the text written (the
    /// body's end), unless the window is `noscroll` (acme's `textshow`
    /// in `xfidwrite`).
    async fn dot_after_write(&self, n: u64, w: &Win) -> Result<()> {
        let at = self.daemon.read(n, |s| {
            let scroll = s.view().state.window(w.id).is_ok_and(|win| win.flags.scroll);
            let b = s.view().state.buffer(w.body).ok()?;
            let dot = b.views.get(&body_view(w)).map(|v| (v.q0, v.q1));
            (scroll && dot != Some((b.len(), b.len()))).then_some((b.len(), b.version))
        })?;
        let Some((end, version)) = at else { return Ok(()) };
        let p = Proposal::Select { buffer: w.body, view: body_view(w), version, q0: end, q1: end };
        self.daemon.propose(n, "body write dot", p).await.map(|_| ())
    }

    /// A wrsel fid's clunk selects what its writes put in (acme's
    /// `xfidclose`).
    pub(crate) async fn wrsel_close(&self, n: u64, window: WindowId, body: BufferId, from: (u64, u64), at: (u64, u64)) {
        let range = self.daemon.read(n, |s| {
            let b = s.view().state.buffer(body).ok()?;
            let q0 = b.rebase(from.1, from.0).ok()?.min(b.len());
            let q1 = b.rebase(at.1, at.0).ok()?.min(b.len());
            Some((q0.min(q1), q1.max(q0), b.version))
        });
        if let Ok(Some((q0, q1, version))) = range {
            let view = ViewId::WindowBody(window);
            let _ =
                self.daemon.propose(n, "wrsel close", Proposal::Select { buffer: body, view, version, q0, q1 }).await;
        }
    }

    pub(crate) async fn acme_clunk(
        &self,
        n: u64,
        event_of: Option<WindowId>,
        data_of: Option<BufferId>,
        rdsel: Option<WindowId>,
    ) {
        if let Some(w) = rdsel {
            // (A window deleted meanwhile took its state with it: none is
            // made again here.)
            let _ = self.daemon.change(n, |s, _| {
                if let Some(st) = s.acme_mut().windows.get_mut(&w) {
                    st.rdsel_open = false;
                }
            });
        }
        if let Some(w) = event_of {
            let last = self.daemon.change(n, |s, _| {
                let Some(st) = s.acme_mut().windows.get_mut(&w) else { return false };
                st.event_opens = st.event_opens.saturating_sub(1);
                st.event_opens == 0
            });
            if matches!(last, Ok(true)) {
                // With it the tag menu comes back and the dump settings go
                // (core's EventReader, as acme's xfidclose).
                let _ = self.daemon.propose(n, "event close", Proposal::EventReader { window: w, reader: None }).await;
            }
        }
        if let Some(b) = data_of {
            let windows: Vec<WindowId> = self
                .daemon
                .read(n, |s| {
                    s.view()
                        .state
                        .windows
                        .iter()
                        .filter(|(_, w)| w.body == b && !w.flags.mark)
                        .map(|(id, _)| *id)
                        .collect()
                })
                .unwrap_or_default();
            for w in windows {
                let _ = self.change_flags(n, w, |f| f.mark = true).await;
            }
        }
    }

    /// Proposes the window's flags changed by `f`, if that changes them.
    async fn change_flags(&self, n: u64, w: WindowId, f: impl FnOnce(&mut apex_core::WindowFlags)) -> Result<()> {
        let flags = self
            .daemon
            .read(n, |s| Ok::<_, Error>(s.view().state.window(w).map_err(|_| deleted())?.flags.clone()))??;
        let mut new = flags.clone();
        f(&mut new);
        if new == flags {
            return Ok(());
        }
        self.daemon.propose(n, "window flags", Proposal::Flags { window: w, flags: new }).await?;
        Ok(())
    }

    /// Reads `log`: blocks until a line exists, returns exactly one.
    pub(crate) async fn read_log(&self, n: u64, fid: &Fid, count: u32) -> Result<Vec<u8>> {
        loop {
            let mut wake = self.daemon.subscribe_to(n);
            let line = self.daemon.read(n, |s| {
                let mut opened = fid.lock();
                let Opened::Log { next } = &mut *opened else { return Err(Error::from(FsError::Unopened("log"))) };
                let line = s.acme().log_line(*next).map(|(at, line)| {
                    *next = at + 1;
                    line.text().into_bytes()
                });
                Ok(line)
            })??;
            if let Some(mut bytes) = line {
                bytes.truncate(count as usize);
                return Ok(bytes);
            }
            if wake.changed().await.is_err() {
                return Ok(Vec::new());
            }
        }
    }

    /// A write to an acme file.
    pub(crate) async fn acme_write(&self, fid: &Fid, data: Vec<u8>) -> Result<()> {
        let place = fid.place;
        match place {
            Place::Acme1(_, AcmeFile::Label) => Ok(()),
            Place::Acme1(n, AcmeFile::Cons) => self.append_errors(n, "+Errors", &fid.acme_text(data)).await,
            Place::Win1(n, number, file) => {
                let w = self.acme_window(n, number)?;
                match file {
                    WinFile::Body => {
                        self.body_write(fid, n, w.body, data).await?;
                        self.dot_after_write(n, &w).await
                    }
                    WinFile::Errors => {
                        let text = fid.acme_text(data);
                        let name = self.body_name(n, &w)?;
                        self.append_errors(n, &apex_core::look::errors_for(&name), &text).await
                    }
                    // Text files take any bytes as acme makes them runes.
                    WinFile::Data | WinFile::Xdata | WinFile::Tag | WinFile::Wrsel => {
                        let text = fid.acme_text(data);
                        self.window_write(fid, n, &w, file, &text).await
                    }
                    _ => {
                        let text = utf8(data)?;
                        self.window_write(fid, n, &w, file, &text).await
                    }
                }
            }
            _ => Err(crate::fsys::place::not_writable(place).into()),
        }
    }

    async fn window_write(&self, fid: &Fid, n: u64, w: &Win, file: WinFile, text: &str) -> Result<()> {
        match file {
            WinFile::Addr => self.addr_write(n, w.body, text).await,
            WinFile::Data | WinFile::Xdata => self.data_write(n, w.body, text).await,
            WinFile::Tag => match self.daemon.read(n, |s| buffers::append(s, w.tag, text, Origin::FileWrite))?? {
                Some(p) => self.daemon.propose(n, "tag write", p).await.map(|_| ()),
                None => Ok(()),
            },
            WinFile::Ctl => self.window_ctl(n, w, text, fid.token()).await,
            WinFile::Event => self.event_write(n, w, text).await,
            WinFile::Wrsel => {
                let Opened::Wrsel { at: (q, version), .. } = *fid.lock() else {
                    return Err(FsError::Unopened("wrsel").into());
                };
                if text.is_empty() {
                    return Ok(());
                }
                let p =
                    Proposal::Insert { buffer: w.body, version, q0: q, text: text.into(), origin: Origin::OtherFile };
                self.daemon.propose(n, "wrsel write", p).await?;
                // The next write goes after this one, at the version now.
                let now = self.daemon.read(n, |s| {
                    let b = s.view().state.buffer(w.body).map_err(|_| deleted())?;
                    let at = b.rebase(version, q).unwrap_or(q);
                    Ok::<_, Error>((at + text.chars().count() as u64, b.version))
                })??;
                if let Opened::Wrsel { at, .. } = &mut *fid.lock() {
                    *at = now;
                }
                Ok(())
            }
            _ => Err(FsError::NotWritable("this file".into()).into()),
        }
    }

    fn body_name(&self, n: u64, w: &Win) -> Result<String> {
        self.daemon.read(n, |s| Ok(s.view().state.buffer(w.body).map_err(|_| deleted())?.name.clone()))?
    }

    /// Appends `text` to the window named `name` (made if missing).
    async fn append_errors(&self, n: u64, name: &str, text: &str) -> Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        let (_, b) = host::errors_window(&self.daemon, n, name).await?;
        host::append_output(&self.daemon, n, b, text).await;
        Ok(())
    }

    /// A window's ctl write: each message in order, stopping at the first
    /// bad one (earlier ones stay applied).
    async fn window_ctl(&self, n: u64, w: &Win, text: &str, fid: usize) -> Result<()> {
        for msg in ctl::parse_all(text) {
            self.apply_ctl(n, w, &msg?, fid).await?;
        }
        Ok(())
    }

    /// acme's `lock` and `unlock`: the window's ctl for one fid. Where
    /// acme's second `lock` waits for the first to end (forever, if its
    /// holder never does), this refuses it; an `unlock` with no lock held
    /// is refused where acme's crashes.
    fn ctl_lock(&self, n: u64, w: &Win, fid: usize, take: bool) -> Result<()> {
        self.daemon.tend(n, |s| {
            let st = s.acme_mut().windows.entry(w.id).or_default();
            match (take, st.ctl_lock) {
                (true, Some(holder)) if holder != fid => Err(FsError::CtlLocked.into()),
                (true, _) => {
                    st.ctl_lock = Some(fid);
                    Ok(())
                }
                (false, None) => Err(FsError::UnlockWithoutLock.into()),
                (false, Some(_)) => {
                    st.ctl_lock = None;
                    Ok(())
                }
            }
        })?
    }

    /// A ctl fid going away lets go of the window's ctl lock it holds.
    pub(crate) fn ctl_unlock_on_clunk(&self, place: crate::fsys::place::Place, fid: usize) {
        let Place::Win1(n, number, WinFile::Ctl) = place else { return };
        let _ = self.daemon.tend(n, |s| {
            let Ok(w) = window(s, number) else { return };
            if let Some(st) = s.acme_mut().windows.get_mut(&w.id) {
                if st.ctl_lock == Some(fid) {
                    st.ctl_lock = None;
                }
            }
        });
    }

    async fn apply_ctl(&self, n: u64, w: &Win, msg: &WinCtl, fid: usize) -> Result<()> {
        let request = format!("acme ctl {msg:?}");
        let propose = |p: Proposal| async move { self.daemon.propose(n, &request, p).await.map(|_| ()) };
        match msg {
            WinCtl::Lock => self.ctl_lock(n, w, fid, true),
            WinCtl::Unlock => self.ctl_lock(n, w, fid, false),
            WinCtl::AddrDot => {
                let (sel, _) = self.daemon.read(n, |s| selection(s, w))??;
                Ok(self.daemon.change(n, |s, _| buffers::set_addr(s, w.body, sel))??)
            }
            WinCtl::DotAddr => {
                let (r, version) = self.daemon.read(n, |s| buffers::addr_now(s, w.body))??;
                if r.q0 > r.q1 {
                    // acme takes `#5,#2` into addr but dies on this.
                    return Err(FsError::AddrBackwards { q0: r.q0, q1: r.q1 }.into());
                }
                propose(Proposal::Select { buffer: w.body, view: body_view(w), version, q0: r.q0, q1: r.q1 }).await
            }
            WinCtl::LimitAddr => Ok(self.daemon.change(n, |s, _| buffers::limit_to_addr(s, w.body))??),
            WinCtl::Clean => {
                // acme's clean also forgets the undo history.
                self.daemon.propose(n, "acme ctl clean", Proposal::Clean { buffer: w.body }).await?;
                let can = self.daemon.read(n, |s| {
                    let b = s.view().state.buffer(w.body).map_err(|_| deleted())?;
                    Ok::<_, Error>(b.can_undo() || b.can_redo())
                })??;
                match can {
                    true => propose(Proposal::ForgetUndo { buffer: w.body }).await,
                    false => Ok(()),
                }
            }
            WinCtl::Dirty => propose(Proposal::Dirty { buffer: w.body }).await,
            WinCtl::Mark => propose(Proposal::Mark { buffer: w.body }).await,
            WinCtl::Nomark => self.change_flags(n, w.id, |f| f.mark = false).await,
            WinCtl::Menu => self.change_flags(n, w.id, |f| f.menu = true).await,
            WinCtl::Nomenu => self.change_flags(n, w.id, |f| f.menu = false).await,
            WinCtl::Scroll => self.change_flags(n, w.id, |f| f.scroll = true).await,
            WinCtl::Noscroll => self.change_flags(n, w.id, |f| f.scroll = false).await,
            // A command and a directory a later Load runs it in.
            WinCtl::Dump(c) => {
                crate::access::require_full("dump (a command Load runs)")?;
                self.change_flags(n, w.id, |f| f.dump = Some(c.clone())).await
            }
            WinCtl::Dumpdir(d) => {
                crate::access::require_full("dumpdir (where Load runs a command)")?;
                self.change_flags(n, w.id, |f| f.dumpdir = Some(d.clone())).await
            }
            WinCtl::Font(p) => self.change_flags(n, w.id, |f| f.font = Some(p.clone())).await,
            WinCtl::Cleartag => {
                let p = self.daemon.read(n, |s| {
                    let tag = s.view().state.buffer(w.tag).map_err(|_| deleted())?;
                    Ok::<_, Error>(look::cleartag_range(tag).map(|(q0, q1)| Proposal::Delete {
                        buffer: w.tag,
                        version: tag.version,
                        q0,
                        q1,
                        origin: Origin::OtherFile,
                    }))
                })??;
                match p {
                    Some(p) => propose(p).await,
                    None => Ok(()),
                }
            }
            WinCtl::Del => {
                // acme's winclean, conservative: a changed file is refused
                // once, in ctl's words, and warned of in +Errors.
                if let Some(e) = self.refused_once(n, w).await? {
                    return Err(FsError::Dirty(e).into());
                }
                propose(Proposal::DeleteWindow { window: w.id }).await
            }
            WinCtl::Delete => propose(Proposal::DeleteWindow { window: w.id }).await,
            WinCtl::Get => {
                // acme's get: the write succeeds; a changed file is refused
                // once and whatever goes wrong is said in +Errors.
                let checked = self.daemon.read(n, |s| {
                    s.view().state.buffer(w.body).is_ok_and(|b| !b.is_empty() && !look::is_dir(&b.name))
                })?;
                if checked && self.refused_once(n, w).await?.is_some() {
                    return Ok(());
                }
                if let Err(e) = host::acme_get(&self.daemon, n, w.body, None, host::Reading::Apart).await {
                    let note = format!("{e}\n");
                    let id = w.id;
                    self.daemon.with_host(n, Some(id), move |h| exec::warn(h, Some(id), &note)).await?;
                    return Ok(());
                }
                self.log_op(n, w, "get")
            }
            WinCtl::Put => {
                host::put(&self.daemon, n, w.body, None, None).await?;
                self.log_op(n, w, "put")
            }
            WinCtl::Name(name) => self.rename(n, w, name).await,
            WinCtl::Show => {
                let p = self.daemon.read(n, |s| {
                    let b = s.view().state.buffer(w.body).map_err(|_| deleted())?;
                    let v = b.views.get(&body_view(w)).copied().unwrap_or_default();
                    // Scroll so the selection's line is the first shown.
                    let org = look::show_origin(b, v.q0);
                    Ok::<_, Error>((org != v.org).then_some(Proposal::SetOrigin {
                        buffer: w.body,
                        view: body_view(w),
                        version: b.version,
                        org,
                    }))
                })??;
                match p {
                    Some(p) => propose(p).await,
                    None => Ok(()),
                }
            }
        }
    }

    /// acme's `winclean(w, TRUE)` for ctl: if the window's changes would
    /// be lost, warns `NAME modified` in +Errors, remembers the warning
    /// (the same message again goes ahead) and returns it.
    async fn refused_once(&self, n: u64, w: &Win) -> Result<Option<ExecError>> {
        let id = w.id;
        let checked = self
            .daemon
            .with_host(n, Some(id), move |h| match exec::clean_to_close(h, id, true) {
                Err(e @ ExecError::Modified(_)) => exec::warn(h, Some(id), &format!("{e}\n")).map(|_| Some(e)),
                done => done.map(|_| None),
            })
            .await?;
        Ok(checked)
    }

    fn log_op(&self, n: u64, w: &Win, op: &'static str) -> Result<()> {
        let name = self.body_name(n, w)?;
        self.daemon.change(n, |s, _| s.acme_mut().log(w.number, op, name))
    }

    /// Renames the window: the body's name, and with it the tag's first
    /// word (core's `make::settag`, run with every proposal).
    async fn rename(&self, n: u64, w: &Win, name: &str) -> Result<()> {
        self.daemon.propose(n, "acme ctl name", Proposal::Name { buffer: w.body, name: name.to_string() }).await?;
        self.daemon.change(n, |s, _| s.acme_mut().note_name(w.id, name))
    }

    /// A write to `event`: each message asks apex to act as the UI would.
    async fn event_write(&self, n: u64, w: &Win, text: &str) -> Result<()> {
        let lengths = self.daemon.read(n, |s| {
            let len = |b| s.view().state.buffer(b).map(|b| b.len()).map_err(|_| deleted());
            Ok::<_, Error>((len(w.tag)?, len(w.body)?))
        })??;
        for wb in event::parse_writeback(text, lengths).map_err(Error::from)? {
            self.act(n, w, wb).await?;
        }
        Ok(())
    }

    /// Carries out one written-back action, as the UI would: B2 runs a
    /// built-in or a command, B3 opens a file or searches (core's rules).
    async fn act(&self, n: u64, w: &Win, wb: WriteBack) -> Result<()> {
        let (text, end, plumbed, limited) = self.daemon.read(n, |s| {
            let acted = if wb.tag { w.tag } else { w.body };
            let b = s.view().state.buffer(acted).map_err(|_| deleted())?;
            let limited = match s.view().log.shard(Shard::Buffer(acted)) {
                Ok(log) => {
                    let shared = (!s.hub().limited.is_empty()).then_some(b);
                    event::written_back_limited(log.entries.iter(), &wb, |a| s.hub().limited.contains(&a), shared)
                }
                Err(_) => false,
            };
            let (q0, q1) = match wb.q0 == wb.q1 {
                true => look::expand(b, wb.q0, wb.act == Act::Execute),
                false => (wb.q0, wb.q1),
            };
            // What acme's look3 plumbs: the text; for a null click in dot,
            // dot; for another, the blank-delimited run around it and
            // where the click was (none on a blank).
            let view = if wb.tag { ViewId::WindowTag(w.id) } else { ViewId::WindowBody(w.id) };
            let dot = b.views.get(&view).map(|v| (v.q0, v.q1)).filter(|(q0, q1)| q0 < q1);
            let plumbed = match (wb.q0 == wb.q1, dot) {
                (true, Some((d0, d1))) if d0 <= wb.q0 && wb.q0 <= d1 => {
                    Some(Plumb { data: b.slice(d0, d1).unwrap_or_default(), click: None })
                }
                (true, _) => Plumb::around(b, wb.q0),
                (false, _) => Some(Plumb { data: b.slice(wb.q0, wb.q1).unwrap_or_default(), click: None }),
            };
            let name = s.view().state.buffer(w.body).map(|b| b.name.clone()).unwrap_or_default();
            let wdir = look::window_dir(&name).unwrap_or_else(|| host::run_dir(None));
            Ok::<_, Error>((b.slice(q0, q1).unwrap_or_default(), q1, plumbed.map(|p| p.to_message(&wdir)), limited))
        })??;
        // What a client short of a full token clicked runs with its scope,
        // and only if it is a built-in; its changes are said as writes.
        let scope = match limited {
            true => crate::access::Scope::Edit,
            false => crate::access::current(),
        };
        crate::access::within(scope, self.carry_out(n, w, wb, (text, end, plumbed), limited)).await
    }

    /// The rest of [`Self::act`], with the scope it runs in.
    async fn carry_out(
        &self,
        n: u64,
        w: &Win,
        wb: WriteBack,
        (text, end, plumbed): (String, u64, Option<apex_core::plumb::Message>),
        limited: bool,
    ) -> Result<()> {
        let c1 = event::as_written(wb.origin, limited);
        // B3 goes to the session's plumber first, then to one another
        // program posts, and only then to acme's own look.
        if wb.act == Act::Look {
            // A null click on a blank plumbs nothing and looks for
            // nothing, as in acme.
            let Some(m) = plumbed else { return Ok(()) };
            if crate::plumb::send_first(&self.daemon, self.system_plumber.as_deref(), n, m).await {
                return Ok(());
            }
        }
        // A look at text in the body searches on from its end, so it finds
        // the next occurrence (acme's look3); from the tag, after dot.
        let from = (!wb.tag).then_some(end);
        if text.trim().is_empty() {
            return Ok(());
        }
        let id = w.id;
        let last = |s: &Session, b: BufferId| s.view().log.shard(Shard::Buffer(b)).map_or(0, |l| l.last());
        let before = self.daemon.tend(n, |s| {
            s.acme_mut().event_runs([w.body, w.tag], c1);
            (last(s, w.body), last(s, w.tag))
        })?;
        // Said done however this request ends (aborted with its
        // connection, or a panic caught), so no stale letter stays.
        let running = EventRunning { daemon: &self.daemon, n, buffers: [w.body, w.tag], c1 };
        let done = match wb.act {
            Act::Execute if limited && !exec::is_builtin(&text) => {
                // Its first word says which (a B2 may span the whole body).
                let command = look::split_command(&text).0.chars().take(64).collect();
                Err(Error::from(crate::access::AccessError::NotBuiltin { command }))
            }
            Act::Execute => {
                let run = move |h: &mut crate::host::headless::DaemonHost| {
                    let _job = h.as_job(&text);
                    exec::execute(h, Some(id), &text)
                };
                self.daemon.with_host(n, Some(id), run).await
            }
            Act::Look => self.daemon.with_host(n, Some(id), move |h| exec::look_from(h, id, &text, from)).await,
        };
        // The daemon's undo and redo made for this event are reported
        // with its origin letter.
        let _ = self.daemon.tend(n, |s| {
            for (b, from) in [(w.body, before.0), (w.tag, before.1)] {
                let made: Vec<Seq> = match s.view().log.entries_after(Shard::Buffer(b), from) {
                    Ok(it) => it
                        .filter(|e| {
                            e.attachment == AttachmentId::SERVER
                                && matches!(
                                    e.op,
                                    apex_core::Op::Buffer(apex_core::BufferOp::Undo | apex_core::BufferOp::Redo)
                                )
                        })
                        .map(|e| e.seq)
                        .collect(),
                    Err(_) => Vec::new(),
                };
                for seq in made {
                    s.acme_mut().note_origin(b, seq, c1);
                }
            }
        });
        // Noted first, then no longer running: a reader finds the letter
        // one way or the other.
        drop(running);
        // As acme's xfideventwrite: the write succeeds, and what went wrong
        // goes to the window's +Errors (a search that found nothing says
        // nothing, as look3).
        match done {
            Ok(()) | Err(Error::Exec(ExecError::NotFound(_))) => Ok(()),
            Err(e) => {
                let note = format!("{e}\n");
                let warned = self.daemon.with_host(n, Some(id), move |h| exec::warn(h, Some(id), &note)).await;
                Ok(warned?)
            }
        }
    }
}

/// An event written back, running: its window's buffers and origin
/// letter are the session's until this is dropped.
struct EventRunning<'a> {
    daemon: &'a crate::daemon::Daemon,
    n: u64,
    buffers: [BufferId; 2],
    c1: char,
}

impl Drop for EventRunning<'_> {
    fn drop(&mut self) {
        // Never a panic here (it may run while one unwinds): a poisoned
        // lock is taken as it is.
        let _ = self.daemon.tend(self.n, |s| s.acme_mut().event_ran(self.buffers, self.c1));
    }
}
