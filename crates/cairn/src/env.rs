//! The environment: options, opening (creation and crash recovery), and the state that lives
//! as long as the open file: storage, reader table, writer state, database registry.
//!
//! Recovery (docs/design.md, "Opening after a crash"): read the three meta slots, try valid
//! ones newest first, and take the first whose written pages all verify (number, writer,
//! checksum). Work is bounded by what the last commits wrote, never by the file's size.

use crate::alloc::{self, FreeState};
use crate::btree::cursor::Position;
use crate::error::{Error, Result};
use crate::format::{self, DbRecord, KeyCmp, Meta, MetaSlot, WrittenRun, META_SLOTS, SECTOR};
use crate::lock::LockFile;
use crate::os::Map;
use crate::shared::{ReaderInfo, Shared};
use crate::storage::{FileStorage, Storage};
use crate::txn::{RoTxn, RwTxn, Snapshot};
use crate::DbFlags;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};

/// When commits reach the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Durability {
    /// Every commit is flushed (one fdatasync) before `commit` returns.
    #[default]
    Durable,
    /// Commits are not flushed; a power loss may lose the latest commits but never corrupts
    /// the file: pages of the last flushed commit are kept until the next flush.
    Lazy,
}

/// Options for opening an environment (see [`Env::options`]).
#[derive(Clone, Debug)]
pub struct EnvOptions {
    pub(crate) page_size: usize,
    pub(crate) max_dbs: u32,
    pub(crate) max_readers: u32,
    pub(crate) max_size: Option<u64>,
    pub(crate) initial_size: u64,
    pub(crate) durability: Durability,
    pub(crate) read_only: bool,
    pub(crate) no_subdir: Option<bool>,
    pub(crate) sync_bytes: Option<u64>,
    pub(crate) sync_every: Option<std::time::Duration>,
    pub(crate) reserve: u64,
    pub(crate) reserve_set: bool,
    pub(crate) map_writes: bool,
}

/// Default of [`EnvOptions::sync_every`]: in lazy mode, the first commit a second or more after
/// the last flush flushes, so a power loss loses about the last second of commits at most.
/// Time, not bytes written: a flush writes every page changed since the previous one and pins
/// the flushed snapshot's pages until the next, so flushing after a fixed amount of writing
/// taxed heavy writers most (64 MiB: 27% slower random puts, 1,000 a transaction, than this
/// default; docs/bench/causes.md) while bounding nothing a user reasons about.
pub const DEFAULT_SYNC_PERIOD: std::time::Duration = std::time::Duration::from_secs(1);

impl Default for EnvOptions {
    fn default() -> Self {
        EnvOptions {
            page_size: 4096,
            max_dbs: 128,
            max_readers: 126,
            max_size: None,
            initial_size: 0,
            durability: Durability::Durable,
            read_only: false,
            no_subdir: None,
            sync_bytes: None,
            sync_every: Some(DEFAULT_SYNC_PERIOD),
            reserve: 1 << 40,
            reserve_set: false,
            map_writes: true,
        }
    }
}

impl EnvOptions {
    /// Page size of a new file: a power of two from 4 KiB to 64 KiB (default 4 KiB).
    pub fn page_size(mut self, n: usize) -> Self {
        self.page_size = n;
        self
    }
    /// Largest number of named databases (default 128).
    pub fn max_dbs(mut self, n: u32) -> Self {
        self.max_dbs = n;
        self
    }
    /// Reader table size (default 126).
    pub fn max_readers(mut self, n: u32) -> Self {
        self.max_readers = n;
        self
    }
    /// Upper limit of the file size; past it writes fail with [`Error::MapFull`]. No limit by
    /// default: the file grows as needed.
    pub fn max_size(mut self, bytes: Option<u64>) -> Self {
        self.max_size = bytes;
        self
    }
    /// Size the file is grown to at creation.
    pub fn initial_size(mut self, bytes: u64) -> Self {
        self.initial_size = bytes;
        self
    }
    /// Durability mode (default [`Durability::Durable`]).
    pub fn durability(mut self, d: Durability) -> Self {
        self.durability = d;
        self
    }
    /// In lazy mode, make a commit steady (flushed) once this many bytes were written since
    /// the last flush (default `None`: no limit by bytes). With `sync_every(None)` too, only
    /// [`Env::sync`] and closing the environment flush.
    pub fn sync_every_bytes(mut self, bytes: Option<u64>) -> Self {
        self.sync_bytes = bytes;
        self
    }
    /// In lazy mode, make a commit steady once this much time has passed since the last flush
    /// (checked at commit; no background thread). Default [`DEFAULT_SYNC_PERIOD`] (1 s);
    /// `None`: no limit by time.
    pub fn sync_every(mut self, period: Option<std::time::Duration>) -> Self {
        self.sync_every = period;
        self
    }
    /// In lazy mode, whether write transactions write their pages in place through a
    /// writable shared map of the data file (default true), as LMDB's MDB_WRITEMAP does,
    /// instead of copying them into the file with pwrite at commit. A commit then costs no
    /// write call per run of pages: a random load that rewrites most of its pages each commit
    /// ran ~20% faster (docs/bench/causes.md). Crash safety is unchanged (pages of the
    /// snapshots anyone may need are never written either way). It applies only where the
    /// file system allocates blocks ahead (fallocate), so that a store can never meet a full
    /// disk; elsewhere, in durable mode and read-only, pages go through pwrite.
    pub fn map_writes(mut self, yes: bool) -> Self {
        self.map_writes = yes;
        self
    }

