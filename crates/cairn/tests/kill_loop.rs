//! Real crashes: a writer process and one or two reader processes over one environment, the
//! writer killed with SIGKILL again and again, either at a random moment by this process or by
//! itself at a named failpoint inside the commit protocol (`CAIRN_FAILPOINT`, the test-only
//! `failpoints` feature: src/failpoint.rs). Readers are killed at random too.
//!
//! The workload is a pure function of (workload seed, sequence number): transaction `s` applies
//! `txn_ops(seed, s)` and stores `s` under [`SEQ`]. Any process can thus rebuild the exact
//! expected content of a snapshot from the number it holds. The writer announces each commit on
//! its stdout (`begin s` before `commit()`, `ack s` once it returned Ok); the pipe to this
//! process is exact: a line written before the kill is read after it.
//!
//! After each kill the content must be exactly the state after the last acknowledged commit,
//! or after the one in flight at the kill, in durable and in lazy mode alike (a process crash
//! keeps the page cache, and lazy commits are trusted within the same boot). It is verified by
//! this process (open, compare everything, run the checker) or by the next writer, which does
//! the same before it reports `start s`; readers compare every snapshot they take and run the
//! checker on some, and must never see the content go back.
//!
//! - `CAIRN_KILLS`: writer kills to reach (default 40);
//! - `CAIRN_KILL_SEED`: the seed (default: the clock), printed at the start;
//! - `CAIRN_KILL_COVERAGE`: require every failpoint to have fired (default: when
//!   `CAIRN_KILLS` >= 300).

use cairn::failpoint::{POINTS, VAR};
use cairn::storage::SimRng;
use cairn::{Database, DbFlags, Durability, Env, PutFlags, RoTxn, RwTxn};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// Key of the sequence number in the main database (sorts before every workload key).
const SEQ: &[u8] = b"\0seq";
const MAX_DBS: u32 = 8;

// ---------------------------------------------------------------------------------------------
// The workload

/// A value, by the recipe that rebuilds its bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Val {
    tag: u32,
    len: u32,
}

fn val_byte(tag: u32, i: usize) -> u8 {
    ((tag as usize).wrapping_add(i.wrapping_mul(131)) % 251) as u8
}

fn val_bytes(v: Val) -> Vec<u8> {
    (0..v.len as usize).map(|i| val_byte(v.tag, i)).collect()
}

fn val_matches(b: &[u8], v: Val) -> bool {
    b.len() == v.len as usize && b.iter().enumerate().all(|(i, &x)| x == val_byte(v.tag, i))
}

#[derive(Clone, Debug)]
enum Op {
    Put { db: usize, key: Vec<u8>, val: Val },
    Del { db: usize, key: Vec<u8> },
    DupPut { key: Vec<u8>, val: Vec<u8> },
    DupDelPair { key: Vec<u8>, val: Vec<u8> },
    DupDelKey { key: Vec<u8> },
    ClearDups,
    Nested { ops: Vec<Op>, commit: bool },
}

fn bulk_key(i: u64) -> Vec<u8> {
    format!("bulk{i:04}").into_bytes()
}

fn dup_val(rng: &mut SimRng) -> Vec<u8> {
    let n = rng.below(3000);
    let mut v = format!("{n:05}").into_bytes();
    v.resize(5 + (n % 60) as usize, b'.');
    v
}

