//! `Cursor` and its iterators: LMDB's positioning vocabulary over one database.
//!
//! A cursor is a slot of its transaction's [`TxnState`]; it stands on an entry (`valid`) or
//! not, in which case `key()`/`value()` return empty bytes as in py-lmdb. In a dupsort
//! database an entry is one (key, value) pair and the `_dup`/`_nodup` operations move among a
//! key's values or between keys; elsewhere LMDB's answers: `next_dup`/`prev_dup` and
//! `next_nodup`/`prev_nodup` are `next`/`prev`, and `first_dup`/`last_dup`/`count()`/
//! `set_key_dup`/`set_range_dup` raise `IncompatibleError`.
//!
//! Several cursors of one write transaction: a pair deleted under a cursor (through another
//! cursor or the transaction) leaves it waiting in the pair's gap, as LMDB's C_DEL does: its
//! next step forward lands on the pair that followed, its key()/value() read that pair
//! (`state::Saved::Gone`).
//!
//! Over 1,000 lines on purpose: py-lmdb's `Cursor` is one class of some forty methods, and
//! they share the position logic here (`cursor_calls.rs` holds the plain CPython entry points).

use crate::convert::{arg, bytes_contents, finish, grab, key_arg, Arg, Out};
use crate::env::PyDatabase;
use crate::errors::{self, closed};
use crate::fastcall::enter;
use crate::state::{Saved, Slot, StateGuard};
use crate::txn::{flags_for, pair, put_result, Transaction};
use cairn::PutFlags;
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyList, PyMemoryView, PyTuple};
use pyo3::Borrowed;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// A movement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    First,
    Last,
    Next,
    Prev,
    NextDup,
    PrevDup,
    NextNodup,
    PrevNodup,
}

/// A cursor over one database of one transaction.
#[pyclass(frozen, weakref, module = "cairn", name = "Cursor")]
pub struct Cursor {
    shared: Arc<crate::state::TxnShared>,
    slot: usize,
    id: u64,
    /// The transaction the cursor belongs to.
    #[pyo3(get)]
    txn: Py<Transaction>,
    /// The database the cursor walks.
    #[pyo3(get)]
    db: Py<PyDatabase>,
    closed: AtomicBool,
}

type Guard<'a> = StateGuard<'a>;

impl Cursor {
    pub(crate) fn open(txn: &Bound<'_, Transaction>, db: Py<PyDatabase>) -> PyResult<Cursor> {
        let t = txn.get();
        let h = db.get().handle(txn.py(), &t.shared)?;
        let (slot, id) = {
            let mut g = t.state(txn.py())?;
            g.as_mut()
                .expect("checked")
                .open_cursor(h, db.get().dup(), t.depth, t.token)
                .map_err(errors::map)?
        };
        Ok(Cursor {
            shared: t.shared.clone(),
            slot,
            id,
            txn: txn.clone().unbind(),
            db,
            closed: AtomicBool::new(false),
        })
    }

    #[inline]
    fn lock(&self, py: Python<'_>) -> PyResult<Guard<'_>> {
        if self.closed.load(Ordering::Relaxed) {
            return Err(closed());
        }
        let g = self.shared.state.lock(py);
        if g.is_none() {
            return Err(closed());
        }
        Ok(g)
    }

    #[inline]
    fn slot<'g>(&self, g: &'g mut Guard<'_>) -> PyResult<&'g mut Slot> {
        g.as_mut().expect("checked").cursor(self.slot, self.id)
    }

    pub(crate) fn step(&self, py: Python<'_>, s: Step) -> PyResult<bool> {
        let mut g = self.lock(py)?;
        let sl = self.slot(&mut g)?;
        move_slot(sl, s)
    }

    pub(crate) fn seek(&self, py: Python<'_>, key: &[u8], exact: bool) -> PyResult<bool> {
        let mut g = self.lock(py)?;
        let sl = self.slot(&mut g)?;
        let c = sl.cur.as_mut().expect("live");
        let r = if exact { c.set(key) } else { c.set_range(key) };
        Ok(sl.land(r.map_err(errors::map)?))
    }

    /// The current entry (key and/or value) captured under the lock.
    fn current<'py>(
        &self,
        py: Python<'py>,
        g: &mut Guard<'_>,
        keys: bool,
        values: bool,
    ) -> PyResult<Option<(Option<Out<'py>>, Option<Out<'py>>)>> {
        Ok(entry(self.slot(g)?)?.map(|(k, v)| {
            (
                keys.then(|| grab(py, &self.shared, k)),
                values.then(|| grab(py, &self.shared, v)),
            )
        }))
    }

