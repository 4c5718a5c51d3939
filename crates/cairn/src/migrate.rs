//! Converting an LMDB environment into Cairn's format in place: what `cairn migrate` runs, and
//! what [`EnvOptions::migrate_lmdb`] (or `CAIRN_MIGRATE_ON_OPEN=1`) runs at open.
//!
//! 1. No LMDB process may have the environment open: a write lock on the whole of LMDB's lock
//!    file is taken without waiting (every LMDB process holds a shared lock on its first byte
//!    while it has the environment open) and kept to the end, so an LMDB process that opens the
//!    environment meanwhile waits, then finds Cairn's file and fails with MDB_INVALID.
//! 2. LMDB's newest snapshot is read (crate `cairn-lmdb`, on a thread of its own:
//!    `migrate/feed.rs`) and every database is written, same names, flags and page size, into
//!    `DATA.cairn-migrate` beside LMDB's data file by the bulk builder (`crate::bulk`: leaves
//!    packed in LMDB's order, branch levels bottom-up, no write transaction). The main
//!    database is read once: a named database met there is loaded whole at that point and its
//!    record placed under its name; the builder writes the commit record last and flushes the
//!    file once.
//! 3. Verification, without reading the new file back: the builder reads every pair back from
//!    the page it just built and compares it with the pair read from LMDB (an error stops the
//!    migration); each database's pair count, as read and as built, against LMDB's record;
//!    then the new file is opened as a Cairn environment (recovery verifies the last pages
//!    written, the root among them) and must open LMDB's names, with their flags and entry
//!    counts.
//! 4. The swap, each step followed by a directory sync: `link(DATA, DATA.lmdb-backup)` (unless
//!    no backup is wanted), `rename(DATA.cairn-migrate, DATA)` (the commit point: before it the
//!    LMDB environment is untouched, after it the Cairn one is complete), then LMDB's lock file
//!    is removed (Cairn makes its own at the next open). Leftovers of a killed run (the staging
//!    file, a backup link to the same data file) are removed by the next run.

mod feed;

use crate::bulk::{BulkWriter, DbLoad};
use crate::{Env, EnvOptions};
use cairn_lmdb::{DbRecord, LmdbEnv};
use feed::{Batch, Item, Msg};
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

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
    /// Copying: the total pairs to copy, first before the first [`Phase::Copied`], then again
    /// (larger) as each named database is found in the main database.
    Total,
    /// Pairs copied since the last call.
    Copied,
    /// Pairs verified since the last call.
    Verified,
}

/// A test hook: with `CAIRN_MIGRATE_FAILPOINT=NAME` the process exits at once, without any
/// cleanup, at the named point: `building` (after each database the builder finished, before
/// the new file has its commit record), `copied`, `verified`, `linked`, `renamed`, `done`.
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
    let checked = copy_all(&env, &label, &plan.staging, progress).and_then(|(jobs, d)| {
        failpoint("copied");
        verify(&plan.staging, &jobs, &d, progress)?;
        Ok((jobs, d))
    });
    let (jobs, counts) = match checked {
        Ok(d) => d,
        Err(e) => {
            let _ = std::fs::remove_file(&plan.staging);
            return Err(e);
        }
    };
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
        records: counts.iter().map(|c| c.built).sum(),
        backup: opts.backup.then_some(plan.backup),
    })
}

/// A database's pairs: read from LMDB, and placed and read back by the builder.
#[derive(Clone, Copy, Debug)]
struct Counts {
    read: u64,
    built: u64,
}

fn engine(what: impl FnOnce() -> String) -> impl FnOnce(crate::Error) -> MigrateError {
    move |source| MigrateError::Engine {
        what: what(),
        source,
    }
}

/// Pairs between two progress reports.
const PROGRESS_EVERY: u64 = 1 << 16;

/// A named database being loaded: its job's index, its load and the pairs pushed.
struct Named {
    job: usize,
    load: DbLoad,
    n: u64,
}

/// Writes every database into the new file with the bulk builder, from the batches LMDB's
/// reader thread sends (`migrate/feed.rs`): the main database's pairs, each named database
/// whole at its name's place, its record then placed under its name. Returns the databases
/// (the main one first, then the named ones in LMDB's order) and each one's counts.
fn copy_all(
    env: &LmdbEnv,
    label: &str,
    staging: &Path,
    progress: &mut dyn FnMut(Phase, u64),
) -> Result<(Vec<Job>, Vec<Counts>), MigrateError> {
    let w = BulkWriter::create(staging, env.page_size().clamp(4096, 65536))
        .map_err(engine(|| format!("creating {}", staging.display())))?;
    let (tx, rx) = sync_channel::<Msg>(feed::QUEUE);
    let (back, back_rx) = sync_channel::<Batch>(feed::QUEUE + 2);
    std::thread::scope(|s| {
        let reader = std::thread::Builder::new()
            .name("cairn-migrate-reader".into())
            .spawn_scoped(s, move || feed::run(env, tx, back_rx))
            .map_err(io("starting the LMDB reader thread"))?;
        let built = build(env, label, w, rx, back, progress);
        // The receiver is gone with `build`'s return: the reader stops at its next send.
        if reader.join().is_err() {
            return Err(MigrateError::Verify(
                "the LMDB reader thread panicked".into(),
            ));
        }
        built
    })
}

