//! The workloads: LMDB's db_bench set, redb's benchmark phases and ioarena's CRUD transaction.
//!
//! Each suite runs inside one child process for one configuration, on fresh directories under
//! the given root, and returns its figures. Nothing here knows which engine it drives.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{ensure, Context, Result};
use serde::{Deserialize, Serialize};

use crate::engines::{self, Config, Engine, ModeClass, WriteKind};

/// What a figure measures; decides which way is better.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Unit {
    /// Operations (puts, gets, transactions, ranges) per second.
    OpsPerSec,
    /// Microseconds (latency).
    Micros,
    /// Mebibytes (file size, memory).
    MiB,
    /// A plain count (the group suite's commits of one thread, threads starved).
    Count,
}

impl Unit {
    pub fn higher_is_better(self) -> bool {
        self == Unit::OpsPerSec
    }

    pub fn label(self) -> &'static str {
        match self {
            Unit::OpsPerSec => "ops/s",
            Unit::Micros => "µs",
            Unit::MiB => "MiB",
            Unit::Count => "count",
        }
    }
}

/// One measured number.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Figure {
    /// Stable identifier within the suite, e.g. `fillseq` or `fillrandsync-p99`.
    pub id: String,
    /// Human description, used as the row label.
    pub label: String,
    pub unit: Unit,
    pub value: f64,
    /// Operations timed (0 for sizes).
    pub ops: u64,
    /// Seconds timed (0 for sizes).
    pub secs: f64,
}

/// Latency distribution of a per-transaction workload, in microseconds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Latency {
    pub id: String,
    pub label: String,
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

/// The suites; each is one child process per configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Suite {
    /// LMDB's db_bench microbenchmarks: 16-byte decimal keys, 100-byte values.
    DbBench,
    /// redb's benchmark phases: 24-byte random keys, 150-byte random values.
    Redb,
    /// ioarena's CRUD transaction: put b, put a, delete b, get a.
    Crud,
    /// Sorted duplicates (DUPSORT): N pairs over 1,000 keys (`dups.rs`).
    Dups,
    /// One database shared by several processes: 2 readers, then a writer and 2 readers
    /// (`mp.rs`).
    Mp,
    /// The C API (crates/cairn-capi): one C program on LMDB and on Cairn, and its Rust twin
    /// (`capi.rs`). Not one child per configuration: the parent runs it once.
    Capi,
    /// Durable one-put commits from 1 to 256 threads of one process (`group.rs`). Not part
    /// of the default set: run it with `--suites group` (`make bench-group`).
    Group,
}

impl Suite {
    pub const ALL: [Suite; 7] = [
        Suite::DbBench,
        Suite::Redb,
        Suite::Crud,
        Suite::Dups,
        Suite::Mp,
        Suite::Capi,
        Suite::Group,
    ];

    /// What runs when no `--suites` is given: every suite but group, which has a report of
    /// its own (docs/bench/group/).
    pub fn default_set() -> Vec<Suite> {
        Suite::ALL
            .into_iter()
            .filter(|&s| s != Suite::Group)
            .collect()
    }

