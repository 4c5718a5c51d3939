//! `cairn load`: reads `mdb_dump`'s text format (or `mdb_load -T` plain text) into an
//! environment, creating it if needed.
//!
//! Guarantees:
//! - All or nothing: the whole input is loaded in one write transaction, committed only after
//!   the last line parsed and every record went in. Malformed input is reported with its line
//!   and leaves the environment as it was; an environment this command created is removed again.
//! - Every database gets the flags its header gives (some LMDB 0.9 releases' `mdb_load` drop
//!   the first database's); a database that already exists with other flags is an error, not a
//!   silent reinterpretation of the data.
//! - Sorted input is appended (pages filled, not split): every block starts in append mode and
//!   falls back to ordinary inserts at its first out-of-order record. With -a the input must be
//!   sorted, and the first record out of order is an error. In a dupsort database a record is in
//!   order when its key is greater, or equal with a greater value.
//!
//! The transaction holds its changed pages in memory until commit, so a load needs memory in
//! proportion to the data it writes.

use crate::cli::LoadArgs;
use crate::dumpfmt::{flag_names, Format, Header, ParseError, Reader};
use crate::progress::{self, Progress};
use crate::{CliError, CliResult, Context, EnvPath};
use cairn::{DbFlags, Env, PutFlags, RwTxn};
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Every flag LMDB's dump format names (and the engine implements).
const SUPPORTED_FLAGS: u32 = DbFlags::REVERSE_KEY.bits()
    | DbFlags::DUP_SORT.bits()
    | DbFlags::INTEGER_KEY.bits()
    | DbFlags::DUP_FIXED.bits()
    | DbFlags::INTEGER_DUP.bits()
    | DbFlags::REVERSE_DUP.bits();

/// Counts the bytes read, for the progress bar.
struct Counting<R> {
    inner: R,
    n: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let k = self.inner.read(buf)?;
        self.n.fetch_add(k as u64, Ordering::Relaxed);
        Ok(k)
    }
}

/// Runs `cairn load`, reading `-f FILE` or `stdin`; warnings go to `err`.
pub fn run(a: &LoadArgs, path: EnvPath, stdin: &mut dyn Read, err: &mut dyn Write) -> CliResult {
    let read = Arc::new(AtomicU64::new(0));
    let show = progress::wanted(a.quiet, false);
    let (input, pb): (Box<dyn BufRead + '_>, Progress) = match &a.file {
        Some(p) => {
            let f = std::fs::File::open(p).ctx(|| format!("opening {}", p.display()))?;
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            let pb = if len > 0 {
                Progress::bar(show, len, "loading", true)
            } else {
                Progress::spinner(show, "loading")
            };
            let c = Counting {
                inner: f,
                n: read.clone(),
            };
            (Box::new(BufReader::with_capacity(1 << 16, c)), pb)
        }
        None => (
            Box::new(BufReader::with_capacity(1 << 16, stdin)),
            Progress::spinner(show, "loading"),
        ),
    };
    let mut rd = if a.text {
        Reader::plain(input)
    } else {
        Reader::new(input)
    };
    let first = if a.text {
        None
    } else {
        match rd.next_header() {
            Ok(h) => h,
            Err(e) => return Err(parse_err(e)),
        }
    };
    warn(&mut rd, err);
    let created = Created::before(&path);
    let env = match open_env(&path, first.as_ref()) {
        Ok(e) => e,
        Err(e) => {
            created.undo();
            return Err(e);
        }
    };
    let mut ld = Loader {
        a,
        env: &env,
        made: HashSet::new(),
        pb: &pb,
        read: &read,
        records: 0,
    };
    let r = ld.load_all(&mut rd, first, err);
    pb.finish();
    drop(env);
    if r.is_err() {
        created.undo();
    }
    r
}

fn parse_err(e: ParseError) -> CliError {
    match e {
        ParseError::Syntax { line, msg } => CliError::Input { line, msg },
        ParseError::Io(source) => CliError::Io {
            what: "reading the input".into(),
            source,
        },
    }
}

fn warn<R>(rd: &mut Reader<R>, err: &mut dyn Write) {
    for (line, k) in rd.warnings.drain(..) {
        let _ = writeln!(
            err,
            "cairn load: line {line}: unrecognized keyword ignored: {k}"
        );
    }
}

/// The files and directory a load is about to create, so a failed load can remove them.
struct Created {
    paths: Vec<PathBuf>,
    dir: Option<PathBuf>,
}

impl Created {
    fn before(p: &EnvPath) -> Created {
        let data = p.data_file();
        let lock = p.lock_file();
        if data.exists() {
            return Created {
                paths: Vec::new(),
                dir: None,
            };
        }
        let dir = (!p.no_subdir && !p.path.exists()).then(|| p.path.clone());
        let mut paths = vec![data];
        if !lock.exists() {
            paths.push(lock);
        }
        Created { paths, dir }
    }

    fn undo(&self) {
        for p in &self.paths {
            let _ = std::fs::remove_file(p);
        }
        if let Some(d) = &self.dir {
            // Only if empty: anything else in it is not ours.
            let _ = std::fs::remove_dir(d);
        }
    }
}

fn open_env(path: &EnvPath, first: Option<&Header>) -> CliResult<Env> {
    let mut o = path.options();
    if let Some(h) = first {
        // A new file takes the dump's page size when Cairn supports it (LMDB's 4 KiB always is).
        if let Some(ps) = h
            .pagesize
            .filter(|p| p.is_power_of_two() && (4096..=65536).contains(p))
        {
            o = o.page_size(ps as usize);
        }
        if let Some(n) = h.maxreaders.filter(|&n| (1..=1 << 20).contains(&n)) {
            o = o.max_readers(n);
        }
    }
    o.open(&path.path)
        .ctx(|| format!("opening {}", path.path.display()))
}

