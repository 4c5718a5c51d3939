//! `MDB_txn`: read transactions (with reset/renew), write transactions and nested ones.
//!
//! A write transaction's `RwTxn` lives in its own box; a nested child holds a `Nested` that
//! borrows it mutably, so while a child lives its ancestors refuse every operation with
//! MDB_BAD_TXN (LMDB's rule too). Committing or aborting a parent ends its live child first.
//! Cursors of a write transaction are freed when it ends (as in LMDB 0.9); cursors of a read
//! transaction outlive it, detached, until mdb_cursor_renew or mdb_cursor_close.
//!
//! Handles are recycled: a finished transaction's box goes to its environment's spare slot
//! (`MDB_env::spare`, one box, like LMDB's spare read transaction) and the next
//! mdb_txn_begin takes it back, so a short read transaction allocates nothing in this layer.
//! A recycled box is blank (kind `Reset`, no parent, child or cursors) but keeps its handle
//! cache while the environment's handle table is unchanged (`MDB_env::dbi_gen`).

use crate::cursor::{self, MDB_cursor};
use crate::env::{env_static, handle, trc, tri, Dbi, MDB_env, CLOSED};
use crate::{guard, guard_void, MDB_dbi, MDB_BAD_TXN, MDB_MAP_RESIZED, MDB_RDONLY};
use cairn::{Nested, RoTxn, RwTxn};
use std::os::raw::{c_int, c_uint};
use std::sync::atomic::Ordering;

#[allow(
    clippy::large_enum_variant,
    reason = "one per transaction handle, which is boxed already"
)]
pub(crate) enum Kind {
    Ro(RoTxn<'static>),
    /// A read transaction after mdb_txn_reset: no snapshot until mdb_txn_renew.
    Reset,
    Rw(*mut RwTxn<'static>),
    Nested(*mut Nested<'static, 'static>),
}

/// A transaction handle.
pub struct MDB_txn {
    pub(crate) env: *mut MDB_env,
    pub(crate) kind: Kind,
    parent: *mut MDB_txn,
    child: *mut MDB_txn,
    pub(crate) cursors: Vec<*mut MDB_cursor>,
    /// Handles looked up by this transaction (the environment's table takes a lock); inline,
    /// so that a short read transaction allocates nothing for it.
    dbis: [Option<Dbi>; DBI_CACHE],
    /// The environment's `dbi_gen` when the cache was last known to agree with its table.
    dbi_gen: u64,
    /// A write failed in a way that leaves the transaction unusable (LMDB's MDB_TXN_ERROR).
    broken: bool,
    /// Some handle of the environment's table is private to this transaction (`Dbi::owner`):
    /// opened by it, or by a child that committed. Its end settles them.
    pub(crate) owns_dbis: bool,
    /// After mdb_txn_reset: the thread listed in `MDB_env::resets` for this handle, else 0.
    reset_tid: u64,
    /// The handle of a `cairn_write_grouped` call: its kind `Rw` points at the group's nested
    /// level only while the callback runs (`run_grouped`); mdb_txn_commit/abort refuse it.
    pub(crate) grouped: bool,
}

/// Handles cached per transaction (higher ones are looked up each time): the main database's
/// and the first seven named ones' (slot 0, LMDB's free-page database, stays empty).
const DBI_CACHE: usize = 9;

/// What reads go through.
pub(crate) enum View<'a> {
    Ro(&'a RoTxn<'static>),
    Rw(&'a RwTxn<'static>),
}

impl<'a> View<'a> {
    pub(crate) fn cursor(&self, db: cairn::Database) -> cairn::Result<cairn::Cursor<'a>> {
        match self {
            View::Ro(t) => t.cursor(db),
            View::Rw(t) => t.cursor(db),
        }
    }
    pub(crate) fn stat(&self, db: cairn::Database) -> cairn::Result<cairn::Stat> {
        match self {
            View::Ro(t) => t.stat(db),
            View::Rw(t) => t.stat(db),
        }
    }
}

