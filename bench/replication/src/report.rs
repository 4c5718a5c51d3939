//! The machine's state around a run (load average, a 4 KiB fdatasync probe) and the report:
//! docs/bench/replication/results.md (medians, ratios, every run) and runs.json (every run's
//! figures).
//!
//! Invariants:
//! - A reported figure is the median over rounds of that figure alone (ops/s, p50 and p99 are
//!   each the median of their own values); the ratios are of those medians.
//! - results.md is regenerated above the line [`KEEP`]; what a person wrote below it (the
//!   analysis of the figures) is kept as it was.

use crate::load::{Figures, System, KEY_LEN, VALUE_LEN};
use serde::Serialize;
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::time::Instant;

/// The line of results.md below which nothing is regenerated.
pub const KEEP: &str = "<!-- written by hand below: kept when the tables above are regenerated -->";

/// One measured point of one round.
#[derive(Serialize)]
pub struct Run {
    pub round: u32,
    pub system: System,
    /// The 1-minute load average when the point started.
    pub load_before: f64,
    pub figures: Figures,
}

impl Run {
    pub fn line(&self) -> String {
        let f = &self.figures;
        format!(
            "round {} {:5} {:3} clients: {:8.0} puts/s  p50 {:7.2} ms  p99 {:7.2} ms  errors {}  (load {:.2}){}",
            self.round,
            self.system.name(),
            f.clients,
            f.ops_per_s,
            f.p50_us as f64 / 1000.0,
            f.p99_us as f64 / 1000.0,
            f.errors,
            self.load_before,
            f.first_error
                .as_ref()
                .map(|e| format!(" first error: {e}"))
                .unwrap_or_default()
        )
    }
}

/// The 1-minute load average (0 if /proc/loadavg is unreadable).
pub fn loadavg() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|x| x.parse().ok()))
        .unwrap_or(0.0)
}

/// The machine around the run: when, load, and how long a 4 KiB fdatasync took.
#[derive(Serialize)]
pub struct Environment {
    pub cores: usize,
    pub probes: Vec<Probe>,
}

#[derive(Serialize)]
pub struct Probe {
    pub when: String,
    pub utc: String,
    pub load: f64,
    pub fdatasync_p50_us: u64,
    pub fdatasync_p99_us: u64,
}

