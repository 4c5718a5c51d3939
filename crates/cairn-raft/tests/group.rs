//! Group proposals (src/group.rs): batches written concurrently through the leader share log
//! entries, yet each is answered with its own outcome: a refused batch (a key past Cairn's
//! limit) in a group changes nothing and refuses nothing else, and every applied batch is on
//! every node.

use cairn_raft::memnet::MemRouter;
use cairn_raft::raft::{BasicNode, Config};
use cairn_raft::{Node, Op};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(10);

fn config() -> Config {
    Config {
        heartbeat_interval: 50,
        election_timeout_min: 200,
        election_timeout_max: 400,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_batches_share_entries_and_keep_their_own_outcomes() {
    let dir = tempfile::tempdir().unwrap();
    let router = MemRouter::default();
    let mut nodes = BTreeMap::new();
    for id in 1..=3u64 {
        let node = Node::start(
            id,
            &dir.path().join(format!("n{id}")),
            config(),
            router.clone(),
        )
        .await
        .unwrap();
        router.add(id, node.raft().clone());
        nodes.insert(id, node);
    }
    let members: BTreeMap<_, _> = (1..=3).map(|id| (id, BasicNode::new(""))).collect();
    nodes[&1].initialize(members).await.unwrap();
    let leader = nodes[&nodes[&1].wait_leader(WAIT).await.unwrap()].clone();

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
