//! Databases (`MDB_dbi`): open, stat, flags, close, drop, comparators, and the point
//! operations mdb_get, mdb_put and mdb_del.
//!
//! A dbi is the engine's database index plus one, numbered as LMDB's are (`c_dbi`); it stays
//! valid across transactions once opened, as in LMDB. Values returned point into the map (read transactions) or into the transaction's
//! own pages (write transactions), valid until the transaction ends or, for the latter, the
//! next write.

use crate::env::{env_static, handle, trc, tri, Dbi};
use crate::txn::{Kind, MDB_txn, View};
use crate::{guard, set_val, slice, val_of, MDB_cmp_func, MDB_dbi, MDB_stat, MDB_val};
use crate::{MDB_BAD_VALSIZE, MDB_DBS_FULL, MDB_MULTIPLE, MDB_NOTFOUND, MDB_RESERVE};
use cairn::{Database, DbFlags, PutFlags, RwTxn};
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_uint, c_void};

const DB_FLAGS: c_uint = 0x02 | 0x04 | 0x08 | 0x10 | 0x20 | 0x40 | crate::MDB_CREATE;
/// The put flags the engine takes (NOOVERWRITE, NODUPDATA, APPEND, APPENDDUP).
const PUT_FLAGS: c_uint = 0x10 | 0x20 | 0x2_0000 | 0x4_0000;

/// LMDB's handle of the main database (0 is its free-page database, which no caller opens).
const MAIN_DBI: MDB_dbi = 1;

/// The handle of a database, numbered as LMDB numbers them: the main database 1 (MAIN_DBI), the
/// named ones from 2. Callers rely on it: Perl's LMDB_File takes a false (0) handle for a
/// failed open.
#[inline]
pub(crate) fn c_dbi(db: Database) -> MDB_dbi {
    db.index() + MAIN_DBI
}

/// Opens (MDB_CREATE: creates) a database; NULL `name` is the main database.
#[no_mangle]
pub unsafe extern "C" fn mdb_dbi_open(
    txn: *mut MDB_txn,
    name: *const c_char,
    flags: c_uint,
    dbi: *mut MDB_dbi,
) -> c_int {
    guard(|| {
        let t = handle!(txn);
        if dbi.is_null() || flags & !DB_FLAGS != 0 {
            return libc::EINVAL;
        }
        let name = if name.is_null() {
            None
        } else {
            // SAFETY: a NUL-terminated name (lmdb.h contract; docs/safety.md §7).
            match unsafe { CStr::from_ptr(name) }.to_str() {
                Ok(s) => Some(s),
                Err(_) => return libc::EINVAL,
            }
        };
        tri!(env_static(t.menv()));
        if let Some(n) = name {
            let names = t.menv().names.lock().unwrap_or_else(|p| p.into_inner());
            if !names.iter().any(|(x, _)| x == n) && names.len() as u32 >= t.menv().maxdbs {
                return MDB_DBS_FULL;
            }
        }
        let r = if t.is_write() {
            let w = tri!(t.rw());
            w.create_db(name, DbFlags::from_bits_retain(flags))
        } else {
            let v = tri!(t.view());
            let crate::txn::View::Ro(r) = v else {
                return libc::EINVAL;
            };
            match r.open_db(name) {
                Err(cairn::Error::DbNotFound { .. }) if flags & crate::MDB_CREATE != 0 => {
                    return libc::EACCES
                }
                other => other,
            }
        };
        let db = trc!(r);
        if let Some(n) = name {
            let mut names = t.menv().names.lock().unwrap_or_else(|p| p.into_inner());
            if !names.iter().any(|(x, _)| x == n) {
                names.push((n.to_string(), c_dbi(db)));
            }
        }
        t.forget_cached(c_dbi(db));
        // A new handle is private to this transaction until it commits (txn.rs).
        let new = t.menv().set_dbi(Dbi {
            db,
            flags: trc!(tri!(env_static(t.menv())).db_flags(db)),
            cmp: None,
            dcmp: None,
            owner: txn as usize,
        });
        if new {
            t.owns_dbis = true;
        }
        // SAFETY: docs/safety.md §7: checked non-NULL out-parameter.
        unsafe { *dbi = c_dbi(db) };
        0
    })
}

