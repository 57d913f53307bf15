//! apex-sys: what apex's programs ask of the system apart from 9P, shared
//! by the daemon and the UI (and the malloc policy by every long-running
//! program).
//!
//! - [`files`]: a file or a directory's listing read as acme's Get reads
//!   it, and Edit's `e`, `r` and `w`.
//! - [`shell`]: a shell command with text in and out, for Edit's pipes.
//! - [`malloc`]: the malloc policy apex's long-running processes set first
//!   (keep freed memory).
//! - [`statehash`]: the state hash on threads, for the daemon.
//! - [`search`]: Look's and B3's search of a big text on two threads, for
//!   the daemon.
//! - [`tunables`]: glibc's copies kept off `rep movsb` where it is slow
//!   (AMD, glibc before 2.39), for the programs that carry TLS.
//! - [`fds`]: the daemon's descriptor limit, raised at start and given
//!   back to the programs it starts.
//! - [`daemon`]: the user's daemon started detached, and waited for.
//! - [`machine`]: which machine this is, for a client to tell whether the
//!   daemon's files are its own.
//! - [`remote`]: another machine's address (`ssh!HOST`), the name its
//!   import is posted as, and `apex import` run to bring one up.

pub mod daemon;
pub mod fds;
pub mod files;
pub mod machine;
pub mod malloc;
pub mod remote;
pub mod search;
pub mod shell;
pub mod statehash;
pub mod tunables;
