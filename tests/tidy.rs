//! Tidy: repository-wide rules checked under `cargo test`, in the spirit of
//! rust-analyzer's `tidy.rs`. Every Rust file opens with a `//!` module doc;
//! apex-core stays pure (none of its dependencies does I/O or async, or
//! reads the clock or randomness); no crate depends upward (core, ninep
//! <- sys, link <- {fsd, mnt, ui}) and no crate's modules import each
//! other in a cycle; library code's errors are typed up to the 9P edge;
//! the daemon's file layer never appends; no source file grows past a
//! size that hides its concept.

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        if path.is_dir() {
            if !matches!(name.as_str(), "target" | ".git" | "fuzz-target") && !name.starts_with('.') {
                rust_files(&path, out);
            }
        } else if name.ends_with(".rs") {
            out.push(path);
        }
    }
}

fn all_rust_files() -> Vec<PathBuf> {
    let mut files = Vec::new();
    rust_files(&root(), &mut files);
    assert!(files.len() > 10, "found only {} Rust files under {}", files.len(), root().display());
    files
}

#[test]
fn every_rust_file_opens_with_a_module_doc() {
    let missing: Vec<String> = all_rust_files()
        .into_iter()
        .filter(|p| !std::fs::read_to_string(p).unwrap().trim_start().starts_with("//!"))
        .map(|p| p.strip_prefix(root()).unwrap().display().to_string())
        .collect();
    assert!(missing.is_empty(), "these files do not open with a //! doc comment: {missing:?}");
}

/// Files allowed past the line limit, with the reason.
const LONG_FILES: &[(&str, &str)] = &[];
const LINE_LIMIT: usize = 1000;

#[test]
fn no_file_is_too_long() {
    for p in all_rust_files() {
        let rel = p.strip_prefix(root()).unwrap().display().to_string();
        let n = std::fs::read_to_string(&p).unwrap().lines().count();
        if LONG_FILES.iter().any(|(f, _)| *f == rel) {
            continue;
        }
        assert!(
            n <= LINE_LIMIT,
            "{rel} has {n} lines (limit {LINE_LIMIT}): split it by concept, or allowlist it with a reason"
        );
    }
}

fn manifest(crate_dir: &str) -> Option<toml::Table> {
    let path = root().join(crate_dir).join("Cargo.toml");
    let text = std::fs::read_to_string(path).ok()?;
    Some(text.parse().expect("Cargo.toml parses"))
}

fn deps(m: &toml::Table, table: &str) -> Vec<String> {
    m.get(table).and_then(|t| t.as_table()).map(|t| t.keys().cloned().collect()).unwrap_or_default()
}

/// What apex-core may depend on: pure data-structure, encoding and hashing
/// crates. Anything else (tokio, a clock, randomness, files, sockets)
/// belongs in fsd or above.
const CORE_MAY_USE: &[&str] =
    &["ropey", "regex", "regex-automata", "memchr", "serde", "postcard", "blake3", "simdutf8", "thiserror", "zstd"];

#[test]
fn core_is_pure() {
    let m = manifest("core").expect("core/Cargo.toml");
    for d in deps(&m, "dependencies") {
        assert!(
            CORE_MAY_USE.contains(&d.as_str()),
            "apex-core depends on {d:?}; core is pure (no I/O, clock, randomness or tokio): allowed are {CORE_MAY_USE:?}"
        );
    }
    for p in all_rust_files().into_iter().filter(|p| p.starts_with(root().join("core/src"))) {
        let text = std::fs::read_to_string(&p).unwrap();
        for banned in ["std::fs", "std::net", "std::time", "std::thread", "std::process", "std::env", "tokio"] {
            assert!(!text.contains(banned), "{} uses {banned}: core does no I/O", p.display());
        }
    }
}

/// Where an error may still be its words: the 9P server's edge, where a
/// `Serve` error becomes an Rerror's text (and a plain-text `Serve`, as the
/// tests write, names its error `String`), and the UI, whose errors its
/// own issue types.
const WORDS_MAY_BE_ERRORS: &[&str] = &["ninep/src/srv/", "ui/"];

