//! The system's fonts, found through fontconfig, loaded at run time
//! (`libfontconfig.so.1`): the UI builds without its -dev package and
//! runs where it is missing, with the embedded faces alone. It finds a
//! face by name (`-f 'Go Regular 11'`, `-F 'DejaVu Sans Mono 10'`) and a
//! face that has a character the chosen ones lack (CJK, symbols).

use fontconfig_sys as sys;
use std::ffi::{c_char, c_int, CStr, CString};
use std::path::PathBuf;
use std::sync::Mutex;

/// A font file, and which face in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FontFile {
    pub path: PathBuf,
    pub index: u32,
}

/// fontconfig is not safe to call from two threads at once.
static LOCK: Mutex<()> = Mutex::new(());

fn library() -> Option<&'static sys::Fc> {
    sys::statics::LIB_RESULT.as_ref().ok()
}

/// Loads fontconfig's configuration and font cache, which its first
/// lookup would otherwise do: called on a thread of its own at start, so
/// the first character a face lacks, looked for while a frame is drawn
/// (the link's lock held), finds the work done.
pub fn warm() {
    let Some(fc) = library() else { return };
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: FcInit takes no arguments and may be called at any time.
    unsafe { (fc.FcInit)() };
}

/// A pattern, destroyed when dropped.
struct Pattern<'a>(&'a sys::Fc, *mut sys::FcPattern);

impl Drop for Pattern<'_> {
    fn drop(&mut self) {
        if !self.1.is_null() {
            // SAFETY: a pattern fontconfig made for us, destroyed once.
            unsafe { (self.0.FcPatternDestroy)(self.1) }
        }
    }
}

/// A string property of a pattern.
///
/// SAFETY: `p` is a live pattern.
unsafe fn get_string(fc: &sys::Fc, p: *mut sys::FcPattern, key: &CStr) -> Option<String> {
    let mut out: *mut sys::FcChar8 = std::ptr::null_mut();
    // SAFETY: `p` is live (the caller's word); `out` points into it after.
    let r = unsafe { (fc.FcPatternGetString)(p, key.as_ptr(), 0, &mut out) };
    // SAFETY: fontconfig gives a NUL-terminated string owned by `p`.
    (r == sys::FcResultMatch && !out.is_null())
        .then(|| unsafe { CStr::from_ptr(out as *const c_char) }.to_string_lossy().into_owned())
}

/// The file and face index a pattern names.
///
/// SAFETY: `p` is a live pattern.
unsafe fn file_of(fc: &sys::Fc, p: *mut sys::FcPattern) -> Option<FontFile> {
    // SAFETY: `p` is live.
    let path = unsafe { get_string(fc, p, sys::constants::FC_FILE) }?;
    let mut index: c_int = 0;
    // SAFETY: `p` is live; `index` is ours.
    unsafe { (fc.FcPatternGetInteger)(p, sys::constants::FC_INDEX.as_ptr(), 0, &mut index) };
    Some(FontFile { path: PathBuf::from(path), index: index.max(0) as u32 })
}

