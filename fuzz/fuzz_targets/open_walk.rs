//! Opens an arbitrary data file (or an edit script over a real one) and walks all of it: never a panic.
//! The logic lives in crates/cairn/tests/support (shared with tests/fuzz_replay.rs).
#![no_main]

#[path = "../../crates/cairn/tests/support/mod.rs"]
mod support;

libfuzzer_sys::fuzz_target!(|data: &[u8]| support::open_walk(data));
