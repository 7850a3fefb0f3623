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
//! refused with [`Error::MissingEntry`](crate::Error::MissingEntry) naming the file: the
//! entry point's address must lie in one of the file's own loadable segments (read by the ELF
//! check from the checked descriptor, at the address the loader mapped it), and on glibc
//! the message also names the library it came from (`dladdr1`). Then the descriptor is checked and
//! the plugin's `on_load` runs.
//!
//! # Once per instance, once per set
//!
//! | Once per instance (shared by every host) | Once per set (one generation of one host) |
//! | --- | --- |
//! | the library's constructors and destructors, as the platform runs them | the plugin's `register_passes`, into this set's own pass table |
//! | `on_load` (ABI v2): after the open, before the instance's first `register_passes`; non-zero fails the load ([`Error::OnLoadFailed`](crate::Error::OnLoadFailed), naming the file) with no `register_passes` and no `on_unload` | a static plugin's register function and its [`on_unload`](crate::StaticRegistrar::on_unload) hooks: static plugins belong to the host built with them |
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
//! # Dependencies
//!
//! The libraries a plugin needs are library instances too. Under the default
//! [`TrustPolicy::Strict`](crate::TrustPolicy::Strict), dylease resolves a plugin's whole
//! dependency closure before any of its code runs, in glibc's order, and maps itself every
//! library found in a run path, from the descriptor it checked, dependencies first: the loader
//! then finds each needed name already loaded and searches for nothing. Such a dependency is
//! shared process-wide by identity like a plugin (one mapping per file, whatever plugin, set or
//! host needs it), holds two descriptors while mapped (its file and its directory), and is
//! closed after the last plugin that needs it, dependents first. A needed name another loaded
//! object already answers is shared when that object is the checked file, and refused when it
//! is not.
//!
//! What `Strict` covers, each a refusal naming the plugin, the entry and the fix:
//!
//! - `DT_NEEDED`, `DT_AUXILIARY` and `DT_FILTER`, and theirs, searched through `DT_RPATH` (when
//!   there is no `DT_RUNPATH`, the plugin's and its loaders'), `LD_LIBRARY_PATH` and
//!   `DT_RUNPATH`; `$ORIGIN` is the directory a library's name was found in (not a symlink's
//!   target), `$LIB` and `$PLATFORM` take every value the loader may give them;
//! - every run-path directory, and the `glibc-hwcaps`, `tls` and platform subdirectories below
//!   it, lets nobody but this user and root create names in it, sticky or not (a missing one:
//!   its nearest existing ancestor): a stale build-tree entry such as `/tmp/build/lib` is
//!   refused, naming the plugin, the entry and the directory, with a `$ORIGIN`-relative fix;
//!   a relative run-path entry is refused;
//! - each library found in a run path passes the plugin file's own checks (owner, mode, every
//!   directory on the way, ELF structure) and has the soname it is needed by (else the fix is
//!   `-Wl,-soname,NAME`);
//! - refused because dylease cannot map it for the loader: a needed name holding `/` or `$`, a
//!   cycle, `DT_AUDIT` and `DT_DEPAUDIT`, a name found twice below one run-path directory, an
//!   under-linked dependency (`-Wl,-z,defs`), and, on musl (which matches needed names by
//!   path), any dependency found in a run path;
//! - refused because the check could not judge it: more than 512 libraries, a file or directory
//!   that cannot be opened, listed or read. Out of file descriptors (`EMFILE`, `ENFILE`) at any
//!   step, the plugin is not loaded either, but the error is a resource error naming the
//!   limit ([`OpenCause::Descriptors`](crate::OpenCause::Descriptors)), not a refusal.
//!
//! What stays outside it, the process owner's choice (whoever sets them can run code in the
//! process anyway): names found through `LD_LIBRARY_PATH` (ignored under secure execution) and
//! `LD_PRELOAD`, which glibc maps itself; `/etc/ld.so.cache` and the system's default
//! directories; and the modules and C extensions a Python plugin imports through `sys.path`.
//! Not checked either: access control lists, and a file rewritten in place while it loads
//! (install by rename, see [`trust`](super::trust#install-plugins-by-rename-never-in-place)).
//! [`TrustPolicy::Permissive`](crate::TrustPolicy::Permissive) leaves every search to the
//! loader.
//!
//! Each mapped dependency keeps two descriptors open (its file and its directory) while it is
//! mapped: set `ulimit -n` above twice the number of libraries the process maps.
//!
//! # How it is built
//!
//! The invariants that the sharing and the host's generations keep (I1–I9), the slot protocol
//! behind a lock-free [`PluginHost::acquire`](crate::PluginHost::acquire), the registry's
//! protocol, how the loader is made to map the file that was checked, and the platform facts
//! they rest on are written once, for maintainers, in [`docs::internals`](crate::docs::internals).
