//! What one load produced: the plugins, their passes, what was skipped, and the teardown that
//! unloads them. A host's [`PluginSet`](crate::PluginSet) wraps one of these.

use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, Instant};

use crate::abi::dylease_fn;
use crate::error::{Error, Origin};
use crate::load::pinning::Pinning;
use crate::load::pipeline::Registered;
use crate::load::policy::LoadFailure;
use crate::load::registrar::UserData;
use crate::load::teardown::{Teardown, teardown_all};
use crate::sync::Exclusive;

/// One loaded plugin, as seen through a lease.
#[derive(Debug, Clone)]
pub struct PluginInfo {
    name: String,
    version: String,
    origin: Origin,
    pinning: Pinning,
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

    /// Where the plugin came from.
    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// Whether its library is expected to stay mapped after its last lease, and why: read
    /// from the file before it was loaded (`-z nodelete`, GNU unique symbols, thread-local
    /// destructors, other exported symbols). Empty for a static plugin. A library that does
    /// stay mapped is also logged, with these causes and their fixes; see
    /// [`Pinning`].
    pub fn pinning(&self) -> &Pinning {
        &self.pinning
    }
}

/// One registered pass, as seen through a lease. To call it, see
/// [`Lease::pass`](crate::Lease::pass).
#[derive(Debug)]
pub struct PassInfo {
    name: Box<str>,
    interface: Option<Box<str>>,
    plugin: usize,
    plugin_name: Box<str>,
    pub(crate) func: dylease_fn,
    pub(crate) user_data: UserData,
    /// A Python pass's callable (`load::python`); then `func` is a placeholder.
    #[cfg(feature = "python")]
    pub(crate) python: Option<crate::load::python::callable::PyCallable>,
}

impl PassInfo {
    /// The name the pass was registered under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The interface the pass was registered as implementing (`add_typed_pass` in C,
    /// [`Registrar::add_typed_pass`](crate::Registrar::add_typed_pass) for static plugins):
    /// the name of a pass signature the host and its plugins agree on, such as
    /// `ge.fusion_pass/1`. `None` for a pass registered without one (`add_pass`, and every
    /// pass of a plugin built for ABI version 1).
    pub fn interface(&self) -> Option<&str> {
        self.interface.as_deref()
    }

    /// The name of the plugin that registered it.
    pub fn plugin(&self) -> &str {
        &self.plugin_name
    }

    /// The index of the plugin that registered it in [`PluginSet::plugins`](crate::PluginSet::plugins).
    pub fn plugin_index(&self) -> usize {
        self.plugin
    }
}

/// The plugins of one load, built one plugin at a time, immutable once the load finished.
pub(crate) struct LoadedPlugins {
    plugins: Vec<PluginInfo>,
    passes: Vec<PassInfo>,
    index: HashMap<Box<str>, usize>,
    /// For each interface id, the positions in `passes` of the passes registered under it:
    /// plugins in load order, then pass names in byte order. Built by
    /// [`LoadedPlugins::finished`].
    by_interface: HashMap<Box<str>, Box<[usize]>>,
    failures: Vec<LoadFailure>,
    /// Only touched through `&mut` (by [`LoadedPlugins::unload`] and `Drop`).
    teardown: Exclusive<Vec<Teardown>>,
    started: Instant,
    /// How long the load took, set when it finished.
    load_time: Duration,
}

impl fmt::Debug for LoadedPlugins {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoadedPlugins")
            .field("plugins", &self.plugins)
            .field("passes", &self.passes.iter().map(PassInfo::name).collect::<Vec<_>>())
            .field("failures", &self.failures.len())
            .finish()
    }
}

impl LoadedPlugins {
    /// An empty load; its duration counts from here.
    pub(crate) fn new() -> Self {
        LoadedPlugins {
            plugins: Vec::new(),
            passes: Vec::new(),
            index: HashMap::new(),
            by_interface: HashMap::new(),
            failures: Vec::new(),
            teardown: Exclusive::new(Vec::new()),
            started: Instant::now(),
            load_time: Duration::ZERO,
        }
    }

