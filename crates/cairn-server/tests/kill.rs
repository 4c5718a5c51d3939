//! A server process SIGKILLed under a concurrent write load, restarted on the same directory:
//! every acknowledged (2xx) write is there, whole; no bulk request is half there; every
//! document present is one a client sent; the change feed holds one record per write that
//! landed, numbered with no gap, in agreement with the documents.
//!
//! The server is this test binary run again as a child (`child_server`, which serves only
//! when `CAIRN_SERVE_CHILD` names a directory), through `cairn_server::serve`, the function
//! `cairn serve` runs: both durable modes (logged, the default, and page flushing), group
//! commit, the real signal and process boundaries.

mod common;

use common::Conn;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

#[test]
fn child_server() {
    let Ok(dir) = std::env::var("CAIRN_SERVE_CHILD") else {
        return;
    };
    let mut cfg = cairn_server::Config::new(dir);
    cfg.listen = "127.0.0.1:0".parse().unwrap();
    // The default is logged; the page-flushing mode is killed too.
    cfg.logged = std::env::var("CAIRN_SERVE_PAGES").is_err();
    cairn_server::serve(cfg).unwrap();
}

/// A child server, SIGKILLed when dropped (so a failing test leaves no process behind).
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the child server on `dir` (`pages`: in the page-flushing mode, else the default
/// logged one); returns it and its address.
fn spawn(dir: &std::path::Path, pages: bool) -> (Killed, SocketAddr) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", "child_server", "--nocapture", "--test-threads=1"])
        .env("CAIRN_SERVE_CHILD", dir)
        .env_remove("CAIRN_SERVE_PAGES");
    if pages {
        cmd.env("CAIRN_SERVE_PAGES", "1");
    }
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            // The test harness may print its "test child_server ... " on the same line.
            if let Some((_, a)) = line.split_once("listening on ") {
                let _ = tx.send(a.trim().parse::<SocketAddr>().unwrap());
            }
        }
    });
    let child = Killed(child);
    let addr = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("child server started");
    (child, addr)
}

/// What the clients sent and what was acknowledged.
#[derive(Default)]
struct Ledger {
    /// Every body sent per id (acknowledged or not).
    sent: BTreeMap<String, Vec<String>>,
    /// Acknowledged single writes: id -> body.
    acked: BTreeMap<String, String>,
    /// Bulk requests: their (id, body) items, and whether acknowledged.
    bulks: Vec<(Vec<(String, String)>, bool)>,
    /// Per writer, its often rewritten document: the id, the body last acknowledged and the
    /// attempts after it.
    hot: Vec<(String, Option<String>, Vec<String>)>,
}

