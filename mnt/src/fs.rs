//! The mount: FUSE requests served by 9P requests, one connection for all.
//!
//! Every FUSE request runs in its own task (fuse3 spawns them), and the 9P
//! client multiplexes tags, so many processes read and write through one
//! mount at once and a blocked `cat event` never stalls an `ls`. Reads and
//! writes can be interrupted ([`Inflight`]). Synthetic files are opened
//! direct-io: the kernel neither caches them nor trusts their length 0.

use crate::attr::{file_attr, synthetic, ttl};
use crate::errno::errno;
use crate::handles::{Handle, Handles};
use crate::inflight::Inflight;
use crate::inodes::{Inodes, ROOT};
use crate::readahead::{positional, ReadAhead, Writes};
use apex_ninep::fcall::{Stat, DMDIR, ORDWR, OREAD, OTRUNC, OWRITE};
use apex_ninep::{Client, ClientError};
use bytes::Bytes;
use fuse3::raw::prelude::*;
use fuse3::{Errno, Inode, Result};
use futures_util::stream::{self, Stream};
use std::ffi::{OsStr, OsString};
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};

/// How long a call other than a read or write, interrupted, still waits
/// for the server's answer before it is let go (`Mount::stoppable`).
const PATIENCE: std::time::Duration = std::time::Duration::from_secs(1);

/// FOPEN_DIRECT_IO of the kernel's FUSE ABI: bypass the page cache.
const FOPEN_DIRECT_IO: u32 = 1 << 0;

/// The filesystem of one mount.
pub struct Mount {
    client: Client,
    root_fid: u32,
    inodes: Arc<Mutex<Inodes>>,
    handles: Handles,
    inflight: Arc<Inflight>,
    /// The writes through the mount, which a piece read ahead must not
    /// predate.
    writes: Writes,
    uid: u32,
    gid: u32,
    /// The st_blksize to report: the power of two at or above the
    /// iounit, so `cat` asks for one Tread's worth per read(2) (answered
    /// short by at most the 9P header) instead of 128 KiB.
    blksize: u32,
}

/// Logs a failed 9P call and turns it into its errno. FUSE hands the
/// program only the errno, so the server's words are logged at the
/// default level; lookups of names that do not exist are routine (shells
/// probe) and interrupted calls are the user's doing, so those are only
/// traced.
fn failed(op: &str, what: &str, e: ClientError) -> Errno {
    let n = errno(&e);
    if (n == libc::ENOENT && op == "lookup") || n == libc::EINTR {
        tracing::debug!(op, what, error = %e, "9P error");
    } else {
        tracing::warn!("{op} {what}: {e}");
    }
    n.into()
}

fn utf8(name: &OsStr) -> Result<&str> {
    name.to_str().ok_or_else(|| libc::ENOENT.into())
}

impl Mount {
    /// The mount of the tree `client` attached as `root_fid`.
    pub async fn new(client: Client, root_fid: u32) -> std::result::Result<Mount, ClientError> {
        let root = client.stat(root_fid).await?;
        let client_msize = client.msize();
        // SAFETY: getuid and getgid cannot fail and touch no memory.
        let (uid, gid) = unsafe { (libc::getuid(), libc::getgid()) };
        Ok(Mount {
            inodes: Arc::new(Mutex::new(Inodes::new(root.qid, root.clone(), root_fid))),
            client,
            root_fid,
            handles: Handles::default(),
            inflight: Arc::new(Inflight::default()),
            writes: Writes::default(),
            uid,
            gid,
            blksize: apex_ninep::version::iounit(client_msize).clamp(4096, 1 << 24).next_power_of_two(),
        })
    }

    /// The requests in flight, for ending them all at unmount.
    pub fn inflight(&self) -> Arc<Inflight> {
        self.inflight.clone()
    }

