//! `Changes`: one text's changes as an Edit makes them (a whole-file
//! substitution's by the million) and proposes them: each change's place
//! beside the others and every text the changes put in one after another
//! in one string, not a string each, so a change costs a few bytes for
//! its place and its text, and making one allocates nothing of its own.

use serde::{Deserialize, Serialize};

/// Where one change is: runes `q0..q1` of the text as it was, and where
/// (in bytes) what it puts in ends in the list's text. The form a list
/// is stored in (a log entry's, a proposal's); held in less.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Place {
    q0: u64,
    q1: u64,
    end: u64,
}

/// Changes a block holds: its places are kept against the block's base.
const BLOCK: usize = 64;

/// How many bytes each of a block's places gives each of its three
/// numbers (0 to 8; 0 where the number is 0 in every place).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Widths {
    q0: u8,
    len: u8,
    end: u8,
}

impl Widths {
    /// What `near` needs: each number's bytes, leading zeros left out.
    fn of(near: [u64; 3]) -> Widths {
        let w = |v: u64| (u64::BITS - v.leading_zeros()).div_ceil(8) as u8;
        Widths { q0: w(near[0]), len: w(near[1]), end: w(near[2]) }
    }

    fn max(self, o: Widths) -> Widths {
        Widths { q0: self.q0.max(o.q0), len: self.len.max(o.len), end: self.end.max(o.end) }
    }

    fn capped(self, most: u8) -> Widths {
        Widths { q0: self.q0.min(most), len: self.len.min(most), end: self.end.min(most) }
    }

    /// The bytes of one place.
    fn stride(self) -> usize {
        usize::from(self.q0 + self.len + self.end)
    }
}

/// A block's base: its first change's `q0`, where in the text its first
/// change's text begins, where its places begin in the packed bytes, and
/// how wide each of their numbers is.
#[derive(Clone, Copy, Debug, Default)]
struct Base {
    q0: u64,
    start: u64,
    at: usize,
    widths: Widths,
}

impl Base {
    /// A place's numbers against this base: `q0` after the base's, its
    /// runes (`q1 - q0`), its text's end after the base's start. Wrapping,
    /// so that a place before the base's (a list made out of order) is
    /// held too, in 8 bytes.
    fn near(&self, p: Place) -> [u64; 3] {
        [p.q0.wrapping_sub(self.q0), p.q1.wrapping_sub(p.q0), p.end.wrapping_sub(self.start)]
    }

    fn place(&self, near: [u64; 3]) -> Place {
        let q0 = self.q0.wrapping_add(near[0]);
        Place { q0, q1: q0.wrapping_add(near[1]), end: self.start.wrapping_add(near[2]) }
    }
}

/// `v`'s low `width` bytes onto `out` (all eight put, the rest cut off: a
/// copy of as many bytes as the width, a call, costs several times that).
fn put(out: &mut Vec<u8>, v: u64, width: u8) {
    let at = out.len();
    out.extend_from_slice(&v.to_le_bytes());
    out.truncate(at + usize::from(width));
}

/// The low `width` bytes of a number.
fn mask(width: u8) -> u64 {
    MASKS[usize::from(width)]
}

const MASKS: [u64; 9] = {
    let mut m = [0; 9];
    let mut w = 1;
    while w < 9 {
        m[w] = u64::MAX >> (64 - 8 * w);
        w += 1;
    }
    m
};

/// A number of `width` bytes from `bytes` at `at`: eight bytes read and
/// the ones past it masked off, where eight are there (a copy of as many
/// bytes as the width, a call, costs several times that).
fn take(bytes: &[u8], at: usize, width: u8) -> u64 {
    if let Some(eight) = bytes.get(at..at + 8) {
        return u64::from_le_bytes(eight.try_into().expect("8 bytes")) & mask(width);
    }
    let mut b = [0; 8];
    let width = usize::from(width);
    b[..width].copy_from_slice(&bytes[at..at + width]);
    u64::from_le_bytes(b)
}

/// A block's places read one after another from place `at` on: what is
/// the same for all of them (the base, the stride, where each number is)
/// worked out once, not once a place.
#[derive(Clone, Copy, Default)]
struct Reading {
    base: Base,
    at: usize,
    stride: usize,
    /// Where the second and third numbers begin, in bits.
    shifts: [u32; 2],
    masks: [u64; 3],
}

