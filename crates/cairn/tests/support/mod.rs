//! Shared by the hostile-file tests, the concurrency tests, the fuzz-replay test and the fuzz
//! targets (which include this file by path): a reader that walks everything a database holds
//! through every read API, and the judge of what a damaged file may do.
//!
//! The walk's contract, checked here for every input, however hostile:
//! - nothing panics (the callers run it under `catch_unwind` or a fuzzer);
//! - every failure is a typed error of the file kind ([`is_file_error`]);
//! - when the checker passes, every read agrees: forward and backward iteration, point gets and
//!   `stat` describe the same entries. A disagreement there is wrong data served silently, and
//!   panics with a description (a finding).

#![allow(dead_code, reason = "each test binary uses a different part")]

use cairn::storage::{Fault, SimStorage};
use cairn::{Database, Env, Error, PutFlags};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Entries of one database.
pub type Table = BTreeMap<Vec<u8>, Vec<u8>>;
/// Every database of a snapshot by name ("" is the main database).
pub type Tables = BTreeMap<String, Table>;

/// Whether an error is one a damaged or foreign file may legitimately produce.
pub fn is_file_error(e: &Error) -> bool {
    matches!(
        e,
        Error::Corrupted { .. } | Error::NotCairn { .. } | Error::VersionMismatch { .. }
    )
}

fn check_err(e: Error, what: &str) -> Error {
    assert!(
        is_file_error(&e) || matches!(e, Error::Io { .. } | Error::MapFull { .. }),
        "{what}: unexpected error kind {e:?}"
    );
    e
}

/// Reads every database of the current snapshot every way: stat, iteration in both
/// directions, a point get of every key, a range from the middle, the checker. Returns the
/// contents if the checker passes, else the first error.
pub fn read_everything(env: &Env) -> Result<Tables, Error> {
    let r = env.read_txn().map_err(|e| check_err(e, "read_txn"))?;
    // Reads first, whatever they give: they must not panic on a file the checker rejects.
    let mut names: Vec<Option<String>> = vec![None];
    let listed = r.db_names();
    if let Ok(n) = &listed {
        names.extend(n.iter().cloned().map(Some));
    }
    let mut reads = Vec::new();
    for name in &names {
        let Ok(db) = r.open_db(name.as_deref()) else {
            reads.push((name.clone(), None));
            continue;
        };
        reads.push((name.clone(), Some(read_db(&r, db))));
    }
    let report = r.check().map_err(|e| check_err(e, "check"))?;
    if !report.is_ok() {
        return Err(Error::Corrupted {
            what: report.problems.join("; "),
        });
    }
    // The checker passed: every read must have succeeded and agreed.
    let listed = listed.unwrap_or_else(|e| panic!("checker passed but db_names failed: {e}"));
    assert_eq!(listed.len() as u64, report.databases, "db_names vs checker");
    let mut out = Tables::new();
    let mut total = 0u64;
    for (name, got) in reads {
        let label = name.clone().unwrap_or_default();
        let got = got.unwrap_or_else(|| panic!("checker passed but open_db({label:?}) failed"));
        let reads =
            got.unwrap_or_else(|e| panic!("checker passed but reading {label:?} failed: {e}"));
        let t = reads.agree();
        total += t.len() as u64;
        out.insert(label, t);
    }
    // The checker's count also covers the catalog and the free tree.
    assert!(total <= report.entries, "entries read vs checker");
    Ok(out)
}

/// What the reads of one database gave.
struct Reads {
    entries: u64,
    fwd: Vec<(Vec<u8>, Vec<u8>)>,
    back: Vec<(Vec<u8>, Vec<u8>)>,
    gets: Vec<Option<Vec<u8>>>,
    cursor_fwd: usize,
    ranged: Option<usize>,
}

