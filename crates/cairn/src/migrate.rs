//! Converting an LMDB environment into Cairn's format in place: what `cairn migrate` runs, and
//! what [`EnvOptions::migrate_lmdb`] (or `CAIRN_MIGRATE_ON_OPEN=1`) runs at open.
//!
//! 1. No LMDB process may have the environment open: a write lock on the whole of LMDB's lock
//!    file is taken without waiting (every LMDB process holds a shared lock on its first byte
//!    while it has the environment open) and kept to the end, so an LMDB process that opens the
//!    environment meanwhile waits, then finds Cairn's file and fails with MDB_INVALID.
//! 2. LMDB's newest snapshot is read (crate `cairn-lmdb`) and every database is written, same
//!    names, flags and page size, into `DATA.cairn-migrate` beside LMDB's data file, appended in
//!    LMDB's order in transactions of at most [`BATCH_PAIRS`] pairs or [`BATCH_BYTES`] bytes.
//! 3. Verification: each database's pair count against LMDB's record, and the new file's pairs
//!    read back against that count and an XXH3 digest of the pairs read from LMDB.
//! 4. The swap, each step followed by a directory sync: `link(DATA, DATA.lmdb-backup)` (unless
//!    no backup is wanted), `rename(DATA.cairn-migrate, DATA)` (the commit point: before it the
//!    LMDB environment is untouched, after it the Cairn one is complete), then LMDB's lock file
//!    is removed (Cairn makes its own at the next open). Leftovers of a killed run (the staging
//!    file, a backup link to the same data file) are removed by the next run.

use crate::{Database, DbFlags, Durability, Env, EnvOptions, PutFlags};
use cairn_lmdb::{DbRecord, LmdbEnv};
use std::collections::HashSet;
use std::hash::Hasher;
use std::path::{Path, PathBuf};
use twox_hash::XxHash3_64;

/// Pairs per write transaction.
pub const BATCH_PAIRS: u64 = 100_000;
/// Key and value bytes per write transaction.
pub const BATCH_BYTES: u64 = 64 << 20;

/// Why a migration did not happen or failed. In every case but [`MigrateError::Swap`] the LMDB
/// environment is untouched.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum MigrateError {
    /// An LMDB process has the environment open.
    #[error("{path}: an LMDB process has the environment open{}; close it and run again",
        if pids.is_empty() { String::new() } else {
            format!(" (processes in its reader table: {})",
                pids.iter().map(u32::to_string).collect::<Vec<_>>().join(", "))
        })]
    Busy {
        /// The environment.
        path: String,
        /// Live pids of LMDB's reader table.
        pids: Vec<u32>,
    },
    /// LMDB's environment could not be read (damaged, or a layout the reader does not read).
    #[error("{path} (LMDB environment): {source}")]
    Lmdb {
        /// The environment.
        path: String,
        /// The reader's error, naming the page.
        #[source]
        source: cairn_lmdb::Error,
    },
    /// Writing or reading the new file failed.
    #[error("{what}: {source}")]
    Engine {
        /// What was being done.
        what: String,
        /// The engine's error.
        #[source]
        source: crate::Error,
    },
    /// A file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The new file does not hold what LMDB's held (a bug; nothing was swapped).
    #[error("verification failed: {0}")]
    Verify(String),
    /// Something the user must sort out first (a backup name taken, a name Cairn cannot hold).
    #[error("{0}")]
    Refused(String),
}

/// The files a migration of `path` reads and writes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigratePlan {
    /// LMDB's data file, replaced.
    pub data: PathBuf,
    /// LMDB's lock file, removed at the end.
    pub lock: PathBuf,
    /// Where the Cairn file is written and verified first.
    pub staging: PathBuf,
    /// Where LMDB's data file is kept (a hard link made before the swap).
    pub backup: PathBuf,
}

impl MigratePlan {
    /// The files for the LMDB environment at `path` (`no_subdir`: the path is the data file;
    /// None: a regular file is, a directory holds `data.mdb`).
    pub fn new(path: &Path, no_subdir: Option<bool>) -> MigratePlan {
        let (data, lock) = cairn_lmdb::files(path, no_subdir);
        let with = |suffix: &str| {
            let mut s = data.as_os_str().to_owned();
            s.push(suffix);
            PathBuf::from(s)
        };
        MigratePlan {
            staging: with(".cairn-migrate"),
            backup: with(".lmdb-backup"),
            data,
            lock,
        }
    }
}

