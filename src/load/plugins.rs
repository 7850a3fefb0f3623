//! What one load produced: the plugins, their passes, what was skipped, and the teardown that
//! unloads them. A host's [`PluginSet`](crate::PluginSet) wraps one of these.

use std::collections::HashMap;
use std::fmt;
use std::time::{Duration, Instant};

use crate::error::{Error, Origin};
use crate::inspect::pinning::Pinning;
use crate::load::pipeline::{Deferred, Registered};
use crate::load::policy::LoadFailure;
use crate::registrar::{PassFunc, UserData};
use crate::registry::teardown::{Teardown, teardown_all};
use crate::sync::{AtomicBool, Mutex, OnceSlot, Ordering};
use crate::trust::TrustPolicy;

/// The default of [`HostBuilder::map_timeout`](crate::HostBuilder::map_timeout).
pub(crate) const DEFAULT_MAP_TIMEOUT: Duration = Duration::from_secs(60);

/// One plugin of a set, as seen through a lease: loaded, or (in an on-demand set) declared by
/// its manifest and mapped on first use ([`PluginInfo::is_mapped`]).
#[derive(Debug)]
pub struct PluginInfo {
    name: String,
    version: String,
    origin: Origin,
    pinning: Pinning,
    /// Whether its library is mapped (always, outside on-demand sets). Set once, after its
    /// passes' callables.
    mapped: AtomicBool,
    /// Its position among the set's on-demand plugins, if it is one.
    pub(crate) deferred: Option<usize>,
}

/// A snapshot: the clone's [`is_mapped`](PluginInfo::is_mapped) is this one's now.
impl Clone for PluginInfo {
    fn clone(&self) -> Self {
        PluginInfo {
            name: self.name.clone(),
            version: self.version.clone(),
            origin: self.origin.clone(),
            pinning: self.pinning.clone(),
            mapped: AtomicBool::new(self.is_mapped()),
            deferred: self.deferred,
        }
    }
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
    ///
    /// For a plugin of an on-demand set not mapped yet, this is its file's prediction (read
    /// when the set was acquired), as for any other.
    pub fn pinning(&self) -> &Pinning {
        &self.pinning
    }

    /// Whether the plugin's library is mapped in this set. Always `true` except in an
    /// on-demand set ([`HostBuilder::on_demand`](crate::HostBuilder::on_demand)), where a
    /// library plugin with a complete manifest is mapped on the first use of one of its
    /// passes and stays mapped until the set unloads. Its name, version and passes are
    /// its manifest's until then (its mapping checks that they are the registered ones).
    pub fn is_mapped(&self) -> bool {
        self.mapped.load(Ordering::Acquire)
    }
}

/// One pass of a set, as seen through a lease: registered, or declared by the manifest of an
/// on-demand plugin not mapped yet. To call it, see [`Lease::get`](crate::Lease::get) and
/// [`Lease::pass`](crate::Lease::pass).
///
/// Its name, interface and plugin are known without mapping its plugin; what calls it (its
/// function, `user_data`, a Python pass's callable) is set once, when its plugin is mapped:
/// at the set's load, or on first use in an on-demand set.
#[derive(Debug)]
pub struct PassInfo {
    name: Box<str>,
    interface: Option<Box<str>>,
    plugin: usize,
    plugin_name: Box<str>,
    /// Whether it is a Python pass (`load::python`), which has no native signature.
    #[cfg(feature = "python")]
    pub(crate) python: bool,
    /// What calls it, once its plugin is mapped.
    callable: OnceSlot<Callable>,
}

/// What calls a pass: set when its plugin is mapped.
#[derive(Debug)]
pub(crate) struct Callable {
    /// The pass's function, typed again only through it (`PassFunc::typed`).
    pub(crate) func: PassFunc,
    pub(crate) user_data: UserData,
    /// A Python pass's callable (`load::python`); then `func` is a placeholder.
    #[cfg(feature = "python")]
    pub(crate) python: Option<crate::registrar::python::PyCallable>,
}

impl Callable {
    fn of(pass: crate::registrar::Collected) -> (Box<str>, Callable) {
        (
            pass.name,
            Callable {
                func: pass.func,
                user_data: pass.user_data,
                #[cfg(feature = "python")]
                python: pass.python,
            },
        )
    }
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

