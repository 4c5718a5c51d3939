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
#![warn(missing_docs)]

/// A named crash point (`failpoint.rs`): with the test-only `failpoints` feature, kills the
/// process when `CAIRN_FAILPOINT` arms it; without the feature it expands to nothing.
macro_rules! failpoint {
    ($name:literal) => {
        #[cfg(feature = "failpoints")]
        $crate::failpoint::hit($name);
    };
}

mod alloc;
pub mod btree;
pub mod check;
mod commit;
mod copy;
mod cursor;
mod cursor_dup;
mod db;
mod env;
mod error;
#[cfg(feature = "failpoints")]
pub mod failpoint;
pub mod format;
mod inspect;
mod lock;
mod os;
mod pageset;
mod radix;
mod shared;
pub mod storage;
mod txn;
mod txn_dup;

pub use cursor::{Cursor, CursorMut, Iter};
pub use cursor_dup::DupIter;
pub use db::{Database, DbFlags, PutFlags, Stat};
pub use env::{Durability, Env, EnvInfo, EnvOptions, DEFAULT_SYNC_PERIOD};
pub use error::{Error, Result};
pub use inspect::FreeRun;
pub use shared::ReaderInfo;
pub use txn::{Nested, RoTxn, RwTxn};
