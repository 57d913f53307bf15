//! Tflush's side of a connection: the requests in flight, the signal a
//! request that is let finish hears its flush by, and [`flushed`].

use std::sync::Arc;
use tokio::task::JoinHandle;

/// A request being answered in a task of its own.
pub(super) struct InFlight {
    pub(super) task: JoinHandle<()>,
    pub(super) cancelable: bool,
    /// Set by a Tflush of the request; none for a request that never
    /// asks (`flushed`): a read is aborted instead, a stat never waits.
    pub(super) flushed: Option<Arc<Signal>>,
    /// Set once the request's reply is queued (its tag is free after), or
    /// its task is gone without one (aborted by a Tversion or hang-up).
    pub(super) done: Arc<Signal>,
    /// A waiting read's count: what its reply may hold.
    pub(super) read_bytes: usize,
}

/// A flag set once, which tasks may wait for. Every request that may be
/// let finish after a Tflush gets one (a watch channel cost a good part of
/// a small request's time).
#[derive(Default)]
pub(super) struct Signal {
    pub(super) set: std::sync::atomic::AtomicBool,
    pub(super) notify: tokio::sync::Notify,
}

impl Signal {
    pub(super) fn raise(&self) {
        self.set.store(true, std::sync::atomic::Ordering::Release);
        self.notify.notify_waiters();
    }

    pub(super) async fn wait(&self) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            // Registered before the check, so a raise in between is heard.
            notified.as_mut().enable();
            if self.set.load(std::sync::atomic::Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }
}

/// Raises its signal when dropped: a request's task that is aborted (by a
/// Tversion or a hang-up) still frees whoever waits for its reply.
pub(super) struct RaiseOnDrop(pub(super) Arc<Signal>);

impl Drop for RaiseOnDrop {
    fn drop(&mut self) {
        self.0.raise();
    }
}

tokio::task_local! {
    /// The request running here was flushed: raised by its Tflush.
    pub(super) static FLUSHED: Arc<Signal>;
}

/// Resolves once a Tflush names the request this runs in: a request that
/// is let finish (not a read) may use it to give up what it waits for, if
/// it can still do so as if it never happened, and end early. Outside a
/// request, or with no Tflush, it never resolves.
pub async fn flushed() {
    match FLUSHED.try_with(|f| f.clone()) {
        Ok(f) => f.wait().await,
        Err(_) => std::future::pending::<()>().await,
    }
}
