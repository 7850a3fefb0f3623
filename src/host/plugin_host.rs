//! [`PluginHost`]: a host's configuration as every load reads it, and its generations.

use std::fmt;
use std::ops::ControlFlow;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::{Error, WithSources};
use crate::host::generations::Generations;
use crate::host::lease::Lease;
use crate::host::policy::UnloadPolicy;
use crate::host::stats::Stats;
use crate::host::watch::{self, Watch};
use crate::load::{CatalogEntry, LoadPolicy, LoadedPlugins, Source};
use crate::log_scope::count;
use crate::sync::{Arc, Weak};
use crate::trust::TrustPolicy;

/// A set of plugin sources and the slot through which their loaded set is shared.
///
/// Every [`acquire`](PluginHost::acquire) returns a [`Lease`] of the one loaded set, loading
/// it first if no lease of it is alive. There is no `unload`: the set unloads when its last
/// lease is dropped. A host is `Send + Sync`; share it by reference (for example from a
/// `static`, as [`global`](crate::global) does) or in an `Arc`.
///
/// Hosts are independent, but the libraries they load are not: two hosts (in two components
/// of one program, say) that load the same library share one instance of it, process-wide.
/// Its `on_load` runs once, its `on_unload` once after the last set of any host that uses it
/// is gone, and each host's sets register its passes afresh.
///
/// # Example
///
/// ```no_run
/// // SAFETY: /opt/app/plugins and the directories in MYAPP_PLUGIN_PATH hold this
/// // application's own plugins, whose code is sound.
/// let host = unsafe {
///     dylease::PluginHost::builder()
///         .dir("/opt/app/plugins")
///         .env("MYAPP_PLUGIN_PATH")
/// }
/// .build()?;
/// let lease = host.acquire()?;
/// for plugin in lease.plugins() {
///     println!("{} {}", plugin.name(), plugin.version());
/// }
/// # Ok::<(), dylease::Error>(())
/// ```
pub struct PluginHost {
    pub(super) config: Arc<LoadConfig>,
    pub(super) generations: Arc<Generations>,
    /// The watcher of [`HostBuilder::watch`](crate::HostBuilder::watch); it holds `config`
    /// weakly, so it ends with the host.
    pub(super) watch: Option<Watch>,
}

/// What every load of a host reads.
#[derive(Debug)]
pub(super) struct LoadConfig {
    pub(super) sources: Box<[Source]>,
    pub(super) policy: LoadPolicy,
    pub(super) trust: TrustPolicy,
    /// [`HostBuilder::require_signed`](crate::HostBuilder::require_signed).
    pub(super) signatures: Option<Arc<crate::trust::Verifier>>,
    /// [`HostBuilder::on_demand`](crate::HostBuilder::on_demand): how the load judges a
    /// plugin file for an on-demand set.
    pub(super) on_demand: Option<crate::load::Defer>,
    /// [`HostBuilder::map_timeout`](crate::HostBuilder::map_timeout).
    pub(crate) map_timeout: Duration,
    /// [`HostBuilder::isolated`](crate::HostBuilder::isolated) and its options (crate
    /// feature `isolate`).
    #[cfg(feature = "isolate")]
    pub(super) isolation: Option<crate::isolate::Isolation>,
}

impl LoadConfig {
    /// Runs the load pipeline over every source, under the host's policies. On failure
    /// everything registered so far is unloaded before the error is returned.
    ///
    /// An isolated host's plugin files are loaded into a worker process (`isolate`), which
    /// the set holds once the load succeeded; a failed load ends it.
    pub(super) fn load(&self, deadline: Option<Instant>) -> Result<LoadedPlugins, Error> {
        #[cfg(feature = "isolate")]
        let mut isolating = self.isolation.as_ref().map(|isolation| (isolation.begin)(isolation));
        #[cfg(feature = "isolate")]
        let isolate = isolating.as_mut().map(|isolating| isolating.isolate());
        #[cfg(not(feature = "isolate"))]
        let isolate = None;
        let mut set = crate::load::load(
            &self.sources,
            (self.policy, self.trust, self.signatures.as_ref()),
            self.on_demand,
            isolate,
            deadline,
        )?;
        set.map_timeout = self.map_timeout;
        #[cfg(feature = "isolate")]
        if let Some(isolating) = isolating {
            isolating.finish(&mut set);
        }
        Ok(set)
    }
}

