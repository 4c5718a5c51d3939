//! Request decoding: content types, documents, bulk bodies, collection names and ids. Pure
//! functions over bytes, so the fuzz target (fuzz/fuzz_targets/server_decode.rs) drives them
//! without a server.
//!
//! Invariants:
//! - A document accepted by [`document`] is a JSON object, valid UTF-8, with no object (at any
//!   depth) holding the same key twice, nested at most 128 levels (serde_json's limit); the
//!   bytes stored are the client's own, trimmed of surrounding whitespace, so a GET returns
//!   them unchanged and nothing is re-serialized on either path.
//! - No input makes these functions panic: every failure is an [`ApiError`] (400, or 415
//!   for the content type), with the line and column of JSON errors.

use crate::error::ApiError;
/// The body buffer type the decoders take (re-exported for the fuzz target).
pub use axum::body::Bytes;
use axum::http::{header, HeaderMap, StatusCode};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};
use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

/// Longest collection name (bytes). Names are named-database names; short keeps them readable
/// in URLs and in `cairn stat -a`.
pub const MAX_COLLECTION_NAME: usize = 64;

/// Checks that the request says its body is JSON (`application/json`, parameters allowed, or
/// any `application/*+json`); 415 otherwise, a missing header included.
pub fn content_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mime = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    if mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json")) {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "the body must be application/json",
    )
    .with_detail(json!({ "content_type": ct })))
}

/// A JSON error as a 400 with its line and column (1-based, serde_json's).
pub fn json_error(what: &str, e: &serde_json::Error) -> ApiError {
    ApiError::bad_request(format!("malformed JSON in {what}")).with_detail(json!({
        "line": e.line(),
        "column": e.column(),
        "message": e.to_string(),
    }))
}

/// Validates a document body and returns the bytes to store (the input, trimmed).
pub fn document(body: &[u8]) -> Result<&[u8], ApiError> {
    let trimmed = trim(body);
    let mut de = serde_json::Deserializer::from_slice(trimmed);
    let is_object = Checked
        .deserialize(&mut de)
        .and_then(|o| de.end().map(|()| o))
        .map_err(|e| json_error("the document", &e))?;
    if !is_object {
        return Err(ApiError::bad_request("a document must be a JSON object"));
    }
    Ok(trimmed)
}

fn trim(b: &[u8]) -> &[u8] {
    let ws = |c: &u8| matches!(c, b' ' | b'\t' | b'\n' | b'\r');
    let start = b.iter().position(|c| !ws(c)).unwrap_or(b.len());
    let end = b.iter().rposition(|c| !ws(c)).map_or(start, |i| i + 1);
    &b[start..end]
}

/// A JSON value walked without being built: rejects duplicate keys, says whether the value was
/// an object. serde_json adds the position to errors raised here.
struct Checked;

impl<'de> DeserializeSeed<'de> for Checked {
    type Value = bool;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
        d.deserialize_any(CheckVisitor)
    }
}

struct CheckVisitor;

