//! The past-RAM mode (`--suites pastram`, `make bench-pastram`): random inserts of N db_bench
//! pairs, then random reads of them, for each configuration inside a memory cgroup several
//! times smaller than the database (issue 22: LMDB's inserts slow down once the data outgrows
//! RAM, where an LSM stays flat).
//!
//! Invariants:
//! - Every phase runs in a child process of its own (this binary with `--pastram-phase`), which
//!   moves itself into a fresh memory cgroup *before* it opens the database and checks that the
//!   move took; so the engine's heap, the page cache of its files and its dirty pages are all
//!   charged to that cgroup's limit. The cgroup is removed when the child is gone.
//! - A phase stops at the cap, checked between transactions of 1,000 puts and every 1,000
//!   gets; the figures are what was done by then, marked "capped". A child that overruns the
//!   cap by more than the backstop is killed and reported from its last progress line.
//! - The read phase reads only keys the insert phase committed and fails on a missing key.
//! - Dirty data is written back (`sync`) and the page cache dropped before each phase, so the
//!   read phase starts cold and no phase pays for the previous one's writeback.
//! - Every loop is bounded: by N, by the cap, or by the number of progress lines a child can
//!   print (one per second of a capped phase).

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use serde::{Deserialize, Serialize};

use crate::engines::{self, Config, ModeClass, WriteKind};
use crate::workloads::{dec_key, disk_bytes, permutation, touch, Rng, Values};

/// Puts per write transaction, as db_bench's fillrandom.
const BATCH: u64 = 1000;
/// Seeds shared with the dbbench suite's fillrandom (key order, values).
const ORDER_SEED: u64 = 1;
const VALUE_SEED: u64 = 301;
/// Seed of the read phase's key choice.
const READ_SEED: u64 = 22;
/// The default configurations: Cairn's modes, LMDB's, RocksDB's (durable and no-flush).
pub const DEFAULT_CONFIGS: &[&str] = &[
    "cairn-lazy",
    "cairn-durable",
    "cairn-logged",
    "lmdb-nosync",
    "lmdb-writemap",
    "lmdb-durable",
    "rocksdb-nosync",
    "rocksdb-sync",
];
/// The tail window: the rate over the last fifth of a phase's time, where the data is
/// largest (a slowdown past RAM shows there first).
const TAIL: f64 = 0.2;

/// What the parent needs to run the mode (taken from the command line in main.rs).
pub struct Opts {
    pub records: u64,
    pub mem_bytes: u64,
    pub cap: Duration,
    pub configs: Vec<&'static Config>,
    pub root: PathBuf,
    pub out: PathBuf,
    pub command: String,
}

/// Parses a memory size: bytes, or a number with K, M, G (powers of 1024; `MiB`, `MB` and
/// lower case accepted).
pub fn parse_size(s: &str) -> Result<u64> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: u64 = num
        .parse()
        .with_context(|| format!("memory size {s:?}: expected a number like 384M"))?;
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        other => bail!("memory size {s:?}: unknown unit {other:?} (use K, M or G)"),
    };
    let bytes = n
        .checked_mul(1 << shift)
        .with_context(|| format!("memory size {s:?} overflows"))?;
    ensure!(bytes >= 16 << 20, "memory size {s:?}: below 16 MiB");
    Ok(bytes)
}

// ---------------------------------------------------------------------------------------------
// Memory cgroups (v1 memory controller, or v2's unified hierarchy).

const V1_ROOT: &str = "/sys/fs/cgroup/memory";
const V2_ROOT: &str = "/sys/fs/cgroup";

/// A memory cgroup made for one phase; removed on drop (once its process has left).
pub struct Cgroup {
    dir: PathBuf,
    v2: bool,
}