/// The operations of transaction `seq`: every 16th grows the file by megabytes of overflow
/// values, 8 later ones delete them all again (so steady commits truncate the file), the rest
/// mix small and overflow puts, deletes, duplicates and nested transactions.
fn txn_ops(seed: u64, seq: u64) -> Vec<Op> {
    let mut rng = SimRng::new(seed ^ seq.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    match seq % 16 {
        5 => (0..100 + rng.below(150))
            .map(|i| Op::Put {
                db: 1,
                key: bulk_key(i),
                val: Val {
                    tag: rng.next_u64() as u32,
                    len: 8192 + rng.below(32768) as u32,
                },
            })
            .collect(),
        13 => (0..250)
            .map(|i| Op::Del {
                db: 1,
                key: bulk_key(i),
            })
            .collect(),
        _ => {
            let n = 1 + rng.below(40);
            let mut ops = gen_ops(&mut rng, n, 0);
            if seq % 64 == 40 {
                ops.insert(0, Op::ClearDups);
            }
            ops
        }
    }
}

fn gen_ops(rng: &mut SimRng, n: u64, depth: u32) -> Vec<Op> {
    let mut ops = Vec::new();
    for _ in 0..n {
        let key = format!("k{:04}", rng.below(400)).into_bytes();
        let dkey = format!("d{:02}", rng.below(16)).into_bytes();
        let db = rng.below(2) as usize;
        ops.push(match rng.below(20) {
            8 => Op::Put {
                db,
                key,
                val: Val {
                    tag: rng.next_u64() as u32,
                    len: 2000 + rng.below(22000) as u32,
                },
            },
            9..=11 => Op::Del { db, key },
            12..=14 => Op::DupPut {
                key: dkey,
                val: dup_val(rng),
            },
            15 => Op::DupDelPair {
                key: dkey,
                val: dup_val(rng),
            },
            16 => Op::DupDelKey { key: dkey },
            17 => {
                // A burst: the key's values become a sub-tree.
                for _ in 0..50 + rng.below(350) {
                    ops.push(Op::DupPut {
                        key: dkey.clone(),
                        val: dup_val(rng),
                    });
                }
                continue;
            }
            18 if depth < 2 => {
                let k = 1 + rng.below(8);
                Op::Nested {
                    ops: gen_ops(rng, k, depth + 1),
                    commit: rng.below(3) != 0,
                }
            }
            _ => Op::Put {
                db,
                key,
                val: Val {
                    tag: rng.next_u64() as u32,
                    len: rng.below(200) as u32,
                },
            },
        });
    }
    ops
}

/// The expected content after transaction `seq`.
#[derive(Clone, Debug, Default, PartialEq)]
struct Model {
    seq: u64,
    /// Main and "side".
    tables: [BTreeMap<Vec<u8>, Val>; 2],
    /// "dups" (DUP_SORT), as (key, value) pairs.
    dups: BTreeSet<(Vec<u8>, Vec<u8>)>,
}

impl Model {
    fn apply(&mut self, ops: &[Op]) {
        for op in ops {
            match op {
                Op::Put { db, key, val } => {
                    self.tables[*db].insert(key.clone(), *val);
                }
                Op::Del { db, key } => {
                    self.tables[*db].remove(key);
                }
                Op::DupPut { key, val } => {
                    self.dups.insert((key.clone(), val.clone()));
                }
                Op::DupDelPair { key, val } => {
                    self.dups.remove(&(key.clone(), val.clone()));
                }
                Op::DupDelKey { key } => self.dups.retain(|(k, _)| k != key),
                Op::ClearDups => self.dups.clear(),
                Op::Nested { ops, commit } => {
                    if *commit {
                        self.apply(ops);
                    }
                }
            }
        }
    }

    /// Moves forward to transaction `to`.
    fn advance(&mut self, seed: u64, to: u64) {
        assert!(to >= self.seq, "cannot go back from {} to {to}", self.seq);
        while self.seq < to {
            self.seq += 1;
            self.apply(&txn_ops(seed, self.seq));
        }
    }

    fn at(seed: u64, seq: u64) -> Model {
        let mut m = Model::default();
        m.advance(seed, seq);
        m
    }
}

struct Dbs {
    tables: [Database; 2],
    dups: Database,
}

fn open_dbs(env: &Env, w: &mut RwTxn<'_>) -> Dbs {
    Dbs {
        tables: [
            env.main_db(),
            w.create_db(Some("side"), DbFlags::CREATE).unwrap(),
        ],
        dups: w
            .create_db(Some("dups"), DbFlags::CREATE | DbFlags::DUP_SORT)
            .unwrap(),
    }
}

fn run_ops(w: &mut RwTxn<'_>, dbs: &Dbs, ops: &[Op]) {
    for op in ops {
        match op {
            Op::Put { db, key, val } => w
                .put(dbs.tables[*db], key, &val_bytes(*val), PutFlags::empty())
                .unwrap(),
            Op::Del { db, key } => {
                w.delete(dbs.tables[*db], key).unwrap();
            }
            Op::DupPut { key, val } => w.put(dbs.dups, key, val, PutFlags::empty()).unwrap(),
            Op::DupDelPair { key, val } => {
                w.delete_pair(dbs.dups, key, val).unwrap();
            }
            Op::DupDelKey { key } => {
                w.delete(dbs.dups, key).unwrap();
            }
            Op::ClearDups => w.clear_db(dbs.dups).unwrap(),
            Op::Nested { ops, commit } => {
                let mut n = w.nested().unwrap();
                run_ops(&mut n, dbs, ops);
                if *commit {
                    n.commit().unwrap();
                } else {
                    n.abort();
                }
            }
        }
    }
}

fn read_seq(env: &Env, r: &RoTxn<'_>) -> u64 {
    r.get(env.main_db(), SEQ).unwrap().map_or(0, |v| {
        u64::from_le_bytes(v.try_into().expect("8-byte sequence number"))
    })
}

/// Compares a snapshot with the model; the first difference, if any.
fn compare(env: &Env, r: &RoTxn<'_>, m: &Model) -> Result<(), String> {
    let named = |name: &str| match r.open_db(Some(name)) {
        Ok(db) => Some(db),
        Err(cairn::Error::DbNotFound { .. }) => None,
        Err(e) => panic!("opening {name}: {e}"),
    };
    let dbs = [Some(env.main_db()), named("side")];
    // The main database's keys that name named databases hold their records (the checker
    // checks them); the model keeps the user's keys.
    let names = r.db_names().map_err(|e| format!("db_names: {e}"))?;
    for (i, db) in dbs.iter().enumerate() {
        let mut want = m.tables[i].iter();
        if let Some(db) = *db {
            for e in r.iter(db).unwrap() {
                let (k, v) = e.map_err(|e| format!("db {i}: {e}"))?;
                if i == 0 && (k == SEQ || names.iter().any(|n| n.as_bytes() == k)) {
                    continue;
                }
                match want.next() {
                    Some((wk, wv)) if wk == k && val_matches(v, *wv) => {}
                    Some((wk, wv)) => {
                        return Err(format!(
                            "db {i}: found {:?} ({} bytes), expected {:?} ({:?})",
                            String::from_utf8_lossy(k),
                            v.len(),
                            String::from_utf8_lossy(wk),
                            wv
                        ))
                    }
                    None => {
                        return Err(format!(
                            "db {i}: extra key {:?}",
                            String::from_utf8_lossy(k)
                        ))
                    }
                }
            }
        }
        if let Some((wk, _)) = want.next() {
            return Err(format!(
                "db {i}: missing key {:?}",
                String::from_utf8_lossy(wk)
            ));
        }
    }
    let mut want = m.dups.iter();
    if let Some(db) = named("dups") {
        for e in r.iter(db).unwrap() {
            let (k, v) = e.map_err(|e| format!("dups: {e}"))?;
            match want.next() {
                Some((wk, wv)) if wk == k && wv == v => {}
                other => {
                    return Err(format!(
                        "dups: found {:?}={:?}, expected {other:?}",
                        String::from_utf8_lossy(k),
                        String::from_utf8_lossy(v)
                    ))
                }
            }
        }
    }
    if let Some(p) = want.next() {
        return Err(format!("dups: missing pair {p:?}"));
    }
    Ok(())
}

fn run_checker(r: &RoTxn<'_>, who: &str) {
    let rep = r.check().unwrap();
    assert!(rep.is_ok(), "{who}: checker: {:?}", rep.problems);
}

// ---------------------------------------------------------------------------------------------
// Child processes

fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} not set"))
}

