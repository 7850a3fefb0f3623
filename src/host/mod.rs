//! The host: configuration plus the process-wide slot, and the slot protocol.
// `unsafe` here: the builder methods that name native code are `unsafe fn`s (the caller vouches for it); `getauxval`.
#![allow(unsafe_code)]

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::load::{LoadPolicy, LoadedPlugins, MAX_NAME_LEN, Registrar, Source, StaticPlugin, TrustPolicy};
use crate::sync::Arc;

mod generations;
mod lease;
mod reentry;
mod set;
mod stats;
#[cfg(feature = "watch")]
mod watch;

pub use lease::{Lease, OwnedPass, Pass, WeakLease};
pub use set::PluginSet;
pub use stats::Stats;

use generations::Generations;

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
    config: Arc<LoadConfig>,
    generations: Arc<Generations>,
    /// The watcher of [`HostBuilder::watch`]; it holds `config` weakly, so it ends with the host.
    #[cfg(feature = "watch")]
    watch: Option<watch::Watch>,
}

/// What every load of a host reads.
#[derive(Debug)]
struct LoadConfig {
    sources: Box<[Source]>,
    policy: LoadPolicy,
    trust: TrustPolicy,
}

impl LoadConfig {
    /// Runs the load pipeline over every source, under the host's policies. On failure
    /// everything registered so far is unloaded before the error is returned.
    fn load(&self, deadline: Option<Instant>) -> Result<LoadedPlugins, Error> {
        crate::load::load(&self.sources, self.policy, self.trust, deadline)
    }
}

/// When a host's plugin set unloads once no user holds a lease of it.
///
/// Every unload is still the drop of the set's last `Arc`: under `After` and `WithHost` the
/// host holds one lease of its own, and dropping it is what unloads.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use dylease::{PluginHost, UnloadPolicy};
///
/// // A compiler that runs many short single-op compiles: keep the plugins for 2 s of quiet.
/// let host = PluginHost::builder()
///     .static_plugin("builtin", |_reg: &mut dylease::Registrar| Ok(()))
///     .unload(UnloadPolicy::After(Duration::from_secs(2)))
///     .build()?;
/// for _ in 0..100 {
///     let lease = host.acquire()?;
///     drop(lease); // the host's own lease keeps the set loaded
/// }
/// assert_eq!(host.stats().loads, 1);
/// # Ok::<(), dylease::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnloadPolicy {
    /// The set unloads in the drop of its last user lease (the default).
    #[default]
    Immediately,
    /// The host keeps the newest set loaded until no user lease of it has been seen for this
    /// long, then drops its own lease, which unloads it. A background thread of the host looks
    /// every eighth of the duration (between 1 ms and 250 ms), so a user lease that lives
    /// shorter than that between two looks may go unseen; the thread ends with the host.
    ///
    /// The unload then runs on that thread, named `dylease-keeper`: the plugins' `on_unload`,
    /// their libraries' termination routines and `dlclose` run there, not on a thread of
    /// yours. Plugin code that needs a particular thread for its teardown (thread-affine
    /// state, a thread-local it registered) must not rely on the unloading thread. (If the
    /// host is dropped first, the host's drop runs the unload instead.)
    After(Duration),
    /// The host keeps the newest set loaded until the host itself is dropped.
    WithHost,
}