impl Reads {
    /// Panics if the reads disagree (only asked once the checker passed).
    fn agree(self) -> Table {
        let fwd = self.fwd;
        assert_eq!(fwd, self.back, "forward and backward iteration differ");
        assert_eq!(fwd.len() as u64, self.entries, "iteration vs stat");
        assert_eq!(self.cursor_fwd, fwd.len(), "cursor walk vs iteration");
        for ((k, v), g) in fwd.iter().zip(&self.gets) {
            assert_eq!(g.as_deref(), Some(v.as_slice()), "get({k:?}) vs iteration");
        }
        if let Some(n) = self.ranged {
            assert_eq!(n, fwd.len() - fwd.len() / 2, "range from the middle");
        }
        for w in fwd.windows(2) {
            assert!(w[0].0 != w[1].0, "a key appears twice");
        }
        fwd.into_iter().collect()
    }
}

/// Everything one database holds, read every way; Err if a read failed.
fn read_db(r: &cairn::RoTxn<'_>, db: Database) -> Result<Reads, Error> {
    let stat = r.stat(db)?;
    // Bounded: a hostile tree may reach the same leaves many times over.
    let bound = stat.entries as usize + 1;
    let mut fwd = Vec::new();
    for e in r.iter(db)?.take(bound) {
        let (k, v) = e?;
        fwd.push((k.to_vec(), v.to_vec()));
    }
    let mut back = Vec::new();
    for e in r.iter(db)?.rev().take(bound) {
        let (k, v) = e?;
        back.push((k.to_vec(), v.to_vec()));
    }
    back.reverse();
    let mut gets = Vec::new();
    for (k, _) in &fwd {
        gets.push(r.get(db, k)?.map(<[u8]>::to_vec));
    }
    let mut c = r.cursor(db)?;
    let mut cursor_fwd = 0usize;
    let mut e = c.first()?;
    while e.is_some() && cursor_fwd < bound {
        cursor_fwd += 1;
        e = c.next()?;
    }
    let mid = fwd.get(fwd.len() / 2).map(|(k, _)| k.clone());
    let mut ranged = 0usize;
    if let Some(m) = &mid {
        for e in r.range(db, m.as_slice()..)?.take(bound) {
            e?;
            ranged += 1;
        }
    }
    Ok(Reads {
        entries: stat.entries,
        fwd,
        back,
        gets,
        cursor_fwd,
        ranged: mid.map(|_| ranged),
    })
}

/// A write transaction on a possibly damaged file: overwrite with a shorter value, delete,
/// insert enough to split pages, through a write cursor too; commit. Any outcome but a panic.
pub fn write_some(env: &Env) -> Result<(), Error> {
    let mut w = env.write_txn()?;
    let mut names: Vec<Option<String>> = vec![None];
    let listed = w.db_names()?;
    names.extend(listed.iter().cloned().map(Some));
    for name in names {
        let db = w.open_db(name.as_deref())?;
        // The main database's keys that name named databases are written only by creating
        // and dropping those (a put or delete of one is refused).
        let plain = |k: &[u8]| name.is_some() || !listed.iter().any(|n| n.as_bytes() == k);
        let keys: Vec<Vec<u8>> = w
            .iter(db)?
            .take(64)
            .map(|e| e.map(|(k, _)| k.to_vec()))
            .filter(|e| e.as_ref().map_or(true, |k| plain(k)))
            .collect::<Result<_, _>>()?;
        if let Some(k) = keys.first() {
            w.put(db, k, b"s", PutFlags::empty())?;
        }
        if let Some(k) = keys.get(keys.len() / 2) {
            w.delete(db, k)?;
        }
        for i in 0..40u32 {
            let mut k = keys.last().cloned().unwrap_or_default();
            k.extend_from_slice(&i.to_be_bytes());
            k.truncate(200);
            w.put(db, &k, &[i as u8; 300], PutFlags::empty())?;
        }
        let first = w
            .iter(db)?
            .take(64)
            .map(|e| e.map(|(k, _)| k.to_vec()))
            .find(|e| e.as_ref().map_or(true, |k| plain(k)))
            .transpose()?;
        let mut c = w.cursor_mut(db)?;
        if let Some(k) = first {
            if c.set(&k)?.is_some() {
                c.put_current(b"cursor")?;
                c.next()?;
                if c.current()?.is_some_and(|(k, _)| plain(&k)) {
                    c.del_current()?;
                }
            }
        }
    }
    w.commit()
}

