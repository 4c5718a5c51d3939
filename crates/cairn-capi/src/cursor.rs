//! `MDB_cursor`: LMDB's cursor operations over an engine cursor.
//!
//! The engine cursor borrows its transaction's pages, so a write through the transaction
//! "parks" every cursor of it first: the pair it stands on is copied out and the engine cursor
//! dropped. The next operation builds a new engine cursor and seeks the first pair at or
//! after the parked one. If that pair is gone (deleted), the cursor stands on its successor
//! and `off` is set, so that MDB_NEXT returns that successor rather than skipping it, as
//! LMDB's cursors do after a delete.
//!
//! mdb_cursor_get goes straight to the engine cursor for MDB_NEXT, MDB_PREV, MDB_GET_CURRENT,
//! MDB_SET, MDB_SET_KEY and MDB_SET_RANGE when it is live (built, its transaction unchanged
//! since, not off its pair):
//! one engine call and the copy of the pair into the caller's MDB_vals. Every other case
//! takes `get_slow`.

use crate::env::{handle, trc, tri};
use crate::txn::MDB_txn;
use crate::{guard, guard_void, op, set_val, slice, MDB_dbi, MDB_val};
use crate::{
    MDB_CURRENT, MDB_INCOMPATIBLE, MDB_MULTIPLE, MDB_NODUPDATA, MDB_NOTFOUND, MDB_RESERVE,
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
    off: bool,
    /// Past the last pair, where LMDB's cursor is after an MDB_SET or MDB_SET_KEY of a key
    /// above every key: MDB_GET_CURRENT and MDB_NEXT find nothing, MDB_PREV gives the last
    /// pair. The engine cursor is unpositioned meanwhile.
    eof: bool,
    /// In a DUPSORT database after an MDB_SET or MDB_SET_KEY miss, LMDB's cursor is on the
    /// next key with no value chosen: MDB_GET_CURRENT is EINVAL, MDB_NEXT and MDB_NEXT_DUP give
    /// that key's first value, MDB_PREV its last. The engine cursor is on the first value.
    miss: bool,
}

type Pair<'a> = Option<(&'a [u8], &'a [u8])>;

/// Parks a cursor before its transaction writes (see the module docs).
pub(crate) unsafe fn park(c: *mut MDB_cursor) {
    // SAFETY: a live registered cursor (docs/safety.md §7).
    let c = unsafe { &mut *c };
    if let Some(cur) = c.cur.take() {
        if !c.off {
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
    c.off = false;
    c.eof = false;
    c.miss = false;
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
            self.off = false;
            if let Some((k, v)) = &self.saved {
                let found = reseek(&mut c, self.dupsort(), k, v).map_err(|e| crate::code(&e))?;
                self.off = match found {
                    Some((fk, fv)) => fk != &k[..] || (self.dupsort() && fv != &v[..]),
                    None => true,
                };
            }
            self.cur = Some(c);
        }
        Ok(self.cur.as_mut().expect("built above"))
    }
}

