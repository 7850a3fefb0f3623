//! The design, for maintainers: the invariants I1–I9, the slot protocol, the registry
//! protocol, the identity guarantee and the platform facts they rest on.
//!
//! This page is the one place the design is written. Code comments cite it by invariant
//! number, as "I3 (docs::internals)", and keep only the reasoning local to their code. What a
//! user of the crate needs from it is in [`docs::sharing`](crate::docs::sharing).
//!
//! # Where it lives
//!
//! The host crate's modules are rooms, one job each, the lowest in the first row: a room may
//! name only the rooms in the rows above its own, never one in a row below it
//! (`scripts/imports.sh` checks that no import points down the table and none closes a
//! circle).
//!
//! | Room | What it owns | What it may call |
//! |---|---|---|
//! | `error` | the error type and what it names (`Origin`, `Waited`), and `time_left`, the one reckoning of a deadline into [`Error::TimedOut`](crate::Error::TimedOut) | nothing of the crate |
//! | `sync` | the synchronisation shim (std's or loom's types), `once` (`OnceSlot`), `loom_slot` (the slot's atomic stand-in under loom) and `marks` (a thread's re-entrancy marks, a list through its stack frames), over `raw` (the loom-checked `Arc`, the loom `OnceSlot`'s cell, the marks' list) | `error` |
//! | `sys` | the platform layer: every call into the platform loader, the C library and CPython: `raw` (the raw calls, wrapped safe where they can be), one module per platform behind the alias `imp` (`linux`: `loader`, `identity`, `hold` (a read lease, a sealed copy); `other`), `library` (an open library over them, and the calls into its plugin's functions), `walk` (the `openat` walk), `id` (`FileId`), `python` (CPython's detach calls) | `sync` |
//! | `log_scope` | the name of the host a thread loads or unloads for, that every log line carries, and the warnings said once | `sync` |
//! | `inspect` | what is read of a file without running it: `manifest`, `pinning` (the prediction of a library staying mapped), `parse_cache` (both, cached by file status) | `log_scope`, `sys`, `sync` |
//! | `provenance` | signed plugins (`HostBuilder::require_signed`): `policy` (`Signatures`, a load's verifications, reached through the `trust::Verifier` the builder stores), `held` (what a load holds until the mapping), `hold` (a library's bytes held still from its digest to its mapping: a read lease on the checked descriptor, or a sealed copy in memory; a Python plugin's sources checked against their signed index), `memo` (the process's memo of the Ed25519 checks that passed); the verification is `dylease-sign`'s | `inspect` and below |
//! | `trust` | `discover` (the plugin files of a directory, file or variable), `candidate` (a file found and, once opened, the descriptor its checks read), and the trust check: `policy`, `walk`, `deps` (the dependencies, resolved from checked descriptors) | `provenance` and below |
//! | `registrar` | registration: the `StaticRegistrar` of static plugins, the state both routes fill in (`table`), the C host API and a pass's function typed again (`c_api`), a Python pass's callable (`python`) | `sync`, `sys::library` (the `HostApi` it implements, the bounded C string reader) |
//! | `registry` | the process-wide instances (the registry protocol below), `opener` (the platform loader as the registry's opener: the descriptor check, and when `on_load`, `register_passes` and `on_unload` run, through `sys::library`), `teardown` (unloading a set's plugins) | `registrar`, `trust`, `inspect` and below |
//! | `load` | one load attempt: `plan` (sources to the ordered plugins, `plugin_files_in`), `pipeline` (one plugin from file to registered passes, as typestates), `plugins` (a loaded set's contents), `policy`, `demand` (on-demand mapping), `static_plugin`, `catalog` (every plugin judged, none loaded), and `python`, the loading side of Python plugins (`discover`, `check`, `read`, `register`, `instance`, `interpreter`) | every room in the rows above |
//! | `isolate` | isolated sets (`HostBuilder::isolated`): `config` (the builder's options), `frame` (the channel's frames and payloads, bounds-checked), `remote` (the host's side: the worker process, its reader thread, the load of plugin files into it), `worker` (the worker process's side: maps the received descriptors, runs calls on its threads, unloads), `table` (the requests in flight and the worker's end, behind closures, which the loom models drive), `sys` (the worker's early hook and spawn, the socket with `SCM_RIGHTS`, the sealed regions of large messages, the call of a message pass); its module documentation is the user's page | every room in the rows above |
//! | `host` | `plugin_host`, `builder`, `sources` (the public `unsafe fn`s that name native or Python code, and `init_global`), `policy` (`UnloadPolicy`), `global`, `generations` (the slot protocol below), `thread_cache` (its first path), `keeper` (the host's own lease under `UnloadPolicy::After` and `WithHost`, and the keeper thread), `set` (one generation; its drop reaches the host only through the `Teardown` the generations hand it), `lease`, `call` (`Lease::call` of a message pass, in process or in a set's worker), `stats`, `reentry`, `watch` (a watcher that calls back after a change; `plugin_host` holds the glue) | every room in the rows above |
//! | `python` | the user API of Python passes (`PyInterface`, `PyPass`, `Lease::get_py`) | every room in the rows above |
//! | `dylease-elf` (crate) | the ELF header and structural checks (`header`, `layout`), the manifest's notes in the file's byte order (`manifest`), the linkage the trust check resolves and the facts the pinning prediction reads, and the `fingerprint` of the bytes those read, through one reader (`source`) that keeps what it read of the descriptor the loader maps | no host code (the compiler holds it) |
//! | `dylease-plugin` (crate) | the plugin side of the ABI, re-exported by the host: `abi` (the C header's declarations), `export` (`export_plugin!`, `LibraryRegistrar`), `pass_fn` (`Interface`, `PassFn`, `UnsafePassFn`), `registrar` (the `Registrar` trait, `RegisterError`) | no host code; the host's `StaticRegistrar` implements its trait, and host code imports its items from it, not through the root's re-exports |
//!
//! Outside the rooms: `lib.rs` declares the modules and the public surface only;
//! `guarantees` holds what the compiler checks of that surface (the handle types' bounds and
//! size) and the README's doctests; `test_dir` is the unit tests' scratch directory.
//!
//! `unsafe` is fenced by file: the crates deny `unsafe_code`, and only these modules allow it,
//! each with its reason on its declaration or at its top; the other modules forbid it on their
//! declarations, so that nothing inside them can allow it again. In the host crate, seven files
//! hold `unsafe` code: `sys/raw.rs` (the C library's and the loader's calls), `sys/library.rs`
//! (opening a library and calling its plugin's functions), `sys/python.rs` (CPython's),
//! `registrar/c_api.rs` (the C host API, `user_data`'s `Send`/`Sync`, a pass's function typed
//! again), `sync/raw.rs` (the shim's raw parts), `host/lease.rs` (`Lease::pass`'s untyped pass)
//! and `isolate/sys.rs` (the call of a message pass; the worker's early hook and spawn, the
//! channel's socket, the sealed regions); `host/sources.rs` declares the public `unsafe fn`s
//! and holds no `unsafe` block. In `dylease-cli`, `sys.rs` holds the tool's. `scripts/house.sh`
//! counts them. In `dylease-plugin`, `abi`, `export` and `pass_fn`. Everything else reaches the
//! platform, a plugin's functions and raw pointers through their safe functions or their
//! `unsafe fn`s' `# Safety` contracts.
//!
//! # The invariants I1–I9
//!
//! Each invariant has a number that the code's arguments cite as "I3 (docs::internals)": the
//! host's generation protocol in `src/host/generations.rs`, the registry in
//! `src/registry/mod.rs`. Each is
//! checked by a loom model (`loom-tests/`, and the registry's models with a stand-in for the
//! platform loader) and by a test that loads real libraries (`tests/integration/`).
//!
//! - **I1 one instance of a file at a time, process-wide, and one current generation per
//!   host.** A file (by its (dev, ino)) is opened again only after its previous instance
//!   finished unloading; a host loads generation *n* + 1 only after generation *n* finished
//!   unloading. (Another file under the same path, a new version installed by rename, is
//!   another file: it maps beside the old one, see I9.)
//! - **I2 a lease never sees an unloading set**, and a pass never runs in an unloading
//!   instance: a lease is never made from a count of zero (`Weak::upgrade`).
//! - **I3 no leak.** The last lease's drop unloads before it returns: the set's static hooks,
//!   then every instance no other set uses (`on_unload`, close). The host's slot, the thread
//!   caches and the registry hold `Weak`s only.
//! - **I4 no deadlock from plugin code on the same thread.** No plugin code (constructors,
//!   `on_load`, `register_passes`, `on_unload`) runs under a lock it can re-enter; an
//!   `acquire()` of a host from inside that host's own load or unload, on the same thread,
//!   returns [`Error::Reentrant`](crate::Error::Reentrant).
//! - **I5 failure atomicity.** A failed load leaves nothing new loaded and the host as it
//!   was (every instance it started is released; a failed open or `on_load` closes its handle
//!   and clears the file's busy mark); the next `acquire()` tries again.
//! - **I6 registration per set.** Every set calls every plugin's `register_passes` afresh,
//!   into its own pass table, whether its instance is new or shared; nothing reaches host
//!   state from library constructors (the header's constructors only link nodes into a list
//!   private to the plugin).
//! - **I7 one `on_load` and one `on_unload` per instance**, whatever the number of hosts and
//!   generations sharing it; `on_unload` runs after the last set using the instance is gone.
//! - **I8 trust before code.** Under [`TrustPolicy::Strict`](crate::TrustPolicy::Strict) no
//!   code of a file runs unless every directory and link on the way to it passed the checks,
//!   and the file opened is the file checked.
//! - **I9 the file that runs is the file that was checked.** Each plugin file is opened
//!   once, not following a symlink; the trust and ELF checks read that descriptor, the
//!   registry knows the instance by its (dev, ino), and the loader maps that descriptor. An
//!   instance never maps another file than its identity names, and no identity names two
//!   files while its instance lives. (A host that requires signatures maps, for a file it
//!   can take no read lease on, a sealed copy of that descriptor's bytes, verified, under the
//!   file's identity: `provenance`, `docs::signing`.)
//!
//! # On-demand sets: the map-once state (`load::demand`)
//!
//! In a set of an on-demand host, a library plugin with a complete manifest joins unmapped:
//! its entry in the set (`PluginInfo`, and a `PassInfo` per declared pass) comes from its
//! manifest, and a `Deferred` keeps its path, the (dev, ino) of the file judged and the
//! manifest, but no descriptor. The set's lists never change after the load; what changes is
//! set once each: the passes' callables (`sync::OnceSlot`), the plugin's teardown entry (the
//! set's teardown list is a lock, pushed to by a mapping, taken by the set's drop) and its
//! `mapped` flag, published in that order. A use reads the callable without a lock (one
//! `Acquire` load); only a use that finds none goes to the state machine, one state per
//! on-demand plugin under one lock per set. (The `Deferred`s and their states are held behind
//! a trait object, `load::plugins::Demand`, that only `load::demand::defer` makes; the builder's
//! `on_demand` stores `defer` and the load calls it through that pointer, so a program that
//! never builds an on-demand host links none of this: `scripts/binary-size.sh` checks it.)
//!
//! ```text
//!   Unmapped ──first use──▶ Mapping(thread) ──ok──▶ Mapped
//!      ▲                        │  │
//!      └── Reentrant, TimedOut ─┘  └──other error──▶ Failed(cause)
//! ```
//!
//! 1. `Mapped`: return. `Failed(cause)`: return `Error::MapFailed` with that cause (the set
//!    keeps it; `reload()` makes a new set).
//! 2. `Mapping` by this thread: `Error::Reentrant` (a use from the plugin's own `on_load` or
//!    `register_passes`). By another: wait on the set's condition variable, until the host's
//!    `map_timeout` (`Error::TimedOut`, `Waited::Mapping`).
//! 3. `Unmapped`: mark `Mapping(this thread)`, release the lock, and map by the load's own
//!    path (`Deferred::map`: `open_checked` refusing a file whose identity changed since the
//!    acquire, the ELF check, dependencies, the registry, `on_load`, `register_passes`, the
//!    manifest comparison), inside the host's re-entrancy mark; then publish and set the final
//!    state, waking the waiters (by a drop guard, also when a panic unwinds: it leaves
//!    `Unmapped`).
//!
//! What it keeps: I1 and I7 (the mapping goes through the registry: one instance per file,
//! shared with other sets and hosts, one `on_load`), I2 and I3 (a mapping happens only
//! through a lease, so never in an unloading set; the set's drop tears down every mapped
//! plugin, in reverse mapping order), I4 (no lock held while plugin code runs; the
//! `Mapping(thread)` check and the re-entrancy mark turn a wait for itself into `Reentrant`),
//! I5 (a failed mapping releases what it started; the set's other plugins are untouched),
//! I6 (the mapping registers into this set's table only), I8 and I9 (judged under the trust
//! policy at acquire, and the file mapped must be the file judged). The loom model
//! `load::demand::loom_models` checks that two first uses map once, run `on_load` once and
//! unload once with the set (planted bug: `scripts/planted/on_demand.patch`, the guard
//! skipped).
//!
//! # The registry protocol: one instance per file (`registry`)
//!
//! A library instance is one loaded mapping of one library file. Sets hold it by `Arc`; the
//! registry keeps only a `Weak` to each live instance, keyed by the loader's handle (on glibc
//! `dlopen` returns the `link_map`, so two opens that the platform resolves to one mapping are
//! one instance, whatever path or host they came from), and finds instances by the checked
//! file's identity ((dev, ino)) too. The instance's drop runs the plugin's `on_unload`, closes
//! the handle, and marks the file busy so that a waiting opener waits for the unload to end.
//!
//! Opening file F (checked identity I), under the registry's lock:
//!
//! 1. while I is *busy* (being opened or unloading), wait (I1);
//! 2. if a live instance of I exists, upgrade its `Weak`: that is the instance (no `dlopen`);
//!    if the `Weak` is dead, the instance's drop is about to mark I busy: wait for it;
//! 3. otherwise mark I busy and release the lock; open the checked descriptor; take the lock:
//!    if the handle is a live instance's of I, share it and close the extra handle; if it is
//!    another identity's, refuse (I9); if it is a dying one's, close the handle and start
//!    again at 1; otherwise release the lock, start the instance (entry point, `on_load`)
//!    outside it (I4), and publish it. The busy mark goes in every case, waking the waiters
//!    (I5: by a drop guard, also when a panic unwinds).
//!
//! The last `Arc`'s drop, under the lock: forget the instance's entries and mark I busy;
//! outside the lock: finish it (`on_unload`, close: I7). The mark stays until the closed
//! library is settled (did the platform keep it?), after every other library of the same
//! teardown closed; then, under the lock: unmark and wake.
//!
//! In the code, `Registry::find_or_mark` takes steps 1 and 2 and sets step 3's mark;
//! `Registry::open_marked` does the rest of step 3.
//!
//! The protocol is generic over its opener (`registry::opener`'s `Dlopen` for libraries), so that
//! loom models can replace `dlopen` with a model of the platform loader and check I1 and I7
//! with two hosts.
//!
//! # The slot protocol: how `acquire()` finds the current set (`host::generations`)
//!
//! Each host keeps its current set in a slot that holds it only weakly
//! (`arc_swap::ArcSwapWeak<PluginSet>`); a [`Lease`](crate::Lease) is an
//! `std::sync::Arc<PluginSet>` in a newtype and a [`WeakLease`](crate::WeakLease) a `Weak`.
//! The host also publishes the number of its current generation. `acquire()` tries three
//! paths, cheapest first:
//!
//! 1. **The cached fast path** (`host::thread_cache`): no lock, no allocation. Each thread
//!    keeps a small cache mapping a host's id to `(generation, Weak<PluginSet>)`. If the
//!    entry's generation is the host's current one (one Acquire load) and its `Weak` upgrades
//!    (one compare-and-swap that never increments from zero), that is the lease. The generation check is what
//!    keeps an older generation whose `Weak` still upgrades (a set still in use elsewhere) from
//!    being handed out as current.
//! 2. **The slot path**: upgrade the slot's `Weak` and refresh this thread's cache entry.
//! 3. **The slow path**, under the host's lock: upgrade again (another thread may have
//!    loaded meanwhile); wait while another thread loads or the previous generation is still
//!    unloading (I1); then mark the host as loading, release the lock, load generation
//!    *n* + 1 with this thread marked as inside this host (I4), and publish it: the slot's
//!    `Weak` first, then the generation number (Release; the cache reads it with Acquire),
//!    so a thread that sees the new number finds the new set in the slot.
//!
//! Under loom the slot is a stand-in (`sync::loom_slot`) that promises what arc-swap does, a
//! Release store and an Acquire load of one atomic (the position of the current `Weak`), read
//! before any lock: a lock read first would order a thread after every earlier store and hide
//! a publication without Release. (The list of `Weak`s behind the position is under a loom
//! lock, taken after the position is read; a load that read the old position and locks after
//! a store is ordered after that store's earlier writes, which arc-swap does not promise. No
//! model relies on it: each asserts what the thread read, not what it read later.) Loom model 10b
//! checks the publication order from a thread that never synchronised with the reload; with
//! the planted bug `scripts/planted/publication.patch` (the number stored and read Relaxed)
//! it fails, which `loom-tests/run.sh` checks.
//!
//! The cache holds `Weak`s only, so it never keeps plugins loaded (I3). Host ids come from a
//! process-wide counter and are never reused (an address is, after a host is dropped, and a
//! stale entry would then hand out another host's set). The cache has eight entries (eight
//! hosts used in turn all stay cached) and replaces them in turn. A thread whose thread-locals
//! are being destroyed (a lease dropped or acquired from a thread-local destructor) skips it
//! and takes the slot path.
//!
//! Under `UnloadPolicy::After` and `WithHost` the host holds a lease of its own
//! (`host::keeper`), an ordinary one whose drop is an ordinary last drop. The keeper thread of
//! `After` looks every eighth of the idle time (between 1 ms and 250 ms) and lets the lease go
//! once no user lease was seen for the idle time, and only if it is still the only one (a
//! user may have acquired meanwhile through a thread cache, which never asks the host).
//!
//! Two rules keep the protocol deadlock-free: a strong reference is never dropped while the
//! host's or the registry's lock is held (its drop may be the last, which takes the same
//! lock), and a panic in plugin teardown poisons nothing (the locks ignore poisoning, and a
//! generation is marked unloaded from a drop guard, however its teardown ended, through the
//! set's `Teardown`).
//!
//! The cost of each path, against an `Arc` clone and drop and with one or two threads, and
//! of a cold load of real plugins against raw `libloading`, is measured by the interleaved
//! harness `benches/compare.rs` (`scripts/bench.sh`); `BENCHMARKS.md` in the repository has
//! the ratios, per run, and how to reproduce them. On a quiet machine the cached path costs
//! 2.5 to 3 ns more than an `Arc` clone and drop (1.18× on an Intel Xeon VM, 1.71× on an AMD
//! EPYC VM whose atomics are four times cheaper) and the slot path (`ArcSwapWeak` load and
//! upgrade) 1.5 to 1.6× the cached one, which is why the cache exists.
//!
//! # The identity guarantee: mapping the checked descriptor (I9)
//!
//! glibc has no `fdlopen`, but `dlopen("/proc/self/fd/N")` maps the inode descriptor N is open
//! on, whatever was renamed over the file's path since the check. Three traps, measured on
//! glibc 2.36, shape the rest:
//!
//! - the loader records the name it was given and matches a later `dlopen` of the same
//!   string to that mapping without looking at the file: once N is closed and reused for
//!   another file, `dlopen("/proc/self/fd/N")` returns the *old* library. So the descriptor
//!   whose name the loader was given stays open while the mapping lives, and for the life of
//!   the process if the platform keeps the library mapped (pinned). That costs one descriptor
//!   per loaded library instance, and keeps its inode from being freed and its number reused
//!   while the instance lives (the registry's key cannot alias another file);
//! - an open that the loader resolves to an existing mapping (same device and inode) adds the
//!   name to that mapping, for as long as it lives: such a name is kept for ever. A file whose
//!   mapping the platform kept (pinned) is opened again by the name it was kept under, so
//!   reloading a pinned plugin costs no descriptor. `RTLD_NOLOAD` adds names too, so dylease
//!   never uses it: whether a mapping is still there is asked of the loader's list
//!   (`dl_iterate_phdr`, by load address and name);
//! - `$ORIGIN` is the directory of the name given, here `/proc/self/fd`. A library whose run
//!   path or needed names use `$ORIGIN` is given `/proc/self/fd/D/<name>` instead, D its
//!   directory's descriptor, so `$ORIGIN` resolves to its directory. The loader then finds the
//!   file by name, so just before, the name is compared with the checked descriptor (a file
//!   renamed in meanwhile is checked first, as above), and after, the mapping is compared with
//!   it: the mapping that holds the mapped object's dynamic section (`l_ld`, which lies in
//!   the file the loader mapped whatever its segments' addresses), asked of the kernel
//!   (`PROCMAP_QUERY` on `/proc/self/maps`, or its text on kernels before 6.11), must be of
//!   the checked (dev, ino); no answer counts as another file. Under `Strict` such a library is refused in a sticky
//!   directory others can write, where anyone may create the name once it is free. What is
//!   left is the instant between the comparison and the loader's open, in which only the
//!   directory's owner or root can rename a file in; such a file is refused after its
//!   constructors ran.
//!
//! Because the loader never matches a plugin by its path, a new version installed by rename
//! is mapped beside the old one from its own file: a reload needs no private copy. A file
//! replaced between its check and its open was replaced by this user or root (only they can
//! change a directory that passed): it is checked in its turn and loaded if it passes.
//!
//! After an unload, whether the platform kept the library is asked of the loader's list, once
//! every library of the set is closed (one may hold another) and while the file is still
//! marked busy (I1), so that no other host's new mapping of the file can be mistaken for it.
//!
//!
//! # The dependency protocol: the loader never searches (`trust::deps`, `registry::opener`)
//!
//! Under `Strict` the libraries a plugin needs are not left to the loader's search: imitating
//! that search and then letting glibc search again would leave a door at every difference
//! between the two and at every instant between them. glibc answers a needed name with an
//! already loaded object whose `DT_SONAME` is that name before it searches any directory
//! (`_dl_map_object`; measured on 2.36: a dependency mapped first through `/proc/self/fd`,
//! soname `libdep.so`, satisfied a plugin's `DT_NEEDED libdep.so` whose run path named a
//! directory that does not exist, and glibc opened nothing by path). So:
//!
//! 1. **Resolve once.** At the trust check, from the descriptor the load maps, the closure of
//!    the plugin's DT_NEEDED, DT_AUXILIARY and DT_FILTER names is resolved depth first in
//!    glibc's order of directories: DT_RPATH (the library's own, then its loaders') when it
//!    has no DT_RUNPATH, then `LD_LIBRARY_PATH` (ignored under secure execution, as glibc
//!    does), then DT_RUNPATH. `$ORIGIN` is the directory the library's name was found in
//!    (a symlink there is not followed for it: glibc's own rule), which is also the directory
//!    dylease gives the loader its name in; `$LIB` and `$PLATFORM` take every value they may
//!    take, searched in a fixed order (`deps::lib_names`, `deps::PLATFORMS`). Below each
//!    run-path directory the hwcaps, `tls` and platform subdirectories are searched too, every
//!    level and platform name glibc may use (which depend on its version and the CPU), so the
//!    search is a superset of glibc's: a library glibc finds there is found there (the
//!    `dependencies::` fidelity tests, with glibc's own search as the oracle), and one in a
//!    subdirectory this glibc would not try (`haswell/` on a glibc that names the platform
//!    `x86_64`) is still found, checked and mapped by dylease, where glibc would fail the load.
//!    A name found in two places below one run-path directory is refused rather than guessed.
//! 2. **Check each library found in a run path** on one descriptor: the walk of the trust
//!    check (owner, mode, every directory and symlink on the way), its ELF structure, and its
//!    soname, which must be the name it is needed by. Every run-path directory, and every
//!    subdirectory glibc tries below it (`glibc-hwcaps/*`, `tls`, the platform names) that
//!    exists, must let nobody but this user and root create names in it, sticky or not: glibc
//!    tries those directories for the system's libraries too, and subdirectories that do not
//!    exist yet first.
//! 3. **Map dependencies first**, each from its checked descriptor, named
//!    `/proc/self/fd/D/<name>` (D its directory's descriptor: `$ORIGIN` and `dladdr` stay
//!    meaningful; the name is compared with the checked file just before and the mapping just
//!    after, as for a plugin's `$ORIGIN` mode), then the plugin. The loader then finds each
//!    needed name loaded already, by soname. Just before a dependency is mapped, the name is
//!    looked up among the objects loaded already (`dlopen(name, RTLD_NOLOAD)`, which maps
//!    nothing): if another file answers it (the host's own, `LD_PRELOAD`, a library another
//!    plugin bundles), the loader would take that one and the checked copy's constructors
//!    would run for nothing, so the plugin is refused.
//! 4. **Dependencies are instances** of a second registry with the same protocol (I1: one
//!    instance per file per process, shared by every plugin instance that needs it). A plugin
//!    instance holds its whole closure, in mapping order, and drops it in reverse after its
//!    own `dlclose`: dependents close before the libraries they need, and each library's
//!    pinned check follows its own close, after every library that needed it closed.
//!
//! Left to glibc, on purpose: names found through `LD_LIBRARY_PATH` and the system's
//! libraries (names found in no run path), which are the process owner's choice. Refused,
//! with the reason and the fix, because the mechanism cannot cover them: a needed name holding
//! `/` or `$` (opened as a path: no soname can answer it); a dependency without the soname it
//! is needed by (plain `cc -shared`, Rust cdylibs and CMake `MODULE` targets have none); a
//! cycle; DT_AUDIT and DT_DEPAUDIT; a relative run-path entry (resolved against a current
//! directory any thread may change); one name found twice below one run-path directory
//! (glibc's choice depends on the CPU); more than `MAX_OBJECTS` (512) libraries; anything
//! that cannot be opened or read (out of descriptors, the plugin is not loaded either, but the
//! error is `OpenCause::Descriptors`, naming the limit, not a refusal: `trust::Refused`); and
//! an under-linked dependency, which
//! `RTLD_NOW` cannot map on its own (the error names `-Wl,-z,defs`). On a C library that does
//! not match needed names by soname (musl), any dependency in a run path is refused.
//!
//! Descriptors: while a set is being loaded, the trust check holds one per plugin file whose
//! linkage the parse cache does not hold (it resolves the others' dependencies from the
//! cache, by the status discovery read, and the load opens them one at a time) and one per
//! dependency it opened; while mapped, a plugin instance holds one (two in `$ORIGIN`
//! mode: its file and its directory) and each dependency two (its file and its directory),
//! for ever if the platform keeps it. Set `ulimit -n` above twice the number of libraries a
//! process maps, plus what it uses otherwise.
//!
//!
//! # The parse cache: parsing not repeated for unchanged files (`inspect::parse_cache`)
//!
//! What parsing a library file decided — the ELF structural check's verdict and the linkage
//! the trust check resolves (a dependency's too: the resolver checks each one it opens), the
//! manifest or its refusal, and the pin prediction — is kept for the process, keyed by the status of the descriptor that will be
//! mapped (`Opened::metadata`, read by `fstat`/`statx` of that descriptor): device, inode,
//! size, modification and status-change times in nanoseconds, and the birth time where the
//! file system has one. `Opened::new` looks the key up before any byte of the file is read;
//! every `Opened` of the file at that status shares one entry (`Arc`), whose parts are
//! filled when first asked for. An on-demand acquire also looks an entry up, without adding
//! one, by the status discovery read of the entry (`parse_cache::find`): a file whose
//! complete parse is there is judged unopened, and its first use opens it, judges its trust
//! again and must find it at the same status, or refuses it (`ReplacedSinceAcquire`). A file replaced by rename is a new inode; one rewritten in
//! place has a new ctime, which no system call sets back.
//!
//! - **Fingerprint.** A write through a shared mapping (`MAP_SHARED`) keeps the status (tmpfs
//!   never updates the times for it; ext4 only at the first write to a clean page). So
//!   `Opened::new` also reads again, from the descriptor, what the cached ELF verdict,
//!   manifest and linkage were read from (the ELF and program headers, the `PT_NOTE`
//!   segments, the dynamic section and the linkage's strings: `dylease_elf::Elf::fingerprint`,
//!   a few KB, the whole file if it is at most 64 KiB) and hashes it with std's SipHash under
//!   a per-process random key; the entry is used only for that fingerprint
//!   (`Opened::parse_was_cached`). Another fingerprint at the same status: parsed again, and the
//!   file not cached at that status again (its entry stays, "unstable", found by neither
//!   `lookup` nor `find`). A strict load keeps a closure it resolved by status only for a
//!   descriptor that took that entry, and an on-demand first use refuses a file whose
//!   manifest differs from the one its set was built from (`ReplacedSinceAcquire`): the set
//!   hands the mapping's callables to its passes by name. The hash need not be
//!   cryptographic: only a user who may write the file can change it, and that user chooses
//!   its code anyway; the fingerprint keeps the host's verdicts about the file true.
//! - **Racy rule.** An entry is stored only if the wall clock, read before the file is read,
//!   is at least `RACY_WINDOW` (2.1 s) past the file's ctime: a same-size rewrite within one
//!   timestamp tick of the last change (a kernel tick, or the 1–2 s of ext3, HFS+ and FAT)
//!   could otherwise keep the whole key. Younger files are parsed at each load.
//! - **Bound.** At most 4096 files, one entry per (device, inode): a changed file's entry is
//!   replaced, and the least recently used entry goes when the cache is full.
//! - **Not covered** (a cached verdict may then describe older bytes): the tables only the
//!   structural check and the pin prediction read (symbols, hash tables, relocations,
//!   version records, unwind tables), rewritten where neither the key nor the fingerprint
//!   sees it (a file system that does not update the ctime on writes, NFS attribute caching,
//!   a shared mapping, a file system more than 2.1 s coarse, a wall clock stepped back).
//!   There a corrupt rewrite may reach the loader unchecked (what the structural check guards
//!   against is a crash in the loader); the ABI gate, the manifest comparison and the
//!   dependency walk judge what the file holds when it is opened. Only a user who may write
//!   the file (root or this process's own user: the trust check refuses any other) can make
//!   such a rewrite; a file installed by rename, as `dylease install` does, is never missed.
//! - **Never cached: trust.** The walk of the file, its directories, its run paths and every
//!   dependency runs at every load (`trust`), on what the linkage names, cached or
//!   not. A failure to read the file (an I/O error) is not stored either. The cache answers
//!   what an exact file contains, never whether another user may have chosen it.
//!
//! # Platform facts
//!
//! What the design rests on, measured on glibc (2.36) on Linux; the platform calls live in
//! `sys`, one module per platform (the loader, the `openat` walk, the process's user
//! and rights).
//!
//! - **The loader decides what a path means.** glibc matches a `dlopen` by the name it was
//!   given first and by (dev, ino) second; it returns the same handle (the `link_map`) for
//!   every open of one mapping. Hence the registry's key is the handle, and its lookup the
//!   file's (dev, ino).
//! - **`dlsym` searches a library's dependencies.** The entry point must be the library's
//!   own: its address must lie in one of the library's PT_LOAD segments (as the ELF check
//!   read them from the checked descriptor) at the load address the handle's `link_map` gives
//!   (`l_addr`): a few comparisons, where `dladdr1` would walk every loaded object. `dladdr1`
//!   (glibc) only names the object of a refused symbol; without a load address the check is
//!   absent.
//! - **A library may stay mapped after its last `dlclose`** (pinned): `DF_1_NODELETE`, an
//!   `STB_GNU_UNIQUE` symbol (g++'s function-local statics of inline functions), a registered
//!   thread-local destructor, or another object bound to its symbols; musl never unmaps.
//!   Whether it stayed is asked of the loader's list (`dl_iterate_phdr`), never with
//!   `RTLD_NOLOAD`, which adds the name it is given to the mapping it finds.
//! - **`/proc/self/fd/N`** names the inode N is open on; glibc has no `fdlopen`. `$ORIGIN` is
//!   the directory of the name given (see above).
//! - **The trust walk** opens each directory with `openat(O_PATH | O_NOFOLLOW)` and reads
//!   owners and modes with `fstat`/`fstatat` (symlinks with `readlinkat`), as the kernel would
//!   resolve the path; `geteuid` is the user trusted besides root.
//! - **`getauxval(AT_SECURE)`** is non-zero in a set-user-ID or otherwise privileged program:
//!   there [`global()`](crate::global) ignores its environment variable.
//! - **`fork()`** copies the parent's locks, which threads that do not exist in the child may
//!   hold: a load in a child fails at once with [`Error::Forked`](crate::Error::Forked).
