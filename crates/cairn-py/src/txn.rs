//! `Transaction`: py-lmdb's transaction, over [`TxnState`].
//!
//! A top-level transaction owns a [`TxnShared`]; a nested one (`parent=`) shares its parent's
//! and stands at a deeper level. Only the innermost level may be used (the engine's nested
//! transactions are a stack); using an outer one raises `BadTxnError`.

use crate::convert::{arg, finish, grab, key_arg};
use crate::cursor::Cursor;
use crate::env::{stat_dict, Environment, PyDatabase};
use crate::errors::{self, closed};
use crate::fastcall::{fast_method, opt_bool, opt_class};
use crate::state::{thread_tag, Kind, StateCell, StateGuard, TxnShared, TxnState};
use cairn::{Database, PutFlags};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyTuple};
use pyo3::Borrowed;
use std::ffi::CStr;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// A transaction. Use it as a context manager (commit on success, abort on an exception) or
/// call `commit`/`abort`; dropping it unfinished aborts it.
#[pyclass(frozen, weakref, module = "cairn", name = "Transaction")]
pub struct Transaction {
    pub(crate) shared: Arc<TxnShared>,
    pub(crate) depth: usize,
    pub(crate) token: u64,
    /// The environment this transaction belongs to.
    #[pyo3(get)]
    env: Py<Environment>,
    db: Py<PyDatabase>,
    dup: bool,
    _parent: Option<Py<Transaction>>,
}

impl Transaction {
    pub(crate) fn begin(
        env: &Bound<'_, Environment>,
        db: Option<Py<PyDatabase>>,
        parent: Option<Bound<'_, Transaction>>,
        write: bool,
        buffers: bool,
    ) -> PyResult<Transaction> {
        let py = env.py();
        let e = env.get();
        let core = e.core()?;
        let db = db.unwrap_or_else(|| e.main_db().clone_ref(py));
        let dup = db.get().dup();
        if let Some(p) = parent {
            let pt = p.get();
            if !write || !pt.shared.write {
                return Err(errors::InvalidParameterError::new_err(
                    "a nested transaction needs write=True and a write parent",
                ));
            }
            let (depth, token) = {
                let mut g = pt.shared.state.lock(py);
                let st = g.as_mut().ok_or_else(closed)?;
                st.check(pt.depth, pt.token)?;
                st.begin_nested()?
            };
            return Ok(Transaction {
                shared: pt.shared.clone(),
                depth,
                token,
                env: env.clone().unbind(),
                db,
                dup,
                _parent: Some(p.unbind()),
            });
        }
        let st = if write {
            if e.readonly {
                return Err(errors::ReadonlyError::new_err(
                    "Cannot start write transaction with read-only env",
                ));
            }
            if core.writer.load(Ordering::Acquire) == thread_tag() {
                return Err(errors::Error::new_err(
                    "Attempt to start a write transaction while another write transaction is \
                     active on the same thread. This would deadlock.",
                ));
            }
            let envc = core.env.clone();
            // Waits for the writer lock without holding the GIL.
            let st = py
                .detach(move || TxnState::new_rw(envc))
                .map_err(errors::map)?;
            core.writer.store(thread_tag(), Ordering::Release);
            st
        } else {
            let st = TxnState::new_ro(core.env.clone()).map_err(errors::map)?;
            core.take_spare();
            st
        };
        let token = st.tokens[0];
        let shared = Arc::new(TxnShared {
            state: StateCell::new(st),
            views: Mutex::new(Vec::new()),
            write,
            buffers,
            core: core.clone(),
            pid: std::process::id(),
            ended_read: Default::default(),
            grouped: false,
        });
        core.track(&shared);
        if e.is_closed() {
            // `close` ran while this transaction was beginning (a write transaction waits
            // without the GIL): it would escape the close, so it ends here.
            shared.end_root(py, false)?;
            return Err(closed());
        }
        Ok(Transaction {
            shared,
            depth: 0,
            token,
            env: env.clone().unbind(),
            db,
            dup,
            _parent: None,
        })
    }

