//! Every decoder of cairn::format over arbitrary bytes: never a panic.
//! The logic lives in crates/cairn/tests/support (shared with tests/fuzz_replay.rs).
#![no_main]

#[path = "../../crates/cairn/tests/support/mod.rs"]
mod support;

libfuzzer_sys::fuzz_target!(|data: &[u8]| support::decode_pages(data));
