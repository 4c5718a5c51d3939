//! `MDB_cursor`: LMDB's cursor operations over an engine cursor.
//!
//! The engine cursor borrows its transaction's pages, so a write through the transaction
//! "parks" every cursor of it first: the pair it stands on is copied out and the engine cursor
//! dropped. The next operation builds a new engine cursor and seeks the first pair at or
//! after the parked one. If that pair is gone (deleted), the cursor stands on its successor
//! and is marked `OFF`, so that MDB_NEXT returns that successor rather than skipping it, as
//! LMDB's cursors do after a delete.
//!
//! mdb_cursor_get goes straight to the engine cursor for MDB_NEXT, MDB_PREV, MDB_GET_CURRENT,
//! MDB_SET, MDB_SET_KEY and MDB_SET_RANGE when it is live (built, its transaction unchanged
//! since, no mark: `marks == 0`): one engine call and the copy of the pair into the caller's
//! MDB_vals, in a small function per kind of operation that mdb_cursor_get reaches by a jump.
//! Every other case takes `get_slow`. A step of a DUPSORT cursor takes the same path: the
//! engine's own step walks the values of a key, and only the marks that make LMDB's
//! semantics differ from the engine's (`OFF`, `EOF`, `MISS`) need the general code.

use crate::env::{handle, trc, tri};
use crate::txn::MDB_txn;
use crate::{guard, guard_void, op, set_val, slice, MDB_dbi, MDB_val};
use crate::{
    MDB_BAD_VALSIZE, MDB_CURRENT, MDB_INCOMPATIBLE, MDB_MULTIPLE, MDB_NODUPDATA, MDB_NOTFOUND,
    MDB_RESERVE,
};
use cairn::{Cursor, Database, DbFlags, PutFlags};
use std::os::raw::{c_int, c_uint};

/// A cursor handle.
pub struct MDB_cursor {
    txn: *mut MDB_txn,
    dbi: MDB_dbi,
    db: Database,
    flags: DbFlags,
    cur: Option<Cursor<'static>>,
    saved: Option<(Vec<u8>, Vec<u8>)>,
    /// `OFF`, `EOF` and `MISS`, one byte so that mdb_cursor_get's fast path tests all three
    /// with one load (0: the cursor is on its pair).
    marks: u8,
}

/// Re-seeked after a write, the cursor found its parked pair gone and stands on its successor
/// (see the module docs).
const OFF: u8 = 1;
/// Past the last pair, where LMDB's cursor is after an MDB_SET or MDB_SET_KEY of a key above
/// every key: MDB_GET_CURRENT and MDB_NEXT find nothing, MDB_PREV gives the last pair. The
/// engine cursor is unpositioned meanwhile.
const EOF: u8 = 2;
/// In a DUPSORT database after an MDB_SET or MDB_SET_KEY miss, LMDB's cursor is on the next
/// key with no value chosen: MDB_GET_CURRENT is EINVAL, MDB_NEXT and MDB_NEXT_DUP give that
/// key's first value, MDB_PREV its last. The engine cursor is on the first value.
const MISS: u8 = 4;

type Pair<'a> = Option<(&'a [u8], &'a [u8])>;

/// Parks a cursor before its transaction writes (see the module docs).
pub(crate) unsafe fn park(c: *mut MDB_cursor) {
    // SAFETY: a live registered cursor (docs/safety.md §7).
    let c = unsafe { &mut *c };
    if let Some(cur) = c.cur.take() {
        if c.marks & OFF == 0 {
            c.saved = cur
                .current()
                .ok()
                .flatten()
                .map(|(k, v)| (k.to_vec(), v.to_vec()));
        }
    }
}

/// Forgets the position (the snapshot is going away).
pub(crate) unsafe fn unposition(c: *mut MDB_cursor) {
    // SAFETY: docs/safety.md §7: a live registered cursor.
    let c = unsafe { &mut *c };
    c.cur = None;
    c.saved = None;
    c.marks = 0;
}

/// Called when the cursor's transaction ends: a write transaction's cursors are freed (as in
/// LMDB 0.9), a read transaction's are left detached for mdb_cursor_renew/close.
pub(crate) unsafe fn detach(c: *mut MDB_cursor, free: bool) {
    if free {
        // SAFETY: docs/safety.md §7: created by Box::into_raw in mdb_cursor_open; the transaction
        // owned it.
        drop(unsafe { Box::from_raw(c) });
    } else {
        // SAFETY: docs/safety.md §7: a live cursor.
        unsafe { unposition(c) };
        // SAFETY: docs/safety.md §7: as above.
        unsafe { (*c).txn = std::ptr::null_mut() };
    }
}

