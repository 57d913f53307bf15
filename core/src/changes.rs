//! `Changes`: one text's changes as an Edit makes them (a whole-file
//! substitution's by the million) and proposes them: each change's place
//! beside the others and every text the changes put in one after another
//! in one string, not a string each, so a change costs its place's 24
//! bytes and its text, and making one allocates nothing of its own.

use serde::{Deserialize, Serialize};

/// Where one change is: runes `q0..q1` of the text as it was, and where
/// (in bytes) what it puts in ends in the list's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Place {
    q0: u64,
    q1: u64,
    end: u64,
}

/// Changes to one text, each `q0..q1` of the text as it was becoming its
/// text. In the order made until [`Changes::sort`] puts them in order of
/// place.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Changes {
    places: Vec<Place>,
    text: String,
}

impl Changes {
    pub fn new() -> Changes {
        Changes::default()
    }

    pub fn len(&self) -> usize {
        self.places.len()
    }

    pub fn is_empty(&self) -> bool {
        self.places.is_empty()
    }

    /// Adds a change of `q0..q1` to `text`.
    pub fn push(&mut self, q0: u64, q1: u64, text: &str) {
        self.push_with(q0, q1, |out| out.push_str(text));
    }

    /// Adds a change of `q0..q1` to what `write` appends to the string it
    /// is given (a substitution's replacement, expanded in place).
    pub fn push_with(&mut self, q0: u64, q1: u64, write: impl FnOnce(&mut String)) {
        write(&mut self.text);
        self.places.push(Place { q0, q1, end: self.text.len() as u64 });
    }

    /// The start of change `i`'s text in `text`.
    fn start(&self, i: usize) -> usize {
        match i {
            0 => 0,
            i => self.places[i - 1].end as usize,
        }
    }

    /// Change `i`: its place and its text.
    pub fn get(&self, i: usize) -> (u64, u64, &str) {
        let p = self.places[i];
        (p.q0, p.q1, &self.text[self.start(i)..p.end as usize])
    }

    /// Every change, in the list's order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = (u64, u64, &str)> + ExactSizeIterator + '_ {
        (0..self.places.len()).map(|i| self.get(i))
    }

    /// The bytes of text change `i` puts in.
    pub fn text_len(&self, i: usize) -> usize {
        self.places[i].end as usize - self.start(i)
    }

    /// Puts the changes in order of place, changes at one place in the
    /// order they were made (stably), and returns where change `follow`
    /// went; `Err(q0)` where a change starts inside the one before it.
    pub fn sort(&mut self, follow: Option<usize>) -> Result<Option<usize>, u64> {
        let in_order = self.places.windows(2).all(|w| (w[0].q0, w[0].q1) <= (w[1].q0, w[1].q1));
        let mut followed = follow;
        if !in_order {
            let mut order: Vec<usize> = (0..self.places.len()).collect();
            order.sort_by_key(|&i| (self.places[i].q0, self.places[i].q1));
            let mut sorted = Changes { places: Vec::with_capacity(order.len()), text: String::new() };
            sorted.text.reserve(self.text.len());
            for (at, &i) in order.iter().enumerate() {
                let (q0, q1, text) = self.get(i);
                sorted.push(q0, q1, text);
                if follow == Some(i) {
                    followed = Some(at);
                }
            }
            *self = sorted;
        }
        match self.places.windows(2).find(|w| w[1].q0 < w[0].q1) {
            Some(w) => Err(w[1].q0),
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

    /// Gives back the memory past what the list holds (a list taken
    /// apart from its end keeps its room otherwise).
    pub fn shrink_to_fit(&mut self) {
        self.places.shrink_to_fit();
        self.text.shrink_to_fit();
    }

    /// Splits the list at change `at`: the changes from there on are
    /// returned, the ones before stay.
    pub fn split_off(&mut self, at: usize) -> Changes {
        let start = self.start(at);
        let places = self.places.split_off(at).into_iter().map(|p| Place { end: p.end - start as u64, ..p }).collect();
        Changes { places, text: self.text.split_off(start) }
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
}