    /// The transaction handed to a `write_grouped` callback: the root (its token `token`) of
    /// `shared`, a grouped state, with `db` as its default database.
    pub(crate) fn grouped(
        shared: Arc<TxnShared>,
        token: u64,
        env: Py<Environment>,
        db: Py<PyDatabase>,
    ) -> Transaction {
        let dup = db.get().dup();
        Transaction {
            shared,
            depth: 0,
            token,
            env,
            db,
            dup,
            _parent: None,
        }
    }

    /// The state, checked to be this level's and usable.
    #[inline]
    pub(crate) fn state(&self, py: Python<'_>) -> PyResult<StateGuard<'_>> {
        let g = self.shared.state.lock(py);
        match g.as_ref() {
            Some(st) => st.check(self.depth, self.token)?,
            None => return Err(closed()),
        }
        Ok(g)
    }

    /// The database to use and whether it keeps sorted duplicates.
    #[inline]
    fn dbv(
        &self,
        py: Python<'_>,
        db: Option<&Bound<'_, PyDatabase>>,
    ) -> PyResult<(Database, bool)> {
        match db {
            Some(d) => Ok((d.get().handle(py, &self.shared)?, d.get().dup())),
            None => Ok((self.db.get().handle(py, &self.shared)?, self.dup)),
        }
    }

    /// `Transaction.get` (entry point: [`get_entry`]).
    #[inline]
    fn get_impl<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        default: Option<Borrowed<'_, 'py, PyAny>>,
        db: Option<&Bound<'py, PyDatabase>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let k = key_arg(key)?;
        let (dbv, _) = self.dbv(py, db)?;
        let out = {
            let g = self.state(py)?;
            let st = g.as_ref().expect("checked");
            match st.get(dbv, &k).map_err(errors::map)? {
                Some(v) if !self.shared.buffers => return Ok(PyBytes::new(py, v).into_any()),
                Some(v) => Some(grab(py, &self.shared, v)),
                None => None,
            }
        };
        match out {
            Some(o) => finish(py, &self.shared, o),
            None => Ok(default.map_or_else(|| py.None().into_bound(py), |d| d.to_owned())),
        }
    }

    /// `Transaction.put` (entry point: [`put_entry`]).
    #[inline]
    fn put_impl(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        flags: (bool, bool, bool),
        db: Option<&Bound<'_, PyDatabase>>,
    ) -> PyResult<bool> {
        let (dupdata, overwrite, append) = flags;
        let k = key_arg(key)?;
        let v = arg(value)?;
        let (dbv, dup) = self.dbv(py, db)?;
        let mut g = self.state(py)?;
        let t = g.as_mut().expect("checked").rw_mut()?;
        put_result(t.put(
            dbv,
            &k,
            &v,
            flags_for(dup, dupdata, overwrite, append, false),
        ))
    }

    /// `Transaction.delete` (entry point: [`delete_entry`]).
    #[inline]
    fn delete_impl(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: Option<&Bound<'_, PyAny>>,
        db: Option<&Bound<'_, PyDatabase>>,
    ) -> PyResult<bool> {
        let k = key_arg(key)?;
        let v = value.map(arg).transpose()?;
        let (dbv, dup) = self.dbv(py, db)?;
        let mut g = self.state(py)?;
        let st = g.as_mut().expect("checked");
        let t = st.rw_mut()?;
        let done = match v {
            Some(v) if dup && !v.is_empty() => t.delete_pair(dbv, &k, &v),
            _ => t.delete(dbv, &k),
        }
        .map_err(errors::map)?;
        if done {
            st.after_delete().map_err(errors::map)?;
        }
        Ok(done)
    }

    pub(crate) fn open_db(
        &self,
        py: Python<'_>,
        name: &str,
        flags: cairn::DbFlags,
    ) -> PyResult<Database> {
        let mut g = self.state(py)?;
        let st = g.as_mut().expect("checked");
        if let Some(Kind::Ro(t)) = st.kind.as_ref() {
            return t
                .open_db(Some(name))
                .map_err(|e| crate::env::missing_db(e, flags.contains(cairn::DbFlags::CREATE)));
        }
        st.rw_mut()?
            .create_db(Some(name), flags)
            .map_err(errors::map)
    }

    pub(crate) fn db_names(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let g = self.state(py)?;
        let st = g.as_ref().expect("checked");
        match st.kind.as_ref() {
            Some(Kind::Ro(t)) => t.db_names(),
            _ => match st.rw_ref() {
                Some(t) => t.db_names(),
                None => return Err(closed()),
            },
        }
        .map_err(errors::map)
    }

