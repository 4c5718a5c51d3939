//! `Environment` and `_Database`.
//!
//! An `Environment` owns an [`EnvCore`] (the engine environment in an `Arc`) until `close`,
//! which aborts every live transaction first, as py-lmdb does. One process may open a path
//! only once at a time (py-lmdb 2.x refuses the second open the same way).

use crate::errors::{self, closed};
use crate::state::{lock, thread_tag, EnvCore, GroupedRw, StateCell, TxnShared, TxnState};
use crate::txn::Transaction;
use cairn::{Database, DbFlags, Durability, Env, FileNames};
use pyo3::exceptions::PyTypeError;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// Address space reserved per environment: `set_mapsize` can raise the limit up to this.
const RESERVE: u64 = 64 << 30;

/// The names the data file of an environment directory may have: LMDB's, which this face asks
/// the engine for (`FileNames::Lmdb`), and Cairn's own, which an environment made through the
/// Rust API or the `cairn` command has.
const DATA_NAMES: [&str; 2] = ["data.mdb", "data.cairn"];

/// The data file in environment directory `dir`, if there is one.
fn data_file(dir: &Path) -> Option<PathBuf> {
    DATA_NAMES.iter().map(|n| dir.join(n)).find(|p| p.is_file())
}

/// The smallest `map_size` honoured: a new environment's first page.
const MIN_MAP_SIZE: u64 = 4096;

/// Paths open in this process.
static OPEN_PATHS: Mutex<Option<HashSet<PathBuf>>> = Mutex::new(None);

/// The flags an environment was opened with (py-lmdb's `Environment.flags()`).
#[derive(Clone, Copy)]
struct EnvFlags {
    subdir: bool,
    pub(crate) readonly: bool,
    metasync: bool,
    sync: bool,
    map_async: bool,
    readahead: bool,
    writemap: bool,
    meminit: bool,
    lock: bool,
}

/// A database handle, as returned by `Environment.open_db`.
#[pyclass(frozen, weakref, module = "cairn", name = "_Database")]
pub struct PyDatabase {
    pub(crate) db: Database,
    pub(crate) name: Option<Vec<u8>>,
    flags: DbFlags,
    /// Set by `Transaction.drop(db, delete=True)`: the handle is closed, and using it raises
    /// `InvalidParameterError` (LMDB's EINVAL for a closed handle).
    pub(crate) dropped: std::sync::atomic::AtomicBool,
    /// The transaction (`TxnShared` address) the handle was opened in with `txn=`, while it
    /// may still be open: LMDB makes such a handle valid in other transactions only once that
    /// one ended (before, they get EINVAL: `InvalidParameterError`). 0: none.
    owner: std::sync::atomic::AtomicUsize,
    owner_ref: Mutex<std::sync::Weak<crate::state::TxnShared>>,
}

impl PyDatabase {
    /// Whether the database keeps sorted duplicates.
    #[inline]
    pub(crate) fn dup(&self) -> bool {
        self.flags.contains(DbFlags::DUP_SORT)
    }

    /// The engine handle for use in transaction `txn`, unless `Transaction.drop(delete=True)`
    /// closed it or it was opened in another transaction still open.
    #[inline]
    pub(crate) fn handle(
        &self,
        py: Python<'_>,
        txn: &Arc<crate::state::TxnShared>,
    ) -> PyResult<Database> {
        if self.dropped.load(Ordering::Relaxed) {
            return Err(errors::InvalidParameterError::new_err(
                "the database was dropped: its handle is closed",
            ));
        }
        let o = self.owner.load(Ordering::Relaxed);
        if o != 0 && o != Arc::as_ptr(txn) as usize {
            self.check_owner(py)?;
        }
        Ok(self.db)
    }

    #[cold]
    fn check_owner(&self, py: Python<'_>) -> PyResult<()> {
        let owner = lock(&self.owner_ref).upgrade();
        if owner.is_some_and(|t| t.state.lock(py).is_some()) {
            return Err(errors::InvalidParameterError::new_err(
                "the database was opened in another transaction that has not ended yet",
            ));
        }
        self.owner.store(0, Ordering::Relaxed);
        Ok(())
    }
}

