//! `Text`: a buffer's runes, a rope with an edit cache in front of it.
//!
//! The rope is a [`ropey::Rope`], so a 100 MB file and a one-rune insert in
//! its middle both stay cheap. In front of it sits one *run*: the edits made
//! since the last flush, when each touched the one before (typing,
//! backspacing, retyping a word), folded into a single splice of the rope
//! that has not been made yet. acme keeps the block being edited in a cache
//! the same way (`buf.c`); here it turns a keystroke from a rope descent
//! into a push onto a short string, and the rope sees one edit per run.
//!
//! The run is invisible from outside: every read goes through [`Text::rope`]
//! (or `Deref`), which is the rope with the run made. The first read after
//! an edit builds that rope once, from a clone that shares all but one path
//! of nodes, and keeps it; the next edit carries on from it. Equality, the
//! encoding (`encode.rs`) and the hash see only the runes.

mod encode;
mod leaves;
pub(crate) mod utf8;

pub(crate) use encode::{bytes_apart, encode_apart, Apart};
pub use encode::{copy_encoded, encoded_size, encoded_size_bound, PIECE};
pub use leaves::rope_of;
pub(crate) use leaves::{Leaves, SMALL};
use utf8::byte_of_rune;
pub use utf8::{acme_file_runes, acme_file_text, acme_runes, push_piece, text_and_cut, Decoded};

use crate::spots::Spots;
use ropey::Rope;
use std::fmt;
use std::ops::Deref;
use std::sync::OnceLock;

/// Longest run, in bytes, kept out of the rope: longer texts go straight in.
/// Edits inside a run move its bytes, so it is kept short.
const RUN_MAX: usize = 1024;

/// How many runes before a run are read at once when backspacing
/// reaches past its start.
const LEFT_RUNES: usize = 32;

/// The room a run's text starts with.
const RUN_ROOM: usize = 128;

/// A rope of runes.
#[derive(Clone, Default)]
pub struct Text {
    /// Everything the edits before `run` made.
    rope: Rope,
    /// Edits not yet made to `rope`.
    run: Option<Run>,
    /// `rope` with `run` made, built by the first read after an edit.
    merged: OnceLock<Rope>,
}

/// Runes `at..at + replaced` of the rope replaced by `text` (`chars` runes).
#[derive(Clone, Debug)]
struct Run {
    at: usize,
    replaced: usize,
    text: String,
    chars: usize,
    /// The last `left_chars` runes of the rope before `at`, read when a
    /// deletion first reaches past the run's start: backspacing over
    /// older text takes each rune from here, not from a descent of the
    /// rope per keystroke.
    left: String,
    left_chars: usize,
}

impl Run {
    /// Makes the run's splice in `rope`.
    fn make(&self, rope: &mut Rope) {
        if self.replaced > 0 {
            rope.remove(self.at..self.at + self.replaced);
        }
        if !self.text.is_empty() {
            rope.insert(self.at, &self.text);
        }
    }

    /// Whether a splice of `q0..q1` touches or overlaps the run's runes, so
    /// that it can join the run.
    fn touches(&self, q0: usize, q1: usize) -> bool {
        q1 >= self.at && q0 <= self.at + self.chars
    }

    /// Byte offset of rune `i` of the run's text. Found without a scan
    /// at the run's end (typing, backspace) and in an ASCII run (each
    /// rune a byte): a scan costs as much as the rest of a keystroke.
    fn byte(&self, i: usize) -> usize {
        if i >= self.chars {
            return self.text.len();
        }
        match self.chars == self.text.len() {
            true => i,
            false => byte_of_rune(&self.text, i),
        }
    }

    /// The `n` runes of `rope` just before the run's start, taken off
    /// what is kept of them (read again, [`LEFT_RUNES`] or `n` of them,
    /// when fewer are kept).
    fn take_left(&mut self, rope: &Rope, n: usize) -> String {
        if n > self.left_chars {
            let want = n.max(LEFT_RUNES).min(self.at);
            self.left = runes(rope, self.at - want, self.at);
            self.left_chars = want;
        }
        let cut = byte_of_rune(&self.left, self.left_chars - n);
        self.left_chars -= n;
        self.left.split_off(cut)
    }