impl MDB_cursor {
    /// The transaction; its lifetime is the C contract's, not this borrow's.
    fn txn<'a>(&self) -> Result<&'a mut MDB_txn, c_int> {
        if self.txn.is_null() {
            return Err(libc::EINVAL);
        }
        // SAFETY: a cursor's transaction is live while the cursor is attached (detach clears
        // the pointer); docs/safety.md §7.
        Ok(unsafe { &mut *self.txn })
    }

    fn dupsort(&self) -> bool {
        self.flags.contains(DbFlags::DUP_SORT)
    }

    /// The engine cursor, rebuilt and re-seeked if parked.
    #[inline]
    fn ensure(&mut self) -> Result<&mut Cursor<'static>, c_int> {
        if self.cur.is_none() {
            let t = self.txn()?;
            let view = t.view()?;
            let c = view.cursor(self.db).map_err(|e| crate::code(&e))?;
            // SAFETY: docs/safety.md §7: the cursor borrows the transaction's pages, which live
            // until the
            // transaction ends or writes; both drop this cursor first (park/detach).
            let mut c: Cursor<'static> = unsafe { std::mem::transmute(c) };
            self.marks &= !OFF;
            if let Some((k, v)) = &self.saved {
                let found = reseek(&mut c, self.dupsort(), k, v).map_err(|e| crate::code(&e))?;
                let off = match found {
                    Some((fk, fv)) => fk != &k[..] || (self.dupsort() && fv != &v[..]),
                    None => true,
                };
                if off {
                    self.marks |= OFF;
                }
            }
            self.cur = Some(c);
        }
        Ok(self.cur.as_mut().expect("built above"))
    }
}

/// MDB_SET / MDB_SET_KEY. On a miss LMDB leaves its cursor where the key would go, on the next
/// key (`MISS` in a DUPSORT database) or past the last (`EOF`), and a following
/// MDB_GET_CURRENT, MDB_NEXT or MDB_PREV starts there; the engine's `set` unpositions on a
/// miss, so a miss seeks again with `set_range`.
#[inline(always)]
fn set_exact<'t>(
    cur: &mut Cursor<'t>,
    marks: &mut u8,
    dupsort: bool,
    k: &[u8],
) -> cairn::Result<Pair<'t>> {
    if let Some(e) = cur.set(k)? {
        return Ok(Some(e));
    }
    *marks = after_miss(cur, dupsort, k)?;
    Ok(None)
}

/// Where LMDB's cursor stands after an MDB_SET or MDB_SET_KEY miss (see `set_exact`): seeks
/// there and returns the mark it needs.
#[cold]
fn after_miss(cur: &mut Cursor<'_>, dupsort: bool, k: &[u8]) -> cairn::Result<u8> {
    Ok(match cur.set_range(k)? {
        None => EOF,
        Some(_) if dupsort => MISS,
        Some(_) => 0,
    })
}

/// Positions at the first pair at or after (`k`, `v`).
fn reseek<'t>(c: &mut Cursor<'t>, dupsort: bool, k: &[u8], v: &[u8]) -> cairn::Result<Pair<'t>> {
    if !dupsort {
        return c.set_range(k);
    }
    if let Some(e) = c.get_both_range(k, v)? {
        return Ok(Some(e));
    }
    match c.set_range(k)? {
        Some((fk, _)) if fk == k => c.next_nodup(),
        other => Ok(other),
    }
}

/// Opens a cursor on `dbi` in `txn`.
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_open(
    txn: *mut MDB_txn,
    dbi: MDB_dbi,
    cursor: *mut *mut MDB_cursor,
) -> c_int {
    guard(|| {
        let t = handle!(txn);
        if cursor.is_null() {
            return libc::EINVAL;
        }
        let d = tri!(t.dbi(dbi));
        tri!(t.view());
        let flags = d.flags;
        let c = Box::into_raw(Box::new(MDB_cursor {
            txn,
            dbi,
            db: d.db,
            flags,
            cur: None,
            saved: None,
            marks: 0,
        }));
        t.cursors.push(c);
        // SAFETY: docs/safety.md §7: checked non-NULL out-parameter.
        unsafe { *cursor = c };
        0
    })
}