/// The bytes of a data file, opened over the simulator (no file system involved).
pub fn open_image(image: &[u8]) -> Result<(Env, Arc<SimStorage>), Error> {
    let sim = Arc::new(SimStorage::from_image(image, 256 << 20)?);
    let env = Env::with_storage(sim.clone(), Env::options().max_dbs(16))?;
    Ok((env, sim))
}

/// A tiny deterministic generator for tests (splitmix64).
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    /// Next 64 bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A fault injected by the operation-sequence fuzz target.
pub fn fault_of(b: u8) -> Fault {
    match b % 3 {
        0 => Fault::DiskFull,
        1 => Fault::WriteError,
        _ => Fault::SyncError,
    }
}

// ---------------------------------------------------------------------------------------------
// The fuzz targets' logic, shared with tests/fuzz_replay.rs so CI runs a short version.

/// A small but complete database image: named databases, a branch level, overflow values, a
/// free tree. The base that target `open_walk`'s edit scripts damage.
pub fn base_image() -> &'static [u8] {
    static IMG: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    IMG.get_or_init(|| {
        let sim = Arc::new(SimStorage::new(64 << 20).expect("sim"));
        let env = Env::with_storage(sim.clone(), Env::options().max_dbs(4)).expect("env");
        let mut w = env.write_txn().expect("txn");
        let main = env.main_db();
        let side = w
            .create_db(Some("side"), cairn::DbFlags::CREATE)
            .expect("db");
        for i in 0..400u32 {
            let v = vec![i as u8; if i % 97 == 5 { 6000 } else { 30 }];
            w.put(main, format!("key{i:04}").as_bytes(), &v, PutFlags::empty())
                .expect("put");
            w.put(side, &i.to_be_bytes(), b"side", PutFlags::empty())
                .expect("put");
        }
        w.commit().expect("commit");
        let mut w = env.write_txn().expect("txn");
        for i in (0..400u32).step_by(3) {
            w.delete(main, format!("key{i:04}").as_bytes())
                .expect("del");
        }
        w.commit().expect("commit");
        drop(env);
        sim.image()
    })
}

/// Target `open_walk`: an input starting with Cairn's magic is a whole data file; any other is
/// an edit script over [`base_image`]: 5-byte edits (u32 offset, byte), and if the first byte
/// is odd every page is sealed again afterwards, so the damage passes the checksums and meets
/// the bounds checks. The file is opened through the file system, read every way and written.
pub fn open_walk(data: &[u8]) {
    let img = if data.starts_with(&cairn::format::MAGIC) {
        data.to_vec()
    } else {
        let mut img = base_image().to_vec();
        let ps = 4096;
        for e in data.get(1..).unwrap_or(&[]).chunks_exact(5) {
            let at = u32::from_le_bytes([e[0], e[1], e[2], e[3]]) as usize % img.len();
            img[at] = e[4];
        }
        if data.first().is_some_and(|b| b & 1 == 1) {
            for (pg, page) in img.chunks_exact_mut(ps).enumerate().skip(1) {
                let id = cairn::format::page_id(page).expect("page header");
                if id.kind == cairn::format::KIND_OVERFLOW && id.span != 1 {
                    continue;
                }
                cairn::format::seal_page(page, pg as u64, id.txnid);
            }
            for s in 0..cairn::format::META_SLOTS {
                cairn::format::seal_meta(&mut img[s * 512..(s + 1) * 512]);
            }
        }
        img
    };
    // In memory when the system offers it: flushes there cost nothing, fuzzing runs faster.
    let shm = std::path::Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .expect("tempdir");
    std::fs::write(dir.path().join("data.cairn"), &img).expect("write");
    let env = match Env::options()
        .max_dbs(16)
        .map_reserve(1 << 30)
        .open(dir.path())
    {
        Ok(e) => e,
        Err(e) => {
            check_err(e, "open");
            return;
        }
    };
    read_write_read(&env);
}

