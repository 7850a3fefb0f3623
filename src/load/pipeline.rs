//! The load pipeline as typestates: `Candidate` → `Opened` → `Verified` → `Registered`.
//!
//! Each step consumes the previous state, so a library cannot be registered before its ABI
//! is checked, and only a `Registered` plugin can enter a set. Every failure drops what the
//! step held: an `Opened` or `Verified` library that goes out of scope is closed.

use core::ffi::c_char;
use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;

use crate::abi::{DYLEASE_ABI_VERSION, dylease_register_fn};
use crate::error::{Error, Origin};
use crate::load::library::{Library, still_loaded};
use crate::load::registrar::{Collected, MAX_NAME_LEN, Registrar, TOO_LONG, UnloadHook, bounded_c_str};

/// A library file found by discovery, not yet opened.
#[derive(Debug)]
pub(crate) struct Candidate {
    /// The path as discovered (what errors and `PluginInfo::path` show).
    pub(crate) path: PathBuf,
    /// The path with symlinks resolved (what is opened).
    pub(crate) resolved: PathBuf,
}

/// A library that is open; its constructors have run.
#[derive(Debug)]
pub(crate) struct Opened {
    path: PathBuf,
    library: Library,
}

/// A library whose descriptor passed every check.
#[derive(Debug)]
pub(crate) struct Verified {
    path: PathBuf,
    library: Library,
    /// The descriptor's functions: code of `library`, which stays open as long as this
    /// value exists.
    register_passes: dylease_register_fn,
    on_unload: Option<unsafe extern "C" fn()>,
    name: String,
    version: String,
}

/// A plugin whose passes are collected: the only state a set is built from.
#[derive(Debug)]
pub(crate) struct Registered {
    pub(crate) origin: Origin,
    pub(crate) name: String,
    pub(crate) version: String,
    pub(crate) passes: Vec<Collected>,
    pub(crate) teardown: Teardown,
}

/// What unloading one plugin takes: its unload code, then closing its library.
pub(crate) struct Teardown {
    origin: Origin,
    c_on_unload: Option<unsafe extern "C" fn()>,
    hooks: Vec<UnloadHook>,
    library: Option<Library>,
}

impl std::fmt::Debug for Teardown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Teardown")
            .field("origin", &self.origin)
            .field("c_on_unload", &self.c_on_unload.is_some())
            .field("hooks", &self.hooks.len())
            .field("library", &self.library)
            .finish()
    }
}

impl Candidate {
    /// Opens the library (`RTLD_NOW | RTLD_LOCAL`), running its constructors. Its ELF
    /// headers are checked first: a truncated library would crash the process inside the
    /// loader, and the loader misreports one built for another architecture.
    pub(crate) fn open(self) -> Result<Opened, Error> {
        if let Err(reason) = crate::load::elf::check(&self.resolved) {
            return Err(Error::Open {
                path: self.path,
                reason,
                cause: crate::error::OpenCause::Headers,
            });
        }
        // SAFETY: the host's configuration named this file as a plugin; by naming it, the
        // user vouches for its initialisation and termination routines (see the crate docs,
        // "Trust"). Plugin code runs here under the host's lock, with the re-entrancy flag set
        // so that a nested `acquire()` fails instead of deadlocking.
        let library = unsafe { Library::open(&self.resolved) };
        let library = library.map_err(|reason| Error::Open {
            path: self.path.clone(),
            reason,
            cause: crate::error::OpenCause::Loader,
        })?;
        Ok(Opened {
            path: self.path,
            library,
        })
    }
}

