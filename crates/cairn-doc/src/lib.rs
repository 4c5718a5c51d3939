//! # cairn-doc
//!
//! Collections of JSON documents over one Cairn environment, with secondary indexes and a
//! change feed that commit in the same transaction as the document they describe.
//!
//! ```
//! use cairn_doc::{Collection, IndexSpec, Query};
//! use serde_json::json;
//! let dir = tempfile::tempdir()?;
//! let env = cairn::Env::open(dir.path())?;
//! let users = Collection::open(&env, "users")?;
//! let mut w = env.write_txn()?;
//! users.declare_index(&mut w, "age", IndexSpec::new("/age"))?;
//! users.put(&mut w, "ada", &json!({"age": 36}))?;
//! users.put(&mut w, "alan", &json!({"age": 41}))?;
//! w.commit()?;
//! let r = env.read_txn()?;
//! let page = users.query(&r, "age", &Query::range(json!(30), json!(40)))?;
//! assert_eq!(page.docs[0].id, "ada");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Writes take a `&mut cairn::RwTxn` (so they compose with the caller's other writes and with
//! group commit: [`write_grouped`]); reads take a `&cairn::RoTxn` (or, where no index
//! database must be opened, either kind: [`ReadTxn`]). [`Handle`] owns the environment and
//! runs each call in a transaction of its own.
//!
//! Invariants, kept by every write of this crate (checked by [`Collection::verify`]):
//! - For every index in state Ready, its database holds exactly one (encoded value, id) pair
//!   per document whose value at the index's path is indexable, and nothing else. For an
//!   index in state Building with build cursor `c`, the same holds for the documents with id
//!   <= `c` (none when `c` is unset), and nothing is held for ids > `c`.
//! - A unique index in state Ready never holds two ids under one value.
//! - Every committed document write (put or delete) has exactly one feed record, keyed by its
//!   sequence number; sequence numbers of a collection are 1, 2, 3, ... in commit order,
//!   never reused; records below the persisted trim mark are gone, every one above is there.
//! - A failed write (any error of this crate, unique violations included) changes nothing:
//!   each write runs in a nested transaction that is dropped on error.
//!
//! Layout, encodings and protocols: docs/doc.md.
#![warn(missing_docs)]
#![deny(unsafe_code)]

mod collection;
mod feed;
mod handle;
mod index;
pub mod key;
mod query;

pub use collection::{Collection, Doc};
pub use feed::{now_ms, Change, ChangeKind, Retention, TRIM_PER_WRITE};
pub use handle::{spawn_build, Handle, DEFAULT_BUILD_BATCH, FEED_POLL};
pub use index::{IndexInfo, IndexSpec, IndexState};
pub use query::{DocText, Query, QueryPage, Token};

use cairn::{Cursor, Database, RoTxn, RwTxn};

/// Everything that can go wrong in this crate.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The engine's error.
    Cairn(cairn::Error),
    /// A put would give a unique index a second document under one value; nothing of the
    /// write was kept.
    UniqueViolation {
        /// The index.
        index: String,
        /// The value, as JSON text.
        value: String,
        /// The document that holds it already.
        existing_id: String,
    },
    /// An indexed value too long for an index key; nothing of the write was kept.
    IndexValueTooLarge {
        /// The index.
        index: String,
        /// The encoded length.
        len: usize,
    },
    /// A query on an index that is still being built.
    IndexBuilding {
        /// The index.
        index: String,
        /// Documents indexed so far.
        done: u64,
        /// Documents in the collection at the last build step.
        total: u64,
    },
    /// A query on an index whose build failed (drop and declare it again).
    IndexFailed {
        /// The index.
        index: String,
        /// Why the build stopped.
        reason: String,
    },
    /// A conditional put found another version than the one expected; nothing was written.
    VersionMismatch {
        /// The document.
        id: String,
        /// The version asked for (0: absent).
        expected: u64,
        /// The version stored (0: absent).
        found: u64,
    },
    /// No such index.
    NoIndex(String),
    /// An index of that name exists with another definition.
    IndexExists(String),
    /// The caller asked for changes after `since`, but records after it were trimmed by the
    /// retention bound: reading on would skip changes. `oldest` is the first record kept;
    /// restart from a full read, then follow the feed from `oldest - 1`.
    FeedTrimmed {
        /// What was asked for.
        since: u64,
        /// The oldest sequence number still held.
        oldest: u64,
    },
    /// An argument is malformed (name, id, bound type, token).
    Invalid(String),
    /// Stored data contradicts this crate's invariants (a bug or damage), with what was found.
    Inconsistent(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Cairn(e) => write!(f, "{e}"),
            Error::UniqueViolation {
                index,
                value,
                existing_id,
            } => write!(
                f,
                "unique index {index:?}: value {value} is already held by document {existing_id:?}"
            ),
            Error::IndexValueTooLarge { index, len } => {
                write!(
                    f,
                    "index {index:?}: indexed value of {len} bytes is too long"
                )
            }
            Error::IndexBuilding { index, done, total } => {
                write!(
                    f,
                    "index {index:?} is building ({done} of {total} documents)"
                )
            }
            Error::IndexFailed { index, reason } => {
                write!(f, "index {index:?} failed to build: {reason}")
            }
            Error::VersionMismatch {
                id,
                expected,
                found,
            } => write!(
                f,
                "document {id:?}: version {found} where {expected} was expected"
            ),
            Error::NoIndex(n) => write!(f, "no index {n:?}"),
            Error::IndexExists(n) => write!(f, "index {n:?} exists with another definition"),
            Error::FeedTrimmed { since, oldest } => write!(
                f,
                "changes after {since} were trimmed; the oldest change held is {oldest}"
            ),
            Error::Invalid(w) => write!(f, "invalid argument: {w}"),
            Error::Inconsistent(w) => write!(f, "inconsistent collection: {w}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Cairn(e) => Some(e),
            _ => None,
        }
    }
}