/// How to migrate.
#[derive(Clone, Copy, Debug)]
pub struct MigrateOptions {
    /// Keep LMDB's data file as `DATA.lmdb-backup` (default true).
    pub backup: bool,
    /// Whether the path is the data file (see [`MigratePlan::new`]).
    pub no_subdir: Option<bool>,
}

impl Default for MigrateOptions {
    fn default() -> Self {
        MigrateOptions {
            backup: true,
            no_subdir: None,
        }
    }
}

/// What a migration did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MigrateReport {
    /// Databases written, the main one included.
    pub databases: usize,
    /// Pairs written and verified (the named databases' records of the main database apart).
    pub records: u64,
    /// Where LMDB's data file was kept.
    pub backup: Option<PathBuf>,
}

/// The phase a progress call reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Copying: the total pairs to copy, once, before the first [`Phase::Copied`].
    Total,
    /// Pairs copied since the last call.
    Copied,
    /// Pairs verified since the last call.
    Verified,
}

/// A test hook: with `CAIRN_MIGRATE_FAILPOINT=NAME` the process exits at once, without any
/// cleanup, at the named point: `copied`, `verified`, `linked`, `renamed`, `done`.
fn failpoint(name: &str) {
    if std::env::var("CAIRN_MIGRATE_FAILPOINT").is_ok_and(|v| v == name) {
        std::process::exit(137);
    }
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> MigrateError {
    let what = what.into();
    move |source| MigrateError::Io { what, source }
}

fn sync_dir(file: &Path) -> Result<(), MigrateError> {
    let dir = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::File::open(&dir)
        .and_then(|d| d.sync_all())
        .map_err(io(format!("syncing directory {}", dir.display())))
}

fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(x), Ok(y)) => x.dev() == y.dev() && x.ino() == y.ino(),
        _ => false,
    }
}

/// One database to copy.
struct Job {
    name: Option<String>,
    rec: DbRecord,
}

/// Converts the LMDB environment at `path` into Cairn's format in place (see the module's
/// documentation for the steps and what a kill at each leaves). `progress` hears the pairs
/// copied and verified.
pub fn migrate_lmdb(
    path: &Path,
    opts: MigrateOptions,
    progress: &mut dyn FnMut(Phase, u64),
) -> Result<MigrateReport, MigrateError> {
    let plan = MigratePlan::new(path, opts.no_subdir);
    let label = path.display().to_string();
    let lmdb_err = |source| MigrateError::Lmdb {
        path: label.clone(),
        source,
    };
    let _held = cairn_lmdb::lock::EnvLock::try_acquire(&plan.lock)
        .map_err(lmdb_err)?
        .map_err(|b| MigrateError::Busy {
            path: label.clone(),
            pids: b.pids,
        })?;
    if plan.staging.exists() {
        std::fs::remove_file(&plan.staging).map_err(io(format!(
            "removing the leftover {}",
            plan.staging.display()
        )))?;
    }
    if opts.backup && plan.backup.exists() {
        if same_file(&plan.backup, &plan.data) {
            std::fs::remove_file(&plan.backup).map_err(io(format!(
                "removing the leftover {}",
                plan.backup.display()
            )))?;
        } else {
            return Err(MigrateError::Refused(format!(
                "{} exists already: move it away (or migrate without a backup)",
                plan.backup.display()
            )));
        }
    }
    let env = LmdbEnv::open_files(&plan.data, &plan.lock).map_err(lmdb_err)?;
    let named = env.named_dbs().map_err(lmdb_err)?;
    let mut jobs = vec![Job {
        name: None,
        rec: env.main_db(),
    }];
    for d in &named {
        let name = String::from_utf8(d.name.clone()).map_err(|_| {
            MigrateError::Refused(format!(
                "named database {:?}: its name is not UTF-8, which Cairn's names must be",
                d.name_lossy()
            ))
        })?;
        jobs.push(Job {
            name: Some(name),
            rec: d.record,
        });
    }
    let names: HashSet<Vec<u8>> = named.iter().map(|d| d.name.clone()).collect();
    let total = jobs
        .iter()
        .map(|j| j.rec.entries)
        .sum::<u64>()
        .saturating_sub(names.len() as u64);
    progress(Phase::Total, total);
    let dst = Env::options()
        .no_subdir(true)
        .no_lock(true)
        .page_size(env.page_size().clamp(4096, 65536))
        .durability(Durability::Lazy)
        .sync_every(None)
        .max_dbs(u32::try_from(jobs.len() + 1).unwrap_or(u32::MAX))
        .open(&plan.staging)
        .map_err(|source| MigrateError::Engine {
            what: format!("creating {}", plan.staging.display()),
            source,
        })?;
    let checked = copy_all(&env, &label, &dst, &jobs, &names, progress).and_then(|d| {
        failpoint("copied");
        verify(&dst, &jobs, &d, progress)?;
        dst.sync().map_err(|source| MigrateError::Engine {
            what: format!("syncing {}", plan.staging.display()),
            source,
        })?;
        Ok(d)
    });
    drop(dst);
    let digests = match checked {
        Ok(d) => d,
        Err(e) => {
            let _ = std::fs::remove_file(&plan.staging);
            return Err(e);
        }
    };
    std::fs::File::open(&plan.staging)
        .and_then(|f| f.sync_all())
        .map_err(io(format!("syncing {}", plan.staging.display())))?;
    failpoint("verified");
    if opts.backup {
        std::fs::hard_link(&plan.data, &plan.backup).map_err(io(format!(
            "linking {} to {}",
            plan.data.display(),
            plan.backup.display()
        )))?;
        sync_dir(&plan.data)?;
        failpoint("linked");
    }
    std::fs::rename(&plan.staging, &plan.data).map_err(io(format!(
        "renaming {} to {}",
        plan.staging.display(),
        plan.data.display()
    )))?;
    sync_dir(&plan.data)?;
    failpoint("renamed");
    match std::fs::remove_file(&plan.lock) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(io(format!(
                "removing LMDB's lock file {}",
                plan.lock.display()
            ))(e))
        }
    }
    failpoint("done");
    Ok(MigrateReport {
        databases: jobs.len(),
        records: digests.iter().map(|d| d.0).sum(),
        backup: opts.backup.then_some(plan.backup),
    })
}

