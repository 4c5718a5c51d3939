//! Many processes, one database: real child processes (this test binary re-run with a role in
//! `CAIRN_CHILD`), some killed with SIGKILL while writing, committing or reading. The survivors
//! go on, nothing acknowledged is lost, the checker passes, dead readers stop pinning pages.
//! `CAIRN_MP_ROUNDS` sets the number of kill rounds (default 12).

use cairn::{Durability, Env, Error, PutFlags};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `role` in a child process over the environment at `dir`.
fn spawn(role: &str, dir: &Path, arg: &str) -> Child {
    Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_entry",
            "--ignored",
            "--nocapture",
            "--quiet",
        ])
        .env("CAIRN_CHILD", role)
        .env("CAIRN_DIR", dir)
        .env("CAIRN_ARG", arg)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawning a child process")
}

/// Reads the child's stdout lines until one starts with `prefix`; returns it.
fn wait_line(lines: &mut impl Iterator<Item = String>, prefix: &str) -> String {
    for l in lines.by_ref() {
        if l.starts_with(prefix) {
            return l;
        }
    }
    panic!("child ended before printing {prefix:?}");
}

fn kill(child: &mut Child) {
    // SAFETY: plain kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as libc::pid_t, libc::SIGKILL);
    }
    let _ = child.wait();
}

fn check(env: &Env) {
    let r = env.read_txn().unwrap();
    let rep = r.check().unwrap();
    assert!(rep.is_ok(), "checker: {:?}", rep.problems);
}

fn key(p: u64, n: u64) -> Vec<u8> {
    format!("p{p:02}-{n:06}").into_bytes()
}

/// Every snapshot must satisfy: the "count" key equals the number of data keys.
fn verify_snapshot(env: &Env) -> u64 {
    let r = env.read_txn().unwrap();
    let db = env.main_db();
    let count = r
        .get(db, b"count")
        .unwrap()
        .map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
    let n = r
        .iter(db)
        .unwrap()
        .map(Result::unwrap)
        .filter(|(k, _)| k.starts_with(b"p"))
        .count() as u64;
    assert_eq!(count, n, "snapshot {} is inconsistent", r.id());
    count
}

fn bump(w: &mut cairn::RwTxn<'_>, db: cairn::Database, by: u64) {
    let c = w
        .get(db, b"count")
        .unwrap()
        .map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
    w.put(db, b"count", &(c + by).to_le_bytes(), PutFlags::empty())
        .unwrap();
}

/// Logged writers in two processes append to one commit log (each finds the tail past the
/// other's records). A power loss that takes every page written since the last flush is
/// staged by putting back the data file saved at that flush: the first open replays both
/// processes' commits, in commit order.
#[test]
fn logged_writers_in_two_processes_survive_a_staged_power_loss() {
    let dir = tempfile::tempdir().unwrap();
    {
        let env = Env::open(dir.path()).unwrap();
        let mut w = env.write_txn().unwrap();
        bump(&mut w, env.main_db(), 0);
        w.commit().unwrap();
    }
    let saved = std::fs::read(dir.path().join("data.cairn")).unwrap();
    let mut kids: Vec<Child> = (0..2)
        .map(|p| spawn("writer-logged", dir.path(), &p.to_string()))
        .collect();
    for k in &mut kids {
        let out = k.stdout.take().unwrap();
        let mut lines = BufReader::new(out).lines().map(Result::unwrap);
        wait_line(&mut lines, "done");
        assert!(k.wait().unwrap().success());
    }
    let log = std::fs::read(dir.path().join("data.cairn-log")).unwrap();
    assert!(log.starts_with(b"CLG1"), "no record in the log");
    std::fs::write(dir.path().join("data.cairn"), &saved).unwrap();
    std::fs::remove_file(dir.path().join("lock.cairn")).unwrap();
    let env = Env::open(dir.path()).unwrap();
    assert_eq!(verify_snapshot(&env), 400);
    check(&env);
    let r = env.read_txn().unwrap();
    for p in 0..2 {
        for n in 0..200 {
            assert!(r.get(env.main_db(), &key(p, n)).unwrap().is_some());
        }
    }
}

