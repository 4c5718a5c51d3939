//! The group suite: durable one-put transactions from T threads of one process.
//!
//! For each thread count T the suite opens a fresh database, starts T threads that each commit
//! one-put transactions (16-byte random keys, 100-byte values) for a fixed time, and records
//! the total commit rate, the distribution of every call's latency (from the call to the return
//! of its durable commit) and how evenly the threads were served. Each thread commits through
//! its own [`OnePut`] handle: a plain write transaction for most engines, a connection of its
//! own for SQLite, `Env::write_grouped` for the `cairn-grouped` configuration.
//!
//! The parent process also times the device's flush ([`measure_flush`]) so that latencies can
//! be read as multiples of one flush.

use std::io::Write as _;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Barrier, OnceLock};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use serde::{Deserialize, Serialize};

use crate::engines::{Engine, OnePut};
use crate::workloads::{Figure, Latency, Output, Params, Rng, Scratch, Unit, Values};

/// The thread counts run when none are given.
pub const DEFAULT_THREADS: &[usize] = &[1, 4, 16, 64, 256];
/// How long each thread count runs when not given, seconds.
pub const DEFAULT_SECS: f64 = 3.0;
const KEY_LEN: usize = 16;
const VALUE_LEN: usize = 100;
/// Flushes timed before each run (the parent times 50 once, before the suite).
const FLUSH_SAMPLES_PER_RUN: usize = 20;

/// What one thread did.
struct ThreadRun {
    /// Commits that returned before the deadline.
    in_window: u64,
    /// Latency of every call, nanoseconds, the one that straddled the deadline included (its
    /// caller did wait that long).
    nanos: Vec<u64>,
}

/// The figures of one thread count.
#[derive(Debug)]
pub struct Summary {
    pub threads: usize,
    pub secs: f64,
    pub commits: u64,
    /// Sorted latencies of every call, all threads merged, nanoseconds.
    pub sorted: Vec<u64>,
    /// The thread with the fewest commits in the window: its count and its longest wait (ns).
    pub worst_commits: u64,
    pub worst_max_wait: u64,
    /// Threads that committed nothing within the window.
    pub starved: usize,
}

/// The `q`-quantile of `sorted` (ascending) by the nearest-rank rule: the smallest sample
/// with at least a fraction `q` of the samples at or below it. 0 for no samples.
pub fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (sorted.len() as f64 * q).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The suite: one fresh database per thread count, deleted after it.
pub fn group(s: &mut Scratch, p: &Params, out: &mut Output) -> Result<()> {
    let values = Values::random(VALUE_LEN, 21);
    let window = Duration::from_secs_f64(p.group_secs);
    for &threads in p.group_threads {
        out.phase = "threads";
        let (db, dir) = s.open(&format!("t{threads}"))?;
        // The disk may be shared with other work: the flush time right before the run is the
        // unit its latencies are read in.
        let flush = measure_flush(&dir, FLUSH_SAMPLES_PER_RUN)?;
        let summary = run_threads(&*db, threads, window, &values)
            .with_context(|| format!("{threads} threads"))?;
        s.discard(db, &dir)?;
        record(&summary, out);
        out.figures.push(Figure {
            id: figure_id(threads, "flush"),
            label: format!("{threads} threads: device flush median just before the run"),
            unit: Unit::Micros,
            value: flush.median_us,
            ops: flush.samples as u64,
            secs: 0.0,
        });
    }
    Ok(())
}