    fn inodes(&self) -> std::sync::MutexGuard<'_, Inodes> {
        self.inodes.lock().expect("inode lock")
    }

    fn attr(&self, ino: u64, stat: &Stat) -> FileAttr {
        file_attr(ino, stat, self.uid, self.gid, self.blksize)
    }

    /// Clunks `fid` without waiting for the reply.
    fn clunk_later(&self, fid: u32) {
        let client = self.client.clone();
        tokio::spawn(async move { client.clunk(fid).await });
    }

    /// The names of inode `ino`.
    fn names(&self, ino: u64) -> Result<Vec<String>> {
        self.inodes().get(ino).map(|n| n.names.clone()).ok_or_else(|| libc::ENOENT.into())
    }

    /// A fid on inode `ino`, walked from the root the first time.
    async fn fid_of(&self, ino: u64) -> Result<u32> {
        let names = {
            let inodes = self.inodes();
            let node = inodes.get(ino).ok_or(Errno::from(libc::ENOENT))?;
            if let Some(fid) = node.fid {
                return Ok(fid);
            }
            node.names.clone()
        };
        let path = names.join("/");
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let (fid, _) = self.client.walk(self.root_fid, &names).await.map_err(|e| failed("walk", &path, e))?;
        let mut inodes = self.inodes();
        match inodes.get_mut(ino) {
            Some(node) if node.fid.is_none() => {
                node.fid = Some(fid);
                Ok(fid)
            }
            Some(node) => {
                let theirs = node.fid.expect("checked");
                drop(inodes);
                self.clunk_later(fid);
                Ok(theirs)
            }
            None => {
                drop(inodes);
                self.clunk_later(fid);
                Err(libc::ENOENT.into())
            }
        }
    }

    /// A new fid on inode `ino`, for opening: clunked when the request
    /// ends, however it ends (an interrupt drops it halfway), unless it is
    /// kept.
    async fn clone_fid(&self, ino: u64) -> Result<Walked<'_>> {
        let fid = self.fid_of(ino).await?;
        let (new, _) = self.client.walk(fid, &[]).await.map_err(|e| failed("clone", &ino.to_string(), e))?;
        Ok(Walked { mount: self, fid: Some(new) })
    }

    /// Walks from directory `parent` to `name` and records the lookup.
    async fn look(&self, parent: u64, name: &str) -> Result<(u64, Stat)> {
        let pfid = self.fid_of(parent).await?;
        let (fid, _) = self.client.walk(pfid, &[name]).await.map_err(|e| failed("lookup", name, e))?;
        let stat = match self.client.stat(fid).await {
            Ok(s) => s,
            Err(e) => {
                self.clunk_later(fid);
                return Err(failed("stat", name, e));
            }
        };
        let mut names = self.names(parent)?;
        names.push(name.to_string());
        let (ino, spare) = self.inodes().looked_up(names, stat.clone(), Some(fid));
        if let Some(spare) = spare {
            self.clunk_later(spare);
        }
        Ok((ino, stat))
    }

    /// Runs the 9P `call` of FUSE request `unique` on `fid`; an
    /// interrupt ends it with EINTR.
    async fn interruptible<T>(
        &self,
        unique: u64,
        op: &str,
        fid: u32,
        call: impl std::future::Future<Output = std::result::Result<T, ClientError>>,
    ) -> Result<T> {
        match self.inflight.run(unique, call).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(failed(op, &fid.to_string(), e)),
            Err(_) => Err(libc::EINTR.into()),
        }
    }

    /// Inode `ino`'s attributes as the server has them now.
    async fn attr_now(&self, inode: u64) -> Result<ReplyAttr> {
        let fid = self.fid_of(inode).await?;
        let stat = self.client.stat(fid).await.map_err(|e| failed("getattr", &inode.to_string(), e))?;
        if let Some(node) = self.inodes().get_mut(inode) {
            node.stat = stat.clone();
        }
        Ok(ReplyAttr { ttl: ttl(&stat), attr: self.attr(inode, &stat) })
    }

    /// Runs request `unique` until it ends or, interrupted by the kernel,
    /// until the server has not answered within [`PATIENCE`] (the 9P
    /// request it waits on is flushed): EINTR then. Every request that
    /// waits on the server and is not a read or write is run so: a stopped
    /// server never leaves a process that cannot be stopped, and a live
    /// one's answer stands. (A walk let go so is flushed and its new fid
    /// clunked by the client; a fid an open, create or truncate walked is
    /// a `Walked`, clunked however the call ends.)
    async fn stoppable<T>(&self, unique: u64, call: impl std::future::Future<Output = Result<T>>) -> Result<T> {
        self.inflight.run_patiently(unique, PATIENCE, call).await.unwrap_or_else(|_| Err(libc::EINTR.into()))
    }

    fn entry(&self, ino: u64, stat: &Stat) -> ReplyEntry {
        ReplyEntry { ttl: ttl(stat), attr: self.attr(ino, stat), generation: 0 }
    }

    /// The fid and iounit of file handle `fh`.
    fn file(&self, fh: u64) -> Result<(u32, u32)> {
        match self.handles.get(fh).as_deref() {
            Some(Handle::File { fid, iounit, .. }) => Ok((*fid, *iounit)),
            _ => Err(libc::EBADF.into()),
        }
    }

    /// ".", ".." and then the entries of directory handle `fh`, from index
    /// `offset`, made one at a time as the reply takes them: a listing of
    /// thousands is not copied for each readdir of a few dozen.
    fn dir_items(&self, parent: u64, fh: u64, offset: u64) -> Result<DirItems<'_>> {
        let handle = self.handles.get(fh).filter(|h| matches!(**h, Handle::Dir { .. }));
        let Some(handle) = handle else { return Err(libc::EBADF.into()) };
        let up = {
            let inodes = self.inodes();
            let names = inodes.get(parent).map(|n| n.names.clone()).unwrap_or_default();
            // The kernel takes ".." from its own dentries; the number
            // here is only what readdir shows, exact up to one level.
            match names.len() {
                0 | 1 => ROOT,
                _ => parent,
            }
        };
        let at = usize::try_from(offset).unwrap_or(usize::MAX);
        Ok(DirItems { mount: self, handle, parent, up, at })
    }
}