/// Child roles.
#[test]
#[ignore = "run by the other tests in a child process"]
fn child_entry() {
    let Ok(role) = std::env::var("CAIRN_CHILD") else {
        return;
    };
    let dir = std::env::var("CAIRN_DIR").unwrap();
    let arg: u64 = std::env::var("CAIRN_ARG").unwrap().parse().unwrap_or(0);
    let durability = if role.ends_with("-lazy") {
        Durability::Lazy
    } else if role.ends_with("-logged") {
        Durability::Logged
    } else {
        Durability::Durable
    };
    let mut opts = Env::options().durability(durability);
    if durability == Durability::Logged {
        opts = opts.sync_every(None); // the staged power loss needs every commit in the log
    }
    let env = opts.open(&dir).unwrap();
    let db = env.main_db();
    match role.trim_end_matches("-lazy").trim_end_matches("-logged") {
        // Writes 200 keys of its own (arg = process number) in small transactions while two
        // threads check snapshots.
        "writer" => {
            std::thread::scope(|s| {
                for _ in 0..2 {
                    s.spawn(|| {
                        for _ in 0..50 {
                            verify_snapshot(&env);
                        }
                    });
                }
                for n in 0..200 {
                    let mut w = env.write_txn().unwrap();
                    w.put(db, &key(arg, n), &n.to_le_bytes(), PutFlags::empty())
                        .unwrap();
                    bump(&mut w, db, 1);
                    w.commit().unwrap();
                }
            });
            println!("done");
            if durability == Durability::Logged {
                // A crash after the last commit: no closing flush (the commits are in the
                // log, and in this boot's page cache).
                std::process::exit(0);
            }
        }
        // Commits forever, printing each acknowledged commit.
        "committer" => {
            for n in 0.. {
                let mut w = env.write_txn().unwrap();
                for i in 0..1 + n % 7 {
                    let v = vec![n as u8; if i == 0 { 5000 } else { 100 }];
                    w.put(db, &key(arg, n * 10 + i), &v, PutFlags::empty())
                        .unwrap();
                }
                bump(&mut w, db, 1 + n % 7);
                w.commit().unwrap();
                println!("acked {n}");
            }
        }
        // Holds the writer lock with an uncommitted change.
        "hold-writer" => {
            let mut w = env.write_txn().unwrap();
            w.put(db, b"p99-uncommitted", b"x", PutFlags::empty())
                .unwrap();
            bump(&mut w, db, 1);
            println!("holding");
            std::thread::sleep(Duration::from_secs(600));
        }
        // Holds a read snapshot.
        "hold-reader" => {
            let r = env.read_txn().unwrap();
            println!("reading {}", r.id());
            std::thread::sleep(Duration::from_secs(600));
            drop(r);
        }
        other => panic!("unknown role {other}"),
    }
}

fn new_env(dir: &Path) -> Env {
    let env = Env::open(dir).unwrap();
    let mut w = env.write_txn().unwrap();
    bump(&mut w, env.main_db(), 0);
    w.commit().unwrap();
    env
}

#[test]
fn processes_and_threads_share_one_database() {
    let dir = tempfile::tempdir().unwrap();
    let env = new_env(dir.path());
    let roles = ["writer", "writer-lazy", "writer"];
    let mut kids: Vec<Child> = roles
        .iter()
        .enumerate()
        .map(|(i, r)| spawn(r, dir.path(), &i.to_string()))
        .collect();
    // This process writes too, meanwhile.
    let db = env.main_db();
    for n in 0..100 {
        let mut w = env.write_txn().unwrap();
        w.put(db, &key(50, n), b"parent", PutFlags::empty())
            .unwrap();
        bump(&mut w, db, 1);
        w.commit().unwrap();
        if n % 10 == 0 {
            verify_snapshot(&env);
        }
    }
    for k in &mut kids {
        let out = k.wait_with_output_lines();
        assert!(out.contains("done"), "a child failed");
    }
    assert_eq!(verify_snapshot(&env), 3 * 200 + 100);
    let r = env.read_txn().unwrap();
    for p in 0..3 {
        for n in 0..200 {
            assert_eq!(r.get(db, &key(p, n)).unwrap(), Some(&n.to_le_bytes()[..]));
        }
    }
    drop(r);
    check(&env);
}

trait Lines {
    fn wait_with_output_lines(&mut self) -> String;
}
impl Lines for Child {
    fn wait_with_output_lines(&mut self) -> String {
        let out = self.stdout.take().unwrap();
        let text: Vec<String> = BufReader::new(out).lines().map_while(Result::ok).collect();
        let st = self.wait().unwrap();
        assert!(st.success(), "child exited with {st}");
        text.join("\n")
    }
}

#[test]
fn a_killed_writer_never_blocks_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let env = new_env(dir.path());
    let mut kid = spawn("hold-writer", dir.path(), "0");
    let mut lines = BufReader::new(kid.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok);
    wait_line(&mut lines, "holding");
    // While the child holds the writer lock, a write transaction here waits.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        s.spawn(|| {
            let w = env.write_txn().unwrap();
            tx.send(Instant::now()).unwrap();
            drop(w);
        });
        assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
        let killed = Instant::now();
        kill(&mut kid);
        let got = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("writer lock freed");
        assert!(got >= killed);
    });
    let r = env.read_txn().unwrap();
    assert_eq!(r.get(env.main_db(), b"p99-uncommitted").unwrap(), None);
    drop(r);
    verify_snapshot(&env);
    check(&env);
}

