//! A node as a process, and the commands that operate a cluster: `cairn cluster ...` (the
//! grammar is [`ClusterArgs`], shared by `cairn` and this crate's `cairn-cluster` binary).
//!
//! A node serves, on one address, the Raft RPCs (net.rs) and the client routes (JSON):
//!
//! | route | what |
//! |---|---|
//! | `POST /write` `{"ops":[{"db","key","value"}]}` | a write batch (`value: null` deletes), on the leader; `{"index"}` once committed and applied there |
//! | `GET /read?db=&key=[&consistency=local]` | `{"value"}`: linearizable on the leader (read index), or this node's applied state |
//! | `GET /read?db=&key=&consistency=bounded&max_lag_ms=D` | `{"value"}` from this node's state if it is within D ms of its leader (`Node::read_bounded`); else 421 with `too_stale` and the leader |
//! | `GET /scan?db=` | `{"entries":[[key, value]...]}`: this node's applied state of one database |
//! | `GET /status` | this node's role, term, leader, log / applied indexes, membership, and on the leader each node's matched index and lag |
//! | `POST /admin/init` `{"members":{"id":"addr"}}` | makes a new cluster (empty: this node alone); 409 if already done |
//! | `POST /admin/add-learner` `{"id","addr"}` | adds a learner and waits until it has caught up |
//! | `POST /admin/promote` `{"ids":[..]}` / `POST /admin/remove` `{"ids":[..]}` | learners to voters / voters out of the cluster |
//!
//! Keys and values cross the JSON routes as UTF-8 strings. A route that must run on the leader
//! answers 421 on another node with `{"error","leader_id","leader_addr"}` (the leader it knows,
//! if any); [`Client`] follows it. Other failures are 503 `{"error"}` (retry) or 400.

use crate::net::{request, HttpNetwork, RPC_CONTENT_TYPE};
use crate::raft::{Config, NodeId, SnapshotPolicy};
use crate::types::{decode, encode};
use crate::{Error, Node, Op};
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::serve::ListenerExt;
use axum::{Json, Router};
use clap::{Args, Subcommand};
use hyper::body::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// `cairn cluster`: run a Raft node, or operate a running cluster.
#[derive(Args, Debug)]
pub struct ClusterArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: ClusterCommand,
}