    /// Whether write transactions try to write pages in place (see [`Self::map_writes`]).
    pub(crate) fn wants_map_writes(&self) -> bool {
        self.map_writes && self.durability == Durability::Lazy && !self.read_only
    }

    /// Opens read-only: no write transaction can begin.
    pub fn read_only(mut self, yes: bool) -> Self {
        self.read_only = yes;
        self
    }
    /// Whether the path names the data file itself (true) or a directory holding it (false).
    /// By default an existing regular file is opened as the data file, anything else as a
    /// directory.
    pub fn no_subdir(mut self, yes: bool) -> Self {
        self.no_subdir = Some(yes);
        self
    }
    /// Address space reserved for the map (default 1 TiB); the file can never grow past it.
    /// Without this option a `max_size` also bounds the reservation; with it, the size limit
    /// can later be raised up to the reservation ([`Env::set_max_size`]).
    pub fn map_reserve(mut self, bytes: u64) -> Self {
        self.reserve = bytes;
        self.reserve_set = true;
        self
    }

    /// Opens (or creates) the environment at `path`.
    pub fn open(self, path: impl AsRef<Path>) -> Result<Env> {
        let path = path.as_ref();
        let subdir = match self.no_subdir {
            Some(n) => !n,
            None => !path.is_file(),
        };
        let (data, lock) = if subdir {
            if !self.read_only {
                std::fs::create_dir_all(path)
                    .map_err(|e| Error::io(format!("creating directory {}", path.display()), e))?;
            }
            (path.join("data.cairn"), path.join("lock.cairn"))
        } else {
            let mut l = path.as_os_str().to_owned();
            l.push("-lock");
            (path.to_path_buf(), PathBuf::from(l))
        };
        check_options(&self)?;
        let file = OpenOptions::new()
            .read(true)
            .write(!self.read_only)
            .create(!self.read_only)
            .truncate(false)
            .open(&data)
            .map_err(|e| Error::io(format!("opening {}", data.display()), e))?;
        let setup = match LockFile::open(&lock, self.max_readers as usize) {
            Ok(o) => LockSetup::File(o),
            Err(Error::Io { source, .. })
                if self.read_only
                    && matches!(
                        source.raw_os_error(),
                        Some(libc::EACCES) | Some(libc::EROFS) | Some(libc::EPERM)
                    ) =>
            {
                LockSetup::ReadOnlyFallback(LockFile::open_read_only(&lock)?)
            }
            Err(e) => return Err(e),
        };
        let reserve = match self.max_size {
            Some(m) if self.reserve_set => self.reserve.max(m),
            Some(m) => m.min(self.reserve).max(1 << 20),
            None => self.reserve,
        };
        let in_place = self.wants_map_writes();
        let storage = FileStorage::new(file, data.display().to_string(), reserve, in_place)?;
        if in_place {
            storage.enable_map_writes();
        }
        let mut env = Env::build(Arc::new(storage), self, setup).map_err(|e| match e {
            Error::NotCairn { .. } => Error::NotCairn {
                path: data.display().to_string(),
            },
            other => other,
        })?;
        Arc::get_mut(&mut env.inner).expect("fresh").path = Some(path.to_path_buf());
        Ok(env)
    }
}

/// How the reader table and locks are set up.
enum LockSetup {
    /// Private memory: one process (simulated storage).
    Private,
    /// The shared lock file.
    File(crate::lock::Opened),
    /// A read-only handle that cannot write the lock file: private table, writers excluded.
    ReadOnlyFallback(LockFile),
}

