//! One generation of loaded plugins and their passes.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::abi::dylease_fn;
use crate::error::Origin;
use crate::host::Shared;
use crate::load::LoadFailure;
use crate::pipeline::{Teardown, teardown_all};
use crate::registrar::UserData;
use crate::sync::{Arc, Exclusive, Tenant, inside_host};

/// One loaded plugin, as seen through a lease.
#[derive(Debug, Clone)]
pub struct PluginInfo {
    name: String,
    version: String,
    origin: Origin,
}

impl PluginInfo {
    /// The name from the plugin's descriptor (or given to
    /// [`HostBuilder::static_plugin`](crate::HostBuilder::static_plugin)).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The version from the plugin's descriptor; empty if it gave none, and for static
    /// plugins.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The library file, as discovered; `None` for a static plugin.
    pub fn path(&self) -> Option<&Path> {
        self.origin.path()
    }

    /// Where the plugin came from.
    pub fn origin(&self) -> &Origin {
        &self.origin
    }
}

/// One registered pass, as seen through a lease. To call it, see
/// [`Lease::pass`](crate::Lease::pass).
#[derive(Debug)]
pub struct PassInfo {
    name: Box<str>,
    plugin: usize,
    plugin_name: Box<str>,
    pub(crate) func: dylease_fn,
    pub(crate) user_data: UserData,
}

impl PassInfo {
    /// The name the pass was registered under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name of the plugin that registered it.
    pub fn plugin(&self) -> &str {
        &self.plugin_name
    }

    /// The index of the plugin that registered it in [`PluginSet::plugins`].
    pub fn plugin_index(&self) -> usize {
        self.plugin
    }
}

/// One generation of loaded plugins: what every [`Lease`](crate::Lease) of it derefs to.
///
/// A set is immutable after load. It unloads when the last lease of it is dropped: each
/// plugin's unload code runs in reverse load order, then each library is closed in reverse
/// load order, then the generation is marked unloaded, all before that last drop returns.
pub struct PluginSet {
    generation: u64,
    plugins: Box<[PluginInfo]>,
    passes: Box<[PassInfo]>,
    index: HashMap<Box<str>, usize>,
    failures: Box<[LoadFailure]>,
    /// How long the load took, for the host's statistics.
    pub(crate) load_time: Duration,
    /// Only touched by `Drop`, through `&mut`.
    teardown: Exclusive<Vec<Teardown>>,
    host: Arc<Shared>,
}

impl fmt::Debug for PluginSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PluginSet")
            .field("generation", &self.generation)
            .field("plugins", &self.plugins)
            .field("passes", &self.passes.iter().map(PassInfo::name).collect::<Vec<_>>())
            .field("failures", &self.failures.len())
            .finish()
    }
}

impl PluginSet {
    /// Which load of its host this set is: 1 for the first successful load, 2 for the
    /// next one after that unloaded, and so on.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The loaded plugins, in load order.
    pub fn plugins(&self) -> &[PluginInfo] {
        &self.plugins
    }

    /// Every registered pass, in registration order.
    pub fn passes(&self) -> &[PassInfo] {
        &self.passes
    }

    /// The pass registered under `name`, if any. One hash lookup, no allocation.
    pub fn pass_info(&self, name: &str) -> Option<&PassInfo> {
        self.index.get(name).map(|&i| &self.passes[i])
    }

    /// The position of the pass registered under `name` in [`PluginSet::passes`].
    pub(crate) fn pass_position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// The shared state of the host this set belongs to.
    pub(crate) fn host(&self) -> &Arc<Shared> {
        &self.host
    }

    /// Whether a pass is registered under `name`.
    pub fn contains_pass(&self, name: &str) -> bool {
        self.index.contains_key(name)
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
    ///     .static_plugin("broken", |_reg| Err(dylease::Error::custom("no GPU")))
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
        &self.failures
    }
}

/// Builds a set from registered plugins, one plugin at a time.
pub(crate) struct SetBuilder {
    plugins: Vec<PluginInfo>,
    passes: Vec<PassInfo>,
    index: HashMap<Box<str>, usize>,
    failures: Vec<LoadFailure>,
    teardown: Vec<Teardown>,
    started: Instant,
}

