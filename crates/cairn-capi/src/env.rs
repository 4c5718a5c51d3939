//! `MDB_env`: creation, options, open, close, information, sync, copies, reader table.
//!
//! Options set before `mdb_env_open` are kept here and turned into `cairn::EnvOptions`. The
//! durability flags map onto Cairn's modes: MDB_NOSYNC and MDB_MAPASYNC give `Lazy` with no
//! automatic flush (commits reach the disk at mdb_env_sync or close, as in LMDB);
//! MDB_NOMETASYNC gives `Lazy` with Cairn's periodic flush (a crash may lose the last
//! commits, never the file, which is what NOMETASYNC risks too). MDB_WRITEMAP is accepted:
//! Cairn writes pages itself, and MDB_RESERVE still hands out writable memory.

use crate::txn::MDB_txn;
use crate::{code, guard, guard_void, MDB_dbi, MDB_envinfo, MDB_stat};
use crate::{MDB_cmp_func, MDB_NOLOCK, MDB_NOSUBDIR, MDB_RDONLY};
use cairn::{Database, Durability, Env, FileNames};
use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int, c_uint, c_void};
use std::path::PathBuf;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

/// LMDB's default map size; reported by mdb_env_info when no limit was set.
const LMDB_DEFAULT_MAPSIZE: u64 = 10 << 20;
/// The smallest size limit: a new environment's first page (the engine's default page size,
/// which the C API keeps).
const MIN_MAPSIZE: u64 = 4096;
/// Address space reserved for the map when the limit is lower (it can be raised later).
const RESERVE: u64 = 1 << 40;

/// One opened database handle (`MDB_dbi`).
#[derive(Clone, Copy)]
pub(crate) struct Dbi {
    pub db: Database,
    /// The database's flags when the handle was opened.
    pub flags: cairn::DbFlags,
    pub cmp: Option<MDB_cmp_func>,
    pub dcmp: Option<MDB_cmp_func>,
    /// The address of the transaction that opened the handle while it has not committed (the
    /// handle is private to it and its children, as LMDB's are), 0 once every transaction may
    /// use it.
    pub owner: usize,
}

/// An environment handle.
pub struct MDB_env {
    pub(crate) env: Option<Env>,
    mapsize: Option<u64>,
    /// cairn_env_set_sync_bytes: Some(None) disables the periodic flush.
    pub(crate) sync_bytes: Option<Option<u64>>,
    /// cairn_env_set_group_limits: a group's most writes and longest growth in microseconds
    /// (0: the engine's default).
    pub(crate) group_limits: (usize, u32),
    maxreaders: u32,
    pub(crate) maxdbs: u32,
    flags: c_uint,
    path: Option<CString>,
    fd: c_int,
    userctx: *mut c_void,
    /// Indexed by `MDB_dbi`.
    pub(crate) dbis: Mutex<Vec<Option<Dbi>>>,
    /// The named databases' handles open (name, handle), for LMDB's MDB_DBS_FULL count: a
    /// handle closed (mdb_dbi_close, mdb_drop, its transaction's abort) frees its place.
    pub(crate) names: Mutex<Vec<(String, MDB_dbi)>>,
    /// The thread of each read transaction that is reset (mdb_txn_reset) and not yet renewed
    /// or ended. LMDB's keeps its reader slot, which mdb_reader_list shows with "-" for a
    /// txnid; the engine's snapshot has ended, so this layer lists them (txn.rs).
    pub(crate) resets: Mutex<Vec<u64>>,
    /// `CLOSED` once mdb_env_close was called, plus `ONE_TXN` per transaction handle alive,
    /// the spare one (`spare`) included. One word, so that exactly one party sees it reach
    /// `CLOSED` alone and frees the handle: a close with transactions alive (a caller's bug in
    /// LMDB) waits for the last of them.
    pub(crate) state: AtomicUsize,
    /// Bumped at every change of `dbis`: a recycled transaction handle keeps its cache of
    /// handles only while this is unchanged (txn.rs).
    pub(crate) dbi_gen: AtomicU64,
    /// One finished transaction handle kept for the next mdb_txn_begin (txn.rs).
    pub(crate) spare: AtomicPtr<MDB_txn>,
}

