//! cairn-bench: measures Cairn against LMDB, libmdbx, redb, SQLite and RocksDB.
//!
//! The parent process runs every (suite, configuration) pair in a child process of its own
//! (this same binary with `--child`), so that each engine starts with a fresh address space and
//! its peak RSS is its own; the child writes its figures as JSON into a file the parent reads.
//! See bench/README.md.

mod capi;
mod dups;
mod engines;
mod group;
mod group_report;
mod mp;
mod pastram;
mod plot;
mod report;
mod system;
mod workloads;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Parser;

use engines::{Config, CONFIGS};
use report::{ConfigInfo, Failure, Results, RunRecord};
use workloads::{Figure, Params, Suite, Unit};

#[derive(Parser, Debug)]
#[command(
    version,
    about = "Benchmarks Cairn against LMDB, libmdbx, redb, SQLite and RocksDB"
)]
struct Cli {
    /// `quick` (200k records, a subset of workloads, a few minutes) or `full` (1M, everything).
    #[arg(default_value = "quick", value_parser = ["quick", "full"])]
    set: String,
    /// Number of records N (default: 200000 for quick, 1000000 for full).
    #[arg(long)]
    records: Option<u64>,
    /// Where the databases go; must be a real disk, not tmpfs
    /// (default: <workspace>/target/bench-data).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Where results.md, results.json and the plots go (default: <workspace>/docs/bench).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Only these engines (comma-separated: cairn,lmdb,mdbx,redb,sqlite,rocksdb).
    #[arg(long, value_delimiter = ',')]
    engines: Vec<String>,
    /// Only these configurations (comma-separated ids, e.g. lmdb-durable,cairn-lazy).
    #[arg(long, value_delimiter = ',')]
    configs: Vec<String>,
    /// Only these suites (comma-separated: dbbench,redb,crud,dups,mp,capi,group, or pastram
    /// alone). Default: all but group and pastram, which run only when named.
    #[arg(long, value_delimiter = ',')]
    suites: Vec<String>,
    /// Group suite: seconds each thread count runs.
    #[arg(long, default_value_t = group::DEFAULT_SECS)]
    group_secs: f64,
    /// Group suite: the thread counts (comma-separated; default 1,4,16,64,256).
    #[arg(long, value_delimiter = ',')]
    group_threads: Vec<usize>,
    /// Runs per (suite, configuration); figures are the median.
    #[arg(long, default_value_t = 1)]
    repeat: u32,
    /// Kill a child process after this many seconds.
    #[arg(long, default_value_t = 3600)]
    timeout: u64,
    /// Do not draw PNG plots.
    #[arg(long)]
    no_plots: bool,
    /// Rebuild results.md and the plots from an existing results.json; measure nothing.
    #[arg(long, value_name = "RESULTS_JSON")]
    report_only: Option<PathBuf>,
    /// Child mode: run one suite for one configuration (used by the harness itself).
    #[arg(long, hide = true)]
    child: bool,
    #[arg(long, hide = true)]
    config: Option<String>,
    #[arg(long, hide = true)]
    suite: Option<String>,
    #[arg(long, hide = true)]
    result_file: Option<PathBuf>,
    /// Worker mode of the mp suite (readrandom, reader or writer): a process of the suite's
    /// own child, opening the database in --dir (see mp.rs).
    #[arg(long, hide = true)]
    mp_role: Option<String>,
    #[arg(long, hide = true, default_value_t = 0)]
    mp_seed: u64,
    /// Past-RAM suite (`--suites pastram`, alone): the memory limit of each phase's cgroup,
    /// e.g. 384M (see pastram.rs).
    #[arg(long, default_value = "384M")]
    cgroup_mem: String,
    /// Past-RAM suite: seconds after which a phase stops and reports the rate it reached.
    #[arg(long, default_value_t = 120.0)]
    phase_cap: f64,
    /// Past-RAM child mode: insert or read (used by the harness itself).
    #[arg(long, hide = true)]
    pastram_phase: Option<String>,
    #[arg(long, hide = true)]
    cgroup_procs: Option<PathBuf>,
    #[arg(long, hide = true, default_value_t = 0)]
    pastram_keys: u64,
}

