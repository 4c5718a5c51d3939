//! The two clusters under test, each three processes on loopback with its own data
//! directories: Cairn (`cairn-cluster node`, formed with `/admin/init` as tests/process.rs
//! does) and etcd 3.4 (`etcd` with a static initial cluster). Both run with their default
//! durability (docs/bench/replication/README.md, "Settings").
//!
//! Invariants:
//! - A [`Cluster`] owns its processes: dropping it kills and reaps exactly them.
//! - Data directories are emptied before a cluster starts, so every run begins on a new
//!   cluster with nothing in it.
//! - Every wait (a node's address, an agreed leader) polls with a deadline, and fails with a
//!   message naming what did not happen.

use crate::http::once;
use serde_json::{json, Value};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const WAIT: Duration = Duration::from_secs(60);

/// A started cluster: its processes, the leader's client address and the pid of the leader.
pub struct Cluster {
    procs: Vec<Child>,
    /// Client addresses (host:port), by member.
    pub addrs: Vec<String>,
    /// The leader's client address.
    pub leader: String,
    /// The leader's process id (for profiling).
    pub leader_pid: u32,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for c in &mut self.procs {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A free loopback port (bound, then released: another process could take it in between,
/// which only makes a start fail loudly).
fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| format!("binding: {e}"))?;
    Ok(l.local_addr().map_err(|e| e.to_string())?.port())
}

fn fresh_dir(d: &Path) -> Result<(), String> {
    match std::fs::remove_dir_all(d) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("removing {}: {e}", d.display())),
    }
    std::fs::create_dir_all(d).map_err(|e| format!("creating {}: {e}", d.display()))
}

fn log_file(p: &Path) -> Result<std::fs::File, String> {
    std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()))
}

async fn json_of(addr: &str, path: &str, body: Option<Value>) -> Option<Value> {
    let a = once(addr, path, body.map(|b| b.to_string().into_bytes()))
        .await
        .ok()?;
    if a.status != 200 {
        return None;
    }
    serde_json::from_slice(&a.body).ok()
}

/// Polls `f` every 100 ms until it gives a value, for at most `WAIT`.
async fn poll<T, F: std::future::Future<Output = Option<T>>>(
    what: &str,
    mut f: impl FnMut() -> F,
) -> Result<T, String> {
    let start = Instant::now();
    loop {
        if let Some(v) = f().await {
            return Ok(v);
        }
        if start.elapsed() > WAIT {
            return Err(format!("timed out after {WAIT:?} waiting for {what}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Starts three Cairn nodes (`bin` is `cairn-cluster`) under `work`, forms the cluster and
/// waits until all three agree on a leader. `extra`: more `cairn-cluster node` options.
pub async fn start_cairn(bin: &Path, work: &Path, extra: &[String]) -> Result<Cluster, String> {
    let mut cluster = Cluster {
        procs: Vec::new(),
        addrs: Vec::new(),
        leader: String::new(),
        leader_pid: 0,
    };
    for id in 1..=3u32 {
        let dir: PathBuf = work.join(format!("n{id}"));
        fresh_dir(&dir)?;
        let mut child = Command::new(bin)
            .args(["node", "--id", &id.to_string(), "--dir"])
            .arg(&dir)
            .args(["--listen", "127.0.0.1:0"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(log_file(&work.join(format!("n{id}.log")))?)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", bin.display()))?;
        let mut out = std::io::BufReader::new(child.stdout.take().expect("piped"));
        cluster.procs.push(child);
        let mut line = String::new();
        out.read_line(&mut line)
            .map_err(|e| format!("node {id}'s output: {e}"))?;
        let addr = line
            .split(" listening on ")
            .nth(1)
            .and_then(|s| s.split_whitespace().next())
            .ok_or_else(|| format!("node {id} printed {line:?}"))?
            .to_string();
        // Keep draining stdout so the node never blocks on a full pipe.
        std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
        cluster.addrs.push(addr);
    }
    let members: serde_json::Map<String, Value> = cluster
        .addrs
        .iter()
        .enumerate()
        .map(|(i, a)| ((i + 1).to_string(), json!(a)))
        .collect();
    let first = cluster.addrs[0].clone();
    let body = json!({ "members": members });
    poll("the cluster's initialisation", || {
        json_of(&first, "/admin/init", Some(body.clone()))
    })
    .await?;
    let addrs = cluster.addrs.clone();
    let leader = poll("an agreed Cairn leader", || async {
        let mut leader = None;
        for a in &addrs {
            let l = json_of(a, "/status", None).await?["leader"].as_u64()?;
            if leader.is_some_and(|x| x != l) {
                return None;
            }
            leader = Some(l);
        }
        let l = leader? as usize;
        let s = json_of(&addrs[l - 1], "/status", None).await?;
        (s["state"] == "Leader").then_some(l)
    })
    .await?;
    cluster.leader = cluster.addrs[leader - 1].clone();
    cluster.leader_pid = cluster.procs[leader - 1].id();
    Ok(cluster)
}

/// Starts three etcd members (`bin` is `etcd`) under `work`, each with its own data
/// directory, and waits until all three name the same leader.
pub async fn start_etcd(bin: &Path, work: &Path, extra: &[String]) -> Result<Cluster, String> {
    let mut cluster = Cluster {
        procs: Vec::new(),
        addrs: Vec::new(),
        leader: String::new(),
        leader_pid: 0,
    };
    let mut peers = Vec::new();
    for _ in 0..3 {
        cluster.addrs.push(format!("127.0.0.1:{}", free_port()?));
        peers.push(format!("127.0.0.1:{}", free_port()?));
    }
    let initial: Vec<String> = peers
        .iter()
        .enumerate()
        .map(|(i, p)| format!("e{}=http://{p}", i + 1))
        .collect();
    let initial = initial.join(",");
    for (i, (client, peer)) in cluster.addrs.iter().zip(&peers).enumerate() {
        let name = format!("e{}", i + 1);
        let dir = work.join(&name);
        fresh_dir(&dir)?;
        let client = format!("http://{client}");
        let peer = format!("http://{peer}");
        let child = Command::new(bin)
            .args(["--name", &name, "--data-dir"])
            .arg(&dir)
            .args(["--listen-client-urls", &client])
            .args(["--advertise-client-urls", &client])
            .args(["--listen-peer-urls", &peer])
            .args(["--initial-advertise-peer-urls", &peer])
            .args(["--initial-cluster", &initial])
            .args(["--initial-cluster-state", "new"])
            .args(["--initial-cluster-token", "cairn-bench"])
            .args(["--logger", "zap", "--log-level", "warn"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(log_file(&work.join(format!("{name}.log")))?)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", bin.display()))?;
        cluster.procs.push(child);
    }
    let addrs = cluster.addrs.clone();
    // The gateway renders uint64 ids as JSON strings.
    let leader = poll("an agreed etcd leader", || async {
        let mut leader = None;
        let mut ids = Vec::new();
        for a in &addrs {
            let s = json_of(a, "/v3/maintenance/status", Some(json!({}))).await?;
            let l = s["leader"].as_str()?.to_string();
            if leader.as_ref().is_some_and(|x| *x != l) || l == "0" {
                return None;
            }
            ids.push(s["header"]["member_id"].as_str()?.to_string());
            leader = Some(l);
        }
        let l = leader?;
        ids.iter().position(|id| *id == l)
    })
    .await?;
    cluster.leader = cluster.addrs[leader].clone();
    cluster.leader_pid = cluster.procs[leader].id();
    Ok(cluster)
}
