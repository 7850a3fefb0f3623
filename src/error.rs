//! The error room, the shared vocabulary below every other: the error type (every variant
//! names the file or static plugin and the cause), and [`time_left`], the one reckoning of a
//! wait's deadline. It calls nothing of the crate.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Where a plugin comes from: a library file or a static plugin compiled into the host.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Origin {
    /// A shared library, by the path it was discovered at.
    File(PathBuf),
    /// A static plugin, by the name given to `HostBuilder::static_plugin`.
    Static(String),
    /// A library plugin as it knows itself, by its descriptor name: what a Rust plugin's own
    /// code sees in errors from [`LibraryRegistrar`](crate::LibraryRegistrar).
    Named(String),
}

impl Origin {
    /// The library path, or `None` for a static plugin.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Origin::File(path) => Some(path),
            Origin::Static(_) | Origin::Named(_) => None,
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::File(path) => write!(f, "plugin file `{}`", path.display()),
            Origin::Static(name) => write!(f, "static plugin `{name}`"),
            Origin::Named(name) => write!(f, "plugin `{name}`"),
        }
    }
}

/// Which check refused a library file: see [`Error::Open`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OpenCause {
    /// dylease's own reading of the file's ELF headers, before any loader saw it: the file is
    /// not ELF, is truncated, or was built for another architecture or byte order.
    Headers,
    /// The platform loader refused it (`dlopen` failed: a missing dependency or symbol, …).
    Loader,
    /// The file was replaced, under the name the loader had to find it by, every time the
    /// host checked it again (a library whose run path uses `$ORIGIN` is found through its
    /// directory): a host checks a replaced file and tries again, so this is seen only while
    /// installs keep replacing it.
    Replaced,
    /// dylease's own reading of the plugin's manifest, before any loader saw the file: the
    /// manifest is corrupt, or written in a format version this host does not read (see
    /// [`Manifest`](crate::Manifest)). None of the plugin's code ran.
    Manifest,
    /// The process ran out of file descriptors (`EMFILE`: it has as many files open as
    /// `ulimit -n` allows) or the system did (`ENFILE`) while dylease checked or opened the
    /// file, or a library it needs, before any loader saw it: nothing is known to be wrong with
    /// the file, and none of its code ran. Raise the limit (each loaded library keeps a
    /// descriptor open; see [`docs::reload`](crate::docs::reload#descriptors)). A loader
    /// that runs out while it maps the file is [`Loader`](OpenCause::Loader), its message
    /// naming the limit too.
    Descriptors,
    /// The plugin of an on-demand set ([`HostBuilder::on_demand`](crate::HostBuilder::on_demand))
    /// was judged when the set was acquired, and its file was replaced, removed or rewritten
    /// in place (another status: size, times) before its first use mapped it: the set maps
    /// only the file it judged, so it refuses the new one without mapping it. [`reload`](crate::PluginHost::reload) loads the new
    /// file. None of the new file's code ran.
    ReplacedSinceAcquire,
    /// An isolated set ([`docs::isolation`](crate::docs::isolation)) cannot load it: it is a
    /// Python plugin (the worker would need an interpreter of its own; not yet), or the worker
    /// process refused what the host sent for it. The reason says which and what to do.
    Isolation,
}