    /// `key()`, `value()` or `item()` (both): the current entry's parts, empty ones when the
    /// cursor is unpositioned.
    pub(crate) fn read<'py>(
        &self,
        py: Python<'py>,
        keys: bool,
        values: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let (k, v) = {
            let mut g = self.lock(py)?;
            if self.shared.buffers {
                self.current(py, &mut g, keys, values)?.unwrap_or_else(|| {
                    let e = || grab(py, &self.shared, b"");
                    (keys.then(e), values.then(e))
                })
            } else {
                // `bytes` made here, the tuple after the lock.
                let (k, v) = entry(self.slot(&mut g)?)?.unwrap_or((b"", b""));
                let b = |s: &[u8]| Out::Obj(PyBytes::new(py, s).into_any());
                (keys.then(|| b(k)), values.then(|| b(v)))
            }
        };
        let k = k.map(|k| finish(py, &self.shared, k)).transpose()?;
        let v = v.map(|v| finish(py, &self.shared, v)).transpose()?;
        Ok(match (k, v) {
            (Some(k), Some(v)) => pair(py, k, v)?.into_any(),
            (Some(x), None) | (None, Some(x)) => x,
            (None, None) => py.None().into_bound(py),
        })
    }

    /// Changes data through the write transaction (given the database and whether it keeps
    /// duplicates), then places this cursor at the (key, value) `at` returns.
    fn write<R>(
        &self,
        py: Python<'_>,
        at: impl FnOnce(&R) -> Option<(Vec<u8>, Vec<u8>)>,
        f: impl FnOnce(&mut cairn::RwTxn<'static>, cairn::Database, bool) -> PyResult<R>,
    ) -> PyResult<R> {
        self.write_with(py, false, at, f)
    }

    /// [`Cursor::write`]; `deletes`: the change may delete pairs, so the other cursors whose
    /// pair went wait in its gap, and this one goes to the pair `at` names, or (deleted) the
    /// one that followed it.
    fn write_with<R>(
        &self,
        py: Python<'_>,
        deletes: bool,
        at: impl FnOnce(&R) -> Option<(Vec<u8>, Vec<u8>)>,
        f: impl FnOnce(&mut cairn::RwTxn<'static>, cairn::Database, bool) -> PyResult<R>,
    ) -> PyResult<R> {
        let mut g = self.lock(py)?;
        let st = g.as_mut().expect("checked");
        let (db, dup) = {
            // As it is: a parked engine cursor need not be rebuilt to be parked again.
            let sl = st.slot_mut(self.slot, self.id)?;
            (sl.db, sl.dup)
        };
        let r = f(st.rw_mut()?, db, dup)?;
        if deletes {
            st.after_delete().map_err(errors::map)?;
            if let Some(pair) = at(&r) {
                st.slot_mut(self.slot, self.id)?;
                st.place_after_own_delete(self.slot, pair)
                    .map_err(errors::map)?;
            }
            return Ok(r);
        }
        if let Some((k, v)) = at(&r) {
            // Parked by `rw_mut`: the engine cursor is rebuilt there on next use.
            let sl = st.slot_mut(self.slot, self.id)?;
            sl.cur = None;
            sl.saved = Saved::At(k, v);
        }
        Ok(r)
    }

    /// `Cursor.put`: stores `val` under `key` and moves there; False if the key existed and
    /// overwrite=False (or, with append=True, was out of order).
    pub(crate) fn put_one(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        val: &Bound<'_, PyAny>,
        opts: PutOpts,
    ) -> PyResult<bool> {
        let (dupdata, overwrite, append) = opts;
        let k = key_arg(key)?;
        let v = arg(val)?;
        self.write(
            py,
            |ok: &bool| ok.then(|| (k.to_vec(), v.to_vec())),
            |t, db, dup| {
                let flags = flags_for(dup, dupdata, overwrite, append, true);
                put_result(t.put(db, &k, &v, flags))
            },
        )
    }

    /// The current pair, copied (None if unpositioned).
    fn here(&self, py: Python<'_>) -> PyResult<Option<(Vec<u8>, Vec<u8>)>> {
        let mut g = self.lock(py)?;
        let sl = self.slot(&mut g)?;
        if !sl.valid {
            return Ok(None);
        }
        Ok(sl
            .cur
            .as_ref()
            .expect("live")
            .current()
            .map_err(errors::map)?
            .map(|(k, v)| (k.to_vec(), v.to_vec())))
    }

    fn iter(slf: &Bound<'_, Self>, s: Step, keys: bool, values: bool) -> PyResult<Iter> {
        Ok(Iter {
            cursor: slf.clone().unbind(),
            step: s,
            // Neither keys nor values: keys, as py-lmdb yields.
            keys: keys || !values,
            values,
            started: AtomicBool::new(false),
        })
    }

    fn is_valid(&self, py: Python<'_>) -> PyResult<bool> {
        let mut g = self.lock(py)?;
        Ok(self.slot(&mut g)?.valid)
    }
}

/// Moves a slot's cursor one step.
fn move_slot(sl: &mut Slot, s: Step) -> PyResult<bool> {
    Ok(step_entry(sl, s)?.is_some())
}

/// The entry a slot's cursor stands on (None if unpositioned), valid while the transaction
/// lock is held: the one its last move returned, or else the engine's answer.
#[inline]
fn entry(sl: &mut Slot) -> PyResult<Option<(&'static [u8], &'static [u8])>> {
    // Read, the pair that followed a deleted one is where the cursor stands (LMDB's
    // GET_CURRENT clears C_DEL); at the end it keeps waiting there.
    if sl.valid && sl.gone.is_some() {
        sl.gone = None;
    }
    if !sl.valid {
        return Ok(None);
    }
    let e = match sl.here {
        Some(e) => Some(e),
        None => sl
            .cur
            .as_ref()
            .expect("live")
            .current()
            .map_err(errors::map)?,
    };
    sl.valid = e.is_some();
    Ok(e)
}

/// Moves a slot's cursor one step; returns the entry it lands on (valid while the
/// transaction lock is held).
#[inline]
fn step_entry(sl: &mut Slot, s: Step) -> PyResult<Option<(&'static [u8], &'static [u8])>> {
    // Outside dupsort databases LMDB's NEXT_DUP/PREV_DUP are NEXT/PREV (every key is its
    // own run of one value, and the step goes on to the next run).
    let s = match s {
        Step::NextDup if !sl.dup => Step::Next,
        Step::PrevDup if !sl.dup => Step::Prev,
        s => s,
    };
    if sl.gone.is_some() {
        let pair = sl.gone.take().expect("checked");
        return gone_step(sl, s, pair);
    }
    let was = sl.valid || sl.anchored;
    let here = sl.here;
    let c = sl.cur.as_mut().expect("live");
    // Where a plain step starts, to stay there if it fails (below).
    let from = match (was, s) {
        (true, Step::Next | Step::Prev | Step::NextNodup | Step::PrevNodup) => match here {
            Some(e) => Some(e),
            None => c.current().map_err(errors::map)?,
        },
        _ => None,
    };
    let r = match s {
        Step::First => c.first(),
        Step::Last => c.last(),
        Step::Next => c.next(),
        Step::Prev => c.prev(),
        Step::NextDup => c.next_dup(),
        Step::PrevDup => c.prev_dup(),
        Step::NextNodup => c.next_nodup(),
        Step::PrevNodup => c.prev_nodup(),
    };
    let e = r.map_err(errors::map)?;
    sl.land(e);
    if e.is_none() && was {
        // LMDB keeps the position of a failed step (py-lmdb then reports the cursor
        // unpositioned): stepping on from there moves from the edge, not from the far end.
        sl.anchored = match (s, from) {
            (Step::NextDup | Step::PrevDup, _) => true,
            (_, Some((k, v))) => {
                let c = sl.cur.as_mut().expect("live");
                crate::state::seek_pair(c, sl.dup, k, v).map_err(errors::map)?
            }
            _ => false,
        };
    }
    Ok(e)
}

/// Reports the cursor unpositioned while its engine cursor keeps its place (see
/// `Slot::anchored`).
fn unposition(sl: &mut Slot) {
    let anchored = sl.valid || sl.anchored;
    sl.land(None);
    sl.anchored = anchored;
}

/// A step of a cursor waiting in the gap of the deleted `pair` (see `Slot::gone`): forward,
/// the pair that followed it, without moving (LMDB's C_DEL); backward, from the gap.
#[cold]
fn gone_step(
    sl: &mut Slot,
    s: Step,
    (gk, _): crate::state::Pair,
) -> PyResult<Option<(&'static [u8], &'static [u8])>> {
    let dup = sl.dup;
    let c = sl.cur.as_mut().expect("live");
    let next = if sl.valid { c.current() } else { Ok(None) };
    let r = match s {
        Step::First => c.first(),
        Step::Last => c.last(),
        Step::Next => next,
        Step::NextDup => next.map(|e| e.filter(|(k, _)| dup && *k == &gk[..])),
        Step::NextNodup => match next {
            Ok(Some((k, _))) if k == &gk[..] => c.next_nodup(),
            other => other,
        },
        // The last pair before the gap: before the one that followed, or the last of all.
        Step::Prev | Step::PrevDup => {
            let p = if sl.valid { c.prev() } else { c.last() };
            if s == Step::PrevDup {
                p.map(|e| e.filter(|(k, _)| dup && *k == &gk[..]))
            } else {
                p
            }
        }
        // The last value of the key before the deleted pair's key.
        Step::PrevNodup => match c.set_range(&gk) {
            Ok(Some(_)) => c.prev(),
            Ok(None) => c.last(),
            Err(e) => Err(e),
        }
        .map(|e| e.filter(|(k, _)| *k < &gk[..])),
    };
    let e = r.map_err(errors::map)?;
    sl.land(e);
    Ok(e)
}

#[pymethods]
impl Cursor {
    #[new]
    fn new(db: Py<PyDatabase>, txn: &Bound<'_, Transaction>) -> PyResult<Cursor> {
        Cursor::open(txn, db)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) {
        self.close(py);
    }

    /// The database (py-lmdb's CFFI implementation names it so; its `lmdb.aio` reads it).
    #[getter]
    fn _pydb(&self, py: Python<'_>) -> Py<PyDatabase> {
        self.db.clone_ref(py)
    }

    /// The transaction (py-lmdb's CFFI name, as `_pydb`).
    #[getter]
    fn _pytxn(&self, py: Python<'_>) -> Py<Transaction> {
        self.txn.clone_ref(py)
    }

    /// Closes the cursor; later use raises `cairn.Error`.
    fn close(&self, py: Python<'_>) {
        if self.closed.swap(true, Ordering::Relaxed) {
            return;
        }
        // A finaliser may run while this thread holds the lock: then the slot is freed with
        // the transaction instead.
        if let Some(mut g) = self.shared.state.try_lock(py) {
            if let Some(st) = g.as_mut() {
                if let Some(s) = st.cursors.get_mut(self.slot) {
                    if s.as_ref().is_some_and(|c| c.id == self.id) {
                        *s = None;
                    }
                }
            }
        }
    }

    /// Moves to the first duplicate of the current key (dupsort databases).
    fn first_dup(&self, py: Python<'_>) -> PyResult<bool> {
        self.dup_edge(py, true)
    }

    /// Moves to the last duplicate of the current key (dupsort databases).
    fn last_dup(&self, py: Python<'_>) -> PyResult<bool> {
        self.dup_edge(py, false)
    }

    /// Moves to exactly `key` with exactly `value`.
    fn set_key_dup(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        self.seek_dup(py, &key_arg(key)?, &arg(value)?, true)
    }

    /// Moves to `key` at its first value greater than or equal to `value`.
    fn set_range_dup(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        self.seek_dup(py, &key_arg(key)?, &arg(value)?, false)
    }

    /// Number of values of the current key (dupsort databases; elsewhere LMDB's answer,
    /// `IncompatibleError`).
    fn count(&self, py: Python<'_>) -> PyResult<u64> {
        let mut g = self.lock(py)?;
        let sl = self.slot(&mut g)?;
        if !sl.dup {
            return Err(errors::IncompatibleError::new_err(
                "count() needs a dupsort database (MDB_INCOMPATIBLE)",
            ));
        }
        sl.gone = None;
        if !sl.valid && !sl.anchored {
            return Err(errors::InvalidParameterError::new_err(
                "count() needs a positioned cursor",
            ));
        }
        Ok(sl.cur.as_ref().expect("live").count())
    }

    /// Stores many (key, value) pairs; returns (consumed, added).
    #[pyo3(signature = (items, dupdata=true, overwrite=true, append=false))]
    fn putmulti(
        &self,
        py: Python<'_>,
        items: &Bound<'_, PyAny>,
        dupdata: bool,
        overwrite: bool,
        append: bool,
    ) -> PyResult<(usize, usize)> {
        let opts = (dupdata, overwrite, append);
        if let Ok(list) = items.cast_exact::<PyList>() {
            self.putmulti_indexed(py, Items::List(list), opts)
        } else if let Ok(tuple) = items.cast_exact::<PyTuple>() {
            self.putmulti_indexed(py, Items::Tuple(tuple), opts)
        } else {
            self.putmulti_iter(py, items, opts)
        }
    }

    /// Deletes the current entry (dupdata=True: every value of the current key) and moves
    /// to the next; False if unpositioned.
    #[pyo3(signature = (dupdata=false))]
    fn delete(&self, py: Python<'_>, dupdata: bool) -> PyResult<bool> {
        let Some((k, v)) = self.here(py)? else {
            return Ok(false);
        };
        let at = (k.clone(), v.clone());
        self.write_with(
            py,
            true,
            move |_| Some(at),
            |t, db, dup| {
                if dup && !dupdata {
                    t.delete_pair(db, &k, &v)
                } else {
                    t.delete(db, &k)
                }
                .map_err(errors::map)
            },
        )
    }

    /// Stores `val` under `key` and returns the previous value (or None).
    fn replace<'py>(
        &self,
        py: Python<'py>,
        key: &Bound<'py, PyAny>,
        val: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let k = key_arg(key)?;
        let v = arg(val)?;
        let old = self.write_with(
            py,
            true,
            |_| Some((k.to_vec(), v.to_vec())),
            |t, db, dup| {
                let old = t.get(db, &k).map_err(errors::map)?.map(<[u8]>::to_vec);
                if dup && old.is_some() {
                    // Every value of the key is replaced by the one given.
                    t.delete(db, &k).map_err(errors::map)?;
                }
                t.put(db, &k, &v, PutFlags::empty()).map_err(errors::map)?;
                Ok(old)
            },
        )?;
        self.owned(py, old)
    }

    /// Deletes `key` and returns its value (or None).
    fn pop<'py>(&self, py: Python<'py>, key: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
        let k = key_arg(key)?;
        let old = self.write_with(
            py,
            true,
            |old: &Option<Vec<u8>>| old.as_ref().map(|v| (k.to_vec(), v.clone())),
            |t, db, dup| {
                let old = t.get(db, &k).map_err(errors::map)?.map(<[u8]>::to_vec);
                match &old {
                    // In a dupsort database only the first value goes.
                    Some(v) if dup => t.delete_pair(db, &k, v),
                    Some(_) => t.delete(db, &k),
                    None => Ok(false),
                }
                .map_err(errors::map)?;
                Ok(old)
            },
        )?;
        self.owned(py, old)
    }

    /// Values of many keys: a list of (key, value) (or of values with values=False... of
    /// keys, as py-lmdb), or with keyfixed=True one memoryview of packed fixed-size records.
    #[pyo3(signature = (keys, dupdata=false, dupfixed_bytes=None, keyfixed=false, values=true))]
    fn getmulti<'py>(
        &self,
        py: Python<'py>,
        keys: &Bound<'py, PyAny>,
        dupdata: bool,
        dupfixed_bytes: Option<usize>,
        keyfixed: bool,
        values: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        // py-lmdb's argument checks, with its exception class (TypeError).
        use pyo3::exceptions::PyTypeError;
        if (dupfixed_bytes.is_some_and(|b| b > 0) || keyfixed) && !dupdata {
            return Err(PyTypeError::new_err(
                "dupdata is required for dupfixed_bytes/keyfixed.",
            ));
        }
        if keyfixed && dupfixed_bytes.is_none_or(|b| b == 0) {
            return Err(PyTypeError::new_err(
                "dupfixed_bytes is required for keyfixed.",
            ));
        }
        if !values && dupdata {
            return Err(PyTypeError::new_err(
                "values=False is incompatible with dupdata.",
            ));
        }
        let mut found: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for k in keys.try_iter()? {
            let k = k?;
            let k = key_arg(&k)?;
            let mut g = self.lock(py)?;
            let sl = self.slot(&mut g)?;
            let c = sl.cur.as_mut().expect("live");
            let mut e = c.set(&k).map_err(errors::map)?;
            sl.valid = e.is_some();
            // Moved on below: the engine says where it stands.
            sl.here = None;
            while let Some((ek, ev)) = e {
                found.push((ek.to_vec(), ev.to_vec()));
                e = if dupdata && sl.dup {
                    c.next_dup().map_err(errors::map)?
                } else {
                    None
                };
            }
        }
        if let Some(vsize) = dupfixed_bytes.filter(|_| keyfixed) {
            let mut packed = Vec::new();
            let ksize = found.first().map_or(0, |(k, _)| k.len());
            for (k, v) in &found {
                if k.len() != ksize || v.len() != vsize {
                    return Err(errors::BadValsizeError::new_err(
                        "keyfixed=True needs keys of one size and values of dupfixed_bytes",
                    ));
                }
                packed.extend_from_slice(k);
                if values {
                    packed.extend_from_slice(v);
                }
            }
            let arr = PyByteArray::new(py, &packed);
            return Ok(PyMemoryView::from(arr.as_any())?.into_any());
        }
        let out = PyList::empty(py);
        for (k, v) in found {
            let ko = self.owned(py, Some(k))?;
            if values {
                let vo = self.owned(py, Some(v))?;
                out.append(pair(py, ko, vo)?)?;
            } else {
                out.append(ko)?;
            }
        }
        Ok(out.into_any())
    }

    /// Iterates forward from the current entry (unpositioned: from the first), yielding
    /// (key, value), keys or values.
    #[pyo3(signature = (keys=true, values=true))]
    fn iternext(slf: &Bound<'_, Self>, keys: bool, values: bool) -> PyResult<Iter> {
        if !slf.get().is_valid(slf.py())? {
            slf.get().step(slf.py(), Step::First)?;
        }
        Cursor::iter(slf, Step::Next, keys, values)
    }

    /// Iterates backward from the current entry (unpositioned: from the last).
    #[pyo3(signature = (keys=true, values=true))]
    fn iterprev(slf: &Bound<'_, Self>, keys: bool, values: bool) -> PyResult<Iter> {
        if !slf.get().is_valid(slf.py())? {
            slf.get().step(slf.py(), Step::Last)?;
        }
        Cursor::iter(slf, Step::Prev, keys, values)
    }

    /// Iterates over the current key's values, forward.
    #[pyo3(signature = (keys=false, values=true))]
    fn iternext_dup(slf: &Bound<'_, Self>, keys: bool, values: bool) -> PyResult<Iter> {
        Cursor::iter(slf, Step::NextDup, keys, values)
    }

    /// Iterates over keys (one entry per key), forward.
    #[pyo3(signature = (keys=true, values=false))]
    fn iternext_nodup(slf: &Bound<'_, Self>, keys: bool, values: bool) -> PyResult<Iter> {
        if !slf.get().is_valid(slf.py())? {
            slf.get().step(slf.py(), Step::First)?;
        }
        Cursor::iter(slf, Step::NextNodup, keys, values)
    }

    /// Iterates over the current key's values, backward.
    #[pyo3(signature = (keys=false, values=true))]
    fn iterprev_dup(slf: &Bound<'_, Self>, keys: bool, values: bool) -> PyResult<Iter> {
        Cursor::iter(slf, Step::PrevDup, keys, values)
    }

    /// Iterates over keys (one entry per key), backward.
    #[pyo3(signature = (keys=true, values=false))]
    fn iterprev_nodup(slf: &Bound<'_, Self>, keys: bool, values: bool) -> PyResult<Iter> {
        if !slf.get().is_valid(slf.py())? {
            slf.get().step(slf.py(), Step::Last)?;
        }
        Cursor::iter(slf, Step::PrevNodup, keys, values)
    }

    fn __iter__(slf: &Bound<'_, Self>) -> PyResult<Iter> {
        Cursor::iternext(slf, true, true)
    }

    /// (key, value) items from the first key at or after `key` forward, or with
    /// `reverse=True` from there (past the last key: from the last) backward; an empty `key`
    /// forward starts at the first key. py-lmdb's helper for centidb, kept for programs that
    /// use it.
    fn _iter_from(slf: &Bound<'_, Self>, key: &Bound<'_, PyAny>, reverse: bool) -> PyResult<Iter> {
        let (py, c) = (slf.py(), slf.get());
        let k = arg(key)?;
        let found = if k.is_empty() && !reverse {
            c.step(py, Step::First)?
        } else {
            c.seek(py, &k, false)?
        };
        if reverse && !found {
            c.step(py, Step::Last)?;
        }
        let step = if reverse { Step::Prev } else { Step::Next };
        Cursor::iter(slf, step, true, true)
    }
}

