//! A file of several entries' worth, opened and got again: read in
//! pieces (a rune that one piece's end cuts carried to the next) and
//! proposed as `ReplacePieces`, by the UI where it reads files itself
//! and by the daemon where it does not; the body is the file in both.

use crate::session::Rig;

/// About 2.2 MB of lines with two- and three-byte runes: three pieces.
fn big(seed: usize) -> String {
    (0..110_000).map(|i| format!("{i} é 日本 {seed}\n")).collect()
}

#[test]
fn a_get_of_a_file_of_many_pieces_is_the_file_in_the_ui_and_the_daemon() {
    for local in [true, false] {
        let mut r = Rig::start(if local { "big-get-ui" } else { "big-get-daemon" }, local);
        let path = r.ns.join("big.txt");
        std::fs::write(&path, big(1)).unwrap();
        let w = r.open(&path.display().to_string());
        assert!(r.body_text(w) == big(1), "opened (read by the UI: {local})");
        std::fs::write(&path, big(2)).unwrap();
        r.run(w, "Get");
        assert!(r.body_text(w) == big(2), "got again, in the daemon (read by the UI: {local})");
        let link = r.ui().host.att.lock();
        let shown = link.node().unwrap().state.buffer(w.body).unwrap().text.to_string();
        assert!(shown == big(2), "got again, in the UI (read by the UI: {local})");
    }
}
