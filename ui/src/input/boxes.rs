//! Layout boxes (acme's `coldragwin` and `rowdragcol`): a window's box
//! clicked grows it, dragged moves or resizes it; a column's box dragged
//! moves the column's edge.

use super::{frac_of, BoxDrag, Ctx, Held, Input, InputError, Warp};
use apex_core::{cols, Frac, Proposal};

impl Input {
    /// A layout box let go (acme's `coldragwin` and `rowdragcol`): a click
    /// on a window's grows it (button 1 some, 2 most, 3 the whole column),
    /// a drag moves it within or across columns, or resizes it against
    /// the one above; a column's box dragged moves the column's edge.
    pub(super) fn let_go(&mut self, d: BoxDrag, x: i32, y: i32, cx: &mut Ctx) -> Result<(), InputError> {
        if d.cancelled {
            return Ok(());
        }
        let slop = cx.metrics.gap + 1;
        let still = (x - d.x).abs() < slop && (y - d.y).abs() < slop;
        let layout = &cx.node.state.layout;
        let proposal = match d.held {
            Held::Window(w) => {
                let (ci, _) = layout.find(w).ok_or(InputError::Gone)?;
                let col = &layout.columns[ci];
                let geom = cx.screen.columns.iter().find(|g| g.id == col.id).ok_or(InputError::Gone)?;
                let area = geom.area;
                let line = frac_of(cx.metrics.line, area.height());
                if still {
                    let how = match d.button {
                        1 => cols::Grow::Some,
                        2 => cols::Grow::Most,
                        _ => cols::Grow::Full,
                    };
                    Some(Proposal::Arrange { column: col.id, tops: cols::grow(col, w, how, line) })
                } else {
                    // A flick to the right tosses it to the next column.
                    let width = geom.rect.width();
                    let flick = (y - d.y).abs() < 10 && x > d.x + 30 && geom.rect.contains(x, geom.rect.y0);
                    let x = if flick { d.x + width } else { x };
                    let to = cx.column_at(x).unwrap_or(col.id);
                    let to_area = cx.screen.columns.iter().find(|g| g.id == to).map_or(area, |g| g.area);
                    let at = Frac(frac_of(y - to_area.y0, to_area.height()));
                    match cols::drag(layout, w, to, at, line) {
                        cols::Drag::Nothing => None,
                        cols::Drag::Move { column, y } => Some(Proposal::MoveWindow { window: w, column, y }),
                        cols::Drag::Arrange { column, tops } => Some(Proposal::Arrange { column, tops }),
                    }
                }
            }
            Held::Column(c) if !still => {
                let min = frac_of(cx.metrics.indent() + 80, cx.screen.width);
                let at = Frac(frac_of(x, cx.screen.width));
                cols::drag_column(layout, c, at, min).map(|x| Proposal::MoveColumn { column: c, x })
            }
            Held::Column(_) => None,
        };
        let Some(p) = proposal else { return Ok(()) };
        apex_core::propose::apply(cx.node, &p)?;
        if let Held::Window(w) = d.held {
            self.warp = Some(Warp::LayoutBox(w));
        }
        Ok(())
    }
}
