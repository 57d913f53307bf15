//! Reading a file as acme's Get does, for every process that loads files
//! into buffers (the daemon, and a UI on the daemon's machine): regular
//! files and directories only, and no file past a limit, so no name a
//! user gives can grow the reader without bound.

use apex_core::ecmd::PipeError;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The most bytes of one file any command reads ([`set_max_file`]); zero
/// until set: then [`default_max_file`].
static MAX_FILE: AtomicU64 = AtomicU64::new(0);

/// The limit when none is set: the smaller of 4 GiB and half the
/// machine's memory, so a 1 GB log opens and `/dev/zero`'s like cannot
/// take the machine.
pub fn default_max_file() -> u64 {
    // SAFETY: sysconf(3) with plain constants.
    let (pages, size) = unsafe { (libc::sysconf(libc::_SC_PHYS_PAGES), libc::sysconf(libc::_SC_PAGESIZE)) };
    let half = (pages.max(0) as u64).saturating_mul(size.max(0) as u64) / 2;
    match half {
        0 => 4 << 30,
        half => half.min(4 << 30),
    }
}

/// Sets the most bytes of one file a command reads (apexd's `--max-file`).
pub fn set_max_file(bytes: u64) {
    MAX_FILE.store(bytes.max(1), Ordering::Relaxed);
}

/// The most bytes of one file a command reads.
pub fn max_file() -> u64 {
    match MAX_FILE.load(Ordering::Relaxed) {
        0 => default_max_file(),
        n => n,
    }
}

/// A regular file's bytes, up to [`max_file`]: a device, FIFO or socket is
/// refused (it may never end, or never answer), and so is a file larger
/// than the limit, or one that grows past it while read.
pub fn read_file(path: &str) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::OpenOptionsExt;
    // Opened without blocking (a FIFO with no writer would wait forever),
    // then checked for what it is, by the descriptor: the name may have
    // been replaced since any look at it.
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY).open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        let kind = kind_of(&meta.file_type());
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("is {kind}, not a regular file: only files and directories are read"),
        ));
    }
    let limit = max_file();
    let too_big = |len: u64| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("is {len} bytes or more, over the {limit}-byte limit on one file (apexd --max-file)"),
        )
    };
    if meta.len() > limit {
        return Err(too_big(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    std::io::Read::read_to_end(&mut std::io::Read::take(file, limit + 1), &mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_big(bytes.len() as u64));
    }
    Ok(bytes)
}

/// What a file that is not a regular file is, in words.
fn kind_of(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    match () {
        _ if t.is_char_device() => "a character device",
        _ if t.is_block_device() => "a block device",
        _ if t.is_fifo() => "a FIFO",
        _ if t.is_socket() => "a socket",
        _ if t.is_dir() => "a directory",
        _ => "not a regular file",
    }
}

/// A file's text, or a directory's listing as acme shows one: the names
/// in order, one a line, a directory's with a `/` after it.
pub fn read_text(path: &str) -> std::io::Result<Vec<u8>> {
    if !Path::new(path).is_dir() {
        return read_file(path);
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
    read_file(path).map_err(|e| PipeError::System(os_words(&e)))
}

/// Edit's `w`: writes the bytes, making the file if need be.
pub fn write_for_edit(path: &str, bytes: &[u8]) -> Result<(), PipeError> {
    std::fs::write(path, bytes).map_err(|e| PipeError::System(os_words(&e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_are_read_and_none_past_the_limit() {
        let e = read_file("/dev/zero").unwrap_err().to_string();
        assert!(e.contains("a character device"), "{e}");
        let e = read_for_edit("/dev/null").unwrap_err().to_string();
        assert!(e.contains("not a regular file"), "Edit's r too: {e}");
        assert!(read_text("/").is_ok(), "a directory is listed");
        assert!(default_max_file() >= 1 << 20 && default_max_file() <= 4 << 30);
    }
}
