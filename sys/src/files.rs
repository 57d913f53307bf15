//! Reading a file as acme's Get does, for every process that loads files
//! into buffers (the daemon, and a UI on the daemon's machine): regular
//! files and directories only, and no file past a limit, so no name a
//! user gives can grow the reader without bound.

use apex_core::ecmd::PipeError;
use apex_core::op::SPLICE_MAX;
use apex_core::text::Decoded;
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
    let (file, size, limit) = open_regular(path)?;
    let mut bytes = Vec::with_capacity(size as usize);
    std::io::Read::read_to_end(&mut std::io::Read::take(file, limit + 1), &mut bytes)?;
    if bytes.len() as u64 > limit {
        return Err(too_big(bytes.len() as u64, limit));
    }
    Ok(bytes)
}

/// The refusal of a file of `len` bytes or more, over `limit`.
fn too_big(len: u64, limit: u64) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::InvalidInput,
        format!("is {len} bytes or more, over the {limit}-byte limit on one file (apexd --max-file)"),
    )
}

/// `path` opened for [`read_file`]: a regular file within the limit, its
/// size, and the limit.
fn open_regular(path: &str) -> std::io::Result<(std::fs::File, u64, u64)> {
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
    if meta.len() > limit {
        return Err(too_big(meta.len(), limit));
    }
    Ok((file, meta.len(), limit))
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

/// [`read_text`] made text as acme loads a file (core's
/// `acme_file_runes`: each byte that is not UTF-8 a U+FFFD, NULs
/// dropped), with what that did, and errors that say what was read
/// (`what` is the command: `get`). The text comes in pieces of at most
/// [`SPLICE_MAX`] bytes, whole runes each, in order: a file is read a
/// piece at a time straight into the strings that become its entries
/// (`get_proposals`), so a 1 GB file is not copied again to be cut up.
pub fn read_utf8(what: &'static str, path: &str) -> Result<(Vec<String>, Decoded), FileError> {
    read_pieces(path).map_err(|source| FileError::Read { what, path: path.to_string(), source })
}

/// [`read_utf8`]'s pieces.
fn read_pieces(path: &str) -> std::io::Result<(Vec<String>, Decoded)> {
    if Path::new(path).is_dir() {
        let (listing, said) = apex_core::text::acme_file_text(read_text(path)?);
        return Ok((apex_core::op::pieces(&listing).into_iter().map(str::to_string).collect(), said));
    }
    let (file, size, limit) = open_regular(path)?;
    let mut file = std::io::Read::take(file, limit + 1);
    let mut pieces = Vec::with_capacity(size as usize / SPLICE_MAX + 1);
    let (mut said, mut cut, mut read) = (Decoded::default(), Vec::new(), 0u64);
    loop {
        // Sized to what is left (a piece is an entry's text as it is: a
        // small file's is not a MiB block).
        let left = size.saturating_sub(read) as usize + cut.len();
        let mut bytes = Vec::with_capacity(left.clamp(1, SPLICE_MAX));
        bytes.append(&mut cut);
        let before = bytes.len();
        std::io::Read::read_to_end(&mut std::io::Read::take(&mut file, (SPLICE_MAX - before) as u64), &mut bytes)?;
        read += (bytes.len() - before) as u64;
        if read > limit {
            return Err(too_big(read, limit));
        }
        // A piece short of full is the file's last.
        let end = bytes.len() < SPLICE_MAX;
        if !bytes.is_empty() {
            decode_piece(bytes, end, &mut cut, &mut said, &mut pieces);
        }
        if end {
            return Ok((pieces, said));
        }
    }
}

/// A piece of a file's bytes made text onto `pieces`, with what that did
/// added to `said`; a rune its end cut, unless it is the file's `end`,
/// left in `cut` for the next piece. Text that is UTF-8 throughout with
/// no NUL (most files) becomes the piece with no copy.
fn decode_piece(bytes: Vec<u8>, end: bool, cut: &mut Vec<u8>, said: &mut Decoded, pieces: &mut Vec<String>) {
    let bytes = match memchr::memchr(0, &bytes) {
        Some(_) => bytes,
        None => match String::from_utf8(bytes) {
            Ok(text) => return pieces.push(text),
            Err(e) if e.utf8_error().error_len().is_none() && !end => {
                let whole = e.utf8_error().valid_up_to();
                let mut bytes = e.into_bytes();
                cut.extend_from_slice(&bytes[whole..]);
                bytes.truncate(whole);
                // SAFETY: `valid_up_to` is where the bytes stop being
                // UTF-8; all before it is.
                return pieces.push(unsafe { String::from_utf8_unchecked(bytes) });
            }
            Err(e) => e.into_bytes(),
        },
    };
    let (text, more) = match end {
        true => apex_core::text::acme_file_runes(&bytes),
        false => {
            let (text, rest, more) = apex_core::text::acme_runes(&bytes);
            cut.extend_from_slice(rest);
            (text, more)
        }
    };
    said.replaced += more.replaced;
    said.nuls += more.nuls;
    // A U+FFFD is three bytes where the byte was one; a piece of NULs is
    // no text at all.
    match text.len() <= SPLICE_MAX {
        true if text.is_empty() => {}
        true => pieces.push(text),
        false => pieces.extend(apex_core::op::pieces(&text).into_iter().map(str::to_string)),
    }
}

/// What a load that changed the file's bytes says, as acme warns of
/// NULs: `None` when the text is the file's bytes.
pub fn load_warning(path: &str, said: Decoded) -> Option<String> {
    let mut out = String::new();
    match said.replaced {
        0 => {}
        1 => out += &format!("{path}: 1 byte that is not UTF-8 is shown as U+FFFD; Put warns before it writes it so\n"),
        n => {
            out += &format!(
                "{path}: {n} bytes that are not UTF-8 are shown as U+FFFD; Put warns before it writes them so\n"
            )
        }
    }
    if said.nuls > 0 {
        out += &format!("{path}: NUL bytes elided\n");
    }
    (!out.is_empty()).then_some(out)
}

/// Whether `path` is a regular file (within [`max_file`]) whose bytes are
/// not all UTF-8: what Put would write over with U+FFFD's bytes.
pub fn holds_bytes_not_utf8(path: &str) -> bool {
    read_file(path).is_ok_and(|bytes| apex_core::text::text_and_cut(&bytes).is_none_or(|(_, cut)| !cut.is_empty()))
}

/// Why a file could not be loaded; `what` is the command (`get`).
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{what}: {path}: {source}")]
    Read { what: &'static str, path: String, source: std::io::Error },
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

/// How [`write_replacing`] wrote a file.
#[derive(Debug, PartialEq, Eq)]
pub enum Written {
    /// A new file beside it, renamed over it: a failure midway left the
    /// old text whole.
    Replaced,
    /// In place, as a rename could not keep what the file is; why.
    InPlace(&'static str),
}

/// Writes a file whole or not at all: `fill` writes the text into a new
/// file beside `path`'s target (a symlink is written through), which
/// takes the old one's mode (and owner, where this process may give it)
/// and is renamed over it once on disk. Where a rename cannot keep what
/// the file is (other hard links to it, an owner this process cannot
/// give, a directory it cannot write in), it is written in place, and
/// the result says why.
pub fn write_replacing(
    path: &Path,
    fill: &dyn Fn(&mut dyn std::io::Write) -> std::io::Result<()>,
) -> std::io::Result<Written> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let target = target_of(path)?;
    let old = match std::fs::metadata(&target) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    if old.is_some() && !writable(&target) {
        // As writing it in place would be refused: a read-only file stays.
        return Err(std::io::Error::from(std::io::ErrorKind::PermissionDenied));
    }
    // SAFETY: geteuid has no preconditions.
    let me = unsafe { libc::geteuid() };
    let in_place = match &old {
        Some(m) if !m.is_file() => Some("it is not a regular file"),
        Some(m) if m.nlink() > 1 => Some("it has other hard links, which a rename would part from it"),
        Some(m) if m.uid() != me && me != 0 => Some("it belongs to another user, whom a new file could not belong to"),
        _ => None,
    };
    let in_place_write = |why| -> std::io::Result<Written> {
        let mut f = std::io::BufWriter::new(std::fs::File::create(&target)?);
        fill(&mut f)?;
        f.into_inner().map_err(|e| e.into_error())?.sync_all()?;
        Ok(Written::InPlace(why))
    };
    if let Some(why) = in_place {
        return in_place_write(why);
    }
    let dir = target.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let mode = old.as_ref().map_or(0o666, |m| m.mode() & 0o7777);
    let mut made = None;
    for n in 0..100 {
        // A short name beside it, whatever the length of its own.
        let tmp = dir.join(format!(".put.{}.{n}", std::process::id()));
        match std::fs::OpenOptions::new().write(true).create_new(true).mode(mode & 0o777).open(&tmp) {
            Ok(f) => {
                made = Some((tmp, f));
                break;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(_) if old.is_some() => return in_place_write("no file could be made beside it"),
            Err(e) => return Err(e),
        }
    }
    let Some((tmp, file)) = made else {
        return Err(std::io::Error::other(format!("no free name beside {}", target.display())));
    };
    let written = (|| -> std::io::Result<Option<&'static str>> {
        let mut f = std::io::BufWriter::new(file);
        fill(&mut f)?;
        let file = f.into_inner().map_err(|e| e.into_error())?;
        if let Some(m) = &old {
            // The owner first (a change of owner clears set-id bits),
            // then the mode exactly; a group this process cannot give
            // means the file is written in place instead.
            if (m.uid(), m.gid()) != (file.metadata()?.uid(), file.metadata()?.gid())
                && std::os::unix::fs::fchown(&file, Some(m.uid()), Some(m.gid())).is_err()
            {
                return Ok(Some("its owner or group could not be given to a new file"));
            }
            file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(mode))?;
        }
        file.sync_all()?;
        if std::fs::rename(&tmp, &target).is_err() && old.is_some() {
            return Ok(Some("it could not be renamed over (a mount, say)"));
        }
        Ok(None)
    })();
    match written {
        Ok(None) => {
            // The rename on disk; the file is replaced either way.
            if let Ok(d) = std::fs::File::open(dir) {
                let _ = d.sync_all();
            }
            Ok(Written::Replaced)
        }
        Ok(Some(why)) => {
            let _ = std::fs::remove_file(&tmp);
            in_place_write(why)
        }
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// The file a write to `path` reaches: through symbolic links, to a
/// target that may not exist yet (a dangling link is written through).
fn target_of(path: &Path) -> std::io::Result<std::path::PathBuf> {
    let mut at = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&at)?;
                at = match to.is_absolute() {
                    true => to,
                    false => at.parent().unwrap_or(Path::new("/")).join(to),
                };
            }
            Ok(_) => return Ok(at),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(at),
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other(format!("{}: too many levels of symbolic links", path.display())))
}