/// Reads everything, writes, reads again: a sound file must stay sound.
pub fn read_write_read(env: &Env) {
    let sound = read_everything(env).is_ok();
    match write_some(env) {
        Ok(()) => {
            let again = read_everything(env);
            if sound {
                again.unwrap_or_else(|e| panic!("sound file broken by a write: {e}"));
            }
        }
        Err(e) => {
            check_err(e, "write");
        }
    }
}

/// A logged environment's two files as a power loss leaves them: the data file at its last
/// flush (named databases) and the commit log holding the commits after it (puts, deletes, a
/// nested level aborted). No sorted duplicates: [`read_everything`] reads one value a key
/// (tests/logged.rs replays those). The base that target `replay_log`'s
/// edit scripts damage.
pub fn base_log() -> &'static (Vec<u8>, Vec<u8>) {
    static IMG: std::sync::OnceLock<(Vec<u8>, Vec<u8>)> = std::sync::OnceLock::new();
    IMG.get_or_init(|| {
        let data = Arc::new(SimStorage::new(64 << 20).expect("sim"));
        let log = Arc::new(SimStorage::new(1 << 20).expect("sim"));
        let opts = Env::options()
            .durability(cairn::Durability::Logged)
            .sync_every(None)
            .log_size(64 << 10)
            .max_dbs(4);
        let env = Env::with_storages(data.clone(), log.clone(), opts).expect("env");
        let main = env.main_db();
        let mut w = env.write_txn().expect("txn");
        let side = w
            .create_db(Some("side"), cairn::DbFlags::CREATE)
            .expect("db");
        let more = w
            .create_db(Some("more"), cairn::DbFlags::CREATE)
            .expect("db");
        for i in 0..100u32 {
            let k = format!("key{i:04}");
            w.put(main, k.as_bytes(), b"base", PutFlags::empty())
                .expect("put");
        }
        w.commit().expect("commit");
        env.sync().expect("sync");
        let flushed = data.image();
        for t in 0..6u32 {
            let mut w = env.write_txn().expect("txn");
            for i in 0..8 {
                let k = format!("key{:04}", (t * 37 + i * 11) % 120);
                w.put(main, k.as_bytes(), &[t as u8; 20], PutFlags::empty())
                    .expect("put");
                w.put(side, &(t * 8 + i).to_be_bytes(), b"s", PutFlags::empty())
                    .expect("put");
                w.put(more, format!("{t}{i}").as_bytes(), b"m", PutFlags::empty())
                    .expect("put");
            }
            w.delete(main, format!("key{:04}", t * 13).as_bytes())
                .expect("del");
            w.delete_pair(more, format!("{t}0").as_bytes(), b"m")
                .expect("del");
            {
                let mut n = w.nested().expect("nested");
                n.put(main, b"aborted", b"x", PutFlags::empty())
                    .expect("put");
            }
            w.commit().expect("commit");
        }
        let records = log.image();
        std::mem::forget(env); // no closing flush: the log holds the commits
        (flushed, records)
    })
}

/// Target `replay_log`: an edit script (5-byte edits: u32 offset, byte) over [`base_log`]'s
/// log; if the first byte is odd every record is sealed again afterwards, so the damage passes
/// the checksums and meets the decoders. The first open replays what it can: a typed error of
/// the file kind, or an environment that reads, writes and reads again soundly.
pub fn replay_log(data: &[u8]) {
    let (flushed, base) = base_log();
    let mut log = base.clone();
    for e in data.get(1..).unwrap_or(&[]).chunks_exact(5) {
        let at = u32::from_le_bytes([e[0], e[1], e[2], e[3]]) as usize % log.len().max(1);
        if let Some(b) = log.get_mut(at) {
            *b = e[4];
        }
    }
    if data.first().is_some_and(|b| b & 1 == 1) {
        cairn::wal::reseal_all(&mut log);
    }
    let d = Arc::new(SimStorage::from_image(flushed, 64 << 20).expect("sim"));
    let l = Arc::new(SimStorage::from_image(&log, 1 << 20).expect("sim"));
    match Env::with_storages(d, l, Env::options().max_dbs(8)) {
        Ok(env) => read_write_read(&env),
        Err(e) => drop(check_err(e, "replay")),
    }
}