    pub(crate) fn copy_to(&self, py: Python<'_>, dest: &Path, compact: bool) -> PyResult<()> {
        let g = self.shared.state.lock(py);
        let txn = match g.as_ref() {
            Some(st) if st.tokens.get(self.depth) == Some(&self.token) => match st.kind.as_ref() {
                Some(Kind::Ro(t)) => &**t,
                _ => {
                    return Err(errors::InvalidParameterError::new_err(
                        "copy from a transaction needs a read-only transaction",
                    ))
                }
            },
            _ => return Err(errors::InvalidParameterError::new_err(errors::CLOSED)),
        };
        /// The transaction, lent to the copy while the GIL is released.
        struct Lent(*const cairn::RoTxn<'static>);
        // SAFETY: docs/safety.md §6, "State lock": the transaction moves to the copying thread
        // (this one, without the GIL) while `g` keeps the lock held, so nothing else reaches
        // it until the copy returns; the engine's read transactions are `Send`.
        unsafe impl Send for Lent {}
        let lent = Lent(txn);
        // Others who want this transaction meanwhile wait with the GIL released.
        let r = py.detach(move || {
            let lent = lent;
            // SAFETY: as above: `g` (held until after this returns) keeps the transaction
            // alive and this thread its only user.
            let txn = unsafe { &*lent.0 };
            txn.copy_to_file(dest, compact)
        });
        drop(g);
        r.map_err(errors::map)
    }

    /// Whether this level is still open.
    fn live(&self, py: Python<'_>) -> bool {
        let g = self.shared.state.lock(py);
        g.as_ref()
            .is_some_and(|st| st.tokens.get(self.depth) == Some(&self.token))
    }

    fn end(&self, py: Python<'_>, commit: bool) -> PyResult<()> {
        if self.depth == 0 {
            if self.shared.grouped && self.live(py) {
                return Err(errors::Error::new_err(
                    "a write_grouped callback's transaction is committed by its group: return \
                     from the callback to keep its changes, raise to roll them back",
                ));
            }
            return self.shared.end_root(py, commit);
        }
        let mut g = self.shared.state.lock(py);
        match g.as_mut() {
            Some(st) => st.end_nested(self.depth, self.token, commit),
            None => Ok(()),
        }
    }
}

/// Outcome of a put the way py-lmdb reports it: `False` when the key existed and
/// `overwrite=False`, or `append=True` and the key was out of order.
pub(crate) fn put_result(r: Result<(), cairn::Error>) -> PyResult<bool> {
    match r {
        Ok(()) => Ok(true),
        Err(cairn::Error::KeyExists | cairn::Error::AppendOrder) => Ok(false),
        Err(e) => Err(errors::map(e)),
    }
}

/// py-lmdb's put options as engine flags: dupdata=False is NO_DUP_DATA (dupsort databases
/// only), overwrite=False NO_OVERWRITE, append=True APPEND (`Cursor.put` passes
/// `append_dup` to use APPEND_DUP in dupsort databases, as py-lmdb does).
pub(crate) fn flags_for(
    dup: bool,
    dupdata: bool,
    overwrite: bool,
    append: bool,
    append_dup: bool,
) -> PutFlags {
    let mut f = PutFlags::empty();
    if !overwrite {
        f = f | PutFlags::NO_OVERWRITE;
    }
    if dup && !dupdata {
        f = f | PutFlags::NO_DUP_DATA;
    }
    if append {
        f = f | if dup && append_dup {
            PutFlags::APPEND_DUP
        } else {
            PutFlags::APPEND
        };
    }
    f
}

#[pymethods]
impl Transaction {
    #[new]
    #[pyo3(signature = (env, db=None, parent=None, write=false, buffers=false))]
    fn new(
        env: &Bound<'_, Environment>,
        db: Option<Py<PyDatabase>>,
        parent: Option<Bound<'_, Transaction>>,
        write: bool,
        buffers: bool,
    ) -> PyResult<Transaction> {
        Transaction::begin(env, db, parent, write, buffers)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (exc_type=None, _exc=None, _tb=None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        _exc: Option<&Bound<'_, PyAny>>,
        _tb: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let ok = exc_type.is_none_or(|t| t.is_none());
        // Already ended (by commit/abort inside the block, or the environment's close): no-op.
        if !self.live(py) {
            return Ok(());
        }
        self.end(py, ok)
    }

    /// The transaction's id: for a read transaction, the snapshot it reads.
    fn id(&self, py: Python<'_>) -> PyResult<u64> {
        let g = self.shared.state.lock(py);
        match g.as_ref() {
            Some(st) if st.tokens.get(self.depth) == Some(&self.token) => Ok(st.id()),
            _ => Err(closed()),
        }
    }

    /// Statistics of a database (default: the transaction's database).
    #[pyo3(signature = (db=None))]
    fn stat<'py>(
        &self,
        py: Python<'py>,
        db: Option<&Bound<'_, PyDatabase>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let s = {
            let g = self.state(py)?;
            g.as_ref().expect("checked").stat(self.dbv(py, db)?.0)
        }
        .map_err(errors::map)?;
        stat_dict(py, &s)
    }

