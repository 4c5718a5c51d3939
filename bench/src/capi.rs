//! The `capi` suite: the cost of Cairn's C layer (crates/cairn-capi, LMDB's lmdb.h).
//!
//! One C program, bench/capi/bench_capi.c, is built twice, against Debian's liblmdb and against
//! Cairn's liblmdb.so.0; crates/cairn-capi/examples/bench_rust.rs does the same work through
//! Cairn's Rust API. The three run here as separate processes, in alternation, in the same
//! harness run (`make capi-bench-programs` builds them; bench/run.sh calls it). Each program
//! times its phases in CPU time of the process and prints its best of RUNS runs; the suite keeps
//! each phase's best over its rounds. Cairn (C) / Cairn (Rust) is the cost of the C layer.
//!
//! Timings on a shared machine move by several percent between runs, more than the layer
//! costs; so when valgrind is installed the suite also counts instructions per operation of
//! each phase under callgrind (noise-free): every phase is a non-inlined function of the same
//! name in the three programs, and `--dump-before='*phase_*'` ends a profile part at the entry
//! of each, so part k+2 holds phase k.
//!
//! Invariant: nothing of the suite runs in the harness's own process; it only spawns the
//! programs and reads their output, and it refuses to measure a program the loader linked to
//! the wrong library (checked with ldd).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use serde::{Deserialize, Serialize};

/// The phases, in the programs' order: id, label, operations as a fraction of N (denominator).
pub const PHASES: [(&str, &str, u64); 6] = [
    ("put_random", "random puts, 1000 per txn", 1),
    ("get_random", "random gets, one read txn", 1),
    ("scan", "cursor scan forwards (MDB_NEXT)", 1),
    ("scan_reverse", "cursor scan backwards (MDB_PREV)", 1),
    ("cursor_seek", "random cursor seeks (MDB_SET_KEY)", 1),
    (
        "read_txn_get",
        "short read txns: begin, one get, abort (N/4)",
        4,
    ),
];

/// The three programs, in the order of every `[f64; 3]` here.
const PROGRAMS: [&str; 3] = ["LMDB C", "Cairn C", "Cairn Rust"];

/// Records of the callgrind runs (instructions per operation settle well below this).
pub const INSTR_RECORDS: u64 = 16_384;

/// The suite's figures; `results.json`'s `capi`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CapiResults {
    /// N of the timed runs (a power of two).
    pub records: u64,
    /// Rounds of the three programs, each doing `runs` runs.
    pub rounds: u32,
    pub runs: u32,
    /// N of the callgrind runs; `None` when valgrind is not installed.
    pub instr_records: Option<u64>,
    pub phases: Vec<CapiPhase>,
}

/// One phase: CPU ns per operation and, under callgrind, instructions per operation.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CapiPhase {
    pub id: String,
    pub label: String,
    pub ns: Triple,
    pub instr: Option<Triple>,
}

/// A figure for each program.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct Triple {
    pub lmdb_c: f64,
    pub cairn_c: f64,
    pub cairn_rust: f64,
}

/// The three programs, as `make capi-bench-programs` leaves them.
struct Programs {
    lmdb_c: PathBuf,
    cairn_c: PathBuf,
    rust: PathBuf,
    /// Where Cairn's liblmdb.so.0 is staged (LD_LIBRARY_PATH of the Cairn build).
    cairn_lib: PathBuf,
}

