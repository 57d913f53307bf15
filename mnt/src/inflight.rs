//! Requests the kernel may interrupt.
//!
//! A read of a blocking stream (`event`, `entries`, `attach`) waits in the
//! server until there is data. When the reader gets a signal, the kernel
//! sends FUSE_INTERRUPT naming the request; [`Inflight::interrupt`] wakes
//! the waiting call, which drops its 9P request (the client sends Tflush)
//! and answers EINTR, so Ctrl-C and `kill` work and nothing wedges.
//!
//! Any other call that waits on the server (a lookup, an open, a create)
//! is interrupted only if the server has not answered a moment after the
//! signal ([`Inflight::run_patiently`]): a caught signal (SIGCHLD in a
//! shell with jobs) must not fail a `[ -e f ]` a live server answers, nor
//! report a change it made as not made; a stopped server still lets the
//! process go.
//!
//! An interrupt can overtake the request it names (the two are handled
//! concurrently); for an unknown request the answer is EAGAIN, which makes
//! the kernel send it again while the request is still pending.

use std::collections::HashMap;
use std::future::Future;
use std::sync::Mutex;
use tokio::sync::oneshot;

/// The interruptible requests now running, by FUSE unique id.
#[derive(Default)]
pub struct Inflight {
    waiting: Mutex<HashMap<u64, oneshot::Sender<()>>>,
}

/// The call was interrupted.
#[derive(Debug, PartialEq, Eq)]
pub struct Interrupted;

impl Inflight {
    /// Runs `call` for request `unique` until it ends or is interrupted.
    pub async fn run<T>(&self, unique: u64, call: impl Future<Output = T>) -> Result<T, Interrupted> {
        self.run_patiently(unique, std::time::Duration::ZERO, call).await
    }

    /// Runs `call` for request `unique` until it ends, or until `grace`
    /// after an interrupt if it has not ended by then.
    pub async fn run_patiently<T>(
        &self,
        unique: u64,
        grace: std::time::Duration,
        call: impl Future<Output = T>,
    ) -> Result<T, Interrupted> {
        let (tx, rx) = oneshot::channel();
        self.waiting.lock().expect("inflight lock").insert(unique, tx);
        let mut call = std::pin::pin!(call);
        let result = tokio::select! {
            r = &mut call => Ok(r),
            Ok(()) = rx => tokio::time::timeout(grace, &mut call).await.map_err(|_| Interrupted),
        };
        self.waiting.lock().expect("inflight lock").remove(&unique);
        result
    }

    /// Interrupts every request running: the mount is going away.
    pub fn interrupt_all(&self) {
        for (_, tx) in self.waiting.lock().expect("inflight lock").drain() {
            let _ = tx.send(());
        }
    }

    /// Interrupts request `unique`; false if it is not (yet) running.
    pub fn interrupt(&self, unique: u64) -> bool {
        match self.waiting.lock().expect("inflight lock").remove(&unique) {
            Some(tx) => tx.send(()).is_ok(),
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_interrupt_ends_a_pending_call_and_only_that_one() {
        let inflight = std::sync::Arc::new(Inflight::default());
        let waiting = {
            let inflight = inflight.clone();
            tokio::spawn(async move { inflight.run(7, std::future::pending::<()>()).await })
        };
        while !inflight.waiting.lock().unwrap().contains_key(&7) {
            tokio::task::yield_now().await;
        }
        assert!(!inflight.interrupt(8), "no such request");
        assert!(inflight.interrupt(7));
        assert_eq!(waiting.await.unwrap(), Err(Interrupted));
        assert_eq!(inflight.run(9, async { 3 }).await, Ok(3));
        assert!(!inflight.interrupt(9), "finished requests are forgotten");
    }

    #[tokio::test(start_paused = true)]
    async fn a_patient_call_answered_within_its_grace_after_an_interrupt_is_not_interrupted() {
        use std::time::Duration;
        let inflight = std::sync::Arc::new(Inflight::default());
        let grace = Duration::from_secs(1);
        let call = |after: u64| {
            let inflight = inflight.clone();
            tokio::spawn(async move {
                let answer = async move {
                    tokio::time::sleep(Duration::from_millis(after)).await;
                    after
                };
                inflight.run_patiently(after, grace, answer).await
            })
        };
        let (soon, never) = (call(500), call(5000));
        while inflight.waiting.lock().unwrap().len() < 2 {
            tokio::task::yield_now().await;
        }
        assert!(inflight.interrupt(500) && inflight.interrupt(5000));
        assert_eq!(soon.await.unwrap(), Ok(500), "answered inside the grace: its answer stands");
        assert_eq!(never.await.unwrap(), Err(Interrupted), "not answered: let go");
    }
}