/// Everything that can go wrong while configuring a host or loading its plugins.
///
/// Each message is a sentence that names the file (or static plugin) and the cause; for
/// [`Error::Io`] the operating system's error is the [`source`](std::error::Error::source),
/// not part of the message, as the `std::error::Error` convention asks (print the chain to
/// show both). A failed
/// [`acquire`](crate::PluginHost::acquire) has already closed every library it opened and left
/// the host ready for the next attempt.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// The file cannot be loaded as a library: its headers show it is not a shared library
    /// for this process (not ELF, truncated, another architecture), its manifest is corrupt
    /// or of an unknown format, the platform loader refused it (`dlopen` failed: a missing
    /// dependency or symbol, …), or it kept being replaced: `cause` says which.
    #[non_exhaustive]
    Open {
        /// The library file.
        path: PathBuf,
        /// What is wrong: the host's reading of the file's headers or manifest, or the
        /// loader's own explanation (`dlerror`).
        reason: String,
        /// Which check refused the file.
        cause: OpenCause,
    },
    /// The trust check refused the file before opening it: another user could have changed
    /// it (see [`TrustPolicy::Strict`](crate::TrustPolicy::Strict)). None of its code ran.
    #[non_exhaustive]
    Untrusted {
        /// The library file, as discovered.
        path: PathBuf,
        /// Which file or directory failed the check, its owner or mode, and how to fix it.
        reason: String,
    },
    /// The library loaded but does not export the entry point `dylease_plugin_v1`.
    #[non_exhaustive]
    MissingEntry {
        /// The library file.
        path: PathBuf,
        /// The loader's own explanation (`dlerror`).
        reason: String,
    },
    /// The plugin was built for an ABI version this host does not speak: it speaks every
    /// version from [`DYLEASE_OLDEST_ABI_VERSION`](crate::abi::DYLEASE_OLDEST_ABI_VERSION) to
    /// `expected`.
    #[non_exhaustive]
    AbiMismatch {
        /// The library file.
        path: PathBuf,
        /// The version in the plugin's descriptor, or in its manifest.
        found: u32,
        /// The newest version this host speaks ([`DYLEASE_ABI_VERSION`](crate::abi::DYLEASE_ABI_VERSION)).
        expected: u32,
        /// Whether `found` was read from the plugin's manifest, before the library was
        /// mapped: then none of its code ran. A plugin without a manifest is refused after
        /// its descriptor was read, once the loader ran its constructors.
        declared: bool,
    },
    /// What the plugin registered differs from what its manifest declares (see
    /// [`Manifest`](crate::Manifest)): its descriptor's name or version, or, for a complete
    /// manifest, the set of its passes. The plugin was unloaded (if no other set uses it).
    #[non_exhaustive]
    ManifestMismatch {
        /// The plugin.
        plugin: Origin,
        /// Each difference, naming the pass.
        reason: String,
    },
    /// The plugin's `on_load` (ABI version 2) returned non-zero. Its `register_passes` and
    /// `on_unload` were not called, and the library was closed.
    #[non_exhaustive]
    OnLoadFailed {
        /// The library file.
        path: PathBuf,
        /// What `on_load` returned.
        code: i32,
    },
    /// The plugin's descriptor is unusable: a NULL descriptor, a missing or non-UTF-8 name.
    #[non_exhaustive]
    InvalidPlugin {
        /// The plugin.
        plugin: Origin,
        /// What is wrong with it.
        reason: String,
    },
    /// A pass was refused: an empty or non-UTF-8 name, a NULL function, or (for a typed pass)
    /// a NULL, empty, too long or non-UTF-8 interface. (A name used twice is
    /// [`DuplicatePass`](Error::DuplicatePass).)
    #[non_exhaustive]
    InvalidPass {
        /// The plugin that tried to register it.
        plugin: Origin,
        /// The pass name as given (lossily decoded).
        pass: String,
        /// Why it was refused.
        reason: String,
    },
    /// The plugin's registration reported failure.
    #[non_exhaustive]
    RegisterFailed {
        /// The plugin.
        plugin: Origin,
        /// What it reported: a return code, or the static plugin's own error.
        reason: String,
        /// The static plugin's own error, if it returned one. Its message is already in
        /// `reason` (and so in `Display`); `std::error::Error::source` continues with that
        /// error's own source.
        source: Option<Box<Error>>,
    },
    /// Two plugins registered a pass under the same name.
    #[non_exhaustive]
    DuplicatePass {
        /// The pass name.
        pass: String,
        /// The plugin that registered it first.
        first: Origin,
        /// The plugin that registered it again.
        second: Origin,
    },
    /// [`Lease::get`](crate::Lease::get) found no
    /// pass of the asked interface under that name: see `cause` for which of the three ways.
    /// Also [`Lease::pass`](crate::Lease::pass)'s error when no plugin registered the name.
    #[non_exhaustive]
    PassLookup {
        /// The pass name asked for.
        pass: String,
        /// The interface asked for ([`Interface::ID`](crate::Interface::ID)); empty for the
        /// untyped lookup of [`Lease::pass`](crate::Lease::pass), which asks for none.
        expected: &'static str,
        /// Why the lookup failed (boxed to keep `Error` small).
        cause: Box<LookupFailure>,
    },
    /// [`acquire`](crate::PluginHost::acquire) was called on a host from inside that host's own
    /// load or unload on the same thread (a plugin constructor, register function or unload
    /// hook), or a lease's call asked for a pass of an on-demand plugin that must be mapped
    /// ([`HostBuilder::on_demand`](crate::HostBuilder::on_demand)) from inside such code, for
    /// example from the `on_load` of the plugin being mapped. Waiting would deadlock, so it
    /// fails at once.
    Reentrant,
    /// A plugin of an on-demand set ([`HostBuilder::on_demand`](crate::HostBuilder::on_demand))
    /// failed to map on the first use of one of its passes. The set remembers it: every later
    /// call that needs the plugin gets this error again (with the same `cause`), while the
    /// set's other plugins and passes work; [`reload`](crate::PluginHost::reload) makes a new
    /// set, which tries again. The cause is the [`source`](std::error::Error::source).
    #[non_exhaustive]
    MapFailed {
        /// The plugin.
        plugin: Origin,
        /// Why its mapping failed: the error its eager load would have given.
        cause: std::sync::Arc<Error>,
    },
    /// [`acquire_timeout`](crate::PluginHost::acquire_timeout) gave up waiting for another
    /// thread.
    #[non_exhaustive]
    TimedOut {
        /// What it waited for.
        waited: Waited,
    },
    /// A load was attempted in a `fork()`ed child of a process that had used dylease. The
    /// child's copies of the locks (the host's, the process-wide registry's, the platform
    /// loader's) may be held by threads that exist only in the parent, so dylease never waits
    /// on them there: a lease the child inherited still works (and its last drop there unloads
    /// nothing: the plugins are the parent's), but loading fails at once instead of hanging.
    /// `exec` a new program to load plugins.
    #[non_exhaustive]
    Forked {
        /// The process that built the host.
        parent: u32,
    },
    /// A static plugin's register function panicked. The panic was caught; the host is usable.
    #[non_exhaustive]
    Panicked {
        /// The plugin.
        plugin: Origin,
        /// The panic message, if it was a string.
        message: String,
    },
    /// A file or directory could not be read. The message names the file and what was being
    /// done; the operating system's error is the [`source`](std::error::Error::source).
    #[non_exhaustive]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// What was being done, as a phrase: "cannot read plugin directory".
        context: &'static str,
        /// The operating system's error.
        source: io::Error,
    },
    /// The host's configuration is unusable, for example an empty static plugin name.
    #[non_exhaustive]
    Config {
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// The worker process of an isolated set (`HostBuilder::isolated`, crate feature `isolate`:
    /// [`docs::isolation`](crate::docs::isolation)) failed: it died (a signal, an exit), broke
    /// the channel's protocol, or was killed because a call ran past the call deadline
    /// (`HostBuilder::call_deadline`). The host process
    /// is unharmed. During a load (`pass` is `None`) the `acquire()` (or `reload()`) fails and
    /// leaves nothing loaded; the next one starts a fresh worker. During a call, the set is
    /// failed for good: every call in flight and every later call of the set gets this error;
    /// once its last lease is dropped, the next `acquire()` loads a new set with a fresh
    /// worker.
    #[non_exhaustive]
    WorkerFailed {
        /// The plugin being loaded, or whose pass was called.
        plugin: Origin,
        /// The pass called, or `None` during the plugin's load (its constructors, `on_load` or
        /// `register_passes`).
        pass: Option<String>,
        /// How the worker failed (boxed to keep `Error` small).
        cause: Box<WorkerCause>,
    },
    /// A message pass ([`Lease::call`](crate::Lease::call)) returned a non-zero status: the
    /// pass's own report of its failure. The set is unharmed.
    #[non_exhaustive]
    PassFailed {
        /// The plugin of the pass.
        plugin: Origin,
        /// The pass.
        pass: String,
        /// What it returned.
        status: i32,
    },
    /// A message pass ([`Lease::call`](crate::Lease::call)) could not be called: in an isolated
    /// set, its input or its output is larger than a call carries (256 MiB), or the worker
    /// could not make the call. The set is unharmed.
    #[non_exhaustive]
    CallRefused {
        /// The plugin of the pass.
        plugin: Origin,
        /// The pass.
        pass: String,
        /// Why, and what to do.
        reason: String,
    },
    /// The host requires signed plugins ([`HostBuilder::require_signed`](crate::HostBuilder::require_signed))
    /// and a file the load would run carries no signature its keyring accepts: the plugin's own
    /// file, a library it needs that dylease maps itself, or a Python plugin's source or signed
    /// index; or that file's bytes could not be held still between their verification and
    /// their mapping (it is open for writing, say). None of the plugin's code ran.
    #[non_exhaustive]
    Signature {
        /// The plugin: its library file, or its Python file or package, as discovered.
        path: PathBuf,
        /// The id of the key the refused signature names; `None` when none was read (the
        /// file is unsigned, its signature block is damaged, or its bytes were not held).
        key: Option<dylease_sign::KeyId>,
        /// What is wrong, naming the file refused (the plugin's, a library it needs, or a file
        /// of a Python plugin: a source, or its signed index), and the fix: whom to have sign
        /// it, or which key to trust.
        reason: String,
        /// The verification's own refusal: the file refused
        /// ([`path`](dylease_sign::SignatureError::path)) and precisely why
        /// ([`cause`](dylease_sign::SignatureError::cause)); `None` when the bytes could not be
        /// held still to be verified. Its message is part of `reason`.
        refusal: Option<Box<dylease_sign::SignatureError>>,
    },
    /// Another error carried as it is: a plugin's own
    /// ([`RegisterError::custom`](crate::RegisterError::custom), returned with `?` where a
    /// [`Result`] of this type is expected), or a Python pass's failure.
    Custom(Box<dyn std::error::Error + Send + Sync + 'static>),
}

impl Error {
    /// The plugin this error is about, if it is about one.
    pub fn origin(&self) -> Option<Origin> {
        match self {
            Error::Open { path, .. }
            | Error::Untrusted { path, .. }
            | Error::MissingEntry { path, .. }
            | Error::AbiMismatch { path, .. }
            | Error::Signature { path, .. }
            | Error::OnLoadFailed { path, .. } => Some(Origin::File(path.clone())),
            Error::InvalidPlugin { plugin, .. }
            | Error::InvalidPass { plugin, .. }
            | Error::RegisterFailed { plugin, .. }
            | Error::ManifestMismatch { plugin, .. }
            | Error::MapFailed { plugin, .. }
            | Error::WorkerFailed { plugin, .. }
            | Error::PassFailed { plugin, .. }
            | Error::CallRefused { plugin, .. }
            | Error::Panicked { plugin, .. } => Some(plugin.clone()),
            Error::DuplicatePass { second, .. } => Some(second.clone()),
            Error::PassLookup { cause, .. } => match &**cause {
                LookupFailure::Untyped { plugin }
                | LookupFailure::OtherInterface { plugin, .. }
                | LookupFailure::OtherKind { plugin, .. }
                | LookupFailure::Isolated { plugin } => Some(plugin.clone()),
                LookupFailure::Missing => None,
            },
            Error::TimedOut {
                waited: Waited::File(path),
            } => Some(Origin::File(path.clone())),
            Error::TimedOut {
                waited: Waited::Mapping(plugin),
            } => Some(plugin.clone()),
            Error::Io { .. }
            | Error::Reentrant
            | Error::TimedOut { .. }
            | Error::Forked { .. }
            | Error::Config { .. }
            | Error::Custom(_) => None,
        }
    }
}

/// An error followed by each of its sources, `: `-separated: for log lines, which have no
/// chain printer of their own.
pub(crate) struct WithSources<'a>(pub(crate) &'a Error);

