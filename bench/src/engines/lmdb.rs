//! LMDB through its C API (`lmdb-master-sys` compiles the bundled mdb.master source).

use std::ffi::CStr;
use std::path::Path;
use std::ptr;

use anyhow::{bail, Result};
use libc::{c_int, c_uint, c_void};
use lmdb_master_sys as ffi;

use super::{c_path, disk_usage, Dups, Engine, ReadTxn, Visit, VisitPair, WriteKind, WriteTxn};

const MAP_SIZE: usize = 64 << 30;

#[derive(Clone, Copy, Debug)]
pub enum Mode {
    /// Default flags: data and meta page each flushed on commit.
    Durable,
    /// MDB_NOSYNC | MDB_NOMETASYNC.
    NoSync,
    /// MDB_WRITEMAP | MDB_MAPASYNC | MDB_NOSYNC.
    WriteMap,
}

pub struct Lmdb {
    env: *mut ffi::MDB_env,
    dbi: ffi::MDB_dbi,
}

// SAFETY: an MDB_env may be used from any thread; every transaction below is created, used and
// ended on one thread, as LMDB requires without MDB_NOTLS.
unsafe impl Send for Lmdb {}
unsafe impl Sync for Lmdb {}

fn check(rc: c_int) -> Result<()> {
    if rc == 0 {
        return Ok(());
    }
    // SAFETY: mdb_strerror returns a static NUL-terminated string for any code.
    let msg = unsafe { CStr::from_ptr(ffi::mdb_strerror(rc)) };
    bail!("LMDB error {rc}: {}", msg.to_string_lossy())
}

fn val(bytes: &[u8]) -> ffi::MDB_val {
    ffi::MDB_val {
        mv_size: bytes.len(),
        mv_data: bytes.as_ptr() as *mut c_void,
    }
}

/// # Safety
/// `v` must describe memory valid for the caller's use of the returned slice.
unsafe fn slice<'a>(v: &ffi::MDB_val) -> &'a [u8] {
    if v.mv_size == 0 {
        return &[];
    }
    // SAFETY: guaranteed by the caller.
    unsafe { std::slice::from_raw_parts(v.mv_data as *const u8, v.mv_size) }
}

pub fn version() -> String {
    let (mut major, mut minor, mut patch) = (0, 0, 0);
    // SAFETY: mdb_version only writes the three ints.
    unsafe { ffi::mdb_version(&mut major, &mut minor, &mut patch) };
    let krate = env!("BENCH_LMDB_SYS_VERSION");
    format!("{major}.{minor}.{patch} (mdb.master branch, crate lmdb-master-sys {krate})")
}

impl Lmdb {
    /// `dups`: the main database's value layout (MDB_DUPSORT, with MDB_DUPFIXED and
    /// MDB_INTEGERDUP for `Dups::Fixed`).
    pub fn open(dir: &Path, mode: Mode, dups: Dups) -> Result<Lmdb> {
        let flags: c_uint = match mode {
            Mode::Durable => 0,
            Mode::NoSync => ffi::MDB_NOSYNC | ffi::MDB_NOMETASYNC,
            Mode::WriteMap => ffi::MDB_WRITEMAP | ffi::MDB_MAPASYNC | ffi::MDB_NOSYNC,
        };
        let path = c_path(dir)?;
        let mut env = ptr::null_mut();
        // SAFETY: plain LMDB API use; the env is closed on every error path.
        unsafe {
            check(ffi::mdb_env_create(&mut env))?;
            let mut this = Lmdb { env, dbi: 0 };
            check(ffi::mdb_env_set_mapsize(env, MAP_SIZE as _))?;
            check(ffi::mdb_env_open(env, path.as_ptr(), flags, 0o644))?;
            let mut txn = ptr::null_mut();
            check(ffi::mdb_txn_begin(env, ptr::null_mut(), 0, &mut txn))?;
            let dbflags = match dups {
                Dups::No => 0,
                Dups::Sorted => ffi::MDB_DUPSORT,
                Dups::Fixed => ffi::MDB_DUPSORT | ffi::MDB_DUPFIXED | ffi::MDB_INTEGERDUP,
            };
            let rc = ffi::mdb_dbi_open(txn, ptr::null(), dbflags, &mut this.dbi);
            if rc != 0 {
                ffi::mdb_txn_abort(txn);
                check(rc)?;
            }
            check(ffi::mdb_txn_commit(txn))?;
            Ok(this)
        }
    }
}