impl MDB_txn {
    pub(crate) fn menv(&self) -> &MDB_env {
        // SAFETY: the environment outlives its transactions (`live`; docs/safety.md §7).
        unsafe { &*self.env }
    }

    fn usable(&self) -> Result<(), c_int> {
        if !self.child.is_null() || self.broken {
            return Err(MDB_BAD_TXN);
        }
        Ok(())
    }

    pub(crate) fn is_write(&self) -> bool {
        matches!(self.kind, Kind::Rw(_) | Kind::Nested(_))
    }

    /// The transaction for reading, with the lifetime of this handle's borrow.
    pub(crate) fn view(&self) -> Result<View<'_>, c_int> {
        self.usable()?;
        Ok(match &self.kind {
            Kind::Ro(t) => View::Ro(t),
            Kind::Reset => return Err(MDB_BAD_TXN),
            // SAFETY: docs/safety.md §7: the box lives until the transaction ends; no child holds
            // it (usable).
            Kind::Rw(p) => View::Rw(unsafe { &**p }),
            // SAFETY: docs/safety.md §7: as above, through the Nested handle.
            Kind::Nested(p) => View::Rw(unsafe { &**p }),
        })
    }

    fn rw_ptr(&self) -> Result<*mut RwTxn<'static>, c_int> {
        match &self.kind {
            Kind::Ro(_) | Kind::Reset => Err(libc::EACCES),
            Kind::Rw(p) => Ok(*p),
            // SAFETY: the Nested box lives until this transaction ends (docs/safety.md §7).
            Kind::Nested(p) => Ok(unsafe { &mut ***p } as *mut RwTxn<'static>),
        }
    }

    /// The engine object of a top-level write transaction that can write at once: usable (no
    /// child, not broken) and with no cursor to park. None for any other.
    #[inline]
    pub(crate) fn plain_rw(&self) -> Option<*mut RwTxn<'static>> {
        match self.kind {
            Kind::Rw(p) if self.child.is_null() && !self.broken && self.cursors.is_empty() => {
                Some(p)
            }
            _ => None,
        }
    }

    /// The write transaction, after parking this transaction's cursors (a write may move or
    /// free the pages they borrow).
    pub(crate) fn rw(&mut self) -> Result<&mut RwTxn<'static>, c_int> {
        self.usable()?;
        let p = self.rw_ptr()?;
        self.park_cursors();
        // SAFETY: the box lives until the transaction ends; parked cursors no longer borrow
        // it; the C API is used from one thread per write transaction (docs/safety.md §7).
        Ok(unsafe { &mut *p })
    }

    /// Parks this transaction's cursors (inline: most writes have none to park).
    #[inline]
    pub(crate) fn park_cursors(&mut self) {
        if !self.cursors.is_empty() {
            self.park_each();
        }
    }

    #[inline(never)]
    fn park_each(&mut self) {
        for &c in &self.cursors {
            // SAFETY: registered cursors are live until they unregister (docs/safety.md §7).
            unsafe { cursor::park(c) };
        }
    }

    /// Records a write's failure: the errors after which LMDB refuses the transaction.
    pub(crate) fn fail(&mut self, e: &cairn::Error) -> c_int {
        let rc = crate::code(e);
        if matches!(
            e,
            cairn::Error::Io { .. }
                | cairn::Error::MapFull { .. }
                | cairn::Error::Corrupted { .. }
                | cairn::Error::Internal(_)
                | cairn::Error::Poisoned
        ) {
            self.broken = true;
        }
        rc
    }

    /// The handle `dbi` (EINVAL if it was never opened).
    #[inline]
    pub(crate) fn dbi(&mut self, dbi: MDB_dbi) -> Result<Dbi, c_int> {
        if let Some(Some(d)) = self.dbis.get(dbi as usize) {
            return Ok(*d);
        }
        self.dbi_slow(dbi)
    }

    #[cold]
    fn dbi_slow(&mut self, dbi: MDB_dbi) -> Result<Dbi, c_int> {
        let d = self.menv().dbi(dbi)?;
        if d.owner != 0 && !self.sees(d.owner) {
            // Opened by another transaction that has not committed (LMDB: EINVAL).
            return Err(libc::EINVAL);
        }
        if let Some(slot) = self.dbis.get_mut(dbi as usize) {
            *slot = Some(d);
        }
        Ok(d)
    }

    /// Whether a handle private to transaction `owner` (an address) is this transaction's or
    /// an ancestor's.
    fn sees(&self, owner: usize) -> bool {
        let mut t: *const MDB_txn = self;
        while !t.is_null() {
            if t as usize == owner {
                return true;
            }
            // SAFETY: ancestors are live while a descendant is (docs/safety.md §7).
            t = unsafe { (*t).parent };
        }
        false
    }

    /// Settles the handles this transaction owns as it ends (`MDB_env::settle_dbis`): kept
    /// when it committed, closed else.
    fn settle_dbis(&mut self, me: *mut MDB_txn, committed: bool) {
        if !std::mem::take(&mut self.owns_dbis) {
            return;
        }
        let to = committed.then_some(self.parent as usize);
        self.menv().settle_dbis(me as usize, to);
        if committed && !self.parent.is_null() {
            // SAFETY: the parent outlives its child (docs/safety.md §7).
            unsafe { (*self.parent).owns_dbis = true };
        }
    }

    /// Lists this reset read transaction in `MDB_env::resets`.
    fn list_reset(&mut self) {
        // SAFETY: gettid has no preconditions.
        let tid = u64::try_from(unsafe { libc::gettid() }).unwrap_or(0);
        self.menv()
            .resets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(tid);
        self.reset_tid = tid;
    }

    /// Takes this transaction out of `MDB_env::resets` (renewed or ended), if it is there.
    fn unlist_reset(&mut self) {
        let tid = std::mem::take(&mut self.reset_tid);
        if tid != 0 {
            let mut g = self.menv().resets.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(i) = g.iter().position(|&x| x == tid) {
                g.swap_remove(i);
            }
        }
    }

    /// The handles this transaction has cached (a `None` is looked up by [`Self::dbi`]).
    #[inline]
    pub(crate) fn dbis(&self) -> &[Option<Dbi>; DBI_CACHE] {
        &self.dbis
    }

    /// Drops a cached handle (opened again, closed, dropped or given a comparator).
    pub(crate) fn forget_cached(&mut self, dbi: MDB_dbi) {
        if let Some(s) = self.dbis.get_mut(dbi as usize) {
            *s = None;
        }
    }

    pub(crate) fn unregister(&mut self, c: *mut MDB_cursor) {
        self.cursors.retain(|&x| x != c);
    }
}