impl fmt::Display for WithSources<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut source = std::error::Error::source(self.0);
        while let Some(error) = source {
            write!(f, ": {error}")?;
            source = error.source();
        }
        Ok(())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Open { path, reason, .. } => {
                write!(f, "cannot load plugin file `{}`: {reason}", path.display())
            }
            Error::Untrusted { path, reason } | Error::Signature { path, reason, .. } => {
                write!(f, "refusing to load plugin file `{}`: {reason}", path.display())
            }
            Error::MissingEntry { path, reason } => write!(
                f,
                "plugin file `{}` does not export `dylease_plugin_v1`; is it a dylease plugin? ({reason})",
                path.display()
            ),
            Error::AbiMismatch {
                path,
                found,
                expected,
                declared,
            } => {
                let oldest = dylease_plugin::abi::DYLEASE_OLDEST_ABI_VERSION;
                let spoken = match expected.saturating_sub(oldest) {
                    0 => format!("version {expected}"),
                    1 => format!("versions {oldest} and {expected}"),
                    _ => format!("versions {oldest} to {expected}"),
                };
                write!(
                    f,
                    "plugin file `{}` was built for dylease ABI version {found}{}, but this host speaks {spoken}; rebuild the plugin against this host's dylease.h (or dylease-plugin crate)",
                    path.display(),
                    if *declared {
                        " (its manifest says so; none of its code ran)"
                    } else {
                        ""
                    }
                )
            }
            Error::ManifestMismatch { plugin, reason } => {
                write!(f, "{plugin} does not match its manifest: {reason}")
            }
            Error::OnLoadFailed { path, code } => write!(
                f,
                "plugin file `{}` failed to initialise: its `on_load` returned {code}",
                path.display()
            ),
            Error::InvalidPlugin { plugin, reason } => write!(f, "{plugin} is not a valid plugin: {reason}"),
            Error::InvalidPass { plugin, pass, reason } => {
                write!(f, "{plugin} registered an invalid pass {pass:?}: {reason}")
            }
            Error::RegisterFailed { plugin, reason, .. } => {
                write!(f, "{plugin} failed to register its passes: {reason}")
            }
            Error::DuplicatePass { pass, first, second } if first == second => {
                write!(f, "{first} registered pass `{pass}` twice")
            }
            Error::DuplicatePass { pass, first, second } => {
                write!(
                    f,
                    "pass `{pass}` is registered by both {first} and {second}; rename one of them"
                )
            }
            Error::PassLookup { pass, expected, cause } => match &**cause {
                LookupFailure::Missing if expected.is_empty() => write!(f, "no plugin registered a pass `{pass}`"),
                LookupFailure::Missing => {
                    write!(
                        f,
                        "no plugin registered a pass `{pass}` (looked up as interface `{expected}`)"
                    )
                }
                LookupFailure::Untyped { plugin } => write!(
                    f,
                    "pass `{pass}` of {plugin} was registered without an interface, not as `{expected}`; \
                     register it as a typed pass, or look it up with the unsafe `Lease::pass`"
                ),
                LookupFailure::OtherInterface { registered, plugin } => write!(
                    f,
                    "pass `{pass}` of {plugin} implements interface `{registered}`, not the expected `{expected}`"
                ),
                LookupFailure::Isolated { plugin } => write!(
                    f,
                    "pass `{pass}` of {plugin} runs in the worker process of an isolated set, and a function \
                     pointer cannot cross the process boundary; register it as a message pass \
                     (`DYLEASE_MESSAGE_PASS` in C, `MessagePass` in Rust) and call it with `Lease::call`, or \
                     load the plugin in a host that is not isolated"
                ),
                LookupFailure::OtherKind {
                    registered,
                    python,
                    plugin,
                } => {
                    let (kind, right, wrong) = match python {
                        true => ("Python", "Lease::get_py", "Lease::get"),
                        false => ("native", "Lease::get", "Lease::get_py"),
                    };
                    write!(
                        f,
                        "pass `{pass}` of {plugin} is a {kind} pass of interface `{registered}`: look it up with \
                         `{right}`, not `{wrong}`"
                    )
                }
            },
            Error::Reentrant => f.write_str(
                "acquire() was called from inside this host's own load or unload on the same thread \
                 (a plugin constructor, register function or unload hook), or a pass of an on-demand \
                 plugin not yet mapped was asked for there; it would deadlock",
            ),
            Error::MapFailed { plugin, .. } => write!(
                f,
                "on-demand {plugin} failed to map on its first use; this set keeps the failure, reload() \
                 tries again"
            ),
            Error::TimedOut {
                waited: waited @ Waited::Mapping(_),
            } => write!(
                f,
                "gave up waiting for {waited} (HostBuilder::map_timeout); if plugin code hands the lease \
                 to another thread and waits for it, that is a deadlock"
            ),
            Error::TimedOut { waited } => write!(
                f,
                "acquire_timeout() gave up waiting for {waited}; if plugin code hands acquire() to another \
                 thread and waits for it, that is a deadlock"
            ),
            Error::Forked { parent } => write!(
                f,
                "dylease was used in process {parent}, and this process is a fork() of it: it does not load \
                 plugins here, where the parent's threads may hold its locks and the loader's; exec a new \
                 program to load plugins"
            ),
            Error::Panicked { plugin, message } => write!(f, "{plugin} panicked while registering: {message}"),
            Error::WorkerFailed { plugin, pass, cause } => {
                match pass {
                    Some(pass) => write!(
                        f,
                        "the worker process of isolated {plugin} failed during pass `{pass}`: "
                    )?,
                    None => write!(
                        f,
                        "the worker process of isolated {plugin} failed while the plugin loaded (its constructors, \
                         `on_load` or `register_passes`): "
                    )?,
                }
                write!(f, "{cause}. The host process is unharmed; ")?;
                match pass {
                    Some(_) => f.write_str(
                        "this set stays failed: drop its leases, and the next acquire() starts a fresh worker",
                    )?,
                    None => f.write_str("nothing of this load is left, and the next acquire() tries again")?,
                }
                match **cause {
                    WorkerCause::Deadline { .. } => {
                        f.write_str("; raise HostBuilder::call_deadline if the pass needs longer")
                    }
                    WorkerCause::Start(_) | WorkerCause::Protocol(_) => Ok(()),
                    _ => f.write_str(
                        "; the fault is the plugin's: load it in an ordinary set under a debugger to see where",
                    ),
                }
            }
            Error::PassFailed { plugin, pass, status } => {
                write!(f, "pass `{pass}` of {plugin} failed: it returned {status}")
            }
            Error::CallRefused { plugin, pass, reason } => {
                write!(f, "cannot call pass `{pass}` of {plugin}: {reason}")
            }
            // The cause is `source()`: printing it here too would show it twice in a chain.
            Error::Io { path, context, .. } => write!(f, "{context} `{}`", path.display()),
            Error::Config { reason } => write!(f, "invalid plugin host configuration: {reason}"),
            Error::Custom(error) => error.fmt(f),
        }
    }
}