impl Drop for Lmdb {
    fn drop(&mut self) {
        // SAFETY: no transaction outlives the calls that created it.
        unsafe { ffi::mdb_env_close(self.env) };
    }
}

struct Txn {
    txn: *mut ffi::MDB_txn,
    dbi: ffi::MDB_dbi,
}

impl Txn {
    fn get(&self, key: &[u8], f: Visit<'_>) -> Result<bool> {
        let k = val(key);
        let mut v = val(&[]);
        // SAFETY: the txn is live; the value points into the map for the txn's life.
        let rc = unsafe { ffi::mdb_get(self.txn, self.dbi, &k as *const _ as *mut _, &mut v) };
        if rc == ffi::MDB_NOTFOUND {
            return Ok(false);
        }
        check(rc)?;
        f(unsafe { slice(&v) });
        Ok(true)
    }

    /// Walks a cursor: `first` positions it, then `step` until `limit` pairs or the end.
    fn walk(
        &self,
        first: ffi::MDB_cursor_op,
        start: Option<&[u8]>,
        step: ffi::MDB_cursor_op,
        limit: u64,
        f: VisitPair<'_>,
    ) -> Result<u64> {
        let mut cur = ptr::null_mut();
        // SAFETY: the cursor is used inside its txn and closed before returning.
        unsafe {
            check(ffi::mdb_cursor_open(self.txn, self.dbi, &mut cur))?;
            let mut k = val(start.unwrap_or(&[]));
            let mut v = val(&[]);
            let mut op = first;
            let mut n = 0;
            let result = loop {
                if n == limit {
                    break Ok(n);
                }
                let rc = ffi::mdb_cursor_get(cur, &mut k, &mut v, op);
                if rc == ffi::MDB_NOTFOUND {
                    break Ok(n);
                }
                if let Err(e) = check(rc) {
                    break Err(e);
                }
                f(slice(&k), slice(&v));
                n += 1;
                op = step;
            };
            ffi::mdb_cursor_close(cur);
            result
        }
    }
}

impl WriteTxn for Txn {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let (mut k, mut v) = (val(key), val(value));
        // SAFETY: live write txn; LMDB copies key and value.
        check(unsafe { ffi::mdb_put(self.txn, self.dbi, &mut k, &mut v, 0) })
    }

    fn append(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let (mut k, mut v) = (val(key), val(value));
        // SAFETY: as for put.
        check(unsafe { ffi::mdb_put(self.txn, self.dbi, &mut k, &mut v, ffi::MDB_APPEND) })
    }

    fn delete(&mut self, key: &[u8]) -> Result<()> {
        let mut k = val(key);
        // SAFETY: live write txn.
        let rc = unsafe { ffi::mdb_del(self.txn, self.dbi, &mut k, ptr::null_mut()) };
        if rc == ffi::MDB_NOTFOUND {
            return Ok(());
        }
        check(rc)
    }

    fn get(&mut self, key: &[u8], f: Visit<'_>) -> Result<bool> {
        Txn::get(self, key, f)
    }

    fn delete_pair(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        let (mut k, mut v) = (val(key), val(value));
        // SAFETY: live write txn.
        let rc = unsafe { ffi::mdb_del(self.txn, self.dbi, &mut k, &mut v) };
        if rc == ffi::MDB_NOTFOUND {
            return Ok(false);
        }
        check(rc)?;
        Ok(true)
    }
}

impl ReadTxn for Txn {
    fn get(&self, key: &[u8], f: Visit<'_>) -> Result<bool> {
        Txn::get(self, key, f)
    }

