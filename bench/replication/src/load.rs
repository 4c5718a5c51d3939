//! The load: N closed-loop clients putting 16-byte keys with 100-byte values to one leader
//! for a fixed time, and the figures of one such run.
//!
//! Invariants:
//! - Each put's key is unique within a run (`P`, then the client's number, then its
//!   sequence number), so both systems insert new keys and never overwrite.
//! - A put counts when its answer arrives inside the measured window (after the warm-up,
//!   before the end); its latency is from just before its request was written to when its
//!   whole answer was read. Puts answered during the warm-up or after the end are not counted,
//!   nor are their latencies.
//! - A put that failed (transport error, or an answer other than the system's success) is
//!   counted as an error, never as a put.

use crate::http::Conn;
use base64::Engine as _;
use serde::Serialize;
use std::time::{Duration, Instant};

/// Which system's put request to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum System {
    /// `POST /write` `{"ops":[{"db":"kv","key","value"}]}` on a Cairn Raft node.
    Cairn,
    /// `POST /v3/kv/put` `{"key","value"}` (base64) on etcd 3.4's JSON gateway.
    Etcd,
}

impl System {
    pub fn name(self) -> &'static str {
        match self {
            System::Cairn => "cairn",
            System::Etcd => "etcd",
        }
    }

    fn path(self) -> &'static str {
        match self {
            System::Cairn => "/write",
            System::Etcd => "/v3/kv/put",
        }
    }

    /// The request body of one put. Keys and values are ASCII, so Cairn's JSON strings carry
    /// exactly the same bytes as etcd's base64.
    fn body(self, key: &str, value: &str) -> Vec<u8> {
        let v = match self {
            System::Cairn => {
                serde_json::json!({ "ops": [{ "db": "kv", "key": key, "value": value }] })
            }
            System::Etcd => {
                let b = base64::engine::general_purpose::STANDARD;
                serde_json::json!({ "key": b.encode(key), "value": b.encode(value) })
            }
        };
        v.to_string().into_bytes()
    }
}

/// Key length and value length of every put.
pub const KEY_LEN: usize = 16;
pub const VALUE_LEN: usize = 100;

/// The key of put `seq` of client `client` in run `run` (`run` and `client` keep runs on one
/// cluster and clients of one run apart).
pub fn key(run: u32, client: usize, seq: u64) -> String {
    let k = format!(
        "{:1x}{:03}{:012}",
        run % 16,
        client % 1000,
        seq % 1_000_000_000_000
    );
    debug_assert_eq!(k.len(), KEY_LEN);
    k
}

/// The value stored under `key`: the key, then filler to 100 bytes.
pub fn value(key: &str) -> String {
    let mut v = String::with_capacity(VALUE_LEN);
    v.push_str(key);
    while v.len() < VALUE_LEN {
        v.push('v');
    }
    v
}

/// The figures of one run.
#[derive(Clone, Debug, Serialize)]
pub struct Figures {
    pub clients: usize,
    /// Puts answered with success inside the measured window.
    pub puts: u64,
    /// Failed puts (any time after the warm-up), and the first failure's message.
    pub errors: u64,
    pub first_error: Option<String>,
    /// The measured window, seconds.
    pub seconds: f64,
    pub ops_per_s: f64,
    /// Latency percentiles of the counted puts, microseconds.
    pub p50_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
}

/// What one client saw.
struct ClientLog {
    latencies: Vec<u64>,
    errors: u64,
    first_error: Option<String>,
}

/// The value at quantile `q` of sorted `v` (nearest rank), 0 when empty.
pub fn quantile(v: &[u64], q: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

/// Runs `clients` closed-loop clients against `leader` (host:port): `warm` of warm-up, then
/// `measure` counted.
pub async fn run(
    system: System,
    leader: &str,
    run: u32,
    clients: usize,
    warm: Duration,
    measure: Duration,
) -> Figures {
    let start = Instant::now();
    let from = start + warm;
    let until = from + measure;
    let mut tasks = Vec::with_capacity(clients);
    for c in 0..clients {
        let leader = leader.to_string();
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::new(&leader, Duration::from_secs(10));
            let mut log = ClientLog {
                latencies: Vec::new(),
                errors: 0,
                first_error: None,
            };
            let mut seq = 0u64;
            // Bounded by time: no put starts after `until`.
            while Instant::now() < until {
                let k = key(run, c, seq);
                seq += 1;
                let body = system.body(&k, &value(&k));
                let t = Instant::now();
                let r = conn.call(system.path(), Some(body)).await;
                let done = Instant::now();
                let failure = match r {
                    Ok(a) if a.status == 200 => None,
                    Ok(a) => Some(format!(
                        "HTTP {}: {}",
                        a.status,
                        String::from_utf8_lossy(&a.body)
                    )),
                    Err(e) => Some(e),
                };
                match failure {
                    None if done >= from && done <= until => {
                        log.latencies.push((done - t).as_micros() as u64)
                    }
                    None => {}
                    Some(e) if done >= from => {
                        log.errors += 1;
                        log.first_error.get_or_insert(e);
                    }
                    Some(_) => {}
                }
            }
            log
        }));
    }
    let mut all = Vec::new();
    let mut errors = 0;
    let mut first_error = None;
    for t in tasks {
        match t.await {
            Ok(log) => {
                all.extend(log.latencies);
                errors += log.errors;
                if first_error.is_none() {
                    first_error = log.first_error;
                }
            }
            Err(e) => {
                errors += 1;
                first_error.get_or_insert(format!("client task: {e}"));
            }
        }
    }
    all.sort_unstable();
    let seconds = measure.as_secs_f64();
    Figures {
        clients,
        puts: all.len() as u64,
        errors,
        first_error,
        seconds,
        ops_per_s: all.len() as f64 / seconds,
        p50_us: quantile(&all, 0.50),
        p99_us: quantile(&all, 0.99),
        max_us: all.last().copied().unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_values_have_the_benchmark_sizes_and_differ() {
        let a = key(1, 63, 999_999);
        let b = key(1, 62, 999_999);
        assert_eq!(a.len(), KEY_LEN);
        assert_ne!(a, b);
        assert_ne!(key(2, 63, 999_999), a);
        assert_eq!(value(&a).len(), VALUE_LEN);
        assert!(value(&a).starts_with(&a));
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(quantile(&v, 0.5), 50);
        assert_eq!(quantile(&v, 0.99), 99);
        assert_eq!(quantile(&[7], 0.99), 7);
        assert_eq!(quantile(&[], 0.5), 0);
    }

    #[test]
    fn etcd_bodies_carry_base64_and_cairn_bodies_the_text() {
        let e: serde_json::Value = serde_json::from_slice(&System::Etcd.body("k", "v")).unwrap();
        assert_eq!(e["key"], "aw==");
        assert_eq!(e["value"], "dg==");
        let c: serde_json::Value = serde_json::from_slice(&System::Cairn.body("k", "v")).unwrap();
        assert_eq!(c["ops"][0]["key"], "k");
        assert_eq!(c["ops"][0]["db"], "kv");
    }
}
