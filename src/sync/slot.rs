//! The slot: a home for one value at a time, counted like an `Arc`, that can be filled again
//! after its value was dropped.
//!
//! A host owns one slot for as long as it lives. The slot is its weak reference to the loaded
//! set: it never keeps the value alive, and [`Slot::upgrade`] succeeds only while some
//! [`Strong`] reference holds it. Because the slot itself never moves or goes away, the lock-free
//! fast path is a single compare-and-swap on the strong count, with nothing to protect the
//! read of a pointer (which is what `ArcSwapWeak` spends its extra atomics on).
//!
//! The counting follows `std::sync::Arc` exactly (see the comments at each ordering). What is
//! added is the refill: when the last strong reference is dropped, the value is dropped in place
//! and the slot becomes vacant; its owner may then [`fill`](Slot::fill) it with a new value.
//! Refilling is safe for readers because an upgrade never increments a count of zero, and every
//! upgrade that sees a non-zero count sees the value that count was published with.
//!
//! Each filling carries a tag (the host passes the low 32 bits of the generation), kept in the
//! same atomic word as the count: `tag << 32 | count`. [`Slot::upgrade_tagged`] increments only
//! a count of the same tag, so a weak handle to an old value never takes a share of a newer
//! one, not even for a moment (which could make it, not the newer value's real last holder,
//! the one to drop it).

use std::mem::MaybeUninit;
use std::ops::Deref;
use std::ptr::NonNull;

use super::imp::{AtomicU64, Ordering, UnsafeCell, fence};

/// The count's bits of the atomic word; the tag has the rest.
const COUNT: u64 = u32::MAX as u64;

/// The most strong references a slot counts before aborting, as `std::sync::Arc` does at
/// `isize::MAX`: half the count's range, so that even many threads cloning at once abort long
/// before the count could carry into the tag. Only leaked (`mem::forget`) references get there.
const MAX_REFCOUNT: u64 = COUNT / 2;

/// The tag of the value whose count is `word`.
fn tag_of(word: u64) -> u32 {
    (word >> 32) as u32
}

/// What a value must provide to live in a [`Slot`].
pub(crate) trait Tenant: Sized {
    /// Taken from the value by its last strong reference just before the value is dropped in
    /// place, and dropped right after, also when the value's drop panics.
    type Leaving;

    /// Prepares the slot for the value's departure. The returned value must keep the slot's
    /// memory valid until it is dropped, and its drop must be what tells the slot's owner that
    /// the slot is vacant (see [`Slot::fill`]). It must not panic: the value would then never
    /// be dropped nor the slot reported vacant. (`PluginSet`'s clones an `Arc` and copies a
    /// number.)
    fn leaving(&self) -> Self::Leaving;
}

/// A home for one value at a time. See the [module docs](self).
pub(crate) struct Slot<T> {
    /// `tag << 32 | count`: the count of strong references to the value (0 while the slot is
    /// vacant, while its value is being dropped, and while a new value is being written), and
    /// the tag the value was filled with.
    strong: AtomicU64,
    /// Initialised exactly while `strong > 0`, and while the last reference drops it.
    value: UnsafeCell<MaybeUninit<T>>,
}

// SAFETY: a slot hands out `&T` to every thread that holds a `Strong` (so `T: Sync`), and the
// value may be dropped by whichever thread drops the last one (so `T: Send`) — the same bounds
// as `Arc<T>`. All shared state besides the value is atomic.
unsafe impl<T: Send + Sync> Send for Slot<T> {}
// SAFETY: as above.
unsafe impl<T: Send + Sync> Sync for Slot<T> {}

