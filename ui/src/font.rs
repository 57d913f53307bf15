//! The two faces apex-ui draws with, embedded in the binary (see
//! `ui/fonts/`): a proportional one, as acme's variable font, and a fixed
//! one for windows whose `Font` setting asks for it. Glyphs are rasterized
//! once per face and size by fontdue and kept in a cache; advances are
//! whole pixels, so text positions are exact and a line lays out the same
//! every time.

use std::collections::HashMap;

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

/// A face at one pixel size, with its glyph cache.
pub struct Sized {
    font: fontdue::Font,
    px: f32,
    /// Line height and the baseline's distance from a line's top.
    pub height: u32,
    pub ascent: u32,
    glyphs: HashMap<char, Glyph>,
}

impl Sized {
    fn new(bytes: &'static [u8], px: f32) -> Sized {
        let font = fontdue::Font::from_bytes(bytes, fontdue::FontSettings { scale: px, ..Default::default() })
            .expect("the embedded fonts parse");
        let lm = font.horizontal_line_metrics(px).expect("the embedded fonts are horizontal");
        let ascent = lm.ascent.ceil() as u32;
        let height = (lm.ascent - lm.descent + lm.line_gap).ceil().max(1.0) as u32;
        Sized { font, px, height, ascent, glyphs: HashMap::new() }
    }

    /// The glyph for `c` (rasterized on first use).
    pub fn glyph(&mut self, c: char) -> &Glyph {
        let (font, px, ascent) = (&self.font, self.px, self.ascent as i32);
        self.glyphs.entry(c).or_insert_with(|| {
            let (m, coverage) = font.rasterize(c, px);
            Glyph {
                left: m.xmin,
                top: ascent - (m.ymin + m.height as i32),
                width: m.width,
                height: m.height,
                advance: m.advance_width.round().max(0.0) as u32,
                coverage,
            }
        })
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

/// The text size at scale 1, in pixels.
pub const PX: f32 = 15.0;

impl Fonts {
    /// The faces for a window of HiDPI `scale` (winit's scale factor).
    pub fn new(scale: f64) -> Fonts {
        let px = PX * scale.clamp(0.5, 8.0) as f32;
        Fonts {
            proportional: Sized::new(epaint_default_fonts::UBUNTU_LIGHT, px),
            fixed: Sized::new(epaint_default_fonts::HACK_REGULAR, px),
            scale,
        }
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
}
