//! A partition, in one process over the fault-injecting in-memory network: the leader of a
//! 3-node cluster is cut off from the other two while a write is proposed to it; that write is
//! never acknowledged, the majority elects a new leader and goes on writing; after healing,
//! every node (the old leader included) holds exactly the acknowledged writes: the old
//! leader's unreplicated entry is gone everywhere.

use cairn_raft::memnet::MemRouter;
use cairn_raft::raft::{BasicNode, Config};
use cairn_raft::{Node, Op};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(20);

fn config() -> Config {
    Config {
        heartbeat_interval: 50,
        election_timeout_min: 300,
        election_timeout_max: 600,
        ..Default::default()
    }
}

async fn leader_among(nodes: &BTreeMap<u64, Node>, ids: &[u64]) -> u64 {
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
        assert!(start.elapsed() < WAIT, "no agreed leader among {ids:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_isolated_leader_loses_its_unacknowledged_write_and_the_majority_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let router = MemRouter::default();
    let mut nodes = BTreeMap::new();
    for id in 1..=3u64 {
        let path = dir.path().join(format!("n{id}"));
        let node = Node::start(id, &path, config(), router.for_node(id))
            .await
            .unwrap();
        router.add(id, node.raft().clone());
        nodes.insert(id, node);
    }
    let members: BTreeMap<_, _> = (1..=3).map(|id| (id, BasicNode::new(""))).collect();
    nodes[&1].initialize(members).await.unwrap();
    let old = leader_among(&nodes, &[1, 2, 3]).await;

    let mut acked = Vec::new();
    for i in 0..50u32 {
        let k = format!("before-{i}");
        nodes[&old]
            .write(vec![Op::put("kv", k.clone(), "1")])
            .await
            .unwrap();
        acked.push(k);
    }

    // Cut the leader off; a write proposed to it cannot commit.
    let rest: Vec<u64> = (1..=3).filter(|&i| i != old).collect();
    router.partition(&[old], &rest);
    let lost = {
        let n = nodes[&old].clone();
        tokio::spawn(async move { n.write(vec![Op::put("kv", "lost", "1")]).await })
    };
    let new = leader_among(&nodes, &rest).await;
    assert_ne!(new, old);
    for i in 0..50u32 {
        let k = format!("after-{i}");
        nodes[&new]
            .write(vec![Op::put("kv", k.clone(), "1")])
            .await
            .unwrap();
        acked.push(k);
    }

    // Heal: the old leader follows the new one and drops its unreplicated entry.
    router.heal();
    let last = nodes[&new]
        .write(vec![Op::put("kv", "healed", "1")])
        .await
        .unwrap()
        .index
        .unwrap();
    for node in nodes.values() {
        node.wait_applied(last, WAIT).await.unwrap();
        for k in &acked {
            assert_eq!(
                node.storage().get("kv", k.as_bytes()).unwrap().as_deref(),
                Some(&b"1"[..]),
                "node {} lacks {k}",
                node.id
            );
        }
        assert_eq!(node.storage().get("kv", b"lost").unwrap(), None);
    }
    assert_eq!(leader_among(&nodes, &[1, 2, 3]).await, new);
    // The write proposed to the isolated leader ends in an error, never a success.
    if let Ok(Ok(r)) = tokio::time::timeout(Duration::from_secs(5), lost).await {
        assert!(r.is_err(), "the lost write was acknowledged: {r:?}");
    }
    for node in nodes.values() {
        node.shutdown().await.unwrap();
    }
}
