//! The tags of a connection: taken, waited on by their requests, handed
//! their replies, and freed (a flushed request's only after its Rflush).

use super::{ClientError, Result};
use crate::fcall::{Fcall, Msg, NOTAG};
use std::task::Waker;

/// The tags in use: a slot each, and the free ones on a stack. A tag
/// freed is the next one taken, so the table is as large as the most
/// requests ever in flight at once, and a tag is found and answered by
/// indexing, with no search or hashing.
#[derive(Default)]
pub(super) struct Tags {
    pub(super) slots: Vec<Slot>,
    pub(super) free: Vec<u16>,
}

pub(super) enum Slot {
    Free,
    /// Its request waits for the reply; who to wake when another request
    /// reads it.
    Waiting(Option<Waker>),
    /// The reply, read by another request, for its own to take.
    Answered(Fcall),
    /// Answered and taken, given up (flushed, its Rflush awaited), failed,
    /// or left when the connection ended: in use until freed, so a late
    /// reply is never taken for another request's.
    Taken,
    /// Given up with no one to free it (a Tflush whose task was
    /// dropped): freed when its reply comes.
    Abandoned,
}

impl Tags {
    /// A free tag, for a request that will wait for its reply.
    pub(super) fn take(&mut self) -> Result<u16> {
        let tag = match self.free.pop() {
            Some(tag) => tag,
            None if self.slots.len() < NOTAG as usize => {
                self.slots.push(Slot::Free);
                (self.slots.len() - 1) as u16
            }
            None => return Err(ClientError::NoFreeTags),
        };
        self.slots[tag as usize] = Slot::Waiting(None);
        Ok(tag)
    }

    /// A reply read: returned when it is `mine` (the reader's own), else
    /// kept for its request, which is woken; dropped when nobody waits
    /// for it (flushed, or never asked for). Its tag stays in use.
    pub(super) fn hand_over(&mut self, reply: Msg, mine: Option<u16>) -> Option<Fcall> {
        let slot = self.slots.get_mut(reply.tag as usize)?;
        if matches!(slot, Slot::Abandoned) {
            self.free(reply.tag);
            return None;
        }
        let Slot::Waiting(waker) = slot else { return None };
        if Some(reply.tag) == mine {
            *slot = Slot::Taken;
            return Some(reply.body);
        }
        let waker = waker.take();
        *slot = Slot::Answered(reply.body);
        if let Some(w) = waker {
            w.wake();
        }
        None
    }

    /// `tag`'s reply if another request read it; `None` once none can
    /// come (the connection ended); else pending, to be woken when it
    /// comes.
    pub(super) fn poll_reply(&mut self, tag: u16, cx: &mut std::task::Context<'_>) -> std::task::Poll<Option<Fcall>> {
        use std::task::Poll;
        let Some(slot) = self.slots.get_mut(tag as usize) else { return Poll::Ready(None) };
        match slot {
            Slot::Waiting(Some(w)) if w.will_wake(cx.waker()) => Poll::Pending,
            Slot::Waiting(w) => {
                *w = Some(cx.waker().clone());
                Poll::Pending
            }
            Slot::Answered(_) => match std::mem::replace(slot, Slot::Taken) {
                Slot::Answered(body) => Poll::Ready(Some(body)),
                _ => unreachable!("just matched"),
            },
            Slot::Free | Slot::Taken | Slot::Abandoned => Poll::Ready(None),
        }
    }

    /// `tag`'s reply is no longer awaited (a reply kept for it is
    /// dropped); the tag stays in use. Whether its reply had come: then
    /// none can come after, and the tag may be freed at once.
    pub(super) fn forget(&mut self, tag: u16) -> bool {
        let Some(slot) = self.slots.get_mut(tag as usize) else { return false };
        let answered = matches!(slot, Slot::Answered(_));
        if answered || matches!(slot, Slot::Waiting(_)) {
            *slot = Slot::Taken;
        }
        answered
    }

    /// `tag` is given up and nobody will free it: its reply frees it.
    pub(super) fn abandon(&mut self, tag: u16) {
        if let Some(slot) = self.slots.get_mut(tag as usize) {
            if matches!(slot, Slot::Waiting(_) | Slot::Taken) {
                *slot = Slot::Abandoned;
            }
        }
    }

