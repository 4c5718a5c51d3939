//! Group proposals: the client write batches that reach a node while its earlier proposals
//! are in flight go to openraft together, as one log entry ([`Request::Group`]).
//!
//! Why: openraft 0.9 appends each proposed entry to the log on its own and waits for that
//! append's flush before it takes the next proposal (`RaftCore::append_to_log`), so one entry
//! per client batch costs the leader one log flush per batch, one after another: its write
//! rate is at most one batch per fdatasync, whatever the number of clients
//! (docs/bench/replication/results.md). One entry for every batch waiting costs one flush
//! for all of them.
//!
//! Invariants:
//! - Every batch given to [`Grouper::write`] is proposed in exactly one entry and answered
//!   once: with its own outcome (applied, or refused with why: each batch of a group is
//!   applied or refused on its own, sm.rs), or with the error of the entry's proposal.
//! - A lone batch is proposed as [`Request::Write`], exactly as without grouping.
//! - At most [`IN_FLIGHT`] proposals are in flight; a group holds at most [`MAX_BATCHES`]
//!   batches and, past its first batch, at most [`MAX_BYTES`] of keys and values (an
//!   append-entries RPC must complete within a heartbeat interval); a batch that does not fit
//!   waits for the next group, first.

use crate::raft::{NodeId, Raft};
use crate::types::{Op, Request, Response};
use crate::{Error, Written};
use openraft::error::{ClientWriteError, RaftError};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, Semaphore};

/// Proposals in flight at once. Two: while one entry is being appended and replicated, the
/// next group gathers and its append follows at once; more would only split the waiting
/// batches into smaller groups (openraft appends one entry at a time anyway).
pub const IN_FLIGHT: usize = 2;
/// The most batches in one group.
pub const MAX_BATCHES: usize = 1024;
/// The most bytes of keys and values in one group, past its first batch.
pub const MAX_BYTES: usize = 1 << 20;

type Answer = Result<Written, Error>;

struct Pending {
    ops: Vec<Op>,
    reply: oneshot::Sender<Answer>,
}

fn size(ops: &[Op]) -> usize {
    ops.iter()
        .map(|o| o.db.len() + o.key.len() + o.value.as_ref().map_or(0, Vec::len))
        .sum()
}

/// The sending side: cheap to clone, one per node.
#[derive(Clone)]
pub(crate) struct Grouper {
    tx: mpsc::UnboundedSender<Pending>,
}

impl Grouper {
    /// Starts the task that gathers and proposes groups on `raft`; it ends when the last
    /// `Grouper` is dropped.
    pub(crate) fn start(raft: Raft) -> Grouper {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(gather(raft, rx));
        Grouper { tx }
    }

    /// Proposes `ops` (already checked) in the next group; its answer once that entry is
    /// committed and applied on this node.
    pub(crate) async fn write(&self, ops: Vec<Op>) -> Answer {
        let (reply, answer) = oneshot::channel();
        let gone = || Error::from(openraft::AnyError::error("the node is shutting down"));
        self.tx.send(Pending { ops, reply }).map_err(|_| gone())?;
        answer.await.map_err(|_| gone())?
    }
}

async fn gather(raft: Raft, mut rx: mpsc::UnboundedReceiver<Pending>) {
    let permits = Arc::new(Semaphore::new(IN_FLIGHT));
    let mut carry: Option<Pending> = None;
    loop {
        let first = match carry.take() {
            Some(p) => p,
            None => match rx.recv().await {
                Some(p) => p,
                None => return,
            },
        };
        // Waiting for a free slot is what lets batches gather behind the ones in flight.
        let Ok(permit) = Arc::clone(&permits).acquire_owned().await else {
            return;
        };
        let mut bytes = 0;
        let mut group = vec![first];
        while group.len() < MAX_BATCHES {
            let Ok(p) = rx.try_recv() else { break };
            bytes += size(&p.ops);
            if bytes > MAX_BYTES {
                carry = Some(p);
                break;
            }
            group.push(p);
        }
        let raft = raft.clone();
        tokio::spawn(async move {
            propose(&raft, group).await;
            drop(permit);
        });
    }
}

async fn propose(raft: &Raft, group: Vec<Pending>) {
    let (ops, replies): (Vec<Vec<Op>>, Vec<oneshot::Sender<Answer>>) =
        group.into_iter().map(|p| (p.ops, p.reply)).unzip();
    let lone = ops.len() == 1;
    let req = if lone {
        Request::Write(ops.into_iter().next().expect("one batch"))
    } else {
        Request::Group(ops)
    };
    match raft.client_write(req).await {
        Ok(r) => {
            let index = Some(r.log_id.index);
            if lone {
                for reply in replies {
                    let _ = reply.send(Ok(Written {
                        index,
                        response: r.data.clone(),
                    }));
                }
                return;
            }
            for (i, reply) in replies.into_iter().enumerate() {
                let error = match r.data.batches.get(i) {
                    Some(e) => e.clone(),
                    None => Some(format!("the group's response has no outcome for batch {i}")),
                };
                let response = Response {
                    error,
                    ..Response::default()
                };
                let _ = reply.send(Ok(Written { index, response }));
            }
        }
        Err(e) => {
            let e = write_error(e);
            for reply in replies {
                let _ = reply.send(Err(Error {
                    inner: e.inner.clone(),
                    leader: e.leader,
                    stale: None,
                }));
            }
        }
    }
}

/// A refused proposal as Cairn-Raft's error, naming the leader when this node is not it.
pub(crate) fn write_error(
    e: RaftError<NodeId, ClientWriteError<NodeId, crate::raft::Node>>,
) -> Error {
    let leader = match &e {
        RaftError::APIError(ClientWriteError::ForwardToLeader(f)) => f.leader_id,
        _ => None,
    };
    Error {
        inner: openraft::AnyError::new(&e),
        leader,
        stale: None,
    }
}
