//! A 3-node cluster of separate processes on loopback (the `cairn-cluster` binary, HTTP
//! between nodes): writes through the leader from concurrent clients; the leader SIGKILLed
//! under that load, a new one elected, writes go on; the killed node restarted on its
//! directory; a follower removed, wiped, restarted empty and added back as a learner (it can
//! only catch up by a snapshot install: the leader's log is purged) then promoted; a 3 MB
//! batch crosses the network as one entry; at the end
//! every acknowledged write is in every node's applied state, read from each node locally,
//! and every node answers a stale-bounded read itself.
//!
//! Beside the write load, recording clients put and read (linearizable reads, on the leader)
//! a few contended keys of database `lin` across the leader's kill and the election after
//! it; their history must be linearizable (`cairn_raft::history`; a put whose answer was lost
//! with the killed leader counts as possibly applied at any later time).
//!
//! Every wait polls with a generous deadline (the machine may be loaded).

use cairn_raft::cluster::Client;
use cairn_raft::history::{check, History, Outcome, Workload};
use cairn_raft::net::request;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(40);
/// Recording clients, the keys they share, and the most operations each performs.
const CLIENTS: u64 = 3;
const KEYS: u64 = 3;
const MAX_OPS: usize = 200;
/// One recorded operation's HTTP timeout (its outcome is then unknown).
const OP_TIMEOUT: Duration = Duration::from_secs(2);