impl Programs {
    fn find(workspace: &Path) -> Result<Programs> {
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| workspace.join("target"));
        let p = Programs {
            lmdb_c: target.join("capi-bench/bench_lmdb"),
            cairn_c: target.join("capi-bench/bench_cairn"),
            rust: target.join("release/examples/bench_rust"),
            cairn_lib: target.join("capi/lib"),
        };
        for f in [&p.lmdb_c, &p.cairn_c, &p.rust] {
            ensure!(
                f.exists(),
                "{} is missing: build the programs with `make capi-bench-programs` \
                 (bench/run.sh does)",
                f.display()
            );
        }
        Ok(p)
    }

    /// The command for program `which` (0 LMDB C, 1 Cairn C, 2 Cairn Rust).
    fn command(&self, which: usize) -> Command {
        let (path, cairn_lib) = match which {
            0 => (&self.lmdb_c, false),
            1 => (&self.cairn_c, true),
            _ => (&self.rust, false),
        };
        let mut c = Command::new(path);
        c.env_remove("LD_LIBRARY_PATH");
        if cairn_lib {
            c.env("LD_LIBRARY_PATH", &self.cairn_lib);
        }
        c
    }

    /// Checks with ldd that each C build loads the library it is named after.
    fn check_linkage(&self) -> Result<()> {
        let cairn = std::fs::canonicalize(&self.cairn_lib)
            .with_context(|| format!("{}: not staged", self.cairn_lib.display()))?;
        for (prog, want_cairn) in [(&self.lmdb_c, false), (&self.cairn_c, true)] {
            let mut ldd = Command::new("ldd");
            ldd.arg(prog).env_remove("LD_LIBRARY_PATH");
            if want_cairn {
                ldd.env("LD_LIBRARY_PATH", &self.cairn_lib);
            }
            let out = ldd.output().context("running ldd")?;
            let text = String::from_utf8_lossy(&out.stdout);
            let line = text
                .lines()
                .find(|l| l.contains("liblmdb.so.0"))
                .with_context(|| format!("{}: no liblmdb.so.0 in ldd's output", prog.display()))?;
            let is_cairn = line
                .split("=>")
                .nth(1)
                .and_then(|s| s.split_whitespace().next())
                .and_then(|p| std::fs::canonicalize(p).ok())
                .is_some_and(|p| p.starts_with(&cairn));
            ensure!(
                is_cairn == want_cairn,
                "{} loads the wrong liblmdb.so.0: {}",
                prog.display(),
                line.trim()
            );
        }
        Ok(())
    }
}

/// Runs the suite: `rounds` rounds of the three programs (one run each) on N records (the next power of two
/// of `records`), then the callgrind counts if valgrind is there. `dir` is scratch space.
pub fn run(
    workspace: &Path,
    dir: &Path,
    records: u64,
    rounds: u32,
    timeout: Duration,
) -> Result<CapiResults> {
    let progs = Programs::find(workspace)?;
    progs.check_linkage()?;
    let n = records.max(4).next_power_of_two();
    // Many short processes rather than a few long ones, the order rotating every round: on a
    // loaded machine each program then gets its share of the quiet moments and of the slots
    // right after another program (whose dirty pages are still being written back).
    let runs = 1;
    let mut best = [[f64::INFINITY; 3]; PHASES.len()];
    let db = dir.join("capi-db");
    for round in 0..rounds as usize {
        for k in 0..PROGRAMS.len() {
            let which = (round + k) % PROGRAMS.len();
            let name = PROGRAMS[which];
            let mut c = progs.command(which);
            c.arg(&db).arg(n.to_string()).arg(runs.to_string());
            let out = run_program(c, timeout).with_context(|| format!("{name} program"))?;
            for (i, v) in parse_phases(&out)?.into_iter().enumerate() {
                best[i][which] = best[i][which].min(v);
            }
        }
    }
    let _ = std::fs::remove_dir_all(&db);
    let instr = if valgrind_present() {
        Some(count_instructions(&progs, dir, timeout)?)
    } else {
        eprint!("(valgrind not installed: no instruction counts) ");
        None
    };
    let phases = PHASES
        .iter()
        .enumerate()
        .map(|(i, (id, label, _))| CapiPhase {
            id: id.to_string(),
            label: label.to_string(),
            ns: triple(best[i]),
            instr: instr.as_ref().map(|t| triple(t[i])),
        })
        .collect();
    Ok(CapiResults {
        records: n,
        rounds,
        runs,
        instr_records: instr.is_some().then_some(INSTR_RECORDS),
        phases,
    })
}

fn triple(v: [f64; 3]) -> Triple {
    Triple {
        lmdb_c: v[0],
        cairn_c: v[1],
        cairn_rust: v[2],
    }
}

