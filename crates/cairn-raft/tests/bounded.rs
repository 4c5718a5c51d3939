//! Stale-bounded reads on followers (docs/replication.md, "Stale-bounded follower reads"), in
//! one process over the fault-injecting in-memory network.
//!
//! A follower within its bound answers from its own state (its linearizable read refuses,
//! naming the leader, so the answer is local). Then the follower is cut off from the other
//! two while recording clients keep writing through the leader and a recording reader keeps
//! making bounded reads on the follower: once the bound has passed since the cut, every
//! bounded read is refused with `too_stale`, and the whole history (puts, and the bounded
//! reads recorded as taking effect no earlier than the bound before they began,
//! `History::perform_bounded_read`) is checked by the linearizability checker. The same check
//! rejects the cut-off follower's local read of a value the majority overwrote more than the
//! bound earlier, recorded as if it were a bounded read: the check can fail. After healing,
//! the follower answers bounded reads again. The same reads over HTTP: `GET /read` with
//! `consistency=bounded` answers on a fresh follower and answers 421 with `too_stale` on a
//! cut-off one; `cluster::Client` then finds the leader and reads there.

use cairn_raft::cluster::{pct, router, Client};
use cairn_raft::history::{check, History, Kind, Operation, Outcome, Workload};
use cairn_raft::{Node, Op};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod support;

const WAIT: Duration = Duration::from_secs(20);
/// The bound of the follower's reads.
const BOUND: Duration = Duration::from_millis(200);
/// What the history check adds to the bound: the leader's heartbeat interval
/// (support::config), for a write acknowledged while the leader was building the append that
/// the follower then accepted, which carries the commit index from before that write
/// (docs/replication.md).
const SLACK: Duration = Duration::from_millis(50);
/// How long after the cut every bounded read must be refused: the bound, plus scheduling
/// slack for a loaded machine (a read judged at instant t refuses once t is past the bound
/// from the last append begun before the cut).
const REFUSE_AFTER: Duration = Duration::from_millis(200 + 150);
const WRITERS: u64 = 2;
const KEYS: u64 = 3;
const MAX_OPS: usize = 400;
const BUDGET: u64 = 5_000_000;