/// Why [`Error::PassLookup`] failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LookupFailure {
    /// No plugin of the set registered a pass under that name.
    Missing,
    /// The pass was registered without an interface (`add_pass`, `DYLEASE_PASS`, every pass of
    /// an ABI version 1 plugin).
    Untyped {
        /// The plugin that registered it.
        plugin: Origin,
    },
    /// The pass was registered under another interface.
    OtherInterface {
        /// The interface it was registered under.
        registered: String,
        /// The plugin that registered it.
        plugin: Origin,
    },
    /// The pass is a pointer pass of a plugin that runs in the worker process of an isolated
    /// set ([`docs::isolation`](crate::docs::isolation)): a function pointer cannot
    /// cross the process boundary. Register it as a message pass and call it with
    /// [`Lease::call`](crate::Lease::call).
    Isolated {
        /// The plugin that registered it.
        plugin: Origin,
    },
    /// The pass is of the other kind than the lookup: a Python pass looked up with
    /// [`Lease::get`](crate::Lease::get), or a native pass looked up with `Lease::get_py`
    /// (the `python` feature).
    OtherKind {
        /// The interface it was registered under.
        registered: String,
        /// Whether it is a Python pass (looked up with `Lease::get`); otherwise it is a native
        /// pass looked up with `Lease::get_py`.
        python: bool,
        /// The plugin that registered it.
        plugin: Origin,
    },
}

