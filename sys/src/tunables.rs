//! glibc tunables the programs that carry TLS run with (the daemon, the
//! importer). glibc reads them from the environment once, at start, so a
//! program that needs one starts itself again with it, first thing.
//!
//! The one there is: glibc before 2.39 copies with `rep movsb` from about
//! 2 KiB up, and on AMD CPUs with fast short `rep movsb` (Zen 3 and 4)
//! that runs some twenty times slower when the destination is not 64-byte
//! aligned and the source is not aligned with it (glibc bug 30994; 16 KiB
//! copied at 1.8 GB/s against 40 GB/s on the machines we measure on).
//! TLS copies every record so, rustls's plaintext sitting 5 bytes into
//! its record, and a bulk read through TLS ran at half the speed of plain
//! TCP, a third of it in such copies (`cargo bench -p apex-fsd --bench
//! remote`). glibc's vector copies are as quick there at every size
//! (glibc 2.39 stopped using `rep movsb` on those CPUs for this reason),
//! so below 2.39 on such a CPU the threshold is raised past any copy. A
//! `GLIBC_TUNABLES` that sets it already is left as it is.

/// The tunable, and the value that keeps `rep movsb` out of every copy.
const REP_MOVSB: &str = "glibc.cpu.x86_rep_movsb_threshold";
const PAST_ANY_COPY: u64 = 1 << 40;

/// Starts this program again with the tunable, where it helps and is not
/// set; call it before any thread exists. Returns where nothing is to be
/// done, or the program could not be started again (it runs on as it is).
pub fn copy_without_slow_rep_movsb() {
    #[cfg(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]
    {
        use std::os::unix::process::CommandExt;
        let tunables = std::env::var("GLIBC_TUNABLES").unwrap_or_default();
        if !slow_rep_movsb() || tunables.split(':').any(|t| t.starts_with(REP_MOVSB)) {
            return;
        }
        let mut args = std::env::args_os();
        let Some(argv0) = args.next() else { return };
        let args: Vec<_> = args.collect();
        let ours = format!("{REP_MOVSB}={PAST_ANY_COPY}");
        let tunables = if tunables.is_empty() { ours } else { format!("{tunables}:{ours}") };
        // By its own path first, so that the process keeps its name
        // (`pgrep apexd`, `pkill apexd`; the kernel names it after the
        // file run, and `/proc/self/exe` would make it `exe`); by
        // `/proc/self/exe` where that path is gone (the binary replaced
        // on disk). `exec` returns only if it could not start; then this
        // runs on as it is.
        let own = std::env::current_exe().ok().filter(|p| p.is_file());
        for program in own.into_iter().chain([std::path::PathBuf::from("/proc/self/exe")]) {
            let mut again = std::process::Command::new(program);
            let _ = again.arg0(&argv0).args(&args).env("GLIBC_TUNABLES", &tunables).exec();
        }
    }
}

/// Whether this machine has the slow copies: an AMD CPU with fast short
/// `rep movsb` (FSRM), and a glibc before 2.39.
#[cfg(not(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64")))]
pub fn slow_rep_movsb() -> bool {
    false
}

/// Whether this machine has the slow copies: an AMD CPU with fast short
/// `rep movsb` (FSRM), and a glibc before 2.39.
#[cfg(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]
pub fn slow_rep_movsb() -> bool {
    // (Leaf 7 asked only when leaf 0 says it exists.)
    let (vendor, fsrm) = {
        let leaf0 = std::arch::x86_64::__cpuid(0);
        let vendor = [leaf0.ebx, leaf0.edx, leaf0.ecx];
        let fsrm = leaf0.eax >= 7 && std::arch::x86_64::__cpuid_count(7, 0).edx & (1 << 4) != 0;
        (vendor, fsrm)
    };
    let amd = vendor.iter().flat_map(|r| r.to_le_bytes()).eq(*b"AuthenticAMD");
    amd && fsrm && glibc_before(2, 39)
}

/// Whether the running glibc is older than `major.minor`.
#[cfg(all(target_os = "linux", target_env = "gnu", target_arch = "x86_64"))]
fn glibc_before(major: u32, minor: u32) -> bool {
    // SAFETY: gnu_get_libc_version returns a static C string.
    let version = unsafe { std::ffi::CStr::from_ptr(libc::gnu_get_libc_version()) };
    older(&version.to_string_lossy(), (major, minor))
}

/// Whether a version `MAJOR.MINOR[.…]` is older than `than`; one that does
/// not parse is taken as not older.
fn older(version: &str, than: (u32, u32)) -> bool {
    let mut parts = version.split('.').map(|p| p.parse::<u32>());
    match (parts.next(), parts.next()) {
        (Some(Ok(major)), Some(Ok(minor))) => (major, minor) < than,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_by_major_then_minor() {
        assert!(older("2.36", (2, 39)));
        assert!(older("2.38.1", (2, 39)));
        assert!(!older("2.39", (2, 39)));
        assert!(!older("2.41", (2, 39)));
        assert!(!older("3.0", (2, 39)));
        assert!(older("1.99", (2, 39)));
        assert!(!older("weird", (2, 39)));
    }
}