/// One writer's loop until its connection fails (the kill).
fn writer(addr: SocketAddr, round: usize, w: usize, stop: Arc<AtomicBool>) -> Ledger {
    let hot_id = format!("hot-{round}-{w}");
    let mut l = Ledger {
        hot: vec![(hot_id.clone(), None, Vec::new())],
        ..Default::default()
    };
    let Ok(mut c) = Conn::try_connect(addr) else {
        return l;
    };
    let pad = "p".repeat(200 + 37 * w);
    for i in 0.. {
        if stop.load(Ordering::Relaxed) && i % 3 == 0 {
            break;
        }
        let ok = match i % 3 {
            0 => {
                let id = format!("s-{round}-{w}-{i}");
                let body = format!(r#"{{"w":{w},"i":{i},"pad":"{pad}"}}"#);
                l.sent.entry(id.clone()).or_default().push(body.clone());
                match c.send(
                    "PUT",
                    &format!("/k/{id}"),
                    &[("Content-Type", "application/json")],
                    body.as_bytes(),
                ) {
                    Ok(r) if r.status / 100 == 2 => {
                        l.acked.insert(id, body);
                        true
                    }
                    Ok(r) => panic!("unexpected status {}", r.status),
                    Err(_) => false,
                }
            }
            1 => {
                let items: Vec<(String, String)> = (0..5)
                    .map(|j| {
                        (
                            format!("b-{round}-{w}-{i}-{j}"),
                            format!(r#"{{"w":{w},"i":{i},"j":{j}}}"#),
                        )
                    })
                    .collect();
                for (id, body) in &items {
                    l.sent.entry(id.clone()).or_default().push(body.clone());
                }
                let req: Vec<String> = items
                    .iter()
                    .map(|(id, body)| format!(r#"{{"id":"{id}","doc":{body}}}"#))
                    .collect();
                let req = format!("[{}]", req.join(","));
                let r = c.send(
                    "POST",
                    "/k/_bulk",
                    &[("Content-Type", "application/json")],
                    req.as_bytes(),
                );
                let ok = matches!(&r, Ok(r) if r.status == 200);
                if let Ok(r) = &r {
                    assert!(ok, "bulk status {}", r.status);
                }
                l.bulks.push((items, ok));
                ok
            }
            _ => {
                let body = format!(r#"{{"w":{w},"i":{i}}}"#);
                l.sent.entry(hot_id.clone()).or_default().push(body.clone());
                let h = &mut l.hot[0];
                h.2.push(body.clone());
                match c.send(
                    "PUT",
                    &format!("/k/{hot_id}"),
                    &[("Content-Type", "application/json")],
                    body.as_bytes(),
                ) {
                    Ok(r) if r.status / 100 == 2 => {
                        h.1 = Some(body);
                        h.2.clear();
                        true
                    }
                    Ok(r) => panic!("unexpected status {}", r.status),
                    Err(_) => false,
                }
            }
        };
        if !ok {
            break;
        }
    }
    l
}

fn all_docs(c: &mut Conn) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut url = "/k?limit=1000".to_string();
    loop {
        let r = c.get(&url);
        if r.status == 404 {
            return out;
        }
        let v: Value = r.json();
        for it in v["items"].as_array().unwrap() {
            let doc = serde_json::to_vec(&it["doc"]).unwrap();
            out.insert(it["id"].as_str().unwrap().to_string(), doc);
        }
        match v["next"].as_str() {
            Some(n) => url = format!("/k?limit=1000&cursor={n}"),
            None => return out,
        }
    }
}

/// Compact form of a body as the listing re-serializes it (serde_json, sorted keys).
fn canon(s: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::from_str::<Value>(s).unwrap()).unwrap()
}

#[test]
fn sigkill_under_write_load_keeps_every_acknowledged_write() {
    if std::env::var("CAIRN_SERVE_CHILD").is_ok() {
        return;
    }
    kill_rounds(false);
}

#[test]
fn sigkill_under_write_load_keeps_every_acknowledged_write_flushing_pages() {
    if std::env::var("CAIRN_SERVE_CHILD").is_ok() {
        return;
    }
    kill_rounds(true);
}

/// Three rounds of 8 writers against a server SIGKILLed mid-stream, then every promise
/// checked on a restarted server (`pages`: the page-flushing mode, else the logged default).
fn kill_rounds(pages: bool) {
    let dir = tempfile::tempdir().unwrap();
    let mut ledger = Ledger::default();
    const ROUNDS: usize = 3;
    const WRITERS: usize = 8;
    for round in 0..ROUNDS {
        let (child, addr) = spawn(dir.path(), pages);
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let stop = stop.clone();
                std::thread::spawn(move || writer(addr, round, w, stop))
            })
            .collect();
        // Let the load build, then kill mid-stream (Child::kill is SIGKILL on Unix).
        std::thread::sleep(Duration::from_millis(400 + 150 * round as u64));
        drop(child);
        stop.store(true, Ordering::Relaxed);
        for h in writers {
            let l = h.join().unwrap();
            for (k, v) in l.sent {
                ledger.sent.entry(k).or_default().extend(v);
            }
            ledger.acked.extend(l.acked);
            ledger.bulks.extend(l.bulks);
            ledger.hot.extend(l.hot);
        }
    }
    assert!(
        ledger.acked.len() > 20,
        "the load was too light to test: {}",
        ledger.acked.len()
    );

    let (_child, addr) = spawn(dir.path(), pages);
    let mut c = Conn::connect(addr);
    let docs = all_docs(&mut c);
    // Every acknowledged write is there, whole.
    for (id, body) in &ledger.acked {
        let r = c.get(&format!("/k/{id}"));
        assert_eq!(r.status, 200, "acknowledged {id} lost");
        assert_eq!(r.body, body.as_bytes(), "{id}");
    }
    // Every bulk is all there or not at all; acknowledged ones all there.
    let (mut whole, mut none) = (0, 0);
    for (items, acked) in &ledger.bulks {
        let present: Vec<bool> = items.iter().map(|(id, _)| docs.contains_key(id)).collect();
        if present.iter().all(|&p| p) {
            whole += 1;
            for (id, body) in items {
                assert_eq!(docs[id], canon(body), "{id}");
            }
        } else {
            assert!(!acked, "acknowledged bulk lost: {:?}", items[0].0);
            assert!(
                present.iter().all(|&p| !p),
                "half a bulk: {present:?} {:?}",
                items[0].0
            );
            none += 1;
        }
    }
    // The shared documents hold the last acknowledged write or a later attempt.
    for (id, last, after) in &ledger.hot {
        match docs.get(id) {
            Some(d) => {
                let ok: BTreeSet<Vec<u8>> = last.iter().chain(after).map(|b| canon(b)).collect();
                assert!(ok.contains(d), "{id}: {}", String::from_utf8_lossy(d));
            }
            None => assert!(last.is_none(), "{id}: acknowledged, then lost"),
        }
    }
    // Nothing is there that no client sent.
    for (id, d) in &docs {
        let sent = ledger
            .sent
            .get(id)
            .unwrap_or_else(|| panic!("{id} was never sent"));
        assert!(sent.iter().any(|b| canon(b) == *d), "{id}: not a body sent");
    }
    // The change feed agrees with the documents after the kills: records 1..=n with no gap
    // and no repeat, one per write that landed; each document's ETag is the sequence number
    // of the last record of its id (no deletes here).
    let mut last: BTreeMap<String, u64> = BTreeMap::new();
    let mut since = 0u64;
    loop {
        let r = c.get(&format!("/k/_changes?since={since}&limit=1000"));
        assert_eq!(r.status, 200);
        let text = String::from_utf8(r.body).unwrap();
        let recs: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        if recs.is_empty() {
            break;
        }
        for rec in recs {
            let seq = rec["seq"].as_u64().unwrap();
            assert_eq!(seq, since + 1, "a gap or a repeat in the feed");
            assert_eq!(rec["kind"], "put");
            since = seq;
            last.insert(rec["id"].as_str().unwrap().to_string(), seq);
        }
    }
    assert_eq!(
        last.keys().collect::<Vec<_>>(),
        docs.keys().collect::<Vec<_>>(),
        "the feed's ids are the documents'"
    );
    for (id, seq) in last.iter().filter(|(id, _)| id.starts_with("hot-")) {
        let etag = c
            .get(&format!("/k/{id}"))
            .header("etag")
            .unwrap()
            .to_string();
        assert_eq!(etag, format!("\"{seq:x}\""), "{id}");
    }
    eprintln!(
        "{} acknowledged writes, {} bulks whole, {} absent, {} documents after {ROUNDS} kills \
         (pages: {pages})",
        ledger.acked.len(),
        whole,
        none,
        docs.len()
    );
}
