//! `cairn serve --cluster` as three processes on loopback (docs/serve-cluster.md): clients
//! PUT, POST, DELETE and If-Match PUT documents through the leader while it is SIGKILLed; a new
//! leader is elected and the writes go on; the killed node is restarted on its directory.
//! Then every acknowledged document is on every node with the ETag its write was answered,
//! every acknowledged delete is gone everywhere, and `_changes` (read with
//! `consistency=local` on each node) is byte for byte the same on the three.
//!
//! A client writes only ids of its own, one request at a time, so it knows what each id must
//! hold. A write whose outcome it cannot know (no answer, a timeout, a 5xx, a 421 after the
//! body was sent) makes that id uncertain: the client never writes it again, and the end
//! check asks of it only that the nodes agree. Every wait polls with a generous deadline (the
//! machine may be loaded).

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(40);
const CLIENTS: usize = 3;
const COLL: &str = "docs";

/// One HTTP answer.
struct Resp {
    status: u16,
    etag: Option<u64>,
    body: Vec<u8>,
}

impl Resp {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

/// The body of a chunked answer, decoded.
fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = b.windows(2).position(|w| w == b"\r\n")?;
        let size = std::str::from_utf8(&b[..eol]).ok()?.split(';').next()?;
        let n = usize::from_str_radix(size.trim(), 16).ok()?;
        b = &b[eol + 2..];
        if n == 0 {
            return Some(out);
        }
        out.extend_from_slice(b.get(..n)?);
        b = b.get(n + 2..)?;
    }
}

