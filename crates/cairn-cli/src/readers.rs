//! `cairn readers` (and `cairn stat -r`): the reader table in the lock file, shared by every
//! process using the environment, in `mdb_reader_list`'s layout (pid, thread id in hex, txnid or
//! `-` for an idle slot). `--check` (and `stat -rr`) clears the slots of dead processes first.

use crate::cli::ReadersArgs;
use crate::{CliResult, Context, EnvPath};
use cairn::{Env, ReaderInfo};
use serde_json::{json, Value};
use std::io::Write;

/// The table, and what a stale-slot check did to it.
pub struct Readers {
    /// Slots before the check.
    pub before: Vec<ReaderInfo>,
    /// Slots of dead processes cleared.
    pub cleared: usize,
    /// Slots after the check (same as `before` without one).
    pub after: Vec<ReaderInfo>,
}

/// Reads the table, clearing dead processes' slots first when `check` is set.
pub fn list(env: &Env, check: bool) -> CliResult<Readers> {
    let before = env.readers();
    let cleared = if check { clear_stale(env)? } else { 0 };
    Ok(Readers {
        after: env.readers(),
        before,
        cleared,
    })
}

/// Clears the slots of dead processes; the count cleared.
fn clear_stale(env: &Env) -> CliResult<usize> {
    env.reader_check()
        .ctx(|| "clearing stale reader slots".into())
}

/// Prints the table as `mdb_reader_list` does.
pub fn print_table(rs: &[ReaderInfo], out: &mut dyn Write) -> std::io::Result<()> {
    if rs.is_empty() {
        return writeln!(out, "(no active readers)");
    }
    writeln!(out, "    pid     thread     txnid")?;
    for r in rs {
        let txnid = r.txnid.map_or_else(|| "-".to_string(), |t| t.to_string());
        // mdb_reader_list's "%10d %zx %s" exactly: scripts split these lines on spaces.
        writeln!(out, "{:10} {:x} {txnid}", r.pid, r.thread)?;
    }
    Ok(())
}

/// The table as JSON.
pub fn to_json(r: &Readers) -> Value {
    let list = |v: &[ReaderInfo]| -> Value {
        v.iter()
            .map(|r| {
                json!({"slot": r.slot, "pid": r.pid, "thread": r.thread,
                       "txnid": r.txnid})
            })
            .collect()
    };
    json!({"slots": list(&r.after), "stale_cleared": r.cleared})
}

/// Runs `cairn readers`.
pub fn run(a: &ReadersArgs, path: EnvPath, out: &mut dyn Write) -> CliResult {
    let env = path.open_read()?;
    let r = list(&env, a.check)?;
    let w = || "writing the output".to_string();
    if a.json {
        return writeln!(out, "{:#}", to_json(&r)).ctx(w);
    }
    if a.check {
        writeln!(out, "  {} stale readers cleared.", r.cleared).ctx(w)?;
    }
    print_table(&r.after, out).ctx(w)
}
