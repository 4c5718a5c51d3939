//! Errors. One enum for the whole engine: every binding (C codes, Python exceptions) maps its
//! variants one to one, so a variant is added rather than a message reworded.

use std::io;

/// Everything that can go wrong in Cairn.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system call failed; `op` says which and on what.
    #[error("I/O error while {op}: {source}")]
    Io {
        /// What was being done, with its object ("writing pages to data.cairn").
        op: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The file is not a Cairn database at all (wrong magic).
    #[error("{path}: not a Cairn database (no Cairn header found)")]
    NotCairn {
        /// The file that was opened.
        path: String,
    },
    /// The file is LMDB's own data file (LMDB's meta page at its start): Cairn reads it only
    /// to convert it, with `cairn migrate`. Nothing was created or changed (not even the lock
    /// file, which an LMDB process may be using).
    #[error("{path}: an LMDB environment's data file, which Cairn does not open in place: convert it once with `cairn migrate {dir}` (docs/compat.md, \"Coming from LMDB\")")]
    LmdbFile {
        /// The data file.
        path: String,
        /// The environment's path as `cairn migrate` takes it.
        dir: String,
    },
    /// Migrating an LMDB environment at open ([`crate::EnvOptions::migrate_lmdb`]) failed; the
    /// LMDB environment is unchanged.
    #[error("{path}: migrating the LMDB environment failed, it is unchanged: {what}")]
    MigrateFailed {
        /// The environment.
        path: String,
        /// Why.
        what: String,
    },
    /// The file is a Cairn database of a format this build does not read.
    #[error("unsupported file format version {found} (this build reads version {supported})")]
    VersionMismatch {
        /// Version in the file.
        found: u32,
        /// Version this build reads and writes.
        supported: u32,
    },
    /// The file's contents contradict themselves: a checksum, a bound or an order is wrong.
    #[error("database corrupted: {what}")]
    Corrupted {
        /// What was found, and where (page number, field).
        what: String,
    },
    /// Cairn broke one of its own invariants: a bug in Cairn, not damage to the file (which is
    /// [`Error::Corrupted`]). The operation was refused before anything was published; the
    /// transaction should be dropped. Please report it with the message.
    #[error("Cairn has a bug: {0}")]
    Internal(String),
    /// NOOVERWRITE was given and the key exists.
    #[error("key already exists")]
    KeyExists,
    /// A named database asked for without CREATE does not exist.
    #[error("database {name:?} not found")]
    DbNotFound {
        /// The name asked for.
        name: String,
    },
    /// A key is longer than the page size allows, or empty where that is not allowed.
    #[error("key of {len} bytes is too long (at most {max} bytes with this page size)")]
    KeyTooLarge {
        /// Length given.
        len: usize,
        /// Largest allowed.
        max: usize,
    },
    /// A value is larger than Cairn stores (2 GiB).
    #[error("value of {len} bytes is too large (at most {max} bytes)")]
    ValueTooLarge {
        /// Length given.
        len: usize,
        /// Largest allowed.
        max: usize,
    },
    /// An INTEGERKEY database was given a key that is not a 4- or 8-byte integer.
    #[error("integer key must be 4 or 8 bytes, got {len}")]
    BadIntegerKey {
        /// Length given.
        len: usize,
    },
    /// APPEND was given and the key is not greater than the last key of the database, or
    /// APPEND_DUP and the value is not greater than the last value of its key.
    #[error("APPEND: key (or APPEND_DUP: value) does not sort after the last one")]
    AppendOrder,
    /// A DUP_FIXED database was given a value whose size differs from its key's other values
    /// (or an INTEGER_DUP database a value that is not a 4- or 8-byte integer).
    #[error("value of {len} bytes where {expected} bytes are required")]
    BadValueSize {
        /// Length given.
        len: usize,
        /// Length required.
        expected: usize,
    },
    /// The size limit set by the user was reached.
    #[error("database full: the file would exceed its size limit of {limit} bytes (raise it with EnvOptions::max_size)")]
    MapFull {
        /// The limit in bytes.
        limit: u64,
    },
    /// The handle table is full: `max_dbs` named databases are open in this environment
    /// already (LMDB's MDB_DBS_FULL).
    #[error("too many named databases open: the limit is {max} handles (raise it with EnvOptions::max_dbs)")]
    DbsFull {
        /// The limit.
        max: u32,
    },
    /// Every slot of the reader table is taken.
    #[error(
        "reader table full: all {max} slots are in use by live readers (raise it with EnvOptions::max_readers; the first process to open the environment sets the table size)"
    )]
    ReadersFull {
        /// The limit.
        max: u32,
    },
    /// The database handle does not belong to this environment or was deleted.
    #[error("invalid database handle")]
    BadDbi,
    /// A write was attempted in a read-only environment or transaction.
    #[error("environment is read-only")]
    ReadOnly,
    /// LMDB's MDB_INCOMPATIBLE: a database was opened with flags that contradict how it was
    /// created; or an operation does not fit what it meets: a put or delete of a key of the
    /// main database that names a named database, a named database opened under a name that
    /// is a plain key of the main database, or created while the main database is DUP_SORT
    /// or INTEGER_KEY.
    #[error("incompatible: {what}")]
    Incompatible {
        /// Flags stored in the file (0 when the refusal is not about flags).
        existing: u32,
        /// Flags asked for (0 when the refusal is not about flags).
        requested: u32,
        /// What was refused, and why.
        what: String,
    },
    /// An option or argument is out of range.
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// An earlier fatal I/O error left the environment in an unknown state; reopen it.
    #[error("environment unusable after an earlier fatal error; reopen it")]
    Poisoned,
    /// The lock file is not one this build can share (foreign, another format version, or
    /// left uninitialised).
    #[error("lock file unusable: {0}")]
    LockFile(String),
    /// The environment was used in a child process after fork().
    #[error("environment used after fork(): open it again in the child process")]
    Forked,
    /// A write to a database whose file says its keys (or values) are kept in a user-supplied
    /// order, through a handle that has not set that order (`Env::set_key_order`,
    /// `Env::set_dup_order`): the write would break the order, so nothing was changed.
    #[error(
        "database {db}: its {what} are kept in a user-supplied order this handle has not set \
         (Env::set_key_order / set_dup_order, mdb_set_compare / mdb_set_dupsort)"
    )]
    OrderUnknown {
        /// The database ("(main)" for the main database).
        db: String,
        /// "keys" or "values".
        what: &'static str,
    },
}