impl Opened {
    /// Resolves the entry point, calls it, and checks the descriptor it returns.
    pub(crate) fn verify(self) -> Result<Verified, Error> {
        let invalid = |reason: &str| Error::InvalidPlugin {
            plugin: Origin::File(self.path.clone()),
            reason: reason.to_owned(),
        };
        let entry = self.library.entry().map_err(|reason| Error::MissingEntry {
            path: self.path.clone(),
            reason,
        })?;
        // SAFETY: `entry` has the ABI's type and `self.library` is open.
        let descriptor = unsafe { entry() };
        // SAFETY: by the ABI, a non-NULL result points to a descriptor that lives as long as
        // the library, and `abi_version` is its first field in every ABI version.
        let Some(abi_version) = (unsafe { descriptor.cast::<u32>().as_ref() }).copied() else {
            return Err(invalid("`dylease_plugin_v1` returned NULL"));
        };
        if abi_version != DYLEASE_ABI_VERSION {
            return Err(Error::AbiMismatch {
                path: self.path,
                found: abi_version,
                expected: DYLEASE_ABI_VERSION,
            });
        }
        // SAFETY: the version matched, so the descriptor has the layout of `dylease_plugin`.
        let plugin = unsafe { &*descriptor };
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
        Ok(Verified {
            path: self.path,
            library: self.library,
            register_passes,
            on_unload: plugin.on_unload,
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
        let register = self.register_passes;
        let mut registrar = Registrar::new(origin.clone());
        // SAFETY: `register` comes from a verified descriptor of `self.library`, still open;
        // the API table is static and the registrar outlives the call, on this thread.
        let code = registrar.with_raw(|raw| unsafe { register(Registrar::host_api(), raw) });
        let (passes, _) = registrar.finish();
        let teardown = Teardown {
            origin: origin.clone(),
            c_on_unload: self.on_unload,
            hooks: Vec::new(),
            library: Some(self.library),
        };
        if code != 0 {
            // The plugin's registration failed: it undoes its own work, so its `on_unload`
            // is not called. Dropping `teardown` without running it closes the library.
            drop(teardown.without_unload_code());
            // A refused pass is the likely cause (the header's `register_passes` stops at
            // the first refusal): report it rather than a bare code.
            return Err(match passes {
                Err(refused) => refused,
                Ok(_) => Error::RegisterFailed {
                    plugin: origin,
                    reason: format!("`register_passes` returned {code}"),
                    source: None,
                },
            });
        }
        let passes = match passes {
            Ok(passes) => passes,
            Err(refused) => {
                // Registration itself succeeded, so the plugin expects its `on_unload`.
                teardown_all(vec![teardown]);
                return Err(refused);
            }
        };
        Ok(Registered {
            origin,
            name: self.name,
            version: self.version,
            passes,
            teardown,
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
        let (passes, hooks) = registrar.finish();
        let teardown = Teardown {
            origin: origin.clone(),
            c_on_unload: None,
            hooks,
            library: None,
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

impl Teardown {
    fn without_unload_code(mut self) -> Self {
        self.c_on_unload = None;
        self.hooks.clear();
        self
    }
}

/// Unloads plugins given in load order: every plugin's unload code in reverse load order,
/// then every library closed in reverse load order. A panicking hook is caught and logged;
/// teardown goes on.
///
/// Then, with every handle closed (one plugin's library may hold another's), each library is
/// looked for: one the platform kept loaded is logged as a warning. Returns how many were
/// kept.
pub(crate) fn teardown_all(plugins: Vec<Teardown>) -> usize {
    let mut libraries = Vec::with_capacity(plugins.len());
    for plugin in plugins.into_iter().rev() {
        let Teardown {
            origin,
            c_on_unload,
            hooks,
            library,
        } = plugin;
        if let Some(on_unload) = c_on_unload {
            // SAFETY: `on_unload` comes from the verified descriptor of `library`, which is
            // still open; the ABI calls it once per unload, before close.
            unsafe { on_unload() };
        }
        for hook in hooks.into_iter().rev() {
            if let Err(panic) = catch_unwind(AssertUnwindSafe(hook)) {
                log::error!("unload hook of {origin} panicked: {}", panic_message(&*panic));
            }
        }
        libraries.push((origin, library));
    }
    let mut closed = Vec::with_capacity(libraries.len());
    for (origin, library) in libraries {
        let Some(library) = library else { continue };
        let name = library.loader_name();
        if let Err(reason) = library.close() {
            log::warn!("closing {origin} failed: {reason}");
        }
        closed.push((origin, name));
    }
    let mut pinned = 0;
    for (origin, name) in closed {
        if still_loaded(name.as_ref()) == Some(true) {
            log::warn!(
                "{origin} is still loaded after its unload: the platform pinned it (linked with `-z nodelete`, \
                 a thread-local destructor, or another user of the same file); its statics keep their values, \
                 and the next load registers its passes again on the same mapping"
            );
            pinned += 1;
        }
    }
    pinned
}