/// Closes a cursor.
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_close(cursor: *mut MDB_cursor) {
    guard_void(|| {
        if cursor.is_null() {
            return;
        }
        // SAFETY: docs/safety.md §7: a live cursor.
        let c = unsafe { &mut *cursor };
        c.cur = None;
        if let Ok(t) = c.txn() {
            t.unregister(cursor);
        }
        // SAFETY: docs/safety.md §7: created by Box::into_raw in mdb_cursor_open; the caller gives
        // it up.
        drop(unsafe { Box::from_raw(cursor) });
    })
}

/// Binds a read-only cursor to a new read transaction.
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_renew(txn: *mut MDB_txn, cursor: *mut MDB_cursor) -> c_int {
    guard(|| {
        let t = handle!(txn);
        let c = handle!(cursor);
        if t.is_write() {
            return libc::EINVAL;
        }
        tri!(t.view());
        c.cur = None;
        c.saved = None;
        c.marks = 0;
        if let Ok(old) = c.txn() {
            old.unregister(cursor);
        }
        c.txn = txn;
        t.cursors.push(cursor);
        0
    })
}

/// The cursor's transaction.
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_txn(cursor: *mut MDB_cursor) -> *mut MDB_txn {
    if cursor.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: docs/safety.md §7: a live cursor.
    unsafe { (*cursor).txn }
}

/// The cursor's database.
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_dbi(cursor: *mut MDB_cursor) -> MDB_dbi {
    if cursor.is_null() {
        return 0;
    }
    // SAFETY: docs/safety.md §7: a live cursor.
    unsafe { (*cursor).dbi }
}

/// Reads at the cursor with operation `op` (LMDB's MDB_cursor_op values).
///
/// This function only sorts the call: a live cursor's step (MDB_NEXT, MDB_PREV) or
/// positioning (MDB_GET_CURRENT, MDB_SET, MDB_SET_KEY, MDB_SET_RANGE) goes to a small function
/// of its own, every other case to [`get_other`]. It calls the engine itself nowhere, so it
/// needs no frame and each of those is a tail call: a scan pays for the handle and state
/// tests, one engine call and the two stores, and no register a seek would need.
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_get(
    cursor: *mut MDB_cursor,
    key: *mut MDB_val,
    data: *mut MDB_val,
    cop: c_uint,
) -> c_int {
    // SAFETY: NULL or a live cursor of this library (docs/safety.md §7).
    if let Some(c) = unsafe { cursor.as_mut() } {
        // On its pair; whether the engine cursor is built (the transaction has not written
        // since) the callee tests.
        if c.marks == 0 {
            // NEXT (8) and PREV (12) differ in bit 2 alone: one test for both.
            if cop | 4 == op::PREV {
                return if cop == op::NEXT {
                    step_next(c, key, data)
                } else {
                    step_prev(c, key, data)
                };
            }
            if cop == op::SET_KEY {
                return seek::<true>(c, key, data);
            }
            if cop == op::SET {
                return seek::<false>(c, key, data);
            }
            if matches!(cop, op::GET_CURRENT | op::SET_RANGE) {
                return position(c, key, data, cop);
            }
        }
    }
    // SAFETY: the caller's arguments, passed on unchanged.
    unsafe { get_other(cursor, key, data, cop) }
}

// The callees of mdb_cursor_get are `extern "C"` (they catch every panic, so they cannot
// unwind): a call from one C-ABI function to another that cannot unwind needs no landing pad,
// so it compiles to a jump.

/// MDB_NEXT on a live cursor.
#[inline(never)]
extern "C" fn step_next(c: &mut MDB_cursor, key: *mut MDB_val, data: *mut MDB_val) -> c_int {
    guard(|| step(c, op::NEXT, key, data))
}

/// MDB_PREV on a live cursor.
#[inline(never)]
extern "C" fn step_prev(c: &mut MDB_cursor, key: *mut MDB_val, data: *mut MDB_val) -> c_int {
    guard(|| step(c, op::PREV, key, data))
}

