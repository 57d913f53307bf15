//! TLS 1.3 on a TCP connection, both ends of it: rustls's handshake
//! (`handshake`), then a record layer of our own with the keys rustls
//! hands over (`records`), so that a bulk read's bytes are copied by the
//! kernel alone on the way in and sealed where they lie on the way out.
//! The daemon's side as the halves its 9P server reads and writes:
//! `serve`; the importer's is `import::tls`.

pub mod handshake;
pub mod records;
pub mod serve;

#[cfg(test)]
mod tests;