/// Statistics of a database.
#[no_mangle]
pub unsafe extern "C" fn mdb_stat(txn: *mut MDB_txn, dbi: MDB_dbi, stat: *mut MDB_stat) -> c_int {
    guard(|| {
        let t = handle!(txn);
        if stat.is_null() {
            return libc::EINVAL;
        }
        let d = tri!(t.dbi(dbi));
        let s = trc!(tri!(t.view()).stat(d.db));
        // SAFETY: docs/safety.md §7: checked non-NULL out-parameter.
        unsafe { *stat = crate::env::to_stat(s) };
        0
    })
}

/// A handle's database and its flags.
fn dbi_flags(t: &mut MDB_txn, dbi: MDB_dbi) -> Result<(Dbi, DbFlags), c_int> {
    let d = t.dbi(dbi)?;
    Ok((d, d.flags))
}

/// The flags a database was created with.
#[no_mangle]
pub unsafe extern "C" fn mdb_dbi_flags(
    txn: *mut MDB_txn,
    dbi: MDB_dbi,
    flags: *mut c_uint,
) -> c_int {
    guard(|| {
        let t = handle!(txn);
        if flags.is_null() {
            return libc::EINVAL;
        }
        let (_, f) = tri!(dbi_flags(t, dbi));
        // SAFETY: docs/safety.md §7: checked non-NULL out-parameter.
        unsafe { *flags = f.persistent().bits() };
        0
    })
}

/// Forgets a database handle.
#[no_mangle]
pub unsafe extern "C" fn mdb_dbi_close(env: *mut crate::MDB_env, dbi: MDB_dbi) {
    crate::guard_void(|| {
        if env.is_null() || dbi <= MAIN_DBI {
            return;
        }
        // SAFETY: docs/safety.md §7: a live handle.
        unsafe { &*env }.forget_dbi(dbi);
    })
}

/// Empties a database (`del` 0) or deletes it and closes its handle (`del` 1).
#[no_mangle]
pub unsafe extern "C" fn mdb_drop(txn: *mut MDB_txn, dbi: MDB_dbi, del: c_int) -> c_int {
    guard(|| {
        let t = handle!(txn);
        let d = tri!(t.dbi(dbi));
        let w = tri!(t.rw());
        let r = if del != 0 {
            w.drop_db(d.db)
        } else {
            w.clear_db(d.db)
        };
        match r {
            Ok(()) => {
                if del != 0 && dbi > MAIN_DBI {
                    t.menv().forget_dbi(dbi);
                    t.forget_cached(dbi);
                }
                0
            }
            Err(e) => t.fail(&e),
        }
    })
}

/// The value stored under `key` (a DUPSORT database: its first value).
#[no_mangle]
pub unsafe extern "C" fn mdb_get(
    txn: *mut MDB_txn,
    dbi: MDB_dbi,
    key: *mut MDB_val,
    data: *mut MDB_val,
) -> c_int {
    guard(|| {
        // The common case, with nothing else inlined beside it so that it needs few
        // registers: a read transaction (no child, never broken: no state to test) and a
        // handle it has cached.
        // SAFETY: NULL or a live handle of this library (docs/safety.md §7).
        if let Some(t) = unsafe { txn.as_ref() } {
            if let (Kind::Ro(r), Some(Some(d))) = (&t.kind, t.dbis().get(dbi as usize)) {
                // SAFETY: checked non-NULL; the caller's key (docs/safety.md §7).
                if !key.is_null() && !data.is_null() && unsafe { (*key).mv_size } != 0 {
                    // SAFETY: checked non-NULL; the caller's key (docs/safety.md §7).
                    let k = unsafe { slice(&*key) };
                    return match r.get(d.db, k) {
                        Ok(Some(v)) => {
                            // SAFETY: checked non-NULL; the caller's out-parameter
                            // (docs/safety.md §7).
                            unsafe { *data = val_of(v) };
                            0
                        }
                        Ok(None) => MDB_NOTFOUND,
                        Err(e) => crate::fail_code(e),
                    };
                }
            }
        }
        get_general(txn, dbi, key, data)
    })
}

