//! `cairn dump`, `cairn stat`, `cairn check` and `cairn readers` on an LMDB environment, read
//! with the `cairn-lmdb` reader (LMDB's own tools are not needed).
//!
//! The dump is `mdb_dump`'s output byte for byte: the same header lines and values (`mapsize`
//! is the recorded map size raised to the pages in use, `maxreaders` the lock file's table
//! size), `-p` escapes as `mdb_dump` does (printable bytes as they are, the backslash included),
//! `-a` writes every named database and never the main one, `-l` lists the names, and a main
//! database dumped alone shows named databases' records as their raw 48-byte values.

use crate::cli::{CheckArgs, DumpArgs, ReadersArgs, StatArgs};
use crate::dumpfmt::flag_names;
use crate::progress::{self, Progress};
use crate::{CliError, CliResult, Context, EnvPath};
use cairn_lmdb::{DbRecord, LmdbEnv};
use serde_json::json;
use std::io::{BufWriter, Write};
use std::path::PathBuf;

/// The LMDB data file at `path`, when the path holds an LMDB environment (by LMDB's meta
/// magic) and no Cairn one.
pub fn detect(path: &EnvPath) -> Option<PathBuf> {
    let no_subdir = path.no_subdir.then_some(true);
    let (data, _) = cairn_lmdb::files(&path.path, no_subdir);
    if !path.no_subdir && path.path.is_dir() && path.path.join("data.cairn").exists() {
        return None;
    }
    cairn_lmdb::is_lmdb_file(&data).then_some(data)
}

/// Opens the LMDB environment at `path`.
pub fn open(path: &EnvPath) -> CliResult<LmdbEnv> {
    LmdbEnv::open(&path.path, path.no_subdir.then_some(true)).map_err(|e| lmdb_err(path, e))
}