    /// Empties `db`; with delete=True also deletes it (the main database is only emptied).
    #[pyo3(signature = (db, delete=true))]
    fn drop(&self, py: Python<'_>, db: &Bound<'_, PyDatabase>, delete: bool) -> PyResult<()> {
        let d = db.get();
        let h = d.handle(py, &self.shared)?;
        {
            let mut g = self.state(py)?;
            let st = g.as_mut().expect("checked");
            let t = st.rw_mut()?;
            if delete { t.drop_db(h) } else { t.clear_db(h) }.map_err(errors::map)?;
            if !delete {
                st.after_delete().map_err(errors::map)?;
            }
        }
        if delete {
            d.dropped.store(true, Ordering::Relaxed);
            if let Some(n) = &d.name {
                self.env.get().forget_db(n);
            }
        }
        Ok(())
    }

    /// Commits (a nested transaction: into its parent). Releases the GIL while flushing.
    /// A transaction already ended (committed, aborted, or its environment closed) raises
    /// `cairn.Error`, as in py-lmdb; `abort` of one has no effect.
    fn commit(&self, py: Python<'_>) -> PyResult<()> {
        if !self.live(py) {
            return Err(closed());
        }
        self.end(py, true)
    }

    /// The environment (py-lmdb's CFFI implementation names it so; its `lmdb.aio` reads it).
    #[getter]
    fn _pyenv(&self, py: Python<'_>) -> Py<Environment> {
        self.env.clone_ref(py)
    }

    /// Discards every change (a nested transaction: its own changes only).
    fn abort(&self, py: Python<'_>) -> PyResult<()> {
        self.end(py, false)
    }

    /// Stores `value` under `key`; returns the previous value or None.
    #[pyo3(signature = (key, value, db=None))]
    fn replace<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        value: &Bound<'py, PyAny>,
        db: Option<&Bound<'py, PyDatabase>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let k = key_arg(key)?;
        let v = arg(value)?;
        let (dbv, dup) = self.dbv(py, db)?;
        let old = {
            let mut g = self.state(py)?;
            let st = g.as_mut().expect("checked");
            let old = st
                .get(dbv, &k)
                .map_err(errors::map)?
                .map(|o| grab(py, &self.shared, o));
            let t = st.rw_mut()?;
            if dup {
                // The key's values are all replaced by the one given.
                t.delete(dbv, &k).map_err(errors::map)?;
            }
            t.put(dbv, &k, &v, PutFlags::empty()).map_err(errors::map)?;
            if dup {
                st.after_delete().map_err(errors::map)?;
            }
            old
        };
        match old {
            Some(o) => finish(py, &self.shared, o),
            None => Ok(py.None().into_bound(py)),
        }
    }

    /// Deletes `key`; returns its value, or None if it did not exist.
    #[pyo3(signature = (key, db=None))]
    fn pop<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        db: Option<&Bound<'py, PyDatabase>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let k = key_arg(key)?;
        let (dbv, dup) = self.dbv(py, db)?;
        let old = {
            let mut g = self.state(py)?;
            let st = g.as_mut().expect("checked");
            let first = st.get(dbv, &k).map_err(errors::map)?;
            let old = first.map(|o| grab(py, &self.shared, o));
            // In a dupsort database only the first value goes.
            let first = first.filter(|_| dup).map(<[u8]>::to_vec);
            if old.is_some() {
                let t = st.rw_mut()?;
                match first {
                    Some(v) => t.delete_pair(dbv, &k, &v),
                    None => t.delete(dbv, &k),
                }
                .map_err(errors::map)?;
                st.after_delete().map_err(errors::map)?;
            }
            old
        };
        match old {
            Some(o) => finish(py, &self.shared, o),
            None => Ok(py.None().into_bound(py)),
        }
    }

    /// A cursor over `db` (default: the transaction's database).
    #[pyo3(signature = (db=None))]
    fn cursor(slf: &Bound<'_, Self>, db: Option<Py<PyDatabase>>) -> PyResult<Cursor> {
        let db = db.unwrap_or_else(|| slf.get().db.clone_ref(slf.py()));
        Cursor::open(slf, db)
    }

    fn __repr__(&self) -> String {
        format!(
            "<cairn.Transaction write={} depth={}>",
            self.shared.write, self.depth
        )
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        Python::attach(|py| {
            let _ = self.end(py, false);
        });
    }
}