#[test]
fn killed_mid_commit_loses_nothing_acknowledged() {
    let rounds: u64 = std::env::var("CAIRN_MP_ROUNDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(12);
    let dir = tempfile::tempdir().unwrap();
    drop(new_env(dir.path()));
    let mut seed = 0x9E37_79B9_7F4A_7C15u64 ^ u64::from(std::process::id());
    for round in 0..rounds {
        let role = if round % 2 == 0 {
            "committer"
        } else {
            "committer-lazy"
        };
        let mut kid = spawn(role, dir.path(), &round.to_string());
        let mut lines = BufReader::new(kid.stdout.take().unwrap())
            .lines()
            .map_while(Result::ok);
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let wait = 5 + seed % 120;
        let mut acked = None;
        let until = Instant::now() + Duration::from_millis(wait);
        // Read acknowledgements until the deadline, then kill at once.
        while Instant::now() < until {
            match lines.next() {
                Some(l) if l.starts_with("acked ") => acked = Some(l[6..].parse::<u64>().unwrap()),
                Some(_) => {}
                None => panic!("committer died by itself"),
            }
        }
        kill(&mut kid);
        // Lines already printed were acknowledged before the kill.
        for l in lines {
            if let Some(n) = l.strip_prefix("acked ") {
                acked = Some(n.parse().unwrap());
            }
        }
        let env = Env::open(dir.path()).unwrap();
        verify_snapshot(&env);
        if let Some(n) = acked {
            let r = env.read_txn().unwrap();
            for m in [0, n] {
                let k = key(round, m * 10);
                assert!(
                    r.get(env.main_db(), &k).unwrap().is_some(),
                    "round {round}: acknowledged commit {m} lost"
                );
            }
        }
        check(&env);
    }
}

#[test]
fn dead_readers_are_reaped_and_stop_pinning() {
    let dir = tempfile::tempdir().unwrap();
    let env = new_env(dir.path());
    let db = env.main_db();
    let mut kid = spawn("hold-reader", dir.path(), "0");
    let mut lines = BufReader::new(kid.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok);
    wait_line(&mut lines, "reading");
    let pid = kid.id();
    assert!(env
        .readers()
        .iter()
        .any(|r| r.pid == pid && r.txnid.is_some()));
    kill(&mut kid);
    // The dead reader's slot is still there until someone looks.
    assert!(env.readers().iter().any(|r| r.pid == pid));
    // The writer reaps it by itself once it pins an old snapshot: overwriting the same keys
    // must then reuse pages instead of growing the file.
    let v = vec![7u8; 1000];
    for n in 0..400u64 {
        let mut w = env.write_txn().unwrap();
        for i in 0..20u64 {
            w.put(db, &key(1, i), &v, PutFlags::empty()).unwrap();
        }
        w.put(db, b"n", &n.to_le_bytes(), PutFlags::empty())
            .unwrap();
        w.commit().unwrap();
    }
    assert!(
        !env.readers().iter().any(|r| r.pid == pid),
        "dead reader still listed"
    );
    let info = env.info().unwrap();
    assert!(
        info.last_pgno < 200,
        "file kept growing: last page {}",
        info.last_pgno
    );
    assert_eq!(env.reader_check().unwrap(), 0);
    check(&env);
}

#[test]
fn a_live_old_snapshot_pins_only_its_pages() {
    let dir = tempfile::tempdir().unwrap();
    let env = new_env(dir.path());
    let db = env.main_db();
    let v = vec![3u8; 500];
    let mut w = env.write_txn().unwrap();
    for i in 0..2000u64 {
        w.put(db, &key(2, i), &v, PutFlags::empty()).unwrap();
    }
    w.commit().unwrap();
    let tree_pages = {
        let s = env.read_txn().unwrap().stat(db).unwrap();
        s.branch_pages + s.leaf_pages + s.overflow_pages
    };
    let mut kid = spawn("hold-reader", dir.path(), "0");
    let mut lines = BufReader::new(kid.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok);
    wait_line(&mut lines, "reading");
    // Another writer rewrites everything many times while the old snapshot lives.
    for round in 0..30u64 {
        let mut w = env.write_txn().unwrap();
        for i in (0..2000u64).step_by(7) {
            w.put(db, &key(2, i), &round.to_le_bytes(), PutFlags::empty())
                .unwrap();
        }
        w.commit().unwrap();
    }
    let last = env.info().unwrap().last_pgno;
    // The snapshot pins its own pages (about tree_pages); pages born and freed after it are
    // reused, so the file holds about two trees plus the free tree, not thirty.
    assert!(
        last < 3 * tree_pages + 64,
        "file grew to {last} pages for a tree of {tree_pages}"
    );
    kill(&mut kid);
    check(&env);
}

#[test]
fn two_handles_in_one_process_are_independent() {
    let dir = tempfile::tempdir().unwrap();
    let a = new_env(dir.path());
    let b = Env::open(dir.path()).unwrap();
    let db = a.main_db();
    let mut w = a.write_txn().unwrap();
    w.put(db, b"p01-a", b"1", PutFlags::empty()).unwrap();
    bump(&mut w, db, 1);
    w.commit().unwrap();
    let mut w = b.write_txn().unwrap();
    assert_eq!(w.get(b.main_db(), b"p01-a").unwrap(), Some(&b"1"[..]));
    w.put(b.main_db(), b"p01-b", b"2", PutFlags::empty())
        .unwrap();
    bump(&mut w, b.main_db(), 1);
    w.commit().unwrap();
    drop(a); // closing one handle keeps the other's locks and slots
    let r = b.read_txn().unwrap();
    assert_eq!(r.get(b.main_db(), b"p01-a").unwrap(), Some(&b"1"[..]));
    drop(r);
    assert_eq!(verify_snapshot(&b), 2);
    check(&b);
}

#[test]
fn a_full_reader_table_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let env = Env::options().max_readers(2).open(dir.path()).unwrap();
    let r1 = env.read_txn().unwrap();
    let r2 = env.read_txn().unwrap();
    let e = env.read_txn().err().expect("third reader");
    assert!(matches!(e, Error::ReadersFull { max: 2 }), "{e}");
    assert!(e.to_string().contains("max_readers"));
    drop(r1);
    assert!(env.read_txn().is_ok());
    drop(r2);
}