    pub fn id(self) -> &'static str {
        match self {
            Suite::DbBench => "dbbench",
            Suite::Redb => "redb",
            Suite::Crud => "crud",
            Suite::Dups => "dups",
            Suite::Mp => "mp",
            Suite::Capi => "capi",
            Suite::Group => "group",
        }
    }

    pub fn parse(s: &str) -> Option<Suite> {
        Suite::ALL.into_iter().find(|x| x.id() == s)
    }

    pub fn title(self) -> &'static str {
        match self {
            Suite::DbBench => "LMDB db_bench set (16-byte `%016d` keys, 100-byte values)",
            Suite::Redb => "redb benchmark phases (24-byte random keys, 150-byte random values)",
            Suite::Crud => "ioarena CRUD transaction (16-byte keys, 32-byte values)",
            Suite::Dups => {
                "sorted duplicates: N pairs over 1,000 keys (16-byte keys and values; DUPFIXED rows: 8-byte integer values)"
            }
            Suite::Mp => {
                "multi-process: one database, 2 reader processes, then a writer process and 2 \
                 readers (db_bench keys and values)"
            }
            Suite::Capi => "C API (lmdb.h): one C program on LMDB and on Cairn, and its Rust twin",
            Suite::Group => {
                "group commit: durable one-put transactions from T threads of one process"
            }
        }
    }

    /// The engines the suite applies to (`None`: every engine).
    pub fn engines(self) -> Option<&'static [&'static str]> {
        match self {
            Suite::Dups => Some(engines::DUP_ENGINES),
            Suite::Mp => Some(engines::MP_ENGINES),
            // Run once by the parent (main.rs), never per configuration.
            Suite::Capi => Some(&[]),
            _ => None,
        }
    }

    /// Whether the suite applies to `engine`.
    pub fn applies_to(self, engine: &str) -> bool {
        self.engines().is_none_or(|e| e.contains(&engine))
    }
}

/// Sizes of a run.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// N, the number of records.
    pub records: u64,
    /// The quick set skips the slower, less telling workloads.
    pub quick: bool,
    /// The group suite: how long each thread count runs, seconds.
    pub group_secs: f64,
    /// The group suite: the thread counts, in order.
    pub group_threads: &'static [usize],
}

/// Figures collected by one suite run.
#[derive(Default)]
pub struct Output {
    pub figures: Vec<Figure>,
    pub latencies: Vec<Latency>,
    /// The phase running, named in errors.
    pub phase: &'static str,
}

impl Output {
    pub(crate) fn rate(&mut self, id: &str, label: String, ops: u64, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        let value = if secs > 0.0 {
            ops as f64 / secs
        } else {
            f64::INFINITY
        };
        self.figures.push(Figure {
            id: id.into(),
            label,
            unit: Unit::OpsPerSec,
            value,
            ops,
            secs,
        });
    }

    pub(crate) fn size(&mut self, id: &str, label: String, bytes: u64) {
        self.figures.push(Figure {
            id: id.into(),
            label,
            unit: Unit::MiB,
            value: bytes as f64 / (1u64 << 20) as f64,
            ops: 0,
            secs: 0.0,
        });
    }

    /// Records the per-transaction latencies of a phase: its rate, p50 and p99 as figures,
    /// the whole distribution as a latency record.
    fn latencies(&mut self, id: &str, label: &str, mut nanos: Vec<u64>, elapsed: Duration) {
        let n = nanos.len() as u64;
        self.rate(id, label.to_string(), n, elapsed);
        nanos.sort_unstable();
        let pick = |q: f64| -> f64 {
            if nanos.is_empty() {
                return 0.0;
            }
            let i = ((nanos.len() as f64 * q).ceil() as usize).clamp(1, nanos.len()) - 1;
            nanos[i] as f64 / 1e3
        };
        let mean = nanos.iter().sum::<u64>() as f64 / n.max(1) as f64 / 1e3;
        let lat = Latency {
            id: id.into(),
            label: label.into(),
            count: n,
            mean,
            p50: pick(0.50),
            p90: pick(0.90),
            p99: pick(0.99),
            p999: pick(0.999),
            max: pick(1.0),
        };
        for (suffix, value) in [("p50", lat.p50), ("p99", lat.p99)] {
            self.figures.push(Figure {
                id: format!("{id}-{suffix}"),
                label: format!("{label}: commit latency {suffix}"),
                unit: Unit::Micros,
                value,
                ops: n,
                secs: 0.0,
            });
        }
        self.latencies.push(lat);
    }
}

