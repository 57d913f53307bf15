//! A terminal's raw output for `cons` readers: the last [`KEPT`] bytes at
//! their offsets in the whole stream. A reader starts at the end when it
//! opens (it reads from now on) and waits there; one that falls more than
//! `KEPT` behind skips to the oldest byte kept. Nothing here is state:
//! the grid is what is replicated.

use std::collections::VecDeque;
use std::sync::Mutex;
use tokio::sync::watch;

/// Bytes kept for readers that fall behind.
pub const KEPT: usize = 1 << 20;

#[derive(Default)]
struct Ring {
    bytes: VecDeque<u8>,
    /// The stream offset of `bytes[0]`.
    start: u64,
    /// No more output will come (the pty closed).
    ended: bool,
}

/// The output stream of one terminal.
pub struct Output {
    ring: Mutex<Ring>,
    /// The stream's end offset, for readers to wait on.
    end: watch::Sender<(u64, bool)>,
}

/// What a read at an offset finds.
pub enum Got {
    /// Bytes, and the offset after them.
    Bytes(Vec<u8>, u64),
    /// Nothing yet: wait on the receiver.
    Wait(watch::Receiver<(u64, bool)>),
    /// The output ended.
    End,
}

impl Default for Output {
    fn default() -> Output {
        Output { ring: Mutex::new(Ring::default()), end: watch::Sender::new((0, false)) }
    }
}

impl Output {
    /// Appends what the program wrote.
    pub fn push(&self, bytes: &[u8]) {
        let mut r = self.ring.lock().expect("output");
        r.bytes.extend(bytes);
        let over = r.bytes.len().saturating_sub(KEPT);
        r.bytes.drain(..over);
        r.start += over as u64;
        let end = r.start + r.bytes.len() as u64;
        self.end.send_replace((end, false));
    }

    /// The pty closed: readers at the end get end of file.
    pub fn end(&self) {
        let mut r = self.ring.lock().expect("output");
        r.ended = true;
        let end = r.start + r.bytes.len() as u64;
        self.end.send_replace((end, true));
    }

    /// Where a reader opening now starts.
    pub fn now(&self) -> u64 {
        let r = self.ring.lock().expect("output");
        r.start + r.bytes.len() as u64
    }

    /// Up to `count` bytes from offset `at`.
    pub fn read(&self, at: u64, count: usize) -> Got {
        // Subscribed before looking, so a push in between still wakes.
        let rx = self.end.subscribe();
        let r = self.ring.lock().expect("output");
        let from = at.max(r.start);
        let end = r.start + r.bytes.len() as u64;
        if from < end {
            let skip = (from - r.start) as usize;
            let n = count.min((end - from) as usize);
            let bytes: Vec<u8> = r.bytes.range(skip..skip + n).copied().collect();
            return Got::Bytes(bytes, from + n as u64);
        }
        match r.ended {
            true => Got::End,
            false => Got::Wait(rx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_start_now_and_a_slow_one_skips_to_what_is_kept() {
        let o = Output::default();
        o.push(b"before");
        let at = o.now();
        assert!(matches!(o.read(at, 10), Got::Wait(_)));
        o.push(b"hello");
        let Got::Bytes(b, next) = o.read(at, 3) else { panic!("bytes") };
        assert_eq!((b.as_slice(), next), (&b"hel"[..], at + 3));
        o.push(&vec![b'x'; KEPT]);
        let Got::Bytes(b, _) = o.read(next, 4) else { panic!("bytes") };
        assert_eq!(b, b"xxxx");
        o.end();
        assert!(matches!(o.read(o.now(), 1), Got::End));
    }
}