/// The `cairn cluster` subcommands.
#[derive(Subcommand, Debug)]
pub enum ClusterCommand {
    /// Run node ID on the environment directory DIR, serving Raft and clients on ADDR.
    Node(NodeArgs),
    /// Make a new cluster of the given members (or of the node alone), on one node, once.
    Init {
        /// A running node.
        #[arg(long)]
        node: String,
        /// A member, as ID=ADDR (repeat; none: the node alone).
        #[arg(long = "member")]
        members: Vec<String>,
    },
    /// Add node ID at ADDR as a learner; returns once it has caught up.
    AddLearner {
        /// A node of the cluster (the leader is found from it).
        #[arg(long)]
        node: String,
        /// The learner's id.
        #[arg(long)]
        id: NodeId,
        /// The learner's address.
        #[arg(long)]
        addr: String,
    },
    /// Make learners voters.
    Promote {
        /// A node of the cluster.
        #[arg(long)]
        node: String,
        /// The learners to promote (repeat).
        #[arg(long = "id", required = true)]
        ids: Vec<NodeId>,
    },
    /// Remove voters from the cluster.
    Remove {
        /// A node of the cluster.
        #[arg(long)]
        node: String,
        /// The voters to remove (repeat).
        #[arg(long = "id", required = true)]
        ids: Vec<NodeId>,
    },
    /// Show a node's view: role, term, leader, indexes, membership and each node's lag.
    Status {
        /// The node to ask.
        #[arg(long)]
        node: String,
    },
    /// Put KEY = VALUE in database DB (through the leader).
    Put {
        /// A node of the cluster.
        #[arg(long)]
        node: String,
        /// The database.
        db: String,
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// Read KEY of database DB: linearizable (on the leader), this node's state (--local), or
    /// this node's state if within --max-lag-ms of its leader (else on the leader).
    Get {
        /// A node of the cluster.
        #[arg(long)]
        node: String,
        /// Read the asked node's applied state, possibly stale.
        #[arg(long, conflicts_with = "max_lag_ms")]
        local: bool,
        /// Read the asked node's state if it can show it is at most this many milliseconds
        /// behind its leader; else the read is retried on the leader.
        #[arg(long)]
        max_lag_ms: Option<u64>,
        /// The database.
        db: String,
        /// The key.
        key: String,
    },
}

/// `cairn cluster node`.
#[derive(Args, Debug, Clone)]
pub struct NodeArgs {
    /// This node's id (not 0), unique in the cluster.
    #[arg(long)]
    pub id: NodeId,
    /// The node's directory (created if missing).
    #[arg(long)]
    pub dir: PathBuf,
    /// Address to listen on; port 0 picks a free one (printed on stdout).
    #[arg(long, default_value = "127.0.0.1:7000")]
    pub listen: String,
    /// Address the other nodes reach this one at (default: the bound address).
    #[arg(long)]
    pub advertise: Option<String>,
    /// Leader heartbeat, and the timeout of one append-entries RPC, in milliseconds.
    #[arg(long, default_value_t = 250)]
    pub heartbeat_ms: u64,
    /// The election timeout's lower bound in milliseconds (the upper one is twice it).
    #[arg(long, default_value_t = 1500)]
    pub election_ms: u64,
    /// Build a snapshot (and purge the log behind it) every this many applied entries.
    #[arg(long, default_value_t = 20000)]
    pub snapshot_every: u64,
    /// Bytes per snapshot chunk sent to a follower.
    #[arg(long, default_value_t = 1 << 20)]
    pub chunk: u64,
}

/// Runs one `cairn cluster` command; the error is the message to print.
pub fn run(args: ClusterArgs) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the runtime: {e}"))?;
    rt.block_on(async move {
        let call = |node: &str, path: &str, body: Option<Value>| {
            let mut c = cli_client(node);
            let path = path.to_string();
            async move { c.call(&path, body).await }
        };
        let out = match args.command {
            ClusterCommand::Node(a) => return serve(a).await,
            ClusterCommand::Init { node, members } => {
                let mut m = BTreeMap::new();
                for s in members {
                    let (id, addr) = s
                        .split_once('=')
                        .ok_or_else(|| format!("--member {s:?}: expected ID=ADDR"))?;
                    let id: NodeId = id.parse().map_err(|e| format!("--member {s:?}: {e}"))?;
                    m.insert(id.to_string(), addr.to_string());
                }
                call(&node, "/admin/init", Some(json!({ "members": m }))).await?
            }
            ClusterCommand::AddLearner { node, id, addr } => {
                let mut c = cli_client(&node);
                c.timeout = Duration::from_secs(3600);
                let body = json!({ "id": id, "addr": addr });
                c.call("/admin/add-learner", Some(body)).await?
            }
            ClusterCommand::Promote { node, ids } => {
                call(&node, "/admin/promote", Some(json!({ "ids": ids }))).await?
            }
            ClusterCommand::Remove { node, ids } => {
                call(&node, "/admin/remove", Some(json!({ "ids": ids }))).await?
            }
            ClusterCommand::Status { node } => {
                let mut c = cli_client(&node);
                c.follow = false;
                c.call("/status", None).await?
            }
            ClusterCommand::Put {
                node,
                db,
                key,
                value,
            } => {
                let ops = json!({ "ops": [{ "db": db, "key": key, "value": value }] });
                call(&node, "/write", Some(ops)).await?
            }
            ClusterCommand::Get {
                node,
                local,
                max_lag_ms,
                db,
                key,
            } => {
                let mut c = cli_client(&node);
                c.follow = !local;
                let consistency = match (local, max_lag_ms) {
                    (true, _) => "local".to_string(),
                    (false, Some(d)) => format!("bounded&max_lag_ms={d}"),
                    (false, None) => "linearizable".to_string(),
                };
                let q = format!(
                    "/read?db={}&key={}&consistency={consistency}",
                    pct(&db),
                    pct(&key),
                );
                c.call(&q, None).await?
            }
        };
        println!(
            "{}",
            serde_json::to_string_pretty(&out).unwrap_or_else(|_| out.to_string())
        );
        Ok(())
    })
}

