//! `Term`: the state of one term shard, the grid a daemon-side terminal
//! emulator produced.
//!
//! The pty and the VT parser run only where the daemon runs; what reaches
//! the shard is already a grid diff (changed lines, scrolled-off rows, the
//! cursor, modes), so every replica's apply stays small and pure.

use crate::error::{Reject, Result};
use crate::op::TermOp;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// Rows of scrollback each terminal keeps.
pub const SCROLLBACK_LIMIT: usize = 10_000;
/// Largest grid side accepted.
pub const MAX_SIDE: u16 = 4096;
/// The exit status of a terminal whose process ended with the daemon (a
/// restarted daemon brings back its screen and scrollback, not its pty).
pub const ENDED_WITH_DAEMON: i32 = -1;

/// A terminal's screen and what scrolled off it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Term {
    pub command: String,
    pub dir: String,
    pub cols: u16,
    pub rows: u16,
    /// Exactly `rows` lines, top first.
    pub grid: Vec<String>,
    /// Rows that scrolled off the top, oldest first.
    pub scrollback: VecDeque<String>,
    pub cursor: (u16, u16),
    pub cursor_visible: bool,
    pub modes: u32,
    pub title: String,
    /// The exit status, once the process has exited.
    pub exit: Option<i32>,
}

fn check_size(cols: u16, rows: u16) -> Result<()> {
    match (1..=MAX_SIDE).contains(&cols) && (1..=MAX_SIDE).contains(&rows) {
        true => Ok(()),
        false => Err(Reject::TermSize { cols, rows }),
    }
}

impl Term {
    /// A blank grid; `Create`'s work.
    pub fn new(cols: u16, rows: u16, command: String, dir: String) -> Result<Term> {
        check_size(cols, rows)?;
        Ok(Term {
            command,
            dir,
            cols,
            rows,
            grid: vec![String::new(); rows as usize],
            scrollback: VecDeque::new(),
            cursor: (0, 0),
            cursor_visible: true,
            modes: 0,
            title: String::new(),
            exit: None,
        })
    }

    /// Applies an op other than `Create`; on error the term is unchanged.
    pub fn apply(&mut self, op: &TermOp) -> Result<()> {
        match op {
            TermOp::Create { .. } => {}
            TermOp::Resize { cols, rows } => {
                check_size(*cols, *rows)?;
                self.cols = *cols;
                self.rows = *rows;
                self.grid.resize(*rows as usize, String::new());
                self.cursor.0 = self.cursor.0.min(rows - 1);
                self.cursor.1 = self.cursor.1.min(cols - 1);
            }
            TermOp::Lines { top, lines } => {
                let end = *top as u32 + lines.len() as u32;
                if end > self.rows as u32 {
                    return Err(Reject::TermRows { top: *top as u32, end, rows: self.rows });
                }
                for (row, line) in self.grid[*top as usize..end as usize].iter_mut().zip(lines) {
                    row.clone_from(line);
                }
            }
            TermOp::Scroll { scrolled } => {
                let n = scrolled.len().min(self.rows as usize);
                self.grid.drain(..n);
                self.grid.resize(self.rows as usize, String::new());
                for line in scrolled {
                    if self.scrollback.len() == SCROLLBACK_LIMIT {
                        self.scrollback.pop_front();
                    }
                    self.scrollback.push_back(line.clone());
                }
            }
            TermOp::Cursor { row, col, visible } => {
                if *row >= self.rows || *col >= self.cols {
                    return Err(Reject::TermRows { top: *row as u32, end: *row as u32 + 1, rows: self.rows });
                }
                self.cursor = (*row, *col);
                self.cursor_visible = *visible;
            }
            TermOp::Modes { bits } => self.modes = *bits,
            TermOp::Title { title } => self.title.clone_from(title),
            TermOp::Exit { status } => self.exit = Some(*status),
        }
        Ok(())
    }

    /// The grid as text, one line per row (the `screen` file).
    pub fn screen(&self) -> String {
        let mut s = String::new();
        for line in &self.grid {
            s.push_str(line);
            s.push('\n');
        }
        s
    }
}
