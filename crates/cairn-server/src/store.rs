//! The documents in the engine: the stored form, versions, assigned ids, and the synchronous
//! operations the handlers run on the blocking pool (reads in a read transaction, writes
//! inside [`cairn::Env::write_grouped`]).
//!
//! Collections are `cairn_doc` collections (docs/doc.md): every document write goes through
//! `cairn_doc::Collection::put_text` / `delete` in the request's write transaction, so the
//! collection's index entries and change-feed record commit with the document or not at all.
//!
//! Stored form (docs/server.md, "Stored form"; cairn-doc's layout): in the database
//! `doc:{collection}:docs`, key = the id's UTF-8 bytes, value = `[version: u64 BE][seq: u64
//! BE][the document's JSON bytes, as the client sent them]`.
//!
//! Invariants:
//! - A collection (its cairn-doc databases) is created by the first write into it.
//! - A document's ETag is its `seq`: the feed sequence number of the write that stored it.
//!   Sequence numbers of a collection grow with every write and are never reused, so a
//!   document deleted and created again never gets back an earlier ETag.
//! - A conditional write evaluates its condition and writes in the same transaction, so no
//!   other write comes between (one writer at a time).
//! - A failed condition or missing document changes nothing, the collection's creation
//!   included (the request's closure is rolled back as a whole).

use crate::decode::{self, BulkItem, BulkOp, Condition};
use crate::error::ApiError;
use axum::http::StatusCode;
use cairn::{Database, Env, RwTxn};
use cairn_doc::{key, Collection};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::ops::Bound;
use std::sync::{Arc, Mutex};

/// Bytes before the document (cairn-doc's version and seq).
pub const HEADER: usize = 16;

/// Decodes a stored value into its ETag version (the seq) and document.
pub fn decode(v: &[u8]) -> Result<(u64, &[u8]), ApiError> {
    if v.len() < HEADER {
        return Err(ApiError::internal(
            "a stored document has an unknown format",
        ));
    }
    let mut seq = [0u8; 8];
    seq.copy_from_slice(&v[8..HEADER]);
    Ok((u64::from_be_bytes(seq), &v[HEADER..]))
}

/// The collections known to exist (their handles, opened once; `cairn_doc::Handle` keeps
/// the parsed index definitions between writes). Shared (`Arc`), so that a read takes its
/// collection without copying the handle's name.
#[derive(Default)]
pub struct Colls {
    map: Mutex<HashMap<String, Arc<cairn_doc::Handle>>>,
}

impl Colls {
    /// The handle of a collection known to exist.
    pub fn cached(&self, name: &str) -> Option<Arc<cairn_doc::Handle>> {
        self.map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }

