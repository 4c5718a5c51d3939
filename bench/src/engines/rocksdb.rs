//! RocksDB through its C API (`rocksdb/c.h`), linked against the system library.
//!
//! A write transaction is one WriteBatch applied atomically by `rocksdb_write`; when the
//! transaction reads its own writes (the CRUD workload) it is a WriteBatchWithIndex instead.
//! A read transaction is a snapshot.

use std::ffi::CStr;
use std::path::Path;
use std::ptr;

use anyhow::{bail, Result};
use libc::{c_char, c_int, c_uchar, c_void, size_t};

use super::{c_path, disk_usage, Engine, ReadTxn, Visit, VisitPair, WriteKind, WriteTxn};

#[allow(non_camel_case_types)]
mod ffi {
    use libc::{c_char, c_double, c_int, c_uchar, c_void, size_t};

    macro_rules! opaque {
        ($($name:ident),*) => { $( #[repr(C)] pub struct $name { _private: [u8; 0] } )* };
    }
    opaque!(
        rocksdb_t,
        rocksdb_options_t,
        rocksdb_block_based_table_options_t,
        rocksdb_cache_t,
        rocksdb_filterpolicy_t,
        rocksdb_writeoptions_t,
        rocksdb_readoptions_t,
        rocksdb_flushoptions_t,
        rocksdb_writebatch_t,
        rocksdb_writebatch_wi_t,
        rocksdb_snapshot_t,
        rocksdb_iterator_t,
        rocksdb_pinnableslice_t
    );

    extern "C" {
        pub fn rocksdb_options_create() -> *mut rocksdb_options_t;
        pub fn rocksdb_options_destroy(o: *mut rocksdb_options_t);
        pub fn rocksdb_options_set_create_if_missing(o: *mut rocksdb_options_t, v: c_uchar);
        pub fn rocksdb_options_set_block_based_table_factory(
            o: *mut rocksdb_options_t,
            t: *mut rocksdb_block_based_table_options_t,
        );
        pub fn rocksdb_block_based_options_create() -> *mut rocksdb_block_based_table_options_t;
        pub fn rocksdb_block_based_options_destroy(t: *mut rocksdb_block_based_table_options_t);
        pub fn rocksdb_block_based_options_set_block_cache(
            t: *mut rocksdb_block_based_table_options_t,
            c: *mut rocksdb_cache_t,
        );
        pub fn rocksdb_block_based_options_set_filter_policy(
            t: *mut rocksdb_block_based_table_options_t,
            f: *mut rocksdb_filterpolicy_t,
        );
        pub fn rocksdb_cache_create_lru(capacity: size_t) -> *mut rocksdb_cache_t;
        pub fn rocksdb_cache_destroy(c: *mut rocksdb_cache_t);
        pub fn rocksdb_filterpolicy_create_bloom(
            bits_per_key: c_double,
        ) -> *mut rocksdb_filterpolicy_t;

        pub fn rocksdb_open(
            o: *const rocksdb_options_t,
            name: *const c_char,
            err: *mut *mut c_char,
        ) -> *mut rocksdb_t;
        pub fn rocksdb_close(db: *mut rocksdb_t);
        pub fn rocksdb_free(p: *mut c_void);

        pub fn rocksdb_writeoptions_create() -> *mut rocksdb_writeoptions_t;
        pub fn rocksdb_writeoptions_destroy(o: *mut rocksdb_writeoptions_t);
        pub fn rocksdb_writeoptions_set_sync(o: *mut rocksdb_writeoptions_t, v: c_uchar);
        pub fn rocksdb_writeoptions_disable_WAL(o: *mut rocksdb_writeoptions_t, v: c_int);
        pub fn rocksdb_readoptions_create() -> *mut rocksdb_readoptions_t;
        pub fn rocksdb_readoptions_destroy(o: *mut rocksdb_readoptions_t);
        pub fn rocksdb_readoptions_set_snapshot(
            o: *mut rocksdb_readoptions_t,
            s: *const rocksdb_snapshot_t,
        );
        pub fn rocksdb_flushoptions_create() -> *mut rocksdb_flushoptions_t;
        pub fn rocksdb_flushoptions_destroy(o: *mut rocksdb_flushoptions_t);
        pub fn rocksdb_flushoptions_set_wait(o: *mut rocksdb_flushoptions_t, v: c_uchar);

        pub fn rocksdb_writebatch_create() -> *mut rocksdb_writebatch_t;
        pub fn rocksdb_writebatch_destroy(b: *mut rocksdb_writebatch_t);
        pub fn rocksdb_writebatch_put(
            b: *mut rocksdb_writebatch_t,
            k: *const c_char,
            klen: size_t,
            v: *const c_char,
            vlen: size_t,
        );
        pub fn rocksdb_writebatch_delete(b: *mut rocksdb_writebatch_t, k: *const c_char, l: size_t);
        pub fn rocksdb_write(
            db: *mut rocksdb_t,
            o: *const rocksdb_writeoptions_t,
            b: *mut rocksdb_writebatch_t,
            err: *mut *mut c_char,
        );

        pub fn rocksdb_writebatch_wi_create(
            reserved: size_t,
            overwrite_keys: c_uchar,
        ) -> *mut rocksdb_writebatch_wi_t;
        pub fn rocksdb_writebatch_wi_destroy(b: *mut rocksdb_writebatch_wi_t);
        pub fn rocksdb_writebatch_wi_put(
            b: *mut rocksdb_writebatch_wi_t,
            k: *const c_char,
            klen: size_t,
            v: *const c_char,
            vlen: size_t,
        );
        pub fn rocksdb_writebatch_wi_delete(
            b: *mut rocksdb_writebatch_wi_t,
            k: *const c_char,
            l: size_t,
        );
        pub fn rocksdb_writebatch_wi_get_from_batch_and_db(
            b: *mut rocksdb_writebatch_wi_t,
            db: *mut rocksdb_t,
            o: *const rocksdb_readoptions_t,
            k: *const c_char,
            klen: size_t,
            vlen: *mut size_t,
            err: *mut *mut c_char,
        ) -> *mut c_char;
        pub fn rocksdb_write_writebatch_wi(
            db: *mut rocksdb_t,
            o: *const rocksdb_writeoptions_t,
            b: *mut rocksdb_writebatch_wi_t,
            err: *mut *mut c_char,
        );

        pub fn rocksdb_get_pinned(
            db: *mut rocksdb_t,
            o: *const rocksdb_readoptions_t,
            k: *const c_char,
            klen: size_t,
            err: *mut *mut c_char,
        ) -> *mut rocksdb_pinnableslice_t;
        pub fn rocksdb_pinnableslice_value(
            p: *const rocksdb_pinnableslice_t,
            vlen: *mut size_t,
        ) -> *const c_char;
        pub fn rocksdb_pinnableslice_destroy(p: *mut rocksdb_pinnableslice_t);

        pub fn rocksdb_create_snapshot(db: *mut rocksdb_t) -> *const rocksdb_snapshot_t;
        pub fn rocksdb_release_snapshot(db: *mut rocksdb_t, s: *const rocksdb_snapshot_t);
        pub fn rocksdb_create_iterator(
            db: *mut rocksdb_t,
            o: *const rocksdb_readoptions_t,
        ) -> *mut rocksdb_iterator_t;
        pub fn rocksdb_iter_destroy(i: *mut rocksdb_iterator_t);
        pub fn rocksdb_iter_valid(i: *const rocksdb_iterator_t) -> c_uchar;
        pub fn rocksdb_iter_seek_to_first(i: *mut rocksdb_iterator_t);
        pub fn rocksdb_iter_seek_to_last(i: *mut rocksdb_iterator_t);
        pub fn rocksdb_iter_seek(i: *mut rocksdb_iterator_t, k: *const c_char, klen: size_t);
        pub fn rocksdb_iter_next(i: *mut rocksdb_iterator_t);
        pub fn rocksdb_iter_prev(i: *mut rocksdb_iterator_t);
        pub fn rocksdb_iter_key(i: *const rocksdb_iterator_t, klen: *mut size_t) -> *const c_char;
        pub fn rocksdb_iter_value(i: *const rocksdb_iterator_t, vlen: *mut size_t)
            -> *const c_char;
        pub fn rocksdb_iter_get_error(i: *const rocksdb_iterator_t, err: *mut *mut c_char);

        pub fn rocksdb_flush(
            db: *mut rocksdb_t,
            o: *const rocksdb_flushoptions_t,
            err: *mut *mut c_char,
        );
        pub fn rocksdb_compact_range(
            db: *mut rocksdb_t,
            start: *const c_char,
            start_len: size_t,
            limit: *const c_char,
            limit_len: size_t,
        );
    }
}

const BLOCK_CACHE_BYTES: usize = 1 << 30;

#[derive(Clone, Copy, Debug)]
pub enum Mode {
    /// sync=true: the WAL is flushed on every commit.
    Sync,
    /// sync=false: the WAL is written but not flushed.
    NoSync,
    /// disableWAL: commits live in the memtable until it is flushed.
    NoWal,
}

pub struct Rocks {
    db: *mut ffi::rocksdb_t,
    options: *mut ffi::rocksdb_options_t,
    write_options: *mut ffi::rocksdb_writeoptions_t,
    /// Read options without a snapshot, for reads inside write transactions.
    latest: *mut ffi::rocksdb_readoptions_t,
    dir: std::path::PathBuf,
}

// SAFETY: rocksdb_t and the option objects are thread-safe for the concurrent reads and the
// single writer this harness performs; options are only mutated before the database opens.
unsafe impl Send for Rocks {}
unsafe impl Sync for Rocks {}

pub fn version() -> String {
    format!(
        "{} (system librocksdb, C API)",
        env!("BENCH_ROCKSDB_HEADER_VERSION")
    )
}

/// Turns a RocksDB error string (malloc'd by RocksDB) into an error, freeing it.
fn check(err: *mut c_char) -> Result<()> {
    if err.is_null() {
        return Ok(());
    }
    // SAFETY: RocksDB hands over a NUL-terminated malloc'd string.
    let msg = unsafe { CStr::from_ptr(err) }
        .to_string_lossy()
        .into_owned();
    unsafe { ffi::rocksdb_free(err as *mut c_void) };
    bail!("RocksDB error: {msg}")
}

fn ptr_len(bytes: &[u8]) -> (*const c_char, size_t) {
    (bytes.as_ptr() as *const c_char, bytes.len())
}

/// # Safety
/// `p` must point to `len` bytes valid for the caller's use of the slice.
unsafe fn slice<'a>(p: *const c_char, len: size_t) -> &'a [u8] {
    if len == 0 {
        return &[];
    }
    // SAFETY: guaranteed by the caller.
    unsafe { std::slice::from_raw_parts(p as *const u8, len) }
}

impl Rocks {
    pub fn open(dir: &Path, mode: Mode) -> Result<Rocks> {
        let path = c_path(dir)?;
        // SAFETY: plain C API use; every object created here is destroyed in Drop.
        unsafe {
            let options = ffi::rocksdb_options_create();
            ffi::rocksdb_options_set_create_if_missing(options, 1);
            let table = ffi::rocksdb_block_based_options_create();
            let cache = ffi::rocksdb_cache_create_lru(BLOCK_CACHE_BYTES);
            ffi::rocksdb_block_based_options_set_block_cache(table, cache);
            ffi::rocksdb_block_based_options_set_filter_policy(
                table,
                ffi::rocksdb_filterpolicy_create_bloom(10.0),
            );
            ffi::rocksdb_options_set_block_based_table_factory(options, table);
            // The table factory and the options hold their own references.
            ffi::rocksdb_block_based_options_destroy(table);
            ffi::rocksdb_cache_destroy(cache);

            let write_options = ffi::rocksdb_writeoptions_create();
            match mode {
                Mode::Sync => ffi::rocksdb_writeoptions_set_sync(write_options, 1),
                Mode::NoSync => ffi::rocksdb_writeoptions_set_sync(write_options, 0),
                Mode::NoWal => ffi::rocksdb_writeoptions_disable_WAL(write_options, 1 as c_int),
            }
            let latest = ffi::rocksdb_readoptions_create();
            let mut err = ptr::null_mut();
            let db = ffi::rocksdb_open(options, path.as_ptr(), &mut err);
            let this = Rocks {
                db,
                options,
                write_options,
                latest,
                dir: dir.to_path_buf(),
            };
            check(err)?;
            Ok(this)
        }
    }
}

impl Drop for Rocks {
    fn drop(&mut self) {
        // SAFETY: no snapshot, iterator or batch outlives the call that made it.
        unsafe {
            if !self.db.is_null() {
                ffi::rocksdb_close(self.db);
            }
            ffi::rocksdb_readoptions_destroy(self.latest);
            ffi::rocksdb_writeoptions_destroy(self.write_options);
            ffi::rocksdb_options_destroy(self.options);
        }
    }
}

struct Batch<'a> {
    rocks: &'a Rocks,
    plain: *mut ffi::rocksdb_writebatch_t,
    indexed: *mut ffi::rocksdb_writebatch_wi_t,
}

impl WriteTxn for Batch<'_> {
    fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let ((k, kl), (v, vl)) = (ptr_len(key), ptr_len(value));
        // SAFETY: exactly one of the two batches is live; RocksDB copies the bytes.
        unsafe {
            if self.indexed.is_null() {
                ffi::rocksdb_writebatch_put(self.plain, k, kl, v, vl);
            } else {
                ffi::rocksdb_writebatch_wi_put(self.indexed, k, kl, v, vl);
            }
        }
        Ok(())
    }

    fn delete(&mut self, key: &[u8]) -> Result<()> {
        let (k, kl) = ptr_len(key);
        // SAFETY: as for put.
        unsafe {
            if self.indexed.is_null() {
                ffi::rocksdb_writebatch_delete(self.plain, k, kl);
            } else {
                ffi::rocksdb_writebatch_wi_delete(self.indexed, k, kl);
            }
        }
        Ok(())
    }

    fn get(&mut self, key: &[u8], f: Visit<'_>) -> Result<bool> {
        let (k, kl) = ptr_len(key);
        let mut err = ptr::null_mut();
        let mut len = 0;
        // SAFETY: the returned buffer is malloc'd by RocksDB and freed here.
        unsafe {
            let v = if self.indexed.is_null() {
                // A plain batch cannot be read; this sees the database only.
                let p = ffi::rocksdb_get_pinned(self.rocks.db, self.rocks.latest, k, kl, &mut err);
                check(err)?;
                if p.is_null() {
                    return Ok(false);
                }
                let v = ffi::rocksdb_pinnableslice_value(p, &mut len);
                f(slice(v, len));
                ffi::rocksdb_pinnableslice_destroy(p);
                return Ok(true);
            } else {
                ffi::rocksdb_writebatch_wi_get_from_batch_and_db(
                    self.indexed,
                    self.rocks.db,
                    self.rocks.latest,
                    k,
                    kl,
                    &mut len,
                    &mut err,
                )
            };
            check(err)?;
            if v.is_null() {
                return Ok(false);
            }
            f(slice(v, len));
            ffi::rocksdb_free(v as *mut c_void);
            Ok(true)
        }
    }
}

