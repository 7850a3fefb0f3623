//! Marks of the ids this thread is inside, for the host's re-entrancy marks (`host::reentry`,
//! invariant I4): a list threaded through the stack frames of [`inside`] calls (`sync::raw`).
//! No allocation, no limit, and no thread-local destructor, so it stays usable while the
//! thread exits.

use super::raw::marks::{is_marked, with_mark};

/// Runs `f` with this thread marked with `id`. `f` learns whether the thread already was
/// marked with it (by a call further up its stack): then nothing new is marked.
pub(crate) fn inside<R>(id: u64, f: impl FnOnce(bool) -> R) -> R {
    if is_marked(id) {
        return f(true);
    }
    with_mark(id, || f(false))
}
