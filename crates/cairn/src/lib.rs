//! # Cairn
//!
//! An embedded, transactional, ordered key-value store in one file: a copy-on-write B+tree
//! read through a memory map, in the family of LMDB and libmdbx.
//!
//! - Read transactions see one snapshot, never block and never copy: [`RoTxn::get`] returns a
//!   slice into the map, valid for the transaction's life.
//! - One write transaction at a time; [`RwTxn::commit`] is atomic and, in
//!   [`Durability::Durable`] mode, costs one flush. A crash at any instant leaves the last
//!   committed state; recovery checks only what the last commit wrote.
//! - Named databases, integer and reverse key orders, sorted duplicates (multimaps), cursors,
//!   range iterators, nested transactions, a checker and hot copies.
//!
//! ```
//! use cairn::{Env, PutFlags};
//! let dir = tempfile::tempdir()?;
//! let env = Env::open(dir.path())?;
//! let db = env.main_db();
//! let mut w = env.write_txn()?;
//! w.put(db, b"hello", b"world", PutFlags::empty())?;
//! w.commit()?;
//! let r = env.read_txn()?;
//! assert_eq!(r.get(db, b"hello")?, Some(&b"world"[..]));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Module map (for readers of the source)
//!
//! The modules sit in layers, lowest first. A module uses only modules of lower layers, or of
//! its own layer without a circle; `tests/source_rules.rs` reads this table and every `crate::`
//! path in `src/`, and fails on a back-edge.
//!
//! | Layer | Modules | What they hold |
//! |---|---|---|
//! | 0 | `error`, `os`, `radix`, `failpoint` | The error type; the system calls and memory maps (unsafe); a radix sort; crash points |
//! | 1 | `format` | The file format: pages, nodes, commit records, lock-file layout, checksums |
//! | 2 | `db`, `options` | Database handles, flags, statistics and the orders flags choose; open options |
//! | 3 | `lock`, `shared`, `storage`, `wal` | The lock file and its reader table; the data file (or the simulator) and verified page reads (unsafe: pages written in place); the commit log's records |
//! | 4 | `btree` | The B+tree over any page source: search, insert, delete, cursors, sorted duplicates, freeing |
//! | 5 | `pageset`, `pagebuf`, `alloc`, `snapshot`, `catalog` | Page sets and maps; dirty-page buffers (unsafe: buffers in the writable map); the free-page allocator; committed snapshots; the catalog of named databases |
//! | 6 | `recover` | Choosing the commit to open at, verifying it, loading its free tree |
//! | 7 | `state` | The state an open environment shares: writer state, database registry, the `Env` handle |
//! | 8 | `txn` | Read and write transactions, nested ones, sorted-duplicate operations, the commit |
//! | 9 | `cursor` | Cursors and range iterators |
//! | 10 | `check`, `inspect`, `bulk`, `migrate`, `replay` | The checker; read-only views for operators' tools; the bulk builder (a new file written from sorted streams, no transaction; its tests open what it built); converting an LMDB environment (with the `cairn-lmdb` reader); replaying the commit log at open |
//! | 11 | `env` | Opening an environment (creation, recovery) and the handle's methods |
//! | 12 | `copy`, `group` | Hot copies (a compacted copy opens a second environment); group commit (unsafe: a queued closure's borrows) |
#![warn(missing_docs)]
// `unsafe` lives only in `os`, `storage`, `pagebuf` and `group` (docs/safety.md).
#![deny(unsafe_code)]

/// A named crash point (`failpoint.rs`): with the test-only `failpoints` feature, kills the
/// process when `CAIRN_FAILPOINT` arms it; without the feature it expands to nothing.
macro_rules! failpoint {
    ($name:literal) => {
        #[cfg(feature = "failpoints")]
        $crate::failpoint::hit($name);
    };
}

mod alloc;
mod btree;
#[doc(hidden)]
pub mod bulk;
mod catalog;
pub mod check;
mod copy;
mod cursor;
mod db;
mod env;
mod error;
#[cfg(feature = "failpoints")]
#[doc(hidden)]
pub mod failpoint;
#[allow(unsafe_code)]
mod group;
// The file format: public for the tests, fuzz targets and tools that build or inspect raw
// pages; not part of the API (no stability promise), hidden from the documentation.
#[doc(hidden)]
pub mod format;
mod inspect;
mod lock;
pub mod migrate;
mod options;
#[allow(unsafe_code)]
mod os;
#[allow(unsafe_code)]
mod pagebuf;
mod pageset;
mod radix;
mod recover;
mod replay;
mod shared;
mod snapshot;
mod state;
// The storage seam and the fault-injecting simulator: public for the crash tests and fuzz
// targets (`Env::with_storage`); not part of the API, hidden from the documentation.
#[allow(unsafe_code)]
#[doc(hidden)]
pub mod storage;
mod txn;
// The commit log's records: public for the fuzz target that damages them; not part of the API.
#[doc(hidden)]
pub mod wal;

pub use cursor::dup::DupIter;
pub use cursor::{Cursor, CursorMut, Iter};
pub use db::{Database, DbFlags, PutFlags, Stat};
pub use env::EnvInfo;
pub use error::{Error, Result};
pub use format::CmpFn;
pub use inspect::FreeRun;
pub use options::{
    Durability, EnvOptions, FileNames, DEFAULT_GROUP_MAX_TIME, DEFAULT_GROUP_MAX_WRITES,
    DEFAULT_LOGGED_SYNC_PERIOD, DEFAULT_LOG_SIZE, DEFAULT_SYNC_PERIOD,
};
pub use shared::ReaderInfo;
pub use state::Env;
pub use txn::{Nested, RoTxn, RwTxn};
