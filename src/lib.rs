//! Leased native plugin sets: plugins load on first use, stay loaded while anyone holds a
//! [`Lease`], and unload exactly when the last lease is dropped.
//!
//! # The problem
//!
//! Several independent parts of one process — a long-lived graph session, a short
//! single-operator compile, a command-line tool — use the same dynamically loaded plugins. If
//! each calls a process-wide `load()` at start and `shutdown()` at end, the first to finish
//! unloads libraries the others still use: their passes silently stop running, or the process
//! crashes in code that is no longer mapped. A shared counter of users fixes that only until
//! one caller forgets a call or makes it twice.
//!
//! dylease removes the calls. A [`PluginHost`] keeps a process-wide slot that holds the loaded
//! [`PluginSet`] only weakly: it never keeps the set alive by itself. [`PluginHost::acquire`]
//! returns a [`Lease`] of the set, reference-counted like an `Arc`, loading a fresh set first
//! when no lease of one is alive. The set unloads in the `Drop` of its last lease. There is no
//! `unload()` to call at the wrong time.
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
//! drop(pass);
//! drop(single_op);                              // the session still holds the set
//! assert!(host.is_loaded());
//! drop(session);                                // the last lease: unloads here
//! assert!(!host.is_loaded());
//! # Ok::<(), dylease::Error>(())
//! ```
//!
//! With library plugins, the host is configured with where they are and the rest is the same:
//!
//! ```no_run
//! let host = dylease::PluginHost::builder()
//!     .dir("/opt/app/plugins")           // every `.so` file directly in this directory
//!     .env("MYAPP_PLUGIN_PATH")          // and the directories listed in this variable
//!     .build()?;
//! let lease = host.acquire()?;
//! # Ok::<(), dylease::Error>(())
//! ```
//!
//! # Compared with the alternatives
//!
//! | Approach | Can one user's exit unload another's plugins? | A forgotten or doubled call | Does it ever unload? | Cost of a use |
//! | --- | --- | --- | --- | --- |
//! | a bare `libloading::Library` per user | only through what is shared: a pass registry filled from one user's library dangles once that user closes it | — (`Drop` closes) | yes, per handle | a `dlopen` and a registration per user |
//! | process-wide `load()` / `shutdown()` | yes: the bug this crate exists for | unloads too early, or never | yes, at the first `shutdown()` | none |
//! | a global user counter | no, while every caller is perfect | one missed decrement leaks for ever; one extra unloads under a user | yes | a lock |
//! | leaking the libraries for ever (`mem::forget`, `RTLD_NODELETE`) | never | — | never: no `on_unload`, no reload of a rebuilt plugin | none |
//! | dylease | no: unload is the drop of the last lease | impossible: there is no call, the compiler tracks the leases | yes, when the last lease drops; the next `acquire` reloads | an atomic increment while loaded, no lock |
//!
//! # Recipes
//!
//! ## A session that holds a lease as its RAII guard
//!
//! Put the lease in the struct whose lifetime is "while I need the plugins". Its `Drop` needs
//! no code, and there is nothing to forget:
//!
//! ```
//! use dylease::{Lease, PluginHost, Registrar};
//!
//! /// A compile session: while it exists, its plugins stay loaded.
//! struct Session {
//!     plugins: Lease,
//! }
//!
//! impl Session {
//!     fn open(host: &PluginHost) -> Result<Session, dylease::Error> {
//!         Ok(Session { plugins: host.acquire()? })
//!     }
//!
//!     fn can_fuse(&self) -> bool {
//!         self.plugins.contains_pass("fuse")
//!     }
//! }
//!
//! extern "C" fn fuse(nodes: i32) -> i32 { nodes / 2 }
//!
//! let host = PluginHost::builder()
//!     .static_plugin("fusion", |reg: &mut Registrar| {
//!         reg.add_pass("fuse", fuse as extern "C" fn(i32) -> i32, std::ptr::null_mut())
//!     })
//!     .build()?;
//!
//! let graph = Session::open(&host)?;
//! {
//!     let single_op = Session::open(&host)?;
//!     assert!(single_op.can_fuse());
//! } // the single-op session ends first: nothing unloads under the graph session
//! assert!(graph.can_fuse());
//! drop(graph); // the last session ends: the plugins unload
//! assert!(!host.is_loaded());
//! # Ok::<(), dylease::Error>(())
//! ```
//!
//! ## Storing passes in a struct with `OwnedPass`
//!
//! A [`Pass`] borrows its lease, so it cannot be stored next to it. An [`OwnedPass`] carries
//! a clone of the lease instead: a struct of them keeps its plugins loaded, and can be cloned
//! and sent to other threads.
//!
//! ```
//! use dylease::{OwnedPass, PluginHost, Registrar};
//!
//! type Rewrite = extern "C" fn(i32) -> i32;
//!
//! /// A pipeline resolved once and run many times.
//! struct Pipeline {
//!     passes: Vec<OwnedPass<Rewrite>>,
//! }
//!
//! impl Pipeline {
//!     fn new(host: &PluginHost, names: &[&str]) -> Result<Pipeline, String> {
//!         let lease = host.acquire().map_err(|e| e.to_string())?;
//!         let passes = names
//!             .iter()
//!             .map(|&name| {
//!                 // SAFETY: every pass of this program is registered as `Rewrite`.
//!                 unsafe { lease.owned_pass::<Rewrite>(name) }.ok_or(format!("no pass `{name}`"))
//!             })
//!             .collect::<Result<_, _>>()?;
//!         Ok(Pipeline { passes })
//!     } // `lease` is dropped here; the passes keep the set loaded
//!
//!     fn run(&self, nodes: i32) -> i32 {
//!         self.passes.iter().fold(nodes, |nodes, pass| pass(nodes))
//!     }
//! }
//!
//! extern "C" fn halve(x: i32) -> i32 { x / 2 }
//! extern "C" fn dec(x: i32) -> i32 { x - 1 }
//!
//! let host = PluginHost::builder()
//!     .static_plugin("rewrites", |reg: &mut Registrar| {
//!         reg.add_pass("halve", halve as Rewrite, std::ptr::null_mut())?;
//!         reg.add_pass("dec", dec as Rewrite, std::ptr::null_mut())
//!     })
//!     .build()?;
//!
//! let pipeline = Pipeline::new(&host, &["halve", "dec"])?;
//! assert!(host.is_loaded());
//! let worker = std::thread::spawn(move || pipeline.run(10)); // the pipeline moves along
//! assert_eq!(worker.join().unwrap(), 4);
//! assert!(!host.is_loaded()); // the pipeline was dropped on the worker: that unloaded
//! assert!(Pipeline::new(&host, &["fold"]).is_err());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Orderly process shutdown
//!
//! Shutting down is ending every user: stop and join the threads that hold leases, drop the
//! sessions, return from `main`. The thread that drops the last lease runs every plugin's
//! unload code and closes the libraries before that drop returns, so once the users are
//! joined, nothing is loaded. Three things keep leases alive past the end, and with them the
//! plugins: a lease in a `static` (it is never dropped), a thread that is never joined, and
//! `std::process::exit` (it runs no destructors, so no plugin's `on_unload` runs).
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicBool, Ordering};
//! use std::thread;
//!
//! use dylease::{PluginHost, Registrar};
//!
//! let flushed = Arc::new(AtomicBool::new(false));
//! let on_unload = flushed.clone();
//! let host = PluginHost::builder()
//!     .static_plugin("telemetry", move |reg: &mut Registrar| {
//!         let flushed = on_unload.clone();
//!         reg.on_unload(move || flushed.store(true, Ordering::SeqCst));
//!         Ok(())
//!     })
//!     .build()?;
//!
//! // Each worker holds a lease while it works.
//! let mut workers = Vec::new();
//! for _ in 0..4 {
//!     let lease = host.acquire()?;
//!     workers.push(thread::spawn(move || {
//!         let _plugins = lease; // ... work with the plugins ...
//!     }));
//! }
//!
//! // Shutdown: join every user. There is no unload call to make, and none to get wrong.
//! for worker in workers {
//!     worker.join().unwrap();
//! }
//! assert!(!host.is_loaded());
//! assert!(flushed.load(Ordering::SeqCst)); // the plugin's unload code ran, once
//! # Ok::<(), dylease::Error>(())
//! ```
//!
//! When a later step depends on the plugins being gone (finalising an embedded interpreter
//! that plugin code calls into, say) but the leases are held by code you do not join,
//! [`PluginHost::wait_unloaded`] blocks until the last lease is dropped, with a timeout. It
//! forces nothing: if it returns `false`, someone still holds a lease, and
//! [`PluginHost::stats`] says how many.
//!
//! ```
//! # use dylease::{PluginHost, Registrar};
//! use std::time::Duration;
//!
//! # let host = PluginHost::builder().static_plugin("p", |_: &mut Registrar| Ok(())).build()?;
//! let lease = host.acquire()?;
//! let user = std::thread::spawn(move || drop(lease)); // some user, finishing on its own
//! if !host.wait_unloaded(Duration::from_secs(5)) {
//!     eprintln!("still {} leases alive; not finalising", host.stats().live_leases);
//! }
//! # user.join().unwrap();
//! # assert!(!host.is_loaded());
//! # Ok::<(), dylease::Error>(())
//! ```
//!
//! ## Testing a host with static plugins
//!
//! Code that uses plugins takes a `&PluginHost`; tests give it one whose plugins are static
//! ([`HostBuilder::static_plugin`]): no library files, no compiler, and the fake can count
//! what happens to it or fail on purpose.
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//!
//! use dylease::{PluginHost, Registrar};
//!
//! /// The code under test: runs the "normalize" pass if a plugin provides one.
//! fn normalize(host: &PluginHost, x: i32) -> Result<i32, dylease::Error> {
//!     let lease = host.acquire()?;
//!     // SAFETY: this program's plugins register "normalize" as `fn(i32) -> i32`.
//!     Ok(match unsafe { lease.pass::<fn(i32) -> i32>("normalize") } {
//!         Some(pass) => pass(x),
//!         None => x,
//!     })
//! }
//!
//! let unloads = Arc::new(AtomicUsize::new(0));
//! let counter = unloads.clone();
//! let host = PluginHost::builder()
//!     .static_plugin("fake-normalizer", move |reg: &mut Registrar| {
//!         let counter = counter.clone();
//!         reg.on_unload(move || {
//!             counter.fetch_add(1, Ordering::SeqCst);
//!         });
//!         reg.add_pass("normalize", (|x: i32| x.clamp(0, 10)) as fn(i32) -> i32, std::ptr::null_mut())
//!     })
//!     .build()?;
//!
//! assert_eq!(normalize(&host, 42)?, 10);
//! assert_eq!(normalize(&host, -3)?, 0);
//! // Each call held the only lease, so each loaded and unloaded a generation of its own.
//! assert_eq!((host.generation(), unloads.load(Ordering::SeqCst)), (2, 2));
//!
//! // A failing plugin is as easy to stage.
//! let broken = PluginHost::builder()
//!     .static_plugin("broken", |_reg: &mut Registrar| Err(dylease::Error::custom("no device")))
//!     .build()?;
//! let error = normalize(&broken, 1).unwrap_err();
//! assert_eq!(error.to_string(), "static plugin `broken` failed to register its passes: no device");
//! # Ok::<(), dylease::Error>(())
//! ```
//!
//! ## Model-checking your own code with loom
//!
//! Under `RUSTFLAGS="--cfg loom"` every atomic, lock, condition variable and thread-local of
//! dylease comes from [loom](https://docs.rs/loom), so code of yours that acquires, clones
//! and drops leases can be model-checked together with dylease's own protocol. Build the host
//! inside `loom::model` from static plugins (dlopen cannot run under loom), record what they
//! do in loom atomics, and assert your invariant; [`global`] cannot be used in a model. This
//! example compiles only under `--cfg loom` with `loom` as a dependency. The same code runs in
//! the repository as `loom-tests/tests/recipe.rs`, and `loom-tests/tests/models.rs` has seven
//! more models of this shape; CI runs them all.
//!
//! ```ignore
//! use loom::sync::Arc;
//! use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
//! use dylease::{PluginHost, Registrar};
//!
//! #[test]
//! fn two_users_share_one_load() {
//!     loom::model(|| {
//!         let loads = Arc::new(AtomicUsize::new(0));
//!         let counter = loads.clone();
//!         let host = Arc::new(
//!             PluginHost::builder()
//!                 .static_plugin("p", move |_: &mut Registrar| {
//!                     counter.fetch_add(1, SeqCst);
//!                     Ok(())
//!                 })
//!                 .build()
//!                 .unwrap(),
//!         );
//!         let other = {
//!             let host = host.clone();
//!             loom::thread::spawn(move || host.acquire().unwrap())
//!         };
//!         let mine = host.acquire().unwrap();
//!         let theirs = other.join().unwrap();
//!         assert!(dylease::Lease::ptr_eq(&mine, &theirs));
//!         assert_eq!(loads.load(SeqCst), 1);
//!     });
//! }
//! ```
//!
//! Run it with `RUSTFLAGS="--cfg loom" cargo test --release`, and set `LOOM_MAX_PREEMPTIONS`
//! (2 or 3) to bound the search as your models grow.
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
//! [`abi`]. The repository's `examples/` has one plugin in each language, which
//! `cargo run --example demo` builds and loads.
//!
//! # Checking plugins
//!
//! With the `cli` feature, the `dylease` command loads plugin files and directories exactly as
//! a host would and says, for each file, which plugin and passes it brings or why it does not
//! load and how to fix it — the answer to "why is my pass not running?":
//!
//! ```sh
//! cargo run --features cli --bin dylease -- check path/to/plugins/
//! ```
//!
//! `--json` prints the same report for scripts; the exit status is 0 only when everything
//! would load. [`plugin_files_in`] lists a directory's plugin files by the same rules.
//!
//! # FAQ
//!
//! **How do I unload the plugins now?** Drop your leases. A host never unloads a set that a
//! lease still holds; if something still holds one, unloading would pull code from under it.
//!
//! **Why is calling a pass `unsafe`?** The ABI stores every pass as an untyped function
//! pointer; only the caller knows the signature the plugin registered.
//!
//! **What does a lease cost?** One pointer; a clone is one atomic increment, a fast-path
//! `acquire()` one compare-and-swap (1.06 times an `Arc::clone` plus drop, measured in the
//! repository's `BENCHMARKS.md`), a pass lookup one hash lookup.
//!
//! **How do I see what a host is doing?** [`PluginHost::stats`] returns loads, unloads, live
//! leases, pinned libraries and timings; loads, unloads and skipped or pinned plugins are also
//! reported through the [`log`](https://docs.rs/log) facade (install any logger to see them).
//!
//! # `unsafe`
//!
//! This crate uses `unsafe`. Loading a plugin runs its initialisation code in your process,
//! calling a pass calls foreign code through a function pointer, and the plugin ABI is C: no
//! safe Rust can express those. The `unsafe` code is fenced in small modules, each block with
//! the reason it is sound: `library` (the only place that calls the platform loader), `pipeline`
//! (calls a plugin's entry point and reads its descriptor), `registrar` (the C `add_pass`
//! callback), `pass_fn` (erases and restores function-pointer types), `export` (the plugin side
//! of the ABI, for [`export_plugin!`]), `abi` (the descriptor is `Sync`), `trust` (asks for
//! the effective user), the `sync` shim (the lease count and the slot the set lives in), and
//! its two callers: `host` (fills the slot under its lock) and `lease` (calls
//! [`PassFn::from_raw`] for the typed pass). dylease cannot sandbox a plugin: naming a directory or file as a plugin
//! source vouches for the libraries in it, as running a program vouches for the program. What
//! it does check, before running any of a file's code, is that the file is an ELF library for
//! this machine and, under the default [`TrustPolicy::Strict`], that no other user could have
//! replaced it.
//!
//! # Features
//!
//! - `host` (default): the loading side. Turn it off in plugin crates that only export a
//!   plugin.
//! - `cli`: the `dylease` command-line checker (adds `clap`). Library users never need it.
//!
//! # Minimum supported Rust version
//!
//! Rust 1.88 (edition 2024; `libloading` 0.9 needs 1.88), as declared in `Cargo.toml`'s
//! `rust-version`. The `cli` feature's `clap` needs 1.85, so it adds no requirement.
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

pub use error::{Error, OpenCause, Origin, Waited};
pub use export::PluginRegistrar;
pub use pass_fn::PassFn;

#[cfg(feature = "host")]
mod host;
#[cfg(feature = "host")]
mod load;
#[cfg(feature = "host")]
mod sync;

#[cfg(feature = "host")]
pub use host::{GLOBAL_PATH_VAR, HostBuilder, Lease, OwnedPass, Pass, PluginHost, PluginSet, Stats, WeakLease, global};
#[cfg(feature = "host")]
pub use load::{LoadFailure, LoadPolicy, PassInfo, PluginInfo, Registrar, TrustPolicy, plugin_files_in};

// The guarantees the handle types make, checked at compile time.
#[cfg(feature = "host")]
mod guarantees {
    use super::*;
    use static_assertions::{assert_eq_size, assert_impl_all, assert_not_impl_any};

    assert_impl_all!(Lease: Send, Sync, Clone, std::panic::UnwindSafe, std::panic::RefUnwindSafe);
    assert_impl_all!(PluginHost: std::panic::UnwindSafe, std::panic::RefUnwindSafe);
    assert_eq_size!(Lease, usize);
    assert_impl_all!(WeakLease: Send, Sync, Clone, std::panic::UnwindSafe);
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
