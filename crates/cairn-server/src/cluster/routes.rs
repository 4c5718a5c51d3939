//! The document routes of a cluster node: writes proposed as `doc` log entries (module
//! `cluster`), reads from this node's replica.
//!
//! Invariants:
//! - A write is answered 2xx only once its entry is committed (on a majority's logs) and
//!   applied on this node, the leader; its answer is the one apply gave, so it is what every
//!   replica did. A node that is not the leader answers 421 naming the leader it knows.
//! - The nondeterministic parts of a write (the time, a `POST`'s id, bulk ids) are decided
//!   here, before proposing, and only here.
//! - A read with `consistency=linearizable` (the default) runs on the leader after a read
//!   index (`Node::linearize`): it sees every write acknowledged before it began. With
//!   `consistency=local` it reads this node's applied state, which never holds an
//!   uncommitted write and may lag.
//! - Reads open collections by name in their own read transaction, inside
//!   `Storage::with_env` (no cached handle: a snapshot install swaps the environment).
//! - Index builds run on the leader only, as `BuildStep` entries (module `cluster`): a
//!   builder starts after a declaration that left the index Building, and a node that leads
//!   looks for Building indexes (after a read index, so it has applied every declaration
//!   committed before) when it becomes leader and every few seconds after ([`resume_builds`]).
//! - Collection names that are the node's own routes (`raft`, `admin`, `write`, `read`,
//!   `scan`, `status`) are refused (400): those paths belong to cairn-raft's routes.

use super::{encode, refused, Answer, BulkEntry, DocOp, DocWrite, EXTENSION};
use crate::decode;
use crate::error::ApiError;
use crate::routes::{self as single, blocking, doc_response, json_response, written};
use crate::store::{self, IdGen, ListQuery, Preconditions};
use axum::body::Body;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use cairn::Env;
use cairn_doc::{key, Collection};
use cairn_raft::{Node, Request};
use serde_json::json;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Collection names whose paths are cairn-raft's routes on a cluster node.
pub const RESERVED: [&str; 6] = ["raft", "admin", "write", "read", "scan", "status"];

/// What the cluster's document handlers share.
pub struct ClusterState {
    node: Node,
    ids: IdGen,
    max_id: usize,
    max_body: usize,
    read_gate: tokio::sync::Semaphore,
    request_timeout: Duration,
    /// Documents per build step entry.
    build_batch: u64,
    /// The indexes this node runs a builder for (one builder per index).
    builders: Mutex<HashSet<(String, String)>>,
    /// Where `/_backup` writes its copy before streaming it (`Config::backup_dir`).
    backup_dir: Option<std::path::PathBuf>,
}

impl ClusterState {
    /// The state of `node`'s document routes, with the limits of `cfg`.
    pub fn new(node: Node, cfg: &crate::Config) -> Arc<ClusterState> {
        // cairn-doc's ids are 1 to 255 bytes; the key size is the same on every replica.
        let max_id = node
            .storage()
            .with_env(|e| e.max_key_size())
            .min(super::MAX_ID);
        Arc::new(ClusterState {
            node,
            ids: IdGen::default(),
            max_id,
            max_body: cfg.max_body,
            read_gate: tokio::sync::Semaphore::new(cfg.read_threads.max(1)),
            request_timeout: cfg.request_timeout,
            build_batch: cfg.build_batch.max(1) as u64,
            builders: Mutex::default(),
            backup_dir: cfg.backup_dir.clone(),
        })
    }
}

type Shared = State<Arc<ClusterState>>;

/// The document routes of a cluster node (merge them with cairn-raft's node routes).
pub fn routes(state: Arc<ClusterState>) -> Router {
    Router::new()
        .route("/_health", get(health))
        .route("/_stats", get(stats))
        .route("/_backup", get(backup))
        .route("/{collection}", get(list).post(post_doc))
        .route("/{collection}/_bulk", post(bulk))
        .route("/{collection}/_changes", get(changes))
        .route(
            "/{collection}/_index/{name}",
            get(get_index).put(put_index).delete(delete_index),
        )
        .route(
            "/{collection}/",
            get(single::empty_id)
                .put(single::empty_id)
                .delete(single::empty_id),
        )
        .route(
            "/{collection}/{id}",
            get(get_doc).put(put_doc).delete(delete_doc),
        )
        .fallback(single::not_found)
        .with_state(state)
}