impl SetBuilder {
    /// An empty set; the load's duration counts from here.
    pub(crate) fn new() -> Self {
        SetBuilder {
            plugins: Vec::new(),
            passes: Vec::new(),
            index: HashMap::new(),
            failures: Vec::new(),
            teardown: Vec::new(),
            started: Instant::now(),
        }
    }

    /// Adds a plugin and its passes. A pass whose name an earlier plugin registered is left
    /// out, and returned as a [`DuplicatePass`](crate::Error::DuplicatePass) error; the plugin
    /// is taken in all the same (its registration ran, so its unload code must run).
    pub(crate) fn add(&mut self, plugin: crate::pipeline::Registered) -> Vec<crate::Error> {
        let at = self.plugins.len();
        let mut duplicates = Vec::new();
        for pass in plugin.passes {
            if let Some(&first) = self.index.get(&pass.name) {
                let first = self.plugins[self.passes[first].plugin].origin.clone();
                duplicates.push(crate::Error::DuplicatePass {
                    pass: pass.name.into(),
                    first,
                    second: plugin.origin.clone(),
                });
                continue;
            }
            self.index.insert(pass.name.clone(), self.passes.len());
            self.passes.push(PassInfo {
                name: pass.name,
                plugin: at,
                plugin_name: plugin.name.as_str().into(),
                func: pass.func,
                user_data: pass.user_data,
            });
        }
        self.plugins.push(PluginInfo {
            name: plugin.name,
            version: plugin.version,
            origin: plugin.origin,
        });
        self.teardown.push(plugin.teardown);
        duplicates
    }

    /// Records a failure that the load policy skipped.
    pub(crate) fn skipped(&mut self, failure: LoadFailure) {
        self.failures.push(failure);
    }

    /// Unloads everything added so far: the load failed.
    pub(crate) fn abandon(mut self) {
        teardown_all(std::mem::take(&mut self.teardown));
    }

    /// The finished set. Construct it only where it goes straight into the host's slot, whose
    /// last lease is dropped outside the host's lock (that drop takes the lock).
    pub(crate) fn finish(mut self, generation: u64, host: Arc<Shared>) -> PluginSet {
        PluginSet {
            generation,
            plugins: std::mem::take(&mut self.plugins).into(),
            passes: std::mem::take(&mut self.passes).into(),
            index: std::mem::take(&mut self.index),
            failures: std::mem::take(&mut self.failures).into(),
            load_time: self.started.elapsed(),
            teardown: Exclusive::new(std::mem::take(&mut self.teardown)),
            host,
        }
    }
}

/// A builder dropped without `finish` or `abandon`: a panic unwound out of the load. The
/// plugins registered so far still get their unload code run before their libraries close.
impl Drop for SetBuilder {
    fn drop(&mut self) {
        teardown_all(std::mem::take(&mut self.teardown));
    }
}

impl Drop for PluginSet {
    fn drop(&mut self) {
        let started = Instant::now();
        // Unload code runs outside the host's lock; loaders that arrive meanwhile see that
        // this generation has not finished unloading and wait (invariant I1). The re-entrancy
        // mark makes an `acquire()` from unload code fail instead of waiting for itself. (The
        // thread is rarely inside this host already: only if a logger panicked while the host
        // logged its load; the mark is then simply kept.)
        // The statistics' log event is inside the mark too: a logger that acquires this host
        // gets `Error::Reentrant` instead of waiting for this very unload to finish.
        let teardown = std::mem::take(self.teardown.get_mut());
        inside_host(self.host.id(), |_| {
            let pinned = teardown_all(teardown);
            self.host.stats.unloaded(self, started.elapsed(), pinned);
        });
    }
}

impl Tenant for PluginSet {
    type Leaving = Unloaded;

    fn leaving(&self) -> Unloaded {
        Unloaded {
            host: Arc::clone(&self.host),
            generation: self.generation,
        }
    }
}

/// Marks a generation unloaded when dropped, which the slot does right after the set's drop
/// finished, however it finished: a panic that escaped teardown must not leave loaders
/// waiting for ever. (Libraries not yet closed when a panic unwinds are closed by their own
/// `Drop`.) It holds the host's shared state, which contains the slot, alive until then.
pub(crate) struct Unloaded {
    host: Arc<Shared>,
    generation: u64,
}

impl Drop for Unloaded {
    fn drop(&mut self) {
        self.host.mark_unloaded(self.generation);
    }
}