impl Cgroup {
    /// Makes `name` with a limit of `bytes` (swap included where the kernel counts it).
    pub fn create(name: &str, bytes: u64) -> Result<Cgroup> {
        let v2 = Path::new(V2_ROOT).join("cgroup.controllers").exists();
        let root = if v2 {
            Path::new(V2_ROOT)
        } else {
            Path::new(V1_ROOT)
        };
        if v2 {
            let controllers = std::fs::read_to_string(root.join("cgroup.controllers"))?;
            ensure!(
                controllers.split_whitespace().any(|c| c == "memory"),
                "cgroup v2 at {V2_ROOT} has no memory controller (cgroup.controllers: {})",
                controllers.trim()
            );
            let sub = std::fs::read_to_string(root.join("cgroup.subtree_control"))?;
            if !sub.split_whitespace().any(|c| c == "memory") {
                std::fs::write(root.join("cgroup.subtree_control"), "+memory").context(
                    "cgroup v2: enabling the memory controller for children \
                     (cgroup.subtree_control) failed; run as root",
                )?;
            }
        } else {
            ensure!(
                root.join("memory.limit_in_bytes").exists(),
                "no memory cgroup: neither {V2_ROOT}/cgroup.controllers (v2) nor \
                 {V1_ROOT}/memory.limit_in_bytes (v1) exists"
            );
        }
        let dir = root.join(name);
        if dir.exists() {
            // A leftover of a killed run: empty by now, or rmdir fails and says so.
            std::fs::remove_dir(&dir).with_context(|| format!("removing stale {dir:?}"))?;
        }
        std::fs::create_dir(&dir)
            .with_context(|| format!("creating the cgroup {dir:?} (needs root)"))?;
        let cg = Cgroup { dir, v2 };
        if v2 {
            cg.write("memory.max", bytes)?;
            if cg.dir.join("memory.swap.max").exists() {
                cg.write("memory.swap.max", 0)?;
            }
        } else {
            cg.write("memory.limit_in_bytes", bytes)?;
            // memory+swap: the same limit, so nothing can be swapped out around it.
            if cg.dir.join("memory.memsw.limit_in_bytes").exists() {
                cg.write("memory.memsw.limit_in_bytes", bytes)?;
            }
        }
        Ok(cg)
    }

    fn write(&self, file: &str, value: u64) -> Result<()> {
        std::fs::write(self.dir.join(file), value.to_string())
            .with_context(|| format!("writing {value} to {:?}", self.dir.join(file)))
    }

    /// The file a process writes its pid to, to join.
    pub fn procs(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// The peak of the memory charged to the cgroup, bytes (page cache included).
    pub fn peak_bytes(&self) -> Option<u64> {
        let file = if self.v2 {
            "memory.peak"
        } else {
            "memory.max_usage_in_bytes"
        };
        read_u64(&self.dir.join(file))
    }

    /// How many processes the OOM killer killed in the cgroup.
    pub fn oom_kills(&self) -> u64 {
        let (file, key) = if self.v2 {
            ("memory.events", "oom_kill")
        } else {
            ("memory.oom_control", "oom_kill")
        };
        let text = std::fs::read_to_string(self.dir.join(file)).unwrap_or_default();
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
            .unwrap_or(0)
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        // The kernel may take a moment to account the exit of the last process.
        for _ in 0..50 {
            if std::fs::remove_dir(&self.dir).is_ok() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        eprintln!("WARNING: could not remove the cgroup {:?}", self.dir);
    }
}

fn read_u64(path: &Path) -> Option<u64> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

/// Moves this process into the cgroup whose `cgroup.procs` is `procs`, then checks it is there.
fn join_cgroup(procs: &Path) -> Result<()> {
    std::fs::write(procs, std::process::id().to_string())
        .with_context(|| format!("joining the cgroup ({procs:?})"))?;
    let name = procs
        .parent()
        .and_then(|d| d.file_name())
        .and_then(|n| n.to_str())
        .context("cgroup path")?;
    let mine = std::fs::read_to_string("/proc/self/cgroup")?;
    ensure!(
        mine.lines().any(|l| l.ends_with(&format!("/{name}"))),
        "after joining, /proc/self/cgroup does not name {name}: {mine}"
    );
    Ok(())
}

/// Writes dirty data back, then drops the page cache; `Err` says why it could not.
fn drop_caches() -> Result<(), String> {
    // sync(1) rather than libc::sync: the same call, without an unsafe block.
    let synced = Command::new("sync").status();
    if !synced.as_ref().is_ok_and(|s| s.success()) {
        return Err(format!("sync(1) failed: {synced:?}"));
    }
    std::fs::write("/proc/sys/vm/drop_caches", "3")
        .map_err(|e| format!("/proc/sys/vm/drop_caches: {e}"))
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

// ---------------------------------------------------------------------------------------------
// The child: one phase of one configuration.

/// The phases, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Phase {
    Insert,
    Read,
}

impl Phase {
    pub fn parse(s: &str) -> Result<Phase> {
        match s {
            "insert" => Ok(Phase::Insert),
            "read" => Ok(Phase::Read),
            other => bail!("unknown past-RAM phase {other:?} (insert or read)"),
        }
    }

    fn id(self) -> &'static str {
        match self {
            Phase::Insert => "insert",
            Phase::Read => "read",
        }
    }
}

/// What a child reports at the end of its phase (progress lines carry the rest).
#[derive(Debug, Default, Serialize, Deserialize)]
struct ChildEnd {
    /// Insert phase: seconds of the engine's `sync` and close after the last commit.
    sync_secs: f64,
    /// Insert phase: the database's allocated size after that sync, bytes.
    file_bytes: u64,
}

/// Arguments of a child, from main.rs.
pub struct ChildArgs<'a> {
    pub phase: Phase,
    pub cfg: &'static Config,
    pub dir: &'a Path,
    pub procs: &'a Path,
    /// N, the insert phase's target (the key order is a permutation of 0..N).
    pub records: u64,
    /// Read phase: how many keys the insert phase committed (the first `keys` of its order;
    /// also the number of gets).
    pub keys: u64,
    pub cap: Duration,
    pub result_file: &'a Path,
}