fn workspace_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::fs::canonicalize(&root).unwrap_or(root)
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    if let Some(role) = &cli.mp_role {
        if let Err(e) = mp_worker(&cli, role) {
            eprintln!("error: {e:#}");
            std::process::exit(1);
        }
        return Ok(());
    }
    if let Some(phase) = &cli.pastram_phase {
        child_exit(&cli, pastram_child(&cli, phase));
        return Ok(());
    }
    if cli.suites.iter().any(|s| s == "pastram") {
        return pastram_parent(&cli);
    }
    if cli.child {
        child_exit(&cli, child(&cli));
        return Ok(());
    }
    if let Some(json) = &cli.report_only {
        let results: Results = serde_json::from_str(&std::fs::read_to_string(json)?)?;
        let out = cli
            .out
            .clone()
            .unwrap_or_else(|| json.parent().unwrap().to_path_buf());
        return publish(&results, &out, cli.no_plots);
    }
    cairn_revision();
    parent(&cli)
}

/// Ends a child process that failed: reports the failure as one line (no backtrace) and
/// leaves the message for the parent beside the result file.
fn child_exit(cli: &Cli, outcome: Result<()>) {
    if let Err(e) = outcome {
        let msg = format!("{e:#}");
        eprintln!("error: {msg}");
        if let Some(file) = &cli.result_file {
            let _ = std::fs::write(error_file(file), &msg);
        }
        std::process::exit(1);
    }
}

fn params(cli: &Cli) -> Params {
    let quick = cli.set == "quick";
    let records = cli
        .records
        .unwrap_or(if quick { 200_000 } else { 1_000_000 });
    let group_threads: &'static [usize] = if cli.group_threads.is_empty() {
        group::DEFAULT_THREADS
    } else {
        // Params stays Copy; the list is a few words, made once or twice per process.
        Vec::leak(cli.group_threads.clone())
    };
    Params {
        records,
        quick,
        group_secs: cli.group_secs,
        group_threads,
    }
}

/// Worker mode of the mp suite.
fn mp_worker(cli: &Cli, role: &str) -> Result<()> {
    let role = mp::Role::parse(role)?;
    let cfg = engines::config(cli.config.as_deref().context("--config missing")?)?;
    let dir = cli.dir.as_deref().context("--dir missing")?;
    mp::worker(role, cfg, dir, &params(cli), cli.mp_seed)
}

/// The past-RAM suite: its own report (docs/bench/pastram/), so it runs alone.
fn pastram_parent(cli: &Cli) -> Result<()> {
    if cli.suites.len() != 1 {
        bail!("the pastram suite runs alone (--suites pastram)");
    }
    let configs = if cli.configs.is_empty() && cli.engines.is_empty() {
        pastram::DEFAULT_CONFIGS
            .iter()
            .map(|id| engines::config(id))
            .filter(|c| c.as_ref().map_or(true, |c| engines::compiled_in(c.engine)))
            .collect::<Result<Vec<_>>>()?
    } else {
        selected_configs(cli)?
            .into_iter()
            .filter(|c| !engines::GROUP_ONLY.contains(&c.id))
            .collect()
    };
    if configs.is_empty() {
        bail!("no configuration selected");
    }
    if !cli.phase_cap.is_finite() || cli.phase_cap <= 0.0 {
        bail!("--phase-cap must be a positive number of seconds");
    }
    pastram::parent(&pastram::Opts {
        records: cli.records.unwrap_or(3_000_000),
        mem_bytes: pastram::parse_size(&cli.cgroup_mem)?,
        cap: Duration::from_secs_f64(cli.phase_cap),
        configs,
        root: cli
            .dir
            .clone()
            .unwrap_or_else(|| workspace_root().join("target/bench-data")),
        out: cli
            .out
            .clone()
            .unwrap_or_else(|| workspace_root().join("docs/bench/pastram")),
        command: command_line(),
    })
}

