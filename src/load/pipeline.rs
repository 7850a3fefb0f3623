//! The load pipeline as typestates: `Candidate` → `Verified` → `Registered`.
//!
//! Each step consumes the previous state, so a library cannot be registered before its ABI
//! is checked, and only a `Registered` plugin can enter a set. Opening goes through the
//! process-wide [registry](super::registry): a `Verified` plugin holds a shared
//! [`LibraryInstance`], opened and checked once for the whole process (the [`Dlopen`]
//! opener's `start`, which is where the descriptor is checked). Every failure drops what the
//! step held: an instance whose last holder goes out of scope unloads.
// `unsafe` here: calls a plugin's entry point, `on_load`, `register_passes` and `on_unload`.
#![allow(unsafe_code)]

use core::ffi::c_char;
use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::abi::{
    DYLEASE_ABI_VERSION, DYLEASE_OLDEST_ABI_VERSION, dylease_on_load_fn, dylease_on_unload_fn, dylease_plugin,
    dylease_plugin_abi1, dylease_register_fn,
};
use crate::error::OpenCause;
use crate::error::{Error, Origin};
use crate::load::candidate::Candidate;
use crate::load::library::{Checked, Closed, Library, OpenFailure, Unmapped};
use crate::load::pinning::Pinning;
use crate::load::registrar::{Collected, Finished, MAX_NAME_LEN, Registrar, TOO_LONG, UnloadHook, bounded_c_str};
use crate::load::registry::{FileRef, LibraryInstance, Opener, Registry};
use crate::load::trust::{Checks, REPLACEMENTS, TrustPolicy, open_checked};
use crate::sync::Arc;

/// A plugin file whose library instance is open and whose descriptor passed every check.
#[derive(Debug)]
pub(crate) struct Verified {
    path: PathBuf,
    instance: Arc<LibraryInstance<Dlopen>>,
    /// Whether its file predicts that the platform keeps it mapped.
    pinning: Pinning,
}

/// What the checked descriptor of a library instance says.
#[derive(Debug)]
pub(crate) struct Descriptor {
    /// The descriptor's functions: code of the instance's library, which stays open as long
    /// as the instance exists.
    register_passes: dylease_register_fn,
    hooks: InstanceHooks,
    /// The descriptor's ABI version: which host API table `register_passes` gets.
    abi_version: u32,
    name: String,
    version: String,
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

/// A plugin whose passes are collected: the only state a set is built from.
#[derive(Debug)]
pub(crate) struct Registered {
    pub(crate) origin: Origin,
    pub(crate) name: String,
    pub(crate) version: String,
    pub(crate) passes: Vec<Collected>,
    pub(crate) teardown: Teardown,
    pub(crate) pinning: Pinning,
}

/// What unloading one plugin takes: its unload code, then closing its library.
pub(crate) struct Teardown {
    origin: Origin,
    hooks: Vec<UnloadHook>,
    instance: Option<Arc<LibraryInstance<Dlopen>>>,
    /// What its file predicted, to compare with what the loader does on unload.
    pinning: Pinning,
}

impl std::fmt::Debug for Teardown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Teardown")
            .field("origin", &self.origin)
            .field("hooks", &self.hooks.len())
            .field("instance", &self.instance)
            .finish()
    }
}

/// A plugin without a library: only its unload code (a Python plugin's teardown).
#[cfg(feature = "python")]
impl Teardown {
    pub(crate) fn with_hooks(origin: Origin, hooks: Vec<UnloadHook>) -> Self {
        Teardown {
            origin,
            hooks,
            instance: None,
            pinning: Pinning::default(),
        }
    }
}

crate::sync::lazy_static! {
    /// The process-wide registry of library instances.
    static REGISTRY: Arc<Registry<Dlopen>> = Arc::new(Registry::new(Dlopen));
}