/// Prints a progress line (`progress OPS SECS`) for the parent; at most one a second but the
/// last.
struct Progress {
    start: Instant,
    last: Instant,
}

impl Progress {
    fn new() -> Progress {
        let now = Instant::now();
        Progress {
            start: now,
            last: now,
        }
    }

    /// Reports `ops` done; true once the cap is reached.
    fn tick(&mut self, ops: u64, cap: Duration) -> bool {
        let now = Instant::now();
        if now.duration_since(self.last) >= Duration::from_secs(1) {
            self.last = now;
            self.print(ops);
        }
        now.duration_since(self.start) >= cap
    }

    fn print(&self, ops: u64) {
        println!("progress {ops} {:.3}", self.start.elapsed().as_secs_f64());
    }
}

/// Child mode: joins the cgroup, opens the database and runs the phase.
pub fn child(a: &ChildArgs) -> Result<()> {
    join_cgroup(a.procs)?;
    let db = engines::open(a.cfg, a.dir).with_context(|| format!("opening {:?}", a.dir))?;
    let order = permutation(a.records, ORDER_SEED);
    let mut end = ChildEnd::default();
    match a.phase {
        Phase::Insert => {
            let values = Values::compressible(100, VALUE_SEED);
            let mut p = Progress::new();
            let mut done = 0u64;
            while done < a.records {
                let batch = &order[done as usize..(done + BATCH).min(a.records) as usize];
                db.write(WriteKind::Blind, &mut |w| {
                    for &i in batch {
                        w.put(&dec_key(i as u64), values.get(i as u64))?;
                    }
                    Ok(())
                })?;
                done += batch.len() as u64;
                if p.tick(done, a.cap) {
                    break;
                }
            }
            p.print(done);
            let t = Instant::now();
            db.sync()?;
            drop(db);
            end.sync_secs = t.elapsed().as_secs_f64();
            end.file_bytes = disk_bytes(a.dir)?;
        }
        Phase::Read => {
            // The keys the insert phase committed are the first `keys` of its order.
            ensure!(
                a.keys > 0 && a.keys <= a.records,
                "--pastram-keys must be in 1..=N"
            );
            let mut rng = Rng::new(READ_SEED);
            let mut p = Progress::new();
            let mut done = 0u64;
            let mut sum = 0u64;
            db.read(&mut |r| {
                while done < a.keys {
                    for _ in 0..BATCH.min(a.keys - done) {
                        let i = order[rng.below(a.keys) as usize] as u64;
                        let found = r.get(&dec_key(i), &mut |v| touch(&mut sum, v))?;
                        ensure!(found, "key {i} was inserted but is not found");
                        done += 1;
                    }
                    if p.tick(done, a.cap) {
                        break;
                    }
                }
                Ok(())
            })?;
            p.print(done);
            std::hint::black_box(sum);
        }
    }
    std::fs::write(a.result_file, serde_json::to_vec(&end)?)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// The parent.

/// One phase of one configuration, as reported.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PhaseResult {
    pub ops: u64,
    pub secs: f64,
    /// ops / secs over the whole phase.
    pub rate: f64,
    /// The rate over the last fifth of the phase's time.
    pub tail_rate: f64,
    /// Stopped at the cap (or killed) before doing every operation.
    pub capped: bool,
    pub sync_secs: f64,
    pub file_bytes: u64,
    /// Peak memory charged to the cgroup (page cache included), bytes.
    pub cgroup_peak_bytes: u64,
    pub oom_kills: u64,
    /// 1-, 5- and 15-minute load averages when the phase started.
    pub load: String,
    /// Why the page cache was not dropped before the phase, if it was not.
    pub cache_note: Option<String>,
    /// Why the phase failed, if it did (its figures are then those of its last progress).
    pub error: Option<String>,
    /// The child's progress lines (ops, seconds), about one a second: equal-size
    /// comparisons between phases capped at different points are computed from them.
    #[serde(default)]
    pub samples: Vec<(u64, f64)>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ConfigResult {
    pub id: String,
    pub engine: String,
    pub column: String,
    pub class: ModeClass,
    pub flags: String,
    pub insert: PhaseResult,
    pub read: Option<PhaseResult>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub date: String,
    pub command: String,
    pub records: u64,
    pub mem_bytes: u64,
    pub cap_secs: f64,
    pub cgroup: String,
    pub machine: crate::system::Machine,
    pub versions: Vec<(String, String)>,
    pub configs: Vec<ConfigResult>,
    pub total_secs: f64,
}

/// Runs every configuration and writes results.md and results.json under `o.out`.
pub fn parent(o: &Opts) -> Result<()> {
    ensure!(
        o.records > 0 && o.records <= u32::MAX as u64,
        "--records out of range"
    );
    ensure!(!o.cap.is_zero(), "--phase-cap must be above 0");
    let exe = std::env::current_exe()?;
    std::fs::create_dir_all(&o.root)?;
    let start = Instant::now();
    let cgroup = if Path::new(V2_ROOT).join("cgroup.controllers").exists() {
        "v2"
    } else {
        "v1"
    };
    eprintln!(
        "cairn-bench pastram: N = {}, cgroup memory limit {} MiB ({cgroup}), cap {} s per phase, \
         {} configurations, data in {}",
        o.records,
        o.mem_bytes >> 20,
        o.cap.as_secs_f64(),
        o.configs.len(),
        o.root.display()
    );
    let mut configs = Vec::new();
    for cfg in &o.configs {
        let dir = o.root.join(format!("pastram-{}", cfg.id));
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)?;
        let insert = run_phase(&exe, o, cfg, &dir, Phase::Insert, o.records);
        eprintln!("  {:15} insert {}", cfg.id, summary(&insert));
        let read = if insert.ops > 0 && insert.error.is_none() {
            let r = run_phase(&exe, o, cfg, &dir, Phase::Read, insert.ops);
            eprintln!("  {:15} read   {}", cfg.id, summary(&r));
            Some(r)
        } else {
            None
        };
        std::fs::remove_dir_all(&dir)?;
        configs.push(ConfigResult {
            id: cfg.id.into(),
            engine: cfg.engine.into(),
            column: cfg.column.into(),
            class: cfg.class,
            flags: cfg.flags.into(),
            insert,
            read,
        });
    }
    let report = Report {
        date: crate::system::now_utc(),
        command: o.command.clone(),
        records: o.records,
        mem_bytes: o.mem_bytes,
        cap_secs: o.cap.as_secs_f64(),
        cgroup: cgroup.into(),
        machine: crate::system::Machine::detect(&o.root),
        versions: engines::versions()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        configs,
        total_secs: start.elapsed().as_secs_f64(),
    };
    std::fs::create_dir_all(&o.out)?;
    std::fs::write(
        o.out.join("results.json"),
        serde_json::to_vec_pretty(&report)?,
    )?;
    let md = markdown(&report);
    std::fs::write(o.out.join("results.md"), &md)?;
    println!("{md}");
    eprintln!("wrote {}", o.out.join("results.md").display());
    Ok(())
}

