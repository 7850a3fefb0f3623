//! Reloading, unload policies and watching: new plugin code without a restart.
//!
//! A long-running process gets new plugin code without a restart, and nothing in flight
//! breaks: a session that holds a lease keeps calling the code it started with, new acquirers
//! get the new code, and the old generation unloads when its last lease drops ("draining").
//! [`recipes`](super::recipes#reloading-while-a-session-holds-a-lease-and-keeping-a-set-through-churn)
//! runs the same story with static plugins, as a doctest.
//!
//! ```no_run
//! use std::time::Duration;
//! use dylease::{PluginHost, UnloadPolicy};
//!
//! fn main() -> Result<(), dylease::Error> {
//!     // SAFETY: loading a plugin runs its code; this directory holds our own plugins.
//!     let host = unsafe { PluginHost::builder().dir("/opt/app/plugins") }
//!         .unload(UnloadPolicy::After(Duration::from_secs(2))) // keep the set through churn
//!         // With the crate feature `watch`: `.watch(Duration::from_millis(500))` reloads on changes.
//!         .build()?;
//!
//!     let session = host.acquire()?;          // generation 1
//!     // … `dylease install build/libfuse.so /opt/app/plugins` (a new file, by rename) …
//!     let fresh = host.reload()?;             // generation 2: the new code, loaded now
//!     assert_eq!((session.generation(), fresh.generation()), (1, 2));
//!     assert_eq!(host.acquire()?.generation(), 2); // new acquirers share generation 2
//!     drop(session);                          // generation 1 unloads here
//!     drop(fresh);                            // generation 2 stays for 2 s of quiet
//!     Ok(())
//! }
//! ```
//!
//! # Reload
//!
//! [`host.reload()`](crate::PluginHost::reload) loads the sources as they are now into a new
//! generation and makes it the one `acquire()` returns, even while a set is loaded;
//! [`lease.generation()`](crate::PluginSet::generation) tells the generations apart. A failed
//! reload returns the error and leaves the current generation current, with nothing new
//! loaded. Concurrent reloads (and loads) run one after the other; `acquire()` of a loaded set
//! stays lock-free throughout. [`reload_timeout(d)`](crate::PluginHost::reload_timeout)
//! bounds its waits for other threads (another load, an unload of a file it needs) with
//! [`Error::TimedOut`](crate::Error::TimedOut) ([`api`](super::api#waits-and-the-two-ways-to-bound-them)
//! says when to use which).
//!
//! A library file that changed since its live instance was opened (a new inode) is mapped
//! beside the draining old one, from its own file: no private copy, nothing written anywhere.
//! An unchanged file keeps sharing its live instance (its `on_load` does not run again). This
//! rests on the file-identity guarantee: the loader maps the descriptor the checks read
//! ([`trust`](super::trust#the-file-that-runs-is-the-file-that-was-checked)).
//!
//! # Descriptors
//!
//! Each loaded library instance keeps one file descriptor open (two for a library whose run
//! path uses `$ORIGIN`, which is mapped through its directory's descriptor), because the
//! loader remembers the name it was given and would match a reused descriptor number to the
//! old library. A library the platform never unloads (pinned) keeps its descriptor for the
//! life of the process, and is opened again under that name (reloading a pinned plugin costs
//! no further descriptor). A process loading more libraries than `ulimit -n` allows gets an
//! error that says `EMFILE` and to raise the limit.
//!
//! # Installing
//!
//! A file replaced in a directory that passed the trust check was replaced by this user or
//! root, so a host that finds the file changed between its check and its open checks the new
//! file and loads it (or refuses it with [`Error::Untrusted`](crate::Error::Untrusted) if
//! *it* fails): installing never makes a load fail. Install by rename so that a host sees the
//! old file or the new one whole: `dylease install FILE... DIR` ([`cli`](super::cli)) writes
//! each file under a temporary name inside DIR, flushes it, checks it as `dylease check`
//! does, and renames it into place only if it would load. Python plugins too (built with
//! `python`): a `.py` file or a package is copied into a hidden temporary directory inside
//! DIR, checked as `python_file` loads it, and renamed into place; a package that replaces an
//! installed one is exchanged with it in one step (`renameat2(RENAME_EXCHANGE)`, Linux) and
//! the old tree removed. GNU `install` is not atomic (it removes the old file, then creates
//! and writes the new one under its final name): a host loading meanwhile finds no file, or
//! half of one.
//!
//! A plugin that finds its own file through `dladdr` gets the loader's name for it,
//! `/proc/self/fd/N`: resolve it with `realpath` (or `readlink`) while the library is loaded.
//!
//! # Unload policies
//!
//! [`UnloadPolicy`](crate::UnloadPolicy) (per host, [`HostBuilder::unload`](crate::HostBuilder::unload)):
//!
//! - [`Immediately`](crate::UnloadPolicy::Immediately) (the default) unloads in the drop of
//!   the last user lease.
//! - [`After(d)`](crate::UnloadPolicy::After) keeps the newest set until no user lease has
//!   existed for `d` (the host holds one lease of its own, and dropping it unloads). Under
//!   `After`, 200 single-op compiles load once instead of 200 times. The unload runs on the
//!   host's `dylease-keeper` thread: the plugins' `on_unload` and `dlclose` run there, not on a
//!   thread of yours.
//! - [`WithHost`](crate::UnloadPolicy::WithHost) keeps it until the host is dropped.
//!
//! [`host.stats()`](crate::PluginHost::stats) shows the policy and when the set will unload.
//!
//! # Watching
//!
//! `HostBuilder::watch(debounce)` (crate feature `watch`, with the `notify` crate) reloads
//! when a watched directory or file changes and then `debounce` passes without a further
//! change; it logs each reload (`info`) and each failure (`warn`, with the error). It watches
//! each `dir`, the directory of each `file`, and the directories an `env` variable lists when
//! the host is built (a later change of the variable is not watched). A half-written file is
//! not loaded: the debounce waits for writing to pause, and a library still incomplete then
//! fails the ELF check, so the current generation stays. A path through symlinks
//! (`plugins -> releases/v7`) is watched where it leads, and so is each link on the way:
//! swapping the link reloads from the new target and moves the watches. The watcher ends when
//! the host is dropped; a reload still in progress then is waited for at most 2 s (logged when
//! given up). Under `Immediately` with no lease alive, a watched reload's set unloads at once
//! (the build warns once): pair `watch` with `After` or `WithHost`. Python sources are not
//! watched.
//!
//! # After `fork`
//!
//! After `fork()` the child's copies of dylease's locks (and the loader's) may be held by
//! threads that exist only in the parent: leases the child inherited keep working, and their
//! last drop there unloads nothing, but any load in the child fails at once with
//! [`Error::Forked`](crate::Error::Forked) instead of hanging. `exec` to load plugins in a
//! new process.
//!
//! # Limits of reloading
//!
//! - A plugin's global state is per library instance: a v1 and a v2 generation alive together
//!   are two instances, and do not share their statics. State that must survive a reload
//!   belongs to the host, handed to the plugin through its passes.
//! - A change is seen as a new file (a new inode): install by rename (`dylease install`, or
//!   `cp` beside then `mv`). A file edited in place keeps its inode, so a reload shares the
//!   old instance; and writing into a mapped library crashes the platform loader anyway.
//! - `After(d)`'s keeper thread looks every eighth of `d` (between 1 ms and 250 ms): a user
//!   lease that lives shorter than that between two looks may go unseen, so the set may
//!   unload up to that much earlier than `d` after its last use.
//! - A pinned library ([`writing_plugins`](super::writing_plugins#why-the-version-script-what-keeps-a-library-mapped))
//!   keeps its statics, and every reload of a changed file adds a mapping.
