//! Stale-bounded reads on followers: what a node remembers of the last append-entries it
//! accepted from a leader, and the check a bounded read makes against it
//! (docs/replication.md, "Stale-bounded follower reads").
//!
//! openraft 0.9.25's metrics tell a follower neither when it last heard from its leader nor the
//! leader's commit index, so the node observes them itself, on the receiving side of every
//! append-entries (heartbeats included): [`receive_append`] wraps the call into the node's
//! `Raft`, from both networks (net.rs through cluster.rs's route, memnet.rs).
//!
//! Invariants:
//! - A [`Heard`] is recorded only for an append-entries this node accepted (`Success`): its
//!   vote became the request's vote and its log matches the leader's up to the request's last
//!   entry. Its instant is taken *before* the call into `Raft`, so it is no earlier than the
//!   leader sent the request.
//! - Only a request whose `leader_commit` is an entry of the leader's own term is recorded: a
//!   leader has then committed an entry of its term, so its commit index covers every entry
//!   committed by earlier leaders (Raft's leader completeness). A new leader's first
//!   heartbeats, which may carry an older commit index, do not count.
//! - The record only moves forward in time (a later-begun accepted request replaces it).
//! - A bounded read answers only while the node's current vote is the recorded one, the record
//!   is at most the read's bound old, and the node has applied the recorded commit index; it
//!   reads the state after that check, so the state it shows is at least that new.

use crate::raft::{LogId, NodeId, Raft, TypeConfig, Vote};
use openraft::error::RaftError;
use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The last append-entries a node accepted from a leader that had committed an entry of its
/// own term.
#[derive(Clone, Debug)]
pub(crate) struct Heard {
    /// When this node began handling it (no earlier than the leader sent it).
    pub at: Instant,
    /// The leader's vote it carried (the node's vote after accepting it).
    pub vote: Vote,
    /// The leader's commit index it carried.
    pub commit: LogId,
}

/// What a node remembers for bounded reads; shared by the node and its network endpoint.
#[derive(Debug, Default)]
pub struct Freshness {
    last: Mutex<Option<Heard>>,
}

impl Freshness {
    /// The last accepted append-entries worth recording, if any.
    pub(crate) fn last(&self) -> Option<Heard> {
        self.last.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn observe(&self, heard: Heard) {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if last.as_ref().is_none_or(|l| l.at <= heard.at) {
            *last = Some(heard);
        }
    }
}

/// Hands an append-entries to `raft` and, if it is accepted and worth recording (module
/// invariants), records it in `fresh`.
pub(crate) async fn receive_append(
    raft: &Raft,
    fresh: Option<&Freshness>,
    req: AppendEntriesRequest<TypeConfig>,
) -> Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>> {
    let at = Instant::now();
    let vote = req.vote;
    let commit = req
        .leader_commit
        .filter(|c| vote.is_committed() && c.leader_id.term == vote.leader_id().term);
    let resp = raft.append_entries(req).await;
    if let (Some(fresh), Some(commit), Ok(AppendEntriesResponse::Success)) = (fresh, commit, &resp)
    {
        fresh.observe(Heard { at, vote, commit });
    }
    resp
}

/// Why a bounded read was refused: this node cannot show that its state is within the bound.
/// A client may retry on the leader (where the read is linearizable).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooStale {
    /// Milliseconds since this node began handling the last append-entries it accepted from
    /// the leader it still follows; `None` if it has none (it never heard from this leader,
    /// or that leader has not yet committed an entry of its term, or the node is a candidate).
    pub since_ms: Option<u64>,
    /// The node's applied index.
    pub applied: Option<u64>,
    /// The leader's commit index as of that append-entries.
    pub leader_commit: Option<u64>,
    /// The bound the read asked for, in milliseconds.
    pub bound_ms: u64,
}

impl std::fmt::Display for TooStale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let opt = |v: Option<u64>| v.map_or_else(|| "none".to_string(), |v| v.to_string());
        write!(
            f,
            "too stale for a read bounded by {} ms: last append from the leader {} ms ago, \
             applied index {}, leader's commit index {}",
            self.bound_ms,
            opt(self.since_ms),
            opt(self.applied),
            opt(self.leader_commit)
        )
    }
}

impl std::error::Error for TooStale {}

/// What a bounded read may do now, given the node's current vote and applied index.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Read the local state now.
    Answer,
    /// Fresh enough in time but not yet applied up to `index`: wait at most `within`, or
    /// refuse with `stale`.
    Wait {
        index: u64,
        within: Duration,
        stale: TooStale,
    },
    /// Refuse.
    Refuse(TooStale),
}

/// The check of a bounded read (module invariants), at instant `now`.
pub(crate) fn judge(
    heard: Option<&Heard>,
    vote: &Vote,
    applied: Option<u64>,
    bound: Duration,
    now: Instant,
) -> Verdict {
    let current = heard.filter(|h| h.vote == *vote);
    let age = current.map(|h| now.saturating_duration_since(h.at));
    let stale = TooStale {
        since_ms: age.map(|a| u64::try_from(a.as_millis()).unwrap_or(u64::MAX)),
        applied,
        leader_commit: current.map(|h| h.commit.index),
        bound_ms: u64::try_from(bound.as_millis()).unwrap_or(u64::MAX),
    };
    match (current, age) {
        (Some(h), Some(age)) if age <= bound => {
            if applied.is_some_and(|a| a >= h.commit.index) {
                Verdict::Answer
            } else {
                Verdict::Wait {
                    index: h.commit.index,
                    within: bound - age,
                    stale,
                }
            }
        }
        _ => Verdict::Refuse(stale),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::CommittedLeaderId;

    fn heard(at: Instant, term: u64, index: u64) -> Heard {
        Heard {
            at,
            vote: Vote::new_committed(term, 1),
            commit: LogId::new(CommittedLeaderId::new(term, 1), index),
        }
    }

    #[test]
    fn a_read_answers_only_within_its_bound_from_the_current_leader() {
        let t = Instant::now();
        let h = heard(t, 2, 10);
        let vote = Vote::new_committed(2, 1);
        let bound = Duration::from_millis(100);
        let later = |ms| t + Duration::from_millis(ms);
        assert_eq!(
            judge(Some(&h), &vote, Some(10), bound, later(50)),
            Verdict::Answer
        );
        let Verdict::Wait { index, within, .. } = judge(Some(&h), &vote, Some(9), bound, later(40))
        else {
            panic!("a node behind its leader's commit index answered")
        };
        assert_eq!((index, within), (10, Duration::from_millis(60)));
        // Past the bound.
        let Verdict::Refuse(s) = judge(Some(&h), &vote, Some(10), bound, later(101)) else {
            panic!("answered past its bound")
        };
        assert_eq!(
            (s.since_ms, s.leader_commit, s.applied),
            (Some(101), Some(10), Some(10))
        );
        // The node voted for someone else since: the record is not its leader's.
        let other = Vote::new(3, 2);
        let Verdict::Refuse(s) = judge(Some(&h), &other, Some(10), bound, later(1)) else {
            panic!("answered for a leader it no longer follows")
        };
        assert_eq!((s.since_ms, s.leader_commit), (None, None));
        assert!(matches!(
            judge(None, &vote, Some(10), bound, later(1)),
            Verdict::Refuse(_)
        ));
    }

    #[test]
    fn only_later_accepted_appends_replace_the_record() {
        let t = Instant::now();
        let f = Freshness::default();
        f.observe(heard(t + Duration::from_millis(5), 2, 7));
        f.observe(heard(t, 2, 3));
        assert_eq!(f.last().map(|h| h.commit.index), Some(7));
    }
}
