//! A 3-node cluster in one process over the in-memory network (`memnet`): a leader is
//! elected, batches written through it are applied on every node, reads on the leader are
//! linearizable and followers refuse them naming the leader; then the leader's log is purged
//! behind a snapshot and a fourth, empty node joins as a learner, so it can only catch up by
//! receiving the snapshot (streamed in chunks, installed by the environment swap). Batches
//! written concurrently share entries (group proposals) and keep their own outcomes.

use cairn_raft::memnet::MemRouter;
use cairn_raft::raft::testing::RaftLogStorage;
use cairn_raft::raft::{BasicNode, Config};
use cairn_raft::{Node, Op, Storage};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

fn config() -> Config {
    Config {
        heartbeat_interval: 50,
        election_timeout_min: 200,
        election_timeout_max: 400,
        // Purge everything a snapshot covers, so a new member must take the snapshot.
        max_in_snapshot_log_to_keep: 0,
        // Small chunks: the snapshot crosses the network in many pieces.
        snapshot_max_chunk_size: 16 * 1024,
        ..Default::default()
    }
}

fn key(i: u32) -> [u8; 4] {
    i.to_be_bytes()
}

/// Starts nodes 1..=n in `dir`, makes them a cluster, and waits until all know the leader.
async fn cluster(dir: &std::path::Path, n: u64) -> (MemRouter, BTreeMap<u64, Node>, u64) {
    let router = MemRouter::default();
    let mut nodes = BTreeMap::new();
    for id in 1..=n {
        let node = Node::start(id, &dir.join(format!("n{id}")), config(), router.clone())
            .await
            .unwrap();
        router.add(id, node.raft().clone());
        nodes.insert(id, node);
    }
    let members: BTreeMap<_, _> = (1..=n).map(|id| (id, BasicNode::new(""))).collect();
    nodes[&1].initialize(members).await.unwrap();
    let leader_id = nodes[&1].wait_leader(WAIT).await.unwrap();
    for node in nodes.values() {
        assert_eq!(
            node.wait_leader(WAIT).await.unwrap(),
            leader_id,
            "node {}",
            node.id
        );
    }
    (router, nodes, leader_id)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_nodes_elect_replicate_read_and_snapshot_a_learner() {
    let t = std::time::Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let (router, nodes, leader_id) = cluster(dir.path(), 3).await;
    let leader = nodes[&leader_id].clone();
    let follower_id = (1..=3u64).find(|&i| i != leader_id).unwrap();

    // 200 batches of 10 puts, each batch one entry, all through the leader.
    for b in 0..200u32 {
        let ops = (0..10)
            .map(|j| Op::put("kv", key(b * 10 + j), format!("value-{}", b * 10 + j)))
            .collect();
        let r = leader.write(ops).await.unwrap();
        assert_eq!(r.response.error, None);
    }
    let r_last = leader
        .write(vec![Op::delete("kv", key(7)), Op::put("other", "a", "b")])
        .await
        .unwrap();
    assert_eq!(r_last.response.error, None);
    // A refused batch is answered, not lost, and changes nothing.
    let r = leader
        .write(vec![Op::put("raft.sm", "x", "y")])
        .await
        .unwrap();
    assert!(r.response.error.is_some());

    let last = r_last.index.unwrap();
    for n in nodes.values() {
        n.wait_applied(last, WAIT).await.unwrap();
        let s = n.storage();
        assert_eq!(s.get("kv", &key(7)).unwrap(), None, "node {}", n.id);
        assert_eq!(
            s.get("kv", &key(1999)).unwrap(),
            Some(b"value-1999".to_vec())
        );
        assert_eq!(s.get("other", b"a").unwrap(), Some(b"b".to_vec()));
        assert_eq!(s.applied().unwrap().map(|l| l.index), Some(last));
    }
    assert_eq!(
        leader.read("kv", &key(42)).await.unwrap(),
        Some(b"value-42".to_vec())
    );
    let refused = nodes[&follower_id].read("kv", &key(42)).await.unwrap_err();
    assert_eq!(refused.leader(), Some(leader_id), "{refused}");
    let refused = nodes[&follower_id]
        .write(vec![Op::put("kv", "k", "v")])
        .await
        .unwrap_err();
    assert_eq!(refused.leader(), Some(leader_id), "{refused}");

    // Snapshot on the leader and purge its log behind it.
    leader.raft().trigger().snapshot().await.unwrap();
    leader
        .raft()
        .wait(Some(WAIT))
        .metrics(
            |m| m.snapshot.is_some_and(|s| s.index >= last),
            "snapshot built",
        )
        .await
        .unwrap();
    leader.raft().trigger().purge_log(last).await.unwrap();
    leader
        .raft()
        .wait(Some(WAIT))
        .metrics(|m| m.purged.is_some_and(|p| p.index >= last), "log purged")
        .await
        .unwrap();

    // A fresh node can only catch up from the snapshot.
    let n4 = Node::start(4, &dir.path().join("n4"), config(), router.clone())
        .await
        .unwrap();
    router.add(4, n4.raft().clone());
    leader
        .raft()
        .add_learner(4, BasicNode::new(""), true)
        .await
        .unwrap();
    n4.wait_applied(last, WAIT).await.unwrap();
    assert!(n4.metrics().snapshot.is_some_and(|s| s.index >= last));
    assert_eq!(
        n4.storage().get("kv", &key(1234)).unwrap(),
        Some(b"value-1234".to_vec())
    );
    assert_eq!(n4.storage().get("kv", &key(7)).unwrap(), None);
    // And it follows writes after the snapshot.
    let w = leader
        .write(vec![Op::put("kv", "after", "snap")])
        .await
        .unwrap();
    // The index the write returned, not the leader's metrics, which may trail its commits.
    n4.wait_applied(w.index.unwrap(), WAIT).await.unwrap();
    assert_eq!(
        n4.storage().get("kv", b"after").unwrap(),
        Some(b"snap".to_vec())
    );

    for n in nodes.values().chain([&n4]) {
        n.shutdown().await.unwrap();
    }
    eprintln!("cluster test: {:.1} s", t.elapsed().as_secs_f64());
}

/// A follower cut off and stopped keeps its vote and log on disk; restarted from its
/// directory, it catches up on what the other two committed meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_stopped_follower_restarts_and_catches_up() {
    let dir = tempfile::tempdir().unwrap();
    let (router, mut nodes, leader_id) = cluster(dir.path(), 3).await;
    let leader = nodes[&leader_id].clone();
    let f = (1..=3u64).find(|&i| i != leader_id).unwrap();
    for i in 0..50u32 {
        leader
            .write(vec![Op::put("kv", key(i), "before")])
            .await
            .unwrap();
    }
    let term = nodes[&f].metrics().current_term;
    router.remove(f);
    let stopped = nodes.remove(&f).unwrap();
    stopped.shutdown().await.unwrap();
    drop(stopped);

    // Two of three still commit.
    let mut last = 0;
    for i in 0..50u32 {
        let w = leader
            .write(vec![Op::put("kv", key(i), "after")])
            .await
            .unwrap();
        last = w.index.unwrap();
    }

    let fdir = dir.path().join(format!("n{f}"));
    let vote = Storage::open(&fdir)
        .unwrap()
        .log_store()
        .read_vote()
        .await
        .unwrap()
        .expect("a stored vote");
    assert!(vote.leader_id.term >= term, "the vote survived the stop");
    let back = Node::start(f, &fdir, config(), router.clone())
        .await
        .unwrap();
    router.add(f, back.raft().clone());
    back.wait_applied(last, WAIT).await.unwrap();
    for i in 0..50u32 {
        assert_eq!(
            back.storage().get("kv", &key(i)).unwrap(),
            Some(b"after".to_vec())
        );
    }
    back.shutdown().await.unwrap();
    for n in nodes.values() {
        n.shutdown().await.unwrap();
    }
}

