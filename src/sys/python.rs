//! The CPython calls of the `python` feature that pyo3 offers no safe form of: detaching a
//! thread from the interpreter while dylease waits, whether or not the thread holds a
//! `Python` token (`load::python::interpreter`).

/// Waits on one of dylease's own condition variables with this thread detached from the
/// interpreter if it is attached, so that the thread dylease waits for may take the GIL (a
/// pass that calls `acquire()` while another thread loads Python plugins of the same host).
/// `wait` releases the lock, waits, and takes the lock back (a condition variable's wait);
/// it must not touch Python.
///
/// An attached thread lets the lock go again before it re-attaches, and `lock` takes it once
/// the thread is attached: dylease never waits for the GIL while it holds one of its own locks,
/// since a thread that holds the GIL may be waiting for that lock (dropping a lease or
/// settling an instance from Python code takes them). The order is the GIL, then dylease's
/// locks. To the caller, that is a wake-up after which the lock was taken again, as a
/// condition variable's spurious one: it looks at the state again.
pub(crate) fn wait_detached<G>(wait: impl FnOnce() -> G, lock: impl FnOnce() -> G) -> G {
    if !attached() {
        return wait();
    }
    // SAFETY: this thread is attached (checked above), and `wait` does not touch Python.
    let reattach = unsafe { detach() };
    drop(wait());
    drop(reattach);
    lock()
}

/// Whether this thread is attached to an initialised interpreter (holds the GIL).
/// (`PyThreadState_GetUnchecked` would not do: before Python 3.12 it answers the thread state
/// of whichever thread holds the GIL. `PyGILState_Check` answers 1 for every thread once a
/// subinterpreter exists, which dylease never creates.)
fn attached() -> bool {
    // SAFETY: both functions may be called at any time, from any thread, without the GIL.
    (unsafe { pyo3::ffi::Py_IsInitialized() } != 0) && unsafe { pyo3::ffi::PyGILState_Check() } == 1
}

/// Detaches this thread from the interpreter until the returned value is dropped.
///
/// # Safety
///
/// The thread is attached, and nothing on it touches Python until the value is dropped.
unsafe fn detach() -> impl Drop {
    /// Re-attaches the thread however the wait ends.
    struct Reattach(*mut pyo3::ffi::PyThreadState);
    impl Drop for Reattach {
        fn drop(&mut self) {
            // SAFETY: `self.0` is the state `PyEval_SaveThread` returned on this thread, which
            // has not re-attached since.
            unsafe { pyo3::ffi::PyEval_RestoreThread(self.0) };
        }
    }
    // SAFETY: the thread is attached (the caller's contract); it is re-attached by `Reattach`
    // before anything else on it touches Python.
    Reattach(unsafe { pyo3::ffi::PyEval_SaveThread() })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
    use std::sync::{Arc, Condvar, Mutex, mpsc};
    use std::time::{Duration, Instant};

    /// A thread waiting on one of dylease's locks gives the GIL up, and once woken lets the
    /// lock go before it waits for the GIL again, so a thread that holds the GIL and then
    /// takes that lock (as one that drops a lease from Python code does) gets it. Thread B,
    /// attached, waits on a condition variable; this thread takes the GIL, wakes B, sees that
    /// it woke (B sets a flag with the lock taken back), and takes the lock, with a bound: a
    /// wait that kept the GIL, or waited for it with the lock held, would deadlock here.
    #[test]
    fn a_thread_woken_from_a_detached_wait_waits_for_the_gil_without_the_lock() {
        pyo3::Python::initialize();
        let shared = Arc::new((Mutex::new(false), Condvar::new()));
        let woken = Arc::new(AtomicBool::new(false));
        let (started, waiting) = mpsc::channel();
        let (done, finished) = mpsc::channel();
        {
            let (shared, woken) = (Arc::clone(&shared), Arc::clone(&woken));
            std::thread::spawn(move || {
                pyo3::Python::attach(|_| {
                    let (lock, changed) = &*shared;
                    let mut go = lock.lock().unwrap();
                    started.send(()).unwrap();
                    // Bounded: a wait that keeps the GIL lets the other thread have it then.
                    // One wait until notified (a wake-up on a timeout step could find `go`
                    // unset while the other thread holds the GIL, and wait for it unwoken).
                    let give_up = Instant::now() + Duration::from_secs(30);
                    while !*go && Instant::now() < give_up {
                        go = wait_detached(
                            || {
                                let left = give_up.saturating_duration_since(Instant::now());
                                let (guard, _) = changed.wait_timeout(go, left).unwrap();
                                woken.store(*guard, SeqCst);
                                guard
                            },
                            || lock.lock().unwrap(),
                        );
                    }
                });
                done.send(()).unwrap();
            });
        }
        waiting
            .recv_timeout(Duration::from_secs(20))
            .expect("the waiter started");
        let asked = Instant::now();
        pyo3::Python::attach(|_| {
            assert!(
                asked.elapsed() < Duration::from_secs(10),
                "the waiter kept the GIL while it waited"
            );
            let (lock, changed) = &*shared;
            // With a bound: a waiter that keeps the lock while it waits for the GIL would hold it.
            let take = |what: &str| {
                let deadline = Instant::now() + Duration::from_secs(5);
                loop {
                    if let Ok(guard) = lock.try_lock() {
                        return guard;
                    }
                    assert!(
                        Instant::now() < deadline,
                        "the waiter holds the lock while it waits for the GIL ({what})"
                    );
                    std::thread::sleep(Duration::from_millis(1));
                }
            };
            *take("before it was woken") = true;
            changed.notify_all();
            let deadline = Instant::now() + Duration::from_secs(20);
            while !woken.load(SeqCst) {
                assert!(Instant::now() < deadline, "the waiter never woke");
                std::thread::sleep(Duration::from_millis(1));
            }
            // Woken, the waiter now waits for the GIL, which this thread holds.
            drop(take("once woken"));
        });
        finished
            .recv_timeout(Duration::from_secs(40))
            .expect("the waiter finished");
    }
}