/// Runs a program to its end (killed past `timeout`) and returns its stdout.
fn run_program(mut c: Command, timeout: Duration) -> Result<String> {
    let what = format!("{c:?}");
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("spawning {what}"))?;
    // The output is a few lines: read after the end, no pipe can fill.
    let deadline = Instant::now() + timeout;
    loop {
        if child.try_wait()?.is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            bail!("{what} timed out after {} s", timeout.as_secs());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output()?;
    ensure!(
        out.status.success(),
        "{what} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    Ok(String::from_utf8(out.stdout)?)
}

/// The figures of a program's output, in PHASES order ("<phase> <ns per op>" lines).
fn parse_phases(out: &str) -> Result<Vec<f64>> {
    PHASES
        .iter()
        .map(|(id, _, _)| {
            out.lines()
                .filter_map(|l| l.split_once(' '))
                .find(|(k, _)| k == id)
                .with_context(|| format!("no figure for phase {id} in {out:?}"))?
                .1
                .trim()
                .parse::<f64>()
                .with_context(|| format!("bad figure for phase {id}"))
        })
        .collect()
}

fn valgrind_present() -> bool {
    Command::new("valgrind")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Instructions per operation of each phase of each program, from one callgrind run each.
fn count_instructions(progs: &Programs, dir: &Path, timeout: Duration) -> Result<Vec<[f64; 3]>> {
    let cg = dir.join("capi-callgrind");
    let mut out = vec![[0.0; 3]; PHASES.len()];
    for (which, name) in PROGRAMS.iter().enumerate() {
        let _ = std::fs::remove_dir_all(&cg);
        std::fs::create_dir_all(&cg)?;
        let direct = progs.command(which);
        let mut c = Command::new("valgrind");
        c.env_remove("LD_LIBRARY_PATH");
        for (k, v) in direct.get_envs() {
            if let Some(v) = v {
                c.env(k, v);
            }
        }
        c.arg("--tool=callgrind")
            .arg(format!("--callgrind-out-file={}/cg.%p", cg.display()))
            .args([
                "--dump-before=*phase_*",
                "--compress-strings=no",
                "--compress-pos=no",
            ])
            .arg(direct.get_program())
            .arg(cg.join("db"))
            .arg(INSTR_RECORDS.to_string())
            .arg("1");
        run_program(c, timeout).with_context(|| format!("{name} program under callgrind"))?;
        let parts = read_parts(&cg).with_context(|| format!("{name} program's profile"))?;
        for (i, (_, _, div)) in PHASES.iter().enumerate() {
            let ops = INSTR_RECORDS / div;
            out[i][which] = parts[i] as f64 / ops as f64;
        }
    }
    let _ = std::fs::remove_dir_all(&cg);
    Ok(out)
}

/// The instruction totals of the phases, from callgrind's part files in `cg`.
fn read_parts(cg: &Path) -> Result<Vec<u64>> {
    // (part number, trigger, total) of every dump.
    let mut parts = Vec::new();
    for e in std::fs::read_dir(cg)? {
        let path = e?.path();
        if !path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("cg."))
        {
            continue;
        }
        let text = std::fs::read_to_string(&path)?;
        let field = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key))
                .map(|s| s.trim().to_string())
        };
        let part: u32 = field("part:")
            .with_context(|| format!("{}: no part number", path.display()))?
            .parse()?;
        let trigger = field("desc: Trigger:").unwrap_or_default();
        let total: u64 = field("totals:")
            .or_else(|| field("summary:"))
            .with_context(|| format!("{}: no totals", path.display()))?
            .parse()?;
        parts.push((part, trigger, total));
    }
    parts.sort_by_key(|p| p.0);
    // Part 1 ends at phase_put_random's entry; part k+2 at the entry of the function after
    // phase k (the next phase, or phase_done after the last).
    let after = [
        "phase_get_random",
        "phase_scan",
        "phase_scan",
        "phase_cursor_seek",
        "phase_read_txn_get",
        "phase_done",
    ];
    ensure!(
        parts.len() > PHASES.len(),
        "callgrind wrote {} parts, expected {}",
        parts.len(),
        PHASES.len() + 2
    );
    after
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let (_, trigger, total) = &parts[i + 1];
            ensure!(
                trigger.ends_with(f),
                "callgrind part {} ends at {trigger:?}, expected {f}",
                i + 2
            );
            Ok(*total)
        })
        .collect()
}

