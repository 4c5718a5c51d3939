//! The multi-process suite (engines of `engines::MP_ENGINES`): one database shared by several
//! processes, each opening it with the engine's normal open path.
//!
//! The suite's process loads N db_bench records (16-byte `%016d` keys, 100-byte values, random
//! order, 1000 per transaction), closes the database, then runs two phases, each with worker
//! processes (this binary re-executed with the hidden `--mp-role`):
//! 1. `readrandom`: 2 reader processes, each N gets in random order in one read transaction;
//!    figure: total gets / the slower reader's time.
//! 2. writer + 2 readers for a fixed time: the writer commits transactions of 10 random
//!    overwrites; the readers do 100 random gets per read transaction, a new transaction each
//!    time; figures: writer commits/s and the readers' total gets/s.
//!
//! Start barrier: every worker opens the database, prints `ready`, and waits for one line on
//! its stdin; the suite's process sends `go` to all of them once all are ready, so opening costs
//! are not timed and the workers run at the same time. A worker times itself from `go` to its
//! last operation and prints `done <ops> <secs>`. Every get must find its key (keys are only
//! overwritten), with a 100-byte value; a worker that fails, or does not finish in time, fails
//! the suite with its stderr.

use std::hint::black_box;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};

use crate::engines::{self, Config, Engine, WriteKind};
use crate::workloads::{dec_key, permutation, touch, Output, Params, Rng, Scratch, Values};

/// Overwrites per write transaction of the writer.
const WRITE_BATCH: usize = 10;
/// Gets per read transaction of the readers in the concurrent phase.
const READ_BATCH: u64 = 100;
/// Length of the db_bench values.
const VALUE_LEN: usize = 100;
/// Seed of the value generator (the db_bench suite's).
const VALUE_SEED: u64 = 301;

/// What a worker process does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// N random gets in one read transaction.
    ReadRandom,
    /// Read transactions of `READ_BATCH` random gets, for the phase's duration.
    Reader,
    /// Write transactions of `WRITE_BATCH` random overwrites, for the phase's duration.
    Writer,
}

impl Role {
    pub fn parse(s: &str) -> Result<Role> {
        Ok(match s {
            "readrandom" => Role::ReadRandom,
            "reader" => Role::Reader,
            "writer" => Role::Writer,
            other => bail!("unknown --mp-role {other:?}"),
        })
    }

    fn id(self) -> &'static str {
        match self {
            Role::ReadRandom => "readrandom",
            Role::Reader => "reader",
            Role::Writer => "writer",
        }
    }
}

/// Seconds the concurrent phase lasts.
fn phase_secs(p: &Params) -> f64 {
    if p.quick {
        3.0
    } else {
        10.0
    }
}

pub fn mp(s: &mut Scratch, p: &Params, out: &mut Output) -> Result<()> {
    let n = p.records;
    ensure!(n > 0, "the mp suite needs at least one record");
    ensure!(
        crate::workloads::Suite::Mp.applies_to(s.cfg.engine),
        "{} is not in the mp suite",
        s.cfg.column
    );
    out.phase = "load";
    let dir = s.fresh_dir("mp")?;
    {
        let db = engines::open(s.cfg, &dir).with_context(|| format!("opening {dir:?}"))?;
        let values = Values::compressible(VALUE_LEN, VALUE_SEED);
        let order = permutation(n, 1);
        for chunk in order.chunks(1000) {
            db.write(WriteKind::Blind, &mut |w| {
                for &i in chunk {
                    w.put(&dec_key(u64::from(i)), values.get(u64::from(i)))?;
                }
                Ok(())
            })?;
        }
        db.sync()?;
    }

    out.phase = "mp-readrandom";
    let done = run_workers(
        s.cfg,
        &dir,
        p,
        &[(Role::ReadRandom, 51), (Role::ReadRandom, 52)],
    )?;
    let gets: u64 = done.iter().map(|d| d.ops).sum();
    ensure!(gets == 2 * n, "readers did {gets} gets, expected {}", 2 * n);
    out.rate(
        "mp-readrandom",
        "readrandom, 2 reader processes: N random gets each, one read txn (total gets/s)".into(),
        gets,
        slowest(&done),
    );

    out.phase = "mp-write-read";
    let roles = [(Role::Writer, 61), (Role::Reader, 62), (Role::Reader, 63)];
    let done = run_workers(s.cfg, &dir, p, &roles)?;
    let secs = phase_secs(p);
    out.rate(
        "mp-writer",
        format!(
            "writer process + 2 readers, {secs:.0} s: writer, txns of {WRITE_BATCH} random \
             overwrites (commits/s)"
        ),
        done[0].ops,
        slowest(&done[..1]),
    );
    out.rate(
        "mp-readers",
        format!(
            "writer process + 2 readers, {secs:.0} s: 2 reader processes, read txns of \
             {READ_BATCH} random gets (total gets/s)"
        ),
        done[1].ops + done[2].ops,
        slowest(&done[1..]),
    );
    std::fs::remove_dir_all(&dir).with_context(|| format!("removing {dir:?}"))
}

