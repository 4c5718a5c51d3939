//! Real crashes of grouped writers: a child process runs 8 threads of `Env::write_grouped`
//! and is SIGKILLed, at a random moment by this process or by itself at a failpoint of the
//! commit protocol (`CAIRN_FAILPOINT`, the test-only `failpoints` feature), again and again.
//!
//! Closure `(round, t, i)` puts `r-t-i-a` and `r-t-i-b`; one in eight returns an error instead
//! (after its puts). The child prints `ack r t i` once a call returned Ok and `fail r t i`
//! once it returned the closure's error; the pipe is exact across the kill. After each kill
//! this process reopens the environment (recovery), runs the checker and requires: every
//! acknowledged closure present, every failed one absent, none half there, no stray key.
//! Durable and lazy mode alternate (a process crash keeps the page cache: lazy commits stay).
//! `CAIRN_GROUP_KILLS` sets the number of kills (default 16). Also two processes of grouped
//! writers on one environment at once, both run to the end and checked.

use cairn::failpoint::VAR;
use cairn::storage::SimRng;
use cairn::{Durability, Env, Error, PutFlags};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const THREADS: u32 = 8;

fn key(round: u32, t: u32, i: u32, half: &str) -> Vec<u8> {
    format!("{round:04}-{t:02}-{i:06}-{half}").into_bytes()
}

fn value(round: u32, t: u32, i: u32) -> Vec<u8> {
    let mut v = format!("{round}/{t}/{i}").into_bytes();
    v.resize(16 + ((round + t * 7 + i) % 300) as usize, b'.');
    v
}

fn fails(round: u32, t: u32, i: u32) -> bool {
    (round ^ t.wrapping_mul(31) ^ i.wrapping_mul(17)) % 8 == 3
}

fn open(dir: &Path, lazy: bool) -> Env {
    let mode = if lazy {
        Durability::Lazy
    } else {
        Durability::Durable
    };
    Env::options().durability(mode).open(dir).unwrap()
}

/// This test binary re-run as the child of `round` (stdout and stderr piped).
fn child(dir: &Path, round: u32, lazy: bool) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "child_entry",
        "--exact",
        "--ignored",
        "--nocapture",
        "--quiet",
    ])
    .env("CAIRN_GK_DIR", dir)
    .env("CAIRN_GK_ROUND", round.to_string())
    .env("CAIRN_GK_MODE", if lazy { "lazy" } else { "durable" })
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    cmd
}

/// A child's `ack r t i` / `fail r t i` line as ((r, t, i), acknowledged); None for the test
/// harness's own lines.
fn parse_told(line: &str) -> Option<((u32, u32, u32), bool)> {
    let w: Vec<&str> = line.split_whitespace().collect();
    let acked = match w.first() {
        Some(&"ack") => true,
        Some(&"fail") => false,
        _ => return None,
    };
    let n = |k: usize| w[k].parse::<u32>().unwrap();
    Some(((n(1), n(2), n(3)), acked))
}

/// The child: writes until killed (or a bound of closures per thread).
#[test]
#[ignore = "run by grouped_writers_killed in a child process"]
fn child_entry() {
    let Ok(dir) = std::env::var("CAIRN_GK_DIR") else {
        return;
    };
    let round: u32 = std::env::var("CAIRN_GK_ROUND").unwrap().parse().unwrap();
    let lazy = std::env::var("CAIRN_GK_MODE").unwrap() == "lazy";
    let limit: u32 = std::env::var("CAIRN_GK_LIMIT")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_000);
    let env = open(Path::new(&dir), lazy);
    let db = env.main_db();
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let env = &env;
            s.spawn(move || {
                for i in 0..limit {
                    let fail = fails(round, t, i);
                    let r = env.write_grouped(|txn| {
                        let v = value(round, t, i);
                        txn.put(db, &key(round, t, i, "a"), &v, PutFlags::empty())?;
                        txn.put(db, &key(round, t, i, "b"), &v, PutFlags::empty())?;
                        if fail {
                            return Err(Error::Invalid("refused".into()));
                        }
                        Ok(())
                    });
                    let word = match (r, fail) {
                        (Ok(()), false) => "ack",
                        (Err(Error::Invalid(_)), true) => "fail",
                        (r, _) => panic!("closure {t}/{i}: {r:?}"),
                    };
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "{word} {round} {t} {i}").unwrap();
                    out.flush().unwrap();
                }
            });
        }
    });
}