/// mdb_get in every case.
#[inline(never)]
fn get_general(txn: *mut MDB_txn, dbi: MDB_dbi, key: *mut MDB_val, data: *mut MDB_val) -> c_int {
    let t = handle!(txn);
    if key.is_null() || data.is_null() {
        return libc::EINVAL;
    }
    let db = tri!(t.dbi(dbi)).db;
    let view = tri!(t.view());
    // SAFETY: checked non-NULL; the caller's key (docs/safety.md §7).
    let k = unsafe { slice(&*key) };
    if k.is_empty() {
        // As in LMDB: no key is empty.
        return MDB_BAD_VALSIZE;
    }
    let r = match view {
        View::Ro(r) => r.get(db, k),
        View::Rw(w) => w.get(db, k),
    };
    match r {
        Ok(Some(v)) => {
            set_val(data, v);
            0
        }
        Ok(None) => MDB_NOTFOUND,
        Err(e) => crate::code(&e),
    }
}

/// Stores a pair (MDB_NOOVERWRITE hands back the existing value with MDB_KEYEXIST;
/// MDB_RESERVE returns the space to fill in `data`).
#[no_mangle]
pub unsafe extern "C" fn mdb_put(
    txn: *mut MDB_txn,
    dbi: MDB_dbi,
    key: *mut MDB_val,
    data: *mut MDB_val,
    flags: c_uint,
) -> c_int {
    // The common case, tested here and handed on by a jump (as in mdb_get): a plain put (no
    // MDB_RESERVE, no MDB_MULTIPLE) in a top-level write transaction that is usable and has no
    // cursor to park, to a handle it has cached.
    // SAFETY: NULL or a live handle of this library (docs/safety.md §7).
    if let Some(t) = unsafe { txn.as_mut() } {
        if flags & !PUT_FLAGS == 0 && !key.is_null() && !data.is_null() {
            if let (Some(w), Some(Some(d))) = (t.plain_rw(), t.dbis().get(dbi as usize)) {
                return put_plain(w, &d.db, key, data, flags, txn);
            }
        }
    }
    // SAFETY: the caller's arguments, passed on.
    unsafe { put_general(txn, dbi, key, data, flags) }
}

/// A plain put in a write transaction `w` (the engine object of `txn`), `key` and `data`
/// checked non-NULL.
#[inline(never)]
extern "C" fn put_plain(
    w: *mut RwTxn<'static>,
    db: &Database,
    key: *mut MDB_val,
    data: *mut MDB_val,
    flags: c_uint,
    txn: *mut MDB_txn,
) -> c_int {
    // A copy: `db` points into the handle, which an error's handling borrows mutably.
    let db = *db;
    guard(|| {
        // SAFETY: the write transaction's box, live until it ends; nothing else borrows it
        // (no child, no cursor); docs/safety.md §7.
        let w = unsafe { &mut *w };
        // SAFETY: checked non-NULL by the caller; the caller's key and value (docs/safety.md
        // §7).
        let (k, v) = unsafe { (slice(&*key), slice(&*data)) };
        if k.is_empty() {
            return MDB_BAD_VALSIZE;
        }
        match w.put(db, k, v, PutFlags::from_bits_retain(flags)) {
            Ok(()) => 0,
            // SAFETY: the caller's live handle (docs/safety.md §7); `w` is not used again.
            Err(e) => put_failed(unsafe { &mut *txn }, db, k, data, flags, e),
        }
    })
}

/// mdb_put's answer to an engine error: LMDB's code, with the existing value for
/// MDB_NOOVERWRITE, and the transaction marked broken after the errors LMDB's refuses it for.
#[cold]
#[inline(never)]
fn put_failed(
    t: &mut MDB_txn,
    db: Database,
    k: &[u8],
    data: *mut MDB_val,
    flags: c_uint,
    e: cairn::Error,
) -> c_int {
    if matches!(e, cairn::Error::KeyExists) && flags & crate::MDB_NOOVERWRITE != 0 {
        // LMDB hands back the existing value (a DUPSORT key's first one).
        if let Ok(w) = t.rw() {
            if let Ok(Some(old)) = w.get(db, k) {
                set_val(data, old);
            }
        }
        return crate::MDB_KEYEXIST;
    }
    t.fail(&e)
}