/// What `putmulti` passes to `put` and `putmulti_*`: dupdata, overwrite, append.
pub(crate) type PutOpts = (bool, bool, bool);

/// Where a run of `putmulti` leaves the cursor: the last pair it stored, if any.
type RunEnd = Option<(Vec<u8>, Vec<u8>)>;

/// A run of `putmulti`'s puts: one engine cursor under one transaction lock.
struct Run<'c, 'env> {
    w: cairn::CursorMut<'c, 'env>,
    flags: PutFlags,
    consumed: usize,
    added: usize,
}

impl Run<'_, '_> {
    /// Stores one pair; returns whether it was stored (see `put_result`).
    #[inline]
    fn put(&mut self, k: &[u8], v: &[u8]) -> PyResult<bool> {
        if k.is_empty() {
            return Err(crate::convert::empty_key());
        }
        self.consumed += 1;
        let stored = put_result(self.w.put(k, v, self.flags))?;
        self.added += usize::from(stored);
        Ok(stored)
    }
}

impl Cursor {
    /// Runs `body` with a [`Run`] on this cursor's database, then places the cursor at the
    /// pair it returns; returns (consumed, added).
    fn put_run(
        &self,
        py: Python<'_>,
        opts: PutOpts,
        body: impl FnOnce(&mut Run<'_, 'static>) -> PyResult<RunEnd>,
    ) -> PyResult<(usize, usize)> {
        let (dupdata, overwrite, append) = opts;
        type Done = (usize, usize, RunEnd);
        let (c, a, _) = self.write(
            py,
            |r: &Done| r.2.clone(),
            |t, db, dup| {
                // One engine cursor for the run: a put landing in the leaf of the previous
                // one skips the descent (sorted items).
                let mut r = Run {
                    w: t.cursor_mut(db).map_err(errors::map)?,
                    flags: flags_for(dup, dupdata, overwrite, append, true),
                    consumed: 0,
                    added: 0,
                };
                let end = body(&mut r)?;
                Ok((r.consumed, r.added, end))
            },
        )?;
        Ok((c, a))
    }