/// The installed face named `name`: its full name (`Go Regular`,
/// `DejaVu Sans Mono Bold`), or a family and style, or a family (its
/// regular face first), blanks and case aside (plan9port's fontsrv
/// runs the words together: `GoRegular`); `None` when fontconfig is
/// missing or nothing has the name.
pub fn named(name: &str) -> Option<FontFile> {
    let fc = library()?;
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let squeeze = |s: &str| s.chars().filter(|c| !c.is_whitespace()).collect::<String>().to_lowercase();
    let want = squeeze(name);
    // SAFETY: the calls follow fontconfig's API: patterns and object
    // sets are made, used and destroyed here; a font set's patterns are
    // read while the set lives.
    unsafe {
        let config = (fc.FcInitLoadConfigAndFonts)();
        if config.is_null() {
            return None;
        }
        let all = Pattern(fc, (fc.FcPatternCreate)());
        let os = (fc.FcObjectSetCreate)();
        for key in [
            sys::constants::FC_FAMILY,
            sys::constants::FC_STYLE,
            sys::constants::FC_FULLNAME,
            sys::constants::FC_FILE,
            sys::constants::FC_INDEX,
        ] {
            (fc.FcObjectSetAdd)(os, key.as_ptr());
        }
        let set = (fc.FcFontList)(config, all.1, os);
        (fc.FcObjectSetDestroy)(os);
        if set.is_null() {
            (fc.FcConfigDestroy)(config);
            return None;
        }
        // Best first: the full name, then family and style, then the
        // family's regular face, then the family's any face.
        let mut best: Option<(u8, FontFile)> = None;
        let fonts = std::slice::from_raw_parts((*set).fonts, (*set).nfont.max(0) as usize);
        for &p in fonts {
            let family = squeeze(&get_string(fc, p, sys::constants::FC_FAMILY).unwrap_or_default());
            let style = squeeze(&get_string(fc, p, sys::constants::FC_STYLE).unwrap_or_default());
            let full = squeeze(&get_string(fc, p, sys::constants::FC_FULLNAME).unwrap_or_default());
            let rank = match () {
                _ if full == want => 0,
                _ if format!("{family}{style}") == want => 1,
                _ if family == want && matches!(style.as_str(), "regular" | "book" | "roman" | "medium") => 2,
                _ if family == want => 3,
                _ => continue,
            };
            if best.as_ref().is_none_or(|(r, _)| rank < *r) {
                if let Some(f) = file_of(fc, p) {
                    best = Some((rank, f));
                }
            }
        }
        (fc.FcFontSetDestroy)(set);
        (fc.FcConfigDestroy)(config);
        best.map(|(_, f)| f)
    }
}

/// The nearest installed face to `family` by fontconfig's own rules (its
/// aliases: `sans`, `monospace`, and what the system maps them to); with
/// `fixed`, a fixed-width face before any other.
pub fn nearest(family: &str, fixed: bool) -> Option<FontFile> {
    let fc = library()?;
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let family = CString::new(family).ok()?;
    // SAFETY: as in `named`.
    unsafe {
        let pattern = Pattern(fc, (fc.FcPatternCreate)());
        (fc.FcPatternAddString)(pattern.1, sys::constants::FC_FAMILY.as_ptr(), family.as_ptr() as *const u8);
        if fixed {
            (fc.FcPatternAddString)(pattern.1, sys::constants::FC_FAMILY.as_ptr(), c"monospace".as_ptr() as *const u8);
        }
        let found = best_match(fc, &pattern)?;
        file_of(fc, found.1)
    }
}

/// The installed face that best matches `pattern`, by fontconfig's rules
/// and the system's settings (the pattern is filled in with them).
///
/// SAFETY: `pattern` is a live pattern.
unsafe fn best_match<'a>(fc: &'a sys::Fc, pattern: &Pattern<'a>) -> Option<Pattern<'a>> {
    let mut result = 0;
    // SAFETY: `pattern` is live; the default configuration is used.
    let found = unsafe {
        (fc.FcConfigSubstitute)(std::ptr::null_mut(), pattern.1, sys::FcMatchPattern);
        (fc.FcDefaultSubstitute)(pattern.1);
        Pattern(fc, (fc.FcFontMatch)(std::ptr::null_mut(), pattern.1, &mut result))
    };
    (!found.1.is_null()).then_some(found)
}

/// An installed face that has `c`, if fontconfig finds one.
pub fn covering(c: char) -> Option<FontFile> {
    let fc = library()?;
    let _guard = LOCK.lock().unwrap_or_else(|e| e.into_inner());
    // SAFETY: as in `named`; the character set is destroyed after the
    // pattern that copied it.
    unsafe {
        let chars = (fc.FcCharSetCreate)();
        (fc.FcCharSetAddChar)(chars, c as u32);
        let pattern = Pattern(fc, (fc.FcPatternCreate)());
        (fc.FcPatternAddCharSet)(pattern.1, sys::constants::FC_CHARSET.as_ptr(), chars);
        (fc.FcCharSetDestroy)(chars);
        let found = best_match(fc, &pattern)?;
        // The best match may still lack it: then nothing has it.
        let mut has: *mut sys::FcCharSet = std::ptr::null_mut();
        let r = (fc.FcPatternGetCharSet)(found.1, sys::constants::FC_CHARSET.as_ptr(), 0, &mut has);
        if r != sys::FcResultMatch || has.is_null() || (fc.FcCharSetHasChar)(has, c as u32) == 0 {
            return None;
        }
        file_of(fc, found.1)
    }
}