/// A blank handle (kind `Reset`, for the caller to set): the environment's spare box if there
/// is one, else a new one. The kind is not a parameter: moving a `Kind` copies a whole
/// read transaction's worth of bytes.
#[inline]
fn new_txn(e: &MDB_env, env: *mut MDB_env, parent: *mut MDB_txn) -> *mut MDB_txn {
    let t = e.spare.swap(std::ptr::null_mut(), Ordering::SeqCst);
    if t.is_null() {
        return alloc_txn(e, env, parent);
    }
    // SAFETY: the spare box is blank and owned by whoever takes it from the slot
    // (docs/safety.md §7); it belongs to this environment.
    let b = unsafe { &mut *t };
    b.parent = parent;
    // The handles cached by the box's last transaction stay valid until the table changes.
    let gen = e.dbi_gen.load(Ordering::Acquire);
    if b.dbi_gen != gen {
        b.dbis = [None; DBI_CACHE];
        b.dbi_gen = gen;
    }
    t
}

/// A new blank handle (no spare one to take), counted in the environment's state.
#[cold]
#[inline(never)]
fn alloc_txn(e: &MDB_env, env: *mut MDB_env, parent: *mut MDB_txn) -> *mut MDB_txn {
    e.txn_allocated();
    Box::into_raw(Box::new(MDB_txn {
        env,
        kind: Kind::Reset,
        parent,
        child: std::ptr::null_mut(),
        cursors: Vec::new(),
        dbis: [None; DBI_CACHE],
        dbi_gen: e.dbi_gen.load(Ordering::Acquire),
        broken: false,
        owns_dbis: false,
        reset_tid: 0,
        grouped: false,
    }))
}

