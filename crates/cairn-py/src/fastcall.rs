//! Plain CPython entry points for the per-operation methods: `Transaction.get`, `put` and
//! `delete`, the cursor's movements, reads and `put` (`cursor_calls`) and the cursor
//! iterator's `__next__`.
//!
//! PyO3's generated wrappers cost about 20 ns a call on this path (the attach count kept in a
//! thread-local, a generic argument description, a type check of `self`, the result
//! conversion): as much as the rest of a one-key get, and more than py-lmdb's whole wrapper.
//! These methods are installed on their classes at import as `METH_FASTCALL | METH_KEYWORDS`
//! functions (`METH_NOARGS` for those without arguments, the iterator's as its `tp_iternext`
//! slot) that match their arguments here and call the same Rust code as every other method. Invariants (docs/safety.md §6, "Entry points"):
//! - CPython calls them with the thread attached, and with `self` an instance of the class
//!   (a method descriptor checks the type of `self`; a type's slot is called on its instances,
//!   and these classes cannot be subclassed);
//! - no panic crosses the C boundary: it is caught and raised as `PanicException`, as PyO3
//!   does;
//! - argument errors are `TypeError`s worded as PyO3 and CPython word them.

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::ffi;
use pyo3::panic::PanicException;
use pyo3::prelude::*;
use pyo3::types::{PyString, PyTuple, PyType};
use pyo3::Borrowed;
use pyo3::PyClass;
use std::any::Any;
use std::ffi::CStr;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;

/// The signature of a `METH_FASTCALL | METH_KEYWORDS` function.
pub(crate) type FastFn = unsafe extern "C" fn(
    *mut ffi::PyObject,
    *const *mut ffi::PyObject,
    ffi::Py_ssize_t,
    *mut ffi::PyObject,
) -> *mut ffi::PyObject;

/// Runs the body of an entry point: gives it the `Python` token, turns its error into a raised
/// exception (returning NULL), and stops a panic at the C boundary.
#[inline(always)]
pub(crate) fn enter<F>(body: F) -> *mut ffi::PyObject
where
    F: for<'py> FnOnce(Python<'py>) -> PyResult<*mut ffi::PyObject>,
{
    // SAFETY: docs/safety.md §6, "Entry points": CPython calls every entry point of this module
    // with the calling thread attached, and the token does not outlive the call.
    let py = unsafe { Python::assume_attached() };
    match catch_unwind(AssertUnwindSafe(|| body(py))) {
        Ok(Ok(p)) => p,
        Ok(Err(e)) => {
            e.restore(py);
            ptr::null_mut()
        }
        Err(payload) => {
            panic_error(payload).restore(py);
            ptr::null_mut()
        }
    }
}

#[cold]
fn panic_error(payload: Box<dyn Any + Send>) -> PyErr {
    let msg = if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else {
        "panic from Rust code".to_string()
    };
    PanicException::new_err((msg,))
}

/// The arguments of one vectorcall, matched to a method's parameters by position, then by
/// keyword. Entry `i` is None when parameter `i` was not given.
pub(crate) type Matched<'a, 'py, const N: usize> = [Option<Borrowed<'a, 'py, PyAny>>; N];

