//! apex-tests: end-to-end and repository-wide tests live in this crate's
//! test targets; its library holds what the test harnesses of several
//! crates share (mnt's and ui's run the daemon's programs, though their
//! crates may not depend on the daemon's).

pub mod sshd;

use std::path::{Path, PathBuf};
use std::process::Command;

/// The workspace's program `name` (`apexd`, `apex`) in the directory of
/// `beside` (the test's own program, `env!("CARGO_BIN_EXE_...")`), built
/// first, with the same profile, if this run has not built it.
pub fn sibling(beside: &Path, name: &str) -> PathBuf {
    let path = beside.with_file_name(name);
    if !path.exists() {
        let release = beside.parent().is_some_and(|d| d.ends_with("release"));
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut build = Command::new(cargo);
        build.args(["build", "-p", "apex-fsd", "--bins"]);
        if release {
            build.arg("--release");
        }
        assert!(build.status().expect("run cargo").success(), "cargo build -p apex-fsd failed");
    }
    path
}