fn parent_gone(ppid: u32) -> bool {
    std::os::unix::process::parent_id() != ppid
}

/// Child roles (this test binary re-run with `CAIRN_KL_ROLE`).
#[test]
#[ignore = "run by kill_loop in a child process"]
fn child_entry() {
    let Ok(role) = std::env::var("CAIRN_KL_ROLE") else {
        return;
    };
    let dir = PathBuf::from(var("CAIRN_KL_DIR"));
    let seed: u64 = var("CAIRN_KL_SEED").parse().unwrap();
    let ppid = std::os::unix::process::parent_id();
    match role.as_str() {
        "writer" => writer(&dir, seed, ppid),
        "reader" => reader(&dir, seed, ppid),
        other => panic!("unknown role {other}"),
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{line}").unwrap();
    out.flush().unwrap();
}

fn writer(dir: &Path, seed: u64, ppid: u32) {
    let mode = match var("CAIRN_KL_MODE").as_str() {
        "lazy" => Durability::Lazy,
        "logged" => Durability::Logged,
        _ => Durability::Durable,
    };
    let limit: u64 = var("CAIRN_KL_LIMIT").parse().unwrap();
    let sync_bytes: u64 = var("CAIRN_KL_SYNC_BYTES").parse().unwrap();
    let mut opts = Env::options().max_dbs(MAX_DBS).durability(mode);
    if mode != Durability::Durable {
        opts = opts.sync_every_bytes((sync_bytes > 0).then_some(sync_bytes));
    }
    let env = opts.open(dir).unwrap();
    let start = {
        let r = env.read_txn().unwrap();
        let s = read_seq(&env, &r);
        let m = Model::at(seed, s);
        if let Err(e) = compare(&env, &r, &m) {
            panic!("writer: the state at open (sequence {s}) differs: {e}");
        }
        run_checker(&r, "writer at open");
        s
    };
    say(&format!("start {start}"));
    let mut rng = SimRng::new(seed ^ u64::from(std::process::id()));
    let mut known = start;
    for _ in 0..limit {
        if parent_gone(ppid) {
            return;
        }
        let mut w = env.write_txn().unwrap();
        // The base of this transaction: a commit left unpublished by a writer killed after its
        // meta write is taken up here, although this process's first snapshot predates it.
        let base = w
            .get(env.main_db(), SEQ)
            .unwrap()
            .map_or(0, |v| u64::from_le_bytes(v.try_into().unwrap()));
        if base != known {
            say(&format!("base {base}"));
        }
        let s = base + 1;
        if rng.below(20) == 0 {
            // Abandoned: the writer lock is handed back with nothing written (databases created
            // in it are gone with it).
            let dbs = open_dbs(&env, &mut w);
            run_ops(&mut w, &dbs, &txn_ops(seed, s));
            drop(w);
            w = env.write_txn().unwrap();
        }
        let dbs = open_dbs(&env, &mut w);
        run_ops(&mut w, &dbs, &txn_ops(seed, s));
        w.put(env.main_db(), SEQ, &s.to_le_bytes(), PutFlags::empty())
            .unwrap();
        say(&format!("begin {s}"));
        w.commit().unwrap();
        say(&format!("ack {s}"));
        known = s;
        if mode != Durability::Durable && rng.below(6) == 0 {
            env.sync().unwrap();
        }
    }
    say("done");
    // Closing a lazy environment flushes: a commit like the others.
    drop(env);
}

fn reader(dir: &Path, seed: u64, ppid: u32) {
    let env = Env::options().max_dbs(MAX_DBS).open(dir).unwrap();
    let mut model = Model::default();
    let mut rng = SimRng::new(seed ^ u64::from(std::process::id()) << 1);
    for n in 0u64.. {
        if parent_gone(ppid) {
            return;
        }
        let r = env.read_txn().unwrap();
        let s = read_seq(&env, &r);
        assert!(
            s >= model.seq,
            "reader: the content went back from sequence {} to {s}",
            model.seq
        );
        model.advance(seed, s);
        if let Err(e) = compare(&env, &r, &model) {
            panic!("reader: snapshot {} (sequence {s}) differs: {e}", r.id());
        }
        if n % 8 == 0 {
            run_checker(&r, "reader");
        }
        if rng.below(8) == 0 {
            // Hold the snapshot a while: its pages stay pinned meanwhile.
            std::thread::sleep(Duration::from_millis(rng.below(30)));
        }
        drop(r);
        std::thread::sleep(Duration::from_millis(rng.below(3)));
    }
}

// ---------------------------------------------------------------------------------------------
// The parent

/// A child process with its stdout lines on a channel and its stderr collected.
struct Kid {
    child: Child,
    lines: Receiver<String>,
    stderr: Option<std::thread::JoinHandle<String>>,
    status: Option<ExitStatus>,
}

impl Kid {
    fn spawn(
        role: &str,
        dir: &Path,
        seed: u64,
        extra: &[(&str, String)],
        failpoint: Option<String>,
    ) -> Kid {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([
            "--exact",
            "child_entry",
            "--ignored",
            "--nocapture",
            "--quiet",
        ])
        .env("CAIRN_KL_ROLE", role)
        .env("CAIRN_KL_DIR", dir)
        .env("CAIRN_KL_SEED", seed.to_string())
        .env_remove(VAR)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        for (k, v) in extra {
            cmd.env(k, v);
        }
        if let Some(fp) = failpoint {
            cmd.env(VAR, fp);
        }
        let mut child = cmd.spawn().expect("spawning a child process");
        let out = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let err = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut all = String::new();
            for l in BufReader::new(err).lines().map_while(Result::ok) {
                all.push_str(&l);
                all.push('\n');
            }
            all
        });
        Kid {
            child,
            lines: rx,
            stderr: Some(stderr),
            status: None,
        }
    }

    fn kill(&mut self) {
        if self.status.is_none() {
            // SAFETY: kill(2) on our own child's pid, not yet waited for (so not reused).
            unsafe {
                libc::kill(self.child.id() as libc::pid_t, libc::SIGKILL);
            }
        }
    }

    /// Waits for the end; returns the status and everything it wrote to stderr.
    fn wait(&mut self) -> (ExitStatus, String) {
        let st = match self.status {
            Some(s) => s,
            None => {
                let s = self.child.wait().unwrap();
                self.status = Some(s);
                s
            }
        };
        let err = self
            .stderr
            .take()
            .map(|h| h.join().unwrap())
            .unwrap_or_default();
        (st, err)
    }

    /// Whether it ended by itself (a reader never should).
    fn exited(&mut self) -> bool {
        if self.status.is_none() {
            self.status = self.child.try_wait().unwrap();
        }
        self.status.is_some()
    }
}