struct Loader<'a> {
    a: &'a LoadArgs,
    env: &'a Env,
    /// Databases this load created or set flags on.
    made: HashSet<Option<String>>,
    pb: &'a Progress,
    read: &'a AtomicU64,
    records: u64,
}

impl Loader<'_> {
    fn load_all<R: BufRead>(
        &mut self,
        rd: &mut Reader<R>,
        first: Option<Header>,
        err: &mut dyn Write,
    ) -> CliResult {
        let mut w = self
            .env
            .write_txn()
            .ctx(|| "beginning a write transaction".into())?;
        if self.a.text {
            let h = Header::new(Format::Print, None, 0);
            self.block(&mut w, rd, &h)?;
        } else {
            let mut next = first;
            while let Some(h) = next {
                self.block(&mut w, rd, &h)?;
                next = rd.next_header().map_err(parse_err)?;
                warn(rd, err);
            }
        }
        w.commit().ctx(|| "committing the load".into())
    }

    /// Loads one block: checks its flags, opens its database, puts every pair.
    fn block<R: BufRead>(
        &mut self,
        w: &mut RwTxn<'_>,
        rd: &mut Reader<R>,
        h: &Header,
    ) -> CliResult {
        let name = h.database.clone().or_else(|| self.a.subdb.clone());
        let label = name.clone().unwrap_or_else(|| "(main)".into());
        let at = h.end_line;
        let input_err = |msg: String| CliError::Input { line: at, msg };
        // The reader only sets named flags; this guards against the two lists drifting apart.
        let unsupported = h.flags & !SUPPORTED_FLAGS;
        if unsupported != 0 {
            return Err(input_err(format!(
                "database {label}: {} not supported by Cairn",
                flag_names(unsupported).join(", ")
            )));
        }
        let want = DbFlags::from_bits_retain(h.flags);
        if !self.made.contains(&name) {
            if let Some((have, entries)) = self.existing(&name)? {
                let main_empty = name.is_none() && entries == 0;
                if have != want && !main_empty {
                    return Err(input_err(format!(
                        "database {label} exists with flags [{}] but the input gives [{}]",
                        flag_names(have.bits()).join(", "),
                        flag_names(want.bits()).join(", ")
                    )));
                }
            }
        }
        let db = w
            .create_db(name.as_deref(), want | DbFlags::CREATE)
            .map_err(|e| input_err(format!("database {label}: {e}")))?;
        self.made.insert(name);
        let mut append = true;
        let dups = want.contains(DbFlags::DUP_SORT);
        // In a dupsort database -N skips the pairs that exist (LMDB's NOOVERWRITE would also
        // skip every further value of a key, losing the dump's own duplicates).
        let plain = match (self.a.no_overwrite, dups) {
            (false, _) => PutFlags::empty(),
            (true, false) => PutFlags::NO_OVERWRITE,
            (true, true) => PutFlags::NO_DUP_DATA,
        };
        // Sorted input goes in at the end: past the last key, or past the last value of the
        // last key in a dupsort database.
        let at_end = if dups {
            PutFlags::APPEND | PutFlags::APPEND_DUP
        } else {
            PutFlags::APPEND
        };
        while let Some((k, v)) = rd.next_pair(h.format).map_err(parse_err)? {
            // The key is on the line before its value.
            let line = rd.line() - 1;
            let rec_err = |e: cairn::Error| CliError::Input {
                line,
                msg: format!("database {label}: {e}"),
            };
            let mut r = if append {
                w.put(db, &k, &v, at_end)
            } else {
                w.put(db, &k, &v, plain)
            };
            if matches!(r, Err(cairn::Error::AppendOrder)) {
                if self.a.append {
                    return Err(CliError::Input {
                        line,
                        msg: format!(
                            "database {label}: record out of order (-a needs sorted input: keys ascending, and values ascending under a dupsort key)"
                        ),
                    });
                }
                append = false;
                r = w.put(db, &k, &v, plain);
            }
            match r {
                Ok(()) => {}
                Err(cairn::Error::KeyExists) if self.a.no_overwrite => {}
                Err(e) => return Err(rec_err(e)),
            }
            self.records += 1;
            if self.records.is_multiple_of(1024) {
                self.tick();
            }
        }
        self.tick();
        Ok(())
    }

    fn tick(&self) {
        if self.a.file.is_some() {
            self.pb.set(self.read.load(Ordering::Relaxed));
        } else {
            self.pb.set(self.records);
        }
    }

    /// Flags and entry count of a database as it was before this load, if it exists.
    fn existing(&self, name: &Option<String>) -> CliResult<Option<(DbFlags, u64)>> {
        let r = self
            .env
            .read_txn()
            .ctx(|| "beginning a read transaction".into())?;
        let db = match r.open_db(name.as_deref()) {
            Ok(db) => db,
            Err(cairn::Error::DbNotFound { .. }) => return Ok(None),
            Err(e) => return Err(e).ctx(|| "opening a database".into()),
        };
        let flags = r.db_flags(db).ctx(|| "reading database flags".into())?;
        let entries = r
            .stat(db)
            .ctx(|| "reading database statistics".into())?
            .entries;
        Ok(Some((flags, entries)))
    }
}