fn check_options(opts: &EnvOptions) -> Result<()> {
    if !format::valid_page_size(opts.page_size) {
        return Err(Error::Invalid(format!(
            "page size {} (a power of two from 4096 to 65536)",
            opts.page_size
        )));
    }
    if opts.max_readers == 0 || opts.max_readers > 1 << 20 {
        return Err(Error::Invalid(format!(
            "max_readers {} (from 1 to 1048576)",
            opts.max_readers
        )));
    }
    Ok(())
}

/// Per-database settings registered in the environment.
#[derive(Clone, Debug)]
pub(crate) struct DbInfo {
    pub name: Option<String>,
    pub flags: DbFlags,
    pub cmp: KeyCmp,
    /// A user-supplied order of a DUP_SORT database's values (None: the flags' order).
    pub dup_cmp: Option<KeyCmp>,
}

/// What the writer keeps between transactions.
pub(crate) struct WriterState {
    pub free: FreeState,
    pub meta: Meta,
    pub next_txnid: u64,
    pub slots: [u64; META_SLOTS],
    /// Bytes written since the last steady commit (lazy mode's automatic flush).
    pub unsynced_bytes: u64,
    /// When the last steady commit was made.
    pub last_sync: std::time::Instant,
    pub pool: Vec<Box<[u8]>>,
    /// The dirty-page map of the last transaction, emptied, for the next one (so that a small
    /// transaction's map does not grow from nothing each time).
    pub dirty_spare: crate::txn::PageMap<crate::txn::PageBuf>,
    /// False until the state is read from the data file (a handle that joined others loads
    /// it at its first write transaction).
    pub loaded: bool,
}

pub(crate) struct EnvInner {
    pub storage: std::sync::Arc<dyn Storage>,
    pub page_size: usize,
    pub opts: EnvOptions,
    pub shared: Shared,
    pub writer: Mutex<Option<WriterState>>,
    pub writer_cv: Condvar,
    /// Threads waiting on `writer_cv`, counted under the `writer` mutex: handing the writer
    /// state back notifies only when someone waits (a notify is a futex call every time).
    pub writer_waiters: std::sync::atomic::AtomicUsize,
    pub dbs: RwLock<Vec<DbInfo>>,
    /// Bumped at every change to `dbs` (under its write lock), so that a transaction can
    /// cache a database's order and flags and check them with one load (`db::DbView`).
    pub db_gen: AtomicU64,
    pub id: u64,
    pub poisoned: AtomicBool,
    /// A read-only handle's hold on the writer byte when it cannot register as a reader.
    pub _ro_lock: Option<LockFile>,
    pub path: Option<PathBuf>,
    /// `os::fork_generation` when the handle was opened.
    pub fork_gen: u64,
    /// The size limit in bytes (0: none); starts as `opts.max_size`, changed by
    /// [`Env::set_max_size`].
    pub max_size: AtomicU64,
    /// Whether a user value order was ever set ([`Env::set_dup_order`]): until then opening a
    /// cursor on a sorted-duplicates database need not take the `dbs` lock to look for one.
    pub custom_dup_orders: AtomicBool,
}

/// An open database environment: one file, its named databases, its transactions. Cheap to
/// clone; every clone is the same environment.
#[derive(Clone)]
pub struct Env {
    pub(crate) inner: Arc<EnvInner>,
}

/// Environment figures (see [`Env::info`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvInfo {
    /// Page size.
    pub page_size: usize,
    /// Bytes of the data file.
    pub file_size: u64,
    /// Upper size limit, if any.
    pub max_size: Option<u64>,
    /// Last page in use.
    pub last_pgno: u64,
    /// Last committed transaction.
    pub last_txnid: u64,
    /// Readers holding a snapshot now.
    pub readers: usize,
    /// Reader table size.
    pub max_readers: usize,
    /// Pages reusable now.
    pub free_pages: u64,
    /// Pages freed but still visible to a snapshot.
    pub pending_pages: u64,
}

static ENV_IDS: AtomicU64 = AtomicU64::new(1);

impl Env {
    /// Options for opening an environment.
    pub fn options() -> EnvOptions {
        EnvOptions::default()
    }

    /// Opens (or creates) an environment at `path` with default options.
    pub fn open(path: impl AsRef<Path>) -> Result<Env> {
        EnvOptions::default().open(path)
    }

    /// Opens an environment over a given storage (the simulator, in crash tests). Its reader
    /// table is private to this handle: no other process can share such an environment.
    pub fn with_storage(storage: Arc<dyn Storage>, opts: EnvOptions) -> Result<Env> {
        check_options(&opts)?;
        Env::build(storage, opts, LockSetup::Private)
    }