/// The items of a directory handle from one index on ([`Mount::dir_items`]):
/// its number, its stat (none for "." and ".."), its name.
/// A fid a request walked to: clunked (on a task) when the request ends
/// without keeping it, so an interrupted open or create leaves nothing
/// on the server.
struct Walked<'a> {
    mount: &'a Mount,
    fid: Option<u32>,
}

impl Walked<'_> {
    fn fid(&self) -> u32 {
        self.fid.expect("kept only once")
    }

    /// The fid, now the caller's to clunk.
    fn keep(mut self) -> u32 {
        self.fid.take().expect("kept only once")
    }
}

impl Drop for Walked<'_> {
    fn drop(&mut self) {
        if let Some(fid) = self.fid.take() {
            self.mount.clunk_later(fid);
        }
    }
}

struct DirItems<'a> {
    mount: &'a Mount,
    handle: Arc<Handle>,
    parent: u64,
    up: u64,
    at: usize,
}

impl Iterator for DirItems<'_> {
    type Item = (u64, Option<Stat>, OsString);

    fn next(&mut self) -> Option<Self::Item> {
        let Handle::Dir { entries } = &*self.handle else { return None };
        let item = match self.at {
            0 => (self.parent, None, ".".into()),
            1 => (self.up, None, "..".into()),
            i => {
                let s = entries.get(i - 2)?;
                (self.mount.inodes().number(&s.qid), Some(s.clone()), OsString::from(s.name.as_str()))
            }
        };
        self.at += 1;
        Some(item)
    }
}

/// Whether a server's entry `name` can be a file name here: not empty,
/// "." or "..", no '/' or NUL, and no longer than the kernel takes.
fn fits_a_directory(name: &str) -> bool {
    !matches!(name, "" | "." | "..") && !name.contains(['/', '\0']) && name.len() <= 1024
}

/// The 9P open mode for open(2) flags' access mode.
fn access_mode(flags: u32) -> u8 {
    match flags as i32 & libc::O_ACCMODE {
        libc::O_RDONLY => OREAD,
        libc::O_WRONLY => OWRITE,
        _ => ORDWR,
    }
}