/// Gives up a finished handle: blanks it into the environment's spare slot (still counted in
/// `MDB_env::state`), or frees and uncounts it. Frees the environment if it was closed and
/// this was its last handle.
///
/// # Safety
/// `t` is a finished handle of the live environment `env` that nothing refers to any more;
/// the caller does not use `env` afterwards.
#[inline]
unsafe fn recycle(env: *mut MDB_env, t: *mut MDB_txn) {
    // SAFETY: docs/safety.md §7: the caller's handle, unreferenced now.
    let b = unsafe { &mut *t };
    b.parent = std::ptr::null_mut();
    b.child = std::ptr::null_mut();
    b.broken = false;
    b.owns_dbis = false;
    b.grouped = false;
    b.unlist_reset();
    b.cursors.clear();
    // SAFETY: the caller's contract, passed on; the handle is blank now.
    unsafe { park_spare(env, t) };
}

/// [`recycle`] for a handle that is blank already.
///
/// # Safety
/// As for [`recycle`], and `t` is blank (kind `Reset`, no parent, child or cursors, not
/// broken).
#[inline]
unsafe fn park_spare(env: *mut MDB_env, t: *mut MDB_txn) {
    // SAFETY: docs/safety.md §7: the caller's blank handle.
    debug_assert!(matches!(unsafe { &(*t).kind }, Kind::Reset));
    // SAFETY: docs/safety.md §7: live: this handle is counted in its state.
    let e = unsafe { &*env };
    let parked = e
        .spare
        .compare_exchange(std::ptr::null_mut(), t, Ordering::SeqCst, Ordering::Relaxed)
        .is_ok();
    if !parked {
        // SAFETY: docs/safety.md §7: the caller's contract, passed on.
        unsafe { free_txn(env, t) };
    } else if e.state.load(Ordering::SeqCst) & CLOSED != 0 {
        // Closed meanwhile: mdb_env_close may have looked at the slot before this handle was
        // parked there, so whoever of the two finds it frees it (and maybe the environment).
        // SAFETY: docs/safety.md §7: live (the parked handle is counted) and closed.
        unsafe { MDB_env::reclaim_spare(env) };
    }
}

/// Frees and uncounts a finished handle that found the spare slot taken.
///
/// # Safety
/// As for [`recycle`].
#[cold]
#[inline(never)]
unsafe fn free_txn(env: *mut MDB_env, t: *mut MDB_txn) {
    // SAFETY: docs/safety.md §7: created by Box::into_raw in alloc_txn; nothing refers to it.
    drop(unsafe { Box::from_raw(t) });
    // SAFETY: docs/safety.md §7: live until this call, which uncounts the handle just freed.
    unsafe { MDB_env::txn_freed(env) };
}

/// Frees a spare handle (the environment's Drop).
///
/// # Safety
/// `t` is NULL or a blank handle taken from a spare slot.
pub(crate) unsafe fn free_spare(t: *mut MDB_txn) {
    if !t.is_null() {
        // SAFETY: docs/safety.md §7: created by Box::into_raw in new_txn; the slot owned it.
        drop(unsafe { Box::from_raw(t) });
    }
}