/// A database's pair count and digest.
type Digest = (u64, u64);

/// The digest of a database's pairs: XXH3-64 over each pair's key length, key, value length and
/// value, in order. Small pairs are gathered into a buffer and hashed in large pieces (the
/// streaming hasher's cost is per call).
struct PairHash {
    h: XxHash3_64,
    buf: Vec<u8>,
}

impl PairHash {
    fn new() -> PairHash {
        PairHash {
            h: XxHash3_64::with_seed(0),
            buf: Vec::with_capacity(1 << 16),
        }
    }

    fn add(&mut self, k: &[u8], v: &[u8]) {
        self.buf.extend_from_slice(&(k.len() as u64).to_le_bytes());
        self.buf.extend_from_slice(k);
        self.buf.extend_from_slice(&(v.len() as u64).to_le_bytes());
        if v.len() > 4096 {
            self.h.write(&self.buf);
            self.buf.clear();
            self.h.write(v);
        } else {
            self.buf.extend_from_slice(v);
        }
        if self.buf.len() >= 1 << 16 {
            self.h.write(&self.buf);
            self.buf.clear();
        }
    }

    fn finish(mut self) -> u64 {
        self.h.write(&self.buf);
        self.h.finish()
    }
}

fn engine(what: impl FnOnce() -> String) -> impl FnOnce(crate::Error) -> MigrateError {
    move |source| MigrateError::Engine {
        what: what(),
        source,
    }
}

fn copy_all(
    env: &LmdbEnv,
    label: &str,
    dst: &Env,
    jobs: &[Job],
    names: &HashSet<Vec<u8>>,
    progress: &mut dyn FnMut(Phase, u64),
) -> Result<Vec<Digest>, MigrateError> {
    let mut digests = Vec::with_capacity(jobs.len());
    for job in jobs {
        let db_label = job.name.as_deref().unwrap_or("(main)");
        let flags = DbFlags::from_bits_retain(u32::from(job.rec.db_flags())) | DbFlags::CREATE;
        let dupsort = flags.contains(DbFlags::DUP_SORT);
        let mut txn = dst
            .write_txn()
            .map_err(engine(|| "beginning a write transaction".into()))?;
        let db: Database = txn
            .create_db(job.name.as_deref(), flags)
            .map_err(engine(|| format!("creating database {db_label}")))?;
        let mut pairs = if job.name.is_none() {
            env.main_pairs()
        } else {
            env.pairs(&job.rec)
        };
        let mut h = PairHash::new();
        let (mut n, mut in_txn, mut bytes) = (0u64, 0u64, 0u64);
        let mut last_key: Vec<u8> = Vec::new();
        loop {
            let (k, v) = match pairs.next() {
                Ok(Some(kv)) => kv,
                Ok(None) => break,
                Err(source) => {
                    return Err(MigrateError::Lmdb {
                        path: label.to_string(),
                        source,
                    })
                }
            };
            if job.name.is_none() && !names.is_empty() && names.contains(k) {
                continue;
            }
            let same = dupsort && n > 0 && last_key == k;
            let pf = if same {
                PutFlags::APPEND_DUP
            } else {
                PutFlags::APPEND
            };
            txn.put(db, k, v, pf).map_err(engine(|| {
                format!("writing database {db_label}, record {}", n + 1)
            }))?;
            h.add(k, v);
            if dupsort {
                last_key.clear();
                last_key.extend_from_slice(k);
            }
            n += 1;
            in_txn += 1;
            bytes += (k.len() + v.len()) as u64;
            if in_txn >= BATCH_PAIRS || bytes >= BATCH_BYTES {
                txn.commit().map_err(engine(|| "committing".into()))?;
                progress(Phase::Copied, in_txn);
                txn = dst
                    .write_txn()
                    .map_err(engine(|| "beginning a write transaction".into()))?;
                (in_txn, bytes) = (0, 0);
            }
        }
        txn.commit().map_err(engine(|| "committing".into()))?;
        progress(Phase::Copied, in_txn);
        digests.push((n, h.finish()));
    }
    Ok(digests)
}