    /// Joins the splice of `q0..q1` (touching the run) into it, returning
    /// the runes it removed. `rope` is the text without the run.
    fn join(&mut self, rope: &Rope, q0: usize, q1: usize, text: &str, chars: usize) -> String {
        let (left, right) = (self.at, self.at + self.chars);
        let rope_after = self.at + self.replaced;
        let mut removed = String::new();
        // Runes before the run come out of the rope: the run starts earlier.
        if q0 < left {
            removed = self.take_left(rope, left - q0);
            self.replaced += left - q0;
            self.at = q0;
        }
        // Runes inside the run come out of its text, and the new text goes
        // where they were.
        let (a, b) = (q0.max(left) - left, q1.min(right) - left);
        let (ba, bb) = (self.byte(a), self.byte(b));
        removed.push_str(&self.text[ba..bb]);
        if bb == self.text.len() {
            // Typing and backspacing at the run's end, the common case.
            self.text.truncate(ba);
            self.text.push_str(text);
        } else {
            self.text.replace_range(ba..bb, text);
        }
        // Runes after the run come out of the rope: the run ends later.
        if q1 > right {
            removed.push_str(&runes(rope, rope_after, rope_after + (q1 - right)));
            self.replaced += q1 - right;
        }
        self.chars = self.chars - (b - a) + chars;
        removed
    }
}

/// Runes `q0..q1` of `rope`. Most deletions are one rune (backspace),
/// which one descent finds; a slice takes two. Copied chunk by chunk, not
/// through `Display`'s formatting, which costs more than the rest of a
/// keystroke.
fn runes(rope: &Rope, q0: usize, q1: usize) -> String {
    match q1 - q0 {
        0 => String::new(),
        1 => String::from(rope.char(q0)),
        _ => {
            let slice = rope.slice(q0..q1);
            let mut out = String::with_capacity(slice.len_bytes());
            slice.chunks().for_each(|c| out.push_str(c));
            out
        }
    }
}

impl Text {
    pub fn new() -> Text {
        Text::default()
    }

    pub(crate) fn from_rope(rope: Rope) -> Text {
        Text { rope, run: None, merged: OnceLock::new() }
    }

    /// The runes as a rope.
    pub fn rope(&self) -> &Rope {
        match &self.run {
            None => &self.rope,
            Some(run) => self.merged.get_or_init(|| {
                let mut rope = self.rope.clone();
                run.make(&mut rope);
                rope
            }),
        }
    }

    /// Appends the UTF-8 bytes `from..to` to `out`, copying only those
    /// out of the rope (a range may start or end inside a rune, as a
    /// file's read may). Past the end reads as nothing.
    pub fn copy_bytes(&self, from: usize, to: usize, out: &mut Vec<u8>) {
        let rope = self.rope();
        let to = to.min(rope.len_bytes());
        if from >= to {
            return;
        }
        let (chunks, mut at, _, _) = rope.chunks_at_byte(from);
        for chunk in chunks {
            let bytes = chunk.as_bytes();
            out.extend_from_slice(&bytes[from.saturating_sub(at)..(to - at).min(bytes.len())]);
            at += bytes.len();
            if at >= to {
                break;
            }
        }
    }

    /// Length in bytes of the UTF-8, without making the run.
    pub fn len_bytes(&self) -> usize {
        match &self.run {
            None => self.rope.len_bytes(),
            Some(run) => {
                let replaced = self.rope.char_to_byte(run.at + run.replaced) - self.rope.char_to_byte(run.at);
                self.rope.len_bytes() - replaced + run.text.len()
            }
        }
    }

    /// Length in runes, without making the run.
    pub fn len_chars(&self) -> usize {
        match &self.run {
            None => self.rope.len_chars(),
            Some(run) => self.rope.len_chars() - run.replaced + run.chars,
        }
    }

