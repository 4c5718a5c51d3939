//! The engines under comparison, behind one object-safe interface.
//!
//! Every engine runs in its own process (see `main.rs`), so dynamic dispatch costs the same few
//! nanoseconds per call for everyone and keeps the workloads free of generics.

use std::path::Path;

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

#[cfg(feature = "cairn")]
mod cairn;
mod lmdb;
mod mdbx;
mod redb;
#[cfg(feature = "rocksdb")]
mod rocksdb;
mod sqlite;

/// Called once per value a lookup finds; the value is only valid during the call.
pub type Visit<'a> = &'a mut dyn FnMut(&[u8]);
/// Called once per pair a scan finds; both are only valid during the call.
pub type VisitPair<'a> = &'a mut dyn FnMut(&[u8], &[u8]);

/// What a write transaction will do, for engines whose batches differ by purpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteKind {
    /// Puts and deletes only.
    Blind,
    /// Also reads its own writes (RocksDB then uses a WriteBatchWithIndex).
    ReadYourWrites,
}

/// A database handle. One writer at a time; readers from any thread.
pub trait Engine: Send + Sync {
    /// Runs `f` inside one write transaction and commits it if `f` succeeds.
    fn write(
        &self,
        kind: WriteKind,
        f: &mut dyn FnMut(&mut dyn WriteTxn) -> Result<()>,
    ) -> Result<()>;
    /// Runs `f` inside one read transaction (a consistent snapshot).
    fn read(&self, f: &mut dyn FnMut(&dyn ReadTxn) -> Result<()>) -> Result<()>;
    /// Makes every commit so far durable (a no-op in durable modes).
    fn sync(&self) -> Result<()>;
    /// Compacts (into `scratch`, an empty directory, if the engine copies) and returns the
    /// compacted size in bytes; `None` if the engine has no way to compact.
    fn compact(&mut self, scratch: &Path) -> Result<Option<u64>>;
    /// A handle for one thread of the group suite, which commits one-put transactions from
    /// many threads at once. Created and used on that thread. The default runs each put as a
    /// plain write transaction through [`Engine::write`]; engines whose handle cannot be
    /// shared between threads (SQLite's connections) or that have a grouped commit path
    /// (Cairn's `write_grouped`) override it.
    fn one_put_writer(&self) -> Result<Box<dyn OnePut + '_>> {
        Ok(plain_one_put(self))
    }
}

/// One thread's way of committing durable one-put transactions (the group suite).
pub trait OnePut {
    /// Puts one pair in a transaction of its own and returns once that commit is durable
    /// (in a durable configuration).
    fn put_one(&mut self, key: &[u8], value: &[u8]) -> Result<()>;
}

/// The default [`OnePut`]: one write transaction per put through [`Engine::write`].
pub(crate) fn plain_one_put<E: Engine + ?Sized>(engine: &E) -> Box<dyn OnePut + '_> {
    Box::new(PlainOnePut(engine))
}

struct PlainOnePut<'a, E: ?Sized>(&'a E);

impl<E: Engine + ?Sized> OnePut for PlainOnePut<'_, E> {
    fn put_one(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.0.write(WriteKind::Blind, &mut |w| w.put(key, value))
    }
}