    fn build(storage: Arc<dyn Storage>, opts: EnvOptions, setup: LockSetup) -> Result<Env> {
        let tag = ENV_IDS.fetch_add(1, Ordering::Relaxed);
        let private = |n: usize| Map::anonymous(format::lock_file_len(n).div_ceil(4096) * 4096);
        let (shared, first, ro_lock) = match setup {
            LockSetup::Private => {
                let n = opts.max_readers as usize;
                (
                    Shared::new(private(n)?, LockFile::none(), n, tag as u32),
                    true,
                    None,
                )
            }
            LockSetup::ReadOnlyFallback(l) => {
                let n = opts.max_readers as usize;
                (
                    Shared::new(private(n)?, LockFile::none(), n, tag as u32),
                    true,
                    Some(l),
                )
            }
            LockSetup::File(o) => (
                Shared::new(o.map, o.lock, o.max_readers, tag as u32),
                o.first,
                None,
            ),
        };
        let ws = if first {
            // No other handle is alive: the data file is the only truth (after a crash or a
            // reboot the lock file's contents mean nothing).
            failpoint!("open.before_recover");
            let (meta, slots) = if storage.is_empty() || interrupted_creation(&*storage)? {
                if opts.read_only {
                    return Err(Error::Invalid("cannot create a database read-only".into()));
                }
                create(&*storage, &opts)?
            } else {
                recover(&*storage)?
            };
            failpoint!("open.after_recover");
            shared.init(&meta);
            failpoint!("open.after_init");
            shared.lock.joined()?;
            let mut ws = WriterState::unloaded(meta);
            load_writer(&*storage, &mut ws, slots)?;
            ws
        } else {
            if storage.is_empty() {
                return Err(Error::LockFile(
                    "the data file is empty while other handles have it open".into(),
                ));
            }
            WriterState::unloaded(current_meta(&shared, &*storage)?)
        };
        let meta = ws.meta.clone();
        let main_flags = DbFlags::from_bits_retain(u32::from(meta.main.flags));
        storage.advise_random();
        let main = DbInfo {
            name: None,
            flags: DbFlags::empty(),
            cmp: KeyCmp::Bytes,
            dup_cmp: None,
        };
        let opts_max = opts.max_size;
        let env = Env {
            inner: Arc::new(EnvInner {
                storage,
                page_size: meta.page_size as usize,
                opts,
                shared,
                writer: Mutex::new(Some(ws)),
                writer_cv: Condvar::new(),
                writer_waiters: std::sync::atomic::AtomicUsize::new(0),
                dbs: RwLock::new(vec![main]),
                db_gen: AtomicU64::new(0),
                id: tag,
                poisoned: AtomicBool::new(false),
                _ro_lock: ro_lock,
                path: None,
                fork_gen: crate::os::fork_generation(),
                max_size: AtomicU64::new(opts_max.unwrap_or(0)),
                custom_dup_orders: AtomicBool::new(false),
            }),
        };
        // The main database's flags are stored in its record.
        env.inner.set_db_flags(0, main_flags);
        Ok(env)
    }