impl Candidate {
    /// The library instance of this file: a live one shared, or the file opened
    /// (`RTLD_NOW | RTLD_LOCAL`, running its constructors) and its descriptor checked. Its ELF
    /// headers are checked first: a truncated library would crash the process inside the
    /// loader, and the loader misreports one built for another architecture.
    ///
    /// The file is opened once ([`open_checked`], which checks a replaced file again); the
    /// ELF check reads that descriptor, the registry knows the instance by its identity, and
    /// the loader maps that descriptor (I9, `docs::internals`). A library that the loader must
    /// find by name in its directory (`$ORIGIN`) and that was replaced there meanwhile is
    /// checked again too, before any of its code runs.
    pub(crate) fn open(
        mut self,
        checks: &mut Checks,
        trust: TrustPolicy,
        deadline: Option<Instant>,
    ) -> Result<Verified, Error> {
        let mut replaced = 0;
        loop {
            let (checked, len, identity) = open_checked(&mut self, checks, trust)?;
            let linkage = crate::load::elf::check_file(&self.path, &checked, len)?;
            let pinning = Pinning::predict(&checked, len);
            let file = FileRef {
                shown: &self.path,
                resolved: &self.resolved,
                identity: &identity,
                source: Some(&checked.file),
                origin: linkage.names_origin(),
                loads: &linkage.loads,
                strict: trust == TrustPolicy::Strict,
            };
            match Registry::instance(&REGISTRY, file, deadline) {
                Err(Error::Open {
                    cause: OpenCause::Replaced,
                    ..
                }) if replaced < REPLACEMENTS => {
                    replaced += 1;
                    checks.check(trust, &mut self)?;
                }
                instance => {
                    return Ok(Verified {
                        path: self.path,
                        instance: instance?,
                        pinning,
                    });
                }
            }
        }
    }
}

/// The platform loader, as the registry's [`Opener`].
#[derive(Debug)]
pub(crate) struct Dlopen;

impl Opener for Dlopen {
    type Library = Library;
    type Plugin = Descriptor;
    type Closing = Closed;
    type Closed = Unmapped;

    fn open(&self, file: FileRef<'_>) -> Result<Library, Error> {
        let source = file.source.ok_or_else(|| Error::Open {
            path: file.shown.to_owned(),
            reason: "it was not opened for its checks".to_owned(),
            cause: crate::error::OpenCause::Headers,
        })?;
        let checked = Checked {
            file: source,
            identity: file.identity,
            resolved: file.resolved,
            origin: file.origin,
            loads: file.loads,
            strict: file.strict,
        };
        // SAFETY: the host's configuration named this file as a plugin; by naming it, the
        // user vouches for its initialisation and termination routines (see the crate docs,
        // "`unsafe`"). The registry calls this outside its lock, with the host's re-entrancy
        // mark set so that a nested `acquire()` fails instead of deadlocking.
        let library = unsafe { Library::open(checked) };
        library.map_err(|failure| match failure {
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
        })
    }

    fn handle(library: &Library) -> usize {
        library.handle()
    }

    fn start(&self, library: &Library, file: FileRef<'_>) -> Result<Descriptor, Error> {
        let descriptor = verify(library, file.shown)?;
        // SAFETY: `library` is open, and the registry starts each instance exactly once.
        unsafe { descriptor.hooks.run_on_load(file.shown) }?;
        Ok(descriptor)
    }

    fn finish(&self, plugin: Descriptor, library: Library, registered: bool) -> Closed {
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
                crate::load::log_scope::prefix()
            );
        }
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

impl Verified {
    /// Calls the plugin's `register_passes` and collects what it registered.
    pub(crate) fn register(self) -> Result<Registered, Error> {
        let origin = Origin::File(self.path);
        let descriptor = self.instance.plugin();
        let register = descriptor.register_passes;
        let mut registrar = Registrar::new(origin.clone());
        let api = Registrar::host_api(descriptor.abi_version);
        // SAFETY: `register` comes from the verified descriptor of the instance, still open;
        // the API table is static and of the plugin's own version, and the registrar
        // outlives the call, on this thread.
        let code = registrar.with_raw(|raw| unsafe { register(api, raw) });
        let Finished { passes, report, .. } = registrar.finish();
        let (name, version) = (descriptor.name.clone(), descriptor.version.clone());
        if code != 0 {
            // The plugin's registration failed: it undoes its own work, so this registration
            // does not make its `on_unload` due (its `on_load` may have: see
            // `InstanceHooks`). Dropping the instance unloads it if no other set uses it.
            drop(self.instance);
            // A refused pass is the likely cause (the header's `register_passes` stops at
            // the first refusal): report it rather than a bare code. Otherwise the plugin's
            // own word (`report`), if it gave one.
            return Err(match passes {
                Err(refused) => refused,
                Ok(_) => Error::RegisterFailed {
                    plugin: origin,
                    reason: match report {
                        Some(message) => format!("{message} (`register_passes` returned {code})"),
                        None => format!("`register_passes` returned {code}"),
                    },
                    source: None,
                },
            });
        }
        if let Some(message) = report {
            log::debug!("{origin} reported {message:?}, then registered its passes successfully");
        }
        // Registration itself succeeded, so the plugin expects its `on_unload`, even if the
        // host refuses a pass below.
        self.instance.registered();
        let teardown = Teardown {
            origin: origin.clone(),
            hooks: Vec::new(),
            instance: Some(self.instance),
            pinning: self.pinning.clone(),
        };
        let passes = match passes {
            Ok(passes) => passes,
            Err(refused) => {
                teardown_all(vec![teardown]);
                return Err(refused);
            }
        };
        Ok(Registered {
            origin,
            name,
            version,
            passes,
            teardown,
            pinning: self.pinning,
        })
    }
}