impl Drop for Kid {
    fn drop(&mut self) {
        self.kill();
        if self.status.is_none() {
            let _ = self.child.wait();
        }
    }
}

fn killed_by_sigkill(st: &ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    st.signal() == Some(libc::SIGKILL)
}

/// Which failpoints may fire in a writer, given the situation.
struct Situation {
    /// No handle has the environment open: the writer opens first (recovery or creation).
    first: bool,
    /// The data file does not exist yet.
    fresh: bool,
    /// The last writer died inside a commit while readers kept the environment open.
    died_mid_commit: bool,
}

fn feasible(point: &str, s: &Situation) -> bool {
    match point {
        "create.after_grow" | "create.after_meta_write" => s.fresh,
        p if p.starts_with("open.") => s.first,
        "writer.before_republish" => !s.first && s.died_mid_commit,
        _ => !s.fresh,
    }
}

/// The hit that fires a point: points passed once per process or per commit fire early, the
/// busy ones anywhere in the first commits.
fn nth_hit(point: &str, rng: &mut SimRng) -> u64 {
    match point {
        p if p.starts_with("open.") || p.starts_with("create.") => 1,
        "writer.before_republish" | "commit.before_truncate" | "commit.after_truncate" => 1,
        "commit.persist_free" => 1 + rng.below(200),
        "commit.before_data_sync" | "commit.after_data_sync" => 1 + rng.below(2),
        "commit.before_grow" | "commit.after_grow" => 1 + rng.below(3),
        _ => 1 + rng.below(12),
    }
}

