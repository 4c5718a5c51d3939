//! `cairn stat`: what `mdb_stat` shows, with the same option letters and the same line labels
//! (so scripts that grep "Entries:" keep working), or one JSON object with `--json`.
//!
//! Sections appear in `mdb_stat`'s order: environment (-e), readers (-r), free pages (-f),
//! then database statistics: the main database, every named one (-a) or one (-s). As in
//! `mdb_stat`, -r alone prints only the reader table.

use crate::cli::StatArgs;
use crate::dumpfmt::flag_names;
use crate::readers::{self, Readers};
use crate::{CliResult, Context, EnvPath};
use cairn::{Env, FreeRun, RoTxn, Stat};
use serde_json::{json, Value};
use std::io::Write;

/// One database's figures.
struct DbStat {
    name: Option<String>,
    flags: u32,
    stat: Stat,
}

/// The environment section: the engine's figures and the map size worked out from them.
struct EnvSection {
    info: cairn::EnvInfo,
    /// See [`map_size`].
    map_size: u64,
}

/// Everything asked for, gathered from one snapshot.
struct Report {
    env: Option<EnvSection>,
    readers: Option<Readers>,
    free: Option<(Stat, Vec<FreeRun>)>,
    dbs: Vec<DbStat>,
}

/// Runs `cairn stat`.
pub fn run(a: &StatArgs, path: EnvPath, out: &mut dyn Write) -> CliResult {
    let env = path.open_read()?;
    let report = gather(a, &env, &path.data_file())?;
    if a.json {
        let v = to_json(&report, a.freelist);
        writeln!(out, "{v:#}").ctx(|| "writing the output".into())
    } else {
        print_text(&report, a.freelist, a.readers, out).ctx(|| "writing the output".into())
    }
}

fn gather(a: &StatArgs, env: &Env, data: &std::path::Path) -> CliResult<Report> {
    // Readers are listed before this command's own snapshot exists, as mdb_stat does.
    let readers = if a.readers > 0 {
        Some(readers::list(env, a.readers > 1)?)
    } else {
        None
    };
    let info = if a.env {
        let info = env.info().ctx(|| "reading environment info".into())?;
        let map_size = map_size(&info, fs_available(data));
        Some(EnvSection { info, map_size })
    } else {
        None
    };
    let mut report = Report {
        env: info,
        readers,
        free: None,
        dbs: Vec::new(),
    };
    if a.readers > 0 && !(a.all || a.subdb.is_some() || a.freelist > 0) {
        return Ok(report);
    }
    let r = env
        .read_txn()
        .ctx(|| "beginning a read transaction".into())?;
    if a.freelist > 0 {
        let runs = r.free_runs().ctx(|| "reading the free tree".into())?;
        report.free = Some((r.free_tree_stat(), runs));
    }
    let first = db_stat(&r, a.subdb.as_deref())?;
    report.dbs.push(first);
    if a.all {
        for name in r.db_names().ctx(|| "listing databases".into())? {
            report.dbs.push(db_stat(&r, Some(&name))?);
        }
    }
    Ok(report)
}

fn db_stat(r: &RoTxn<'_>, name: Option<&str>) -> CliResult<DbStat> {
    let what = || format!("database {}", name.unwrap_or("(main)"));
    let db = r.open_db(name).ctx(what)?;
    Ok(DbStat {
        name: name.map(str::to_string),
        flags: r.db_flags(db).ctx(what)?.bits(),
        stat: r.stat(db).ctx(what)?,
    })
}

fn prstat(out: &mut dyn Write, s: &Stat) -> std::io::Result<()> {
    writeln!(out, "  Tree depth: {}", s.depth)?;
    writeln!(out, "  Branch pages: {}", s.branch_pages)?;
    writeln!(out, "  Leaf pages: {}", s.leaf_pages)?;
    writeln!(out, "  Overflow pages: {}", s.overflow_pages)?;
    writeln!(out, "  Entries: {}", s.entries)
}