/// Begins a transaction: MDB_RDONLY for a read one; a `parent` write transaction for a
/// nested one.
#[no_mangle]
pub unsafe extern "C" fn mdb_txn_begin(
    env: *mut MDB_env,
    parent: *mut MDB_txn,
    flags: c_uint,
    txn: *mut *mut MDB_txn,
) -> c_int {
    // Two functions of their own, reached by a jump: the write path's large frame (a write
    // transaction is built on the stack) is not paid by a read transaction.
    if flags & MDB_RDONLY != 0 {
        // SAFETY: the caller's arguments, passed on.
        unsafe { begin_read(env, parent, txn) }
    } else {
        // SAFETY: as above.
        unsafe { begin_write(env, parent, txn) }
    }
}

// `extern "C"` (they catch every panic, so they cannot unwind): a call between C-ABI
// functions that cannot unwind needs no landing pad, so mdb_txn_begin's calls are jumps.

/// mdb_txn_begin's first checks: a handle, an out-parameter, an opened environment.
#[inline(always)]
fn begin_checks<'e>(
    env: *mut MDB_env,
    txn: *mut *mut MDB_txn,
) -> Result<(&'e MDB_env, &'static cairn::Env), c_int> {
    if env.is_null() || txn.is_null() {
        return Err(libc::EINVAL);
    }
    // SAFETY: a non-NULL handle from this library (docs/safety.md §7).
    let e = unsafe { &*env };
    Ok((e, env_static(e)?))
}

/// mdb_txn_begin with MDB_RDONLY.
///
/// # Safety
/// mdb_txn_begin's arguments.
#[inline(never)]
unsafe extern "C" fn begin_read(
    env: *mut MDB_env,
    parent: *mut MDB_txn,
    txn: *mut *mut MDB_txn,
) -> c_int {
    guard(|| {
        let (e, en) = tri!(begin_checks(env, txn));
        if !parent.is_null() {
            // No nesting under MDB_RDONLY; LMDB's codes: EINVAL under a read-only parent,
            // MDB_BAD_TXN under a write one.
            // SAFETY: a live handle (docs/safety.md §7).
            return if unsafe { &*parent }.is_write() {
                MDB_BAD_TXN
            } else {
                libc::EINVAL
            };
        }
        // The snapshot goes into the (usually recycled) box; no allocation on the way.
        let t = new_txn(e, env, std::ptr::null_mut());
        match en.read_txn() {
            // As LMDB's: a snapshot that spans more than this handle's map size (another
            // process grew the file past it) is MDB_MAP_RESIZED; mdb_env_set_mapsize(env, 0)
            // adopts the size (the engine itself maps any growth: this is LMDB's contract).
            Ok(r) if en.max_size().is_some_and(|m| r.used_bytes() > m) => {
                drop(r);
                // SAFETY: docs/safety.md §7: the blank handle new_txn just gave this call.
                unsafe { recycle(env, t) };
                return MDB_MAP_RESIZED;
            }
            // SAFETY: docs/safety.md §7: the blank handle new_txn just gave this call; its kind
            // is `Reset`, which owns nothing, so it is overwritten without a drop.
            Ok(r) => unsafe { std::ptr::write(&mut (*t).kind, Kind::Ro(r)) },
            Err(err) => {
                // SAFETY: docs/safety.md §7: as above; nothing else refers to it.
                unsafe { recycle(env, t) };
                return crate::code(&err);
            }
        }
        // SAFETY: docs/safety.md §7: checked non-NULL out-parameter.
        unsafe { *txn = t };
        0
    })
}

