//! Look's and B3's search of a big text on two threads: its range cut in
//! two and the halves searched side by side (a rope's chunks are read at
//! a pace its tree walk sets, not the memory's, so a second thread all
//! but halves the time). The first match is the first half's if it has
//! one; the second half's search stops once the first half found one.

use apex_core::look::{find_in_chunks, find_next_with};
use apex_core::text::Text;
use memchr::memmem::Finder;
use ropey::Rope;
use std::sync::atomic::{AtomicBool, Ordering};

/// Below this many bytes searched, a thread costs more than it saves.
const ALONE_BELOW: usize = 4 << 20;

/// [`apex_core::look::find_next`], each big range searched in halves side
/// by side: the same match.
pub fn find_next(text: &Text, needle: &str, from: u64) -> Option<(u64, u64)> {
    find_next_with(text, needle, from, halves)
}

/// The first match of `finder` lying within bytes `start..end` of `rope`,
/// as [`find_in_chunks`] finds it.
fn halves(rope: &Rope, finder: &Finder<'_>, start: usize, end: usize) -> Option<usize> {
    let alone = || find_in_chunks(rope, finder, start, end, &|| false);
    let last = end.min(rope.len_bytes());
    if last.saturating_sub(start) < ALONE_BELOW {
        return alone();
    }
    let mid = start + (last - start) / 2;
    // The first half's matches start before `mid` and may end past it.
    let first_end = mid + finder.needle().len() - 1;
    let found_first = AtomicBool::new(false);
    let stop = || found_first.load(Ordering::Relaxed);
    std::thread::scope(|s| {
        let second = std::thread::Builder::new()
            .name("look".into())
            .spawn_scoped(s, || find_in_chunks(rope, finder, mid, end, &stop));
        // No thread to be had: the range searched here, whole.
        let Ok(second) = second else { return alone() };
        let first = find_in_chunks(rope, finder, start, first_end, &|| false);
        found_first.store(first.is_some(), Ordering::Relaxed);
        let second = match second.join() {
            Ok(found) => found,
            Err(_) => find_in_chunks(rope, finder, mid, end, &|| false),
        };
        first.or(second)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same match as the search in one thread, wherever the needle
    /// lies: in either half, across the cut between them, at the ends,
    /// nowhere; found from anywhere, wrapping.
    #[test]
    fn halves_find_what_one_thread_finds() {
        let filler: String = "ab\u{e9}\u{2713} \u{1d11e}\n".chars().cycle().take(2_500_000).collect();
        let len = filler.chars().count();
        for at in [0, 1, len / 2 - 3, len / 2 - 1, len / 2, len / 2 + 1, len - 1, len] {
            let mut t: String = filler.chars().take(at).collect();
            t.push_str("needle");
            t.extend(filler.chars().skip(at));
            let text = Text::from(t.as_str());
            assert!(text.len_bytes() >= ALONE_BELOW, "big enough to be cut in two");
            for from in [0, at as u64 / 2, at as u64, at as u64 + 1, (len + 6) as u64] {
                let one = apex_core::look::find_next(&text, "needle", from);
                assert_eq!(one, Some((at as u64, at as u64 + 6)), "needle at {at}, from {from}");
                assert_eq!(find_next(&text, "needle", from), one, "needle at {at}, from {from}");
            }
            // A needle cut by the halves' boundary wherever it falls, in
            // runes of every width.
            let cut = t.len() / 2;
            let runes: String = t[t.floor_char_boundary(cut - 5)..t.ceil_char_boundary(cut + 5)].to_string();
            for from in [0, at as u64] {
                assert_eq!(find_next(&text, &runes, from), apex_core::look::find_next(&text, &runes, from));
            }
            assert_eq!(find_next(&text, "needlf", 0), None);
        }
    }
}