struct Proc {
    id: u64,
    addr: String,
    child: Child,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts node `id` on `dir`, listening on `listen`; returns once it prints its address.
fn spawn(id: u64, dir: &Path, listen: &str) -> Proc {
    let mut child = Command::new(env!("CARGO_BIN_EXE_cairn-cluster"))
        .args(["node", "--id", &id.to_string(), "--dir"])
        .arg(dir)
        .args(["--listen", listen])
        .args(["--heartbeat-ms", "200", "--election-ms", "1000"])
        .args(["--snapshot-every", "300", "--chunk", "16384"])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawning cairn-cluster");
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let addr = line
        .split(" listening on ")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .unwrap_or_else(|| panic!("node {id} printed {line:?}"))
        .to_string();
    // Keep draining stdout so the node never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    Proc { id, addr, child }
}

async fn get(addr: &str, path: &str) -> Option<Value> {
    let a = request(addr, path, None, Duration::from_secs(5))
        .await
        .ok()?;
    (a.status == 200)
        .then(|| serde_json::from_slice(&a.body).ok())
        .flatten()
}

/// Polls until `f` returns `Some`, or panics after `WAIT` naming `what`.
async fn poll<T, F: std::future::Future<Output = Option<T>>>(
    what: &str,
    mut f: impl FnMut() -> F,
) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(start.elapsed() < WAIT, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Waits until every node at `addrs` names the same leader, one of `ids`; returns its id.
async fn agreed_leader(addrs: &[String], ids: &[u64]) -> u64 {
    poll("an agreed leader", || async {
        let mut leader = None;
        for a in addrs {
            let l = get(a, "/status").await?["leader"].as_u64()?;
            if leader.is_some_and(|x| x != l) || !ids.contains(&l) {
                return None;
            }
            leader = Some(l);
        }
        leader
    })
    .await
}

/// One attempt of a recorded operation at `addr`: a put of `put` through `POST /write`, or a
/// linearizable `GET /read` of `key`. No retries: an attempt that fails after it may have been
/// proposed has an unknown outcome. A refused connection, or a 421 for openraft's
/// `ForwardToLeader` (a node that was not leader when asked, or whose proposal was truncated
/// away: openraft answers pending writes so only then), certainly did not apply the put. Also
/// returns the leader a 421 named.
async fn attempt(addr: &str, key: &str, put: &Option<String>) -> (Outcome, Option<String>) {
    let (path, body) = match put {
        Some(v) => {
            let ops = json!({ "ops": [{ "db": "lin", "key": key, "value": v }] });
            (
                "/write".to_string(),
                Some(("application/json", ops.to_string().into_bytes())),
            )
        }
        None => (format!("/read?db=lin&key={key}"), None),
    };
    let a = match request(addr, &path, body, OP_TIMEOUT).await {
        Ok(a) => a,
        Err(e) if e.unreachable => return (Outcome::Refused, None),
        Err(_) => return (Outcome::Unknown, None),
    };
    let v: Value = serde_json::from_slice(&a.body).unwrap_or(Value::Null);
    match (a.status, put) {
        (200, Some(_)) => (Outcome::Written, None),
        (200, None) => {
            let value = v["value"].as_str().map(str::to_string);
            (Outcome::Read(value), None)
        }
        (421, _) => {
            let forward = v["error"]
                .as_str()
                .is_some_and(|e| e.contains("has to forward request to"));
            let outcome = if forward {
                Outcome::Refused
            } else {
                Outcome::Unknown
            };
            (outcome, v["leader_addr"].as_str().map(str::to_string))
        }
        _ => (Outcome::Unknown, None),
    }
}

/// A recording client: performs its workload through the node it believes leads (the one a
/// 421 names, else the next address) until `stop` or `MAX_OPS`.
async fn recording_client(
    addrs: Vec<String>,
    c: u64,
    history: Arc<History>,
    stop: Arc<AtomicBool>,
) {
    let mut w = Workload::new(c, KEYS);
    let mut leader: Option<String> = None;
    let mut next = c as usize;
    for _ in 0..MAX_OPS {
        if stop.load(Ordering::Relaxed) {
            return;
        }
        let (key, put) = w.next_op();
        let addr = leader.clone().unwrap_or_else(|| {
            next += 1;
            addrs[next % addrs.len()].clone()
        });
        let mut hint = None;
        let outcome = history
            .perform(c, &key, put.clone(), async {
                let (o, h) = attempt(&addr, &key, &put).await;
                hint = h;
                o
            })
            .await;
        if matches!(outcome, Outcome::Unknown | Outcome::Refused) {
            leader = hint;
            tokio::time::sleep(Duration::from_millis(50)).await;
        } else {
            leader = Some(addr);
        }
        // Pace the clients so that a few hundred operations span the kill.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn processes_survive_a_killed_leader_and_rebuild_a_follower_by_snapshot() {
    let t = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let dir = |id: u64, gen: u32| -> PathBuf { tmp.path().join(format!("n{id}-{gen}")) };
    let mut procs: BTreeMap<u64, Proc> = (1..=3)
        .map(|id| (id, spawn(id, &dir(id, 0), "127.0.0.1:0")))
        .collect();
    let addrs = |procs: &BTreeMap<u64, Proc>| -> Vec<String> {
        procs.values().map(|p| p.addr.clone()).collect()
    };
    let members: BTreeMap<String, String> = procs
        .values()
        .map(|p| (p.id.to_string(), p.addr.clone()))
        .collect();
    let mut admin = Client::new(vec![procs[&1].addr.clone()]);
    admin.deadline = WAIT;
    admin
        .call("/admin/init", Some(json!({ "members": members })))
        .await
        .unwrap();
    let leader = agreed_leader(&addrs(&procs), &[1, 2, 3]).await;
    eprintln!("{:?}: leader {leader}", t.elapsed());

    // One batch of 3 MB: the append-entries carrying it is larger than axum's default body
    // limit (2 MB), which the Raft routes lift.
    let big: Vec<Value> = (0..300)
        .map(|i| json!({ "db": "big", "key": format!("b{i:03}"), "value": "x".repeat(10_000) }))
        .collect();
    admin
        .call("/write", Some(json!({ "ops": big })))
        .await
        .unwrap();

    // The write load: 4 clients, each putting its own keys, recording what was acknowledged.
    let acked = Arc::new(Mutex::new(Vec::<String>::new()));
    let failed = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut load = Vec::new();
    for c in 0..4 {
        let (acked, failed, stop) = (acked.clone(), failed.clone(), stop.clone());
        let mut client = Client::new(addrs(&procs));
        client.deadline = Duration::from_secs(20);
        client.timeout = Duration::from_secs(5);
        load.push(tokio::spawn(async move {
            let mut i = 0u32;
            while !stop.load(Ordering::Relaxed) {
                let key = format!("c{c}-{i:06}");
                let ops =
                    json!({ "ops": [{ "db": "kv", "key": key, "value": format!("v-{key}") }] });
                match client.call("/write", Some(ops)).await {
                    Ok(_) => acked.lock().unwrap().push(key),
                    Err(_) => {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                }
                i += 1;
            }
        }));
    }
    let history = Arc::new(History::new());
    let recorders: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let (h, stop) = (history.clone(), stop.clone());
            tokio::spawn(recording_client(addrs(&procs), c, h, stop))
        })
        .collect();
    let count = || acked.lock().unwrap().len();
    poll("300 writes", || async { (count() >= 300).then_some(()) }).await;

    // SIGKILL the leader under the load.
    let before = count();
    let old = procs.remove(&leader).unwrap();
    let old_addr = old.addr.clone();
    drop(old);
    let killed_at = history.now();
    eprintln!(
        "{:?}: killed leader {leader} after {before} writes",
        t.elapsed()
    );
    let survivors: Vec<u64> = procs.keys().copied().collect();
    let leader = agreed_leader(&addrs(&procs), &survivors).await;
    eprintln!("{:?}: new leader {leader}", t.elapsed());
    poll("300 writes after the kill", || async {
        (count() >= before + 300).then_some(())
    })
    .await;
    poll("40 recorded operations after the kill", || async {
        let after = history
            .operations()
            .iter()
            .filter(|o| o.call > killed_at)
            .count();
        (after >= 40).then_some(())
    })
    .await;
    stop.store(true, Ordering::Relaxed);
    for l in load.into_iter().chain(recorders) {
        l.await.unwrap();
    }
    let ops = history.operations();
    let after = ops.iter().filter(|o| o.call > killed_at).count();
    let started = Instant::now();
    let done = check(&ops, 5_000_000).unwrap_or_else(|e| panic!("{e}"));
    assert!(done.reads >= 20, "{} reads recorded", done.reads);
    eprintln!(
        "{:?}: history: {done} (checked in {:?}); {after} invoked after the kill",
        t.elapsed(),
        started.elapsed()
    );
    eprintln!(
        "{:?}: {} writes acknowledged, {} client calls gave up",
        t.elapsed(),
        count(),
        failed.load(Ordering::Relaxed)
    );

    // The killed node comes back on its directory and address.
    let killed = survivors.iter().fold(6, |a, b| a - b);
    procs.insert(killed, spawn(killed, &dir(killed, 0), &old_addr));

    // A follower is removed, wiped, and comes back empty: first the leader's log must be
    // purged behind a snapshot, so a snapshot is the only way to catch up.
    let leader_addr = procs[&leader].addr.clone();
    poll("a purged log on the leader", || async {
        get(&leader_addr, "/status").await?["purged"]
            .as_u64()
            .map(|_| ())
    })
    .await;
    let f = *survivors.iter().find(|&&i| i != leader).unwrap();
    let mut admin = Client::new(vec![leader_addr.clone()]);
    admin.deadline = WAIT;
    admin
        .call("/admin/remove", Some(json!({ "ids": [f] })))
        .await
        .unwrap();
    drop(procs.remove(&f));
    std::fs::remove_dir_all(dir(f, 0)).unwrap();
    let p = spawn(f, &dir(f, 1), "127.0.0.1:0");
    let f_addr = p.addr.clone();
    procs.insert(f, p);
    admin
        .call(
            "/admin/add-learner",
            Some(json!({ "id": f, "addr": f_addr })),
        )
        .await
        .unwrap();
    admin
        .call("/admin/promote", Some(json!({ "ids": [f] })))
        .await
        .unwrap();
    // The learner's own view follows the leader's a little later.
    let st = poll("the rebuilt node's snapshot", || async {
        let st = get(&f_addr, "/status").await?;
        st["snapshot"].as_u64().map(|_| st)
    })
    .await;
    eprintln!("{:?}: node {f} rebuilt from a snapshot: {st}", t.elapsed());

    // One last write; every node applies it, then holds every acknowledged write.
    let mut client = Client::new(addrs(&procs));
    let w = client
        .call(
            "/write",
            Some(json!({ "ops": [{ "db": "kv", "key": "last", "value": "1" }] })),
        )
        .await
        .unwrap();
    let index = w["index"].as_u64().unwrap();
    let acked = acked.lock().unwrap().clone();
    for p in procs.values() {
        poll("every node applying the last write", || async {
            let applied = get(&p.addr, "/status").await?["last_applied"].as_u64()?;
            (applied >= index).then_some(())
        })
        .await;
        let scan = get(&p.addr, "/scan?db=kv").await.unwrap();
        let have: BTreeMap<&str, &str> = scan["entries"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| (e[0].as_str().unwrap(), e[1].as_str().unwrap()))
            .collect();
        for k in &acked {
            assert_eq!(
                have.get(k.as_str()).copied(),
                Some(format!("v-{k}").as_str()),
                "node {} lacks acknowledged write {k}",
                p.id
            );
        }
        assert_eq!(have.get("last").copied(), Some("1"));
        // A bounded read, answered by this node itself (`get` follows no 421): followers
        // learn their freshness from the appends the HTTP route hands to the node.
        let q = "/read?db=kv&key=last&consistency=bounded&max_lag_ms=1000";
        let v = poll("a bounded read answered", || get(&p.addr, q)).await;
        assert_eq!(v["value"], "1", "node {}", p.id);
        let big = get(&p.addr, "/scan?db=big").await.unwrap();
        let big = big["entries"].as_array().unwrap();
        assert_eq!(big.len(), 300, "node {}", p.id);
        assert!(big.iter().all(|e| e[1].as_str().unwrap().len() == 10_000));
    }
    let status = get(&leader_addr, "/status").await.unwrap();
    assert_eq!(status["voters"].as_array().unwrap().len(), 3, "{status}");
    eprintln!(
        "{:?}: all {} acknowledged writes on all 3 nodes; leader status {status}",
        t.elapsed(),
        acked.len()
    );
}