impl Reading {
    /// From change `i` on, to the end of its block.
    fn at(changes: &Changes, i: usize) -> Reading {
        let base = changes.bases[i / BLOCK];
        let w = base.widths;
        let stride = w.stride();
        Reading {
            base,
            at: base.at + i % BLOCK * stride,
            stride,
            shifts: [8 * u32::from(w.q0), 8 * u32::from(w.q0 + w.len)],
            masks: [mask(w.q0), mask(w.len), mask(w.end)],
        }
    }

    /// The next place, from `packed`, the list's bytes.
    #[inline]
    fn next(&mut self, packed: &[u8]) -> Place {
        let at = self.at;
        self.at += self.stride;
        // A place of up to eight bytes (most are) read in one. (A number
        // from the eighth byte on is of width 0: masked to 0.)
        if let Some(eight) = packed.get(at..at + 8).filter(|_| self.stride <= 8) {
            let v = u64::from_le_bytes(eight.try_into().expect("8 bytes"));
            let [m0, m1, m2] = self.masks;
            let [s1, s2] = self.shifts;
            return self.base.place([v & m0, v.wrapping_shr(s1) & m1, v.wrapping_shr(s2) & m2]);
        }
        let w = self.base.widths;
        let q0 = take(packed, at, w.q0);
        let len = take(packed, at + usize::from(w.q0), w.len);
        let end = take(packed, at + usize::from(w.q0 + w.len), w.end);
        self.base.place([q0, len, end])
    }
}

/// Changes to one text, each `q0..q1` of the text as it was becoming its
/// text. In the order made until [`Changes::sort`] puts them in order of
/// place. Stored as a list of places and one string; held as blocks of
/// [`BLOCK`] places against a base, each number of a block's places in
/// as many bytes as the largest needs: a whole-file substitution's
/// changes, a few runes apart, cost about 4 bytes each rather than 24.
#[derive(Clone, Default)]
pub struct Changes {
    bases: Vec<Base>,
    /// Every block's places, one after another, each block's at its base's
    /// `at`, its places of its widths' stride.
    packed: Vec<u8>,
    len: usize,
    text: String,
    seen: Seen,
}

/// What adding the changes found, so that a list made in order (a
/// whole-file Edit's millions) is sorted, and its changes of nothing
/// left out, without a pass over it. Each flag says what may be so: a
/// list split or filtered keeps its flags, which still hold of what is
/// left.
#[derive(Clone, Copy, Default)]
struct Seen {
    /// The last change's place.
    last: Option<(u64, u64)>,
    /// A change was added before one added earlier.
    unordered: bool,
    /// A change was added starting inside the one added before it.
    inside: bool,
    /// A change removes and puts in nothing.
    empty: bool,
}

impl Changes {
    /// Changes a block holds: a list split at a multiple of it is split
    /// without a copy of each change.
    pub const BLOCK: usize = BLOCK;

