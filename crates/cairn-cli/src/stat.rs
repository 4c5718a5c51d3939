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

/// Everything asked for, gathered from one snapshot.
struct Report {
    env: Option<cairn::EnvInfo>,
    readers: Option<Readers>,
    free: Option<(Stat, Vec<FreeRun>)>,
    dbs: Vec<DbStat>,
}

/// Runs `cairn stat`.
pub fn run(a: &StatArgs, path: EnvPath, out: &mut dyn Write) -> CliResult {
    let env = path.open_read()?;
    let report = gather(a, &env)?;
    if a.json {
        let v = to_json(&report, a.freelist);
        writeln!(out, "{v:#}").ctx(|| "writing the output".into())
    } else {
        print_text(&report, a.freelist, a.readers, out).ctx(|| "writing the output".into())
    }
}

fn gather(a: &StatArgs, env: &Env) -> CliResult<Report> {
    // Readers are listed before this command's own snapshot exists, as mdb_stat does.
    let readers = if a.readers > 0 {
        Some(readers::list(env, a.readers > 1)?)
    } else {
        None
    };
    let info = if a.env {
        Some(env.info().ctx(|| "reading environment info".into())?)
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

fn print_text(rep: &Report, ff: u8, rr: u8, out: &mut dyn Write) -> std::io::Result<()> {
    if let Some(i) = &rep.env {
        let map = i.max_size.unwrap_or(i.file_size);
        writeln!(out, "Environment Info")?;
        // Cairn never maps at a fixed address (LMDB's MDB_FIXEDMAP).
        writeln!(out, "  Map address: (nil)")?;
        writeln!(out, "  Map size: {map}")?;
        writeln!(out, "  Page size: {}", i.page_size)?;
        writeln!(out, "  Max pages: {}", map / i.page_size as u64)?;
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
    if let Some(i) = &rep.env {
        v.insert(
            "environment".into(),
            json!({
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