struct Snapshot {
    db: *mut ffi::rocksdb_t,
    options: *mut ffi::rocksdb_readoptions_t,
}

impl Snapshot {
    /// Walks an iterator: `first` positions it, then `step` until `limit` pairs or the end.
    fn walk(
        &self,
        first: &dyn Fn(*mut ffi::rocksdb_iterator_t),
        forward: bool,
        limit: u64,
        f: VisitPair<'_>,
    ) -> Result<u64> {
        // SAFETY: the iterator lives within the snapshot's read options and is destroyed here.
        unsafe {
            let it = ffi::rocksdb_create_iterator(self.db, self.options);
            first(it);
            let mut n = 0;
            while n < limit && ffi::rocksdb_iter_valid(it) != 0 {
                let (mut kl, mut vl) = (0, 0);
                let k = ffi::rocksdb_iter_key(it, &mut kl);
                let v = ffi::rocksdb_iter_value(it, &mut vl);
                f(slice(k, kl), slice(v, vl));
                n += 1;
                if forward {
                    ffi::rocksdb_iter_next(it);
                } else {
                    ffi::rocksdb_iter_prev(it);
                }
            }
            let mut err = ptr::null_mut();
            ffi::rocksdb_iter_get_error(it, &mut err);
            ffi::rocksdb_iter_destroy(it);
            check(err)?;
            Ok(n)
        }
    }
}

