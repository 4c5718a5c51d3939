//! The HTTP handlers. Each validates what it can on the event loop (names, ids, content type,
//! the body's JSON), then runs the engine's part on the blocking pool.
//!
//! Invariants:
//! - No transaction lives on an async task: a read transaction begins and ends inside one
//!   `spawn_blocking` closure; a write runs inside `Env::write_grouped` called from one, so its
//!   transaction stays on the blocking thread (or the group leader's) and never crosses an
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
use http_body_util::BodyExt;
use serde_json::json;
use std::sync::Arc;

type Shared = State<Arc<AppState>>;

/// Runs `f` on the blocking pool once `gate` lets it (waiting asynchronously, so a burst
/// queues as tasks, not as blocked threads); a panic there (a bug) becomes a 500.
async fn blocking<R: Send + 'static>(
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

/// Runs `f` in a grouped write transaction on the blocking pool. An `Err` from `f` rolls back
/// what `f` wrote (its nesting level), and is returned as is.
async fn write<R: Send + 'static>(
    state: &Arc<AppState>,
    f: impl FnOnce(&mut cairn::RwTxn<'_>, &AppState) -> Result<R, ApiError> + Send + 'static,
) -> Result<R, ApiError> {
    let st = state.clone();
    blocking(&state.write_gate, move || {
        let state = st;
        if !state.group_commit {
            return write_alone(&state, f);
        }
        let mut failed: Option<ApiError> = None;
        let slot = &mut failed;
        let st = &*state;
        let r = st.env.write_grouped(|txn| match f(txn, st) {
            Ok(v) => Ok(v),
            Err(e) => {
                *slot = Some(e);
                // Any error rolls the closure's level back; the ApiError is what is reported.
                Err(cairn::Error::Invalid("request refused".into()))
            }
        });
        match r {
            Ok(v) => Ok(v),
            Err(e) => Err(failed.unwrap_or_else(|| e.into())),
        }
    })
    .await
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
async fn read_body(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    match http_body_util::Limited::new(body, limit).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) => {
            let mut src: Option<&(dyn std::error::Error + 'static)> = Some(e.as_ref());
            while let Some(s) = src {
                if s.is::<http_body_util::LengthLimitError>() {
                    return Err(too_large(limit));
                }
                src = s.source();
            }
            Err(ApiError::bad_request("reading the body failed").with_detail(json!(e.to_string())))
        }
    }
}

fn too_large(limit: usize) -> ApiError {
    ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "body too large")
        .with_detail(json!({ "max": limit }))
}

fn preconditions(h: &HeaderMap) -> Preconditions {
    Preconditions {
        if_match: Condition::from_header(h, header::IF_MATCH),
        if_none_match: Condition::from_header(h, header::IF_NONE_MATCH),
    }
}

fn etag_value(version: u64) -> HeaderValue {
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

fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = status;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

/// The response to a successful write of one document.
fn written(coll: &str, id: &str, w: store::Written) -> Response {
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
    decode::collection(&coll)?;
    decode::id(&id, s.max_id)?;
    let gate = s.clone();
    let (version, doc) = blocking(&gate.read_gate, move || store::get(&s.env, &coll, &id)).await?;
    let inm = Condition::from_header(&headers, header::IF_NONE_MATCH);
    let mut r = if inm.is_some_and(|c| c.matches(Some(version))) {
        let mut r = Response::new(Body::empty());
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        r
    } else {
        json_response(StatusCode::OK, doc)
    };
    r.headers_mut().insert(header::ETAG, etag_value(version));
    Ok(r)
}

/// `PUT /{collection}/{id}`: create or replace.
pub async fn put_doc(
    State(s): Shared,
    Path((coll, id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    decode::collection(&coll)?;
    decode::id(&id, s.max_id)?;
    decode::content_type(&headers)?;
    let bytes = read_body(body, s.limits.max_body).await?;
    let doc = bytes.slice_ref(decode::document(&bytes)?);
    let pre = preconditions(&headers);
    let (c, i) = (coll.clone(), id.clone());
    let w = write(&s, move |txn, st| {
        store::put(txn, &st.versions, &c, &i, &doc, &pre)
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
    decode::content_type(&headers)?;
    let bytes = read_body(body, s.limits.max_body).await?;
    let doc = bytes.slice_ref(decode::document(&bytes)?);
    let id = s.ids.next();
    let (c, i) = (coll.clone(), id.clone());
    let w = write(&s, move |txn, st| {
        store::put(txn, &st.versions, &c, &i, &doc, &Preconditions::default())
    })
    .await?;
    Ok(written(&coll, &id, w))
}

/// `DELETE /{collection}/{id}`.
pub async fn delete_doc(
    State(s): Shared,
    Path((coll, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    decode::collection(&coll)?;
    decode::id(&id, s.max_id)?;
    let pre = preconditions(&headers);
    write(&s, move |txn, _| store::delete(txn, &coll, &id, &pre)).await?;
    let mut r = Response::new(Body::empty());
    *r.status_mut() = StatusCode::NO_CONTENT;
    Ok(r)
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
    decode::content_type(&headers)?;
    let bytes = read_body(body, s.limits.max_body).await?;
    let items = decode::bulk(&bytes)?;
    let results = write(&s, move |txn, st| {
        store::bulk(txn, &st.versions, &st.ids, &coll, &items, st.max_id)
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
    let body = blocking(&gate.read_gate, move || store::list(&s.env, &coll, &q)).await?;
    Ok(json_response(StatusCode::OK, body))
}

/// `GET /_backup`: a consistent copy of the environment's data file, streamed. The engine
/// writes the copy of one snapshot to a temporary file on the blocking pool (writes go on
/// meanwhile); the file is unlinked at once and streamed from its open handle, so no more
/// than a read buffer of it is in memory and nothing is left behind if the client goes away.
pub async fn backup(State(s): Shared) -> Result<Response, ApiError> {
    let gate = s.clone();
    let file = blocking(&gate.read_gate, move || {
        let io = |e: std::io::Error| {
            ApiError::internal("backup: temporary file").with_detail(json!(e.to_string()))
        };
        let dir = match &s.limits.backup_dir {
            Some(d) => tempfile::tempdir_in(d),
            None => tempfile::tempdir(),
        }
        .map_err(io)?;
        let path = dir.path().join("data.cairn");
        s.env.copy_to(&path, false)?;
        let f = std::fs::File::open(&path).map_err(io)?;
        let len = f.metadata().map_err(io)?.len();
        Ok((f, len))
    })
    .await?;
    let (f, len) = file;
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
    Ok(r.into_response())
}

/// Any other path.
pub async fn not_found() -> ApiError {
    ApiError::not_found("no such route")
}