/// `GET /_backup`: a hot copy of this node's environment (its replica, with the `raft.*`
/// databases), streamed as the single-node server streams its own.
async fn backup(State(s): Shared) -> Result<Response, ApiError> {
    let dir = s.backup_dir.clone();
    let (f, len) = local(&s, move |env| single::backup_file(dir.as_deref(), env)).await?;
    Ok(single::file_response(f, len))
}

/// A collection name as the cluster's routes take it (module invariants).
fn collection(name: &str) -> Result<(), ApiError> {
    decode::collection(name)?;
    if RESERVED.contains(&name) {
        return Err(
            ApiError::bad_request("a collection name reserved on a cluster node")
                .with_detail(json!({ "reserved": RESERVED })),
        );
    }
    Ok(())
}

/// 421 naming the leader (the one `named` by a refusal, or the one this node knows).
fn not_leader(st: &ClusterState, named: Option<u64>, why: String) -> ApiError {
    let (id, addr) = st.node.leader_of(named);
    ApiError::new(
        StatusCode::MISDIRECTED_REQUEST,
        "this node is not the leader; retry on the leader",
    )
    .with_detail(json!({ "leader_id": id, "leader_addr": addr, "why": why }))
}

/// A cairn-raft failure: 421 if another node leads (or none is known), else 503 (no
/// majority now, say: retry).
fn raft_error(st: &ClusterState, e: cairn_raft::Error) -> ApiError {
    if e.leader().is_some() || !st.node.is_leader() {
        return not_leader(st, e.leader(), e.to_string());
    }
    ApiError::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "the cluster cannot commit now; retry",
    )
    .with_detail(json!(e.to_string()))
}

/// Proposes `op` with the leader's clock and waits for its answer (module invariants).
async fn propose(st: &ClusterState, op: DocOp) -> Result<Answer, ApiError> {
    let payload = encode(&DocWrite {
        at_ms: cairn_doc::now_ms(),
        op,
    })?;
    let req = Request::Ext {
        name: EXTENSION.to_string(),
        payload,
    };
    let w = st.node.propose(req).await.map_err(|e| raft_error(st, e))?;
    if let Some(why) = w.response.error {
        return Err(refused(&why));
    }
    postcard::from_bytes(&w.response.data)
        .map_err(|e| ApiError::internal("an undecodable answer").with_detail(json!(e.to_string())))
}

fn unexpected(a: Answer) -> ApiError {
    ApiError::internal("an answer of another kind").with_detail(json!(format!("{a:?}")))
}

/// `?consistency=`: `linearizable` (default) or `local`.
#[derive(Debug, Default, serde::Deserialize)]
pub struct Consistency {
    consistency: Option<String>,
}

/// Waits until this node may answer a read of the asked consistency (module invariants).
async fn settle(st: &ClusterState, c: &Consistency) -> Result<(), ApiError> {
    match c.consistency.as_deref() {
        None | Some("linearizable") => st.node.linearize().await.map_err(|e| raft_error(st, e)),
        Some("local") => Ok(()),
        Some(other) => Err(
            ApiError::bad_request("consistency must be linearizable or local")
                .with_detail(json!(other)),
        ),
    }
}

/// Runs the read `f` on this node's environment, on the blocking pool behind the read gate.
async fn local<R: Send + 'static>(
    st: &Arc<ClusterState>,
    f: impl FnOnce(&Env) -> Result<R, ApiError> + Send + 'static,
) -> Result<R, ApiError> {
    let s = st.clone();
    blocking(&st.read_gate, move || s.node.storage().with_env(f)).await
}

