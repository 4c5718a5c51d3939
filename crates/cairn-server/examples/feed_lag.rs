//! Feed lag of `cairn serve` (issue 24's third benchmark figure, a quick in-process look):
//! the time from a write's acknowledgement (its 2xx read by the client) to the arrival of its
//! record on an SSE reader, under a write load of `WRITERS` keep-alive connections sending
//! PUTs in a closed loop (durable, group commit). A record that arrives before its writer has
//! read the acknowledgement counts as 0.
//!
//! `cargo run --release -p cairn-server --example feed_lag [rounds]`; results in
//! docs/bench/serve/indexes.md.

#[path = "support/server.rs"]
mod support;

#[path = "support/client.rs"]
mod client;

use client::Conn;
use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

const WRITERS: usize = 8;
const PER_WRITER: usize = 400;

fn put(c: &mut Conn, path: &str, body: &str) -> u64 {
    let a = c.send("PUT", path, body).unwrap();
    assert!(a.status < 300, "{}", a.status);
    a.etag
}

fn conn(addr: std::net::SocketAddr) -> Conn {
    Conn::new(addr).unwrap()
}

/// One run: the lags, sorted.
fn run() -> Vec<Duration> {
    let dir = tempfile::tempdir().unwrap();
    let server = support::start(dir.path());
    let addr = server.addr;
    let mut c = conn(addr);
    put(&mut c, "/lag/first", "{}");
    // The reader: arrival time of every record.
    let total = WRITERS * PER_WRITER + 1;
    let reader = std::thread::spawn(move || {
        let mut r = conn(addr).0;
        r.get_mut()
            .write_all(b"GET /lag/_changes?feed=sse&since=1 HTTP/1.1\r\nHost: b\r\n\r\n")
            .unwrap();
        let mut seen = HashMap::new();
        let mut line = String::new();
        while seen.len() < total - 1 {
            line.clear();
            r.read_line(&mut line).unwrap();
            if let Some(id) = line.strip_prefix("id: ") {
                seen.insert(id.trim().parse::<u64>().unwrap(), Instant::now());
            }
        }
        seen
    });
    std::thread::sleep(Duration::from_millis(100));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            std::thread::spawn(move || {
                let mut c = conn(addr);
                (0..PER_WRITER)
                    .map(|i| {
                        let seq = put(&mut c, &format!("/lag/w{w}-{i}"), r#"{"x":1}"#);
                        (seq, Instant::now())
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let acks: Vec<(u64, Instant)> = writers
        .into_iter()
        .flat_map(|j| j.join().unwrap())
        .collect();
    let seen = reader.join().unwrap();
    server.stop();
    let mut lags: Vec<Duration> = acks
        .iter()
        .map(|(seq, at)| seen[seq].saturating_duration_since(*at))
        .collect();
    lags.sort();
    lags
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3);
    for r in 0..rounds {
        let l = run();
        let pct = |p: f64| l[((l.len() as f64 * p) as usize).min(l.len() - 1)];
        println!(
            "round {r}: {} writes, lag p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            l.len(),
            pct(0.5).as_secs_f64() * 1e3,
            pct(0.99).as_secs_f64() * 1e3,
            l[l.len() - 1].as_secs_f64() * 1e3
        );
    }
}