    /// `putmulti` over a list or tuple (`get(i)`: item `i`, None past the end). Runs of
    /// `(bytes, bytes)` tuples are stored under one lock with one engine cursor, straight
    /// from the `bytes` objects; any other item is converted without the lock (converting
    /// may run Python code) and stored on its own.
    fn putmulti_indexed(
        &self,
        py: Python<'_>,
        items: Items<'_, '_>,
        opts: PutOpts,
    ) -> PyResult<(usize, usize)> {
        let (mut i, mut consumed, mut added) = (0, 0, 0);
        loop {
            let (c, a) = self.put_run(py, opts, |r| {
                let mut last = None;
                while let Some(item) = items.get(i) {
                    match with_bytes_pair(item, |k, v| r.put(k, v)) {
                        None => break,
                        Some(stored) => {
                            if stored? {
                                last = Some(i);
                            }
                        }
                    }
                    i += 1;
                }
                // Copied once, at the end of the run: where the cursor stays.
                Ok(last
                    .and_then(|j| items.get(j))
                    .and_then(|item| with_bytes_pair(item, |k, v| (k.to_vec(), v.to_vec()))))
            })?;
            consumed += c;
            added += a;
            // Owned from here: converting may run Python code, which may change the list.
            let Some(item) = items.get(i).map(|b| b.to_owned()) else {
                return Ok((consumed, added));
            };
            let (k, v): (Bound<'_, PyAny>, Bound<'_, PyAny>) = item.extract()?;
            let (c, a) = self.put_converted(py, &[(key_arg(&k)?, arg(&v)?)], opts)?;
            consumed += c;
            added += a;
            i += 1;
        }
    }