    /// Replaces runes `q0..q1` (a range of the text) with `text` and
    /// returns the runes removed.
    pub fn splice(&mut self, q0: usize, q1: usize, text: &str) -> String {
        let chars = text.chars().count();
        self.splice_counted(q0, q1, text, chars)
    }

    /// `splice` for a caller that has counted `text`'s runes.
    pub(crate) fn splice_counted(&mut self, q0: usize, q1: usize, text: &str, chars: usize) -> String {
        // A read since the last edit built the merged rope: carry on from it.
        if let Some(merged) = self.merged.take() {
            self.rope = merged;
            self.run = None;
        }
        if let Some(run) = &mut self.run {
            if run.touches(q0, q1) && run.text.len() + text.len() <= RUN_MAX {
                return run.join(&self.rope, q0, q1, text, chars);
            }
            run.make(&mut self.rope);
            self.run = None;
        }
        let removed = runes(&self.rope, q0, q1);
        if text.len() >= SMALL {
            // A file read in or a body replaced: built with its leaves
            // together (`leaves.rs`), then put in.
            if q1 > q0 {
                self.rope.remove(q0..q1);
            }
            let tail = self.rope.split_off(q0);
            self.rope.append(rope_of(text));
            self.rope.append(tail);
        } else if text.len() > RUN_MAX {
            if q1 > q0 {
                self.rope.remove(q0..q1);
            }
            self.rope.insert(q0, text);
        } else {
            // Room for a line's typing from the start: a run grows a rune
            // at a time, and each growth of its string is a copy.
            let mut run_text = String::with_capacity(text.len().max(RUN_ROOM));
            run_text.push_str(text);
            self.run =
                Some(Run { at: q0, replaced: q1 - q0, text: run_text, chars, left: String::new(), left_chars: 0 });
        }
        removed
    }

    /// Makes every change of `spots` (checked against this text, `text`
    /// holding what they put in, one after another) and returns what they
    /// removed (the runes, one after another, or with `keep_span` the text
    /// they spanned as it was) and where the last change ended (before
    /// any was made). The runes between the first change's start and the
    /// last one's end are built anew in one pass, the rest of the rope
    /// kept: a million substitutions cost a copy of the text they span,
    /// not a million rope edits.
    pub fn splice_many(&mut self, spots: &Spots, text: &str, keep_span: bool) -> (Removed, u64) {
        match keep_span {
            true => {
                let mut bytes = 0;
                let (span, end) = self.splice_many_into(spots, text, |gone| bytes += gone.len() as u64);
                (Removed::Span { text: span, bytes }, end)
            }
            false => {
                let mut removed = String::new();
                let (_, end) = self.splice_many_into(spots, text, |gone| push_piece(&mut removed, gone));
                (Removed::Runes(removed), end)
            }
        }
    }

    /// As [`Text::splice_many`], handing what each change removes to
    /// `gone` in pieces; returns the text the changes spanned as it was
    /// (the rope's nodes, taken out, not copied).
    fn splice_many_into(&mut self, spots: &Spots, text: &str, mut gone: impl FnMut(&str)) -> (Rope, u64) {
        self.settle();
        let Some(first) = spots.iter().next() else {
            return (Rope::new(), 0);
        };
        let start = first.q0 as usize;
        // From the first change on; the last one's end is known once the
        // changes are read, and the rest kept from there.
        let mut after = self.rope.split_off(start);
        // The new runes built with their leaves together (`leaves.rs`),
        // which also gathers the pieces here, a few bytes each (the text
        // between two matches), into leaves before the builder takes them.
        let mut built = Leaves::new();
        let mut add = |piece: &str| built.append(piece);
        let mut old = Runes::of(&after);
        let mut at = start;
        for (s, put) in spots.with_texts(text) {
            let (q0, q1) = (s.q0 as usize, s.q1 as usize);
            old.take(q0 - at, &mut add);
            old.take(q1 - q0, &mut gone);
            add(put);
            at = q1;
        }
        let tail = after.split_off(at - start);
        self.rope.append(built.finish());
        self.rope.append(tail);
        (after, at as u64)
    }

