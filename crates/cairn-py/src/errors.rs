//! py-lmdb's exception classes, with its names and hierarchy (every class derives from
//! `cairn.Error`, which derives from `Exception`), and the mapping from engine errors.
//!
//! Invariant: every engine error variant maps to exactly one class; a variant added to the
//! engine later falls back to `Error` until it is given its own class here.

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    cairn,
    Error,
    PyException,
    "Base class of every error Cairn raises."
);
create_exception!(
    cairn,
    KeyExistsError,
    Error,
    "Key/data pair already exists."
);
create_exception!(
    cairn,
    NotFoundError,
    Error,
    "No matching key/data pair found."
);
create_exception!(cairn, PageNotFoundError, Error, "Request page not found.");
create_exception!(
    cairn,
    CorruptedError,
    Error,
    "Located page was of the wrong type or a checksum failed."
);
create_exception!(
    cairn,
    PanicError,
    Error,
    "Update of meta page failed or environment had a fatal error."
);
create_exception!(
    cairn,
    VersionMismatchError,
    Error,
    "Database file format version mismatch."
);
create_exception!(cairn, InvalidError, Error, "File is not a Cairn database.");
create_exception!(
    cairn,
    MapFullError,
    Error,
    "Environment map_size limit reached."
);
create_exception!(
    cairn,
    DbsFullError,
    Error,
    "Environment max_dbs limit reached."
);
create_exception!(
    cairn,
    ReadersFullError,
    Error,
    "Environment max_readers limit reached."
);
create_exception!(
    cairn,
    TlsFullError,
    Error,
    "Thread-local storage keys full (never raised by Cairn)."
);
create_exception!(
    cairn,
    TxnFullError,
    Error,
    "Transaction has too many dirty pages (never raised by Cairn)."
);
create_exception!(cairn, CursorFullError, Error, "Cursor stack limit reached.");
create_exception!(cairn, PageFullError, Error, "Page has no more space.");
create_exception!(
    cairn,
    MapResizedError,
    Error,
    "Database contents grew beyond the map reservation."
);
create_exception!(
    cairn,
    IncompatibleError,
    Error,
    "Operation and database are incompatible, or database flags changed."
);
create_exception!(
    cairn,
    BadDbiError,
    Error,
    "The specified DBI was changed unexpectedly or does not exist."
);
create_exception!(
    cairn,
    BadRslotError,
    Error,
    "Invalid reuse of reader locktable slot."
);
create_exception!(
    cairn,
    BadTxnError,
    Error,
    "Transaction cannot recover - it must be aborted."
);
create_exception!(
    cairn,
    BadValsizeError,
    Error,
    "Too big key/data, key is empty, or wrong size integer key."
);
create_exception!(
    cairn,
    ReadonlyError,
    Error,
    "An attempt was made to modify a read-only database."
);
create_exception!(
    cairn,
    InvalidParameterError,
    Error,
    "An invalid parameter was specified."
);
create_exception!(
    cairn,
    LockError,
    Error,
    "The environment was locked by another process."
);
create_exception!(cairn, MemoryError, Error, "Out of memory.");
create_exception!(
    cairn,
    DiskError,
    Error,
    "A system call or disk operation failed."
);

/// The message every operation on an ended transaction, closed cursor or closed environment
/// raises (py-lmdb's wording).
pub(crate) const CLOSED: &str = "Attempt to operate on closed/deleted/dropped object.";

/// `cairn.Error` for a use of something already closed.
pub(crate) fn closed() -> PyErr {
    Error::new_err(CLOSED)
}