fn kind(stat: &Option<Stat>) -> FileType {
    match stat {
        Some(s) if s.mode & DMDIR == 0 => FileType::RegularFile,
        _ => FileType::Directory,
    }
}

impl Filesystem for Mount {
    async fn init(&self, _req: Request) -> Result<ReplyInit> {
        let most = apex_ninep::version::iounit(self.client.msize()).clamp(4096, 1 << 20);
        Ok(ReplyInit::new(NonZeroU32::new(most).expect("at least 4096")))
    }

    async fn destroy(&self, _req: Request) {}

    async fn lookup(&self, req: Request, parent: Inode, name: &OsStr) -> Result<ReplyEntry> {
        self.stoppable(req.unique, async {
            let (ino, stat) = self.look(parent, utf8(name)?).await?;
            Ok(self.entry(ino, &stat))
        })
        .await
    }

    async fn forget(&self, _req: Request, inode: Inode, nlookup: u64) {
        if let Some(fid) = self.inodes().forget(inode, nlookup) {
            self.clunk_later(fid);
        }
    }

    async fn batch_forget(&self, _req: Request, inodes: &[(Inode, u64)]) {
        for (inode, n) in inodes {
            if let Some(fid) = self.inodes().forget(*inode, *n) {
                self.clunk_later(fid);
            }
        }
    }

    async fn getattr(&self, req: Request, inode: Inode, _fh: Option<u64>, _flags: u32) -> Result<ReplyAttr> {
        self.stoppable(req.unique, self.attr_now(inode)).await
    }

    async fn setattr(&self, req: Request, inode: Inode, _fh: Option<u64>, set: SetAttr) -> Result<ReplyAttr> {
        let _writing = self.writes.during();
        self.stoppable(req.unique, async {
            let only_truncate = set.size == Some(0) && set.mode.is_none() && set.uid.is_none() && set.gid.is_none();
            if only_truncate {
                // As 9pfuse does: a truncation to 0 is an open with OTRUNC,
                // which synthetic files understand where wstat may not.
                let fid = self.clone_fid(inode).await?;
                let opened = self.client.open(fid.fid(), OWRITE | OTRUNC).await;
                drop(fid);
                opened.map_err(|e| failed("truncate", &inode.to_string(), e))?;
            } else if set.size.is_some() || set.mode.is_some() || set.mtime.is_some() {
                let mut st = Stat::dont_touch();
                if let Some(size) = set.size {
                    st.length = size;
                }
                if let Some(mode) = set.mode {
                    // The permissions change; the file's other bits (DMDIR,
                    // DMAPPEND, DMEXCL) stay what they are.
                    let kept = self.inodes().get(inode).map_or(0, |n| n.stat.mode & !0o777);
                    st.mode = (mode & 0o777) | kept;
                }
                if let Some(t) = set.mtime {
                    // 9P's times are unsigned 32-bit seconds, and all ones
                    // means "leave it": a time outside is the nearest one.
                    st.mtime = t.sec.clamp(0, i64::from(u32::MAX) - 1) as u32;
                }
                let fid = self.fid_of(inode).await?;
                self.client.wstat(fid, st).await.map_err(|e| failed("wstat", &inode.to_string(), e))?;
            }
            self.attr_now(inode).await
        })
        .await
    }

    async fn open(&self, req: Request, inode: Inode, flags: u32) -> Result<ReplyOpen> {
        let truncates = flags as i32 & libc::O_TRUNC != 0;
        let _writing = truncates.then(|| self.writes.during());
        self.stoppable(req.unique, async {
            let mut mode = access_mode(flags);
            if truncates {
                mode |= OTRUNC;
            }
            let walked = self.clone_fid(inode).await?;
            let file = match self.client.open(walked.fid(), mode).await {
                Ok(f) => f,
                Err(e) => return Err(failed("open", &self.names(inode).unwrap_or_default().join("/"), e)),
            };
            let fid = walked.keep();
            let direct = self.inodes().get(inode).is_none_or(|n| synthetic(&n.stat));
            let ahead = (direct && positional(&file.qid)).then(|| ReadAhead::new(&self.writes));
            let fh = self.handles.add(Handle::File { fid, iounit: file.iounit, cached: !direct, ahead });
            Ok(ReplyOpen { fh, flags: if direct { FOPEN_DIRECT_IO } else { 0 } })
        })
        .await
    }