/// What [`Error::TimedOut`] waited for.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Waited {
    /// Another thread's load of the same host.
    Load,
    /// The host's previous set to finish unloading.
    Unload,
    /// Another thread's open, or unload, of this library file (in any host of the process).
    File(PathBuf),
    /// Another thread's mapping of this on-demand plugin, in the same set
    /// ([`HostBuilder::map_timeout`](crate::HostBuilder::map_timeout)).
    Mapping(Origin),
}

/// The time left to wait until `deadline`: `None` without one (wait as long as it takes), else
/// the time left, or [`Error::TimedOut`] for what `waited` names once none is left. Every
/// bounded wait of dylease (a host's load or unload, a library file busy in another thread, an
/// on-demand plugin's mapping) asks this before it waits, and again after each wake-up.
pub(crate) fn time_left(deadline: Option<Instant>, waited: impl FnOnce() -> Waited) -> Result<Option<Duration>, Error> {
    match deadline {
        None => Ok(None),
        Some(deadline) => match deadline.checked_duration_since(Instant::now()) {
            Some(left) if !left.is_zero() => Ok(Some(left)),
            _ => Err(Error::TimedOut { waited: waited() }),
        },
    }
}

impl fmt::Display for Waited {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Waited::Load => f.write_str("another thread's load of this host to finish"),
            Waited::Unload => f.write_str("this host's previous plugin set to finish unloading"),
            Waited::File(path) => write!(
                f,
                "another thread to finish loading or unloading plugin file `{}`",
                path.display()
            ),
            Waited::Mapping(plugin) => write!(f, "another thread's mapping of on-demand {plugin}"),
        }
    }
}