/// The operations of a write transaction.
pub trait WriteTxn {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()>;
    /// A put whose key sorts after every key in the database (LMDB's MDB_APPEND).
    fn append(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        self.put(key, value)
    }
    fn delete(&mut self, key: &[u8]) -> Result<()>;
    /// Looks `key` up, seeing this transaction's own writes; true if found.
    fn get(&mut self, key: &[u8], f: Visit<'_>) -> Result<bool>;
    /// Sorted duplicates (a database opened by [`open_dups`]): deletes one key/value pair;
    /// true if it existed.
    fn delete_pair(&mut self, _key: &[u8], _value: &[u8]) -> Result<bool> {
        bail!("this engine has no sorted duplicates")
    }
}

/// The operations of a read transaction.
pub trait ReadTxn {
    /// Looks `key` up; true if found.
    fn get(&self, key: &[u8], f: Visit<'_>) -> Result<bool>;
    /// Visits every pair in key order (or reverse order); returns how many.
    fn scan(&self, reverse: bool, f: VisitPair<'_>) -> Result<u64>;
    /// Visits up to `limit` pairs from the first key at or after `start`; returns how many.
    fn range_from(&self, start: &[u8], limit: usize, f: VisitPair<'_>) -> Result<usize>;
    /// Sorted duplicates: visits every value of `key` in order; returns how many.
    fn dup_values(&self, _key: &[u8], _f: Visit<'_>) -> Result<u64> {
        bail!("this engine has no sorted duplicates")
    }
    /// Fixed-size sorted duplicates (a database opened by [`open_dupfixed`]): visits the
    /// values of `key` as the engine hands them out in bulk (LMDB's GET_MULTIPLE, then
    /// NEXT_MULTIPLE: runs of packed values); returns how many runs.
    fn dup_chunks(&self, _key: &[u8], _f: Visit<'_>) -> Result<u64> {
        bail!("this engine has no fixed-size sorted duplicates")
    }
}

/// The value layout of the database an engine opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dups {
    /// One value per key.
    No,
    /// Sorted duplicates (LMDB's DUPSORT).
    Sorted,
    /// Sorted duplicates of 8-byte native integers, stored packed (DUPSORT | DUPFIXED |
    /// INTEGERDUP).
    Fixed,
}

/// How much durability a configuration gives up for speed; the rows of the report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ModeClass {
    /// Every commit is on stable storage when `commit` returns.
    Durable,
    /// Commits do not wait for the disk; a crash may lose the latest ones.
    NoFlush,
}

impl ModeClass {
    pub fn label(self) -> &'static str {
        match self {
            ModeClass::Durable => "durable",
            ModeClass::NoFlush => "no-flush",
        }
    }
}

/// One engine in one mode: a column of the report within a row's mode class.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    /// Identifier used on the command line and in JSON, e.g. `lmdb-writemap`.
    pub id: &'static str,
    /// Engine family, e.g. `lmdb`.
    pub engine: &'static str,
    /// Column header in the report, e.g. `LMDB (writemap)`.
    pub column: &'static str,
    pub class: ModeClass,
    /// The exact settings, as recorded beside the results.
    pub flags: &'static str,
}

const fn cfg(
    id: &'static str,
    engine: &'static str,
    column: &'static str,
    class: ModeClass,
    flags: &'static str,
) -> Config {
    Config {
        id,
        engine,
        column,
        class,
        flags,
    }
}

use ModeClass::{Durable, NoFlush};

/// Every configuration the harness knows, in report column order.
pub const CONFIGS: &[Config] = &[
    cfg(
        "cairn-durable",
        "cairn",
        "Cairn",
        Durable,
        "Durability::Durable; puts with PutFlags::APPEND for fillseq, PutFlags::empty() otherwise",
    ),
    cfg("cairn-lazy", "cairn", "Cairn", NoFlush, "Durability::Lazy (no flush per commit)"),
    cfg(
        "cairn-logged",
        "cairn",
        "Cairn (logged)",
        Durable,
        "Durability::Logged: each commit flushes a record of its puts and deletes to \
         data.cairn-log; pages flushed every 30 s (DEFAULT_LOGGED_SYNC_PERIOD)",
    ),
    cfg(
        "cairn-grouped",
        "cairn",
        // The same report column as cairn-durable: the configuration runs only in the group
        // suite, whose report names it "Cairn grouped".
        "Cairn",
        Durable,
        "group suite only: Durability::Durable; each put through Env::write_grouped (a nested \
         transaction in a write transaction shared with other threads' grouped writes, one \
         flush per group); EnvOptions::group_max_writes and group_max_time at their defaults",
    ),
    cfg(
        "cairn-logged-grouped",
        "cairn",
        "Cairn (logged)",
        Durable,
        "group suite only: Durability::Logged; each put through Env::write_grouped (one log \
         record and one log flush per group)",
    ),
    cfg(
        "lmdb-durable",
        "lmdb",
        "LMDB",
        Durable,
        "env flags 0 (default: fsync data, then fsync meta); mapsize 64 GiB; MDB_APPEND for fillseq",
    ),
    cfg("lmdb-nosync", "lmdb", "LMDB", NoFlush, "MDB_NOSYNC | MDB_NOMETASYNC; mapsize 64 GiB"),
    cfg(
        "lmdb-writemap",
        "lmdb",
        "LMDB (writemap)",
        NoFlush,
        "MDB_WRITEMAP | MDB_MAPASYNC | MDB_NOSYNC; mapsize 64 GiB",
    ),
    cfg(
        "mdbx-durable",
        "mdbx",
        "libmdbx",
        Durable,
        "MDBX_SYNC_DURABLE; geometry upper 64 GiB, other geometry defaults; MDBX_APPEND for fillseq",
    ),
    cfg("mdbx-nosync", "mdbx", "libmdbx", NoFlush, "MDBX_SAFE_NOSYNC; geometry upper 64 GiB"),
    cfg(
        "mdbx-writemap",
        "mdbx",
        "libmdbx (writemap)",
        NoFlush,
        "MDBX_WRITEMAP | MDBX_UTTERLY_NOSYNC; geometry upper 64 GiB",
    ),
    cfg(
        "redb-durable",
        "redb",
        "redb",
        Durable,
        "Durability::Immediate; cache 4 GiB; table<&[u8], &[u8]>",
    ),
    cfg("redb-none", "redb", "redb", NoFlush, "Durability::None; cache 4 GiB; table<&[u8], &[u8]>"),
    cfg(
        "sqlite-full",
        "sqlite",
        "SQLite",
        Durable,
        "journal_mode=WAL, synchronous=FULL, cache_size=-1048576 (1 GiB); \
         kv(k BLOB PRIMARY KEY, v BLOB) WITHOUT ROWID; INSERT OR REPLACE",
    ),
    cfg(
        "sqlite-off",
        "sqlite",
        "SQLite",
        NoFlush,
        "journal_mode=WAL, synchronous=OFF, cache_size=-1048576 (1 GiB); same table",
    ),
    cfg(
        "rocksdb-sync",
        "rocksdb",
        "RocksDB",
        Durable,
        "WriteOptions sync=true (WAL fsync per commit); block cache LRU 1 GiB, bloom 10 bits/key, \
         other options default; a transaction = one WriteBatch",
    ),
    cfg(
        "rocksdb-nosync",
        "rocksdb",
        "RocksDB",
        NoFlush,
        "WriteOptions sync=false (WAL written, not flushed); same options",
    ),
    cfg(
        "rocksdb-nowal",
        "rocksdb",
        "RocksDB (no WAL)",
        NoFlush,
        "WriteOptions disableWAL=true (memtable only until flush); same options",
    ),
];