/// Converts an engine error into the py-lmdb exception class a user of py-lmdb expects.
pub(crate) fn map(e: cairn::Error) -> PyErr {
    use cairn::Error as E;
    let msg = e.to_string();
    match e {
        E::Io { source, .. } => {
            if source.kind() == std::io::ErrorKind::OutOfMemory {
                MemoryError::new_err(msg)
            } else if source.raw_os_error() == Some(11) || source.raw_os_error() == Some(16) {
                // EAGAIN / EBUSY from the lock file: another process holds it.
                LockError::new_err(msg)
            } else {
                DiskError::new_err(msg)
            }
        }
        E::NotCairn { .. } | E::LmdbFile { .. } | E::MigrateFailed { .. } => {
            InvalidError::new_err(msg)
        }
        E::VersionMismatch { .. } => VersionMismatchError::new_err(msg),
        E::Corrupted { .. } => CorruptedError::new_err(msg),
        E::KeyExists | E::AppendOrder => KeyExistsError::new_err(msg),
        E::DbNotFound { .. } => NotFoundError::new_err(msg),
        E::KeyTooLarge { .. }
        | E::ValueTooLarge { .. }
        | E::BadIntegerKey { .. }
        | E::BadValueSize { .. } => BadValsizeError::new_err(msg),
        E::LockFile(_) => InvalidError::new_err(msg),
        E::MapFull { .. } => MapFullError::new_err(msg),
        E::DbsFull { .. } => DbsFullError::new_err(msg),
        E::ReadersFull { .. } => ReadersFullError::new_err(msg),
        E::BadDbi => BadDbiError::new_err(msg),
        E::ReadOnly => ReadonlyError::new_err(msg),
        E::Incompatible { .. } | E::OrderUnknown { .. } => IncompatibleError::new_err(msg),
        E::Invalid(_) => InvalidParameterError::new_err(msg),
        E::Poisoned | E::Internal(_) => PanicError::new_err(msg),
        _ => Error::new_err(msg),
    }
}

/// Registers the classes on the module, with py-lmdb's `MDB_NAME` class attributes.
pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    let classes: [(&str, Bound<'_, pyo3::types::PyType>, &str); 26] = [
        ("Error", py.get_type::<Error>(), ""),
        (
            "KeyExistsError",
            py.get_type::<KeyExistsError>(),
            "MDB_KEYEXIST",
        ),
        (
            "NotFoundError",
            py.get_type::<NotFoundError>(),
            "MDB_NOTFOUND",
        ),
        (
            "PageNotFoundError",
            py.get_type::<PageNotFoundError>(),
            "MDB_PAGE_NOTFOUND",
        ),
        (
            "CorruptedError",
            py.get_type::<CorruptedError>(),
            "MDB_CORRUPTED",
        ),
        ("PanicError", py.get_type::<PanicError>(), "MDB_PANIC"),
        (
            "VersionMismatchError",
            py.get_type::<VersionMismatchError>(),
            "MDB_VERSION_MISMATCH",
        ),
        ("InvalidError", py.get_type::<InvalidError>(), "MDB_INVALID"),
        (
            "MapFullError",
            py.get_type::<MapFullError>(),
            "MDB_MAP_FULL",
        ),
        (
            "DbsFullError",
            py.get_type::<DbsFullError>(),
            "MDB_DBS_FULL",
        ),
        (
            "ReadersFullError",
            py.get_type::<ReadersFullError>(),
            "MDB_READERS_FULL",
        ),
        (
            "TlsFullError",
            py.get_type::<TlsFullError>(),
            "MDB_TLS_FULL",
        ),
        (
            "TxnFullError",
            py.get_type::<TxnFullError>(),
            "MDB_TXN_FULL",
        ),
        (
            "CursorFullError",
            py.get_type::<CursorFullError>(),
            "MDB_CURSOR_FULL",
        ),
        (
            "PageFullError",
            py.get_type::<PageFullError>(),
            "MDB_PAGE_FULL",
        ),
        (
            "MapResizedError",
            py.get_type::<MapResizedError>(),
            "MDB_MAP_RESIZED",
        ),
        (
            "IncompatibleError",
            py.get_type::<IncompatibleError>(),
            "MDB_INCOMPATIBLE",
        ),
        ("BadDbiError", py.get_type::<BadDbiError>(), "MDB_BAD_DBI"),
        (
            "BadRslotError",
            py.get_type::<BadRslotError>(),
            "MDB_BAD_RSLOT",
        ),
        ("BadTxnError", py.get_type::<BadTxnError>(), "MDB_BAD_TXN"),
        (
            "BadValsizeError",
            py.get_type::<BadValsizeError>(),
            "MDB_BAD_VALSIZE",
        ),
        ("ReadonlyError", py.get_type::<ReadonlyError>(), "EACCES"),
        (
            "InvalidParameterError",
            py.get_type::<InvalidParameterError>(),
            "EINVAL",
        ),
        ("LockError", py.get_type::<LockError>(), "EAGAIN"),
        ("MemoryError", py.get_type::<MemoryError>(), "ENOMEM"),
        ("DiskError", py.get_type::<DiskError>(), "EIO"),
    ];
    for (name, ty, mdb) in classes {
        if !mdb.is_empty() {
            ty.setattr("MDB_NAME", mdb)?;
        }
        m.add(name, ty)?;
    }
    Ok(())
}
