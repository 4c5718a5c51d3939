//! `cairn migrate DIR`: converts an LMDB environment into Cairn's format in place.
//!
//! 1. Refuses unless no LMDB process has the environment open: it takes a write lock on the
//!    whole of LMDB's lock file without waiting (every LMDB process holds a shared lock on its
//!    byte 0 while it has the environment open), and keeps it to the end, so an LMDB process
//!    that opens the environment meanwhile waits (and then finds Cairn's file and fails with
//!    MDB_INVALID). The reader table's live pids are named in the refusal.
//! 2. Reads the newest snapshot with the `cairn-lmdb` reader and writes every database (same
//!    names, same flags, same page size) into a new Cairn data file beside the old one
//!    (`data.mdb.cairn-migrate`, or `PATH.cairn-migrate` with -n), appending in LMDB's order,
//!    in transactions of bounded size.
//! 3. Verifies: each database's pair count against LMDB's record and the walk, and a digest of
//!    every pair (XXH3 over lengths and bytes) read back from the new file against the one
//!    taken while reading LMDB's.
//! 4. Swaps. The order, and what a kill at each point leaves:
//!    - before the swap: LMDB's environment untouched; the staging file (and a backup link) are
//!      leftovers that the next `cairn migrate` removes;
//!    - `link(data.mdb, data.mdb.lmdb-backup)` (not with --no-backup), directory synced;
//!    - `rename(data.mdb.cairn-migrate, data.mdb)`, directory synced: the commit point. Before
//!      it `data.mdb` is LMDB's file, after it Cairn's, complete and verified;
//!    - `unlink(lock.mdb)`: LMDB's lock file. Cairn makes its own at the next open (and would
//!      reinitialise a stale LMDB one: a first opener always does).
//!
//! The migrated directory holds `data.mdb` and `lock.mdb` in Cairn's format: the C library and
//! the Python package open it by those names, and `FileNames::Auto` (the `cairn` command)
//! picks them when there is no `data.cairn`.

use crate::cli::MigrateArgs;
use crate::lmdb::lmdb_err;
use crate::progress::{self, Progress};
use crate::{CliError, CliResult, Context, EnvPath};
use cairn::{Database, DbFlags, Durability, Env, PutFlags};
use cairn_lmdb::{DbRecord, LmdbEnv};
use std::collections::HashSet;
use std::hash::Hasher;
use std::io::Write;
use std::path::{Path, PathBuf};
use twox_hash::XxHash3_64;

/// Pairs per write transaction.
const BATCH_PAIRS: u64 = 100_000;
/// Key and value bytes per write transaction.
const BATCH_BYTES: u64 = 64 << 20;

/// The files a migration touches.
#[derive(Debug, Clone)]
pub struct Plan {
    /// LMDB's data file, replaced.
    pub data: PathBuf,
    /// LMDB's lock file, removed at the end.
    pub lock: PathBuf,
    /// Where the Cairn file is written first.
    pub staging: PathBuf,
    /// Where LMDB's data file is kept.
    pub backup: PathBuf,
}

impl Plan {
    /// The files for the environment at `path`.
    pub fn new(path: &EnvPath) -> Plan {
        let (data, lock) = cairn_lmdb::files(&path.path, path.no_subdir.then_some(true));
        let with = |suffix: &str| {
            let mut s = data.as_os_str().to_owned();
            s.push(suffix);
            PathBuf::from(s)
        };
        Plan {
            staging: with(".cairn-migrate"),
            backup: with(".lmdb-backup"),
            data,
            lock,
        }
    }
}

/// A test hook: `CAIRN_MIGRATE_FAILPOINT=NAME` kills this process (SIGKILL) at the named
/// point: `copied`, `verified`, `linked`, `renamed`, `done`.
fn failpoint(name: &str) {
    if std::env::var("CAIRN_MIGRATE_FAILPOINT").is_ok_and(|v| v == name) {
        let _ =
            rustix::process::kill_process(rustix::process::getpid(), rustix::process::Signal::KILL);
    }
}

