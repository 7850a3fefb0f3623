//! `OnceSlot`: a value set at most once, read without a lock once set.

/// A slot set at most once and read without a lock after: std's `OnceLock` in the default
/// build; under `--cfg loom` an atomic state and a loom-tracked cell, so that a model sees
/// the publication (a `Release` store of the ready state after the write, an `Acquire` load
/// before the read) and reports a read that races the write.
#[cfg(not(loom))]
pub(crate) struct OnceSlot<T>(std::sync::OnceLock<T>);

#[cfg(not(loom))]
impl<T> OnceSlot<T> {
    /// An empty slot.
    pub(crate) const fn new() -> Self {
        OnceSlot(std::sync::OnceLock::new())
    }

    /// A slot holding `value` already.
    pub(crate) fn with(value: T) -> Self {
        OnceSlot(std::sync::OnceLock::from(value))
    }

    /// The value, once set.
    #[inline]
    pub(crate) fn get(&self) -> Option<&T> {
        self.0.get()
    }

    /// Sets the value; `Err(value)` if it was set already.
    pub(crate) fn set(&self, value: T) -> Result<(), T> {
        self.0.set(value)
    }
}

#[cfg(loom)]
pub(crate) struct OnceSlot<T> {
    /// 0: empty, 1: being written, 2: set.
    state: loom::sync::atomic::AtomicU8,
    value: loom::cell::UnsafeCell<Option<T>>,
}

// SAFETY: the value is written once, by the one thread that moved the state from empty to
// being written, and read only after an `Acquire` load saw the `Release` store of "set"
// that followed the write; after that it is never written again. So sharing the slot shares
// `&T` (hence `T: Sync`) and may hand the value to another thread (hence `T: Send`).
#[cfg(loom)]
unsafe impl<T: Send + Sync> Sync for OnceSlot<T> {}

#[cfg(loom)]
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

impl<T: std::fmt::Debug> std::fmt::Debug for OnceSlot<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.get() {
            Some(value) => f.debug_tuple("OnceSlot").field(value).finish(),
            None => f.write_str("OnceSlot(<unset>)"),
        }
    }
}