    /// `putmulti` over any other iterable: batches of 1,024 items, iterated and converted
    /// without the lock (iteration may run any Python code).
    fn putmulti_iter(
        &self,
        py: Python<'_>,
        items: &Bound<'_, PyAny>,
        opts: PutOpts,
    ) -> PyResult<(usize, usize)> {
        let (mut consumed, mut added) = (0, 0);
        let mut it = items.try_iter()?;
        let mut batch: Vec<(Bound<'_, PyAny>, Bound<'_, PyAny>)> = Vec::with_capacity(1024);
        loop {
            batch.clear();
            for x in it.by_ref().take(1024) {
                batch.push(x?.extract()?);
            }
            if batch.is_empty() {
                return Ok((consumed, added));
            }
            let args = batch
                .iter()
                .map(|(k, v)| Ok((key_arg(k)?, arg(v)?)))
                .collect::<PyResult<Vec<_>>>()?;
            let (c, a) = self.put_converted(py, &args, opts)?;
            consumed += c;
            added += a;
        }
    }

    /// Stores converted pairs in order; returns (consumed, added).
    fn put_converted(
        &self,
        py: Python<'_>,
        args: &[(Arg<'_>, Arg<'_>)],
        opts: PutOpts,
    ) -> PyResult<(usize, usize)> {
        self.put_run(py, opts, |r| {
            let mut last = None;
            for (k, v) in args {
                if r.put(k, v)? {
                    last = Some((k, v));
                }
            }
            Ok(last.map(|(k, v)| (k.to_vec(), v.to_vec())))
        })
    }
}

