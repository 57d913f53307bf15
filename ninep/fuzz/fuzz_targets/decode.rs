//! Fuzz the 9P decoder: `cargo fuzz run decode` in `ninep`. Whatever
//! the bytes, framing and decoding return a value or an error, never panic,
//! and anything that decodes encodes back to the same frame.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    while let Ok(Some(n)) = apex_ninep::check(rest, 1 << 16) {
        if let Ok(msg) = apex_ninep::parse(&rest[..n]) {
            assert_eq!(apex_ninep::to_bytes(&msg), &rest[..n]);
        }
        rest = &rest[n..];
    }
    let _ = apex_ninep::parse_stats(data);
});
