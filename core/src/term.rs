//! `Term`: the state of one term shard, the grid a daemon-side terminal
//! emulator produced.
//!
//! The pty and the VT emulator run only where the daemon runs; what
//! reaches the shard is already a grid diff ([`TermUpdate`]: rows that
//! scrolled off, rows redrawn, the cursor, modes, title, bells, size,
//! exit), so every replica's apply stays small, pure and independent of
//! the emulator.

use crate::error::{Reject, Result};
use crate::grid::{Cursor, Row};
use crate::op::TermOp;
use crate::packed::RowChanges;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::Arc;

/// Rows of scrollback a terminal keeps unless it was made with another
/// limit.
pub const SCROLLBACK_LIMIT: u32 = 10_000;
/// The most scrollback a terminal may be made with.
pub const SCROLLBACK_MAX: u32 = 1_000_000;
/// Largest grid side accepted.
pub const MAX_SIDE: u16 = 4096;
/// The exit status of a terminal whose process ended with the daemon (a
/// restarted daemon brings back its screen and scrollback, not its pty),
/// and of a command a restarted daemon no longer follows.
pub const ENDED_WITH_DAEMON: i32 = -1;

pub use crate::op::TermUpdate;

/// A terminal's screen and what scrolled off it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Term {
    pub command: String,
    pub dir: String,
    pub cols: u16,
    pub rows: u16,
    /// Exactly `rows` rows, top first.
    pub grid: Vec<Row>,
    /// Rows that scrolled off the top, oldest first, at most `limit`;
    /// shared, so a copy of the state (a snapshot, a file's text made
    /// after the lock) costs a pointer per row.
    pub scrollback: VecDeque<Arc<Row>>,
    /// The scrollback's runes, a newline after each row (`text`'s length
    /// without the screen, which acme's index reports).
    pub scrollback_runes: u64,
    pub limit: u32,
    /// Rows that ever scrolled off, evicted ones included.
    pub scrolled: u64,
    pub cursor: Cursor,
    pub modes: u32,
    pub title: String,
    pub bells: u64,
    /// The exit status, once the process has exited.
    pub exit: Option<i32>,
}

fn check_size(cols: u16, rows: u16) -> Result<()> {
    match (1..=MAX_SIDE).contains(&cols) && (1..=MAX_SIDE).contains(&rows) {
        true => Ok(()),
        false => Err(Reject::TermSize { cols, rows }),
    }
}

/// A grid of `rows` rows made `new_rows` high: cut or padded at the
/// bottom (the emulator has already scrolled what it keeps).
pub fn resize_grid(grid: &mut Vec<Row>, new_rows: u16) {
    grid.resize(new_rows as usize, Row::default());
}

/// A grid moved up by `n` rows (at most its height), blank rows coming in
/// at the bottom.
pub fn scroll_grid(grid: &mut Vec<Row>, n: usize) {
    let rows = grid.len();
    grid.drain(..n.min(rows));
    grid.resize(rows, Row::default());
}

impl Term {
    /// A blank grid; `Create`'s work.
    pub fn new(cols: u16, rows: u16, limit: u32, command: String, dir: String) -> Result<Term> {
        check_size(cols, rows)?;
        if limit > SCROLLBACK_MAX {
            return Err(Reject::TermScrollback { limit, max: SCROLLBACK_MAX });
        }
        Ok(Term {
            command,
            dir,
            cols,
            rows,
            grid: vec![Row::default(); rows as usize],
            scrollback: VecDeque::new(),
            scrollback_runes: 0,
            limit,
            scrolled: 0,
            cursor: Cursor::default(),
            modes: crate::grid::mode::LINE_WRAP,
            title: String::new(),
            bells: 0,
            exit: None,
        })
    }

    /// Applies an op other than `Create`; on error the term is unchanged.
    pub fn apply(&mut self, op: &TermOp) -> Result<()> {
        match op {
            TermOp::Create { .. } => Ok(()),
            TermOp::Update(u) => self.update(u),
        }
    }

    fn update(&mut self, u: &TermUpdate) -> Result<()> {
        // Checked whole first: a refused update changes nothing.
        let (cols, rows) = u.size.unwrap_or((self.cols, self.rows));
        check_size(cols, rows)?;
        let RowChanges { scrolled, lines } = u.rows.unpack()?;
        if let Some((top, _)) = lines.iter().find(|(top, _)| *top >= rows) {
            return Err(Reject::TermRows { top: *top as u32, end: *top as u32 + 1, rows });
        }
        if !scrolled.iter().chain(lines.iter().map(|(_, r)| r)).all(Row::is_well_formed) {
            return Err(Reject::TermPacked { why: "a row styles more chars than it has".into() });
        }
        if let Some(c) = u.cursor.filter(|c| c.row >= rows || c.col >= cols) {
            return Err(Reject::TermRows { top: c.row as u32, end: c.row as u32 + 1, rows });
        }
        self.cols = cols;
        self.rows = rows;
        resize_grid(&mut self.grid, rows);
        self.cursor.row = self.cursor.row.min(rows - 1);
        self.cursor.col = self.cursor.col.min(cols - 1);
        scroll_grid(&mut self.grid, scrolled.len());
        self.scrolled += scrolled.len() as u64;
        for row in scrolled {
            self.scrollback_runes += runes(&row);
            self.scrollback.push_back(Arc::new(row));
        }
        while self.scrollback.len() > self.limit as usize {
            let evicted = self.scrollback.pop_front().expect("over the limit");
            self.scrollback_runes -= runes(&evicted);
        }
        for (top, row) in lines {
            self.grid[top as usize] = row;
        }
        if let Some(c) = u.cursor {
            self.cursor = c;
        }
        if let Some(m) = u.modes {
            self.modes = m;
        }
        if let Some(t) = &u.title {
            self.title.clone_from(t);
        }
        self.bells += u.bells as u64;
        if let Some(status) = u.exit {
            self.exit = Some(status);
        }
        Ok(())
    }

    /// The name of terminal `id`'s window: `DIR/-term.N`, as win names
    /// its windows `DIR/-sysname`.
    pub fn window_name(&self, id: crate::id::TermId) -> String {
        format!("{}/-term.{}", self.dir.trim_end_matches('/'), id.0)
    }

    /// The grid as text, one line per row (the `screen` file).
    pub fn screen(&self) -> String {
        lines(self.grid.iter())
    }

    /// The scrollback as text, oldest row first (the `scrollback` file).
    pub fn scrollback_text(&self) -> String {
        lines(self.scrollback.iter().map(|r| &**r))
    }

    /// Scrollback then screen (the `text` file, what grep and Look see).
    pub fn text(&self) -> String {
        lines(self.scrollback.iter().map(|r| &**r).chain(self.grid.iter()))
    }

    /// The runes of `text`, without making it.
    pub fn text_runes(&self) -> u64 {
        self.scrollback_runes + self.grid.iter().map(runes).sum::<u64>()
    }
}

/// A row's runes and its newline.
fn runes(row: &Row) -> u64 {
    row.text.chars().count() as u64 + 1
}

fn lines<'a>(rows: impl Iterator<Item = &'a Row>) -> String {
    let mut s = String::new();
    for row in rows {
        s.push_str(&row.text);
        s.push('\n');
    }
    s
}
