//! LMDB's C API (`lmdb.h`, 0.9) over Cairn, built as `liblmdb.so.0` and `liblmdb.a` so that a
//! C or C++ program moves to Cairn by relinking (or, already linked, through LD_LIBRARY_PATH).
//!
//! Invariants (docs/safety.md §7):
//! - Every exported function runs its body under `catch_unwind` ([`guard`]), or only tests
//!   its arguments and jumps to an `extern "C"` function of this crate that does (the hot
//!   paths): no Rust panic crosses into C. The shipped library aborts on a panic (profile
//!   `release-capi`, `panic = "abort"`: a panic is a bug of Cairn's, and LMDB aborts on its
//!   own); unwinding builds (tests) turn it into `MDB_PANIC`.
//! - Handles are heap boxes handed to C as raw pointers. A NULL handle gives `EINVAL`; a
//!   handle already freed is the caller's bug, as in LMDB.
//! - A transaction's engine object (`RoTxn`/`RwTxn`) borrows the `Env` inside its `MDB_env`
//!   box; the lifetime is erased to `'static` and upheld by the C contract (transactions end
//!   before `mdb_env_close`; a close with live transactions is deferred until the last ends).
//! - Cursors hold engine cursors that borrow their transaction's pages. Before any write, the
//!   transaction "parks" its cursors (keeps their position as owned bytes, drops the engine
//!   cursor), so no borrow of the pages outlives a change to them.
#![allow(non_camel_case_types, reason = "LMDB's C type names")]
#![allow(
    clippy::missing_safety_doc,
    reason = "the contract is lmdb.h's, documented there"
)]

mod consts;
mod cursor;
mod db;
mod env;
mod extra;
mod txn;

pub use consts::*;
pub use cursor::MDB_cursor;
pub use env::MDB_env;
pub use txn::MDB_txn;

use std::os::raw::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};

/// LMDB's `MDB_val`: a size and a pointer.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MDB_val {
    /// Bytes.
    pub mv_size: libc::size_t,
    /// Address.
    pub mv_data: *mut libc::c_void,
}

/// LMDB's database handle.
pub type MDB_dbi = libc::c_uint;

/// LMDB's comparison callback.
pub type MDB_cmp_func = unsafe extern "C" fn(*const MDB_val, *const MDB_val) -> c_int;

/// LMDB's `MDB_stat`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct MDB_stat {
    /// Page size.
    pub ms_psize: libc::c_uint,
    /// Tree depth.
    pub ms_depth: libc::c_uint,
    /// Branch pages.
    pub ms_branch_pages: libc::size_t,
    /// Leaf pages.
    pub ms_leaf_pages: libc::size_t,
    /// Overflow pages.
    pub ms_overflow_pages: libc::size_t,
    /// Entries.
    pub ms_entries: libc::size_t,
}

/// LMDB's `MDB_envinfo`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MDB_envinfo {
    /// Map address (Cairn: NULL, there is no fixed map).
    pub me_mapaddr: *mut libc::c_void,
    /// The size limit (`mdb_env_set_mapsize`), or the file size when there is none.
    pub me_mapsize: libc::size_t,
    /// Last page in use.
    pub me_last_pgno: libc::size_t,
    /// Last committed transaction.
    pub me_last_txnid: libc::size_t,
    /// Reader table size.
    pub me_maxreaders: libc::c_uint,
    /// Readers holding a snapshot.
    pub me_numreaders: libc::c_uint,
}

/// Runs `f`, turning a panic into `MDB_PANIC`.
#[inline]
pub(crate) fn guard(f: impl FnOnce() -> c_int) -> c_int {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(MDB_PANIC)
}

/// Runs `f` for a function that returns nothing to C; a panic is swallowed.
pub(crate) fn guard_void(f: impl FnOnce()) {
    let _ = catch_unwind(AssertUnwindSafe(f));
}

/// LMDB's code for an engine error.
pub(crate) fn code(e: &cairn::Error) -> c_int {
    use cairn::Error as E;
    match e {
        E::Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
        E::NotCairn { .. } | E::LmdbFile { .. } | E::MigrateFailed { .. } | E::LockFile(_) => {
            MDB_INVALID
        }
        E::VersionMismatch { .. } => MDB_VERSION_MISMATCH,
        E::Corrupted { .. } => MDB_CORRUPTED,
        // LMDB reports an out-of-order APPEND as an existing key.
        E::KeyExists | E::AppendOrder => MDB_KEYEXIST,
        E::DbNotFound { .. } => MDB_NOTFOUND,
        E::KeyTooLarge { .. }
        | E::ValueTooLarge { .. }
        | E::BadIntegerKey { .. }
        | E::BadValueSize { .. } => MDB_BAD_VALSIZE,
        E::MapFull { .. } => MDB_MAP_FULL,
        E::DbsFull { .. } => MDB_DBS_FULL,
        E::ReadersFull { .. } => MDB_READERS_FULL,
        E::BadDbi => MDB_BAD_DBI,
        E::ReadOnly => libc::EACCES,
        E::Incompatible { .. } | E::OrderUnknown { .. } => MDB_INCOMPATIBLE,
        E::Invalid(_) => libc::EINVAL,
        // A bug in Cairn: LMDB says MDB_PANIC for a fatal error of its own.
        E::Poisoned | E::Forked | E::Internal(_) => MDB_PANIC,
        _ => MDB_PANIC,
    }
}

/// LMDB's code for an engine error, out of line: the hot paths neither drop an error nor keep
/// registers for one.
#[cold]
#[inline(never)]
pub(crate) fn fail_code(e: cairn::Error) -> c_int {
    code(&e)
}

/// A byte slice from an `MDB_val` (empty for a NULL one).
///
/// # Safety
/// `v.mv_data` must be NULL or point to `v.mv_size` readable bytes for `'a`.
#[inline]
pub(crate) unsafe fn slice<'a>(v: &MDB_val) -> &'a [u8] {
    if v.mv_data.is_null() {
        return &[];
    }
    // SAFETY: the caller's MDB_val describes readable memory (lmdb.h contract; a zero size
    // with any non-NULL address is a valid empty slice of bytes), see docs/safety.md §7.
    unsafe { std::slice::from_raw_parts(v.mv_data as *const u8, v.mv_size) }
}

/// Points `v` at `s` (which lives in the map or the transaction's pages).
#[inline]
pub(crate) fn set_val(v: *mut MDB_val, s: &[u8]) {
    if v.is_null() {
        return;
    }
    // SAFETY: `v` is a caller's non-NULL out-parameter (docs/safety.md §7).
    unsafe { *v = val_of(s) };
}

/// An `MDB_val` describing `s`.
#[inline]
pub(crate) fn val_of(s: &[u8]) -> MDB_val {
    MDB_val {
        mv_size: s.len(),
        mv_data: s.as_ptr() as *mut libc::c_void,
    }
}
