//! Loading the editing traces in `../shared/traces/` (beside the repository).

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

/// The names of the traces the tests and benchmarks replay.
#[allow(dead_code)] // used by the benchmark, which includes this file
pub const NAMES: [&str; 4] = ["automerge-paper", "rustcode", "sveltecomponent", "seph-blog1"];

/// Where the traces are: `$APEX_TRACES`, else `shared/traces` beside the
/// repository.
pub fn dir() -> PathBuf {
    match std::env::var_os("APEX_TRACES") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/traces"),
    }
}

pub fn load(name: &str) -> Trace {
    let path = dir().join(format!("{name}.json.gz"));
    let file = std::fs::File::open(&path)
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