/// Library code carries its errors typed up to the edge: no
/// `Result<_, String>` (or `&'static str`) and no `FromStr` whose error is
/// a `String`. Tests, benches and binaries are edges of their own.
#[test]
fn errors_are_typed_up_to_the_edge() {
    let mut found = Vec::new();
    for p in all_rust_files() {
        let rel = p.strip_prefix(root()).unwrap().display().to_string();
        let library = rel.split('/').nth(1) == Some("src") && !rel.contains("/src/bin/") && !rel.contains("/tests");
        if !library || WORDS_MAY_BE_ERRORS.iter().any(|w| rel.starts_with(w)) {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        // A file's own unit tests come last, after `#[cfg(test)]`.
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (i, line) in code.lines().enumerate() {
            let words = ["String>", "&'static str>", "&str>"].iter().any(|w| line.contains(&format!(", {w}")));
            if (line.contains("Result<") && words) || line.contains("type Err = String") || line.contains("srv::Result")
            {
                found.push(format!("{rel}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "errors as words outside the 9P edge and ui/: give each a thiserror enum whose Display is the text, \
         made words only at the edge:\n{}",
        found.join("\n")
    );
}

/// The daemon's file layer (`fsys/` and each family's `files.rs`) reaches
/// a session only through the daemon's verbs (`read`, `change`, and
/// `tend` for a reader's own place) and changes the log only by
/// proposing: it never takes the view node to change it, and never locks
/// a session by hand.
#[test]
fn files_never_append() {
    let mut found = Vec::new();
    for p in all_rust_files() {
        let rel = p.strip_prefix(root()).unwrap().display().to_string();
        if !(rel.starts_with("fsd/src/fsys/") || (rel.starts_with("fsd/src/") && rel.ends_with("/files.rs"))) {
            continue;
        }
        let text = std::fs::read_to_string(&p).unwrap();
        let code = text.split("#[cfg(test)]").next().unwrap_or_default();
        for (i, line) in code.lines().enumerate() {
            if ["view_mut(", "daemon.session(", "\"session lock\""].iter().any(|w| line.contains(w)) {
                found.push(format!("{rel}:{}: {}", i + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "the file layer reaches a session through Daemon::read, change or tend and changes the log by \
         proposing (Daemon::propose), or through the module that owns the change (route, attach, term::drive):\n{}",
        found.join("\n")
    );
}

/// The crate graph: each crate and the apex crates it may depend on
/// (normal, dev and build dependencies alike). core and ninep sit at the
/// bottom; sys (what the programs ask of the system, for core's `Pipes`
/// among others) and link above them, and the programs above those; mnt and ui never reach into the
/// daemon. The root's folders are these crates, one each, and
/// ARCHITECTURE.md draws the same graph.
const LAYERS: &[(&str, &str, &[&str])] = &[
    ("core", "apex-core", &[]),
    ("ninep", "apex-ninep", &[]),
    ("sys", "apex-sys", &["apex-core"]),
    ("link", "apex-link", &["apex-core", "apex-ninep"]),
    ("fsd", "apex-fsd", &["apex-core", "apex-ninep", "apex-sys", "apex-link", "apex-tests"]),
    ("mnt", "apex-mnt", &["apex-core", "apex-ninep", "apex-sys", "apex-link", "apex-tests"]),
    ("ui", "apex-ui", &["apex-core", "apex-ninep", "apex-sys", "apex-link", "apex-tests"]),
    // What test harnesses share (fsd's, mnt's and ui's): it uses no apex crate, so
    // none reaches the daemon's through it.
    ("tests", "apex-tests", &[]),
];

#[test]
fn no_dependency_points_upward() {
    let apex: Vec<&str> = LAYERS.iter().map(|(_, n, _)| *n).collect();
    for (dir, name, may) in LAYERS {
        let Some(m) = manifest(dir) else { continue };
        for table in ["dependencies", "dev-dependencies", "build-dependencies"] {
            for d in deps(&m, table) {
                // A crate's tests may turn on features of the crate itself.
                let itself = table == "dev-dependencies" && d == *name;
                assert!(
                    !apex.contains(&d.as_str()) || may.contains(&d.as_str()) || itself,
                    "{name} [{table}] depends on {d}; it may use only {may:?} \
                     (core, ninep <- sys, link <- {{fsd, mnt, ui}}; mnt and ui never on fsd)"
                );
            }
        }
    }
}

#[test]
fn every_workspace_crate_has_a_layer() {
    let m = manifest(".").expect("Cargo.toml");
    let members = m["workspace"]["members"].as_array().expect("workspace members");
    for member in members.iter().filter_map(|v| v.as_str()) {
        assert!(
            LAYERS.iter().any(|(dir, _, _)| dir == &member),
            "workspace member {member} has no place in tidy's LAYERS: say what it may depend on"
        );
        // The root's listing is the crate graph: no crate inside another.
        assert!(!member.contains('/'), "{member}: a crate's folder sits at the root, not inside another crate");
    }
}

/// The manual pages every issue promises, each clean under `mandoc -T lint`.
const MAN_PAGES: &[&str] = &["apexd.1", "apex.1", "apex.4", "apex-mnt.1", "apex-ui.1"];

#[test]
fn man_pages_exist_and_are_clean_under_mandoc_lint() {
    for page in MAN_PAGES {
        let path = root().join("man").join(page);
        assert!(path.exists(), "man/{page} is missing");
    }
    let lint = std::process::Command::new("mandoc")
        .args(["-T", "lint", "-W", "style"])
        .args(MAN_PAGES.iter().map(|p| root().join("man").join(p)))
        .output();
    let out = match lint {
        Ok(out) => out,
        // CI installs mandoc; elsewhere say plainly what was not checked.
        Err(e) if std::env::var_os("CI").is_none() => {
            // Straight to stderr, past the test harness's capture.
            let line =
                format!("SKIPPED: mandoc not found ({e}): man pages not linted (scripts/test installs mandoc)\n");
            let _ = std::io::Write::write_all(&mut std::io::stderr(), line.as_bytes());
            return;
        }
        Err(e) => panic!("mandoc is needed to lint the man pages (apt-get install mandoc): {e}"),
    };
    let said = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && said.trim().is_empty(), "mandoc -T lint:\n{said}");
}

/// Whether a Rust file is a benchmark's (which may read data kept beside
/// the repository; tests may not).
fn is_bench(p: &Path) -> bool {
    p.components().any(|c| c.as_os_str() == "benches")
}

#[test]
fn no_test_reads_outside_the_repository() {
    // Built from pieces so this file does not match itself.
    let beside = ["..", "/shared"].concat();
    let traces = ["shared", "/traces"].concat();
    for p in all_rust_files().into_iter().filter(|p| !is_bench(p)) {
        let text = std::fs::read_to_string(&p).unwrap();
        for (i, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
                continue;
            }
            assert!(
                !code.contains(&beside) && !code.contains(&traces),
                "{}:{}: reads from beside the repository; a fresh clone has nothing there (vendor the data)",
                p.strip_prefix(root()).unwrap().display(),
                i + 1
            );
        }
    }
}

#[test]
fn every_test_s_daemon_keeps_nothing_or_a_temporary_state() {
    // A test or benchmark that starts apexd (or a UI that starts one)
    // says where its sessions go: nowhere (--ephemeral), a temporary
    // --state, or a temporary XDG_STATE_HOME; never the user's directory.
    let programs = [
        ["CARGO_BIN_EXE_", "apexd"].concat(),
        ["sibling(\"", "apexd\")"].concat(),
        ["CARGO_BIN_EXE_", "apex-ui"].concat(),
        ["apexd", "()"].concat(),
    ];
    let says = ["--ephemeral", "--state", "XDG_STATE_HOME"];
    let tests = |p: &Path| p.components().any(|c| matches!(c.as_os_str().to_str(), Some("tests" | "benches")));
    for p in all_rust_files().into_iter().filter(|p| tests(p) && !p.ends_with("tidy.rs")) {
        let text = std::fs::read_to_string(&p).unwrap();
        let starts = |l: &str| l.contains("Command::new(") && programs.iter().any(|s| l.contains(s.as_str()));
        if text.lines().any(starts) {
            assert!(
                says.iter().any(|s| text.contains(s)),
                "{} starts apexd without --ephemeral, --state DIR or XDG_STATE_HOME: it would keep sessions in the user's state directory",
                p.strip_prefix(root()).unwrap().display()
            );
        }
    }
}

#[test]
fn skips_are_said_out_loud() {
    // A test that cannot run says `SKIPPED: reason` past the harness's
    // capture, and fails under CI; a quiet eprintln is seen by nobody.
    let quiet = ["eprintln!(\"", "skipping"].concat();
    for p in all_rust_files() {
        let text = std::fs::read_to_string(&p).unwrap();
        assert!(!text.contains(&quiet), "{} skips quietly: use a SKIPPED line", p.display());
    }
}

/// A library crate's module graph, one node per source file: an edge for
/// every `crate::` or `super::` path a file names (comments and tests
/// aside), to the file of the longest module prefix, and from a module to
/// each submodule it declares. A file's use of its parent module
/// (`super::Fsys` in `fsys/root.rs`) is not counted: a module's files
/// together implement it (acme's `fsys.c` beside its `xfid.c`).
fn module_graph(src: &Path) -> Vec<(PathBuf, Vec<PathBuf>)> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.retain(|f| !f.starts_with(src.join("bin")));
    let module_of = |f: &Path| -> Vec<String> {
        let rel = f.strip_prefix(src).unwrap().with_extension("");
        let mut segs: Vec<String> = rel.iter().map(|s| s.to_string_lossy().to_string()).collect();
        if matches!(segs.last().map(String::as_str), Some("mod" | "lib")) {
            segs.pop();
        }
        segs
    };
    let by_module: std::collections::BTreeMap<Vec<String>, PathBuf> =
        files.iter().map(|f| (module_of(f), f.clone())).collect();
    let resolve = |segs: &[String]| (0..=segs.len()).rev().find_map(|k| by_module.get(&segs[..k]).cloned());
    // What the crate's root re-exports (`pub use state::State;`): a path
    // through it names the module the item lives in, not the root.
    let root_file = by_module.get(&Vec::new()).cloned();
    let mut reexported: std::collections::BTreeMap<String, String> = Default::default();
    if let Some(root) = &root_file {
        let text = std::fs::read_to_string(root).unwrap();
        for stmt in text.split(';') {
            let Some(rest) = stmt.trim().strip_prefix("pub use ") else { continue };
            let Some((module, names)) = rest.split_once("::") else { continue };
            for name in names.trim_matches(|c: char| c == '{' || c == '}' || c.is_whitespace()).split(',') {
                let name = name.trim().rsplit("::").next().unwrap_or_default().to_string();
                if !name.is_empty() {
                    reexported.insert(name, module.trim().to_string());
                }
            }
        }
    }
    let parent_of = |m: &Path, c: &Path| m.ends_with("mod.rs") && c.parent() == m.parent() && m != c;
    let mut graph = Vec::new();
    for f in &files {
        let me = module_of(f);
        let text = std::fs::read_to_string(f).unwrap();
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap()
            .lines()
            .map(|l| l.split("//").next().unwrap())
            .collect::<Vec<_>>()
            .join("\n");
        let mut to = Vec::new();
        for (anchor, base) in [("crate::", Vec::new()), ("super::", me[..me.len().saturating_sub(1)].to_vec())] {
            for (at, _) in code.match_indices(anchor) {
                let before = code[..at].chars().last().unwrap_or(' ');
                if before.is_alphanumeric() || before == '_' {
                    continue;
                }
                let rest = &code[at + anchor.len()..];
                // `crate::{a, b::c}` names several paths; `crate::a::b` one.
                let paths: Vec<&str> = match rest.strip_prefix('{') {
                    Some(group) => group.split('}').next().unwrap().split(',').collect(),
                    None => vec![rest],
                };
                for p in paths {
                    let segs: Vec<String> = p
                        .trim()
                        .split("::")
                        .map(|s| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>())
                        .take_while(|s| !s.is_empty())
                        .collect();
                    let mut full = base.clone();
                    if let Some(module) = segs.first().filter(|_| base.is_empty()).and_then(|n| reexported.get(n)) {
                        full.push(module.clone());
                    }
                    full.extend(segs);
                    let not_root = |t: &PathBuf| Some(t) != root_file.as_ref();
                    if let Some(t) = resolve(&full).filter(|t| t != f && !parent_of(t, f) && not_root(t)) {
                        if !to.contains(&t) {
                            to.push(t);
                        }
                    }
                }
            }
        }
        // A module uses a child it declares only where it names it
        // (`files::content`, `pub use files::X`): a folder's mod.rs that
        // holds what its family means declares the family's files, which
        // build on that meaning, without using them.
        for line in code.lines() {
            let decl = line.trim().trim_start_matches("pub ").trim_start_matches("pub(crate) ");
            if let Some(name) = decl.strip_prefix("mod ").and_then(|d| d.strip_suffix(';')) {
                let name = name.trim();
                let used = code.match_indices(&format!("{name}::")).any(|(at, _)| {
                    let before = code[..at].chars().last().unwrap_or(' ');
                    !(before.is_alphanumeric() || before == '_' || before == ':')
                });
                if !used {
                    continue;
                }
                let mut child = me.clone();
                child.push(name.to_string());
                to.extend(by_module.get(&child).cloned());
            }
        }
        graph.push((f.clone(), to));
    }
    graph
}

/// The first cycle in `graph`, as the files along it.
fn a_cycle(graph: &[(PathBuf, Vec<PathBuf>)]) -> Option<Vec<PathBuf>> {
    fn visit(
        at: &Path,
        graph: &[(PathBuf, Vec<PathBuf>)],
        path: &mut Vec<PathBuf>,
        done: &mut Vec<PathBuf>,
    ) -> Option<Vec<PathBuf>> {
        if let Some(i) = path.iter().position(|p| p == at) {
            let mut cycle = path[i..].to_vec();
            cycle.push(at.to_path_buf());
            return Some(cycle);
        }
        if done.iter().any(|d| d == at) {
            return None;
        }
        path.push(at.to_path_buf());
        let next = graph.iter().find(|(f, _)| f == at).map(|(_, t)| t.clone()).unwrap_or_default();
        for t in next {
            if let Some(c) = visit(&t, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        done.push(at.to_path_buf());
        None
    }
    let mut done = Vec::new();
    graph.iter().find_map(|(f, _)| visit(f, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_crate_s_modules_import_each_other_in_a_cycle() {
    // Each crate reads from the bottom up: core's op.rs first, the
    // daemon's layers (fsys, the families, host, daemon, attach) only point down.
    for krate in ["core", "fsd", "ninep", "sys", "link", "mnt", "ui"] {
        let src = root().join(krate).join("src");
        let graph = module_graph(&src);
        assert!(
            graph.iter().map(|(_, t)| t.len()).sum::<usize>() > 0 || ["mnt", "sys"].contains(&krate),
            "{krate}: no edges found"
        );
        if let Some(cycle) = a_cycle(&graph) {
            let names: Vec<String> =
                cycle.iter().map(|p| p.strip_prefix(&src).unwrap().display().to_string()).collect();
            panic!("{krate}: modules import each other in a cycle: {}", names.join(" -> "));
        }
    }
}

/// The daemon's top-level modules (a family's `files`, its 9P side, on
/// its own) and those each imports, from the code:
/// `ARCHITECTURE.md` shows this map between its markers, so its picture of
/// fsd's layers cannot drift from the imports (`error`, which every
/// module uses, left out).
fn fsd_module_map() -> String {
    let src = root().join("fsd").join("src");
    let top = |f: &Path| -> Option<String> {
        let rel = f.strip_prefix(&src).ok()?;
        let first = rel.iter().next()?.to_string_lossy().to_string();
        let mut name = first.trim_end_matches(".rs").to_string();
        // A family's files (the 9P side) apart from what they mean, and
        // the tree's dispatch (`fsys`) apart from what every family's
        // files build on (`fsys::tree`, `fsys::fid`, ...).
        let stem = rel.file_stem().map(|f| f.to_string_lossy().to_string()).unwrap_or_default();
        if rel.iter().count() == 2 && (stem == "files" || (name == "fsys" && stem != "mod")) {
            name = format!("{name}::{stem}");
        }
        (name != "lib" && name != "error").then_some(name)
    };
    let mut map: std::collections::BTreeMap<String, std::collections::BTreeSet<String>> = Default::default();
    for (from, to) in module_graph(&src) {
        let Some(a) = top(&from) else { continue };
        let uses = map.entry(a.clone()).or_default();
        uses.extend(to.iter().filter_map(|t| top(t)).filter(|b| *b != a));
    }
    map.iter()
        .map(|(m, uses)| match uses.is_empty() {
            true => format!("{m}\n"),
            false => format!("{m} -> {}\n", uses.iter().cloned().collect::<Vec<_>>().join(", ")),
        })
        .collect()
}

#[test]
fn architecture_md_maps_fsd_s_imports_as_they_are() {
    let text = std::fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let (start, end) =
        ("<!-- fsd imports: tests/tidy.rs keeps this true -->\n```\n", "```\n<!-- end of fsd imports -->");
    let block = text.split(start).nth(1).and_then(|rest| rest.split(end).next());
    let want = fsd_module_map();
    assert_eq!(
        block,
        Some(want.as_str()),
        "ARCHITECTURE.md's map of fsd's imports is not the code's; put this between its markers:\n{want}"
    );
}