fn summary(r: &PhaseResult) -> String {
    let mut s = format!(
        "{:.0} ops/s ({} ops in {:.1} s, last fifth {:.0} ops/s), cgroup peak {} MiB",
        r.rate,
        r.ops,
        r.secs,
        r.tail_rate,
        r.cgroup_peak_bytes >> 20
    );
    if r.capped {
        s.push_str(", CAPPED");
    }
    if let Some(e) = &r.error {
        s.push_str(&format!(", FAILED: {e}"));
    }
    s
}

/// Runs one phase in a child process inside a fresh cgroup; never fails (a failure is
/// recorded in the result, with the progress the child made).
fn run_phase(
    exe: &Path,
    o: &Opts,
    cfg: &Config,
    dir: &Path,
    phase: Phase,
    ops: u64,
) -> PhaseResult {
    let mut r = PhaseResult {
        cache_note: drop_caches().err(),
        load: loadavg(),
        ..PhaseResult::default()
    };
    let name = format!(
        "cairn-pastram-{}-{}-{}",
        std::process::id(),
        cfg.id,
        phase.id()
    );
    let progress = Arc::new(Mutex::new(Vec::<(u64, f64)>::new()));
    let outcome = Cgroup::create(&name, o.mem_bytes).and_then(|cg| {
        let res = spawn(exe, o, cfg, dir, phase, ops, &cg, &progress);
        r.cgroup_peak_bytes = cg.peak_bytes().unwrap_or(0);
        r.oom_kills = cg.oom_kills();
        res
    });
    let samples = progress.lock().unwrap().clone();
    if let Some(&(ops, secs)) = samples.last() {
        r.ops = ops;
        r.secs = secs;
        r.rate = if secs > 0.0 { ops as f64 / secs } else { 0.0 };
        let from = samples
            .iter()
            .rev()
            .find(|s| s.1 <= secs * (1.0 - TAIL))
            .copied()
            .unwrap_or((0, 0.0));
        r.tail_rate = if secs > from.1 {
            (ops - from.0) as f64 / (secs - from.1)
        } else {
            r.rate
        };
    }
    r.capped = r.ops < ops;
    r.samples = samples;
    match outcome {
        Ok(end) => {
            r.sync_secs = end.sync_secs;
            r.file_bytes = end.file_bytes;
        }
        Err(e) => {
            let mut msg = format!("{e:#}");
            if r.oom_kills > 0 {
                msg.push_str(&format!(" ({} OOM kill(s) in the cgroup)", r.oom_kills));
            }
            r.error = Some(msg);
        }
    }
    r
}

