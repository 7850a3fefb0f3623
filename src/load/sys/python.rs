//! The CPython calls of the `python` feature that pyo3 offers no safe form of: detaching a
//! thread from the interpreter while dylease waits, whether or not the thread holds a
//! `Python` token (`load::python::interpreter`).

/// Runs `f` (a wait on one of dylease's own locks) with this thread detached from the
/// interpreter if it is attached, so that the thread dylease waits for may take the GIL (a
/// pass that calls `acquire()` while another thread loads Python plugins of the same host).
/// `f` must not touch Python.
pub(crate) fn detached<R>(f: impl FnOnce() -> R) -> R {
    // SAFETY: both functions may be called at any time, from any thread, without the GIL.
    let attached = unsafe { pyo3::ffi::Py_IsInitialized() } != 0 && unsafe { pyo3::ffi::PyGILState_Check() } == 1;
    if !attached {
        return f();
    }
    /// Re-attaches the thread however `f` ends.
    struct Reattach(*mut pyo3::ffi::PyThreadState);
    impl Drop for Reattach {
        fn drop(&mut self) {
            // SAFETY: `self.0` is the state `PyEval_SaveThread` returned on this thread, which
            // has not re-attached since.
            unsafe { pyo3::ffi::PyEval_RestoreThread(self.0) };
        }
    }
    // SAFETY: this thread is attached (checked above); it is re-attached by `Reattach` before
    // anything else on it touches Python, and `f` does not touch Python.
    let _reattach = Reattach(unsafe { pyo3::ffi::PyEval_SaveThread() });
    f()
}
