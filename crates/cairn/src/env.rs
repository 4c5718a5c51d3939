//! Opening an environment: creating a new file or recovering an existing one (recover.rs),
//! setting up the reader table, and the [`Env`] handle's methods.

use crate::db::{Database, DbFlags};
use crate::error::{Error, Result};
use crate::format::{self, DbRecord, KeyCmp, Meta, META_SLOTS, SECTOR};
use crate::lock::LockFile;
use crate::options::{Durability, EnvOptions};
use crate::os::Map;
use crate::recover::{current_meta, recover_with};
use crate::shared::{ReaderInfo, Shared};
use crate::state::{DbInfo, Env, EnvInner, WriterState};
use crate::storage::{FileStorage, Storage};
use crate::txn::{RoTxn, RwTxn};
use std::fs::OpenOptions;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};

impl EnvOptions {
    /// Opens (or creates) the environment at `path`.
    pub fn open(self, path: impl AsRef<Path>) -> Result<Env> {
        let path = path.as_ref();
        if self.subdir(path) && !self.read_only {
            std::fs::create_dir_all(path)
                .map_err(|e| Error::io(format!("creating directory {}", path.display()), e))?;
        }
        let (data, lock) = self.files(path);
        check_options(&self)?;
        // LMDB's own file: refused before anything is created or opened for writing (its lock
        // file may be in use by LMDB processes).
        // LMDB's names only (data.mdb, or the file itself with no_subdir): LMDB's contents
        // under Cairn's own name, data.cairn, are just not Cairn's (NotCairn below).
        let lmdb_named = !self.subdir(path) || data.file_name().is_some_and(|n| n == "data.mdb");
        if lmdb_named
            && is_lmdb_file(&data)
            && !self.read_only
            && (self.migrate_lmdb || crate::migrate::on_open_from_env())
        {
            let opts = crate::migrate::MigrateOptions {
                backup: true,
                no_subdir: Some(!self.subdir(path)),
            };
            crate::migrate::migrate_lmdb(path, opts, &mut |_, _| {}).map_err(|e| {
                Error::MigrateFailed {
                    path: path.display().to_string(),
                    what: e.to_string(),
                }
            })?;
        }
        if lmdb_named && is_lmdb_file(&data) {
            let dir = if self.subdir(path) {
                path.display().to_string()
            } else {
                format!("-n {}", path.display())
            };
            return Err(Error::LmdbFile {
                path: data.display().to_string(),
                dir,
            });
        }
        let file = OpenOptions::new()
            .read(true)
            .write(!self.read_only)
            .create(!self.read_only)
            .truncate(false)
            .open(&data)
            .map_err(|e| Error::io(format!("opening {}", data.display()), e))?;
        let setup = if self.no_lock {
            LockSetup::Private
        } else {
            match LockFile::open(&lock, self.max_readers as usize) {
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
            }
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
        let log = LogSource::File(log_path(&data));
        let mut env = Env::build(Arc::new(storage), self, setup, log).map_err(|e| match e {
            Error::NotCairn { .. } => Error::NotCairn {
                path: data.display().to_string(),
            },
            other => other,
        })?;
        Arc::get_mut(&mut env.inner).expect("fresh").path = Some(path.to_path_buf());
        Ok(env)
    }
}

/// Whether `data` starts with an LMDB meta page: page number 0, the meta flag in the page
/// header and LMDB's magic (0xBEEFC0DE, in either byte order) after it.
fn is_lmdb_file(data: &Path) -> bool {
    use std::os::unix::fs::FileExt;
    let Ok(f) = std::fs::File::open(data) else {
        return false;
    };
    let mut head = [0u8; 20];
    if f.read_exact_at(&mut head, 0).is_err() {
        return false;
    }
    let flags = u16::from_le_bytes([head[10], head[11]]);
    let magic = u32::from_le_bytes([head[16], head[17], head[18], head[19]]);
    // Meta page 0 records its own page number, 0: a Cairn file starts with its magic instead.
    head[..8] == [0; 8] && (magic == 0xBEEF_C0DE && flags & 0x08 != 0)
        || (magic == 0xBEEF_C0DE_u32.swap_bytes() && flags.swap_bytes() & 0x08 != 0)
}

/// The commit log's file: the data file's name with `-log` added (`data.cairn-log`).
pub(crate) fn log_path(data: &Path) -> std::path::PathBuf {
    let mut p = data.as_os_str().to_owned();
    p.push("-log");
    std::path::PathBuf::from(p)
}

/// Where an environment's commit log is (logged mode, docs/design.md "Logged commits").
enum LogSource {
    /// No log (the simulator without one, a temporary replay handle).
    None,
    /// A file beside the data file: created in logged mode, else opened only if it exists
    /// (its records are replayed whatever the mode).
    File(std::path::PathBuf),
    /// A given storage (the crash simulator's second file).
    Given(Arc<dyn Storage>),
}

impl LogSource {
    fn open(self, opts: &EnvOptions) -> Result<Option<Arc<dyn Storage>>> {
        let logged = opts.durability == Durability::Logged && !opts.read_only;
        let path = match self {
            LogSource::None => return Ok(None),
            LogSource::Given(s) => {
                if logged && s.len() < opts.log_size {
                    s.grow(opts.log_size)?;
                }
                return Ok(Some(s));
            }
            LogSource::File(p) => p,
        };
        if !logged && !path.exists() {
            return Ok(None);
        }
        let file = match OpenOptions::new()
            .read(true)
            .write(!opts.read_only)
            .create(logged)
            .truncate(false)
            .open(&path)
        {
            Ok(f) => f,
            Err(e) if !logged && e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io(format!("opening {}", path.display()), e)),
        };
        let reserve = opts.log_size.max(file.metadata().map_or(0, |m| m.len()));
        let s = FileStorage::new(file, path.display().to_string(), reserve, false)?;
        if logged && s.len() < opts.log_size {
            s.grow(opts.log_size)?;
        }
        Ok(Some(Arc::new(s)))
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
    /// Pages reusable now, as this handle's writer state counts them: 0 until the handle's
    /// first write transaction reads the free tree (opening does not: it costs O(1) in the
    /// file's size). `RoTxn::free_runs` reads the free tree itself.
    pub free_pages: u64,
    /// Pages freed but still visible to a snapshot (counted as `free_pages` is).
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
    /// Testing only: hidden from the documentation with the `storage` module.
    #[doc(hidden)]
    pub fn with_storage(storage: Arc<dyn Storage>, opts: EnvOptions) -> Result<Env> {
        check_options(&opts)?;
        Env::build(storage, opts, LockSetup::Private, LogSource::None)
    }

