//! Loading editing traces: the format, and where the one the repository
//! carries is (`tests/data/`). The benchmark finds the larger ones itself.

use serde::Deserialize;
use std::io::Read;
use std::path::PathBuf;

#[derive(Deserialize)]
pub struct Txn {
    pub patches: Vec<(u64, u64, String)>,
}

#[derive(Deserialize)]
pub struct Trace {
    #[serde(rename = "startContent")]
    pub start: String,
    #[serde(rename = "endContent")]
    pub end: String,
    pub txns: Vec<Txn>,
}

/// The names of the traces the benchmark replays.
#[allow(dead_code)] // used by the benchmark, which includes this file
pub const NAMES: [&str; 4] = ["automerge-paper", "rustcode", "sveltecomponent", "seph-blog1"];

/// The trace the repository carries, which the tests replay.
#[allow(dead_code)] // used by the tests
pub const VENDORED: &str = "sveltecomponent";

/// The trace the repository carries, `tests/data/NAME.json.gz`.
#[allow(dead_code)] // used by the tests
pub fn vendored(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data").join(format!("{name}.json.gz"))
}

/// Reads the trace at `path`.
pub fn load(path: &std::path::Path) -> Trace {
    let file = std::fs::File::open(path)
        .unwrap_or_else(|e| panic!("cannot open trace {}: {e} (set APEX_TRACES)", path.display()));
    let mut json = String::new();
    flate2::read::GzDecoder::new(file).read_to_string(&mut json).expect("trace is gzip'd UTF-8");
    serde_json::from_str(&json).expect("trace is the documented JSON")
}

impl Trace {
    /// Every patch in order.
    pub fn patches(&self) -> impl Iterator<Item = &(u64, u64, String)> {
        self.txns.iter().flat_map(|t| t.patches.iter())
    }
}