/// Group proposals (src/group.rs): batches written concurrently through the leader share log
/// entries, yet each is answered with its own outcome: a refused batch (a key past Cairn's
/// limit) in a group changes nothing and refuses nothing else, and every applied batch is on
/// every node.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_batches_share_entries_and_keep_their_own_outcomes() {
    let dir = tempfile::tempdir().unwrap();
    let (_router, nodes, leader_id) = cluster(dir.path(), 3).await;
    let leader = nodes[&leader_id].clone();

    // 300 single-put batches at once; every 10th has a key no Cairn page can hold.
    let refused = |i: u32| i % 10 == 3;
    let key = |i: u32| -> Vec<u8> {
        if refused(i) {
            vec![b'k'; 5000]
        } else {
            format!("key-{i:05}").into_bytes()
        }
    };
    let tasks: Vec<_> = (0..300u32)
        .map(|i| {
            let leader = leader.clone();
            let k = key(i);
            tokio::spawn(async move {
                let w = leader
                    .write(vec![Op::put("kv", k, format!("v{i}"))])
                    .await
                    .unwrap();
                (i, w)
            })
        })
        .collect();
    let mut by_index: BTreeMap<u64, Vec<u32>> = BTreeMap::new();
    let mut last = 0;
    for t in tasks {
        let (i, w) = t.await.unwrap();
        assert_eq!(w.response.error.is_some(), refused(i), "batch {i}: {w:?}");
        assert!(w.response.batches.is_empty(), "batch {i}: {w:?}");
        let index = w.index.expect("proposed batches have an index");
        by_index.entry(index).or_default().push(i);
        last = last.max(index);
    }
    // Grouping happened, and a group held refused and applied batches together.
    assert!(by_index.len() < 300, "{} entries", by_index.len());
    assert!(
        by_index
            .values()
            .any(|g| g.iter().any(|&i| refused(i)) && g.iter().any(|&i| !refused(i))),
        "no group mixed a refused batch with applied ones: {by_index:?}"
    );
    for node in nodes.values() {
        node.wait_applied(last, WAIT).await.unwrap();
        let kv: BTreeSet<Vec<u8>> = node
            .storage()
            .scan("kv")
            .unwrap()
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        let want: BTreeSet<Vec<u8>> = (0..300).filter(|&i| !refused(i)).map(key).collect();
        assert_eq!(kv, want, "node {}", node.id);
        for i in [0u32, 1, 299] {
            let v = node.storage().get("kv", &key(i)).unwrap();
            assert_eq!(
                v,
                Some(format!("v{i}").into_bytes()),
                "node {} key {i}",
                node.id
            );
        }
    }
    for node in nodes.values() {
        node.shutdown().await.unwrap();
    }
}