/// The client of one command: retries for 10 s (an election takes a few seconds), except
/// `add-learner`, which waits as long as the catching up takes.
fn cli_client(node: &str) -> Client {
    let mut c = Client::new(vec![node.to_string()]);
    c.deadline = Duration::from_secs(10);
    c
}

/// Percent-encodes a query component.
pub fn pct(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The openraft configuration of a node started with `a`.
pub fn config(a: &NodeArgs) -> Config {
    Config {
        cluster_name: "cairn".to_string(),
        heartbeat_interval: a.heartbeat_ms,
        election_timeout_min: a.election_ms,
        election_timeout_max: a.election_ms * 2,
        install_snapshot_timeout: 10_000,
        snapshot_policy: SnapshotPolicy::LogsSinceLast(a.snapshot_every),
        // Keep some log behind a snapshot for followers a little behind; a node further back
        // (or new) gets the snapshot.
        max_in_snapshot_log_to_keep: (a.snapshot_every / 2).min(1000),
        snapshot_max_chunk_size: a.chunk,
        ..Default::default()
    }
}

/// Runs a node until the process is stopped (SIGINT stops Raft first).
pub async fn serve(a: NodeArgs) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(&a.listen)
        .await
        .map_err(|e| format!("listening on {}: {e}", a.listen))?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("listening on {}: {e}", a.listen))?
        .to_string();
    // Answers are small and connections kept alive (clients, and the nodes' RPCs: net.rs):
    // with Nagle's algorithm an answer written in two pieces waits for the peer's delayed
    // ACK, up to 40 ms. The benchmark's p99 at one client showed it.
    let listener = listener.tap_io(|s| {
        let _ = s.set_nodelay(true);
    });
    let addr = a.advertise.clone().unwrap_or_else(|| bound.clone());
    std::fs::create_dir_all(&a.dir).map_err(|e| format!("{}: {e}", a.dir.display()))?;
    let node = Node::start(a.id, &a.dir, config(&a), HttpNetwork::default())
        .await
        .map_err(|e| format!("starting node {}: {e}", a.id))?;
    let app = router(node.clone(), addr.clone());
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "node {} listening on {bound} (advertised {addr})",
            a.id
        );
        let _ = out.flush();
    }
    let stop = node.clone();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            let _ = tokio::signal::ctrl_c().await;
            let _ = stop.shutdown().await;
        })
        .await
        .map_err(|e| format!("serving: {e}"))
}

/// The largest body of a client route: a write batch of up to 64 MiB of JSON.
pub const MAX_BATCH: usize = 64 << 20;

struct Ctx {
    node: Node,
    addr: String,
}

type Shared = State<Arc<Ctx>>;