    /// Adds a plugin and its passes. A pass whose name an earlier plugin registered is left
    /// out, and returned as a [`DuplicatePass`](crate::Error::DuplicatePass) error; the plugin
    /// is taken in all the same (its registration ran, so its unload code must run).
    pub(crate) fn add(&mut self, plugin: Registered) -> Vec<Error> {
        let at = self.plugins.len();
        let mut duplicates = Vec::new();
        for pass in plugin.passes {
            if let Some(&first) = self.index.get(&pass.name) {
                let first = self.plugins[self.passes[first].plugin].origin.clone();
                duplicates.push(Error::DuplicatePass {
                    pass: pass.name.into(),
                    first,
                    second: plugin.origin.clone(),
                });
                continue;
            }
            self.index.insert(pass.name.clone(), self.passes.len());
            self.passes.push(PassInfo {
                name: pass.name,
                interface: pass.interface,
                plugin: at,
                plugin_name: plugin.name.as_str().into(),
                func: pass.func,
                user_data: pass.user_data,
                #[cfg(feature = "python")]
                python: pass.python,
            });
        }
        self.plugins.push(PluginInfo {
            name: plugin.name,
            version: plugin.version,
            origin: plugin.origin,
            pinning: plugin.pinning,
        });
        self.teardown.get_mut().push(plugin.teardown);
        duplicates
    }

    /// Records a failure that the load policy skipped.
    pub(crate) fn skipped(&mut self, failure: LoadFailure) {
        self.failures.push(failure);
    }

    /// Marks the load finished: its duration stops here, and the per-interface index is
    /// built (plugins in load order, then pass names in byte order, so neither link order
    /// nor registration order nor hash order shows through).
    pub(crate) fn finished(mut self) -> Self {
        let mut by_interface: HashMap<Box<str>, Vec<usize>> = HashMap::new();
        for (at, pass) in self.passes.iter().enumerate() {
            if let Some(interface) = &pass.interface {
                // Python passes are listed apart (`Lease::py_passes_of`).
                #[cfg(feature = "python")]
                let interface = &crate::load::python::callable::index_key(interface, pass.python.is_some());
                by_interface.entry(interface.clone()).or_default().push(at);
            }
        }
        let passes = &self.passes;
        self.by_interface = by_interface
            .into_iter()
            .map(|(interface, mut positions)| {
                positions.sort_unstable_by(|&a, &b| {
                    (passes[a].plugin, &*passes[a].name).cmp(&(passes[b].plugin, &*passes[b].name))
                });
                (interface, positions.into_boxed_slice())
            })
            .collect();
        self.load_time = self.started.elapsed();
        self
    }

    /// How long the load took.
    pub(crate) fn load_time(&self) -> Duration {
        self.load_time
    }

    /// Unloads every plugin now (unload code in reverse load order, then libraries closed in
    /// reverse load order). Returns how many libraries the platform kept loaded. Called once;
    /// a second call, and the `Drop` after it, find nothing left to do.
    pub(crate) fn unload(&mut self) -> usize {
        teardown_all(std::mem::take(self.teardown.get_mut()))
    }

    /// Forgets every plugin without unloading it: for a `fork()`ed child, whose copies of
    /// the libraries and of the registry's lock belong to the parent's threads.
    pub(crate) fn abandon(&mut self) {
        std::mem::forget(std::mem::take(self.teardown.get_mut()));
    }

    /// The loaded plugins, in load order.
    pub(crate) fn plugins(&self) -> &[PluginInfo] {
        &self.plugins
    }

    /// Every registered pass, in registration order.
    #[inline]
    pub(crate) fn passes(&self) -> &[PassInfo] {
        &self.passes
    }

    /// The position of the pass registered under `name` in [`LoadedPlugins::passes`].
    #[inline]
    pub(crate) fn pass_position(&self, name: &str) -> Option<usize> {
        self.index.get(name).copied()
    }

    /// The positions in [`LoadedPlugins::passes`] of the passes registered under `interface`,
    /// plugins in load order, then pass names in byte order; empty if there are none.
    #[inline]
    pub(crate) fn passes_of(&self, interface: &str) -> &[usize] {
        self.by_interface.get(interface).map_or(&[], |positions| positions)
    }

    /// What was skipped under [`LoadPolicy::SkipFailed`](crate::LoadPolicy::SkipFailed).
    pub(crate) fn failures(&self) -> &[LoadFailure] {
        &self.failures
    }
}

/// Dropped without [`LoadedPlugins::unload`]: a failed load, or a panic that unwound out of
/// one. The plugins registered so far still get their unload code run before their libraries
/// close.
impl Drop for LoadedPlugins {
    fn drop(&mut self) {
        self.unload();
    }
}