/// Runs `threads` threads against `db` for `window`; every handle is opened before the clock
/// starts, and every thread starts at the same instant (two barriers).
fn run_threads(
    db: &dyn Engine,
    threads: usize,
    window: Duration,
    values: &Values,
) -> Result<Summary> {
    let opened = Barrier::new(threads + 1);
    let go = Barrier::new(threads + 1);
    let deadline: OnceLock<Instant> = OnceLock::new();
    let runs: Vec<Result<ThreadRun>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (opened, go, deadline) = (&opened, &go, &deadline);
                scope.spawn(move || {
                    // A handle that fails to open must still pass both barriers, or the others
                    // would wait forever.
                    let writer = db.one_put_writer();
                    opened.wait();
                    go.wait();
                    let deadline = *deadline.get().expect("set before the second barrier");
                    one_thread(writer?, i as u64, deadline, values)
                })
            })
            .collect();
        opened.wait();
        let _ = deadline.set(Instant::now() + window);
        go.wait();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("a writer thread panicked")))
            })
            .collect()
    });
    let runs = runs.into_iter().collect::<Result<Vec<_>>>()?;
    Ok(summarize(threads, window.as_secs_f64(), runs))
}

/// One thread's loop: a new random key per put; stops at the first call that starts after
/// the deadline.
fn one_thread(
    mut writer: Box<dyn OnePut + '_>,
    thread: u64,
    deadline: Instant,
    values: &Values,
) -> Result<ThreadRun> {
    // Seeds differ per thread, so no two threads write the same keys.
    let mut rng = Rng::new(0x6772_6f75_7000 ^ thread.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut run = ThreadRun {
        in_window: 0,
        nanos: Vec::with_capacity(4096),
    };
    let mut key = [0u8; KEY_LEN];
    let mut n = 0u64;
    loop {
        let start = Instant::now();
        if start >= deadline {
            break;
        }
        key[..8].copy_from_slice(&rng.next_u64().to_le_bytes());
        key[8..].copy_from_slice(&rng.next_u64().to_le_bytes());
        writer.put_one(&key, values.get(thread << 32 | n))?;
        let end = Instant::now();
        run.nanos.push(end.duration_since(start).as_nanos() as u64);
        if end <= deadline {
            run.in_window += 1;
        }
        n += 1;
    }
    Ok(run)
}

fn summarize(threads: usize, secs: f64, runs: Vec<ThreadRun>) -> Summary {
    let commits = runs.iter().map(|r| r.in_window).sum();
    let starved = runs.iter().filter(|r| r.in_window == 0).count();
    let max_wait = |r: &ThreadRun| r.nanos.iter().copied().max().unwrap_or(0);
    // The least-served thread; among equals, the one that waited longest.
    let worst = runs
        .iter()
        .min_by_key(|r| (r.in_window, std::cmp::Reverse(max_wait(r))));
    let (worst_commits, worst_max_wait) = worst.map_or((0, 0), |r| (r.in_window, max_wait(r)));
    let mut sorted: Vec<u64> = runs.into_iter().flat_map(|r| r.nanos).collect();
    sorted.sort_unstable();
    Summary {
        threads,
        secs,
        commits,
        sorted,
        worst_commits,
        worst_max_wait,
        starved,
    }
}

/// Figure ids of thread count `t`: `t{t}-{what}`.
pub fn figure_id(threads: usize, what: &str) -> String {
    format!("t{threads}-{what}")
}

fn record(s: &Summary, out: &mut Output) {
    let t = s.threads;
    let us = |ns: u64| ns as f64 / 1e3;
    let mut push = |what: &str, label: String, unit: Unit, value: f64| {
        out.figures.push(Figure {
            id: figure_id(t, what),
            label,
            unit,
            value,
            ops: s.commits,
            secs: if unit == Unit::OpsPerSec { s.secs } else { 0.0 },
        })
    };
    push(
        "commits",
        format!("{t} threads: commits/s"),
        Unit::OpsPerSec,
        s.commits as f64 / s.secs,
    );
    for (what, q) in [("p50", 0.5), ("p99", 0.99), ("p999", 0.999), ("max", 1.0)] {
        push(
            what,
            format!("{t} threads: commit latency {what}"),
            Unit::Micros,
            us(percentile(&s.sorted, q)),
        );
    }
    push(
        "worst-commits",
        format!("{t} threads: commits of the least-served thread"),
        Unit::Count,
        s.worst_commits as f64,
    );
    push(
        "worst-max-wait",
        format!("{t} threads: longest wait of the least-served thread"),
        Unit::Micros,
        us(s.worst_max_wait),
    );
    push(
        "starved",
        format!("{t} threads: threads with no commit"),
        Unit::Count,
        s.starved as f64,
    );
    let n = s.sorted.len() as u64;
    out.latencies.push(Latency {
        id: format!("t{t}"),
        label: format!("{t} threads, one put per durable commit"),
        count: n,
        mean: s.sorted.iter().sum::<u64>() as f64 / n.max(1) as f64 / 1e3,
        p50: us(percentile(&s.sorted, 0.5)),
        p90: us(percentile(&s.sorted, 0.9)),
        p99: us(percentile(&s.sorted, 0.99)),
        p999: us(percentile(&s.sorted, 0.999)),
        max: us(percentile(&s.sorted, 1.0)),
    });
}

/// The device's flush time on the bench directory.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FlushTime {
    pub samples: usize,
    pub median_us: f64,
    pub p10_us: f64,
    pub p90_us: f64,
    pub max_us: f64,
    /// What was timed.
    pub method: String,
}