/// MDB_NEXT or MDB_PREV (`cop`, a constant) on a live cursor.
#[inline(always)]
fn step(c: &mut MDB_cursor, cop: c_uint, key: *mut MDB_val, data: *mut MDB_val) -> c_int {
    let Some(cur) = c.cur.as_mut() else {
        return get_slow(c, key, data, cop);
    };
    let r = if cop == op::NEXT {
        cur.next()
    } else {
        cur.prev()
    };
    match r {
        Ok(Some((k, v))) => {
            set_val(key, k);
            set_val(data, v);
            0
        }
        Ok(None) => past_end(cur, cop),
        Err(e) => crate::fail_code(e),
    }
}

/// MDB_SET_KEY (`KEY`: the key found is stored in `key` too) or MDB_SET on a live cursor.
#[inline(never)]
extern "C" fn seek<const KEY: bool>(
    c: &mut MDB_cursor,
    key: *mut MDB_val,
    data: *mut MDB_val,
) -> c_int {
    let cop = if KEY { op::SET_KEY } else { op::SET };
    guard(|| {
        let (Some(cur), false) = (c.cur.as_mut(), key.is_null()) else {
            return get_slow(c, key, data, cop);
        };
        // SAFETY: checked non-NULL; the caller's key (docs/safety.md §7).
        let k = unsafe { slice(&*key) };
        if k.is_empty() {
            // As in LMDB: no key is empty (the cursor stays where it was).
            return MDB_BAD_VALSIZE;
        }
        match cur.set(k) {
            Ok(Some((fk, v))) => {
                if KEY {
                    set_val(key, fk);
                }
                set_val(data, v);
                0
            }
            // The key again from `key` (unchanged), not kept across the call.
            Ok(None) => missed(c, key),
            Err(e) => crate::fail_code(e),
        }
    })
}

/// The rest of an MDB_SET or MDB_SET_KEY miss on a live cursor, out of line so that the hit
/// path keeps few registers.
#[cold]
#[inline(never)]
fn missed(c: &mut MDB_cursor, key: *mut MDB_val) -> c_int {
    // SAFETY: checked non-NULL by `seek`; the caller's key (docs/safety.md §7).
    let k = unsafe { slice(&*key) };
    let dupsort = c.dupsort();
    let Some(cur) = c.cur.as_mut() else {
        return libc::EINVAL;
    };
    match after_miss(cur, dupsort, k) {
        Ok(m) => {
            c.marks = m;
            MDB_NOTFOUND
        }
        Err(e) => crate::fail_code(e),
    }
}

/// MDB_GET_CURRENT or MDB_SET_RANGE on a live cursor.
#[inline(never)]
extern "C" fn position(
    c: &mut MDB_cursor,
    key: *mut MDB_val,
    data: *mut MDB_val,
    cop: c_uint,
) -> c_int {
    guard(|| {
        let Some(cur) = c.cur.as_mut() else {
            return get_slow(c, key, data, cop);
        };
        // Each arm delivers with its operation a constant, so `deliver` folds its tests.
        match cop {
            op::SET_RANGE if !key.is_null() => {
                // SAFETY: checked non-NULL; the caller's key (docs/safety.md §7).
                let k = unsafe { slice(&*key) };
                if k.is_empty() {
                    return MDB_BAD_VALSIZE;
                }
                let r = cur.set_range(k);
                deliver(cur, op::SET_RANGE, r, key, data)
            }
            op::GET_CURRENT => match cur.current() {
                Ok(None) => libc::EINVAL,
                r => deliver(cur, op::GET_CURRENT, r, key, data),
            },
            _ => get_slow(c, key, data, cop),
        }
    })
}

/// mdb_cursor_get for every case but a live cursor's step or positioning.
///
/// # Safety
/// mdb_cursor_get's arguments.
#[inline(never)]
unsafe extern "C" fn get_other(
    cursor: *mut MDB_cursor,
    key: *mut MDB_val,
    data: *mut MDB_val,
    cop: c_uint,
) -> c_int {
    guard(|| get_slow(handle!(cursor), key, data, cop))
}