#[derive(Default)]
struct Tally {
    armed: BTreeMap<&'static str, u64>,
    fired: BTreeMap<&'static str, u64>,
    /// Of those, in a lazy writer.
    fired_lazy: BTreeMap<&'static str, u64>,
    signal_kills: u64,
    signal_kills_lazy: u64,
    reader_kills: u64,
    commits: u64,
    envs: u64,
    parent_checks: u64,
    in_flight_seen: u64,
}

/// What this process knows of the environment under test.
struct Tracked {
    dir: tempfile::TempDir,
    seed: u64,
    /// The model after the last acknowledged commit.
    model: Model,
    /// A commit announced but not acknowledged when its writer died.
    inflight: Option<u64>,
    fresh: bool,
}

impl Tracked {
    fn new(seed: u64) -> Tracked {
        Tracked {
            dir: tempfile::tempdir().unwrap(),
            seed,
            model: Model::default(),
            inflight: None,
            fresh: true,
        }
    }

    /// A state `s` seen in the environment must be the last acknowledged one or the one in
    /// flight. Seeing the one in flight makes it the state to build on; seeing the other does
    /// not rule the one in flight out: a writer killed after its meta write but before
    /// publishing leaves a commit that readers of the open environment do not see, and that
    /// the next write transaction (or the next recovery) takes up.
    fn accept(&mut self, s: u64, who: &str) -> bool {
        let acked = self.model.seq;
        assert!(
            s == acked || self.inflight == Some(s),
            "{who}: found sequence {s}; the last acknowledged is {acked}, in flight {:?}",
            self.inflight
        );
        let was_inflight = s != acked;
        if was_inflight {
            self.model.advance(self.seed, s);
            self.inflight = None;
        }
        was_inflight
    }

