//! libmdbx through its C API (`mdbx-sys` compiles the bundled amalgamated source).

use std::ffi::CStr;
use std::path::Path;
use std::ptr;

use anyhow::{bail, Result};
use libc::{c_int, c_void};
use mdbx_sys as ffi;

use super::{c_path, disk_usage, Dups, Engine, ReadTxn, Visit, VisitPair, WriteKind, WriteTxn};

const MAP_UPPER: isize = 64 << 30;

#[derive(Clone, Copy, Debug)]
pub enum Mode {
    /// MDBX_SYNC_DURABLE.
    Durable,
    /// MDBX_SAFE_NOSYNC.
    SafeNoSync,
    /// MDBX_WRITEMAP | MDBX_UTTERLY_NOSYNC.
    WriteMap,
}

pub struct Mdbx {
    env: *mut ffi::MDBX_env,
    dbi: ffi::MDBX_dbi,
}

// SAFETY: an MDBX_env may be used from any thread; every transaction below is created, used
// and ended on one thread, which libmdbx checks.
unsafe impl Send for Mdbx {}
unsafe impl Sync for Mdbx {}

fn check(rc: c_int) -> Result<()> {
    if rc == 0 {
        return Ok(());
    }
    // SAFETY: mdbx_strerror returns a static NUL-terminated string for any code.
    let msg = unsafe { CStr::from_ptr(ffi::mdbx_strerror(rc)) };
    bail!("libmdbx error {rc}: {}", msg.to_string_lossy())
}

fn val(bytes: &[u8]) -> ffi::MDBX_val {
    ffi::MDBX_val {
        iov_base: bytes.as_ptr() as *mut c_void,
        iov_len: bytes.len(),
    }
}

/// # Safety
/// `v` must describe memory valid for the caller's use of the returned slice.
unsafe fn slice<'a>(v: &ffi::MDBX_val) -> &'a [u8] {
    if v.iov_len == 0 {
        return &[];
    }
    // SAFETY: guaranteed by the caller.
    unsafe { std::slice::from_raw_parts(v.iov_base as *const u8, v.iov_len) }
}

pub fn version() -> String {
    // SAFETY: a static struct filled in by the library.
    let v = unsafe { &ffi::mdbx_version };
    let krate = env!("BENCH_MDBX_SYS_VERSION");
    format!(
        "{}.{}.{}.{} (crate mdbx-sys {krate})",
        v.major, v.minor, v.patch, v.tweak
    )
}

impl Mdbx {
    /// `dups`: the main database's value layout (MDBX_DUPSORT, with MDBX_DUPFIXED and
    /// MDBX_INTEGERDUP for `Dups::Fixed`).
    pub fn open(dir: &Path, mode: Mode, dups: Dups) -> Result<Mdbx> {
        let flags = match mode {
            Mode::Durable => ffi::MDBX_SYNC_DURABLE,
            Mode::SafeNoSync => ffi::MDBX_SAFE_NOSYNC,
            Mode::WriteMap => ffi::MDBX_WRITEMAP | ffi::MDBX_UTTERLY_NOSYNC,
        };
        let path = c_path(dir)?;
        let mut env = ptr::null_mut();
        // SAFETY: plain libmdbx API use; the env is closed by Drop on every error path.
        unsafe {
            // libmdbx logs notices and warnings (file growth, readahead, wiped weak metas) to
            // stderr; keep errors only.
            ffi::mdbx_setup_debug(
                ffi::MDBX_LOG_ERROR as _,
                ffi::MDBX_DBG_DONTCHANGE as _,
                None,
            );
            check(ffi::mdbx_env_create(&mut env))?;
            let mut this = Mdbx { env, dbi: 0 };
            check(ffi::mdbx_env_set_geometry(
                env, -1, -1, MAP_UPPER, -1, -1, -1,
            ))?;
            check(ffi::mdbx_env_open(env, path.as_ptr(), flags as _, 0o644))?;
            let mut txn = ptr::null_mut();
            check(ffi::mdbx_txn_begin_ex(
                env,
                ptr::null_mut(),
                ffi::MDBX_TXN_READWRITE as _,
                &mut txn,
                ptr::null_mut(),
            ))?;
            let dbflags = match dups {
                Dups::No => ffi::MDBX_DB_DEFAULTS,
                Dups::Sorted => ffi::MDBX_DUPSORT | ffi::MDBX_CREATE,
                Dups::Fixed => {
                    ffi::MDBX_DUPSORT | ffi::MDBX_DUPFIXED | ffi::MDBX_INTEGERDUP | ffi::MDBX_CREATE
                }
            };
            let rc = ffi::mdbx_dbi_open(txn, ptr::null(), dbflags as _, &mut this.dbi);
            if rc != 0 {
                ffi::mdbx_txn_abort_ex(txn, ptr::null_mut());
                check(rc)?;
            }
            check(ffi::mdbx_txn_commit_ex(txn, ptr::null_mut()))?;
            Ok(this)
        }
    }
}

