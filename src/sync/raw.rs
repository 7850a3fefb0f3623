//! The sync shim's raw parts, fenced in one file: what manages memory through raw pointers or
//! hands out references into a cell, with the protocol each `// SAFETY:` argues from. The
//! modules beside it (`once`, `marks`, `loom_slot`, and the shim itself) are safe code over
//! these.
//!
//! - `arc` (loom only): `Arc` and `Weak` for loom, which has no `Weak`.
//! - `once` (loom only): the loom-tracked `OnceSlot`.
//! - `marks`: this thread's marks, a list through the stack frames of the calls that made
//!   them.

#[cfg(loom)]
pub(super) mod arc {
    //! `Arc` and `Weak` for loom, which has no `Weak`: built from loom atomics, following
    //! `std::sync::Arc`'s algorithm step for step, with loom's `UnsafeCell` around the value so
    //! that loom checks every access to it.
    //!
    //! - `clone` and `downgrade`: a Relaxed increment (a new reference is made from an existing
    //!   one, which already keeps the allocation alive). std's `downgrade` spins on a lock value
    //!   that only `get_mut`/`is_unique` use; this crate has neither, so the increment is plain.
    //! - `Weak::upgrade`: a compare-and-swap loop that never increments from zero, Acquire on
    //!   success (std uses Acquire here too, so that the value is visible to the new reference).
    //! - drop of a strong reference: a Release decrement; the last one issues an Acquire fence,
    //!   drops the value, then drops the weak reference that all strong ones share.
    //! - drop of a weak reference: the same Release / Acquire-fence pair before deallocating.
    //!
    //! ThreadSanitizer does not model fences, so std's `Arc` uses an Acquire load instead of the
    //! fence under `cfg(sanitize = "thread")`. This copy needs no such switch: it exists only under
    //! `--cfg loom`, and sanitizer builds (`scripts/memcheck.sh --tsan`) use std's `Arc`. A
    //! hand-written count in the production build would need the switch.

    use std::mem::ManuallyDrop;
    use std::ops::Deref;
    use std::ptr::NonNull;

    use loom::cell::UnsafeCell;
    use loom::sync::atomic::{AtomicUsize, Ordering, fence};

    struct Inner<T> {
        strong: AtomicUsize,
        /// Weak references, plus one shared by all strong references while any exists.
        weak: AtomicUsize,
        value: UnsafeCell<ManuallyDrop<T>>,
    }

    /// A loom-checked `std::sync::Arc`.
    pub(crate) struct Arc<T> {
        inner: NonNull<Inner<T>>,
    }

    /// A loom-checked `std::sync::Weak`. `Weak::new()` allocates nothing and never upgrades.
    pub(crate) struct Weak<T> {
        inner: Option<NonNull<Inner<T>>>,
    }

    // SAFETY: the same bounds as std's `Arc` and `Weak`: a reference hands out `&T` to every
    // thread (so `T: Sync`), and the last one may drop `T` on any thread (so `T: Send`).
    unsafe impl<T: Send + Sync> Send for Arc<T> {}
    // SAFETY: as above.
    unsafe impl<T: Send + Sync> Sync for Arc<T> {}
    // SAFETY: as above.
    unsafe impl<T: Send + Sync> Send for Weak<T> {}
    // SAFETY: as above.
    unsafe impl<T: Send + Sync> Sync for Weak<T> {}

    impl<T> Arc<T> {
        pub(crate) fn new(value: T) -> Arc<T> {
            let inner = Box::new(Inner {
                strong: AtomicUsize::new(1),
                weak: AtomicUsize::new(1),
                value: UnsafeCell::new(ManuallyDrop::new(value)),
            });
            Arc {
                inner: NonNull::from(Box::leak(inner)),
            }
        }

        fn inner(&self) -> &Inner<T> {
            // SAFETY: a strong reference keeps the allocation alive (it holds a share of the
            // weak count).
            unsafe { self.inner.as_ref() }
        }

        pub(crate) fn downgrade(this: &Arc<T>) -> Weak<T> {
            this.inner().weak.fetch_add(1, Ordering::Relaxed);
            Weak {
                inner: Some(this.inner),
            }
        }

        pub(crate) fn ptr_eq(a: &Arc<T>, b: &Arc<T>) -> bool {
            a.inner == b.inner
        }

        pub(crate) fn strong_count(this: &Arc<T>) -> usize {
            this.inner().strong.load(Ordering::Relaxed)
        }

