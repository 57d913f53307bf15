//! apex-ninep: the 9P2000 wire protocol, and an async client over it.
//!
//! The codec is sans I/O: bytes in, [`Msg`] out, and back, so the daemon,
//! the FUSE mount, the UI and the tests share one codec and fuzzing it
//! needs nothing but bytes. Above it, on tokio: [`Client`], and
//! [`srv::serve_conn`], a server connection loop that leaves what files
//! mean to a [`srv::Serve`] implementation.
//!
//! # Brief overview
//!
//! - [`fcall`]: [`Fcall`] (every 9P2000 message, plus plan9port's
//!   Topenfd), [`Msg`] (a tag and an `Fcall`), [`Qid`], [`Stat`], the
//!   protocol's constants.
//! - [`codec`]: [`check`] (is a whole, sane frame there?), [`parse`] (decode
//!   one frame), [`encode`]; stat records for directory reads.
//! - [`version`]: Tversion negotiation: dialect and msize.
//! - [`error`]: [`FrameError`] (close the connection) and [`DecodeError`]
//!   (answer Rerror on its tag).
//! - [`client`]: [`Client`] (pipelined requests, Tflush on a dropped
//!   request, walks of any length, reads to EOF, writes by iounit) and
//!   [`dial`] for `unix!PATH` and `tcp!HOST!PORT`.
//! - [`ns`]: the plan9port namespace directory, the user name, and a
//!   posted service's address (lib9's `getns`), for every client.
//! - [`forward`]: [`forward::Forward`], 9pserve's multiplexer: a `Serve`
//!   passing each local client's requests on to one upstream `Client`.
//! - [`srv`]: [`srv::serve_conn`] (version, tags, the fid table, flush,
//!   clean-up) over a [`srv::Serve`] (attach, walk, open, read, ...).
//!
//! ```
//! use apex_ninep::{check, parse, to_bytes, Fcall, Msg, NOTAG};
//!
//! let msg = Msg { tag: NOTAG, body: Fcall::Tversion { msize: 8192, version: "9P2000".into() } };
//! let bytes = to_bytes(&msg);
//! assert_eq!(bytes, b"\x13\x00\x00\x00\x64\xff\xff\x00\x20\x00\x00\x06\x009P2000");
//! // Half a message is not an error, just not yet a message.
//! assert_eq!(check(&bytes[..10], 8192), Ok(None));
//! let n = check(&bytes, 8192).unwrap().unwrap();
//! assert_eq!(parse(&bytes[..n]).unwrap(), msg);
//! ```

pub mod client;
pub mod codec;
pub mod error;
pub mod fcall;
pub mod fdpass;
pub mod forward;
mod io;
pub mod layer;
pub mod ns;
mod socket;
pub mod srv;
pub mod version;

pub use client::{dial, Client, ClientError, File};
pub use codec::{check, encode, parse, parse_stats, put_stat, to_bytes};
pub use error::{DecodeError, FrameError};
pub use fcall::{Fcall, Msg, Name, Qid, Stat, IOHDRSZ, MAXWELEM, NOFID, NOTAG};
pub use layer::Layer;
pub use socket::Socket;
pub use version::{negotiate, Negotiated, VersionError};