/// How the worker process of an isolated set failed: see [`Error::WorkerFailed`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WorkerCause {
    /// It was killed by this signal (`SIGSEGV`, `SIGABRT` from `abort()`, `SIGKILL` from
    /// outside, …).
    Signal(i32),
    /// It exited with this status (a plugin called `exit()`).
    Exit(i32),
    /// A call (or a plugin's load, then `pass` is empty) ran past the host's call deadline,
    /// and the host killed the worker.
    Deadline {
        /// The pass called; empty for a plugin's load.
        pass: String,
        /// The deadline (`HostBuilder::call_deadline`).
        after: std::time::Duration,
    },
    /// It sent what the channel's protocol does not allow (a corrupt or unexpected message):
    /// the host killed it. What it sent.
    Protocol(String),
    /// It could not be started, or did not complete the handshake: why.
    Start(String),
}

impl fmt::Display for WorkerCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkerCause::Signal(signal) => match signal_name(*signal) {
                Some(name) => write!(f, "it was killed by signal {signal} ({name})"),
                None => write!(f, "it was killed by signal {signal}"),
            },
            WorkerCause::Exit(code) => write!(f, "it exited with status {code}"),
            WorkerCause::Deadline { pass, after } if pass.is_empty() => {
                write!(
                    f,
                    "the load ran past the call deadline of {after:?}, and the host killed the worker"
                )
            }
            WorkerCause::Deadline { pass, after } => write!(
                f,
                "pass `{pass}` ran past the call deadline of {after:?}, and the host killed the worker"
            ),
            WorkerCause::Protocol(what) => write!(f, "it broke the channel's protocol and the host killed it: {what}"),
            WorkerCause::Start(why) => write!(f, "it could not be started: {why}"),
        }
    }
}

