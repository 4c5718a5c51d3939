//! What goes beyond LMDB's API (declared in cairn.h): Cairn's durability knob, its checker
//! and group commit.

use crate::env::{env_static, handle, trc, tri, MDB_env};
use crate::txn::{self, MDB_txn};
use crate::{guard, MDB_CORRUPTED};
use std::os::raw::{c_char, c_int, c_uint, c_void};

/// Before mdb_env_open: in the lazy modes (MDB_NOSYNC, MDB_MAPASYNC, MDB_NOMETASYNC), flush
/// once this many bytes were written since the last flush (0: only mdb_env_sync and close
/// flush).
#[no_mangle]
pub unsafe extern "C" fn cairn_env_set_sync_bytes(env: *mut MDB_env, bytes: libc::size_t) -> c_int {
    guard(|| {
        let e = handle!(env);
        if e.env.is_some() {
            return libc::EINVAL;
        }
        e.sync_bytes = Some((bytes > 0).then_some(bytes as u64));
        0
    })
}

/// Checks every invariant of the current snapshot (every page of every tree is read). 0 when
/// sound, MDB_CORRUPTED otherwise; `problems` (if not NULL) receives the number of problems
/// and `report` (if not NULL) is called with each problem's text.
#[no_mangle]
pub unsafe extern "C" fn cairn_env_check(
    env: *mut MDB_env,
    problems: *mut libc::size_t,
    report: Option<unsafe extern "C" fn(*const c_char, *mut libc::c_void) -> c_int>,
    ctx: *mut libc::c_void,
) -> c_int {
    guard(|| {
        let e = handle!(env);
        let en = tri!(e.env());
        let r = trc!(trc!(en.read_txn()).check());
        if !problems.is_null() {
            // SAFETY: checked non-NULL out-parameter (docs/safety.md §7).
            unsafe { *problems = r.problems.len() };
        }
        if let Some(f) = report {
            for p in &r.problems {
                let c = std::ffi::CString::new(p.replace('\0', " ")).expect("NULs replaced");
                // SAFETY: the caller's callback with a NUL-terminated text (docs/safety.md §7).
                unsafe { f(c.as_ptr(), ctx) };
            }
        }
        if r.is_ok() {
            0
        } else {
            MDB_CORRUPTED
        }
    })
}

/// Before mdb_env_open: bounds of a group commit (cairn_write_grouped): at most `max_writes`
/// callbacks per group, and a group takes callbacks that queue while it runs for at most
/// `max_time_us` microseconds from its start. 0 keeps the default (1,024 writes, 10 ms).
#[no_mangle]
pub unsafe extern "C" fn cairn_env_set_group_limits(
    env: *mut MDB_env,
    max_writes: libc::size_t,
    max_time_us: c_uint,
) -> c_int {
    guard(|| {
        let e = handle!(env);
        if e.env.is_some() {
            return libc::EINVAL;
        }
        e.group_limits = (max_writes, max_time_us);
        0
    })
}

/// A grouped write's callback.
type GroupedFn = unsafe extern "C" fn(*mut MDB_txn, *mut c_void) -> c_int;

/// What a grouped write's closure takes to the leader's thread: the call's transaction handle
/// and the caller's context.
struct Lent {
    txn: *mut MDB_txn,
    ctx: *mut c_void,
}

// SAFETY: docs/safety.md §7, "Grouped writes": the handle is used by one thread at a time (the
// leader's during the callback, the caller's before and after, ordered by the group's answer);
// `ctx` is the caller's, handed to its callback on whichever thread runs it, as cairn.h says.
unsafe impl Send for Lent {}