    /// Begins a read transaction: a consistent snapshot, never blocked, never blocking.
    pub fn read_txn(&self) -> Result<RoTxn<'_>> {
        self.inner.check_usable()?;
        RoTxn::begin(self)
    }

    /// Begins a write transaction, waiting while another one is open.
    pub fn write_txn(&self) -> Result<RwTxn<'_>> {
        self.inner.check_usable()?;
        if self.inner.opts.read_only {
            return Err(Error::ReadOnly);
        }
        RwTxn::begin(self)
    }

    /// The unnamed main database.
    pub fn main_db(&self) -> crate::Database {
        crate::Database {
            idx: 0,
            env_id: self.inner.id,
        }
    }

    /// Flushes every commit made so far to the disk (useful in [`Durability::Lazy`] mode).
    pub fn sync(&self) -> Result<()> {
        let txn = self.write_txn()?;
        txn.commit_steady()
    }

    /// Environment figures.
    pub fn info(&self) -> Result<EnvInfo> {
        self.inner.check_usable()?;
        // The current commit's record, without taking a reader slot: no page is read.
        let meta = current_meta(&self.inner.shared, &*self.inner.storage)?;
        let (readers, max) = self.inner.shared.reader_counts();
        let (free_pages, pending_pages) = {
            let g = self.inner.writer.lock().unwrap_or_else(|p| p.into_inner());
            g.as_ref().map_or((0, 0), |w| {
                (w.free.reusable_pages(), w.free.pending_pages())
            })
        };
        Ok(EnvInfo {
            page_size: self.inner.page_size,
            file_size: self.inner.storage.len(),
            max_size: self.inner.max_size(),
            last_pgno: meta.npages - 1,
            last_txnid: meta.txnid,
            readers,
            max_readers: max,
            free_pages,
            pending_pages,
        })
    }

    /// Page size of the file.
    pub fn page_size(&self) -> usize {
        self.inner.page_size
    }

    /// Largest key accepted.
    pub fn max_key_size(&self) -> usize {
        format::max_key_size(self.inner.page_size)
    }

    /// The path given at open, if opened from a path.
    pub fn path(&self) -> Option<&Path> {
        self.inner.path.as_deref()
    }

    /// Whether the environment was opened read-only.
    pub fn is_read_only(&self) -> bool {
        self.inner.opts.read_only
    }

    /// The durability mode.
    pub fn durability(&self) -> Durability {
        self.inner.opts.durability
    }

    /// The reader table's occupied slots, across every process sharing the environment (a
    /// slot with txnid 0 is owned by a live handle but idle).
    pub fn readers(&self) -> Vec<ReaderInfo> {
        self.inner.shared.reader_list()
    }

    /// Clears the slots of readers whose process died; returns how many. The writer does this
    /// by itself for readers that pin old snapshots, and a full table does it before failing.
    pub fn reader_check(&self) -> Result<usize> {
        self.inner.check_usable()?;
        self.inner.shared.reader_check()
    }

    /// The stored flags of a database (those it was created with).
    pub fn db_flags(&self, db: crate::Database) -> Result<DbFlags> {
        let idx = self.inner.check_db(db)?;
        Ok(self.inner.db_flags(idx))
    }

    /// Orders `db`'s keys with a user-supplied function from now on, in this handle (None: back
    /// to the order its flags give). The function is not stored in the file: every handle that
    /// uses the database must set the same one before its first access (LMDB's
    /// mdb_set_compare). Reopening the database with other flags resets it. A read
    /// transaction already running keeps the order it took until
    /// [`RoTxn::refresh_orders`](crate::RoTxn::refresh_orders).
    ///
    /// Writes record in the database that its keys are in a user-supplied order: a handle that
    /// has not set one then refuses to write the database ([`Error::OrderUnknown`]) or to
    /// compact it, and its checker checks everything but the order and says so in
    /// [`Report::notes`](crate::check::Report::notes).
    pub fn set_key_order(&self, db: crate::Database, order: Option<format::CmpFn>) -> Result<()> {
        let idx = self.inner.check_db(db)?;
        let mut g = self.inner.dbs_mut();
        g[idx].cmp = match order {
            Some(f) => KeyCmp::Custom(f),
            None => crate::db::cmp_for(g[idx].flags),
        };
        Ok(())
    }

    /// Orders the values of DUP_SORT database `db` with a user-supplied function from now
    /// on, in this handle (None: the flags' order); as [`Env::set_key_order`], the function
    /// is not stored but writes record that there is one (LMDB's mdb_set_dupsort).
    pub fn set_dup_order(&self, db: crate::Database, order: Option<format::CmpFn>) -> Result<()> {
        let idx = self.inner.check_db(db)?;
        let mut g = self.inner.dbs_mut();
        if order.is_some() {
            self.inner.custom_dup_orders.store(true, Ordering::Release);
        }
        g[idx].dup_cmp = order.map(KeyCmp::Custom);
        Ok(())
    }

    /// Changes the size limit (None: no limit). Transactions that begin afterwards use it; a
    /// limit below the current file size only stops further growth. Fails with
    /// [`Error::Invalid`] past the address space reserved at open
    /// ([`EnvOptions::map_reserve`]).
    pub fn set_max_size(&self, bytes: Option<u64>) -> Result<()> {
        if let Some(b) = bytes {
            let reserved = self.inner.storage.reserved();
            if b > reserved {
                return Err(Error::Invalid(format!(
                    "size limit {b} exceeds the {reserved} bytes of address space reserved at open"
                )));
            }
            if b == 0 {
                return Err(Error::Invalid("size limit 0".into()));
            }
        }
        self.inner
            .max_size
            .store(bytes.unwrap_or(0), Ordering::Relaxed);
        Ok(())
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        // The last handle of a lazy environment makes its latest commit steady, so that a
        // clean close never loses commits to a later power loss.
        if Arc::strong_count(&self.inner) == 1
            && !self.inner.opts.read_only
            && self.inner.opts.durability == Durability::Lazy
            && self.inner.check_usable().is_ok()
        {
            let unsynced = {
                let g = self.inner.writer.lock().unwrap_or_else(|p| p.into_inner());
                g.as_ref().is_some_and(|w| w.loaded && !w.meta.is_steady())
            };
            if unsynced {
                let _ = self.sync();
            }
        }
    }
}

