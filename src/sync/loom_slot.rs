//! The host slot under loom: a `Weak` published through a loom atomic, so that the models see
//! which `Weak` a thread may read, and a thread that has not synchronised with a store may
//! still read the `Weak` before it, as with arc-swap.
//!
//! arc-swap promises that a load sees the last store that happened before it, or a later one:
//! a load is at least Acquire and a store at least Release. This stand-in gives that through
//! its atomic: the slot's `Weak`s live in a list that only grows, and the atomic holds the
//! position of the current one (stored Release, loaded Acquire), read before the list's lock.
//! The lock still gives a little more than arc-swap: a load that read the old position and
//! takes the lock after a store's unlock is ordered after that store's earlier writes. The
//! models assert only what a thread read, which that extra does not change. A lock read first
//! would give much more: a
//! thread that takes it after a store sees that store, whatever it saw before, which hid from
//! the models a generation number published without Release (docs::internals, "The slot
//! protocol": a thread that sees the new number must find the new set in the slot).
//!
//! The list's lock only guards the list itself: a thread reads the position first, without
//! it. Replaced `Weak`s stay in the list until the slot is dropped (arc-swap frees them once
//! no load can still see them; a `Weak` never keeps a set loaded, so I3's checks are
//! unaffected).

use loom::sync::Mutex;
use loom::sync::atomic::{AtomicUsize, Ordering};

use super::raw::arc::{Arc, Weak};

/// A `Weak<T>`, swapped atomically (see the module's documentation).
pub(crate) struct LoomSlot<T> {
    /// The position in `weaks` of the current `Weak`.
    current: AtomicUsize,
    /// Every `Weak` stored so far, in store order.
    weaks: Mutex<Vec<Weak<T>>>,
}

impl<T> LoomSlot<T> {
    pub(crate) fn new(weak: Weak<T>) -> Self {
        LoomSlot {
            current: AtomicUsize::new(0),
            weaks: Mutex::new(vec![weak]),
        }
    }

    /// The current `Weak`: the position first (Acquire), then the list.
    fn load(&self) -> Weak<T> {
        let at = self.current.load(Ordering::Acquire);
        super::unpoison(self.weaks.lock())[at].clone()
    }

    pub(crate) fn upgrade(&self) -> Option<Arc<T>> {
        self.load().upgrade()
    }

    pub(crate) fn store(&self, weak: Weak<T>) {
        let mut weaks = super::unpoison(self.weaks.lock());
        weaks.push(weak);
        let at = weaks.len() - 1;
        drop(weaks);
        self.current.store(at, Ordering::Release);
    }

    pub(crate) fn strong_count(&self) -> usize {
        self.load().strong_count()
    }
}
