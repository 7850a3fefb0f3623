//! The platform loader as the [registry](super::registry)'s [`Opener`]: [`Dlopen`] opens a
//! checked plugin file, checks the [`Descriptor`] its entry point returns, runs the
//! instance's `on_load` and `on_unload`, and calls its `register_passes` for a set
//! ([`PluginLibrary::register`]). [`library_instance`] finds or opens an instance in the
//! process-wide registry of the library instances it opens. The calls into the plugin's code
//! are `sys::library`'s safe methods: this file holds no `unsafe`.

use std::path::Path;
use std::time::Instant;

use crate::error::{Error, OpenCause, Origin};
use crate::registrar::{MAX_NAME_LEN, StaticRegistrar, TOO_LONG};
use crate::registry::{FileRef, LibraryInstance, Opener, Registry};
use crate::sync::Arc;
use crate::sys::library::{CText, Checked, Closed, DescriptorFault, Library, OpenFailure, Unmapped};
use ::dylease_plugin::abi::DYLEASE_ABI_VERSION;

crate::sync::lazy_static! {
    /// The process-wide registry of library instances.
    static REGISTRY: Arc<Registry<Dlopen>> = Arc::new(Registry::new(Dlopen));
}

crate::sync::lazy_static! {
    /// The process-wide registry of the dependencies dylease mapped for plugins: one
    /// instance per file, shared by every plugin instance that needs it (I1).
    static DEPENDENCIES: Arc<Registry<DependencyLoader>> = Arc::new(Registry::new(DependencyLoader));
}

/// `Err(Error::Forked)` in a `fork()`ed child of the process whose registry this is
/// (`Registry::not_forked`): asked once per load, before its first [`library_instance`].
pub(crate) fn not_forked() -> Result<(), Error> {
    REGISTRY.not_forked()
}

/// The library instance of `file` in the process-wide registry: a live one shared, or the
/// file opened by [`Dlopen`] (the registry protocol, docs::internals). `deadline` bounds the
/// waits for other threads' opens and unloads of the same file.
pub(crate) fn library_instance(
    file: FileRef<'_>,
    deadline: Option<Instant>,
) -> Result<Arc<LibraryInstance<Dlopen>>, Error> {
    Registry::instance(&REGISTRY, file, deadline)
}

/// What the checked descriptor of a library instance says. Its functions stay with the
/// library ([`PluginLibrary`]), which calls them.
#[derive(Debug)]
pub(crate) struct Descriptor {
    /// The descriptor's ABI version: which host API table `register_passes` gets.
    pub(crate) abi_version: u32,
    pub(crate) name: String,
    pub(crate) version: String,
    /// Whether it has an `on_load` (ABI version 2). An instance's `on_load` runs once,
    /// before its first `register_passes` (in [`Dlopen::start`]); its `on_unload` once, after
    /// the last set using it is gone, before it is closed (in [`Dlopen::finish`]). Once
    /// `on_load` succeeded, `on_unload` runs exactly once whatever fails later; a failed
    /// `on_load` means no `on_unload`. Without an `on_load` (every version-1 plugin),
    /// `on_unload` is owed once a set's `register_passes` succeeded on the instance: a plugin
    /// whose registration failed undid its own work.
    has_on_load: bool,
}

/// An open plugin library and the dependencies dylease mapped for it (the dependency
/// protocol, `docs::internals`). Dropped, it closes the plugin first, then its dependencies,
/// dependents before the libraries they need.
#[derive(Debug)]
pub(crate) struct PluginLibrary {
    library: Library,
    dependencies: Dependencies,
}

impl PluginLibrary {
    /// Calls the plugin's `register_passes` with `registrar` as its registration, returning
    /// the plugin's code (0: success).
    pub(crate) fn register(&self, registrar: &mut StaticRegistrar) -> i32 {
        // `None` only for a library whose descriptor was not read, or has no
        // `register_passes`: the instance's start refused both.
        self.library.register_passes(registrar.host_api()).unwrap_or(-1)
    }
}

/// The dependency instances a plugin library holds, in mapping order (each after the
/// libraries it needs): dropped in the reverse order.
#[derive(Debug, Default)]
struct Dependencies(Vec<Arc<LibraryInstance<DependencyLoader>>>);

impl Drop for Dependencies {
    fn drop(&mut self) {
        while let Some(dependency) = self.0.pop() {
            drop(dependency);
        }
    }
}

/// No dependency is mapped by dylease where there is no trust check to resolve one.
#[cfg(not(unix))]
fn map_dependencies(file: FileRef<'_>) -> Result<Dependencies, Error> {
    match file.dependencies.first() {
        Some(dependency) => match *dependency {},
        None => Ok(Dependencies::default()),
    }
}

