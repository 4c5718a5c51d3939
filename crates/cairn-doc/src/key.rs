//! The order-preserving encoding of indexed JSON values, and the names this crate gives to
//! Cairn's databases.
//!
//! Invariants:
//! - For any two indexable values `a`, `b`: `a < b` in the documented total order (booleans,
//!   then numbers, then strings; `false < true`; numbers as f64; strings by their UTF-8
//!   bytes) if and only if `encode(a) < encode(b)` bytewise. Equal values encode equally
//!   (`-0.0` and `0.0` are one number).
//! - An encoding is never a proper prefix of another (strings end with a terminator the
//!   escaping cannot produce), so appending anything to an encoding keeps the order.
//! - Names (collections, indexes) are 1 to 64 bytes of `[A-Za-z0-9_.-]`: they never contain
//!   the `:` that separates the parts of a database name, so no two databases collide.
//!
//! The byte table is in docs/doc.md, "Index keys".

use crate::{Error, Result};
use serde_json::Value;

/// Type tag of `false`. The tags order the types: booleans < numbers < strings.
pub const TAG_FALSE: u8 = 0x01;
/// Type tag of `true`.
pub const TAG_TRUE: u8 = 0x02;
/// Type tag of a number: 8 bytes follow.
pub const TAG_NUMBER: u8 = 0x03;
/// Type tag of a string: the escaped bytes and the terminator follow.
pub const TAG_STRING: u8 = 0x04;

/// Encodes an indexable value (boolean, number, string); `None` for null, arrays and objects,
/// which indexes leave out (a document whose field is missing or of such a type has no entry).
pub fn encode(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::Bool(false) => Some(vec![TAG_FALSE]),
        Value::Bool(true) => Some(vec![TAG_TRUE]),
        Value::Number(n) => {
            // serde_json gives every number as f64 (integers beyond 2^53 round): numbers are
            // compared as f64, which is what JSON's own model promises across implementations.
            let f = n.as_f64()?;
            let mut out = Vec::with_capacity(9);
            out.push(TAG_NUMBER);
            out.extend_from_slice(&f64_key(f));
            Some(out)
        }
        Value::String(s) => {
            let mut out = Vec::with_capacity(s.len() + 3);
            out.push(TAG_STRING);
            for &b in s.as_bytes() {
                // 0x00 is escaped to 0x00 0xFF and the end is 0x00 0x01: a string that goes on
                // (escaped 0x00 or any other byte, all > 0x01 after a 0x00, or >= 0x01 alone)
                // sorts after one that ends there.
                if b == 0 {
                    out.extend_from_slice(&[0x00, 0xFF]);
                } else {
                    out.push(b);
                }
            }
            out.extend_from_slice(&[0x00, 0x01]);
            Some(out)
        }
        _ => None,
    }
}

/// The value at `path` (a JSON pointer) of `doc`, encoded, if it is indexable.
pub fn encode_at(doc: &Value, path: &str) -> Option<Vec<u8>> {
    doc.pointer(path).and_then(encode)
}

/// Big-endian bytes of `f` whose unsigned order is the numeric order: positive numbers get
/// their sign bit set, negative ones all bits flipped (so larger magnitudes sort lower).
fn f64_key(f: f64) -> [u8; 8] {
    // -0.0 == 0.0 numerically: one encoding, so an equality query finds both.
    let f = if f == 0.0 { 0.0 } else { f };
    let bits = f.to_bits();
    let k = if bits >> 63 == 1 {
        !bits
    } else {
        bits | (1 << 63)
    };
    k.to_be_bytes()
}

/// Checks a collection or index name (see the module invariants).
pub fn check_name(what: &str, name: &str) -> Result<()> {
    let ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(Error::Invalid(format!(
            "{what} name {name:?}: 1 to 64 characters of A-Z a-z 0-9 _ . -"
        )))
    }
}

/// Longest document id in bytes. Ids are keys of the documents database and values of every
/// index's sorted-duplicates database, both bounded by Cairn's key size (1,953 bytes at 4 KiB
/// pages); ids are also carried in feed records, continuation tokens and (in the server)
/// URLs, so they are held to a size that keeps those small.
pub const MAX_ID_LEN: usize = 255;

/// Checks a document id: non-empty UTF-8 of at most [`MAX_ID_LEN`] bytes.
pub fn check_id(id: &str) -> Result<()> {
    if id.is_empty() || id.len() > MAX_ID_LEN {
        return Err(Error::Invalid(format!(
            "document id of {} bytes (1 to {MAX_ID_LEN})",
            id.len()
        )));
    }
    Ok(())
}

/// Database names of one collection; `:` separates the parts (names never contain it).
pub fn docs_db(coll: &str) -> String {
    format!("doc:{coll}:docs")
}
/// The collection's catalog: sequence counters, retention, index definitions.
pub fn meta_db(coll: &str) -> String {
    format!("doc:{coll}:meta")
}
/// The collection's change feed.
pub fn feed_db(coll: &str) -> String {
    format!("doc:{coll}:feed")
}
/// One index's sorted-duplicates database (encoded value -> document ids).
pub fn index_db(coll: &str, index: &str) -> String {
    format!("doc:{coll}:ix:{index}")
}

/// Lowercase hex of `b` (continuation tokens).
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Inverse of [`hex`]; `None` on anything else.
pub fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn order_across_types_and_within() {
        let vals = [
            json!(false),
            json!(true),
            json!(f64::MIN),
            json!(-1e10),
            json!(-1.5),
            json!(-1),
            json!(-1e-300),
            json!(0),
            json!(1e-300),
            json!(1),
            json!(1.5),
            json!(2),
            json!(u64::MAX),
            json!(f64::MAX),
            json!(""),
            json!("\u{0}"),
            json!("\u{0}\u{0}"),
            json!("\u{0}a"),
            json!("\u{1}"),
            json!("a"),
            json!("a\u{0}"),
            json!("a\u{0}b"),
            json!("ab"),
            json!("b"),
            json!("é"),
        ];
        let enc: Vec<Vec<u8>> = vals.iter().map(|v| encode(v).unwrap()).collect();
        for w in enc.windows(2) {
            assert!(w[0] < w[1], "{:?} !< {:?}", w[0], w[1]);
        }
        // No encoding is a prefix of another.
        for (i, a) in enc.iter().enumerate() {
            for (j, b) in enc.iter().enumerate() {
                assert!(i == j || !b.starts_with(a), "{a:?} prefixes {b:?}");
            }
        }
    }

    #[test]
    fn zero_and_unindexable() {
        assert_eq!(encode(&json!(-0.0)), encode(&json!(0)));
        assert_eq!(encode(&json!(3)), encode(&json!(3.0)));
        assert_eq!(encode(&json!(null)), None);
        assert_eq!(encode(&json!([1])), None);
        assert_eq!(encode(&json!({"a": 1})), None);
        assert_eq!(
            encode_at(&json!({"u": {"a": 7}}), "/u/a"),
            encode(&json!(7))
        );
        assert_eq!(encode_at(&json!({"a/b": 1}), "/a~1b"), encode(&json!(1)));
        assert_eq!(unhex(&hex(b"\x00\xffab")).unwrap(), b"\x00\xffab");
        assert!(unhex("0g").is_none() && unhex("abc").is_none());
    }
}