/// Target `decode_pages`: every decoder of `cairn::format` over arbitrary bytes, as a meta
/// slot, a page of each kind at the page size the first byte picks, a database record.
pub fn decode_pages(data: &[u8]) {
    use cairn::format::{self as f, KeyCmp};
    let _ = f::Meta::decode(data);
    let _ = f::has_magic(data);
    let _ = f::DbRecord::decode(data.get(..f::DB_RECORD).unwrap_or(data));
    let ps = [4096usize, 8192, 16384, 65536][usize::from(data.first().copied().unwrap_or(0) % 4)];
    let mut page = vec![0u8; ps];
    let n = data.len().min(ps);
    page[..n].copy_from_slice(&data[..n]);
    for b in [&page[..], data] {
        let _ = f::page_id(b);
        let _ = f::verify_page(b, 1, None);
        let _ = f::read_list_page(b);
        let _ = f::overflow_value(b, 1, data.len());
        if let Ok(p) = f::Page::new(b, 1) {
            let _ = p.used_bytes();
            let _ = p.check_hints();
            for i in 0..p.nkeys() + 1 {
                let _ = p.node(i);
                let _ = p.child(i);
                let _ = p.value_range(i);
            }
            for key in [&b""[..], b"key0100", &data[..data.len().min(40)]] {
                for cmp in [KeyCmp::Bytes, KeyCmp::Reverse, KeyCmp::Integer] {
                    let _ = p.lower_bound(key, &cmp, 0);
                    let _ = p.child_index(key, &cmp);
                }
            }
        }
        // Packed leaves (DUPFIXED sub-trees), alone and against a record's value size.
        for size in [None, Some(4), Some(8)] {
            if let Ok(l) = f::PackedLeaf::new(b, 1, size) {
                for i in [0, l.nkeys().saturating_sub(1), l.nkeys(), usize::MAX] {
                    let _ = l.key(i);
                    let _ = l.values_from(i);
                }
                for key in [&b""[..], &7u64.to_le_bytes(), &data[..data.len().min(8)]] {
                    for cmp in [KeyCmp::Bytes, KeyCmp::Reverse, KeyCmp::Integer] {
                        let _ = l.lower_bound(key, &cmp);
                    }
                }
            }
        }
    }
}

/// Target `ops_model`: operation sequences against a BTreeMap model over the simulator, with
/// I/O errors injected (disk full, EIO on write, EIO on flush). An error comes back for what
/// failed; nothing committed is lost; a poisoned environment, reopened, holds either the last
/// committed state or the one whose commit failed after its record was written; reads never
/// differ from the model. Each sequence runs three times: durable; lazy with pages written in
/// place (a reopen then keeps the boot, as after a process crash); logged, with the commit
/// log on a second simulated disk that faults are injected into too (a reopen is a new boot:
/// unflushed commits come back through the log's replay).
pub fn ops_model(data: &[u8]) {
    ops_model_in(data, cairn::Durability::Durable);
    ops_model_in(data, cairn::Durability::Lazy);
    ops_model_in(data, cairn::Durability::Logged);
}

