//! Memory that work freed, given back past a bound and kept below it,
//! under the programs' malloc policy, in a process of its own.

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn main() {
    use apex_sys::malloc::{free_in_heap, give_back_after_work, keep_freed_memory, FREE_AFTER_WORK};
    keep_freed_memory();
    const MIB: i64 = 1 << 20;
    // Resident bytes of this process.
    let resident = || {
        let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
        let pages: i64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
        // SAFETY: sysconf only reads a system value.
        pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as i64
    };
    // 200 MiB in blocks the heap serves (under the policy's MAP_FROM),
    // touched, then freed: kept resident (under KEEP_FREE).
    let blocks: Vec<Vec<u8>> = (0..200).map(|i| vec![i as u8 | 1; 1 << 20]).collect();
    let held = resident();
    drop(blocks);
    let freed = resident();
    assert!(held - freed < 50 * MIB, "{} MiB given back on free alone", (held - freed) / MIB);
    assert!(free_in_heap() > FREE_AFTER_WORK, "{} MiB free in the heap", free_in_heap() as i64 / MIB);
    // Work that freed it: given back.
    give_back_after_work();
    let after = resident();
    assert!(freed - after > 150 * MIB, "only {} MiB given back", (freed - after) / MIB);
    // Work that freed little (10 MiB) after that: kept.
    let small: Vec<Vec<u8>> = (0..10).map(|i| vec![i as u8 | 1; 1 << 20]).collect();
    drop(small);
    let before = resident();
    give_back_after_work();
    let kept = resident();
    assert!(before - kept < 4 * MIB, "{} MiB given back after work that freed 10", (before - kept) / MIB);
    println!("malloc: 200 MiB freed kept until work gave it back ({} MiB); 10 MiB freed kept", (freed - after) / MIB);
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn main() {}
