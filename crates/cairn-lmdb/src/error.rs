//! The reader's errors. Damage always names the page where it was found.

use std::io;

/// Why an LMDB environment could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A system call failed; `what` says on what.
    #[error("{what}: {source}")]
    Io {
        /// What was being done ("reading page 12 of db/data.mdb").
        what: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// The file carries no LMDB meta page.
    #[error("{path}: not an LMDB data file (no LMDB meta page)")]
    NotLmdb {
        /// The data file.
        path: String,
    },
    /// LMDB's file, in a layout this reader does not read (another data version, a big-endian
    /// machine's file, a 32-bit build's file).
    #[error("{path}: {what}")]
    Unsupported {
        /// The data file.
        path: String,
        /// What layout it is.
        what: String,
    },
    /// The file contradicts LMDB's format at `page`.
    #[error("page {page}: {what}")]
    Corrupt {
        /// The page where the damage is (0 or 1 for the metas).
        page: u64,
        /// What is wrong.
        what: String,
    },
}

impl Error {
    pub(crate) fn corrupt(page: u64, what: impl Into<String>) -> Error {
        Error::Corrupt {
            page,
            what: what.into(),
        }
    }

    /// The page a [`Error::Corrupt`] names.
    pub fn page(&self) -> Option<u64> {
        match self {
            Error::Corrupt { page, .. } => Some(*page),
            _ => None,
        }
    }
}

/// Result of the reader.
pub type Result<T, E = Error> = std::result::Result<T, E>;