impl MDB_env {
    pub(crate) fn env(&self) -> Result<&Env, c_int> {
        self.env.as_ref().ok_or(libc::EINVAL)
    }

    pub(crate) fn dbi(&self, dbi: MDB_dbi) -> Result<Dbi, c_int> {
        let g = self.dbis.lock().unwrap_or_else(|p| p.into_inner());
        g.get(dbi as usize).copied().flatten().ok_or(libc::EINVAL)
    }

    /// Stores an opened handle. A handle new to the table takes `d.owner`; one open already
    /// keeps its owner. Returns whether the handle is new.
    pub(crate) fn set_dbi(&self, d: Dbi) -> bool {
        let i = crate::db::c_dbi(d.db) as usize;
        let mut g = self.dbis.lock().unwrap_or_else(|p| p.into_inner());
        if g.len() <= i {
            g.resize(i + 1, None);
        }
        let keep = g[i];
        g[i] = Some(Dbi {
            cmp: keep.and_then(|k| k.cmp),
            dcmp: keep.and_then(|k| k.dcmp),
            owner: keep.map_or(d.owner, |k| k.owner),
            ..d
        });
        self.dbi_gen.fetch_add(1, Ordering::Release);
        keep.is_none()
    }

    /// The handles transaction `from` (its address) opened, as it ends: handed to `to` (its
    /// parent's address when a nested transaction commits, 0 for every transaction when a
    /// top-level one does) or, with None, closed (LMDB closes the handles of a transaction
    /// that aborts or is reset).
    pub(crate) fn settle_dbis(&self, from: usize, to: Option<usize>) {
        let mut g = self.dbis.lock().unwrap_or_else(|p| p.into_inner());
        let mut closed = Vec::new();
        for (i, s) in g.iter_mut().enumerate() {
            match (s.as_mut(), to) {
                (Some(d), Some(o)) if d.owner == from => d.owner = o,
                (Some(d), None) if d.owner == from => {
                    *s = None;
                    closed.push(i as MDB_dbi);
                }
                _ => {}
            }
        }
        self.dbi_gen.fetch_add(1, Ordering::Release);
        drop(g);
        if !closed.is_empty() {
            self.forget_names(|d| closed.contains(&d));
        }
    }

    pub(crate) fn update_dbi(&self, dbi: MDB_dbi, f: impl FnOnce(&mut Dbi)) -> Result<(), c_int> {
        let mut g = self.dbis.lock().unwrap_or_else(|p| p.into_inner());
        match g.get_mut(dbi as usize) {
            Some(Some(d)) => {
                f(d);
                self.dbi_gen.fetch_add(1, Ordering::Release);
                Ok(())
            }
            _ => Err(libc::EINVAL),
        }
    }

    pub(crate) fn forget_dbi(&self, dbi: MDB_dbi) {
        let mut g = self.dbis.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = g.get_mut(dbi as usize) {
            *s = None;
        }
        self.dbi_gen.fetch_add(1, Ordering::Release);
        self.forget_names(|d| d == dbi);
    }

    /// Frees the places of the handles `closed` picks in the MDB_DBS_FULL count.
    fn forget_names(&self, closed: impl Fn(MDB_dbi) -> bool) {
        let mut n = self.names.lock().unwrap_or_else(|p| p.into_inner());
        n.retain(|&(_, d)| !closed(d));
    }

    /// Counts a new transaction handle (a recycled one is counted already).
    pub(crate) fn txn_allocated(&self) {
        self.state.fetch_add(ONE_TXN, Ordering::SeqCst);
    }