/// `self` as a `T`, and a vectorcall's arguments (`args`, `nargsf`, `kwnames` as CPython
/// passes them) matched to `params`, whose first `required` are required, for an entry point
/// installed on class `T`. `name` is the method's qualified name, for error messages.
///
/// # Safety
/// The arguments are what CPython passes to a `METH_FASTCALL | METH_KEYWORDS` method of `T`
/// installed by [`install_method`]: `args` holds `nargs` positional arguments followed by one
/// value per name of `kwnames` (a tuple of `str`, or NULL), all alive for `'a`.
#[inline(always)]
#[allow(
    clippy::too_many_arguments,
    reason = "CPython's calling convention, passed through"
)]
pub(crate) unsafe fn method_args<'a, 'py, T: PyClass, const N: usize>(
    py: Python<'py>,
    slf: *mut ffi::PyObject,
    name: &str,
    params: &[&str; N],
    required: usize,
    args: *const *mut ffi::PyObject,
    nargsf: ffi::Py_ssize_t,
    kwnames: *mut ffi::PyObject,
) -> PyResult<(Borrowed<'a, 'py, T>, Matched<'a, 'py, N>)> {
    // SAFETY: docs/safety.md §6, "Entry points": installed on `T` only, whose method
    // descriptor checks the type of `self`.
    let this = unsafe { Borrowed::from_ptr(py, slf).cast_unchecked::<T>() };
    let mut out: Matched<'a, 'py, N> = [None; N];
    // SAFETY: docs/safety.md §6, "Entry points": the caller passes CPython's vectorcall
    // arguments; `nargsf` may carry PY_VECTORCALL_ARGUMENTS_OFFSET, which NARGS strips.
    let nargs = unsafe { ffi::PyVectorcall_NARGS(nargsf as usize) } as usize;
    if nargs > N {
        return Err(too_many(name, params, required, nargs));
    }
    for (i, slot) in out.iter_mut().enumerate().take(nargs) {
        // SAFETY: as above: `args[i]` for i < nargs is a live argument.
        *slot = Some(unsafe { Borrowed::from_ptr(py, *args.add(i)) });
    }
    if !kwnames.is_null() {
        // SAFETY: as above: `kwnames` is a tuple of the keyword names, alive for the call.
        let names = unsafe { Borrowed::from_ptr(py, kwnames).cast_unchecked::<PyTuple>() };
        for (j, k) in names.iter_borrowed().enumerate() {
            let k = k.cast::<PyString>()?;
            let k = k.to_str()?;
            let Some(i) = params.iter().position(|p| *p == k) else {
                return Err(PyTypeError::new_err(format!(
                    "{name}() got an unexpected keyword argument '{k}'"
                )));
            };
            if out[i].is_some() {
                return Err(PyTypeError::new_err(format!(
                    "{name}() got multiple values for argument '{k}'"
                )));
            }
            // SAFETY: as above: keyword values follow the positional arguments.
            out[i] = Some(unsafe { Borrowed::from_ptr(py, *args.add(nargs + j)) });
        }
    }
    if let Some(i) = out[..required].iter().position(Option::is_none) {
        return Err(PyTypeError::new_err(format!(
            "{name}() missing 1 required positional argument: '{}'",
            params[i]
        )));
    }
    Ok((this, out))
}

