//! The connection's side of 9P authentication (the types are `auth`'s):
//! Tauth makes an auth fid, its reads and writes go to the conversation,
//! and an attach takes what a proven one grants; until then nothing else
//! is answered.

use super::auth::AuthFid;
use super::conn::Conn;
use super::{Result, Serve};
use crate::fcall::{Fcall, Qid, QTAUTH};

/// The most auth fids a connection may hold at once.
const AFIDS_MAX: usize = 16;

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
        if self.afids.lock().expect("afid lock").len() >= AFIDS_MAX {
            return Err(format!("{AFIDS_MAX} auth fids are open on this connection: clunk one first"));
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
                a.conversation.read(*count).map(|data| Fcall::Rread { data }).map_err(|e| e.0)
            }
            Fcall::Twrite { fid, data, .. } => {
                let a = afids.get_mut(fid)?;
                a.conversation.write(data).map(|count| Fcall::Rwrite { count }).map_err(|e| e.0)
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
            None => Err(format!(
                "auth fid {afid} grants nothing: write a proof to it first (or Tauth again: what it proved may be revoked)"
            )),
        }
    }
}