    /// Uncounts a transaction handle just freed, and frees the environment if it was closed
    /// and this was its last.
    ///
    /// # Safety
    /// `env` is a live handle; the caller does not use it afterwards.
    pub(crate) unsafe fn txn_freed(env: *mut MDB_env) {
        // SAFETY: docs/safety.md §7: live until the state reaches CLOSED alone, which only this
        // call can see.
        let prev = unsafe { &*env }.state.fetch_sub(ONE_TXN, Ordering::SeqCst);
        if prev == ONE_TXN | CLOSED {
            // SAFETY: created by Box::into_raw in mdb_env_create; closed, and no transaction
            // handle is left to refer to it (docs/safety.md §7).
            drop(unsafe { Box::from_raw(env) });
        }
    }

    /// Frees the spare transaction handle of a closed environment, if there is one (and then
    /// the environment, if that handle was its last).
    ///
    /// # Safety
    /// `env` is a live, closed handle; the caller does not use it afterwards.
    pub(crate) unsafe fn reclaim_spare(env: *mut MDB_env) {
        // SAFETY: docs/safety.md §7: live: the spare handle, while there is one, keeps it so.
        let t = unsafe { &*env }
            .spare
            .swap(std::ptr::null_mut(), Ordering::SeqCst);
        if !t.is_null() {
            // SAFETY: docs/safety.md §7: the slot owned it; nothing else refers to it.
            unsafe { crate::txn::free_spare(t) };
            // SAFETY: docs/safety.md §7: as documented; the handle just freed was counted.
            unsafe { MDB_env::txn_freed(env) };
        }
    }
}

/// `MDB_env::state`: the close bit and one transaction handle.
pub(crate) const CLOSED: usize = 1;
pub(crate) const ONE_TXN: usize = 2;

impl Drop for MDB_env {
    fn drop(&mut self) {
        // SAFETY: docs/safety.md §7: the slot owns its handle; no transaction is left (maybe_free).
        unsafe { crate::txn::free_spare(*self.spare.get_mut()) };
        if self.fd >= 0 {
            // SAFETY: our own descriptor, opened in mdb_env_open (docs/safety.md §7).
            unsafe { libc::close(self.fd) };
        }
    }
}

/// Borrows a handle or returns EINVAL from the calling function.
macro_rules! handle {
    ($p:expr) => {{
        let p = $p;
        if p.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: a non-NULL handle from this library (docs/safety.md §7).
        unsafe { &mut *p }
    }};
}
pub(crate) use handle;

/// Unwraps a `Result<_, c_int>` or returns the code.
macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(rc) => return rc,
        }
    };
}
pub(crate) use tri;

/// Unwraps a `cairn::Result` or returns its LMDB code.
macro_rules! trc {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return $crate::code(&e),
        }
    };
}
pub(crate) use trc;

/// Allocates an environment handle.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_create(env: *mut *mut MDB_env) -> c_int {
    guard(|| {
        if env.is_null() {
            return libc::EINVAL;
        }
        let e = Box::new(MDB_env {
            env: None,
            mapsize: None,
            sync_bytes: None,
            group_limits: (0, 0),
            maxreaders: 126,
            maxdbs: 0,
            flags: 0,
            path: None,
            fd: -1,
            userctx: std::ptr::null_mut(),
            dbis: Mutex::new(Vec::new()),
            names: Mutex::new(Vec::new()),
            resets: Mutex::new(Vec::new()),
            state: AtomicUsize::new(0),
            dbi_gen: AtomicU64::new(0),
            spare: AtomicPtr::new(std::ptr::null_mut()),
        });
        // SAFETY: checked non-NULL out-parameter (docs/safety.md §7).
        unsafe { *env = Box::into_raw(e) };
        0
    })
}

fn durability(flags: c_uint) -> (Durability, Option<u64>) {
    if flags & (crate::MDB_NOSYNC | crate::MDB_MAPASYNC) != 0 {
        (Durability::Lazy, None)
    } else if flags & crate::MDB_NOMETASYNC != 0 {
        // A flush every 64 MiB written (EnvOptions::sync_every_bytes).
        (Durability::Lazy, Some(64 << 20))
    } else if std::env::var("CAIRN_LOGGED").is_ok_and(|v| v == "1") {
        // Cairn's own switch, for programs that cannot pass it (docs/capi.md): durable
        // commits through the commit log (Durability::Logged).
        (Durability::Logged, None)
    } else {
        (Durability::Durable, None)
    }
}