/// The conventional name of signal `signal`, for messages, if it is one of the signals a
/// crashing or killed process usually ends with.
fn signal_name(signal: i32) -> Option<&'static str> {
    #[cfg(unix)]
    {
        let names = [
            (libc::SIGSEGV, "SIGSEGV"),
            (libc::SIGABRT, "SIGABRT"),
            (libc::SIGKILL, "SIGKILL"),
            (libc::SIGBUS, "SIGBUS"),
            (libc::SIGFPE, "SIGFPE"),
            (libc::SIGILL, "SIGILL"),
            (libc::SIGTERM, "SIGTERM"),
            (libc::SIGTRAP, "SIGTRAP"),
            (libc::SIGSYS, "SIGSYS"),
            (libc::SIGXCPU, "SIGXCPU"),
            (libc::SIGPIPE, "SIGPIPE"),
            (libc::SIGINT, "SIGINT"),
        ];
        names
            .iter()
            .find(|(number, _)| *number == signal)
            .map(|(_, name)| *name)
    }
    #[cfg(not(unix))]
    {
        let _ = signal;
        None
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            // `reason` already shows the plugin's error in `Display`; the chain goes on with
            // that error's own source, so a chain reporter does not print it twice.
            Error::RegisterFailed {
                source: Some(source), ..
            } => source.source(),
            Error::Custom(error) => error.source(),
            Error::MapFailed { cause, .. } => Some(&**cause),
            // As for `RegisterFailed`: the refusal's sentence is in `reason`.
            Error::Signature {
                refusal: Some(refusal), ..
            } => refusal.source(),
            _ => None,
        }
    }
}