/// The list or tuple `putmulti` reads by index.
#[derive(Clone, Copy)]
enum Items<'a, 'py> {
    List(&'a Bound<'py, PyList>),
    Tuple(&'a Bound<'py, PyTuple>),
}

impl<'a, 'py> Items<'a, 'py> {
    /// Item `i`, borrowed from the sequence (None past its end). The length is read at each
    /// call, so a list changed meanwhile is still read in bounds; the item stays valid while
    /// no Python code runs (nothing can take it out of the list).
    #[inline]
    fn get(self, i: usize) -> Option<Borrowed<'a, 'py, PyAny>> {
        match self {
            Items::List(l) => (i < l.len()).then(|| {
                // SAFETY: docs/safety.md §6, "putmulti": `i` is below the list's length, read
                // just now with the GIL held; the reference is borrowed from the list.
                unsafe {
                    Borrowed::from_ptr(
                        l.py(),
                        ffi::PyList_GET_ITEM(l.as_ptr(), i as ffi::Py_ssize_t),
                    )
                }
            }),
            Items::Tuple(t) => (i < t.len()).then(|| {
                // SAFETY: as above (a tuple's length never changes).
                unsafe { t.get_borrowed_item_unchecked(i) }
            }),
        }
    }
}

/// Calls `f` with the borrowed contents of a `(bytes, bytes)` tuple, the shape `putmulti`
/// stores without copying; None (without calling `f`) for any other item.
#[inline]
fn with_bytes_pair<R>(
    item: Borrowed<'_, '_, PyAny>,
    f: impl FnOnce(&[u8], &[u8]) -> R,
) -> Option<R> {
    let t = item.cast_exact::<PyTuple>().ok()?;
    if t.len() != 2 {
        return None;
    }
    // SAFETY: docs/safety.md §6, "putmulti": the tuple has two items; they are exact `bytes`
    // (checked before their contents are read), immutable, and kept alive by the tuple.
    unsafe {
        let (k, v) = (
            t.get_borrowed_item_unchecked(0),
            t.get_borrowed_item_unchecked(1),
        );
        if ffi::PyBytes_CheckExact(k.as_ptr()) == 0 || ffi::PyBytes_CheckExact(v.as_ptr()) == 0 {
            return None;
        }
        Some(f(bytes_contents(k.as_ptr()), bytes_contents(v.as_ptr())))
    }
}