#[pymethods]
impl PyDatabase {
    /// The database's flags as a dict (reverse_key, dupsort, integerkey, integerdup,
    /// dupfixed). `txn` (py-lmdb's argument) is accepted and not needed: a handle's flags are
    /// those the database was created with.
    #[pyo3(signature = (txn=None))]
    fn flags<'py>(
        &self,
        py: Python<'py>,
        txn: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let _ = txn;
        let d = PyDict::new(py);
        d.set_item("reverse_key", self.flags.contains(DbFlags::REVERSE_KEY))?;
        d.set_item("dupsort", self.flags.contains(DbFlags::DUP_SORT))?;
        d.set_item("integerkey", self.flags.contains(DbFlags::INTEGER_KEY))?;
        d.set_item("integerdup", self.flags.contains(DbFlags::INTEGER_DUP))?;
        d.set_item("dupfixed", self.flags.contains(DbFlags::DUP_FIXED))?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        match &self.name {
            None => "<cairn._Database main>".into(),
            Some(n) => format!("<cairn._Database {:?}>", String::from_utf8_lossy(n)),
        }
    }
}

/// An open environment: one Cairn data file with its named databases.
#[pyclass(frozen, weakref, module = "cairn", name = "Environment")]
pub struct Environment {
    core: Mutex<Option<Arc<EnvCore>>>,
    /// Whether the environment was opened read-only.
    #[pyo3(get)]
    pub(crate) readonly: bool,
    flags: EnvFlags,
    path: String,
    key: PathBuf,
    max_readers: u32,
    main: Py<PyDatabase>,
    dbs: Mutex<HashMap<Vec<u8>, Py<PyDatabase>>>,
}

impl Drop for Environment {
    fn drop(&mut self) {
        // As py-lmdb's __del__: an environment nobody references any more is closed, which
        // also lets this process open its path again.
        Python::attach(|py| self.close(py));
    }
}

impl Environment {
    /// Whether `close` has run.
    pub(crate) fn is_closed(&self) -> bool {
        lock(&self.core).is_none()
    }

    pub(crate) fn core(&self) -> PyResult<Arc<EnvCore>> {
        lock(&self.core).clone().ok_or_else(closed)
    }

    pub(crate) fn main_db(&self) -> &Py<PyDatabase> {
        &self.main
    }

    /// Runs `f` in a write transaction of its own (open_db without `txn=`).
    fn with_write<T>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut cairn::RwTxn<'static>) -> Result<T, cairn::Error>,
    ) -> PyResult<T> {
        let core = self.core()?;
        if core.writer.load(Ordering::Acquire) == thread_tag() {
            return Err(errors::Error::new_err(
                "Attempt to start a write transaction while another write transaction is \
                 active on the same thread. This would deadlock.",
            ));
        }
        let env = core.env.clone();
        let mut st = py
            .detach(move || TxnState::new_rw(env))
            .map_err(errors::map)?;
        let t = st.rw_mut()?;
        let out = f(t).map_err(errors::map)?;
        let Some(crate::state::Kind::Rw(t)) = st.kind.take() else {
            unreachable!("write state")
        };
        let env = st.env.clone();
        drop(st);
        py.detach(move || {
            let r = (*t).commit();
            drop(env);
            r
        })
        .map_err(errors::map)?;
        Ok(out)
    }
}

fn fs_path(o: &Bound<'_, PyAny>) -> PyResult<PathBuf> {
    if let Ok(b) = o.cast::<PyBytes>() {
        use std::os::unix::ffi::OsStrExt;
        return Ok(PathBuf::from(std::ffi::OsStr::from_bytes(b.as_bytes())));
    }
    o.extract::<PathBuf>()
        .map_err(|_| PyTypeError::new_err("path must be str, bytes or os.PathLike"))
}