impl Drop for PluginHost {
    /// Drops the host's own lease (under [`UnloadPolicy::After`] and
    /// [`UnloadPolicy::WithHost`]), which unloads the set here unless a user still holds one.
    fn drop(&mut self) {
        // The watcher first: no reload starts once the host's own lease is gone.
        #[cfg(feature = "watch")]
        drop(self.watch.take());
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
    /// Starts configuring a host.
    pub fn builder() -> HostBuilder {
        HostBuilder::default()
    }

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
    /// nested call's check is per thread; see the README's "Limits"): a bound turns that into
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
    ///     .static_plugin("builtin", |_reg: &mut dylease::Registrar| Ok(()))
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
    /// [`PluginSet::generation`]) and unload when their last lease drops.
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
    ///     .static_plugin("builtin", |_reg: &mut dylease::Registrar| Ok(()))
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
    fn load(&self, deadline: Option<Instant>) -> Result<LoadedPlugins, Error> {
        crate::load::log_scope::with_host(self.generations.stats.name(), || self.config.load(deadline))
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
    ///     .static_plugin("builtin", |_reg: &mut dylease::Registrar| Ok(()))
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

/// Configures a [`PluginHost`]. Sources load in the order they are added.
#[derive(Debug, Default)]
pub struct HostBuilder {
    sources: Vec<Source>,
    policy: LoadPolicy,
    trust: TrustPolicy,
    unload: UnloadPolicy,
    name: Option<String>,
    #[cfg(feature = "watch")]
    watch: Option<Duration>,
}

impl HostBuilder {
    /// Every plugin library directly in `dir` (not in subdirectories): regular files with the
    /// platform's library suffix (`.so` on Linux), in byte order of file name. Symlinks are
    /// followed; a file reached twice loads once.
    ///
    /// The directory is read at each load. A missing directory, or a path that is not a
    /// directory, makes the load fail with an error naming it.
    ///
    /// # Safety
    ///
    /// Loading a library runs its initialisation routines (constructors), and the host then
    /// calls its entry point, `on_load`, `register_passes` and later `on_unload` and its
    /// termination routines, from whichever thread acquires or drops the last lease. The
    /// caller vouches that running that code is sound, as for calling any unknown foreign
    /// function (the same contract as `libloading::Library::new`): the libraries this source
    /// names are plugins built for this host's ABI, whose code upholds Rust's rules for
    /// whatever they touch, and whose passes have the signatures the host later asks for.
    /// [`TrustPolicy::Strict`] (the default) checks who could have *changed* the files; it
    /// cannot check what the code does.
    ///
    /// # Example
    ///
    /// ```no_run
    /// // SAFETY: /opt/app/plugins holds this application's own plugins.
    /// let host = unsafe { dylease::PluginHost::builder().dir("/opt/app/plugins") }.build()?;
    /// # Ok::<(), dylease::Error>(())
    /// ```
    pub unsafe fn dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.sources.push(Source::Dir(dir.into()));
        self
    }

    /// One plugin library.
    ///
    /// # Safety
    ///
    /// Loading a library runs its initialisation routines (constructors), and the host then
    /// calls its entry point, `on_load`, `register_passes` and later `on_unload` and its
    /// termination routines, from whichever thread acquires or drops the last lease. The
    /// caller vouches that running that code is sound, as for calling any unknown foreign
    /// function (the same contract as `libloading::Library::new`): the libraries this source
    /// names are plugins built for this host's ABI, whose code upholds Rust's rules for
    /// whatever they touch, and whose passes have the signatures the host later asks for.
    /// [`TrustPolicy::Strict`] (the default) checks who could have *changed* the files; it
    /// cannot check what the code does.
    pub unsafe fn file(mut self, file: impl Into<PathBuf>) -> Self {
        self.sources.push(Source::File(file.into()));
        self
    }

    /// The directories listed in the environment variable `var`, separated by the
    /// platform's path-list separator (`:` on Unix), read at each load. An unset variable
    /// lists none; a relative directory is refused.
    ///
    /// # Safety
    ///
    /// Loading a library runs its initialisation routines (constructors), and the host then
    /// calls its entry point, `on_load`, `register_passes` and later `on_unload` and its
    /// termination routines, from whichever thread acquires or drops the last lease. The
    /// caller vouches that running that code is sound, as for calling any unknown foreign
    /// function (the same contract as `libloading::Library::new`): the libraries in every directory
    /// whoever sets the variable lists are plugins built for this host's ABI, whose code upholds Rust's rules for
    /// whatever they touch, and whose passes have the signatures the host later asks for.
    /// [`TrustPolicy::Strict`] (the default) checks who could have *changed* the files; it
    /// cannot check what the code does.
    pub unsafe fn env(mut self, var: impl Into<OsString>) -> Self {
        self.sources.push(Source::Env(var.into()));
        self
    }

    /// Adds a source (the Python sources of `crate::python`).
    #[cfg(feature = "python")]
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
    /// `Arc`, say) into an [`on_unload`](Registrar::on_unload) hook, which lives exactly as long
    /// as the set.
    pub fn static_plugin<R>(mut self, name: impl Into<String>, register: R) -> Self
    where
        R: Fn(&mut Registrar) -> Result<(), Error> + Send + Sync + 'static,
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

    /// Formerly where private copies of changed plugin files went. The loader now maps the
    /// descriptor the checks read, under a name that no other file can have, so a changed
    /// file loads beside its old mapping without a copy: this setting does nothing.
    #[deprecated(
        since = "0.2.0",
        note = "changed plugin files load without private copies; remove the call"
    )]
    pub fn reload_dir(self, dir: impl Into<PathBuf>) -> Self {
        let _ = dir.into();
        self
    }

