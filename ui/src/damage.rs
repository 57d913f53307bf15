//! Redrawing only what changed. Every part of the screen (the row tag, a
//! column's tag, a window's tag, a window's body) has a signature: the
//! things its pixels depend on — its rectangle, its buffer's id and
//! version (every splice bumps it), the view's selection and origin, the
//! face and tab width, the dirty box, a terminal's last update. A part whose signature is what it
//! was last frame is left alone; a changed part is drawn again and its
//! rectangle reported, so the shell copies and presents only those. When
//! the arrangement itself changes (a resize, a window moved, a tag that
//! grew a line), the whole frame is drawn.

use crate::font::Fonts;
use crate::geom::{Metrics, Screen};
use crate::rect::Rect;
use crate::render::{self, Canvas};
use apex_core::show::Shown;
use apex_core::{BufferId, ColumnId, Seq, Shard, State, TermId, View, ViewId, WindowId};
use std::collections::HashMap;

/// A part of the screen drawn on its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Part {
    RowTag,
    ColumnTag(ColumnId),
    WindowTag(WindowId),
    WindowBody(WindowId),
}

/// What a text's pixels depend on.
#[derive(Clone, Debug, PartialEq, Eq)]
struct TextSig {
    buffer: BufferId,
    version: u64,
    len: u64,
    view: View,
}

/// What a part's pixels depend on besides its rectangle (which the
/// screen, compared whole, already covers).
#[derive(Clone, Debug, PartialEq, Eq)]
enum Sig {
    Text(Option<TextSig>),
    WindowTag {
        text: Option<TextSig>,
        dirty: bool,
    },
    /// A body, or the terminal shown in its place as of its last update.
    WindowBody {
        text: Option<TextSig>,
        font: Option<String>,
        tab: Option<u32>,
        term: Option<(TermId, Seq)>,
        view: Option<crate::termview::TermView>,
    },
}

fn text_sig(state: &State, buffer: BufferId, view: ViewId) -> Option<TextSig> {
    let b = state.buffer(buffer).ok()?;
    Some(TextSig { buffer, version: b.version, len: b.len(), view: b.views.get(&view).copied().unwrap_or_default() })
}

/// The painter: the canvas's last frame and what it showed.
#[derive(Default)]
pub struct Painter {
    screen: Option<Screen>,
    scale: Option<u64>,
    sigs: HashMap<Part, Sig>,
    /// What each window's body frame showed when last drawn.
    shown: HashMap<WindowId, Shown>,
    /// How this UI looks at each terminal shown (scrolled, selected):
    /// set by the UI before it paints.
    pub term_views: crate::termview::TermViews,
}

impl Painter {
    /// Forgets the last frame: the next paint draws everything.
    pub fn invalidate(&mut self) {
        self.screen = None;
        self.sigs.clear();
    }

    /// What each window's body frame shows, as last drawn.
    pub fn shown(&self) -> &HashMap<WindowId, Shown> {
        &self.shown
    }

    /// Brings `canvas` up to date with `state` on `screen`, drawing only
    /// the parts that changed; returns the rectangles drawn (the whole
    /// canvas when the arrangement changed, nothing when nothing did).
    pub fn paint(
        &mut self,
        canvas: &mut Canvas,
        state: &State,
        screen: &Screen,
        fonts: &mut Fonts,
        m: &Metrics,
    ) -> Vec<Rect> {
        let scale = fonts.scale.to_bits();
        let sigs = signatures(state, screen, &self.term_views);
        let same_arrangement = self.screen.as_ref() == Some(screen)
            && self.scale == Some(scale)
            && canvas.width == screen.width
            && canvas.height == screen.height;
        if !same_arrangement {
            if canvas.width != screen.width || canvas.height != screen.height {
                *canvas = Canvas::new(screen.width, screen.height);
            }
            self.shown = render::draw(canvas, state, screen, fonts, m, &self.term_views).into_iter().collect();
            self.screen = Some(screen.clone());
            self.scale = Some(scale);
            self.sigs = sigs;
            return vec![canvas.bounds()];
        }
        let mut damage = Vec::new();
        for (part, sig) in sigs {
            if self.sigs.get(&part) == Some(&sig) {
                continue;
            }
            damage.push(self.draw_part(canvas, state, screen, fonts, m, part));
            self.sigs.insert(part, sig);
        }
        damage.retain(|r| !r.is_empty());
        damage
    }

    /// Draws one part; returns where.
    fn draw_part(
        &mut self,
        canvas: &mut Canvas,
        state: &State,
        screen: &Screen,
        fonts: &mut Fonts,
        m: &Metrics,
        part: Part,
    ) -> Rect {
        match part {
            Part::RowTag => {
                render::row_tag(canvas, state, screen, fonts);
                screen.row_tag
            }
            Part::ColumnTag(c) => {
                let Some(col) = screen.columns.iter().find(|x| x.id == c) else { return Rect::default() };
                render::column(canvas, state, col, fonts);
                match col.windows.is_empty() {
                    true => Rect::new(col.rect.x0, col.rect.y0, col.rect.x1, col.rect.y1),
                    false => col.tag_line,
                }
            }
            Part::WindowTag(w) => {
                let Some(wg) = screen.window(w) else { return Rect::default() };
                render::window_tag(canvas, state, wg, fonts, m);
                wg.tag_line
            }
            Part::WindowBody(w) => {
                let Some(wg) = screen.window(w) else { return Rect::default() };
                if let Some(s) = render::window_body(canvas, state, wg, fonts, &self.term_views) {
                    self.shown.insert(w, s);
                }
                render::body_area(wg)
            }
        }
    }
}

/// The signature of every part on `screen`.
fn signatures(state: &State, screen: &Screen, views: &crate::termview::TermViews) -> HashMap<Part, Sig> {
    let mut sigs = HashMap::new();
    let row = state.layout.row_tag.and_then(|b| text_sig(state, b, ViewId::TopRow));
    sigs.insert(Part::RowTag, Sig::Text(row));
    for col in &screen.columns {
        let tag = state.layout.columns.iter().find(|c| c.id == col.id).map(|c| c.tag);
        let text = tag.and_then(|t| text_sig(state, t, ViewId::ColumnTag(col.id)));
        sigs.insert(Part::ColumnTag(col.id), Sig::Text(text));
        for wg in &col.windows {
            let w = state.window(wg.id).ok();
            let tag = w.and_then(|w| text_sig(state, w.tag, ViewId::WindowTag(wg.id)));
            let dirty = w.and_then(|w| state.buffer(w.body).ok()).is_some_and(|b| b.dirty);
            sigs.insert(Part::WindowTag(wg.id), Sig::WindowTag { text: tag, dirty });
            let body = w.and_then(|w| text_sig(state, w.body, ViewId::WindowBody(wg.id)));
            let (font, tab) = w.map_or((None, None), |w| (w.flags.font.clone(), w.flags.tab));
            let term = w.and_then(|w| w.term).map(|t| (t, state.applied.get(&Shard::Term(t)).copied().unwrap_or(0)));
            let view = views.get(&wg.id).copied();
            sigs.insert(Part::WindowBody(wg.id), Sig::WindowBody { text: body, font, tab, term, view });
        }
    }
    sigs
}
