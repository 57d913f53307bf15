//! The pointer's two shapes, as acme shows them: its arrow everywhere,
//! and a box while a window or column is dragged by its layout box
//! (acme's `boxcursor`). Drawn here as pictures, so a display without a
//! cursor theme (a bare X server) shows them too rather than its cross.

/// A cursor picture: `#` black, `-` white, anything else clear; the hot
/// spot where the pointer is.
pub struct Shape {
    pub rows: &'static [&'static str],
    pub hot: (u16, u16),
}

/// The arrow, its tip the hot spot.
pub const ARROW: Shape = Shape {
    rows: &[
        "-               ",
        "--              ",
        "-#-             ",
        "-##-            ",
        "-###-           ",
        "-####-          ",
        "-#####-         ",
        "-######-        ",
        "-#######-       ",
        "-########-      ",
        "-#####----      ",
        "-##-##-         ",
        "-#- -##-        ",
        "--  -##-        ",
        "     -##-       ",
        "      --        ",
    ],
    hot: (0, 0),
};

/// The box shown while a layout box is held: a square frame, its centre
/// the hot spot.
pub const BOX: Shape = Shape {
    rows: &[
        "----------------",
        "-##############-",
        "-##############-",
        "-##----------##-",
        "-##-        -##-",
        "-##-        -##-",
        "-##-        -##-",
        "-##-        -##-",
        "-##-        -##-",
        "-##-        -##-",
        "-##-        -##-",
        "-##-        -##-",
        "-##----------##-",
        "-##############-",
        "-##############-",
        "----------------",
    ],
    hot: (7, 7),
};

impl Shape {
    pub fn width(&self) -> u16 {
        self.rows.first().map_or(0, |r| r.len() as u16)
    }

    pub fn height(&self) -> u16 {
        self.rows.len() as u16
    }

    /// The picture as RGBA bytes, row by row.
    pub fn rgba(&self) -> Vec<u8> {
        self.rows
            .iter()
            .flat_map(|row| row.bytes())
            .flat_map(|b| match b {
                b'#' => [0, 0, 0, 255],
                b'-' => [255, 255, 255, 255],
                _ => [0, 0, 0, 0],
            })
            .collect()
    }

    /// Whether pixel (`x`, `y`) is drawn black, white, or is clear:
    /// `Some(true)` for black.
    pub fn ink(&self, x: usize, y: usize) -> Option<bool> {
        match self.rows.get(y).and_then(|r| r.as_bytes().get(x)) {
            Some(b'#') => Some(true),
            Some(b'-') => Some(false),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes_are_square_pictures_with_the_hot_spot_inside() {
        for s in [&ARROW, &BOX] {
            assert!(s.rows.iter().all(|r| r.len() == s.rows[0].len()));
            assert_eq!(s.rgba().len(), usize::from(s.width()) * usize::from(s.height()) * 4);
            assert!(s.hot.0 < s.width() && s.hot.1 < s.height());
        }
    }
}
