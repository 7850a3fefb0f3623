//! What a host observed about its loads and unloads, and the `log` events about them.
//!
//! Everything here is written after the fact and read by observers; nothing here is ever
//! consulted to decide when to load or unload. The recorder's lock is a leaf: it is held only
//! to copy numbers, never while plugin code runs or a lease is dropped.

use std::time::{Duration, Instant};

use crate::host::policy::UnloadPolicy;
use crate::host::set::PluginSet;
use crate::log_scope::count;
use crate::sync::Mutex;

/// A snapshot of a host's statistics, from [`PluginHost::stats`](crate::PluginHost::stats).
///
/// The values are observed, not decided on: by the time you read them, another thread may
/// have acquired or dropped a lease. Counts start at zero when the host is built.
///
/// # Example
///
/// ```
/// let host = dylease::PluginHost::builder()
///     .static_plugin("math", |_reg| Ok(()))
///     .build()?;
/// let lease = host.acquire()?;
/// let stats = host.stats();
/// assert!(stats.loaded);
/// assert_eq!((stats.generation, stats.live_leases, stats.plugins), (1, 1, 1));
/// drop(lease);
/// let stats = host.stats();
/// assert!(!stats.loaded);
/// assert_eq!((stats.loads, stats.unloads, stats.live_leases), (1, 1, 0));
/// println!("the last unload took {:?}", stats.last_unload.unwrap());
/// # Ok::<(), dylease::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// The host's name, as given to [`HostBuilder::name`](crate::HostBuilder::name) (by
    /// default `host-N`, N its number in the process): every log line about the host begins
    /// with it in brackets.
    pub name: String,
    /// Whether a set is loaded (or still unloading), as
    /// [`PluginHost::is_loaded`](crate::PluginHost::is_loaded).
    pub loaded: bool,
    /// The generation of the newest set, as
    /// [`PluginHost::generation`](crate::PluginHost::generation).
    pub generation: u64,
    /// The number of leases of the current set (clones included); 0 when none is loaded.
    /// Under [`UnloadPolicy::After`] and [`UnloadPolicy::WithHost`] the host's own lease is
    /// one of them.
    pub live_leases: usize,
    /// The number of plugins in the loaded set; 0 when none is loaded.
    pub plugins: usize,
    /// The number of passes in the loaded set; 0 when none is loaded.
    pub passes: usize,
    /// Successful loads so far.
    pub loads: u64,
    /// Finished unloads so far.
    pub unloads: u64,
    /// How many libraries an unload of this host found still loaded after closing them:
    /// pinned by the platform (`-z nodelete`, GNU unique symbols, a thread-local destructor)
    /// or by another user of the same file. Each such mapping is counted once, by the first
    /// unload that finds it, however often it is unloaded again, and its plugin file is logged
    /// as a warning once (see [`Pinning`](crate::Pinning) for the causes and their fixes).
    /// Counted on Linux with glibc only; elsewhere it stays 0.
    pub pinned_libraries: u64,
    /// How long the last successful load took, from discovery to the finished set.
    pub last_load: Option<Duration>,
    /// How long the last unload took: unload code, closing the libraries, and the pinned
    /// check.
    pub last_unload: Option<Duration>,
    /// The host's [`UnloadPolicy`].
    pub unload_policy: UnloadPolicy,
    /// When the host plans to drop its own lease of the newest set, which then unloads:
    /// under [`UnloadPolicy::After`] while no user lease is alive; `None` otherwise.
    pub unloads_at: Option<Instant>,
}

/// The host's side of [`Stats`]: updated by loads and unloads.
#[derive(Debug)]
pub(crate) struct Recorder {
    record: Mutex<Record>,
    /// The host's name: in every log line and in [`Stats::name`].
    name: Box<str>,
}

#[derive(Debug, Default)]
struct Record {
    loads: u64,
    unloads: u64,
    pinned_libraries: u64,
    /// The generation `plugins` and `passes` describe: the newest loaded.
    generation: u64,
    plugins: usize,
    passes: usize,
    last_load: Option<Duration>,
    last_unload: Option<Duration>,
    /// The `PluginHost` is gone: an unload now is its last.
    host_dropped: bool,
}

impl Recorder {
    /// The recorder of the host called `name`.
    pub(crate) fn new(name: String) -> Self {
        Recorder {
            record: Mutex::new(Record::default()),
            name: name.into(),
        }
    }

    /// The host's name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Notes that the `PluginHost` was dropped: the next unload is its last.
    pub(crate) fn host_dropped(&self) {
        self.record.lock().host_dropped = true;
    }

    /// Records (and logs) a successful load. Called by the loading thread right after it
    /// released the host's lock, while it holds the new set's first lease. The host's first
    /// load is logged at `info`, later ones at `debug`.
    pub(crate) fn loaded(&self, set: &PluginSet) {
        let (plugins, passes, took) = (set.plugins().len(), set.passes().len(), set.load_time());
        let mut record = self.record.lock();
        record.loads += 1;
        let first = record.loads == 1;
        record.generation = record.generation.max(set.generation());
        if record.generation == set.generation() {
            record.plugins = plugins;
            record.passes = passes;
        }
        record.last_load = Some(took);
        drop(record);
        let skipped = match set.failures().len() {
            0 => String::new(),
            n => format!(", {} skipped", count(n, "failure", "failures")),
        };
        let level = if first { log::Level::Info } else { log::Level::Debug };
        log::log!(
            level,
            "[{}] loaded generation {}: {}, {} in {took:?}{skipped}",
            self.name,
            set.generation(),
            count(plugins, "plugin", "plugins"),
            count(passes, "pass", "passes"),
        );
    }

    /// Records (and logs) a finished unload: `pinned` libraries stayed loaded (and were not
    /// counted before). The host's last unload, after the `PluginHost` was dropped, is logged
    /// at `info`, the others at `debug`.
    pub(crate) fn unloaded(&self, set: &PluginSet, took: Duration, pinned: usize) {
        let mut record = self.record.lock();
        record.unloads += 1;
        record.pinned_libraries += pinned as u64;
        // An older generation that drained says nothing about the current one.
        if record.generation == set.generation() {
            record.plugins = 0;
            record.passes = 0;
        }
        record.last_unload = Some(took);
        let last = record.host_dropped;
        drop(record);
        let pinned = match pinned {
            0 => String::new(),
            n => format!(", {} pinned", count(n, "library", "libraries")),
        };
        let level = if last { log::Level::Info } else { log::Level::Debug };
        log::log!(
            level,
            "[{}] unloaded generation {}: {}, {} in {took:?}{pinned}",
            self.name,
            set.generation(),
            count(set.plugins().len(), "plugin", "plugins"),
            count(set.passes().len(), "pass", "passes"),
        );
    }

    /// A snapshot, with the parts the host itself knows.
    pub(crate) fn snapshot(
        &self,
        (loaded, generation, live_leases): (bool, u64, usize),
        (unload_policy, unloads_at): (UnloadPolicy, Option<Instant>),
    ) -> Stats {
        let record = self.record.lock();
        Stats {
            name: self.name.to_string(),
            loaded,
            generation,
            live_leases,
            plugins: record.plugins,
            passes: record.passes,
            loads: record.loads,
            unloads: record.unloads,
            pinned_libraries: record.pinned_libraries,
            last_load: record.last_load,
            last_unload: record.last_unload,
            unload_policy,
            unloads_at,
        }
    }
}