/// Child mode of the past-RAM suite: one phase of one configuration inside its cgroup.
fn pastram_child(cli: &Cli, phase: &str) -> Result<()> {
    pastram::child(&pastram::ChildArgs {
        phase: pastram::Phase::parse(phase)?,
        cfg: engines::config(cli.config.as_deref().context("--config missing")?)?,
        dir: cli.dir.as_deref().context("--dir missing")?,
        procs: cli
            .cgroup_procs
            .as_deref()
            .context("--cgroup-procs missing")?,
        records: cli.records.context("--records missing")?,
        keys: cli.pastram_keys,
        cap: Duration::from_secs_f64(cli.phase_cap),
        result_file: cli
            .result_file
            .as_deref()
            .context("--result-file missing")?,
    })
}

/// Child mode: run one suite for one configuration and write the figures as JSON.
fn child(cli: &Cli) -> Result<()> {
    let cfg = engines::config(cli.config.as_deref().context("--config missing")?)?;
    let suite_name = cli.suite.as_deref().context("--suite missing")?;
    let suite = Suite::parse(suite_name).context("unknown suite")?;
    let dir = cli.dir.clone().context("--dir missing")?;
    let result_file = cli.result_file.clone().context("--result-file missing")?;
    let p = params(cli);
    let start = Instant::now();
    let mut out = workloads::run(suite, cfg, &dir, &p)?;
    // In the mp suite the work is done by worker processes; this one only loads the data.
    if suite != Suite::Mp {
        let rss = system::peak_rss_bytes();
        out.figures.push(Figure {
            id: "peak_rss".into(),
            label: "peak RSS of the process (VmHWM)".into(),
            unit: Unit::MiB,
            value: rss as f64 / (1u64 << 20) as f64,
            ops: 0,
            secs: 0.0,
        });
    }
    let record = RunRecord {
        config: cfg.id.into(),
        engine: cfg.engine.into(),
        column: cfg.column.into(),
        class: cfg.class,
        suite,
        records: p.records,
        figures: out.figures,
        latencies: out.latencies,
        wall_secs: start.elapsed().as_secs_f64(),
    };
    std::fs::write(&result_file, serde_json::to_vec_pretty(&record)?)?;
    Ok(())
}

fn selected_configs(cli: &Cli) -> Result<Vec<&'static Config>> {
    for e in &cli.engines {
        if !CONFIGS.iter().any(|c| c.engine == e) {
            bail!("unknown engine {e:?}");
        }
    }
    for id in &cli.configs {
        engines::config(id)?;
    }
    Ok(CONFIGS
        .iter()
        .filter(|c| engines::compiled_in(c.engine))
        .filter(|c| cli.engines.is_empty() || cli.engines.iter().any(|e| e == c.engine))
        .filter(|c| cli.configs.is_empty() || cli.configs.iter().any(|id| id == c.id))
        .collect())
}

