//! The HTTP handlers. Each validates what it can on the event loop (names, ids, content type,
//! the body's JSON), then runs the engine's part off the event loop: reads on the reader
//! threads or the blocking pool, writes on the writer thread (or the blocking pool without
//! group commit).
//!
//! Invariants:
//! - No transaction lives on an async task: a read transaction begins and ends inside one
//!   closure run on a reader or blocking-pool thread; a write is a job the writer thread runs
//!   inside `Env::write_grouped` (module `writer`), so its transaction never crosses an
//!   `.await`.
//! - A 2xx to a write is sent only after `write_grouped` returned Ok: the group's commit is
//!   done, and in durable mode flushed.
//! - A request that fails validation never reaches the engine, so it changes nothing.

use crate::decode::{self, Condition};
use crate::error::ApiError;
use crate::store::{self, ListQuery, Preconditions};
use crate::AppState;
use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use cairn_doc::{Change, ChangeKind, IndexSpec, IndexState};
use http_body_util::BodyExt;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

type Shared = State<Arc<AppState>>;

/// Runs `f` on the blocking pool once `gate` lets it (waiting asynchronously, so a burst
/// queues as tasks, not as blocked threads); a panic there (a bug) becomes a 500.
pub(crate) async fn blocking<R: Send + 'static>(
    gate: &tokio::sync::Semaphore,
    f: impl FnOnce() -> Result<R, ApiError> + Send + 'static,
) -> Result<R, ApiError> {
    let _permit = gate
        .acquire()
        .await
        .map_err(|_| ApiError::internal("the server is shutting down"))?;
    match tokio::task::spawn_blocking(f).await {
        Ok(r) => r,
        Err(e) if e.is_panic() => Err(ApiError::internal("the request's task panicked")),
        Err(_) => Err(ApiError::internal("the request's task was cancelled")),
    }
}

/// Runs a short read `f` on the server's reader threads (module `readers`); a panic there (a
/// bug) becomes a 500.
async fn read<R: Send + 'static>(
    state: &AppState,
    f: impl FnOnce() -> Result<R, ApiError> + Send + 'static,
) -> Result<R, ApiError> {
    match state.readers.run(f).await {
        Ok(r) => r,
        Err(Some(_)) => Err(ApiError::internal("the request's task panicked")),
        Err(None) => Err(ApiError::internal("the server is shutting down")),
    }
}

/// Runs `f` in a grouped write transaction on the writer thread (module `writer`), or alone
/// on the blocking pool (`Config::group_commit` off). An `Err` from `f` rolls back what `f`
/// wrote (its nesting level), and is returned as is.
/// After it committed, the collection `coll`'s handle is opened (kept for the next writes)
/// and the feed's waiters are woken.
async fn write<R: Send + 'static>(
    state: &Arc<AppState>,
    coll: &str,
    f: impl FnOnce(&mut cairn::RwTxn<'_>, &AppState) -> Result<R, ApiError> + Send + 'static,
) -> Result<R, ApiError> {
    let st = state.clone();
    let coll = coll.to_string();
    let r = if state.group_commit {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let job: crate::writer::Job = Box::new(move |txn| match f(txn, &st) {
            Ok(v) => (
                true,
                Box::new(move |failed: Option<&ApiError>| {
                    let r = match failed {
                        Some(e) => Err(e.clone()),
                        None => {
                            // Committed: whatever happens now, the answer is a success. A
                            // failure to open the handle here is met again (and answered) by
                            // the next request of the collection.
                            let _ = st.colls.existing(&st.env, &coll);
                            Ok(v)
                        }
                    };
                    let _ = tx.send(r);
                }),
            ),
            Err(e) => (
                false,
                Box::new(move |_: Option<&ApiError>| {
                    let _ = tx.send(Err(e));
                }),
            ),
        });
        state.writer.submit(job).await?;
        rx.await
            .unwrap_or_else(|_| Err(ApiError::internal("the request's write panicked")))
    } else {
        blocking(&state.write_gate, move || {
            let state = st;
            let r = write_alone(&state, f)?;
            let _ = state.colls.existing(&state.env, &coll);
            Ok(r)
        })
        .await
    };
    if r.is_ok() {
        state.changed.send_modify(|g| *g += 1);
    }
    r
}