/// MDB_SET / MDB_SET_KEY. On a miss LMDB leaves its cursor where the key would go, on the next
/// key (`miss` in a DUPSORT database) or past the last (`eof`), and a following
/// MDB_GET_CURRENT, MDB_NEXT or MDB_PREV starts there; the engine's `set` unpositions on a
/// miss, so a miss seeks again with `set_range`.
#[inline(always)]
fn set_exact<'t>(
    cur: &mut Cursor<'t>,
    eof: &mut bool,
    miss: &mut bool,
    dupsort: bool,
    k: &[u8],
) -> cairn::Result<Pair<'t>> {
    if let Some(e) = cur.set(k)? {
        return Ok(Some(e));
    }
    let next = cur.set_range(k)?.is_some();
    *eof = !next;
    *miss = next && dupsort;
    Ok(None)
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
            off: false,
            eof: false,
            miss: false,
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
        c.off = false;
        c.eof = false;
        c.miss = false;
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
#[no_mangle]
pub unsafe extern "C" fn mdb_cursor_get(
    cursor: *mut MDB_cursor,
    key: *mut MDB_val,
    data: *mut MDB_val,
    cop: c_uint,
) -> c_int {
    guard(|| {
        let c = handle!(cursor);
        // The common case, one engine call: a live engine cursor (its transaction is live and
        // has not written since it was built) and a plain move or seek.
        let plain = !(c.off | c.eof | c.miss);
        if let (Some(cur), true) = (c.cur.as_mut(), plain) {
            // Each arm delivers with its operation a constant, so `deliver` folds its tests.
            return match cop {
                op::NEXT => {
                    let r = cur.next();
                    deliver(cur, op::NEXT, r, key, data)
                }
                op::PREV => {
                    let r = cur.prev();
                    deliver(cur, op::PREV, r, key, data)
                }
                op::GET_CURRENT => match cur.current() {
                    Ok(None) => libc::EINVAL,
                    r => deliver(cur, op::GET_CURRENT, r, key, data),
                },
                op::SET if !key.is_null() => {
                    // SAFETY: checked non-NULL; the caller's key (docs/safety.md §7).
                    let k = unsafe { slice(&*key) };
                    let dupsort = c.flags.contains(DbFlags::DUP_SORT);
                    let r = set_exact(cur, &mut c.eof, &mut c.miss, dupsort, k);
                    deliver(cur, op::SET, r, key, data)
                }
                op::SET_KEY if !key.is_null() => {
                    // SAFETY: checked non-NULL; the caller's key (docs/safety.md §7).
                    let k = unsafe { slice(&*key) };
                    let dupsort = c.flags.contains(DbFlags::DUP_SORT);
                    let r = set_exact(cur, &mut c.eof, &mut c.miss, dupsort, k);
                    deliver(cur, op::SET_KEY, r, key, data)
                }
                op::SET_RANGE if !key.is_null() => {
                    // SAFETY: docs/safety.md §7: as above.
                    let r = cur.set_range(unsafe { slice(&*key) });
                    deliver(cur, op::SET_RANGE, r, key, data)
                }
                _ => get_slow(c, key, data, cop),
            };
        }
        get_slow(c, key, data, cop)
    })
}

/// Every operation, on a cursor in any state (parked, detached, off its pair).
#[inline(never)]
fn get_slow(c: &mut MDB_cursor, key: *mut MDB_val, data: *mut MDB_val, cop: c_uint) -> c_int {
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
    if c.eof {
        match cop {
            op::GET_CURRENT | op::NEXT | op::NEXT_DUP | op::NEXT_NODUP | op::PREV_DUP => {
                return MDB_NOTFOUND
            }
            op::PREV | op::PREV_NODUP => {
                c.eof = false;
                let cur = tri!(c.ensure());
                let r = cur.last();
                return deliver(cur, op::PREV, r, key, data);
            }
            _ => c.eof = false,
        }
    }
    if c.miss {
        match cop {
            op::GET_CURRENT => return libc::EINVAL,
            op::NEXT | op::NEXT_DUP | op::PREV => {
                c.miss = false;
                let cur = tri!(c.ensure());
                let r = if cop == op::PREV {
                    cur.last_dup()
                } else {
                    cur.current()
                };
                return deliver(cur, cop, r, key, data);
            }
            _ => c.miss = false,
        }
    }
    let dupsort = c.dupsort();
    let fixed = c.flags.contains(DbFlags::DUP_FIXED);
    // Needed only after a re-seek that found the parked pair gone (rare): no copy else.
    let saved_key = if c.off {
        c.saved.as_ref().map(|s| s.0.clone())
    } else {
        None
    };
    let cur: *mut Cursor<'static> = tri!(c.ensure());
    let was_off = std::mem::take(&mut c.off);
    // SAFETY: docs/safety.md §7: `c.cur`, which `ensure` just set; only `c.off` was touched since.
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
        op::SET | op::SET_KEY => set_exact(cur, &mut c.eof, &mut c.miss, dupsort, kin),
        op::SET_RANGE => cur.set_range(kin),
        op::FIRST_DUP | op::LAST_DUP if !dupsort => return MDB_INCOMPATIBLE,
        op::FIRST_DUP => cur.first_dup(),
        op::LAST_DUP => cur.last_dup(),
        op::NEXT_DUP | op::PREV_DUP if !dupsort => return MDB_NOTFOUND,
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
            if !(dupsort && fixed) {
                return libc::EINVAL;
            }
            if data.is_null() {
                return libc::EINVAL;
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
        Err(e) => crate::code(&e),
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
                c.off = false;
                c.eof = false;
                c.miss = false;
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

/// The number of values of the key at the cursor.
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