/// Maps the dependencies of the plugin `file` (resolved and checked by the trust check),
/// dependencies first, each shared with every other plugin that needs the same file.
#[cfg(unix)]
fn map_dependencies(file: FileRef<'_>) -> Result<Dependencies, Error> {
    let mut mapped = Dependencies(Vec::with_capacity(file.dependencies.len()));
    for dependency in file.dependencies {
        let identity = crate::sys::checked_identity(dependency.identity);
        let needed = FileRef {
            shown: &dependency.found,
            resolved: &dependency.found,
            identity: &identity,
            source: Some(&dependency.file),
            // A sealed copy is given to the loader as itself: it is in no directory.
            origin: !dependency.sealed,
            loads: &dependency.loads,
            strict: true,
            dependencies: &[],
            deadline: file.deadline,
        };
        let instance = Registry::instance(&DEPENDENCIES, needed, file.deadline).map_err(|error| {
            let of_plugin = |reason: String| {
                format!(
                    "cannot map `{}`, a library it needs, from the descriptor dylease checked: {reason}",
                    dependency.found.display()
                )
            };
            match error {
                Error::Open { reason, cause, .. } => Error::Open {
                    path: file.shown.to_owned(),
                    reason: of_plugin(reason),
                    cause,
                },
                Error::Untrusted { reason, .. } => Error::Untrusted {
                    path: file.shown.to_owned(),
                    reason: of_plugin(reason),
                },
                other => other,
            }
        })?;
        mapped.0.push(instance);
    }
    Ok(mapped)
}

/// The platform loader for the dependencies dylease maps itself, as the registry's
/// [`Opener`]: a dependency has no entry point and no hooks; its instance maps it from its
/// checked descriptor and closes it.
#[derive(Debug)]
pub(crate) struct DependencyLoader;

impl Opener for DependencyLoader {
    type Library = Library;
    type Plugin = ();
    type Closing = Closed;
    type Closed = Unmapped;

    fn open(&self, file: FileRef<'_>) -> Result<Library, Error> {
        let refused = |reason: String| Error::Untrusted {
            path: file.shown.to_owned(),
            reason,
        };
        let name = file.resolved.file_name().unwrap_or_default();
        // Another object the loader has already answers this name: it would take that one,
        // and the checked copy's constructors would run for nothing.
        match crate::sys::imp::answering(name) {
            None => {}
            Some(Ok(id)) if crate::sys::checked_identity(id) == *file.identity => {}
            Some(other) => {
                let what = match other {
                    Ok(_) => "another file".to_owned(),
                    Err(loaded_as) => format!("`{}`", loaded_as.to_string_lossy()),
                };
                return Err(refused(format!(
                    "the name `{}` is already answered by {what} loaded in this process (the host's own, \
                     `LD_PRELOAD`, a library another plugin bundles or one the platform kept), which the loader \
                     would use instead of the checked file; fix: use that library's version, or give the \
                     bundled one another soname",
                    name.to_string_lossy()
                )));
            }
        }
        let source = file
            .source
            .ok_or_else(|| refused("it was not opened for its checks".to_owned()))?;
        let checked = Checked {
            file: source,
            identity: file.identity,
            resolved: file.resolved,
            origin: file.origin,
            loads: file.loads,
            strict: true,
            follow: file.origin,
        };
        // The host's configuration named the plugin that needs this library, and its user
        // vouches for the code the plugin runs, its libraries' included (see the crate docs,
        // "`unsafe`"); the trust check passed this file.
        Library::open(checked).map_err(|failure| match failure {
            OpenFailure::Replaced(reason) => Error::Open {
                path: file.shown.to_owned(),
                reason,
                cause: OpenCause::Replaced,
            },
            OpenFailure::Untrusted(reason) => refused(reason),
            OpenFailure::Other(reason) => {
                let hint = if reason.contains("undefined symbol") {
                    " (it needs a symbol it does not link against: it cannot be mapped on its own before \
                     the plugin; link it with `-Wl,-z,defs` to see which library it lacks, and link against that)"
                } else {
                    ""
                };
                Error::Open {
                    path: file.shown.to_owned(),
                    reason: format!("{reason}{hint}"),
                    cause: OpenCause::Loader,
                }
            }
        })
    }

    fn handle(library: &Library) -> usize {
        library.handle()
    }

    fn start(&self, _: &mut Library, _: FileRef<'_>) -> Result<(), Error> {
        Ok(())
    }

    fn finish(&self, (): (), library: Library, _: bool) -> Closed {
        let (closed, names) = library.close();
        if let Err(reason) = closed {
            log::warn!(
                "{}closing a library a plugin needs failed: {reason}",
                crate::log_scope::prefix()
            );
        }
        names
    }

    fn settle(&self, closed: Closed) -> Unmapped {
        closed.settle()
    }
}