impl Drop for EnvInner {
    fn drop(&mut self) {
        self.shared.release_all();
    }
}

impl WriterState {
    fn unloaded(meta: Meta) -> WriterState {
        WriterState {
            free: FreeState::default(),
            next_txnid: meta.txnid + 1,
            meta,
            slots: [0; META_SLOTS],
            unsynced_bytes: 0,
            last_sync: std::time::Instant::now(),
            pool: Vec::new(),
            dirty_spare: Default::default(),
            loaded: false,
        }
    }
}

impl EnvInner {
    /// Brings the writer state up to date under the writer lock: another handle (or a writer
    /// that died mid-commit) may have changed the file since this handle last wrote.
    pub(crate) fn refresh_writer(&self, ws: &mut WriterState) -> Result<()> {
        let current = self.shared.current();
        let inflight = self.shared.inflight();
        if ws.loaded && current == ws.meta.txnid && inflight == 0 {
            return Ok(());
        }
        let (cands, slots) = read_metas(&*self.storage)?;
        let boot = self.storage.boot_id();
        let mut chosen = None;
        for m in cands {
            if !trusted(&m, &boot) || m.page_size as usize != self.page_size {
                continue;
            }
            if m.txnid == current && inflight == 0 {
                chosen = Some(m);
                break;
            }
            if verify_commit(&*self.storage, &m).is_ok() {
                chosen = Some(m);
                break;
            }
        }
        let m = chosen.ok_or_else(|| Error::corrupted("no commit in the data file verifies"))?;
        self.storage.refresh_len();
        ws.meta = m;
        ws.free = FreeState::default();
        ws.loaded = false;
        load_writer(&*self.storage, ws, slots)?;
        if ws.meta.txnid != current || inflight != 0 {
            failpoint!("writer.before_republish");
            self.shared.publish(&ws.meta);
        }
        Ok(())
    }
}

/// Reads the free tree and the slot txnids of `ws.meta` into `ws`.
fn load_writer(
    storage: &dyn Storage,
    ws: &mut WriterState,
    slots: [u64; META_SLOTS],
) -> Result<()> {
    let meta = ws.meta.clone();
    let mut free = FreeState::default();
    load_free(storage, &meta, &mut free)?;
    // Nothing is released here: readers of other handles may pin any of these runs. The
    // write transaction about to begin releases what no pinned snapshot (readers and the last
    // steady commit) can see, and its commit persists that.
    free.forget_undo();
    ws.free = free;
    ws.next_txnid = slots.iter().copied().max().unwrap_or(0).max(meta.txnid) + 1;
    ws.slots = slots;
    ws.loaded = true;
    Ok(())
}

/// Whether a commit may be used: steady commits always (they are verified), unsteady ones only
/// if written during this boot (their pages are in the page cache even if never flushed).
fn trusted(m: &Meta, boot: &[u8; format::BOOT_ID]) -> bool {
    m.is_steady() || (m.boot_id == *boot && *boot != [0; format::BOOT_ID])
}

/// The valid commit records in the data file's slots, newest first, and each slot's txnid.
fn read_metas(storage: &dyn Storage) -> Result<(Vec<Meta>, [u64; META_SLOTS])> {
    let mut head = [0u8; META_SLOTS * SECTOR];
    storage.read_at(0, &mut head)?;
    let mut slots = [0u64; META_SLOTS];
    let mut v = Vec::new();
    for (i, slot) in slots.iter_mut().enumerate() {
        if let MetaSlot::Valid(m) = Meta::decode(&head[i * SECTOR..(i + 1) * SECTOR]) {
            *slot = m.txnid;
            v.push(m);
        }
    }
    v.sort_by_key(|m| std::cmp::Reverse(m.txnid));
    Ok((v, slots))
}

/// The current commit's record: its published copy, or the data file's if that copy is torn.
/// Retried while commits move on underneath (bounded: each retry means a newer commit).
fn current_meta(shared: &Shared, storage: &dyn Storage) -> Result<Meta> {
    for _ in 0..1000 {
        let t = shared.current();
        if let Some(m) = shared.read_cell(t).or_else(|| meta_from_file(storage, t)) {
            return Ok(m);
        }
        std::thread::yield_now();
    }
    Err(Error::corrupted(format!(
        "commit {} published but unreadable",
        shared.current()
    )))
}

/// Commit `t`'s record from the data file (when the lock file's copy is torn).
pub(crate) fn meta_from_file(storage: &dyn Storage, t: u64) -> Option<Meta> {
    read_metas(storage)
        .ok()?
        .0
        .into_iter()
        .find(|m| m.txnid == t)
}