impl<T> Slot<T> {
    /// A vacant slot.
    pub(crate) fn vacant() -> Self {
        Slot {
            strong: AtomicU64::new(0),
            value: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// The number of strong references right now. Only for observers: it may change before
    /// the caller looks at it.
    pub(crate) fn strong_count(&self) -> usize {
        (self.strong.load(Ordering::Relaxed) & COUNT) as usize
    }
}

impl<T: Tenant> Slot<T> {
    /// A strong reference to the value, if one is alive. No lock; one compare-and-swap.
    #[inline]
    pub(crate) fn upgrade(&self) -> Option<Strong<T>> {
        self.upgrade_if(|_| true)
    }

    /// A strong reference to the value, if one is alive and it was filled with `tag`.
    #[inline]
    pub(crate) fn upgrade_tagged(&self, tag: u32) -> Option<Strong<T>> {
        self.upgrade_if(|word| tag_of(word) == tag)
    }

    #[inline]
    fn upgrade_if(&self, wanted: impl Fn(u64) -> bool) -> Option<Strong<T>> {
        #[cfg(not(all(loom, dylease_broken_upgrade)))]
        {
            // As `std::sync::Weak::upgrade`: never increment from zero, so a value whose last
            // reference is gone (being dropped, or the slot vacant) is never handed out.
            // Relaxed is enough for the failure case, which learns nothing. Acquire on success
            // pairs with the Release store in `fill`: the value written there is visible here.
            self.strong
                .fetch_update(Ordering::Acquire, Ordering::Relaxed, |word| {
                    let count = word & COUNT;
                    (count != 0 && wanted(word)).then(|| {
                        assert!(count < MAX_REFCOUNT, "dylease: lease count overflow");
                        word + 1
                    })
                })
                .ok()?;
        }
        #[cfg(all(loom, dylease_broken_upgrade))]
        {
            // Deliberately wrong, for the loom models' own test: the count can reach zero
            // between the check and the increment, and the value is then handed out while (or
            // after) its last reference drops it. The models must catch this.
            let word = self.strong.load(Ordering::Acquire);
            if word & COUNT == 0 || !wanted(word) {
                return None;
            }
            self.strong.fetch_add(1, Ordering::Acquire);
        }
        Some(Strong {
            slot: NonNull::from(self),
        })
    }

    /// Moves `value` into the slot, tagged `tag`, and returns the first strong reference to it.
    ///
    /// # Safety
    ///
    /// - The slot is vacant: it holds no value, the last value's drop has finished (its
    ///   [`Tenant::Leaving`] has been dropped), and no other `fill` of this slot runs at the
    ///   same time. (The host guarantees all three with its lock and invariant I1: it fills only
    ///   after the previous generation marked itself unloaded.)
    /// - The slot's memory stays valid for as long as the value lives: the value owns a strong
    ///   reference to whatever allocation contains the slot. (A plugin set holds an `Arc` of its
    ///   host's shared state, which contains the slot.)
    pub(crate) unsafe fn fill(&self, value: T, tag: u32) -> Strong<T> {
        debug_assert_eq!(self.strong_count(), 0, "filling an occupied slot");
        // SAFETY: the slot is vacant (the caller's contract), so no reference to the old value
        // exists, and no reader touches `value` while `strong` is 0.
        self.value
            .with_mut(|cell| unsafe { cell.write(MaybeUninit::new(value)) });
        // Release: publishes the value written above to every upgrade that sees this count.
        self.strong.store(u64::from(tag) << 32 | 1, Ordering::Release);
        Strong {
            slot: NonNull::from(self),
        }
    }
}

impl<T> std::fmt::Debug for Slot<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Slot").field("strong", &self.strong_count()).finish()
    }
}

/// A strong reference to the value in a [`Slot`]: what an `Arc` is to its allocation. One
/// pointer wide.
pub(crate) struct Strong<T: Tenant> {
    slot: NonNull<Slot<T>>,
}

// SAFETY: as for `Arc<T>`: a `Strong` gives `&T` to its holder and may drop `T` on any thread.
unsafe impl<T: Tenant + Send + Sync> Send for Strong<T> {}
// SAFETY: as above.
unsafe impl<T: Tenant + Send + Sync> Sync for Strong<T> {}

impl<T: Tenant> Strong<T> {
    #[inline]
    fn slot(&self) -> &Slot<T> {
        // SAFETY: this strong reference keeps the value alive, and the value keeps the slot's
        // memory valid (`Slot::fill`'s contract).
        unsafe { self.slot.as_ref() }
    }

    /// Whether two references share one value. (One slot holds one value at a time, and both
    /// references are alive, so the same slot means the same value.)
    pub(crate) fn ptr_eq(a: &Self, b: &Self) -> bool {
        a.slot == b.slot
    }

    /// Drops the value in place; the last strong reference is gone.
    ///
    /// # Safety
    ///
    /// The caller dropped the last strong reference to the value in `slot` and has
    /// synchronised with every earlier drop (the Acquire fence in `Drop`).
    #[cold]
    unsafe fn vacate(slot: NonNull<Slot<T>>) {
        // The value's `leaving` keeps the slot's memory valid until it is dropped; no
        // reference into the slot may be alive by then, so the block below ends first.
        let leaving = {
            // SAFETY: the value is still in the slot and keeps its memory valid.
            let slot = unsafe { slot.as_ref() };
            // SAFETY: the count is zero and no upgrade increments from zero, so this thread
            // has the value to itself until the slot is filled again, which waits for
            // `leaving` to be dropped.
            let leaving = slot.value.with(|cell| unsafe { (*cell).assume_init_ref() }.leaving());
            // SAFETY: as above; the value is initialised and dropped exactly once, here. If its
            // drop panics, `leaving` is still dropped while unwinding.
            slot.value.with_mut(|cell| unsafe { (*cell).assume_init_drop() });
            leaving
        };
        drop(leaving);
    }
}

impl<T: Tenant> Deref for Strong<T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: the value is initialised while a strong reference exists, and nobody
        // writes to it until the last one is dropped.
        self.slot().value.with(|cell| unsafe { (*cell).assume_init_ref() })
    }
}

impl<T: Tenant> Clone for Strong<T> {
    #[inline]
    fn clone(&self) -> Self {
        // Relaxed, as in `Arc::clone`: a new reference can only be made from an existing one,
        // which already keeps the value alive, so no other memory needs ordering here.
        let old = self.slot().strong.fetch_add(1, Ordering::Relaxed);
        if old & COUNT > MAX_REFCOUNT {
            std::process::abort();
        }
        Strong { slot: self.slot }
    }
}

impl<T: Tenant> Drop for Strong<T> {
    #[inline]
    fn drop(&mut self) {
        // Release, as in `Arc::drop`: this reference's uses of the value happen before the
        // value is dropped by whichever reference is last.
        if self.slot().strong.fetch_sub(1, Ordering::Release) & COUNT != 1 {
            return;
        }
        // Acquire, as in `Arc::drop`: pairs with the Release decrements of all other
        // references, so their uses of the value happen before it is dropped below.
        fence(Ordering::Acquire);
        // SAFETY: this was the last strong reference, and the fence synchronised with the rest.
        unsafe { Self::vacate(self.slot) };
    }
}
