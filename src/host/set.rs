//! One generation of loaded plugins and their passes.

use std::fmt;
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::host::reentry::inside_host;
use crate::load::{LoadFailure, LoadedPlugins, PassInfo, PluginInfo};

/// One generation of loaded plugins: what every [`Lease`](crate::Lease) of it derefs to.
///
/// What a set offers is fixed at load: its plugin and pass lists, their names, interfaces
/// and order never change. What may change, in an on-demand set
/// ([`HostBuilder::on_demand`](crate::HostBuilder::on_demand)), is only whether a declared
/// plugin is mapped: the first use of one of its passes maps it, once, and it stays mapped
/// until the set unloads. A set unloads when the last lease of it is dropped: each mapped
/// plugin's unload code runs in reverse load order (for on-demand plugins, the order they
/// were mapped in), then each library is closed in reverse load order, then the generation is
/// marked unloaded, all before that last drop returns.
pub struct PluginSet {
    generation: u64,
    contents: LoadedPlugins,
    host: Box<dyn Teardown>,
}

/// What a set's teardown needs of the host that loaded it, which may be gone by then: the
/// host's generations implement it (on a strong reference, which keeps them alive as long as
/// the set) and hand it to each set they make.
pub(crate) trait Teardown: Send + Sync {
    /// The host's id, the key of the re-entrancy marks.
    fn host_id(&self) -> u64;
    /// The host's name, which begins its log lines.
    fn host_name(&self) -> &str;
    /// Whether this is a `fork()`ed child of the process that made the host.
    fn forked(&self) -> bool;
    /// Records the unload of `set`, which took `took` and left `pinned` libraries mapped.
    fn record_unload(&self, set: &PluginSet, took: Duration, pinned: usize);
    /// Generation `generation` finished unloading, however its teardown ended.
    fn mark_unloaded(&self, generation: u64);
}

impl fmt::Debug for PluginSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginSet")
            .field("generation", &self.generation)
            .field("plugins", &self.contents.plugins())
            .field("passes", &self.passes().iter().map(PassInfo::name).collect::<Vec<_>>())
            .field("failures", &self.failures().len())
            .finish()
    }
}

impl PluginSet {
    /// Which load of its host this set is: 1 for the first successful load, 2 for the next
    /// load or [`reload`](crate::PluginHost::reload), and so on.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The set's plugins, in load order: in an on-demand set, also those not mapped yet
    /// (from their manifests; see [`PluginInfo::is_mapped`]).
    #[inline]
    pub fn plugins(&self) -> &[PluginInfo] {
        self.contents.plugins()
    }

    /// Every pass, in registration order (plugins in load order; a plugin not mapped yet in
    /// an on-demand set lists the passes its manifest declares, in its manifest's order).
    /// Listing them maps nothing.
    #[inline]
    pub fn passes(&self) -> &[PassInfo] {
        self.contents.passes()
    }

    /// The pass registered (or, by a plugin not mapped yet, declared) under `name`, if any.
    /// One hash lookup, no allocation; maps nothing.
    pub fn pass_info(&self, name: &str) -> Option<&PassInfo> {
        self.contents.pass_position(name).map(|i| &self.passes()[i])
    }

    /// The position of the pass registered under `name` in [`PluginSet::passes`].
    #[inline]
    pub(crate) fn pass_position(&self, name: &str) -> Option<usize> {
        self.contents.pass_position(name)
    }

    /// The positions in [`PluginSet::passes`] of the passes registered under `interface`, in
    /// the order [`Lease::passes_of`](crate::Lease::passes_of) documents.
    #[inline]
    pub(crate) fn passes_of_interface(&self, interface: &str) -> &[usize] {
        self.contents.passes_of(interface)
    }

