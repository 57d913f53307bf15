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
    find_next_with(text, needle, from, |rope, finder, start, end| halves(ALONE_BELOW, rope, finder, start, end))
}

/// The first match of `finder` lying within bytes `start..end` of `rope`,
/// as [`find_in_chunks`] finds it: in this thread if the range is shorter
/// than `alone_below`, else its halves side by side.
fn halves(alone_below: usize, rope: &Rope, finder: &Finder<'_>, start: usize, end: usize) -> Option<usize> {
    let alone = || find_in_chunks(rope, finder, start, end, &|| false);
    let last = end.min(rope.len_bytes());
    if last.saturating_sub(start) < alone_below.max(1) {
        return alone();
    }
    let mid = start + (last - start) / 2;
    // The first half's matches start before `mid` and may end past it.
    let first_end = (mid + finder.needle().len().saturating_sub(1)).min(end);
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
        // A panic there is one here, as it would be in one thread.
        let second = second.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        first.or(second)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whatever the range and the needle, the halves find what one thread
    /// finds: every start and end over a text of many chunks and runes of
    /// every width, needles in either half, across the cut, at the ends,
    /// longer than a chunk, and nowhere.
    #[test]
    fn halves_find_what_one_thread_finds() {
        let filler: String = "ab\u{e9}\u{2713} \u{1d11e}\n".chars().cycle().take(3000).collect();
        let third = filler.char_indices().nth(1000).map_or(0, |(i, _)| i);
        let mut t = filler.clone();
        t.insert_str(third, "needle");
        let text = Text::from(t.as_str());
        assert!(text.rope().chunks().count() > 4, "many chunks");
        let long: String = filler.chars().skip(3).take(1500).collect();
        let bytes = t.len();
        let runes = t.chars().count();
        let (first, last): (String, String) = (t.chars().take(3).collect(), t.chars().skip(runes - 3).collect());
        let needles = ["needle", "needlf", "\u{e9}\u{2713}", "\n", &long, &first, &last];
        let ends = [0, 1, 5, third + 5, third + 6, third + 7, bytes / 2, bytes - 1, bytes, usize::MAX];
        for needle in needles {
            let finder = Finder::new(needle.as_bytes());
            let same = |start: usize, end: usize| {
                let one = find_in_chunks(text.rope(), &finder, start, end, &|| false);
                let two = halves(0, text.rope(), &finder, start, end);
                assert_eq!(two, one, "{needle:?} in {start}..{end}");
            };
            for start in (0..=bytes).step_by(97).chain([third - 1, third, third + 1, bytes - 6]) {
                for end in ends.iter().copied().filter(|&e| e >= start) {
                    same(start, end);
                }
            }
            // Ranges whose cut falls just after, at and just before where
            // an occurrence starts.
            // (A range of `2k` bytes from `p - k` is cut at `p`.)
            for (p, _) in t.match_indices(needle).take(5) {
                let n = needle.len();
                for k in [n, n + 1, n + 7, 500].into_iter().filter(|&k| k <= p) {
                    for width in 2 * k - 2..=2 * k + 3 {
                        same(p - k, p - k + width);
                    }
                }
            }
        }
        // Through `find_next`, a big text cut for real, from anywhere.
        let big: String = filler.chars().cycle().take(2_500_000).collect::<String>() + "needle";
        let text = Text::from(big.as_str());
        assert!(text.len_bytes() >= ALONE_BELOW);
        let at = big.chars().count() as u64 - 6;
        for from in [0, 1, at / 2, at, at + 1, at + 6] {
            assert_eq!(find_next(&text, "needle", from), Some((at, at + 6)), "from {from}");
            assert_eq!(find_next(&text, "needle", from), apex_core::look::find_next(&text, "needle", from));
        }
    }
}