/// mdb_txn_begin without MDB_RDONLY: a write transaction, nested if `parent` is not NULL.
///
/// # Safety
/// mdb_txn_begin's arguments.
#[inline(never)]
unsafe extern "C" fn begin_write(
    env: *mut MDB_env,
    parent: *mut MDB_txn,
    txn: *mut *mut MDB_txn,
) -> c_int {
    guard(|| {
        let (e, en) = tri!(begin_checks(env, txn));
        let kind = if parent.is_null() {
            if en.is_read_only() {
                return libc::EACCES;
            }
            Kind::Rw(Box::into_raw(Box::new(trc!(en.write_txn()))))
        } else {
            // SAFETY: a live handle (docs/safety.md §7).
            let p = unsafe { &mut *parent };
            if p.env != env || !p.is_write() {
                return libc::EINVAL;
            }
            tri!(p.usable());
            // The child changes pages the ancestors' cursors may borrow.
            let mut a = parent;
            while !a.is_null() {
                // SAFETY: ancestors are live while a descendant is (docs/safety.md §7).
                let at = unsafe { &mut *a };
                at.park_cursors();
                a = at.parent;
            }
            let rw = tri!(p.rw_ptr());
            // SAFETY: the parent's RwTxn outlives the child (ended first); the parent is
            // refused while the child lives (docs/safety.md §7).
            let n = trc!(unsafe { &mut *rw }.nested());
            // SAFETY: docs/safety.md §7: lifetime erasure only; see above.
            let n: Nested<'static, 'static> = unsafe { std::mem::transmute(n) };
            Kind::Nested(Box::into_raw(Box::new(n)))
        };
        let t = new_txn(e, env, parent);
        // SAFETY: docs/safety.md §7: the blank handle new_txn just gave this call.
        unsafe { (*t).kind = kind };
        if !parent.is_null() {
            // SAFETY: docs/safety.md §7: checked live above.
            unsafe { (*parent).child = t };
        }
        // SAFETY: docs/safety.md §7: checked non-NULL out-parameter.
        unsafe { *txn = t };
        0
    })
}