    pub fn new() -> Changes {
        Changes::default()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds a change of `q0..q1` to `text`.
    pub fn push(&mut self, q0: u64, q1: u64, text: &str) {
        self.push_with(q0, q1, |out| crate::text::push_piece(out, text));
    }

    /// Adds a change of `q0..q1` to what `write` appends to the string it
    /// is given (a substitution's replacement, expanded in place).
    pub fn push_with(&mut self, q0: u64, q1: u64, write: impl FnOnce(&mut String)) {
        let start = self.text.len() as u64;
        write(&mut self.text);
        self.place(Place { q0, q1, end: self.text.len() as u64 }, start);
    }

    /// Adds `place`, whose text begins at byte `start` of the list's text.
    fn place(&mut self, p: Place, start: u64) {
        if let Some(before) = self.seen.last {
            self.seen.unordered |= (p.q0, p.q1) < before;
            self.seen.inside |= p.q0 < before.1;
        }
        self.seen.last = Some((p.q0, p.q1));
        self.seen.empty |= p.q0 == p.q1 && p.end == start;
        let i = self.len;
        if i % BLOCK == 0 {
            // As wide as the block before, up to 2 bytes a number: a list
            // of one shape is not packed again at each block's start.
            let widths = self.bases.last().map_or_else(Widths::default, |b| b.widths.capped(2));
            self.bases.push(Base { q0: p.q0, start, at: self.packed.len(), widths });
        }
        let base = *self.bases.last().expect("a block begun");
        let near = base.near(p);
        let widths = base.widths.max(Widths::of(near));
        if widths != base.widths {
            // Wider than the block's places so far: they are packed again,
            // at the end of the bytes, where the last block's are.
            let first = i - i % BLOCK;
            let mut places = [[0; 3]; BLOCK];
            for (j, n) in (first..i).zip(&mut places) {
                *n = base.near(self.whole(j));
            }
            self.packed.truncate(base.at);
            for n in &places[..i - first] {
                Changes::pack(&mut self.packed, *n, widths);
            }
            self.bases.last_mut().expect("a block begun").widths = widths;
        }
        Changes::pack(&mut self.packed, near, widths);
        self.len += 1;
    }

    fn pack(out: &mut Vec<u8>, near: [u64; 3], w: Widths) {
        // A place of up to eight bytes (most are) put in one.
        if w.stride() <= 8 {
            let shifted = |v: u64, by: u8| v.checked_shl(8 * u32::from(by)).unwrap_or(0);
            let v = near[0] | shifted(near[1], w.q0) | shifted(near[2], w.q0 + w.len);
            put(out, v, w.q0 + w.len + w.end);
            return;
        }
        put(out, near[0], w.q0);
        put(out, near[1], w.len);
        put(out, near[2], w.end);
    }

    /// Change `i`'s place.
    fn whole(&self, i: usize) -> Place {
        Reading::at(self, i).next(&self.packed)
    }

    /// Where change `i`'s text ends in `text` (its end alone decoded).
    fn end(&self, i: usize) -> usize {
        let base = &self.bases[i / BLOCK];
        let w = base.widths;
        let at = base.at + i % BLOCK * w.stride() + usize::from(w.q0 + w.len);
        base.start.wrapping_add(take(&self.packed, at, w.end)) as usize
    }

    /// The start of change `i`'s text in `text`.
    fn start(&self, i: usize) -> usize {
        match i {
            0 => 0,
            i => self.end(i - 1),
        }
    }

    /// Change `i`: its place and its text.
    pub fn get(&self, i: usize) -> (u64, u64, &str) {
        let p = self.whole(i);
        (p.q0, p.q1, &self.text[self.start(i)..p.end as usize])
    }

    /// Every change, in the list's order (each decoded once going
    /// forward: its text starts where the one before ended).
    pub fn iter(&self) -> Iter<'_> {
        Iter::new(self, 0..self.len(), 0)
    }

