//! Named crash points and an injected full disk, compiled in with the
//! `fault-injection` feature only (the tests turn it on, in any
//! profile), so a test hits each on purpose rather than by luck.
//! `APEXD_CRASH_AT=POINT` aborts the daemon the first time it reaches
//! POINT, `POINT:N` the Nth time; `APEXD_FULL_AFTER=BYTES` gives
//! the log's reservations that much disk in all, then ENOSPC. A build
//! without the feature has neither.

/// Half of a frame written, then the crash.
pub const MID_FRAME: &str = "mid-frame";
/// A snapshot's temporary file written and synced, not yet renamed.
pub const SNAPSHOT_BEFORE_RENAME: &str = "snapshot-before-rename";
/// A snapshot in place, the segments it covers partly deleted.
pub const MID_COMPACTION: &str = "mid-compaction";

/// Whether the daemon should crash at `point` now.
pub fn crash_at(point: &str) -> bool {
    #[cfg(feature = "fault-injection")]
    {
        use std::sync::atomic::{AtomicU64, Ordering};
        static AT: std::sync::OnceLock<Option<(String, u64)>> = std::sync::OnceLock::new();
        static REACHED: AtomicU64 = AtomicU64::new(0);
        let at = AT.get_or_init(|| {
            let v = std::env::var("APEXD_CRASH_AT").ok()?;
            match v.split_once(':') {
                Some((p, n)) => Some((p.to_string(), n.parse().unwrap_or(1))),
                None => Some((v, 1)),
            }
        });
        match at {
            Some((p, n)) if p == point => REACHED.fetch_add(1, Ordering::Relaxed) + 1 == *n,
            _ => false,
        }
    }
    #[cfg(not(feature = "fault-injection"))]
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

/// Whether the disk has room for `bytes` more of the log's space (a
/// reservation); with `APEXD_FULL_AFTER=BYTES`, it holds that many in
/// all.
pub fn room_for(bytes: u64) -> bool {
    #[cfg(feature = "fault-injection")]
    {
        use std::sync::atomic::{AtomicU64, Ordering};
        static LIMIT: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
        static TAKEN: AtomicU64 = AtomicU64::new(0);
        let Some(limit) = *LIMIT.get_or_init(|| std::env::var("APEXD_FULL_AFTER").ok().and_then(|v| v.parse().ok()))
        else {
            return true;
        };
        let taken = TAKEN.load(Ordering::Relaxed);
        if taken + bytes > limit {
            return false;
        }
        TAKEN.store(taken + bytes, Ordering::Relaxed);
        true
    }
    #[cfg(not(feature = "fault-injection"))]
    {
        let _ = bytes;
        true
    }
}
