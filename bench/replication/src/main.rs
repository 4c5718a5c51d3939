//! `cairn-bench-replication` (`make bench-replication`, docs/bench/replication/README.md):
//! durable puts of 16-byte keys and 100-byte values against a 3-process Cairn Raft cluster and
//! a 3-member etcd 3.4 cluster on loopback, from this one load generator, at 1, 16 and 64
//! closed-loop clients; throughput and p50 / p99 latency, each point repeated and the median
//! reported, with the ratios Cairn / etcd.
//!
//! Invariants:
//! - Every round starts each system on a new, empty cluster (cluster.rs) and runs every
//!   client count on it; the systems alternate which goes first from round to round, so a
//!   drift of the machine's load does not favour one.
//! - Clients send only to the leader found before the round; a put refused because the
//!   leader changed is an error in the figures, never retried into them.
//! - Every figure in the report was measured in this process's run; the report says when,
//!   with the machine's load and the disk's flush time measured before and after.

mod cluster;
mod http;
mod load;
mod report;

use clap::Parser;
use load::System;
use std::path::PathBuf;
use std::time::Duration;

/// Durable puts against Cairn Raft and etcd, 3 processes each on loopback.
#[derive(Parser, Debug)]
struct Args {
    /// The `cairn-cluster` binary.
    #[arg(long, default_value = "target/release/cairn-cluster")]
    cairn: PathBuf,
    /// The `etcd` binary (3.4).
    #[arg(long, default_value = "/usr/bin/etcd")]
    etcd: PathBuf,
    /// Where the clusters' data directories and logs go (emptied per round).
    #[arg(long, default_value = "target/bench-replication")]
    work: PathBuf,
    /// Where results.md and runs.json go.
    #[arg(long, default_value = "docs/bench/replication")]
    out: PathBuf,
    /// Systems to run, comma-separated: cairn, etcd.
    #[arg(long, default_value = "cairn,etcd", value_delimiter = ',')]
    systems: Vec<String>,
    /// Client counts, comma-separated.
    #[arg(long, default_value = "1,16,64", value_delimiter = ',')]
    clients: Vec<usize>,
    /// Measured seconds per point.
    #[arg(long, default_value_t = 10.0)]
    seconds: f64,
    /// Warm-up seconds per point (puts sent, not counted).
    #[arg(long, default_value_t = 2.0)]
    warm: f64,
    /// Rounds: each point is measured this many times and the median reported.
    #[arg(long, default_value_t = 3)]
    repeat: u32,
    /// More options for every `cairn-cluster node` (e.g. "--heartbeat-ms 100"), split on
    /// spaces.
    #[arg(long, default_value = "")]
    cairn_args: String,
    /// More options for every `etcd`, split on spaces.
    #[arg(long, default_value = "")]
    etcd_args: String,
    /// Only print the figures; leave docs alone.
    #[arg(long)]
    no_report: bool,
}

fn main() {
    let args = Args::parse();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    if let Err(e) = rt.block_on(bench(args)) {
        eprintln!("cairn-bench-replication: {e}");
        std::process::exit(1);
    }
}

fn split(s: &str) -> Vec<String> {
    s.split_whitespace().map(str::to_string).collect()
}

async fn bench(a: Args) -> Result<(), String> {
    let mut systems = Vec::new();
    for s in &a.systems {
        systems.push(match s.as_str() {
            "cairn" => System::Cairn,
            "etcd" => System::Etcd,
            other => return Err(format!("--systems: {other:?} is neither cairn nor etcd")),
        });
    }
    if a.clients.is_empty() || a.clients.iter().any(|&c| c == 0 || c > 1000) {
        return Err("--clients: counts from 1 to 1000".into());
    }
    if !(a.seconds > 0.0 && a.warm >= 0.0) || a.repeat == 0 {
        return Err("--seconds > 0, --warm >= 0, --repeat >= 1".into());
    }
    std::fs::create_dir_all(&a.work).map_err(|e| format!("{}: {e}", a.work.display()))?;
    let mut env = report::Environment::now(&a.work, "before")?;
    eprintln!("{}", env.describe_last());
    let (warm, measure) = (
        Duration::from_secs_f64(a.warm),
        Duration::from_secs_f64(a.seconds),
    );
    let mut runs = Vec::new();
    for round in 1..=a.repeat {
        let mut order = systems.clone();
        if round % 2 == 0 {
            order.reverse();
        }
        for &system in &order {
            let work = a.work.join(format!("{}-r{round}", system.name()));
            std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
            let c = match system {
                System::Cairn => cluster::start_cairn(&a.cairn, &work, &split(&a.cairn_args)).await,
                System::Etcd => cluster::start_etcd(&a.etcd, &work, &split(&a.etcd_args)).await,
            }?;
            // profile.sh reads this line to find the leader.
            eprintln!(
                "{} round {round}: leader {} (pid {})",
                system.name(),
                c.leader,
                c.leader_pid
            );
            for (i, &clients) in a.clients.iter().enumerate() {
                let load = report::loadavg();
                let f = load::run(system, &c.leader, i as u32, clients, warm, measure).await;
                let r = report::Run {
                    round,
                    system,
                    load_before: load,
                    figures: f,
                };
                eprintln!("{}", r.line());
                runs.push(r);
            }
            drop(c);
        }
    }
    env.measure(&a.work, "after")?;
    eprintln!("{}", env.describe_last());
    if !a.no_report {
        report::write(&a.out, &env, &runs, &a.clients, a.seconds, a.warm)?;
        eprintln!("wrote {}", a.out.join("results.md").display());
    }
    Ok(())
}
