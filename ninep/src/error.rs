//! Decoding errors, in two kinds: a broken frame (close the connection) and
//! a bad message inside a good frame (answer Rerror on its tag, if it has
//! one). `Display` is the text a client sees.

/// The framing is broken: nothing after it can be trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("9P message size {0} is smaller than its 7-byte header")]
    TooSmall(u32),
    #[error("9P message of {size} bytes is larger than the negotiated msize {msize}")]
    TooLarge { size: u32, msize: u32 },
}

/// A whole frame whose contents are wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("9P message says it is {size} bytes but the frame is {len}")]
    SizeMismatch { size: usize, len: usize },
    #[error("unknown 9P message type {ty}: this server speaks 9P2000")]
    UnknownType { tag: u16, ty: u8 },
    #[error("9P message too short: {what} needs {need} bytes, {have} remain")]
    Overrun { tag: Option<u16>, what: &'static str, need: usize, have: usize },
    #[error("9P message has {extra} bytes after its {what}")]
    Trailing { tag: Option<u16>, what: &'static str, extra: usize },
    #[error("9P {what} is not UTF-8")]
    NotUtf8 { tag: Option<u16>, what: &'static str },
    #[error("walk of {n} names: at most 16 in one Twalk (walk(5))")]
    TooManyNames { tag: u16, n: usize },
    #[error("stat record of {size} bytes is shorter than its fixed fields")]
    BadStat { tag: Option<u16>, size: usize },
}

/// Either, as a stream of replies meets them: the client ends the
/// connection on both.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StreamError {
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

impl DecodeError {
    /// The tag of the message, when the frame got that far: a server
    /// answers Rerror on it; without one it closes the connection.
    pub fn tag(&self) -> Option<u16> {
        match self {
            DecodeError::SizeMismatch { .. } => None,
            DecodeError::UnknownType { tag, .. } | DecodeError::TooManyNames { tag, .. } => Some(*tag),
            DecodeError::Overrun { tag, .. }
            | DecodeError::Trailing { tag, .. }
            | DecodeError::NotUtf8 { tag, .. }
            | DecodeError::BadStat { tag, .. } => *tag,
        }
    }
}