impl ReadTxn for Snapshot {
    fn get(&self, key: &[u8], f: Visit<'_>) -> Result<bool> {
        let (k, kl) = ptr_len(key);
        let mut err = ptr::null_mut();
        // SAFETY: the pinned slice is destroyed after the visit.
        unsafe {
            let p = ffi::rocksdb_get_pinned(self.db, self.options, k, kl, &mut err);
            check(err)?;
            if p.is_null() {
                return Ok(false);
            }
            let mut len = 0;
            let v = ffi::rocksdb_pinnableslice_value(p, &mut len);
            f(slice(v, len));
            ffi::rocksdb_pinnableslice_destroy(p);
        }
        Ok(true)
    }

    fn scan(&self, reverse: bool, f: VisitPair<'_>) -> Result<u64> {
        // SAFETY (closures): the iterator handed over is live.
        if reverse {
            self.walk(
                &|it| unsafe { ffi::rocksdb_iter_seek_to_last(it) },
                false,
                u64::MAX,
                f,
            )
        } else {
            self.walk(
                &|it| unsafe { ffi::rocksdb_iter_seek_to_first(it) },
                true,
                u64::MAX,
                f,
            )
        }
    }

    fn range_from(&self, start: &[u8], limit: usize, f: VisitPair<'_>) -> Result<usize> {
        let (k, kl) = ptr_len(start);
        // SAFETY: the iterator handed over is live; `start` outlives the call.
        let seek = |it| unsafe { ffi::rocksdb_iter_seek(it, k, kl) };
        Ok(self.walk(&seek, true, limit as u64, f)? as usize)
    }
}