fn parent(cli: &Cli) -> Result<()> {
    let p = params(cli);
    let root = cli
        .dir
        .clone()
        .unwrap_or_else(|| workspace_root().join("target/bench-data"));
    std::fs::create_dir_all(&root)?;
    let root = std::fs::canonicalize(&root)?;
    if system::is_ram_fs(&root) {
        eprintln!(
            "WARNING: {} is on a RAM file system; flushes cost nothing there and the durable \
             figures mean nothing. Use --dir on a real disk.",
            root.display()
        );
    }
    let out = cli
        .out
        .clone()
        .unwrap_or_else(|| workspace_root().join("docs/bench"));
    let suites: Vec<Suite> = if cli.suites.is_empty() {
        Suite::default_set()
    } else {
        cli.suites
            .iter()
            .map(|s| Suite::parse(s).with_context(|| format!("unknown suite {s:?}")))
            .collect::<Result<_>>()?
    };
    let configs = selected_configs(cli)?;
    if configs.is_empty() {
        bail!("no configuration selected");
    }
    let exe = std::env::current_exe()?;
    if p.group_threads.contains(&0) || !p.group_secs.is_finite() || p.group_secs <= 0.0 {
        bail!("--group-threads must be positive and --group-secs above 0");
    }
    // The dups and mp suites run only on the engines that have the feature they measure; the
    // group suite only on durable configurations, and its own configurations only in it.
    let runs_on = |suite: Suite, cfg: &Config| {
        suite.applies_to(cfg.engine)
            && if suite == Suite::Group {
                engines::in_group_suite(cfg)
            } else {
                !engines::GROUP_ONLY.contains(&cfg.id)
            }
    };
    // The device's flush time, the unit the group suite's latencies are read in.
    let flush = if suites.contains(&Suite::Group) {
        match group::measure_flush(&root, 50) {
            Ok(f) => {
                eprintln!(
                    "device flush (fdatasync of 4 KiB): median {:.0} µs",
                    f.median_us
                );
                Some(f)
            }
            Err(e) => {
                eprintln!("WARNING: could not time the device's flush: {e:#}");
                None
            }
        }
    } else {
        None
    };
    // The capi suite runs once, when Cairn is among the engines (it measures Cairn's C layer).
    let capi = suites.contains(&Suite::Capi) && configs.iter().any(|c| c.engine == "cairn");
    let total = suites
        .iter()
        .map(|&s| configs.iter().filter(|c| runs_on(s, c)).count())
        .sum::<usize>()
        + usize::from(capi);
    let measured = configs
        .iter()
        .filter(|c| suites.iter().any(|&s| runs_on(s, c)))
        .count();
    let start = Instant::now();
    let mut runs = Vec::new();
    let mut failures = Vec::new();
    eprintln!(
        "cairn-bench: set {}, N = {}, {} suites x {} configurations, data in {}",
        cli.set,
        report::group_digits(p.records),
        suites.len(),
        measured,
        root.display()
    );
    // Repeats go round the configurations, one pass after another, so that a change in the
    // machine's speed during the run (2x within minutes here, docs/bench/serve/README.md,
    // session 18) falls on every configuration alike instead of on those that ran during it.
    let jobs: Vec<(Suite, &Config)> = suites
        .iter()
        .flat_map(|&s| {
            configs
                .iter()
                .filter(move |c| runs_on(s, c))
                .map(move |c| (s, *c))
        })
        .collect();
    let passes = cli.repeat.max(1);
    let mut reps: Vec<Vec<RunRecord>> = jobs.iter().map(|_| Vec::new()).collect();
    let mut errors: Vec<Option<String>> = vec![None; jobs.len()];
    for rep in 0..passes {
        for (j, &(suite, cfg)) in jobs.iter().enumerate() {
            if errors[j].is_some() {
                continue;
            }
            eprint!(
                "[{:2}/{total}] pass {}/{passes} {:8} {:15} ",
                j + 1,
                rep + 1,
                suite.id(),
                cfg.id
            );
            let t = Instant::now();
            match spawn_child(&exe, cli, cfg, suite, &root, rep) {
                Ok(r) => {
                    eprintln!("{:6.1} s", t.elapsed().as_secs_f64());
                    reps[j].push(r);
                }
                Err(e) => {
                    let e = format!("{e:#}");
                    eprintln!("FAILED: {e}");
                    errors[j] = Some(e);
                }
            }
        }
    }
    for ((&(suite, cfg), reps), error) in jobs.iter().zip(reps).zip(errors) {
        match error {
            None => runs.push(median(reps)),
            Some(e) => failures.push(Failure {
                config: cfg.id.into(),
                column: cfg.column.into(),
                class: cfg.class,
                suite,
                error: e,
            }),
        }
    }
    let mut done = jobs.len();
    let mut capi_results = None;
    if capi {
        done += 1;
        eprint!(
            "[{done:2}/{total}] {:8} {:15} ",
            Suite::Capi.id(),
            "LMDB/Cairn C"
        );
        let t = Instant::now();
        let rounds = if p.quick { 9 } else { 7 };
        let timeout = Duration::from_secs(cli.timeout);
        match capi::run(&workspace_root(), &root, p.records, rounds, timeout) {
            Ok(c) => {
                eprintln!("{:6.1} s", t.elapsed().as_secs_f64());
                capi_results = Some(c);
            }
            Err(e) => {
                let e = format!("{e:#}");
                eprintln!("FAILED: {e}");
                failures.push(Failure {
                    config: "capi".into(),
                    column: "Cairn".into(),
                    class: engines::ModeClass::NoFlush,
                    suite: Suite::Capi,
                    error: e,
                });
            }
        }
    }
    let _ = std::fs::remove_dir(&root);
    let cairn = if !engines::compiled_in("cairn") {
        "not measured: this binary was built without the `cairn` feature (bench/run.sh turns \
         it off when `cargo check -p cairn` fails, i.e. while the engine does not compile)."
            .to_string()
    } else if failures.iter().any(|f| f.column == "Cairn") {
        "measured, but some runs failed (see Failures).".to_string()
    } else if configs.iter().any(|c| c.engine == "cairn") {
        format!(
            "measured: crates/cairn of this workspace, {}.",
            cairn_revision()
        )
    } else {
        "not selected for this run.".to_string()
    };
    let results = Results {
        set: cli.set.clone(),
        records: p.records,
        repeat: cli.repeat.max(1),
        date: system::now_utc(),
        command: command_line(),
        machine: system::Machine::detect(&root),
        versions: engines::versions()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        cairn,
        configs: configs
            .iter()
            .map(|c| ConfigInfo {
                id: c.id.into(),
                column: c.column.into(),
                class: c.class,
                flags: c.flags.into(),
            })
            .collect(),
        runs,
        failures,
        total_secs: start.elapsed().as_secs_f64(),
        capi: capi_results,
        flush,
    };
    publish(&results, &out, cli.no_plots)?;
    if !results.failures.is_empty() {
        bail!(
            "{} run(s) failed; see {}",
            results.failures.len(),
            out.join("results.md").display()
        );
    }
    Ok(())
}

