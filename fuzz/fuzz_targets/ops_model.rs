//! Operation sequences against a BTreeMap model with injected I/O errors.
//! The logic lives in crates/cairn/tests/support (shared with tests/fuzz_replay.rs).
#![no_main]

#[path = "../../crates/cairn/tests/support/mod.rs"]
mod support;

libfuzzer_sys::fuzz_target!(|data: &[u8]| support::ops_model(data));
