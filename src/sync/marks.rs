//! Marks of the ids this thread is inside: a list threaded through the stack frames of
//! [`inside`] calls, for the host's re-entrancy marks (`host::reentry`, invariant I4).
//! No allocation, no limit, and no thread-local destructor, so it stays usable while the
//! thread exits.

use std::cell::Cell;

/// One mark of this thread, in a list threaded through the stack frames of
/// [`inside`] calls: no allocation, no limit, and no thread-local destructor.
struct InsideNode {
    id: u64,
    outer: *const InsideNode,
}

crate::sync::thread_locals! {
    /// The innermost mark of this thread. Without drop glue, so it stays usable while the
    /// thread exits and its other thread-locals are being destroyed (a lease may be dropped by
    /// a thread-local destructor).
    static INSIDE: Cell<*const InsideNode> = const std::ptr::null();
}

/// Runs `f` with this thread marked with `id`. `f` learns whether the thread already was
/// marked with it (by a call further up its stack): then nothing new is marked.
pub(crate) fn inside<R>(id: u64, f: impl FnOnce(bool) -> R) -> R {
    let innermost = INSIDE.with(Cell::get);
    let mut node = innermost;
    while !node.is_null() {
        // SAFETY: every node in the list lives in the frame of an `inside` call that is
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
