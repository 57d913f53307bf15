//! The two faces apex-ui draws with: a proportional one, as acme's
//! variable font, and a fixed one for windows whose `Font` setting asks
//! for it. By default the Go fonts embedded in the binary (see
//! `ui/fonts/`), sized so a line is 15 pixels at scale 1 as acme's
//! default font makes it; `-f` and `-F` name others (a family and size,
//! a file, or a plan9port font name mapped to the nearest system face).
//! A character a face lacks is drawn from an installed face that has it,
//! found through fontconfig. Glyphs are rasterized once per face and size
//! by fontdue and kept in a cache; advances are whole pixels, so text
//! positions are exact and a line lays out the same every time.

use crate::error::FontError;
use crate::fontconfig::{self, FontFile};
use std::collections::HashMap;
use std::sync::Arc;

/// Which face.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Face {
    Proportional,
    Fixed,
}

impl Face {
    /// The face a window's `font` setting names: the fixed one for a fixed
    /// font (core's `FONT_FIX`, or any name with `fix`, `mono` or `unicode`
    /// in it, as acme's font names go), the proportional one otherwise.
    pub fn for_setting(font: Option<&str>) -> Face {
        match font {
            Some(f) if ["fix", "mono", "lucm", "unicode", "hack", "courier"].iter().any(|k| f.contains(k)) => {
                Face::Fixed
            }
            _ => Face::Proportional,
        }
    }
}

/// Go Regular and Go Mono, by Bigelow & Holmes (BSD licence,
/// `ui/fonts/Go-LICENSE.txt`).
pub const GO_REGULAR: &[u8] = include_bytes!("../fonts/Go-Regular.ttf");
pub const GO_MONO: &[u8] = include_bytes!("../fonts/Go-Mono.ttf");

/// A line's height at scale 1 with the default faces: acme's.
pub const LINE: u32 = 15;

/// One rasterized glyph: coverage 0..=255, `width`×`height`, placed at
/// `left` from the pen and `top` below the line's top.
#[derive(Clone, Debug, Default)]
pub struct Glyph {
    pub left: i32,
    pub top: i32,
    pub width: usize,
    pub height: usize,
    pub advance: u32,
    pub coverage: Vec<u8>,
}

/// How far an italic glyph leans: a fifth of a pixel right per pixel up.
const SLANT: f32 = 0.2;

impl Glyph {
    /// The glyph sheared [`SLANT`] to the right above `baseline` (from
    /// the line's top) and to the left below it, each row's shift split
    /// between the two pixels it falls on.
    pub fn slanted(&self, baseline: i32) -> Glyph {
        if self.width == 0 || self.height == 0 {
            return self.clone();
        }
        let shift = |gy: usize| (baseline - (self.top + gy as i32)) as f32 * SLANT;
        let lowest = shift(self.height - 1).floor();
        let width = self.width + (shift(0) - lowest).ceil() as usize + 1;
        let mut coverage = vec![0u8; width * self.height];
        for gy in 0..self.height {
            let dx = shift(gy) - lowest;
            let (whole, part) = (dx.floor() as usize, dx.fract());
            for gx in 0..self.width {
                let a = f32::from(self.coverage[gy * self.width + gx]);
                let at = gy * width + gx + whole;
                coverage[at] = (f32::from(coverage[at]) + a * (1.0 - part)).round().min(255.0) as u8;
                coverage[at + 1] = (f32::from(coverage[at + 1]) + a * part).round().min(255.0) as u8;
            }
        }
        Glyph {
            left: self.left + lowest as i32,
            top: self.top,
            width,
            height: self.height,
            advance: self.advance,
            coverage,
        }
    }
}

/// A font's bytes and the face in them, and its size: what `-f` and
/// `-F` resolve to.
#[derive(Clone)]
pub struct Source {
    bytes: Arc<[u8]>,
    index: u32,
    /// Pixels at scale 1; `None` sizes the line to [`LINE`].
    px: Option<f32>,
}

impl Source {
    fn embedded(bytes: &'static [u8]) -> Source {
        Source { bytes: Arc::from(bytes), index: 0, px: None }
    }