/// An existing collection, opened in a read transaction of its own; 404 if there is none.
fn open(env: &Env, name: &str) -> Result<Collection, ApiError> {
    {
        let r = env.read_txn()?;
        match r.open_db(Some(&key::docs_db(name))) {
            Ok(_) => {}
            Err(cairn::Error::DbNotFound { .. }) => {
                return Err(ApiError::not_found("no such collection"))
            }
            Err(e) => return Err(e.into()),
        }
    }
    // Its databases exist (created together): this only opens them.
    Collection::open(env, name).map_err(store::doc_error)
}

/// This node's role, for `_health` and `_stats`.
fn raft_json(node: &Node) -> serde_json::Value {
    let m = node.metrics();
    json!({
        "id": m.id,
        "state": format!("{:?}", m.state),
        "term": m.current_term,
        "leader": m.current_leader,
        "last_applied": m.last_applied.map(|l| l.index),
    })
}

/// `GET /_health`: this replica answers a read transaction; its Raft role.
async fn health(State(s): Shared) -> Result<Response, ApiError> {
    let txn = local(&s, |env| Ok(env.read_txn()?.id())).await?;
    let body = json!({ "status": "ok", "txn": txn, "raft": raft_json(&s.node) });
    Ok(json_response(StatusCode::OK, body.to_string().into_bytes()))
}

/// `GET /_stats`: this replica's collections and environment, and its Raft role.
async fn stats(State(s): Shared) -> Result<Response, ApiError> {
    let mut v = local(&s, store::stats).await?;
    v["server"] = json!({ "max_body": s.max_body });
    v["raft"] = raft_json(&s.node);
    Ok(json_response(StatusCode::OK, v.to_string().into_bytes()))
}

/// `GET /{collection}/{id}[?consistency=local]`.
async fn get_doc(
    State(s): Shared,
    Path((coll, id)): Path<(String, String)>,
    Query(c): Query<Consistency>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    collection(&coll)?;
    decode::id(&id, s.max_id)?;
    settle(&s, &c).await?;
    let (version, doc) = local(&s, move |env| store::get(env, &coll, &id)).await?;
    Ok(doc_response(version, doc, &headers))
}

/// `GET /{collection}?...[&consistency=local]`: a listing or an index query.
async fn list(
    State(s): Shared,
    Path(coll): Path<String>,
    Query(q): Query<ListQuery>,
    Query(c): Query<Consistency>,
) -> Result<Response, ApiError> {
    collection(&coll)?;
    let query = match &q.where_ {
        Some(_) => Some(store::index_query(&q)?),
        None => None,
    };
    settle(&s, &c).await?;
    let body = local(&s, move |env| match (&q.where_, query) {
        (Some(path), Some(query)) => {
            let c = open(env, &coll)?;
            store::query_in(&c, &env.read_txn()?, path, &query)
        }
        _ => store::list(env, &coll, &q),
    })
    .await?;
    Ok(json_response(StatusCode::OK, body))
}

/// `GET /{collection}/_index/{name}[?consistency=local]`.
async fn get_index(
    State(s): Shared,
    Path((coll, name)): Path<(String, String)>,
    Query(c): Query<Consistency>,
) -> Result<Response, ApiError> {
    collection(&coll)?;
    settle(&s, &c).await?;
    let info = local(&s, move |env| {
        open(env, &coll)?
            .index(&env.read_txn()?, &name)
            .map_err(store::doc_error)?
            .ok_or_else(|| ApiError::not_found("no such index").with_detail(json!(name)))
    })
    .await?;
    let v = single::index_json(&info.name, &info.spec, &info.state);
    Ok(json_response(StatusCode::OK, v.to_string().into_bytes()))
}