impl Drop for PluginHost {
    /// Drops the host's own lease (under [`UnloadPolicy::After`] and
    /// [`UnloadPolicy::WithHost`]), which unloads the set here unless a user still holds one.
    fn drop(&mut self) {
        // The watcher first: no reload starts once the host's own lease is gone.
        self.watch = None;
        self.generations.stats.host_dropped();
        self.generations.stop_keeping();
    }
}

// A panic that unwinds out of `acquire` (from a logger, say) leaves the host consistent: its
// lock does not poison, a failed or interrupted load is undone, and its counters are written
// under the lock or atomically. So a host may be used across `catch_unwind`.
impl std::panic::UnwindSafe for PluginHost {}
impl std::panic::RefUnwindSafe for PluginHost {}

impl fmt::Debug for PluginHost {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginHost")
            .field("sources", &self.config.sources)
            .field("policy", &self.config.policy)
            .field("trust", &self.config.trust)
            .field("generation", &self.generation())
            .field("loaded", &self.is_loaded())
            .finish()
    }
}

impl PluginHost {
    /// A lease of this host's plugin set, loading the set if no lease of it is alive.
    ///
    /// The fast path, taken while any lease is alive, takes no lock: one compare-and-swap on
    /// the set's lease count. Otherwise the calling thread takes the host's lock, waits for
    /// a set that is still unloading to finish (so a library is never reopened before its
    /// previous unload completed), and loads a new generation. Concurrent callers wait for
    /// that load and share its result.
    ///
    /// # Errors
    ///
    /// Any [`Error`] of discovery or loading, naming the file and the cause. A failed load
    /// has closed every library it opened and left the host as it was: the next call tries
    /// again. [`Error::Reentrant`] if called from inside this host's own load or unload on the
    /// same thread.
    pub fn acquire(&self) -> Result<Lease, Error> {
        Generations::acquire(&self.generations, None, |deadline| self.load(deadline)).map(Lease)
    }

    /// As [`acquire`](PluginHost::acquire), but gives up waiting for other threads after
    /// `timeout`: for another thread's load of this host, for this host's previous set to
    /// finish unloading, and for a library file another host is unloading. A load this call
    /// started itself runs to its end.
    ///
    /// Plugin code that hands `acquire()` to another thread and joins it deadlocks (the
    /// nested call's check is per thread; see "Limits" in [`docs::api`](crate::docs::api)): a bound turns that into
    /// an error instead of a hang.
    ///
    /// # Errors
    ///
    /// As [`acquire`](PluginHost::acquire), and [`Error::TimedOut`] naming what it waited for.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let host = dylease::PluginHost::builder()
    ///     .static_plugin("builtin", |_reg| Ok(()))
    ///     .build()?;
    /// let lease = host.acquire_timeout(Duration::from_secs(5))?;
    /// assert_eq!(lease.generation(), 1);
    /// # Ok::<(), dylease::Error>(())
    /// ```
    pub fn acquire_timeout(&self, timeout: Duration) -> Result<Lease, Error> {
        let deadline = Instant::now().checked_add(timeout);
        Generations::acquire(&self.generations, deadline, |deadline| self.load(deadline)).map(Lease)
    }

    /// Loads the sources as they are now into a new generation and makes it the one
    /// [`acquire`](PluginHost::acquire) returns, even if a set is loaded; returns a lease of
    /// it. Older generations keep serving the leases their users hold (tell them apart with
    /// [`PluginSet::generation`](crate::PluginSet::generation)) and unload when their last lease drops.
    ///
    /// A library file that changed since the instance still loaded from it was opened (a new
    /// file installed by rename) is loaded beside the old mapping: the loader maps the file
    /// the checks read, by its descriptor, so it cannot hand back the old mapping under the
    /// same name. An unchanged file keeps sharing its live instance. Concurrent reloads, and
    /// loads by [`acquire`](PluginHost::acquire), run one after the other; `acquire()` of a
    /// loaded set stays lock-free throughout.
    ///
    /// # Errors
    ///
    /// As [`acquire`](PluginHost::acquire). A failed reload leaves the current generation
    /// current, and nothing new loaded.
    ///
    /// # Example
    ///
    /// ```
    /// let host = dylease::PluginHost::builder()
    ///     .static_plugin("builtin", |_reg| Ok(()))
    ///     .build()?;
    /// let session = host.acquire()?;
    /// let fresh = host.reload()?;
    /// assert_eq!((session.generation(), fresh.generation()), (1, 2));
    /// assert_eq!(host.acquire()?.generation(), 2);
    /// drop(session); // generation 1 unloads here; generation 2 stays
    /// # Ok::<(), dylease::Error>(())
    /// ```
    pub fn reload(&self) -> Result<Lease, Error> {
        Generations::reload(&self.generations, None, |deadline| self.load(deadline)).map(Lease)
    }