/// The child's process and its progress lines; returns its end record.
#[allow(clippy::too_many_arguments)]
fn spawn(
    exe: &Path,
    o: &Opts,
    cfg: &Config,
    dir: &Path,
    phase: Phase,
    keys: u64,
    cg: &Cgroup,
    progress: &Arc<Mutex<Vec<(u64, f64)>>>,
) -> Result<ChildEnd> {
    let result_file = dir.with_extension(format!("{}.json", phase.id()));
    let error_file = result_file.with_extension("error");
    let _ = std::fs::remove_file(&result_file);
    let _ = std::fs::remove_file(&error_file);
    let mut child = Command::new(exe)
        .args(["--pastram-phase", phase.id(), "--config", cfg.id])
        .args(["--records", &o.records.to_string()])
        .args(["--pastram-keys", &keys.to_string()])
        .args(["--phase-cap", &o.cap.as_secs_f64().to_string()])
        .arg("--dir")
        .arg(dir)
        .arg("--cgroup-procs")
        .arg(cg.procs())
        .arg("--result-file")
        .arg(&result_file)
        .stdout(Stdio::piped())
        .spawn()
        .context("spawning the phase's child process")?;
    let stdout = child.stdout.take().context("child stdout")?;
    let sink = Arc::clone(progress);
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let mut w = line.split_whitespace();
            if w.next() != Some("progress") {
                continue;
            }
            if let (Some(Ok(ops)), Some(Ok(secs))) = (
                w.next().map(str::parse::<u64>),
                w.next().map(str::parse::<f64>),
            ) {
                sink.lock().unwrap().push((ops, secs));
            }
        }
    });
    // The insert child syncs after its cap; allow it as long again (at least 2 minutes).
    let backstop = o.cap + o.cap.max(Duration::from_secs(120));
    let status = wait_until(&mut child, Instant::now() + backstop)?;
    let _ = reader.join();
    let Some(status) = status else {
        bail!(
            "killed after {:.0} s (cap {:.0} s)",
            backstop.as_secs_f64(),
            o.cap.as_secs_f64()
        );
    };
    if !status.success() {
        let msg = std::fs::read_to_string(&error_file)
            .unwrap_or_else(|_| format!("child exited with {status}"));
        let _ = std::fs::remove_file(&error_file);
        bail!("{}", msg.trim());
    }
    let text = std::fs::read_to_string(&result_file).context("reading the child's result")?;
    let _ = std::fs::remove_file(&result_file);
    Ok(serde_json::from_str(&text)?)
}