/// A static plugin's register function.
pub(crate) type RegisterFn = Box<dyn Fn(&mut Registrar) -> Result<(), Error> + Send + Sync>;

/// A plugin compiled into the host.
pub(crate) struct StaticPlugin {
    pub(crate) name: String,
    pub(crate) register: RegisterFn,
}

impl std::fmt::Debug for StaticPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticPlugin")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl StaticPlugin {
    /// Runs the register function, catching a panic.
    pub(crate) fn register(&self) -> Result<Registered, Error> {
        let origin = Origin::Static(self.name.clone());
        let mut registrar = Registrar::new(origin.clone());
        let outcome = catch_unwind(AssertUnwindSafe(|| (self.register)(&mut registrar)));
        let Finished { passes, hooks, .. } = registrar.finish();
        let teardown = Teardown {
            origin: origin.clone(),
            hooks,
            instance: None,
            pinning: Pinning::default(),
        };
        let result = match outcome {
            Ok(Ok(())) => passes,
            Ok(Err(error)) => Err(Error::RegisterFailed {
                plugin: origin.clone(),
                reason: error.to_string(),
                source: Some(Box::new(error)),
            }),
            Err(panic) => Err(Error::Panicked {
                plugin: origin.clone(),
                message: panic_message(&*panic),
            }),
        };
        match result {
            Ok(passes) => Ok(Registered {
                origin,
                name: self.name.clone(),
                version: String::new(),
                passes,
                teardown,
                pinning: Pinning::default(),
            }),
            Err(error) => {
                // Hooks registered before the failure own state the plugin set up: run them.
                teardown_all(vec![teardown]);
                Err(error)
            }
        }
    }
}

/// The text of a panic payload.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic without a message".to_owned()
    }
}

/// Unloads plugins given in load order: every static plugin's unload hooks in reverse load
/// order (a panicking hook is caught and logged; teardown goes on), then every library
/// instance released in reverse load order. An instance no other set uses unloads now: its
/// `on_unload` runs and its library is closed (see the [registry](super::registry)).
///
/// Then, with every handle closed (one plugin's library may hold another's), each library
/// this teardown closed is looked for by its own checked descriptor, before anything maps its
/// file again: one the platform kept loaded is logged as a warning, the first time its mapping
/// is seen kept (see [`after_unload`](crate::load::pinning::after_unload)). Returns how many
/// were kept and not reported before.
pub(crate) fn teardown_all(plugins: Vec<Teardown>) -> usize {
    let mut instances = Vec::with_capacity(plugins.len());
    for plugin in plugins.into_iter().rev() {
        let Teardown {
            origin,
            hooks,
            instance,
            pinning,
        } = plugin;
        for hook in hooks.into_iter().rev() {
            if let Err(panic) = catch_unwind(AssertUnwindSafe(hook)) {
                log::error!(
                    "{}unload hook of {origin} panicked: {}",
                    crate::load::log_scope::prefix(),
                    panic_message(&*panic)
                );
            }
        }
        instances.extend(instance.map(|instance| (origin, pinning, instance)));
    }
    // Every instance closed first (one plugin's library may hold another's), each file still
    // marked busy, so nothing maps it again before it is looked for.
    let released: Vec<_> = instances
        .into_iter()
        .filter_map(|(origin, pinning, instance)| {
            // `Identity` is `Copy` on Unix and a path elsewhere: one spelling for both.
            #[allow(clippy::clone_on_copy)]
            let file = instance.identity().clone();
            Some((origin, pinning, file, LibraryInstance::release(instance)?))
        })
        .collect();
    let mut pinned = 0;
    for (origin, pinning, file, released) in released {
        let Some(Unmapped { kept, .. }) = released.settle() else {
            continue;
        };
        // Warned about and counted once per kept mapping (one per file: a later load of a
        // kept file shares it), with the causes its file shows.
        if crate::load::pinning::after_unload(&origin, &pinning, &file, kept) {
            pinned += 1;
        }
    }
    pinned
}
