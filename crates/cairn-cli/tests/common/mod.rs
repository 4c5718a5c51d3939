//! Helpers shared by the integration tests: run the built `cairn` binary, build environments
//! through the engine's API, read them back.
#![allow(dead_code, reason = "each test file uses a different subset")]

use cairn::{DbFlags, Env, PutFlags};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

/// A key and its value (or, for the order, their sort keys).
pub type Pair = (Vec<u8>, Vec<u8>);

/// One database: flags and records in order.
pub type Db = (u32, Vec<Pair>);

/// Contents of an environment: database name (None = main) to its database.
pub type Contents = BTreeMap<Option<String>, Db>;

/// A main database of 500 records past two levels, an integer-key "ints" and a reverse-key
/// "rev".
pub fn sample() -> Contents {
    let mut c = Contents::new();
    let main = (0..500u32)
        .map(|i| (format!("key{i:05}").into_bytes(), vec![i as u8; 300]))
        .collect();
    c.insert(None, (0, main));
    let ints = (0..100u64)
        .map(|i| (i.to_le_bytes().to_vec(), b"v".to_vec()))
        .collect();
    c.insert(Some("ints".into()), (0x08, ints));
    let rev = vec![
        (b"ab".to_vec(), b"1".to_vec()),
        (b"ba".to_vec(), b"2".to_vec()),
    ];
    c.insert(Some("rev".into()), (0x02, rev));
    c
}

/// Runs `cairn` with `args`, feeding `stdin`.
pub fn cairn(args: &[&str], stdin: &[u8]) -> Output {
    run(env!("CARGO_BIN_EXE_cairn"), args, stdin)
}

/// Runs a program with `args`, feeding `stdin`.
pub fn run(prog: &str, args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(prog)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("running {prog}: {e}"));
    let mut input = child.stdin.take().expect("stdin");
    let data = stdin.to_vec();
    let feeder = std::thread::spawn(move || {
        // The program may exit before reading everything (an early error): ignore EPIPE.
        let _ = input.write_all(&data);
    });
    let out = child.wait_with_output().expect("wait");
    feeder.join().expect("feeder");
    out
}

