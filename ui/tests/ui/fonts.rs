//! The faces: acme's 15-pixel lines by default, `-f`/`-F` names found
//! through fontconfig (a family and size, a file, plan9port's names
//! mapped to the nearest face with a note), and characters Go lacks
//! drawn from an installed face that has them. The fonts are the ones
//! `scripts/test` installs (DejaVu, WenQuanYi Micro Hei).

use apex_ui::font::{resolve, Choice, Fonts, LINE};

/// Says a test cannot run; fails under CI.
fn need_fontconfig() -> bool {
    let here = apex_ui::fontconfig::named("DejaVu Sans Mono").is_some();
    if !here {
        assert!(std::env::var_os("CI").is_none(), "CI must run every test: no fontconfig or no DejaVu Sans Mono");
        eprintln!("SKIPPED: no fontconfig or no DejaVu Sans Mono (scripts/test installs fonts-dejavu-core)");
    }
    here
}

#[test]
fn the_default_faces_are_go_with_acme_s_line() {
    let mut f = Fonts::new(1.0);
    assert_eq!(f.line_height(), LINE);
    assert!(f.proportional.advance('i') < f.proportional.advance('m'));
    assert_eq!(f.fixed.advance('i'), f.fixed.advance('m'));
}

#[test]
fn fonts_are_named_by_family_and_size_by_file_or_by_plan9port_s_names() {
    if !need_fontconfig() {
        return;
    }
    // A family and a size in points.
    let (mono, note) = resolve("DejaVu Sans Mono 10", true).unwrap();
    assert_eq!(note, None);
    let big = resolve("DejaVu Sans Mono 20", true).unwrap().0;
    let f = Fonts::with(&Choice { fixed: mono.clone(), ..Choice::default() }, 1.0);
    let g = Fonts::with(&Choice { fixed: big, ..Choice::default() }, 1.0);
    assert!(g.fixed.height > f.fixed.height, "20 points are taller than 10");
    // A file.
    let path = apex_ui::fontconfig::named("DejaVu Sans Mono").unwrap().path;
    assert!(resolve(&path.display().to_string(), true).is_ok());
    // plan9port's names: mapped, with a note, never refused.
    let (_, note) = resolve("/mnt/font/GoRegular/13a/font", false).unwrap();
    assert!(note.unwrap().contains("plan9port"));
    let (_, note) = resolve("/lib/font/bit/lucsans/euro.8.font", false).unwrap();
    assert!(note.is_some());
    // A family not installed: the nearest, fixed-width for -F, with a note.
    let (src, note) = resolve("Nonexistent Mono 9", true).unwrap();
    assert!(note.unwrap().contains("nearest"));
    let mut f = Fonts::with(&Choice { fixed: src, ..Choice::default() }, 1.0);
    assert_eq!(f.fixed.advance('i'), f.fixed.advance('m'), "a fixed-width face stands in");
    // The embedded face by its name.
    assert_eq!(resolve("Go Regular 11", false).unwrap().1, None);
    // A file that is no font is refused, saying so.
    let e = resolve("/etc/hostname", false).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(e.contains("not a font file"), "{e}");
}

#[test]
fn characters_go_lacks_come_from_a_face_that_has_them() {
    if !need_fontconfig() {
        return;
    }
    let mut f = Fonts::new(1.0);
    assert!(!f.proportional.borrowed('a'), "Go has its own letters");
    for c in ['✓', '漢'] {
        assert!(f.proportional.borrowed(c), "{c} comes from another face");
        let g = f.proportional.glyph(c).clone();
        assert!(g.coverage.iter().any(|v| *v > 128), "{c} has ink");
    }
}
