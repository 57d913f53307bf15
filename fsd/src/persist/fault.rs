//! Named crash points and an injected full disk, compiled into test
//! (debug) builds only, so a test hits each on purpose rather than by
//! luck. `APEXD_CRASH_AT=POINT` aborts the daemon at POINT;
//! `APEXD_FULL_AFTER=BYTES` makes log writes fail with ENOSPC once that
//! many frame bytes were written. A release build has neither.

/// Half of a frame written, then the crash.
pub const MID_FRAME: &str = "mid-frame";
/// A snapshot's temporary file written and synced, not yet renamed.
pub const SNAPSHOT_BEFORE_RENAME: &str = "snapshot-before-rename";
/// A snapshot in place, the segments it covers partly deleted.
pub const MID_COMPACTION: &str = "mid-compaction";

/// Whether the daemon should crash at `point` now.
pub fn crash_at(point: &str) -> bool {
    #[cfg(debug_assertions)]
    {
        static AT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
        AT.get_or_init(|| std::env::var("APEXD_CRASH_AT").ok()).as_deref() == Some(point)
    }
    #[cfg(not(debug_assertions))]
    {
        let _ = point;
        false
    }
}

/// Ends the process at once, as `kill -9` would: nothing is flushed or
/// synced.
pub fn crash() -> ! {
    eprintln!("apexd: crashing at a test's crash point");
    std::process::abort()
}

/// Whether the next log write fails as if the disk were full.
pub fn write_fails() -> bool {
    #[cfg(debug_assertions)]
    {
        use std::sync::atomic::{AtomicU64, Ordering};
        static LIMIT: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
        static WRITES: AtomicU64 = AtomicU64::new(0);
        let Some(limit) = *LIMIT.get_or_init(|| std::env::var("APEXD_FULL_AFTER").ok().and_then(|v| v.parse().ok()))
        else {
            return false;
        };
        WRITES.fetch_add(1, Ordering::Relaxed) >= limit
    }
    #[cfg(not(debug_assertions))]
    false
}