    /// [`Env::with_storage`] with a commit log on a second storage (logged mode in crash
    /// tests). Testing only.
    #[doc(hidden)]
    pub fn with_storages(
        storage: Arc<dyn Storage>,
        log: Arc<dyn Storage>,
        opts: EnvOptions,
    ) -> Result<Env> {
        check_options(&opts)?;
        Env::build(storage, opts, LockSetup::Private, LogSource::Given(log))
    }

    fn build(
        storage: Arc<dyn Storage>,
        opts: EnvOptions,
        setup: LockSetup,
        log: LogSource,
    ) -> Result<Env> {
        let log = log.open(&opts)?;
        let tag = ENV_IDS.fetch_add(1, Ordering::Relaxed);
        let private = |n: usize| Map::anonymous(format::lock_file_len(n).div_ceil(4096) * 4096);
        // `previous`: the lock file holds the last session's published commit (first handle).
        let (shared, first, previous, ro_lock) = match setup {
            LockSetup::Private => {
                let n = opts.max_readers as usize;
                (
                    Shared::new(private(n)?, LockFile::none(), n, tag as u32),
                    true,
                    false,
                    None,
                )
            }
            LockSetup::ReadOnlyFallback(l) => {
                let n = opts.max_readers as usize;
                (
                    Shared::new(private(n)?, LockFile::none(), n, tag as u32),
                    true,
                    false,
                    Some(l),
                )
            }
            LockSetup::File(o) => (
                Shared::new(o.map, o.lock, o.max_readers, tag as u32),
                o.first,
                o.previous,
                None,
            ),
        };
        let ws = if first {
            // No other handle is alive: the data file is the only truth (after a crash or a
            // reboot the lock file's contents mean nothing).
            failpoint!("open.before_recover");
            // The slots' txnids are read again with the free tree (`refresh_writer`).
            let (meta, _slots) = if storage.is_empty() || interrupted_creation(&*storage)? {
                if opts.read_only {
                    return Err(Error::Invalid("cannot create a database read-only".into()));
                }
                create(&*storage, &opts)?
            } else {
                // The commit the last session left current needs no reading of its pages
                // (`published_whole`): read before `Shared::init` clears it.
                let published = match previous {
                    true => shared.read_cell(shared.current()),
                    false => None,
                };
                recover_with(&*storage, published.as_ref())?
            };
            // Commits the log holds past the recovered one (a power loss took their pages):
            // replayed before any other handle can see the file.
            let meta = match &log {
                Some(l) => crate::replay::replay(&storage, &**l, &opts, meta)?,
                None => meta,
            };
            failpoint!("open.after_recover");
            shared.init(&meta);
            failpoint!("open.after_init");
            shared.lock.joined()?;
            // The free tree is read at the first write transaction (`refresh_writer`), not
            // here: opening costs what recovery checks (the last commit's pages), not what the
            // file holds, and a handle that only reads never reads it.
            let mut ws = WriterState::unloaded(meta);
            ws.recovered = true;
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
        let opts_logged = opts.durability == Durability::Logged && !opts.read_only;
        let env = Env {
            inner: Arc::new(EnvInner {
                storage,
                page_size: meta.page_size as usize,
                opts,
                shared,
                writer: Mutex::new(Some(ws)),
                writer_cv: Condvar::new(),
                writer_waiters: std::sync::atomic::AtomicUsize::new(0),
                writer_tickets: AtomicU64::new(1),
                writer_priority: AtomicU64::new(0),
                dbs: RwLock::new(vec![main]),
                db_gen: AtomicU64::new(0),
                id: tag,
                poisoned: AtomicBool::new(false),
                _ro_lock: ro_lock,
                path: None,
                fork_gen: crate::os::fork_generation(),
                max_size: AtomicU64::new(opts_max.unwrap_or(0)),
                custom_dup_orders: AtomicBool::new(false),
                group: Default::default(),
                log: log.filter(|_| opts_logged),
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
    pub fn main_db(&self) -> Database {
        Database {
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
            last_txnid: crate::format::user_txnid(meta.txnid),
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
    pub fn db_flags(&self, db: Database) -> Result<DbFlags> {
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
    pub fn set_key_order(&self, db: Database, order: Option<format::CmpFn>) -> Result<()> {
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
    pub fn set_dup_order(&self, db: Database, order: Option<format::CmpFn>) -> Result<()> {
        let idx = self.inner.check_db(db)?;
        let mut g = self.inner.dbs_mut();
        if order.is_some() {
            self.inner.custom_dup_orders.store(true, Ordering::Release);
        }
        g[idx].dup_cmp = order.map(KeyCmp::Custom);
        Ok(())
    }

    /// This handle's size limit (None: no limit).
    pub fn max_size(&self) -> Option<u64> {
        self.inner.max_size()
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
        // The last handle makes its latest commit steady (lazy and logged modes, or commits
        // made with `commit_no_sync`), so that a clean close never loses commits to a later
        // power loss.
        if Arc::strong_count(&self.inner) == 1
            && !self.inner.opts.read_only
            && self.inner.check_usable().is_ok()
        {
            let unsynced = {
                let g = self.inner.writer.lock().unwrap_or_else(|p| p.into_inner());
                g.as_ref()
                    .is_some_and(|w| (w.loaded || w.recovered) && !w.meta.is_steady())
            };
            // Never waits for the writer (closing must not hang): if a transaction holds it
            // (of another handle, even on this thread), that writer's own commits and flushes
            // carry these commits; a power loss before then can take them, never the file.
            if unsynced {
                if let Ok(Some(txn)) = RwTxn::try_begin(self) {
                    let _ = txn.commit_steady();
                }
            }
        }
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
        version: format::FORMAT_VERSION,
        page_size: ps as u32,
        txnid: 1,
        flags: format::MF_STEADY,
        npages: 1,
        last_steady: 1,
        run_count: 0,
        list_head: 0,
        main: DbRecord::default(),
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
