//! An in-process network: every node's `Raft` in one map, RPCs as direct calls. For tests of
//! whole clusters in one process; a node missing from the map is unreachable, which is how a
//! test cuts a node off. It also injects faults: a node given its own handle
//! ([`MemRouter::for_node`]) has its messages to the nodes it is cut from
//! ([`MemRouter::partition`]) dropped until [`MemRouter::heal`]. A node added with
//! [`MemRouter::add_node`] receives its append-entries as the HTTP route does, through
//! `Node::append_entries`, so that its bounded reads work (fresh.rs). The network between
//! processes is HTTP (net.rs).
//!
//! Invariant: a call reaches the target's `Raft` exactly as openraft would deliver a decoded
//! message: no reordering within one client, no duplication; a dropped one never reaches it.

use crate::fresh::{receive_append, Freshness};
use crate::raft::{NodeId, Raft, TypeConfig};
use crate::Node;
use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// A reachable node: its `Raft`, and what its bounded reads remember if it was added as a
/// [`Node`].
#[derive(Clone)]
struct Peer {
    raft: Raft,
    fresh: Option<Arc<Freshness>>,
}

/// The nodes of an in-process cluster, by id (cheap to clone: one shared map).
#[derive(Clone, Default)]
pub struct MemRouter {
    nodes: Arc<Mutex<BTreeMap<NodeId, Peer>>>,
    /// Directed links (from, to) whose messages are dropped.
    cut: Arc<Mutex<BTreeSet<(NodeId, NodeId)>>>,
    /// The node sending through this handle, if known (only then do cuts apply).
    from: Option<NodeId>,
}

impl MemRouter {
    /// The handle node `id` sends through: its messages obey the cuts.
    pub fn for_node(&self, id: NodeId) -> MemRouter {
        MemRouter {
            from: Some(id),
            ..self.clone()
        }
    }

    /// Drops every message between a node of `a` and a node of `b`, both ways.
    pub fn partition(&self, a: &[NodeId], b: &[NodeId]) {
        let mut cut = self.cut.lock().unwrap_or_else(|p| p.into_inner());
        for &x in a {
            for &y in b {
                cut.insert((x, y));
                cut.insert((y, x));
            }
        }
    }

    /// Restores every link.
    pub fn heal(&self) {
        self.cut.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// Makes `raft` reachable as node `id`.
    pub fn add(&self, id: NodeId, raft: Raft) {
        self.lock().insert(id, Peer { raft, fresh: None });
    }

    /// Makes `node` reachable under its id, its append-entries received as
    /// `Node::append_entries` receives them (bounded reads need this).
    pub fn add_node(&self, node: &Node) {
        let peer = Peer {
            raft: node.raft().clone(),
            fresh: Some(node.freshness()),
        };
        self.lock().insert(node.id, peer);
    }

    /// Makes node `id` unreachable (its process keeps running).
    pub fn remove(&self, id: NodeId) {
        self.lock().remove(&id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<NodeId, Peer>> {
        self.nodes.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn get<E: std::error::Error>(
        &self,
        target: NodeId,
    ) -> Result<Peer, RPCError<NodeId, BasicNode, E>> {
        if let Some(from) = self.from {
            let cut = self.cut.lock().unwrap_or_else(|p| p.into_inner());
            if cut.contains(&(from, target)) {
                let e = std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!("{from} -> {target}: dropped (partition)"),
                );
                return Err(RPCError::Network(NetworkError::new(&e)));
            }
        }
        self.lock().get(&target).cloned().ok_or_else(|| {
            let e = std::io::Error::new(
                std::io::ErrorKind::NotConnected,
                format!("node {target} is not reachable"),
            );
            RPCError::Network(NetworkError::new(&e))
        })
    }
}

/// A connection from one node to `target`.
pub struct MemClient {
    router: MemRouter,
    target: NodeId,
}

impl RaftNetworkFactory<TypeConfig> for MemRouter {
    type Network = MemClient;

    async fn new_client(&mut self, target: NodeId, _node: &BasicNode) -> MemClient {
        MemClient {
            router: self.clone(),
            target,
        }
    }
}

fn remote<E: std::error::Error>(
    target: NodeId,
) -> impl FnOnce(RaftError<NodeId, E>) -> RPCError<NodeId, BasicNode, RaftError<NodeId, E>> {
    move |e| RPCError::RemoteError(RemoteError::new(target, e))
}

impl RaftNetwork<TypeConfig> for MemClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        let peer = self.router.get(self.target)?;
        receive_append(&peer.raft, peer.fresh.as_deref(), rpc)
            .await
            .map_err(remote(self.target))
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        let raft = self.router.get(self.target)?.raft;
        raft.install_snapshot(rpc)
            .await
            .map_err(remote(self.target))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        let raft = self.router.get(self.target)?.raft;
        raft.vote(rpc).await.map_err(remote(self.target))
    }
}