/// The report's columns, in order.
pub const COLUMNS: &[&str] = &[
    "Cairn",
    "Cairn (logged)",
    "LMDB",
    "LMDB (writemap)",
    "libmdbx",
    "libmdbx (writemap)",
    "redb",
    "SQLite",
    "RocksDB",
    "RocksDB (no WAL)",
];

/// Whether this binary was built with the engine.
pub fn compiled_in(engine: &str) -> bool {
    match engine {
        "cairn" => cfg!(feature = "cairn"),
        "rocksdb" => cfg!(feature = "rocksdb"),
        _ => true,
    }
}

pub fn config(id: &str) -> Result<&'static Config> {
    match CONFIGS.iter().find(|c| c.id == id) {
        Some(c) => Ok(c),
        None => bail!("unknown configuration {id:?}"),
    }
}

/// Engines with sorted duplicates (LMDB's DUPSORT), for the dups suite.
pub const DUP_ENGINES: &[&str] = &["cairn", "lmdb", "mdbx"];

/// Engines of the mp suite: the memory-mapped family, whose databases several processes open
/// at once (readers and the writer coordinate through a shared lock file). redb locks its file
/// for one process and RocksDB allows one writing process; SQLite (which can share a database
/// in WAL mode) is not part of this comparison.
pub const MP_ENGINES: &[&str] = &["cairn", "lmdb", "mdbx"];

/// Engines of the group suite: every engine, in its durable configurations only (the suite
/// measures how commits that each wait for a flush share the disk).
pub fn in_group_suite(cfg: &Config) -> bool {
    cfg.class == Durable
}

/// Configurations that exist only for the group suite (the other suites would measure the
/// same thing as the configuration they differ from).
pub const GROUP_ONLY: &[&str] = &["cairn-grouped", "cairn-logged-grouped"];

/// Opens (creating) the database of configuration `cfg` in the directory `dir`.
pub fn open(cfg: &Config, dir: &Path) -> Result<Box<dyn Engine>> {
    open_with(cfg, dir, Dups::No)
}

/// Opens (creating) a sorted-duplicates (DUPSORT) database of configuration `cfg`.
pub fn open_dups(cfg: &Config, dir: &Path) -> Result<Box<dyn Engine>> {
    if !DUP_ENGINES.contains(&cfg.engine) {
        bail!("{} has no sorted duplicates", cfg.column);
    }
    open_with(cfg, dir, Dups::Sorted)
}

