//! Frequently asked questions.
//!
//! # How do I unload the plugins now?
//!
//! Drop your leases. A host never unloads a set that a lease still holds; if something still
//! holds one, unloading would pull code from under it. To wait for the others,
//! [`PluginHost::wait_unloaded`](crate::PluginHost::wait_unloaded) blocks until no set is
//! loaded, with a timeout, and forces nothing; [`PluginHost::stats`](crate::PluginHost::stats)
//! says how many leases are alive. See [`recipes`](super::recipes), "Orderly process
//! shutdown".
//!
//! # What if two hosts load the same file?
//!
//! They share one instance of it, process-wide ([`sharing`](super::sharing)). Its `on_load`
//! runs once, when the first set of any host opens it; each host's sets call its
//! `register_passes` into their own pass tables; its `on_unload` runs once, after the last
//! set of *any* host using it is gone, and then the library is closed. One host's sets coming
//! and going never unload what another host's set still uses. The same holds for two paths
//! that lead to one file (a symlink, a relative and an absolute spelling): instances are
//! identified by the loader's handle, not by path.
//!
//! A consequence: a plugin's globals are per instance, so two hosts that load one file see
//! the same statics. Keep per-set state in what `register_passes` registers (a pass's
//! `user_data`), per-instance state in `on_load` and `on_unload`.
//!
//! # My plugin's state disappears after a reload, on musl, or with `-z nodelete`
//!
//! The state is gone from the second load on (the next generation after an unload) because
//! the plugin makes it in a constructor (or a C++ static's initialiser) and frees it in
//! `on_unload`. A library the platform keeps mapped after its last close (linked with
//! `-z nodelete`, a C++ build that exports GNU unique symbols, holding a C++ `thread_local`
//! with a destructor on a live thread, any library on musl) does not run its constructors
//! again when it is opened again: its passes find the state freed. For C++, link with the
//! version script `include/dylease.map` (the build recipe in
//! [`writing_plugins`](super::writing_plugins)): then the library really unloads.
//!
//! Move it to `on_load` (ABI version 2: `DYLEASE_PLUGIN_WITH_HOOKS(name, version, on_load,
//! on_unload)` in C, `on_load:` in [`export_plugin!`](crate::export_plugin)). `on_load` runs
//! for every new instance, whether the platform mapped the library afresh or not, and pairs
//! with exactly one `on_unload`. dylease predicts from the file whether a library will stay
//! mapped ([`PluginInfo::pinning`](crate::PluginInfo::pinning)), logs one warning for each
//! library still loaded after its unload, with the cause and the fix, and counts it once in
//! [`Stats::pinned_libraries`](crate::Stats::pinned_libraries).
//!
//! # How do I upgrade a v1 plugin?
//!
//! You need not: version-1 binaries keep loading unchanged, and get a version-1 host API
//! table (`abi_version` 1, `add_pass` only). To use `on_load`, typed passes or `report`,
//! rebuild against the new `include/dylease.h` (a declarative plugin becomes version 2 with no
//! source change) and declare the hooks with `DYLEASE_PLUGIN_WITH_HOOKS`. The details, and
//! what a hand-written descriptor changes, are in
//! [`writing_plugins`](super::writing_plugins), "Upgrading a version-1 plugin".
//!
//! # Why are `dir`, `file` and `env` `unsafe`, and `acquire()` safe?
//!
//! Loading a library runs its constructors, and a host then calls its entry point, `on_load`,
//! `register_passes`, `on_unload` and its destructors: foreign code that can do anything. No
//! check dylease can make shows that code is sound, so someone must vouch for it, as
//! `libloading::Library::new` asks (its issue #86 made that `unsafe` for this reason). The
//! place to vouch is where the code is *chosen*: the builder methods that name native sources
//! ([`HostBuilder::dir`](crate::HostBuilder::dir), [`file`](crate::HostBuilder::file),
//! [`env`](crate::HostBuilder::env)) are `unsafe fn`s whose `# Safety` section is the caller's
//! contract. After that, [`acquire`](crate::PluginHost::acquire), `reload`, and every drop of a
//! lease run only code the configuration vouched for, and stay safe: a host is built in one
//! place and used in many, and those many places cannot know more than the one that built it.
//! Static plugins are Rust code compiled into the host, checked by the compiler: safe.
//!
//! [`global()`](crate::global) stays safe too. Its default source is the `DYLEASE_PLUGIN_PATH`
//! environment variable, and whoever sets a process's environment already chooses its code
//! (`LD_PRELOAD`, `LD_LIBRARY_PATH`); like the platform loader, the default ignores the
//! variable in a process with elevated rights (`AT_SECURE`). A program that wants other
//! sources or policies configures it once, before first use, with the `unsafe`
//! [`init_global`](crate::init_global) (as `log::set_logger` is set once), for example with
//! [`LoadPolicy::SkipFailed`](crate::LoadPolicy::SkipFailed) so that one missing directory
//! in a path variable does not fail every load.
//!
//! # Why is calling a pass `unsafe`?
//!
//! The ABI stores every pass as an untyped function pointer; only the caller knows the
//! signature the plugin registered. Typed passes name an interface
//! ([`PassInfo::interface`](crate::PassInfo::interface)) that a host can check before it
//! casts, but the cast itself still rests on the plugin's word.
//!
//! # Why does `acquire()` fail with `Error::Reentrant`?
//!
//! Plugin code (a static plugin's register function or unload hook, a logger called during a
//! load) called `acquire()` on the host whose load or unload it runs in, on the same thread.
//! Waiting would wait for itself; failing fast is the alternative to a deadlock. Another
//! thread that plugin code starts and joins is not detected: bound such waits with
//! [`PluginHost::acquire_timeout`](crate::PluginHost::acquire_timeout).
//!
//! # What does a lease cost?
//!
//! A [`Lease`](crate::Lease) is one pointer; a clone is one atomic increment. While a set is
//! loaded, `acquire()` takes no lock and allocates nothing: a generation check and one
//! compare-and-swap, from this thread's cache ([`sharing`](super::sharing), "the slot
//! protocol"): a few nanoseconds more than an `Arc` clone and drop, measured (1.18× on an
//! Intel Xeon VM, 1.71× on an AMD EPYC VM whose atomics are four times cheaper). A pass lookup is one hash lookup
//! (`cargo bench --bench pass_lookup` times it against a `HashMap`). The repository's
//! `BENCHMARKS.md` has the measured ratios against an `Arc` clone, a shared counter and raw
//! `libloading`, and how to reproduce them; [`performance`](super::performance) sums them up.
//!
//! # How do I see what a host is doing?
//!
//! [`PluginHost::stats`](crate::PluginHost::stats) returns loads, unloads, live leases, pinned
//! libraries and timings; loads, unloads and skipped or pinned plugins are also reported
//! through the [`log`](https://docs.rs/log) facade (install any logger to see them). The
//! `dylease check` command ([`writing_plugins`](super::writing_plugins)) says why a plugin
//! does not load.