    /// [`reload`](PluginHost::reload), waiting at most `timeout` for other threads: another
    /// load or reload of this host to finish, and an unload of a file it needs (a slow
    /// `on_unload` of another host's instance, say).
    ///
    /// # Errors
    ///
    /// As [`reload`](PluginHost::reload), and [`Error::TimedOut`] naming what it waited for;
    /// the current generation then stays current. The timeout bounds waits, not plugin code
    /// this thread runs itself (constructors, `on_load`, register functions).
    pub fn reload_timeout(&self, timeout: Duration) -> Result<Lease, Error> {
        let deadline = Instant::now().checked_add(timeout);
        Generations::reload(&self.generations, deadline, |deadline| self.load(deadline)).map(Lease)
    }

    /// The host's unload policy.
    pub fn unload_policy(&self) -> UnloadPolicy {
        self.generations.policy()
    }

    /// Loads the sources under the host's policies ([`LoadConfig::load`]).
    pub(super) fn load(&self, deadline: Option<Instant>) -> Result<LoadedPlugins, Error> {
        crate::log_scope::with_host(self.generations.stats.name(), || self.config.load(deadline))
    }

    /// Every plugin this host would load, with what its file declares (its [`Manifest`]),
    /// why a load would refuse it before running its code (the trust check, the ELF check,
    /// a declared ABI version the host does not speak) and its pin prediction — judged from
    /// the files alone: **no plugin code runs** (no library is mapped, no Python module
    /// executed) and no lease is taken. Plugins come in load order; a static plugin appears
    /// with its name and no manifest.
    ///
    /// Use it to list, select or describe plugins, or to vet files before a load. A plugin
    /// without a manifest can be described only by loading it. What a load would do after
    /// its checks (the constructors, `on_load`, `register_passes`) is not judged.
    ///
    /// # Errors
    ///
    /// [`Error::Config`] if an environment variable source names something unusable (as a
    /// load would fail). A directory or file that cannot be read is an entry whose
    /// [`refusal`](CatalogEntry::refusal) says why, as is every refusal of one plugin.
    ///
    /// # Example
    ///
    /// ```no_run
    /// // SAFETY: the directory holds the compiler's own passes, whose initialisation code is
    /// // sound (`catalog` runs none of it; a later `acquire` would).
    /// let host = unsafe { dylease::PluginHost::builder().dir("/opt/compiler/passes") }.build()?;
    /// for plugin in host.catalog()? {
    ///     match (plugin.refusal(), plugin.manifest()) {
    ///         (Some(refusal), _) => println!("{}: {refusal}", plugin.origin()),
    ///         (None, Some(manifest)) => {
    ///             let passes: Vec<_> = manifest.passes().iter().map(|p| p.name.as_str()).collect();
    ///             println!("{} {}: {}", manifest.name(), manifest.version(), passes.join(", "));
    ///         }
    ///         (None, None) => println!("{}: no manifest (load it to know more)", plugin.origin()),
    ///     }
    /// }
    /// # Ok::<(), dylease::Error>(())
    /// ```
    ///
    /// [`Manifest`]: crate::Manifest
    pub fn catalog(&self) -> Result<Vec<CatalogEntry>, Error> {
        crate::load::catalog(&self.config.sources, self.config.trust, self.config.signatures.as_ref())
    }

    /// Whether a set of this host is loaded (or still unloading). Observes, decides nothing.
    pub fn is_loaded(&self) -> bool {
        self.generations.is_loaded()
    }

    /// The number of successful loads so far: the generation of the newest set.
    pub fn generation(&self) -> u64 {
        self.generations.generation()
    }

    /// What this host observed so far: whether a set is loaded, its generation, leases,
    /// plugins and passes, how many loads and unloads happened, how many libraries stayed
    /// pinned after an unload, and how long the last load and unload took.
    ///
    /// Takes no lease and decides nothing; the numbers may be stale as soon as they are read.
    /// See [`Stats`] for an example.
    pub fn stats(&self) -> Stats {
        let generations = &self.generations;
        generations.stats.snapshot(
            (self.is_loaded(), self.generation(), generations.live_leases()),
            (generations.policy(), generations.unloads_at()),
        )
    }