impl EnvInner {
    pub(crate) fn max_size(&self) -> Option<u64> {
        match self.max_size.load(Ordering::Relaxed) {
            0 => None,
            n => Some(n),
        }
    }

    pub(crate) fn check_usable(&self) -> Result<()> {
        if self.poisoned.load(Ordering::Relaxed) {
            return Err(Error::Poisoned);
        }
        if crate::os::fork_generation() != self.fork_gen {
            return Err(Error::Forked);
        }
        Ok(())
    }
}

/// Whether the data file is what a crash while creating it can leave besides an empty file: at
/// most one page (of any page size: it may have been created with other options), all zeros
/// (`create` writes the first commit before anything else). It holds nothing, so it is
/// created anew; a longer file of zeros stays an error.
fn interrupted_creation(storage: &dyn Storage) -> Result<bool> {
    let len = storage.len();
    if len > format::MAX_PAGE_SIZE as u64 {
        return Ok(false);
    }
    let mut head = vec![0u8; len as usize];
    storage.read_at(0, &mut head)?;
    Ok(head.iter().all(|&b| b == 0))
}

/// Writes the first commit of a new file.
fn create(storage: &dyn Storage, opts: &EnvOptions) -> Result<(Meta, [u64; META_SLOTS])> {
    let ps = opts.page_size;
    let meta = Meta {
        page_size: ps as u32,
        txnid: 1,
        flags: format::MF_STEADY,
        npages: 1,
        last_steady: 1,
        run_count: 0,
        list_head: 0,
        main: DbRecord::default(),
        catalog: DbRecord::default(),
        free: DbRecord::default(),
        inline_runs: Vec::new(),
        boot_id: storage.boot_id(),
    };
    let initial = opts.initial_size.max(ps as u64).div_ceil(ps as u64) * ps as u64;
    if let Some(max) = opts.max_size {
        if initial > max {
            return Err(Error::MapFull { limit: max });
        }
    }
    // The first commit goes in with the file's first bytes (a write that extends it) and is
    // flushed before the file grows further: a crash leaves an empty file, a page of zeros
    // (a power loss that kept the new length, not the data: `interrupted_creation`) or a
    // file that opens; never a larger file without a commit.
    let mut page0 = vec![0u8; ps];
    page0[..SECTOR].copy_from_slice(&meta.encode());
    storage.write_at(0, &[&page0])?;
    failpoint!("create.after_meta_write");
    storage.sync()?;
    storage.grow(initial)?;
    failpoint!("create.after_grow");
    Ok((meta, [1, 0, 0]))
}

/// Picks the newest commit that verifies; returns it and the txnid held by each slot.
fn recover(storage: &dyn Storage) -> Result<(Meta, [u64; META_SLOTS])> {
    let len = storage.len();
    let mut head = vec![0u8; (META_SLOTS * SECTOR).min(len as usize)];
    storage.read_at(0, &mut head)?;
    if len < (META_SLOTS * SECTOR) as u64 {
        return Err(if format::has_magic(&head) {
            Error::corrupted(format!("file of {len} bytes is truncated"))
        } else {
            Error::NotCairn {
                path: "data file".into(),
            }
        });
    }
    let mut valid = Vec::new();
    let mut slots = [0u64; META_SLOTS];
    let mut damage = Vec::new();
    let mut foreign = 0;
    for (i, slot) in slots.iter_mut().enumerate() {
        match Meta::decode(&head[i * SECTOR..(i + 1) * SECTOR]) {
            MetaSlot::Valid(m) => {
                *slot = m.txnid;
                valid.push(m);
            }
            MetaSlot::Damaged(why) => damage.push(format!("slot {i}: {why}")),
            MetaSlot::Foreign => foreign += 1,
        }
    }
    if foreign == META_SLOTS {
        return Err(Error::NotCairn {
            path: "data file".into(),
        });
    }
    if valid.is_empty() {
        // A version mismatch is reported as such.
        let v = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
        if v != format::FORMAT_VERSION && format::has_magic(&head) {
            return Err(Error::VersionMismatch {
                found: v,
                supported: format::FORMAT_VERSION,
            });
        }
        return Err(Error::corrupted(format!(
            "no valid commit record ({})",
            damage.join("; ")
        )));
    }
    valid.sort_by_key(|m| std::cmp::Reverse(m.txnid));
    // Each candidate is verified on its own page size: a damaged newest meta claiming another
    // (valid) size must not hide the older commits.
    let mut reasons = Vec::new();
    let boot = storage.boot_id();
    for m in &valid {
        if !trusted(m, &boot) {
            reasons.push(format!(
                "commit {}: not flushed before the system restarted",
                m.txnid
            ));
            continue;
        }
        match verify_commit(storage, m) {
            Ok(()) => return Ok((m.clone(), slots)),
            Err(e) => reasons.push(format!("commit {}: {e}", m.txnid)),
        }
    }
    Err(Error::corrupted(format!(
        "no commit verifies: {}",
        reasons.join("; ")
    )))
}

