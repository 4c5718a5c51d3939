//! A Raft node over Cairn storage: openraft's `Raft` with Cairn-Raft's log store and state
//! machine, and the client operations of docs/replication.md ("What a client is promised"):
//! batched writes through the leader, linearizable reads on the leader, stale-bounded reads on
//! any node, local reads.
//!
//! Invariants: a read through [`Node::read`] returns a value at least as new as every write
//! acknowledged before the read began, on any node that answers it (a node that is not the
//! leader refuses, naming the leader it knows). A read through [`Node::read_bounded`] on a
//! node that is not the leader answers only from a state at least as new as its leader's
//! commit index as of an append-entries it accepted at most the bound before it answered
//! (fresh.rs); on the leader it is the linearizable read.

use crate::ext::Extension;
use crate::fresh::{judge, receive_append, Freshness, Verdict};
use crate::group::{write_error, Grouper};
use crate::raft::{Config, Node as Member, NodeId, Raft, RaftMetrics, TypeConfig};
use crate::types::{check_ops, Op, Request, Response};
use crate::{Error, Storage};
use openraft::error::{CheckIsLeaderError, RaftError};
use openraft::network::RaftNetworkFactory;
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse};
use openraft::ChangeMembers;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// An acknowledged write.
#[derive(Clone, Debug)]
pub struct Written {
    /// The index of its log entry: a node that has applied this index shows the write.
    pub index: Option<u64>,
    /// The state machine's answer.
    pub response: Response,
}

/// One member of a cluster.
#[derive(Clone)]
pub struct Node {
    /// The node's id.
    pub id: NodeId,
    raft: Raft,
    storage: Storage,
    /// Proposes the write batches that wait together as one entry (group.rs).
    grouper: Grouper,
    /// The last append-entries accepted from a leader, for bounded reads (fresh.rs).
    fresh: Arc<Freshness>,
}

fn any<E: std::error::Error + 'static>(e: E) -> Error {
    Error::from(openraft::AnyError::new(&e))
}

impl Node {
    /// Starts node `id` on the storage in `dir`, talking to the others through `network`.
    pub async fn start<N: RaftNetworkFactory<TypeConfig>>(
        id: NodeId,
        dir: &Path,
        config: Config,
        network: N,
    ) -> Result<Node, Error> {
        Node::start_with(id, dir, config, network, None).await
    }

    /// [`Node::start`], with the state machine's extension (src/ext.rs) if `extension`.
    pub async fn start_with<N: RaftNetworkFactory<TypeConfig>>(
        id: NodeId,
        dir: &Path,
        config: Config,
        network: N,
        extension: Option<Arc<dyn Extension>>,
    ) -> Result<Node, Error> {
        let config = Arc::new(config.validate().map_err(any)?);
        let storage = Storage::open(dir)?;
        if let Some(x) = extension {
            // A fresh Storage: the cell is empty.
            let _ = storage.shared.extension.set(x);
        }
        let raft = Raft::new(
            id,
            config,
            network,
            storage.log_store(),
            storage.state_machine(),
        )
        .await
        .map_err(any)?;
        let grouper = Grouper::start(raft.clone());
        Ok(Node {
            id,
            raft,
            storage,
            grouper,
            fresh: Arc::default(),
        })
    }

    /// The openraft node, for the operations not yet wrapped (membership changes).
    pub fn raft(&self) -> &Raft {
        &self.raft
    }

    /// Hands an append-entries RPC from the leader to this node (the networks' receiving side:
    /// cluster.rs's route, memnet.rs), noting what bounded reads need (fresh.rs).
    pub async fn append_entries(
        &self,
        req: AppendEntriesRequest<TypeConfig>,
    ) -> Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>> {
        receive_append(&self.raft, Some(&self.fresh), req).await
    }

    /// What this node remembers for bounded reads (shared with memnet's router).
    pub(crate) fn freshness(&self) -> Arc<Freshness> {
        Arc::clone(&self.fresh)
    }

    /// This node's storage (local reads).
    pub fn storage(&self) -> &Storage {
        &self.storage
    }

    /// Makes a new cluster of `members` (call on one of them, once).
    pub async fn initialize(&self, members: BTreeMap<NodeId, Member>) -> Result<(), Error> {
        self.raft.initialize(members).await.map_err(any)
    }

    /// Replicates and applies a write batch; returns once it is committed and applied on this
    /// node (the leader). A node that is not the leader refuses it ([`Error::leader`] names
    /// the one it knows). A batch refused before proposing (a reserved database) has no
    /// index. Batches written concurrently may share one log entry (group.rs); each is still
    /// applied or refused on its own.
    pub async fn write(&self, ops: Vec<Op>) -> Result<Written, Error> {
        if let Err(why) = check_ops(&ops) {
            return Ok(Written {
                index: None,
                response: Response::refused(why),
            });
        }
        self.grouper.write(ops).await
    }

    /// Replicates and applies any request (an extension entry, say) as one log entry of its
    /// own (not grouped); returns once it is committed and applied on this node (the leader).
    pub async fn propose(&self, req: Request) -> Result<Written, Error> {
        if let Err(why) = req.check() {
            return Ok(Written {
                index: None,
                response: Response::refused(why),
            });
        }
        match self.raft.client_write(req).await {
            Ok(r) => Ok(Written {
                index: Some(r.log_id.index),
                response: r.data,
            }),
            Err(e) => Err(write_error(e)),
        }
    }

