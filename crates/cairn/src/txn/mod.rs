//! Transactions. A read transaction is a registered snapshot: reads go straight to the map. A
//! write transaction owns the writer state, keeps copies of the pages it changes ("dirty"
//! pages, at new page numbers: copy-on-write), and is published by `commit`.
//!
//! Parts: `read` (RoTxn), `write` (RwTxn: puts, deletes, the page writer), `dbs` (RwTxn's
//! named databases: create, open, clear, drop),
//! `nested` (nested transactions and their undo records), `dup` (sorted-duplicate operations),
//! `commit` (publishing a write transaction).
//!
//! Invariants:
//! - A write transaction never writes to a page that any snapshot can reach: it changes only
//!   dirty pages, which it allocated from reusable pages or past the high-water mark.
//! - Nested transactions keep an undo record per level: the first change a child makes to a
//!   dirty page saves the page's prior image (or its absence), and the free set, records and
//!   high-water mark are restored from the level's mark on abort.

mod commit;
mod dbs;
mod dup;
mod nested;
mod read;
mod write;

pub use nested::Nested;
pub use read::RoTxn;
pub use write::RwTxn;
pub(crate) use write::{refuse_inside_group_job, GroupJobMark};
