//! `cairn check`: opens the environment read-only (recovery itself verifies the last commit),
//! walks every page of the current snapshot with the engine's checker, and then reads every
//! database end to end. Exits 1 on any problem, naming each one and where it is. Databases kept
//! in a user-supplied order (a C program's mdb_set_compare) are checked for everything but that
//! order, which this process does not have: a note says so, and it is not a problem.

use crate::cli::CheckArgs;
use crate::progress::{self, Progress};
use crate::{CliError, CliResult, Context, EnvPath};
use serde_json::json;
use std::io::Write;

/// Runs `cairn check`.
pub fn run(a: &CheckArgs, path: EnvPath, out: &mut dyn Write, err: &mut dyn Write) -> CliResult {
    let w = || "writing the output".to_string();
    let env = match path.open_read() {
        Ok(e) => e,
        // An environment that cannot even be opened is the checker's finding, not a usage error.
        Err(CliError::Engine { what, source }) => {
            let problem = format!("{what}: {source}");
            report(a, out, err, &[problem], None).ctx(w)?;
            return Err(CliError::Problems(1));
        }
        Err(e) => return Err(e),
    };
    let pb = Progress::spinner(progress::wanted(a.quiet, false), "checking");
    let r = env
        .read_txn()
        .ctx(|| "beginning a read transaction".into())?;
    let mut problems = Vec::new();
    let summary = match r.check() {
        Ok(rep) => {
            problems.extend(rep.problems.iter().cloned());
            Some(rep)
        }
        Err(e) => {
            problems.push(format!("walking the pages: {e}"));
            None
        }
    };
    // Reading each database through the public cursor path catches what a page walk would
    // not: values whose overflow pages fail to decode, iteration that does not end.
    let mut names = vec![None];
    match r.db_names() {
        Ok(n) => names.extend(n.into_iter().map(Some)),
        Err(e) => problems.push(format!("listing named databases: {e}")),
    }
    for name in &names {
        let label = name.as_deref().unwrap_or("(main)");
        let res = r.open_db(name.as_deref()).and_then(|db| {
            let expected = r.stat(db)?.entries;
            let mut n = 0u64;
            for item in r.iter(db)? {
                item?;
                n += 1;
                if n.is_multiple_of(4096) {
                    pb.inc(4096);
                }
            }
            Ok((expected, n))
        });
        match res {
            Ok((expected, n)) if expected != n => problems.push(format!(
                "database {label}: its record counts {expected} entries, reading it gives {n}"
            )),
            Ok(_) => {}
            Err(e) => problems.push(format!("database {label}: {e}")),
        }
    }
    pb.finish();
    report(a, out, err, &problems, summary.as_ref()).ctx(w)?;
    if problems.is_empty() {
        Ok(())
    } else {
        Err(CliError::Problems(problems.len()))
    }
}

fn report(
    a: &CheckArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
    problems: &[String],
    rep: Option<&cairn::check::Report>,
) -> std::io::Result<()> {
    if a.json {
        let v = json!({
            "ok": problems.is_empty(),
            "problems": problems,
            "tree_pages": rep.map(|r| r.tree_pages),
            "free_pages": rep.map(|r| r.free_pages),
            "entries": rep.map(|r| r.entries),
            "databases": rep.map(|r| r.databases),
            "notes": rep.map(|r| r.notes.clone()).unwrap_or_default(),
        });
        return writeln!(out, "{v:#}");
    }
    for p in problems {
        writeln!(err, "problem: {p}")?;
    }
    if let Some(r) = rep {
        for n in &r.notes {
            writeln!(out, "note: {n}")?;
        }
        writeln!(
            out,
            "{} tree pages, {} free pages, {} records in all trees, {} named databases: {}",
            r.tree_pages,
            r.free_pages,
            r.entries,
            r.databases,
            if problems.is_empty() {
                "no problems".to_string()
            } else {
                format!("{} problem(s)", problems.len())
            }
        )?;
    }
    Ok(())
}
