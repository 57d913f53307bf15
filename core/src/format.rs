//! Snapshot formats: the one this build writes, the oldest it reads, and
//! which one is being decoded, for the types whose encoding changed
//! between formats (a format-1 `Window` has no terminal, a `Buffer` before
//! format 3 no undo limit). Below `snap`
//! and `win`, which both ask it.

/// The format this build writes.
pub const SNAPSHOT_FORMAT: u8 = 3;

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

/// Snapshots as older builds wrote them, made from this build's.
#[cfg(test)]
pub(crate) mod older {
    use crate::State;

    /// Replaces the first occurrence of `what` in `bytes` after `from`
    /// with `with`, returning where it ended.
    fn replace(bytes: &mut Vec<u8>, from: usize, what: &[u8], with: &[u8]) -> usize {
        let at = from + bytes[from..].windows(what.len()).position(|b| b == what).expect("the part's encoding");
        bytes.splice(at..at + what.len(), with.iter().copied());
        at + with.len()
    }

    /// `state`'s snapshot as format `format` encodes it: before format 3
    /// a buffer ends without its undo limit, before 2 a window without
    /// its terminal (which must be none).
    pub fn snapshot(state: &State, format: u8) -> Vec<u8> {
        let mut bytes = state.to_snapshot();
        // Windows come before buffers in a state's encoding.
        let mut from = 1;
        for w in state.windows.values() {
            let now = postcard::to_allocvec(w).expect("encodes");
            if format < 2 {
                assert!(w.term.is_none(), "format 1 has no terminals");
                from = replace(&mut bytes, from, &now, &now[..now.len() - 1]);
            }
        }
        for b in state.buffers.values() {
            let now = postcard::to_allocvec(b).expect("encodes");
            let limit = postcard::to_allocvec(&b.undo_limit()).expect("encodes").len();
            let then = if format < 3 { &now[..now.len() - limit] } else { &now[..] };
            from = replace(&mut bytes, from, &now, then);
        }
        bytes[0] = format;
        bytes
    }
}