/// Opens the environment at `path` (a directory, or with MDB_NOSUBDIR the data file).
#[no_mangle]
pub unsafe extern "C" fn mdb_env_open(
    env: *mut MDB_env,
    path: *const c_char,
    flags: c_uint,
    mode: libc::mode_t,
) -> c_int {
    guard(|| {
        let e = handle!(env);
        if path.is_null() || e.env.is_some() {
            return libc::EINVAL;
        }
        // SAFETY: a NUL-terminated path (lmdb.h contract; docs/safety.md §7).
        let cpath = unsafe { CStr::from_ptr(path) };
        let p = os_path(cpath);
        let nosubdir = flags & MDB_NOSUBDIR != 0;
        if !nosubdir && !p.is_dir() {
            // LMDB does not create the directory; a file there is ENOTDIR, as LMDB finds
            // opening the lock file inside it.
            return if p.exists() {
                libc::ENOTDIR
            } else {
                libc::ENOENT
            };
        }
        let (dur, mut sync_bytes) = durability(flags);
        if let (Durability::Lazy, Some(b)) = (dur, e.sync_bytes) {
            sync_bytes = b;
        }
        let mut o = Env::options()
            // LMDB limits the named handles open at once, which mdb_dbi_open counts itself
            // (`names`); the engine's limit, on the databases a file holds and on the handles
            // an Env ever opened, would refuse what LMDB allows.
            .max_dbs(u32::MAX)
            .max_readers(e.maxreaders)
            .read_only(flags & MDB_RDONLY != 0)
            .no_subdir(nosubdir)
            .durability(dur)
            .sync_every_bytes(sync_bytes)
            // LMDB's flags name no flush by time: only the documented 64 MiB (NOMETASYNC).
            .sync_every(None)
            // LMDB takes a limit below the space in use as that space; a new environment's
            // is its first page.
            .max_size(e.mapsize.map(|m| m.max(MIN_MAPSIZE)))
            // LMDB's file names, data.mdb and lock.mdb (programs open them by name), and no
            // lock file at all with MDB_NOLOCK.
            .file_names(FileNames::Lmdb)
            .no_lock(flags & MDB_NOLOCK != 0);
        let (max_writes, max_time_us) = e.group_limits;
        if max_writes > 0 {
            o = o.group_max_writes(max_writes);
        }
        if max_time_us > 0 {
            o = o.group_max_time(std::time::Duration::from_micros(u64::from(max_time_us)));
        }
        let (data, lock) = o.files(&p);
        let existed = data.exists();
        // The reservation is address space only; where that is limited (ulimit -v, valgrind)
        // a smaller one is tried, down to the size limit.
        let floor = e.mapsize.unwrap_or(0).max(1 << 30);
        let mut reserve = RESERVE.max(floor);
        let opened = loop {
            match o.clone().map_reserve(reserve).open(&p) {
                Err(cairn::Error::Io { source, .. })
                    if reserve > floor
                        && matches!(source.raw_os_error(), Some(libc::ENOMEM | libc::EINVAL)) =>
                {
                    reserve = (reserve / 8).max(floor);
                }
                r => break trc!(r),
            }
        };
        // As LMDB at open: a map size below the space the file already uses is that space
        // (only growth by another process afterwards is MDB_MAP_RESIZED).
        adopt_used_size(&opened);
        if !existed && flags & MDB_RDONLY == 0 {
            set_mode(&data, mode);
            if flags & MDB_NOLOCK == 0 {
                set_mode(&lock, mode);
            }
        }
        let cdata = match CString::new(data.as_os_str().as_encoded_bytes()) {
            Ok(c) => c,
            Err(_) => return libc::EINVAL,
        };
        // Writable unless read-only: callers such as postfix take fcntl write locks on it.
        let access = if flags & MDB_RDONLY != 0 {
            libc::O_RDONLY
        } else {
            libc::O_RDWR
        };
        // SAFETY: a valid C string; the descriptor is ours until Drop (docs/safety.md §7).
        e.fd = unsafe { libc::open(cdata.as_ptr(), access | libc::O_CLOEXEC) };
        e.path = Some(cpath.to_owned());
        e.flags = flags;
        e.env = Some(opened);
        let en = e.env.as_ref().expect("just set");
        let main = en.main_db();
        e.set_dbi(Dbi {
            db: main,
            flags: en.db_flags(main).unwrap_or_default(),
            cmp: None,
            dcmp: None,
            owner: 0,
        });
        0
    })
}

