//! `Canvas`: a pixel buffer of 0RGB words (what softbuffer shows), and
//! the few ways anything is drawn into it: fills, borders and glyphs
//! blended over what is there, each clipped to its rectangle.

use crate::font::Glyph;
use crate::palette::{self, Pixel};
use crate::rect::Rect;

/// A pixel buffer.
pub struct Canvas {
    pub width: i32,
    pub height: i32,
    pub pixels: Vec<Pixel>,
}

impl Canvas {
    pub fn new(width: i32, height: i32) -> Canvas {
        let (width, height) = (width.max(0), height.max(0));
        Canvas { width, height, pixels: vec![palette::RULE; (width * height) as usize] }
    }

    pub fn bounds(&self) -> Rect {
        Rect::new(0, 0, self.width, self.height)
    }

    /// The pixel at (`x`, `y`).
    pub fn at(&self, x: i32, y: i32) -> Pixel {
        assert!(self.bounds().contains(x, y), "({x}, {y}) is outside {}x{}", self.width, self.height);
        self.pixels[(y * self.width + x) as usize]
    }

    pub fn fill(&mut self, r: Rect, color: Pixel) {
        let r = r.clip(&self.bounds());
        if r.is_empty() {
            return;
        }
        for y in r.y0..r.y1 {
            let row = (y * self.width) as usize;
            self.pixels[row + r.x0 as usize..row + r.x1 as usize].fill(color);
        }
    }

    /// A rectangle's outline, `width` pixels wide, inside it.
    pub fn border(&mut self, r: Rect, width: i32, color: Pixel) {
        self.fill(Rect::new(r.x0, r.y0, r.x1, r.y0 + width), color);
        self.fill(Rect::new(r.x0, r.y1 - width, r.x1, r.y1), color);
        self.fill(Rect::new(r.x0, r.y0, r.x0 + width, r.y1), color);
        self.fill(Rect::new(r.x1 - width, r.y0, r.x1, r.y1), color);
    }

    /// A glyph with its pen at (`x`, `y` = the line's top), blended over
    /// what is there, inside `clip` only.
    pub fn glyph(&mut self, g: &Glyph, x: i32, y: i32, color: Pixel, clip: Rect) {
        let clip = clip.clip(&self.bounds());
        for gy in 0..g.height as i32 {
            let py = y + g.top + gy;
            if py < clip.y0 || py >= clip.y1 {
                continue;
            }
            for gx in 0..g.width as i32 {
                let px = x + g.left + gx;
                if px < clip.x0 || px >= clip.x1 {
                    continue;
                }
                let a = u32::from(g.coverage[(gy as usize) * g.width + gx as usize]);
                if a == 0 {
                    continue;
                }
                let i = (py * self.width + px) as usize;
                self.pixels[i] = blend(self.pixels[i], color, a);
            }
        }
    }
}

fn blend(under: Pixel, over: Pixel, a: u32) -> Pixel {
    let mix = |shift: u32| {
        let (u, o) = ((under >> shift) & 0xff, (over >> shift) & 0xff);
        ((o * a + u * (255 - a)) / 255) << shift
    };
    mix(16) | mix(8) | mix(0)
}