impl From<cairn::Error> for Error {
    fn from(e: cairn::Error) -> Error {
        Error::Cairn(e)
    }
}

/// This crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A transaction that can read: `cairn::RoTxn`, `cairn::RwTxn`, `cairn::Nested`, or a
/// `&mut` to one. Sealed (implemented here only).
pub trait ReadTxn: sealed::Sealed {
    #[doc(hidden)]
    fn get_raw(&self, db: Database, key: &[u8]) -> cairn::Result<Option<&[u8]>>;
    #[doc(hidden)]
    fn cursor_raw(&self, db: Database) -> cairn::Result<Cursor<'_>>;
    #[doc(hidden)]
    fn stat_raw(&self, db: Database) -> cairn::Result<cairn::Stat>;
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for cairn::RoTxn<'_> {}
    impl Sealed for cairn::RwTxn<'_> {}
    impl Sealed for cairn::Nested<'_, '_> {}
    impl<T: Sealed + ?Sized> Sealed for &mut T {}
}

// So that `&w` reads, whether `w` is a transaction, a `&mut` to one (a group commit
// closure's argument) or a nested transaction.
impl<T: ReadTxn + ?Sized> ReadTxn for &mut T {
    fn get_raw(&self, db: Database, key: &[u8]) -> cairn::Result<Option<&[u8]>> {
        (**self).get_raw(db, key)
    }
    fn cursor_raw(&self, db: Database) -> cairn::Result<Cursor<'_>> {
        (**self).cursor_raw(db)
    }
    fn stat_raw(&self, db: Database) -> cairn::Result<cairn::Stat> {
        (**self).stat_raw(db)
    }
}

impl ReadTxn for cairn::Nested<'_, '_> {
    fn get_raw(&self, db: Database, key: &[u8]) -> cairn::Result<Option<&[u8]>> {
        (**self).get_raw(db, key)
    }
    fn cursor_raw(&self, db: Database) -> cairn::Result<Cursor<'_>> {
        (**self).cursor_raw(db)
    }
    fn stat_raw(&self, db: Database) -> cairn::Result<cairn::Stat> {
        (**self).stat_raw(db)
    }
}

impl ReadTxn for RoTxn<'_> {
    fn get_raw(&self, db: Database, key: &[u8]) -> cairn::Result<Option<&[u8]>> {
        self.get(db, key)
    }
    fn cursor_raw(&self, db: Database) -> cairn::Result<Cursor<'_>> {
        self.cursor(db)
    }
    fn stat_raw(&self, db: Database) -> cairn::Result<cairn::Stat> {
        self.stat(db)
    }
}

impl ReadTxn for RwTxn<'_> {
    fn get_raw(&self, db: Database, key: &[u8]) -> cairn::Result<Option<&[u8]>> {
        self.get(db, key)
    }
    fn cursor_raw(&self, db: Database) -> cairn::Result<Cursor<'_>> {
        self.cursor(db)
    }
    fn stat_raw(&self, db: Database) -> cairn::Result<cairn::Stat> {
        self.stat(db)
    }
}

/// `env.write_grouped(f)` for closures that return this crate's errors: the closure shares
/// a commit (one flush) with other threads' grouped writes; if it fails, its changes alone
/// are rolled back and its error (a [`Error::UniqueViolation`], say) is returned as is.
///
/// ```
/// # let dir = tempfile::tempdir()?;
/// # let env = cairn::Env::open(dir.path())?;
/// let c = cairn_doc::Collection::open(&env, "c")?;
/// let v = cairn_doc::write_grouped(&env, |txn| c.put(txn, "a", &serde_json::json!(1)))?;
/// assert_eq!(v, 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_grouped<R, F>(env: &cairn::Env, f: F) -> Result<R>
where
    F: FnOnce(&mut RwTxn<'_>) -> Result<R> + Send,
    R: Send,
{
    // Group commit rolls back a closure that returns a cairn error; ours are carried beside
    // it, and a placeholder cairn error asks for the rollback.
    let mut ours: Option<Error> = None;
    let slot = &mut ours;
    let r = env.write_grouped(move |txn| match f(txn) {
        Ok(v) => Ok(v),
        Err(Error::Cairn(e)) => Err(e),
        Err(e) => {
            *slot = Some(e);
            Err(cairn::Error::Invalid("cairn-doc: write refused".into()))
        }
    });
    match r {
        Ok(v) => Ok(v),
        Err(e) => Err(ours.take().unwrap_or(Error::Cairn(e))),
    }
}
