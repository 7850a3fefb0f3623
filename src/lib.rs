//! Leased native plugin sets: plugins load on first use, stay loaded while anyone in the
//! process holds a [`Lease`], and unload exactly when the last lease is dropped.
//!
//! A [`PluginHost`] is configured with where its plugins are (directories, files, an
//! environment variable, static plugins). [`PluginHost::acquire`] returns a [`Lease`] of the
//! loaded [`PluginSet`], loading it first if no lease of it is alive; the set unloads in the
//! `Drop` of its last lease. The host holds the set only weakly, and nothing counts users:
//! every count is an `Arc`'s, so no caller can forget an unload or make one too many. Hosts
//! in different components of one program that load the same library share one instance of
//! it: its `on_load` runs once, its `on_unload` once after the last set of any host is gone
//! ([`docs::sharing`]).
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
//!     .static_plugin("math", |reg| {
//!         reg.add_pass("double", double as extern "C" fn(i32) -> i32, std::ptr::null_mut())
//!     })
//!     .build()?;
//!
//! let session = host.acquire()?;                // loads generation 1
//! let single_op = host.acquire()?;              // shares it
//! // SAFETY: "double" was registered as `extern "C" fn(i32) -> i32`.
//! let pass = unsafe { single_op.pass::<extern "C" fn(i32) -> i32>("double") }.unwrap();
//! assert_eq!(pass(21), 42);
//! drop(pass);
//! drop(single_op);                              // the session still holds the set
//! assert!(host.is_loaded());
//! drop(session);                                // the last lease: unloads here
//! assert!(!host.is_loaded());
//! # Ok::<(), dylease::Error>(())
//! ```
//!
//! With library plugins only the configuration changes, and the builder methods that name
//! native code (`dir`, `file`, `env`) are `unsafe`: the caller vouches for that code, as for
//! `libloading::Library::new` (see [`docs::faq`] for why there and not at `acquire()`):
//! `unsafe { PluginHost::builder().dir("/opt/app/plugins") }.build()?`.
//!
//! # Where to read on
//!
//! The [`docs`] module is the manual, one page per topic: [`docs::api`] (the API in one
//! page), [`docs::recipes`], [`docs::reload`], [`docs::on_demand`], [`docs::manifests`],
//! [`docs::trust`], [`docs::sharing`], [`docs::observability`], [`docs::writing_plugins`],
//! [`docs::cli`], [`docs::comparison`] (dylease next to a plain `libloading::Library`, a
//! global user counter and leaking the library), [`docs::faq`], [`docs::performance`],
//! [`docs::testing`] and, for maintainers, [`docs::internals`] (the invariants I1–I9, the
//! slot and registry protocols, the layout of the source).
//!
//! # `unsafe`
//!
//! This crate uses `unsafe`: loading a plugin runs its initialisation code in your process,
//! calling a pass calls foreign code through a function pointer, and the plugin ABI is C. The
//! `unsafe` code sits in seven files, each block with a `// SAFETY:` reason, and the compiler
//! keeps the list: the crate denies `unsafe_code`, and only these modules allow it, each on
//! its declaration or at its top with the reason:
//!
//! - `sys/raw.rs`: the C library's and the platform loader's calls (`openat`, `fstatat`,
//!   `dlopen`, `dladdr1`, `dl_iterate_phdr`, ...), wrapped in safe functions where the call is
//!   safe to wrap;
//! - `sys/library.rs`: opening a plugin library and calling its functions (entry point,
//!   `on_load`, `register_passes`, `on_unload`), behind safe methods of the open library,
//!   whose opening acts on the word the `unsafe` builder methods gave;
//! - `sys/python.rs`: CPython's calls that pyo3 has no safe form of;
//! - `registrar/c_api.rs`: the C host API a plugin registers through, and a pass's function
//!   typed again once its interface is checked;
//! - `sync/raw.rs`: the synchronisation shim's raw parts (the loom-checked `Arc`, the
//!   re-entrancy marks' list through stack frames);
//! - `host/lease.rs`: [`Lease::pass`], which types an untyped pass on its caller's word;
//! - `isolate/sys.rs`: the call of a message pass, and the worker process of isolated sets
//!   (its early hook and spawn, the channel's socket, the sealed regions of large messages).
//!
//! `host/sources.rs` declares the public `unsafe fn`s that name native code, and holds no
//! `unsafe` block.
//! dylease cannot sandbox a plugin: naming a directory or file as a plugin source (an `unsafe`
//! builder method) vouches for its code, as running a program vouches for the program. What
//! it checks before running any of a file's code is that the file is an ELF library for this
//! machine and, under the default [`TrustPolicy::Strict`], that no other user could have
//! chosen it. An isolated host (crate feature `isolate`, [`docs::isolation`]) runs its plugins in a worker
//! process: that contains their crashes, hangs and pins, not their privileges.
//!
//! # Features
//!
//! - `watch`: `HostBuilder::watch`, reload when a plugin directory or file changes (adds
//!   `notify`).
//! - `isolate`: isolated sets (`HostBuilder::isolated`), each set's plugins in a worker
//!   process of its own ([`docs::isolation`]).
//! - `python`: Python passes (`HostBuilder::python_dir`, `Lease::get_py`), an embedded CPython
//!   through pyo3 (re-exported as `dylease::pyo3`, with its version policy there); the build
//!   needs Python's development files.
//!
//! The `dylease` command-line tool (`check`, `install`, `header`) is the crate `dylease-cli`
//! of dylease's workspace.
//!
//! Plugin crates depend on [`dylease-plugin`](dylease_plugin) alone: the plugin ABI,
//! [`export_plugin!`], [`Interface`], the pass function types and the registration trait
//! [`Registrar`], which this crate re-exports.
//!
//! # Minimum supported Rust version
//!
//! Rust 1.88 (edition 2024; `libloading` 0.9 needs 1.88), as declared in `Cargo.toml`'s
//! `rust-version`.
#![deny(unsafe_code)]

