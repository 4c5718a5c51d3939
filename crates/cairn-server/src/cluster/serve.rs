//! A cluster node as a process: one port serving cairn-raft's node routes (the Raft RPCs
//! `/raft/*`, `/status`, `/admin/*`, the key-value `/write` `/read` `/scan`) and the
//! document routes (module `routes`), over a Raft node whose state machine has the `doc`
//! extension.
//!
//! Invariants:
//! - The node is started with the extension before it serves anything, so it never meets a
//!   `doc` entry it cannot apply.
//! - Formation: a node that was never part of a cluster, started with peers, initializes
//!   the cluster of itself and its peers. Every member started alike proposes the same
//!   membership, which openraft allows (initializing several nodes with one configuration is
//!   safe); a node that already holds a log never initializes again.

use super::routes::{resume_builds, routes, ClusterState};
use super::DocExtension;
use crate::{with_layers, BoxError, Config};
use axum::serve::ListenerExt;
use cairn_raft::cluster::NodeArgs;
use cairn_raft::net::HttpNetwork;
use cairn_raft::raft::BasicNode;
use cairn_raft::Node;
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;

/// What a cluster node serves and how.
#[derive(Debug, Clone)]
pub struct ClusterConfig {
    /// The document routes' limits, and the address to listen on (`server.listen`); the
    /// environment path and durability options are not used (the node's environment is in
    /// `dir`, in cairn-raft's logged mode).
    pub server: Config,
    /// This node's id (not 0).
    pub id: u64,
    /// The node's directory (created if missing).
    pub dir: PathBuf,
    /// The other members, id to address, for forming the cluster (see the module's
    /// invariants); empty: a node that forms nothing by itself (a one-node cluster is
    /// formed with `POST /admin/init`, a new member joins with `/admin/add-learner`).
    pub peers: BTreeMap<u64, String>,
    /// Leader heartbeat (and an append-entries RPC's timeout), milliseconds.
    pub heartbeat_ms: u64,
    /// Lower bound of the election timeout, milliseconds (the upper one is twice it).
    pub election_ms: u64,
    /// A snapshot (and the log purged behind it) every this many applied entries.
    pub snapshot_every: u64,
}

impl ClusterConfig {
    /// Node `id` on `dir`, cairn-raft's defaults for the Raft timings.
    pub fn new(server: Config, id: u64, dir: impl Into<PathBuf>) -> ClusterConfig {
        ClusterConfig {
            server,
            id,
            dir: dir.into(),
            peers: BTreeMap::new(),
            heartbeat_ms: 250,
            election_ms: 1500,
            snapshot_every: 20_000,
        }
    }
}

/// Starts the node and forms the cluster if it is new (module invariants); returns the node
/// and the address it advertises (the bound one).
async fn start(cfg: &ClusterConfig, bound: &str) -> Result<Node, BoxError> {
    std::fs::create_dir_all(&cfg.dir)?;
    let args = NodeArgs {
        id: cfg.id,
        dir: cfg.dir.clone(),
        listen: bound.to_string(),
        advertise: None,
        heartbeat_ms: cfg.heartbeat_ms,
        election_ms: cfg.election_ms,
        snapshot_every: cfg.snapshot_every,
        chunk: 1 << 20,
    };
    let config = cairn_raft::cluster::config(&args);
    let x: Arc<dyn cairn_raft::ext::Extension> = Arc::new(DocExtension);
    let node = Node::start_with(cfg.id, &cfg.dir, config, HttpNetwork::default(), Some(x))
        .await
        .map_err(|e| format!("starting node {}: {e}", cfg.id))?;
    if !cfg.peers.is_empty() && !node.is_initialized().await? {
        let mut members: BTreeMap<u64, BasicNode> = cfg
            .peers
            .iter()
            .map(|(id, a)| (*id, BasicNode::new(a)))
            .collect();
        members.insert(cfg.id, BasicNode::new(bound));
        // Another member's initialization may reach this node first: then it is no longer
        // pristine and refuses, which is the outcome wanted.
        if let Err(e) = node.initialize(members).await {
            eprintln!("node {}: not initializing: {e}", cfg.id);
        }
    }
    Ok(node)
}

/// `cairn serve --cluster`: runs a node on a runtime of its own until SIGINT or SIGTERM;
/// prints `node ID listening on ADDR` on stdout once it serves.
pub fn serve_cluster(cfg: ClusterConfig) -> Result<(), BoxError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .max_blocking_threads(cfg.server.read_threads + cfg.server.write_threads + 8)
        .build()?;
    rt.block_on(async move {
        let listener = crate::listen(cfg.server.listen, cfg.server.backlog)?;
        let bound = listener.local_addr()?.to_string();
        let node = start(&cfg, &bound).await?;
        let state = ClusterState::new(node.clone(), &cfg.server);
        tokio::spawn(resume_builds(state.clone()));
        let docs = with_layers(routes(state), &cfg.server);
        let app = cairn_raft::cluster::router(node.clone(), bound.clone()).merge(docs);
        {
            let mut out = std::io::stdout().lock();
            writeln!(out, "node {} listening on {bound}", cfg.id)?;
            out.flush()?;
        }
        // Small answers on kept-alive connections (clients and the nodes' RPCs): no Nagle
        // delay behind the peer's delayed ACK (as cairn-raft's node does).
        let listener = listener.tap_io(|s| {
            let _ = s.set_nodelay(true);
        });
        let stop = node.clone();
        axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                crate::shutdown_signal().await;
                let _ = stop.shutdown().await;
            })
            .await?;
        Ok(())
    })
}