#[test]
fn grouped_writers_killed() {
    let kills: u32 = std::env::var("CAIRN_GROUP_KILLS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16);
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    println!("grouped_writers_killed: {kills} kills, seed {seed}");
    let mut rng = SimRng::new(seed);
    let dir = tempfile::tempdir().unwrap();
    // (round, t, i) -> acknowledged (true) or failed (false).
    let mut told: BTreeMap<(u32, u32, u32), bool> = BTreeMap::new();
    let points = [
        "commit.mid_write_pages",
        "commit.after_write_pages",
        "commit.after_data_sync",
        "commit.after_meta_write",
        "commit.after_meta_sync",
        "commit.after_publish",
    ];
    let (mut by_point, mut acked_total) = (0, 0);
    for round in 0..kills {
        let lazy = round % 2 == 1;
        let mut cmd = child(dir.path(), round, lazy);
        let at_point = rng.below(2) == 0;
        if at_point {
            let p = points[rng.below(points.len() as u64) as usize];
            cmd.env(VAR, format!("{p}:{}", 1 + rng.below(8)));
        }
        let mut child = cmd.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let lines = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .collect::<Vec<_>>()
        });
        let deadline = Instant::now() + Duration::from_millis(50 + rng.below(400));
        let mut self_killed = false;
        while Instant::now() < deadline {
            if child.try_wait().unwrap().is_some() {
                self_killed = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        if !self_killed {
            child.kill().unwrap();
        }
        let status = child.wait().unwrap();
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            status.signal(),
            Some(9),
            "round {round}: the child ended otherwise ({status}): {err}"
        );
        by_point += usize::from(err.contains("cairn failpoint"));
        for l in lines.join().unwrap() {
            if let Some((key, acked)) = parse_told(&l) {
                told.insert(key, acked);
                acked_total += usize::from(acked);
            }
        }
        check(dir.path(), lazy, &told, round);
    }
    println!(
        "grouped_writers_killed: {kills} kills ({by_point} at failpoints), {acked_total} \
         acknowledged closures, all present"
    );
    assert!(acked_total > 0, "no closure was ever acknowledged");
}

/// Reopens (recovering) and compares with what the children were told.
fn check(dir: &Path, lazy: bool, told: &BTreeMap<(u32, u32, u32), bool>, round: u32) {
    let env = open(dir, lazy);
    let r = env.read_txn().unwrap();
    let rep = r.check().unwrap();
    assert!(rep.is_ok(), "round {round}: checker: {:?}", rep.problems);
    let db = env.main_db();
    let mut seen = 0u64;
    for item in r.iter(db).unwrap() {
        let (k, v) = item.unwrap();
        let s = std::str::from_utf8(k).unwrap();
        let p: Vec<&str> = s.split('-').collect();
        let (kr, kt, ki) = (
            p[0].parse::<u32>().unwrap(),
            p[1].parse::<u32>().unwrap(),
            p[2].parse::<u32>().unwrap(),
        );
        assert_eq!(v, &value(kr, kt, ki)[..], "round {round}: {s}: value");
        assert!(
            !fails(kr, kt, ki),
            "round {round}: {s} belongs to a failed closure"
        );
        let other = if p[3] == "a" { "b" } else { "a" };
        assert!(
            r.get(db, &key(kr, kt, ki, other)).unwrap().is_some(),
            "round {round}: {s} is half of a closure"
        );
        seen += 1;
    }
    for (&(kr, kt, ki), &acked) in told {
        if acked {
            assert!(
                r.get(db, &key(kr, kt, ki, "a")).unwrap().is_some(),
                "round {round}: closure {kr}/{kt}/{ki} was acknowledged and is lost"
            );
        }
    }
    assert_eq!(seen % 2, 0);
}

/// Two processes of grouped writers on one environment at once (each groups its own threads;
/// their groups take turns at the shared writer lock): every closure acknowledged by either is
/// there after both exit, none that failed, none half; the checker is clean.
#[test]
fn two_processes_of_grouped_writers() {
    let dir = tempfile::tempdir().unwrap();
    for lazy in [false, true] {
        let children: Vec<_> = [1000u32, 1001]
            .iter()
            .map(|&round| {
                child(dir.path(), round + u32::from(lazy) * 10, lazy)
                    .env("CAIRN_GK_LIMIT", "150")
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut told = BTreeMap::new();
        for child in children {
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "a grouped writer process failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            for l in String::from_utf8_lossy(&out.stdout).lines() {
                told.extend(parse_told(l));
            }
        }
        assert_eq!(
            told.len(),
            2 * THREADS as usize * 150,
            "every call was answered"
        );
        check(dir.path(), lazy, &told, 1000);
    }
}