impl Cursor {
    fn dup_edge(&self, py: Python<'_>, first: bool) -> PyResult<bool> {
        let mut g = self.lock(py)?;
        let sl = self.slot(&mut g)?;
        sl.gone = None;
        if !sl.valid && !sl.anchored {
            return Err(errors::InvalidParameterError::new_err(
                "the cursor is not positioned",
            ));
        }
        if !sl.dup {
            // LMDB's answer (MDB_INCOMPATIBLE) outside dupsort databases; py-lmdb's cursor
            // then reports unpositioned, LMDB's keeps its place.
            unposition(sl);
            return Err(errors::IncompatibleError::new_err(
                "first_dup/last_dup need a dupsort database",
            ));
        }
        let c = sl.cur.as_mut().expect("live");
        let r = if first { c.first_dup() } else { c.last_dup() };
        Ok(sl.land(r.map_err(errors::map)?))
    }

    fn seek_dup(&self, py: Python<'_>, key: &[u8], value: &[u8], exact: bool) -> PyResult<bool> {
        let mut g = self.lock(py)?;
        let sl = self.slot(&mut g)?;
        if !sl.dup {
            // LMDB's GET_BOTH / GET_BOTH_RANGE outside dupsort databases: MDB_INCOMPATIBLE.
            unposition(sl);
            return Err(errors::IncompatibleError::new_err(
                "set_key_dup/set_range_dup need a dupsort database",
            ));
        }
        let c = sl.cur.as_mut().expect("live");
        let r = if exact {
            c.get_both(key, value)
        } else {
            c.get_both_range(key, value)
        };
        Ok(sl.land(r.map_err(errors::map)?))
    }