    /// Blocks until no set of this host is loaded, or until `timeout` has passed: `true` if
    /// none is loaded (at once if none was), `false` on timeout. Forces nothing: it waits for
    /// the holders of leases to drop them, for example so that a process can shut down in
    /// order before finalising something the plugins use. A new `acquire()` may load a set
    /// again right after it returns.
    ///
    /// A load in progress on another thread finishes before this looks, so the wait may
    /// exceed `timeout` by that load's duration. Called from inside this host's own load or
    /// unload on the same thread, it returns `false` at once (it would wait for itself); a
    /// thread that holds a lease of this host waits for itself until the timeout.
    ///
    /// Under [`UnloadPolicy::After`] the wait includes the host's own idle time; under
    /// [`UnloadPolicy::WithHost`] a set stays loaded while the host exists, so this waits out
    /// its timeout.
    ///
    /// # Example
    ///
    /// ```
    /// use std::time::Duration;
    ///
    /// let host = dylease::PluginHost::builder()
    ///     .static_plugin("builtin", |_reg| Ok(()))
    ///     .build()?;
    /// let lease = host.acquire()?;
    /// assert!(!host.wait_unloaded(Duration::from_millis(10)), "a lease is still held");
    /// std::thread::spawn(move || drop(lease));
    /// assert!(host.wait_unloaded(Duration::from_secs(60)));
    /// # Ok::<(), dylease::Error>(())
    /// ```
    pub fn wait_unloaded(&self, timeout: Duration) -> bool {
        self.generations.wait_unloaded(Instant::now().checked_add(timeout))
    }

    /// The host's load policy.
    pub fn policy(&self) -> LoadPolicy {
        self.config.policy
    }

    /// The host's trust policy.
    pub fn trust(&self) -> TrustPolicy {
        self.config.trust
    }
}

/// The watcher's side of the host ([`HostBuilder::watch`](crate::HostBuilder::watch)).
impl PluginHost {
    /// This host, watching its sources: the last step of a build with a debounce. Its
    /// watcher holds the host's configuration and generations only weakly, upgrading them
    /// for each reload, so it never keeps the host alive.
    pub(super) fn watched(mut self, debounce: Duration) -> Result<PluginHost, Error> {
        let config = Arc::downgrade(&self.config);
        let generations = Arc::downgrade(&self.generations);
        let reload = move |changed: &Path| reload_watched(&config, &generations, changed);
        self.watch = watch::start(&self.config.sources, self.generations.stats.name(), debounce, reload)?;
        // Only once a watcher runs: with nothing to watch there is nothing to warn about.
        if self.watch.is_some() && self.generations.policy() == UnloadPolicy::Immediately {
            log::warn!(
                "watching plugin sources under UnloadPolicy::Immediately: a reload while no lease is held \
                 loads the new set and unloads it at once, and only the next acquire() loads it to stay; use \
                 UnloadPolicy::After or WithHost to keep the reloaded set loaded"
            );
        }
        Ok(self)
    }
}

/// The watcher's reload after a change of `changed`, logged; [`ControlFlow::Break`] once the
/// host is gone. The new set's lease is dropped here, outside every lock (it may be its last
/// under `UnloadPolicy::Immediately`), and so are the upgraded references: between reloads the
/// watcher keeps nothing of the host alive.
fn reload_watched(config: &Weak<LoadConfig>, generations: &Weak<Generations>, changed: &Path) -> ControlFlow<()> {
    let (Some(config), Some(generations)) = (config.upgrade(), generations.upgrade()) else {
        return ControlFlow::Break(());
    };
    let name = generations.stats.name();
    let load = |deadline| crate::log_scope::with_host(name, || config.load(deadline));
    match Generations::reload(&generations, None, load) {
        Ok(set) => log::info!(
            "[{name}] reloaded plugins after a change of `{}`: generation {}, {}",
            changed.display(),
            set.generation(),
            count(set.plugins().len(), "plugin", "plugins"),
        ),
        Err(error) if generations.is_loaded() => log::warn!(
            "[{name}] reloading plugins after a change of `{}` failed; generation {} stays current: {}",
            changed.display(),
            generations.generation(),
            WithSources(&error),
        ),
        Err(error) => log::warn!(
            "reloading plugins after a change of `{}` failed, and no set is loaded (the next acquire() \
             tries again): {}",
            changed.display(),
            WithSources(&error),
        ),
    }
    ControlFlow::Continue(())
}