// The rooms, one job each; `docs::internals` has their table, lowest first: error, sync, sys,
// log_scope, inspect, provenance, trust, registrar, registry, load, host, python. Each may call
// only the rooms before it in that order. `isolate` (isolated sets) sits between load and host.
// A room without `unsafe` forbids it, so that no module inside it can allow it; the others
// (host, isolate, registrar, sync, sys) forbid it in each module but their listed files.
#[forbid(unsafe_code)]
mod error;
// The handle types' bounds and size, and the README's examples: checked by the compiler.
#[forbid(unsafe_code)]
mod guarantees;
mod host;
#[forbid(unsafe_code)]
mod inspect;
// Isolated sets: a set's plugins in a worker process (above `load`, below `host`).
mod isolate;
#[forbid(unsafe_code)]
mod load;
#[forbid(unsafe_code)]
mod log_scope;
#[forbid(unsafe_code)]
mod provenance;
mod registrar;
#[forbid(unsafe_code)]
mod registry;
mod sync;
// The platform layer: every call into the platform loader, the C library and CPython; its
// `unsafe` is allowed in three of its modules (see its module documentation).
mod sys;
#[forbid(unsafe_code)]
#[cfg(all(test, unix, not(loom)))]
mod test_dir;
#[forbid(unsafe_code)]
mod trust;

pub use dylease_plugin::{
    Interface, LibraryRegistrar, MessagePass, PassFn, RegisterError, Registrar, UnsafePassFn, abi, export_plugin,
};
/// The provenance checks of signed plugins ([`HostBuilder::require_signed`], [`docs::signing`]):
/// the crate `dylease-sign`, whole, at this one path. A host needs [`Keyring`](sign::Keyring)
/// (with [`PublicKey`](sign::PublicKey) and [`KeyId`](sign::KeyId)) to configure, and
/// [`SignatureError`](sign::SignatureError) and [`Cause`](sign::Cause) to read a refusal
/// ([`Error::Signature`]); tools sign with [`SigningKey`](sign::SigningKey),
/// [`sign_file`](sign::sign_file) and [`sign_index`](sign::sign_index).
pub use dylease_sign as sign;
pub use error::{Error, LookupFailure, OpenCause, Origin, Waited, WorkerCause};

// Python passes: the API is in `python` (above the host), the interpreter and the loading in
// `load::python`.
#[forbid(unsafe_code)]
#[cfg(feature = "python")]
mod python;
/// The pyo3 dylease is built with (0.30), re-exported so that a host's Python code uses the
/// same pyo3 as [`PyPass`] and [`PyInterface`]: two versions of pyo3 in one program would be
/// two sets of types, and a `Bound` of one is not a `Bound` of the other.
///
/// Version policy: before dylease 1.0, a pyo3 bump that changes its major or minor version
/// (0.30 to 0.31) is a minor version of dylease, named in the changelog; a pyo3 patch version
/// is not.
#[cfg(feature = "python")]
pub use pyo3;
#[cfg(feature = "python")]
pub use python::{PyInterface, PyPass};

/// Bounds every `acquire()` of the process (`PluginHost::acquire_timeout`'s bound): for test
/// suites, not part of the stable API.
#[doc(hidden)]
pub use host::set_acquire_bound;
pub use host::{
    GLOBAL_PATH_VAR, HostBuilder, Lease, OwnedPass, Pass, PluginHost, PluginSet, Stats, UnloadPolicy, WeakLease,
    global, init_global,
};
/// Turns the process's parse cache off or on (`inspect::parse_cache`): for benchmarks, not part
/// of the stable API.
#[doc(hidden)]
pub use inspect::parse_cache::set_enabled as set_parse_cache;
pub use inspect::{DeclaredPass, Manifest, PinCause, Pinning};
pub use load::plugin_files_in;
pub use load::{CatalogEntry, LoadFailure, LoadPolicy, PassInfo, PluginInfo};
pub use registrar::StaticRegistrar;
pub use trust::TrustPolicy;

// Long-form documentation pages: documentation only, no code.
#[forbid(unsafe_code)]
pub mod docs;