    /// Puts `span` in place of runes `start..end` and returns them as they
    /// were: the rope's nodes moved both ways, nothing copied (an Undo of
    /// a change that kept what it spanned, [`Removed::Span`]).
    pub(crate) fn swap_span(&mut self, start: usize, end: usize, span: Rope) -> Rope {
        self.settle();
        let mut out = self.rope.split_off(start);
        let tail = out.split_off(end - start);
        self.rope.append(span);
        self.rope.append(tail);
        out
    }

    /// Makes the edits held out of the rope: what a change of the rope's
    /// nodes themselves starts with.
    fn settle(&mut self) {
        if let Some(merged) = self.merged.take() {
            self.rope = merged;
            self.run = None;
        }
        if let Some(run) = self.run.take() {
            run.make(&mut self.rope);
        }
    }
}

/// What the changes of a many-change splice removed.
#[derive(Clone, Debug)]
pub enum Removed {
    /// The runes removed, one after another.
    Runes(String),
    /// The text from the first change's start to the last one's end as it
    /// was, the runes between the changes included (its nodes, not a
    /// copy), and the bytes the changes removed of it.
    Span { text: Rope, bytes: u64 },
}

/// The runes `spots` remove from `span`, the text from their first
/// change's start to the last one's end, one after another.
pub(crate) fn removed_from(span: &Rope, spots: &Spots) -> String {
    let mut out = String::new();
    each_removed(span, spots, |gone| push_piece(&mut out, gone));
    out
}

/// Hands the runes `spots` remove from `span` (as in [`removed_from`])
/// to `out` in pieces, copying none.
pub(crate) fn each_removed(span: &Rope, spots: &Spots, mut out: impl FnMut(&str)) {
    let mut old = Runes::of(span);
    let mut at = None;
    for s in spots.iter() {
        let from = *at.get_or_insert(s.q0);
        old.take((s.q0 - from) as usize, |_| {});
        old.take((s.q1 - s.q0) as usize, &mut out);
        at = Some(s.q1);
    }
}

/// A rope's runes read once from the start, a piece at a time: one pass
/// over its chunks rather than a descent of the tree per slice.
struct Runes<'a> {
    chunks: ropey::iter::Chunks<'a>,
    /// What is left of the chunk being read.
    chunk: &'a str,
    /// Whether the chunk is ASCII, each rune a byte: looked at once per
    /// chunk rather than once per piece taken.
    ascii: bool,
}