fn sync_dir(file: &Path) -> CliResult {
    let dir = match file.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::File::open(&dir)
        .and_then(|d| d.sync_all())
        .ctx(|| format!("syncing directory {}", dir.display()))
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

/// Runs `cairn migrate`.
pub fn run(a: &MigrateArgs, path: EnvPath, out: &mut dyn Write) -> CliResult {
    let plan = Plan::new(&path);
    let w = || "writing the output".to_string();
    if crate::lmdb::detect(&path).is_none() {
        if (plan.data.exists() || path.path.join("data.cairn").exists()) && path.open_read().is_ok()
        {
            writeln!(
                out,
                "{}: already a Cairn environment, nothing to do",
                path.path.display()
            )
            .ctx(w)?;
            return Ok(());
        }
        return Err(CliError::Usage(format!(
            "{}: no LMDB environment here ({} is not LMDB's data file)",
            path.path.display(),
            plan.data.display()
        )));
    }
    // 1. Keep LMDB processes out, or refuse.
    let _held =
        match cairn_lmdb::lock::EnvLock::try_acquire(&plan.lock).map_err(|e| lmdb_err(&path, e))? {
            Ok(l) => l,
            Err(busy) => {
                let who = if busy.pids.is_empty() {
                    String::new()
                } else {
                    format!(
                        " (processes in its reader table: {})",
                        busy.pids
                            .iter()
                            .map(u32::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                };
                return Err(CliError::Usage(format!(
                    "{}: an LMDB process has the environment open{who}; close it and run again",
                    path.path.display()
                )));
            }
        };
    // Leftovers of an interrupted migration: the staging file, and a backup link to this
    // very data file.
    if plan.staging.exists() {
        std::fs::remove_file(&plan.staging)
            .ctx(|| format!("removing the leftover {}", plan.staging.display()))?;
    }
    if plan.backup.exists() {
        if !a.no_backup && same_file(&plan.backup, &plan.data) {
            std::fs::remove_file(&plan.backup)
                .ctx(|| format!("removing the leftover {}", plan.backup.display()))?;
        } else if !a.no_backup {
            return Err(CliError::Usage(format!(
                "{} exists already: move it away (or run with --no-backup)",
                plan.backup.display()
            )));
        }
    }
    let env = LmdbEnv::open_files(&plan.data, &plan.lock).map_err(|e| lmdb_err(&path, e))?;
    let named = env.named_dbs().map_err(|e| lmdb_err(&path, e))?;
    let mut jobs = vec![Job {
        name: None,
        rec: env.main_db(),
    }];
    for d in &named {
        let name = String::from_utf8(d.name.clone()).map_err(|_| {
            CliError::Usage(format!(
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
    let total: u64 = jobs.iter().map(|j| j.rec.entries).sum::<u64>() - names.len() as u64;
    if a.dry_run {
        writeln!(
            out,
            "would migrate {} (LMDB, page size {}, {} pages, txn {}) into Cairn's format:",
            plan.data.display(),
            env.page_size(),
            env.pages(),
            env.meta().txnid
        )
        .ctx(w)?;
        for j in &jobs {
            let own = if j.name.is_none() {
                j.rec.entries - names.len() as u64
            } else {
                j.rec.entries
            };
            let flags = crate::dumpfmt::flag_names(u32::from(j.rec.db_flags()));
            writeln!(
                out,
                "  {}: {own} records{}",
                j.name.as_deref().unwrap_or("(main)"),
                if flags.is_empty() {
                    String::new()
                } else {
                    format!(", {}", flags.join(" "))
                }
            )
            .ctx(w)?;
        }
        writeln!(
            out,
            "  write {}, verify, then rename it to {}",
            plan.staging.display(),
            plan.data.display()
        )
        .ctx(w)?;
        if a.no_backup {
            writeln!(out, "  LMDB's data file would not be kept").ctx(w)?;
        } else {
            writeln!(out, "  keep LMDB's data file as {}", plan.backup.display()).ctx(w)?;
        }
        return Ok(());
    }
    let show = progress::wanted(a.quiet, false);
    // 2. Copy.
    let digests = {
        let dst = open_staging(&plan, env.page_size(), jobs.len())?;
        let r = copy_all(&env, &path, &dst, &jobs, &names, total, show);
        let digests = match r {
            Ok(d) => d,
            Err(e) => {
                drop(dst);
                let _ = std::fs::remove_file(&plan.staging);
                return Err(e);
            }
        };
        failpoint("copied");
        // 3. Verify what the new file holds.
        if let Err(e) = verify(&dst, &jobs, &digests, total, show) {
            drop(dst);
            let _ = std::fs::remove_file(&plan.staging);
            return Err(e);
        }
        dst.sync()
            .ctx(|| format!("syncing {}", plan.staging.display()))?;
        digests
    };
    std::fs::File::open(&plan.staging)
        .and_then(|f| f.sync_all())
        .ctx(|| format!("syncing {}", plan.staging.display()))?;
    failpoint("verified");
    // 4. Swap.
    if !a.no_backup {
        std::fs::hard_link(&plan.data, &plan.backup).ctx(|| {
            format!(
                "linking {} to {}",
                plan.data.display(),
                plan.backup.display()
            )
        })?;
        sync_dir(&plan.data)?;
        failpoint("linked");
    }
    std::fs::rename(&plan.staging, &plan.data).ctx(|| {
        format!(
            "renaming {} to {}",
            plan.staging.display(),
            plan.data.display()
        )
    })?;
    sync_dir(&plan.data)?;
    failpoint("renamed");
    match std::fs::remove_file(&plan.lock) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => {
            return Err(e).ctx(|| format!("removing LMDB's lock file {}", plan.lock.display()))
        }
    }
    failpoint("done");
    let records: u64 = digests.iter().map(|d| d.0).sum();
    write!(
        out,
        "migrated {}: {} database(s), {records} records, verified",
        path.path.display(),
        jobs.len()
    )
    .ctx(w)?;
    if a.no_backup {
        writeln!(out, "; LMDB's data file removed").ctx(w)
    } else {
        writeln!(out, "; LMDB's data file kept as {}", plan.backup.display()).ctx(w)
    }
}

fn open_staging(plan: &Plan, page_size: usize, dbs: usize) -> CliResult<Env> {
    Env::options()
        .no_subdir(true)
        .no_lock(true)
        .page_size(page_size.clamp(4096, 65536))
        .durability(Durability::Lazy)
        .sync_every(None)
        .max_dbs(u32::try_from(dbs + 1).unwrap_or(u32::MAX))
        .open(&plan.staging)
        .ctx(|| format!("creating {}", plan.staging.display()))
}

/// A database's pair count and digest.
type Digest = (u64, u64);

fn hash_pair(h: &mut XxHash3_64, k: &[u8], v: &[u8]) {
    h.write(&(k.len() as u64).to_le_bytes());
    h.write(k);
    h.write(&(v.len() as u64).to_le_bytes());
    h.write(v);
}

fn copy_all(
    env: &LmdbEnv,
    path: &EnvPath,
    dst: &Env,
    jobs: &[Job],
    names: &HashSet<Vec<u8>>,
    total: u64,
    show: bool,
) -> CliResult<Vec<Digest>> {
    let pb = Progress::bar(show, total, "migrating", false);
    let mut digests = Vec::with_capacity(jobs.len());
    for job in jobs {
        let label = job.name.as_deref().unwrap_or("(main)");
        let flags = DbFlags::from_bits_retain(u32::from(job.rec.db_flags())) | DbFlags::CREATE;
        let dupsort = flags.contains(DbFlags::DUP_SORT);
        let mut txn = dst
            .write_txn()
            .ctx(|| "beginning a write transaction".into())?;
        let db: Database = txn
            .create_db(job.name.as_deref(), flags)
            .ctx(|| format!("creating database {label}"))?;
        let mut pairs = if job.name.is_none() {
            env.main_pairs()
        } else {
            env.pairs(&job.rec)
        };
        let mut h = XxHash3_64::with_seed(0);
        let (mut n, mut in_txn, mut bytes) = (0u64, 0u64, 0u64);
        let mut last_key: Vec<u8> = Vec::new();
        while let Some((k, v)) = pairs.next().map_err(|e| lmdb_err(path, e))? {
            if job.name.is_none() && names.contains(k) {
                continue;
            }
            let same = dupsort && n > 0 && last_key == k;
            let pf = if same {
                PutFlags::APPEND_DUP
            } else {
                PutFlags::APPEND
            };
            txn.put(db, k, v, pf)
                .ctx(|| format!("writing database {label}, record {}", n + 1))?;
            hash_pair(&mut h, k, v);
            if dupsort {
                last_key.clear();
                last_key.extend_from_slice(k);
            }
            n += 1;
            in_txn += 1;
            bytes += (k.len() + v.len()) as u64;
            if in_txn >= BATCH_PAIRS || bytes >= BATCH_BYTES {
                txn.commit().ctx(|| "committing".into())?;
                pb.inc(in_txn);
                txn = dst
                    .write_txn()
                    .ctx(|| "beginning a write transaction".into())?;
                (in_txn, bytes) = (0, 0);
            }
        }
        txn.commit().ctx(|| "committing".into())?;
        pb.inc(in_txn);
        digests.push((n, h.finish()));
    }
    pb.finish();
    Ok(digests)
}

fn verify(dst: &Env, jobs: &[Job], digests: &[Digest], total: u64, show: bool) -> CliResult {
    let pb = Progress::bar(show, total, "verifying", false);
    let r = dst
        .read_txn()
        .ctx(|| "beginning a read transaction".into())?;
    let names: HashSet<&str> = jobs.iter().filter_map(|j| j.name.as_deref()).collect();
    let mut got_names = r.db_names().ctx(|| "listing databases".into())?;
    got_names.sort();
    let mut want: Vec<&str> = names.iter().copied().collect();
    want.sort();
    if got_names
        .iter()
        .map(String::as_str)
        .ne(want.iter().copied())
    {
        return Err(CliError::Usage(format!(
            "verification failed: the new file names databases {got_names:?}, LMDB's {want:?}"
        )));
    }
    for (job, &(count, digest)) in jobs.iter().zip(digests) {
        let label = job.name.as_deref().unwrap_or("(main)");
        let db = r
            .open_db(job.name.as_deref())
            .ctx(|| format!("opening database {label}"))?;
        let flags = r.db_flags(db).ctx(|| format!("database {label}"))?;
        if flags.persistent().bits() != u32::from(job.rec.db_flags()) {
            return Err(CliError::Usage(format!(
                "verification failed: database {label} has flags {:#x} in the new file, {:#x} in LMDB's",
                flags.bits(),
                job.rec.db_flags()
            )));
        }
        let want_count = if job.name.is_none() {
            job.rec.entries - names.len() as u64
        } else {
            job.rec.entries
        };
        let mut h = XxHash3_64::with_seed(0);
        let mut n = 0u64;
        for item in r.iter(db).ctx(|| format!("reading database {label}"))? {
            let (k, v) = item.ctx(|| format!("reading database {label}"))?;
            if job.name.is_none() && names.contains(std::str::from_utf8(k).unwrap_or("\0")) {
                continue;
            }
            hash_pair(&mut h, k, v);
            n += 1;
            if n.is_multiple_of(4096) {
                pb.inc(4096);
            }
        }
        pb.inc(n % 4096);
        if n != want_count || count != want_count || h.finish() != digest {
            return Err(CliError::Usage(format!(
                "verification failed: database {label}: LMDB's record counts {want_count} records, \
                 {count} were read and copied, the new file holds {n}{}",
                if h.finish() != digest { ", and their digests differ" } else { "" }
            )));
        }
    }
    pb.finish();
    Ok(())
}