/// Every operation, on a cursor in any state (parked, detached, off its pair).
#[inline(never)]
fn get_slow(c: &mut MDB_cursor, key: *mut MDB_val, data: *mut MDB_val, cop: c_uint) -> c_int {
    // Without DUPSORT every key has one value and LMDB's steps to the next or previous value
    // of the key step to the next or previous key, as MDB_NEXT and MDB_PREV do.
    let cop = match cop {
        op::NEXT_DUP if !c.dupsort() => op::NEXT,
        op::PREV_DUP if !c.dupsort() => op::PREV,
        other => other,
    };
    let needs_key = matches!(
        cop,
        op::SET | op::SET_KEY | op::SET_RANGE | op::GET_BOTH | op::GET_BOTH_RANGE
    );
    if needs_key && key.is_null() {
        return libc::EINVAL;
    }
    let needs_data = matches!(cop, op::GET_BOTH | op::GET_BOTH_RANGE);
    if needs_data && data.is_null() {
        return libc::EINVAL;
    }
    // Only the operations that take a key or a value read them: for the others the
    // caller's MDB_vals are output only and may be uninitialised.
    // SAFETY: checked non-NULL above; the caller's key/data (docs/safety.md §7).
    let kin = if needs_key {
        unsafe { slice(&*key) }
    } else {
        &[][..]
    };
    // SAFETY: docs/safety.md §7: as above.
    let din = if needs_data {
        unsafe { slice(&*data) }
    } else {
        &[][..]
    };
    if needs_key && kin.is_empty() {
        // As in LMDB: no key is empty (the cursor stays where it was).
        return MDB_BAD_VALSIZE;
    }
    if c.marks & EOF != 0 {
        match cop {
            op::GET_CURRENT | op::NEXT | op::NEXT_DUP | op::NEXT_NODUP | op::PREV_DUP => {
                return MDB_NOTFOUND
            }
            op::PREV | op::PREV_NODUP => {
                c.marks &= !EOF;
                let cur = tri!(c.ensure());
                let r = cur.last();
                return deliver(cur, op::PREV, r, key, data);
            }
            _ => c.marks &= !EOF,
        }
    }
    if c.marks & MISS != 0 {
        match cop {
            op::GET_CURRENT => return libc::EINVAL,
            op::NEXT | op::NEXT_DUP | op::PREV => {
                c.marks &= !MISS;
                let cur = tri!(c.ensure());
                let r = if cop == op::PREV {
                    cur.last_dup()
                } else {
                    cur.current()
                };
                return deliver(cur, cop, r, key, data);
            }
            _ => c.marks &= !MISS,
        }
    }
    let dupsort = c.dupsort();
    let fixed = c.flags.contains(DbFlags::DUP_FIXED);
    // Needed only after a re-seek that found the parked pair gone (rare): no copy else.
    let saved_key = if c.marks & OFF != 0 {
        c.saved.as_ref().map(|s| s.0.clone())
    } else {
        None
    };
    let cur: *mut Cursor<'static> = tri!(c.ensure());
    let was_off = c.marks & OFF != 0;
    c.marks &= !OFF;
    // SAFETY: docs/safety.md §7: `c.cur`, which `ensure` just set; only `c.marks` was touched
    // since.
    let cur: &mut Cursor<'static> = unsafe { &mut *cur };
    let res: cairn::Result<Pair<'static>> = match cop {
        op::FIRST => cur.first(),
        op::LAST => cur.last(),
        op::NEXT if was_off => cur.current(),
        op::NEXT => cur.next(),
        op::PREV if was_off => match cur.current() {
            Ok(Some(_)) => cur.prev(),
            _ => cur.last(),
        },
        op::PREV => cur.prev(),
        op::GET_CURRENT => match cur.current() {
            Ok(None) => return libc::EINVAL,
            other => other,
        },
        op::SET | op::SET_KEY => set_exact(cur, &mut c.marks, dupsort, kin),
        op::SET_RANGE => cur.set_range(kin),
        op::FIRST_DUP | op::LAST_DUP if !dupsort => return MDB_INCOMPATIBLE,
        op::FIRST_DUP => cur.first_dup(),
        op::LAST_DUP => cur.last_dup(),
        op::NEXT_DUP if was_off => match cur.current() {
            Ok(Some((k, v))) if Some(k) == saved_key.as_deref() => Ok(Some((k, v))),
            Ok(_) => Ok(None),
            Err(e) => Err(e),
        },
        op::NEXT_DUP => cur.next_dup(),
        op::PREV_DUP => cur.prev_dup(),
        op::NEXT_NODUP if was_off => match cur.current() {
            Ok(Some((k, _))) if Some(k) == saved_key.as_deref() => cur.next_nodup(),
            other => other,
        },
        op::NEXT_NODUP => cur.next_nodup(),
        op::PREV_NODUP => cur.prev_nodup(),
        op::GET_BOTH => cur.get_both(kin, din),
        op::GET_BOTH_RANGE => cur.get_both_range(kin, din),
        op::GET_MULTIPLE | op::NEXT_MULTIPLE | op::PREV_MULTIPLE => {
            // As LMDB tests them: the arguments and (MDB_GET_MULTIPLE) the position, then
            // the database's flags.
            if data.is_null() || (cop == op::GET_MULTIPLE && !matches!(cur.current(), Ok(Some(_))))
            {
                return libc::EINVAL;
            }
            if !(dupsort && fixed) {
                return MDB_INCOMPATIBLE;
            }
            let r = match cop {
                op::GET_MULTIPLE => cur.get_multiple(),
                op::NEXT_MULTIPLE => cur.next_multiple(),
                _ => cur.prev_multiple(),
            };
            return match r {
                Ok(Some((k, vals))) => {
                    if cop != op::GET_MULTIPLE {
                        set_val(key, k);
                    }
                    set_val(data, vals);
                    0
                }
                Ok(None) => MDB_NOTFOUND,
                Err(e) => crate::code(&e),
            };
        }
        _ => return libc::EINVAL,
    };
    deliver(cur, cop, res, key, data)
}