fn os_path(c: &CStr) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(std::ffi::OsStr::from_bytes(c.to_bytes()))
}

fn set_mode(p: &std::path::Path, mode: libc::mode_t) {
    use std::os::unix::fs::PermissionsExt;
    if p.exists() {
        let _ = std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode & 0o7777));
    }
}

/// Closes the environment. With transactions still alive (a caller's bug in LMDB) the memory
/// is kept until the last of them ends.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_close(env: *mut MDB_env) {
    guard_void(|| {
        if env.is_null() {
            return;
        }
        // SAFETY: a live handle (docs/safety.md §7).
        let prev = unsafe { &*env }.state.fetch_or(CLOSED, Ordering::SeqCst);
        if prev & CLOSED != 0 {
            return; // closed twice: the first close decided
        }
        if prev == 0 {
            // SAFETY: docs/safety.md §7: created by Box::into_raw in mdb_env_create; no
            // transaction handle, not
            // even a spare one, refers to it.
            drop(unsafe { Box::from_raw(env) });
            return;
        }
        // Transactions (or the spare handle) are left: the last of them frees the handle.
        // SAFETY: docs/safety.md §7: live (counted handles are left) and closed.
        unsafe { MDB_env::reclaim_spare(env) };
    })
}

pub(crate) fn to_stat(s: cairn::Stat) -> MDB_stat {
    MDB_stat {
        ms_psize: s.page_size,
        ms_depth: s.depth,
        ms_branch_pages: s.branch_pages as usize,
        ms_leaf_pages: s.leaf_pages as usize,
        ms_overflow_pages: s.overflow_pages as usize,
        ms_entries: s.entries as usize,
    }
}

/// Statistics of the main database.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_stat(env: *mut MDB_env, stat: *mut MDB_stat) -> c_int {
    guard(|| {
        let e = handle!(env);
        if stat.is_null() {
            return libc::EINVAL;
        }
        let en = tri!(e.env());
        let r = trc!(en.read_txn());
        let s = trc!(r.stat(en.main_db()));
        // SAFETY: checked non-NULL out-parameter (docs/safety.md §7).
        unsafe { *stat = to_stat(s) };
        0
    })
}

/// Environment figures.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_info(env: *mut MDB_env, info: *mut MDB_envinfo) -> c_int {
    guard(|| {
        let e = handle!(env);
        if info.is_null() {
            return libc::EINVAL;
        }
        let i = trc!(tri!(e.env()).info());
        let out = MDB_envinfo {
            me_mapaddr: std::ptr::null_mut(),
            me_mapsize: i
                .max_size
                .or(e.mapsize)
                .unwrap_or(LMDB_DEFAULT_MAPSIZE.max(i.file_size)) as usize,
            me_last_pgno: i.last_pgno as usize,
            me_last_txnid: i.last_txnid as libc::size_t,
            me_maxreaders: i.max_readers as c_uint,
            me_numreaders: i.readers as c_uint,
        };
        // SAFETY: checked non-NULL out-parameter (docs/safety.md §7).
        unsafe { *info = out };
        0
    })
}

/// Flushes commits made without a flush. In durable mode every commit is flushed already.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_sync(env: *mut MDB_env, force: c_int) -> c_int {
    guard(|| {
        let e = handle!(env);
        let en = tri!(e.env());
        if en.is_read_only() {
            return libc::EACCES;
        }
        let _ = force;
        if en.durability() == Durability::Durable {
            return 0;
        }
        trc!(en.sync());
        0
    })
}