    /// The connection has ended: no more replies come, and every request
    /// still waiting is woken to find that out.
    pub(super) fn forget_all(&mut self) {
        for slot in &mut self.slots {
            if let Slot::Waiting(waker) = slot {
                let waker = waker.take();
                *slot = Slot::Taken;
                if let Some(w) = waker {
                    w.wake();
                }
            }
        }
    }

    pub(super) fn free(&mut self, tag: u16) {
        if let Some(slot) = self.slots.get_mut(tag as usize) {
            if !matches!(slot, Slot::Free) {
                *slot = Slot::Free;
                self.free.push(tag);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::{Context, Poll};

    fn reply(tag: u16) -> Msg {
        Msg { tag, body: Fcall::Rclunk }
    }

    /// Counts its wake-ups.
    struct Count(AtomicUsize);

    impl std::task::Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// A tag is in use from its taking to its freeing, whatever replies
    /// come meanwhile; a freed tag is the next taken; a reply nobody asked
    /// for takes no tag.
    #[test]
    fn tags_are_held_until_freed_and_reused_first() {
        let mut tags = Tags::default();
        let (a, b) = (tags.take().unwrap(), tags.take().unwrap());
        assert_eq!((a, b), (0, 1));
        assert_eq!(tags.hand_over(reply(a), Some(a)), Some(Fcall::Rclunk), "the reader's own");
        assert_eq!(tags.hand_over(reply(a), Some(a)), None, "a second reply finds nobody");
        assert_eq!(tags.take().unwrap(), 2, "answered is not free");
        tags.free(a);
        // A stray reply for the free tag takes it from nobody, so freeing
        // it again is still a no-op (were it taken, `a` would be on the
        // free stack twice, and handed to two requests).
        assert!(tags.hand_over(reply(a), None).is_none() && tags.hand_over(reply(900), None).is_none());
        tags.free(a);
        assert_eq!(tags.take().unwrap(), a, "freed once, taken first");
        assert_eq!(tags.take().unwrap(), 3, "and once only");
    }

    /// A reply read by another request waits for its own, which is woken;
    /// one given up is dropped and its tag kept (until its Rflush); the
    /// connection's end wakes every request still waiting, to find no
    /// reply will come.
    #[test]
    fn replies_wait_for_their_request_and_the_end_wakes_every_waiter() {
        let mut tags = Tags::default();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let t = tags.take().unwrap();
        assert!(tags.poll_reply(t, &mut cx).is_pending());
        // Polled again from elsewhere (join!, a select): the last waker
        // is the one woken.
        let other = Arc::new(Count(AtomicUsize::new(0)));
        let other_waker = Waker::from(other.clone());
        assert!(tags.poll_reply(t, &mut Context::from_waker(&other_waker)).is_pending());
        assert_eq!(tags.hand_over(reply(t), Some(99)), None, "not the reader's own");
        assert_eq!((count.0.load(Ordering::SeqCst), other.0.load(Ordering::SeqCst)), (0, 1), "its request is woken");
        assert_eq!(tags.poll_reply(t, &mut cx), Poll::Ready(Some(Fcall::Rclunk)));
        let u = tags.take().unwrap();
        assert!(!tags.forget(u), "no reply had come: one may yet");
        assert_eq!(tags.hand_over(reply(u), None), None);
        assert_eq!(tags.poll_reply(u, &mut cx), Poll::Ready(None), "given up: the reply is dropped");
        let w = tags.take().unwrap();
        assert_eq!(tags.hand_over(reply(w), None), None);
        assert!(tags.forget(w), "its reply had come: nothing to flush");
        assert_eq!(tags.poll_reply(w, &mut cx), Poll::Ready(None));
        assert!(![t, u, w].contains(&tags.take().unwrap()), "all held until freed");
        let v = tags.take().unwrap();
        assert!(tags.poll_reply(v, &mut cx).is_pending());
        tags.forget_all();
        assert_eq!(count.0.load(Ordering::SeqCst), 1, "the end wakes it");
        assert_eq!(tags.poll_reply(v, &mut cx), Poll::Ready(None));
    }

    /// NOTAG is never handed out: 65535 requests in flight take every
    /// other tag, and one more is refused until one is freed.
    #[test]
    fn no_more_than_65535_tags() {
        let mut tags = Tags::default();
        for want in 0..NOTAG {
            assert_eq!(tags.take().unwrap(), want);
        }
        assert!(matches!(tags.take(), Err(ClientError::NoFreeTags)));
        tags.free(77);
        assert_eq!(tags.take().unwrap(), 77);
    }
}