    fn file(f: &FontFile, px: Option<f32>) -> Result<Source, FontError> {
        let bytes = std::fs::read(&f.path).map_err(|source| FontError::Read { path: f.path.clone(), source })?;
        Ok(Source { bytes: Arc::from(bytes), index: f.index, px })
    }

    fn parse(&self, px: f32) -> Option<fontdue::Font> {
        let settings = fontdue::FontSettings { scale: px, collection_index: self.index, ..Default::default() };
        fontdue::Font::from_bytes(&*self.bytes, settings).ok()
    }
}

/// The faces a UI draws with, as chosen at its start.
#[derive(Clone)]
pub struct Choice {
    pub proportional: Source,
    pub fixed: Source,
}

impl Default for Choice {
    fn default() -> Choice {
        Choice { proportional: Source::embedded(GO_REGULAR), fixed: Source::embedded(GO_MONO) }
    }
}

/// Points to pixels at acme's 96 dots an inch... of a display at scale 1.
fn points(pt: f32) -> f32 {
    pt * 96.0 / 72.0
}

/// What a name of a font means: a file, a family with a size, or one of
/// plan9port's names. Returns the source and, for a name mapped to
/// something else, a note for standard error.
pub fn resolve(name: &str, fixed: bool) -> Result<(Source, Option<String>), FontError> {
    let name = name.trim();
    // A font file, as it is.
    let path = std::path::Path::new(name);
    if path.is_file() && !name.ends_with(".font") {
        let f = FontFile { path: path.to_path_buf(), index: 0 };
        let src = Source::file(&f, None)?;
        src.parse(16.0).ok_or_else(|| FontError::NotAFont(name.to_string()))?;
        return Ok((src, None));
    }
    // plan9port: fontsrv's /mnt/font/NAME/SIZE[a]/font, or a bitmap font
    // under /lib/font/bit (its size in its name: euro.8.font).
    let parts: Vec<&str> = name.split('/').filter(|p| !p.is_empty()).collect();
    let plan9 = match parts.as_slice() {
        ["mnt", "font", family, size, "font"] => {
            let px = size.trim_end_matches('a').parse::<f32>().ok();
            Some((family.to_string(), px))
        }
        [.., dir, file] if name.contains("/lib/font/bit/") || file.ends_with(".font") => {
            let pt = file.split('.').filter_map(|s| s.parse::<f32>().ok()).next_back();
            let family = match *dir {
                d if d.starts_with("lucm") || d.starts_with("pelm") || d.contains("fixed") || d.contains("mono") => {
                    "monospace"
                }
                "lucida" | "lucsans" | "luc" => "sans",
                d if d.contains("times") => "serif",
                _ if fixed => "monospace",
                _ => "sans",
            };
            Some((family.to_string(), pt.map(points)))
        }
        _ => None,
    };
    if let Some((family, px)) = plan9 {
        let found = fontconfig::named(&family).or_else(|| fontconfig::nearest(&family, fixed));
        let (src, used) = match found {
            Some(f) => (Source::file(&f, px)?, f.path.display().to_string()),
            None => {
                let fallback = if fixed { Choice::default().fixed } else { Choice::default().proportional };
                (Source { px, ..fallback }, "the embedded Go font".to_string())
            }
        };
        return Ok((src, Some(format!("{name} is plan9port's; drawing with the nearest here, {used}"))));
    }
    // A family (and style) with a size in points at the end: `Go Regular
    // 11`, `DejaVu Sans Mono 10`.
    let (family, pt) = match name.rsplit_once(' ') {
        Some((f, s)) if s.parse::<f32>().is_ok_and(|p| p > 0.0 && p < 1000.0) => (f, s.parse().ok()),
        _ => (name, None),
    };
    let px = pt.map(points);
    if let Some(f) = fontconfig::named(family) {
        return Ok((Source::file(&f, px)?, None));
    }
    // The embedded faces answer to their names without fontconfig.
    match family.to_lowercase().as_str() {
        "go" | "go regular" => return Ok((Source { px, ..Source::embedded(GO_REGULAR) }, None)),
        "go mono" => return Ok((Source { px, ..Source::embedded(GO_MONO) }, None)),
        _ => {}
    }
    match fontconfig::nearest(family, fixed) {
        Some(f) => {
            let note = format!("no font is named {family:?}; drawing with the nearest, {}", f.path.display());
            Ok((Source::file(&f, px)?, Some(note)))
        }
        None => Err(FontError::NoSuchFont(family.to_string())),
    }
}

