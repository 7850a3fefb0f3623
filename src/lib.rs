//! Leased native plugin sets: plugins load on first use, stay loaded while anyone holds a
//! lease, and unload exactly when the last lease is dropped.
#![deny(missing_docs)]
#![warn(unreachable_pub, unsafe_op_in_unsafe_fn, missing_debug_implementations)]

pub mod abi;
mod error;
#[doc(hidden)]
pub mod export;
mod pass_fn;

pub use error::{Error, Origin};
pub use export::PluginRegistrar;
pub use pass_fn::PassFn;

#[cfg(feature = "host")]
mod discover;
#[cfg(feature = "host")]
mod host;
#[cfg(feature = "host")]
mod lease;
#[cfg(feature = "host")]
mod library;
#[cfg(feature = "host")]
mod pipeline;
#[cfg(feature = "host")]
mod registrar;
#[cfg(feature = "host")]
mod set;
#[cfg(feature = "host")]
mod sync;

#[cfg(feature = "host")]
pub use host::{GLOBAL_PATH_VAR, HostBuilder, LoadPolicy, PluginHost, global};
#[cfg(feature = "host")]
pub use lease::{Lease, OwnedPass, Pass, WeakLease};
#[cfg(feature = "host")]
pub use registrar::Registrar;
#[cfg(feature = "host")]
pub use set::{PassInfo, PluginInfo, PluginSet};

// The guarantees the handle types make, checked at compile time.
#[cfg(feature = "host")]
mod guarantees {
    use super::*;
    use static_assertions::{assert_eq_size, assert_impl_all, assert_not_impl_any};

    assert_impl_all!(Lease: Send, Sync, Clone);
    assert_eq_size!(Lease, usize);
    assert_impl_all!(WeakLease: Send, Sync, Clone);
    assert_not_impl_any!(WeakLease: core::ops::Deref);
    assert_not_impl_any!(Registrar: Send, Sync);
    assert_impl_all!(PluginHost: Send, Sync);
    assert_impl_all!(PluginSet: Send, Sync);
    assert_impl_all!(OwnedPass<extern "C" fn(i32) -> i32>: Send, Sync, Clone);
    assert_impl_all!(Error: Send, Sync, std::error::Error);
}