/// Runs `suite` for configuration `cfg` in fresh directories under `root`.
pub fn run(suite: Suite, cfg: &Config, root: &Path, p: &Params) -> Result<Output> {
    let mut scratch = Scratch {
        root: root.to_path_buf(),
        cfg,
        next: 0,
    };
    let mut out = Output::default();
    let result = match suite {
        Suite::DbBench => db_bench(&mut scratch, p, &mut out),
        Suite::Redb => redb_phases(&mut scratch, p, &mut out),
        Suite::Crud => crud(&mut scratch, p, &mut out),
        Suite::Dups => crate::dups::dups(&mut scratch, p, &mut out),
        Suite::Mp => crate::mp::mp(&mut scratch, p, &mut out),
        Suite::Capi => Err(anyhow::anyhow!("the capi suite runs in the parent process")),
        Suite::Group => crate::group::group(&mut scratch, p, &mut out),
    };
    result.with_context(|| format!("{} suite, phase {}", suite.id(), out.phase))?;
    Ok(out)
}

/// Hands out fresh database directories and removes them when done.
pub(crate) struct Scratch<'a> {
    root: PathBuf,
    pub(crate) cfg: &'a Config,
    next: u32,
}

impl Scratch<'_> {
    pub(crate) fn fresh_dir(&mut self, what: &str) -> Result<PathBuf> {
        self.next += 1;
        let dir = self
            .root
            .join(format!("{}-{}-{what}", self.cfg.id, self.next));
        if dir.exists() {
            std::fs::remove_dir_all(&dir)?;
        }
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    /// Opens the configuration on a fresh directory.
    pub(crate) fn open(&mut self, what: &str) -> Result<(Box<dyn Engine>, PathBuf)> {
        let dir = self.fresh_dir(what)?;
        let db = engines::open(self.cfg, &dir).with_context(|| format!("opening {dir:?}"))?;
        Ok((db, dir))
    }

    /// Closes the database and deletes its directory.
    pub(crate) fn discard(&self, db: Box<dyn Engine>, dir: &Path) -> Result<()> {
        drop(db);
        std::fs::remove_dir_all(dir).with_context(|| format!("removing {dir:?}"))
    }
}

// ---------------------------------------------------------------------------------------------
// Data generation: deterministic, cheap, and not stored (the harness's own memory stays small).

/// SplitMix64: a tiny, good-enough PRNG with a fixed seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// Uniform in `0..n` (the modulo bias is negligible for the sizes used here).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// SplitMix64's finaliser: a bijective hash of a 64-bit word.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A random permutation of `0..n`.
pub(crate) fn permutation(n: u64, seed: u64) -> Vec<u32> {
    assert!(n <= u32::MAX as u64);
    let mut v: Vec<u32> = (0..n as u32).collect();
    let mut rng = Rng::new(seed);
    for i in (1..v.len()).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
    v
}

/// db_bench's key: the record number as 16 decimal digits.
pub(crate) fn dec_key(i: u64) -> [u8; 16] {
    let mut k = [b'0'; 16];
    let mut x = i;
    for b in k.iter_mut().rev() {
        *b = b'0' + (x % 10) as u8;
        x /= 10;
    }
    k
}

/// redb's key: 24 random bytes, a pure function of the record number (seed 3).
fn rand_key(i: u64) -> [u8; 24] {
    let mut k = [0u8; 24];
    for (w, chunk) in k.chunks_exact_mut(8).enumerate() {
        let word = mix(mix(3 ^ (i << 2 | w as u64)));
        chunk.copy_from_slice(&word.to_le_bytes());
    }
    k
}

/// ioarena's key: 16 printable characters (hex of a hash of the number).
fn hex_key(i: u64) -> [u8; 16] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut k = [0u8; 16];
    let h = mix(i ^ 42);
    for (n, b) in k.iter_mut().enumerate() {
        *b = HEX[((h >> (60 - 4 * n)) & 0xF) as usize];
    }
    k
}

/// Values are windows into one pre-generated buffer.
pub(crate) struct Values {
    buf: Vec<u8>,
    len: usize,
}

