//! A partition, in one process over the fault-injecting in-memory network: the leader of a
//! 3-node cluster is cut off from the other two while a write is proposed to it; that write is
//! never acknowledged, the majority elects a new leader and goes on writing; after healing,
//! every node (the old leader included) holds exactly the acknowledged writes: the old
//! leader's unreplicated entry is gone everywhere.
//!
//! Meanwhile recording clients put and read (linearizable reads) a few contended keys of
//! database `lin` through whichever node they believe leads, before, during and after the
//! partition, and one reader stays on the first leader throughout; their history must be
//! linearizable (`cairn_raft::history`; with the read index taken out of `Node::read`, the
//! pinned reader's stale answers fail this check). While the old leader is cut off, a value
//! the majority acknowledges (on a key only this test writes) is absent from its local state:
//! a linearizable read there must not answer, and the same history with that local read added
//! as if it were linearizable is rejected by the checker. Local readers on every node check
//! the weaker promise of local reads (only written values, never going back).

use cairn_raft::history::{check, History, Kind, Operation, Outcome, Workload};
use cairn_raft::{Node, Op};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

mod support;

const WAIT: Duration = Duration::from_secs(20);
/// Recording clients, the keys they share, and the most operations each performs.
const CLIENTS: u64 = 3;
const KEYS: u64 = 3;
const MAX_OPS: usize = 200;
/// A client gives up on an operation after this long (its outcome is then unknown).
const OP_TIMEOUT: Duration = Duration::from_millis(1000);
/// The checker's step budget per key.
const BUDGET: u64 = 5_000_000;

/// The log index of each acknowledged put, by its (unique) value.
type Indexes = Mutex<HashMap<String, u64>>;

/// One operation of a recording client on `node`: a put of `put`, or a linearizable read of
/// `key`; the leader the node named, if it refused.
async fn perform(
    node: &Node,
    key: &str,
    put: &Option<String>,
    indexes: &Indexes,
) -> (Outcome, Option<u64>) {
    let run = async {
        match put {
            Some(v) => node
                .write(vec![Op::put("lin", key, v.as_str())])
                .await
                .map(|w| match (w.response.error, w.index) {
                    (None, Some(i)) => {
                        indexes.lock().unwrap().insert(v.clone(), i);
                        Outcome::Written
                    }
                    _ => Outcome::Unknown,
                }),
            None => node
                .read("lin", key.as_bytes())
                .await
                .map(|v| Outcome::Read(v.map(|b| String::from_utf8(b).unwrap()))),
        }
    };
    match tokio::time::timeout(OP_TIMEOUT, run).await {
        Ok(Ok(o)) => (o, None),
        // A refusal naming a leader is openraft's `ForwardToLeader`: for a write, given only
        // before proposing or once the proposal was truncated away, so it was not applied.
        Ok(Err(e)) if e.leader().is_some() => (Outcome::Refused, e.leader()),
        Ok(Err(e)) => (Outcome::Unknown, e.leader()),
        Err(_) => (Outcome::Unknown, None),
    }
}

