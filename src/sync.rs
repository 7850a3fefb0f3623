//! The synchronisation shim: every `Arc`, `Weak`, lock, condition variable, atomic, the
//! slot and the re-entrancy flag the crate uses come from here, and nothing else in the crate
//! names `std::sync`. Keeping them in one place is what lets the protocol be model-checked by
//! swapping this module's backing types.

use std::cell::Cell;

pub(crate) use std::sync::atomic::{AtomicU64, Ordering};
pub(crate) use std::sync::{Arc, Weak};

/// A mutex without poisoning: a panic in plugin teardown must not make the host unusable
/// for ever, and every critical section in this crate leaves its data consistent at each
/// step, so the guard of a poisoned lock is taken as it is.
#[derive(Debug, Default)]
pub(crate) struct Mutex<T>(std::sync::Mutex<T>);

pub(crate) type MutexGuard<'a, T> = std::sync::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Mutex(std::sync::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A condition variable paired with [`Mutex`], equally indifferent to poisoning.
#[derive(Debug, Default)]
pub(crate) struct Condvar(std::sync::Condvar);

impl Condvar {
    pub(crate) fn new() -> Self {
        Condvar(std::sync::Condvar::new())
    }

    pub(crate) fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        self.0.wait(guard).unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Waits for a notification or until `timeout` has passed, whichever comes first (or
    /// spuriously): callers check their condition and their deadline again.
    pub(crate) fn wait_timeout<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: std::time::Duration,
    ) -> MutexGuard<'a, T> {
        match self.0.wait_timeout(guard, timeout) {
            Ok((guard, _)) => guard,
            Err(poisoned) => poisoned.into_inner().0,
        }
    }

    pub(crate) fn notify_all(&self) {
        self.0.notify_all();
    }
}

/// The process-wide slot of a host: a `Weak` readable without a lock.
///
/// It never keeps its value alive: upgrading succeeds only while some lease holds the set.
pub(crate) struct Slot<T>(arc_swap::ArcSwapWeak<T>);

impl<T> Slot<T> {
    pub(crate) fn empty() -> Self {
        Slot(arc_swap::ArcSwapWeak::new(Weak::new()))
    }

    /// The fast path: a strong reference if a value is alive, without taking any lock.
    #[inline]
    pub(crate) fn upgrade(&self) -> Option<Arc<T>> {
        self.0.load().upgrade()
    }

    /// Replaces the stored `Weak`. Dropping the old `Weak` never runs the value's `Drop`, so
    /// this is safe to call under the host's lock.
    pub(crate) fn store(&self, weak: Weak<T>) {
        self.0.store(weak);
    }
}

impl<T> std::fmt::Debug for Slot<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Slot")
    }
}

/// One host this thread is inside, in a list threaded through the stack frames of
/// [`inside_host`] calls: no allocation, no limit, and no thread-local destructor.
struct InsideNode {
    id: usize,
    outer: *const InsideNode,
}

thread_local! {
    /// The innermost host whose load or unload this thread is running. `const` and without
    /// drop glue, so it stays usable while the thread exits and its other thread-locals are
    /// being destroyed (a lease may be dropped by a thread-local destructor).
    static INSIDE: Cell<*const InsideNode> = const { Cell::new(std::ptr::null()) };
}

/// Runs `f` with this thread marked as running a load or unload of host `id`. `f` learns
/// whether the thread already was inside that host: then waiting for the host would wait for
/// itself, and nothing new is marked.
pub(crate) fn inside_host<R>(id: usize, f: impl FnOnce(bool) -> R) -> R {
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

/// A value reachable only through `&mut` (or by value), which makes it `Sync` even when the
/// value is only `Send`: no `&T` is ever handed out, so no two threads can touch it at once.
/// (The same idea as the unstable `std::sync::Exclusive`.) A plugin set holds its teardown
/// work in one, so that unload hooks need only be `Send`. (No derived `Debug`: it would read
/// `T` through `&self`.)
pub(crate) struct Exclusive<T>(T);

impl<T> std::fmt::Debug for Exclusive<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exclusive").finish_non_exhaustive()
    }
}

// SAFETY: `Exclusive` offers no access through a shared reference; every access goes through
// `&mut self` or `self`, which Rust already makes exclusive. Sharing `&Exclusive<T>` between
// threads therefore shares nothing of `T`, and sending the value needs `T: Send`.
unsafe impl<T: Send> Sync for Exclusive<T> {}

impl<T> Exclusive<T> {
    pub(crate) fn new(value: T) -> Self {
        Exclusive(value)
    }

    pub(crate) fn get_mut(&mut self) -> &mut T {
        &mut self.0
    }
}