/// `GET /{collection}/_changes?since=N[&feed=longpoll][&consistency=local]`: this replica's
/// feed (sequence numbers are assigned by apply, so they agree on every node). A long poll
/// re-reads every `FEED_POLL` until a change or its timeout.
async fn changes(
    State(s): Shared,
    Path(coll): Path<String>,
    Query(q): Query<single::ChangesQuery>,
    Query(c): Query<Consistency>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    collection(&coll)?;
    let limit = single::changes_limit(&q)?;
    let since = q.since.unwrap_or(0);
    let wait = match q.feed.as_deref().unwrap_or("normal") {
        "normal" => Duration::ZERO,
        "longpoll" => single::longpoll_wait(&q, s.request_timeout),
        "sse" => {
            let since = single::last_event_id(&headers, since)?;
            settle(&s, &c).await?;
            // The first read answers errors (no collection, trimmed history) with a status;
            // then the stream polls this node's applied feed (sequence numbers are the same
            // on every replica, so a client may resume on another node).
            let first = read_feed(&s, coll.clone(), since, limit).await?;
            let st = s.clone();
            let src = single::FeedSource {
                read: Box::new(move |since| {
                    let (st, coll) = (st.clone(), coll.clone());
                    Box::pin(async move { read_feed(&st, coll, since, limit).await })
                }),
                woken: None,
                shutdown: None,
            };
            return Ok(single::sse_response(src, first, since, limit));
        }
        other => {
            return Err(
                ApiError::bad_request("feed must be normal, longpoll or sse")
                    .with_detail(json!(other)),
            )
        }
    };
    settle(&s, &c).await?;
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let ch = read_feed(&s, coll.clone(), since, limit).await?;
        let now = tokio::time::Instant::now();
        if !ch.is_empty() || now >= deadline {
            return Ok(single::ndjson(single::json_lines(&ch)));
        }
        tokio::time::sleep(single::FEED_POLL.min(deadline - now)).await;
    }
}

/// This node's applied feed of `coll` after `since`, at most `limit` records.
async fn read_feed(
    s: &Arc<ClusterState>,
    coll: String,
    since: u64,
    limit: usize,
) -> Result<Vec<cairn_doc::Change>, ApiError> {
    local(s, move |env| {
        open(env, &coll)?
            .changes(&env.read_txn()?, since, limit)
            .map_err(store::doc_error)
    })
    .await
}

/// A document (checked as the single-node server checks it) proposed as a put of `id`.
async fn propose_put(
    s: &ClusterState,
    (coll, id): (String, String),
    doc: &[u8],
    pre: Preconditions,
) -> Result<Response, ApiError> {
    let op = DocOp::Put {
        coll: coll.clone(),
        id: id.clone(),
        body: doc.to_vec(),
        pre,
    };
    match propose(s, op).await? {
        Answer::Written { version, created } => {
            Ok(written(&coll, &id, store::Written { version, created }))
        }
        a => Err(unexpected(a)),
    }
}