/// The builder's side of [`copy_all`].
fn build(
    env: &LmdbEnv,
    label: &str,
    mut w: BulkWriter,
    rx: Receiver<Msg>,
    back: SyncSender<Batch>,
    progress: &mut dyn FnMut(Phase, u64),
) -> Result<(Vec<Job>, Vec<Counts>), MigrateError> {
    let main_rec = env.main_db();
    let mut jobs = vec![Job {
        name: None,
        rec: main_rec,
    }];
    let mut counts = vec![Counts { read: 0, built: 0 }];
    let mut total = main_rec.entries;
    progress(Phase::Total, total);
    let mut main = w
        .database(main_rec.db_flags())
        .map_err(engine(|| "database (main)".into()))?;
    let mut named: Option<Named> = None;
    let mut unreported = 0u64;
    // Bounded: the reader sends each pair of LMDB's snapshot once, then hangs up.
    for msg in rx {
        let batch = msg.map_err(|source| MigrateError::Lmdb {
            path: label.to_string(),
            source,
        })?;
        for item in batch.items() {
            match item {
                Item::Pair(k, v) => {
                    let (load, db) = match &mut named {
                        Some(nd) => {
                            nd.n += 1;
                            (&mut nd.load, jobs[nd.job].name.as_deref())
                        }
                        None => {
                            counts[0].read += 1;
                            (&mut main, None)
                        }
                    };
                    load.push(&mut w, k, v).map_err(engine(|| {
                        format!("writing database {}, key {k:?}", db.unwrap_or("(main)"))
                    }))?;
                }
                Item::Begin(name, rec) => {
                    let name = String::from_utf8(name.to_vec()).map_err(|_| {
                        MigrateError::Refused(format!(
                            "named database {:?}: its name is not UTF-8, which Cairn's names \
                             must be",
                            String::from_utf8_lossy(name)
                        ))
                    })?;
                    let load = w
                        .database(rec.db_flags())
                        .map_err(engine(|| format!("database {name}")))?;
                    // The name was counted as one of the main database's entries.
                    total = total.saturating_sub(1) + rec.entries;
                    progress(Phase::Total, total);
                    jobs.push(Job {
                        name: Some(name),
                        rec,
                    });
                    counts.push(Counts { read: 0, built: 0 });
                    named = Some(Named {
                        job: jobs.len() - 1,
                        load,
                        n: 0,
                    });
                    continue;
                }
                Item::End => {
                    let Some(nd) = named.take() else {
                        return Err(MigrateError::Verify("a named database ended twice".into()));
                    };
                    let job = &jobs[nd.job];
                    let db_label = job.name.as_deref().unwrap_or_default();
                    let loaded = nd
                        .load
                        .finish(&mut w)
                        .map_err(engine(|| format!("writing database {db_label}")))?;
                    counts[nd.job] = Counts {
                        read: nd.n,
                        built: loaded.pairs,
                    };
                    main.push_db(&mut w, db_label.as_bytes(), &loaded.record)
                        .map_err(engine(|| format!("writing the name {db_label}")))?;
                    failpoint("building");
                    continue;
                }
            }
            unreported += 1;
            if unreported == PROGRESS_EVERY {
                progress(Phase::Copied, unreported);
                unreported = 0;
            }
        }
        // The reader makes a new batch when none comes back: a full queue is no error.
        let _ = back.try_send(batch);
    }
    progress(Phase::Copied, unreported);
    if named.is_some() {
        return Err(MigrateError::Verify(
            "LMDB's reader stopped inside a named database".into(),
        ));
    }
    let loaded = main
        .finish(&mut w)
        .map_err(engine(|| "writing database (main)".into()))?;
    counts[0].built = loaded.pairs;
    failpoint("building");
    w.finish(loaded.record)
        .map_err(engine(|| "writing the new file".into()))?;
    Ok((jobs, counts))
}

/// Checks the new file (each pair was compared as it was built): per database, the pairs read
/// and built against LMDB's record; then the file opened as a
/// Cairn environment (recovery verifies the last pages written, the root among them) opens
/// LMDB's names, with their flags and entry counts.
fn verify(
    staging: &Path,
    jobs: &[Job],
    counts: &[Counts],
    progress: &mut dyn FnMut(Phase, u64),
) -> Result<(), MigrateError> {
    let names: HashSet<&str> = jobs.iter().filter_map(|j| j.name.as_deref()).collect();
    let want_count = |job: &Job| {
        if job.name.is_none() {
            job.rec.entries.saturating_sub(names.len() as u64)
        } else {
            job.rec.entries
        }
    };
    for (job, c) in jobs.iter().zip(counts) {
        let label = job.name.as_deref().unwrap_or("(main)");
        let want = want_count(job);
        if c.read != want || c.built != want {
            return Err(MigrateError::Verify(format!(
                "database {label}: LMDB's record counts {want} records, {} were read and {} \
                 built",
                c.read, c.built
            )));
        }
    }
    let dst = Env::options()
        .no_subdir(true)
        .no_lock(true)
        .read_only(true)
        .max_dbs(u32::try_from(jobs.len() + 1).unwrap_or(u32::MAX))
        .open(staging)
        .map_err(engine(|| format!("opening {}", staging.display())))?;
    let r = dst
        .read_txn()
        .map_err(engine(|| "beginning a read transaction".into()))?;
    // Every LMDB name must open, and the main database's record must count LMDB's entries,
    // names included: its plain pairs are counted and hashed above, so it can hold no other
    // name (listing the names would walk the whole main tree).
    for job in jobs {
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
        let entries = r
            .stat(db)
            .map_err(engine(|| format!("database {label}")))?
            .entries;
        // The main database's record counts the names, as LMDB's does.
        if entries != job.rec.entries {
            return Err(MigrateError::Verify(format!(
                "database {label}: {entries} entries in the new file, {} in LMDB's",
                job.rec.entries
            )));
        }
        progress(Phase::Verified, want_count(job));
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
