//! Process-wide sharing: one instance of each library, every host, every generation.
//!
//! A process is many components, and each may build its own [`PluginHost`](crate::PluginHost)
//! (a graph session and a single-op compiler as separate libraries of one program). The
//! platform loader maps a library file once, whoever opens it; so dylease keeps its promise
//! per library, across the whole process, not per host.
//!
//! # Library instances
//!
//! A *library instance* is one loaded mapping of one library file. The sets that use it hold
//! it by `Arc`; a process-wide registry keeps only a `Weak` to each live instance, so the
//! registry never keeps a library loaded. Whatever host, generation, path spelling or symlink
//! an open came from, it ends up in one of two places:
//!
//! - **an instance is alive**: the file is found by its identity ((dev, ino) on Unix) and the
//!   instance is shared (`Arc::clone`) without calling the loader (the trust and ELF checks
//!   still run first);
//! - **none is**: the file is opened (`RTLD_NOW | RTLD_LOCAL`), and the registry looks the
//!   instance up by the **loader's handle** (what `dlopen` returns: on glibc the library's
//!   `link_map`). Two opens the platform resolves to one mapping are one instance: if the
//!   handle is a live instance's (another spelling of the same file), that instance is shared
//!   and the extra handle closed; otherwise this is a new instance, and it starts.
//!
//! Identity is the handle, not the path, because the loader decides what a path means: glibc
//! matches an open by name first and by (dev, ino) second, so the same path string may return
//! an old mapping and another spelling of it a new file.
//!
//! Starting an instance resolves the entry point `dylease_plugin_v1`, which must be the
//! library's own: `dlsym` also searches a library's dependencies, so a library without an
//! entry point that links against a plugin would otherwise be taken for that plugin. It is
//! refused with [`Error::MissingEntry`](crate::Error::MissingEntry) naming the file (on glibc,
//! where `dladdr1` says which object a symbol lies in). Then the descriptor is checked and
//! the plugin's `on_load` runs.
//!
//! # Once per instance, once per set
//!
//! | Once per instance (shared by every host) | Once per set (one generation of one host) |
//! | --- | --- |
//! | the library's constructors and destructors, as the platform runs them | the plugin's `register_passes`, into this set's own pass table |
//! | `on_load` (ABI v2): after the open, before the instance's first `register_passes`; non-zero fails the load ([`Error::OnLoadFailed`](crate::Error::OnLoadFailed), naming the file) with no `register_passes` and no `on_unload` | a static plugin's register function and its [`on_unload`](crate::Registrar::on_unload) hooks: static plugins belong to the host built with them |
//! | `on_unload`: after the last set of *any* host using the instance is gone, then the handle is closed | the set's unload: static hooks in reverse load order, then its instances released in reverse load order |
//! | the library's statics: two hosts that load one file see the same globals | what a pass's `user_data` points to, if `register_passes` made it |
//!
//! Once `on_load` succeeded, `on_unload` runs exactly once, even if a later step fails (a
//! failing `register_passes`, a refused pass, a pass name another plugin took). A version-1
//! plugin has no `on_load`: its `on_unload` is owed once a set's `register_passes` succeeded
//! on the instance (a failing `register_passes` undoes its own work).
//!
//! So state a plugin frees in `on_unload` belongs in `on_load`, never in a constructor: a
//! library the platform keeps mapped after its last close (`-z nodelete`, a C++
//! `thread_local`, musl, which never unmaps) does not run its constructors again, but the
//! next instance of it runs `on_load` again. After an unload, dylease looks for each closed
//! library in the loader's list; one still there is logged as a warning and counted in
//! [`Stats::pinned_libraries`](crate::Stats::pinned_libraries).
//!
//! One file, one instance at a time: a file is not opened while an instance of it is
//! unloading, or while another thread opens it. The opener waits for that to finish,
//! otherwise `dlopen` would hand back the dying mapping, whose constructors will not run
//! again. [`PluginHost::acquire_timeout`](crate::PluginHost::acquire_timeout) bounds the wait;
//! it then fails with [`Error::TimedOut`](crate::Error::TimedOut) and
//! [`Waited::File`](crate::Waited::File) naming the file.
//!
//! # The invariants
//!
//! Each invariant has a number that the code's arguments cite: the host's generation
//! protocol in `src/host/generations.rs`, the registry in `src/load/registry.rs`. Each is
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
//!   files while its instance lives.
//!
//! # Mapping the checked descriptor
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
//!   it (through `/proc/self/maps`). Under `Strict` such a library is refused in a sticky
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
//! # How `acquire()` finds the current set: the slot protocol
//!
//! Each host keeps its current set in a slot that holds it only weakly
//! (`arc_swap::ArcSwapWeak<PluginSet>`); a [`Lease`](crate::Lease) is an
//! `std::sync::Arc<PluginSet>` in a newtype and a [`WeakLease`](crate::WeakLease) a `Weak`.
//! The host also publishes the number of its current generation. `acquire()` tries three
//! paths, cheapest first:
//!
//! 1. **The cached fast path**: no lock, no allocation. Each thread keeps a small cache
//!    mapping a host's id to `(generation, Weak<PluginSet>)`. If the entry's generation is
//!    the host's current one (one Acquire load) and its `Weak` upgrades (one compare-and-swap
//!    that never increments from zero), that is the lease. The generation check is what
//!    keeps an older generation whose `Weak` still upgrades (a set still in use elsewhere) from
//!    being handed out as current.
//! 2. **The slot path**: upgrade the slot's `Weak` and refresh this thread's cache entry.
//! 3. **The slow path**, under the host's lock: upgrade again (another thread may have
//!    loaded meanwhile); wait while another thread loads or the previous generation is still
//!    unloading (I1); then mark the host as loading, release the lock, load generation
//!    *n* + 1 with this thread marked as inside this host (I4), and publish it: the slot's
//!    `Weak` first, then the generation number, so a thread that sees the new number finds
//!    the new set in the slot.
//!
//! The cache holds `Weak`s only, so it never keeps plugins loaded (I3). Host ids come from a
//! process-wide counter and are never reused (an address is, after a host is dropped, and a
//! stale entry would then hand out another host's set). The cache has eight entries (eight
//! hosts used in turn all stay cached) and replaces them in turn. A thread whose thread-locals
//! are being destroyed (a lease dropped or acquired from a thread-local destructor) skips it
//! and takes the slot path.
//!
//! Two rules keep the protocol deadlock-free: a strong reference is never dropped while the
//! host's or the registry's lock is held (its drop may be the last, which takes the same
//! lock), and a panic in plugin teardown poisons nothing (the locks ignore poisoning, and a
//! generation is marked unloaded from a drop guard, however its teardown ended).
//!
//! The cost of each path, against an `Arc` clone and drop and with one or two threads, and
//! of a cold load of real plugins against raw `libloading`, is measured by the criterion
//! benches in `benches/`; `BENCHMARKS.md` in the repository has the ratios and how to
//! reproduce them.