impl Drop for Mdbx {
    fn drop(&mut self) {
        // SAFETY: no transaction outlives the calls that created it.
        unsafe { ffi::mdbx_env_close_ex(self.env, false) };
    }
}

struct Txn {
    txn: *mut ffi::MDBX_txn,
    dbi: ffi::MDBX_dbi,
}

impl Txn {
    fn get(&self, key: &[u8], f: Visit<'_>) -> Result<bool> {
        let k = val(key);
        let mut v = val(&[]);
        // SAFETY: the txn is live; the value points into the map for the txn's life.
        let rc = unsafe { ffi::mdbx_get(self.txn, self.dbi, &k, &mut v) };
        if rc == ffi::MDBX_NOTFOUND {
            return Ok(false);
        }
        check(rc)?;
        f(unsafe { slice(&v) });
        Ok(true)
    }

    /// Walks a cursor: `first` positions it, then `step` until `limit` pairs or the end.
    fn walk(
        &self,
        first: ffi::MDBX_cursor_op,
        start: Option<&[u8]>,
        step: ffi::MDBX_cursor_op,
        limit: u64,
        f: VisitPair<'_>,
    ) -> Result<u64> {
        let mut cur = ptr::null_mut();
        // SAFETY: the cursor is used inside its txn and closed before returning.
        unsafe {
            check(ffi::mdbx_cursor_open(self.txn, self.dbi, &mut cur))?;
            let mut k = val(start.unwrap_or(&[]));
            let mut v = val(&[]);
            let mut op = first;
            let mut n = 0;
            let result = loop {
                if n == limit {
                    break Ok(n);
                }
                let rc = ffi::mdbx_cursor_get(cur, &mut k, &mut v, op);
                if rc == ffi::MDBX_NOTFOUND {
                    break Ok(n);
                }
                if let Err(e) = check(rc) {
                    break Err(e);
                }
                f(slice(&k), slice(&v));
                n += 1;
                op = step;
            };
            ffi::mdbx_cursor_close(cur);
            result
        }
    }
}