    async fn read(&self, req: Request, _inode: Inode, fh: u64, offset: u64, size: u32) -> Result<ReplyData> {
        let handle = self.handles.get(fh);
        let Some(Handle::File { fid, iounit, cached, ahead }) = handle.as_deref() else {
            return Err(libc::EBADF.into());
        };
        let (fid, iounit, cached, count) = (*fid, *iounit, *cached, size.min(*iounit));
        if let Some(ahead) = ahead {
            let call = async {
                match ahead.take(offset, count, &self.writes).await {
                    Some(data) => Ok(data),
                    None => self.client.read(fid, offset, count).await,
                }
            };
            let data = self.interruptible(req.unique, "read", fid, call).await;
            match &data {
                Ok(data) if data.len() == count as usize => ahead.ask(&self.client, fid, offset, count, &self.writes),
                _ => ahead.saw(&self.writes),
            }
            return Ok(ReplyData { data: Bytes::from(data?) });
        }
        let call = async {
            let mut data = self.client.read(fid, offset, count).await?;
            // The page cache takes a short read for the end of the file: a
            // cached file's read is filled, a Tread per iounit, up to its
            // size or the end.
            while cached && !data.is_empty() && data.len() < size as usize {
                let want = (size - data.len() as u32).min(iounit);
                let more = self.client.read(fid, offset + data.len() as u64, want).await?;
                if more.is_empty() {
                    break;
                }
                data.extend_from_slice(&more);
            }
            Ok::<Vec<u8>, ClientError>(data)
        };
        let data = self.interruptible(req.unique, "read", fid, call).await?;
        Ok(ReplyData { data: Bytes::from(data) })
    }

    async fn write(
        &self,
        req: Request,
        _inode: Inode,
        fh: u64,
        offset: u64,
        data: &[u8],
        _write_flags: u32,
        _flags: u32,
    ) -> Result<ReplyWrite> {
        let (fid, iounit) = self.file(fh)?;
        let _writing = self.writes.during();
        // One write(2) is one Twrite up to the iounit, so a ctl message
        // arrives whole. Where the server takes less, the write stops
        // there: the caller writes the rest again from where it ended.
        let call = async {
            let mut written = 0u32;
            for chunk in data.chunks(iounit.max(1) as usize) {
                let n = self.client.write(fid, offset + written as u64, chunk).await?;
                if n as usize > chunk.len() || n == 0 {
                    if written > 0 {
                        break; // what it took before stands
                    }
                    let what = format!("the server took {n} bytes of a write of {}", chunk.len());
                    return Err(ClientError::Protocol(what));
                }
                written += n;
                if (n as usize) < chunk.len() {
                    break;
                }
            }
            Ok::<u32, ClientError>(written)
        };
        let written = self.interruptible(req.unique, "write", fid, call).await?;
        Ok(ReplyWrite { written })
    }

    async fn release(
        &self,
        _req: Request,
        _inode: Inode,
        fh: u64,
        _flags: u32,
        _owner: u64,
        _flush: bool,
    ) -> Result<()> {
        if let Some(h) = self.handles.remove(fh) {
            if let Handle::File { fid, ahead, .. } = &*h {
                if let Some(ahead) = ahead {
                    ahead.stop();
                }
                let _ = self.client.clunk(*fid).await;
            }
        }
        Ok(())
    }

    async fn flush(&self, _req: Request, _inode: Inode, _fh: u64, _lock_owner: u64) -> Result<()> {
        Ok(())
    }

