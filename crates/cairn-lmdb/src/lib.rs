//! A reader of LMDB's on-disk format (LMDB 0.9, little-endian 64-bit files), written from its
//! documented layout for Cairn's `dump`, `stat`, `check` and `migrate` commands.
//!
//! - [`LmdbEnv::open`] finds the files (subdir or NOSUBDIR layout), reads both meta pages and
//!   takes the newest valid one, as LMDB does.
//! - [`LmdbEnv::named_dbs`] lists the named databases; [`LmdbEnv::pairs`] walks a database's
//!   pairs in order: branch and leaf pages, overflow values, duplicates in sub-pages and
//!   sub-trees, fixed-size (DUPFIXED) leaves.
//! - [`lock`] reads LMDB's lock file and tells whether an LMDB process holds the environment.
//!
//! Everything read is validated and bounded: page numbers against the snapshot's last page
//! and the file's length, node offsets and sizes against their page, overflow runs against the
//! file, tree depth against its record and a limit, each page visited once per walk (a cycle
//! is an error), entry and page counts against the records, keys and duplicates in their
//! order. A hostile or truncated file gives an [`Error`] naming the page, never a panic, a
//! hang or an allocation beyond the file's own size. The crate has no `unsafe`: pages are read
//! with `pread`, one page per tree level at a time, so memory stays bounded.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod env;
mod error;
pub mod format;
pub mod lock;
mod walk;

pub use env::{files, is_lmdb_file, LmdbEnv, NamedDb};
pub use error::{Error, Result};
pub use format::{DbRecord, Meta};
pub use walk::{Entry, Order, PageCounts, Pairs, Seen, Walk};
