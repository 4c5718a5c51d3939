//! What the in-process cluster tests share: a configuration with short timeouts and the
//! start of a cluster on the fault-injecting in-memory network.
//!
//! Invariant: every node of a started cluster is reachable through the returned router (until
//! a test cuts it off) and the cluster is initialized with all of them as voters.

// Each test crate includes this module and uses part of it.
#![allow(dead_code)]

use cairn_raft::ext::Extension;
use cairn_raft::history::{check, CheckError, Operation, Workload};
use cairn_raft::memnet::MemRouter;
use cairn_raft::raft::{BasicNode, Config};
use cairn_raft::Node;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Short heartbeats and elections: a test's failover takes well under a second.
pub fn config() -> Config {
    Config {
        heartbeat_interval: 50,
        election_timeout_min: 300,
        election_timeout_max: 600,
        ..Default::default()
    }
}

/// Starts nodes `ids` in `dir/n{id}` on one in-memory network, each with the extension
/// `ext()` gives, and initializes the cluster (on the first of them).
pub async fn start(
    dir: &Path,
    ids: &[u64],
    ext: impl Fn() -> Option<Arc<dyn Extension>>,
) -> (MemRouter, BTreeMap<u64, Node>) {
    let router = MemRouter::default();
    let mut nodes = BTreeMap::new();
    for &id in ids {
        let path = dir.join(format!("n{id}"));
        let node = Node::start_with(id, &path, config(), router.for_node(id), ext())
            .await
            .unwrap();
        router.add_node(&node);
        nodes.insert(id, node);
    }
    let members: BTreeMap<_, _> = ids.iter().map(|&id| (id, BasicNode::new(""))).collect();
    nodes[&ids[0]].initialize(members).await.unwrap();
    (router, nodes)
}

/// Waits (at most 20 s) until nodes `ids` all name the same leader, one of them; returns it.
pub async fn leader_among(nodes: &BTreeMap<u64, Node>, ids: &[u64]) -> u64 {
    let start = Instant::now();
    loop {
        let seen: Vec<Option<u64>> = ids
            .iter()
            .map(|i| nodes[i].metrics().current_leader)
            .collect();
        if let Some(Some(l)) = seen.first() {
            if ids.contains(l) && seen.iter().all(|s| *s == Some(*l)) {
                return *l;
            }
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no agreed leader among {ids:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A recording client's next operation from `w` (its key, and the value to put or `None` for a
/// read), or `None` once `stop` is set.
pub fn next_op(w: &mut Workload, stop: &AtomicBool) -> Option<(String, Option<String>)> {
    (!stop.load(Ordering::Relaxed)).then(|| w.next_op())
}

/// Asserts that the history `ops` becomes non-linearizable once `stale` (a read that must not
/// pass) is added: the check can fail. `what` names the read in the failure message.
pub fn assert_rejected(mut ops: Vec<Operation>, stale: Operation, budget: u64, what: &str) {
    ops.push(stale);
    let verdict = check(&ops, budget);
    assert!(
        matches!(verdict, Err(CheckError::NotLinearizable { .. })),
        "{what} passed the check: {verdict:?}"
    );
}