/// The routes of one node: Raft RPCs and client routes.
pub fn router(node: Node, addr: String) -> Router {
    // Raft RPCs come from the cluster's own nodes and carry up to `max_payload_entries` log
    // entries, each a client batch: no body limit (axum's default of 2 MB would refuse a run
    // of large batches and stall replication). Client bodies: one batch, at most MAX_BATCH.
    let rpc = Router::new()
        .route("/raft/append", post(rpc_append))
        .route("/raft/vote", post(rpc_vote))
        .route("/raft/snapshot", post(rpc_snapshot))
        .layer(DefaultBodyLimit::disable());
    Router::new()
        .merge(rpc)
        .route("/write", post(write))
        .route("/read", get(read))
        .route("/scan", get(scan))
        .route("/status", get(status))
        .route("/admin/init", post(init))
        .route("/admin/add-learner", post(add_learner))
        .route("/admin/promote", post(promote))
        .route("/admin/remove", post(remove))
        .layer(DefaultBodyLimit::max(MAX_BATCH))
        .with_state(Arc::new(Ctx { node, addr }))
}

fn rpc_answer<T: Serialize>(r: &T) -> Response {
    match encode(r) {
        Ok(b) => (
            StatusCode::OK,
            [(axum::http::header::CONTENT_TYPE, RPC_CONTENT_TYPE)],
            b,
        )
            .into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e).into_response(),
    }
}

async fn rpc_append(State(c): Shared, body: Bytes) -> Response {
    match decode(&body) {
        Ok(req) => rpc_answer(&c.node.append_entries(req).await),
        Err(e) => (StatusCode::BAD_REQUEST, e).into_response(),
    }
}

async fn rpc_vote(State(c): Shared, body: Bytes) -> Response {
    match decode(&body) {
        Ok(req) => rpc_answer(&c.node.raft().vote(req).await),
        Err(e) => (StatusCode::BAD_REQUEST, e).into_response(),
    }
}

async fn rpc_snapshot(State(c): Shared, body: Bytes) -> Response {
    match decode(&body) {
        Ok(req) => rpc_answer(&c.node.raft().install_snapshot(req).await),
        Err(e) => (StatusCode::BAD_REQUEST, e).into_response(),
    }
}

fn bad(why: impl std::fmt::Display) -> Response {
    (
        StatusCode::BAD_REQUEST,
        Json(json!({ "error": why.to_string() })),
    )
        .into_response()
}

/// The leader to name in a 421: `named` (by the refusal) or the one this node knows, and its
/// address.
fn leader_of(c: &Ctx, named: Option<NodeId>) -> (Option<NodeId>, Option<String>) {
    c.node.leader_of(named)
}

/// The answer to a refused call: 421 naming the leader if this node is not it, else 503.
fn refused(c: &Ctx, e: Error) -> Response {
    let not_leader = e.leader().is_some() || !c.node.is_leader();
    if not_leader {
        let (leader, addr) = leader_of(c, e.leader());
        let body = json!({ "error": e.to_string(), "leader_id": leader, "leader_addr": addr });
        return (StatusCode::MISDIRECTED_REQUEST, Json(body)).into_response();
    }
    (
        StatusCode::SERVICE_UNAVAILABLE,
        Json(json!({ "error": e.to_string() })),
    )
        .into_response()
}

/// One operation of `POST /write`.
#[derive(Deserialize)]
struct JsonOp {
    db: String,
    key: String,
    value: Option<String>,
}

#[derive(Deserialize)]
struct WriteBody {
    ops: Vec<JsonOp>,
}

async fn write(State(c): Shared, Json(b): Json<WriteBody>) -> Response {
    let ops = b
        .ops
        .into_iter()
        .map(|o| Op {
            db: o.db,
            key: o.key.into_bytes(),
            value: o.value.map(String::into_bytes),
        })
        .collect();
    match c.node.write(ops).await {
        Ok(w) => match w.response.error {
            None => Json(json!({ "index": w.index })).into_response(),
            Some(why) => bad(why),
        },
        Err(e) => refused(&c, e),
    }
}

#[derive(Deserialize)]
struct ReadQuery {
    db: String,
    key: String,
    consistency: Option<String>,
    max_lag_ms: Option<u64>,
}

fn text(b: Option<Vec<u8>>) -> Value {
    match b {
        Some(v) => Value::String(String::from_utf8_lossy(&v).into_owned()),
        None => Value::Null,
    }
}