/// Runs `f(txn, ctx)` in a write transaction shared with the grouped writes of this process's
/// other threads (group commit): returns `f`'s nonzero code (its changes rolled back alone),
/// or 0 once the group's commit is done (durable in the durable mode), or the commit's error.
/// `f` may run on another thread (the group's leader). See cairn.h.
#[no_mangle]
pub unsafe extern "C" fn cairn_write_grouped(
    env: *mut MDB_env,
    f: Option<GroupedFn>,
    ctx: *mut c_void,
) -> c_int {
    guard(|| {
        let e = handle!(env);
        let Some(f) = f else {
            return libc::EINVAL;
        };
        let en = tri!(env_static(e));
        if en.is_read_only() {
            return libc::EACCES;
        }
        let t = txn::begin_grouped(e, env);
        let lent = Lent { txn: t, ctx };
        let mut own = 0;
        let own_ref = &mut own;
        let r = en.write_grouped(move |rw| {
            let lent = lent;
            // SAFETY: docs/safety.md §7, "Grouped writes": the handle from begin_grouped,
            // used by this thread alone until the callback returns; the caller's callback.
            let rc = unsafe { txn::run_grouped(lent.txn, rw, f, lent.ctx) };
            *own_ref = rc;
            if rc == 0 {
                Ok(())
            } else {
                Err(cairn::Error::Invalid(format!(
                    "the grouped write's callback returned {rc}"
                )))
            }
        });
        let rc = match (own, r) {
            (0, Ok(())) => 0,
            (0, Err(err)) => crate::code(&err),
            (rc, _) => rc,
        };
        // SAFETY: docs/safety.md §7: the handle from begin_grouped; its callback has returned
        // or never ran (the group answered), and nothing else refers to it now.
        unsafe { txn::end_grouped(t, rc == 0) };
        rc
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::{mdb_dbi_open, mdb_put, mdb_stat};
    use crate::env::{mdb_env_close, mdb_env_create, mdb_env_open};
    use crate::txn::{mdb_txn_abort, mdb_txn_begin, mdb_txn_commit};
    use crate::{MDB_stat, MDB_val, MDB_RDONLY};

    /// Puts the key `ctx` points at (a u32), then fails when it is a multiple of 5.
    unsafe extern "C" fn put_one(txn: *mut MDB_txn, ctx: *mut c_void) -> c_int {
        // SAFETY: the test's own u32, alive until cairn_write_grouped returns.
        let n = unsafe { *(ctx as *const u32) };
        let mut kb = n.to_be_bytes();
        let mut k = MDB_val {
            mv_size: 4,
            mv_data: kb.as_mut_ptr().cast(),
        };
        let mut v = k;
        // SAFETY: the callback's transaction, valid during the call; the main database is 1.
        let rc = unsafe { mdb_put(txn, 1, &mut k, &mut v, 0) };
        if rc != 0 {
            return rc;
        }
        if n % 5 == 0 {
            -1
        } else {
            0
        }
    }

    #[test]
    fn grouped_writes_from_threads() {
        let dir = std::env::temp_dir().join(format!("cairn-capi-group-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = std::ffi::CString::new(dir.to_str().unwrap()).unwrap();
        let mut env = std::ptr::null_mut();
        // SAFETY: lmdb.h's contract, kept by this test throughout.
        unsafe {
            assert_eq!(mdb_env_create(&mut env), 0);
            assert_eq!(cairn_env_set_group_limits(env, 4, 1000), 0);
            assert_eq!(mdb_env_open(env, path.as_ptr(), 0, 0o644), 0);
            assert_eq!(cairn_env_set_group_limits(env, 4, 1000), libc::EINVAL);
            let mut t = std::ptr::null_mut();
            let mut dbi = 0;
            assert_eq!(mdb_txn_begin(env, std::ptr::null_mut(), 0, &mut t), 0);
            assert_eq!(mdb_dbi_open(t, std::ptr::null(), 0, &mut dbi), 0);
            assert_eq!(dbi, 1);
            assert_eq!(mdb_txn_commit(t), 0);
        }
        struct Env(*mut MDB_env);
        // SAFETY: an MDB_env is shared by threads in LMDB's contract.
        unsafe impl Sync for Env {}
        let shared = Env(env);
        std::thread::scope(|s| {
            for th in 0..8u32 {
                let shared = &shared;
                s.spawn(move || {
                    for i in 0..25u32 {
                        let mut n = th * 100 + i;
                        let ctx = std::ptr::from_mut(&mut n).cast::<c_void>();
                        // SAFETY: a live environment; `n` outlives the call.
                        let rc = unsafe { cairn_write_grouped(shared.0, Some(put_one), ctx) };
                        assert_eq!(rc, if n % 5 == 0 { -1 } else { 0 });
                    }
                });
            }
        });
        // SAFETY: as above.
        unsafe {
            let mut t = std::ptr::null_mut();
            assert_eq!(
                mdb_txn_begin(env, std::ptr::null_mut(), MDB_RDONLY, &mut t),
                0
            );
            let mut st = MDB_stat::default();
            assert_eq!(mdb_stat(t, 1, &mut st), 0);
            assert_eq!(st.ms_entries, 8 * 20);
            mdb_txn_abort(t);
            assert_eq!(
                cairn_write_grouped(env, None, std::ptr::null_mut()),
                libc::EINVAL
            );
            mdb_env_close(env);
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
