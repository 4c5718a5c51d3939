//! What the in-process cluster tests share: a configuration with short timeouts and the
//! start of a cluster on the fault-injecting in-memory network.
//!
//! Invariant: every node of a started cluster is reachable through the returned router (until
//! a test cuts it off) and the cluster is initialized with all of them as voters.

use cairn_raft::ext::Extension;
use cairn_raft::memnet::MemRouter;
use cairn_raft::raft::{BasicNode, Config};
use cairn_raft::Node;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

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