/// Waits for `child` until `deadline`; past it, kills the child and returns `None`.
pub(crate) fn wait_until(child: &mut Child, deadline: Instant) -> Result<Option<ExitStatus>> {
    loop {
        if let Some(status) = child.try_wait()? {
            return Ok(Some(status));
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

// ---------------------------------------------------------------------------------------------
// The report.

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}

/// When a phase reached `ops` operations, interpolating between its progress samples.
fn time_at(samples: &[(u64, f64)], ops: u64) -> Option<f64> {
    let i = samples.iter().position(|s| s.0 >= ops)?;
    let (a, b) = (if i == 0 { (0, 0.0) } else { samples[i - 1] }, samples[i]);
    if b.0 == a.0 {
        return Some(b.1);
    }
    Some(a.1 + (b.1 - a.1) * (ops - a.0) as f64 / (b.0 - a.0) as f64)
}

/// The insert rate over keys `lo..hi` of the phase: the same stretch of database growth for
/// every configuration, however far each got before its cap.
fn rate_between(r: &PhaseResult, lo: u64, hi: u64) -> Option<f64> {
    let (t0, t1) = (time_at(&r.samples, lo)?, time_at(&r.samples, hi)?);
    (t1 > t0).then(|| (hi - lo) as f64 / (t1 - t0))
}

/// The equal-size window: the last fifth of the fewest keys any configuration inserted.
fn common_window(rep: &Report) -> Option<(u64, u64)> {
    let hi = rep
        .configs
        .iter()
        .map(|c| c.insert.ops)
        .filter(|&n| n > 0)
        .min()?;
    Some((hi - hi / 5, hi))
}

/// A rate cell: ops/s, `*` when capped, `FAILED` when the phase failed with no progress.
fn rate_cell(r: Option<&PhaseResult>, tail: bool) -> String {
    match r {
        None => "—".into(),
        Some(r) if r.ops == 0 => "FAILED".into(),
        Some(r) => {
            let v = if tail { r.tail_rate } else { r.rate };
            format!(
                "{}{}",
                crate::report::group_digits(v.round() as u64),
                if r.capped { "*" } else { "" }
            )
        }
    }
}

/// The best (highest) rate among the configurations of `engine` in `class`, with its id.
fn best<'a>(
    rep: &'a Report,
    engine: &str,
    class: ModeClass,
    phase: Phase,
) -> Option<(&'a ConfigResult, &'a PhaseResult)> {
    rep.configs
        .iter()
        .filter(|c| c.engine == engine && c.class == class)
        .filter_map(|c| {
            let r = match phase {
                Phase::Insert => Some(&c.insert),
                Phase::Read => c.read.as_ref(),
            }?;
            (r.ops > 0).then_some((c, r))
        })
        .max_by(|a, b| a.1.rate.total_cmp(&b.1.rate))
}

/// results.md: the configuration table, then Cairn's ratios against LMDB and RocksDB.
pub fn markdown(rep: &Report) -> String {
    use std::fmt::Write;
    let mut m = String::new();
    let limit = mib(rep.mem_bytes);
    let _ = writeln!(
        m,
        "# Past RAM: random inserts, then random reads, in a memory cgroup\n"
    );
    let _ = writeln!(
        m,
        "N = {} db_bench pairs (16-byte keys, 100-byte values, 1,000 puts per transaction, random \
         order), then N random gets in one read transaction; each phase in a fresh memory cgroup \
         ({}) of **{limit:.0} MiB** (page cache included, no swap), page cache dropped before \
         each phase, each phase capped at {:.0} s. See README.md for how to read this.\n",
        crate::report::group_digits(rep.records),
        rep.cgroup,
        rep.cap_secs
    );
    let _ = writeln!(m, "- date: {}; total {:.0} s", rep.date, rep.total_secs);
    let _ = writeln!(m, "- command: `{}`", rep.command);
    let mc = &rep.machine;
    let _ = writeln!(
        m,
        "- machine: {} ({} cores), {:.1} GiB RAM, {}, data on {}",
        mc.cpu, mc.cores, mc.ram_gib, mc.kernel, mc.filesystem
    );
    let v: Vec<String> = rep
        .versions
        .iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect();
    let _ = writeln!(m, "- versions: {}\n", v.join(", "));
    let window = common_window(rep);
    let wlabel = window.map_or("—".into(), |(lo, hi)| {
        format!(
            "{}–{}",
            crate::report::group_digits(lo),
            crate::report::group_digits(hi)
        )
    });
    let _ = writeln!(
        m,
        "| configuration | mode | inserts ops/s | inserts, last fifth | reads ops/s | reads, last \
         fifth | inserts, keys {wlabel} | sync+close s | file MiB | file / limit | cgroup peak MiB (ins / read) | load at start (ins / read) |"
    );
    let _ = writeln!(m, "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|");
    for c in &rep.configs {
        let i = &c.insert;
        let r = c.read.as_ref();
        let file = if i.file_bytes > 0 {
            format!("{:.0}", mib(i.file_bytes))
        } else {
            "—".into()
        };
        let ratio = if i.file_bytes > 0 {
            format!("{:.1}x", mib(i.file_bytes) / limit)
        } else {
            "—".into()
        };
        let _ = writeln!(
            m,
            "| {} | {} | {} | {} | {} | {} | {} | {:.1} | {file} | {ratio} | {:.0} / {} | {} / {} |",
            c.id,
            c.class.label(),
            rate_cell(Some(i), false),
            rate_cell(Some(i), true),
            rate_cell(r, false),
            rate_cell(r, true),
            window
                .and_then(|(lo, hi)| rate_between(i, lo, hi))
                .map_or("—".into(), |v| crate::report::group_digits(v.round() as u64)),
            i.sync_secs,
            mib(i.cgroup_peak_bytes),
            r.map_or("—".into(), |r| format!("{:.0}", mib(r.cgroup_peak_bytes))),
            i.load,
            r.map_or("—", |r| r.load.as_str()),
        );
    }
    let _ = writeln!(
        m,
        "\n`*`: capped — the phase stopped at the cap (or was killed) before its N operations; \
         the figure is the rate over what it did, on a smaller database than the others'.\n"
    );
    let _ = writeln!(m, "## Cairn against LMDB and RocksDB\n");
    let _ = writeln!(
        m,
        "Each Cairn configuration against the best configuration of the peer in the same mode \
         (durable against durable, no-flush against no-flush); above 1.00x Cairn is faster. A \
         ratio against a capped peer (`*`) is a lower bound: the peer's rate is that of a smaller \
         database.\n"
    );
    let _ = writeln!(m, "| Cairn | phase | Cairn ops/s | vs LMDB | vs RocksDB |");
    let _ = writeln!(m, "|---|---|--:|---|---|");
    for c in rep.configs.iter().filter(|c| c.engine == "cairn") {
        for phase in [Phase::Insert, Phase::Read] {
            let Some(mine) = (match phase {
                Phase::Insert => Some(&c.insert),
                Phase::Read => c.read.as_ref(),
            })
            .filter(|r| r.ops > 0) else {
                continue;
            };
            let vs = |engine: &str| match best(rep, engine, c.class, phase) {
                Some((pc, pr)) => format!(
                    "{:.2}x ({} {}{})",
                    mine.rate / pr.rate,
                    pc.id,
                    crate::report::group_digits(pr.rate.round() as u64),
                    if pr.capped { "*" } else { "" }
                ),
                None => "not measured".into(),
            };
            let _ = writeln!(
                m,
                "| {} | {} | {} | {} | {} |",
                c.id,
                phase.id(),
                rate_cell(Some(mine), false),
                vs("lmdb"),
                vs("rocksdb")
            );
        }
    }
    if let Some((lo, hi)) = window {
        // Equal size: every configuration over the same stretch of its database's growth.
        for c in rep.configs.iter().filter(|c| c.engine == "cairn") {
            let Some(mine) = rate_between(&c.insert, lo, hi) else {
                continue;
            };
            let vs = |engine: &str| {
                rep.configs
                    .iter()
                    .filter(|p| p.engine == engine && p.class == c.class)
                    .filter_map(|p| Some((p, rate_between(&p.insert, lo, hi)?)))
                    .max_by(|a, b| a.1.total_cmp(&b.1))
                    .map_or("not measured".into(), |(p, v)| {
                        let digits = crate::report::group_digits(v.round() as u64);
                        format!("{:.2}x ({} {digits})", mine / v, p.id)
                    })
            };
            let _ = writeln!(
                m,
                "| {} | insert, keys {wlabel} | {} | {} | {} |",
                c.id,
                crate::report::group_digits(mine.round() as u64),
                vs("lmdb"),
                vs("rocksdb")
            );
        }
    }
    let failed: Vec<_> = rep
        .configs
        .iter()
        .flat_map(|c| {
            [("insert", Some(&c.insert)), ("read", c.read.as_ref())]
                .into_iter()
                .filter_map(move |(p, r)| Some((c, p, r?.error.as_ref()?)))
        })
        .collect();
    if !failed.is_empty() {
        let _ = writeln!(m, "\n## Failures and kills\n");
        for (c, p, e) in failed {
            let _ = writeln!(m, "- {} {p}: {e}", c.id);
        }
    }
    let notes: Vec<_> = rep
        .configs
        .iter()
        .filter_map(|c| c.insert.cache_note.as_ref())
        .collect();
    if let Some(n) = notes.first() {
        let _ = writeln!(
            m,
            "\nThe page cache could not be dropped between phases: {n}"
        );
    }
    let _ = writeln!(m, "\n## Settings\n");
    for c in &rep.configs {
        let _ = writeln!(m, "- {}: {}", c.id, c.flags);
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("384M").unwrap(), 384 << 20);
        assert_eq!(parse_size("384MiB").unwrap(), 384 << 20);
        assert_eq!(parse_size("1g").unwrap(), 1 << 30);
        assert_eq!(parse_size("33554432").unwrap(), 32 << 20);
        assert!(parse_size("384X").is_err());
        assert!(parse_size("M").is_err());
        assert!(parse_size("1K").is_err(), "below 16 MiB");
        assert!(parse_size("99999999999999G").is_err());
    }

    #[test]
    fn equal_size_rates() {
        let r = PhaseResult {
            samples: vec![(1000, 1.0), (3000, 2.0), (3000, 3.0), (4000, 5.0)],
            ..PhaseResult::default()
        };
        assert_eq!(time_at(&r.samples, 500), Some(0.5));
        assert_eq!(time_at(&r.samples, 2000), Some(1.5));
        assert_eq!(time_at(&r.samples, 3500), Some(4.0));
        assert_eq!(time_at(&r.samples, 4001), None, "beyond the last sample");
        // keys 2000..3500: from 1.5 s to 4.0 s.
        assert_eq!(rate_between(&r, 2000, 3500), Some(600.0));
        assert_eq!(rate_between(&r, 2000, 9000), None);
    }

    #[test]
    fn phases() {
        assert_eq!(Phase::parse("insert").unwrap(), Phase::Insert);
        assert_eq!(Phase::parse("read").unwrap(), Phase::Read);
        assert!(Phase::parse("scan").is_err());
    }
}
