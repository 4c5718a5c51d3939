//! `cairn-cluster`: the same commands as `cairn cluster` (a Raft node as a process, and the
//! commands operating a cluster; docs/replication.md, "Running a cluster").

use clap::Parser;

/// Run a Cairn Raft node, or operate a running cluster.
#[derive(Parser, Debug)]
#[command(name = "cairn-cluster")]
struct Cli {
    #[command(flatten)]
    args: cairn_raft::cluster::ClusterArgs,
}

fn main() {
    if let Err(e) = cairn_raft::cluster::run(Cli::parse().args) {
        eprintln!("cairn-cluster: {e}");
        std::process::exit(1);
    }
}