impl<'de> Visitor<'de> for CheckVisitor {
    type Value = bool;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_i64<E>(self, _: i64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_f64<E>(self, _: f64) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_str<E>(self, _: &str) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_unit<E>(self) -> Result<bool, E> {
        Ok(false)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<bool, A::Error> {
        while seq.next_element_seed(Checked)?.is_some() {}
        Ok(false)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<bool, A::Error> {
        // Keys are kept only to find duplicates: a document whose meaning depends on which of
        // two equal keys a reader keeps is refused rather than stored. Borrowed from the body
        // when unescaped; a short list scanned until it grows, then a hash set (measured:
        // docs/server.md, "Stored form").
        let mut few: Vec<Cow<'de, str>> = Vec::new();
        let mut many: HashSet<Cow<'de, str>> = HashSet::new();
        while let Some(k) = map.next_key::<Cow<'de, str>>()? {
            let dup = if many.is_empty() && few.len() < 16 {
                let d = few.contains(&k);
                few.push(k.clone());
                d
            } else {
                many.extend(few.drain(..));
                !many.insert(k.clone())
            };
            if dup {
                return Err(de::Error::custom(format!("duplicate key {k:?}")));
            }
            map.next_value_seed(Checked)?;
        }
        Ok(true)
    }
}

/// One item of a bulk body, as decoded.
#[derive(Debug)]
pub struct BulkItem {
    /// The document's id; `None`: assign one (a put without an id).
    pub id: Option<String>,
    /// What to do.
    pub op: BulkOp,
    /// The document (validated; a slice of the body) for puts and creates.
    pub doc: Option<Bytes>,
    /// Only if the stored version is this one (412 otherwise).
    pub if_match: Option<u64>,
}

/// A bulk operation. Part of the replicated log's encoding (module `cluster`): variants are
/// only ever added at the end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum BulkOp {
    /// Create or replace.
    Put,
    /// Create only (fails with 412 if the id exists).
    Create,
    /// Delete (404 if missing).
    Delete,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawItem<'a> {
    id: Option<String>,
    op: Option<String>,
    #[serde(borrow)]
    doc: Option<&'a RawValue>,
    if_match: Option<String>,
}

/// Largest number of items in one bulk request: one transaction holds them all, and a group
/// commit waits for it.
pub const MAX_BULK_ITEMS: usize = 10_000;

/// Decodes a bulk body: a JSON array of `{"id"?, "op"?, "doc"?, "if_match"?}`. An item that
/// is malformed as a whole (unknown op, a put without a doc) fails the request (400, with its
/// index), so that nothing of a request that says something else than meant is written; the
/// per-item outcomes (412, 404, a bad id) are the handler's.
pub fn bulk(body: &Bytes) -> Result<Vec<BulkItem>, ApiError> {
    let raw: Vec<RawItem<'_>> =
        serde_json::from_slice(body).map_err(|e| json_error("the bulk body", &e))?;
    if raw.len() > MAX_BULK_ITEMS {
        return Err(ApiError::bad_request("too many items in one bulk request")
            .with_detail(json!({ "max": MAX_BULK_ITEMS, "items": raw.len() })));
    }
    let mut out = Vec::with_capacity(raw.len());
    for (i, r) in raw.into_iter().enumerate() {
        let bad = |msg: &str, extra: Value| {
            ApiError::bad_request(format!("bulk item {i}: {msg}"))
                .with_detail(json!({ "index": i, "detail": extra }))
        };
        let op = match r.op.as_deref() {
            None | Some("put") => BulkOp::Put,
            Some("create") => BulkOp::Create,
            Some("delete") => BulkOp::Delete,
            Some(o) => return Err(bad(&format!("unknown op {o:?}"), Value::Null)),
        };
        let doc = match (op, r.doc) {
            (BulkOp::Delete, Some(_)) => return Err(bad("a delete takes no doc", Value::Null)),
            (BulkOp::Delete, None) => None,
            (_, None) => return Err(bad("a put or create needs a doc", Value::Null)),
            (_, Some(d)) => {
                let doc = document(d.get().as_bytes()).map_err(|e| bad(&e.error, e.detail))?;
                Some(body.slice_ref(doc))
            }
        };
        if op == BulkOp::Delete && r.id.is_none() {
            return Err(bad("a delete needs an id", Value::Null));
        }
        let if_match = match r.if_match {
            None => None,
            Some(v) => Some(parse_version(&v).ok_or_else(|| bad("bad if_match", json!(v)))?),
        };
        out.push(BulkItem {
            id: r.id,
            op,
            doc,
            if_match,
        });
    }
    Ok(out)
}

/// Checks a collection name: 1 to 64 bytes of ASCII letters, digits, `_`, `-` and `.`, not
/// A document's address, `/{collection}/{id}`: both checked (collection first).
pub fn address(collection: &str, id: &str, max_id: usize) -> Result<(), ApiError> {
    self::collection(collection)?;
    self::id(id, max_id)
}

/// starting with `_` (the server's own routes) or `.`.
pub fn collection(name: &str) -> Result<(), ApiError> {
    let ok_char = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'-' | b'.');
    let b = name.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= MAX_COLLECTION_NAME
        && b.iter().all(|&c| ok_char(c))
        && b[0] != b'_'
        && b[0] != b'.';
    if ok {
        return Ok(());
    }
    Err(
        ApiError::bad_request("bad collection name").with_detail(json!({
            "name": name,
            "rule": "1 to 64 of A-Z a-z 0-9 _ - ., not starting with _ or .",
        })),
    )
}