/// One request on a new connection (`Connection: close`); `Err` if no whole answer came
/// within the timeouts.
fn call(
    addr: &str,
    method: &str,
    path: &str,
    hdrs: &[(&str, String)],
    body: Option<&str>,
) -> Result<Resp, String> {
    let sa = addr.parse().map_err(|e| format!("{addr}: {e}"))?;
    let mut s =
        TcpStream::connect_timeout(&sa, Duration::from_secs(1)).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n");
    for (k, v) in hdrs {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    let body = body.unwrap_or("");
    if method != "GET" {
        req.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    req.push_str("\r\n");
    req.push_str(body);
    s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(|e| e.to_string())?;
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or("no end of head")?;
    let head = String::from_utf8_lossy(&raw[..end]).to_ascii_lowercase();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or("no status")?;
    let header = |name: &str| {
        head.lines()
            .find_map(|l| l.strip_prefix(name).map(|v| v.trim().to_string()))
    };
    let etag = header("etag:").and_then(|v| u64::from_str_radix(v.trim_matches('"'), 16).ok());
    let mut body = raw[end + 4..].to_vec();
    if header("transfer-encoding:").is_some_and(|v| v.contains("chunked")) {
        body = dechunk(&body).ok_or("a bad chunked body")?;
    }
    Ok(Resp { status, etag, body })
}

fn free_port() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

struct Proc {
    child: Child,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts node `id` of the cluster `addrs` (index i is node i + 1) on `dir`.
fn spawn(id: usize, dir: &Path, addrs: &[String]) -> Proc {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_cairn"));
    cmd.args(["serve", "--cluster", "--id", &id.to_string(), "--dir"])
        .arg(dir)
        .args(["--listen", &addrs[id - 1]])
        .args(["--heartbeat-ms", "200", "--election-ms", "1000"])
        // Small build steps, so that an index build spans the leader's kill.
        .args(["--build-batch", "4"]);
    for (i, a) in addrs.iter().enumerate() {
        if i + 1 != id {
            cmd.args(["--peer", &format!("{}={a}", i + 1)]);
        }
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawning cairn serve --cluster");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert!(
        line.contains(" listening on "),
        "node {id} printed {line:?}"
    );
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    Proc { child }
}

/// Polls `f` until it returns `Some`, or panics after `WAIT` naming `what`.
fn poll<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < WAIT, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn status(addr: &str) -> Option<Value> {
    let r = call(addr, "GET", "/status", &[], None).ok()?;
    (r.status == 200).then(|| r.json())
}

/// Waits until the nodes at `addrs` all name one leader among them; its address.
fn agreed_leader(addrs: &[String], all: &[String]) -> String {
    poll("an agreed leader", || {
        let mut leader = None;
        for a in addrs {
            let l = status(a)?["leader"].as_u64()? as usize;
            if leader.is_some_and(|x| x != l) || !addrs.contains(&all[l - 1]) {
                return None;
            }
            leader = Some(l);
        }
        leader.map(|l| all[l - 1].clone())
    })
}

/// What a client knows of one of its ids.
#[derive(Clone, Debug, PartialEq)]
enum Known {
    /// Holds the document at this version (its acknowledged ETag).
    At(u64),
    /// Acknowledged deleted.
    Gone,
    /// A write's outcome is unknown: only agreement is checked.
    Uncertain,
}

/// A write's answer, as the client judges it.
enum Outcome {
    Done(Resp),
    /// Sent elsewhere (421): try the node named, the write not being retried on this id.
    Moved(Option<String>),
    Unknown,
}

fn write(
    addr: &str,
    method: &str,
    path: &str,
    hdrs: &[(&str, String)],
    body: Option<&str>,
) -> Outcome {
    match call(addr, method, path, hdrs, body) {
        Ok(r) if r.status == 421 => Outcome::Moved(
            r.json()["detail"]["leader_addr"]
                .as_str()
                .map(str::to_string),
        ),
        Ok(r) if r.status < 500 => Outcome::Done(r),
        _ => Outcome::Unknown,
    }
}

/// Shared by the clients and the test.
struct Shared {
    all: Vec<String>,
    known: Mutex<BTreeMap<String, Known>>,
    acked: AtomicUsize,
    conditional: AtomicUsize,
    refused: AtomicUsize,
    stop: AtomicBool,
}

/// A client: cycles through create (PUT), If-Match update, a stale If-Match (412 expected),
/// POST, and DELETE, on ids of its own, through the node it believes leads.
fn client(c: usize, sh: Arc<Shared>) {
    let mut leader = sh.all[c % sh.all.len()].clone();
    let mut next = c;
    let mut n = 0u64;
    let set = |id: &str, k: Known| {
        sh.known.lock().unwrap().insert(id.to_string(), k);
    };
    while !sh.stop.load(Ordering::Relaxed) {
        n += 1;
        let id = format!("c{c}-{n:05}");
        let path = format!("/{COLL}/{id}");
        let mut moved = |o: Option<String>, leader: &mut String| {
            next += 1;
            *leader = o.unwrap_or_else(|| sh.all[next % sh.all.len()].clone());
            std::thread::sleep(Duration::from_millis(50));
        };
        // Each step: a request on `id`, and what it must answer to be acknowledged.
        let body = format!("{{\"c\":{c},\"n\":{n}}}");
        let v1 = match write(&leader, "PUT", &path, &[], Some(&body)) {
            Outcome::Done(r) if r.status == 201 => r.etag.expect("an ETag"),
            Outcome::Done(r) => panic!("create {id}: {} {}", r.status, r.json()),
            Outcome::Moved(l) => {
                moved(l, &mut leader);
                set(&id, Known::Uncertain);
                continue;
            }
            Outcome::Unknown => {
                moved(None, &mut leader);
                set(&id, Known::Uncertain);
                continue;
            }
        };
        set(&id, Known::At(v1));
        sh.acked.fetch_add(1, Ordering::Relaxed);
        // A stale If-Match: refused with the single-node status, nothing written.
        let stale = [("If-Match", format!("\"{:x}\"", v1 + 1_000_000))];
        match write(&leader, "PUT", &path, &stale, Some("{\"stale\":true}")) {
            Outcome::Done(r) => {
                assert_eq!(r.status, 412, "stale If-Match on {id}: {}", r.json());
                sh.refused.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::Moved(l) => {
                moved(l, &mut leader);
                continue;
            }
            Outcome::Unknown => {
                moved(None, &mut leader);
                continue;
            }
        }
        // The If-Match of the acknowledged version: whichever node leads now must hold it.
        let cond = [("If-Match", format!("\"{v1:x}\""))];
        let body = format!("{{\"c\":{c},\"n\":{n},\"updated\":true}}");
        match write(&leader, "PUT", &path, &cond, Some(&body)) {
            Outcome::Done(r) => {
                assert_eq!(r.status, 200, "If-Match on {id} at {v1:x}: {}", r.json());
                set(&id, Known::At(r.etag.expect("an ETag")));
                sh.acked.fetch_add(1, Ordering::Relaxed);
                sh.conditional.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::Moved(l) => {
                set(&id, Known::Uncertain);
                moved(l, &mut leader);
                continue;
            }
            Outcome::Unknown => {
                set(&id, Known::Uncertain);
                moved(None, &mut leader);
                continue;
            }
        }
        match write(&leader, "POST", &format!("/{COLL}"), &[], Some(&body)) {
            Outcome::Done(r) => {
                assert_eq!(r.status, 201, "POST: {}", r.json());
                let posted = r.json()["id"].as_str().expect("an id").to_string();
                set(&posted, Known::At(r.etag.expect("an ETag")));
                sh.acked.fetch_add(1, Ordering::Relaxed);
            }
            Outcome::Moved(l) => moved(l, &mut leader),
            Outcome::Unknown => moved(None, &mut leader),
        }
        // Every third id is deleted again.
        if n.is_multiple_of(3) {
            match write(&leader, "DELETE", &path, &[], None) {
                Outcome::Done(r) => {
                    assert_eq!(r.status, 204, "DELETE {id}: {}", r.json());
                    set(&id, Known::Gone);
                    sh.acked.fetch_add(1, Ordering::Relaxed);
                }
                Outcome::Moved(l) => {
                    set(&id, Known::Uncertain);
                    moved(l, &mut leader);
                }
                Outcome::Unknown => {
                    set(&id, Known::Uncertain);
                    moved(None, &mut leader);
                }
            }
        }
    }
}

/// Every page of a local GET of `base` (a listing or the feed), concatenated: the listing's
/// items (id to version), or the feed's lines.
fn local_docs(addr: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut cursor: Option<String> = None;
    loop {
        let mut path = format!("/{COLL}?limit=1000&consistency=local");
        if let Some(c) = &cursor {
            path.push_str(&format!("&cursor={c}"));
        }
        let r = call(addr, "GET", &path, &[], None).unwrap();
        assert_eq!(r.status, 200, "{addr}{path}");
        let v = r.json();
        for it in v["items"].as_array().unwrap() {
            let id = it["id"].as_str().unwrap().to_string();
            out.insert(id, it["version"].as_str().unwrap().to_string());
        }
        match v["next"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => return out,
        }
    }
}

/// The whole change feed of node `addr`, read locally, as its bytes.
fn local_feed(addr: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut since = 0u64;
    loop {
        let path = format!("/{COLL}/_changes?since={since}&limit=1000&consistency=local");
        let r = call(addr, "GET", &path, &[], None).unwrap();
        assert_eq!(r.status, 200, "{addr}{path}");
        let lines: Vec<&[u8]> = r
            .body
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .collect();
        let Some(last) = lines.last() else {
            return out;
        };
        since = serde_json::from_slice::<Value>(last).unwrap()["seq"]
            .as_u64()
            .unwrap();
        out.extend_from_slice(&r.body);
    }
}

/// The ids of the first `n` events of node `addr`'s SSE feed (read locally), resumed after
/// `after` through Last-Event-ID.
fn sse_ids(addr: &str, after: u64, n: usize) -> Vec<u64> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let req = format!(
        "GET /{COLL}/_changes?feed=sse&consistency=local HTTP/1.1\r\nHost: t\r\n\
         Last-Event-ID: {after}\r\n\r\n"
    );
    s.write_all(req.as_bytes()).unwrap();
    let mut ids = Vec::new();
    let mut r = BufReader::new(s);
    let mut line = String::new();
    let mut head = true;
    while ids.len() < n {
        line.clear();
        assert!(
            r.read_line(&mut line).unwrap() > 0,
            "{addr}: the stream ended"
        );
        if head {
            if line.starts_with("HTTP/1.1") {
                assert!(line.contains(" 200"), "{addr}: SSE answered {line}");
            }
            head = line != "\r\n";
            continue;
        }
        // Chunk sizes and event lines interleave; only `id:` lines matter here.
        if let Some(v) = line.trim_end().strip_prefix("id: ") {
            ids.push(v.parse().unwrap());
        }
    }
    ids
}

#[test]
fn documents_survive_a_killed_leader_on_every_node() {
    let t = Instant::now();
    let tmp = tempfile::tempdir().unwrap();
    let dir = |id: usize| tmp.path().join(format!("n{id}"));
    let all: Vec<String> = (0..3).map(|_| free_port()).collect();
    let mut procs: BTreeMap<usize, Proc> =
        (1..=3).map(|id| (id, spawn(id, &dir(id), &all))).collect();
    let leader = agreed_leader(&all, &all);
    eprintln!("{:?}: leader {leader}", t.elapsed());

    let sh = Arc::new(Shared {
        all: all.clone(),
        known: Mutex::new(BTreeMap::new()),
        acked: AtomicUsize::new(0),
        conditional: AtomicUsize::new(0),
        refused: AtomicUsize::new(0),
        stop: AtomicBool::new(false),
    });
    let clients: Vec<_> = (0..CLIENTS)
        .map(|c| {
            let sh = sh.clone();
            std::thread::spawn(move || client(c, sh))
        })
        .collect();
    let acked = || sh.acked.load(Ordering::Relaxed);
    poll("150 acknowledged writes", || (acked() >= 150).then_some(()));

    // An index declared on the populated collection: built in steps of 4 documents, each a
    // log entry, while the writes go on and across the leader's kill (the new leader resumes).
    let ix = r#"{"path":"/c"}"#;
    let r = call(
        &leader,
        "PUT",
        &format!("/{COLL}/_index/by_c"),
        &[],
        Some(ix),
    )
    .unwrap();
    assert_eq!(r.status, 202, "{}", r.json());
    std::thread::sleep(Duration::from_millis(20));
    let path = format!("/{COLL}/_index/by_c?consistency=local");
    let at_kill = call(&leader, "GET", &path, &[], None).map(|r| r.json());
    eprintln!("{:?}: index at the kill: {at_kill:?}", t.elapsed());

    // SIGKILL the leader under the load.
    let before = acked();
    let killed = all.iter().position(|a| *a == leader).unwrap() + 1;
    drop(procs.remove(&killed));
    eprintln!(
        "{:?}: killed leader {killed} after {before} writes",
        t.elapsed()
    );
    let survivors: Vec<String> = procs.keys().map(|id| all[id - 1].clone()).collect();
    let leader = agreed_leader(&survivors, &all);
    eprintln!("{:?}: new leader {leader}", t.elapsed());
    poll("150 writes acknowledged after the kill", || {
        (acked() >= before + 150).then_some(())
    });
    sh.stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    eprintln!(
        "{:?}: {} writes acknowledged ({} If-Match updates), {} stale If-Match refused",
        t.elapsed(),
        acked(),
        sh.conditional.load(Ordering::Relaxed),
        sh.refused.load(Ordering::Relaxed)
    );

    // The killed node comes back on its directory and address, and catches up.
    procs.insert(killed, spawn(killed, &dir(killed), &all));
    let last = status(&leader).unwrap()["last_log_index"].as_u64().unwrap();
    for a in &all {
        poll("every node applying the leader's log", || {
            (status(a)?["last_applied"].as_u64()? >= last).then_some(())
        });
    }

    let known = sh.known.lock().unwrap().clone();
    let docs: Vec<BTreeMap<String, String>> = all.iter().map(|a| local_docs(a)).collect();
    let feeds: Vec<Vec<u8>> = all.iter().map(|a| local_feed(a)).collect();
    let (mut present, mut gone, mut uncertain) = (0, 0, 0);
    for (id, k) in &known {
        for (i, d) in docs.iter().enumerate() {
            match k {
                Known::At(v) => assert_eq!(
                    d.get(id),
                    Some(&format!("{v:x}")),
                    "node {}: acknowledged {id} at {v:x}",
                    i + 1
                ),
                Known::Gone => assert_eq!(d.get(id), None, "node {}: deleted {id}", i + 1),
                Known::Uncertain => {}
            }
        }
        match k {
            Known::At(_) => present += 1,
            Known::Gone => gone += 1,
            Known::Uncertain => uncertain += 1,
        }
    }
    assert_eq!(docs[0], docs[1], "nodes 1 and 2 hold other documents");
    assert_eq!(docs[0], docs[2], "nodes 1 and 3 hold other documents");
    assert!(
        feeds[0] == feeds[1] && feeds[0] == feeds[2],
        "the nodes' feeds differ"
    );
    // The index: Ready on every node, and complete there (every document has /c).
    let mut by_c = Vec::new();
    for a in &all {
        let path = format!("/{COLL}/_index/by_c?consistency=local");
        poll("the index ready on every node", || {
            let r = call(a, "GET", &path, &[], None).ok()?;
            (r.json()["state"] == "ready").then_some(())
        });
        let mut ids = Vec::new();
        for c in 0..CLIENTS {
            let mut cursor: Option<String> = None;
            loop {
                let mut q = format!("/{COLL}?where=/c&eq={c}&limit=1000&consistency=local");
                if let Some(t) = &cursor {
                    q.push_str(&format!("&cursor={t}"));
                }
                let v = call(a, "GET", &q, &[], None).unwrap().json();
                for it in v["items"].as_array().expect("a query's items") {
                    ids.push(it["id"].as_str().unwrap().to_string());
                }
                match v["next"].as_str() {
                    Some(t) => cursor = Some(t.to_string()),
                    None => break,
                }
            }
        }
        ids.sort();
        by_c.push(ids);
    }
    let listed: Vec<String> = docs[0].keys().cloned().collect();
    assert!(
        by_c.iter().all(|ids| *ids == listed),
        "an index disagrees with the documents"
    );
    let records = feeds[0]
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .count();
    assert!(
        records >= acked(),
        "{records} feed records for {} writes",
        acked()
    );
    // Every node streams the same feed as server-sent events, resuming where asked.
    let seqs: Vec<u64> = feeds[0]
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| {
            serde_json::from_slice::<Value>(l).unwrap()["seq"]
                .as_u64()
                .unwrap()
        })
        .collect();
    let n = (seqs.len() - 1).min(20);
    for a in &all {
        assert_eq!(
            sse_ids(a, seqs[0], n),
            seqs[1..=n],
            "{a}: SSE after {}",
            seqs[0]
        );
    }
    // And a hot copy of its replica: a Cairn file holding the same documents.
    let r = call(&all[0], "GET", "/_backup", &[], None).unwrap();
    assert_eq!(r.status, 200, "backup");
    let copy = tempfile::tempdir().unwrap();
    std::fs::write(copy.path().join("data.cairn"), &r.body).unwrap();
    let env = cairn::Env::options().max_dbs(64).open(copy.path()).unwrap();
    let txn = env.read_txn().unwrap();
    let db = txn.open_db(Some(&format!("doc:{COLL}:docs"))).unwrap();
    assert_eq!(
        txn.stat(db).unwrap().entries as usize,
        docs[0].len(),
        "the backup's documents"
    );
    eprintln!(
        "{:?}: {present} documents and {gone} deletes checked on 3 nodes ({uncertain} uncertain ids agree); {} documents, {records} identical feed records",
        t.elapsed(),
        docs[0].len()
    );
}