    /// The handle of an existing collection (opened and kept), `None` if it does not exist.
    /// Not to be called while this thread holds a write transaction.
    pub fn existing(
        &self,
        env: &std::sync::Arc<Env>,
        name: &str,
    ) -> Result<Option<Arc<cairn_doc::Handle>>, ApiError> {
        if let Some(h) = self.cached(name) {
            return Ok(Some(h));
        }
        {
            let txn = env.read_txn()?;
            match txn.open_db(Some(&key::docs_db(name))) {
                Ok(_) => {}
                Err(cairn::Error::DbNotFound { .. }) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
        let h = Arc::new(cairn_doc::Handle::open(env.clone(), name).map_err(doc_error)?);
        self.map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(name.to_string(), h.clone());
        Ok(Some(h))
    }

    /// The collection for a write in `txn`, created (in `txn`) if it does not exist.
    pub(crate) fn for_write(
        &self,
        txn: &mut RwTxn<'_>,
        name: &str,
    ) -> Result<Collection, ApiError> {
        match self.cached(name) {
            Some(h) => Ok(h.collection().clone()),
            None => Collection::create(txn, name).map_err(doc_error),
        }
    }
}

/// The names of the collections of the environment.
pub fn collection_names(env: &Env) -> Result<Vec<String>, ApiError> {
    let txn = env.read_txn()?;
    Ok(txn
        .db_names()?
        .into_iter()
        .filter_map(|n| {
            n.strip_prefix("doc:")
                .and_then(|r| r.strip_suffix(":docs"))
                .filter(|c| !c.contains(':'))
                .map(str::to_string)
        })
        .collect())
}

/// A cairn-doc error as the client sees it.
pub fn doc_error(e: cairn_doc::Error) -> ApiError {
    use cairn_doc::Error as E;
    match e {
        E::Cairn(e) => e.into(),
        E::UniqueViolation {
            index,
            value,
            existing_id,
        } => ApiError::new(StatusCode::CONFLICT, "unique index violation")
            .with_detail(json!({"index": index, "value": value, "existing_id": existing_id})),
        E::IndexValueTooLarge { index, len } => ApiError::bad_request("indexed value too long")
            .with_detail(json!({"index": index, "bytes": len})),
        E::IndexBuilding { index, done, total } => ApiError::new(
            StatusCode::CONFLICT,
            "the index is building; retry when it is ready",
        )
        .with_detail(json!({"index": index, "done": done, "total": total})),
        E::IndexFailed { index, reason } => ApiError::new(
            StatusCode::CONFLICT,
            "the index failed to build; drop it and declare it again",
        )
        .with_detail(json!({"index": index, "reason": reason})),
        E::VersionMismatch { id, .. } => {
            ApiError::precondition("version mismatch").with_detail(json!({"id": id}))
        }
        E::NoIndex(n) => ApiError::not_found("no such index").with_detail(json!(n)),
        E::IndexExists(n) => ApiError::new(
            StatusCode::CONFLICT,
            "an index of that name exists with another definition",
        )
        .with_detail(json!(n)),
        E::FeedTrimmed { since, oldest } => ApiError::new(
            StatusCode::GONE,
            "changes after `since` were trimmed from the feed",
        )
        .with_detail(json!({"since": since, "oldest": oldest})),
        E::Invalid(w) => ApiError::bad_request("invalid argument").with_detail(json!(w)),
        other => ApiError::internal("document store error").with_detail(json!(other.to_string())),
    }
}

/// Time-ordered 128-bit ids: 48 bits of Unix milliseconds, then 80 bits that start random in
/// each millisecond and count up within one; rendered in Crockford's base32 (26 characters),
/// whose order is the numbers' order. Strictly increasing within a process (a clock that
/// goes back is ignored), unique across processes by the random part.
#[derive(Default)]
pub struct IdGen {
    last: Mutex<u128>,
}

impl IdGen {
    /// A new id.
    pub fn next(&self) -> String {
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis())
            & ((1 << 48) - 1);
        let mut g = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let fresh = ms << 80 | (random_u128() & ((1 << 79) - 1));
        // Within one millisecond (or if the clock went back), count up from the last id.
        let v = if fresh >> 80 > *g >> 80 {
            fresh
        } else {
            *g + 1
        };
        *g = v;
        base32(v)
    }
}

/// 128 random bits from the standard library's per-process random hash keys (no extra
/// dependency; ids need uniqueness, not secrecy).
fn random_u128() -> u128 {
    use std::hash::{BuildHasher, Hasher};
    let s = std::collections::hash_map::RandomState::new();
    let mut h1 = s.build_hasher();
    h1.write_u64(1);
    let mut h2 = s.build_hasher();
    h2.write_u64(2);
    (h1.finish() as u128) << 64 | h2.finish() as u128
}

fn base32(mut v: u128) -> String {
    const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    let mut out = [0u8; 26];
    for c in out.iter_mut().rev() {
        *c = ALPHABET[(v & 31) as usize];
        v >>= 5;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What a write did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Written {
    /// The document's new version.
    pub version: u64,
    /// It did not exist before.
    pub created: bool,
}

/// Conditions of a write. Part of the replicated log's encoding (`cairn serve --cluster`,
/// module `cluster`): fields are only ever added at the end.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Preconditions {
    /// `If-Match`.
    pub if_match: Option<Condition>,
    /// `If-None-Match` (`*`: create only).
    pub if_none_match: Option<Condition>,
}

impl Preconditions {
    fn check(&self, current: Option<u64>) -> Result<(), ApiError> {
        if let Some(c) = &self.if_match {
            if !c.matches(current) {
                return Err(
                    ApiError::precondition("If-Match does not match the document")
                        .with_detail(json!({ "version": current.map(decode::version_str) })),
                );
            }
        }
        if let Some(c) = &self.if_none_match {
            if c.matches(current) {
                return Err(ApiError::precondition("If-None-Match: the document exists")
                    .with_detail(json!({ "version": current.map(decode::version_str) })));
            }
        }
        Ok(())
    }
}

/// The collection's documents database in a write transaction, if it exists.
fn open_existing(txn: &mut RwTxn<'_>, coll: &str) -> Result<Option<Database>, ApiError> {
    match txn.open_db(Some(&key::docs_db(coll))) {
        Ok(db) => Ok(Some(db)),
        Err(cairn::Error::DbNotFound { .. }) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn current_version(
    txn: &RwTxn<'_>,
    db: Option<Database>,
    id: &str,
) -> Result<Option<u64>, ApiError> {
    let Some(db) = db else { return Ok(None) };
    match txn.get(db, id.as_bytes())? {
        Some(v) => Ok(Some(decode(v)?.0)),
        None => Ok(None),
    }
}

/// Writes one document (inside a write transaction) through cairn-doc: its index entries
/// and feed record in the same transaction. `doc` is the validated JSON text. `at_ms`
/// stamps the feed record and cuts the feed's age trimming: the single-node routes pass
/// their clock (`cairn_doc::now_ms`), a replica its leader's (module `cluster`).
pub fn put(
    txn: &mut RwTxn<'_>,
    colls: &Colls,
    coll: &str,
    id: &str,
    doc: &[u8],
    pre: &Preconditions,
    at_ms: u64,
) -> Result<Written, ApiError> {
    let existing = open_existing(txn, coll)?;
    let current = current_version(txn, existing, id)?;
    pre.check(current)?;
    let value: Value = serde_json::from_slice(doc)
        .map_err(|e| ApiError::bad_request("malformed JSON").with_detail(json!(e.to_string())))?;
    let c = colls.for_write(txn, coll)?;
    c.put_text_at(txn, id, &value, Some(doc), None, at_ms)
        .map_err(doc_error)?;
    let version = c.last_seq(&*txn).map_err(doc_error)?;
    Ok(Written {
        version,
        created: current.is_none(),
    })
}

/// Deletes one document (inside a write transaction); 404 if it or its collection is
/// missing. `at_ms` as for [`put`].
pub fn delete(
    txn: &mut RwTxn<'_>,
    colls: &Colls,
    coll: &str,
    id: &str,
    pre: &Preconditions,
    at_ms: u64,
) -> Result<u64, ApiError> {
    let Some(db) = open_existing(txn, coll)? else {
        return Err(ApiError::not_found("no such collection"));
    };
    let current = current_version(txn, Some(db), id)?;
    pre.check(current)?;
    let Some(v) = current else {
        return Err(ApiError::not_found("no such document"));
    };
    let c = colls.for_write(txn, coll)?;
    c.delete_at(txn, id, at_ms).map_err(doc_error)?;
    Ok(v)
}

/// Runs a bulk request's items in one transaction; one JSON result per item, in order. An
/// item's failure (a bad id, a failed condition) is its result and changes nothing; the
/// others are written. Engine errors (disk full, ...) fail the whole request.
/// `at_ms` as for [`put`]. Items without an id get one from `ids`; a replica is only ever
/// given items with ids (the leader drew them), so it never draws one.
pub fn bulk(
    txn: &mut RwTxn<'_>,
    colls: &Colls,
    ids: &IdGen,
    coll: &str,
    items: &[BulkItem],
    max_id: usize,
    at_ms: u64,
) -> Result<Vec<Value>, ApiError> {
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let id = item.id.clone().unwrap_or_else(|| ids.next());
        let pre = Preconditions {
            if_match: item.if_match.map(|v| Condition::Versions(vec![v])),
            if_none_match: (item.op == BulkOp::Create).then_some(Condition::Any),
        };
        let r = decode::id(&id, max_id).and_then(|()| match (item.op, &item.doc) {
            (BulkOp::Delete, _) => {
                delete(txn, colls, coll, &id, &pre, at_ms).map(|_| (StatusCode::OK, None))
            }
            (_, Some(doc)) => put(txn, colls, coll, &id, doc, &pre, at_ms).map(|w| {
                let st = if w.created {
                    StatusCode::CREATED
                } else {
                    StatusCode::OK
                };
                (st, Some(w.version))
            }),
            (_, None) => Err(ApiError::bad_request("no doc")),
        });
        out.push(match r {
            Ok((st, version)) => json!({
                "id": id,
                "status": st.as_u16(),
                "version": version.map(decode::version_str),
            }),
            // Storage errors are not an item's: they fail the request (and its transaction).
            Err(e)
                if e.status.is_server_error() || e.status == StatusCode::INSUFFICIENT_STORAGE =>
            {
                return Err(e)
            }
            Err(e) => json!({
                "id": id,
                "status": e.status.as_u16(),
                "error": e.error,
                "detail": e.detail,
            }),
        });
    }
    Ok(out)
}

/// Opens a collection for reading; 404 if it does not exist.
fn open_read(txn: &cairn::RoTxn<'_>, coll: &str) -> Result<Database, ApiError> {
    match txn.open_db(Some(&key::docs_db(coll))) {
        Ok(db) => Ok(db),
        Err(cairn::Error::DbNotFound { .. }) => Err(ApiError::not_found("no such collection")),
        Err(e) => Err(e.into()),
    }
}

/// Reads one document through its collection's kept handle: its version (ETag) and bytes.
/// A collection not kept yet (a server that has not written it since it started) is read
/// by name ([`get`]) and then kept, so later reads skip the lookup of its database by name.
/// Not to be called while this thread holds a write transaction.
pub fn get_kept(
    env: &Arc<Env>,
    colls: &Colls,
    coll: &str,
    id: &str,
) -> Result<(u64, Vec<u8>), ApiError> {
    let Some(h) = colls.cached(coll) else {
        let r = get(env, coll, id)?;
        // The collection exists (its document was found): keep it. Failing to is met again
        // (and answered) by the next request of the collection.
        let _ = colls.existing(env, coll);
        return Ok(r);
    };
    let txn = env.read_txn()?;
    match h.collection().get_text(&txn, id) {
        Ok(Some(d)) => Ok((d.seq, d.text.to_vec())),
        Ok(None) => Err(ApiError::not_found("no such document")),
        // The collection's databases were dropped since it was kept (by another process:
        // no route drops one): read by name, which answers 404 for a missing collection.
        Err(cairn_doc::Error::Cairn(cairn::Error::BadDbi)) => get(env, coll, id),
        Err(e) => Err(doc_error(e)),
    }
}

/// Reads one document by its collection's name: its version and bytes.
pub fn get(env: &Env, coll: &str, id: &str) -> Result<(u64, Vec<u8>), ApiError> {
    let txn = env.read_txn()?;
    let db = open_read(&txn, coll)?;
    let Some(v) = txn.get(db, id.as_bytes())? else {
        return Err(ApiError::not_found("no such document"));
    };
    let (version, doc) = decode(v)?;
    Ok((version, doc.to_vec()))
}

/// A listing's parameters (`GET /{collection}?start=&end=&limit=&reverse=&cursor=`).
#[derive(Debug, Default, Clone, serde::Deserialize)]
pub struct ListQuery {
    /// First id (inclusive).
    pub start: Option<String>,
    /// Last id (exclusive).
    pub end: Option<String>,
    /// Items per page (default 100, at most 1,000).
    pub limit: Option<usize>,
    /// Descending id order.
    #[serde(default)]
    pub reverse: bool,
    /// The `next` of the previous page: resume after that id (or, with `where`, after that
    /// index entry).
    pub cursor: Option<String>,
    /// An index query: the JSON pointer of a Ready index of the collection.
    #[serde(rename = "where")]
    pub where_: Option<String>,
    /// With `where`: the indexed value equals this JSON literal.
    pub eq: Option<String>,
    /// With `where`: lower bound, inclusive.
    pub gte: Option<String>,
    /// With `where`: lower bound, exclusive.
    pub gt: Option<String>,
    /// With `where`: upper bound, inclusive.
    pub lte: Option<String>,
    /// With `where`: upper bound, exclusive.
    pub lt: Option<String>,
}

/// A query-string value as a JSON literal: a number, a quoted string or a boolean.
fn literal(name: &str, s: &str) -> Result<Value, ApiError> {
    match serde_json::from_str::<Value>(s) {
        Ok(v @ (Value::Number(_) | Value::String(_) | Value::Bool(_))) => Ok(v),
        _ => Err(
            ApiError::bad_request(format!("{name}: a JSON number, quoted string or boolean"))
                .with_detail(json!(s)),
        ),
    }
}

/// The bound of one side from its inclusive and exclusive parameters.
fn bound(
    incl: (&str, &Option<String>),
    excl: (&str, &Option<String>),
) -> Result<Bound<Value>, ApiError> {
    match (incl.1, excl.1) {
        (Some(_), Some(_)) => Err(ApiError::bad_request(format!(
            "{} and {} together",
            incl.0, excl.0
        ))),
        (Some(v), None) => Ok(Bound::Included(literal(incl.0, v)?)),
        (None, Some(v)) => Ok(Bound::Excluded(literal(excl.0, v)?)),
        (None, None) => Ok(Bound::Unbounded),
    }
}

/// The cairn-doc query of a listing with `where` (checked before any transaction).
pub fn index_query(q: &ListQuery) -> Result<cairn_doc::Query, ApiError> {
    let limit = q.limit.unwrap_or(LIST_DEFAULT);
    if limit == 0 || limit > LIST_MAX {
        return Err(ApiError::bad_request("limit must be 1 to 1000").with_detail(json!(limit)));
    }
    if q.start.is_some() || q.end.is_some() {
        return Err(ApiError::bad_request(
            "start and end list ids; with where, use eq, gte, gt, lte, lt",
        ));
    }
    let query = match &q.eq {
        Some(v) => {
            if q.gte.is_some() || q.gt.is_some() || q.lte.is_some() || q.lt.is_some() {
                return Err(ApiError::bad_request("eq and a range bound together"));
            }
            cairn_doc::Query::eq(literal("eq", v)?)
        }
        None => cairn_doc::Query::bounds(
            bound(("gte", &q.gte), ("gt", &q.gt))?,
            bound(("lte", &q.lte), ("lt", &q.lt))?,
        ),
    };
    Ok(query
        .reverse(q.reverse)
        .limit(limit)
        .after(q.cursor.as_deref().map(cairn_doc::Token::from_text)))
}

/// Runs an index query: `{"items": [{"id", "version", "doc"}...], "next": token}` in index
/// order, like a listing; each `doc` is the stored text, written out as it is (no parse).
pub fn query(h: &cairn_doc::Handle, path: &str, q: &cairn_doc::Query) -> Result<Vec<u8>, ApiError> {
    query_in(h.collection(), &h.env().read_txn()?, path, q)
}

/// [`query`] on a collection opened by the caller, in its read transaction.
pub fn query_in(
    c: &Collection,
    txn: &cairn::RoTxn<'_>,
    path: &str,
    q: &cairn_doc::Query,
) -> Result<Vec<u8>, ApiError> {
    let mut body = b"{\"items\":[".to_vec();
    let mut first = true;
    let next = c
        .query_path_text(txn, path, q, |d| {
            if !first {
                body.push(b',');
            }
            first = false;
            write_item(&mut body, d.id, d.seq, d.text);
            Ok(())
        })
        .map_err(doc_error)?;
    body.extend_from_slice(b"],\"next\":");
    match next {
        Some(t) => body.extend_from_slice(format!("\"{}\"", t.as_str()).as_bytes()),
        None => body.extend_from_slice(b"null"),
    }
    body.push(b'}');
    Ok(body)
}

/// One item of a listing or query: `{"id": ..., "version": "hex", "doc": text}`.
fn write_item(body: &mut Vec<u8>, id: &str, version: u64, doc: &[u8]) {
    body.extend_from_slice(b"{\"id\":");
    // A str always serializes (JSON strings hold any UTF-8).
    let _ = serde_json::to_writer(&mut *body, id);
    body.extend_from_slice(format!(",\"version\":\"{version:x}\",\"doc\":").as_bytes());
    body.extend_from_slice(doc);
    body.push(b'}');
}

/// An entry of a range iteration.
type Entry<'t> = cairn::Result<(&'t [u8], &'t [u8])>;

/// Default page of a listing.
pub const LIST_DEFAULT: usize = 100;
/// Largest page of a listing: one read transaction and one response buffer hold it.
pub const LIST_MAX: usize = 1000;

/// Lists a collection in id order: `{"items": [{"id", "version", "doc"}...], "next": token}`.
/// The token is the last id returned, hex-encoded; `next` is null on the last page.
pub fn list(env: &Env, coll: &str, q: &ListQuery) -> Result<Vec<u8>, ApiError> {
    let limit = q.limit.unwrap_or(LIST_DEFAULT);
    if limit == 0 || limit > LIST_MAX {
        return Err(ApiError::bad_request("limit must be 1 to 1000").with_detail(json!(limit)));
    }
    let cursor = match &q.cursor {
        Some(c) => Some(unhex(c).ok_or_else(|| ApiError::bad_request("bad cursor"))?),
        None => None,
    };
    let mut lo = q
        .start
        .as_ref()
        .map_or(Bound::Unbounded, |s| Bound::Included(s.as_bytes()));
    let mut hi = q
        .end
        .as_ref()
        .map_or(Bound::Unbounded, |s| Bound::Excluded(s.as_bytes()));
    if let Some(c) = cursor.as_deref() {
        // The cursor is inside [start, end) when it came from this listing; it only narrows.
        if q.reverse {
            hi = tighter_hi(hi, c);
        } else {
            lo = tighter_lo(lo, c);
        }
    }
    let txn = env.read_txn()?;
    let db = open_read(&txn, coll)?;
    if empty_range(lo, hi) {
        return Ok(br#"{"items":[],"next":null}"#.to_vec());
    }
    let it = txn.range(db, (lo, hi))?;
    let it: Box<dyn Iterator<Item = Entry<'_>>> = if q.reverse {
        Box::new(it.rev())
    } else {
        Box::new(it)
    };
    let mut body = b"{\"items\":[".to_vec();
    let mut last: Option<Vec<u8>> = None;
    let mut more = false;
    for (n, item) in it.enumerate() {
        let (k, v) = item?;
        if n == limit {
            // One entry past the page: there is a next page, and it starts after `last`.
            more = true;
            break;
        }
        let (version, doc) = decode(v)?;
        if n > 0 {
            body.push(b',');
        }
        write_item(&mut body, &String::from_utf8_lossy(k), version, doc);
        last = Some(k.to_vec());
    }
    body.extend_from_slice(b"],\"next\":");
    match (more, last) {
        (true, Some(k)) => body.extend_from_slice(format!("\"{}\"", hex(&k)).as_bytes()),
        _ => body.extend_from_slice(b"null"),
    }
    body.push(b'}');
    Ok(body)
}

fn tighter_lo<'a>(lo: Bound<&'a [u8]>, c: &'a [u8]) -> Bound<&'a [u8]> {
    match lo {
        Bound::Included(s) | Bound::Excluded(s) if s > c => lo,
        _ => Bound::Excluded(c),
    }
}

fn tighter_hi<'a>(hi: Bound<&'a [u8]>, c: &'a [u8]) -> Bound<&'a [u8]> {
    match hi {
        Bound::Included(s) | Bound::Excluded(s) if s < c => hi,
        _ => Bound::Excluded(c),
    }
}

/// Whether the bounds hold no key (the engine's range wants lo <= hi).
fn empty_range(lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
            a >= b
        }
        _ => false,
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || s.is_empty() {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| s.get(i..i + 2).and_then(|p| u8::from_str_radix(p, 16).ok()))
        .collect()
}

/// `GET /_stats`: the collections with their document counts, and the environment's figures.
pub fn stats(env: &Env) -> Result<Value, ApiError> {
    let txn = env.read_txn()?;
    let mut colls = serde_json::Map::new();
    for name in collection_names(env)? {
        let db = txn.open_db(Some(&key::docs_db(&name)))?;
        let st = txn.stat(db)?;
        colls.insert(
            name,
            json!({ "documents": st.entries, "depth": st.depth, "pages": st.branch_pages + st.leaf_pages + st.overflow_pages }),
        );
    }
    drop(txn);
    let info = env.info()?;
    Ok(json!({
        "collections": colls,
        "env": {
            "path": env.path().map(|p| p.display().to_string()),
            "durability": format!("{:?}", env.durability()).to_lowercase(),
            "page_size": info.page_size,
            "file_size": info.file_size,
            "last_txnid": info.last_txnid,
            "readers": info.readers,
            "max_readers": info.max_readers,
            "free_pages": info.free_pages,
            "max_key_size": env.max_key_size(),
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_sort_in_creation_order() {
        let g = IdGen::default();
        let ids: Vec<String> = (0..1000).map(|_| g.next()).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]));
        assert!(ids.iter().all(|i| i.len() == 26));
    }

    #[test]
    fn doc_errors_get_their_statuses() {
        use cairn_doc::Error as E;
        let e = doc_error(E::FeedTrimmed {
            since: 3,
            oldest: 10,
        });
        assert_eq!(e.status, StatusCode::GONE);
        assert_eq!(e.detail["oldest"], 10);
        let st = |e| doc_error(e).status.as_u16();
        assert_eq!(st(E::NoIndex("x".into())), 404);
        assert_eq!(st(E::IndexExists("x".into())), 409);
        assert_eq!(st(E::Invalid("x".into())), 400);
        assert_eq!(
            st(E::IndexBuilding {
                index: "x".into(),
                done: 1,
                total: 2
            }),
            409
        );
        assert_eq!(st(E::Inconsistent("x".into())), 500);
    }

    #[test]
    fn stored_form_round_trips() {
        let mut v = 7u64.to_be_bytes().to_vec();
        v.extend_from_slice(&0xabcdefu64.to_be_bytes());
        v.extend_from_slice(b"{}");
        assert_eq!(decode(&v).unwrap(), (0xabcdef, &b"{}"[..]));
        assert!(decode(b"\x02abcdefgh").is_err());
        assert_eq!(unhex(&hex(b"a\xffz")).unwrap(), b"a\xffz");
        assert!(unhex("zz").is_none());
    }
}
