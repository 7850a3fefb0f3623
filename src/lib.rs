//! Leased native plugin sets: plugins load on first use, stay loaded while anyone holds a
//! [`Lease`], and unload exactly when the last lease is dropped.
//!
//! # The problem
//!
//! Several independent parts of one process — a long-lived session, a short single-operator
//! compile, a command-line tool — use the same dynamically loaded plugins. If each calls a
//! process-wide `load()` and `shutdown()`, the first to finish unloads libraries the others
//! still use, and their passes silently stop running (or crash). A shared counter of users
//! fixes that only until one caller forgets a call or makes it twice.
//!
//! dylease removes the calls. A [`PluginHost`] keeps a process-wide slot that holds only a
//! `Weak` reference to the loaded [`PluginSet`]. [`PluginHost::acquire`] upgrades it, or loads a
//! fresh set when none is alive, and returns a [`Lease`] (an `Arc` of the set). The set unloads
//! in the `Drop` of its last lease.
//!
//! # Quick start
//!
//! ```
//! use dylease::{PluginHost, Registrar};
//!
//! extern "C" fn double(x: i32) -> i32 { x * 2 }
//!
//! // Library plugins come from `.dir(..)`, `.file(..)` and `.env(..)`; a static plugin keeps
//! // this example self-contained.
//! let host = PluginHost::builder()
//!     .static_plugin("math", |reg: &mut Registrar| {
//!         reg.add_pass("double", double as extern "C" fn(i32) -> i32, std::ptr::null_mut())
//!     })
//!     .build()?;
//!
//! let session = host.acquire()?;                // loads generation 1
//! let single_op = host.acquire()?;              // shares it
//! // SAFETY: "double" was registered as `extern "C" fn(i32) -> i32`.
//! let pass = unsafe { single_op.pass::<extern "C" fn(i32) -> i32>("double") }.unwrap();
//! assert_eq!(pass(21), 42);
//! drop(single_op);                              // the session still holds the set
//! assert!(host.is_loaded());
//! drop(session);                                // the last lease: unloads here
//! assert!(!host.is_loaded());
//! # Ok::<(), dylease::Error>(())
//! ```
//!
//! # Compared with the alternatives
//!
//! | Approach | Early unload under another user | Forgotten call | Cost of a use |
//! | --- | --- | --- | --- |
//! | a bare `libloading::Library` per user | each opens its own handle; fine, but no shared registry and every user pays `dlopen` | — | a `dlopen` |
//! | process-wide load/shutdown | yes: the bug this crate exists for | unloads too early or never | none |
//! | a global user counter | no, while every caller is perfect | one missed decrement leaks, one extra unloads early | a lock |
//! | leaking the libraries for ever | never unloads | — | none, but no unload and no reload |
//! | dylease | no: unload is the drop of the last lease | impossible: there is no call | an atomic increment |
//!
//! # Guarantees
//!
//! - One generation at a time: a new load begins only after the previous set finished
//!   unloading, so a library is never reopened while its old mapping is being torn down.
//! - A lease never refers to a set that is unloading.
//! - When the last lease is dropped, the set unloads (plugin unload code in reverse load order,
//!   then libraries closed in reverse load order) before that drop returns.
//! - No plugin code runs under a lock it can re-enter: an `acquire()` on a host from inside
//!   that host's own load or unload, on the same thread, returns [`Error::Reentrant`].
//! - A failed load closes every library it opened, leaves the host as it was, and the next
//!   `acquire()` tries again. Errors name the file and the cause.
//! - Every load asks every plugin to register its passes afresh, so a library the platform did
//!   not really unmap (`-z nodelete`, thread-local destructors, musl) still works next time.
//!
//! # Writing plugins
//!
//! C and C++ plugins include `include/dylease.h` and use `DYLEASE_PLUGIN` / `DYLEASE_PASS`;
//! Rust plugins use [`export_plugin!`] with `default-features = false`. The ABI is described in
//! [`abi`].
//!
//! # Trust and `unsafe`
//!
//! This crate uses `unsafe`. A plugin is native code: loading it runs its initialisation
//! routines in your process and dylease cannot sandbox it. Naming a directory or file as a
//! plugin source vouches for the libraries in it, as running a program vouches for the program.
//! Calling a pass is `unsafe` because only the caller knows the signature the plugin used.
//!
//! # Features
//!
//! - `host` (default): the loading side. Turn it off in plugin crates that only export a
//!   plugin.
#![deny(missing_docs)]
// Without the `host` feature (a plugin-only build) the crate docs still mention the host's
// types, which are then absent.
#![cfg_attr(not(feature = "host"), allow(rustdoc::broken_intra_doc_links))]
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
pub use discover::plugin_files_in;
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

/// The README's examples, compiled as doctests so they stay true.
#[cfg(all(doctest, feature = "host"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
