//! `cairn dump`: writes databases in `mdb_dump`'s text format from one snapshot, so a dump of
//! several databases is consistent even while writers go on.
//!
//! Which databases: the main one by default, one named database with -s, or with -a every
//! database: the main one first when it holds keys besides the names of the others, or flags
//! (`mdb_dump -a` never writes it), without those names (each named database has its own
//! block, which creates it), and then each named one in name order. -l lists the names
//! instead. The main database alone is written whole, the names' records included, as
//! `mdb_dump` does.

use crate::cli::DumpArgs;
use crate::dumpfmt::{self, Format, Header};
use crate::progress::{self, Progress};
use crate::{CliError, CliResult, Context, EnvPath};
use cairn::{Env, RoTxn};
use std::io::{BufWriter, Write};

/// The smallest `mapsize=` written: LMDB's loader sizes its map from it, and a map too small
/// for the data makes `mdb_load` fail with MDB_MAP_FULL.
const MIN_MAPSIZE: u64 = 64 << 20;

/// Runs `cairn dump`, writing to `-f FILE` or to `out`.
pub fn run(a: &DumpArgs, path: EnvPath, out: &mut dyn Write) -> CliResult {
    let env = path.open_read()?;
    let w = || "writing the dump".to_string();
    match &a.file {
        Some(p) => {
            let f = std::fs::File::create(p).ctx(|| format!("creating {}", p.display()))?;
            let mut sink = BufWriter::with_capacity(1 << 16, f);
            dump_env(&env, a, &mut sink, progress::wanted(a.quiet, false))?;
            // into_inner flushes and reports the flush's error instead of losing it in Drop.
            sink.into_inner().map_err(|e| e.into_error()).ctx(w)?;
        }
        None => {
            let mut sink = BufWriter::with_capacity(1 << 16, out);
            dump_env(&env, a, &mut sink, progress::wanted(a.quiet, true))?;
            sink.flush().ctx(w)?;
        }
    }
    Ok(())
}

/// Dumps the databases `a` selects from one snapshot of `env` into `out`.
pub fn dump_env(env: &Env, a: &DumpArgs, out: &mut dyn Write, show: bool) -> CliResult {
    let r = env
        .read_txn()
        .ctx(|| "beginning a read transaction".into())?;
    let names = r.db_names().ctx(|| "listing databases".into())?;
    let w = || "writing the dump".to_string();
    if a.list {
        // mdb_dump -l fails when there is nothing to list; scripts may test for that.
        if names.is_empty() {
            return Err(CliError::Usage(
                "the environment does not contain named databases".into(),
            ));
        }
        for n in &names {
            writeln!(out, "{n}").ctx(w)?;
        }
        return Ok(());
    }
    let mut selected: Vec<Option<String>> = Vec::new();
    if a.all {
        let main = r.open_db(None).ctx(|| "main database".into())?;
        let st = r.stat(main).ctx(|| "main database".into())?;
        let flags = r.db_flags(main).ctx(|| "main database".into())?;
        if st.entries > names.len() as u64 || !flags.is_empty() || names.is_empty() {
            selected.push(None);
        }
        selected.extend(names.iter().cloned().map(Some));
    } else {
        selected.push(a.subdb.clone());
    }
    let info = env.info().ctx(|| "reading environment info".into())?;
    let used = (info.last_pgno + 1) * info.page_size as u64;
    let mapsize = info
        .max_size
        .unwrap_or((used * 4).max(MIN_MAPSIZE).next_multiple_of(1 << 20));
    let format = if a.print {
        Format::Print
    } else {
        Format::Bytevalue
    };
    let mut total = 0;
    for name in &selected {
        let db = r
            .open_db(name.as_deref())
            .ctx(|| format!("database {}", name.as_deref().unwrap_or("(main)")))?;
        total += r.stat(db).ctx(|| "database statistics".into())?.entries;
    }
    // With -a the names' keys of the main database are left to their databases' blocks.
    let skip: &[String] = if a.all { &names } else { &[] };
    if selected.first().is_some_and(Option::is_none) {
        total = total.saturating_sub(skip.len() as u64);
    }
    let pb = Progress::bar(show, total, "dumping", false);
    for name in &selected {
        let mut h = Header::new(format, name.clone(), 0);
        h.mapsize = Some(mapsize);
        h.maxreaders = Some(info.max_readers as u32);
        h.pagesize = Some(info.page_size as u32);
        dump_db(
            &r,
            &mut h,
            out,
            &pb,
            if name.is_none() { skip } else { &[] },
        )?;
    }
    pb.finish();
    Ok(())
}

/// Writes one database's block, leaving out the keys in `skip`.
fn dump_db(
    r: &RoTxn<'_>,
    h: &mut Header,
    out: &mut dyn Write,
    pb: &Progress,
    skip: &[String],
) -> CliResult {
    let label = h.database.clone().unwrap_or_else(|| "(main)".into());
    let db = r
        .open_db(h.database.as_deref())
        .ctx(|| format!("database {label}"))?;
    h.flags = r.db_flags(db).ctx(|| format!("database {label}"))?.bits();
    let w = || "writing the dump".to_string();
    dumpfmt::write_header(out, h).ctx(w)?;
    let mut line = Vec::with_capacity(256);
    let mut n = 0u64;
    for item in r.iter(db).ctx(|| format!("reading database {label}"))? {
        let (k, v) = item.ctx(|| format!("reading database {label}"))?;
        if !skip.is_empty() && skip.iter().any(|n| n.as_bytes() == k) {
            continue;
        }
        line.clear();
        dumpfmt::encode_item(&mut line, h.format, k, false);
        dumpfmt::encode_item(&mut line, h.format, v, false);
        out.write_all(&line).ctx(w)?;
        n += 1;
        if n.is_multiple_of(1024) {
            pb.inc(1024);
        }
    }
    pb.inc(n % 1024);
    dumpfmt::write_end(out).ctx(w)
}
