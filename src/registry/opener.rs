//! The platform loader as the [registry](super::registry)'s [`Opener`]: [`Dlopen`] opens a
//! checked plugin file, resolves its entry point and checks the [`Descriptor`] it returns,
//! runs the instance's `on_load` and `on_unload`, and calls its `register_passes` for a set
//! ([`Descriptor::register`]). [`library_instance`] finds or opens an instance in the
//! process-wide registry of the library instances it opens.

use core::ffi::c_char;
use std::path::Path;
use std::time::Instant;

use crate::error::{Error, OpenCause, Origin};
use crate::registrar::{MAX_NAME_LEN, StaticRegistrar, TOO_LONG, bounded_c_str};
use crate::registry::{FileRef, LibraryInstance, Opener, Registry};
use crate::sync::Arc;
use crate::sys::library::{Checked, Closed, Library, OpenFailure, Unmapped};
use ::dylease_plugin::abi::{
    DYLEASE_ABI_VERSION, DYLEASE_OLDEST_ABI_VERSION, dylease_on_load_fn, dylease_on_unload_fn, dylease_plugin,
    dylease_plugin_abi1, dylease_register_fn,
};

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

/// What the checked descriptor of a library instance says.
#[derive(Debug)]
pub(crate) struct Descriptor {
    /// The descriptor's functions: code of the instance's library, which stays open as long
    /// as the instance exists. Private: only [`verify`] sets it, from the descriptor of the
    /// open library, and only [`Descriptor::register`] calls it.
    register_passes: dylease_register_fn,
    hooks: InstanceHooks,
    /// The descriptor's ABI version: which host API table `register_passes` gets.
    pub(crate) abi_version: u32,
    pub(crate) name: String,
    pub(crate) version: String,
}

impl Descriptor {
    /// Calls the plugin's `register_passes` with `registrar` as its registration, returning
    /// the plugin's code (0: success).
    pub(crate) fn register(&self, registrar: &mut StaticRegistrar) -> i32 {
        let register = self.register_passes;
        let api = StaticRegistrar::host_api(self.abi_version);
        // SAFETY: `register` comes from the verified descriptor of the instance's library (set
        // only by `verify`), which stays open while its instance, holding `self`, exists; the
        // API table is static and of the plugin's own version, and the registrar outlives the
        // call, on this thread.
        registrar.with_raw(|raw| unsafe { register(api, raw) })
    }
}

/// A library instance's own lifecycle code, from its descriptor: `on_load` (ABI version 2)
/// runs once per instance, before its first `register_passes` (in [`Dlopen::start`]);
/// `on_unload` once per instance, after the last set using it is gone, before it is closed
/// (in [`Dlopen::finish`]). Once `on_load` succeeded, `on_unload` runs exactly once whatever
/// fails later; a failed `on_load` means no `on_unload`. Without an `on_load` (every version-1
/// plugin), `on_unload` is owed once a set's `register_passes` succeeded on the instance: a
/// plugin whose registration failed undid its own work.
#[derive(Debug, Clone, Copy)]
pub(crate) struct InstanceHooks {
    on_load: Option<dylease_on_load_fn>,
    on_unload: Option<dylease_on_unload_fn>,
}

impl InstanceHooks {
    /// Runs `on_load`, if the plugin has one, for the new instance of the library at `path`.
    ///
    /// # Safety
    ///
    /// The library these hooks came from is open, and this instance's `on_load` has not run.
    unsafe fn run_on_load(&self, path: &Path) -> Result<(), Error> {
        let Some(on_load) = self.on_load else { return Ok(()) };
        // SAFETY: `on_load` comes from the verified descriptor of the open library (the
        // caller's contract); the ABI calls it once per instance, before `register_passes`.
        match unsafe { on_load() } {
            0 => Ok(()),
            code => Err(Error::OnLoadFailed {
                path: path.to_owned(),
                code,
            }),
        }
    }

    /// Whether `on_unload` is owed whatever the registrations did: when `on_load` ran.
    fn unload_owed_after_on_load(&self) -> bool {
        self.on_load.is_some()
    }
}