/// Docstring of `Transaction.get`, with its text signature.
pub(crate) const GET_DOC: &CStr = c"get($self, key, default=None, db=None)\n--\n\n\
The value stored under `key`, or `default`.";

fast_method! {
    /// `Transaction.get(key, default=None, db=None)`, called by CPython (see crate::fastcall).
    pub(crate) fn get_entry(Transaction, "Transaction.get", 1; key, default, db) |py, slf| {
        let db = opt_class::<PyDatabase>(db, "db")?;
        let key = key.expect("required");
        slf.get()
            .get_impl(py, &key, default, db.as_deref())
            .map(Bound::into_ptr)
    }
}

/// Docstring of `Transaction.put`, with its text signature.
pub(crate) const PUT_DOC: &CStr =
    c"put($self, key, value, dupdata=True, overwrite=True, append=False, db=None)\n--\n\n\
Stores `value` under `key`; returns False if the key existed and overwrite=False (or, with \
append=True, was not greater than every key).";

fast_method! {
    /// `Transaction.put(key, value, dupdata=True, overwrite=True, append=False, db=None)`,
    /// called by CPython (see crate::fastcall).
    pub(crate) fn put_entry(
        Transaction, "Transaction.put", 2; key, value, dupdata, overwrite, append, db
    ) |py, slf| {
        let flags = (
            opt_bool(dupdata, "dupdata", true)?,
            opt_bool(overwrite, "overwrite", true)?,
            opt_bool(append, "append", false)?,
        );
        let db = opt_class::<PyDatabase>(db, "db")?;
        let (key, value) = (key.expect("required"), value.expect("required"));
        let done = slf.get().put_impl(py, &key, &value, flags, db.as_deref())?;
        Ok(PyBool::new(py, done).to_owned().into_any().into_ptr())
    }
}

/// Docstring of `Transaction.delete`, with its text signature.
pub(crate) const DELETE_DOC: &CStr = c"delete($self, key, value=None, db=None)\n--\n\n\
Deletes `key`; returns whether it existed. In a dupsort database a non-empty `value` deletes \
only that pair, an empty one every value of `key`; elsewhere `value` is ignored, as in LMDB.";

fast_method! {
    /// `Transaction.delete(key, value=None, db=None)`, called by CPython (see crate::fastcall).
    pub(crate) fn delete_entry(Transaction, "Transaction.delete", 1; key, value, db) |py, slf| {
        let db = opt_class::<PyDatabase>(db, "db")?;
        let value = value.filter(|v| !v.is_none());
        let key = key.expect("required");
        let done = slf.get().delete_impl(py, &key, value.as_deref(), db.as_deref())?;
        Ok(PyBool::new(py, done).to_owned().into_any().into_ptr())
    }
}

/// `(a, b)` as a tuple, built after the transaction lock is released.
pub(crate) fn pair<'py>(
    py: Python<'py>,
    a: Bound<'py, PyAny>,
    b: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyTuple>> {
    // The fixed-size conversion fills a new tuple directly (no iterator protocol).
    (a, b).into_pyobject(py)
}