/// A write in a transaction of its own (`Config::group_commit` off: the baseline the group
/// commit is measured against). Waits for the writer lock on this blocking thread.
fn write_alone<R>(
    st: &AppState,
    f: impl FnOnce(&mut cairn::RwTxn<'_>, &AppState) -> Result<R, ApiError>,
) -> Result<R, ApiError> {
    let mut txn = st.env.write_txn()?;
    let v = f(&mut txn, st)?;
    txn.commit()?;
    Ok(v)
}

/// Reads the body, at most the configured bytes (413 beyond).
pub(crate) async fn read_body(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    match http_body_util::Limited::new(body, limit).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) => {
            let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e.as_ref());
            while let Some(s) = src {
                if s.is::<http_body_util::LengthLimitError>() {
                    return Err(too_large(limit as u64));
                }
                src = s.source();
            }
            Err(ApiError::bad_request("reading the body failed").with_detail(json!(e.to_string())))
        }
    }
}

/// A body declared JSON (415 otherwise), at most `limit` bytes (413 beyond).
pub(crate) async fn json_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<Bytes, ApiError> {
    decode::content_type(headers)?;
    read_body(body, limit).await
}

/// The document of a PUT or POST: a JSON body checked by [`decode::document`], the bytes to
/// store.
pub(crate) async fn document_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
) -> Result<Bytes, ApiError> {
    let bytes = json_body(headers, body, limit).await?;
    Ok(bytes.slice_ref(decode::document(&bytes)?))
}

/// 413 for a body over `limit` bytes (the handlers' reads and the guard's declared-length
/// check answer alike).
pub(crate) fn too_large(limit: u64) -> ApiError {
    ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "body too large")
        .with_detail(json!({ "max": limit }))
}

pub(crate) fn preconditions(h: &HeaderMap) -> Preconditions {
    Preconditions {
        if_match: Condition::from_header(h, header::IF_MATCH),
        if_none_match: Condition::from_header(h, header::IF_NONE_MATCH),
    }
}

pub(crate) fn etag_value(version: u64) -> HeaderValue {
    HeaderValue::from_str(&decode::etag(version)).unwrap_or(HeaderValue::from_static("\"0\""))
}

/// Percent-encodes an id for a Location header (everything but RFC 3986's unreserved set).
fn path_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

pub(crate) fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// The response to a successful write of one document.
pub(crate) fn written(coll: &str, id: &str, w: store::Written) -> Response {
    let body = json!({ "id": id, "version": decode::version_str(w.version) });
    let status = if w.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let mut r = json_response(status, body.to_string().into_bytes());
    r.headers_mut().insert(header::ETAG, etag_value(w.version));
    if w.created {
        if let Ok(v) = HeaderValue::from_str(&format!("/{coll}/{}", path_segment(id))) {
            r.headers_mut().insert(header::LOCATION, v);
        }
    }
    r
}

/// `GET /_health`: the environment answers a read transaction.
pub async fn health(State(s): Shared) -> Result<Response, ApiError> {
    let last = blocking(&s.clone().read_gate, move || Ok(s.env.read_txn()?.id())).await?;
    Ok(json_response(
        StatusCode::OK,
        json!({ "status": "ok", "txn": last })
            .to_string()
            .into_bytes(),
    ))
}

/// `GET /_stats`.
pub async fn stats(State(s): Shared) -> Result<Response, ApiError> {
    let st = s.clone();
    let mut v = blocking(&s.read_gate, move || store::stats(&st.env)).await?;
    v["server"] = json!({
        "max_body": s.limits.max_body,
        "max_in_flight": s.limits.max_in_flight,
    });
    Ok(json_response(StatusCode::OK, v.to_string().into_bytes()))
}

