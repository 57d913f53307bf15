//! 9P's own authentication, for a connection that must prove who it is
//! (apexd over TLS): Tauth makes an auth fid, whose reads and writes are
//! a conversation the server's [`Authenticate`] holds (a challenge read,
//! a proof written); Tattach is accepted only with an auth fid whose
//! conversation proved itself for the same uname and aname, and what it
//! proved (a grant) goes to [`super::Serve::attach_granted`]. Until an
//! attach is accepted, nothing but Tversion, Tauth, Tflush, Tattach and
//! the auth fids' reads, writes and clunks is answered.

use super::conn::Conn;
use super::{Result, Serve};
use crate::fcall::{Fcall, Qid, QTAUTH};

/// How a server proves its clients: a conversation per Tauth.
pub trait Authenticate: Send + Sync + 'static {
    /// The conversation of a Tauth by `uname` for `aname`.
    fn begin(&self, uname: &str, aname: &str) -> Box<dyn Conversation>;
}

/// One auth fid's conversation.
pub trait Conversation: Send {
    /// What a read of the auth fid gives (the challenge).
    fn read(&mut self, count: u32) -> std::result::Result<Vec<u8>, String>;
    /// A write to the auth fid (the proof): refused if it proves nothing.
    fn write(&mut self, data: &[u8]) -> std::result::Result<u32, String>;
    /// What the conversation proved, once it has: the grant an attach
    /// with this auth fid gets.
    fn proven(&self) -> Option<String>;
}

/// An auth fid: whom it is for, and its conversation.
pub(super) struct AuthFid {
    uname: String,
    aname: String,
    conversation: Box<dyn Conversation>,
}

/// Why an unauthenticated request is refused.
const FIRST: &str = "authenticate first: Tauth, read the challenge from the auth fid, write the proof \
                     (apex import --token FILE does), then Tattach with that afid";

impl<S: Serve> Conn<S> {
    /// Whether the request may go on before an attach was accepted.
    pub(super) fn may_before_attach(&self, body: &Fcall) -> Result<()> {
        if self.auth.is_none() || self.attached.load(std::sync::atomic::Ordering::Acquire) {
            return Ok(());
        }
        let fine = match body {
            Fcall::Tauth { .. } | Fcall::Tattach { .. } => true,
            Fcall::Tread { fid, .. } | Fcall::Twrite { fid, .. } | Fcall::Tclunk { fid } => self.is_afid(*fid),
            _ => false,
        };
        match fine {
            true => Ok(()),
            false => Err(FIRST.into()),
        }
    }

    pub(super) fn is_afid(&self, fid: u32) -> bool {
        self.afids.lock().expect("afid lock").contains_key(&fid)
    }

    /// Tauth: a new auth fid and its conversation.
    pub(super) fn auth(&self, afid: u32, uname: &str, aname: &str) -> Result<Fcall> {
        let Some(auth) = &self.auth else { return Err("authentication not required".into()) };
        if self.fids.lock().expect("fid lock").contains_key(&afid) || self.is_afid(afid) {
            return Err(format!("fid {afid} in use"));
        }
        let conversation = auth.begin(uname, aname);
        let entry = AuthFid { uname: uname.to_string(), aname: aname.to_string(), conversation };
        self.afids.lock().expect("afid lock").insert(afid, entry);
        Ok(Fcall::Rauth { aqid: Qid { ty: QTAUTH, vers: 0, path: u64::from(afid) } })
    }

    /// A read, write or clunk of an auth fid, if `body` is one.
    pub(super) fn auth_io(&self, body: &Fcall) -> Option<Result<Fcall>> {
        let mut afids = self.afids.lock().expect("afid lock");
        Some(match body {
            Fcall::Tread { fid, count, .. } => {
                let a = afids.get_mut(fid)?;
                a.conversation.read(*count).map(|data| Fcall::Rread { data })
            }
            Fcall::Twrite { fid, data, .. } => {
                let a = afids.get_mut(fid)?;
                a.conversation.write(data).map(|count| Fcall::Rwrite { count })
            }
            Fcall::Tclunk { fid } => {
                afids.remove(fid)?;
                Ok(Fcall::Rclunk)
            }
            Fcall::Tstat { fid } | Fcall::Twalk { fid, .. } | Fcall::Topen { fid, .. } if afids.contains_key(fid) => {
                Err(format!("fid {fid} is an auth fid: only read, write and clunk it"))
            }
            _ => return None,
        })
    }

    /// What an attach with `afid` is granted: nothing to prove where the
    /// connection needs no authentication; else the grant of an auth fid
    /// that proved itself for this uname and aname.
    pub(super) fn grant(&self, afid: u32, uname: &str, aname: &str) -> Result<Option<String>> {
        if self.auth.is_none() {
            return Ok(None);
        }
        let afids = self.afids.lock().expect("afid lock");
        let Some(a) = afids.get(&afid) else {
            return Err(format!("authentication required: {FIRST}"));
        };
        if a.uname != uname || a.aname != aname {
            return Err(format!(
                "auth fid {afid} was for user {:?} and attach name {:?}, not {uname:?} and {aname:?}",
                a.uname, a.aname
            ));
        }
        match a.conversation.proven() {
            Some(grant) => Ok(Some(grant)),
            None => Err(format!("auth fid {afid} has proved nothing yet: write the proof first")),
        }
    }
}