impl Engine for Rocks {
    fn write(
        &self,
        kind: WriteKind,
        f: &mut dyn FnMut(&mut dyn WriteTxn) -> Result<()>,
    ) -> Result<()> {
        // SAFETY: the batch is written or dropped, then destroyed, before returning.
        unsafe {
            let mut batch = Batch {
                rocks: self,
                plain: ptr::null_mut(),
                indexed: ptr::null_mut(),
            };
            match kind {
                WriteKind::Blind => batch.plain = ffi::rocksdb_writebatch_create(),
                WriteKind::ReadYourWrites => {
                    batch.indexed = ffi::rocksdb_writebatch_wi_create(0, 1 as c_uchar)
                }
            }
            let mut result = f(&mut batch);
            if result.is_ok() {
                let mut err = ptr::null_mut();
                if batch.indexed.is_null() {
                    ffi::rocksdb_write(self.db, self.write_options, batch.plain, &mut err);
                } else {
                    ffi::rocksdb_write_writebatch_wi(
                        self.db,
                        self.write_options,
                        batch.indexed,
                        &mut err,
                    );
                }
                result = check(err);
            }
            if batch.indexed.is_null() {
                ffi::rocksdb_writebatch_destroy(batch.plain);
            } else {
                ffi::rocksdb_writebatch_wi_destroy(batch.indexed);
            }
            result
        }
    }