fn verify(
    dst: &Env,
    jobs: &[Job],
    digests: &[Digest],
    progress: &mut dyn FnMut(Phase, u64),
) -> Result<(), MigrateError> {
    let r = dst
        .read_txn()
        .map_err(engine(|| "beginning a read transaction".into()))?;
    let names: HashSet<&str> = jobs.iter().filter_map(|j| j.name.as_deref()).collect();
    let mut got_names = r
        .db_names()
        .map_err(engine(|| "listing databases".into()))?;
    got_names.sort();
    let mut want: Vec<&str> = names.iter().copied().collect();
    want.sort();
    if got_names
        .iter()
        .map(String::as_str)
        .ne(want.iter().copied())
    {
        return Err(MigrateError::Verify(format!(
            "the new file names databases {got_names:?}, LMDB's {want:?}"
        )));
    }
    for (job, &(count, digest)) in jobs.iter().zip(digests) {
        let label = job.name.as_deref().unwrap_or("(main)");
        let db = r
            .open_db(job.name.as_deref())
            .map_err(engine(|| format!("opening database {label}")))?;
        let flags = r
            .db_flags(db)
            .map_err(engine(|| format!("database {label}")))?;
        if flags.persistent().bits() != u32::from(job.rec.db_flags()) {
            return Err(MigrateError::Verify(format!(
                "database {label} has flags {:#x} in the new file, {:#x} in LMDB's",
                flags.bits(),
                job.rec.db_flags()
            )));
        }
        let want_count = if job.name.is_none() {
            job.rec.entries.saturating_sub(names.len() as u64)
        } else {
            job.rec.entries
        };
        let mut h = PairHash::new();
        let mut n = 0u64;
        for item in r
            .iter(db)
            .map_err(engine(|| format!("reading database {label}")))?
        {
            let (k, v) = item.map_err(engine(|| format!("reading database {label}")))?;
            if job.name.is_none()
                && !names.is_empty()
                && std::str::from_utf8(k).is_ok_and(|s| names.contains(s))
            {
                continue;
            }
            h.add(k, v);
            n += 1;
            if n.is_multiple_of(4096) {
                progress(Phase::Verified, 4096);
            }
        }
        progress(Phase::Verified, n % 4096);
        let same = h.finish() == digest;
        if n != want_count || count != want_count || !same {
            return Err(MigrateError::Verify(format!(
                "database {label}: LMDB's record counts {want_count} records, {count} were read and \
                 copied, the new file holds {n}{}",
                if same { "" } else { ", and their digests differ" }
            )));
        }
    }
    Ok(())
}

/// Whether migrating on open was asked for through the environment: `CAIRN_MIGRATE_ON_OPEN=1`.
pub fn on_open_from_env() -> bool {
    std::env::var("CAIRN_MIGRATE_ON_OPEN").is_ok_and(|v| v == "1")
}

impl EnvOptions {
    /// Opening an LMDB environment (LMDB's data file where this environment's would be)
    /// converts it first, in place, with a backup (see [`migrate_lmdb`]), instead of failing
    /// with [`crate::Error::LmdbFile`]. Default false; `CAIRN_MIGRATE_ON_OPEN=1` in the
    /// environment turns it on too. A read-only open never migrates.
    pub fn migrate_lmdb(mut self, yes: bool) -> Self {
        self.migrate_lmdb = yes;
        self
    }
}
