//! `Changes`: one text's changes as an Edit makes them (a whole-file
//! substitution's by the million) and proposes them: each change's place
//! beside the others and every text the changes put in one after another
//! in one string, not a string each, so a change costs its place's 24
//! bytes and its text, and making one allocates nothing of its own.

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

/// A block's base: its first change's `q0`, and where in the text its
/// first change's text begins; or, for a block whose changes do not fit
/// [`Near`], where its whole places begin in `wide`.
#[derive(Clone, Copy, Debug)]
struct Base {
    q0: u64,
    start: u64,
    wide: Option<u32>,
}

/// A change's place against its block's base, in 10 bytes: `q0` after
/// the base's (4), the text's end after the base's start (4), and
/// `q1 - q0` (2). A whole-file substitution's millions of changes cost
/// 10 bytes each rather than 24.
type Near = [u8; 10];

/// Changes to one text, each `q0..q1` of the text as it was becoming its
/// text. In the order made until [`Changes::sort`] puts them in order of
/// place. Stored as a list of places and one string; held as blocks of
/// [`BLOCK`] places near a base, and places whole for a block with one
/// that is not near (a text of more than 4 GiB, a change made before the
/// block's first, a change of more than 65,535 runes).
#[derive(Clone, Default)]
pub struct Changes {
    bases: Vec<Base>,
    /// One per change (a wide block's are not read).
    near: Vec<Near>,
    /// The places of wide blocks, each block's in a run.
    wide: Vec<Place>,
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
    pub fn new() -> Changes {
        Changes::default()
    }

    pub fn len(&self) -> usize {
        self.near.len()
    }

    pub fn is_empty(&self) -> bool {
        self.near.is_empty()
    }

    /// Adds a change of `q0..q1` to `text`.
    pub fn push(&mut self, q0: u64, q1: u64, text: &str) {
        self.push_with(q0, q1, |out| out.push_str(text));
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
        let i = self.near.len();
        if i % BLOCK == 0 {
            self.bases.push(Base { q0: p.q0, start, wide: None });
        }
        let base = *self.bases.last().expect("a block begun");
        if base.wide.is_some() {
            self.wide.push(p);
            self.near.push([0; 10]);
            return;
        }
        let near = (|| {
            let q0 = u32::try_from(p.q0.checked_sub(base.q0)?).ok()?;
            let end = u32::try_from(p.end.checked_sub(base.start)?).ok()?;
            let len = u16::try_from(p.q1.checked_sub(p.q0)?).ok()?;
            let mut n = [0; 10];
            n[..4].copy_from_slice(&q0.to_le_bytes());
            n[4..8].copy_from_slice(&end.to_le_bytes());
            n[8..].copy_from_slice(&len.to_le_bytes());
            Some(n)
        })();
        match near {
            Some(n) => self.near.push(n),
            None => {
                // The block goes wide: its places so far whole, then this.
                let first = i - i % BLOCK;
                let at = u32::try_from(self.wide.len()).expect("fewer than 4G wide places");
                for j in first..i {
                    let whole = self.whole(j);
                    self.wide.push(whole);
                }
                self.wide.push(p);
                self.near.push([0; 10]);
                self.bases.last_mut().expect("a block begun").wide = Some(at);
            }
        }
    }

    /// Change `i`'s place.
    fn whole(&self, i: usize) -> Place {
        let base = self.bases[i / BLOCK];
        if let Some(at) = base.wide {
            return self.wide[at as usize + i % BLOCK];
        }
        let n = &self.near[i];
        let q0 = base.q0 + u64::from(u32::from_le_bytes(n[..4].try_into().expect("4 bytes")));
        let end = base.start + u64::from(u32::from_le_bytes(n[4..8].try_into().expect("4 bytes")));
        let len = u64::from(u16::from_le_bytes(n[8..].try_into().expect("2 bytes")));
        Place { q0, q1: q0 + len, end }
    }

    /// Where change `i`'s text ends in `text` (its end alone decoded).
    fn end(&self, i: usize) -> usize {
        let base = self.bases[i / BLOCK];
        let end = match base.wide {
            Some(at) => return self.wide[at as usize + i % BLOCK].end as usize,
            None => u32::from_le_bytes(self.near[i][4..8].try_into().expect("4 bytes")),
        };
        (base.start + u64::from(end)) as usize
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
        Iter { changes: self, front: 0, back: self.len(), start: 0 }
    }

    /// Changes `range`, in the list's order, each with its text.
    pub fn iter_range(&self, range: std::ops::Range<usize>) -> Iter<'_> {
        let start = match range.is_empty() {
            true => 0,
            false => self.start(range.start),
        };
        Iter { changes: self, front: range.start, back: range.end, start }
    }

    /// What changes `range` put in, one after another: a slice of the
    /// list's one string.
    pub fn text_of(&self, range: std::ops::Range<usize>) -> &str {
        match range.is_empty() {
            true => "",
            false => &self.text[self.start(range.start)..self.end(range.end - 1)],
        }
    }

    /// The bytes of text change `i` puts in.
    pub fn text_len(&self, i: usize) -> usize {
        self.end(i) - self.start(i)
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
            sorted.near.reserve(order.len());
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
        self.near.shrink_to_fit();
        self.wide.shrink_to_fit();
        self.text.shrink_to_fit();
    }

    /// Splits the list at change `at`: the changes from there on are
    /// returned, the ones before stay.
    pub fn split_off(&mut self, at: usize) -> Changes {
        let start = self.start(at);
        let mut tail = Changes::new();
        tail.near.reserve(self.len() - at);
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
        // What stays: the blocks up to `at`, a wide one's places up to it.
        let blocks = at.div_ceil(BLOCK);
        let first_gone = self.bases[blocks.min(self.bases.len())..].iter().find_map(|b| b.wide);
        if let Some(w) = first_gone {
            self.wide.truncate(w as usize);
        }
        if let Some(w) = self.bases.get(blocks.wrapping_sub(1)).and_then(|b| b.wide).filter(|_| at % BLOCK != 0) {
            self.wide.truncate(w as usize + at % BLOCK);
        }
        self.bases.truncate(blocks);
        self.near.truncate(at);
        tail
    }

    /// Bytes the list holds in memory, its room included.
    #[cfg(test)]
    fn held_bytes(&self) -> usize {
        self.bases.capacity() * std::mem::size_of::<Base>()
            + self.near.capacity() * std::mem::size_of::<Near>()
            + self.wide.capacity() * std::mem::size_of::<Place>()
            + self.text.capacity()
    }
}

/// The changes of a list in order, each with its text.
pub struct Iter<'a> {
    changes: &'a Changes,
    front: usize,
    back: usize,
    /// Where the front change's text starts.
    start: usize,
}

impl<'a> Iterator for Iter<'a> {
    type Item = (u64, u64, &'a str);

    fn next(&mut self) -> Option<Self::Item> {
        if self.front == self.back {
            return None;
        }
        let p = self.changes.whole(self.front);
        let text = &self.changes.text[self.start..p.end as usize];
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
        out.near.reserve(places.len());
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
        assert_eq!(c.text_len(2), 2);
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
    /// another: about 10 bytes each, not 24.
    #[test]
    fn a_million_near_changes_cost_ten_bytes_each() {
        let mut c = Changes::new();
        for i in 0..1_000_000u64 {
            c.push(i * 13, i * 13 + 1, "b");
        }
        c.shrink_to_fit();
        let per = (c.held_bytes() - c.text.len()) as f64 / c.len() as f64;
        assert!(per < 10.5, "{per:.1} bytes a change");
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