/// Cairn's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(op: impl Into<String>, source: io::Error) -> Error {
        Error::Io {
            op: op.into(),
            source,
        }
    }

    pub(crate) fn corrupted(what: impl Into<String>) -> Error {
        Error::Corrupted { what: what.into() }
    }

    /// The same error again, for each member of a group whose commit failed (`group.rs`):
    /// an OS error is rebuilt from its kind and message (`io::Error` is not `Clone`).
    pub(crate) fn duplicate(&self) -> Error {
        match self {
            Error::Io { op, source } => Error::Io {
                op: op.clone(),
                source: match source.raw_os_error() {
                    Some(code) => io::Error::from_raw_os_error(code),
                    None => io::Error::new(source.kind(), source.to_string()),
                },
            },
            Error::NotCairn { path } => Error::NotCairn { path: path.clone() },
            Error::LmdbFile { path, dir } => Error::LmdbFile {
                path: path.clone(),
                dir: dir.clone(),
            },
            Error::MigrateFailed { path, what } => Error::MigrateFailed {
                path: path.clone(),
                what: what.clone(),
            },
            Error::VersionMismatch { found, supported } => Error::VersionMismatch {
                found: *found,
                supported: *supported,
            },
            Error::Corrupted { what } => Error::Corrupted { what: what.clone() },
            Error::Internal(w) => Error::Internal(w.clone()),
            Error::KeyExists => Error::KeyExists,
            Error::DbNotFound { name } => Error::DbNotFound { name: name.clone() },
            Error::KeyTooLarge { len, max } => Error::KeyTooLarge {
                len: *len,
                max: *max,
            },
            Error::ValueTooLarge { len, max } => Error::ValueTooLarge {
                len: *len,
                max: *max,
            },
            Error::BadIntegerKey { len } => Error::BadIntegerKey { len: *len },
            Error::AppendOrder => Error::AppendOrder,
            Error::BadValueSize { len, expected } => Error::BadValueSize {
                len: *len,
                expected: *expected,
            },
            Error::MapFull { limit } => Error::MapFull { limit: *limit },
            Error::DbsFull { max } => Error::DbsFull { max: *max },
            Error::ReadersFull { max } => Error::ReadersFull { max: *max },
            Error::BadDbi => Error::BadDbi,
            Error::ReadOnly => Error::ReadOnly,
            Error::Incompatible {
                existing,
                requested,
                what,
            } => Error::Incompatible {
                existing: *existing,
                requested: *requested,
                what: what.clone(),
            },
            Error::Invalid(w) => Error::Invalid(w.clone()),
            Error::Poisoned => Error::Poisoned,
            Error::LockFile(w) => Error::LockFile(w.clone()),
            Error::Forked => Error::Forked,
            Error::OrderUnknown { db, what } => Error::OrderUnknown {
                db: db.clone(),
                what,
            },
        }
    }

    /// A broken invariant of Cairn's own (see [`Error::Internal`]).
    #[cold]
    pub(crate) fn internal(what: impl Into<String>) -> Error {
        Error::Internal(what.into())
    }
}