async fn read(State(c): Shared, Query(q): Query<ReadQuery>) -> Response {
    let r = match (q.consistency.as_deref(), q.max_lag_ms) {
        (None | Some("linearizable"), None) => c.node.read(&q.db, q.key.as_bytes()).await,
        (Some("local"), None) => c.node.storage().get(&q.db, q.key.as_bytes()),
        (Some("bounded"), Some(d)) => {
            let bound = Duration::from_millis(d);
            c.node.read_bounded(&q.db, q.key.as_bytes(), bound).await
        }
        (Some("bounded"), None) => return bad("consistency bounded needs max_lag_ms"),
        (_, Some(_)) => return bad("max_lag_ms goes with consistency=bounded only"),
        (Some(other), None) => {
            return bad(format!(
                "consistency {other:?}: linearizable, bounded or local"
            ))
        }
    };
    match r {
        Ok(v) => Json(json!({ "value": text(v) })).into_response(),
        Err(e) => match e.too_stale() {
            // Not fresh enough here: 421, naming the leader, where the read is fresh.
            Some(s) => {
                let (id, addr) = leader_of(&c, None);
                let stale = json!({ "since_ms": s.since_ms, "applied": s.applied,
                    "leader_commit": s.leader_commit, "bound_ms": s.bound_ms });
                let body = json!({ "error": e.to_string(), "too_stale": stale,
                    "leader_id": id, "leader_addr": addr });
                (StatusCode::MISDIRECTED_REQUEST, Json(body)).into_response()
            }
            None => refused(&c, e),
        },
    }
}

#[derive(Deserialize)]
struct ScanQuery {
    db: String,
}

async fn scan(State(c): Shared, Query(q): Query<ScanQuery>) -> Response {
    match c.node.storage().scan(&q.db) {
        Ok(kv) => {
            let entries: Vec<Value> = kv
                .into_iter()
                .map(|(k, v)| json!([text(Some(k)), text(Some(v))]))
                .collect();
            Json(json!({ "entries": entries })).into_response()
        }
        Err(e) => refused(&c, e),
    }
}

async fn status(State(c): Shared) -> Response {
    let m = c.node.metrics();
    let membership = m.membership_config.membership();
    let nodes: BTreeMap<String, String> = membership
        .nodes()
        .map(|(id, n)| (id.to_string(), n.addr.clone()))
        .collect();
    let voters: Vec<NodeId> = membership.voter_ids().collect();
    let learners: Vec<NodeId> = membership.learner_ids().collect();
    let last = m.last_log_index;
    let replication: Option<BTreeMap<String, Value>> = m.replication.as_ref().map(|r| {
        r.iter()
            .map(|(id, matched)| {
                let matched = matched.as_ref().map(|l| l.index);
                let lag = last.map(|l| l.saturating_sub(matched.unwrap_or(0)));
                (id.to_string(), json!({ "matched": matched, "lag": lag }))
            })
            .collect()
    });
    Json(json!({
        "id": m.id,
        "addr": c.addr,
        "state": format!("{:?}", m.state),
        "term": m.current_term,
        "leader": m.current_leader,
        "last_log_index": m.last_log_index,
        "last_applied": m.last_applied.map(|l| l.index),
        "snapshot": m.snapshot.map(|l| l.index),
        "purged": m.purged.map(|l| l.index),
        "voters": voters,
        "learners": learners,
        "nodes": nodes,
        "replication": replication,
        "running": m.running_state.as_ref().map_err(|e| e.to_string()).err(),
    }))
    .into_response()
}

#[derive(Deserialize)]
struct InitBody {
    #[serde(default)]
    members: BTreeMap<NodeId, String>,
}

