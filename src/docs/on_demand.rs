//! On-demand sets: judge every plugin at `acquire()`, map one only when a lease first asks
//! for one of its passes.
//!
//! A single-operator compile needs a handful of passes; the directory it loads from may hold
//! hundreds of plugins, and an eager `acquire()` maps every one of them. A host built with
//! [`HostBuilder::on_demand()`](crate::HostBuilder::on_demand) maps a library plugin whose
//! [manifest](super::manifests) is complete only when a lease first asks for one of its
//! passes. Complete manifests are written by every plugin built with the C header's
//! `DYLEASE_PLUGIN*` and `DYLEASE_PASS` / `DYLEASE_TYPED_PASS` macros, and, in Rust, only by
//! [`export_plugin!`](crate::export_plugin) with its passes listed (`passes: [...]`): the
//! `register:` closure form cannot say what it will register, so such a plugin is mapped at
//! `acquire()` like any plugin without a complete manifest.
//!
//! ```no_run
//! # pub struct IntOp;
//! # // SAFETY: every pass under "math.int_op/1" is an `int (*)(int)`.
//! # unsafe impl dylease::Interface for IntOp {
//! #     const ID: &'static str = "math.int_op/1";
//! #     type Fn = unsafe extern "C" fn(i32) -> i32;
//! # }
//! // SAFETY: the directory holds this program's own plugins.
//! let host = unsafe { dylease::PluginHost::builder().dir("/opt/compiler/passes") }
//!     .on_demand()
//!     .build()?;
//! let lease = host.acquire()?;                  // judges every file, maps none of them
//! assert!(lease.plugins().iter().all(|p| !p.is_mapped()));
//! let fuse = lease.get::<IntOp>("fuse_add")?;   // maps the plugin of `fuse_add`, and only it
//! // SAFETY: the lease is alive; the pass takes any `i32`.
//! println!("{}", unsafe { fuse(1) });
//! # Ok::<(), dylease::Error>(())
//! ```
//!
//! # When to choose it
//!
//! A process that uses a few passes of a directory of many plugins (a single-operator
//! compile), where mapping everything costs most of the time, and each use is short. Keep the
//! eager default when a session uses most passes, or when every plugin's failure should
//! surface at `acquire()`. `benches/compare.rs` (group `on_demand`) measures a
//! single-operator compile over 256 plugins against an eager host
//! ([`performance`](super::performance)).
//!
//! # What it changes
//!
//! - **`acquire()` judges, it does not map.** Each such plugin gets the trust check, the
//!   open, the ELF check, the manifest read and the ABI gate, as an eager load gives it before
//!   mapping; then its descriptor is closed (an unmapped plugin holds no descriptor, only its
//!   file's identity and its manifest). A file unchanged since an earlier load of the process
//!   (same device, inode, size and times, as discovery's `fstatat` reads them) is not opened
//!   at all: the parse cache holds what its checks and manifest decided. Pass names that
//!   collide between manifests, or with an eagerly loaded plugin's passes, fail the
//!   `acquire()` as in an eager set ([`Error::DuplicatePass`](crate::Error::DuplicatePass);
//!   skipped under [`LoadPolicy::SkipFailed`](crate::LoadPolicy::SkipFailed)). Plugins
//!   without a complete manifest, static plugins and Python plugins load at `acquire()` as
//!   usual.
//! - **Questions about what the set offers map nothing**: `plugins()`, `passes()`,
//!   `pass_info()`, [`PassInfo`](crate::PassInfo)'s name, interface and plugin,
//!   [`PluginInfo::pinning()`](crate::PluginInfo::pinning) (the file's prediction) and
//!   [`PluginInfo::is_mapped()`](crate::PluginInfo::is_mapped) answer from the manifests; so
//!   do `get`'s interface checks.
//! - **A call may map a library and run its code.** The first `get`, `pass` or `passes_of`
//!   that needs a plugin judges its trust again and opens its file (it must be the file judged
//!   at `acquire()`, unchanged: a file replaced, removed or rewritten in place since is
//!   refused, [`OpenCause::ReplacedSinceAcquire`](crate::OpenCause::ReplacedSinceAcquire),
//!   and `reload()` loads the new one), maps it by the usual path (dependencies, the loader
//!   given the checked descriptor, the process-wide instance shared with other sets and hosts)
//!   and runs its `on_load` and `register_passes` on the calling thread: that call takes the
//!   time of a load of one plugin. The plugin then stays mapped until the set's last lease is
//!   dropped and unloads with the set, in the reverse of the order the set's plugins were
//!   mapped.
//! - **Dependencies are judged at the first use.** A plugin's own libraries (its `DT_NEEDED`
//!   and run paths) are resolved and checked when it is mapped, not at `acquire()`: in an
//!   on-demand set, a plugin with an untrusted dependency fails its first use, not the
//!   acquire.
//! - **Errors appear at the call.** A plugin that fails to map (its `on_load` failed, a
//!   missing dependency, a registration that differs from its manifest, a replaced file) makes
//!   that call fail with [`Error::MapFailed`](crate::Error::MapFailed), naming the plugin,
//!   with the cause as its `source()`; the set keeps the failure (every later call that needs
//!   the plugin gets it again), its other plugins work, and `reload()` makes a new set that
//!   tries again. `passes_of` maps every provider of the interface, in load order, and
//!   returns the first failure.
//! - **Waits are bounded.** Calls that race for one plugin's first use map it once; the
//!   others wait at most [`HostBuilder::map_timeout`](crate::HostBuilder::map_timeout) (60 s
//!   by default) and then fail with [`Error::TimedOut`](crate::Error::TimedOut)
//!   ([`Waited::Mapping`](crate::Waited::Mapping)). A call from the plugin's own `on_load` or
//!   `register_passes` fails with [`Error::Reentrant`](crate::Error::Reentrant) instead of
//!   waiting for itself, and a `reload()` of the same host from there (or an `acquire()` that
//!   would have to load) fails with `Error::Reentrant` too, as during a load; an `acquire()`
//!   while a lease is alive shares the set as usual.
//!
//! The map-once state and its loom model are described for maintainers in
//! [`internals`](super::internals).