        /// The value if this is the only strong reference, else the reference back (as
        /// `std::sync::Arc::try_unwrap`: a compare-and-swap from one to zero, so no upgrade can
        /// slip in between).
        pub(crate) fn try_unwrap(this: Arc<T>) -> Result<T, Arc<T>> {
            if this
                .inner()
                .strong
                .compare_exchange(1, 0, Ordering::Relaxed, Ordering::Relaxed)
                .is_err()
            {
                return Err(this);
            }
            fence(Ordering::Acquire);
            // The count went from one to zero: this was the only strong reference, and none can
            // be made any more.
            Ok(Arc::take_last(ManuallyDrop::new(this)))
        }

        /// The value, if this was the last strong reference (as `std::sync::Arc::into_inner`).
        pub(crate) fn into_inner(this: Arc<T>) -> Option<T> {
            let this = ManuallyDrop::new(this);
            if this.inner().strong.fetch_sub(1, Ordering::Release) != 1 {
                return None;
            }
            fence(Ordering::Acquire);
            // The count reached zero: no other strong reference exists, and none can be made
            // (upgrade never increments from zero).
            Some(Arc::take_last(this))
        }

        /// Moves the value out of the last strong reference `this`, whose count is already zero
        /// and ordered (Acquire fence) after every other reference's accesses, then drops the
        /// weak reference all strong ones shared.
        fn take_last(this: ManuallyDrop<Arc<T>>) -> T {
            let value = this.inner().value.with_mut(|value| {
                // SAFETY: the caller's count reached zero after the fence: nothing else reads the
                // value any more, so this is the only reference to it.
                let value = unsafe { &mut *value };
                // SAFETY: as above; and it is moved out exactly once, here.
                unsafe { ManuallyDrop::take(value) }
            });
            drop(Weak {
                inner: Some(this.inner),
            });
            value
        }
    }

    impl<T> Clone for Arc<T> {
        fn clone(&self) -> Arc<T> {
            self.inner().strong.fetch_add(1, Ordering::Relaxed);
            Arc { inner: self.inner }
        }
    }

    impl<T> Deref for Arc<T> {
        type Target = T;

        fn deref(&self) -> &T {
            // SAFETY: while a strong reference exists the value is initialised and only read;
            // loom records this read and checks it against the write that drops the value.
            self.inner().value.with(|value| unsafe { &**value })
        }
    }

    impl<T> Drop for Arc<T> {
        fn drop(&mut self) {
            if self.inner().strong.fetch_sub(1, Ordering::Release) != 1 {
                return;
            }
            fence(Ordering::Acquire);
            self.inner().value.with_mut(|value| {
                // SAFETY: as in `into_inner`: the last strong reference, ordered after every other,
                // so this is the only reference to the value.
                let value = unsafe { &mut *value };
                // SAFETY: as above; and it is dropped exactly once, here.
                unsafe { ManuallyDrop::drop(value) }
            });
            drop(Weak {
                inner: Some(self.inner),
            });
        }
    }

    impl<T> Weak<T> {
        pub(crate) fn new() -> Weak<T> {
            Weak { inner: None }
        }

        pub(crate) fn upgrade(&self) -> Option<Arc<T>> {
            // SAFETY: a weak reference keeps the allocation alive.
            let inner = unsafe { self.inner?.as_ref() };
            let mut n = inner.strong.load(Ordering::Relaxed);
            loop {
                if n == 0 {
                    return None;
                }
                match inner
                    .strong
                    .compare_exchange_weak(n, n + 1, Ordering::Acquire, Ordering::Relaxed)
                {
                    Ok(_) => break,
                    Err(now) => n = now,
                }
            }
            Some(Arc { inner: self.inner? })
        }

        pub(crate) fn strong_count(&self) -> usize {
            // SAFETY: a weak reference keeps the allocation alive.
            self.inner
                .map_or(0, |inner| unsafe { inner.as_ref() }.strong.load(Ordering::Relaxed))
        }
    }

    impl<T> Clone for Weak<T> {
        fn clone(&self) -> Weak<T> {
            if let Some(inner) = self.inner {
                // SAFETY: this weak reference keeps the allocation alive.
                unsafe { inner.as_ref() }.weak.fetch_add(1, Ordering::Relaxed);
            }
            Weak { inner: self.inner }
        }
    }

    impl<T> Default for Weak<T> {
        fn default() -> Weak<T> {
            Weak::new()
        }
    }

    impl<T> Drop for Weak<T> {
        fn drop(&mut self) {
            let Some(inner) = self.inner else { return };
            // SAFETY: this weak reference keeps the allocation alive until the decrement below.
            if unsafe { inner.as_ref() }.weak.fetch_sub(1, Ordering::Release) != 1 {
                return;
            }
            fence(Ordering::Acquire);
            // SAFETY: the last reference of any kind: the value was dropped (or moved out) by the
            // last strong one, and nothing else can reach the allocation.
            drop(unsafe { Box::from_raw(inner.as_ptr()) });
        }
    }