async fn init(State(c): Shared, Json(b): Json<InitBody>) -> Response {
    let mut members: BTreeMap<_, _> = b
        .members
        .into_iter()
        .map(|(id, addr)| (id, crate::raft::BasicNode::new(addr)))
        .collect();
    if members.is_empty() {
        members.insert(c.node.id, crate::raft::BasicNode::new(&c.addr));
    }
    match c.node.initialize(members).await {
        Ok(()) => Json(json!({ "ok": true })).into_response(),
        // Already initialized (or a membership this node is not in): not retryable.
        Err(e) => (
            StatusCode::CONFLICT,
            Json(json!({ "error": e.to_string() })),
        )
            .into_response(),
    }
}

#[derive(Deserialize)]
struct LearnerBody {
    id: NodeId,
    addr: String,
}

async fn add_learner(State(c): Shared, Json(b): Json<LearnerBody>) -> Response {
    match c.node.add_learner(b.id, &b.addr, true).await {
        Ok(index) => Json(json!({ "index": index })).into_response(),
        Err(e) => refused(&c, e),
    }
}

#[derive(Deserialize)]
struct IdsBody {
    ids: BTreeSet<NodeId>,
}

async fn promote(State(c): Shared, Json(b): Json<IdsBody>) -> Response {
    match c.node.change_voters(b.ids, true).await {
        Ok(index) => Json(json!({ "index": index })).into_response(),
        Err(e) => refused(&c, e),
    }
}

async fn remove(State(c): Shared, Json(b): Json<IdsBody>) -> Response {
    match c.node.change_voters(b.ids, false).await {
        Ok(index) => Json(json!({ "index": index })).into_response(),
        Err(e) => refused(&c, e),
    }
}

/// A client of the JSON routes: finds the leader by following 421 answers and trying the
/// other known nodes, and retries refusals (503) and transport failures until `deadline`.
///
/// A retried write after a transport failure may be applied twice (the first attempt may have
/// committed); the batches this crate's tests send are puts, which are idempotent.
pub struct Client {
    addrs: Vec<String>,
    next: usize,
    leader: Option<String>,
    /// Follow 421 answers to the leader (true by default).
    pub follow: bool,
    /// How long one call may go on retrying.
    pub deadline: Duration,
    /// Timeout of one HTTP exchange.
    pub timeout: Duration,
}

impl Client {
    /// A client of the nodes at `addrs`.
    pub fn new(addrs: Vec<String>) -> Client {
        Client {
            addrs,
            next: 0,
            leader: None,
            follow: true,
            deadline: Duration::from_secs(30),
            timeout: Duration::from_secs(10),
        }
    }

    /// Calls `path` (a POST of `body`, or a GET); the JSON answer of a 200.
    pub async fn call(&mut self, path: &str, body: Option<Value>) -> Result<Value, String> {
        let start = Instant::now();
        let body = body.map(|b| b.to_string().into_bytes());
        let mut last = String::new();
        while start.elapsed() < self.deadline {
            let addr = match &self.leader {
                Some(a) => a.clone(),
                None => {
                    let a = self.addrs[self.next % self.addrs.len()].clone();
                    self.next += 1;
                    a
                }
            };
            let b = body.clone().map(|b| ("application/json", b));
            let a = match request(&addr, path, b, self.timeout).await {
                Ok(a) => a,
                Err(e) => {
                    last = e.to_string();
                    self.leader = None;
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            let v: Value = serde_json::from_slice(&a.body).unwrap_or_else(
                |_| json!({ "error": String::from_utf8_lossy(&a.body).into_owned() }),
            );
            match a.status {
                200 => return Ok(v),
                421 if self.follow => {
                    last = format!("{addr}: {v}");
                    self.leader = v["leader_addr"].as_str().map(str::to_string);
                    if self.leader.is_none() {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
                503 => {
                    last = format!("{addr}: {v}");
                    self.leader = None;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                s => return Err(format!("{addr}{path}: HTTP {s}: {v}")),
            }
        }
        Err(format!("{path}: gave up after {:?}: {last}", self.deadline))
    }
}