    /// Commit `s` was acknowledged: nothing older can come back.
    fn acked(&mut self, s: u64) {
        assert_eq!(s, self.model.seq + 1, "acknowledged out of order");
        self.model.advance(self.seed, s);
        self.inflight = None;
    }

    /// Opens the environment here, compares everything with the model, runs the checker.
    fn check_here(&mut self, tally: &mut Tally) {
        let env = Env::options()
            .max_dbs(MAX_DBS)
            .open(self.dir.path())
            .unwrap();
        let r = env.read_txn().unwrap();
        let s = read_seq(&env, &r);
        let acked = self.model.seq;
        let want = if s == acked {
            self.model.clone()
        } else {
            assert_eq!(
                self.inflight,
                Some(s),
                "parent: found sequence {s}; the last acknowledged is {acked}"
            );
            Model::at(self.seed, s)
        };
        if let Err(e) = compare(&env, &r, &want) {
            panic!("parent: sequence {s} differs: {e}");
        }
        run_checker(&r, "parent");
        if self.accept(s, "parent") {
            tally.in_flight_seen += 1;
        }
        tally.parent_checks += 1;
    }
}

/// What the writer's lines told.
#[derive(Default)]
struct Follow {
    started: bool,
    begins: u64,
    /// The commit announced and not acknowledged yet.
    last_begin: Option<u64>,
}

impl Follow {
    fn line(&mut self, l: &str, t: &mut Tracked, tally: &mut Tally) {
        let Some((word, n)) = l.split_once(' ') else {
            return;
        };
        let Ok(n) = n.parse::<u64>() else {
            return;
        };
        match word {
            // The state at open, and a base that moved under the writer (see `accept`).
            "start" | "base" => {
                if t.accept(n, word) {
                    tally.in_flight_seen += 1;
                }
                t.fresh = false;
                self.started = true;
            }
            "begin" => {
                assert_eq!(n, t.model.seq + 1, "commit {n} does not follow the state");
                self.last_begin = Some(n);
                self.begins += 1;
            }
            "ack" => {
                assert_eq!(Some(n), self.last_begin, "ack without begin");
                t.acked(n);
                tally.commits += 1;
                self.last_begin = None;
            }
            _ => {}
        }
    }
}

fn env_u64(name: &str) -> Option<u64> {
    std::env::var(name).ok().and_then(|s| s.parse().ok())
}

