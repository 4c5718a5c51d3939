//! cairn-server's request-body decoder (documents, bulk bodies, names, ids, versions) over
//! arbitrary bytes: never a panic, and what it accepts is what it promises.
//! The logic lives in crates/cairn-server/tests/support (shared with tests/decode_replay.rs).
#![no_main]

#[path = "../../crates/cairn-server/tests/support/mod.rs"]
mod support;

libfuzzer_sys::fuzz_target!(|data: &[u8]| support::decode_body(data));
