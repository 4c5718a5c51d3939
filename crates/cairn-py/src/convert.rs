//! Arguments in (bytes-like keys and values) and values out (`bytes`, or `memoryview` with
//! `buffers=True`).
//!
//! A `buffers=True` memoryview is exported by a small [`Buffer`] object that keeps what the
//! memory belongs to alive: the environment's map for read transactions (values are slices
//! of it), or an owned copy for write transactions (their pages move as the transaction
//! changes them). The transaction releases every memoryview it handed out when it ends, so
//! using one afterwards raises `ValueError` instead of reading stale memory.

use crate::state::TxnShared;
use cairn::Env;
use pyo3::exceptions::{PyBufferError, PyTypeError};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyMemoryView, PyString};
use std::os::raw::{c_int, c_void};
use std::sync::Arc;

/// A bytes-like argument: borrowed from a `bytes` object, or copied from another buffer.
pub(crate) enum Arg<'a> {
    Borrowed(&'a [u8]),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Arg<'_> {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            Arg::Borrowed(b) => b,
            Arg::Owned(v) => v,
        }
    }
}

/// Reads a key or value argument: `bytes` without a copy, any other buffer (bytearray,
/// memoryview, array) by copy; `str` is refused as py-lmdb refuses it.
#[inline]
pub(crate) fn arg<'a>(o: &'a Bound<'_, PyAny>) -> PyResult<Arg<'a>> {
    if o.is_exact_instance_of::<PyBytes>() {
        // SAFETY: docs/safety.md §6, "putmulti": an exact `bytes`, alive while `o` is
        // borrowed.
        return Ok(Arg::Borrowed(unsafe { bytes_contents(o.as_ptr()) }));
    }
    if let Ok(b) = o.cast::<PyBytes>() {
        return Ok(Arg::Borrowed(b.as_bytes()));
    }
    arg_slow(o)
}

/// Reads a key argument as [`arg`] does, refusing an empty key with `BadValsizeError`.
///
/// Decision (issue 19, docs/compat.md): the engine stores and finds a zero-length key (Rust
/// users may rely on it), but LMDB refuses one with MDB_BAD_VALSIZE in every key operation
/// (get, put, delete, replace, pop, cursor set_key / set_key_dup / put), so this LMDB face
/// refuses it too. `Cursor.set_range(b"")` is py-lmdb's "from the first key", not a refusal.
#[inline]
pub(crate) fn key_arg<'a>(o: &'a Bound<'_, PyAny>) -> PyResult<Arg<'a>> {
    let k = arg(o)?;
    if k.is_empty() {
        return Err(empty_key());
    }
    Ok(k)
}

#[cold]
pub(crate) fn empty_key() -> PyErr {
    crate::errors::BadValsizeError::new_err(
        "MDB_BAD_VALSIZE: Unsupported size of key/DB name/data, or wrong DUPFIXED size \
         (an empty key)",
    )
}

/// The contents of a `bytes` object, read from its struct (no call into the interpreter).
///
/// # Safety
/// `b` is a live exact `bytes` object, alive for as long as the returned slice is used.
#[inline]
pub(crate) unsafe fn bytes_contents<'a>(b: *mut ffi::PyObject) -> &'a [u8] {
    // SAFETY: a `bytes` object holds `Py_SIZE` bytes at `PyBytes_AS_STRING` (the caller
    // guarantees the type and the lifetime).
    unsafe {
        std::slice::from_raw_parts(
            ffi::PyBytes_AS_STRING(b).cast::<u8>(),
            ffi::Py_SIZE(b) as usize,
        )
    }
}

#[cold]
fn arg_slow<'a>(o: &'a Bound<'_, PyAny>) -> PyResult<Arg<'a>> {
    if o.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(
            "Won't implicitly convert Unicode to bytes; use .encode()",
        ));
    }
    match pyo3::buffer::PyBuffer::<u8>::get(o) {
        Ok(b) => Ok(Arg::Owned(b.to_vec(o.py())?)),
        Err(_) => Err(PyTypeError::new_err(format!(
            "expected a bytes-like object, got {}",
            o.get_type().name()?
        ))),
    }
}

/// A value read under the transaction lock, turned into a Python object after it.
pub(crate) enum Out<'py> {
    /// Already a Python object (`bytes`; creating one never runs the garbage collector).
    Obj(Bound<'py, PyAny>),
    /// A slice of the environment's map (read transactions with `buffers=True`).
    Map(usize, usize),
    /// A copy (write transactions with `buffers=True`).
    Own(Vec<u8>),
}

/// Captures `s` for the caller: `bytes` now, or what a memoryview needs later.
#[inline]
pub(crate) fn grab<'py>(py: Python<'py>, shared: &TxnShared, s: &[u8]) -> Out<'py> {
    if !shared.buffers {
        Out::Obj(PyBytes::new(py, s).into_any())
    } else if shared.write {
        Out::Own(s.to_vec())
    } else {
        Out::Map(s.as_ptr() as usize, s.len())
    }
}

/// Finishes an [`Out`] once the transaction lock is released.
#[inline]
pub(crate) fn finish<'py>(
    py: Python<'py>,
    shared: &TxnShared,
    o: Out<'py>,
) -> PyResult<Bound<'py, PyAny>> {
    let keep = match o {
        Out::Obj(b) => return Ok(b),
        Out::Map(ptr, len) => Buffer {
            ptr,
            len,
            _keep: Keep::Map(shared.core.env.clone()),
        },
        Out::Own(v) => {
            let v = v.into_boxed_slice();
            Buffer {
                ptr: v.as_ptr() as usize,
                len: v.len(),
                _keep: Keep::Own(v),
            }
        }
    };
    let exporter = Bound::new(py, keep)?;
    let mv = PyMemoryView::from(exporter.as_any())?.into_any();
    shared.track_view(py, mv.clone().unbind());
    Ok(mv)
}

enum Keep {
    /// The map stays mapped while the environment lives.
    Map(#[allow(dead_code, reason = "held for its Drop")] Arc<Env>),
    Own(#[allow(dead_code, reason = "held for its Drop")] Box<[u8]>),
}

/// Read-only buffer exporter behind `buffers=True` memoryviews.
#[pyclass(frozen, module = "cairn", name = "_Buffer")]
pub(crate) struct Buffer {
    ptr: usize,
    len: usize,
    _keep: Keep,
}

#[pymethods]
impl Buffer {
    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut ffi::Py_buffer,
        flags: c_int,
    ) -> PyResult<()> {
        if flags & ffi::PyBUF_WRITABLE == ffi::PyBUF_WRITABLE {
            return Err(PyBufferError::new_err("Cairn buffers are read-only"));
        }
        let (ptr, len) = {
            let b = slf.get();
            (b.ptr, b.len)
        };
        // SAFETY: docs/safety.md, "Python bindings": `ptr..ptr+len` is memory `_keep` owns
        // or keeps mapped for as long as this exporter lives, and every consumer holds a
        // reference to the exporter (`view.obj`, set by PyBuffer_FillInfo).
        let rc = unsafe {
            ffi::PyBuffer_FillInfo(
                view,
                slf.as_ptr(),
                ptr as *mut c_void,
                len as ffi::Py_ssize_t,
                1,
                flags,
            )
        };
        if rc != 0 {
            return Err(PyErr::fetch(slf.py()));
        }
        Ok(())
    }

    /// Nothing to release: a view holds no state of its own, only a reference to this
    /// exporter (dropped by Python).
    unsafe fn __releasebuffer__(&self, _view: *mut ffi::Py_buffer) {}
}