/// Runs `cairn` and asserts success; returns stdout.
pub fn ok(args: &[&str], stdin: &[u8]) -> Vec<u8> {
    let o = cairn(args, stdin);
    assert!(
        o.status.success(),
        "cairn {args:?} failed ({:?}): {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    o.stdout
}

/// Runs `cairn`, asserts exit status 1, returns stderr as text.
pub fn fails(args: &[&str], stdin: &[u8]) -> String {
    let o = cairn(args, stdin);
    assert_eq!(
        o.status.code(),
        Some(1),
        "cairn {args:?} should fail with 1; stdout {} stderr {}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Creates an environment holding `c`.
pub fn build(path: &Path, c: &Contents) {
    let env = Env::open(path).expect("open");
    let mut w = env.write_txn().expect("write");
    for (name, (flags, recs)) in c {
        let db = w
            .create_db(
                name.as_deref(),
                DbFlags::from_bits_retain(*flags) | DbFlags::CREATE,
            )
            .expect("create_db");
        for (k, v) in recs {
            w.put(db, k, v, PutFlags::empty()).expect("put");
        }
    }
    w.commit().expect("commit");
}

/// Reads every database of an environment. The main database's keys that name the named
/// databases (their records: page numbers, which a copy changes) are left out.
pub fn read(path: &Path) -> Contents {
    let env = Env::options().read_only(true).open(path).expect("open");
    let r = env.read_txn().expect("read");
    let mut out = Contents::new();
    let listed = r.db_names().expect("names");
    let mut names = vec![None];
    names.extend(listed.iter().cloned().map(Some));
    for name in names {
        let db = r.open_db(name.as_deref()).expect("open_db");
        let flags = r.db_flags(db).expect("flags").bits();
        let recs: Vec<_> = r
            .iter(db)
            .expect("iter")
            .map(|i| {
                let (k, v) = i.expect("item");
                (k.to_vec(), v.to_vec())
            })
            .filter(|(k, _)| name.is_some() || !listed.iter().any(|n| n.as_bytes() == k))
            .collect();
        if name.is_none() && recs.is_empty() && flags == 0 {
            continue;
        }
        out.insert(name, (flags, recs));
    }
    out
}

/// Sort key of a key or value under an integer flag (`int`) or a reverse flag (`rev`).
fn order_key(b: &[u8], int: bool, rev: bool) -> Vec<u8> {
    if int {
        // Native unsigned integers, 4 or 8 bytes (tests use one width per database).
        let mut a = [0u8; 8];
        a[..b.len()].copy_from_slice(b);
        u64::from_le_bytes(a).to_be_bytes().to_vec()
    } else if rev {
        b.iter().rev().copied().collect()
    } else {
        b.to_vec()
    }
}

/// Records in the order a database with `flags` keeps them: one value per key (the last one
/// put) or, with DUPSORT, every distinct pair, values sorted under their key.
pub fn normalize(flags: u32, recs: &[Pair]) -> Vec<Pair> {
    let dups = flags & 0x04 != 0;
    let mut m: BTreeMap<Pair, Pair> = BTreeMap::new();
    for (k, v) in recs {
        let kk = order_key(k, flags & 0x08 != 0, flags & 0x02 != 0);
        let vk = if dups {
            order_key(v, flags & 0x20 != 0, flags & 0x40 != 0)
        } else {
            Vec::new()
        };
        m.insert((kk, vk), (k.clone(), v.clone()));
    }
    m.into_values().collect()
}

/// One random DUPSORT database (with DUPFIXED, INTEGERDUP or REVERSEDUP or none): a few keys,
/// many values each, values within LMDB's 511-byte limit for duplicates.
pub fn dup_strategy() -> impl proptest::strategy::Strategy<Value = Db> {
    use proptest::prelude::*;
    let flags = prop_oneof![
        Just(0x04u32),
        Just(0x14),
        Just(0x24),
        Just(0x44),
        Just(0x34)
    ];
    flags.prop_flat_map(|flags| {
        let val = if flags & 0x20 != 0 {
            any::<u64>().prop_map(|v| v.to_le_bytes().to_vec()).boxed()
        } else if flags & 0x10 != 0 {
            proptest::collection::vec(any::<u8>(), 16..=16).boxed()
        } else {
            proptest::collection::vec(any::<u8>(), 1..100).boxed()
        };
        let key = proptest::collection::vec(0u8..4, 1..3);
        (Just(flags), proptest::collection::vec((key, val), 0..150))
    })
}

/// One random database: flags (none, reversekey or integerkey) and up to 150 records with keys
/// of at least `min_key` bytes (LMDB refuses empty keys) and values of any size, some past a
/// page (overflow pages).
pub fn db_strategy(min_key: usize) -> impl proptest::strategy::Strategy<Value = Db> {
    use proptest::prelude::*;
    prop_oneof![Just(0u32), Just(0x02), Just(0x08)].prop_flat_map(move |flags| {
        let key = if flags == 0x08 {
            any::<u64>().prop_map(|k| k.to_le_bytes().to_vec()).boxed()
        } else {
            proptest::collection::vec(any::<u8>(), min_key..64).boxed()
        };
        let val = prop_oneof![
            8 => proptest::collection::vec(any::<u8>(), 0..200),
            1 => proptest::collection::vec(any::<u8>(), 4000..9000),
        ];
        (Just(flags), proptest::collection::vec((key, val), 0..150))
    })
}

/// The figure after `label: ` in `cairn stat` / `mdb_stat` text.
pub fn figure(out: &str, label: &str) -> u64 {
    let line = out
        .lines()
        .find_map(|l| l.trim_start().strip_prefix(label)?.strip_prefix(": "))
        .unwrap_or_else(|| panic!("no {label:?} in\n{out}"));
    line.parse()
        .unwrap_or_else(|e| panic!("{label}: {line:?}: {e}"))
}