/// The suite's Markdown table and how to read it.
pub fn table(c: &CapiResults) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\n### C API (lmdb.h): one C program on LMDB and on Cairn, and its Rust twin\n"
    );
    let _ = writeln!(
        s,
        "bench/capi/bench_capi.c linked against Debian's liblmdb (**LMDB C**) and against \
         Cairn's liblmdb.so.0 (**Cairn C**); crates/cairn-capi/examples/bench_rust.rs does the \
         same through Cairn's Rust API (**Cairn Rust**). MDB_NOSYNC (Cairn: lazy, no periodic \
         flush), 16-byte keys, 100-byte values, N = {}; CPU ns per operation, best of {} \
         runs of each program ({} rounds, the order rotating). **C / Rust** is the C layer's \
         cost (1.00: none).",
        crate::report::group_digits(c.records),
        c.rounds * c.runs,
        c.rounds
    );
    match c.instr_records {
        Some(n) => {
            let _ = writeln!(
                s,
                "Instructions per operation: callgrind, N = {}, one run (noise-free).\n",
                crate::report::group_digits(n)
            );
        }
        None => {
            let _ = writeln!(s, "Instructions: not counted (valgrind not installed).\n");
        }
    }
    let _ = writeln!(
        s,
        "| phase | LMDB C (ns) | Cairn C (ns) | Cairn Rust (ns) | C / Rust (time) | Cairn C / \
         LMDB C | LMDB C (instr) | Cairn C (instr) | Cairn Rust (instr) | C / Rust (instr) |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for p in &c.phases {
        let t = &p.ns;
        let _ = write!(
            s,
            "| {} | {:.1} | {:.1} | {:.1} | {:.3} | {:.2}× |",
            p.label,
            t.lmdb_c,
            t.cairn_c,
            t.cairn_rust,
            t.cairn_c / t.cairn_rust,
            t.cairn_c / t.lmdb_c
        );
        match &p.instr {
            Some(i) => {
                let _ = writeln!(
                    s,
                    " {:.0} | {:.0} | {:.0} | {:.3} |",
                    i.lmdb_c,
                    i.cairn_c,
                    i.cairn_rust,
                    i.cairn_c / i.cairn_rust
                );
            }
            None => {
                let _ = writeln!(s, " — | — | — | — |");
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_program_output() {
        let out = "put_random 1500.5\nget_random 400.0\nscan 90.1\nscan_reverse 80\n\
                   cursor_seek 410.2\nread_txn_get 870.9\n";
        assert_eq!(
            parse_phases(out).unwrap(),
            vec![1500.5, 400.0, 90.1, 80.0, 410.2, 870.9]
        );
        assert!(parse_phases("put_random 1\n").is_err());
    }

    #[test]
    fn reads_callgrind_parts() {
        let dir = std::env::temp_dir().join(format!("capi-parts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let triggers = [
            "phase_put_random",
            "phase_get_random",
            "phase_scan",
            "phase_scan",
            "phase_cursor_seek",
            "phase_read_txn_get",
            "bench_rust::phase_done",
        ];
        for (i, t) in triggers.iter().enumerate() {
            let text = format!(
                "part: {}\ndesc: Trigger: --dump-before={t}\nsummary: {}\ntotals: {}\n",
                i + 1,
                (i + 1) * 100,
                (i + 1) * 100
            );
            std::fs::write(dir.join(format!("cg.42.{}", i + 1)), text).unwrap();
        }
        std::fs::write(
            dir.join("cg.42"),
            "part: 8\ndesc: Trigger: Program termination\ntotals: 7\n",
        )
        .unwrap();
        let parts = read_parts(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(parts, vec![200, 300, 400, 500, 600, 700]);
    }
}