/// The platform loader, as the registry's [`Opener`].
#[derive(Debug)]
pub(crate) struct Dlopen;

impl Opener for Dlopen {
    type Library = PluginLibrary;
    type Plugin = Descriptor;
    type Closing = Closed;
    type Closed = Unmapped;

    fn open(&self, file: FileRef<'_>) -> Result<PluginLibrary, Error> {
        let source = file.source.ok_or_else(|| Error::Open {
            path: file.shown.to_owned(),
            reason: "it was not opened for its checks".to_owned(),
            cause: OpenCause::Headers,
        })?;
        let checked = Checked {
            file: source,
            identity: file.identity,
            resolved: file.resolved,
            origin: file.origin,
            loads: file.loads,
            strict: file.strict,
            follow: false,
        };
        // Its dependencies first, so that the loader finds each already loaded by its soname
        // and searches for none of them.
        let dependencies = map_dependencies(file)?;
        // The host's configuration named this file as a plugin; by naming it, the user vouches
        // for its initialisation and termination routines (see the crate docs, "`unsafe`").
        let library = Library::open(checked).map_err(|failure| match failure {
            OpenFailure::Replaced(reason) => Error::Open {
                path: file.shown.to_owned(),
                reason,
                cause: OpenCause::Replaced,
            },
            OpenFailure::Untrusted(reason) => Error::Untrusted {
                path: file.shown.to_owned(),
                reason,
            },
            OpenFailure::Other(reason) => Error::Open {
                path: file.shown.to_owned(),
                reason,
                cause: OpenCause::Loader,
            },
        })?;
        Ok(PluginLibrary { library, dependencies })
    }

    fn handle(library: &PluginLibrary) -> usize {
        library.library.handle()
    }

    fn start(&self, library: &mut PluginLibrary, file: FileRef<'_>) -> Result<Descriptor, Error> {
        let descriptor = verify(&mut library.library, file.shown)?;
        // The registry starts each instance once: `on_load` runs once per instance.
        match library.library.on_load() {
            None | Some(0) => Ok(descriptor),
            Some(code) => Err(Error::OnLoadFailed {
                path: file.shown.to_owned(),
                code,
            }),
        }
    }

    fn finish(&self, plugin: Descriptor, library: PluginLibrary, registered: bool) -> Closed {
        let PluginLibrary {
            mut library,
            dependencies,
        } = library;
        if registered || plugin.has_on_load {
            library.on_unload();
        }
        let (closed, names) = library.close();
        if let Err(reason) = closed {
            log::warn!(
                "{}closing a plugin library failed: {reason}",
                crate::log_scope::prefix()
            );
        }
        // The libraries it needed, once it is closed: dependents first.
        drop(dependencies);
        names
    }

    fn settle(&self, closed: Closed) -> Unmapped {
        closed.settle()
    }
}

/// Resolves the entry point of `library` (found as `path`), calls it, and checks the descriptor
/// it returns.
fn verify(library: &mut Library, path: &Path) -> Result<Descriptor, Error> {
    let invalid = |reason: &str| Error::InvalidPlugin {
        plugin: Origin::File(path.to_owned()),
        reason: reason.to_owned(),
    };
    let described = library.descriptor(MAX_NAME_LEN).map_err(|fault| match fault {
        DescriptorFault::NoEntry(reason) => Error::MissingEntry {
            path: path.to_owned(),
            reason,
        },
        DescriptorFault::Null => invalid("`dylease_plugin_v1` returned NULL"),
        DescriptorFault::Abi(found) => Error::AbiMismatch {
            path: path.to_owned(),
            found,
            expected: DYLEASE_ABI_VERSION,
            declared: false,
        },
    })?;
    let name = match text(described.name) {
        None => return Err(invalid("its name is NULL")),
        Some(Err(why)) => return Err(invalid(&format!("its name {why}"))),
        Some(Ok(name)) if name.is_empty() => return Err(invalid("its name is empty")),
        Some(Ok(name)) => name,
    };
    let version = match text(described.version) {
        None => String::new(),
        Some(Err(why)) => return Err(invalid(&format!("its version {why}"))),
        Some(Ok(version)) => version,
    };
    if !described.registers {
        return Err(invalid("its `register_passes` is NULL"));
    }
    Ok(Descriptor {
        abi_version: described.abi_version,
        name,
        version,
        has_on_load: described.has_on_load,
    })
}

/// A string of the descriptor as UTF-8: `None` for NULL, `Err` with what is wrong with it (as
/// a phrase: "is not valid UTF-8").
fn text(text: CText) -> Option<Result<String, &'static str>> {
    match text {
        CText::Null => None,
        CText::TooLong => Some(Err(TOO_LONG)),
        CText::Bytes(bytes) => Some(String::from_utf8(bytes).map_err(|_| "is not valid UTF-8")),
    }
}
