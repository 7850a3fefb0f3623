//! [`HostBuilder`]: a host's sources and policies. (The methods that add sources naming
//! native or Python code are `unsafe fn`s, in `host::sources`.)

use std::time::Duration;

use crate::error::Error;
use crate::host::generations::Generations;
use crate::host::plugin_host::{LoadConfig, PluginHost};
use crate::host::policy::UnloadPolicy;
use crate::load::{LoadPolicy, Source, StaticPlugin};
use crate::registrar::{MAX_NAME_LEN, StaticRegistrar};
use crate::sync::Arc;
use crate::trust::TrustPolicy;
#[cfg(doc)]
use crate::{Lease, WorkerCause};
use dylease_plugin::RegisterError;

impl PluginHost {
    /// Starts configuring a host.
    pub fn builder() -> HostBuilder {
        HostBuilder::default()
    }
}

/// Configures a [`PluginHost`]. Sources load in the order they are added.
#[derive(Debug, Default)]
pub struct HostBuilder {
    pub(super) sources: Vec<Source>,
    pub(super) policy: LoadPolicy,
    pub(super) trust: TrustPolicy,
    /// [`HostBuilder::require_signed`] (`host::signed`).
    pub(super) signatures: Option<Arc<crate::trust::Verifier>>,
    pub(super) unload: UnloadPolicy,
    pub(super) name: Option<String>,
    /// The debounce of [`HostBuilder::watch`] (crate feature `watch`; `None` without it).
    pub(super) watch: Option<Duration>,
    /// [`HostBuilder::on_demand`]: how the load judges a plugin file for an on-demand set
    /// (`load::demand`), named only there, so that a program that never calls it links none
    /// of on-demand sets' code.
    pub(super) on_demand: Option<crate::load::Defer>,
    /// [`HostBuilder::map_timeout`]; `None` for the default.
    pub(super) map_timeout: Option<Duration>,
    /// [`HostBuilder::isolated`] and its options (crate feature `isolate`).
    #[cfg(feature = "isolate")]
    pub(super) isolation: IsolationOptions,
}

/// What [`HostBuilder::isolated`] and its options set (crate feature `isolate`).
#[cfg(feature = "isolate")]
#[derive(Debug, Default)]
pub(super) struct IsolationOptions {
    /// How its loads start, once [`HostBuilder::isolated`] was called (`None` inside where
    /// isolated sets are not supported).
    begin: Option<Option<crate::isolate::Begin>>,
    /// [`HostBuilder::call_deadline`]; `None` for the default.
    call_deadline: Option<Duration>,
    /// [`HostBuilder::worker_command`].
    worker_command: Option<std::path::PathBuf>,
    /// [`HostBuilder::worker_env_passthrough`].
    worker_env_passthrough: bool,
}

impl HostBuilder {
    /// Adds a source: the work of the `unsafe` methods that name native or Python code
    /// (`host::sources`), whose callers vouched for it, and of the default global host's
    /// (`host::global`).
    pub(crate) fn source(mut self, source: Source) -> Self {
        self.sources.push(source);
        self
    }

    /// A plugin compiled into the host: `register` is called at each load, like a library
    /// plugin's `register_passes`, and may add passes and unload hooks. A panic in it is
    /// caught and fails the load with [`Error::Panicked`].
    ///
    /// `register` belongs to the host, and a loaded set may outlive the host. If a pass's
    /// `user_data` points into state that `register` owns, move a clone of that owner (an
    /// `Arc`, say) into an [`on_unload`](StaticRegistrar::on_unload) hook, which lives exactly as long
    /// as the set.
    pub fn static_plugin<R>(mut self, name: impl Into<String>, register: R) -> Self
    where
        R: Fn(&mut StaticRegistrar) -> Result<(), RegisterError> + Send + Sync + 'static,
    {
        self.sources.push(Source::Static(StaticPlugin {
            name: name.into(),
            register: Box::new(register),
        }));
        self
    }

