//! Recipes: how to hold, store, share, reload and end leases, and how to test code that uses
//! a host.
//!
//! Every example here is a doctest. Most use static plugins
//! ([`HostBuilder::static_plugin`](crate::HostBuilder::static_plugin)) so that they run
//! without library files; with library plugins only the host's configuration changes.
//!
//! # A session that holds a lease as its RAII guard
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
//!         self.plugins.pass_info("fuse").is_some()
//!     }
//! }
//!
//! extern "C" fn fuse(nodes: i32) -> i32 { nodes / 2 }
//!
//! let host = PluginHost::builder()
//!     .static_plugin("fusion", |reg| {
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
//! # Two components, each with its own host over one directory
//!
//! Components of one program need not share a `PluginHost` value: a graph-session library
//! and a single-op compiler library may each build their own over the same directory. The
//! libraries they load are shared process-wide ([`sharing`](super::sharing)): each host
//! has its own generations and its own pass table, but one instance of each library, whose
//! `on_load` runs once and whose `on_unload` runs after the last set of *either* host is
//! gone. Neither component's exit can unload what the other still uses.
//!
//! ```no_run
//! use dylease::PluginHost;
//!
//! // In the graph-session component (SAFETY: /opt/app/plugins holds the application's own
//! // plugins, whose code is sound):
//! let session_host = unsafe { PluginHost::builder().dir("/opt/app/plugins") }.build()?;
//! // In the single-op compiler, which knows nothing of the session (SAFETY: as above):
//! let single_op_host = unsafe { PluginHost::builder().dir("/opt/app/plugins") }.build()?;
//!
//! let session = session_host.acquire()?;    // opens the libraries: `on_load` runs
//! for _ in 0..20 {
//!     let op = single_op_host.acquire()?;   // shares the open instances: no `on_load`
//!     // ... compile one operator with `op`'s passes ...
//!     drop(op);                             // its set unloads; the instances stay (the
//! }                                         // session's set still uses them): no `on_unload`
//! drop(session);                            // the last set of either host: `on_unload`,
//!                                           // then the libraries close
//! # Ok::<(), dylease::Error>(())
//! ```
//!
//! Static plugins are not shared this way: they belong to the host that was built with them,
//! and their unload hooks run when each set of that host unloads.
//!
//! # Storing passes in a struct with `OwnedPass`
//!
//! A [`Pass`](crate::Pass) borrows its lease, so it cannot be stored next to it. An [`OwnedPass`](crate::OwnedPass) carries
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
//!                 let pass = unsafe { lease.pass::<Rewrite>(name) };
//!                 pass.map(|pass| pass.to_owned_pass()).map_err(|e| e.to_string())
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
//!     .static_plugin("rewrites", |reg| {
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
//! # Orderly process shutdown
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
//!     .static_plugin("telemetry", move |reg| {
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
//! [`PluginHost::wait_unloaded`](crate::PluginHost::wait_unloaded) blocks until the last lease is dropped, with a timeout. It
//! forces nothing: if it returns `false`, someone still holds a lease, and
//! [`PluginHost::stats`](crate::PluginHost::stats) says how many.
//!
//! ```
//! # use dylease::{PluginHost, Registrar};
//! use std::time::Duration;
//!
//! # let host = PluginHost::builder().static_plugin("p", |_| Ok(())).build()?;
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
//! # Reloading while a session holds a lease, and keeping a set through churn
//!
//! [`PluginHost::reload`](crate::PluginHost::reload) loads a new generation now; a session
//! that holds a lease of the old one keeps calling the code it started with, and the old
//! generation unloads when its last lease drops. Here a static plugin stands in for a library
//! file: what it registers depends on the version "installed". (With library plugins,
//! install the new file by rename and call `reload()`, or let `HostBuilder::watch` call it,
//! with the crate feature `watch`.)
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//!
//! use dylease::{Lease, PluginHost, Registrar};
//!
//! extern "C" fn fuse_v1(nodes: i32) -> i32 { nodes / 2 }
//! extern "C" fn fuse_v2(nodes: i32) -> i32 { nodes / 3 }
//!
//! let installed = Arc::new(AtomicUsize::new(1)); // which version a load finds
//! let unloads = Arc::new(AtomicUsize::new(0));
//! let (found, counter) = (installed.clone(), unloads.clone());
//! let host = PluginHost::builder()
//!     .static_plugin("fusion", move |reg| {
//!         let counter = counter.clone();
//!         reg.on_unload(move || {
//!             counter.fetch_add(1, Ordering::SeqCst);
//!         });
//!         let fuse = match found.load(Ordering::SeqCst) {
//!             1 => fuse_v1,
//!             _ => fuse_v2,
//!         };
//!         reg.add_pass("fuse", fuse as extern "C" fn(i32) -> i32, std::ptr::null_mut())
//!     })
//!     .build()?;
//! let fuse = |lease: &Lease| {
//!     // SAFETY: "fuse" is registered as `extern "C" fn(i32) -> i32`.
//!     let pass = unsafe { lease.pass::<extern "C" fn(i32) -> i32>("fuse") }.unwrap();
//!     pass(12)
//! };
//!
//! let session = host.acquire()?; // a long compile session: generation 1
//! installed.store(2, Ordering::SeqCst); // a new version is installed
//! let fresh = host.reload()?; // generation 2, loaded now
//! assert_eq!((session.generation(), fresh.generation()), (1, 2));
//! assert_eq!(fuse(&session), 6, "the session keeps the code it started with");
//! assert_eq!(fuse(&fresh), 4);
//! assert!(Lease::ptr_eq(&host.acquire()?, &fresh), "new acquirers share generation 2");
//! drop(session); // generation 1 drains: its last lease is gone, it unloads here
//! assert_eq!(unloads.load(Ordering::SeqCst), 1);
//! drop(fresh); // `UnloadPolicy::Immediately` (the default): generation 2 unloads too
//! assert_eq!(unloads.load(Ordering::SeqCst), 2);
//! assert!(!host.is_loaded());
//! # Ok::<(), dylease::Error>(())
//! ```
//!
//! Many short users, each the only one alive, would load and unload the set each time under
//! `Immediately`. [`UnloadPolicy::After`](crate::UnloadPolicy::After) keeps it until no user
//! lease has existed for a while; [`UnloadPolicy::WithHost`](crate::UnloadPolicy::WithHost)
//! until the host is dropped. Either way the host holds one lease of its own, and dropping it
//! is what unloads:
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//! use std::time::Duration;
//!
//! use dylease::{PluginHost, Registrar, UnloadPolicy};
//!
//! let unloads = Arc::new(AtomicUsize::new(0));
//! let counting = |unloads: &Arc<AtomicUsize>| {
//!     let unloads = unloads.clone();
//!     move |reg: &mut dylease::StaticRegistrar| {
//!         let unloads = unloads.clone();
//!         reg.on_unload(move || {
//!             unloads.fetch_add(1, Ordering::SeqCst);
//!         });
//!         Ok(())
//!     }
//! };
//!
//! // 200 single-op compiles: one load, and the set stays for a minute of quiet.
//! let compiler = PluginHost::builder()
//!     .static_plugin("ops", counting(&unloads))
//!     .unload(UnloadPolicy::After(Duration::from_secs(60)))
//!     .build()?;
//! for _ in 0..200 {
//!     let op = compiler.acquire()?;
//!     drop(op);
//! }
//! assert_eq!(compiler.stats().loads, 1);
//! assert!(compiler.stats().unloads_at.is_some(), "planned: a minute after the last lease");
//! assert_eq!(unloads.load(Ordering::SeqCst), 0);
//! drop(compiler); // the host's own lease goes with it
//! assert_eq!(unloads.load(Ordering::SeqCst), 1);
//!
//! // Loaded for as long as the host lives.
//! let service = PluginHost::builder()
//!     .static_plugin("ops", counting(&unloads))
//!     .unload(UnloadPolicy::WithHost)
//!     .build()?;
//! drop(service.acquire()?);
//! assert!(service.is_loaded());
//! drop(service);
//! assert_eq!(unloads.load(Ordering::SeqCst), 2);
//! # Ok::<(), dylease::Error>(())
//! ```
//!
//! # Testing a host with static plugins
//!
//! Code that uses plugins takes a `&PluginHost`; tests give it one whose plugins are static
//! ([`HostBuilder::static_plugin`](crate::HostBuilder::static_plugin)): no library files, no compiler, and the fake can count
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
//!         Ok(pass) => pass(x),
//!         Err(dylease::Error::PassLookup { .. }) => x,
//!         Err(other) => return Err(other),
//!     })
//! }
//!
//! let unloads = Arc::new(AtomicUsize::new(0));
//! let counter = unloads.clone();
//! let host = PluginHost::builder()
//!     .static_plugin("fake-normalizer", move |reg| {
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
//!     .static_plugin("broken", |_reg| Err(dylease::RegisterError::custom("no device")))
//!     .build()?;
//! let error = normalize(&broken, 1).unwrap_err();
//! assert_eq!(error.to_string(), "static plugin `broken` failed to register its passes: no device");
//! # Ok::<(), dylease::Error>(())
//! ```
//!
//! # Model-checking your own code with loom
//!
//! Under `RUSTFLAGS="--cfg loom"` every atomic, lock, condition variable and thread-local of
//! dylease comes from [loom](https://docs.rs/loom), so code of yours that acquires, clones
//! and drops leases can be model-checked together with dylease's own protocol. Build the host
//! inside `loom::model` from static plugins (dlopen cannot run under loom), record what they
//! do in loom atomics, and assert your invariant; [`global`](crate::global) cannot be used in
//! a model (its state would outlive the model's execution). This example compiles only under
//! `--cfg loom` with `loom` as a dependency. The same code runs in
//! the repository as `loom-tests/tests/recipe.rs`, and `loom-tests/tests/models.rs` has more
//! models of this shape; CI runs them all (`loom-tests/run.sh`).
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
//!                 .static_plugin("p", move |_| {
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
