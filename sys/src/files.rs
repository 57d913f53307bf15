//! Reading a file as acme's Get does, for every process that loads files
//! into buffers (the daemon, and a UI on the daemon's machine).

use apex_core::ecmd::PipeError;
use std::path::Path;

/// A file's text, or a directory's listing as acme shows one: the names
/// in order, one a line, a directory's with a `/` after it.
pub fn read_text(path: &str) -> std::io::Result<Vec<u8>> {
    if !Path::new(path).is_dir() {
        return std::fs::read(path);
    }
    let mut names: Vec<String> = entries(path)?
        .into_iter()
        .map(|(name, dir)| match dir {
            true => format!("{name}/"),
            false => name,
        })
        .collect();
    names.sort();
    Ok(names.iter().map(|n| format!("{n}\n")).collect::<String>().into_bytes())
}

/// A directory's names, each with whether it is a directory (Get's
/// listing, ^F's completion).
pub fn entries(path: &str) -> std::io::Result<Vec<(String, bool)>> {
    Ok(std::fs::read_dir(path)?
        .flatten()
        .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path().is_dir()))
        .collect())
}

/// [`read_text`] as UTF-8, with errors that say what was read (`what` is
/// the command: `get`).
pub fn read_utf8(what: &'static str, path: &str) -> Result<String, FileError> {
    let bytes = read_text(path).map_err(|source| FileError::Read { what, path: path.to_string(), source })?;
    String::from_utf8(bytes).map_err(|_| FileError::NotUtf8 { what, path: path.to_string() })
}

/// Why a file could not be loaded; `what` is the command (`get`).
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{what}: {path}: {source}")]
    Read { what: &'static str, path: String, source: std::io::Error },
    #[error("{what}: {path} is not UTF-8 text")]
    NotUtf8 { what: &'static str, path: String },
}

/// An I/O error as acme's `%r` says it: the system's words, without Rust's
/// "(os error N)".
pub fn os_words(e: &std::io::Error) -> String {
    let text = e.to_string();
    text.split(" (os error").next().unwrap_or(&text).to_string()
}

/// Edit's `e` and `r`: a file's bytes (a directory is refused, as acme's
/// e_cmd refuses one).
pub fn read_for_edit(path: &str) -> Result<Vec<u8>, PipeError> {
    if Path::new(path).is_dir() {
        return Err(PipeError::IsADirectory);
    }
    std::fs::read(path).map_err(|e| PipeError::System(os_words(&e)))
}

/// Edit's `w`: writes the bytes, making the file if need be.
pub fn write_for_edit(path: &str, bytes: &[u8]) -> Result<(), PipeError> {
    std::fs::write(path, bytes).map_err(|e| PipeError::System(os_words(&e)))
}