/// Address space a handle reserves for its map unless told otherwise (`EnvOptions::map_reserve`'s
/// default, also the C library's): without a size limit the file can never grow past it.
pub const DEFAULT_RESERVE: u64 = 1 << 40;

/// The "Map size" line: what LMDB calls the map size, the most the data file may grow to.
///
/// In LMDB it is the size limit (mdb_env_set_mapsize), recorded in the file by the last writer,
/// so `mdb_stat -e` prints that limit (10485760 for a file of 12288 bytes that mdb_load made
/// with `mapsize=10485760`), and `Max pages` is it divided by the page size: writes past it
/// fail with MDB_MAP_FULL. A Cairn file has no map size: it grows on demand, and a size limit
/// (EnvOptions::max_size, mdb_env_set_mapsize, py `map_size`) belongs to the handle that set
/// it; it is recorded neither in the file nor in the lock file. So the line is:
/// - the size limit when the engine reports one (`EnvInfo::max_size`, never less than the
///   file). This command's read-only handle sets none, so today that happens only if the
///   engine comes to record a writer's limit where other processes see it, as LMDB does;
/// - otherwise what the file may grow to: its size plus the space the file system still has
///   for it (statvfs's f_bavail, `available`), capped by [`DEFAULT_RESERVE`], the most a
///   handle opened without a limit lets it grow to. When the free space is unknown, the cap.
///
/// Unlike LMDB's, this figure moves as the disk fills: `Number of pages used` over `Max pages`
/// is then how close the file is to the point where writes fail, which is what LMDB users
/// read it for. It is a multiple of the page size, so `Max pages` is exact.
pub fn map_size(i: &cairn::EnvInfo, available: Option<u64>) -> u64 {
    let ps = i.page_size as u64;
    let bytes = match i.max_size {
        Some(limit) => limit.max(i.file_size),
        None => available.map_or(DEFAULT_RESERVE, |a| {
            i.file_size.saturating_add(a).min(DEFAULT_RESERVE)
        }),
    };
    (bytes / ps * ps).max((i.last_pgno + 1) * ps)
}

/// Bytes the file system holding `path` still has for an unprivileged writer, if it says.
fn fs_available(path: &std::path::Path) -> Option<u64> {
    let v = rustix::fs::statvfs(path).ok()?;
    Some(v.f_bavail.saturating_mul(v.f_frsize))
}

fn print_text(rep: &Report, ff: u8, rr: u8, out: &mut dyn Write) -> std::io::Result<()> {
    if let Some(e) = &rep.env {
        let i = &e.info;
        writeln!(out, "Environment Info")?;
        // Cairn never maps at a fixed address (LMDB's MDB_FIXEDMAP).
        writeln!(out, "  Map address: (nil)")?;
        writeln!(out, "  Map size: {}", e.map_size)?;
        writeln!(out, "  Page size: {}", i.page_size)?;
        writeln!(out, "  Max pages: {}", e.map_size / i.page_size as u64)?;
        writeln!(out, "  Number of pages used: {}", i.last_pgno + 1)?;
        writeln!(out, "  Last transaction ID: {}", i.last_txnid)?;
        writeln!(out, "  Max readers: {}", i.max_readers)?;
        writeln!(out, "  Number of readers used: {}", i.readers)?;
    }
    if let Some(rd) = &rep.readers {
        writeln!(out, "Reader Table Status")?;
        readers::print_table(&rd.before, out)?;
        if rr > 1 {
            writeln!(out, "  {} stale readers cleared.", rd.cleared)?;
            readers::print_table(&rd.after, out)?;
        }
    }
    if let Some((st, runs)) = &rep.free {
        writeln!(out, "Freelist Status")?;
        prstat(out, st)?;
        if ff > 1 {
            for run in runs {
                let state = if run.freed == 0 {
                    "reusable".to_string()
                } else {
                    format!("freed by transaction {}", run.freed)
                };
                writeln!(
                    out,
                    "    Run at page {}, {} pages, {state}",
                    run.start, run.len
                )?;
                if ff > 2 {
                    if run.len > 1 {
                        writeln!(out, "     {:9}[{}]", run.start, run.len)?;
                    } else {
                        writeln!(out, "     {:9}", run.start)?;
                    }
                }
            }
        }
        let pages: u64 = runs.iter().map(|r| r.len).sum();
        writeln!(out, "  Free pages: {pages}")?;
    }
    for d in &rep.dbs {
        writeln!(out, "Status of {}", d.name.as_deref().unwrap_or("Main DB"))?;
        prstat(out, &d.stat)?;
    }
    Ok(())
}

