//! The malloc policy of apex's programs (the daemon, `apex`, apex-mnt and
//! the UI): keep freed memory for the next big state.
//!
//! By default glibc gives the top of its heap back to the kernel once more
//! than 128 KiB of it is free, and gives each thread its own arenas, so the
//! memory a dropped 100 MB buffer or snapshot held is returned at once and
//! the next one faults and zeroes every page again. On the machines we
//! measure on, those faults were about a third of a 100 MB snapshot plus
//! restore (`cargo bench -p apex-core`, which runs under this policy
//! unless given `--glibc-malloc`). A daemon that snapshots, restores and
//! replays big buffers again and again does better to keep what it freed.
//!
//! Setting the trim threshold also freezes glibc's mmap threshold at its
//! 128 KiB start (glibc stops adjusting it once either is set), and then
//! every 9P message buffer and reply of a bulk transfer at a large msize
//! was mapped, faulted in, zeroed and unmapped anew: most of a 100 MB
//! body write's time (`cargo bench -p apex-fsd --bench ninep`). So blocks
//! up to [`MAP_FROM`] come from the heap and are reused.
//!
//! The cost is resident memory: up to [`KEEP_FREE`] more than the live
//! state after a big buffer goes. `MALLOC_TRIM_THRESHOLD_` or
//! `MALLOC_ARENA_MAX` in the environment take precedence, as glibc's own
//! settings should. Memory freed inside the heap (a log's entries once a
//! snapshot holds them, among the rope's nodes allocated meanwhile) stays
//! resident whatever the threshold: a 100 MB file opened held 2.2 times
//! its size resident, and 1.2 times once [`give_back`] returned it.

/// Free heap kept before any is given back to the kernel.
pub const KEEP_FREE: usize = 256 << 20;

/// Blocks of this size and more are mapped on their own: whole snapshots
/// and bodies, not message buffers (a 9P message at the largest msize, an
/// attach frame). Not higher: growing a block in the heap copies it under
/// the arena's lock, which every other thread's malloc then waits on (a
/// 32 MiB threshold let one reader's snapshot hold up another session's
/// Tstat for a third of a second).
pub const MAP_FROM: usize = 8 << 20;

/// Arenas shared by all threads: one, so that memory one thread frees is
/// there for the next (glibc's tcache still keeps small sizes per thread).
pub const ARENAS: usize = 1;

/// Applies the policy; call it first thing in `main`, before any thread
/// exists. Does nothing where the C library is not glibc.
pub fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        let set = |var: &str, param: libc::c_int, value: usize| {
            if std::env::var_os(var).is_none() {
                // SAFETY: mallopt only sets malloc's parameters; it is
                // called before any other thread exists.
                unsafe { libc::mallopt(param, value as libc::c_int) };
            }
        };
        set("MALLOC_TRIM_THRESHOLD_", libc::M_TRIM_THRESHOLD, KEEP_FREE);
        set("MALLOC_ARENA_MAX", libc::M_ARENA_MAX, ARENAS);
        set("MALLOC_MMAP_THRESHOLD_", libc::M_MMAP_THRESHOLD, MAP_FROM);
    }
}

/// Gives the free memory inside the heap back to the kernel
/// (`malloc_trim`), holes included: for after a session's log let go of
/// entries a snapshot holds. Off any lock of ours: it holds malloc's own
/// while it walks the heap. Does nothing where the C library is not
/// glibc.
pub fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: malloc_trim only returns free pages of malloc's own.
        unsafe { libc::malloc_trim(0) };
        // What work frees is counted from here: a give-back after work
        // that freed little since does not walk the heap again.
        FREE_BEFORE.store(free_in_heap(), std::sync::atomic::Ordering::Relaxed);
    }
}

/// Free memory a command may add inside the heap before it is given
/// back: a whole-file Edit, its Undo or a Get frees about its text's size
/// several times over, which the keep-freed-memory policy would keep
/// resident (a 100 MB file's substitution left the daemon 107 MiB larger
/// than once given back).
pub const FREE_AFTER_WORK: usize = 64 << 20;

/// Bytes free inside the heap: what [`give_back`] could return at most.
/// Counts malloc's free chunks under its lock (cheap unless the heap is
/// in millions of pieces): for after work that may have freed much, not
/// for every request. 0 where the C library is not glibc.
pub fn free_in_heap() -> usize {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 only reads malloc's own bookkeeping.
        unsafe { libc::mallinfo2() }.fordblks
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    0
}

/// The heap's free bytes after the last [`give_back_after_work`] that
/// gave back, or lower since: what work is counted from.
static FREE_BEFORE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// After work that may have freed much (a long command): gives back what
/// the heap holds free when that grew by more than [`FREE_AFTER_WORK`]
/// since it was last given back (or was lowest since), so work that
/// freed little leaves the policy's kept memory alone. Off any lock of
/// ours, as [`give_back`].
pub fn give_back_after_work() {
    use std::sync::atomic::Ordering::Relaxed;
    let now = free_in_heap();
    let before = FREE_BEFORE.load(Relaxed);
    if now > before.saturating_add(FREE_AFTER_WORK) {
        give_back();
    } else {
        FREE_BEFORE.store(before.min(now), Relaxed);
    }
}