    /// The host's name, which begins each of its log lines (`[graph-session] loaded
    /// generation 1: …`) and is its [`Stats::name`]: two components that build hosts over
    /// one directory can then tell their lines apart. By default `host-N`, N the host's
    /// number in the process.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
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
    /// be watched.
    pub fn build(self) -> Result<PluginHost, Error> {
        self.validate()?;
        #[cfg(feature = "watch")]
        if let Some(debounce) = self.watch {
            return watch::start(self.build_unchecked(), debounce);
        }
        Ok(self.build_unchecked())
    }

    /// The checks of [`HostBuilder::build`].
    fn validate(&self) -> Result<(), Error> {
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

    fn build_unchecked(self) -> PluginHost {
        PluginHost {
            config: Arc::new(LoadConfig {
                sources: self.sources.into(),
                policy: self.policy,
                trust: self.trust,
            }),
            generations: Arc::new(Generations::new(self.unload, self.name)),
            #[cfg(feature = "watch")]
            watch: None,
        }
    }
}

/// The name of the environment variable the [`global`] host reads.
pub const GLOBAL_PATH_VAR: &str = "DYLEASE_PLUGIN_PATH";

static GLOBAL: once_cell::sync::OnceCell<PluginHost> = once_cell::sync::OnceCell::new();

/// Configures the process-wide host that [`global`] returns, once, before its first use: its
/// sources and policies (say, [`LoadPolicy::SkipFailed`], so that one missing directory in a
/// path variable does not fail every load), like `log::set_logger`.
///
/// # Safety
///
/// As for [`HostBuilder::dir`], [`HostBuilder::file`] and [`HostBuilder::env`]: the caller
/// vouches for the native code the configured sources name.
///
/// # Errors
///
/// [`Error::Config`] if the global host was already configured or used, or if the
/// configuration is invalid (see [`HostBuilder::build`]).
///
/// # Example
///
/// ```no_run
/// use dylease::{LoadPolicy, PluginHost};
///
/// fn main() -> Result<(), dylease::Error> {
///     // SAFETY: the directories in MYAPP_PLUGIN_PATH hold this application's own plugins.
///     unsafe {
///         dylease::init_global(
///             PluginHost::builder().env("MYAPP_PLUGIN_PATH").policy(LoadPolicy::SkipFailed),
///         )
///     }?;
///     let lease = dylease::global().acquire()?;
///     # drop(lease);
///     Ok(())
/// }
/// ```
pub unsafe fn init_global(builder: HostBuilder) -> Result<(), Error> {
    #[cfg(feature = "watch")]
    if builder.watch.is_some() {
        return Err(Error::Config {
            reason: "the global host cannot watch its sources; build a host of your own to watch".into(),
        });
    }
    // Built (which loads nothing) and checked now, so that a bad configuration fails here
    // and not at the first `global()`; `set` fails once `global()` has made the default host.
    let host = builder.build()?;
    GLOBAL.set(host).map_err(|_| Error::Config {
        reason: "the global host was already configured or used; call init_global once, before global()".into(),
    })
}

/// The process-wide host: the one [`init_global`] configured, or by default one named
/// `global` over the plugin directories listed in `DYLEASE_PLUGIN_PATH` (read at each load;
/// unset means no plugins), with default policies.
///
/// The default is safe to use because the environment of a process already chooses its code
/// (`LD_PRELOAD`, `LD_LIBRARY_PATH`): whoever can set `DYLEASE_PLUGIN_PATH` can set those. Like
/// the platform loader, the default ignores the variable in a process that runs with elevated
/// rights (set-user-ID and the like: `AT_SECURE`), where the environment comes from a less
/// trusted user. A program that names a variable or directory itself vouches for it through
/// the `unsafe` builder methods or [`init_global`].
///
/// # Example
///
/// ```
/// let lease = dylease::global().acquire()?;
/// println!("{} plugins", lease.plugins().len());
/// # Ok::<(), dylease::Error>(())
/// ```
pub fn global() -> &'static PluginHost {
    GLOBAL.get_or_init(|| {
        let builder = HostBuilder::default().name("global");
        if secure_execution() {
            log::warn!("[global] {GLOBAL_PATH_VAR} is ignored in a process running with elevated rights");
            return builder.build_unchecked();
        }
        // SAFETY: the process's environment already chooses its code (see above), and a
        // process whose environment comes from a less trusted user does not get here.
        unsafe { builder.env(GLOBAL_PATH_VAR) }.build_unchecked()
    })
}

/// Whether this process runs with elevated rights given by its executable (set-user-ID,
/// set-group-ID, file capabilities): the platform loader's `AT_SECURE`.
fn secure_execution() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `getauxval` only reads the auxiliary vector the kernel gave the process.
        unsafe { libc::getauxval(libc::AT_SECURE) != 0 }
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}