/// What a worker reported.
struct Done {
    ops: u64,
    secs: f64,
}

fn slowest(done: &[Done]) -> Duration {
    Duration::from_secs_f64(done.iter().map(|d| d.secs).fold(0.0, f64::max))
}

/// A worker process and the threads draining its pipes.
struct Worker {
    role: Role,
    child: Child,
    stdin: Option<ChildStdin>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Worker {
    /// Kills the process (if still running) and returns what it wrote to stderr.
    fn kill(&mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stdin = None;
        self.stderr
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default()
            .trim()
            .to_string()
    }
}

/// Kills every worker, and names the one that failed with its stderr.
fn fail(workers: &mut [Worker], index: usize, what: String) -> anyhow::Error {
    let mut errs: Vec<String> = workers.iter_mut().map(Worker::kill).collect();
    let err = std::mem::take(&mut errs[index]);
    let role = workers[index].role.id();
    if err.is_empty() {
        anyhow::anyhow!("{role} process {index}: {what}")
    } else {
        anyhow::anyhow!("{role} process {index}: {what}: {err}")
    }
}

/// Starts one worker per role (with its seed), releases them together once all have opened
/// the database, and collects what each reports, in the order of `roles`.
fn run_workers(cfg: &Config, dir: &Path, p: &Params, roles: &[(Role, u64)]) -> Result<Vec<Done>> {
    let exe = std::env::current_exe()?;
    let (tx, rx) = mpsc::channel::<(usize, Option<String>)>();
    let mut workers = Vec::new();
    for (index, &(role, seed)) in roles.iter().enumerate() {
        let spawned = Command::new(&exe)
            .arg(if p.quick { "quick" } else { "full" })
            .args(["--mp-role", role.id(), "--config", cfg.id])
            .args(["--records", &p.records.to_string()])
            .args(["--mp-seed", &seed.to_string()])
            .arg("--dir")
            .arg(dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("spawning a {} process", role.id()));
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) => {
                workers.iter_mut().for_each(|w: &mut Worker| {
                    w.kill();
                });
                return Err(e);
            }
        };
        let stdout = child.stdout.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        let tx = tx.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(l) => {
                        let _ = tx.send((index, Some(l)));
                    }
                    Err(_) => break,
                }
            }
            let _ = tx.send((index, None));
        });
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = stderr.read_to_string(&mut s);
            s
        });
        workers.push(Worker {
            role,
            stdin: child.stdin.take(),
            child,
            stderr: Some(stderr),
        });
    }
    drop(tx);
    // Generous limits: the machine may be shared, and the figures are timed by the workers.
    let open_limit = Duration::from_secs(120);
    let run_limit = Duration::from_secs_f64(120.0 + phase_secs(p) + p.records as f64 / 10_000.0);

    let mut ready = vec![false; workers.len()];
    let deadline = Instant::now() + open_limit;
    while ready.iter().any(|r| !r) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((i, Some(line))) if line == "ready" => ready[i] = true,
            Ok((i, Some(line))) => {
                return Err(fail(&mut workers, i, format!("unexpected output {line:?}")))
            }
            Ok((i, None)) => return Err(fail(&mut workers, i, "exited before ready".into())),
            Err(_) => {
                let i = ready.iter().position(|r| !r).unwrap();
                let what = format!("not ready after {} s", open_limit.as_secs());
                return Err(fail(&mut workers, i, what));
            }
        }
    }
    for i in 0..workers.len() {
        let sent = workers[i]
            .stdin
            .as_mut()
            .map(|s| s.write_all(b"go\n").and_then(|()| s.flush()));
        if let Some(Err(e)) = sent {
            return Err(fail(&mut workers, i, format!("cannot send go: {e}")));
        }
    }

    let mut done: Vec<Option<Done>> = roles.iter().map(|_| None).collect();
    let deadline = Instant::now() + run_limit;
    while done.iter().any(Option::is_none) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((i, Some(line))) => match parse_done(&line) {
                Some(d) => done[i] = Some(d),
                None => return Err(fail(&mut workers, i, format!("unexpected output {line:?}"))),
            },
            Ok((i, None)) if done[i].is_none() => {
                return Err(fail(&mut workers, i, "exited without a result".into()))
            }
            Ok(_) => {}
            Err(_) => {
                let i = done.iter().position(Option::is_none).unwrap();
                let what = format!("no result after {} s", run_limit.as_secs());
                return Err(fail(&mut workers, i, what));
            }
        }
    }
    for i in 0..workers.len() {
        workers[i].stdin = None;
        let status = workers[i].child.wait()?;
        if !status.success() {
            return Err(fail(&mut workers, i, format!("exited with {status}")));
        }
    }
    Ok(done.into_iter().map(Option::unwrap).collect())
}