    /// Changes `range`, in the list's order, each with its text.
    pub fn iter_range(&self, range: std::ops::Range<usize>) -> Iter<'_> {
        let start = match range.is_empty() {
            true => 0,
            false => self.start(range.start),
        };
        Iter::new(self, range, start)
    }

    /// How many runes changes `range` remove in all: each block's lengths
    /// read straight from its packing, no change decoded whole (where a
    /// whole-file Edit's dot lands, past its millions of changes).
    pub fn removed_runes(&self, range: std::ops::Range<usize>) -> u64 {
        debug_assert!(range.end <= self.len, "changes {range:?} of {}", self.len);
        let mut removed = 0u64;
        let mut i = range.start;
        while i < range.end {
            let base = &self.bases[i / BLOCK];
            let (w, stride) = (base.widths, base.widths.stride());
            let block_end = (i - i % BLOCK + BLOCK).min(range.end);
            let mut at = base.at + i % BLOCK * stride + usize::from(w.q0);
            for _ in i..block_end {
                removed = removed.wrapping_add(take(&self.packed, at, w.len));
                at += stride;
            }
            i = block_end;
        }
        removed
    }

    /// What changes `range` put in, one after another: a slice of the
    /// list's one string.
    pub fn text_of(&self, range: std::ops::Range<usize>) -> &str {
        match range.is_empty() {
            true => "",
            false => &self.text[self.start(range.start)..self.end(range.end - 1)],
        }
    }

    /// Puts the changes in order of place, changes at one place in the
    /// order they were made (stably), and returns where change `follow`
    /// went; `Err(q0)` where a change starts inside the one before it.
    pub fn sort(&mut self, follow: Option<usize>) -> Result<Option<usize>, u64> {
        // Added in order, none inside the one before: sorted already.
        if !self.seen.unordered && !self.seen.inside {
            return Ok(follow);
        }
        let key = |i: usize| {
            let p = self.whole(i);
            (p.q0, p.q1)
        };
        // One pass: whether they are in order, and where one starts
        // inside the one before.
        let mut places = self.iter().map(|(q0, q1, _)| (q0, q1));
        let (mut in_order, mut inside) = (true, None);
        if let Some(mut before) = places.next() {
            for p in places {
                in_order &= before <= p;
                if inside.is_none() && p.0 < before.1 {
                    inside = Some(p.0);
                }
                before = p;
            }
        }
        let mut followed = follow;
        if !in_order {
            let mut order: Vec<usize> = (0..self.len()).collect();
            order.sort_by_key(|&i| key(i));
            let mut sorted = Changes::new();
            sorted.text.reserve(self.text.len());
            sorted.packed.reserve(self.packed.len());
            for (at, &i) in order.iter().enumerate() {
                let (q0, q1, text) = self.get(i);
                sorted.push(q0, q1, text);
                if follow == Some(i) {
                    followed = Some(at);
                }
            }
            *self = sorted;
        }
        if !in_order {
            let places = || self.iter().map(|(q0, q1, _)| (q0, q1));
            inside = places().zip(places().skip(1)).find(|(a, b)| b.0 < a.1).map(|(_, b)| b.0);
        }
        match inside {
            Some(q0) => Err(q0),
            None => Ok(followed),
        }
    }

    /// Keeps only the changes `keep` says to, in order.
    pub fn retain(&mut self, mut keep: impl FnMut(u64, u64, &str) -> bool) {
        if self.iter().all(|(q0, q1, text)| keep(q0, q1, text)) {
            return;
        }
        let mut kept = Changes::new();
        for (q0, q1, text) in self.iter() {
            if keep(q0, q1, text) {
                kept.push(q0, q1, text);
            }
        }
        *self = kept;
    }

    /// Whether a change may remove and put in nothing (none does if not).
    pub fn may_hold_empty(&self) -> bool {
        self.seen.empty
    }

    /// Leaves out the changes that remove and put in nothing.
    pub fn drop_empty(&mut self) {
        if self.seen.empty {
            self.retain(|q0, q1, text| q0 != q1 || !text.is_empty());
        }
    }

    /// Gives back the memory past what the list holds (a list taken
    /// apart from its end keeps its room otherwise).
    pub fn shrink_to_fit(&mut self) {
        self.bases.shrink_to_fit();
        self.packed.shrink_to_fit();
        self.text.shrink_to_fit();
    }

    /// Splits the list at change `at`: the changes from there on are
    /// returned, the ones before stay.
    pub fn split_off(&mut self, at: usize) -> Changes {
        if at == 0 {
            // All of it: moved, not copied into a list of its room.
            return std::mem::take(self);
        }
        let start = self.start(at);
        if at % BLOCK == 0 && at < self.len {
            return self.split_blocks(at, start);
        }
        let mut tail = Changes::new();
        let mut from = start as u64;
        for i in at..self.len() {
            let p = self.whole(i);
            tail.place(Place { end: p.end - start as u64, ..p }, from - start as u64);
            from = p.end;
        }
        tail.text = self.text.split_off(start);
        self.seen.last = at.checked_sub(1).map(|last| {
            let p = self.whole(last);
            (p.q0, p.q1)
        });
        // What stays: the blocks up to `at`, the last one's places up to it.
        self.bases.truncate(at.div_ceil(BLOCK));
        let kept = match self.bases.last() {
            Some(b) => b.at + (at - (self.bases.len() - 1) * BLOCK) * b.widths.stride(),
            None => 0,
        };
        self.packed.truncate(kept);
        self.len = at;
        tail
    }

    /// `split_off` at a block's start: the blocks from there on moved
    /// whole, their bases made the tail's.
    fn split_blocks(&mut self, at: usize, start: usize) -> Changes {
        let first = at / BLOCK;
        let from = self.bases[first].at;
        let bases = self.bases.split_off(first);
        let bases = bases.into_iter().map(|b| Base { at: b.at - from, start: b.start - start as u64, ..b }).collect();
        let seen = Seen { last: self.seen.last, ..self.seen };
        let tail = Changes {
            bases,
            packed: self.packed.split_off(from),
            len: self.len - at,
            text: self.text.split_off(start),
            seen,
        };
        self.seen.last = at.checked_sub(1).map(|last| {
            let p = self.whole(last);
            (p.q0, p.q1)
        });
        self.len = at;
        tail
    }

    /// Bytes the list holds in memory, its room included.
    #[cfg(test)]
    fn held_bytes(&self) -> usize {
        self.bases.capacity() * std::mem::size_of::<Base>() + self.packed.capacity() + self.text.capacity()
    }
}