/// The commit the binaries were built from, as `git describe --always --dirty` says (empty
/// outside a git work tree).
fn commit() -> String {
    std::process::Command::new("git")
        .args(["describe", "--always", "--dirty"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

fn utc_now() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d %H:%M UTC"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default()
}

/// 200 writes of 4 KiB, each followed by fdatasync, in a file under `dir`: the flush time
/// every durable commit of both systems pays.
fn fdatasync_probe(dir: &Path) -> Result<(u64, u64), String> {
    use std::os::unix::fs::FileExt;
    let p = dir.join("fdatasync-probe");
    let f = std::fs::File::create(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    let page = [0x5au8; 4096];
    let mut t = Vec::with_capacity(200);
    for i in 0..200u64 {
        f.write_all_at(&page, i * 4096)
            .map_err(|e| format!("{}: {e}", p.display()))?;
        let s = Instant::now();
        f.sync_data().map_err(|e| format!("{}: {e}", p.display()))?;
        t.push(s.elapsed().as_micros() as u64);
    }
    drop(f);
    let _ = std::fs::remove_file(&p);
    t.sort_unstable();
    Ok((
        crate::load::quantile(&t, 0.5),
        crate::load::quantile(&t, 0.99),
    ))
}

impl Environment {
    pub fn now(dir: &Path, when: &str) -> Result<Environment, String> {
        let mut e = Environment {
            cores: std::thread::available_parallelism().map_or(0, |n| n.get()),
            probes: Vec::new(),
        };
        e.measure(dir, when)?;
        Ok(e)
    }

    pub fn measure(&mut self, dir: &Path, when: &str) -> Result<(), String> {
        let (p50, p99) = fdatasync_probe(dir)?;
        self.probes.push(Probe {
            when: when.to_string(),
            utc: utc_now(),
            load: loadavg(),
            fdatasync_p50_us: p50,
            fdatasync_p99_us: p99,
        });
        Ok(())
    }

    pub fn describe_last(&self) -> String {
        self.probes.last().map_or(String::new(), |p| {
            format!(
                "{} ({}): load average {:.2}, 4 KiB fdatasync p50 {} us, p99 {} us",
                p.when, p.utc, p.load, p.fdatasync_p50_us, p.fdatasync_p99_us
            )
        })
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The medians over rounds of one system at one client count: (ops/s, p50 ms, p99 ms, errors
/// summed, rounds).
fn medians(runs: &[Run], system: System, clients: usize) -> Option<(f64, f64, f64, u64, usize)> {
    let rs: Vec<&Figures> = runs
        .iter()
        .filter(|r| r.system == system && r.figures.clients == clients)
        .map(|r| &r.figures)
        .collect();
    if rs.is_empty() {
        return None;
    }
    let ms = |f: fn(&Figures) -> u64| median(rs.iter().map(|r| f(r) as f64 / 1000.0).collect());
    Some((
        median(rs.iter().map(|r| r.ops_per_s).collect()),
        ms(|f| f.p50_us),
        ms(|f| f.p99_us),
        rs.iter().map(|r| r.errors).sum(),
        rs.len(),
    ))
}

fn thousands(x: f64) -> String {
    let s = format!("{:.0}", x);
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The generated part of results.md.
fn tables(env: &Environment, runs: &[Run], clients: &[usize], seconds: f64, warm: f64) -> String {
    let mut s = String::new();
    let rounds = runs.iter().map(|r| r.round).max().unwrap_or(0);
    let _ = writeln!(s, "# Replication: Cairn Raft vs etcd 3.4, durable puts\n");
    let _ = writeln!(
        s,
        "Generated by `make bench-replication` (bench/replication); how to read it: README.md.\n\
         3 processes per system on loopback, one load generator, closed-loop clients sending to \
         the leader over HTTP/1.1 keep-alive; puts of {KEY_LEN}-byte keys and {VALUE_LEN}-byte \
         values, each key new; {warm} s warm-up then {seconds} s measured per point; each figure \
         the median of {rounds} rounds (each round a new cluster per system). {} cores; \
         source at commit {}.\n",
        env.cores,
        commit()
    );
    let _ = writeln!(
        s,
        "| machine | UTC | load average (1 min) | 4 KiB fdatasync p50 | p99 |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|");
    for p in &env.probes {
        let _ = writeln!(
            s,
            "| {} | {} | {:.2} | {} us | {} us |",
            p.when, p.utc, p.load, p.fdatasync_p50_us, p.fdatasync_p99_us
        );
    }
    let _ = writeln!(s, "\n## Medians\n");
    let _ = writeln!(
        s,
        "| system | clients | puts/s | p50 ms | p99 ms | errors |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|");
    for &c in clients {
        for sys in [System::Cairn, System::Etcd] {
            if let Some((ops, p50, p99, errors, _)) = medians(runs, sys, c) {
                let _ = writeln!(
                    s,
                    "| {} | {c} | {} | {p50:.2} | {p99:.2} | {errors} |",
                    sys.name(),
                    thousands(ops)
                );
            }
        }
    }
    let _ = writeln!(s, "\n## Cairn / etcd\n");
    let _ = writeln!(
        s,
        "Throughput above 1 is Cairn faster; latency below 1 is Cairn faster.\n"
    );
    let _ = writeln!(s, "| clients | puts/s | p50 | p99 |");
    let _ = writeln!(s, "|---|---|---|---|");
    for &c in clients {
        if let (Some(a), Some(b)) = (
            medians(runs, System::Cairn, c),
            medians(runs, System::Etcd, c),
        ) {
            let r = |x: f64, y: f64| {
                if y > 0.0 {
                    format!("{:.2}", x / y)
                } else {
                    "-".into()
                }
            };
            let _ = writeln!(
                s,
                "| {c} | {} | {} | {} |",
                r(a.0, b.0),
                r(a.1, b.1),
                r(a.2, b.2)
            );
        }
    }
    let _ = writeln!(s, "\n## Every run\n");
    let _ = writeln!(
        s,
        "| round | system | clients | puts | puts/s | p50 ms | p99 ms | max ms | errors | load at start |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|");
    for r in runs {
        let f = &r.figures;
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {:.2} | {:.2} | {:.2} | {} | {:.2} |",
            r.round,
            r.system.name(),
            f.clients,
            f.puts,
            thousands(f.ops_per_s),
            f.p50_us as f64 / 1000.0,
            f.p99_us as f64 / 1000.0,
            f.max_us as f64 / 1000.0,
            f.errors,
            r.load_before
        );
    }
    let errs: Vec<String> = runs
        .iter()
        .filter_map(|r| {
            r.figures.first_error.as_ref().map(|e| {
                format!(
                    "- round {} {} {}: {e}",
                    r.round,
                    r.system.name(),
                    r.figures.clients
                )
            })
        })
        .collect();
    if !errs.is_empty() {
        let _ = writeln!(
            s,
            "\nFirst error of each run that had one:\n\n{}",
            errs.join("\n")
        );
    }
    s
}

/// Writes results.md (keeping its hand-written part) and runs.json into `out`.
pub fn write(
    out: &Path,
    env: &Environment,
    runs: &[Run],
    clients: &[usize],
    seconds: f64,
    warm: f64,
) -> Result<(), String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let md = out.join("results.md");
    let kept = match std::fs::read_to_string(&md) {
        Ok(old) => old.find(KEEP).map(|i| old[i..].to_string()),
        Err(_) => None,
    };
    let mut text = tables(env, runs, clients, seconds, warm);
    text.push('\n');
    text.push_str(&kept.unwrap_or_else(|| format!("{KEEP}\n")));
    std::fs::write(&md, text).map_err(|e| format!("{}: {e}", md.display()))?;
    let json = serde_json::json!({ "environment": env, "runs": runs });
    let p = out.join("runs.json");
    let mut f = std::fs::File::create(&p).map_err(|e| format!("{}: {e}", p.display()))?;
    let body = serde_json::to_string_pretty(&json).map_err(|e| e.to_string())?;
    writeln!(f, "{body}").map_err(|e| format!("{}: {e}", p.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_and_even_counts() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(vec![]), 0.0);
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(1234567.4), "1,234,567");
        assert_eq!(thousands(999.0), "999");
        assert_eq!(thousands(1000.0), "1,000");
    }
}
