//! Re-entrancy marks: which hosts this thread is loading or unloading right now, so that a
//! nested `acquire()` fails with [`Error::Reentrant`](crate::Error::Reentrant) instead of
//! waiting for itself (invariant I4). The marks are the sync shim's (`sync::marks`).

/// Runs `f` with this thread marked as running a load or unload of host `id`. `f` learns
/// whether the thread already was inside that host: then waiting for the host would wait for
/// itself, and nothing new is marked.
pub(crate) fn inside_host<R>(id: u64, f: impl FnOnce(bool) -> R) -> R {
    crate::sync::marks::inside(id, f)
}