    async fn fsync(&self, _req: Request, _inode: Inode, _fh: u64, _datasync: bool) -> Result<()> {
        Ok(())
    }

    async fn statfs(&self, _req: Request, _inode: Inode) -> Result<ReplyStatFs> {
        Ok(ReplyStatFs { blocks: 0, bfree: 0, bavail: 0, files: 0, ffree: 0, bsize: 8192, namelen: 255, frsize: 8192 })
    }

    async fn opendir(&self, req: Request, inode: Inode, _flags: u32) -> Result<ReplyOpen> {
        self.stoppable(req.unique, async {
            let fid = self.clone_fid(inode).await?;
            let what = || self.names(inode).unwrap_or_default().join("/");
            let listed = match self.client.open(fid.fid(), OREAD).await {
                Ok(f) => self.client.read_dir(&f).await,
                Err(e) => Err(e),
            };
            drop(fid);
            let mut entries = listed.map_err(|e| failed("opendir", &what(), e))?;
            // The kernel refuses a whole listing for one name it cannot
            // link (and would never forget the lookups of those after it).
            entries.retain(|s| {
                let fits = fits_a_directory(&s.name);
                if !fits {
                    tracing::warn!(directory = %what(), name = ?s.name, "an entry no file name can be; left out");
                }
                fits
            });
            Ok(ReplyOpen { fh: self.handles.add(Handle::Dir { entries }), flags: 0 })
        })
        .await
    }

    async fn readdir<'a>(
        &'a self,
        _req: Request,
        parent: Inode,
        fh: u64,
        offset: i64,
    ) -> Result<ReplyDirectory<impl Stream<Item = Result<DirectoryEntry>> + Send + 'a>> {
        let items = self.dir_items(parent, fh, offset.max(0) as u64)?;
        let start = offset.max(0);
        let entries = items.enumerate().map(move |(i, (inode, stat, name))| {
            Ok(DirectoryEntry { inode, kind: kind(&stat), name, offset: start + i as i64 + 1 })
        });
        Ok(ReplyDirectory { entries: stream::iter(entries) })
    }

    async fn readdirplus<'a>(
        &'a self,
        _req: Request,
        parent: Inode,
        fh: u64,
        offset: u64,
        _lock_owner: u64,
    ) -> Result<ReplyDirectoryPlus<impl Stream<Item = Result<DirectoryEntryPlus>> + Send + 'a>> {
        let items = self.dir_items(parent, fh, offset)?;
        let names = self.names(parent)?;
        let entries = Plus { mount: self, names, items, at: offset, sent: None };
        Ok(ReplyDirectoryPlus { entries: stream::iter(entries) })
    }

    async fn releasedir(&self, _req: Request, _inode: Inode, fh: u64, _flags: u32) -> Result<()> {
        self.handles.remove(fh);
        Ok(())
    }

    async fn create(&self, req: Request, parent: Inode, name: &OsStr, mode: u32, flags: u32) -> Result<ReplyCreated> {
        self.stoppable(req.unique, async {
            let name = utf8(name)?;
            let walked = self.clone_fid(parent).await?;
            let file = match self.client.create(walked.fid(), name, mode & 0o777, access_mode(flags)).await {
                Ok(f) => f,
                Err(e) => return Err(failed("create", name, e)),
            };
            let (ino, stat) = self.look(parent, name).await?;
            walked.keep();
            let cached = !synthetic(&stat);
            let ahead = (!cached && positional(&file.qid)).then(|| ReadAhead::new(&self.writes));
            let fh = self.handles.add(Handle::File { fid: file.fid, iounit: file.iounit, cached, ahead });
            let flags = if cached { 0 } else { FOPEN_DIRECT_IO };
            Ok(ReplyCreated { ttl: ttl(&stat), attr: self.attr(ino, &stat), generation: 0, fh, flags })
        })
        .await
    }

    async fn mkdir(&self, req: Request, parent: Inode, name: &OsStr, mode: u32, _umask: u32) -> Result<ReplyEntry> {
        self.stoppable(req.unique, async {
            let name = utf8(name)?;
            let fid = self.clone_fid(parent).await?;
            let made = self.client.create(fid.fid(), name, DMDIR | (mode & 0o777), OREAD).await;
            drop(fid);
            made.map_err(|e| failed("mkdir", name, e))?;
            let (ino, stat) = self.look(parent, name).await?;
            Ok(self.entry(ino, &stat))
        })
        .await
    }

    async fn unlink(&self, req: Request, parent: Inode, name: &OsStr) -> Result<()> {
        self.stoppable(req.unique, async {
            let name = utf8(name)?;
            let pfid = self.fid_of(parent).await?;
            let (fid, _) = self.client.walk(pfid, &[name]).await.map_err(|e| failed("remove", name, e))?;
            self.client.remove(fid).await.map_err(|e| failed("remove", name, e))
        })
        .await
    }

    async fn rmdir(&self, req: Request, parent: Inode, name: &OsStr) -> Result<()> {
        self.unlink(req, parent, name).await
    }

    async fn rename(
        &self,
        req: Request,
        parent: Inode,
        name: &OsStr,
        new_parent: Inode,
        new_name: &OsStr,
    ) -> Result<()> {
        self.stoppable(req.unique, async {
            if parent != new_parent {
                // 9P renames within a directory only (wstat of the name).
                return Err(libc::EXDEV.into());
            }
            let (name, new_name) = (utf8(name)?, utf8(new_name)?);
            let pfid = self.fid_of(parent).await?;
            let (fid, _) = self.client.walk(pfid, &[name]).await.map_err(|e| failed("rename", name, e))?;
            let st = Stat { name: new_name.into(), ..Stat::dont_touch() };
            let r = self.client.wstat(fid, st).await.map_err(|e| failed("rename", name, e));
            self.clunk_later(fid);
            if r.is_ok() {
                // Files not walked yet are walked to by name from the root.
                let dir = self.names(parent)?;
                let path = |n: &str| dir.iter().cloned().chain([n.to_string()]).collect::<Vec<_>>();
                self.inodes().renamed(&path(name), &path(new_name));
            }
            r
        })
        .await
    }

    async fn interrupt(&self, _req: Request, unique: u64) -> Result<()> {
        match self.inflight.interrupt(unique) {
            true => Ok(()),
            // Not running yet (or done): the kernel asks again while the
            // request is still pending.
            false => Err(libc::EAGAIN.into()),
        }
    }
}