/// Writes results.json, results.md and the plots, and prints the tables.
fn publish(results: &Results, out: &Path, no_plots: bool) -> Result<()> {
    std::fs::create_dir_all(out)?;
    std::fs::write(
        out.join("results.json"),
        serde_json::to_vec_pretty(results)?,
    )?;
    // A run of the group suite alone gets the group report as its results.md; beside other
    // suites, the group report goes to group.md and the main report leaves the suite out.
    let has_group = results.runs.iter().any(|r| r.suite == Suite::Group);
    let group_only = has_group && results.runs.iter().all(|r| r.suite == Suite::Group);
    if has_group {
        let md = group_report::markdown(results);
        let name = if group_only { "results.md" } else { "group.md" };
        std::fs::write(out.join(name), &md)?;
        println!("{}", group_report::tables(results));
        if !no_plots {
            match group_report::plots(results, out) {
                Ok(files) => eprintln!("wrote {} group plots to {}", files.len(), out.display()),
                Err(e) => eprintln!("WARNING: group plots not drawn: {e:#}"),
            }
        }
    }
    if group_only {
        eprintln!(
            "wrote {} and results.json",
            out.join("results.md").display()
        );
        return Ok(());
    }
    std::fs::write(out.join("results.md"), report::markdown(results))?;
    println!("{}", report::tables(results));
    println!("Cairn vs best: above 1.00x Cairn is better (ops/s: Cairn / best peer; µs, MiB: best peer / Cairn).");
    if !no_plots {
        match plot::write_all(results, out) {
            Ok(files) => eprintln!("wrote {} plots to {}", files.len(), out.display()),
            Err(e) => eprintln!("WARNING: plots not drawn: {e:#}"),
        }
    }
    eprintln!(
        "wrote {} and results.json",
        out.join("results.md").display()
    );
    Ok(())
}

/// The engine's revision, taken when the harness starts (right after run.sh built it): others
/// may commit while a full run goes on, and the report names what was measured.
static CAIRN_REVISION: std::sync::OnceLock<String> = std::sync::OnceLock::new();

fn cairn_revision() -> String {
    CAIRN_REVISION.get_or_init(read_cairn_revision).clone()
}