#[pymethods]
impl Environment {
    #[new]
    #[pyo3(signature = (path, map_size=None, subdir=true, readonly=false, metasync=true,
        sync=true, map_async=false, mode=0o755, create=true, readahead=true, writemap=false,
        meminit=true, max_readers=126, max_dbs=0, max_spare_txns=1, lock=true,
        group_max_writes=None, group_max_time=None, migrate_lmdb=false, logged=false))]
    #[allow(clippy::too_many_arguments, reason = "py-lmdb's signature")]
    fn new(
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        map_size: Option<u64>,
        subdir: bool,
        readonly: bool,
        metasync: bool,
        sync: bool,
        map_async: bool,
        mode: u32,
        create: bool,
        readahead: bool,
        writemap: bool,
        meminit: bool,
        max_readers: u32,
        max_dbs: u32,
        max_spare_txns: u32,
        lock: bool,
        group_max_writes: Option<usize>,
        group_max_time: Option<f64>,
        migrate_lmdb: bool,
        logged: bool,
    ) -> PyResult<Environment> {
        // Cairn's group commit (write_grouped): the most calls one commit carries, and how
        // long (seconds) a group keeps taking calls that queue while it runs. Checked before
        // anything is created.
        if group_max_writes == Some(0) {
            return Err(PyValueError::new_err("group_max_writes must be at least 1"));
        }
        let group_max_time = group_max_time
            .map(|t| {
                std::time::Duration::try_from_secs_f64(t).map_err(|_| {
                    PyValueError::new_err(format!(
                        "group_max_time {t} is not a duration in seconds"
                    ))
                })
            })
            .transpose()?;
        let path = fs_path(path)?;
        let data = |path: &Path| {
            if subdir {
                data_file(path)
            } else {
                Some(path.to_path_buf()).filter(|p| p.exists())
            }
        };
        if subdir && path.exists() && !path.is_dir() {
            return Err(errors::Error::new_err(format!(
                "{}: Not a directory",
                path.display()
            )));
        }
        if subdir && !path.is_dir() {
            if !create || readonly {
                return Err(errors::Error::new_err(format!(
                    "{}: No such file or directory",
                    path.display()
                )));
            }
            use std::os::unix::fs::DirBuilderExt;
            // Only the last component, as py-lmdb (a missing parent is an error).
            std::fs::DirBuilder::new()
                .mode(mode)
                .create(&path)
                .map_err(|e| errors::DiskError::new_err(format!("{}: {e}", path.display())))?;
        }
        if !subdir && !path.exists() && readonly {
            return Err(errors::Error::new_err(format!(
                "{}: No such file or directory",
                path.display()
            )));
        }
        let key = std::fs::canonicalize(if subdir { &path } else { Path::new(".") })
            .map(|p| if subdir { p } else { p.join(&path) })
            .unwrap_or_else(|_| path.clone());
        {
            let mut g = crate::state::lock(&OPEN_PATHS);
            let set = g.get_or_insert_with(HashSet::new);
            if !set.insert(key.clone()) {
                return Err(errors::Error::new_err(format!(
                    "The environment {:?} is already open in this process.",
                    path.display().to_string()
                )));
            }
        }
        let existed = data(&path).is_some();
        let mut opts = Env::options()
            .max_readers(max_readers)
            .max_dbs(max_dbs)
            .read_only(readonly)
            .no_subdir(!subdir)
            // LMDB's file names (programs and tests open data.mdb / lock.mdb by name), and no
            // lock file with lock=False (the caller keeps other handles away, as with LMDB).
            .file_names(if data(&path).is_some_and(|d| d.ends_with("data.cairn")) {
                FileNames::Cairn
            } else {
                FileNames::Lmdb
            })
            .no_lock(!lock)
            // Cairn's keyword (not py-lmdb's): an LMDB environment at `path` is converted in
            // place first (as CAIRN_MIGRATE_ON_OPEN=1 asks too), instead of InvalidError.
            .migrate_lmdb(migrate_lmdb)
            // Cairn's keyword: durable commits through the commit log (Durability::Logged)
            // instead of flushing their pages; sync=False still means lazy.
            .durability(match (sync && metasync, logged) {
                (true, true) => Durability::Logged,
                (true, false) => Durability::Durable,
                (false, _) => Durability::Lazy,
            });
        if let Some(n) = group_max_writes {
            opts = opts.group_max_writes(n);
        }
        if let Some(d) = group_max_time {
            opts = opts.group_max_time(d);
        }
        if let Some(m) = map_size {
            // LMDB raises a map size below what the file needs to that minimum (its writes
            // then fail with MapFullError); a new Cairn file needs one page.
            let m = m.max(MIN_MAP_SIZE);
            opts = opts.max_size(Some(m)).map_reserve(RESERVE.max(m));
        }
        let (data_path, lock_path) = opts.files(&path);
        let opened = py.detach(|| opts.open(&path));
        let env = match opened {
            Ok(e) => e,
            Err(e) => {
                if let Some(s) = crate::state::lock(&OPEN_PATHS).as_mut() {
                    s.remove(&key);
                }
                return Err(errors::map(e));
            }
        };
        if map_size.is_some() {
            // As LMDB at open: a map_size below the data already there is raised to it (only
            // growth by another process afterwards is MapResizedError; see check_map_size).
            if let Ok(i) = env.info() {
                let used = (i.last_pgno + 1) * i.page_size as u64;
                if i.max_size.is_some_and(|m| m < used) {
                    let _ = env.set_max_size(Some(used));
                }
            }
        }
        if !existed && !readonly {
            use std::os::unix::fs::PermissionsExt;
            // py-lmdb creates its files (data and lock) with `mode` less the execute bits.
            for f in [&data_path, &lock_path] {
                if f.exists() {
                    let _ =
                        std::fs::set_permissions(f, std::fs::Permissions::from_mode(mode & 0o666));
                }
            }
        }
        let main = Py::new(
            py,
            PyDatabase {
                db: env.main_db(),
                name: None,
                flags: DbFlags::empty(),
                dropped: Default::default(),
                owner: Default::default(),
                owner_ref: Mutex::new(std::sync::Weak::new()),
            },
        )?;
        Ok(Environment {
            core: Mutex::new(Some(Arc::new(EnvCore {
                env: Arc::new(env),
                txns: Mutex::new(Vec::new()),
                writer: Default::default(),
                max_spare: max_spare_txns,
                spare: Default::default(),
                held: Default::default(),
            }))),
            readonly,
            flags: EnvFlags {
                subdir,
                readonly,
                metasync,
                sync,
                map_async,
                readahead,
                writemap,
                meminit,
                lock,
            },
            path: path.display().to_string(),
            key,
            max_readers,
            main,
            dbs: Mutex::new(HashMap::new()),
        })
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) {
        self.close(py);
    }

    /// Closes the environment, aborting its open transactions and closing their cursors.
    /// Repeat calls have no effect.
    fn close(&self, py: Python<'_>) {
        let Some(core) = lock(&self.core).take() else {
            return;
        };
        abort_all(py, &core);
        lock(&self.dbs).clear();
        if let Some(s) = lock(&OPEN_PATHS).as_mut() {
            s.remove(&self.key);
        }
        // The engine environment closes when the last `Arc` goes: here, unless memoryviews
        // from `buffers=True` still export its map.
        drop(core);
    }

    /// The directory (or, with subdir=False, file) path given at open.
    fn path(&self) -> PyResult<String> {
        self.core()?;
        Ok(self.path.clone())
    }

    /// Begins a transaction (see `Transaction`).
    #[pyo3(signature = (db=None, parent=None, write=false, buffers=false))]
    fn begin(
        slf: &Bound<'_, Self>,
        db: Option<Py<PyDatabase>>,
        parent: Option<Bound<'_, Transaction>>,
        write: bool,
        buffers: bool,
    ) -> PyResult<Transaction> {
        Transaction::begin(slf, db, parent, write, buffers)
    }

    /// Runs `fn(txn)` in a write transaction shared with the grouped writes of this process's
    /// other threads, and returns `fn`'s result once its changes are committed (durable, unless
    /// the environment was opened with sync=False or metasync=False).
    ///
    /// Threads that call this while a commit is in flight share the next one: one of them, the
    /// group's leader, calls each queued `fn` in turn, each in a nested transaction of its own,
    /// then commits once (one flush) and wakes them all. `fn` may therefore run on another
    /// thread (the leader's), after the callables queued before it. An exception raised by
    /// `fn` rolls back its changes alone and is raised here; the others still commit. `txn` is
    /// usable only during the call (then, as its cursors, it raises `cairn.Error`); it
    /// refuses `commit` and `abort` (the group commits it), and a write transaction of this
    /// environment cannot be begun inside `fn` (it raises). `db`: `txn`'s default database.
    /// The GIL is released while the call waits.
    #[pyo3(signature = (r#fn, db=None))]
    fn write_grouped(
        slf: &Bound<'_, Self>,
        r#fn: Bound<'_, PyAny>,
        db: Option<Py<PyDatabase>>,
    ) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let e = slf.get();
        let core = e.core()?;
        if e.readonly {
            return Err(errors::ReadonlyError::new_err(
                "Cannot start write transaction with read-only env",
            ));
        }
        if !r#fn.is_callable() {
            return Err(PyTypeError::new_err("write_grouped: fn must be callable"));
        }
        if core.writer.load(Ordering::Acquire) == thread_tag() {
            return Err(errors::Error::new_err(
                "Attempt to start a grouped write while a write transaction is active on the \
                 same thread. This would deadlock.",
            ));
        }
        let call = GroupedCall {
            env: slf.clone().unbind(),
            func: r#fn.unbind(),
            db: db.unwrap_or_else(|| e.main_db().clone_ref(py)),
            core: core.clone(),
        };
        let mut out = GroupedOut::default();
        let env = core.env.clone();
        // The leader (this thread or another) takes the GIL back to call each callable.
        let r = py.detach(|| env.write_grouped(|txn| call.run(txn, &mut out)));
        if let Some(err) = out.raised {
            return Err(err);
        }
        r.map_err(errors::map)?;
        Ok(out.value.unwrap_or_else(|| py.None()))
    }

    /// Opens (by default creating) a named database; `key=None` is the main database.
    /// Repeat calls for one name return the same handle.
    #[pyo3(signature = (key=None, txn=None, reverse_key=false, dupsort=false, create=true,
        integerkey=false, integerdup=false, dupfixed=false))]
    #[allow(clippy::too_many_arguments, reason = "py-lmdb's signature")]
    fn open_db(
        &self,
        py: Python<'_>,
        key: Option<&Bound<'_, PyAny>>,
        txn: Option<Bound<'_, Transaction>>,
        reverse_key: bool,
        dupsort: bool,
        create: bool,
        integerkey: bool,
        integerdup: bool,
        dupfixed: bool,
    ) -> PyResult<Py<PyDatabase>> {
        let key = match key {
            None => None,
            Some(k) if k.is_none() => None,
            Some(k) => Some(crate::convert::arg(k)?.to_vec()),
        };
        let Some(name_bytes) = key else {
            if reverse_key || dupsort || integerkey || integerdup || dupfixed {
                return Err(pyo3::exceptions::PyValueError::new_err(
                    "May not set flags on the main database",
                ));
            }
            return Ok(self.main.clone_ref(py));
        };
        if let Some(h) = lock(&self.dbs).get(&name_bytes) {
            return Ok(h.clone_ref(py));
        }
        let name = std::str::from_utf8(&name_bytes)
            .map_err(|_| {
                errors::InvalidParameterError::new_err("database names must be valid UTF-8")
            })?
            .to_string();
        let mut flags = DbFlags::empty();
        if reverse_key {
            flags = flags | DbFlags::REVERSE_KEY;
        }
        if integerkey {
            flags = flags | DbFlags::INTEGER_KEY;
        }
        // As in py-lmdb: integerdup implies dupfixed, which implies dupsort.
        if dupsort || dupfixed || integerdup {
            flags = flags | DbFlags::DUP_SORT;
        }
        if dupfixed || integerdup {
            flags = flags | DbFlags::DUP_FIXED;
        }
        if integerdup {
            flags = flags | DbFlags::INTEGER_DUP;
        }
        let want = if create {
            flags | DbFlags::CREATE
        } else {
            flags
        };
        let opener = txn.as_ref().map(|t| t.get().shared.clone());
        if txn.is_none() {
            self.check_map_size(py)?;
        }
        let db = match txn {
            Some(t) => t.get().open_db(t.py(), &name, want)?,
            None if self.readonly || !create => {
                let core = self.core()?;
                let r = core.env.read_txn().map_err(errors::map)?;
                r.open_db(Some(&name)).map_err(|e| missing_db(e, create))?
            }
            None => self.with_write(py, |w| w.create_db(Some(&name), want))?,
        };
        let stored = self.core()?.env.db_flags(db).ok();
        let h = Py::new(
            py,
            PyDatabase {
                db,
                name: Some(name_bytes.clone()),
                flags: stored.unwrap_or(flags),
                dropped: Default::default(),
                owner: Default::default(),
                owner_ref: Mutex::new(std::sync::Weak::new()),
            },
        )?;
        if let Some(t) = opener {
            let d = h.get();
            d.owner.store(Arc::as_ptr(&t) as usize, Ordering::Relaxed);
            *lock(&d.owner_ref) = Arc::downgrade(&t);
        }
        lock(&self.dbs).insert(name_bytes, h.clone_ref(py));
        Ok(h)
    }

    /// The names of the named databases, sorted (as `txn` sees them, else a new snapshot).
    #[pyo3(signature = (txn=None))]
    fn dbs<'py>(
        &self,
        py: Python<'py>,
        txn: Option<Bound<'_, Transaction>>,
    ) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        let names = match txn {
            Some(t) => t.get().db_names(t.py())?,
            None => {
                let core = self.core()?;
                let r = core.env.read_txn().map_err(errors::map)?;
                r.db_names().map_err(errors::map)?
            }
        };
        Ok(names
            .iter()
            .map(|n| PyBytes::new(py, n.as_bytes()))
            .collect())
    }

    /// Statistics of the main database (psize, depth, branch_pages, leaf_pages,
    /// overflow_pages, entries).
    fn stat<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let core = self.core()?;
        let r = core.env.read_txn().map_err(errors::map)?;
        let s = r.stat(core.env.main_db()).map_err(errors::map)?;
        stat_dict(py, &s)
    }

    /// Environment figures: map_addr, map_size, last_pgno, last_txnid, max_readers,
    /// num_readers.
    fn info<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let core = self.core()?;
        let i = core.env.info().map_err(errors::map)?;
        let d = PyDict::new(py);
        d.set_item("map_addr", 0)?;
        d.set_item("map_size", i.max_size.unwrap_or(i.file_size))?;
        d.set_item("last_pgno", i.last_pgno)?;
        d.set_item("last_txnid", i.last_txnid)?;
        d.set_item("max_readers", i.max_readers)?;
        d.set_item("num_readers", i.readers)?;
        Ok(d)
    }

    /// The flags given at open, as a dict.
    fn flags<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.core()?;
        let f = self.flags;
        let d = PyDict::new(py);
        for (k, v) in [
            ("subdir", f.subdir),
            ("readonly", f.readonly),
            ("metasync", f.metasync),
            ("sync", f.sync),
            ("map_async", f.map_async),
            ("readahead", f.readahead),
            ("writemap", f.writemap),
            ("meminit", f.meminit),
            ("lock", f.lock),
        ] {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// Largest key size in bytes.
    fn max_key_size(&self) -> PyResult<usize> {
        Ok(self.core()?.env.max_key_size())
    }

    /// Reader table size.
    fn max_readers(&self) -> PyResult<u32> {
        self.core()?;
        Ok(self.max_readers)
    }

    /// The reader table as text: one line per occupied slot (pid, thread, txnid), across
    /// every process sharing the environment.
    fn readers(&self) -> PyResult<String> {
        let core = self.core()?;
        // Idle slots of this process: as many as py-lmdb's spare transactions (see
        // `EnvCore::spare`).
        let me = std::process::id();
        let spare = core.spare.load(Ordering::Relaxed) + core.held.load(Ordering::Relaxed);
        let mut idle = 0u32;
        let readers: Vec<_> = core
            .env
            .readers()
            .into_iter()
            .filter(|r| {
                if r.txnid.is_some() || r.pid != me {
                    return true;
                }
                idle += 1;
                idle <= spare
            })
            .collect();
        if readers.is_empty() {
            return Ok("(no active readers)\n".into());
        }
        let mut s = String::from("    pid     thread     txnid\n");
        for r in readers {
            let txn = r.txnid.map_or_else(|| "-".to_string(), |t| t.to_string());
            s.push_str(&format!("{:>7} {:>10x} {:>9}\n", r.pid, r.thread, txn));
        }
        Ok(s)
    }

    /// Clears the reader slots of processes that died; returns how many were cleared.
    fn reader_check(&self) -> PyResult<usize> {
        self.core()?.env.reader_check().map_err(errors::map)
    }

    /// Changes the size limit. A write transaction must not be active.
    fn set_mapsize(&self, py: Python<'_>, map_size: u64) -> PyResult<()> {
        let core = self.core()?;
        if core.writer.load(Ordering::Acquire) != 0 {
            return Err(errors::Error::new_err(
                "Cannot set_mapsize while a write transaction is active",
            ));
        }
        // As py-lmdb: the environment's open (read) transactions and their cursors end; using
        // them afterwards raises.
        abort_all(py, &core);
        // 0: LMDB's "adopt the size the environment has now" (after MapResizedError).
        let map_size = if map_size == 0 {
            let env = core.env.clone();
            let i = py.detach(move || env.info()).map_err(errors::map)?;
            ((i.last_pgno + 1) * i.page_size as u64).max(i.file_size)
        } else {
            map_size
        };
        core.env
            .set_max_size(Some(map_size))
            .map_err(|e| errors::MapResizedError::new_err(e.to_string()))
    }

    /// Flushes every commit to the disk (useful with sync=False).
    #[pyo3(signature = (force=false))]
    fn sync(&self, py: Python<'_>, force: bool) -> PyResult<()> {
        let _ = force;
        let core = self.core()?;
        if self.readonly {
            return Ok(());
        }
        if core.writer.load(Ordering::Acquire) == thread_tag() {
            return Err(errors::Error::new_err(
                "cannot sync while this thread has a write transaction open",
            ));
        }
        let env = core.env.clone();
        py.detach(move || env.sync()).map_err(errors::map)
    }

    /// Writes a consistent copy into directory `path` (or the file `path` for an
    /// environment opened with subdir=False). `txn`: copy that read transaction's snapshot.
    #[pyo3(signature = (path, compact=false, txn=None))]
    fn copy(
        &self,
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        compact: bool,
        txn: Option<Bound<'_, Transaction>>,
    ) -> PyResult<()> {
        let dest = fs_path(path)?;
        let dest = if self.flags.subdir {
            if !dest.is_dir() {
                return Err(errors::Error::new_err(format!(
                    "{}: No such file or directory",
                    dest.display()
                )));
            }
            // The name the engine gave this environment's own data file.
            let name = data_file(Path::new(&self.path))
                .and_then(|p| p.file_name().map(|n| n.to_os_string()))
                .unwrap_or_else(|| DATA_NAMES[1].into());
            dest.join(name)
        } else {
            dest
        };
        self.copy_to(py, &dest, compact, txn)
    }

    /// Writes a consistent copy of the data file to the open file descriptor `fd`.
    #[pyo3(signature = (fd, compact=false, txn=None))]
    fn copyfd(
        &self,
        py: Python<'_>,
        fd: i32,
        compact: bool,
        txn: Option<Bound<'_, Transaction>>,
    ) -> PyResult<()> {
        if fd < 0 {
            return Err(errors::InvalidParameterError::new_err(format!(
                "copyfd: {fd} is not a file descriptor"
            )));
        }
        let core = self.core()?;
        let dir = core
            .env
            .path()
            .map(|p| {
                if self.flags.subdir {
                    p.to_path_buf()
                } else {
                    p.parent().unwrap_or(Path::new(".")).to_path_buf()
                }
            })
            .unwrap_or_else(std::env::temp_dir);
        let tmp = dir.join(format!(
            ".cairn-copy-{}-{}",
            std::process::id(),
            crate::state::token()
        ));
        let r = self.copy_to(py, &tmp, compact, txn).and_then(|()| {
            py.detach(|| -> std::io::Result<()> {
                use std::os::unix::io::FromRawFd;
                let mut src = std::fs::File::open(&tmp)?;
                // SAFETY: docs/safety.md, "Python bindings": the descriptor stays the
                // caller's; ManuallyDrop keeps the File from closing it.
                let out = unsafe { std::fs::File::from_raw_fd(fd) };
                let mut out = std::mem::ManuallyDrop::new(out);
                std::io::copy(&mut src, &mut *out)?;
                Ok(())
            })
            .map_err(|e| errors::DiskError::new_err(format!("copyfd: {e}")))
        });
        let _ = std::fs::remove_file(&tmp);
        let mut l = tmp.into_os_string();
        l.push("-lock");
        let _ = std::fs::remove_file(l);
        r
    }

    fn __repr__(&self) -> String {
        format!("<cairn.Environment {:?}>", self.path)
    }
}

