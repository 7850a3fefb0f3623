//! The sync room, the lowest but for `error`: the synchronisation shim. It may call nothing of
//! the crate but the shared `error`.
//!
//! The synchronisation shim: every `Arc`, `Weak`, lock, condition variable, atomic, the host
//! slot and the thread-locals of the crate's protocols come from here, and no protocol code
//! names `std::sync`, `arc_swap` or loom. (The file watcher, `host::watch`, which no loom
//! model explores, uses std's channel and a `std::sync::Mutex` directly; tests may too.) Under
//! `--cfg loom` the backing types are loom's, plus a loom-checked `Arc`/`Weak` pair
//! (`raw::arc`, which loom lacks) and a stand-in for arc-swap's slot (`loom_slot`, a loom
//! atomic that promises what arc-swap does and no more), so the models in `loom-tests/` and
//! the crate's own loom tests explore the crate's real code.
//!
//! Nothing here knows about plugins: it only re-exports, as tokio's `loom` module does, plus
//! the two adapters that make std's and loom's APIs agree (locks without poisoning, and the
//! slot), [`OnceSlot`], a value set once and read without a lock (loom-tracked under `--cfg
//! loom`), and [`marks`], marks of the ids a thread is inside.

/// Declares a thread-local that loom sees as per-thread under `--cfg loom` (std's
/// thread-locals would be shared by all loom threads, which run on one OS thread).
///
/// `const` form: a `Cell` without drop glue, usable while a thread exits. Otherwise: any
/// value; reach it with `try_with`, which fails once the thread's locals are being destroyed.
macro_rules! thread_locals {
    ($(#[$attr:meta])* static $name:ident: Cell<$t:ty> = const $init:expr;) => {
        #[cfg(not(loom))]
        std::thread_local! {
            $(#[$attr])* static $name: std::cell::Cell<$t> = const { std::cell::Cell::new($init) };
        }
        #[cfg(loom)]
        loom::thread_local! {
            $(#[$attr])* static $name: std::cell::Cell<$t> = std::cell::Cell::new($init);
        }
    };
    ($(#[$attr:meta])* static $name:ident: $t:ty = $init:expr;) => {
        #[cfg(not(loom))]
        std::thread_local! {
            $(#[$attr])* static $name: $t = $init;
        }
        #[cfg(loom)]
        loom::thread_local! {
            $(#[$attr])* static $name: $t = $init;
        }
    };
}
// Defined before the modules below, which are in its textual scope (`raw` names it so).
pub(crate) use thread_locals;

#[forbid(unsafe_code)]
#[cfg(loom)]
mod loom_slot;
#[forbid(unsafe_code)]
pub(crate) mod marks;
#[forbid(unsafe_code)]
mod once;
// The shim's `unsafe`, fenced in one file: the loom-checked `Arc` manages its allocation
// through raw pointers, the loom stand-in of `OnceSlot` hands out references into a loom
// cell, and this thread's marks are a list through stack frames.
#[allow(unsafe_code)]
mod raw;

pub(crate) use once::OnceSlot;

/// The backing types of the default build.
#[cfg(not(loom))]
mod imp {
    pub(crate) use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};

    /// The host slot: a lock-free `ArcSwapWeak` (arc-swap's own tests cover it).
    pub(crate) type WeakSlot<T> = arc_swap::ArcSwapWeak<T>;

    pub(crate) fn slot_new<T>(weak: Weak<T>) -> WeakSlot<T> {
        arc_swap::ArcSwapAny::new(weak)
    }

    #[inline]
    pub(crate) fn slot_upgrade<T>(slot: &WeakSlot<T>) -> Option<Arc<T>> {
        slot.load().upgrade()
    }

    pub(crate) fn slot_store<T>(slot: &WeakSlot<T>, weak: Weak<T>) {
        slot.store(weak);
    }

    pub(crate) fn slot_strong_count<T>(slot: &WeakSlot<T>) -> usize {
        slot.load().strong_count()
    }
}

/// The backing types under `--cfg loom`: every access is visible to the model checker.
#[cfg(loom)]
mod imp {
    pub(crate) use super::raw::arc::{Arc, Weak};
    pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    pub(crate) use loom::sync::{Condvar, Mutex, MutexGuard};

    /// loom cannot see inside arc-swap: the slot is a stand-in that promises what arc-swap
    /// does (Release stores, Acquire loads) through a loom atomic.
    pub(crate) type WeakSlot<T> = super::loom_slot::LoomSlot<T>;

    pub(crate) fn slot_new<T>(weak: Weak<T>) -> WeakSlot<T> {
        WeakSlot::new(weak)
    }

    pub(crate) fn slot_upgrade<T>(slot: &WeakSlot<T>) -> Option<Arc<T>> {
        slot.upgrade()
    }

    pub(crate) fn slot_store<T>(slot: &WeakSlot<T>, weak: Weak<T>) {
        slot.store(weak);
    }

    pub(crate) fn slot_strong_count<T>(slot: &WeakSlot<T>) -> usize {
        slot.strong_count()
    }
}

pub(crate) use imp::{Arc, AtomicBool, AtomicU64, Ordering, Weak};

/// A thread's id (loom's under `--cfg loom`, where every model thread runs on one OS thread).
#[cfg(not(loom))]
pub(crate) type ThreadId = std::thread::ThreadId;
#[cfg(loom)]
pub(crate) type ThreadId = loom::thread::ThreadId;

/// The calling thread's id.
pub(crate) fn current_thread() -> ThreadId {
    #[cfg(not(loom))]
    {
        std::thread::current().id()
    }
    #[cfg(loom)]
    {
        loom::thread::current().id()
    }
}

/// Starts a named background thread (loom's threads under `--cfg loom`), detached.
pub(crate) fn spawn(name: &str, body: impl FnOnce() + Send + 'static) -> std::io::Result<()> {
    #[cfg(not(loom))]
    {
        std::thread::Builder::new().name(name.to_owned()).spawn(body).map(drop)
    }
    #[cfg(loom)]
    {
        let _ = name;
        drop(loom::thread::spawn(body));
        Ok(())
    }
}

/// Unwraps a lock result: this crate's locks ignore poisoning (see [`Mutex`]).
fn unpoison<G>(result: std::sync::LockResult<G>) -> G {
    result.unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A slot holding a `Weak<T>`, swapped atomically; loads take no lock in the default build.
pub(crate) struct WeakSlot<T>(imp::WeakSlot<T>);

impl<T> std::fmt::Debug for WeakSlot<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WeakSlot")
    }
}

impl<T> WeakSlot<T> {
    /// A slot whose weak reference upgrades to nothing.
    pub(crate) fn empty() -> Self {
        WeakSlot(imp::slot_new(Weak::new()))
    }

    /// A strong reference to the value the slot's weak reference points to, if it is alive.
    #[inline]
    pub(crate) fn upgrade(&self) -> Option<Arc<T>> {
        imp::slot_upgrade(&self.0)
    }

    /// How many strong references the slot's value has right now (for observers only).
    pub(crate) fn strong_count(&self) -> usize {
        imp::slot_strong_count(&self.0)
    }

    /// Replaces the weak reference. (Only a `Weak` is dropped here, never a strong one.)
    pub(crate) fn store(&self, weak: Weak<T>) {
        imp::slot_store(&self.0, weak);
    }
}

/// A process-wide value made on first use: `once_cell`'s `Lazy` (loom's `lazy_static!`, reset
/// for each explored execution, under `--cfg loom`).
macro_rules! lazy_static {
    ($(#[$attr:meta])* static $name:ident: $t:ty = $init:expr;) => {
        #[cfg(not(loom))]
        $(#[$attr])*
        static $name: once_cell::sync::Lazy<$t> = once_cell::sync::Lazy::new(|| $init);
        #[cfg(loom)]
        loom::lazy_static! {
            $(#[$attr])* static ref $name: $t = $init;
        }
    };
}
pub(crate) use lazy_static;

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
        unpoison(self.0.lock())
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
        unpoison(self.0.wait(guard))
    }

    /// Waits for a notification or until `timeout` has passed, whichever comes first (or
    /// spuriously): callers check their condition and their deadline again.
    pub(crate) fn wait_timeout<'a, T>(
        &self,
        guard: MutexGuard<'a, T>,
        timeout: std::time::Duration,
    ) -> MutexGuard<'a, T> {
        unpoison(self.0.wait_timeout(guard, timeout)).0
    }

    pub(crate) fn notify_all(&self) {
        self.0.notify_all();
    }
}
