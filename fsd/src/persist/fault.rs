//! Named crash points and an injected full disk, compiled in with the
//! `fault-injection` feature only (the tests turn it on, in any
//! profile), so a test hits each on purpose rather than by luck.
//! `APEXD_CRASH_AT=POINT` aborts the daemon the first time it reaches
//! POINT, `POINT:N` the Nth time; `APEXD_FULL_AFTER=BYTES` gives
//! the log's reservations that much disk in all, then ENOSPC;
//! `APEXD_WRITES_FAIL_WHILE=PATH` fails every write of the log with EIO
//! (half of it written) while PATH exists; `APEXD_SNAPSHOT_SLOW_MS=N`
//! makes each snapshot wait N ms before it is written, so a test can
//! change the session while one is being written. A build without the
//! feature has none of them.

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

/// With `APEXD_SNAPSHOT_SLOW_MS=N`, waits N ms (a snapshot being
/// written, slowly).
pub fn slow_snapshot() {
    #[cfg(feature = "fault-injection")]
    {
        static SLOW: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
        let slow = SLOW.get_or_init(|| std::env::var("APEXD_SNAPSHOT_SLOW_MS").ok().and_then(|v| v.parse().ok()));
        if let Some(ms) = *slow {
            std::thread::sleep(std::time::Duration::from_millis(ms));
        }
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

#[cfg(feature = "fault-injection")]
thread_local! {
    /// Writes this thread's logs make before they fail (a unit test's
    /// disk that fails in the middle of a change).
    static WRITES_BEFORE_FAILING: std::cell::Cell<Option<u32>> = const { std::cell::Cell::new(None) };
}

/// The logs written on this thread fail from their `n`th write on
/// (counted from 0), or never again (`None`).
#[cfg(feature = "fault-injection")]
pub fn fail_writes_on_this_thread_after(n: Option<u32>) {
    WRITES_BEFORE_FAILING.with(|w| w.set(n));
}

/// Whether the log's next write should fail (`APEXD_WRITES_FAIL_WHILE`):
/// a disk that fails a write after its room was set aside.
pub fn write_fails() -> bool {
    #[cfg(feature = "fault-injection")]
    {
        static WHILE: std::sync::OnceLock<Option<std::path::PathBuf>> = std::sync::OnceLock::new();
        let here = WRITES_BEFORE_FAILING.with(|w| match w.get() {
            Some(0) => true,
            Some(n) => {
                w.set(Some(n - 1));
                false
            }
            None => false,
        });
        here || WHILE
            .get_or_init(|| std::env::var_os("APEXD_WRITES_FAIL_WHILE").map(Into::into))
            .as_ref()
            .is_some_and(|p| p.exists())
    }
    #[cfg(not(feature = "fault-injection"))]
    {
        false
    }
}