/// Defines `$name`, the entry point of a `METH_FASTCALL | METH_KEYWORDS` method of class `$ty`
/// (`$qual` in messages) whose parameters are the identifiers listed, the first `$required`
/// of them required. The body gets the `Python` token, `self` (a `Borrowed` of `$ty`) and each
/// parameter as an `Option<Borrowed<PyAny>>` (None: not given), and returns
/// `PyResult<*mut ffi::PyObject>`.
macro_rules! fast_method {
    (
        $(#[$attr:meta])*
        $vis:vis fn $name:ident($ty:ty, $qual:literal, $required:literal; $($param:ident),+)
        |$py:ident, $slf:ident| $body:block
    ) => {
        $(#[$attr])*
        $vis unsafe extern "C" fn $name(
            slf: *mut pyo3::ffi::PyObject,
            args: *const *mut pyo3::ffi::PyObject,
            nargsf: pyo3::ffi::Py_ssize_t,
            kwnames: *mut pyo3::ffi::PyObject,
        ) -> *mut pyo3::ffi::PyObject {
            $crate::fastcall::enter(|$py| {
                // SAFETY: docs/safety.md §6, "Entry points": installed on `$ty` only; the
                // arguments are CPython's.
                let ($slf, [$($param),+]) = unsafe {
                    $crate::fastcall::method_args::<$ty, _>(
                        $py,
                        slf,
                        $qual,
                        &[$(stringify!($param)),+],
                        $required,
                        args,
                        nargsf,
                        kwnames,
                    )
                }?;
                $body
            })
        }
    };
}
pub(crate) use fast_method;

#[cold]
fn too_many(name: &str, params: &[&str], required: usize, given: usize) -> PyErr {
    PyTypeError::new_err(format!(
        "{name}() takes from {required} to {} positional arguments but {given} were given",
        params.len()
    ))
}

/// An optional `bool` argument (PyO3's conversion: `bool`, or numpy's `bool_`).
#[inline]
pub(crate) fn opt_bool(
    a: Option<Borrowed<'_, '_, PyAny>>,
    name: &str,
    dflt: bool,
) -> PyResult<bool> {
    match a {
        None => Ok(dflt),
        Some(b) => b
            .extract::<bool>()
            .map_err(|e| argument_error(b.py(), name, e)),
    }
}

/// An optional argument of pyclass `T`; None (or Python's `None`) when not given.
#[inline]
pub(crate) fn opt_class<'a, 'py, T: pyo3::PyClass>(
    a: Option<Borrowed<'a, 'py, PyAny>>,
    name: &str,
) -> PyResult<Option<Borrowed<'a, 'py, T>>> {
    match a {
        Some(b) if !b.is_none() => b
            .cast::<T>()
            .map(Some)
            .map_err(|e| argument_error(b.py(), name, e.into())),
        _ => Ok(None),
    }
}

/// PyO3's wording of a failed argument conversion: the parameter's name, then the cause.
#[cold]
fn argument_error(py: Python<'_>, name: &str, e: PyErr) -> PyErr {
    if e.get_type(py).is(py.get_type::<PyTypeError>()) {
        let err = PyTypeError::new_err(format!("argument '{name}': {}", e.value(py)));
        err.set_cause(py, Some(e));
        err
    } else {
        e
    }
}

/// A method's C function and its calling convention.
#[derive(Clone, Copy)]
pub(crate) enum Meth {
    /// `METH_FASTCALL | METH_KEYWORDS`.
    Fast(FastFn),
    /// `METH_NOARGS`: called with `self` and NULL.
    NoArgs(ffi::PyCFunction),
}

/// Installs `f` as method `name` of `ty` (replacing any attribute of that name); `doc` starts
/// with the text signature (`name($self, ...)\n--\n\n`), as CPython reads it.
pub(crate) fn install_method(
    ty: &Bound<'_, PyType>,
    name: &'static CStr,
    f: Meth,
    doc: &'static CStr,
) -> PyResult<()> {
    let py = ty.py();
    let (ml_meth, ml_flags) = match f {
        Meth::Fast(f) => (
            ffi::PyMethodDefPointer {
                PyCFunctionFastWithKeywords: f,
            },
            ffi::METH_FASTCALL | ffi::METH_KEYWORDS,
        ),
        Meth::NoArgs(f) => (ffi::PyMethodDefPointer { PyCFunction: f }, ffi::METH_NOARGS),
    };
    // CPython keeps a pointer to the definition for as long as the method exists: it is leaked
    // (once per import of the module).
    let def: &'static mut ffi::PyMethodDef = Box::leak(Box::new(ffi::PyMethodDef {
        ml_name: name.as_ptr(),
        ml_meth,
        ml_flags,
        ml_doc: doc.as_ptr(),
    }));
    // SAFETY: docs/safety.md §6, "Entry points": a method descriptor over a definition that
    // lives forever, for a ready type; the new reference is checked for NULL.
    let descr =
        unsafe { Bound::from_owned_ptr_or_err(py, ffi::PyDescr_NewMethod(ty.as_type_ptr(), def)) }?;
    let key = name
        .to_str()
        .map_err(|_| PyValueError::new_err("method name is not UTF-8"))?;
    ty.setattr(key, descr)
}

/// Sets `f` as the `tp_iternext` slot of `ty` (what `next()` and `for` call). The class keeps
/// its PyO3 `__next__` method, which does the same through PyO3's wrapper.
pub(crate) fn install_iternext(
    ty: &Bound<'_, PyType>,
    f: unsafe extern "C" fn(*mut ffi::PyObject) -> *mut ffi::PyObject,
) {
    let t = ty.as_type_ptr();
    // SAFETY: docs/safety.md §6, "Entry points": `ty` is a ready heap type that cannot be
    // subclassed, so no other type copied its slot; replacing a slot pointer of a heap type
    // is what CPython itself does when a class attribute changes, and PyType_Modified drops
    // what caches it.
    unsafe {
        (*t).tp_iternext = Some(f);
        ffi::PyType_Modified(t);
    }
}