/// Times `samples` flushes of a small write: a 4 KiB overwrite at offset 0 of a preallocated
/// file, then fdatasync (only the fdatasync is timed; the file's size never changes, so
/// only the data block goes out, plus whatever the file system's journal adds).
pub fn measure_flush(dir: &Path, samples: usize) -> Result<FlushTime> {
    let path = dir.join("flush-probe");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(true)
        .read(true)
        .write(true)
        .open(&path)
        .with_context(|| format!("creating {path:?}"))?;
    let mut block = [0u8; 4096];
    file.write_all(&block)?;
    file.sync_all()?;
    let mut nanos = Vec::with_capacity(samples);
    for i in 0..samples {
        block[..8].copy_from_slice(&(i as u64).to_le_bytes());
        file.write_all_at(&block, 0)?;
        let t = Instant::now();
        file.sync_data()?;
        nanos.push(t.elapsed().as_nanos() as u64);
    }
    drop(file);
    let _ = std::fs::remove_file(&path);
    nanos.sort_unstable();
    let us = |q| percentile(&nanos, q) as f64 / 1e3;
    Ok(FlushTime {
        samples,
        median_us: us(0.5),
        p10_us: us(0.1),
        p90_us: us(0.9),
        max_us: us(1.0),
        method: format!(
            "{samples} x (pwrite of 4 KiB at offset 0 of a preallocated file, then fdatasync; \
             the fdatasync timed)"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        assert_eq!(percentile(&[], 0.5), 0);
        assert_eq!(percentile(&[7], 0.0), 7);
        assert_eq!(percentile(&[7], 0.999), 7);
        let v: Vec<u64> = (1..=1000).collect();
        assert_eq!(percentile(&v, 0.5), 500);
        assert_eq!(percentile(&v, 0.99), 990);
        assert_eq!(percentile(&v, 0.999), 999);
        assert_eq!(percentile(&v, 1.0), 1000);
        // Below one sample's share, the smallest sample.
        assert_eq!(percentile(&v, 0.0001), 1);
        let w = [10, 20, 30, 40];
        assert_eq!(percentile(&w, 0.5), 20);
        assert_eq!(percentile(&w, 0.51), 30);
        assert_eq!(percentile(&w, 0.99), 40);
    }

    #[test]
    fn summary_finds_the_least_served_thread() {
        let runs = vec![
            ThreadRun {
                in_window: 3,
                nanos: vec![5, 6, 7, 8],
            },
            ThreadRun {
                in_window: 0,
                nanos: vec![900],
            },
            ThreadRun {
                in_window: 2,
                nanos: vec![1, 2],
            },
        ];
        let s = summarize(3, 1.0, runs);
        assert_eq!(s.commits, 5);
        assert_eq!(s.starved, 1);
        assert_eq!((s.worst_commits, s.worst_max_wait), (0, 900));
        assert_eq!(s.sorted, vec![1, 2, 5, 6, 7, 8, 900]);
    }
}