const RUNTIME_FLAGS: c_uint =
    crate::MDB_NOSYNC | crate::MDB_NOMETASYNC | crate::MDB_MAPASYNC | crate::MDB_NOMEMINIT;

/// Sets or clears flags. Before open any environment flag; after open only MDB_NOMEMINIT
/// and flags that keep the durability mode (Cairn fixes it at open): others give EINVAL.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_set_flags(
    env: *mut MDB_env,
    flags: c_uint,
    onoff: c_int,
) -> c_int {
    guard(|| {
        let e = handle!(env);
        if flags & !RUNTIME_FLAGS != 0 && e.env.is_some() {
            return libc::EINVAL;
        }
        let new = if onoff != 0 {
            e.flags | flags
        } else {
            e.flags & !flags
        };
        if e.env.is_some() && durability(new) != durability(e.flags) {
            return libc::EINVAL;
        }
        e.flags = new;
        0
    })
}

/// The environment flags.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_get_flags(env: *mut MDB_env, flags: *mut c_uint) -> c_int {
    guard(|| {
        let e = handle!(env);
        if flags.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: checked non-NULL out-parameter (docs/safety.md §7).
        unsafe { *flags = e.flags };
        0
    })
}

/// The path given to mdb_env_open (owned by the handle).
#[no_mangle]
pub unsafe extern "C" fn mdb_env_get_path(env: *mut MDB_env, path: *mut *const c_char) -> c_int {
    guard(|| {
        let e = handle!(env);
        if path.is_null() {
            return libc::EINVAL;
        }
        let p = e.path.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
        // SAFETY: checked non-NULL out-parameter (docs/safety.md §7).
        unsafe { *path = p };
        0
    })
}

/// A descriptor of the data file (for fstat, or locks such as postfix's).
#[no_mangle]
pub unsafe extern "C" fn mdb_env_get_fd(env: *mut MDB_env, fd: *mut c_int) -> c_int {
    guard(|| {
        let e = handle!(env);
        if fd.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: checked non-NULL out-parameter (docs/safety.md §7).
        unsafe { *fd = e.fd };
        0
    })
}

/// Raises the handle's size limit, if it has one, to the space the current snapshot uses.
fn adopt_used_size(en: &Env) {
    if let (Some(limit), Ok(r)) = (en.max_size(), en.read_txn()) {
        let used = r.used_bytes();
        if used > limit {
            let _ = en.set_max_size(Some(used));
        }
    }
}

/// Sets the size limit (an upper bound: the file grows as needed up to it). 0 on an open
/// environment adopts the space the file uses now, if larger than the limit.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_set_mapsize(env: *mut MDB_env, size: libc::size_t) -> c_int {
    guard(|| {
        let e = handle!(env);
        match &e.env {
            None => {
                e.mapsize = (size > 0).then_some(size as u64);
                0
            }
            // LMDB: 0 on an open environment adopts the size the file uses now (what a caller
            // does after MDB_MAP_RESIZED).
            Some(en) if size == 0 => {
                adopt_used_size(en);
                0
            }
            Some(en) => {
                let cur = en.info().map(|i| i.file_size).unwrap_or(0);
                trc!(en.set_max_size(Some((size as u64).max(cur))));
                e.mapsize = Some(size as u64);
                0
            }
        }
    })
}

/// Sets the reader table size (before open).
#[no_mangle]
pub unsafe extern "C" fn mdb_env_set_maxreaders(env: *mut MDB_env, readers: c_uint) -> c_int {
    guard(|| {
        let e = handle!(env);
        if readers < 1 || e.env.is_some() {
            return libc::EINVAL;
        }
        e.maxreaders = readers;
        0
    })
}

/// The reader table size.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_get_maxreaders(env: *mut MDB_env, readers: *mut c_uint) -> c_int {
    guard(|| {
        let e = handle!(env);
        if readers.is_null() {
            return libc::EINVAL;
        }
        let n = match &e.env {
            Some(en) => trc!(en.info()).max_readers as c_uint,
            None => e.maxreaders,
        };
        // SAFETY: checked non-NULL out-parameter (docs/safety.md §7).
        unsafe { *readers = n };
        0
    })
}