/// A registration's failure, as the host's error: a static plugin's register function
/// returns a [`RegisterError`](crate::RegisterError), whose `?` in a function returning
/// [`Error`] converts it into [`Error::Custom`].
impl From<dylease_plugin::RegisterError> for Error {
    fn from(error: dylease_plugin::RegisterError) -> Self {
        match error {
            dylease_plugin::RegisterError::Custom(own) => Error::Custom(own),
            other => Error::Custom(Box::new(other)),
        }
    }
}

/// The text of a panic payload: its message, or a phrase saying it has none. (The plugin
/// side has its own, in `export_plugin!`'s support code, which is not part of its API.)
pub(crate) fn panic_text(payload: &(dyn std::any::Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "a panic without a message"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error with a source of its own, as a static plugin might return.
    #[derive(Debug)]
    struct NoDevice(io::Error);

    impl fmt::Display for NoDevice {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("no GPU found")
        }
    }

    impl std::error::Error for NoDevice {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&self.0)
        }
    }

    #[test]
    fn a_chain_printer_shows_each_cause_once() {
        let io = Error::Io {
            path: PathBuf::from("plugins/libx.so"),
            context: "cannot read plugin file",
            source: io::Error::new(io::ErrorKind::NotFound, "No such file or directory"),
        };
        assert_eq!(io.to_string(), "cannot read plugin file `plugins/libx.so`");
        assert_eq!(
            WithSources(&io).to_string(),
            "cannot read plugin file `plugins/libx.so`: No such file or directory"
        );

        let own = Error::Custom(Box::new(NoDevice(io::Error::other("/dev/gpu0: permission denied"))));
        let failed = Error::RegisterFailed {
            plugin: Origin::Static("gpu".to_owned()),
            reason: own.to_string(),
            source: Some(Box::new(own)),
        };
        assert_eq!(
            WithSources(&failed).to_string(),
            "static plugin `gpu` failed to register its passes: no GPU found: /dev/gpu0: permission denied"
        );
    }
}