    /// A linearizable read (read index): this node confirms it still leads, waits until it
    /// has applied everything committed when the read began, then reads locally.
    pub async fn read(&self, db: &str, key: &[u8]) -> Result<Option<Vec<u8>>, Error> {
        self.linearize().await?;
        self.storage.get(db, key)
    }

    /// The first half of [`Node::read`]: confirms this node still leads and waits until it has
    /// applied everything committed when the call began. A read transaction begun after it
    /// returns sees every write acknowledged before the call (refused with [`Error::leader`]
    /// on a node that is not the leader).
    pub async fn linearize(&self) -> Result<(), Error> {
        self.raft.ensure_linearizable().await.map_err(|e| {
            let leader = match &e {
                RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f)) => f.leader_id,
                _ => None,
            };
            let mut err = any(e);
            err.leader = leader;
            err
        })?;
        Ok(())
    }

    /// Whether this node is the leader now (as its metrics say).
    pub fn is_leader(&self) -> bool {
        self.metrics().state == crate::raft::ServerState::Leader
    }

    /// The leader to name to a client sent elsewhere: `named` (by a refusal) or the one this
    /// node knows, with its address from the membership.
    pub fn leader_of(&self, named: Option<NodeId>) -> (Option<NodeId>, Option<String>) {
        let m = self.metrics();
        let leader = named.or(m.current_leader);
        let addr = leader.and_then(|l| {
            m.membership_config
                .membership()
                .get_node(&l)
                .map(|n| n.addr.clone())
        });
        (leader, addr)
    }

    /// Whether this node was ever made part of a cluster (initialized, or given a log by a
    /// leader): [`Node::initialize`] is for nodes where this is false.
    pub async fn is_initialized(&self) -> Result<bool, Error> {
        self.raft.is_initialized().await.map_err(any)
    }

    /// A stale-bounded read (docs/replication.md, "Stale-bounded follower reads"). On a node
    /// that is not the leader: answers from the local state if the node accepted an
    /// append-entries from the leader it still follows at most `bound` ago and has applied the
    /// commit index it carried (waiting for that apply, within the bound); else refuses with
    /// [`Error::too_stale`]. On the leader: the linearizable read, which is at least as fresh.
    pub async fn read_bounded(
        &self,
        db: &str,
        key: &[u8],
        bound: Duration,
    ) -> Result<Option<Vec<u8>>, Error> {
        // Each round answers, refuses, or waits for an apply that ends within the bound; a
        // newer heartbeat may meanwhile raise the index to wait for, so a few rounds are
        // allowed, and the last one refuses rather than wait again.
        for round in 0..4 {
            let m = self.metrics();
            if m.state == crate::raft::ServerState::Leader {
                return self.read(db, key).await;
            }
            let applied = m.last_applied.map(|l| l.index);
            match judge(
                self.fresh.last().as_ref(),
                &m.vote,
                applied,
                bound,
                Instant::now(),
            ) {
                Verdict::Answer => return self.storage.get(db, key),
                Verdict::Wait { index, within, .. } if round < 3 => {
                    // A timeout is judged again by the next round.
                    let _ = self.wait_applied(index, within).await;
                }
                Verdict::Wait { stale, .. } | Verdict::Refuse(stale) => {
                    return Err(Error::from(stale))
                }
            }
        }
        unreachable!("the last round answers or refuses")
    }

    /// The node's current view: role, leader, log and applied indexes.
    pub fn metrics(&self) -> RaftMetrics<NodeId, Member> {
        self.raft.metrics().borrow().clone()
    }

    /// Waits until this node knows a leader; returns its id.
    pub async fn wait_leader(&self, timeout: Duration) -> Result<NodeId, Error> {
        let m = self
            .raft
            .wait(Some(timeout))
            .metrics(|m| m.current_leader.is_some(), "a leader")
            .await
            .map_err(any)?;
        Ok(m.current_leader.expect("waited for it"))
    }

    /// Waits until this node has applied the log up to `index`.
    pub async fn wait_applied(&self, index: u64, timeout: Duration) -> Result<(), Error> {
        self.raft
            .wait(Some(timeout))
            .applied_index_at_least(Some(index), "applied")
            .await
            .map(|_| ())
            .map_err(any)
    }

    /// Adds node `id` at `addr` as a learner (on the leader). With `blocking`, returns once
    /// the learner has caught up with the leader's log (by snapshot if the log is purged).
    pub async fn add_learner(
        &self,
        id: NodeId,
        addr: &str,
        blocking: bool,
    ) -> Result<Option<u64>, Error> {
        self.raft
            .add_learner(id, Member::new(addr), blocking)
            .await
            .map(|r| Some(r.log_id.index))
            .map_err(write_error)
    }

    /// Makes learners `ids` voters (`promote`) or removes voters `ids` from the cluster
    /// (`!promote`; a removed node is dropped from the membership entirely). On the leader.
    pub async fn change_voters(&self, ids: BTreeSet<NodeId>, promote: bool) -> Result<u64, Error> {
        let change = if promote {
            ChangeMembers::AddVoterIds(ids)
        } else {
            ChangeMembers::RemoveVoters(ids)
        };
        self.raft
            .change_membership(change, false)
            .await
            .map(|r| r.log_id.index)
            .map_err(write_error)
    }

    /// Stops the node's Raft tasks.
    pub async fn shutdown(&self) -> Result<(), Error> {
        self.raft.shutdown().await.map_err(any)
    }
}