    fn owned<'py>(&self, py: Python<'py>, v: Option<Vec<u8>>) -> PyResult<Bound<'py, PyAny>> {
        match v {
            None => Ok(py.None().into_bound(py)),
            Some(v) if !self.shared.buffers => Ok(PyBytes::new(py, &v).into_any()),
            Some(v) => finish(py, &self.shared, crate::convert::Out::Own(v)),
        }
    }
}

impl Drop for Cursor {
    fn drop(&mut self) {
        // Dropped by Python's deallocator, with the GIL held (attach only counts it).
        Python::attach(|py| self.close(py));
    }
}

/// Iterator returned by `Cursor.iternext()` and friends.
#[pyclass(frozen, module = "cairn", name = "_Iterator")]
pub struct Iter {
    cursor: Py<Cursor>,
    step: Step,
    keys: bool,
    values: bool,
    started: AtomicBool,
}

impl Iter {
    /// The next item, or None at the end.
    #[inline]
    fn next_item<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let c = self.cursor.get();
        let cur = {
            let mut g = c.lock(py)?;
            // A plain load and store: only the thread holding the transaction lock gets here.
            if self.started.load(Ordering::Relaxed) {
                let sl = c.slot(&mut g)?;
                if !sl.valid {
                    return Ok(None);
                }
                // The step's own entry: no second decode of the position.
                match step_entry(sl, self.step)? {
                    None => return Ok(None),
                    // Without buffers=True: `bytes` made here, the tuple after the lock.
                    Some((k, v)) if !c.shared.buffers => {
                        let k = self.keys.then(|| PyBytes::new(py, k).into_any());
                        let v = self.values.then(|| PyBytes::new(py, v).into_any());
                        drop(g);
                        return Ok(Some(match (k, v) {
                            (Some(k), Some(v)) => pair(py, k, v)?.into_any(),
                            (Some(x), None) | (None, Some(x)) => x,
                            (None, None) => py.None().into_bound(py),
                        }));
                    }
                    Some((k, v)) => Some((
                        self.keys.then(|| grab(py, &c.shared, k)),
                        self.values.then(|| grab(py, &c.shared, v)),
                    )),
                }
            } else {
                self.started.store(true, Ordering::Relaxed);
                c.current(py, &mut g, self.keys, self.values)?
            }
        };
        Ok(match cur {
            None => None,
            Some((Some(k), Some(v))) => {
                let k = finish(py, &c.shared, k)?;
                let v = finish(py, &c.shared, v)?;
                Some(pair(py, k, v)?.into_any())
            }
            Some((Some(x), None)) | Some((None, Some(x))) => Some(finish(py, &c.shared, x)?),
            Some((None, None)) => Some(py.None().into_bound(py)),
        })
    }
}

#[pymethods]
impl Iter {
    #[allow(clippy::self_named_constructors, reason = "Python's iterator protocol")]
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// The next item (`next()` and `for` reach it through [`iter_next_entry`]).
    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        self.next_item(py)
    }
}

/// The `tp_iternext` slot of the cursor iterator, called by CPython (see crate::fastcall):
/// the next item, or NULL without an exception at the end.
pub(crate) unsafe extern "C" fn iter_next_entry(slf: *mut ffi::PyObject) -> *mut ffi::PyObject {
    enter(|py| {
        // SAFETY: docs/safety.md §6, "Entry points": the slot of `Iter`, which cannot be
        // subclassed, is called on its instances only.
        let it = unsafe { Borrowed::from_ptr(py, slf).cast_unchecked::<Iter>() };
        Ok(it
            .get()
            .next_item(py)?
            .map_or(std::ptr::null_mut(), Bound::into_ptr))
    })
}
