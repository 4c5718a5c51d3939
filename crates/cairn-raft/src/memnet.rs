//! An in-process network: every node's `Raft` in one map, RPCs as direct calls. For tests of
//! whole clusters in one process; a node missing from the map is unreachable, which is how a
//! test cuts a node off (the network between processes is not built yet: docs/replication.md,
//! "Status").
//!
//! Invariant: a call reaches the target's `Raft` exactly as openraft would deliver a decoded
//! message: no reordering within one client, no duplication.

use crate::raft::{NodeId, Raft, TypeConfig};
use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::BasicNode;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The nodes of an in-process cluster, by id (cheap to clone: one shared map).
#[derive(Clone, Default)]
pub struct MemRouter {
    nodes: Arc<Mutex<BTreeMap<NodeId, Raft>>>,
}

impl MemRouter {
    /// Makes `raft` reachable as node `id`.
    pub fn add(&self, id: NodeId, raft: Raft) {
        self.lock().insert(id, raft);
    }

    /// Makes node `id` unreachable (its process keeps running).
    pub fn remove(&self, id: NodeId) {
        self.lock().remove(&id);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<NodeId, Raft>> {
        self.nodes.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn get<E: std::error::Error>(
        &self,
        target: NodeId,
    ) -> Result<Raft, RPCError<NodeId, BasicNode, E>> {
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
        let raft = self.router.get(self.target)?;
        raft.append_entries(rpc).await.map_err(remote(self.target))
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<
        InstallSnapshotResponse<NodeId>,
        RPCError<NodeId, BasicNode, RaftError<NodeId, InstallSnapshotError>>,
    > {
        let raft = self.router.get(self.target)?;
        raft.install_snapshot(rpc)
            .await
            .map_err(remote(self.target))
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RPCError<NodeId, BasicNode, RaftError<NodeId>>> {
        let raft = self.router.get(self.target)?;
        raft.vote(rpc).await.map_err(remote(self.target))
    }
}
