//! The synchronisation shim: every `Arc`, lock, condition variable, atomic, the slot and the
//! thread-locals the crate uses come from here, and nothing else in the crate names `std::sync`
//! or loom. Keeping them in one place is what lets the protocol be model-checked: under
//! `--cfg loom` the backing types are loom's, so the loom models in `loom-tests/` explore the
//! crate's real code.

mod slot;

pub(crate) use imp::{Arc, AtomicU64, Ordering};
pub(crate) use slot::{Slot, Strong, Tenant};

/// The backing types of the default build.
#[cfg(not(loom))]
mod imp {
    pub(crate) use std::sync::atomic::{AtomicU64, Ordering, fence};
    pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard};

    /// `std::cell::UnsafeCell` behind loom's closure-based API, so the slot's code is the same
    /// in both builds.
    #[derive(Debug)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) fn new(value: T) -> Self {
            UnsafeCell(std::cell::UnsafeCell::new(value))
        }

        #[inline]
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        #[inline]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }

    /// Unwraps a lock result: this crate's locks ignore poisoning (see [`super::Mutex`]).
    pub(crate) fn unpoison<G>(result: std::sync::LockResult<G>) -> G {
        result.unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The backing types under `--cfg loom`: every access is visible to the model checker. loom's
/// `UnsafeCell` also checks that the slot's orderings order every write of the value before
/// every read of it.
#[cfg(loom)]
mod imp {
    pub(crate) use loom::cell::UnsafeCell;
    pub(crate) use loom::sync::atomic::{AtomicU64, Ordering, fence};
    pub(crate) use loom::sync::{Arc, Condvar, Mutex, MutexGuard};

    /// Unwraps a lock result: this crate's locks ignore poisoning (see [`super::Mutex`]).
    pub(crate) fn unpoison<G>(result: std::sync::LockResult<G>) -> G {
        result.unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// Declares a thread-local `Cell` that loom sees as per-thread under `--cfg loom` (std's
/// thread-locals would be shared by all loom threads, which run on one OS thread). In the
/// default build it is a `const` thread-local without drop glue, usable while a thread exits.
macro_rules! cell_thread_local {
    ($(#[$attr:meta])* static $name:ident: Cell<$t:ty> = $init:expr;) => {
        #[cfg(not(loom))]
        std::thread_local! {
            $(#[$attr])* static $name: std::cell::Cell<$t> = const { std::cell::Cell::new($init) };
        }
        #[cfg(loom)]
        loom::thread_local! {
            $(#[$attr])* static $name: std::cell::Cell<$t> = std::cell::Cell::new($init);
        }
    };
}
pub(crate) use cell_thread_local;

/// A mutex without poisoning: a panic in plugin teardown must not make the host unusable
/// for ever, and every critical section in this crate leaves its data consistent at each
/// step, so the guard of a poisoned lock is taken as it is.
#[derive(Debug, Default)]
pub(crate) struct Mutex<T>(imp::Mutex<T>);

pub(crate) type MutexGuard<'a, T> = imp::MutexGuard<'a, T>;

impl<T> Mutex<T> {
    pub(crate) fn new(value: T) -> Self {
        Mutex(imp::Mutex::new(value))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, T> {
        imp::unpoison(self.0.lock())
    }
}

/// A condition variable paired with [`Mutex`], equally indifferent to poisoning.
#[derive(Debug, Default)]
pub(crate) struct Condvar(imp::Condvar);

impl Condvar {
    pub(crate) fn new() -> Self {
        Condvar(imp::Condvar::new())
    }

    pub(crate) fn wait<'a, T>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        imp::unpoison(self.0.wait(guard))
    }

    /// Waits for a notification or until `timeout` has passed, whichever comes first (or
    /// spuriously): callers check their condition and their deadline again.
    pub(crate) fn wait_timeout<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: std::time::Duration,
    ) -> MutexGuard<'a, T> {
        imp::unpoison(self.0.wait_timeout(guard, timeout)).0
    }

    pub(crate) fn notify_all(&self) {
        self.0.notify_all();
    }
}