/// Hands a positioning result to C: the pair into `key`/`data` (not the key for the
/// operations where LMDB leaves it alone), MDB_NOTFOUND or the error's code.
#[inline(always)]
fn deliver(
    cur: &mut Cursor<'static>,
    cop: c_uint,
    res: cairn::Result<Pair<'static>>,
    key: *mut MDB_val,
    data: *mut MDB_val,
) -> c_int {
    match res {
        Ok(Some((k, v))) => {
            if !matches!(
                cop,
                op::SET | op::FIRST_DUP | op::LAST_DUP | op::GET_BOTH_RANGE
            ) {
                set_val(key, k);
            }
            set_val(data, v);
            0
        }
        Ok(None) => past_end(cur, cop),
        Err(e) => crate::fail_code(e),
    }
}

/// MDB_NOTFOUND. Past either end LMDB's cursor stays on the last (first) pair, where the
/// engine's becomes unpositioned: put it back so that a following MDB_PREV (MDB_NEXT) agrees.
#[cold]
fn past_end(cur: &mut Cursor<'static>, cop: c_uint) -> c_int {
    let r = match cop {
        op::NEXT | op::NEXT_NODUP => cur.last(),
        op::PREV | op::PREV_NODUP => cur.first(),
        _ => Ok(None),
    };
    match r {
        Ok(_) => MDB_NOTFOUND,
        Err(e) => crate::code(&e),
    }
}