/// A bounded read of `key` in `kv` that `node` answers itself, retried (at most 50 times, 5 s)
/// while it is refused: a loaded machine may delay a heartbeat past the bound.
async fn answered(node: &Node, key: &str) -> Option<Vec<u8>> {
    let mut last = None;
    for _ in 0..50 {
        match node.read_bounded("kv", key.as_bytes(), BOUND).await {
            Ok(v) => return v,
            Err(e) => last = Some(e.to_string()),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("node {}: no bounded read answered: {last:?}", node.id)
}

/// A recording writer: puts through `leader` until `stop`.
async fn writer(leader: Node, c: u64, history: Arc<History>, stop: Arc<AtomicBool>) {
    let mut w = Workload::new(c, KEYS);
    for _ in 0..MAX_OPS {
        let Some((key, put)) = support::next_op(&mut w, &stop) else {
            return;
        };
        // The workload's reads are the bounded reader's business: writers skip them.
        let Some(v) = put else { continue };
        history
            .perform(c, &key, Some(v.clone()), async {
                let op = vec![Op::put("lin", key.as_str(), v.as_str())];
                match tokio::time::timeout(Duration::from_secs(1), leader.write(op)).await {
                    Ok(Ok(w)) if w.response.error.is_none() => Outcome::Written,
                    _ => Outcome::Unknown,
                }
            })
            .await;
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// One bounded read the follower made: when it was invoked (history clock), and whether it
/// answered.
struct Attempt {
    call: u64,
    answered: bool,
}

/// A recording reader of `node`: bounded reads of the workload keys until `stop`; every
/// answer goes into the history (as a bounded read), every refusal must be `too_stale`.
async fn bounded_reader(
    node: Node,
    c: u64,
    history: Arc<History>,
    stop: Arc<AtomicBool>,
) -> Vec<Attempt> {
    let mut w = Workload::new(c, KEYS);
    let mut attempts = Vec::new();
    while attempts.len() < 4 * MAX_OPS && !stop.load(Ordering::Relaxed) {
        let (key, _) = w.next_op();
        let call = history.now();
        let o = history
            .perform_bounded_read(c, &key, BOUND + SLACK, async {
                match node.read_bounded("lin", key.as_bytes(), BOUND).await {
                    Ok(v) => Outcome::Read(v.map(|b| String::from_utf8(b).unwrap())),
                    Err(e) => {
                        let s = e
                            .too_stale()
                            .unwrap_or_else(|| panic!("not too_stale: {e}"));
                        assert_eq!(s.bound_ms, 200);
                        Outcome::Unknown
                    }
                }
            })
            .await;
        attempts.push(Attempt {
            call,
            answered: matches!(o, Outcome::Read(_)),
        });
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    attempts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cut_off_follower_refuses_bounded_reads_past_its_bound_and_never_answers_older() {
    let dir = tempfile::tempdir().unwrap();
    let (net, nodes) = support::start(dir.path(), &[1, 2, 3], || None).await;
    let l = support::leader_among(&nodes, &[1, 2, 3]).await;
    let f = *nodes.keys().find(|&&i| i != l).unwrap();
    let (leader, follower) = (nodes[&l].clone(), nodes[&f].clone());

    // Within its bound, the follower answers from its own state.
    let w = leader.write(vec![Op::put("kv", "a", "1")]).await.unwrap();
    follower.wait_applied(w.index.unwrap(), WAIT).await.unwrap();
    assert_eq!(answered(&follower, "a").await.as_deref(), Some(&b"1"[..]));
    let e = follower.read("kv", b"a").await.unwrap_err();
    assert_eq!(
        e.leader(),
        Some(l),
        "the follower's linearizable read is refused"
    );
    // On the leader, a bounded read is the linearizable read.
    assert_eq!(
        leader
            .read_bounded("kv", b"a", BOUND)
            .await
            .unwrap()
            .as_deref(),
        Some(&b"1"[..])
    );

    let history = Arc::new(History::new());
    let stop = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..WRITERS)
        .map(|c| {
            let (h, s) = (history.clone(), stop.clone());
            tokio::spawn(writer(leader.clone(), c, h, s))
        })
        .collect();
    let reader = tokio::spawn(bounded_reader(
        follower.clone(),
        WRITERS,
        history.clone(),
        stop.clone(),
    ));
    // Key `s`, outside the workload's keys: written before the cut, overwritten after it.
    let record_put = |v: &str, call: u64| Operation {
        client: 99,
        key: "s".into(),
        kind: Kind::Put(Some(v.into())),
        call,
        ret: Some(history.now()),
    };
    let call = history.now();
    let w = leader
        .write(vec![Op::put("lin", "s", "before")])
        .await
        .unwrap();
    history.record(record_put("before", call));
    follower.wait_applied(w.index.unwrap(), WAIT).await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;

    // Cut the follower off; the leader and the third node go on.
    let rest: Vec<u64> = nodes.keys().copied().filter(|&i| i != f).collect();
    net.partition(&[f], &rest);
    let cut = history.now();
    let call = history.now();
    leader
        .write(vec![Op::put("lin", "s", "fresh")])
        .await
        .unwrap();
    let fresh = record_put("fresh", call);
    let fresh_acked = fresh.ret.unwrap();
    history.record(fresh);
    tokio::time::sleep(BOUND + SLACK + Duration::from_millis(400)).await;

    // Well past the bound: the bounded read is refused, and says why.
    let e = follower.read_bounded("lin", b"s", BOUND).await.unwrap_err();
    let s = e.too_stale().expect("too_stale");
    assert!(s.since_ms.is_some_and(|ms| ms > 200), "{s:?}");
    // The local read is stale: recorded as a bounded read, the checker must reject it.
    let call = history.now();
    let local = follower.storage().get("lin", b"s").unwrap();
    let back = u64::try_from((BOUND + SLACK).as_nanos()).unwrap();
    assert!(call - back > fresh_acked);
    let stale_read = Operation {
        client: 98,
        key: "s".into(),
        kind: Kind::Get(local.map(|b| String::from_utf8(b).unwrap())),
        call: call - back,
        ret: Some(history.now()),
    };
    assert_eq!(stale_read.kind, Kind::Get(Some("before".into())));

    // Heal: the follower catches up and answers bounded reads again.
    net.heal();
    let healed = history.now();
    let w = leader.write(vec![Op::put("kv", "b", "2")]).await.unwrap();
    follower.wait_applied(w.index.unwrap(), WAIT).await.unwrap();
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(answered(&follower, "b").await.as_deref(), Some(&b"2"[..]));

    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.unwrap();
    }
    let attempts = reader.await.unwrap();
    let refuse_after = cut + u64::try_from(REFUSE_AFTER.as_nanos()).unwrap();
    let before = attempts.iter().filter(|a| a.call < cut).collect::<Vec<_>>();
    let dark = attempts
        .iter()
        .filter(|a| a.call > refuse_after && a.call < healed)
        .collect::<Vec<_>>();
    let answered_before = before.iter().filter(|a| a.answered).count();
    assert!(
        answered_before >= 20,
        "{answered_before} answered before the cut"
    );
    assert!(dark.len() >= 10, "{} reads well into the cut", dark.len());
    assert!(
        dark.iter().all(|a| !a.answered),
        "a cut-off follower answered a bounded read past its bound"
    );
    let after = attempts.iter().filter(|a| a.call > healed && a.answered);
    assert!(after.count() >= 1, "no bounded read answered after healing");

    let ops = history.operations();
    let done = check(&ops, BUDGET).unwrap_or_else(|e| panic!("{e}"));
    assert!(done.reads >= 20, "{} reads recorded", done.reads);
    eprintln!(
        "history: {done}; bounded reads: {} before the cut ({answered_before} answered), \
         {} past the bound in the cut (none answered)",
        before.len(),
        dark.len()
    );
    support::assert_rejected(ops, stale_read, BUDGET, "the cut-off follower's stale read");
    for node in nodes.values() {
        node.shutdown().await.unwrap();
    }
}

/// The HTTP face: `GET /read?consistency=bounded` on a follower's client routes (the Raft
/// RPCs stay on the in-memory network, so a partition can cut the follower off).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_read_route_answers_bounded_reads_and_names_the_leader_when_too_stale() {
    let dir = tempfile::tempdir().unwrap();
    let (net, nodes) = support::start(dir.path(), &[1, 2, 3], || None).await;
    let l = support::leader_among(&nodes, &[1, 2, 3]).await;
    let mut addrs = BTreeMap::new();
    for (id, node) in &nodes {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        addrs.insert(*id, addr.clone());
        let app = router(node.clone(), addr);
        tokio::spawn(async move { axum::serve(listener, app).await });
    }
    let f = *nodes.keys().find(|&&i| i != l).unwrap();
    let w = nodes[&l]
        .write(vec![Op::put("kv", "k", "v")])
        .await
        .unwrap();
    nodes[&f]
        .wait_applied(w.index.unwrap(), WAIT)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let q = format!(
        "/read?db=kv&key={}&consistency=bounded&max_lag_ms=500",
        pct("k")
    );
    let mut only_f = Client::new(vec![addrs[&f].clone()]);
    only_f.follow = false;
    only_f.deadline = Duration::from_secs(2);
    let v = only_f.call(&q, None).await.unwrap();
    assert_eq!(v["value"], "v");
    // A bound without its consistency, or the reverse, is bad input.
    for bad in [
        "/read?db=kv&key=k&max_lag_ms=5",
        "/read?db=kv&key=k&consistency=bounded",
    ] {
        let e = only_f.call(bad, None).await.unwrap_err();
        assert!(e.contains("HTTP 400"), "{bad}: {e}");
    }

    // Cut off, past the bound: 421 with `too_stale`, naming the leader it last followed.
    // (Node names in this cluster are "": the test's nodes have no addresses on the Raft side.)
    net.partition(
        &[f],
        &nodes
            .keys()
            .copied()
            .filter(|&i| i != f)
            .collect::<Vec<_>>(),
    );
    tokio::time::sleep(Duration::from_millis(800)).await;
    let e = only_f.call(&q, None).await.unwrap_err();
    assert!(e.contains("HTTP 421") && e.contains("too_stale"), "{e}");
    assert!(e.contains(&format!("\"leader_id\":{l}")), "{e}");
    // A client that knows every node falls through to the leader, where the read is fresh.
    let mut all = Client::new(vec![addrs[&f].clone(), addrs[&l].clone()]);
    all.deadline = Duration::from_secs(5);
    let v = all.call(&q, None).await.unwrap();
    assert_eq!(v["value"], "v");
    net.heal();
    for node in nodes.values() {
        node.shutdown().await.unwrap();
    }
}