impl Environment {
    /// LMDB's MDB_MAP_RESIZED, which `open_db` reports: another process grew the data past
    /// this handle's `map_size`. Cairn reads such a file all the same; the error tells a
    /// py-lmdb program what it expects (it then calls `set_mapsize(0)` to adopt the size).
    fn check_map_size(&self, py: Python<'_>) -> PyResult<()> {
        let core = self.core()?;
        let env = core.env.clone();
        let i = py.detach(move || env.info()).map_err(errors::map)?;
        match i.max_size {
            Some(limit) if (i.last_pgno + 1) * i.page_size as u64 > limit => {
                Err(errors::MapResizedError::new_err(format!(
                    "another process grew the environment to {} bytes, past this handle's \
                     map_size of {limit}: call set_mapsize(0) to adopt its size",
                    (i.last_pgno + 1) * i.page_size as u64
                )))
            }
            _ => Ok(()),
        }
    }
}

/// One `write_grouped` call, as the group's leader runs it.
struct GroupedCall {
    env: Py<Environment>,
    func: Py<PyAny>,
    db: Py<PyDatabase>,
    core: Arc<EnvCore>,
}

/// What a `write_grouped` callback left for its caller: its result, or the exception it
/// raised (or that ended it).
#[derive(Default)]
struct GroupedOut {
    value: Option<Py<PyAny>>,
    raised: Option<PyErr>,
}