    fn read(&self, f: &mut dyn FnMut(&dyn ReadTxn) -> Result<()>) -> Result<()> {
        // SAFETY: the snapshot and its options are released before returning.
        unsafe {
            let snap = ffi::rocksdb_create_snapshot(self.db);
            let options = ffi::rocksdb_readoptions_create();
            ffi::rocksdb_readoptions_set_snapshot(options, snap);
            let result = f(&Snapshot {
                db: self.db,
                options,
            });
            ffi::rocksdb_readoptions_destroy(options);
            ffi::rocksdb_release_snapshot(self.db, snap);
            result
        }
    }

    fn sync(&self) -> Result<()> {
        // Flushing the memtables makes every write durable, with or without the WAL.
        // SAFETY: plain C API use.
        unsafe {
            let options = ffi::rocksdb_flushoptions_create();
            ffi::rocksdb_flushoptions_set_wait(options, 1);
            let mut err = ptr::null_mut();
            ffi::rocksdb_flush(self.db, options, &mut err);
            ffi::rocksdb_flushoptions_destroy(options);
            check(err)
        }
    }

    fn compact(&mut self, _scratch: &Path) -> Result<Option<u64>> {
        self.sync()?;
        // SAFETY: null bounds mean the whole key space.
        unsafe { ffi::rocksdb_compact_range(self.db, ptr::null(), 0, ptr::null(), 0) };
        Ok(Some(disk_usage(&self.dir)?.0))
    }
}