/// The changes of a list in order, each with its text.
pub struct Iter<'a> {
    changes: &'a Changes,
    front: usize,
    back: usize,
    /// Where the front change's text starts.
    start: usize,
    /// The front's block, read on from the front, and how many of its
    /// places are left to read (none: the next is read afresh).
    reading: Reading,
    left: usize,
}

impl<'a> Iter<'a> {
    fn new(changes: &'a Changes, range: std::ops::Range<usize>, start: usize) -> Iter<'a> {
        Iter { changes, front: range.start, back: range.end, start, reading: Reading::default(), left: 0 }
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = (u64, u64, &'a str);

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.front == self.back {
            return None;
        }
        let changes = self.changes;
        if self.left == 0 {
            self.reading = Reading::at(changes, self.front);
            self.left = BLOCK - self.front % BLOCK;
        }
        self.left -= 1;
        let p = self.reading.next(&changes.packed);
        let text = &changes.text[self.start..p.end as usize];
        (self.front, self.start) = (self.front + 1, p.end as usize);
        Some((p.q0, p.q1, text))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.back - self.front, Some(self.back - self.front))
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.front == self.back {
            return None;
        }
        self.back -= 1;
        Some(self.changes.get(self.back))
    }
}

impl ExactSizeIterator for Iter<'_> {}

/// Two lists are equal when they hold the same changes, however held.
impl PartialEq for Changes {
    fn eq(&self, other: &Changes) -> bool {
        self.len() == other.len() && self.text == other.text && self.iter().eq(other.iter())
    }
}

impl Eq for Changes {}

/// Stored as its places whole and its text, as it always was.
impl Serialize for Changes {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        struct Places<'a>(&'a Changes);
        impl Serialize for Places<'_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_seq((0..self.0.len()).map(|i| self.0.whole(i)))
            }
        }
        let mut st = s.serialize_struct("Changes", 2)?;
        st.serialize_field("places", &Places(self))?;
        st.serialize_field("text", &self.text)?;
        st.end()
    }
}

impl<'de> Deserialize<'de> for Changes {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Changes, D::Error> {
        #[derive(Deserialize)]
        #[serde(rename = "Changes")]
        struct Stored {
            places: Vec<Place>,
            text: String,
        }
        let Stored { places, text } = Stored::deserialize(d)?;
        let mut out = Changes { text, ..Changes::default() };
        let mut start = 0;
        for p in places {
            // Each text where the one before ended, within the string and
            // on a rune's boundary: a list that says otherwise is refused.
            let end = usize::try_from(p.end).unwrap_or(usize::MAX);
            if p.end < start || !out.text.is_char_boundary(end) || p.q1 < p.q0 {
                return Err(serde::de::Error::custom("a change's place does not fit its list's text"));
            }
            out.place(p, start);
            start = p.end;
        }
        Ok(out)
    }
}

/// The first few changes and how many there are: a request's description
/// or a log line names a whole-file Edit's part without a million more.
impl std::fmt::Debug for Changes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const SHOWN: usize = 3;
        let mut list = f.debug_list();
        list.entries(self.iter().take(SHOWN));
        if self.len() > SHOWN {
            list.entry(&format_args!("... {} changes in all", self.len()));
        }
        list.finish()
    }
}

