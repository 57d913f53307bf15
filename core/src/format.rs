//! Snapshot formats: the one this build writes, the oldest it reads, and
//! which one is being decoded, for the types whose encoding changed
//! between formats (a format-1 `Window` has no terminal). Below `snap`
//! and `win`, which both ask it.

/// The format this build writes.
pub const SNAPSHOT_FORMAT: u8 = 2;

/// The oldest format this build reads.
pub const OLDEST_SNAPSHOT_FORMAT: u8 = 1;

thread_local! {
    /// The format of the snapshot being decoded on this thread.
    static READING: std::cell::Cell<u8> = const { std::cell::Cell::new(SNAPSHOT_FORMAT) };
}

/// The snapshot format being decoded on this thread (this build's when
/// none is: an entry or a wire message).
pub fn reading_format() -> u8 {
    READING.with(|r| r.get())
}

/// Runs `decode` with `format` as the format being read on this thread.
pub fn reading<T>(format: u8, decode: impl FnOnce() -> T) -> T {
    let before = READING.with(|r| r.replace(format));
    let out = decode();
    READING.with(|r| r.set(before));
    out
}