/// A recording client: performs its workload through the node it believes leads (the one a
/// refusal names, else the next one) until `stop` or `MAX_OPS`.
async fn client(
    nodes: BTreeMap<u64, Node>,
    c: u64,
    history: Arc<History>,
    stop: Arc<AtomicBool>,
    indexes: Arc<Indexes>,
) {
    let ids: Vec<u64> = nodes.keys().copied().collect();
    let mut w = Workload::new(c, KEYS);
    let mut target = ids[c as usize % ids.len()];
    for _ in 0..MAX_OPS {
        let Some((key, put)) = support::next_op(&mut w, &stop) else {
            return;
        };
        let mut hint = None;
        let outcome = history
            .perform(c, &key, put.clone(), async {
                let (o, h) = perform(&nodes[&target], &key, &put, &indexes).await;
                hint = h;
                o
            })
            .await;
        if matches!(outcome, Outcome::Unknown | Outcome::Refused) {
            target = hint.filter(|h| nodes.contains_key(h)).unwrap_or_else(|| {
                let i = ids.iter().position(|&i| i == target).unwrap();
                ids[(i + 1) % ids.len()]
            });
        }
        // Pace the clients so that a few hundred operations span the whole scenario.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A reader pinned to `node` (the first leader): linearizable reads only, recorded in the
/// history, before, during and after the partition. While the node is cut off its reads must
/// not answer (they would be stale once the majority writes); once it follows, it refuses.
async fn pinned_reader(node: Node, c: u64, history: Arc<History>, stop: Arc<AtomicBool>) {
    let mut w = Workload::new(c, KEYS);
    for _ in 0..MAX_OPS {
        let Some((key, _)) = support::next_op(&mut w, &stop) else {
            return;
        };
        let read = async {
            match tokio::time::timeout(OP_TIMEOUT, node.read("lin", key.as_bytes())).await {
                Ok(Ok(v)) => Outcome::Read(v.map(|b| String::from_utf8(b).unwrap())),
                _ => Outcome::Unknown,
            }
        };
        history.perform(c, &key, None, read).await;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A local reader of `node`: reads every workload key from the node's applied state, round
/// after round, until `stop` (at most `MAX_OPS` rounds); returns what it saw, in order.
async fn local_reader(node: Node, stop: Arc<AtomicBool>) -> Vec<(String, Option<String>)> {
    let mut seen = Vec::new();
    for _ in 0..MAX_OPS {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        for k in 0..KEYS {
            let key = format!("k{k}");
            let v = node.storage().get("lin", key.as_bytes()).unwrap();
            seen.push((key, v.map(|b| String::from_utf8(b).unwrap())));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    seen
}

/// docs/replication.md's promise for local reads: a node shows only values some put wrote,
/// and, key by key, never goes back to an older acknowledged write (its applied index only
/// grows). A value whose put was not acknowledged has no known index and is not ordered.
/// Returns how many reads were ordered against an acknowledged write.
fn check_local_reads(
    id: u64,
    seen: &[(String, Option<String>)],
    ops: &[Operation],
    indexes: &Indexes,
) -> usize {
    let written: HashSet<&str> = ops
        .iter()
        .filter_map(|o| match &o.kind {
            Kind::Put(v) => v.as_deref(),
            Kind::Get(_) => None,
        })
        .collect();
    let indexes = indexes.lock().unwrap();
    let mut last: HashMap<&str, u64> = HashMap::new();
    let mut ordered = 0;
    for (key, v) in seen {
        let index = match v {
            None => 0,
            Some(v) => {
                assert!(
                    written.contains(v.as_str()),
                    "node {id}: {key} = {v}, never written"
                );
                match indexes.get(v) {
                    Some(&i) => i,
                    None => continue,
                }
            }
        };
        let prev = last.entry(key).or_insert(0);
        assert!(
            index >= *prev,
            "node {id}: {key} went back from index {prev} to {index}"
        );
        *prev = index;
        ordered += usize::from(index > 0);
    }
    ordered
}

/// Polls until the history holds `n` operations (the clients are making progress).
async fn recorded(history: &History, n: usize) {
    let start = Instant::now();
    while history.operations().len() < n {
        assert!(start.elapsed() < WAIT, "recording clients stalled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_isolated_leader_loses_its_unacknowledged_write_and_the_majority_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (router, nodes) = support::start(dir.path(), &[1, 2, 3], || None).await;
    let old = support::leader_among(&nodes, &[1, 2, 3]).await;

    let history = Arc::new(History::new());
    let stop = Arc::new(AtomicBool::new(false));
    let indexes = Arc::new(Indexes::default());
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (h, s, i) = (history.clone(), stop.clone(), indexes.clone());
            tokio::spawn(client(nodes.clone(), c, h, s, i))
        })
        .collect();
    let pinned = tokio::spawn(pinned_reader(
        nodes[&old].clone(),
        CLIENTS,
        history.clone(),
        stop.clone(),
    ));
    let readers: Vec<_> = nodes
        .values()
        .map(|n| (n.id, tokio::spawn(local_reader(n.clone(), stop.clone()))))
        .collect();
    recorded(&history, 40).await;
    // Key `s` (outside the workload's keys) before the partition, through the old leader.
    let call = history.now();
    nodes[&old]
        .write(vec![Op::put("lin", "s", "before")])
        .await
        .unwrap();
    history.record(Operation {
        client: 99,
        key: "s".into(),
        kind: Kind::Put(Some("before".into())),
        call,
        ret: Some(history.now()),
    });

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
    let new = support::leader_among(&nodes, &rest).await;
    assert_ne!(new, old);
    let during = history.operations().len();

    // A value the majority acknowledges is not on the cut-off old leader: its linearizable
    // read must not answer (it cannot confirm it leads); its local read is stale.
    let call = history.now();
    nodes[&new]
        .write(vec![Op::put("lin", "s", "fresh")])
        .await
        .unwrap();
    let answered = history.now();
    history.record(Operation {
        client: 99,
        key: "s".into(),
        kind: Kind::Put(Some("fresh".into())),
        call,
        ret: Some(answered),
    });
    let read = tokio::time::timeout(OP_TIMEOUT, nodes[&old].read("lin", b"s")).await;
    assert!(
        !matches!(read, Ok(Ok(_))),
        "the isolated leader answered a linearizable read: {read:?}"
    );
    let call = history.now();
    let local = nodes[&old].storage().get("lin", b"s").unwrap();
    let stale_read = Operation {
        client: 99,
        key: "s".into(),
        kind: Kind::Get(local.map(|b| String::from_utf8(b).unwrap())),
        call,
        ret: Some(history.now()),
    };
    assert_eq!(stale_read.kind, Kind::Get(Some("before".into())));
    for i in 0..50u32 {
        let k = format!("after-{i}");
        nodes[&new]
            .write(vec![Op::put("kv", k.clone(), "1")])
            .await
            .unwrap();
        acked.push(k);
    }

    recorded(&history, during + 60).await;

    // Heal: the old leader follows the new one and drops its unreplicated entry.
    router.heal();
    let healed = history.operations().len();
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
    assert_eq!(support::leader_among(&nodes, &[1, 2, 3]).await, new);

    recorded(&history, healed + 60).await;
    stop.store(true, Ordering::Relaxed);
    for c in clients.into_iter().chain([pinned]) {
        c.await.unwrap();
    }
    let ops = history.operations();
    for (id, r) in readers {
        let seen = r.await.unwrap();
        let ordered = check_local_reads(id, &seen, &ops, &indexes);
        assert!(
            ordered >= 20,
            "node {id}: {ordered} local reads of acknowledged writes"
        );
        eprintln!(
            "node {id}: {} local reads ({ordered} of acknowledged writes), monotonic per key",
            seen.len()
        );
    }
    let t = Instant::now();
    let done = check(&ops, BUDGET).unwrap_or_else(|e| panic!("{e}"));
    assert!(done.reads >= 20, "{} reads recorded", done.reads);
    eprintln!(
        "history: {done} (checked in {:?}); {} invoked during the partition, {} after healing",
        t.elapsed(),
        healed - during,
        ops.len() - healed
    );
    support::assert_rejected(ops, stale_read, BUDGET, "the old leader's stale local read");
    // The write proposed to the isolated leader ends in an error, never a success.
    if let Ok(Ok(r)) = tokio::time::timeout(Duration::from_secs(5), lost).await {
        assert!(r.is_err(), "the lost write was acknowledged: {r:?}");
    }
    for node in nodes.values() {
        node.shutdown().await.unwrap();
    }
}