impl Values {
    /// Random bytes.
    pub(crate) fn random(len: usize, seed: u64) -> Values {
        let size = (1 << 20) + len;
        let mut rng = Rng::new(seed);
        let buf = (0..size).map(|_| rng.next_u64() as u8).collect();
        Values { buf, len }
    }

    /// Like db_bench's generator: each 100-byte stretch is 50 random bytes repeated, so values
    /// compress to about half their size.
    pub(crate) fn compressible(len: usize, seed: u64) -> Values {
        let size = (1 << 20) + len;
        let mut rng = Rng::new(seed);
        let mut buf = Vec::with_capacity(size + 100);
        while buf.len() < size {
            let half: Vec<u8> = (0..50).map(|_| b' ' + (rng.below(95) as u8)).collect();
            buf.extend_from_slice(&half);
            buf.extend_from_slice(&half);
        }
        Values { buf, len }
    }

    pub(crate) fn get(&self, i: u64) -> &[u8] {
        let span = (self.buf.len() - self.len) as u64;
        let off = (i.wrapping_mul(0x9E37_79B9) % span) as usize;
        &self.buf[off..off + self.len]
    }
}

/// What every lookup does with the value: touch its first and last byte, as an application
/// reading the value would (so zero-copy engines are not credited for never touching it).
pub(crate) fn touch(sum: &mut u64, v: &[u8]) {
    *sum = sum.wrapping_add(v.len() as u64);
    if let (Some(a), Some(b)) = (v.first(), v.last()) {
        *sum = sum.wrapping_add(*a as u64 + *b as u64);
    }
}

/// Writes `order.len()` puts in transactions of `batch`.
fn fill(
    db: &dyn Engine,
    order: impl Iterator<Item = u64>,
    batch: usize,
    append: bool,
    put: &dyn Fn(u64) -> ([u8; 16], u64),
    values: &Values,
) -> Result<()> {
    let mut order = order.peekable();
    while order.peek().is_some() {
        db.write(WriteKind::Blind, &mut |w| {
            for i in order.by_ref().take(batch) {
                let (k, vi) = put(i);
                if append {
                    w.append(&k, values.get(vi))?;
                } else {
                    w.put(&k, values.get(vi))?;
                }
            }
            Ok(())
        })?;
    }
    Ok(())
}

/// Gets every key of `keys` in one read transaction; returns how many were found.
fn get_all<K: AsRef<[u8]>>(db: &dyn Engine, keys: impl Iterator<Item = K>) -> Result<u64> {
    let mut found = 0;
    let mut sum = 0;
    let mut keys = keys;
    db.read(&mut |r| {
        for k in keys.by_ref() {
            if r.get(k.as_ref(), &mut |v| touch(&mut sum, v))? {
                found += 1;
            }
        }
        Ok(())
    })?;
    black_box(sum);
    Ok(found)
}

pub(crate) fn disk_bytes(dir: &Path) -> Result<u64> {
    Ok(engines::disk_usage(dir)?.0)
}

// ---------------------------------------------------------------------------------------------
// LMDB's db_bench set.

const BATCH: usize = 1000;