/// Sets the number of named databases (before open; 0, the default, allows none).
#[no_mangle]
pub unsafe extern "C" fn mdb_env_set_maxdbs(env: *mut MDB_env, dbs: MDB_dbi) -> c_int {
    guard(|| {
        let e = handle!(env);
        if e.env.is_some() {
            return libc::EINVAL;
        }
        e.maxdbs = dbs;
        0
    })
}

/// The largest key (and DUPSORT value) accepted.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_get_maxkeysize(env: *mut MDB_env) -> c_int {
    guard(|| {
        if env.is_null() {
            return 0;
        }
        // SAFETY: a live handle (docs/safety.md §7).
        let e = unsafe { &*env };
        match &e.env {
            Some(en) => en.max_key_size() as c_int,
            None => cairn::format::max_key_size(4096) as c_int,
        }
    })
}

/// Stores an application pointer.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_set_userctx(env: *mut MDB_env, ctx: *mut c_void) -> c_int {
    guard(|| {
        let e = handle!(env);
        e.userctx = ctx;
        0
    })
}

/// The application pointer.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_get_userctx(env: *mut MDB_env) -> *mut c_void {
    if env.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: a live handle (docs/safety.md §7).
    unsafe { &*env }.userctx
}

/// LMDB's assert callback type.
pub type MDB_assert_func = unsafe extern "C" fn(*mut MDB_env, *const c_char);

/// Accepted for compatibility: Cairn reports failures as codes, never through asserts.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_set_assert(
    env: *mut MDB_env,
    func: Option<MDB_assert_func>,
) -> c_int {
    let _ = func;
    guard(|| {
        let _ = handle!(env);
        0
    })
}

/// Copies the environment into the directory `path` (or the file, with MDB_NOSUBDIR set at
/// open), as LMDB's mdb_env_copy.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_copy(env: *mut MDB_env, path: *const c_char) -> c_int {
    // SAFETY: docs/safety.md §7: forwarded contract.
    unsafe { mdb_env_copy2(env, path, 0) }
}

/// mdb_env_copy with MDB_CP_COMPACT: a compacted copy.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_copy2(
    env: *mut MDB_env,
    path: *const c_char,
    flags: c_uint,
) -> c_int {
    guard(|| {
        let e = handle!(env);
        if path.is_null() {
            return libc::EINVAL;
        }
        // SAFETY: a NUL-terminated path (docs/safety.md §7).
        let c = unsafe { CStr::from_ptr(path) };
        let p = os_path(c);
        let dest = if e.flags & MDB_NOSUBDIR != 0 {
            p
        } else {
            if !p.is_dir() {
                return libc::ENOENT;
            }
            // LMDB's name: a copy is opened as LMDB would open it.
            Env::options().file_names(FileNames::Lmdb).files(&p).0
        };
        if dest.symlink_metadata().is_ok() {
            // As in LMDB, which creates the copy's file exclusively.
            return libc::EEXIST;
        }
        let compact = flags & crate::MDB_CP_COMPACT != 0;
        trc!(tri!(e.env()).copy_to(&dest, compact));
        0
    })
}

/// Copies the environment to an open descriptor.
#[no_mangle]
pub unsafe extern "C" fn mdb_env_copyfd(env: *mut MDB_env, fd: c_int) -> c_int {
    // SAFETY: docs/safety.md §7: forwarded contract.
    unsafe { mdb_env_copyfd2(env, fd, 0) }
}