/// Ends a grouped callback's state (cursors, nested levels, memoryviews, the lent pointer),
/// also on unwind: the leader gets its transaction back only after this.
struct EndGrouped<'a, 'py> {
    shared: &'a TxnShared,
    py: Python<'py>,
}

impl Drop for EndGrouped<'_, '_> {
    fn drop(&mut self) {
        let _ = self.shared.end_root(self.py, false);
    }
}

impl GroupedCall {
    /// Runs on the group's leader thread, in its nested transaction `txn`: calls the callable
    /// with a `Transaction` lent `txn` for the call (docs/safety.md §6, "Grouped
    /// writes"). An error (the callable's exception, kept in `out`) rolls back this
    /// call's changes alone.
    fn run(&self, txn: &mut cairn::RwTxn<'_>, out: &mut GroupedOut) -> cairn::Result<()> {
        Python::attach(|py| {
            let st = TxnState::new_grouped(self.core.env.clone(), GroupedRw::lend(txn));
            let token = st.tokens[0];
            let shared = Arc::new(TxnShared {
                state: StateCell::new(st),
                views: Mutex::new(Vec::new()),
                write: true,
                buffers: false,
                core: self.core.clone(),
                pid: std::process::id(),
                ended_read: Default::default(),
                grouped: true,
            });
            let end = EndGrouped {
                shared: &shared,
                py,
            };
            self.core.track(&shared);
            self.core.writer.store(thread_tag(), Ordering::Release);
            let t = Transaction::grouped(
                shared.clone(),
                token,
                self.env.clone_ref(py),
                self.db.clone_ref(py),
            );
            let r = Py::new(py, t).and_then(|t| self.func.call1(py, (t,)));
            // Ended by someone else meanwhile: the environment was closed during the call.
            let ended = shared.state.lock(py).is_none();
            drop(end);
            let failed = || cairn::Error::Invalid("the write_grouped callback failed".into());
            match r {
                Err(e) => {
                    out.raised = Some(e);
                    Err(failed())
                }
                Ok(_) if ended => {
                    out.raised = Some(closed());
                    Err(failed())
                }
                Ok(v) => {
                    out.value = Some(v);
                    Ok(())
                }
            }
        })
    }
}