fn db_bench(s: &mut Scratch, p: &Params, out: &mut Output) -> Result<()> {
    let n = p.records;
    let values = Values::compressible(100, 301);
    let seq = |i: u64| (dec_key(i), i);

    out.phase = "fillseq";
    // fillseq: sorted keys, 1000 per transaction, appended where the engine can.
    let (db, dir) = s.open("fillseq")?;
    let t = Instant::now();
    fill(&*db, 0..n, BATCH, true, &seq, &values)?;
    out.rate(
        "fillseq",
        "fillseq: sorted puts, 1000/txn, append".into(),
        n,
        t.elapsed(),
    );
    s.discard(db, &dir)?;

    out.phase = "fillrandsync";
    // fillrandsync: one put per transaction, each commit timed.
    let (db, dir) = s.open("fillrandsync")?;
    let txns = match s.cfg.class {
        ModeClass::Durable => 1000,
        ModeClass::NoFlush => 10_000,
    };
    let mut rng = Rng::new(17);
    let mut lat = Vec::with_capacity(txns);
    let t = Instant::now();
    for _ in 0..txns {
        let i = rng.below(n);
        let t1 = Instant::now();
        db.write(WriteKind::Blind, &mut |w| w.put(&dec_key(i), values.get(i)))?;
        lat.push(t1.elapsed().as_nanos() as u64);
    }
    let label = format!("fillrandsync: {txns} txns of 1 random put");
    out.latencies("fillrandsync", &label, lat, t.elapsed());
    s.discard(db, &dir)?;

    out.phase = "fillrandom";
    // fillrandom, then overwrite, reads and deletes on the same database.
    let (db, dir) = s.open("fillrandom")?;
    let order = permutation(n, 1);
    let t = Instant::now();
    fill(
        &*db,
        order.iter().map(|&i| i as u64),
        BATCH,
        false,
        &seq,
        &values,
    )?;
    out.rate(
        "fillrandom",
        "fillrandom: random puts, 1000/txn".into(),
        n,
        t.elapsed(),
    );

    if !p.quick {
        out.phase = "overwrite";
        let order = permutation(n, 2);
        let t = Instant::now();
        let rewrite = |i: u64| (dec_key(i), i + 1);
        fill(
            &*db,
            order.iter().map(|&i| i as u64),
            BATCH,
            false,
            &rewrite,
            &values,
        )?;
        out.rate(
            "overwrite",
            "overwrite: random puts on existing keys, 1000/txn".into(),
            n,
            t.elapsed(),
        );
    }

    out.phase = "readrandom";
    let order = permutation(n, 3);
    let t = Instant::now();
    let found = get_all(&*db, order.iter().map(|&i| dec_key(i as u64)))?;
    out.rate(
        "readrandom",
        "readrandom: random gets, all in one read txn".into(),
        n,
        t.elapsed(),
    );
    ensure!(found == n, "readrandom found {found} of {n} keys");

    for reverse in [false, true] {
        if reverse && p.quick {
            continue;
        }
        out.phase = "scan";
        let mut count = 0;
        let mut sum = 0;
        let t = Instant::now();
        db.read(&mut |r| {
            count = r.scan(reverse, &mut |k, v| {
                touch(&mut sum, k);
                touch(&mut sum, v);
            })?;
            Ok(())
        })?;
        let elapsed = t.elapsed();
        black_box(sum);
        ensure!(count == n, "scan found {count} of {n} pairs");
        if reverse {
            out.rate(
                "readreverse",
                "readreverse: cursor over all, backwards".into(),
                n,
                elapsed,
            );
        } else {
            out.rate(
                "readseq",
                "readseq: cursor over all, forwards".into(),
                n,
                elapsed,
            );
        }
    }

    db.sync()?;
    out.size(
        "size",
        format!("file size after fillrandom of {n} (synced)"),
        disk_bytes(&dir)?,
    );

    out.phase = "deleterandom";
    let order = permutation(n, 4);
    let t = Instant::now();
    let mut it = order.iter().map(|&i| dec_key(i as u64));
    let mut left = order.len();
    while left > 0 {
        db.write(WriteKind::Blind, &mut |w| {
            for k in it.by_ref().take(BATCH) {
                w.delete(&k)?;
            }
            Ok(())
        })?;
        left = left.saturating_sub(BATCH);
    }
    out.rate(
        "deleterandom",
        "deleterandom: random deletes, 1000/txn".into(),
        n,
        t.elapsed(),
    );
    let mut rest = 0;
    db.read(&mut |r| {
        rest = r.scan(false, &mut |_, _| {})?;
        Ok(())
    })?;
    ensure!(rest == 0, "{rest} pairs left after deleting all");
    s.discard(db, &dir)?;

    if !p.quick {
        big_values(s, n / 1000, out)?;
    }
    Ok(())
}