/// Whether this process may write `path` (access(2), as a write in place
/// would find out).
fn writable(path: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) else { return false };
    // SAFETY: access(2) reads the NUL-terminated path it is given.
    unsafe { libc::access(c.as_ptr(), libc::W_OK) == 0 }
}

/// Edit's `w`: writes the bytes, making the file if need be.
pub fn write_for_edit(path: &str, bytes: &[u8]) -> Result<(), PipeError> {
    std::fs::write(path, bytes).map_err(|e| PipeError::System(os_words(&e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file read in pieces is the text the whole file makes, said the
    /// same way, whatever falls where one piece ends: a rune cut in two,
    /// a byte that is not UTF-8, a NUL, a sequence the file's end cuts
    /// short; and no piece is longer than an entry, a run of bad bytes
    /// (each three bytes of U+FFFD) included.
    #[test]
    fn a_file_in_pieces_is_the_text_of_the_whole_whatever_falls_at_a_piece_s_end() {
        let d = std::env::temp_dir().join(format!("apex-sys-pieces-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let file = d.join("f");
        let path = file.to_str().unwrap();
        let check = |bytes: &[u8]| {
            std::fs::write(&file, bytes).unwrap();
            let (pieces, said) = read_utf8("get", path).unwrap();
            let whole = apex_core::text::acme_file_text(bytes.to_vec());
            assert!(
                pieces.iter().all(|p| !p.is_empty() && p.len() <= SPLICE_MAX),
                "{:?}",
                pieces.iter().map(String::len).collect::<Vec<_>>()
            );
            assert!(pieces.concat() == whole.0, "the text of {} bytes", bytes.len());
            assert_eq!(said, whole.1);
            pieces.len()
        };
        let sequences: [&[u8]; 7] =
            [b"\xc3\xa9", b"\xe6\x97\xa5", b"\xf0\x9d\x84\x9e", b"\xff", b"\0", b"\xe2\x82", b"a\xe2\x82"];
        for seq in sequences {
            for back in 0..6 {
                let mut bytes = vec![b'x'; SPLICE_MAX - back];
                bytes.extend_from_slice(seq);
                check(&bytes);
                bytes.extend_from_slice(b"and on\n");
                bytes.extend_from_slice(&vec![b'y'; SPLICE_MAX]);
                bytes.extend_from_slice(seq);
                check(&bytes);
            }
        }
        assert_eq!(check(&[]), 0);
        assert_eq!(check(&vec![b'z'; SPLICE_MAX]), 1);
        assert_eq!(check(&vec![b'z'; 2 * SPLICE_MAX]), 2);
        assert!(check(&vec![0xff; SPLICE_MAX + 5]) >= 4, "3 MiB of U+FFFD in entries' pieces");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_file_is_replaced_whole_through_its_link_keeping_its_mode() {
        use std::os::unix::fs::{MetadataExt, PermissionsExt};
        let d = std::env::temp_dir().join(format!("apex-sys-put-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        let file = d.join("f");
        std::fs::write(&file, "old\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o640)).unwrap();
        let link = d.join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let inode = std::fs::metadata(&file).unwrap().ino();
        let w = write_replacing(&link, &|w| w.write_all(b"new\n")).unwrap();
        assert_eq!(w, Written::Replaced);
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new\n");
        assert!(std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink(), "the link stays a link");
        let m = std::fs::metadata(&file).unwrap();
        assert_ne!(m.ino(), inode, "a new file, renamed over the old");
        assert_eq!(m.mode() & 0o7777, 0o640, "the old one's mode");
        // A failure midway leaves the old text whole, and nothing beside.
        let failed = write_replacing(&file, &|w| {
            w.write_all(b"half")?;
            Err(std::io::Error::other("the disk is full"))
        });
        assert!(failed.is_err());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "new\n");
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 2, "no temporary file left");
        // Another hard link: written in place, and said why.
        std::fs::hard_link(&file, d.join("other")).unwrap();
        let w = write_replacing(&file, &|w| w.write_all(b"linked\n")).unwrap();
        assert!(matches!(w, Written::InPlace(why) if why.contains("hard links")), "{w:?}");
        assert_eq!(std::fs::read_to_string(d.join("other")).unwrap(), "linked\n", "both names see it");
        // A dangling link is written through, and stays a link.
        let dangling = d.join("dangling");
        std::os::unix::fs::symlink("target-to-be", &dangling).unwrap();
        write_replacing(&dangling, &|w| w.write_all(b"through\n")).unwrap();
        assert!(std::fs::symlink_metadata(&dangling).unwrap().file_type().is_symlink());
        assert_eq!(std::fs::read_to_string(d.join("target-to-be")).unwrap(), "through\n");
        // A set-id mode is kept.
        std::fs::remove_file(d.join("other")).unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o2750)).unwrap();
        write_replacing(&file, &|w| w.write_all(b"setgid\n")).unwrap();
        assert_eq!(std::fs::metadata(&file).unwrap().mode() & 0o7777, 0o2750);
        // A new file.
        let w = write_replacing(&d.join("fresh"), &|w| w.write_all(b"made\n")).unwrap();
        assert_eq!((w, std::fs::read_to_string(d.join("fresh")).unwrap()), (Written::Replaced, "made\n".into()));
        std::fs::remove_dir_all(&d).unwrap();
    }

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