/// `GET /{collection}/{id}`.
pub async fn get_doc(
    State(s): Shared,
    Path((coll, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    read_doc(s, DocAddr::Owned(coll, id), &headers).await
}

/// A document's address: its collection and id, as the router decoded them or as they
/// stand in a request's path (module `fast`).
pub(crate) enum DocAddr {
    Owned(String, String),
    /// The URI's path is `/{collection}/{id}`, the collection ending at byte `.1` after
    /// the leading `/`, neither segment needing decoding.
    InPath(axum::http::Uri, usize),
}

impl DocAddr {
    /// The collection and the id.
    pub(crate) fn parts(&self) -> (&str, &str) {
        match self {
            DocAddr::Owned(c, i) => (c, i),
            DocAddr::InPath(uri, split) => {
                let p = &uri.path()[1..];
                (&p[..*split], &p[*split + 1..])
            }
        }
    }
}

/// `GET /{collection}/{id}`'s work, for the route and for module `fast`.
pub(crate) async fn read_doc(
    s: Arc<AppState>,
    addr: DocAddr,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let (coll, id) = addr.parts();
    decode::address(coll, id, s.max_id)?;
    let gate = s.clone();
    let (version, doc) = read(&gate, move || {
        let (coll, id) = addr.parts();
        store::get_kept(&s.env, &s.colls, coll, id)
    })
    .await?;
    Ok(doc_response(version, doc, headers))
}

/// The answer to a read of one document: 200 with it, or 304 if the request's If-None-Match
/// names its version; its ETag either way.
pub(crate) fn doc_response(version: u64, doc: Vec<u8>, headers: &HeaderMap) -> Response {
    let inm = Condition::from_header(headers, header::IF_NONE_MATCH);
    let mut r = if inm.is_some_and(|c| c.matches(Some(version))) {
        let mut r = Response::new(Body::empty());
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        r
    } else {
        json_response(StatusCode::OK, doc)
    };
    r.headers_mut().insert(header::ETAG, etag_value(version));
    r
}

/// `PUT /{collection}/{id}`: create or replace.
pub async fn put_doc(
    State(s): Shared,
    Path((coll, id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    decode::address(&coll, &id, s.max_id)?;
    let pre = preconditions(&headers);
    store_document(s, coll, id, &headers, body, pre).await
}

/// The body of a PUT or POST, checked as a JSON document, stored under `id` (with `pre`'s
/// conditions) in the request's grouped write; the 200 or 201 answer.
async fn store_document(
    s: Arc<AppState>,
    coll: String,
    id: String,
    headers: &HeaderMap,
    body: Body,
    pre: Preconditions,
) -> Result<Response, ApiError> {
    let doc = document_body(headers, body, s.limits.max_body).await?;
    let (c, i) = (coll.clone(), id.clone());
    let w = write(&s, &coll, move |txn, st| {
        store::put(txn, &st.colls, &c, &i, &doc, &pre, cairn_doc::now_ms())
    })
    .await?;
    Ok(written(&coll, &id, w))
}

/// `POST /{collection}`: store under a new, time-ordered id.
pub async fn post_doc(
    State(s): Shared,
    Path(coll): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    decode::collection(&coll)?;
    let id = s.ids.next();
    store_document(s, coll, id, &headers, body, Preconditions::default()).await
}

/// `DELETE /{collection}/{id}`.
pub async fn delete_doc(
    State(s): Shared,
    Path((coll, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    decode::address(&coll, &id, s.max_id)?;
    let pre = preconditions(&headers);
    let c = coll.clone();
    write(&s, &coll, move |txn, st| {
        store::delete(txn, &st.colls, &c, &id, &pre, cairn_doc::now_ms())
    })
    .await?;
    Ok(no_content())
}

/// 204, no body.
pub(crate) fn no_content() -> Response {
    let mut r = Response::new(Body::empty());
    *r.status_mut() = StatusCode::NO_CONTENT;
    r
}

/// `PUT|GET|DELETE /{collection}/`: the id is empty.
pub async fn empty_id() -> ApiError {
    ApiError::bad_request("empty id")
}

/// `POST /{collection}/_bulk`: many writes in one transaction, one result per item.
pub async fn bulk(
    State(s): Shared,
    Path(coll): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    decode::collection(&coll)?;
    let bytes = json_body(&headers, body, s.limits.max_body).await?;
    let items = decode::bulk(&bytes)?;
    let c = coll.clone();
    let results = write(&s, &coll, move |txn, st| {
        let at_ms = cairn_doc::now_ms();
        store::bulk(txn, &st.colls, &st.ids, &c, &items, st.max_id, at_ms)
    })
    .await?;
    Ok(json_response(
        StatusCode::OK,
        json!({ "results": results }).to_string().into_bytes(),
    ))
}

/// `GET /{collection}?start=&end=&limit=&reverse=&cursor=`.
pub async fn list(
    State(s): Shared,
    Path(coll): Path<String>,
    Query(q): Query<ListQuery>,
) -> Result<Response, ApiError> {
    decode::collection(&coll)?;
    let gate = s.clone();
    if let Some(path) = q.where_.clone() {
        let query = store::index_query(&q)?;
        let v = blocking(&gate.read_gate, move || {
            store::query(&*existing(&s, &coll)?, &path, &query)
        })
        .await?;
        return Ok(json_response(StatusCode::OK, v));
    }
    let body = blocking(&gate.read_gate, move || store::list(&s.env, &coll, &q)).await?;
    Ok(json_response(StatusCode::OK, body))
}

/// `GET /_backup`: a consistent copy of the environment's data file, streamed. The engine
/// writes the copy of one snapshot to a temporary file on the blocking pool (writes go on
/// meanwhile); the file is unlinked at once and streamed from its open handle, so no more
/// than a read buffer of it is in memory and nothing is left behind if the client goes away.
pub async fn backup(State(s): Shared) -> Result<Response, ApiError> {
    let gate = s.clone();
    let (f, len) = blocking(&gate.read_gate, move || {
        backup_file(s.limits.backup_dir.as_deref(), &s.env)
    })
    .await?;
    Ok(file_response(f, len))
}

/// A hot copy of `env` in a temporary file under `dir` (the system's by default), opened and
/// already unlinked; and its length. Blocking.
pub(crate) fn backup_file(
    dir: Option<&std::path::Path>,
    env: &cairn::Env,
) -> Result<(std::fs::File, u64), ApiError> {
    let io = |e: std::io::Error| {
        ApiError::internal("backup: temporary file").with_detail(json!(e.to_string()))
    };
    let dir = match dir {
        Some(d) => tempfile::tempdir_in(d),
        None => tempfile::tempdir(),
    }
    .map_err(io)?;
    let path = dir.path().join("data.cairn");
    env.copy_to(&path, false)?;
    let f = std::fs::File::open(&path).map_err(io)?;
    let len = f.metadata().map_err(io)?.len();
    Ok((f, len))
}

/// A backup's answer: the file streamed as `data.cairn`.
pub(crate) fn file_response(f: std::fs::File, len: u64) -> Response {
    let stream = tokio_util::io::ReaderStream::with_capacity(tokio::fs::File::from_std(f), 1 << 16);
    let mut r = Response::new(Body::from_stream(stream));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    h.insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    h.insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static("attachment; filename=\"data.cairn\""),
    );
    r.into_response()
}

/// Any other path.
pub async fn not_found() -> ApiError {
    ApiError::not_found("no such route")
}

/// The handle of an existing collection; 404 if there is none. Blocking.
fn existing(s: &AppState, coll: &str) -> Result<Arc<cairn_doc::Handle>, ApiError> {
    s.colls
        .existing(&s.env, coll)?
        .ok_or_else(|| ApiError::not_found("no such collection"))
}

/// The body of `PUT /{collection}/_index/{name}`.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct IndexBody {
    pub(crate) path: String,
    #[serde(default)]
    pub(crate) unique: bool,
}

/// An index as the index routes show it.
pub(crate) fn index_json(name: &str, spec: &IndexSpec, state: &IndexState) -> serde_json::Value {
    let mut v = json!({ "name": name, "path": spec.path, "unique": spec.unique });
    match state {
        IndexState::Ready => v["state"] = json!("ready"),
        IndexState::Building { done, total } => {
            v["state"] = json!("building");
            v["done"] = json!(done);
            v["total"] = json!(total);
        }
        IndexState::Failed { reason } => {
            v["state"] = json!("failed");
            v["reason"] = json!(reason);
        }
    }
    v
}

/// `PUT /{collection}/_index/{name}`: declares an index (`{"path": "/json/pointer",
/// "unique": bool}`). Ready at once on an empty collection (200); otherwise built in the
/// background, one bounded transaction per step (202, state "building").
pub async fn put_index(
    State(s): Shared,
    Path((coll, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    decode::collection(&coll)?;
    let bytes = json_body(&headers, body, s.limits.max_body).await?;
    let b: IndexBody =
        serde_json::from_slice(&bytes).map_err(|e| decode::json_error("index definition", &e))?;
    let spec = IndexSpec {
        path: b.path,
        unique: b.unique,
    };
    let (c, n, sp) = (coll.clone(), name.clone(), spec.clone());
    let state = write(&s, &coll, move |txn, st| {
        let c = st.colls.for_write(txn, &c)?;
        c.declare_index(txn, &n, sp).map_err(store::doc_error)
    })
    .await?;
    let status = if let IndexState::Building { .. } = state {
        // A build already running (the same declaration again) only gets a second worker:
        // steps are serialized and each continues from the stored cursor.
        let (st, n) = (s.clone(), name.clone());
        let h = blocking(&s.read_gate, move || existing(&st, &coll)).await?;
        s.spawn_builder(h, n);
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok(json_response(
        status,
        index_json(&name, &spec, &state).to_string().into_bytes(),
    ))
}

/// `GET /{collection}/_index/{name}`: the index's definition and state.
pub async fn get_index(
    State(s): Shared,
    Path((coll, name)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    decode::collection(&coll)?;
    let gate = s.clone();
    let info = blocking(&gate.read_gate, move || {
        existing(&s, &coll)?
            .index(&name)
            .map_err(store::doc_error)?
            .ok_or_else(|| ApiError::not_found("no such index").with_detail(json!(name)))
    })
    .await?;
    Ok(json_response(
        StatusCode::OK,
        index_json(&info.name, &info.spec, &info.state)
            .to_string()
            .into_bytes(),
    ))
}

/// `DELETE /{collection}/_index/{name}`: drops the index and its entries (a build running
/// stops at its next step).
pub async fn delete_index(
    State(s): Shared,
    Path((coll, name)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    decode::collection(&coll)?;
    let gate = s.clone();
    let st = s.clone();
    let c = coll.clone();
    blocking(&gate.read_gate, move || existing(&st, &c).map(|_| ())).await?;
    let c = coll.clone();
    let dropped = write(&s, &coll, move |txn, st| {
        let c = st.colls.for_write(txn, &c)?;
        c.drop_index(txn, &name).map_err(store::doc_error)
    })
    .await?;
    if !dropped {
        return Err(ApiError::not_found("no such index"));
    }
    Ok(no_content())
}

/// `GET /{collection}/_changes` parameters.
#[derive(Debug, serde::Deserialize)]
pub struct ChangesQuery {
    /// Changes after this sequence number (default 0: from the start).
    pub(crate) since: Option<u64>,
    /// Most changes per response or per read of a stream (default and maximum 1,000).
    pub(crate) limit: Option<usize>,
    /// `normal` (default), `longpoll` or `sse`.
    pub(crate) feed: Option<String>,
    /// A long poll's wait, milliseconds (default 25,000; at most 80% of the request timeout).
    pub(crate) timeout: Option<u64>,
}

/// Most changes read at once.
pub(crate) const CHANGES_MAX: usize = 1000;
/// How often a stream or a long poll re-reads the feed when no write of this server woke it
/// (writes of other processes).
pub(crate) const FEED_POLL: Duration = Duration::from_millis(50);
/// A comment line on an idle stream, so that a gone client is noticed.
const SSE_KEEPALIVE: Duration = Duration::from_secs(15);

/// One change as a JSON object: `version` is the document's ETag after a put (hex), null
/// after a delete.
pub(crate) fn change_json(c: &Change) -> serde_json::Value {
    let put = c.kind == ChangeKind::Put;
    json!({
        "seq": c.seq,
        "id": c.id,
        "kind": if put { "put" } else { "delete" },
        "version": put.then(|| decode::version_str(c.seq)),
        "time_ms": c.timestamp_ms,
    })
}

pub(crate) fn json_lines(changes: &[Change]) -> Vec<u8> {
    let mut out = Vec::new();
    for c in changes {
        out.extend_from_slice(change_json(c).to_string().as_bytes());
        out.push(b'\n');
    }
    out
}

async fn read_changes(
    s: &Arc<AppState>,
    coll: &str,
    since: u64,
    limit: usize,
) -> Result<Vec<Change>, ApiError> {
    let (st, c) = (s.clone(), coll.to_string());
    blocking(&s.read_gate, move || {
        existing(&st, &c)?
            .changes(since, limit)
            .map_err(store::doc_error)
    })
    .await
}

/// `GET /{collection}/_changes?since=N`: the changes after N as JSON lines, oldest first;
/// `feed=longpoll` waits until there is one (or the timeout: an empty body); `feed=sse`
/// streams them as server-sent events, each with its sequence number as its id (a client
/// resumes with Last-Event-ID). History trimmed by the retention bound is 410 with the
/// oldest sequence number held.
pub async fn changes(
    State(s): Shared,
    Path(coll): Path<String>,
    Query(q): Query<ChangesQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    decode::collection(&coll)?;
    let limit = changes_limit(&q)?;
    let since = q.since.unwrap_or(0);
    match q.feed.as_deref().unwrap_or("normal") {
        "normal" => {
            let ch = read_changes(&s, &coll, since, limit).await?;
            Ok(ndjson(json_lines(&ch)))
        }
        "longpoll" => {
            let deadline = tokio::time::Instant::now() + longpoll_wait(&q, s.request_timeout);
            let mut shutdown = s.shutdown.subscribe();
            loop {
                let mut rx = s.changed.subscribe();
                rx.borrow_and_update();
                let ch = read_changes(&s, &coll, since, limit).await?;
                let now = tokio::time::Instant::now();
                if !ch.is_empty() || now >= deadline || *shutdown.borrow() {
                    return Ok(ndjson(json_lines(&ch)));
                }
                let nap = FEED_POLL.min(deadline - now);
                tokio::select! {
                    _ = rx.changed() => {}
                    () = tokio::time::sleep(nap) => {}
                    _ = shutdown.changed() => {}
                }
            }
        }
        "sse" => {
            let since = last_event_id(&headers, since)?;
            // Subscribed before the first read, so a write that commits after that read
            // began wakes the stream (a later subscription would count it as seen, and the
            // stream would wait for the next write or the poll).
            let woken = s.changed.subscribe();
            // The first read answers errors (no collection, trimmed history) with a status.
            let first = read_changes(&s, &coll, since, limit).await?;
            let st = s.clone();
            let src = FeedSource {
                read: Box::new(move |since| {
                    let (st, coll) = (st.clone(), coll.clone());
                    Box::pin(async move { read_changes(&st, &coll, since, limit).await })
                }),
                woken: Some(woken),
                shutdown: Some(s.shutdown.subscribe()),
            };
            Ok(sse_response(src, first, since, limit))
        }
        other => Err(
            ApiError::bad_request("feed must be normal, longpoll or sse").with_detail(json!(other)),
        ),
    }
}

/// The `limit` of a changes request (400 unless 1 to [`CHANGES_MAX`]).
pub(crate) fn changes_limit(q: &ChangesQuery) -> Result<usize, ApiError> {
    let limit = q.limit.unwrap_or(CHANGES_MAX);
    if limit == 0 || limit > CHANGES_MAX {
        return Err(ApiError::bad_request("limit must be 1 to 1000").with_detail(json!(limit)));
    }
    Ok(limit)
}

/// How long a long poll waits: its `timeout`, 25 s by default, at most 80% of the request
/// timeout (so the answer leaves before the request is cut off).
pub(crate) fn longpoll_wait(q: &ChangesQuery, request_timeout: Duration) -> Duration {
    let wait = q
        .timeout
        .map_or(Duration::from_secs(25), Duration::from_millis);
    wait.min(request_timeout.mul_f64(0.8))
}

/// A body of JSON lines (changes).
pub(crate) fn ndjson(body: Vec<u8>) -> Response {
    let mut r = Response::new(Body::from(body));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-ndjson"),
    );
    r
}

/// A request's Last-Event-ID (an SSE client resuming), else `since`.
pub(crate) fn last_event_id(headers: &HeaderMap, since: u64) -> Result<u64, ApiError> {
    match headers.get("last-event-id") {
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|t| t.trim().parse::<u64>().ok())
            .ok_or_else(|| ApiError::bad_request("Last-Event-ID: a sequence number")),
        None => Ok(since),
    }
}

/// The changes after a sequence number, read off the event loop.
pub(crate) type ReadFeed = Box<
    dyn Fn(
            u64,
        ) -> std::pin::Pin<
            Box<dyn std::future::Future<Output = Result<Vec<Change>, ApiError>> + Send>,
        > + Send
        + Sync,
>;

/// What an SSE stream reads and what wakes it: `woken` when a write of this process
/// commits (else it polls every [`FEED_POLL`]), `shutdown` when the server stops.
pub(crate) struct FeedSource {
    pub(crate) read: ReadFeed,
    pub(crate) woken: Option<tokio::sync::watch::Receiver<u64>>,
    pub(crate) shutdown: Option<tokio::sync::watch::Receiver<bool>>,
}

/// The `text/event-stream` response of a feed: `first` (read before, so its errors got a
/// status), then what follows, fed by a task of its own.
pub(crate) fn sse_response(
    src: FeedSource,
    first: Vec<Change>,
    since: u64,
    limit: usize,
) -> Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<Bytes>(16);
    tokio::spawn(sse_stream(src, first, since, limit, tx));
    let mut r = Response::new(Body::new(ChanBody(rx)));
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/event-stream"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

/// Feeds an SSE response: the changes after `since`, then each new one as it commits, until
/// the client goes, the server stops, or reading fails (an `error` event, then the end).
/// `woken` was subscribed before `first` was read; it is marked seen before each read, so a
/// write that commits during a read wakes the next wait at once.
async fn sse_stream(
    src: FeedSource,
    first: Vec<Change>,
    mut since: u64,
    limit: usize,
    tx: tokio::sync::mpsc::Sender<Bytes>,
) {
    let FeedSource {
        read,
        mut woken,
        mut shutdown,
    } = src;
    let mut batch = Ok(first);
    let mut idle = tokio::time::Instant::now();
    loop {
        let got = match batch {
            Ok(ch) => ch,
            Err(e) => {
                let e: ApiError = e;
                let ev = format!(
                    "event: error\ndata: {}\n\n",
                    String::from_utf8_lossy(&e.body())
                );
                let _ = tx.send(Bytes::from(ev)).await;
                return;
            }
        };
        let full = got.len() == limit;
        for c in &got {
            let ev = format!("id: {}\ndata: {}\n\n", c.seq, change_json(c));
            if tx.send(Bytes::from(ev)).await.is_err() {
                return;
            }
            since = c.seq;
        }
        if !got.is_empty() {
            idle = tokio::time::Instant::now();
        }
        if !full {
            if idle.elapsed() >= SSE_KEEPALIVE {
                if tx.send(Bytes::from_static(b":\n\n")).await.is_err() {
                    return;
                }
                idle = tokio::time::Instant::now();
            }
            if shutdown.as_ref().is_some_and(|r| *r.borrow()) {
                return;
            }
            let wake = async {
                match woken.as_mut() {
                    Some(r) => {
                        let _ = r.changed().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            let stop = async {
                match shutdown.as_mut() {
                    Some(r) => {
                        let _ = r.changed().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                () = wake => {}
                () = tokio::time::sleep(FEED_POLL) => {}
                () = stop => return,
                () = tx.closed() => return,
            }
        }
        if let Some(r) = woken.as_mut() {
            r.borrow_and_update();
        }
        batch = read(since).await;
    }
}

/// A response body fed by a channel (a stream of events).
struct ChanBody(tokio::sync::mpsc::Receiver<Bytes>);

impl http_body::Body for ChanBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        self.0
            .poll_recv(cx)
            .map(|b| b.map(|b| Ok(http_body::Frame::data(b))))
    }
}