/// db_bench's 100 KB variants: N/1000 random puts of 100 KB values, one per transaction, then
/// random gets of them (ten passes, one read transaction).
fn big_values(s: &mut Scratch, count: u64, out: &mut Output) -> Result<()> {
    let count = count.max(10);
    let values = Values::random(100_000, 302);
    out.phase = "fillrand100K";
    let (db, dir) = s.open("fill100k")?;
    let order = permutation(count, 5);
    let t = Instant::now();
    let put = |i: u64| (dec_key(i), i);
    fill(
        &*db,
        order.iter().map(|&i| i as u64),
        1,
        false,
        &put,
        &values,
    )?;
    out.rate(
        "fill100k",
        format!("fillrand100K: {count} random 100 KB puts, 1/txn"),
        count,
        t.elapsed(),
    );

    out.phase = "readrand100K";
    let passes = 10;
    let orders: Vec<Vec<u32>> = (0..passes)
        .map(|pass| permutation(count, 6 + pass))
        .collect();
    let keys = orders.iter().flatten().map(|&i| dec_key(i as u64));
    let t = Instant::now();
    let found = get_all(&*db, keys)?;
    let gets = count * passes;
    out.rate(
        "read100k",
        format!("readrand100K: {gets} random gets of 100 KB values"),
        gets,
        t.elapsed(),
    );
    ensure!(found == gets, "read100K found {found} of {gets}");
    s.discard(db, &dir)
}

// ---------------------------------------------------------------------------------------------
// redb's benchmark phases.