impl<'a> Runes<'a> {
    fn of(rope: &'a Rope) -> Runes<'a> {
        Runes { chunks: rope.chunks(), chunk: "", ascii: true }
    }

    /// Hands the next `n` runes to `out` in pieces (fewer at the end).
    #[inline]
    fn take(&mut self, n: usize, mut out: impl FnMut(&'a str)) {
        // Within an ASCII chunk (most of them): one piece, each rune a byte.
        if self.ascii && n <= self.chunk.len() {
            if n > 0 {
                let (piece, rest) = self.chunk.split_at(n);
                out(piece);
                self.chunk = rest;
            }
            return;
        }
        self.take_across(n, out);
    }

    fn take_across(&mut self, mut n: usize, mut out: impl FnMut(&'a str)) {
        while n > 0 {
            if self.chunk.is_empty() {
                match self.chunks.next() {
                    Some(c) => (self.chunk, self.ascii) = (c, c.is_ascii()),
                    None => return,
                }
                continue;
            }
            let cut = match self.ascii {
                true => n.min(self.chunk.len()),
                false => byte_of_rune(self.chunk, n),
            };
            let piece = &self.chunk[..cut];
            n -= match cut == self.chunk.len() {
                true => piece.chars().count(),
                false => n,
            };
            out(piece);
            self.chunk = &self.chunk[cut..];
        }
    }
}

impl Deref for Text {
    type Target = Rope;
    fn deref(&self) -> &Rope {
        self.rope()
    }
}

impl PartialEq for Text {
    fn eq(&self, other: &Text) -> bool {
        self.rope() == other.rope()
    }
}

impl Eq for Text {}

impl fmt::Debug for Text {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Text({} runes)", self.len_chars())
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Text {
        Text::from_rope(rope_of(s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Splices both a `Text` and a plain `String`, checking the removed
    /// runes and the result after each, reading only sometimes (a read
    /// builds the merged rope, which the next edit carries on from).
    fn check(edits: &[(usize, usize, &str)], read_every: usize) {
        let mut text = Text::from("hello, wörld");
        let mut want: Vec<char> = "hello, wörld".chars().collect();
        for (i, &(q0, q1, s)) in edits.iter().enumerate() {
            let removed = text.splice(q0, q1, s);
            let gone: String = want.splice(q0..q1, s.chars()).collect();
            assert_eq!(removed, gone, "edit {i}: {q0}..{q1} {s:?}");
            assert_eq!(text.len_bytes(), want.iter().map(|c| c.len_utf8()).sum::<usize>(), "edit {i}");
            if read_every > 0 && i % read_every == 0 {
                assert_eq!(text.to_string(), want.iter().collect::<String>(), "after edit {i}");
            }
        }
        assert_eq!(text.to_string(), want.iter().collect::<String>());
        assert_eq!(text.len_chars(), want.len());
        assert_eq!(text.len_bytes(), want.iter().map(|c| c.len_utf8()).sum::<usize>());
    }

    #[test]
    fn runs_fold_typing_backspace_and_deletes_at_either_end() {
        let edits = [
            (5, 5, "!"),  // start a run
            (6, 6, "é"),  // typing on
            (7, 7, "x"),  //
            (7, 8, ""),   // backspace inside the run
            (4, 5, ""),   // backspace past the run's start
            (3, 4, ""),   //
            (3, 3, "LO"), // retype
            (5, 9, ""),   // delete from inside the run past its end
            (0, 2, "J"),  // far away: a new run
            (1, 1, "€"),  //
            (0, 3, ""),   // delete the whole run and a rune after it
        ];
        for read_every in [0, 1, 2, 3] {
            check(&edits, read_every);
        }
    }

    #[test]
    fn long_texts_go_straight_to_the_rope() {
        let long = "ä".repeat(RUN_MAX);
        check(&[(0, 0, "ab"), (2, 2, long.as_str()), (1, 3, "c"), (0, 0, long.as_str())], 0);
    }

    #[test]
    fn equal_runes_are_equal_texts_whatever_is_pending() {
        let mut a = Text::from("abc");
        a.splice(3, 3, "d");
        let b = Text::from("abcd");
        assert_eq!(a, b);
        assert_eq!(postcard::to_allocvec(&a).unwrap(), postcard::to_allocvec(&b).unwrap());
    }

    /// Many changes at once over a text of many chunks, some all ASCII and
    /// some not, with more new text than is gathered at once: the same as
    /// the changes made one at a time on the runes.
    #[test]
    fn many_changes_over_many_chunks_are_the_changes_one_at_a_time() {
        use crate::spots::Spot;
        let mut seed = 7u64;
        let mut next = |n: usize| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (seed >> 33) as usize % n
        };
        // Stretches of ASCII between stretches of two- and three-byte
        // runes, so that some chunks are ASCII throughout.
        let runes: Vec<char> = (0..60_000)
            .map(|i| match (i / 5_000) % 3 {
                0 => ['a', 'b', '\n'][next(3)],
                1 => ['a', 'é', '€', ' '][next(4)],
                _ => 'x',
            })
            .collect();
        let start: String = runes.iter().collect();
        let text = Text::from(start.as_str());
        let mut want = runes.clone();
        let big = "é".repeat(2048);
        let (mut spots, mut inserted, mut at) = (Vec::new(), String::new(), next(10));
        while at < runes.len() {
            let q1 = (at + next(4)).min(runes.len());
            let put = ["", "y", "ü€", "\n\n", "long text put in many times over", big.as_str()][next(6)];
            spots.push(Spot { q0: at as u64, q1: q1 as u64, inserted: put.chars().count() as u64 });
            inserted.push_str(put);
            at = q1 + 1 + next(30);
        }
        let mut gone = String::new();
        let mut puts = inserted.as_str();
        let mut shift = 0i64;
        for s in &spots {
            let put: String = puts.chars().take(s.inserted as usize).collect();
            puts = &puts[put.len()..];
            let (q0, q1) = ((s.q0 as i64 + shift) as usize, (s.q1 as i64 + shift) as usize);
            gone.extend(want.splice(q0..q1, put.chars()));
            shift += s.inserted as i64 - (s.q1 - s.q0) as i64;
        }
        assert!(start.len() > SMALL, "built anew with its leaves together");
        let (first, last) = (spots[0].q0 as usize, spots.last().map_or(0, |s| s.q1));
        let spots = Spots::pack(spots).unwrap();
        let want: String = want.iter().collect();
        for keep_span in [false, true] {
            let mut text = text.clone();
            let (removed, end) = text.splice_many(&spots, &inserted, keep_span);
            assert_eq!(end, last);
            assert_eq!(text.to_string(), want);
            assert_eq!(text.len_chars(), want.chars().count());
            match removed {
                Removed::Runes(removed) => assert_eq!(removed, gone),
                Removed::Span { text: span, bytes } => {
                    assert_eq!(span, start.chars().skip(first).take(last as usize - first).collect::<String>());
                    assert_eq!(removed_from(&span, &spots), gone, "what the changes removed, read out of the span");
                    assert_eq!(bytes, gone.len() as u64);
                    // Put back whole, it is the text as it was, and what
                    // comes out is what the changes put in.
                    let now_end = first + want.chars().count() - start.chars().count() + last as usize - first;
                    let out = text.swap_span(first, now_end, span);
                    assert_eq!(text.to_string(), start);
                    assert_eq!(removed_from(&out, &spots.swapped()), inserted);
                }
            }
        }
    }

    proptest::proptest! {
        /// Typing and backspacing far past where a run began (the runes
        /// before it read in batches), deleting forward, moving, over
        /// runes of every width, with reads between: the same as the
        /// edits made on a list of runes, each returning what it removed.
        #[test]
        fn backspacing_past_a_run_s_start_takes_the_runes_before_it(
            start in "[aé€😀\n]{0,120}",
            edits in proptest::collection::vec(
                (0u8..6, 0usize..1000, 0usize..80, "[xé😀]{0,3}", proptest::bool::weighted(0.1)),
                0..120,
            ),
        ) {
            let mut text = Text::from(start.as_str());
            let mut want: Vec<char> = start.chars().collect();
            let mut at = 0;
            for (kind, pos, n, put, read) in edits {
                let len = want.len();
                let q = at.min(len);
                // Mostly one rune at a time, sometimes more than are read at once.
                let k = if n < 40 { 1 } else { n - 39 };
                let (q0, q1, put) = match kind {
                    0 => (pos % (len + 1), pos % (len + 1), put),
                    1 | 2 => (q, q, put),
                    3 | 4 => (q - k.min(q), q, String::new()),
                    _ => (q, q + k.min(len - q), String::new()),
                };
                let removed = text.splice(q0, q1, &put);
                let gone: String = want.splice(q0..q1, put.chars()).collect();
                proptest::prop_assert_eq!(removed, gone, "{}..{} {:?}", q0, q1, put);
                at = q0 + put.chars().count();
                if read {
                    proptest::prop_assert_eq!(text.to_string(), want.iter().collect::<String>());
                }
            }
            proptest::prop_assert_eq!(text.to_string(), want.iter().collect::<String>());
            proptest::prop_assert_eq!(text.len_chars(), want.len());
        }
    }
}