    /// What calls it, if its plugin is mapped.
    #[inline]
    pub(crate) fn callable(&self) -> Option<&Callable> {
        self.callable.get()
    }

    /// Whether it is a Python pass.
    #[cfg(feature = "python")]
    pub(crate) fn is_python(&self) -> bool {
        self.python
    }

    #[cfg(not(feature = "python"))]
    pub(crate) fn is_python(&self) -> bool {
        false
    }
}

/// The plugins of one load, built one plugin at a time. Once the load finished, its plugin
/// and pass lists never change; what changes is only whether an on-demand plugin is mapped
/// (its `mapped` flag, its passes' callables and a teardown entry, each set once).
pub(crate) struct LoadedPlugins {
    plugins: Vec<PluginInfo>,
    passes: Vec<PassInfo>,
    index: HashMap<Box<str>, usize>,
    /// For each interface id, the positions in `passes` of the passes registered under it:
    /// plugins in load order, then pass names in byte order. Built by
    /// [`LoadedPlugins::finished`].
    by_interface: HashMap<Box<str>, Vec<usize>>,
    failures: Vec<LoadFailure>,
    /// The on-demand plugins not mapped at load, and their map-once states
    /// (`load::demand`); `None` in a set without any. Behind a trait object, made only by
    /// `load::demand::defer` (through [`add_deferred`](Self::add_deferred)): a program that
    /// builds no on-demand set links none of its code.
    demand: Option<Box<dyn Demand>>,
    /// The trust policy their mapping opens their files under (they were judged under it).
    pub(crate) trust: TrustPolicy,
    /// How long a use waits for another's mapping of the same plugin.
    pub(crate) map_timeout: Duration,
    /// The teardown of each mapped plugin, in the order they were mapped: at load, then on
    /// demand. Pushed to under its lock by a mapping (which a lease makes); taken by
    /// [`LoadedPlugins::unload`] once no lease is left.
    teardown: Mutex<Vec<Teardown>>,
    started: Instant,
    /// How long the load took, set when it finished.
    load_time: Duration,
    /// In an isolated set, its worker and the plugins it holds.
    pub(crate) isolated: Option<Box<dyn Isolated>>,
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
            demand: None,
            trust: TrustPolicy::default(),
            map_timeout: DEFAULT_MAP_TIMEOUT,
            teardown: Mutex::new(Vec::new()),
            started: Instant::now(),
            load_time: Duration::ZERO,
            isolated: None,
        }
    }

    /// Adds a plugin and its passes. A pass whose name an earlier plugin registered is left
    /// out, and returned as a [`DuplicatePass`](crate::Error::DuplicatePass) error; the plugin
    /// is taken in all the same (its registration ran, so its unload code must run).
    pub(crate) fn add(&mut self, plugin: Registered) -> Vec<Error> {
        let passes = plugin.passes.into_iter().map(|pass| {
            #[cfg(feature = "python")]
            let python = pass.python.is_some();
            let (name, callable) = Callable::of(pass);
            PassEntry {
                name,
                interface: callable.func.interface().map(Into::into),
                #[cfg(feature = "python")]
                python,
                callable: OnceSlot::with(callable),
            }
        });
        let duplicates = self.add_passes(&plugin.name, &plugin.origin, passes);
        self.plugins.push(PluginInfo {
            name: plugin.name,
            version: plugin.version,
            origin: plugin.origin,
            pinning: plugin.pinning,
            mapped: AtomicBool::new(true),
            deferred: None,
        });
        self.teardown.lock().push(plugin.teardown);
        duplicates
    }

    /// Adds an on-demand plugin, unmapped, with the passes its complete manifest declares: a
    /// declared name an earlier plugin has (by registration or declaration) is left out and
    /// returned as a [`DuplicatePass`](crate::Error::DuplicatePass) error, as [`add`](Self::add)
    /// does for registered ones. The set's on-demand plugins are made by `new` for the first.
    pub(crate) fn add_deferred(&mut self, plugin: Deferred, new: impl FnOnce() -> Box<dyn Demand>) -> Vec<Error> {
        let origin = Origin::File(plugin.path.clone());
        let passes = plugin.manifest.passes.iter().map(|pass| PassEntry {
            name: pass.name.as_str().into(),
            interface: pass.interface.as_deref().map(Into::into),
            #[cfg(feature = "python")]
            python: false,
            callable: OnceSlot::new(),
        });
        let duplicates = self.add_passes(&plugin.manifest.name, &origin, passes);
        let (name, version) = (plugin.manifest.name.clone(), plugin.manifest.version.clone());
        let pinning = plugin.pinning.clone();
        let demand = self.demand.get_or_insert_with(new);
        self.plugins.push(PluginInfo {
            name,
            version,
            origin,
            pinning,
            mapped: AtomicBool::new(false),
            deferred: Some(demand.push(plugin)),
        });
        duplicates
    }

    /// Adds a plugin that an isolated set's worker loaded (`isolate`), with the passes it
    /// registered there: they have no callable in this process (a lease calls them through the
    /// worker). A name an earlier plugin has is left out and returned, as by [`add`](Self::add).
    #[cfg_attr(not(all(feature = "isolate", target_os = "linux", not(loom))), allow(dead_code))]
    pub(crate) fn add_remote(
        &mut self,
        origin: Origin,
        (name, version): (String, String),
        passes: Vec<(String, Option<String>)>,
        pinning: Pinning,
    ) -> Vec<Error> {
        let passes = passes.into_iter().map(|(name, interface)| PassEntry {
            name: name.into(),
            interface: interface.map(Into::into),
            #[cfg(feature = "python")]
            python: false,
            callable: OnceSlot::new(),
        });
        let duplicates = self.add_passes(&name, &origin, passes);
        self.plugins.push(PluginInfo {
            name,
            version,
            origin,
            pinning,
            mapped: AtomicBool::new(true),
            deferred: None,
        });
        duplicates
    }

    /// Makes this an isolated set: `isolated` holds its worker, whose `teardown` (the
    /// worker's unload) runs with the set's other plugins' teardowns.
    #[cfg_attr(not(all(feature = "isolate", target_os = "linux", not(loom))), allow(dead_code))]
    pub(crate) fn isolate(&mut self, isolated: Box<dyn Isolated>, teardown: Teardown) {
        self.isolated = Some(isolated);
        self.teardown.lock().push(teardown);
    }

    /// Adds the passes of the plugin about to be pushed (`name`, from `origin`), leaving out
    /// each whose name is taken.
    fn add_passes(&mut self, name: &str, origin: &Origin, passes: impl Iterator<Item = PassEntry>) -> Vec<Error> {
        let at = self.plugins.len();
        let mut duplicates = Vec::new();
        for pass in passes {
            if let Some(&first) = self.index.get(&pass.name) {
                let first = self
                    .plugins
                    .get(self.passes[first].plugin)
                    .map_or(origin, |p| &p.origin);
                duplicates.push(Error::DuplicatePass {
                    pass: pass.name.into(),
                    first: first.clone(),
                    second: origin.clone(),
                });
                continue;
            }
            self.index.insert(pass.name.clone(), self.passes.len());
            self.passes.push(PassInfo {
                name: pass.name,
                interface: pass.interface,
                plugin: at,
                plugin_name: name.into(),
                #[cfg(feature = "python")]
                python: pass.python,
                callable: pass.callable,
            });
        }
        duplicates
    }

    /// Makes plugin `plugin` (an index into [`plugins`](Self::plugins)) mapped: nothing to do
    /// for a plugin mapped at load; for an on-demand plugin, its first use maps it inside
    /// `scope` and takes in what it registered ([`mapped`](Self::mapped)), once for the set
    /// (`load::demand`, which says how racing uses wait, until `deadline`, and which failures
    /// the set keeps).
    pub(crate) fn ensure_mapped(
        &self,
        plugin: usize,
        deadline: Option<Instant>,
        scope: Scope<'_>,
    ) -> Result<(), Error> {
        let (Some(deferred), Some(demand)) = (self.plugins[plugin].deferred, &self.demand) else {
            return Ok(());
        };
        demand.ensure(self, plugin, deferred, deadline, scope)
    }

    /// Takes in what the mapping of on-demand plugin `plugin` (an index into
    /// [`plugins`](Self::plugins)) registered: its passes' callables, its teardown (last,
    /// so it unloads first), and then its `mapped` flag. The registration was compared with
    /// the complete manifest the set was built from, so every pass of the set that is the
    /// plugin's gets its callable; a registered pass the set left out (a duplicate name under
    /// `SkipFailed`) is left out here too.
    pub(super) fn mapped(&self, plugin: usize, registered: Registered) {
        for pass in registered.passes {
            let (name, callable) = Callable::of(pass);
            if let Some(&at) = self.index.get(&name)
                && self.passes[at].plugin == plugin
            {
                // Set once: the set's map-once state lets one mapping of the plugin through.
                let _ = self.passes[at].callable.set(callable);
            }
        }
        self.teardown.lock().push(registered.teardown);
        self.plugins[plugin].mapped.store(true, Ordering::Release);
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
                let interface = &crate::registrar::python::index_key(interface, pass.is_python());
                by_interface.entry(interface.clone()).or_default().push(at);
            }
        }
        // One comparison, called rather than inlined into the sort: a set has few passes per
        // interface, and an inlined comparison of names would be copied into every step of
        // the sort. (Names are unique in a set, so the order is total and a stable sort's.)
        #[inline(never)]
        fn by_plugin_then_name(passes: &[PassInfo], a: usize, b: usize) -> std::cmp::Ordering {
            (passes[a].plugin, &*passes[a].name).cmp(&(passes[b].plugin, &*passes[b].name))
        }
        for positions in by_interface.values_mut() {
            positions.sort_by(|&a, &b| by_plugin_then_name(&self.passes, a, b));
        }
        self.by_interface = by_interface;
        if let Some(demand) = &mut self.demand {
            demand.finished();
        }
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
        teardown_all(std::mem::take(&mut *self.teardown.lock()))
    }

    /// Forgets every plugin without unloading it: for a `fork()`ed child, whose copies of
    /// the libraries and of the registry's lock belong to the parent's threads.
    pub(crate) fn abandon(&mut self) {
        std::mem::forget(std::mem::take(&mut *self.teardown.lock()));
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

/// The host's side of a first use's mapping: it runs `map` (the plugin's mapping) inside the
/// host's marks (its re-entrancy mark, its log scope) and returns what `map` returned, or
/// refuses to run it.
pub(crate) type Scope<'a> = &'a dyn Fn(&dyn Fn() -> Result<Registered, Error>) -> Result<Registered, Error>;

/// The on-demand plugins of a set ([`HostBuilder::on_demand`](crate::HostBuilder::on_demand)),
/// as the set holds them: `load::demand` implements it, and only its `defer` makes one.
pub(crate) trait Demand: Send + Sync {
    /// Adds an on-demand plugin, unmapped; returns its position among them.
    fn push(&mut self, plugin: Deferred) -> usize;
    /// The load is finished: no plugin is added after this, and each gets its state.
    fn finished(&mut self);
    /// Makes the `deferred`-th on-demand plugin, plugin `plugin` of `set`, mapped: its first
    /// use maps it inside `scope`, and takes in what it registered
    /// ([`LoadedPlugins::mapped`]), once for the set (`load::demand`, which says how
    /// racing uses wait, until `deadline`, and which failures the set keeps).
    fn ensure(
        &self,
        set: &LoadedPlugins,
        plugin: usize,
        deferred: usize,
        deadline: Option<Instant>,
        scope: Scope<'_>,
    ) -> Result<(), Error>;
}

/// The worker of an isolated set (`HostBuilder::isolated`) and the plugins it holds, as the
/// set and its leases see it: the `isolate` room, above this one, implements it.
// Without the crate feature `isolate` no set has a worker; only `hosts` is asked.
#[cfg_attr(not(feature = "isolate"), allow(dead_code))]
pub(crate) trait Isolated: Send + Sync + fmt::Debug {
    /// Whether plugin `plugin` (an index into the set's plugins) runs in the worker.
    fn hosts(&self, plugin: usize) -> bool;
    /// The worker's process id.
    fn pid(&self) -> u32;
    /// Calls the message pass `pass` of `plugin` in the worker with `input`.
    fn call(&self, plugin: &Origin, pass: &str, input: &[u8]) -> Result<Vec<u8>, Error>;
}

/// A pass about to enter a set: registered, or declared (its callable unset).
struct PassEntry {
    name: Box<str>,
    interface: Option<Box<str>>,
    #[cfg(feature = "python")]
    python: bool,
    callable: OnceSlot<Callable>,
}