/// Stores a pair through the cursor and stands on it (MDB_CURRENT: replaces the value at the
/// cursor; MDB_MULTIPLE: `data` is two MDB_vals, an item size with an array and a count).
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_put(
    cursor: *mut MDB_cursor,
    key: *mut MDB_val,
    data: *mut MDB_val,
    flags: c_uint,
) -> c_int {
    guard(|| {
        let c = handle!(cursor);
        if data.is_null() || (key.is_null() && flags & MDB_CURRENT == 0) {
            return libc::EINVAL;
        }
        let db = c.db;
        let dupsort = c.dupsort();
        let here = if flags & MDB_CURRENT != 0 {
            let cur = tri!(c.ensure());
            match trc!(cur.current()) {
                Some((k, v)) => Some((k.to_vec(), v.to_vec())),
                None => return libc::EINVAL,
            }
        } else {
            None
        };
        let t = tri!(c.txn());
        let w = tri!(t.rw());
        // As in LMDB: no key is empty, MDB_CURRENT's included (which may pass none here).
        // SAFETY: checked non-NULL; the caller's key (docs/safety.md §7).
        if !key.is_null() && unsafe { (*key).mv_size } == 0 {
            return MDB_BAD_VALSIZE;
        }
        // SAFETY: checked non-NULL; the caller's key and value (docs/safety.md §7).
        let k: Vec<u8> = match &here {
            Some((hk, _)) => hk.clone(),
            None => unsafe { slice(&*key) }.to_vec(),
        };
        let pflags = PutFlags::from_bits_retain(flags & 0x6_0030);
        let r: cairn::Result<Vec<u8>> = if let Some((_, old)) = &here {
            // SAFETY: docs/safety.md §7: checked non-NULL.
            let v = unsafe { slice(&*data) };
            let r = if dupsort && v != &old[..] {
                w.delete_pair(db, &k, old)
                    .and_then(|_| w.put(db, &k, v, PutFlags::empty()))
            } else {
                w.put(db, &k, v, PutFlags::empty())
            };
            r.map(|_| v.to_vec())
        } else if flags & MDB_MULTIPLE != 0 {
            // SAFETY: docs/safety.md §7: MDB_MULTIPLE passes an array of two MDB_vals (lmdb.h).
            let (d0, d1) = unsafe { (&*data, &mut *data.add(1)) };
            let size = d0.mv_size;
            let count = d1.mv_size;
            let Some(total) = size.checked_mul(count) else {
                return libc::EINVAL;
            };
            let vals = if total == 0 || d0.mv_data.is_null() {
                &[][..]
            } else {
                // SAFETY: docs/safety.md §7: `count` items of `size` bytes at `mv_data` (lmdb.h
                // contract).
                unsafe { std::slice::from_raw_parts(d0.mv_data as *const u8, total) }
            };
            let r = w.put_multiple(db, &k, vals, size, pflags);
            if r.is_ok() {
                d1.mv_size = count;
            }
            r.map(|_| {
                vals.get(total.saturating_sub(size)..)
                    .unwrap_or(&[])
                    .to_vec()
            })
        } else if flags & MDB_RESERVE != 0 {
            if dupsort {
                return libc::EINVAL;
            }
            // SAFETY: docs/safety.md §7: checked non-NULL.
            let len = unsafe { (*data).mv_size };
            match w.put_reserve(db, &k, len, pflags) {
                Ok(buf) => {
                    set_val(data, buf);
                    Ok(Vec::new())
                }
                Err(e) => Err(e),
            }
        } else {
            // SAFETY: docs/safety.md §7: checked non-NULL.
            let v = unsafe { slice(&*data) };
            w.put(db, &k, v, pflags).map(|_| v.to_vec())
        };
        match r {
            Ok(v) => {
                c.saved = Some((k, v));
                c.marks = 0;
                c.cur = None;
                0
            }
            Err(cairn::Error::KeyExists) if flags & crate::MDB_NOOVERWRITE != 0 => {
                // LMDB hands back the existing value (a DUPSORT key's first one).
                if let Ok(Some(old)) = w.get(db, &k) {
                    set_val(data, old);
                }
                crate::MDB_KEYEXIST
            }
            Err(e) => t.fail(&e),
        }
    })
}

/// Deletes the pair at the cursor (MDB_NODUPDATA: every value of its key).
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_del(cursor: *mut MDB_cursor, flags: c_uint) -> c_int {
    guard(|| {
        let c = handle!(cursor);
        let db = c.db;
        let dupsort = c.dupsort();
        let cur = tri!(c.ensure());
        let (k, v) = match trc!(cur.current()) {
            Some((k, v)) => (k.to_vec(), v.to_vec()),
            None => return libc::EINVAL,
        };
        let t = tri!(c.txn());
        let w = tri!(t.rw());
        let r = if dupsort && flags & MDB_NODUPDATA != 0 {
            w.delete(db, &k)
        } else {
            w.delete_pair(db, &k, &v)
        };
        match r {
            Ok(true) => 0,
            Ok(false) => MDB_NOTFOUND,
            Err(e) => t.fail(&e),
        }
    })
}

/// The number of values of the key at the cursor (MDB_INCOMPATIBLE without DUPSORT).
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_count(
    cursor: *mut MDB_cursor,
    count: *mut libc::size_t,
) -> c_int {
    guard(|| {
        let c = handle!(cursor);
        if count.is_null() {
            return libc::EINVAL;
        }
        if !c.dupsort() {
            // As in LMDB, whether the cursor is positioned or not.
            return MDB_INCOMPATIBLE;
        }
        let cur = tri!(c.ensure());
        if trc!(cur.current()).is_none() {
            return libc::EINVAL;
        }
        let n = cur.count();
        // SAFETY: docs/safety.md §7: checked non-NULL out-parameter.
        unsafe { *count = n as usize };
        0
    })
}
