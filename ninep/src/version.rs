//! Tversion negotiation (version(5)): which dialect and msize a connection
//! gets.
//!
//! "If the server does not understand the client's version string, it
//! should respond with an Rversion message (not Rerror) with the version
//! string the 7 characters `unknown`." A version that starts with `9P2000`
//! (such as `9P2000.u` or `9P2000.L`) is answered `9P2000`, the dialect
//! apex serves; the client then speaks it or hangs up.

use crate::fcall::IOHDRSZ;

/// The dialect this server speaks.
pub const VERSION: &str = "9P2000";
/// The smallest msize accepted: room for a header and a useful payload.
pub const MIN_MSIZE: u32 = 256;
/// The default largest msize, 1 MiB.
pub const DEFAULT_MSIZE: u32 = 1 << 20;

/// What a Tversion negotiates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Negotiated {
    /// Speak `VERSION` with this msize.
    Speak { msize: u32 },
    /// Answer Rversion "unknown": the client asked for no 9P2000 dialect.
    Unknown,
}

/// Why a Tversion is refused with Rerror.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    #[error("msize {0} is too small: at least 256 bytes, please")]
    MsizeTooSmall(u32),
}

/// Negotiates a client's Tversion against the server's largest msize.
pub fn negotiate(client_msize: u32, client_version: &str, server_msize: u32) -> Result<Negotiated, VersionError> {
    if !client_version.starts_with(VERSION) {
        return Ok(Negotiated::Unknown);
    }
    let msize = client_msize.min(server_msize);
    if msize < MIN_MSIZE {
        return Err(VersionError::MsizeTooSmall(client_msize));
    }
    Ok(Negotiated::Speak { msize })
}

/// The iounit a server reports for a connection's msize: the most data one
/// Tread or Twrite can carry.
pub fn iounit(msize: u32) -> u32 {
    msize.saturating_sub(IOHDRSZ)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dialects_and_sizes() {
        assert_eq!(negotiate(8192, "9P2000", DEFAULT_MSIZE), Ok(Negotiated::Speak { msize: 8192 }));
        assert_eq!(negotiate(u32::MAX, "9P2000.L", DEFAULT_MSIZE), Ok(Negotiated::Speak { msize: DEFAULT_MSIZE }));
        assert_eq!(negotiate(8192, "9P2000.u", 4096), Ok(Negotiated::Speak { msize: 4096 }));
        assert_eq!(negotiate(8192, "9P1", DEFAULT_MSIZE), Ok(Negotiated::Unknown));
        assert_eq!(negotiate(100, "9P2000", DEFAULT_MSIZE), Err(VersionError::MsizeTooSmall(100)));
        assert_eq!(iounit(8192), 8168);
    }
}