/// Verifies that every page a commit wrote reached the disk whole.
pub(crate) fn verify_commit(storage: &dyn Storage, m: &Meta) -> Result<()> {
    let ps = m.page_size as u64;
    if m.npages
        .checked_mul(ps)
        .is_none_or(|end| end > storage.len())
    {
        return Err(Error::corrupted(format!(
            "{} pages do not fit in the file",
            m.npages
        )));
    }
    for r in written_runs(storage, m)? {
        let end = r.start.saturating_add(u64::from(r.len));
        if r.len == 0 || r.start == 0 || end > m.npages {
            return Err(Error::corrupted(format!(
                "written run {}+{} out of range",
                r.start, r.len
            )));
        }
        // A run holds whole pages and overflow runs back to back; each is verified alone.
        let mut p = r.start;
        while p < end {
            let id = format::page_id(storage.bytes(p * ps, format::PAGE_FIELDS)?)?;
            if id.span == 0 || p + id.span > end {
                return Err(Error::corrupted(format!(
                    "page {p}: span {} leaves its run",
                    id.span
                )));
            }
            let b = storage.bytes(p * ps, (id.span * ps) as usize)?;
            format::verify_page(b, p, Some(r.txnid))?;
            p += id.span;
        }
    }
    Ok(())
}

/// The runs a commit lists, verifying its list pages on the way.
pub(crate) fn written_runs(storage: &dyn Storage, m: &Meta) -> Result<Vec<WrittenRun>> {
    if m.list_head == 0 {
        return Ok(m.inline_runs.clone());
    }
    let ps = m.page_size as u64;
    let mut out = Vec::new();
    let mut pg = m.list_head;
    // Bounded by the snapshot's page count: a cycle ends in an error.
    for _ in 0..m.npages {
        if pg == 0 {
            break;
        }
        if pg >= m.npages {
            return Err(Error::corrupted(format!("list page {pg} out of range")));
        }
        let b = storage.bytes(pg * ps, ps as usize)?;
        format::verify_page(b, pg, Some(m.txnid))?;
        let (runs, next) = format::read_list_page(b)?;
        out.extend(runs);
        pg = next;
    }
    if out.len() != m.run_count as usize || pg != 0 {
        return Err(Error::corrupted("commit list does not match its count"));
    }
    Ok(out)
}

/// List pages of a commit (freed by the next commit).
pub(crate) fn list_pages(storage: &dyn Storage, m: &Meta) -> Result<Vec<u64>> {
    let ps = m.page_size as u64;
    let mut out = Vec::new();
    let mut pg = m.list_head;
    while pg != 0 {
        if out.len() as u64 >= m.npages || pg >= m.npages {
            return Err(Error::corrupted("commit list chain"));
        }
        out.push(pg);
        let b = storage.bytes(pg * ps, ps as usize)?;
        pg = format::read_list_page(b)?.1;
    }
    Ok(out)
}

/// Loads the free tree of a commit.
fn load_free(storage: &dyn Storage, meta: &Meta, free: &mut FreeState) -> Result<()> {
    let snap = Snapshot::new(storage, meta.clone());
    let mut pos = Position::new();
    let mut more = pos.first(&snap, &meta.free)?;
    let mut n = 0u64;
    while more {
        let (k, v) = pos
            .current(&snap)?
            .ok_or_else(|| Error::corrupted("free tree cursor"))?;
        let start = alloc::decode_run_key(k).ok_or_else(|| Error::corrupted("free tree key"))?;
        let run = alloc::Run::decode(v).ok_or_else(|| Error::corrupted("free tree value"))?;
        if run.len == 0 || start == 0 || start.checked_add(run.len).is_none_or(|e| e > meta.npages)
        {
            return Err(Error::corrupted(format!(
                "free run {start}+{} out of range",
                run.len
            )));
        }
        if free.overlaps(start, run.len) {
            return Err(Error::corrupted(format!(
                "free run {start} overlaps another"
            )));
        }
        free.load(start, run);
        n += 1;
        if n > meta.npages {
            return Err(Error::corrupted("free tree has more runs than pages"));
        }
        more = pos.next(&snap)?;
    }
    Ok(())
}
