//! The API in one page: hosts, leases, passes, the waits you may bound, the limits, and the
//! errors.
//!
//! # A host and its sources
//!
//! A [`PluginHost`](crate::PluginHost) is built once, where the program is configured, and
//! used from anywhere:
//!
//! - [`HostBuilder::dir`](crate::HostBuilder::dir), [`file`](crate::HostBuilder::file) and
//!   [`env`](crate::HostBuilder::env) (a `:`-separated list of directories and files in an
//!   environment variable) name library plugins. They are `unsafe fn`s: their caller vouches
//!   for the code the named libraries run, as `libloading::Library::new` asks
//!   ([`faq`](super::faq) says why there and not at `acquire()`).
//! - [`HostBuilder::static_plugin`](crate::HostBuilder::static_plugin) registers passes and
//!   unload hooks from code compiled into the host: handy for built-ins and for testing
//!   ([`recipes`](super::recipes#testing-a-host-with-static-plugins)). A static plugin that
//!   cannot register returns `Err(RegisterError::custom("why"))`
//!   ([`RegisterError::custom`](crate::RegisterError::custom)); the load fails with an error
//!   naming the plugin, with yours as its source. A panic in the register function fails the
//!   load the same way; a panic in an unload hook is caught, logged as an error naming the
//!   plugin, and the unload goes on. Either way the next `acquire()` works.
//! - `python_dir`, `python_file` and `python_env` (the `python` feature) name Python plugins
//!   ([`python`](super::python)).
//! - [`policy`](crate::HostBuilder::policy), [`trust`](crate::HostBuilder::trust),
//!   [`unload`](crate::HostBuilder::unload), [`on_demand`](crate::HostBuilder::on_demand),
//!   [`name`](crate::HostBuilder::name) and `watch` (the `watch` feature) set how it loads,
//!   what it trusts, when it unloads, whether it maps lazily, how its log lines name it, and
//!   whether it reloads on changes ([`trust`](super::trust), [`reload`](super::reload),
//!   [`on_demand`](super::on_demand), [`observability`](super::observability)).
//!
//! [`global()`](crate::global) is a process-wide host over the `DYLEASE_PLUGIN_PATH`
//! variable ([`GLOBAL_PATH_VAR`](crate::GLOBAL_PATH_VAR)), which it ignores in a process with
//! elevated rights (`AT_SECURE`), like the platform loader; [`init_global`](crate::init_global)
//! configures it once, before first use.
//!
//! # Leases
//!
//! [`acquire()`](crate::PluginHost::acquire) returns a [`Lease`](crate::Lease) of the loaded
//! set, loading it first if no lease of it is alive. A lease is one pointer,
//! `Clone + Send + Sync`, and derefs to the [`PluginSet`](crate::PluginSet)
//! ([`plugins()`](crate::PluginSet::plugins), [`passes()`](crate::PluginSet::passes),
//! [`generation()`](crate::PluginSet::generation), [`failures()`](crate::PluginSet::failures)).
//! The set unloads in the `Drop` of its last lease; there is no `unload()` to call.
//!
//! `acquire()` is lock-free while a lease is alive: each thread caches the host's current
//! `(generation, Weak)`, so a hot acquire is one generation check and one compare-and-swap
//! (`Weak::upgrade`), about what an `Arc::clone` costs; otherwise it upgrades the host's
//! `ArcSwapWeak` slot, and only when no set is alive does it take the host's lock and load
//! ([`internals`](super::internals) has the slot protocol).
//!
//! [`lease.downgrade()`](crate::Lease::downgrade) gives a [`WeakLease`](crate::WeakLease)
//! that observes without keeping anything loaded.
//!
//! # Waits, and the two ways to bound them
//!
//! `acquire()` may wait for other threads: for another thread's load of the same host, for
//! the host's previous set to finish unloading (a library is never reopened before its
//! previous unload completed), and for a library file another host is unloading. Each wait
//! is normally short, and `acquire()` takes the host's behaviour for it: no bound. Hence two
//! calls:
//!
//! - [`acquire()`](crate::PluginHost::acquire) is what most callers want: they have no
//!   deadline of their own and should not invent one.
//! - [`acquire_timeout(d)`](crate::PluginHost::acquire_timeout) is for a caller that has its
//!   own bound: a request handler with a deadline, a shutdown path that must finish, a health
//!   check, a test whose every wait must end. It fails with
//!   [`Error::TimedOut`](crate::Error::TimedOut) naming what it waited for
//!   ([`Waited`](crate::Waited): a load, an unload, a file). A load that this call started
//!   itself runs to its end: the bound is on waiting, not on plugin code this thread runs.
//!   It also turns a known hang into an error: plugin code that hands `acquire()` of its own
//!   host to another thread and joins it (see [Limits](#limits)).
//!
//! [`reload()`](crate::PluginHost::reload) and
//! [`reload_timeout(d)`](crate::PluginHost::reload_timeout) are the same pair for loading a
//! new generation: a failed or timed-out reload leaves the current generation current. The
//! host's own bounds are elsewhere: an on-demand set's first use of a plugin waits at most
//! [`HostBuilder::map_timeout`](crate::HostBuilder::map_timeout) (60 s by default) for
//! another thread mapping it.
//!
//! # Passes
//!
//! ```
//! use dylease::{PluginHost, Registrar};
//!
//! /// The interface the host and its plugins agree on: an id and the signature behind it.
//! pub struct IntOp;
//! // SAFETY: every pass registered under "math.int_op/1" is an `int (*)(int)`.
//! unsafe impl dylease::Interface for IntOp {
//!     const ID: &'static str = "math.int_op/1";
//!     type Fn = unsafe extern "C" fn(i32) -> i32;
//! }
//!
//! extern "C" fn double(x: i32) -> i32 { 2 * x }
//! extern "C" fn negate(x: i32) -> i32 { -x }
//!
//! let host = PluginHost::builder()
//!     .static_plugin("math", |reg| {
//!         reg.add_typed_pass::<IntOp>("double", double, std::ptr::null_mut())?;
//!         reg.add_pass("negate", negate as extern "C" fn(i32) -> i32, std::ptr::null_mut())
//!     })
//!     .build()?;
//! let lease = host.acquire()?;
//! let double = lease.get::<IntOp>("double")?; // checks the interface id: safe
//! // SAFETY: `lease` is alive, so the pass's library is loaded; it takes any `i32`.
//! assert_eq!(unsafe { double(21) }, 42);
//! for pass in lease.passes_of::<IntOp>()? {   // plugins in load order, names in byte order
//!     // SAFETY: as above.
//!     println!("{} from {}: {}", pass.name(), pass.info().plugin(), unsafe { pass(1) });
//! }
//! assert!(lease.get::<IntOp>("negate").is_err()); // registered untyped
//! // SAFETY: "negate" was registered as `extern "C" fn(i32) -> i32`.
//! let negate = unsafe { lease.pass::<extern "C" fn(i32) -> i32>("negate") }?;
//! assert_eq!(negate(1), -1);
//! # Ok::<(), dylease::Error>(())
//! ```
//!
//! - [`lease.get::<I>(name)`](crate::Lease::get) is safe: it hands out a pass only if its
//!   plugin registered it under `I::ID`, and otherwise fails with
//!   [`Error::PassLookup`](crate::Error::PassLookup), whose
//!   [`LookupFailure`](crate::LookupFailure) tells a missing pass, an untyped pass and a pass
//!   of another interface apart (naming both interfaces).
//! - [`lease.passes_of::<I>()`](crate::Lease::passes_of) yields every pass of an interface:
//!   plugins in load order, then pass names in byte order, whatever the link or hash order.
//! - Both are fallible for one more reason in an [on-demand set](super::on_demand): the first
//!   use of a plugin maps it, which can fail.
//! - The signature's `unsafe` is in one place, the `unsafe impl Interface`, whose promise is
//!   that every pass under `ID` has the signature `Fn`. `Fn` must be an `unsafe fn` pointer
//!   type: a pass derefs to its function pointer, which is `Copy`, so a call needs an `unsafe`
//!   block whose one reason is that a lease of the set is alive (with a safe `fn` type, safe
//!   code could copy the pointer out and call it after the last lease dropped, into an
//!   unloaded library).
//! - Untyped passes (`DYLEASE_PASS`, every pass of an ABI version 1 plugin) are reached with
//!   `unsafe { lease.pass::<F>(name) }?` ([`Lease::pass`](crate::Lease::pass)), where the
//!   caller asserts the signature `F`; a missing pass is `Error::PassLookup`
//!   ([`LookupFailure::Missing`](crate::LookupFailure::Missing), with an empty `expected`).
//! - [`Pass<'lease, F>`](crate::Pass) borrows its lease, so a pass cannot outlive its library
//!   in safe code; [`OwnedPass<F>`](crate::OwnedPass) carries a lease clone for storing in
//!   structs ([`recipes`](super::recipes#storing-passes-in-a-struct-with-ownedpass)).
//!
//! # Features and versions
//!
//! - `watch`: [`reload`](super::reload) on changes of a plugin directory or file (adds
//!   `notify`).
//! - `isolate`: isolated sets ([`isolation`](super::isolation)), each set's plugins in a
//!   worker process of its own (`HostBuilder::isolated` and its options,
//!   `PluginSet::worker_pid`). Off by default: a program built with it carries the worker
//!   ([`performance`](super::performance#binary-cost) says how much).
//! - `python`: Python passes ([`python`](super::python)), an embedded CPython through
//!   [pyo3](https://docs.rs/pyo3), which dylease re-exports as `dylease::pyo3` so that a host
//!   names the same pyo3 types dylease was built with (`Py`, `PyResult`, conversions for
//!   a `PyInterface`'s arguments). pyo3 makes breaking releases in its minor version, and its
//!   types are part of dylease's API under this feature: dylease's minor version moves with
//!   pyo3's. Before dylease 1.0, a pyo3 bump is a dylease minor bump (0.x → 0.x+1); depend on
//!   `dylease::pyo3` rather than on a `pyo3` of your own, or pin the same minor version.
//!
//! Plugin crates depend on the plugin-side crate `dylease-plugin` alone: the plugin ABI,
//! [`export_plugin!`](crate::export_plugin), [`Interface`](crate::Interface), the pass
//! function types and the registration trait [`Registrar`](crate::Registrar), which this
//! crate re-exports ([`writing_plugins`](super::writing_plugins)).
//!
//! # Limits
//!
//! - A plugin's global state is per library *instance*, and instances are shared
//!   process-wide: two hosts that load the same file see the same statics. Keep per-set state
//!   in what `register_passes` registers (its `user_data`), per-instance state in
//!   `on_load`/`on_unload` ([`sharing`](super::sharing)).
//! - A plugin rewritten in place (`cp` over a loaded file) crashes the loader; install by
//!   rename ([`trust`](super::trust#install-plugins-by-rename-never-in-place)).
//! - A plugin must not keep the registrar pointer past `register_passes`. dylease refuses
//!   `add_pass` calls made while no registration is running on the calling thread; a stale
//!   pointer used during another plugin's registration on the same thread cannot be told
//!   apart from that plugin's own (memory-safe, but the pass lands in the wrong plugin).
//! - A pass must not drop the last lease of its own set while it runs.
//! - Re-entrancy is detected per host and per thread: a nested `acquire()` from plugin code
//!   returns [`Error::Reentrant`](crate::Error::Reentrant) ([`faq`](super::faq)). Two hosts
//!   whose plugins acquire each other during load or unload (host A's registration acquires
//!   host B while B's acquires A, on two threads) can deadlock like any two locks taken in
//!   opposite orders: plugin code should not acquire hosts. The same holds for plugin code (a
//!   static plugin's register function or unload hook) that hands `host.acquire()` of its own
//!   host to another thread and joins it: the nested check is per thread, so the other thread
//!   waits for the load its joiner is running. `acquire_timeout` turns such a hang into
//!   `Error::TimedOut`.
//! - A library file is opened and unloaded by one thread at a time, process-wide (I1 in
//!   [`internals`](super::internals)). Plugin code that runs while its own file is being
//!   opened or unloaded (its `on_load` or `on_unload`) and acquires a host that loads that
//!   same file waits for itself; this is not detected across hosts. `acquire_timeout` bounds
//!   the wait.
//! - Each loaded library keeps a file descriptor open ([`reload`](super::reload#descriptors)),
//!   and a pinned one keeps it for the life of the process.
//! - A static plugin's register function belongs to its `PluginHost`; what a pass's
//!   `user_data` points to must live as long as the set, which may outlive the host. Move the
//!   owner into an `on_unload` hook (`reg.on_unload(move || drop(state))`) to tie it to the
//!   set.
//! - After `fork()`: see [`reload`](super::reload#after-fork).
//!
//! # Errors
//!
//! Every error names the file (or static plugin) and the cause, and, where there is one, the
//! fix. [`Error::Io`](crate::Error::Io) keeps the operating system's error as its `source()`,
//! not in its message, as the `std::error::Error` convention asks: print the chain, as
//! `dylease check` does. [`Error::Open`](crate::Error::Open)'s `cause` says whether dylease's
//! ELF check ([`OpenCause::Headers`](crate::OpenCause::Headers)) or the platform loader
//! ([`OpenCause::Loader`](crate::OpenCause::Loader)) refused the file, or whether the process
//! ran out of file descriptors while dylease checked it
//! ([`OpenCause::Descriptors`](crate::OpenCause::Descriptors): raise `ulimit -n`; nothing is
//! said against the file). For example:
//!
//! ```text
//! plugin file `/opt/app/plugins/lib3.so` does not export `dylease_plugin_v1`; is it a dylease plugin? (/opt/app/plugins/lib3.so: undefined symbol: dylease_plugin_v1)
//! pass `double` is registered by both plugin file `/opt/app/plugins/liba.so` and plugin file `/opt/app/plugins/libb.so`; rename one of them
//! refusing to load plugin file `/opt/app/plugins/libx.so`: its directory `/opt/app/plugins` is writable by group (mode 0775), so other users can change the code this process would run; fix: `chmod go-w /opt/app/plugins`, or, if every user who can write there is trusted, build the host with `TrustPolicy::Permissive`
//! ```
//!
//! A failed load has closed every library it opened: nothing stays loaded, and the next
//! `acquire()` tries again. Under [`LoadPolicy::SkipFailed`](crate::LoadPolicy::SkipFailed)
//! (opt in with [`HostBuilder::policy`](crate::HostBuilder::policy)) a plugin that fails is
//! left out instead, logged as a warning and listed in
//! [`lease.failures()`](crate::PluginSet::failures), and the others load; of two plugins
//! registering one pass name, the first keeps it. [`trust`](super::trust) lists every check
//! in the order it runs.