/// The commit the engine was built from, and whether its sources had uncommitted changes.
fn read_cairn_revision() -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(workspace_root())
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "--short", "HEAD"]) {
        Some(rev) => match git(&["status", "--porcelain", "--", "crates/cairn"]) {
            Some(dirty) if !dirty.is_empty() => {
                format!("commit {rev} plus uncommitted changes to crates/cairn")
            }
            _ => format!("commit {rev}"),
        },
        None => "revision unknown".to_string(),
    }
}

fn command_line() -> String {
    match std::env::var("CAIRN_BENCH_COMMAND") {
        Ok(c) => c,
        Err(_) => {
            let args: Vec<String> = std::env::args().skip(1).collect();
            format!("cairn-bench {}", args.join(" "))
        }
    }
}

/// Where a failed child leaves its error message.
fn error_file(result_file: &Path) -> PathBuf {
    result_file.with_extension("error")
}

/// Runs one child process and reads its record back.
fn spawn_child(
    exe: &Path,
    cli: &Cli,
    cfg: &Config,
    suite: Suite,
    root: &Path,
    rep: u32,
) -> Result<RunRecord> {
    let dir = root.join(format!("{}.{}.{rep}", cfg.id, suite.id()));
    let result_file = root.join(format!("{}.{}.{rep}.json", cfg.id, suite.id()));
    let _ = std::fs::remove_file(&result_file);
    let _ = std::fs::remove_file(error_file(&result_file));
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    std::fs::create_dir_all(&dir)?;
    let p = params(cli);
    let mut child = Command::new(exe)
        .arg(&cli.set)
        .args(["--child", "--config", cfg.id, "--suite", suite.id()])
        .args(["--records", &p.records.to_string()])
        .args(["--group-secs", &p.group_secs.to_string()])
        .args(["--group-threads", &group_threads_arg(p.group_threads)])
        .arg("--dir")
        .arg(&dir)
        .arg("--result-file")
        .arg(&result_file)
        .spawn()
        .context("spawning the child process")?;
    let deadline = Instant::now() + Duration::from_secs(cli.timeout);
    let Some(status) = pastram::wait_until(&mut child, deadline)? else {
        let _ = std::fs::remove_dir_all(&dir);
        bail!("timed out after {} s", cli.timeout);
    };
    let _ = std::fs::remove_dir_all(&dir);
    // Write back what the child left dirty, so that it does not slow the next child's flushes.
    // SAFETY: sync(2) has no preconditions.
    unsafe { libc::sync() };
    if !status.success() {
        match std::fs::read_to_string(error_file(&result_file)) {
            Ok(msg) => {
                let _ = std::fs::remove_file(error_file(&result_file));
                bail!("{msg}");
            }
            Err(_) => bail!("child exited with {status}"),
        }
    }
    let text = std::fs::read_to_string(&result_file).context("reading the child's result")?;
    let _ = std::fs::remove_file(&result_file);
    Ok(serde_json::from_str(&text)?)
}

fn group_threads_arg(threads: &[usize]) -> String {
    let list: Vec<String> = threads.iter().map(|t| t.to_string()).collect();
    list.join(",")
}

/// Combines repeated runs: each figure and latency percentile is the median of the runs.
fn median(mut reps: Vec<RunRecord>) -> RunRecord {
    if reps.len() == 1 {
        return reps.pop().unwrap();
    }
    let mid = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let mut base = reps[0].clone();
    for f in &mut base.figures {
        let values = reps
            .iter()
            .filter_map(|r| r.figure(&f.id))
            .map(|x| x.value)
            .collect();
        f.value = mid(values);
    }
    for l in &mut base.latencies {
        let same: Vec<_> = reps
            .iter()
            .filter_map(|r| r.latencies.iter().find(|x| x.id == l.id))
            .collect();
        l.mean = mid(same.iter().map(|x| x.mean).collect());
        l.p50 = mid(same.iter().map(|x| x.p50).collect());
        l.p90 = mid(same.iter().map(|x| x.p90).collect());
        l.p99 = mid(same.iter().map(|x| x.p99).collect());
        l.p999 = mid(same.iter().map(|x| x.p999).collect());
        l.max = mid(same.iter().map(|x| x.max).collect());
    }
    base.wall_secs = reps.iter().map(|r| r.wall_secs).sum();
    base
}