/// Checks a document id: 1 to `max` bytes (the engine's largest key), not starting with `_`
/// (reserved: `/{collection}/_bulk`).
pub fn id(id: &str, max: usize) -> Result<(), ApiError> {
    if id.is_empty() {
        return Err(ApiError::bad_request("empty id"));
    }
    if id.len() > max {
        return Err(ApiError::bad_request("id too long")
            .with_detail(json!({ "bytes": id.len(), "max": max })));
    }
    if id.starts_with('_') {
        return Err(ApiError::bad_request("ids starting with _ are reserved")
            .with_detail(json!({ "id": id })));
    }
    Ok(())
}

/// Renders a version as JSON bodies show it (hex).
pub fn version_str(version: u64) -> String {
    format!("{version:x}")
}

/// Renders a version as its ETag (a strong validator: the hex, quoted).
pub fn etag(version: u64) -> String {
    format!("\"{version:x}\"")
}

/// Parses a version as written in an ETag, an `If-Match` list member or a bulk `if_match`
/// (quotes and a weak prefix allowed).
pub fn parse_version(s: &str) -> Option<u64> {
    let s = s.trim();
    let s = s.strip_prefix("W/").unwrap_or(s);
    let s = s
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or(s);
    if s.is_empty() || s.len() > 16 {
        return None;
    }
    u64::from_str_radix(s, 16).ok()
}

/// An `If-Match` / `If-None-Match` header: `*`, or a list of versions (entries that are not
/// versions of this server can never match and are dropped). Part of the replicated log's
/// encoding (module `cluster`): variants are only ever added at the end.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Condition {
    /// `*`.
    Any,
    /// The versions listed.
    Versions(Vec<u64>),
}

impl Condition {
    /// Reads a conditional header; `None` when absent.
    pub fn from_header(headers: &HeaderMap, name: header::HeaderName) -> Option<Condition> {
        let mut found = false;
        let mut out = Vec::new();
        for v in headers.get_all(name) {
            found = true;
            let s = String::from_utf8_lossy(v.as_bytes());
            for part in s.split(',') {
                if part.trim() == "*" {
                    return Some(Condition::Any);
                }
                if let Some(v) = parse_version(part) {
                    out.push(v);
                }
            }
        }
        found.then_some(Condition::Versions(out))
    }

    /// Whether a document at `version` (`None`: absent) matches.
    pub fn matches(&self, version: Option<u64>) -> bool {
        match (self, version) {
            (_, None) => false,
            (Condition::Any, Some(_)) => true,
            (Condition::Versions(vs), Some(v)) => vs.contains(&v),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents() {
        assert_eq!(document(b" {\"a\":1} \n").unwrap(), b"{\"a\":1}");
        assert!(document(b"[1]").is_err());
        assert!(document(b"{\"a\":1,\"a\":2}").is_err());
        assert!(document(b"{\"a\":{\"b\":1,\"b\":1}}").is_err());
        assert!(
            document(b"{\"a\":1,\"\\u0061\":2}").is_err(),
            "escaped duplicate"
        );
        let wide: Vec<String> = (0..40).map(|i| format!("\"k{i}\":{i}")).collect();
        let wide = format!("{{{}}}", wide.join(","));
        assert!(document(wide.as_bytes()).is_ok());
        let dup = wide.replace("\"k39\"", "\"k3\"");
        assert!(document(dup.as_bytes()).is_err());
        assert!(document(b"{\"a\":1} x").is_err());
        assert!(document(b"{\"a\":\"\xff\"}").is_err());
        let deep = format!("{}{}", "{\"a\":".repeat(200), "1") + &"}".repeat(200);
        assert!(document(deep.as_bytes()).is_err());
        let e = document(b"{\n  \"a\": 1,\n  \"b\" 2\n}").unwrap_err();
        assert_eq!(
            (e.detail["line"].as_u64(), e.detail["column"].as_u64()),
            (Some(3), Some(7))
        );
    }

    #[test]
    fn names_ids_versions() {
        assert!(collection("users").is_ok());
        assert!(collection("_stats").is_err());
        assert!(collection("a/b").is_err());
        assert!(collection(&"x".repeat(65)).is_err());
        assert!(id("", 10).is_err());
        assert!(id("abc", 2).is_err());
        assert!(id("_bulk", 10).is_err());
        assert_eq!(parse_version(&etag(0x1234)), Some(0x1234));
        assert_eq!(parse_version("W/\"ff\""), Some(255));
        assert_eq!(parse_version("\"zz\""), None);
    }
}