/// Opens (creating) a database of fixed-size sorted duplicates (DUPSORT | DUPFIXED |
/// INTEGERDUP, 8-byte values) of configuration `cfg`.
pub fn open_dupfixed(cfg: &Config, dir: &Path) -> Result<Box<dyn Engine>> {
    if !DUP_ENGINES.contains(&cfg.engine) {
        bail!("{} has no sorted duplicates", cfg.column);
    }
    open_with(cfg, dir, Dups::Fixed)
}

fn open_with(cfg: &Config, dir: &Path, dups: Dups) -> Result<Box<dyn Engine>> {
    #[cfg(feature = "cairn")]
    use ::cairn::Durability as D;
    std::fs::create_dir_all(dir)?;
    Ok(match cfg.id {
        #[cfg(feature = "cairn")]
        "cairn-durable" => Box::new(cairn::Cairn::open(dir, D::Durable, dups)?),
        #[cfg(feature = "cairn")]
        "cairn-lazy" => Box::new(cairn::Cairn::open(dir, D::Lazy, dups)?),
        #[cfg(feature = "cairn")]
        "cairn-logged" => Box::new(cairn::Cairn::open(dir, D::Logged, dups)?),
        #[cfg(feature = "cairn")]
        "cairn-grouped" => Box::new(cairn::Cairn::open(dir, D::Durable, dups)?.grouped()),
        #[cfg(feature = "cairn")]
        "cairn-logged-grouped" => Box::new(cairn::Cairn::open(dir, D::Logged, dups)?.grouped()),
        "lmdb-durable" => Box::new(lmdb::Lmdb::open(dir, lmdb::Mode::Durable, dups)?),
        "lmdb-nosync" => Box::new(lmdb::Lmdb::open(dir, lmdb::Mode::NoSync, dups)?),
        "lmdb-writemap" => Box::new(lmdb::Lmdb::open(dir, lmdb::Mode::WriteMap, dups)?),
        "mdbx-durable" => Box::new(mdbx::Mdbx::open(dir, mdbx::Mode::Durable, dups)?),
        "mdbx-nosync" => Box::new(mdbx::Mdbx::open(dir, mdbx::Mode::SafeNoSync, dups)?),
        "mdbx-writemap" => Box::new(mdbx::Mdbx::open(dir, mdbx::Mode::WriteMap, dups)?),
        "redb-durable" => Box::new(redb::Redb::open(dir, true)?),
        "redb-none" => Box::new(redb::Redb::open(dir, false)?),
        "sqlite-full" => Box::new(sqlite::Sqlite::open(dir, true)?),
        "sqlite-off" => Box::new(sqlite::Sqlite::open(dir, false)?),
        #[cfg(feature = "rocksdb")]
        "rocksdb-sync" => Box::new(rocksdb::Rocks::open(dir, rocksdb::Mode::Sync)?),
        #[cfg(feature = "rocksdb")]
        "rocksdb-nosync" => Box::new(rocksdb::Rocks::open(dir, rocksdb::Mode::NoSync)?),
        #[cfg(feature = "rocksdb")]
        "rocksdb-nowal" => Box::new(rocksdb::Rocks::open(dir, rocksdb::Mode::NoWal)?),
        other => bail!("configuration {other:?} is not compiled into this binary"),
    })
}

/// Versions of the engines as linked into this binary.
pub fn versions() -> Vec<(&'static str, String)> {
    let mut v = vec![
        ("LMDB", lmdb::version()),
        ("libmdbx", mdbx::version()),
        ("redb", format!("{} (crate)", env!("BENCH_REDB_VERSION"))),
        ("SQLite", sqlite::version()),
    ];
    #[cfg(feature = "rocksdb")]
    v.push(("RocksDB", rocksdb::version()));
    #[cfg(feature = "cairn")]
    v.push((
        "Cairn",
        format!("{} (workspace)", env!("BENCH_CAIRN_VERSION")),
    ));
    v
}

/// Returns the bytes the files under `path` occupy on disk (allocated blocks, so sparse files
/// such as a writemap LMDB's count only what they use), and their apparent length.
pub fn disk_usage(path: &Path) -> std::io::Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::symlink_metadata(path)?;
    if meta.is_dir() {
        let mut total = (0, 0);
        for entry in std::fs::read_dir(path)? {
            let (a, b) = disk_usage(&entry?.path())?;
            total.0 += a;
            total.1 += b;
        }
        Ok(total)
    } else {
        Ok((meta.blocks() * 512, meta.len()))
    }
}

/// Converts a path to a C string for the C engines.
pub(crate) fn c_path(path: &Path) -> Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    Ok(std::ffi::CString::new(path.as_os_str().as_bytes())?)
}
