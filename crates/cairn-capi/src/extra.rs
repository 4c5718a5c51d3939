//! What goes beyond LMDB's API (declared in cairn.h): Cairn's durability knob and checker.

use crate::env::{handle, trc, tri, MDB_env};
use crate::{guard, MDB_CORRUPTED};
use std::os::raw::{c_char, c_int};

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
