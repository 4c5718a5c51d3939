//! Damages a logged environment's commit log (an edit script, resealed or not) and opens it:
//! the replay gives a typed error or a sound environment, never a panic. The logic lives in
//! crates/cairn/tests/support (shared with tests/fuzz_replay.rs).
#![no_main]

#[path = "../../crates/cairn/tests/support/mod.rs"]
mod support;

libfuzzer_sys::fuzz_target!(|data: &[u8]| support::replay_log(data));