    fn scan(&self, reverse: bool, f: VisitPair<'_>) -> Result<u64> {
        if reverse {
            self.walk(ffi::MDB_LAST, None, ffi::MDB_PREV, u64::MAX, f)
        } else {
            self.walk(ffi::MDB_FIRST, None, ffi::MDB_NEXT, u64::MAX, f)
        }
    }

    fn range_from(&self, start: &[u8], limit: usize, f: VisitPair<'_>) -> Result<usize> {
        let n = self.walk(
            ffi::MDB_SET_RANGE,
            Some(start),
            ffi::MDB_NEXT,
            limit as u64,
            f,
        )?;
        Ok(n as usize)
    }

    fn dup_values(&self, key: &[u8], f: Visit<'_>) -> Result<u64> {
        // MDB_SET_KEY, then MDB_NEXT_DUP to the key's last value.
        self.walk(
            ffi::MDB_SET_KEY,
            Some(key),
            ffi::MDB_NEXT_DUP,
            u64::MAX,
            &mut |_, v| f(v),
        )
    }

    fn dup_chunks(&self, key: &[u8], f: Visit<'_>) -> Result<u64> {
        let mut cur = ptr::null_mut();
        // SAFETY: the cursor is used inside its txn and closed before returning; the values
        // point into the map for the txn's life.
        unsafe {
            check(ffi::mdb_cursor_open(self.txn, self.dbi, &mut cur))?;
            let mut k = val(key);
            let mut v = val(&[]);
            // MDB_SET, then MDB_GET_MULTIPLE and MDB_NEXT_MULTIPLE to the key's last value.
            let mut op = ffi::MDB_SET;
            let mut n = 0;
            let result = loop {
                let rc = ffi::mdb_cursor_get(cur, &mut k, &mut v, op);
                if rc == ffi::MDB_NOTFOUND {
                    break Ok(n);
                }
                if let Err(e) = check(rc) {
                    break Err(e);
                }
                if op == ffi::MDB_SET {
                    op = ffi::MDB_GET_MULTIPLE;
                    continue;
                }
                f(slice(&v));
                n += 1;
                op = ffi::MDB_NEXT_MULTIPLE;
            };
            ffi::mdb_cursor_close(cur);
            result
        }
    }
}

impl Engine for Lmdb {
    fn write(
        &self,
        _kind: WriteKind,
        f: &mut dyn FnMut(&mut dyn WriteTxn) -> Result<()>,
    ) -> Result<()> {
        let mut txn = Txn {
            txn: ptr::null_mut(),
            dbi: self.dbi,
        };
        // SAFETY: the txn is committed or aborted before returning.
        unsafe {
            check(ffi::mdb_txn_begin(
                self.env,
                ptr::null_mut(),
                0,
                &mut txn.txn,
            ))?;
            if let Err(e) = f(&mut txn) {
                ffi::mdb_txn_abort(txn.txn);
                return Err(e);
            }
            check(ffi::mdb_txn_commit(txn.txn))
        }
    }

    fn read(&self, f: &mut dyn FnMut(&dyn ReadTxn) -> Result<()>) -> Result<()> {
        let mut txn = Txn {
            txn: ptr::null_mut(),
            dbi: self.dbi,
        };
        // SAFETY: the read txn is aborted (released) before returning.
        unsafe {
            check(ffi::mdb_txn_begin(
                self.env,
                ptr::null_mut(),
                ffi::MDB_RDONLY,
                &mut txn.txn,
            ))?;
            let result = f(&txn);
            ffi::mdb_txn_abort(txn.txn);
            result
        }
    }

    fn sync(&self) -> Result<()> {
        // SAFETY: open env.
        check(unsafe { ffi::mdb_env_sync(self.env, 1) })
    }

    fn compact(&mut self, scratch: &Path) -> Result<Option<u64>> {
        let path = c_path(scratch)?;
        // SAFETY: open env; the destination directory exists and is empty.
        check(unsafe { ffi::mdb_env_copy2(self.env, path.as_ptr(), ffi::MDB_CP_COMPACT) })?;
        Ok(Some(disk_usage(scratch)?.0))
    }
}