#[test]
fn kill_loop() {
    let kills = env_u64("CAIRN_KILLS").unwrap_or(40);
    let seed = env_u64("CAIRN_KILL_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    let trace = std::env::var_os("CAIRN_KILL_TRACE").is_some();
    let coverage = env_u64("CAIRN_KILL_COVERAGE").map_or(kills >= 300, |v| v != 0);
    println!("kill_loop: {kills} writer kills, seed {seed} (replay: CAIRN_KILL_SEED={seed})");
    let began = Instant::now();
    let mut rng = SimRng::new(seed);
    let mut tally = Tally::default();
    let mut t = Tracked::new(seed);
    tally.envs = 1;
    let mut readers: Vec<Kid> = Vec::new();
    let mut done_kills = 0u64;
    let mut died_mid_commit = false;
    let mut env_kills = 0u64;
    let mut rounds = 0u64;
    while done_kills < kills {
        rounds += 1;
        assert!(rounds < 4 * kills + 100, "too many rounds without a kill");
        // A new environment now and then: creation is covered, and models stay small.
        if env_kills >= 25 + rng.below(20) {
            readers.clear();
            t.check_here(&mut tally);
            t = Tracked::new(rng.next_u64());
            tally.envs += 1;
            env_kills = 0;
            died_mid_commit = false;
        }
        readers.retain_mut(|r| {
            if r.exited() {
                let (st, err) = r.wait();
                panic!("a reader ended by itself ({st}):\n{err}");
            }
            true
        });
        // Verify here now and then; otherwise the next writer does it at open.
        if !t.fresh && rng.below(3) == 0 {
            t.check_here(&mut tally);
        }
        let sit = Situation {
            first: readers.is_empty(),
            fresh: t.fresh,
            died_mid_commit,
        };
        // Arm the feasible point that fired least (ties at random), two times in three.
        let arm = if rng.below(3) != 0 {
            let least = POINTS
                .iter()
                .filter(|p| feasible(p, &sit))
                .map(|p| tally.fired.get(p).copied().unwrap_or(0))
                .min();
            least.and_then(|least| {
                let c: Vec<&'static str> = POINTS
                    .iter()
                    .copied()
                    .filter(|p| feasible(p, &sit))
                    .filter(|p| tally.fired.get(p).copied().unwrap_or(0) == least)
                    .collect();
                (!c.is_empty()).then(|| c[rng.below(c.len() as u64) as usize])
            })
        } else {
            None
        };
        // An armed point fires in lazy and in durable writers by turns (the flush of lazy
        // commits' pages happens only in lazy ones).
        let lazy = match arm {
            Some("commit.before_data_sync" | "commit.after_data_sync") => true,
            Some(p) if p.contains("_log_") => true,
            Some(p) => {
                let n = |m: &BTreeMap<&'static str, u64>| m.get(p).copied().unwrap_or(0);
                2 * n(&tally.fired_lazy) <= n(&tally.fired)
            }
            None => rng.below(2) == 0,
        };
        // Half the writers that leave pages unflushed log their commits (Durability::Logged),
        // and every one armed at a point of the log.
        let logged = lazy && (arm.is_some_and(|p| p.contains("_log_")) || rng.below(2) == 0);
        let sync_bytes = match rng.below(3) {
            0 => 0,
            1 => 64 << 10,
            _ => 4 << 20,
        };
        let limit = if arm.is_some() { 80 } else { 1_000_000 };
        let spec = arm.map(|p| {
            *tally.armed.entry(p).or_default() += 1;
            format!("{p}:{}", nth_hit(p, &mut rng))
        });
        let mut w = Kid::spawn(
            "writer",
            t.dir.path(),
            t.seed,
            &[
                (
                    "CAIRN_KL_MODE",
                    match (lazy, logged) {
                        (_, true) => "logged",
                        (true, false) => "lazy",
                        _ => "durable",
                    }
                    .to_string(),
                ),
                ("CAIRN_KL_LIMIT", limit.to_string()),
                ("CAIRN_KL_SYNC_BYTES", sync_bytes.to_string()),
            ],
            spec.clone(),
        );
        // Follow the writer's lines until it ends, or until this process kills it.
        let mut follow = Follow::default();
        let kill_after_begins = if rng.below(2) == 0 {
            Some(1 + rng.below(30))
        } else {
            None
        };
        let kill_at = Instant::now() + Duration::from_millis(rng.below(250));
        let mut ended = false;
        let deadline = Instant::now() + Duration::from_secs(300);
        loop {
            let wait = if arm.is_some() || !follow.started {
                Duration::from_millis(200)
            } else {
                kill_at.saturating_duration_since(Instant::now())
            };
            match w.lines.recv_timeout(wait) {
                Ok(l) => {
                    let was_started = follow.started;
                    follow.line(&l, &mut t, &mut tally);
                    if follow.started && !was_started {
                        // Readers join once the environment exists.
                        let want = 1 + rng.below(2) as usize;
                        while readers.len() < want {
                            readers.push(Kid::spawn("reader", t.dir.path(), t.seed, &[], None));
                        }
                    }
                    if arm.is_none()
                        && l.starts_with("begin ")
                        && kill_after_begins == Some(follow.begins)
                    {
                        w.kill();
                        break;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    assert!(Instant::now() < deadline, "the writer is stuck");
                    if arm.is_none() && follow.started && Instant::now() >= kill_at {
                        w.kill();
                        break;
                    }
                }
                Err(RecvTimeoutError::Disconnected) => {
                    ended = true;
                    break;
                }
            }
            // Kill a reader now and then while the writer runs.
            if follow.started && !readers.is_empty() && rng.below(200) == 0 {
                let mut r = readers.swap_remove(rng.below(readers.len() as u64) as usize);
                r.kill();
                r.wait();
                tally.reader_kills += 1;
            }
        }
        let (st, err) = w.wait();
        // Lines written before the end are still in the pipe.
        if !ended {
            for l in w.lines.iter() {
                follow.line(&l, &mut t, &mut tally);
            }
        }
        let last_begin = follow.last_begin;
        let fired = err
            .lines()
            .find_map(|l| l.strip_prefix("cairn failpoint "))
            .map(|l| l.split_whitespace().next().unwrap().to_string());
        if killed_by_sigkill(&st) {
            match (&fired, arm) {
                (Some(f), Some(a)) => {
                    assert_eq!(f, a, "a point other than the armed one fired");
                    *tally.fired.entry(a).or_default() += 1;
                    if lazy {
                        *tally.fired_lazy.entry(a).or_default() += 1;
                    }
                    // Creation wrote its first commit before these points.
                    if a != "open.before_recover" {
                        t.fresh = false;
                    }
                }
                (Some(f), None) => panic!("failpoint {f} fired unarmed"),
                (None, _) => {
                    tally.signal_kills += 1;
                    tally.signal_kills_lazy += u64::from(lazy);
                }
            }
            done_kills += 1;
            env_kills += 1;
        } else {
            assert!(
                st.success() && arm.is_some(),
                "the writer failed ({st}, armed {spec:?}):\n{err}"
            );
        }
        if trace {
            eprintln!(
                "round {rounds}: writer {st}, armed {spec:?}, fired {fired:?}, acked {}, \
                 in flight {last_begin:?}, {} readers",
                t.model.seq,
                readers.len()
            );
        }
        if last_begin.is_some() {
            t.inflight = last_begin;
        }
        died_mid_commit = last_begin.is_some();
        // Kill the readers too, some of the time: the next opener then recovers.
        if rng.below(3) == 0 {
            tally.reader_kills += readers.len() as u64;
            readers.clear();
        }
    }
    readers.clear();
    t.check_here(&mut tally);
    let secs = began.elapsed().as_secs_f64();
    println!(
        "kill_loop: {done_kills} writer kills ({} by signal, {} at failpoints), {} reader kills, \
         {} environments, {} acknowledged commits, {} in-flight commits found, {} checks here, \
         {secs:.1} s, seed {seed}",
        tally.signal_kills,
        done_kills - tally.signal_kills,
        tally.reader_kills,
        tally.envs,
        tally.commits,
        tally.in_flight_seen,
        tally.parent_checks,
    );
    println!(
        "  {:<28} {:>6} {:>6} {:>12}",
        "failpoint", "armed", "fired", "fired lazy"
    );
    let n = |m: &BTreeMap<&'static str, u64>, p: &str| m.get(p).copied().unwrap_or(0);
    for p in POINTS {
        println!(
            "  {p:<28} {:>6} {:>6} {:>12}",
            n(&tally.armed, p),
            n(&tally.fired, p),
            n(&tally.fired_lazy, p)
        );
    }
    println!(
        "  {:<28} {:>6} {:>6} {:>12}",
        "(random SIGKILL)", "", tally.signal_kills, tally.signal_kills_lazy
    );
    if coverage {
        let missing: Vec<&str> = POINTS
            .iter()
            .copied()
            .filter(|p| !tally.fired.contains_key(p))
            .collect();
        assert!(missing.is_empty(), "failpoints never fired: {missing:?}");
    }
}