fn parse_done(line: &str) -> Option<Done> {
    let mut words = line.split(' ');
    if words.next()? != "done" {
        return None;
    }
    let ops = words.next()?.parse().ok()?;
    let secs = words.next()?.parse().ok()?;
    words.next().is_none().then_some(Done { ops, secs })
}

/// Worker mode: opens the database of `cfg` in `dir`, waits for the start signal on stdin, runs
/// `role`, and prints `done <ops> <secs>`.
pub fn worker(role: Role, cfg: &Config, dir: &Path, p: &Params, seed: u64) -> Result<()> {
    // Die with the suite's process (it may be killed by the harness's timeout): an orphaned
    // worker would hold the database open and keep running.
    // SAFETY: prctl(PR_SET_PDEATHSIG) only sets a flag of this process.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    let n = p.records;
    let db = engines::open(cfg, dir).with_context(|| format!("opening {dir:?}"))?;
    let values = Values::compressible(VALUE_LEN, VALUE_SEED);
    let order = match role {
        Role::ReadRandom => permutation(n, seed),
        Role::Reader | Role::Writer => Vec::new(),
    };
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "ready")?;
    stdout.flush()?;
    let mut go = String::new();
    std::io::stdin().lock().read_line(&mut go)?;
    ensure!(go.trim() == "go", "expected go on stdin, got {go:?}");

    let limit = Duration::from_secs_f64(phase_secs(p));
    let mut rng = Rng::new(seed);
    let mut sum = 0u64;
    let t = Instant::now();
    let ops = match role {
        Role::ReadRandom => {
            let mut found = 0;
            db.read(&mut |r| {
                for &i in &order {
                    found += get_checked(r, u64::from(i), &mut sum)?;
                }
                Ok(())
            })?;
            found
        }
        Role::Reader => {
            let mut gets = 0;
            while t.elapsed() < limit {
                db.read(&mut |r| {
                    for _ in 0..READ_BATCH {
                        gets += get_checked(r, rng.below(n), &mut sum)?;
                    }
                    Ok(())
                })?;
            }
            gets
        }
        Role::Writer => write_loop(&*db, n, &values, &mut rng, limit, t)?,
    };
    let secs = t.elapsed().as_secs_f64();
    black_box(sum);
    writeln!(stdout, "done {ops} {secs}")?;
    stdout.flush()?;
    Ok(())
}

/// One get of record `i`, which must exist with a value of `VALUE_LEN` bytes; returns 1.
fn get_checked(r: &dyn engines::ReadTxn, i: u64, sum: &mut u64) -> Result<u64> {
    let mut len = 0;
    let found = r.get(&dec_key(i), &mut |v| {
        len = v.len();
        touch(sum, v);
    })?;
    ensure!(found, "record {i} not found");
    ensure!(len == VALUE_LEN, "record {i} has a {len}-byte value");
    Ok(1)
}

/// Commits transactions of `WRITE_BATCH` random overwrites until `limit` has passed since `t`;
/// returns how many were committed.
fn write_loop(
    db: &dyn Engine,
    n: u64,
    values: &Values,
    rng: &mut Rng,
    limit: Duration,
    t: Instant,
) -> Result<u64> {
    let mut commits = 0;
    while t.elapsed() < limit {
        db.write(WriteKind::Blind, &mut |w| {
            for _ in 0..WRITE_BATCH {
                let i = rng.below(n);
                w.put(&dec_key(i), values.get(rng.next_u64()))?;
            }
            Ok(())
        })?;
        commits += 1;
    }
    Ok(commits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roles_round_trip() {
        for role in [Role::ReadRandom, Role::Reader, Role::Writer] {
            assert_eq!(Role::parse(role.id()).unwrap(), role);
        }
        assert!(Role::parse("scanner").is_err());
    }

    #[test]
    fn done_lines() {
        let d = parse_done("done 400000 1.25").unwrap();
        assert_eq!(d.ops, 400_000);
        assert_eq!(d.secs, 1.25);
        for bad in [
            "ready",
            "done",
            "done 5",
            "done x 1.0",
            "done 5 1.0 7",
            "Done 5 1.0",
        ] {
            assert!(parse_done(bad).is_none(), "{bad:?} accepted");
        }
    }

    #[test]
    fn slowest_worker_sets_the_time() {
        let done = [Done { ops: 1, secs: 0.5 }, Done { ops: 1, secs: 2.0 }];
        assert_eq!(slowest(&done), Duration::from_secs(2));
    }
}
