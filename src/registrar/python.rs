//! What a set's pass table holds of a Python pass: its callable, and how it is indexed apart
//! from native passes.

use pyo3::prelude::*;

use crate::sync::{Arc, Mutex};

/// The function pointer of a Python pass: never meant to be called (the pass has no native
/// signature; [`Lease::get`](crate::Lease::get) refuses it).
pub(crate) extern "C" fn placeholder() {}

/// The key under which the per-interface index lists a pass: a Python pass's id is kept
/// apart from native ones (a NUL byte cannot appear in a C interface id).
pub(crate) fn index_key(interface: &str, python: bool) -> Box<str> {
    match python {
        true => format!("\0python\0{interface}").into(),
        false => interface.into(),
    }
}

/// A Python pass's callable, shared by the set's pass table and its teardown, which lets go
/// of it before its instance is torn down.
#[derive(Clone)]
pub(crate) struct PyCallable(Arc<Mutex<Option<Py<PyAny>>>>);

impl std::fmt::Debug for PyCallable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PyCallable")
    }
}

impl PyCallable {
    pub(crate) fn new(func: Py<PyAny>) -> Self {
        PyCallable(Arc::new(Mutex::new(Some(func))))
    }

    /// The callable, unless its set was unloaded.
    pub(crate) fn get(&self, py: Python<'_>) -> Option<Py<PyAny>> {
        self.0.lock().as_ref().map(|func| func.clone_ref(py))
    }

    /// Lets go of the callable (attached to the interpreter).
    pub(crate) fn clear(&self) {
        let func = self.0.lock().take();
        drop(func);
    }
}