/// The entries of one readdirplus reply. The kernel takes a lookup of each
/// entry it is sent (but "." and ".."); fuse3 pulls one entry more than
/// fits and drops it, so an entry's lookup is counted only when the next
/// is pulled or the listing ends: exactly the ones sent are counted.
struct Plus<'a> {
    mount: &'a Mount,
    names: Vec<String>,
    items: DirItems<'a>,
    at: u64,
    /// The entry handed out last, not yet counted.
    sent: Option<Stat>,
}

impl Iterator for Plus<'_> {
    type Item = Result<DirectoryEntryPlus>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(stat) = self.sent.take() {
            let mut names = self.names.clone();
            names.push(stat.name.to_string());
            self.mount.inodes().looked_up(names, stat, None);
        }
        let (inode, stat, name) = self.items.next()?;
        self.at += 1;
        let (attr_stat, entry_ttl) = match &stat {
            Some(s) => (s.clone(), ttl(s)),
            // "." and "..": the directory's own stat, as last seen.
            None => {
                let node = self.mount.inodes().get(inode).map(|n| n.stat.clone());
                (node.unwrap_or(Stat { mode: DMDIR | 0o555, ..Stat::default() }), crate::attr::CACHE_TTL)
            }
        };
        if stat.is_some() {
            self.sent = stat.clone();
        }
        Some(Ok(DirectoryEntryPlus {
            inode,
            generation: 0,
            kind: kind(&stat),
            name,
            offset: self.at as i64,
            attr: self.mount.attr(inode, &attr_stat),
            entry_ttl,
            attr_ttl: entry_ttl,
        }))
    }
}