/// mdb_env_copyfd with MDB_CP_COMPACT. The copy is made in a temporary file beside the data
/// file, then streamed to `fd` (Cairn's copier needs a seekable new file).
#[no_mangle]
pub unsafe extern "C" fn mdb_env_copyfd2(env: *mut MDB_env, fd: c_int, flags: c_uint) -> c_int {
    guard(|| {
        let e = handle!(env);
        if fd < 0 {
            return libc::EINVAL;
        }
        let en = tri!(e.env());
        let dir = match en.path() {
            Some(p) if e.flags & MDB_NOSUBDIR != 0 => p
                .parent()
                .map(|d| d.to_path_buf())
                .unwrap_or_else(|| PathBuf::from(".")),
            Some(p) => p.to_path_buf(),
            None => std::env::temp_dir(),
        };
        let tmp = dir.join(format!(".cairn-copyfd-{}-{:p}", std::process::id(), e));
        let _ = std::fs::remove_file(&tmp);
        let r = en.copy_to(&tmp, flags & crate::MDB_CP_COMPACT != 0);
        let rc = match r {
            Ok(()) => stream_to_fd(&tmp, fd),
            Err(err) => code(&err),
        };
        let _ = std::fs::remove_file(&tmp);
        rc
    })
}

fn stream_to_fd(src: &std::path::Path, fd: c_int) -> c_int {
    use std::io::{Read, Write};
    use std::os::fd::FromRawFd;
    let mut f = match std::fs::File::open(src) {
        Ok(f) => f,
        Err(e) => return e.raw_os_error().unwrap_or(libc::EIO),
    };
    // SAFETY: the caller's descriptor, borrowed: ManuallyDrop keeps it open (docs/safety.md §7).
    let mut out = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match f.read(&mut buf) {
            Ok(0) => return 0,
            Ok(n) => n,
            Err(e) => return e.raw_os_error().unwrap_or(libc::EIO),
        };
        if let Err(e) = out.write_all(&buf[..n]) {
            return e.raw_os_error().unwrap_or(libc::EIO);
        }
    }
}

/// LMDB's reader-list callback.
pub type MDB_msg_func = unsafe extern "C" fn(*const c_char, *mut c_void) -> c_int;

/// Lists the reader table through `func`, one line per reader ("pid thread txnid").
#[no_mangle]
pub unsafe extern "C" fn mdb_reader_list(
    env: *mut MDB_env,
    func: Option<MDB_msg_func>,
    ctx: *mut c_void,
) -> c_int {
    guard(|| {
        let e = handle!(env);
        let Some(func) = func else {
            return libc::EINVAL;
        };
        let en = tri!(e.env());
        let mut lines = Vec::new();
        for r in en.readers() {
            // The engine numbers as LMDB does (a new environment's snapshot is 0).
            let Some(id) = r.txnid else {
                continue;
            };
            if lines.is_empty() {
                lines.push("    pid     thread     txnid\n".to_string());
            }
            lines.push(format!("{:10} {:x} {}\n", r.pid, r.thread, id));
        }
        let pid = std::process::id();
        for tid in e.resets.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            if lines.is_empty() {
                lines.push("    pid     thread     txnid\n".to_string());
            }
            lines.push(format!("{pid:10} {tid:x} -\n"));
        }
        if lines.is_empty() {
            lines.push("(no active readers)\n".to_string());
        }
        for l in lines {
            let c = CString::new(l).expect("no NUL in formatted numbers");
            // SAFETY: the caller's callback, given a NUL-terminated line (docs/safety.md §7).
            let rc = unsafe { func(c.as_ptr(), ctx) };
            if rc < 0 {
                return rc;
            }
        }
        0
    })
}

/// Clears reader slots of dead processes; `dead` receives how many.
#[no_mangle]
pub unsafe extern "C" fn mdb_reader_check(env: *mut MDB_env, dead: *mut c_int) -> c_int {
    guard(|| {
        let e = handle!(env);
        let n = trc!(tri!(e.env()).reader_check());
        if !dead.is_null() {
            // SAFETY: checked non-NULL out-parameter (docs/safety.md §7).
            unsafe { *dead = n as c_int };
        }
        0
    })
}

/// The engine `Env` of a handle whose lifetime the caller guarantees (see the crate docs).
pub(crate) fn env_static(e: &MDB_env) -> Result<&'static Env, c_int> {
    let en = e.env()?;
    // SAFETY: the Env lives in the MDB_env box, freed only once no transaction handle is left
    // (`state`); docs/safety.md §7.
    Ok(unsafe { &*(en as *const Env) })
}
