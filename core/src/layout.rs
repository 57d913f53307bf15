//! `Layout`: the top row, its columns, where each window sits, the focus,
//! and acme numbers.
//!
//! Positions are fractions of the row's width (columns) or the column's
//! height (windows), in millionths, so the layout is exact integers and
//! every replica agrees whatever its screen. Windows are kept in each
//! column sorted by their top edge; columns by their left edge.
//!
//! Acme numbers are assigned here, in creation order, when a window is first
//! placed (`WindowAdd`), and never reused: `next_number` only grows.

use crate::error::{Reject, Result};
use crate::id::{AcmeNumber, AttachmentId, BufferId, ColumnId, WindowId};
use crate::op::LayoutOp;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub use crate::frac::Frac;

/// A window's place in a column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placed {
    pub window: WindowId,
    /// Top edge, as a fraction of the column's height.
    pub y: Frac,
}

/// One column.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Column {
    pub id: ColumnId,
    /// The column tag's buffer.
    pub tag: BufferId,
    /// Left edge, as a fraction of the row's width.
    pub x: Frac,
    /// Windows top to bottom.
    pub windows: Vec<Placed>,
}

/// The layout shard's state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layout {
    /// The top row's tag buffer, once set.
    pub row_tag: Option<BufferId>,
    /// Columns left to right.
    pub columns: Vec<Column>,
    /// Every window ever placed and still present, with its acme number.
    pub numbers: BTreeMap<WindowId, AcmeNumber>,
    /// The number the next new window gets; never decreases.
    pub next_number: u32,
    pub focus: Option<WindowId>,
    /// Highest column-id counter each attachment has used.
    pub column_marks: BTreeMap<AttachmentId, u64>,
    /// The snarf buffer, shared by the session: what Snarf and Cut took
    /// and Paste puts back. A UI mirrors it to the system clipboard.
    pub snarf: String,
}

impl Default for Layout {
    fn default() -> Layout {
        Layout {
            row_tag: None,
            columns: Vec::new(),
            numbers: BTreeMap::new(),
            next_number: 1,
            focus: None,
            column_marks: BTreeMap::new(),
            snarf: String::new(),
        }
    }
}

impl Layout {
    /// The column a window is in, and its index there.
    pub fn find(&self, window: WindowId) -> Option<(usize, usize)> {
        self.columns
            .iter()
            .enumerate()
            .find_map(|(ci, c)| c.windows.iter().position(|p| p.window == window).map(|wi| (ci, wi)))
    }

    /// The window with acme number `n`.
    pub fn window_numbered(&self, n: AcmeNumber) -> Option<WindowId> {
        self.numbers.iter().find(|(_, m)| **m == n).map(|(w, _)| *w)
    }

    fn column_index(&self, column: ColumnId) -> Result<usize> {
        self.columns.iter().position(|c| c.id == column).ok_or(Reject::NoColumn { column })
    }

    /// Checks `op` without changing anything.
    pub fn check(&self, op: &LayoutOp) -> Result<()> {
        match op {
            LayoutOp::RowTag { .. } => Ok(()),
            LayoutOp::ColumnAdd { column, x, .. } => {
                x.check()?;
                match self.column_index(*column) {
                    Ok(_) => Err(Reject::ColumnExists { column: *column }),
                    Err(_) => Ok(()),
                }
            }
            LayoutOp::ColumnDel { column } => {
                let i = self.column_index(*column)?;
                match self.columns[i].windows.is_empty() {
                    true => Ok(()),
                    false => Err(Reject::ColumnNotEmpty { column: *column }),
                }
            }
            LayoutOp::ColumnMove { column, x } => {
                x.check()?;
                self.column_index(*column).map(|_| ())
            }
            LayoutOp::WindowAdd { window, column, y } => {
                y.check()?;
                self.column_index(*column)?;
                match self.numbers.contains_key(window) {
                    true => Err(Reject::WindowPlaced { window: *window }),
                    false => Ok(()),
                }
            }
            LayoutOp::WindowMove { window, column, y } => {
                y.check()?;
                self.column_index(*column)?;
                self.find(*window).map(|_| ()).ok_or(Reject::NoWindow { window: *window })
            }
            LayoutOp::WindowDel { window } => {
                self.find(*window).map(|_| ()).ok_or(Reject::NoWindow { window: *window })
            }
            LayoutOp::Focus { window: Some(w) } => self.find(*w).map(|_| ()).ok_or(Reject::NoWindow { window: *w }),
            LayoutOp::SnarfMore { at, .. } if *at != self.snarf.len() as u64 => {
                Err(Reject::SnarfMoved { at: *at, len: self.snarf.len() as u64 })
            }
            LayoutOp::Focus { window: None } | LayoutOp::Snarf { .. } | LayoutOp::SnarfMore { .. } => Ok(()),
        }
    }

    /// Applies `op`; on error the layout is unchanged.
    pub fn apply(&mut self, op: &LayoutOp) -> Result<()> {
        self.check(op)?;
        match op {
            LayoutOp::RowTag { tag } => self.row_tag = Some(*tag),
            LayoutOp::ColumnAdd { column, tag, x } => {
                let at = self.columns.partition_point(|c| c.x <= *x);
                self.columns.insert(at, Column { id: *column, tag: *tag, x: *x, windows: Vec::new() });
                crate::id::mark(&mut self.column_marks, column.issuer(), column.counter());
            }
            LayoutOp::ColumnDel { column } => {
                let i = self.column_index(*column)?;
                self.columns.remove(i);
            }
            LayoutOp::ColumnMove { column, x } => {
                let i = self.column_index(*column)?;
                let mut c = self.columns.remove(i);
                c.x = *x;
                let at = self.columns.partition_point(|o| o.x <= *x);
                self.columns.insert(at, c);
            }
            LayoutOp::WindowAdd { window, column, y } => {
                self.numbers.insert(*window, AcmeNumber(self.next_number));
                self.next_number = self.next_number.saturating_add(1);
                self.place(*window, *column, *y)?;
            }
            LayoutOp::WindowMove { window, column, y } => {
                self.unplace(*window);
                self.place(*window, *column, *y)?;
            }
            LayoutOp::WindowDel { window } => {
                self.unplace(*window);
                self.numbers.remove(window);
                if self.focus == Some(*window) {
                    self.focus = None;
                }
            }
            LayoutOp::Focus { window } => self.focus = *window,
            LayoutOp::Snarf { text } => self.snarf.clone_from(text),
            LayoutOp::SnarfMore { text, .. } => self.snarf.push_str(text),
        }
        Ok(())
    }

    fn place(&mut self, window: WindowId, column: ColumnId, y: Frac) -> Result<()> {
        let i = self.column_index(column)?;
        let ws = &mut self.columns[i].windows;
        let at = ws.partition_point(|p| p.y <= y);
        ws.insert(at, Placed { window, y });
        Ok(())
    }

    fn unplace(&mut self, window: WindowId) {
        if let Some((ci, wi)) = self.find(window) {
            self.columns[ci].windows.remove(wi);
        }
    }
}
