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
    names.extend(w.db_names()?.into_iter().map(Some));
    for name in names {
        let db = w.open_db(name.as_deref())?;
        let keys: Vec<Vec<u8>> = w
            .iter(db)?
            .take(64)
            .map(|e| e.map(|(k, _)| k.to_vec()))
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
        let mut c = w.cursor_mut(db)?;
        if c.first()?.is_some() {
            c.put_current(b"cursor")?;
            c.next()?;
            if c.current()?.is_some() {
                c.del_current()?;
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

/// Opens a data file image, reads everything, then (if asked) writes and reads again: the walk
/// of fuzz target `open_walk`. Returns the contents of the first read.
pub fn walk_image(image: &[u8], write: bool) -> Result<Tables, Error> {
    let (env, _sim) = open_image(image).map_err(|e| check_err(e, "open"))?;
    let first = read_everything(&env);
    if write {
        let sound = first.is_ok();
        match write_some(&env) {
            Ok(()) => {
                let again = read_everything(&env);
                if sound {
                    // A sound file written to through the API stays sound.
                    again.unwrap_or_else(|e| panic!("sound file broken by a write: {e}"));
                }
            }
            Err(e) => {
                check_err(e, "write");
            }
        }
    }
    first
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