    /// What went wrong in this set's load and was skipped under
    /// [`LoadPolicy::SkipFailed`](crate::LoadPolicy::SkipFailed): plugins that were left out,
    /// and passes left out because an earlier plugin had registered their name. In load order;
    /// always empty under the default [`LoadPolicy::Strict`](crate::LoadPolicy::Strict).
    ///
    /// # Example
    ///
    /// ```
    /// use dylease::{LoadPolicy, PluginHost};
    ///
    /// let host = PluginHost::builder()
    ///     .static_plugin("broken", |_reg| Err(dylease::RegisterError::custom("no GPU")))
    ///     .static_plugin("fine", |_reg| Ok(()))
    ///     .policy(LoadPolicy::SkipFailed)
    ///     .build()?;
    /// let lease = host.acquire()?;
    /// assert_eq!(lease.plugins().len(), 1);
    /// for failure in lease.failures() {
    ///     eprintln!("skipped: {failure}"); // static plugin `broken` failed to register its passes: no GPU
    /// }
    /// # Ok::<(), dylease::Error>(())
    /// ```
    pub fn failures(&self) -> &[LoadFailure] {
        self.contents.failures()
    }
}

impl PluginSet {
    /// The set of generation `generation` of `host`. Construct it only where it goes straight
    /// into the host's slot, whose last lease is dropped outside the host's lock (that drop
    /// takes the lock).
    pub(crate) fn new(generation: u64, contents: LoadedPlugins, host: Box<dyn Teardown>) -> Self {
        PluginSet {
            generation,
            contents,
            host,
        }
    }

    /// Makes plugin `plugin` (an index into [`PluginSet::plugins`]) mapped, mapping an
    /// on-demand plugin on its first use (`load::demand`): inside this host's re-entrancy mark
    /// (a `reload()` of this host from its `on_load` fails with `Reentrant`), under the host's log
    /// scope, bounded by the host's `map_timeout`.
    pub(crate) fn ensure_mapped(&self, plugin: usize) -> Result<(), Error> {
        let deadline = Instant::now().checked_add(self.contents.map_timeout);
        let host = &*self.host;
        self.contents.ensure_mapped(plugin, deadline, &|map| {
            inside_host(host.host_id(), |already| {
                if already {
                    return Err(Error::Reentrant);
                }
                crate::log_scope::with_host(host.host_name(), || {
                    let registered = map()?;
                    log::debug!(
                        "{}mapped {} on first use as `{}`",
                        crate::log_scope::prefix(),
                        registered.origin,
                        registered.name
                    );
                    Ok(registered)
                })
            })
        })
    }

    /// In an isolated set, its worker and the plugins it holds (`isolate`).
    pub(crate) fn isolated(&self) -> Option<&dyn crate::load::Isolated> {
        self.contents.isolated.as_deref()
    }

    /// How long the load of this set took.
    pub(crate) fn load_time(&self) -> std::time::Duration {
        self.contents.load_time()
    }
}

impl Drop for PluginSet {
    fn drop(&mut self) {
        // In a `fork()`ed child the plugins are the parent's: their unload code runs there.
        // The child's copies of the locks may be held by threads it does not have, so the
        // last lease dropped here leaves everything as it is.
        if self.host.forked() {
            self.contents.abandon();
            return;
        }
        // However teardown ends (a panic that escaped it included), the generation is marked
        // unloaded when this guard drops, after the teardown: loaders waiting for it (I1)
        // must not wait for ever.
        struct MarkUnloaded<'a>(&'a mut PluginSet);
        impl Drop for MarkUnloaded<'_> {
            fn drop(&mut self) {
                self.0.host.mark_unloaded(self.0.generation);
            }
        }
        let set = MarkUnloaded(self);
        let started = Instant::now();
        // Unload code runs outside the host's lock; loaders that arrive meanwhile see that
        // this generation has not finished unloading and wait (I1). The re-entrancy mark
        // makes an `acquire()` from unload code fail instead of waiting for itself (I4); the
        // statistics' log event is inside the mark too, so a logger that acquires this host
        // gets `Error::Reentrant` instead of waiting for this very unload.
        inside_host(set.0.host.host_id(), |_| {
            let pinned = crate::log_scope::with_host(set.0.host.host_name(), || set.0.contents.unload());
            set.0.host.record_unload(set.0, started.elapsed(), pinned);
        });
    }
}
