//! Python bindings for Cairn with py-lmdb's API: `import cairn as lmdb`.
//!
//! The native module is `cairn._cairn`; the `cairn` package re-exports it (and holds the type
//! stubs). Layout:
//! - `state`: owned transactions, cursors and nested levels over the borrowing engine API;
//! - `env`: `Environment`, `_Database`;
//! - `txn`: `Transaction`;
//! - `cursor`: `Cursor` and its iterators;
//! - `convert`: bytes-like arguments in, `bytes`/`memoryview` out;
//! - `errors`: py-lmdb's exception classes.
//!
//! The GIL is released wherever a call can wait or take long: beginning a write transaction
//! (it waits for the writer), commit (it flushes), `sync`, `copy`/`copyfd` and opening.

mod convert;
mod cursor;
mod cursor_calls;
mod env;
mod errors;
mod fastcall;
mod state;
mod txn;

use fastcall::Meth;
use pyo3::prelude::*;

/// The version of the Cairn engine as (major, minor, patch), or with subpatch=True
/// (major, minor, patch, 1). py-lmdb's subpatch is nonzero when its LMDB carries py-lmdb's
/// patches, which its tests read as "copy from a given transaction works": Cairn's does.
#[pyfunction]
#[pyo3(signature = (subpatch=false))]
fn version(py: Python<'_>, subpatch: bool) -> PyResult<Py<PyAny>> {
    let v = env!("CARGO_PKG_VERSION");
    let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let (a, b, c) = (
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
        parts.next().unwrap_or(0),
    );
    if subpatch {
        Ok((a, b, c, 1u32).into_pyobject(py)?.into_any().unbind())
    } else {
        Ok((a, b, c).into_pyobject(py)?.into_any().unbind())
    }
}

/// Whether the GIL is dropped around long calls (always, in Cairn). Kept for py-lmdb
/// compatibility.
#[pyfunction]
fn enable_drop_gil() {}

// `gil_used`: the transaction state's lock is the GIL (state.rs, `StateCell`), so a
// free-threaded Python keeps its GIL enabled while this module is loaded.
#[pymodule(gil_used = true)]
fn _cairn(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<env::Environment>()?;
    m.add_class::<env::PyDatabase>()?;
    m.add_class::<txn::Transaction>()?;
    m.add_class::<cursor::Cursor>()?;
    m.add_class::<cursor::Iter>()?;
    m.add_class::<convert::Buffer>()?;
    // The per-operation methods, as plain CPython entry points (see `fastcall`).
    let py = m.py();
    let txn = py.get_type::<txn::Transaction>();
    fastcall::install_method(&txn, c"get", Meth::Fast(txn::get_entry), txn::GET_DOC)?;
    fastcall::install_method(&txn, c"put", Meth::Fast(txn::put_entry), txn::PUT_DOC)?;
    fastcall::install_method(
        &txn,
        c"delete",
        Meth::Fast(txn::delete_entry),
        txn::DELETE_DOC,
    )?;
    cursor_calls::install(&py.get_type::<cursor::Cursor>())?;
    fastcall::install_iternext(&py.get_type::<cursor::Iter>(), cursor::iter_next_entry);
    m.add_function(wrap_pyfunction!(version, m)?)?;
    m.add_function(wrap_pyfunction!(enable_drop_gil, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    Ok(())
}