/// An error of the LMDB reader, as the command reports it.
pub fn lmdb_err(path: &EnvPath, e: cairn_lmdb::Error) -> CliError {
    match e {
        cairn_lmdb::Error::Io { what, source } => CliError::Io { what, source },
        other => CliError::Usage(format!(
            "{} (LMDB environment): {other}",
            path.path.display()
        )),
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// One key or value line as `mdb_dump` writes it.
fn encode(out: &mut Vec<u8>, print: bool, bytes: &[u8]) {
    out.push(b' ');
    for &b in bytes {
        if print && (0x20..0x7f).contains(&b) {
            out.push(b);
        } else {
            if print {
                out.push(b'\\');
            }
            out.push(HEX[usize::from(b >> 4)]);
            out.push(HEX[usize::from(b & 15)]);
        }
    }
    out.push(b'\n');
}

fn header(env: &LmdbEnv, print: bool, name: Option<&[u8]>, rec: &DbRecord, out: &mut Vec<u8>) {
    out.extend_from_slice(b"VERSION=3\n");
    out.extend_from_slice(if print {
        b"format=print\n"
    } else {
        b"format=bytevalue\n"
    });
    if let Some(n) = name {
        out.extend_from_slice(b"database=");
        out.extend_from_slice(n);
        out.push(b'\n');
    }
    out.extend_from_slice(b"type=btree\n");
    out.extend_from_slice(format!("mapsize={}\n", env.map_size()).as_bytes());
    let m = env.meta();
    if m.env_flags() & 0x01 != 0 && m.map_addr != 0 {
        out.extend_from_slice(format!("mapaddr={:#x}\n", m.map_addr).as_bytes());
    }
    out.extend_from_slice(format!("maxreaders={}\n", env.max_readers()).as_bytes());
    let flags = u32::from(rec.db_flags());
    if flags & crate::dumpfmt::DUPSORT != 0 {
        out.extend_from_slice(b"duplicates=1\n");
    }
    for f in flag_names(flags) {
        out.extend_from_slice(format!("{f}=1\n").as_bytes());
    }
    out.extend_from_slice(format!("db_pagesize={}\n", env.page_size()).as_bytes());
    out.extend_from_slice(b"HEADER=END\n");
}

fn dump_one(
    env: &LmdbEnv,
    path: &EnvPath,
    print: bool,
    name: Option<&[u8]>,
    rec: &DbRecord,
    out: &mut dyn Write,
    pb: &Progress,
) -> CliResult {
    let w = || "writing the dump".to_string();
    let mut line = Vec::with_capacity(1 << 12);
    header(env, print, name, rec, &mut line);
    out.write_all(&line).ctx(w)?;
    let mut pairs = if name.is_none() {
        env.main_pairs()
    } else {
        env.pairs(rec)
    };
    let mut n = 0u64;
    while let Some((k, v)) = pairs.next().map_err(|e| lmdb_err(path, e))? {
        line.clear();
        encode(&mut line, print, k);
        encode(&mut line, print, v);
        out.write_all(&line).ctx(w)?;
        n += 1;
        if n.is_multiple_of(4096) {
            pb.inc(4096);
        }
    }
    pb.inc(n % 4096);
    out.write_all(b"DATA=END\n").ctx(w)
}

/// `cairn dump` of an LMDB environment.
pub fn dump(a: &DumpArgs, path: EnvPath, out: &mut dyn Write) -> CliResult {
    let env = open(&path)?;
    let w = || "writing the dump".to_string();
    match &a.file {
        Some(p) => {
            let f = std::fs::File::create(p).ctx(|| format!("creating {}", p.display()))?;
            let mut sink = BufWriter::with_capacity(1 << 16, f);
            dump_env(&env, &path, a, &mut sink, progress::wanted(a.quiet, false))?;
            sink.into_inner().map_err(|e| e.into_error()).ctx(w)?;
        }
        None => {
            let mut sink = BufWriter::with_capacity(1 << 16, out);
            dump_env(&env, &path, a, &mut sink, progress::wanted(a.quiet, true))?;
            sink.flush().ctx(w)?;
        }
    }
    Ok(())
}

fn dump_env(
    env: &LmdbEnv,
    path: &EnvPath,
    a: &DumpArgs,
    out: &mut dyn Write,
    show: bool,
) -> CliResult {
    let w = || "writing the dump".to_string();
    if a.all || a.list {
        // mdb_dump -a / -l: every key of the main database without a NUL counts as a
        // candidate; those that are databases are written (or listed).
        let named = env.named_dbs().map_err(|e| lmdb_err(path, e))?;
        let mut candidates = 0u64;
        let mut keys = env.main_pairs();
        let mut last: Vec<u8> = Vec::new();
        let mut first = true;
        while let Some((k, _)) = keys.next().map_err(|e| lmdb_err(path, e))? {
            // Distinct keys (a DUPSORT main database repeats a key per value).
            if !first && last == k {
                continue;
            }
            if !k.contains(&0) {
                candidates += 1;
            }
            first = false;
            last.clear();
            last.extend_from_slice(k);
        }
        if candidates == 0 {
            return Err(CliError::Usage(format!(
                "{} does not contain multiple databases",
                path.path.display()
            )));
        }
        let named: Vec<_> = named.into_iter().filter(|d| !d.name.contains(&0)).collect();
        if a.list {
            for d in &named {
                out.write_all(&d.name).ctx(w)?;
                out.write_all(b"\n").ctx(w)?;
            }
            return Ok(());
        }
        let total = named.iter().map(|d| d.record.entries).sum();
        let pb = Progress::bar(show, total, "dumping", false);
        for d in &named {
            dump_one(env, path, a.print, Some(&d.name), &d.record, out, &pb)?;
        }
        pb.finish();
        return Ok(());
    }
    let (name, rec) = match &a.subdb {
        Some(s) => match env.named_db(s.as_bytes()).map_err(|e| lmdb_err(path, e))? {
            Some(d) => (Some(d.name), d.record),
            None => {
                return Err(CliError::Usage(format!("database {s:?} does not exist")));
            }
        },
        None => (None, env.main_db()),
    };
    let pb = Progress::bar(show, rec.entries, "dumping", false);
    dump_one(env, path, a.print, name.as_deref(), &rec, out, &pb)?;
    pb.finish();
    Ok(())
}

fn prstat(out: &mut dyn Write, r: &DbRecord) -> std::io::Result<()> {
    writeln!(out, "  Tree depth: {}", r.depth)?;
    writeln!(out, "  Branch pages: {}", r.branch_pages)?;
    writeln!(out, "  Leaf pages: {}", r.leaf_pages)?;
    writeln!(out, "  Overflow pages: {}", r.overflow_pages)?;
    writeln!(out, "  Entries: {}", r.entries)
}

fn rec_json(env: &LmdbEnv, name: Option<String>, r: &DbRecord) -> serde_json::Value {
    json!({
        "name": name,
        "flags": flag_names(u32::from(r.db_flags())),
        "page_size": env.page_size(),
        "depth": r.depth,
        "branch_pages": r.branch_pages,
        "leaf_pages": r.leaf_pages,
        "overflow_pages": r.overflow_pages,
        "entries": r.entries,
    })
}

/// Free pages the free database lists (each value: a count, then that many page numbers, in
/// descending order), and with `detail` (-ff, -fff) `mdb_stat`'s lines for each list.
fn free_pages(env: &LmdbEnv, path: &EnvPath, detail: u8) -> CliResult<(u64, Vec<String>)> {
    let mut n = 0u64;
    let mut lines = Vec::new();
    let mut pairs = env.pairs(&env.free_db());
    while let Some((k, v)) = pairs.next().map_err(|e| lmdb_err(path, e))? {
        let Some(count) = v
            .get(..8)
            .map(|b| u64::from_le_bytes(b.try_into().expect("8")))
        else {
            continue;
        };
        n += count;
        if detail < 2 {
            continue;
        }
        let ids: Vec<u64> = v[8..]
            .chunks_exact(8)
            .take(usize::try_from(count).unwrap_or(usize::MAX))
            .map(|c| u64::from_le_bytes(c.try_into().expect("8")))
            .collect();
        let txn = k
            .get(..8)
            .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8")));
        // The longest run of consecutive pages, walking up from the smallest (the list's end),
        // and whether the list is out of order: mdb_stat's figures.
        let (mut span, mut prev, mut bad) = (0usize, 1u64, "");
        for i in (0..ids.len()).rev() {
            let mut pg = ids[i];
            if pg <= prev {
                bad = " [bad sequence]";
            }
            prev = pg;
            pg += span as u64;
            while i >= span && ids[i - span] == pg {
                span += 1;
                pg += 1;
            }
        }
        lines.push(format!(
            "    Transaction {txn}, {} pages, maxspan {span}{bad}",
            ids.len()
        ));
        if detail > 2 {
            let mut j = ids.len();
            while j > 0 {
                j -= 1;
                let pg = ids[j];
                let mut run = 1u64;
                while j > 0 && ids[j - 1] == pg + run {
                    j -= 1;
                    run += 1;
                }
                lines.push(if run > 1 {
                    format!("     {pg:9}[{run}]")
                } else {
                    format!("     {pg:9}")
                });
            }
        }
    }
    Ok((n, lines))
}

/// `cairn stat` of an LMDB environment: `mdb_stat`'s sections and labels.
pub fn stat(a: &StatArgs, path: EnvPath, out: &mut dyn Write) -> CliResult {
    let env = open(&path)?;
    let w = || "writing the output".to_string();
    let lock = cairn_lmdb::lock::read(env.lock_path()).map_err(|e| lmdb_err(&path, e))?;
    let mut dbs: Vec<(Option<String>, DbRecord)> = Vec::new();
    let only_readers = a.readers > 0 && !(a.all || a.subdb.is_some() || a.freelist > 0);
    if !only_readers {
        match &a.subdb {
            Some(s) => match env.named_db(s.as_bytes()).map_err(|e| lmdb_err(&path, e))? {
                Some(d) => dbs.push((Some(s.clone()), d.record)),
                None => return Err(CliError::Usage(format!("database {s:?} does not exist"))),
            },
            None => dbs.push((None, env.main_db())),
        }
        if a.all {
            for d in env.named_dbs().map_err(|e| lmdb_err(&path, e))? {
                dbs.push((Some(d.name_lossy()), d.record));
            }
        }
    }
    let m = *env.meta();
    let max_pages = env.map_size() / env.page_size() as u64;
    // LMDB's figure is the lock file's count of slots ever used; when no process has the
    // environment open, the first opener (mdb_stat itself) resets the file and shows 0. No
    // live process in the table is taken for that case (testing the lock itself could get in
    // an opening LMDB process's way).
    let readers_used = lock
        .as_ref()
        .filter(|l| l.readers.iter().any(|r| r.alive))
        .map_or(0, |l| l.slots_used);
    let free = if a.freelist > 0 {
        Some(free_pages(&env, &path, a.freelist)?)
    } else {
        None
    };
    if a.json {
        let mut v = serde_json::Map::new();
        v.insert("format".into(), json!("lmdb"));
        if a.env {
            v.insert(
                "environment".into(),
                json!({"map_size": env.map_size(), "max_pages": max_pages, "page_size": env.page_size(),
                       "file_size": env.file_len(), "pages_used": m.last_pgno + 1, "last_txnid": m.txnid,
                       "max_readers": env.max_readers(), "readers_used": readers_used}),
            );
        }
        if let Some((f, _)) = &free {
            v.insert(
                "freelist".into(),
                json!({"tree": rec_json(&env, None, &env.free_db()), "free_pages": f}),
            );
        }
        if a.readers > 0 {
            let slots: Vec<_> = lock.iter().flat_map(|l| l.readers.iter()).map(|r| json!({"slot": r.slot, "pid": r.pid, "thread": r.thread, "txnid": r.txnid, "alive": r.alive})).collect();
            v.insert("readers".into(), json!({"slots": slots}));
        }
        if !dbs.is_empty() {
            v.insert(
                "databases".into(),
                dbs.iter()
                    .map(|(n, r)| rec_json(&env, n.clone(), r))
                    .collect(),
            );
        }
        return writeln!(out, "{:#}", serde_json::Value::Object(v)).ctx(w);
    }
    let mut text = || -> std::io::Result<()> {
        if a.env {
            writeln!(out, "Environment Info")?;
            if m.env_flags() & 0x01 != 0 && m.map_addr != 0 {
                writeln!(out, "  Map address: {:#x}", m.map_addr)?;
            } else {
                writeln!(out, "  Map address: (nil)")?;
            }
            writeln!(out, "  Map size: {}", env.map_size())?;
            writeln!(out, "  Page size: {}", env.page_size())?;
            writeln!(out, "  Max pages: {max_pages}")?;
            writeln!(out, "  Number of pages used: {}", m.last_pgno + 1)?;
            writeln!(out, "  Last transaction ID: {}", m.txnid)?;
            writeln!(out, "  Max readers: {}", env.max_readers())?;
            writeln!(out, "  Number of readers used: {readers_used}")?;
        }
        if a.readers > 0 {
            writeln!(out, "Reader Table Status")?;
            print_readers(lock.as_ref(), out)?;
        }
        if let Some((f, lines)) = &free {
            writeln!(out, "Freelist Status")?;
            prstat(out, &env.free_db())?;
            for l in lines {
                writeln!(out, "{l}")?;
            }
            writeln!(out, "  Free pages: {f}")?;
        }
        for (n, r) in &dbs {
            writeln!(out, "Status of {}", n.as_deref().unwrap_or("Main DB"))?;
            prstat(out, r)?;
        }
        Ok(())
    };
    text().ctx(w)
}

fn print_readers(
    lock: Option<&cairn_lmdb::lock::LockInfo>,
    out: &mut dyn Write,
) -> std::io::Result<()> {
    let rs: Vec<_> = lock.iter().flat_map(|l| l.readers.iter()).collect();
    if rs.is_empty() {
        return writeln!(out, "(no active readers)");
    }
    writeln!(out, "    pid     thread     txnid")?;
    for r in rs {
        let t = r.txnid.map_or_else(|| "-".to_string(), |t| t.to_string());
        writeln!(out, "{:10} {:x} {t}", r.pid, r.thread)?;
    }
    Ok(())
}

/// `cairn readers` of an LMDB environment: its lock file's reader table (read only: `--check`
/// is refused, slots of LMDB's table are LMDB's to clear).
pub fn readers(a: &ReadersArgs, path: EnvPath, out: &mut dyn Write) -> CliResult {
    let env = open(&path)?;
    if a.check {
        return Err(CliError::Usage(
            "an LMDB environment: its reader table is only listed (mdb_stat -rr clears it)".into(),
        ));
    }
    let lock = cairn_lmdb::lock::read(env.lock_path()).map_err(|e| lmdb_err(&path, e))?;
    let w = || "writing the output".to_string();
    if a.json {
        let slots: Vec<_> = lock.iter().flat_map(|l| l.readers.iter()).map(|r| json!({"slot": r.slot, "pid": r.pid, "thread": r.thread, "txnid": r.txnid, "alive": r.alive})).collect();
        return writeln!(out, "{:#}", json!({"slots": slots, "stale_cleared": 0})).ctx(w);
    }
    print_readers(lock.as_ref(), out).ctx(w)
}

/// Walks every tree of the environment (free, main, named, duplicate sub-trees): pages,
/// counts, orders. The problems found, and a summary.
pub fn check_env(env: &LmdbEnv) -> (Vec<String>, Vec<String>, serde_json::Value) {
    let mut problems: Vec<String> = env.meta_warnings();
    let mut notes = Vec::new();
    let mut entries = 0u64;
    let mut dbs = 0u64;
    let mut used = cairn_lmdb::Seen::new(env.pages());
    // Metas.
    used.visit(0);
    used.visit(1);
    let mut free_lists: Vec<Vec<u8>> = Vec::new();
    let mut walk = |label: &str, rec: &DbRecord, kind: u8, problems: &mut Vec<String>| {
        let mut p = match kind {
            1 => env.main_pairs(),
            _ => env.pairs(rec),
        };
        loop {
            match p.next() {
                Ok(Some((_, v))) => {
                    if kind == 2 {
                        free_lists.push(v.to_vec());
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    problems.push(format!("database {label}: {e}"));
                    break;
                }
            }
        }
        entries += p.count();
        if let Some(pg) = used.merge(p.seen()) {
            problems.push(format!(
                "database {label}: page {pg} belongs to another tree too"
            ));
        }
    };
    walk("(free)", &env.free_db(), 2, &mut problems);
    walk("(main)", &env.main_db(), 1, &mut problems);
    match env.named_dbs() {
        Ok(named) => {
            for d in named {
                dbs += 1;
                walk(&d.name_lossy(), &d.record, 0, &mut problems);
            }
        }
        Err(e) => problems.push(format!("listing named databases: {e}")),
    }
    let tree_pages = used.count() - 2;
    // The free lists: each value a count and that many page numbers.
    let mut free = 0u64;
    for v in &free_lists {
        let n = v
            .get(..8)
            .map_or(0, |b| u64::from_le_bytes(b.try_into().expect("8")));
        if v.len() as u64 != 8 * (n.saturating_add(1)) {
            problems.push(format!(
                "the free database holds a list of {} bytes that says it has {n} pages",
                v.len()
            ));
            continue;
        }
        for c in v[8..].chunks_exact(8) {
            let pg = u64::from_le_bytes(c.try_into().expect("8"));
            if pg < 2 || pg >= env.pages() {
                problems.push(format!(
                    "free page {pg} outside pages 2..={}",
                    env.pages() - 1
                ));
            } else if !used.visit(pg) {
                problems.push(format!(
                    "page {pg} is listed free and is in use (or listed twice)"
                ));
            } else {
                free += 1;
            }
        }
    }
    let unaccounted = env.pages() - used.count();
    if unaccounted > 0 {
        notes.push(format!(
            "{unaccounted} pages neither in a tree nor listed free (pages a writer had in flight when it stopped, or lost)"
        ));
    }
    let summary = json!({"tree_pages": tree_pages, "free_pages": free, "entries": entries,
                         "databases": dbs, "pages_in_file": env.pages(), "txnid": env.meta().txnid});
    (problems, notes, summary)
}

/// `cairn check` of an LMDB environment.
pub fn check(a: &CheckArgs, path: EnvPath, out: &mut dyn Write, err: &mut dyn Write) -> CliResult {
    let w = || "writing the output".to_string();
    let (problems, notes, summary) = match LmdbEnv::open(&path.path, path.no_subdir.then_some(true))
    {
        Ok(env) => {
            let pb = Progress::spinner(progress::wanted(a.quiet, false), "checking");
            let r = check_env(&env);
            pb.finish();
            r
        }
        Err(cairn_lmdb::Error::Io { what, source }) => return Err(CliError::Io { what, source }),
        Err(e) => (
            vec![format!("opening: {e}")],
            Vec::new(),
            serde_json::Value::Null,
        ),
    };
    if a.json {
        writeln!(
            out,
            "{:#}",
            json!({"ok": problems.is_empty(), "format": "lmdb", "problems": problems,
                   "notes": notes, "tree_pages": summary.get("tree_pages"),
                   "free_pages": summary.get("free_pages"), "entries": summary.get("entries"),
                   "databases": summary.get("databases")})
        )
        .ctx(w)?;
    } else {
        for p in &problems {
            writeln!(err, "problem: {p}").ctx(w)?;
        }
        for n in &notes {
            writeln!(out, "note: {n}").ctx(w)?;
        }
        if !summary.is_null() {
            writeln!(
                out,
                "LMDB environment: {} tree pages, {} free pages of {}, {} records in all trees, {} named databases: {}",
                summary["tree_pages"],
                summary["free_pages"],
                summary["pages_in_file"],
                summary["entries"],
                summary["databases"],
                if problems.is_empty() {
                    "no problems".to_string()
                } else {
                    format!("{} problem(s)", problems.len())
                }
            )
            .ctx(w)?;
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(CliError::Problems(problems.len()))
    }
}
