//! Observability: what a host logs, what [`PluginHost::stats`](crate::PluginHost::stats)
//! reports, and waiting for an orderly unload.
//!
//! # Logging
//!
//! dylease logs through the [`log`](https://docs.rs/log) facade and installs no logger:
//!
//! | Level | Event |
//! | --- | --- |
//! | info | a host's first load, and its last unload (after the host was dropped): plugins, passes, duration, failures skipped, libraries pinned |
//! | debug | every other generation loaded or unloaded; each plugin loaded: its file or static name, its name, its pass count |
//! | warn | a plugin or pass skipped under `LoadPolicy::SkipFailed` (once per host and cause; repeats at `debug`); a library still loaded after its unload (once per mapping, with its cause and fix); a failed `dlclose`; a failed watched reload |
//! | error | an unload hook that panicked, naming its plugin |
//!
//! Every line about a host begins with its name in brackets:
//! [`HostBuilder::name("graph-session")`](crate::HostBuilder::name) (by default `host-N`),
//! also [`Stats::name`](crate::Stats::name), so two components' hosts over one directory are
//! told apart.
//!
//! # Statistics
//!
//! [`host.stats()`](crate::PluginHost::stats) returns what the host observed: whether a set
//! is loaded, its generation, live leases, plugins, passes, loads, unloads, pinned libraries
//! ([`Stats::pinned_libraries`](crate::Stats::pinned_libraries)), the unload policy and when
//! the set will unload under it, and how long the last load and unload took. It takes no
//! lease, and nothing in it decides when to unload.
//!
//! # Waiting for the unload
//!
//! [`host.wait_unloaded(timeout)`](crate::PluginHost::wait_unloaded) blocks until no set is
//! loaded, forcing nothing: for an orderly shutdown, say before finalising an interpreter the
//! plugins use ([`recipes`](super::recipes#orderly-process-shutdown)).
//!
//! ```
//! use std::time::Duration;
//!
//! fn shutdown(host: &dylease::PluginHost) {
//!     let stats = host.stats();
//!     println!("{} loads, {} unloads, {} leases held", stats.loads, stats.unloads, stats.live_leases);
//!     if !host.wait_unloaded(Duration::from_secs(5)) {
//!         eprintln!("plugins still in use after 5 s");
//!     }
//! }
//! # let host = dylease::PluginHost::builder().static_plugin("p", |_| Ok(())).build()?;
//! # drop(host.acquire()?);
//! # shutdown(&host);
//! # Ok::<(), dylease::Error>(())
//! ```
//!
//! To see why a plugin does not load, `dylease check` ([`cli`](super::cli)) loads it as a host
//! would and prints the cause and the fix.