/// The write transaction a handle ends, if any.
enum Writer {
    None,
    Root(*mut RwTxn<'static>),
    Child(*mut Nested<'static, 'static>),
}

/// Ends `txn` (commit or abort) and frees it; its live child ends first.
///
/// # Safety
/// `txn` is a live handle, which the caller gives up.
#[inline(always)]
unsafe fn finish(txn: *mut MDB_txn, commit: bool) -> c_int {
    // SAFETY: a live handle (docs/safety.md §7).
    let t = unsafe { &mut *txn };
    if matches!(t.kind, Kind::Ro(_)) && t.cursors.is_empty() && !t.owns_dbis {
        // The common short read transaction: no child, no parent, no cursor to detach,
        // nothing to commit, never broken, so the handle is blank once its snapshot ends here
        // (dropped in place).
        debug_assert!(t.parent.is_null() && t.child.is_null() && !t.broken);
        t.kind = Kind::Reset;
        // SAFETY: docs/safety.md §7: finished and blank; the caller gives it up; the
        // environment is live until this handle is uncounted.
        unsafe { park_spare(t.env, txn) };
        return 0;
    }
    // SAFETY: the caller's contract, passed on.
    unsafe { finish_general(txn, commit) }
}

/// [`finish`] for a write transaction or one with cursors.
///
/// # Safety
/// As for [`finish`].
#[inline(never)]
unsafe fn finish_general(txn: *mut MDB_txn, commit: bool) -> c_int {
    // SAFETY: a live handle (docs/safety.md §7).
    let t = unsafe { &mut *txn };
    let asked = commit;
    let mut rc = 0;
    if !t.child.is_null() {
        // SAFETY: docs/safety.md §7: the child is live while registered.
        rc = unsafe { finish(t.child, commit) };
    }
    let write = t.is_write();
    for &c in &t.cursors {
        // SAFETY: registered cursors are live (docs/safety.md §7).
        unsafe { cursor::detach(c, write) };
    }
    t.cursors.clear();
    // The write kinds are pointers, taken out; a read transaction is a large value, ended by
    // dropping it in place (`t.kind = Kind::Reset`) rather than moving it out first.
    let writer = match t.kind {
        Kind::Rw(p) => Writer::Root(p),
        Kind::Nested(p) => Writer::Child(p),
        Kind::Ro(_) | Kind::Reset => Writer::None,
    };
    t.kind = Kind::Reset;
    let commit = commit && rc == 0 && !matches!(writer, Writer::None);
    let r = match writer {
        Writer::None => Ok(()),
        Writer::Root(p) => {
            // SAFETY: docs/safety.md §7: created by Box::into_raw in mdb_txn_begin; no child
            // borrows it now.
            let w = unsafe { Box::from_raw(p) };
            if commit && !t.broken {
                w.commit().map(drop)
            } else {
                Ok(())
            }
        }
        Writer::Child(p) => {
            // SAFETY: docs/safety.md §7: as above.
            let n = unsafe { Box::from_raw(p) };
            if commit && !t.broken {
                n.commit().map(drop)
            } else {
                Ok(())
            }
        }
    };
    rc = match r {
        Err(e) => crate::code(&e),
        Ok(()) if commit && t.broken => MDB_BAD_TXN,
        Ok(()) => rc,
    };
    t.settle_dbis(txn, asked && rc == 0);
    if !t.parent.is_null() {
        // SAFETY: docs/safety.md §7: the parent outlives its child.
        unsafe { (*t.parent).child = std::ptr::null_mut() };
    }
    let env = t.env;
    // SAFETY: docs/safety.md §7: finished above; the caller gives it up; its environment is live
    // until this
    // handle is uncounted.
    unsafe { recycle(env, txn) };
    rc
}

/// Commits (a read transaction: ends it) and frees the handle.
#[no_mangle]
pub unsafe extern "C" fn mdb_txn_commit(txn: *mut MDB_txn) -> c_int {
    guard(|| {
        if txn.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: docs/safety.md §7: a live handle.
        if unsafe { (*txn).grouped } {
            // A grouped write's transaction: its group commits it (cairn.h).
            return libc::EINVAL;
        }
        // SAFETY: docs/safety.md §7: a live handle.
        unsafe { finish(txn, true) }
    })
}

/// Aborts and frees the handle.
#[no_mangle]
pub unsafe extern "C" fn mdb_txn_abort(txn: *mut MDB_txn) {
    guard_void(|| {
        // SAFETY: docs/safety.md §7: a live handle; a grouped write's is left to its group
        // (cairn.h: no effect).
        if !txn.is_null() && !unsafe { (*txn).grouped } {
            // SAFETY: docs/safety.md §7: a live handle.
            unsafe { finish(txn, false) };
        }
    })
}

/// Releases a read transaction's snapshot, keeping the handle for mdb_txn_renew.
#[no_mangle]
pub unsafe extern "C" fn mdb_txn_reset(txn: *mut MDB_txn) {
    guard_void(|| {
        if txn.is_null() {
            return;
        }
        // SAFETY: docs/safety.md §7: a live handle.
        let t = unsafe { &mut *txn };
        if let Kind::Ro(_) = t.kind {
            // The snapshot goes away but the cursors keep their positions, as LMDB's do: after
            // mdb_txn_renew an MDB_NEXT goes on from there (PHP's dba lmdb handler walks so);
            // mdb_cursor_renew starts a cursor afresh.
            t.park_each();
            t.kind = Kind::Reset;
            t.settle_dbis(txn, false);
            t.list_reset();
        }
    })
}

/// Takes a new snapshot for a reset read transaction.
#[no_mangle]
pub unsafe extern "C" fn mdb_txn_renew(txn: *mut MDB_txn) -> c_int {
    guard(|| {
        let t = handle!(txn);
        if !matches!(t.kind, Kind::Reset) {
            return libc::EINVAL;
        }
        let en = tri!(env_static(t.menv()));
        t.kind = Kind::Ro(trc!(en.read_txn()));
        t.unlist_reset();
        0
    })
}

/// The environment of a transaction.
#[no_mangle]
pub unsafe extern "C" fn mdb_txn_env(txn: *mut MDB_txn) -> *mut MDB_env {
    if txn.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: docs/safety.md §7: a live handle.
    unsafe { (*txn).env }
}

/// The transaction id, numbered as LMDB does (so is the engine's): a read transaction's
/// snapshot, 0 after reset.
#[no_mangle]
pub unsafe extern "C" fn mdb_txn_id(txn: *mut MDB_txn) -> libc::size_t {
    let mut out = 0;
    guard_void(|| {
        if txn.is_null() {
            return;
        }
        // SAFETY: docs/safety.md §7: a live handle.
        let t = unsafe { &*txn };
        let id = match &t.kind {
            Kind::Ro(r) => r.id(),
            Kind::Reset => 0,
            // SAFETY: docs/safety.md §7: the boxes live until the transaction ends.
            Kind::Rw(p) => unsafe { &**p }.id(),
            // SAFETY: docs/safety.md §7: as above.
            Kind::Nested(p) => unsafe { &**p }.id(),
        };
        out = id as libc::size_t;
    });
    out
}

/// The handle of a `cairn_write_grouped` call (blank, marked grouped), made on the caller's
/// thread and ended there by [`end_grouped`] once the group answered.
pub(crate) fn begin_grouped(e: &MDB_env, env: *mut MDB_env) -> *mut MDB_txn {
    let t = new_txn(e, env, std::ptr::null_mut());
    // SAFETY: docs/safety.md §7: the blank handle new_txn just gave this call.
    unsafe { (*t).grouped = true };
    t
}

/// Runs the callback `f(t, ctx)` on the group's leader thread, with the grouped handle `t`
/// lent `rw`, the call's nested level; ends what the callback left open (a child is aborted,
/// cursors are freed as at a commit) and takes `rw` back out of the handle before returning.
/// Returns the callback's code, or MDB_BAD_TXN when it returned 0 from a transaction a failed
/// write left unusable (LMDB's commit answers so).
///
/// # Safety
/// `t` is a handle from [`begin_grouped`] that nothing else uses meanwhile; `f` and `ctx` are
/// the caller's (cairn.h's contract).
pub(crate) unsafe fn run_grouped(
    t: *mut MDB_txn,
    rw: &mut RwTxn<'_>,
    f: unsafe extern "C" fn(*mut MDB_txn, *mut libc::c_void) -> c_int,
    ctx: *mut libc::c_void,
) -> c_int {
    // The pointer is the handle's only while the callback runs (docs/safety.md §7, "Grouped
    // writes"); only the lifetime changes.
    let p = std::ptr::from_mut(rw).cast::<RwTxn<'static>>();
    // SAFETY: docs/safety.md §7: the caller's handle, blank (kind `Reset`, owning nothing).
    unsafe { (*t).kind = Kind::Rw(p) };
    // SAFETY: the caller's callback, given a live write transaction (cairn.h's contract).
    let rc = unsafe { f(t, ctx) };
    // SAFETY: docs/safety.md §7: the handle is this call's again; the callback has returned.
    let child = unsafe { (*t).child };
    if !child.is_null() {
        // SAFETY: docs/safety.md §7: the live child, which the callback left open.
        unsafe { finish(child, false) };
    }
    // SAFETY: docs/safety.md §7: as above.
    let h = unsafe { &mut *t };
    for &c in &h.cursors {
        // SAFETY: docs/safety.md §7: registered cursors are live; a write transaction's are
        // freed at its end.
        unsafe { cursor::detach(c, true) };
    }
    h.cursors.clear();
    h.kind = Kind::Reset;
    if rc == 0 && h.broken {
        MDB_BAD_TXN
    } else {
        rc
    }
}

/// Ends a grouped handle after its group answered: the handles it opened are kept if its
/// changes were committed, closed else; the handle is recycled.
///
/// # Safety
/// `t` is a handle from [`begin_grouped`], which the caller gives up; its callback has
/// returned.
pub(crate) unsafe fn end_grouped(t: *mut MDB_txn, committed: bool) {
    // SAFETY: docs/safety.md §7: the caller's handle.
    let h = unsafe { &mut *t };
    debug_assert!(matches!(h.kind, Kind::Reset) && h.child.is_null() && h.cursors.is_empty());
    h.settle_dbis(t, committed);
    let env = h.env;
    // SAFETY: docs/safety.md §7: finished; the caller gives it up.
    unsafe { recycle(env, t) };
}
