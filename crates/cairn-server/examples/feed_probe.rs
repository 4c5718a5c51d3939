//! Feed lag of a running `cairn serve` under someone else's load (issue 24's third figure, as
//! `make bench-index-peers` measures it, docs/bench/index): while a load generator writes
//! into `COLLECTION`, this probe PUTs a document of its own every `INTERVAL_MS` on one
//! keep-alive connection (fixed schedule, not closed loop) and follows the collection's
//! feed over SSE on another. Lag = arrival of a probe write's record on the stream minus the
//! moment the probe read that write's 2xx (its ETag is the record's sequence number); a
//! record that arrives first counts as 0. The stream carries every write of the collection,
//! the load's included, so the lag is what a reader following the whole feed sees.
//!
//! `feed_probe ADDR COLLECTION SECONDS INTERVAL_MS`; prints one JSON object: probe writes,
//! records seen, records missing (acknowledged but not on the stream 2 s after the last write:
//! a skipped change, which the feed must never have), lag p50, p99 and max in ms.
//!
//! Invariants: every read loop ends (a socket read timeout lets the reader see the stop flag;
//! the writer's loop is bounded by its deadline).

#[path = "support/client.rs"]
mod client;

use client::Conn;
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A probe document: the load test's fields, values varied so that indexes get new entries.
fn doc(i: usize) -> String {
    format!(
        r#"{{"position":{{"lat":{},"lon":13.404954}},"radius":{},"cidr":"192.168.100.0/22","country_code":"P{}","nearest_city":"Berlin","timestamp":"2026-11-27T13:00:00.{i:06}Z","software_source_version":"probe"}}"#,
        52.0 + (i % 1000) as f64 / 1000.0,
        i % 100,
        i % 50,
    )
}

/// Follows the feed after `since` until `stop`; arrival times of the probe's records.
fn follow(
    addr: SocketAddr,
    coll: &str,
    since: u64,
    stop: &AtomicBool,
    seen: &Mutex<HashMap<u64, Instant>>,
) -> std::io::Result<()> {
    let mut r = Conn::new(addr)?.0;
    r.get_mut()
        .set_read_timeout(Some(Duration::from_millis(100)))?;
    write!(
        r.get_mut(),
        "GET /{coll}/_changes?feed=sse&since={since} HTTP/1.1\r\nHost: b\r\n\r\n"
    )?;
    let mut line = String::new();
    let mut cur = 0u64;
    while !stop.load(Ordering::Relaxed) {
        match r.read_line(&mut line) {
            Ok(0) => break,
            Ok(_) => {
                // Event lines (between chunk-size lines of the chunked body): `id: N`, then
                // `data: {"id":"...",...}` of that record.
                if let Some(n) = line.strip_prefix("id: ") {
                    cur = n.trim().parse().unwrap_or(0);
                } else if line.starts_with("data: ") && line.contains(r#""id":"probe-"#) {
                    let now = Instant::now();
                    seen.lock().unwrap().entry(cur).or_insert(now);
                }
                line.clear();
            }
            // A timeout keeps the partial line and looks at the stop flag.
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    if a.len() != 5 {
        eprintln!("usage: feed_probe ADDR COLLECTION SECONDS INTERVAL_MS");
        std::process::exit(2);
    }
    let addr: SocketAddr = a[1].parse().expect("ADDR: host:port");
    let coll = a[2].clone();
    let secs: u64 = a[3].parse().expect("SECONDS: a number");
    let every = Duration::from_millis(a[4].parse().expect("INTERVAL_MS: a number"));
    let mut c = Conn::new(addr).expect("connect");
    let first = c
        .send("PUT", &format!("/{coll}/probe-start"), &doc(0))
        .expect("first write");
    assert!(first.status < 300, "first write: {}", first.status);
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(HashMap::new()));
    let reader = {
        let (stop, seen, coll) = (stop.clone(), seen.clone(), coll.clone());
        std::thread::spawn(move || follow(addr, &coll, first.etag, &stop, &seen))
    };
    let mut acks = Vec::new();
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs(secs);
    let mut next = t0;
    for i in 1.. {
        let now = Instant::now();
        if now >= end {
            break;
        }
        if next > now {
            std::thread::sleep(next - now);
        }
        next += every;
        let w = c
            .send("PUT", &format!("/{coll}/probe-{i}"), &doc(i))
            .expect("probe write");
        assert!(w.status < 300, "probe write: {}", w.status);
        acks.push((w.etag, Instant::now()));
    }
    // Every acknowledged record has 2 s to arrive.
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        let s = seen.lock().unwrap();
        if acks.iter().all(|(q, _)| s.contains_key(q)) {
            break;
        }
        drop(s);
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    reader.join().unwrap().expect("feed stream");
    let s = seen.lock().unwrap();
    let mut lags: Vec<f64> = acks
        .iter()
        .filter_map(|(q, at)| s.get(q).map(|t| t.saturating_duration_since(*at)))
        .map(|d| d.as_secs_f64() * 1e3)
        .collect();
    lags.sort_by(|x, y| x.total_cmp(y));
    let pct = |p: f64| {
        lags.get(((lags.len() as f64 * p) as usize).min(lags.len().saturating_sub(1)))
            .copied()
    };
    let out = serde_json::json!({
        "writes": acks.len(),
        "seen": lags.len(),
        "missing": acks.len() - lags.len(),
        "p50_ms": pct(0.5),
        "p99_ms": pct(0.99),
        "max_ms": lags.last(),
    });
    println!("{out}");
}