fn stat_json(s: &Stat) -> Value {
    json!({
        "page_size": s.page_size,
        "depth": s.depth,
        "branch_pages": s.branch_pages,
        "leaf_pages": s.leaf_pages,
        "overflow_pages": s.overflow_pages,
        "entries": s.entries,
    })
}

fn to_json(rep: &Report, ff: u8) -> Value {
    let mut v = serde_json::Map::new();
    if let Some(e) = &rep.env {
        let i = &e.info;
        v.insert(
            "environment".into(),
            json!({
                "map_size": e.map_size,
                "max_pages": e.map_size / i.page_size as u64,
                "page_size": i.page_size,
                "file_size": i.file_size,
                "max_size": i.max_size,
                "pages_used": i.last_pgno + 1,
                "last_txnid": i.last_txnid,
                "max_readers": i.max_readers,
                "readers_used": i.readers,
                "free_pages": i.free_pages,
                "pending_pages": i.pending_pages,
            }),
        );
    }
    if let Some(rd) = &rep.readers {
        v.insert("readers".into(), readers::to_json(rd));
    }
    if let Some((st, runs)) = &rep.free {
        let mut f = serde_json::Map::new();
        f.insert("tree".into(), stat_json(st));
        f.insert(
            "free_pages".into(),
            json!(runs.iter().map(|r| r.len).sum::<u64>()),
        );
        if ff > 1 {
            f.insert(
                "runs".into(),
                runs.iter()
                    .map(|r| json!({"start": r.start, "len": r.len, "birth": r.birth, "freed": r.freed}))
                    .collect(),
            );
        }
        v.insert("freelist".into(), Value::Object(f));
    }
    if !rep.dbs.is_empty() {
        v.insert(
            "databases".into(),
            rep.dbs
                .iter()
                .map(|d| {
                    let mut o = stat_json(&d.stat);
                    o["name"] = json!(d.name);
                    o["flags"] = json!(flag_names(d.flags));
                    o
                })
                .collect(),
        );
    }
    Value::Object(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(file_size: u64, max_size: Option<u64>) -> cairn::EnvInfo {
        cairn::EnvInfo {
            page_size: 4096,
            file_size,
            max_size,
            last_pgno: 5,
            last_txnid: 1,
            readers: 0,
            max_readers: 126,
            free_pages: 0,
            pending_pages: 0,
        }
    }

    #[test]
    fn map_size_is_the_limit_or_what_the_file_may_grow_to() {
        // A limit is the map size, whatever the disk has, as in LMDB.
        assert_eq!(
            map_size(&info(1 << 20, Some(10 << 20)), Some(1 << 30)),
            10 << 20
        );
        assert_eq!(map_size(&info(1 << 20, Some(10 << 20)), None), 10 << 20);
        // A limit below the file only stops growth: the file is the map.
        assert_eq!(map_size(&info(1 << 20, Some(4096)), None), 1 << 20);
        // No limit: the file and the free space of its file system, in whole pages.
        assert_eq!(map_size(&info(1 << 20, None), Some(8191)), (1 << 20) + 4096);
        // ... capped by the address space a handle reserves.
        assert_eq!(
            map_size(&info(1 << 20, None), Some(u64::MAX)),
            DEFAULT_RESERVE
        );
        assert_eq!(map_size(&info(1 << 20, None), None), DEFAULT_RESERVE);
        // Never below the pages in use.
        assert_eq!(map_size(&info(0, None), Some(0)), 6 * 4096);
    }
}