impl<S: AsRef<str>> FromIterator<(u64, u64, S)> for Changes {
    fn from_iter<I: IntoIterator<Item = (u64, u64, S)>>(changes: I) -> Changes {
        let mut out = Changes::new();
        for (q0, q1, text) in changes {
            out.push(q0, q1, text.as_ref());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_in_one_string_sorted_stably_split_and_filtered() {
        let mut c: Changes = [(5, 6, "five"), (0, 1, ""), (5, 5, "é"), (9, 9, "nine")].into_iter().collect();
        assert_eq!(c.get(2), (5, 5, "é"));
        assert_eq!(c.text_of(2..3).len(), 2);
        // In order of (q0, q1): change 0 (5..6) goes after the insert at
        // 5..5, though made before it.
        assert_eq!(c.sort(Some(0)), Ok(Some(2)));
        assert_eq!(c.iter().collect::<Vec<_>>(), [(0, 1, ""), (5, 5, "é"), (5, 6, "five"), (9, 9, "nine")]);
        let tail = c.split_off(2);
        assert_eq!(tail.iter().collect::<Vec<_>>(), [(5, 6, "five"), (9, 9, "nine")]);
        assert_eq!(c.iter().collect::<Vec<_>>(), [(0, 1, ""), (5, 5, "é")]);
        c.retain(|q0, q1, text| q0 != q1 || !text.is_empty());
        assert_eq!(c.iter().collect::<Vec<_>>(), [(0, 1, ""), (5, 5, "é")]);
        c.retain(|_, _, text| !text.is_empty());
        assert_eq!(c.iter().collect::<Vec<_>>(), [(5, 5, "é")]);
        let mut overlapping: Changes = [(0, 4, "a"), (2, 3, "b")].into_iter().collect();
        assert_eq!(overlapping.sort(None), Err(2));
    }

    /// The list as it was held before blocks: what it is stored as.
    #[derive(Serialize)]
    struct Stored {
        places: Vec<Place>,
        text: String,
    }

    fn stored(changes: &[(u64, u64, String)]) -> Stored {
        let mut text = String::new();
        let places = changes
            .iter()
            .map(|(q0, q1, t)| {
                text.push_str(t);
                Place { q0: *q0, q1: *q1, end: text.len() as u64 }
            })
            .collect();
        Stored { places, text }
    }

    proptest::proptest! {
        /// Any changes, near their block's first or not (made before it,
        /// of more than 65,535 runes), read back as made, split anywhere
        /// and made on after, and stored byte for byte as the list of
        /// whole places always was.
        #[test]
        fn held_in_blocks_as_made(
            made in proptest::collection::vec((0u64..3, 0u64..200, proptest::bool::weighted(0.02), "[aé]{0,3}"), 0..300),
            cut in 0usize..300,
        ) {
            let mut q = 1_000_000u64;
            let model: Vec<(u64, u64, String)> = made
                .into_iter()
                .map(|(how, step, long, t)| {
                    // Mostly on from the last; sometimes back before it.
                    q = match how { 0 => q.saturating_sub(step * 1000), _ => q + step };
                    let len = if long { 70_000 } else { step % 7 };
                    (q, q + len, t)
                })
                .collect();
            let mut c: Changes = model.iter().map(|(q0, q1, t)| (*q0, *q1, t.as_str())).collect();
            proptest::prop_assert_eq!(c.len(), model.len());
            for (i, (q0, q1, t)) in model.iter().enumerate() {
                proptest::prop_assert_eq!(c.get(i), (*q0, *q1, t.as_str()));
            }
            proptest::prop_assert!(c.iter().rev().eq(model.iter().rev().map(|(a, b, t)| (*a, *b, t.as_str()))));
            // The runes removed, read from the packing, over any range.
            let (from, to) = ((cut / 2).min(model.len()), cut.min(model.len()));
            for r in [0..model.len(), from..to, to..model.len()] {
                let want: u64 = model[r.clone()].iter().map(|(q0, q1, _)| q1 - q0).sum();
                proptest::prop_assert_eq!(c.removed_runes(r), want);
            }
            let bytes = postcard::to_allocvec(&c).unwrap();
            proptest::prop_assert_eq!(&bytes, &postcard::to_allocvec(&stored(&model)).unwrap());
            let back: Changes = postcard::from_bytes(&bytes).unwrap();
            proptest::prop_assert!(back == c);
            // Sorted stably by place; a change starting inside the one
            // before it said.
            let mut sorted = c.clone();
            let mut by_place = model.clone();
            by_place.sort_by_key(|(q0, q1, _)| (*q0, *q1));
            let inside = by_place.windows(2).find(|w| w[1].0 < w[0].1).map(|w| w[1].0);
            match sorted.sort(None) {
                Ok(_) => proptest::prop_assert_eq!(inside, None),
                Err(q0) => proptest::prop_assert_eq!(inside, Some(q0)),
            }
            proptest::prop_assert!(sorted.iter().eq(by_place.iter().map(|(a, b, t)| (*a, *b, t.as_str()))));
            let cut = cut.min(model.len());
            // Split where a block begins (its blocks moved whole), then
            // made on after, as a list made so from the start.
            let at_block = cut / BLOCK * BLOCK;
            let mut head = c.clone();
            let mut moved = head.split_off(at_block);
            proptest::prop_assert!(head.iter().eq(model[..at_block].iter().map(|(a, b, t)| (*a, *b, t.as_str()))));
            proptest::prop_assert!(moved.iter().eq(model[at_block..].iter().map(|(a, b, t)| (*a, *b, t.as_str()))));
            head.push(3, 4, "é");
            moved.push(5, 6, "y");
            proptest::prop_assert_eq!(head.get(at_block), (3, 4, "é"));
            proptest::prop_assert_eq!(moved.get(model.len() - at_block), (5, 6, "y"));
            let (mut moved_sorted, mut made_so): (Changes, Changes) = (moved.clone(), moved.iter().collect());
            proptest::prop_assert_eq!(moved_sorted.sort(None), made_so.sort(None));
            proptest::prop_assert!(moved_sorted == made_so);
            let tail = c.split_off(cut);
            proptest::prop_assert!(c.iter().eq(model[..cut].iter().map(|(a, b, t)| (*a, *b, t.as_str()))));
            proptest::prop_assert!(tail.iter().eq(model[cut..].iter().map(|(a, b, t)| (*a, *b, t.as_str()))));
            c.push(7, 8, "x");
            proptest::prop_assert_eq!(c.get(cut), (7, 8, "x"));
            proptest::prop_assert!(c.iter().take(cut).eq(model[..cut].iter().map(|(a, b, t)| (*a, *b, t.as_str()))));
            // What is left, made on after, sorts as the same list made
            // from the start does (what adding it found carried over).
            let fresh: Changes = c.iter().collect();
            let (mut left, mut made_anew) = (c.clone(), fresh.clone());
            proptest::prop_assert_eq!(left.sort(None), made_anew.sort(None));
            proptest::prop_assert!(left == made_anew);
            // Changes of nothing left out, and only those.
            let mut kept = c.clone();
            kept.drop_empty();
            proptest::prop_assert!(kept.iter().eq(c.iter().filter(|(q0, q1, t)| q0 != q1 || !t.is_empty())));
        }
    }

    /// A whole-file substitution's changes, one a few runes after
    /// another: about 4 bytes each, not 24.
    #[test]
    fn a_million_near_changes_cost_four_bytes_each() {
        let mut c = Changes::new();
        for i in 0..1_000_000u64 {
            c.push(i * 13, i * 13 + 1, "b");
        }
        c.shrink_to_fit();
        let per = (c.held_bytes() - c.text.len()) as f64 / c.len() as f64;
        assert!(per < 5.0, "{per:.1} bytes a change");
        assert_eq!(c.get(999_999), (999_999 * 13, 999_999 * 13 + 1, "b"));
    }

    #[test]
    fn a_stored_list_that_does_not_fit_its_text_is_refused() {
        let bad = Stored { places: vec![Place { q0: 0, q1: 1, end: 5 }], text: "ab".into() };
        assert!(postcard::from_bytes::<Changes>(&postcard::to_allocvec(&bad).unwrap()).is_err());
        let split = Stored { places: vec![Place { q0: 0, q1: 1, end: 1 }], text: "é".into() };
        assert!(postcard::from_bytes::<Changes>(&postcard::to_allocvec(&split).unwrap()).is_err());
    }
}
