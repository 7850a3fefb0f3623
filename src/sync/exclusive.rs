//! `Exclusive`: a value made `Sync` by never being shared.

/// A value reachable only through `&mut` (or by value), which makes it `Sync` even when the
/// value is only `Send`: no `&T` is ever handed out, so no two threads can touch it at once.
/// (The same idea as the unstable `std::sync::Exclusive`.) A set's teardown work lives in one,
/// so that unload hooks need only be `Send`. (No derived `Debug`: it would read `T` through
/// `&self`.)
pub(crate) struct Exclusive<T>(T);

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