fn redb_phases(s: &mut Scratch, p: &Params, out: &mut Output) -> Result<()> {
    let n = p.records;
    let values = Values::random(150, 303);
    let (mut db, dir) = s.open("redb")?;

    out.phase = "bulk load";
    // Bulk load: N inserts in one transaction (the keys are random, so the order is too).
    let t = Instant::now();
    db.write(WriteKind::Blind, &mut |w| {
        for i in 0..n {
            w.put(&rand_key(i), values.get(i))?;
        }
        Ok(())
    })?;
    out.rate(
        "bulk_load",
        format!("bulk load: {n} inserts in one txn"),
        n,
        t.elapsed(),
    );

    out.phase = "individual writes";
    // Individual writes: 1000 transactions of one insert.
    let mut lat = Vec::with_capacity(1000);
    let t = Instant::now();
    for i in n..n + 1000 {
        let t1 = Instant::now();
        db.write(WriteKind::Blind, &mut |w| {
            w.put(&rand_key(i), values.get(i))
        })?;
        lat.push(t1.elapsed().as_nanos() as u64);
    }
    out.latencies(
        "individual_writes",
        "individual writes: 1000 txns of 1 insert",
        lat,
        t.elapsed(),
    );

    out.phase = "batch writes";
    // Batch writes: 100 transactions of 1000 inserts.
    let first = n + 1000;
    let t = Instant::now();
    for b in 0..100 {
        db.write(WriteKind::Blind, &mut |w| {
            for i in first + b * 1000..first + (b + 1) * 1000 {
                w.put(&rand_key(i), values.get(i))?;
            }
            Ok(())
        })?;
    }
    out.rate(
        "batch_writes",
        "batch writes: 100 txns of 1000 inserts".into(),
        100_000,
        t.elapsed(),
    );

    out.phase = "random reads";
    // Random reads: N gets of loaded keys, one read transaction.
    let order = permutation(n, 7);
    let t = Instant::now();
    let found = get_all(&*db, order.iter().map(|&i| rand_key(i as u64)))?;
    out.rate(
        "random_reads",
        format!("random reads: {n} gets, one txn"),
        n,
        t.elapsed(),
    );
    ensure!(found == n, "random reads found {found} of {n}");

    out.phase = "range reads";
    // Random range reads: N/2 ranges from a random key, 10 pairs each.
    let ranges = (n / 2).max(1);
    let mut sum = 0;
    let mut pairs = 0;
    let t = Instant::now();
    db.read(&mut |r| {
        for &i in order.iter().take(ranges as usize) {
            pairs += r.range_from(&rand_key(i as u64), 10, &mut |k, v| {
                touch(&mut sum, k);
                touch(&mut sum, v);
            })?;
        }
        Ok(())
    })?;
    black_box(sum);
    let label = format!("random range reads: {ranges} ranges of 10 from a random key");
    out.rate("range_reads", label, ranges, t.elapsed());
    ensure!(
        pairs as u64 > ranges * 9,
        "range reads returned only {pairs} pairs"
    );

    out.phase = "threaded reads";
    // Random reads from 1 and 2 threads: N gets split between the threads.
    let thread_counts: &[usize] = if p.quick { &[2] } else { &[1, 2] };
    for &threads in thread_counts {
        let t = Instant::now();
        let chunk = order.len().div_ceil(threads);
        let found: u64 = std::thread::scope(|scope| {
            let handles: Vec<_> = order
                .chunks(chunk)
                .map(|part| {
                    let db = &*db;
                    scope.spawn(move || get_all(db, part.iter().map(|&i| rand_key(i as u64))))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("reader thread panicked"))
                .sum::<Result<u64>>()
        })?;
        let id = format!("reads_{threads}t");
        out.rate(
            &id,
            format!("random reads from {threads} thread(s): {n} gets in all"),
            n,
            t.elapsed(),
        );
        ensure!(found == n, "threaded reads found {found} of {n}");
    }

    out.phase = "removals";
    // Removals: half the keys in one transaction.
    let half = n / 2;
    let t = Instant::now();
    db.write(WriteKind::Blind, &mut |w| {
        for i in 0..half {
            w.delete(&rand_key(i))?;
        }
        Ok(())
    })?;
    out.rate(
        "removals",
        format!("removals: {half} deletes in one txn"),
        half,
        t.elapsed(),
    );

    db.sync()?;
    out.size(
        "size_before_compact",
        "file size before compaction".into(),
        disk_bytes(&dir)?,
    );
    out.phase = "compaction";
    let scratch = s.fresh_dir("compact")?;
    if let Some(bytes) = db.compact(&scratch)? {
        out.size(
            "size_after_compact",
            "file size after compaction".into(),
            bytes,
        );
    }
    std::fs::remove_dir_all(&scratch)?;
    s.discard(db, &dir)
}

// ---------------------------------------------------------------------------------------------
// ioarena's CRUD transaction.

fn crud(s: &mut Scratch, p: &Params, out: &mut Output) -> Result<()> {
    let txns = match s.cfg.class {
        ModeClass::Durable => (p.records / 100).clamp(1000, 10_000),
        ModeClass::NoFlush => (p.records / 2).max(1000),
    };
    let values = Values::random(32, 304);
    out.phase = "crud";
    let (db, dir) = s.open("crud")?;
    let mut lat = Vec::with_capacity(txns as usize);
    let mut sum = 0;
    let t = Instant::now();
    for i in 0..txns {
        let (a, b) = (hex_key(2 * i), hex_key(2 * i + 1));
        let t1 = Instant::now();
        db.write(WriteKind::ReadYourWrites, &mut |w| {
            w.put(&b, values.get(2 * i + 1))?;
            w.put(&a, values.get(2 * i))?;
            w.delete(&b)?;
            ensure!(
                w.get(&a, &mut |v| touch(&mut sum, v))?,
                "CRUD: own put not visible"
            );
            Ok(())
        })?;
        lat.push(t1.elapsed().as_nanos() as u64);
    }
    black_box(sum);
    let label = format!("CRUD: {txns} txns of put b, put a, delete b, get a");
    out.latencies("crud", &label, lat, t.elapsed());
    db.sync()?;
    out.size(
        "size",
        format!("file size after {txns} CRUD txns (synced)"),
        disk_bytes(&dir)?,
    );
    s.discard(db, &dir)
}
