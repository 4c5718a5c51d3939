//! Write latency of `cairn serve` with 0, 1 and 4 secondary indexes (issue 24's first
//! benchmark figure, a quick in-process look): a server on a loopback port in this process
//! (durable, group commit), `CONNS` client threads each sending `PER_CONN` PUTs of the load
//! test's document (new ids) on a keep-alive connection, closed loop. The indexes are declared
//! on the empty collection first (Ready). Rounds alternate 0, 1, 4 indexes, each on a fresh
//! environment, so that the machine's drift hits all three alike.
//!
//! `cargo run --release -p cairn-server --example index_cost [rounds]`; results in
//! docs/bench/serve/indexes.md.

#[path = "support/server.rs"]
mod support;

#[path = "support/client.rs"]
mod client;

use client::Conn;
use std::time::{Duration, Instant};

const CONNS: usize = 16;
const PER_CONN: usize = 250;
const PATHS: [&str; 4] = ["/radius", "/country_code", "/timestamp", "/position/lat"];

fn doc(c: usize, i: usize) -> String {
    format!(
        r#"{{"position":{{"lat":{},"lon":13.404954}},"radius":{},"cidr":"192.168.100.0/22","country_code":"C{}","nearest_city":"Berlin","timestamp":"2026-11-27T12:{:02}:{:02}.{c:02}{i:04}Z","software_source_version":"cairn-bench 0.1.0 (a1b2c3d)"}}"#,
        52.0 + (i * 31 % 1000) as f64 / 1000.0,
        (c * 7 + i) % 100,
        i % 50,
        i / 60 % 60,
        i % 60,
    )
}

/// One run's p50, p99 and writes per second.
type Run = (Duration, Duration, f64);

/// One run.
fn run(indexes: usize) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let server = support::start(dir.path());
    let addr = server.addr;
    let mut c = Conn::new(addr).unwrap();
    for p in PATHS.iter().take(indexes) {
        let name = p.trim_start_matches('/').replace('/', "_");
        let st = c.put(
            &format!("/bench/_index/{name}"),
            &format!(r#"{{"path":"{p}"}}"#),
        );
        assert_eq!(st, 200);
    }
    // Warm-up: the collection exists, its handle is open.
    for i in 0..50 {
        assert!(c.put(&format!("/bench/warm{i}"), &doc(99, i)) < 300);
    }
    let t0 = Instant::now();
    let clients: Vec<_> = (0..CONNS)
        .map(|k| {
            std::thread::spawn(move || {
                let mut c = Conn::new(addr).unwrap();
                let mut lat = Vec::with_capacity(PER_CONN);
                for i in 0..PER_CONN {
                    let body = doc(k, i);
                    let t = Instant::now();
                    assert!(c.put(&format!("/bench/k{k}-{i}"), &body) < 300);
                    lat.push(t.elapsed());
                }
                lat
            })
        })
        .collect();
    let mut lat: Vec<Duration> = clients
        .into_iter()
        .flat_map(|j| j.join().unwrap())
        .collect();
    let secs = t0.elapsed().as_secs_f64();
    server.stop();
    lat.sort();
    let pct = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];
    (pct(0.50), pct(0.99), lat.len() as f64 / secs)
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(3);
    let mut res: Vec<(usize, Vec<Run>)> = vec![(0, vec![]), (1, vec![]), (4, vec![])];
    for r in 0..rounds {
        for (k, out) in res.iter_mut() {
            let x = run(*k);
            println!(
                "round {r} indexes {k}: p50 {:.2} ms, p99 {:.2} ms, {:.0} writes/s",
                x.0.as_secs_f64() * 1e3,
                x.1.as_secs_f64() * 1e3,
                x.2
            );
            out.push(x);
        }
    }
    println!("\n| indexes | p50 (median of rounds) | p99 (median of rounds) | writes/s (median) |");
    println!("|---|---|---|---|");
    for (k, out) in &res {
        let med = |mut v: Vec<f64>| {
            v.sort_by(|a, b| a.partial_cmp(b).unwrap());
            v[v.len() / 2]
        };
        println!(
            "| {k} | {:.2} ms | {:.2} ms | {:.0} |",
            med(out.iter().map(|x| x.0.as_secs_f64() * 1e3).collect()),
            med(out.iter().map(|x| x.1.as_secs_f64() * 1e3).collect()),
            med(out.iter().map(|x| x.2).collect()),
        );
    }
}
