//! The cursor's per-operation methods as plain CPython entry points (see crate::fastcall):
//! the movements (`first`, `next`, ...), `key`/`value`/`item`, `set_key`, `set_range`, `get`
//! and `put`. Each is one generic function instantiated per method, calling the same `Cursor`
//! code as the rest of the class.

use crate::convert::{arg, key_arg};
use crate::cursor::{Cursor, Step};
use crate::fastcall::{enter, fast_method, install_method, method_args, opt_bool, Meth};
use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyType};
use pyo3::Borrowed;
use std::ffi::CStr;

/// `self` of an entry point installed on `Cursor`.
///
/// # Safety
/// `slf` is what CPython passes to a method of `Cursor` installed by [`install`].
#[inline]
unsafe fn this<'a, 'py>(py: Python<'py>, slf: *mut ffi::PyObject) -> Borrowed<'a, 'py, Cursor> {
    // SAFETY: docs/safety.md §6, "Entry points": installed on `Cursor` only, whose method
    // descriptor checks the type of `self`.
    unsafe { Borrowed::from_ptr(py, slf).cast_unchecked::<Cursor>() }
}

fn py_bool(py: Python<'_>, b: bool) -> *mut ffi::PyObject {
    PyBool::new(py, b).to_owned().into_any().into_ptr()
}

/// The movements, by the index the entry points take as a constant.
const STEPS: [Step; 8] = [
    Step::First,
    Step::Last,
    Step::Next,
    Step::Prev,
    Step::NextDup,
    Step::PrevDup,
    Step::NextNodup,
    Step::PrevNodup,
];

/// `first()`, `last()`, `next()`, ...: the movement `STEPS[S]`; whether it landed on an entry.
unsafe extern "C" fn move_to<const S: usize>(
    slf: *mut ffi::PyObject,
    _: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    enter(|py| {
        // SAFETY: see `this`.
        let c = unsafe { this(py, slf) };
        Ok(py_bool(py, c.get().step(py, STEPS[S])?))
    })
}

/// `key()` (KEYS), `value()` (VALUES) or `item()` (both).
unsafe extern "C" fn read<const KEYS: bool, const VALUES: bool>(
    slf: *mut ffi::PyObject,
    _: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    enter(|py| {
        // SAFETY: see `this`.
        let c = unsafe { this(py, slf) };
        Ok(c.get().read(py, KEYS, VALUES)?.into_ptr())
    })
}

/// `set_key(key)` (EXACT) or `set_range(key)`.
unsafe extern "C" fn seek<const EXACT: bool>(
    slf: *mut ffi::PyObject,
    args: *const *mut ffi::PyObject,
    nargsf: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> *mut ffi::PyObject {
    let name = if EXACT {
        "Cursor.set_key"
    } else {
        "Cursor.set_range"
    };
    enter(|py| {
        // SAFETY: docs/safety.md §6, "Entry points": installed on `Cursor`; CPython's arguments.
        let (c, [key]) =
            unsafe { method_args::<Cursor, _>(py, slf, name, &["key"], 1, args, nargsf, kwnames) }?;
        let key = key.expect("required");
        // set_range(b"") is py-lmdb's "from the first key"; set_key(b"") is refused.
        let k = if EXACT { key_arg(&key)? } else { arg(&key)? };
        Ok(py_bool(py, c.get().seek(py, &k, EXACT)?))
    })
}

fast_method! {
    /// `get(key, default=None)`: moves to `key` and returns its value, or `default`.
    fn get(Cursor, "Cursor.get", 1; key, default) |py, c| {
        let (c, key) = (c.get(), key.expect("required"));
        let found = if c.seek(py, &key_arg(&key)?, true)? {
            c.read(py, false, true)?
        } else {
            default.map_or_else(|| py.None().into_bound(py), |d| d.to_owned())
        };
        Ok(found.into_ptr())
    }
}

fast_method! {
    /// `put(key, val, dupdata=True, overwrite=True, append=False)`.
    fn put(Cursor, "Cursor.put", 2; key, val, dupdata, overwrite, append) |py, c| {
        let opts = (
            opt_bool(dupdata, "dupdata", true)?,
            opt_bool(overwrite, "overwrite", true)?,
            opt_bool(append, "append", false)?,
        );
        let (key, val) = (key.expect("required"), val.expect("required"));
        Ok(py_bool(py, c.get().put_one(py, &key, &val, opts)?))
    }
}

/// The methods [`install`] puts on `Cursor`: name, function, docstring with text signature.
const METHODS: [(&CStr, Meth, &CStr); 15] = [
    (c"first", Meth::NoArgs(move_to::<0>), c"first($self, /)\n--\n\nMoves to the first entry; False if the database is empty."),
    (c"last", Meth::NoArgs(move_to::<1>), c"last($self, /)\n--\n\nMoves to the last entry; False if the database is empty."),
    (c"next", Meth::NoArgs(move_to::<2>), c"next($self, /)\n--\n\nMoves to the next entry (from an unpositioned cursor: the first)."),
    (c"prev", Meth::NoArgs(move_to::<3>), c"prev($self, /)\n--\n\nMoves to the previous entry (from an unpositioned cursor: the last)."),
    (c"next_dup", Meth::NoArgs(move_to::<4>), c"next_dup($self, /)\n--\n\nMoves to the next duplicate of the current key."),
    (c"prev_dup", Meth::NoArgs(move_to::<5>), c"prev_dup($self, /)\n--\n\nMoves to the previous duplicate of the current key."),
    (c"next_nodup", Meth::NoArgs(move_to::<6>), c"next_nodup($self, /)\n--\n\nMoves to the next key (skipping the current key's other duplicates)."),
    (c"prev_nodup", Meth::NoArgs(move_to::<7>), c"prev_nodup($self, /)\n--\n\nMoves to the previous key (skipping the current key's other duplicates)."),
    (c"key", Meth::NoArgs(read::<true, false>), c"key($self, /)\n--\n\nThe current key (empty if the cursor is unpositioned)."),
    (c"value", Meth::NoArgs(read::<false, true>), c"value($self, /)\n--\n\nThe current value (empty if the cursor is unpositioned)."),
    (c"item", Meth::NoArgs(read::<true, true>), c"item($self, /)\n--\n\nThe current (key, value) (empty values if the cursor is unpositioned)."),
    (c"set_key", Meth::Fast(seek::<true>), c"set_key($self, key)\n--\n\nMoves to exactly `key`; False (unpositioned) if it does not exist."),
    (c"set_range", Meth::Fast(seek::<false>), c"set_range($self, key)\n--\n\nMoves to the first key greater than or equal to `key`."),
    (c"get", Meth::Fast(get), c"get($self, key, default=None)\n--\n\nMoves to `key` and returns its value, or `default`."),
    (c"put", Meth::Fast(put), c"put($self, key, val, dupdata=True, overwrite=True, append=False)\n--\n\nStores `val` under `key` and moves there; False if the key existed and overwrite=False (or, with append=True, was out of order)."),
];

/// Installs the entry points of this module on the `Cursor` class.
pub(crate) fn install(ty: &Bound<'_, PyType>) -> PyResult<()> {
    for (name, f, doc) in METHODS {
        install_method(ty, name, f, doc)?;
    }
    Ok(())
}