/// mdb_put in every case.
///
/// # Safety
/// mdb_put's arguments.
#[inline(never)]
unsafe extern "C" fn put_general(
    txn: *mut MDB_txn,
    dbi: MDB_dbi,
    key: *mut MDB_val,
    data: *mut MDB_val,
    flags: c_uint,
) -> c_int {
    guard(|| {
        let t = handle!(txn);
        if key.is_null() || data.is_null() || flags & MDB_MULTIPLE != 0 {
            return libc::EINVAL;
        }
        if flags & !(PUT_FLAGS | MDB_RESERVE) != 0 {
            return libc::EINVAL;
        }
        let (d, f) = tri!(dbi_flags(t, dbi));
        if f.contains(DbFlags::DUP_SORT) && flags & MDB_RESERVE != 0 {
            // As in LMDB: a reserved value cannot take its place in a sorted set.
            return libc::EINVAL;
        }
        let w = tri!(t.rw());
        // SAFETY: checked non-NULL; the caller's key and value (docs/safety.md §7).
        let k = unsafe { slice(&*key) };
        if k.is_empty() {
            return MDB_BAD_VALSIZE;
        }
        let pf = PutFlags::from_bits_retain(flags & PUT_FLAGS);
        let r = if flags & MDB_RESERVE != 0 {
            // SAFETY: docs/safety.md §7: checked non-NULL.
            let len = unsafe { (*data).mv_size };
            w.put_reserve(d.db, k, len, pf)
                .map(|buf| set_val(data, buf))
        } else {
            // SAFETY: docs/safety.md §7: checked non-NULL.
            w.put(d.db, k, unsafe { slice(&*data) }, pf)
        };
        match r {
            Ok(()) => 0,
            Err(e) => put_failed(t, d.db, k, data, flags, e),
        }
    })
}

/// Deletes `key` (all its values), or with `data` in a DUPSORT database one pair.
#[no_mangle]
pub unsafe extern "C" fn mdb_del(
    txn: *mut MDB_txn,
    dbi: MDB_dbi,
    key: *mut MDB_val,
    data: *mut MDB_val,
) -> c_int {
    guard(|| {
        let t = handle!(txn);
        if key.is_null() {
            return libc::EINVAL;
        }
        let (d, f) = tri!(dbi_flags(t, dbi));
        let dupsort = f.contains(DbFlags::DUP_SORT);
        let w = tri!(t.rw());
        // SAFETY: checked non-NULL; the caller's key (docs/safety.md §7).
        let k = unsafe { slice(&*key) };
        if k.is_empty() {
            return MDB_BAD_VALSIZE;
        }
        let r = if dupsort && !data.is_null() {
            // SAFETY: docs/safety.md §7: checked non-NULL.
            w.delete_pair(d.db, k, unsafe { slice(&*data) })
        } else {
            w.delete(d.db, k)
        };
        match r {
            Ok(true) => 0,
            Ok(false) => MDB_NOTFOUND,
            Err(e) => t.fail(&e),
        }
    })
}

fn ordering(f: MDB_cmp_func, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let va = MDB_val {
        mv_size: a.len(),
        mv_data: a.as_ptr() as *mut c_void,
    };
    let vb = MDB_val {
        mv_size: b.len(),
        mv_data: b.as_ptr() as *mut c_void,
    };
    // SAFETY: the caller's comparator, given two valid MDB_vals (docs/safety.md §7).
    unsafe { f(&va, &vb) }.cmp(&0)
}

fn set_order(txn: *mut MDB_txn, dbi: MDB_dbi, cmp: Option<MDB_cmp_func>, dup: bool) -> c_int {
    guard(|| {
        let t = handle!(txn);
        let d = tri!(t.dbi(dbi));
        let env = tri!(env_static(t.menv()));
        let order = cmp.map(|f| {
            std::sync::Arc::new(move |a: &[u8], b: &[u8]| ordering(f, a, b)) as cairn::format::CmpFn
        });
        let r = if dup {
            env.set_dup_order(d.db, order)
        } else {
            env.set_key_order(d.db, order)
        };
        trc!(r);
        tri!(t
            .menv()
            .update_dbi(dbi, |x| if dup { x.dcmp = cmp } else { x.cmp = cmp }));
        // A read transaction remembers the orders of the databases it used (the main
        // database's from its start): it takes the new one.
        if let Kind::Ro(r) = &mut t.kind {
            r.refresh_orders();
        }
        // Cursors built with the old order are rebuilt with the new one.
        t.park_cursors();
        t.forget_cached(dbi);
        0
    })
}