#[test]
fn a_handle_used_after_fork_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let env = new_env(dir.path());
    // SAFETY: the child only calls into the environment (no locks held across the fork by
    // this thread) and leaves with _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let code = match env.read_txn() {
            Err(Error::Forked) => 0,
            _ => 1,
        };
        // SAFETY: leaves the child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    check(&env);
}

/// The kernel id of the calling thread, asked of the kernel.
fn gettid() -> u64 {
    // SAFETY: gettid has no arguments and cannot fail.
    (unsafe { libc::gettid() }) as u64
}

/// The thread recorded in the reader slot of the one live read transaction of `env`.
fn reader_thread(env: &Env) -> Option<u64> {
    let mine: Vec<_> = env
        .readers()
        .into_iter()
        .filter(|r| r.pid == std::process::id() && r.txnid.is_some())
        .collect();
    (mine.len() == 1).then(|| mine[0].thread)
}

#[test]
fn the_reader_list_names_each_readers_thread_in_a_forked_child_too() {
    // The id is kept per thread after the first ask (os::thread_id): another thread, and the
    // thread of a child after fork(), must still get their own.
    let dir = tempfile::tempdir().unwrap();
    let env = new_env(dir.path());
    for _ in 0..2 {
        let r = env.read_txn().unwrap();
        assert_eq!(reader_thread(&env), Some(gettid()));
        drop(r);
    }
    let other = std::thread::scope(|s| {
        s.spawn(|| {
            let r = env.read_txn().unwrap();
            let (got, want) = (reader_thread(&env), gettid());
            drop(r);
            (got, want)
        })
        .join()
        .unwrap()
    });
    assert_eq!(other.0, Some(other.1));
    assert_ne!(other.1, gettid());
    // SAFETY: the child opens the environment afresh (as a forked child must), reads, and
    // leaves with _exit.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        let ok = Env::options().open(dir.path()).is_ok_and(|child| {
            let r = child.read_txn();
            let ok = r.is_ok() && reader_thread(&child) == Some(gettid());
            drop(r);
            ok
        });
        // SAFETY: leaves the child without running the parent's destructors.
        unsafe { libc::_exit(if ok { 0 } else { 1 }) };
    }
    let mut status = 0;
    // SAFETY: waits for our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
    check(&env);
}

#[test]
fn read_only_handle_on_a_read_only_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    drop(new_env(dir.path()));
    let data = dir.path().join("data.cairn");
    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o444)).unwrap();
    let env = Env::options().read_only(true).open(dir.path()).unwrap();
    assert_eq!(verify_snapshot(&env), 0);
    assert!(matches!(env.write_txn().err(), Some(Error::ReadOnly)));
    check(&env);
}
