//! `OnceSlot`: a value set at most once, read without a lock once set.

/// A slot set at most once and read without a lock after: std's `OnceLock` in the default
/// build; under `--cfg loom` an atomic state and a loom-tracked cell (`sync::raw`), so that a
/// model sees the publication (a `Release` store of the ready state after the write, an
/// `Acquire` load before the read) and reports a read that races the write.
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
pub(crate) use super::raw::once::OnceSlot;

impl<T: std::fmt::Debug> std::fmt::Debug for OnceSlot<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.get() {
            Some(value) => f.debug_tuple("OnceSlot").field(value).finish(),
            None => f.write_str("OnceSlot(<unset>)"),
        }
    }
}
