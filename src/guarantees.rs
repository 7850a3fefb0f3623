//! What the crate promises that the compiler can check without running anything: the bounds
//! and the size of the handle types, and the README's examples, compiled as doctests so they
//! stay true.

use crate::{Error, Lease, LibraryRegistrar, OwnedPass, PluginHost, PluginSet, StaticRegistrar, WeakLease};
use static_assertions::{assert_eq_size, assert_impl_all, assert_not_impl_any};

assert_impl_all!(Lease: Send, Sync, Clone, std::panic::UnwindSafe, std::panic::RefUnwindSafe);
assert_impl_all!(PluginHost: std::panic::UnwindSafe, std::panic::RefUnwindSafe);
assert_eq_size!(Lease, usize);
assert_impl_all!(WeakLease: Send, Sync, Clone, std::panic::UnwindSafe);
assert_not_impl_any!(WeakLease: core::ops::Deref);
assert_not_impl_any!(StaticRegistrar: Send, Sync);
assert_not_impl_any!(LibraryRegistrar<'static>: Send, Sync);
assert_impl_all!(PluginHost: Send, Sync);
assert_impl_all!(PluginSet: Send, Sync);
assert_impl_all!(OwnedPass<extern "C" fn(i32) -> i32>: Send, Sync, Clone);
assert_impl_all!(Error: Send, Sync, std::error::Error);

/// The README's examples, compiled as doctests so they stay true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