/// Sets a C key comparator for `dbi` (it must be the same wherever the database is used).
#[no_mangle]
pub unsafe extern "C" fn mdb_set_compare(
    txn: *mut MDB_txn,
    dbi: MDB_dbi,
    cmp: Option<MDB_cmp_func>,
) -> c_int {
    set_order(txn, dbi, cmp, false)
}

/// Sets a C comparator for the values of a DUPSORT database.
#[no_mangle]
pub unsafe extern "C" fn mdb_set_dupsort(
    txn: *mut MDB_txn,
    dbi: MDB_dbi,
    cmp: Option<MDB_cmp_func>,
) -> c_int {
    set_order(txn, dbi, cmp, true)
}

/// LMDB's relocation callback type (FIXEDMAP; never called, as in LMDB).
pub type MDB_rel_func = unsafe extern "C" fn(*mut MDB_val, *mut c_void, *mut c_void, *mut c_void);

/// Accepted for compatibility; LMDB itself never calls the relocation function.
#[no_mangle]
pub unsafe extern "C" fn mdb_set_relfunc(
    txn: *mut MDB_txn,
    dbi: MDB_dbi,
    rel: Option<MDB_rel_func>,
) -> c_int {
    let _ = rel;
    guard(|| {
        let t = handle!(txn);
        tri!(t.dbi(dbi));
        0
    })
}

/// Accepted for compatibility (see mdb_set_relfunc).
#[no_mangle]
pub unsafe extern "C" fn mdb_set_relctx(
    txn: *mut MDB_txn,
    dbi: MDB_dbi,
    ctx: *mut c_void,
) -> c_int {
    let _ = ctx;
    guard(|| {
        let t = handle!(txn);
        tri!(t.dbi(dbi));
        0
    })
}

#[allow(
    clippy::host_endian_bytes,
    reason = "INTEGERKEY keys are native integers, as in LMDB"
)]
fn builtin(flags_reverse: bool, flags_int: bool, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    if flags_int && a.len() == b.len() && (a.len() == 4 || a.len() == 8) {
        let n = |x: &[u8]| -> u64 {
            if x.len() == 4 {
                u64::from(u32::from_ne_bytes(x.try_into().expect("4 bytes")))
            } else {
                u64::from_ne_bytes(x.try_into().expect("8 bytes"))
            }
        };
        return n(a).cmp(&n(b));
    }
    if flags_reverse {
        return a.iter().rev().cmp(b.iter().rev());
    }
    a.cmp(b)
}

fn compare(
    txn: *mut MDB_txn,
    dbi: MDB_dbi,
    a: *const MDB_val,
    b: *const MDB_val,
    dup: bool,
) -> c_int {
    guard(|| {
        if txn.is_null() || a.is_null() || b.is_null() {
            return 0;
        }
        // SAFETY: docs/safety.md §7: a live handle.
        let t = unsafe { &*txn };
        let Ok(d) = t.menv().dbi(dbi) else {
            return 0;
        };
        // SAFETY: docs/safety.md §7: checked non-NULL; the caller's values.
        let (x, y) = unsafe { (slice(&*a), slice(&*b)) };
        let custom = if dup { d.dcmp } else { d.cmp };
        if let Some(f) = custom {
            return ordering(f, x, y) as c_int;
        }
        let f = env_static(t.menv())
            .ok()
            .and_then(|e| e.db_flags(d.db).ok())
            .unwrap_or_default();
        let o = if dup {
            builtin(
                f.contains(DbFlags::REVERSE_DUP),
                f.contains(DbFlags::INTEGER_DUP),
                x,
                y,
            )
        } else {
            builtin(
                f.contains(DbFlags::REVERSE_KEY),
                f.contains(DbFlags::INTEGER_KEY),
                x,
                y,
            )
        };
        o as c_int
    })
}

/// Compares two keys as database `dbi` orders them.
#[no_mangle]
pub unsafe extern "C" fn mdb_cmp(
    txn: *mut MDB_txn,
    dbi: MDB_dbi,
    a: *const MDB_val,
    b: *const MDB_val,
) -> c_int {
    compare(txn, dbi, a, b, false)
}

/// Compares two values as DUPSORT database `dbi` orders them.
#[no_mangle]
pub unsafe extern "C" fn mdb_dcmp(
    txn: *mut MDB_txn,
    dbi: MDB_dbi,
    a: *const MDB_val,
    b: *const MDB_val,
) -> c_int {
    compare(txn, dbi, a, b, true)
}