    impl<T: std::fmt::Debug> std::fmt::Debug for Arc<T> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            (**self).fmt(f)
        }
    }

    impl<T> std::fmt::Debug for Weak<T> {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("(Weak)")
        }
    }
}

#[cfg(loom)]
pub(super) mod once {
    //! `OnceSlot` under loom: an atomic state and a loom-tracked cell.

    pub(crate) struct OnceSlot<T> {
        /// 0: empty, 1: being written, 2: set.
        state: loom::sync::atomic::AtomicU8,
        value: loom::cell::UnsafeCell<Option<T>>,
    }

    // SAFETY: the value is written once, by the one thread that moved the state from empty to
    // being written, and read only after an `Acquire` load saw the `Release` store of "set"
    // that followed the write; after that it is never written again. So sharing the slot shares
    // `&T` (hence `T: Sync`) and may hand the value to another thread (hence `T: Send`).
    unsafe impl<T: Send + Sync> Sync for OnceSlot<T> {}

    impl<T> OnceSlot<T> {
        pub(crate) fn new() -> Self {
            OnceSlot {
                state: loom::sync::atomic::AtomicU8::new(0),
                value: loom::cell::UnsafeCell::new(None),
            }
        }

        pub(crate) fn with(value: T) -> Self {
            OnceSlot {
                state: loom::sync::atomic::AtomicU8::new(2),
                value: loom::cell::UnsafeCell::new(Some(value)),
            }
        }

        pub(crate) fn get(&self) -> Option<&T> {
            use loom::sync::atomic::Ordering;
            if self.state.load(Ordering::Acquire) != 2 {
                return None;
            }
            // SAFETY: set (see the `Sync` impl): never written again, so the reference stays
            // valid as long as the slot.
            self.value.with(|value| unsafe { (*value).as_ref() })
        }

        pub(crate) fn set(&self, value: T) -> Result<(), T> {
            use loom::sync::atomic::Ordering;
            if self
                .state
                .compare_exchange(0, 1, Ordering::Acquire, Ordering::Acquire)
                .is_err()
            {
                return Err(value);
            }
            // SAFETY: this thread alone moved the state from empty: no other writes, and no
            // reader reads before the `Release` store below.
            self.value.with_mut(|slot| unsafe { *slot = Some(value) });
            self.state.store(2, Ordering::Release);
            Ok(())
        }
    }
}

pub(super) mod marks {
    //! This thread's marks: a list threaded through the stack frames of [`with_mark`] calls.
    //! No allocation, no limit, and no thread-local destructor, so it stays usable while the
    //! thread exits. Nodes are linked only by [`with_mark`], each in its own frame and
    //! unlinked before that frame ends: every node reachable from `INNERMOST` is alive.

    use std::cell::Cell;

    /// One mark of this thread.
    struct Node {
        id: u64,
        outer: *const Node,
    }

    thread_locals! {
        /// The innermost mark of this thread. Without drop glue, so it stays usable while the
        /// thread exits and its other thread-locals are being destroyed (a lease may be
        /// dropped by a thread-local destructor).
        static INNERMOST: Cell<*const Node> = const std::ptr::null();
    }

    /// Whether this thread is marked with `id` (by a [`with_mark`] call further up its stack).
    pub(crate) fn is_marked(id: u64) -> bool {
        let mut node = INNERMOST.with(Cell::get);
        while !node.is_null() {
            // SAFETY: every node in the list lives in the frame of a `with_mark` call that is
            // still running on this thread (each call unlinks its node before returning or
            // unwinding, below), so it outlives this loop.
            let current = unsafe { &*node };
            if current.id == id {
                return true;
            }
            node = current.outer;
        }
        false
    }

    /// Runs `f` with this thread marked with `id`, the mark removed when `f` ends, however it
    /// ends.
    pub(crate) fn with_mark<R>(id: u64, f: impl FnOnce() -> R) -> R {
        /// Unlinks the node when the call ends, however it ends.
        struct Unlink(*const Node);
        impl Drop for Unlink {
            fn drop(&mut self) {
                INNERMOST.with(|innermost| innermost.set(self.0));
            }
        }
        let outer = INNERMOST.with(Cell::get);
        let node = Node { id, outer };
        INNERMOST.with(|innermost| innermost.set(&node));
        let _unlink = Unlink(outer);
        f()
    }
}