/// An open plugin library and the dependencies dylease mapped for it (the dependency
/// protocol, `docs::internals`). Dropped, it closes the plugin first, then its dependencies,
/// dependents before the libraries they need.
#[derive(Debug)]
pub(crate) struct PluginLibrary {
    library: Library,
    dependencies: Dependencies,
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
        // SAFETY: the host's configuration named the plugin that needs this library, and its
        // user vouches for the code the plugin runs, its libraries' included (see the crate
        // docs, "`unsafe`"); the trust check passed this file. Called outside the registry's
        // lock, with the host's re-entrancy mark set.
        let library = unsafe { Library::open(checked) };
        library.map_err(|failure| match failure {
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

    fn start(&self, _: &Library, _: FileRef<'_>) -> Result<(), Error> {
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
        // SAFETY: the host's configuration named this file as a plugin; by naming it, the
        // user vouches for its initialisation and termination routines (see the crate docs,
        // "`unsafe`"). The registry calls this outside its lock, with the host's re-entrancy
        // mark set so that a nested `acquire()` fails instead of deadlocking.
        let library = unsafe { Library::open(checked) };
        let library = library.map_err(|failure| match failure {
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

    fn start(&self, library: &PluginLibrary, file: FileRef<'_>) -> Result<Descriptor, Error> {
        let descriptor = verify(&library.library, file.shown)?;
        // SAFETY: `library` is open, and the registry starts each instance exactly once.
        unsafe { descriptor.hooks.run_on_load(file.shown) }?;
        Ok(descriptor)
    }

    fn finish(&self, plugin: Descriptor, library: PluginLibrary, registered: bool) -> Closed {
        let PluginLibrary { library, dependencies } = library;
        let owed = registered || plugin.hooks.unload_owed_after_on_load();
        if let (true, Some(on_unload)) = (owed, plugin.hooks.on_unload) {
            // SAFETY: `on_unload` comes from the verified descriptor of `library`, which is
            // still open; the ABI calls it once per instance, after the last set using it.
            unsafe { on_unload() };
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
fn verify(library: &Library, path: &Path) -> Result<Descriptor, Error> {
    {
        let invalid = |reason: &str| Error::InvalidPlugin {
            plugin: Origin::File(path.to_owned()),
            reason: reason.to_owned(),
        };
        let entry = library.entry().map_err(|reason| Error::MissingEntry {
            path: path.to_owned(),
            reason,
        })?;
        // SAFETY: `entry` has the ABI's type and `library` is open.
        let descriptor = unsafe { entry() };
        // SAFETY: by the ABI, a non-NULL result points to a descriptor that lives as long as
        // the library, and `abi_version` is its first field in every ABI version.
        let Some(abi_version) = (unsafe { descriptor.cast::<u32>().as_ref() }).copied() else {
            return Err(invalid("`dylease_plugin_v1` returned NULL"));
        };
        if !(DYLEASE_OLDEST_ABI_VERSION..=DYLEASE_ABI_VERSION).contains(&abi_version) {
            return Err(Error::AbiMismatch {
                path: path.to_owned(),
                found: abi_version,
                expected: DYLEASE_ABI_VERSION,
                declared: false,
            });
        }
        // SAFETY: every accepted version's descriptor begins with version 1's fields.
        let plugin = unsafe { &*descriptor.cast::<dylease_plugin_abi1>() };
        let on_load = match abi_version {
            1 => None,
            // SAFETY: a version-2 descriptor has the layout of `dylease_plugin`.
            _ => unsafe { &*descriptor.cast::<dylease_plugin>() }.on_load,
        };
        // SAFETY: by the ABI the strings are NULL or NUL-terminated and live as long as the
        // library.
        let name = match unsafe { c_string(plugin.name) } {
            None => return Err(invalid("its name is NULL")),
            Some(Err(why)) => return Err(invalid(&format!("its name {why}"))),
            Some(Ok("")) => return Err(invalid("its name is empty")),
            Some(Ok(name)) => name.to_owned(),
        };
        // SAFETY: as for the name.
        let version = match unsafe { c_string(plugin.version) } {
            None => String::new(),
            Some(Err(why)) => return Err(invalid(&format!("its version {why}"))),
            Some(Ok(version)) => version.to_owned(),
        };
        let Some(register_passes) = plugin.register_passes else {
            return Err(invalid("its `register_passes` is NULL"));
        };
        Ok(Descriptor {
            register_passes,
            hooks: InstanceHooks {
                on_load,
                on_unload: plugin.on_unload,
            },
            abi_version,
            name,
            version,
        })
    }
}

/// Reads an optional NUL-terminated UTF-8 string of at most [`MAX_NAME_LEN`] bytes: `None`
/// for NULL, `Err` with what is wrong with it (as a phrase: "is not valid UTF-8").
///
/// # Safety
///
/// `ptr` is NULL or points to a NUL-terminated string that stays valid for `'a`.
unsafe fn c_string<'a>(ptr: *const c_char) -> Option<Result<&'a str, &'static str>> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: the caller's contract.
    Some(match unsafe { bounded_c_str(ptr, MAX_NAME_LEN) } {
        None => Err(TOO_LONG),
        Some(bytes) => std::str::from_utf8(bytes).map_err(|_| "is not valid UTF-8"),
    })
}