/// Aborts every live transaction of the environment (`close`, `set_mapsize`).
fn abort_all(py: Python<'_>, core: &EnvCore) {
    let txns = std::mem::take(&mut *lock(&core.txns));
    for t in txns.iter().filter_map(std::sync::Weak::upgrade) {
        let _ = t.end_root(py, false);
    }
}

impl Environment {
    /// Forgets a cached handle (after `Transaction.drop`).
    pub(crate) fn forget_db(&self, name: &[u8]) {
        lock(&self.dbs).remove(name);
    }

    fn copy_to(
        &self,
        py: Python<'_>,
        dest: &Path,
        compact: bool,
        txn: Option<Bound<'_, Transaction>>,
    ) -> PyResult<()> {
        let core = self.core()?;
        if txn.is_some() && !compact {
            // py-lmdb's rule (its patched LMDB copies a given transaction only compacting).
            return Err(PyTypeError::new_err(
                "txn argument only compatible with compact=True",
            ));
        }
        match txn {
            None => {
                let env = core.env.clone();
                py.detach(|| env.copy_to(dest, compact))
                    .map_err(errors::map)
            }
            Some(t) => t.get().copy_to(py, dest, compact),
        }
    }
}

/// The error for opening a database that does not exist: LMDB answers EACCES (py-lmdb's
/// `ReadonlyError`) when it was asked to create it where it cannot write (a read-only
/// environment or transaction), MDB_NOTFOUND otherwise.
pub(crate) fn missing_db(e: cairn::Error, create: bool) -> PyErr {
    match e {
        cairn::Error::DbNotFound { .. } if create => errors::ReadonlyError::new_err(format!(
            "{e}; it cannot be created in a read-only environment or transaction"
        )),
        e => errors::map(e),
    }
}

pub(crate) fn stat_dict<'py>(py: Python<'py>, s: &cairn::Stat) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("psize", s.page_size)?;
    d.set_item("depth", s.depth)?;
    d.set_item("branch_pages", s.branch_pages)?;
    d.set_item("leaf_pages", s.leaf_pages)?;
    d.set_item("overflow_pages", s.overflow_pages)?;
    d.set_item("entries", s.entries)?;
    Ok(d)
}