/// A face at one pixel size, with its glyph cache and the faces that
/// stand in for characters it lacks.
pub struct Sized {
    font: fontdue::Font,
    px: f32,
    /// Line height and the baseline's distance from a line's top.
    pub height: u32,
    pub ascent: u32,
    glyphs: HashMap<char, Glyph>,
    /// Glyphs slanted for italic ([`Glyph::slanted`]).
    slanted: HashMap<char, Glyph>,
    /// Faces found for characters this one lacks, and which has each.
    fallbacks: Vec<fontdue::Font>,
    fallback_files: HashMap<std::path::PathBuf, usize>,
}

impl Sized {
    fn new(src: &Source, scale: f32) -> Sized {
        // One parse: fontdue scales metrics and glyphs to any size asked.
        let font = src.parse(40.0).unwrap_or_else(|| Source::embedded(GO_REGULAR).parse(40.0).expect("Go parses"));
        let lm = font.horizontal_line_metrics(100.0).expect("a horizontal face");
        // The line's height per pixel of size.
        let per_px = (lm.ascent - lm.descent + lm.line_gap) / 100.0;
        let px = match src.px {
            Some(px) => px * scale,
            None => LINE as f32 * scale / per_px,
        };
        let lm = font.horizontal_line_metrics(px).expect("a horizontal face");
        let height = match src.px {
            Some(_) => (lm.ascent - lm.descent + lm.line_gap).ceil().max(1.0) as u32,
            None => (LINE as f32 * scale).round().max(1.0) as u32,
        };
        let ascent = lm.ascent.round().clamp(0.0, height as f32) as u32;
        Sized {
            font,
            px,
            height,
            ascent,
            glyphs: HashMap::new(),
            slanted: HashMap::new(),
            fallbacks: Vec::new(),
            fallback_files: HashMap::new(),
        }
    }

    /// The face that draws `c`: this one, or one found for it.
    fn face_for(&mut self, c: char) -> Option<usize> {
        if c.is_control() || c.is_whitespace() || self.font.lookup_glyph_index(c) != 0 {
            return None;
        }
        if let Some(i) = self.fallbacks.iter().position(|f| f.lookup_glyph_index(c) != 0) {
            return Some(i);
        }
        let file = fontconfig::covering(c)?;
        if let Some(i) = self.fallback_files.get(&file.path) {
            return Some(*i);
        }
        let font = Source::file(&file, None).ok()?.parse(self.px)?;
        self.fallbacks.push(font);
        let i = self.fallbacks.len() - 1;
        self.fallback_files.insert(file.path, i);
        (self.fallbacks[i].lookup_glyph_index(c) != 0).then_some(i)
    }

    /// The glyph for `c` (rasterized on first use).
    pub fn glyph(&mut self, c: char) -> &Glyph {
        if !self.glyphs.contains_key(&c) {
            let by = self.face_for(c);
            let font = by.map_or(&self.font, |i| &self.fallbacks[i]);
            let (m, coverage) = font.rasterize(c, self.px);
            let glyph = Glyph {
                left: m.xmin,
                top: self.ascent as i32 - (m.ymin + m.height as i32),
                width: m.width,
                height: m.height,
                advance: m.advance_width.round().max(0.0) as u32,
                coverage,
            };
            self.glyphs.insert(c, glyph);
        }
        &self.glyphs[&c]
    }

    /// The glyph for `c` slanted as italic: a face has no italic of its
    /// own here, so the upright one is sheared about the baseline.
    pub fn italic(&mut self, c: char) -> &Glyph {
        if !self.slanted.contains_key(&c) {
            let baseline = self.ascent as i32;
            let g = self.glyph(c).slanted(baseline);
            self.slanted.insert(c, g);
        }
        &self.slanted[&c]
    }

