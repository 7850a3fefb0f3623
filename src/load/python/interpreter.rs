//! The interpreter: the process's CPython, initialised once if nobody did, never finalised;
//! the host's Python helpers (`bootstrap.py`); and giving the GIL up while dylease waits.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyModule;

use crate::error::{Error, Origin};

/// The host's helpers, compiled once per process.
static BOOTSTRAP: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// Runs `f` attached to the interpreter, initialising it first if the process has none.
///
/// An interpreter the process already has (dylease used from a Python extension, or by
/// another crate) is used as it is. One dylease started is never finalised: CPython cannot
/// be initialised again safely after `Py_Finalize` (extension modules keep static state),
/// objects a plugin left behind may still be referenced from other threads, and whoever
/// embedded Python first owns its shutdown.
pub(crate) fn attach<R>(f: impl for<'py> FnOnce(Python<'py>) -> R) -> R {
    Python::initialize();
    Python::attach(f)
}

/// The host's helpers module (`bootstrap.py`), compiled on first use.
pub(crate) fn helpers(py: Python<'_>) -> &Bound<'_, PyModule> {
    BOOTSTRAP
        .get_or_init(py, || {
            PyModule::from_code(
                py,
                c_source(include_str!("bootstrap.py")).as_c_str(),
                c"<dylease host>",
                c"_dylease_host",
            )
            .expect("dylease's own Python helpers compile")
            .unbind()
        })
        .bind(py)
}

fn c_source(source: &str) -> std::ffi::CString {
    std::ffi::CString::new(source).expect("no NUL in dylease's own Python source")
}

/// `Type: message (raised at FILE, line N)` for an exception, as its traceback gives it.
pub(crate) fn describe(py: Python<'_>, error: &PyErr) -> String {
    helpers(py)
        .getattr("describe")
        .and_then(|describe| describe.call1((error.value(py), error.traceback(py))))
        .and_then(|text| text.extract::<String>())
        .unwrap_or_else(|_| error.to_string())
}

/// The load of a Python plugin failed in its code: the error names the file and the
/// exception.
pub(crate) fn plugin_failed(origin: &Origin, what: &str, py: Python<'_>, error: &PyErr) -> Error {
    Error::RegisterFailed {
        plugin: origin.clone(),
        reason: format!("{what} raised {}", describe(py, error)),
        source: None,
    }
}