/// `PUT /{collection}/{id}`.
async fn put_doc(
    State(s): Shared,
    Path((coll, id)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    collection(&coll)?;
    decode::id(&id, s.max_id)?;
    let pre = single::preconditions(&headers);
    let doc = single::document_body(&headers, body, s.max_body).await?;
    propose_put(&s, (coll, id), &doc, pre).await
}

/// `POST /{collection}`: the id is drawn here, on the node that proposes.
async fn post_doc(
    State(s): Shared,
    Path(coll): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    collection(&coll)?;
    let doc = single::document_body(&headers, body, s.max_body).await?;
    let id = s.ids.next();
    propose_put(&s, (coll, id), &doc, Preconditions::default()).await
}

/// `DELETE /{collection}/{id}`.
async fn delete_doc(
    State(s): Shared,
    Path((coll, id)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    collection(&coll)?;
    decode::id(&id, s.max_id)?;
    let pre = single::preconditions(&headers);
    match propose(&s, DocOp::Delete { coll, id, pre }).await? {
        Answer::Deleted { .. } => Ok(single::no_content()),
        a => Err(unexpected(a)),
    }
}

/// `POST /{collection}/_bulk`: one log entry; items without an id get one here.
async fn bulk(
    State(s): Shared,
    Path(coll): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    collection(&coll)?;
    let bytes = single::json_body(&headers, body, s.max_body).await?;
    let items = decode::bulk(&bytes)?
        .into_iter()
        .map(|i| BulkEntry {
            id: i.id.unwrap_or_else(|| s.ids.next()),
            op: i.op,
            doc: i.doc.map(|d| d.to_vec()),
            if_match: i.if_match,
        })
        .collect();
    match propose(&s, DocOp::Bulk { coll, items }).await? {
        Answer::Bulk { results } => {
            let mut body = b"{\"results\":".to_vec();
            body.extend_from_slice(&results);
            body.push(b'}');
            Ok(json_response(StatusCode::OK, body))
        }
        a => Err(unexpected(a)),
    }
}

/// `PUT /{collection}/_index/{name}` `{"path", "unique"}`: declared through the log; 200 if
/// Ready at once (an empty collection), else 202 and the leader builds it in steps.
async fn put_index(
    State(s): Shared,
    Path((coll, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    collection(&coll)?;
    let bytes = single::json_body(&headers, body, s.max_body).await?;
    let b: single::IndexBody =
        serde_json::from_slice(&bytes).map_err(|e| decode::json_error("index definition", &e))?;
    let op = DocOp::DeclareIndex {
        coll: coll.clone(),
        name: name.clone(),
        path: b.path,
        unique: b.unique,
    };
    match propose(&s, op).await? {
        Answer::Index { json, building } => {
            let status = if building {
                spawn_builder(&s, coll, name);
                StatusCode::ACCEPTED
            } else {
                StatusCode::OK
            };
            Ok(json_response(status, json))
        }
        a => Err(unexpected(a)),
    }
}

/// `DELETE /{collection}/_index/{name}` (a builder running stops at its next step).
async fn delete_index(
    State(s): Shared,
    Path((coll, name)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    collection(&coll)?;
    match propose(&s, DocOp::DropIndex { coll, name }).await? {
        Answer::Dropped => Ok(single::no_content()),
        a => Err(unexpected(a)),
    }
}

/// Proposes build steps of index `name` of `coll` until it is not Building, this node stops
/// leading, or a step is refused (the index was dropped); one builder per index per node.
fn spawn_builder(st: &Arc<ClusterState>, coll: String, name: String) {
    let key = (coll, name);
    let fresh = st
        .builders
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key.clone());
    if !fresh {
        return;
    }
    let st = st.clone();
    tokio::spawn(async move {
        while st.node.is_leader() {
            let op = DocOp::BuildStep {
                coll: key.0.clone(),
                name: key.1.clone(),
                batch: st.build_batch,
            };
            match propose(&st, op).await {
                Ok(Answer::Index { building: true, .. }) => tokio::task::yield_now().await,
                _ => break,
            }
        }
        st.builders
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&key);
    });
}

/// The indexes of this replica in state Building, as (collection, index).
fn building_indexes(env: &Env) -> Result<Vec<(String, String)>, ApiError> {
    let mut out = Vec::new();
    for coll in store::collection_names(env)? {
        let c = open(env, &coll)?;
        let txn = env.read_txn()?;
        for i in c.indexes(&txn).map_err(store::doc_error)? {
            if let cairn_doc::IndexState::Building { .. } = i.state {
                out.push((coll.clone(), i.name));
            }
        }
    }
    Ok(out)
}

/// How often a leader looks again for indexes left Building (a builder that stopped on a
/// failed proposal, say); it also looks at once when it becomes leader.
const RESUME_EVERY: Duration = Duration::from_secs(5);

/// Runs for the life of the node: starts a builder for every Building index whenever this
/// node has become leader, and every [`RESUME_EVERY`] while it leads (module invariants).
pub async fn resume_builds(st: Arc<ClusterState>) {
    let mut led = false;
    let mut last = tokio::time::Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let leads = st.node.is_leader();
        let due = leads && (!led || last.elapsed() >= RESUME_EVERY);
        led = leads;
        // A read index first: every declaration committed so far is then applied here.
        if !due || st.node.linearize().await.is_err() {
            continue;
        }
        last = tokio::time::Instant::now();
        if let Ok(found) = local(&st, building_indexes).await {
            for (coll, name) in found {
                spawn_builder(&st, coll, name);
            }
        }
    }
}