fn ops_model_in(data: &[u8], mode: cairn::Durability) {
    let lazy = mode == cairn::Durability::Lazy;
    let logged = mode == cairn::Durability::Logged;
    // A small log: records stop fitting now and then, and images stay cheap to copy.
    let opts = || Env::options().durability(mode).log_size(256 << 10);
    let open = |sim: &Arc<SimStorage>, log: &Arc<SimStorage>| match logged {
        true => Env::with_storages(sim.clone(), log.clone(), opts()),
        false => Env::with_storage(sim.clone(), opts()),
    };
    let mut sim = Arc::new(SimStorage::new(64 << 20).expect("sim"));
    let mut log = Arc::new(SimStorage::new(1 << 20).expect("sim"));
    sim.set_map_writes(mode != cairn::Durability::Durable);
    let mut env = open(&sim, &log).expect("env");
    let mut committed = Table::new();
    let mut i = 0;
    let byte = |i: &mut usize| {
        let b = data.get(*i).copied().unwrap_or(0);
        *i += 1;
        b
    };
    while i < data.len() {
        // One write transaction of up to 16 operations.
        let mut pending = committed.clone();
        let mut failed = false;
        let mut w = match env.write_txn() {
            Ok(w) => w,
            Err(e) => panic!("write_txn on a healthy environment: {e}"),
        };
        let db = env.main_db();
        let ops = 1 + byte(&mut i) % 16;
        let mut commit = true;
        for _ in 0..ops {
            let op = byte(&mut i);
            let k = format!("k{:03}", byte(&mut i) % 200).into_bytes();
            let r = match op % 8 {
                0..=3 => {
                    let len = if op & 0x80 != 0 {
                        5000 + usize::from(byte(&mut i)) * 40
                    } else {
                        usize::from(byte(&mut i))
                    };
                    let v = vec![op; len];
                    pending.insert(k.clone(), v.clone());
                    w.put(db, &k, &v, PutFlags::empty())
                }
                4 | 5 => {
                    pending.remove(&k);
                    w.delete(db, &k).map(|_| ())
                }
                6 => {
                    let f = byte(&mut i);
                    let disk = if logged && f & 0x40 != 0 { &log } else { &sim };
                    disk.inject(fault_of(f), u64::from(byte(&mut i) % 8));
                    Ok(())
                }
                _ => {
                    commit = op & 0x10 != 0;
                    break;
                }
            };
            if let Err(e) = r {
                assert!(
                    matches!(e, Error::Io { .. } | Error::MapFull { .. }),
                    "operation error {e:?}"
                );
                failed = true;
                break;
            }
        }
        if failed || !commit {
            drop(w);
        } else {
            match w.commit() {
                Ok(()) => committed = pending.clone(),
                Err(Error::Io { .. }) | Err(Error::MapFull { .. }) => failed = true,
                Err(e) => panic!("commit error {e:?}"),
            }
        }
        sim.heal();
        log.heal();
        // Reads see exactly the committed state, or (poisoned) a reopen decides.
        let seen = match env.read_txn() {
            Ok(_) => Some(read_main(&env)),
            Err(Error::Poisoned) => None,
            Err(e) => panic!("read_txn: {e:?}"),
        };
        match seen {
            Some(t) => assert!(t == committed, "reads differ from the committed state"),
            None => {
                assert!(failed, "poisoned without a failure");
                drop(env);
                let next = SimStorage::from_image(&sim.image(), 64 << 20).expect("sim");
                let next = if lazy { next.same_boot_as(&sim) } else { next };
                next.set_map_writes(mode != cairn::Durability::Durable);
                sim = Arc::new(next);
                log = Arc::new(SimStorage::from_image(&log.image(), 1 << 20).expect("sim"));
                env = open(&sim, &log).expect("reopen");
                let t = read_main(&env);
                assert!(
                    t == committed || t == pending,
                    "after a failed commit the file holds neither state"
                );
                committed = t;
            }
        }
    }
    let r = env.read_txn().expect("read");
    let rep = r.check().expect("check");
    assert!(rep.is_ok(), "checker: {:?}", rep.problems);
}

fn read_main(env: &Env) -> Table {
    read_everything(env).expect("sound database")[""].clone()
}