    /// Whether `c` is drawn from another face, found because this one
    /// lacks it.
    pub fn borrowed(&mut self, c: char) -> bool {
        self.face_for(c).is_some()
    }

    /// How far the pen moves for `c`.
    pub fn advance(&mut self, c: char) -> u32 {
        self.glyph(c).advance
    }
}

/// Both faces at the size for a scale factor.
pub struct Fonts {
    pub proportional: Sized,
    pub fixed: Sized,
    pub scale: f64,
}

impl Fonts {
    /// The default faces for a window of HiDPI `scale` (winit's scale
    /// factor).
    pub fn new(scale: f64) -> Fonts {
        Fonts::with(&Choice::default(), scale)
    }

    /// The faces `choice` names, at `scale`.
    pub fn with(choice: &Choice, scale: f64) -> Fonts {
        let s = scale.clamp(0.5, 8.0) as f32;
        Fonts { proportional: Sized::new(&choice.proportional, s), fixed: Sized::new(&choice.fixed, s), scale }
    }

    pub fn face(&mut self, face: Face) -> &mut Sized {
        match face {
            Face::Proportional => &mut self.proportional,
            Face::Fixed => &mut self.fixed,
        }
    }

    /// A line's height: the taller face's, so every window's lines align
    /// with the layout whatever its font.
    pub fn line_height(&self) -> u32 {
        self.proportional.height.max(self.fixed.height)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn glyphs_have_ink_and_the_fixed_face_is_fixed() {
        let mut f = Fonts::new(1.0);
        let g = f.proportional.glyph('W').clone();
        assert!(g.width > 0 && g.coverage.iter().any(|c| *c > 200), "a W has ink");
        assert!(f.proportional.advance('i') < f.proportional.advance('W'));
        assert_eq!(f.fixed.advance('i'), f.fixed.advance('W'));
        assert!(f.proportional.glyph(' ').coverage.iter().all(|c| *c == 0));
        let big = Fonts::new(2.0);
        assert!(big.line_height() >= 2 * f.line_height() - 2, "HiDPI doubles the text");
        assert_eq!(Face::for_setting(Some(apex_core::dump::FONT_FIX)), Face::Fixed);
        assert_eq!(Face::for_setting(None), Face::Proportional);
    }

    #[test]
    fn an_italic_glyph_leans_right_above_the_baseline() {
        let mut f = Fonts::new(1.0);
        let face = f.face(Face::Fixed);
        let upright = face.glyph('l').clone();
        let italic = face.italic('l').clone();
        // The middle of the ink in a row, in pixels from the pen.
        let middle = |g: &Glyph, gy: usize| {
            let row = &g.coverage[gy * g.width..(gy + 1) * g.width];
            let ink: f32 = row.iter().map(|a| f32::from(*a)).sum();
            row.iter().enumerate().map(|(x, a)| (g.left + x as i32) as f32 * f32::from(*a)).sum::<f32>() / ink
        };
        let inked = |gy: usize| upright.coverage[gy * upright.width..(gy + 1) * upright.width].iter().any(|a| *a > 128);
        let top = (0..upright.height).find(|gy| inked(*gy)).expect("ink");
        let bottom = (0..upright.height).rev().find(|gy| inked(*gy)).expect("ink");
        let lean = |g: &Glyph| middle(g, top) - middle(g, bottom);
        let leaned = lean(&italic) - lean(&upright);
        assert!(leaned > SLANT * (bottom - top) as f32 * 0.8, "it leans {leaned} over {} rows", bottom - top);
        let ink = |g: &Glyph| g.coverage.iter().map(|a| u32::from(*a)).sum::<u32>();
        assert!(ink(&italic).abs_diff(ink(&upright)) * 20 < ink(&upright), "the same ink, moved");
        assert!(italic.top == upright.top && italic.height == upright.height);
    }

    #[test]
    fn the_default_line_is_acme_s_fifteen_pixels() {
        assert_eq!(Fonts::new(1.0).line_height(), LINE);
        assert_eq!(Fonts::new(2.0).line_height(), 2 * LINE);
    }
}