    /// What a load does when one plugin fails; [`LoadPolicy::Strict`] by default.
    pub fn policy(mut self, policy: LoadPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// Which plugin files the host agrees to open; [`TrustPolicy::Strict`] by default on
    /// Unix, which refuses files that users other than this process's own (or root) could
    /// have changed.
    pub fn trust(mut self, trust: TrustPolicy) -> Self {
        self.trust = trust;
        self
    }

    /// When the set unloads once no user holds a lease; [`UnloadPolicy::Immediately`] by
    /// default.
    pub fn unload(mut self, unload: UnloadPolicy) -> Self {
        self.unload = unload;
        self
    }

    /// Makes the host's sets on-demand: a library plugin whose manifest is complete (every
    /// plugin built with the C/C++ header's `DYLEASE_PLUGIN` and `DYLEASE_PASS` macros, or
    /// [`export_plugin!`](crate::export_plugin) with its passes listed) joins a set *unmapped*,
    /// and is mapped the first time a lease of the set asks for a callable of one of its
    /// passes ([`Lease::get`](crate::Lease::get), [`Lease::pass`](crate::Lease::pass),
    /// [`Lease::passes_of`](crate::Lease::passes_of)). For a process that uses a few passes of
    /// a directory of many plugins.
    ///
    /// At [`acquire`](PluginHost::acquire), such a plugin is judged as an eager load judges
    /// it before mapping: the trust check, the open, the ELF check, the manifest read and its
    /// ABI gate; then its descriptor is closed (an unmapped plugin holds none: only its
    /// file's identity and its manifest). A file unchanged since an earlier load of this
    /// process (the same device, inode, size, times: the parse cache's key, read by
    /// discovery's `fstatat`) is not even opened: what its ELF check and manifest decided is
    /// taken from the parse cache, and the first use opens it and holds it to the file judged.
    /// Pass names that collide between manifests, or with
    /// a mapped plugin's passes, fail the acquire as they fail an eager load (or are skipped
    /// under [`LoadPolicy::SkipFailed`]). Plugins without a complete manifest, static plugins
    /// and Python plugins are loaded at `acquire()` as usual.
    ///
    /// What changes for the caller:
    ///
    /// - [`PluginSet::plugins`](crate::PluginSet::plugins), [`passes`](crate::PluginSet::passes)
    ///   and [`pass_info`](crate::PluginSet::pass_info) answer from the manifests, mapping
    ///   nothing; [`PluginInfo::is_mapped`](crate::PluginInfo::is_mapped) tells which plugins
    ///   are mapped.
    /// - The first call that needs a plugin's pass maps the library and runs its `on_load`
    ///   and `register_passes` on the calling thread: that call takes the time of a load of
    ///   one plugin. The plugin then stays mapped until the set's last lease is dropped, and
    ///   unloads with the set, mapped plugins in the reverse of the order they were mapped.
    /// - A failure to map (its `on_load` failed, a missing dependency, a registration that
    ///   differs from the manifest, a file replaced, removed or rewritten since the acquire, a
    ///   directory on its way others can now write: a first use judges its trust again) is the error of that
    ///   call ([`Error::MapFailed`], naming the plugin, with the cause as its source), and of
    ///   every later call that needs that plugin; the set's other plugins work.
    ///   [`reload`](PluginHost::reload) makes a new set that tries again.
    /// - Calls that race for one plugin's first use map it once; the others wait at most
    ///   [`map_timeout`](HostBuilder::map_timeout).
    ///
    /// # Example
    ///
    /// ```no_run
    /// pub struct IntOp;
    /// // SAFETY: every pass registered under "math.int_op/1" is an `extern "C" fn(i32) -> i32`.
    /// unsafe impl dylease::Interface for IntOp {
    ///     const ID: &'static str = "math.int_op/1";
    ///     type Fn = unsafe extern "C" fn(i32) -> i32;
    /// }
    ///
    /// // SAFETY: /opt/app/plugins holds this application's own plugins.
    /// let host = unsafe { dylease::PluginHost::builder().dir("/opt/app/plugins") }
    ///     .on_demand()
    ///     .build()?;
    /// let lease = host.acquire()?; // maps no plugin that has a complete manifest
    /// let double = lease.get::<IntOp>("double")?; // maps the plugin of `double`, only it
    /// // SAFETY: the lease is alive; `double` takes any `i32`.
    /// assert_eq!(unsafe { double(21) }, 42);
    /// # Ok::<(), dylease::Error>(())
    /// ```
    pub fn on_demand(mut self) -> Self {
        self.on_demand = Some(crate::load::demand::defer);
        self
    }

    /// How long a lease's call waits for another thread's mapping of the same on-demand
    /// plugin ([`on_demand`](HostBuilder::on_demand)) before it fails with
    /// [`Error::TimedOut`] ([`Waited::Mapping`](crate::Waited::Mapping)); also the bound of the
    /// mapping's own waits for another set's open or unload of the same file. 60 s by default.
    pub fn map_timeout(mut self, timeout: Duration) -> Self {
        self.map_timeout = Some(timeout);
        self
    }

    /// Makes the host's sets isolated: each set (each generation) runs its library plugins in
    /// a worker process of its own, one worker per set. The host checks each plugin file as
    /// every load does (discovery, the trust check, the ELF and manifest checks), then hands
    /// the checked descriptor to the worker, which maps that very file (never a path) and runs
    /// its constructors, `on_load` and `register_passes`. The set's last lease drop has the
    /// worker run the `on_unload` hooks and exit, and reaps it. (Crate feature `isolate`.)
    /// [`docs::isolation`](crate::docs::isolation) has the whole story; in short:
    ///
    /// - **Choose it** for plugins that may crash, abort, call `exit()` or hang (a fault fails
    ///   the set with [`Error::WorkerFailed`], naming the plugin, the pass, the signal or exit
    ///   status; the host process lives on, and after the set's last lease the next
    ///   `acquire()` starts a fresh worker), and for libraries the platform will not unload in
    ///   a process (`-z nodelete`, C++ GNU unique symbols): the worker's exit unloads them.
    /// - **Passes are messages**: the host calls a plugin's message passes (bytes in, bytes
    ///   out: `DYLEASE_MESSAGE_PASS` in C, [`MessagePass`](crate::MessagePass) in Rust) with
    ///   [`Lease::call`](crate::Lease::call). A function pointer cannot cross a process:
    ///   [`Lease::get`](crate::Lease::get), [`pass`](crate::Lease::pass) and
    ///   [`passes_of`](crate::Lease::passes_of) refuse the worker's pointer passes, saying so.
    ///   Static plugins stay in the host, and their passes work as usual.
    /// - **What it costs**: a process start on the set's first `acquire()` and an exit at its
    ///   unload; a socket round trip per call, and the copies of input and output (above
    ///   64 KiB through a sealed shared memory region; at most 256 MiB each).
    /// - **It isolates faults, not privileges**: the worker runs as the host's user and can do
    ///   what the host can. It starts with `PR_SET_NO_NEW_PRIVS`, no descriptor of the host's
    ///   but its standard streams, none of the host's `LD_*` variables, and dies with the host.
    /// - **The worker program** is the host's own executable: dylease's hook runs before
    ///   `main` and turns that process into a worker (or into the zygote that forks the
    ///   process's workers, started with the first), so every program and test binary that
    ///   builds an isolated host has workers without set-up. [`worker_command`](Self::worker_command)
    ///   names another.
    /// - **Dependencies** a plugin needs from its run path (under [`TrustPolicy::Strict`])
    ///   are checked by the host and mapped in the worker from the host's descriptors, before
    ///   the plugin, as an ordinary set maps them in the host.
    /// - **Not yet**: Python plugins are refused
    ///   ([`OpenCause::Isolation`](crate::OpenCause::Isolation)): the worker would need an
    ///   interpreter of its own; an isolated host cannot be [`on_demand`](Self::on_demand);
    ///   Linux only.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use std::time::Duration;
    ///
    /// // SAFETY: /opt/app/filters holds this application's filters; their faults stay in the worker.
    /// let host = unsafe { dylease::PluginHost::builder().dir("/opt/app/filters") }
    ///     .isolated()
    ///     .call_deadline(Duration::from_secs(5))
    ///     .build()?;
    /// let lease = host.acquire()?; // starts the worker, which maps the filters
    /// match lease.call("sanitize", b"<b>hi</b>") {
    ///     Ok(output) => println!("{}", String::from_utf8_lossy(&output)),
    ///     // A crash or a hang of the filter: the host goes on.
    ///     Err(error) => eprintln!("{error}"),
    /// }
    /// # Ok::<(), dylease::Error>(())
    /// ```
    #[cfg(feature = "isolate")]
    pub fn isolated(mut self) -> Self {
        #[cfg(all(target_os = "linux", not(loom)))]
        let begin = Some(crate::isolate::begin as crate::isolate::Begin);
        #[cfg(not(all(target_os = "linux", not(loom))))]
        let begin = None;
        self.isolation.begin = Some(begin);
        self
    }

    /// How long a call of an isolated set's pass may run ([`isolated`](Self::isolated)): a
    /// call still running then kills the worker, and fails the set with
    /// [`Error::WorkerFailed`] ([`WorkerCause::Deadline`](crate::WorkerCause::Deadline)).
    /// The same bound applies to the worker's start, to each plugin's load in it, and to its
    /// unload (after which it is killed). 30 s by default. (Crate feature `isolate`.)
    #[cfg(feature = "isolate")]
    pub fn call_deadline(mut self, deadline: Duration) -> Self {
        self.isolation.call_deadline = Some(deadline);
        self
    }

    /// The program an isolated host's workers run ([`isolated`](Self::isolated)), instead of
    /// the host's own executable (`/proc/self/exe`), executed for each worker (no zygote
    /// forks them; [`docs::isolation`](crate::docs::isolation)): for a host that cannot be run again (a
    /// program embedding dylease through a library another runtime loads), or to start
    /// workers through a wrapper of the operator's. It must run dylease's worker hook, which
    /// runs before its `main` (`main` never runs in a worker): any program that links dylease
    /// with the `isolate` feature keeps it, such as one whose `main` is
    /// `std::hint::black_box(dylease::PluginHost::builder().isolated());`, built from the same
    /// version of dylease as the host (the handshake refuses another). A program without the
    /// hook fails the `acquire()` with [`WorkerCause::Start`](crate::WorkerCause::Start).
    /// (Crate feature `isolate`.)
    #[cfg(feature = "isolate")]
    pub fn worker_command(mut self, program: impl Into<std::path::PathBuf>) -> Self {
        self.isolation.worker_command = Some(program.into());
        self
    }

    /// Passes the host's `LD_*` environment variables (`LD_PRELOAD`, `LD_LIBRARY_PATH`, …) to
    /// an isolated host's workers ([`isolated`](Self::isolated)), which by default get none of
    /// them: a preloaded sanitizer or tracer of the host's then runs in its workers too, and a
    /// plugin's system libraries may be found through the host's `LD_LIBRARY_PATH`. (Crate
    /// feature `isolate`.)
    #[cfg(feature = "isolate")]
    pub fn worker_env_passthrough(mut self) -> Self {
        self.isolation.worker_env_passthrough = true;
        self
    }

    /// The host's name, which begins each of its log lines (`[graph-session] loaded
    /// generation 1: …`) and is its [`Stats::name`](crate::Stats::name): two components that build hosts over
    /// one directory can then tell their lines apart. By default `host-N`, N the host's
    /// number in the process.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Reloads the host, as [`PluginHost::reload`] does, whenever one of its plugin sources
    /// changes and then `debounce` passes without a further change. (Crate feature `watch`.)
    ///
    /// Watched, from [`build`](HostBuilder::build) on: each [`dir`](HostBuilder::dir) (a
    /// library created, replaced, removed or changed in it); the directory holding each
    /// [`file`](HostBuilder::file) (for that file's name only); and the directories that each
    /// [`env`](HostBuilder::env) variable lists *when the host is built*. A later change of
    /// the variable is not watched (call [`reload`](PluginHost::reload) after one), nor are
    /// subdirectories or static plugins. A path through symlinks (`/opt/app/plugins ->
    /// releases/v7`) is watched where it leads, and so is each symlink on the way: pointing
    /// one elsewhere reloads the host from the new target and moves the watches there.
    /// Opening and reading a library, as a load does, is not a change.
    ///
    /// Each reload is logged at `info` and each failure at `warn`, with the error; a failed
    /// reload leaves the current generation current, and the next change tries again. A file
    /// still being written is not loaded half: the debounce waits for writing to pause, and a
    /// library still incomplete then fails the load's ELF check. Install plugins by rename
    /// (write beside, then `mv`): a library rewritten in place while it is mapped crashes the
    /// platform loader, watched or not.
    ///
    /// The watcher holds the new set's lease only while it logs the reload: under
    /// [`UnloadPolicy::Immediately`](super::UnloadPolicy::Immediately) with no user lease
    /// alive, the reloaded set unloads at once, and the next
    /// [`acquire`](PluginHost::acquire) loads again. Use
    /// [`UnloadPolicy::After`](super::UnloadPolicy::After) or
    /// [`WithHost`](super::UnloadPolicy::WithHost) to keep it loaded.
    ///
    /// The watcher ends with the host: dropping the host stops it. A reload in progress (one
    /// waiting for another host's slow unload, say) is waited for at most 2 s; then the drop
    /// goes on, logs a warning, and the reload finishes on the watcher thread.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// use dylease::{PluginHost, UnloadPolicy};
    ///
    /// // SAFETY: /opt/app/plugins holds this application's own plugins.
    /// let host = unsafe { PluginHost::builder().dir("/opt/app/plugins") }
    ///     .unload(UnloadPolicy::WithHost)
    ///     .watch(Duration::from_millis(500))
    ///     .build()?;
    /// // `dylease install libnew.so /opt/app/plugins` elsewhere: half a second later,
    /// // `acquire()` returns generation 2 with the new code.
    /// let lease = host.acquire()?;
    /// # Ok::<(), dylease::Error>(())
    /// ```
    #[cfg(feature = "watch")]
    pub fn watch(mut self, debounce: Duration) -> Self {
        self.watch = Some(debounce);
        self
    }

    /// Finishes the configuration. Nothing is loaded until the first
    /// [`acquire`](PluginHost::acquire).
    ///
    /// # Errors
    ///
    /// [`Error::Config`] if a static plugin has an empty name or one longer than 256 bytes, or
    /// two static plugins share a name.
    /// With `watch` (crate feature `watch`), [`Error::Io`] naming a directory that cannot
    /// be watched. With `isolate`, [`Error::Config`] for an isolated host
    /// (`HostBuilder::isolated`) that is also [on-demand](Self::on_demand), or on a platform
    /// other than Linux.
    pub fn build(self) -> Result<PluginHost, Error> {
        self.validate()?;
        match self.watch {
            Some(debounce) => self.build_unchecked().watched(debounce),
            None => Ok(self.build_unchecked()),
        }
    }

    /// The checks of [`HostBuilder::build`].
    fn validate(&self) -> Result<(), Error> {
        #[cfg(feature = "isolate")]
        if self.isolation.begin.is_some() {
            crate::isolate::supported(self.on_demand.is_some()).map_err(|reason| Error::Config { reason })?;
        }
        let mut names = std::collections::HashSet::new();
        for source in &self.sources {
            if let Source::Static(plugin) = source {
                if plugin.name.is_empty() {
                    return Err(Error::Config {
                        reason: "a static plugin has an empty name; give it a name".into(),
                    });
                }
                if plugin.name.len() > MAX_NAME_LEN {
                    return Err(Error::Config {
                        reason: format!("a static plugin name is longer than {MAX_NAME_LEN} bytes; shorten it"),
                    });
                }
                if !names.insert(plugin.name.as_str()) {
                    return Err(Error::Config {
                        reason: format!("two static plugins are named `{}`; names must be unique", plugin.name),
                    });
                }
            }
        }
        Ok(())
    }

    pub(super) fn build_unchecked(self) -> PluginHost {
        PluginHost {
            config: Arc::new(LoadConfig {
                sources: self.sources.into(),
                policy: self.policy,
                trust: self.trust,
                signatures: self.signatures,
                on_demand: self.on_demand,
                map_timeout: self.map_timeout.unwrap_or(crate::load::DEFAULT_MAP_TIMEOUT),
                #[cfg(feature = "isolate")]
                isolation: self.isolation.begin.flatten().map(|begin| crate::isolate::Isolation {
                    begin,
                    command: self.isolation.worker_command,
                    deadline: self
                        .isolation
                        .call_deadline
                        .unwrap_or(crate::isolate::DEFAULT_CALL_DEADLINE),
                    ld_passthrough: self.isolation.worker_env_passthrough,
                }),
            }),
            generations: Arc::new(Generations::new(self.unload, self.name)),
            watch: None,
        }
    }
}
