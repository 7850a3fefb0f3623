//! Re-entrancy marks: which hosts this thread is loading or unloading right now, so that a
//! nested `acquire()` fails with [`Error::Reentrant`](crate::Error::Reentrant) instead of
//! waiting for itself (invariant I4).
// `unsafe` here: this thread's re-entrancy marks are a list through stack frames.
#![allow(unsafe_code)]

use std::cell::Cell;

/// One host this thread is inside, in a list threaded through the stack frames of
/// [`inside_host`] calls: no allocation, no limit, and no thread-local destructor.
struct InsideNode {
    id: u64,
    outer: *const InsideNode,
}

crate::sync::thread_locals! {
    /// The innermost host whose load or unload this thread is running. Without drop glue, so
    /// it stays usable while the thread exits and its other thread-locals are being destroyed
    /// (a lease may be dropped by a thread-local destructor).
    static INSIDE: Cell<*const InsideNode> = const std::ptr::null();
}

/// Runs `f` with this thread marked as running a load or unload of host `id`. `f` learns
/// whether the thread already was inside that host: then waiting for the host would wait for
/// itself, and nothing new is marked.
pub(crate) fn inside_host<R>(id: u64, f: impl FnOnce(bool) -> R) -> R {
    let innermost = INSIDE.with(Cell::get);
    let mut node = innermost;
    while !node.is_null() {
        // SAFETY: every node in the list lives in the frame of an `inside_host` call that is
        // still running on this thread (each call unlinks its node before returning or
        // unwinding, below), so it outlives this loop.
        let current = unsafe { &*node };
        if current.id == id {
            return f(true);
        }
        node = current.outer;
    }
    /// Unlinks the node when the call ends, however it ends.
    struct Unlink(*const InsideNode);
    impl Drop for Unlink {
        fn drop(&mut self) {
            INSIDE.with(|inside| inside.set(self.0));
        }
    }
    let node = InsideNode { id, outer: innermost };
    INSIDE.with(|inside| inside.set(&node));
    let _unlink = Unlink(innermost);
    f(false)
}
