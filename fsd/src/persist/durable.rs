//! When written entries reach the disk: one syncer per session, which
//! `fdatasync`s the current segment in a group for everyone waiting
//! (`--sync=always`: an acknowledgement waits for it) or every interval
//! behind the acknowledgements (`--sync=interval`, the default).

use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::{watch, Notify};

/// Why a session's log takes nothing more: a write or a sync that failed
/// (said as it was said then, with the file and what to do), or the log
/// closed. Nothing more is acknowledged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LogError {
    #[error("{0}")]
    Failed(String),
    /// The log stopped for good before this change (`Wal::broken`): the
    /// change is not in the file, nor undone.
    #[error("{0}")]
    Stopped(String),
    #[error("the session's log was closed")]
    Closed,
}

/// A `--sync` that names no policy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--sync {0:?}: want always (each acknowledgement waits for fdatasync) or interval (a sync every second behind them)")]
pub struct BadSyncPolicy(pub String);

/// When written entries are synced to the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPolicy {
    /// Before each acknowledgement; everyone waiting at once shares one
    /// `fdatasync`.
    Always,
    /// Every so often, behind the acknowledgements: a process crash loses
    /// nothing, a power loss at most this much.
    Interval(Duration),
}

impl SyncPolicy {
    /// `always` or `interval` (every second), as `--sync` takes it.
    pub fn parse(s: &str) -> Result<SyncPolicy, BadSyncPolicy> {
        match s {
            "always" => Ok(SyncPolicy::Always),
            "interval" => Ok(SyncPolicy::Interval(Duration::from_secs(1))),
            _ => Err(BadSyncPolicy(s.to_string())),
        }
    }
}

/// A session's written and synced byte counts, and the file to sync.
pub struct Durable {
    policy: SyncPolicy,
    /// Frame bytes written so far, every segment counted.
    written: AtomicU64,
    synced: watch::Sender<u64>,
    /// The segment being written (a handle of its own).
    file: Mutex<Option<File>>,
    wake: Notify,
    /// Why a sync failed, if one did: nothing is acknowledged after.
    failed: Mutex<Option<String>>,
}

impl Durable {
    /// A session's, with its syncer running on the current runtime (none
    /// outside one: a test that only writes).
    pub fn new(policy: SyncPolicy) -> Arc<Durable> {
        let d = Arc::new(Durable {
            policy,
            written: AtomicU64::new(0),
            synced: watch::channel(0).0,
            file: Mutex::new(None),
            wake: Notify::new(),
            failed: Mutex::new(None),
        });
        if tokio::runtime::Handle::try_current().is_ok() {
            tokio::spawn(syncer(Arc::downgrade(&d)));
        }
        d
    }

    /// Why the log refuses to go on, if it does.
    pub fn failed(&self) -> Option<String> {
        self.failed.lock().expect("durable lock").clone()
    }

    /// A write failed: nothing more is acknowledged.
    pub fn fail(&self, why: String) {
        self.failed.lock().expect("durable lock").get_or_insert(why);
        self.synced.send_modify(|_| {});
    }

    /// The segment now written to (the one before it was synced first).
    pub fn switch(&self, file: File) {
        *self.file.lock().expect("durable lock") = Some(file);
    }

    pub fn wrote(&self, n: u64) {
        self.written.fetch_add(n, Ordering::Release);
    }

    /// Bytes written so far: what an acknowledgement made now must wait
    /// to be synced.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Acquire)
    }

    /// Waits until everything written before `upto` is on the disk, where
    /// the policy makes acknowledgements wait; at once otherwise.
    pub async fn settled(&self, upto: u64) -> Result<(), LogError> {
        if self.policy != SyncPolicy::Always {
            return Ok(());
        }
        let mut synced = self.synced.subscribe();
        loop {
            if let Some(why) = self.failed.lock().expect("durable lock").clone() {
                return Err(LogError::Failed(why));
            }
            if *synced.borrow_and_update() >= upto {
                return Ok(());
            }
            self.wake.notify_one();
            if synced.changed().await.is_err() {
                return Err(LogError::Closed);
            }
        }
    }

    /// Syncs what is written now; `false` when there was nothing to do.
    pub fn sync(&self) -> bool {
        let target = self.written();
        if *self.synced.borrow() >= target {
            return false;
        }
        let file = self.file.lock().expect("durable lock").as_ref().and_then(|f| f.try_clone().ok());
        let result = match file {
            Some(f) => f.sync_data(),
            None => Ok(()),
        };
        match result {
            Ok(()) => {
                self.synced.send_modify(|s| *s = (*s).max(target));
            }
            Err(e) => {
                tracing::error!(error = %e, "write-ahead log sync failed");
                *self.failed.lock().expect("durable lock") =
                    Some(format!("the write-ahead log could not be synced ({e})"));
                // Wake the waiters so they hear it.
                self.synced.send_modify(|_| {});
            }
        }
        true
    }
}

/// Syncs the session's log by its policy until the session is gone.
async fn syncer(durable: Weak<Durable>) {
    loop {
        let Some(d) = durable.upgrade() else { return };
        // A sync that failed is not tried again: nothing more is
        // acknowledged (`settled` says why) until the daemon restarts.
        if d.failed().is_some() {
            return;
        }
        let d = match d.policy {
            SyncPolicy::Always => {
                if *d.synced.borrow() >= d.written() {
                    // Woken by a waiter; a second's sleep bounds how long a
                    // deleted session's syncer outlives it.
                    tokio::select! {
                        _ = d.wake.notified() => {}
                        _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    }
                    continue;
                }
                d
            }
            SyncPolicy::Interval(every) => {
                drop(d);
                tokio::time::sleep(every).await;
                let Some(d) = durable.upgrade() else { return };
                d
            }
        };
        let _ = tokio::task::spawn_blocking(move || d.sync()).await;
    }
}
