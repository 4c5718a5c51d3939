//! `cairn migrate DIR`: converts an LMDB environment into Cairn's format in place.
//!
//! 1. Refuses unless no LMDB process has the environment open: it takes a write lock on the
//!    whole of LMDB's lock file without waiting (every LMDB process holds a shared lock on its
//!    byte 0 while it has the environment open), and keeps it to the end, so an LMDB process
//!    that opens the environment meanwhile waits (and then finds Cairn's file and fails with
//!    MDB_INVALID). The reader table's live pids are named in the refusal.
//! 2. Reads the newest snapshot with the `cairn-lmdb` reader and writes every database (same
//!    names, same flags, same page size) into a new Cairn data file beside the old one
//!    (`data.mdb.cairn-migrate`, or `PATH.cairn-migrate` with -n) with the engine's bulk
//!    builder (leaves packed in LMDB's order, branch levels bottom-up, bounded memory).
//! 3. Verifies: every pair as the builder reads it back from the page it built against the
//!    pair read from LMDB, each database's pair count against LMDB's record and the walk, and
//!    the new file's names, flags and counts once it is opened.
//! 4. Swaps. The order, and what a kill at each point leaves:
//!    - before the swap: LMDB's environment untouched; the staging file (and a backup link) are
//!      leftovers that the next `cairn migrate` removes;
//!    - `link(data.mdb, data.mdb.lmdb-backup)` (not with --no-backup), directory synced;
//!    - `rename(data.mdb.cairn-migrate, data.mdb)`, directory synced: the commit point. Before
//!      it `data.mdb` is LMDB's file, after it Cairn's, complete and verified;
//!    - `unlink(lock.mdb)`: LMDB's lock file. Cairn makes its own at the next open (and would
//!      reinitialise a stale LMDB one: a first opener always does).
//!
//! The work is the engine's (`cairn::migrate`, also what migrating on open runs); this module
//! adds the dry run, the progress bar and the messages.
//!
//! The migrated directory holds `data.mdb` and `lock.mdb` in Cairn's format: the C library and
//! the Python package open it by those names, and `FileNames::Auto` (the `cairn` command)
//! picks them when there is no `data.cairn`.

use crate::cli::MigrateArgs;
use crate::lmdb::lmdb_err;
use crate::progress::{self, Progress};
use crate::{CliError, CliResult, Context, EnvPath};
use cairn::migrate::{migrate_lmdb, MigrateError, MigrateOptions, MigratePlan, Phase};
use cairn_lmdb::LmdbEnv;
use std::io::Write;

/// Runs `cairn migrate`.
pub fn run(a: &MigrateArgs, path: EnvPath, out: &mut dyn Write) -> CliResult {
    let no_subdir = path.no_subdir.then_some(true);
    let plan = MigratePlan::new(&path.path, no_subdir);
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
    if a.dry_run {
        return dry_run(a, &path, &plan, out);
    }
    let show = progress::wanted(a.quiet, false);
    let mut bar = Progress::none();
    let mut verifying = false;
    let opts = MigrateOptions {
        backup: !a.no_backup,
        no_subdir,
    };
    let (mut total, mut copied) = (0, 0);
    let report = migrate_lmdb(&path.path, opts, &mut |phase, n| match phase {
        Phase::Total => {
            // Again, larger, for each named database the copy meets: the bar keeps its place.
            total = n;
            bar.finish();
            bar = Progress::bar(show, n, "migrating", false);
            bar.set(copied);
        }
        Phase::Copied => {
            copied += n;
            bar.inc(n)
        }
        Phase::Verified => {
            if !verifying {
                verifying = true;
                bar.finish();
                bar = Progress::bar(show, total, "verifying", false);
            }
            bar.inc(n)
        }
    });
    bar.finish();
    let report = report.map_err(|e| match e {
        MigrateError::Io { what, source } => CliError::Io { what, source },
        MigrateError::Engine { what, source } => CliError::Engine { what, source },
        other => CliError::Usage(other.to_string()),
    })?;
    write!(
        out,
        "migrated {}: {} database(s), {} records, verified",
        path.path.display(),
        report.databases,
        report.records
    )
    .ctx(w)?;
    match report.backup {
        Some(b) => writeln!(out, "; LMDB's data file kept as {}", b.display()).ctx(w),
        None => writeln!(out, "; LMDB's data file removed").ctx(w),
    }
}

fn dry_run(a: &MigrateArgs, path: &EnvPath, plan: &MigratePlan, out: &mut dyn Write) -> CliResult {
    let w = || "writing the output".to_string();
    let env = LmdbEnv::open_files(&plan.data, &plan.lock).map_err(|e| lmdb_err(path, e))?;
    let named = env.named_dbs().map_err(|e| lmdb_err(path, e))?;
    writeln!(
        out,
        "would migrate {} (LMDB, page size {}, {} pages, txn {}) into Cairn's format:",
        plan.data.display(),
        env.page_size(),
        env.pages(),
        env.meta().txnid
    )
    .ctx(w)?;
    let main = env.main_db();
    let mut rows = vec![(
        "(main)".to_string(),
        main.entries.saturating_sub(named.len() as u64),
        main.db_flags(),
    )];
    rows.extend(
        named
            .iter()
            .map(|d| (d.name_lossy(), d.record.entries, d.record.db_flags())),
    );
    for (name, n, flags) in rows {
        let f = crate::dumpfmt::flag_names(u32::from(flags));
        let f = if f.is_empty() {
            String::new()
        } else {
            format!(", {}", f.join(" "))
        };
        writeln!(out, "  {name}: {n} records{f}").ctx(w)?;
    }
    if let Some(busy) = cairn_lmdb::lock::read(&plan.lock)
        .ok()
        .flatten()
        .map(|l| {
            l.readers
                .iter()
                .filter(|r| r.alive)
                .map(|r| r.pid)
                .collect::<Vec<_>>()
        })
        .filter(|p| !p.is_empty())
    {
        writeln!(out, "  (live processes in LMDB's reader table: {busy:?}; the migration would refuse while one has the environment open)").ctx(w)?;
    }
    writeln!(
        out,
        "  write {}, verify, then rename it to {}",
        plan.staging.display(),
        plan.data.display()
    )
    .ctx(w)?;
    if a.no_backup {
        writeln!(out, "  LMDB's data file would not be kept").ctx(w)
    } else {
        writeln!(out, "  keep LMDB's data file as {}", plan.backup.display()).ctx(w)
    }
}