impl WriteTxn for Txn {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let (k, mut v) = (val(key), val(value));
        // SAFETY: live write txn; libmdbx copies key and value.
        check(unsafe { ffi::mdbx_put(self.txn, self.dbi, &k, &mut v, ffi::MDBX_UPSERT as _) })
    }

    fn append(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let (k, mut v) = (val(key), val(value));
        // SAFETY: as for put.
        check(unsafe { ffi::mdbx_put(self.txn, self.dbi, &k, &mut v, ffi::MDBX_APPEND as _) })
    }

    fn delete(&mut self, key: &[u8]) -> Result<()> {
        let k = val(key);
        // SAFETY: live write txn.
        let rc = unsafe { ffi::mdbx_del(self.txn, self.dbi, &k, ptr::null()) };
        if rc == ffi::MDBX_NOTFOUND {
            return Ok(());
        }
        check(rc)
    }

    fn get(&mut self, key: &[u8], f: Visit<'_>) -> Result<bool> {
        Txn::get(self, key, f)
    }

    fn delete_pair(&mut self, key: &[u8], value: &[u8]) -> Result<bool> {
        let (k, v) = (val(key), val(value));
        // SAFETY: live write txn.
        let rc = unsafe { ffi::mdbx_del(self.txn, self.dbi, &k, &v) };
        if rc == ffi::MDBX_NOTFOUND {
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
            self.walk(ffi::MDBX_LAST, None, ffi::MDBX_PREV, u64::MAX, f)
        } else {
            self.walk(ffi::MDBX_FIRST, None, ffi::MDBX_NEXT, u64::MAX, f)
        }
    }

    fn range_from(&self, start: &[u8], limit: usize, f: VisitPair<'_>) -> Result<usize> {
        let n = self.walk(
            ffi::MDBX_SET_RANGE,
            Some(start),
            ffi::MDBX_NEXT,
            limit as u64,
            f,
        )?;
        Ok(n as usize)
    }

    fn dup_values(&self, key: &[u8], f: Visit<'_>) -> Result<u64> {
        // MDBX_SET_KEY, then MDBX_NEXT_DUP to the key's last value.
        self.walk(
            ffi::MDBX_SET_KEY,
            Some(key),
            ffi::MDBX_NEXT_DUP,
            u64::MAX,
            &mut |_, v| f(v),
        )
    }

    fn dup_chunks(&self, key: &[u8], f: Visit<'_>) -> Result<u64> {
        let mut cur = ptr::null_mut();
        // SAFETY: the cursor is used inside its txn and closed before returning; the values
        // point into the map for the txn's life.
        unsafe {
            check(ffi::mdbx_cursor_open(self.txn, self.dbi, &mut cur))?;
            let mut k = val(key);
            let mut v = val(&[]);
            // MDBX_SET, then MDBX_GET_MULTIPLE and MDBX_NEXT_MULTIPLE to the key's last value.
            let mut op = ffi::MDBX_SET;
            let mut n = 0;
            let result = loop {
                let rc = ffi::mdbx_cursor_get(cur, &mut k, &mut v, op);
                if rc == ffi::MDBX_NOTFOUND {
                    break Ok(n);
                }
                if let Err(e) = check(rc) {
                    break Err(e);
                }
                if op == ffi::MDBX_SET {
                    op = ffi::MDBX_GET_MULTIPLE;
                    continue;
                }
                f(slice(&v));
                n += 1;
                op = ffi::MDBX_NEXT_MULTIPLE;
            };
            ffi::mdbx_cursor_close(cur);
            result
        }
    }
}

impl Engine for Mdbx {
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
            check(ffi::mdbx_txn_begin_ex(
                self.env,
                ptr::null_mut(),
                ffi::MDBX_TXN_READWRITE as _,
                &mut txn.txn,
                ptr::null_mut(),
            ))?;
            if let Err(e) = f(&mut txn) {
                ffi::mdbx_txn_abort_ex(txn.txn, ptr::null_mut());
                return Err(e);
            }
            check(ffi::mdbx_txn_commit_ex(txn.txn, ptr::null_mut()))
        }
    }

    fn read(&self, f: &mut dyn FnMut(&dyn ReadTxn) -> Result<()>) -> Result<()> {
        let mut txn = Txn {
            txn: ptr::null_mut(),
            dbi: self.dbi,
        };
        // SAFETY: the read txn is aborted (released) before returning.
        unsafe {
            check(ffi::mdbx_txn_begin_ex(
                self.env,
                ptr::null_mut(),
                ffi::MDBX_TXN_RDONLY as _,
                &mut txn.txn,
                ptr::null_mut(),
            ))?;
            let result = f(&txn);
            ffi::mdbx_txn_abort_ex(txn.txn, ptr::null_mut());
            result
        }
    }

    fn sync(&self) -> Result<()> {
        // SAFETY: open env. MDBX_RESULT_TRUE (-1) means there was nothing to flush.
        let rc = unsafe { ffi::mdbx_env_sync_ex(self.env, true, false) };
        if rc == -1 {
            return Ok(());
        }
        check(rc)
    }

    fn compact(&mut self, scratch: &Path) -> Result<Option<u64>> {
        let target = scratch.join("compact.mdbx");
        let path = c_path(&target)?;
        // SAFETY: open env; the destination file does not exist yet.
        check(unsafe { ffi::mdbx_env_copy(self.env, path.as_ptr(), ffi::MDBX_CP_COMPACT as _) })?;
        Ok(Some(disk_usage(&target)?.0))
    }
}
