//! `cairn` beside other processes using the same environment: hot copies while this process
//! keeps committing, and the reader table with a live and then a killed reader.

mod common;

use cairn::{Env, PutFlags};
use common::*;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn hot_copy_while_another_process_commits() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let env = Env::open(&src).unwrap();
    let db = env.main_db();
    let stop = AtomicBool::new(false);
    let commits = std::thread::scope(|sc| {
        let writer = sc.spawn(|| {
            // Invariant of every commit: "count" equals the number of other keys.
            let mut n = 0u64;
            let mut commits = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let mut w = env.write_txn().unwrap();
                for _ in 0..100 {
                    let k = format!("k{n:08}");
                    w.put(db, k.as_bytes(), &[7u8; 300], PutFlags::empty())
                        .unwrap();
                    n += 1;
                }
                w.put(db, b"count", &n.to_le_bytes(), PutFlags::empty())
                    .unwrap();
                w.commit().unwrap();
                commits += 1;
            }
            commits
        });
        std::thread::sleep(Duration::from_millis(300));
        for (i, compact) in [false, true, false, true].into_iter().enumerate() {
            let dst = dir.path().join(format!("copy{i}"));
            let mut args = vec!["copy"];
            if compact {
                args.push("-c");
            }
            args.extend([s(&src), s(&dst)]);
            ok(&args, b"");
            ok(&["check", s(&dst)], b"");
            let c = read(&dst);
            let recs = &c[&None].1;
            let count = recs
                .iter()
                .find(|(k, _)| k == b"count")
                .map(|(_, v)| u64::from_le_bytes(v[..].try_into().unwrap()))
                .expect("a commit happened before the copy");
            assert_eq!(count + 1, recs.len() as u64, "copy {i} mixes commits");
        }
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap()
    });
    assert!(commits > 4, "the writer kept writing ({commits} commits)");
}

fn readers_json(path: &Path, check: bool) -> serde_json::Value {
    let mut args = vec!["readers", "--json"];
    if check {
        args.push("--check");
    }
    args.push(s(path));
    serde_json::from_slice(&ok(&args, b"")).unwrap()
}

fn active_pids(v: &serde_json::Value) -> Vec<u64> {
    v["slots"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| !r["txnid"].is_null())
        .map(|r| r["pid"].as_u64().unwrap())
        .collect()
}

#[test]
fn readers_of_other_processes_listed_and_dead_ones_cleared() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = Contents::new();
    c.insert(
        None,
        (
            0,
            (0..4000u32)
                .map(|i| (i.to_be_bytes().to_vec(), vec![1u8; 500]))
                .collect(),
        ),
    );
    build(dir.path(), &c);
    // This process keeps the environment open, so the table outlives the other processes (the
    // first process to open an environment starts a fresh table).
    let env = Env::open(dir.path()).unwrap();
    // A dump whose output nobody reads blocks on the full pipe holding its read transaction.
    let mut child = {
        Command::new(env!("CARGO_BIN_EXE_cairn"))
            .args(["dump", s(dir.path())])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    };
    let pid = u64::from(child.id());
    let t0 = Instant::now();
    while !active_pids(&readers_json(dir.path(), false)).contains(&pid) {
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "the dump's reader never showed"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let text = String::from_utf8(ok(&["stat", "-r", s(dir.path())], b"")).unwrap();
    assert!(
        text.starts_with("Reader Table Status\n    pid     thread     txnid\n"),
        "{text}"
    );
    assert!(text.contains(&format!("{pid:10} ")), "{text}");
    // Killed mid-read, it leaves its slots (the busy one and any idle one it owns) behind until
    // a check clears them.
    let owned = readers_json(dir.path(), false)["slots"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["pid"] == pid)
        .count();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(active_pids(&readers_json(dir.path(), false)).contains(&pid));
    let v = readers_json(dir.path(), true);
    assert_eq!(v["stale_cleared"], owned, "{v}");
    assert!(
        v["slots"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["pid"] != pid),
        "{v}"
    );
    let text = String::from_utf8(ok(&["stat", "-rr", s(dir.path())], b"")).unwrap();
    assert!(text.contains("  0 stale readers cleared.\n"), "{text}");
    drop(env);
}
