//! SQLite (bundled by `rusqlite`), WAL mode, one WITHOUT ROWID table.
//!
//! SQLite connections cannot be shared between threads, so writes go through one connection
//! behind a mutex and read transactions borrow a connection from a pool (one per thread in the
//! threaded read phase).

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{anyhow, Result};
use rusqlite::{params, CachedStatement, Connection};

use super::{Engine, OnePut, ReadTxn, Visit, VisitPair, WriteKind, WriteTxn};

const PUT: &str = "INSERT OR REPLACE INTO kv(k, v) VALUES (?1, ?2)";
const DELETE: &str = "DELETE FROM kv WHERE k = ?1";
const GET: &str = "SELECT v FROM kv WHERE k = ?1";
const SCAN: &str = "SELECT k, v FROM kv ORDER BY k";
const SCAN_REV: &str = "SELECT k, v FROM kv ORDER BY k DESC";
/// The group suite's busy timeout: long enough that no thread ever gets SQLITE_BUSY within a
/// run (a writer waits as long as the others keep the lock), so waits show up as latency.
const GROUP_BUSY_TIMEOUT_MS: u32 = 600_000;
const RANGE: &str = "SELECT k, v FROM kv WHERE k >= ?1 ORDER BY k LIMIT ?2";

pub struct Sqlite {
    path: PathBuf,
    durable: bool,
    writer: Mutex<Connection>,
    readers: Mutex<Vec<Connection>>,
}

pub fn version() -> String {
    let krate = env!("BENCH_RUSQLITE_VERSION");
    format!("{} (bundled by rusqlite {krate})", rusqlite::version())
}

fn connect(path: &Path, durable: bool) -> Result<Connection> {
    let conn = Connection::open(path)?;
    let sync = if durable { "FULL" } else { "OFF" };
    let mode: String = conn.query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(anyhow!("SQLite refused WAL mode (got {mode})"));
    }
    conn.execute_batch(&format!(
        "PRAGMA synchronous={sync}; PRAGMA cache_size=-1048576;"
    ))?;
    conn.set_prepared_statement_cache_capacity(16);
    Ok(conn)
}

impl Sqlite {
    pub fn open(dir: &Path, durable: bool) -> Result<Sqlite> {
        let path = dir.join("kv.sqlite");
        let writer = connect(&path, durable)?;
        writer.execute_batch(
            "CREATE TABLE IF NOT EXISTS kv(k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID",
        )?;
        Ok(Sqlite {
            path,
            durable,
            writer: Mutex::new(writer),
            readers: Mutex::new(Vec::new()),
        })
    }
}

struct Writer<'c> {
    put: CachedStatement<'c>,
    delete: CachedStatement<'c>,
    get: CachedStatement<'c>,
}

impl WriteTxn for Writer<'_> {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put.execute(params![key, value])?;
        Ok(())
    }

    fn delete(&mut self, key: &[u8]) -> Result<()> {
        self.delete.execute(params![key])?;
        Ok(())
    }

    fn get(&mut self, key: &[u8], f: Visit<'_>) -> Result<bool> {
        get(&mut self.get, key, f)
    }
}

fn get(stmt: &mut CachedStatement<'_>, key: &[u8], f: Visit<'_>) -> Result<bool> {
    let mut rows = stmt.query(params![key])?;
    match rows.next()? {
        Some(row) => {
            f(row.get_ref(0)?.as_blob()?);
            Ok(true)
        }
        None => Ok(false),
    }
}

struct Reader<'c> {
    get: RefCell<CachedStatement<'c>>,
    conn: &'c Connection,
}

impl ReadTxn for Reader<'_> {
    fn get(&self, key: &[u8], f: Visit<'_>) -> Result<bool> {
        get(&mut self.get.borrow_mut(), key, f)
    }

    fn scan(&self, reverse: bool, f: VisitPair<'_>) -> Result<u64> {
        let mut stmt = self
            .conn
            .prepare_cached(if reverse { SCAN_REV } else { SCAN })?;
        let mut rows = stmt.query([])?;
        let mut n = 0;
        while let Some(row) = rows.next()? {
            f(row.get_ref(0)?.as_blob()?, row.get_ref(1)?.as_blob()?);
            n += 1;
        }
        Ok(n)
    }

    fn range_from(&self, start: &[u8], limit: usize, f: VisitPair<'_>) -> Result<usize> {
        let mut stmt = self.conn.prepare_cached(RANGE)?;
        let mut rows = stmt.query(params![start, limit as i64])?;
        let mut n = 0;
        while let Some(row) = rows.next()? {
            f(row.get_ref(0)?.as_blob()?, row.get_ref(1)?.as_blob()?);
            n += 1;
        }
        Ok(n)
    }
}

impl Engine for Sqlite {
    fn write(
        &self,
        _kind: WriteKind,
        f: &mut dyn FnMut(&mut dyn WriteTxn) -> Result<()>,
    ) -> Result<()> {
        let conn = self.writer.lock().map_err(|_| anyhow!("poisoned"))?;
        conn.execute_batch("BEGIN IMMEDIATE")?;
        let result = (|| {
            let mut w = Writer {
                put: conn.prepare_cached(PUT)?,
                delete: conn.prepare_cached(DELETE)?,
                get: conn.prepare_cached(GET)?,
            };
            f(&mut w)
        })();
        match result {
            Ok(()) => conn.execute_batch("COMMIT")?,
            Err(e) => {
                conn.execute_batch("ROLLBACK")?;
                return Err(e);
            }
        }
        Ok(())
    }

    fn read(&self, f: &mut dyn FnMut(&dyn ReadTxn) -> Result<()>) -> Result<()> {
        let pooled = self.readers.lock().map_err(|_| anyhow!("poisoned"))?.pop();
        let conn = match pooled {
            Some(c) => c,
            None => connect(&self.path, self.durable)?,
        };
        conn.execute_batch("BEGIN")?;
        let result = (|| {
            let r = Reader {
                get: RefCell::new(conn.prepare_cached(GET)?),
                conn: &conn,
            };
            f(&r)
        })();
        conn.execute_batch("COMMIT")?;
        self.readers
            .lock()
            .map_err(|_| anyhow!("poisoned"))?
            .push(conn);
        result
    }

    fn sync(&self) -> Result<()> {
        // With synchronous=OFF nothing is flushed; flush the database and its WAL by hand.
        let conn = self.writer.lock().map_err(|_| anyhow!("poisoned"))?;
        conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()))?;
        for suffix in ["", "-wal"] {
            let mut p = self.path.clone().into_os_string();
            p.push(suffix);
            if let Ok(file) = std::fs::OpenOptions::new().write(true).open(&p) {
                file.sync_all()?;
            }
        }
        Ok(())
    }

    /// A connection of the thread's own (a connection is not shared between threads): the
    /// same pragmas as the writer's, `PRAGMA busy_timeout` (GROUP_BUSY_TIMEOUT_MS), and
    /// `BEGIN IMMEDIATE; INSERT OR REPLACE ...; COMMIT` per put.
    fn one_put_writer(&self) -> Result<Box<dyn OnePut + '_>> {
        let conn = connect(&self.path, self.durable)?;
        conn.execute_batch(&format!("PRAGMA busy_timeout={GROUP_BUSY_TIMEOUT_MS};"))?;
        Ok(Box::new(ThreadWriter { conn }))
    }

    fn compact(&mut self, scratch: &Path) -> Result<Option<u64>> {
        let target = scratch.join("compact.sqlite");
        let conn = self.writer.lock().map_err(|_| anyhow!("poisoned"))?;
        conn.execute("VACUUM INTO ?1", params![target.to_string_lossy()])?;
        Ok(Some(super::disk_usage(&target)?.0))
    }
}

/// The group suite's per-thread writer.
struct ThreadWriter {
    conn: Connection,
}

impl OnePut for ThreadWriter {
    fn put_one(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.conn.execute_batch("BEGIN IMMEDIATE")?;
        let put = self
            .conn
            .prepare_cached(PUT)
            .and_then(|mut stmt| stmt.execute(params![key, value]));
        match put {
            Ok(_) => self.conn.execute_batch("COMMIT")?,
            Err(e) => {
                self.conn.execute_batch("ROLLBACK")?;
                return Err(e.into());
            }
        }
        Ok(())
    }
}
