//! Python instances: one execution of a plugin's module, shared process-wide through the same
//! [`Registry`] that shares library instances, with [`PyOpener`] in the platform loader's
//! place.
//!
//! The registry's key for a Python instance is the plugin's identity (the device and inode of
//! its file or package directory) combined with a hash of every source file it executes, so
//! an unchanged plugin is one instance for every host and generation (I7: one `on_load`, one
//! `on_unload`), and a changed one is a new instance beside the draining old one. The
//! registry's rules hold as for libraries: an instance is not executed again while the
//! previous instance of the same key is being torn down (I1), and no plugin code runs under
//! its lock (I4); its waits give the GIL up (see `sys::wait_detached`).
//!
//! The opener is handed the sources through [`STAGED`], a slot of the loading thread that
//! [`instance`] fills just before it asks the registry: `open` runs on the calling thread,
//! inside that call, so the sources it executes are the ones this load read from the checked
//! descriptors.

use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use pyo3::prelude::*;
use pyo3::types::PyModule;

use crate::error::{Error, Origin};
use crate::load::python::interpreter::{attach, helpers, plugin_failed};
use crate::registry::{FileRef, LibraryInstance, Opener, Registry};
use crate::sync::Arc;
use crate::trust::candidate::Identity;

crate::sync::lazy_static! {
    /// The process-wide registry of Python instances.
    static PY_REGISTRY: Arc<Registry<PyOpener>> = Arc::new(Registry::new(PyOpener));
}

/// A new instance's private module names are `_dylease.<n>`, `n` from here, never reused.
static NEXT: AtomicUsize = AtomicUsize::new(1);

/// The sources one load read from the checked files, for the opener.
#[derive(Debug)]
pub(crate) struct Staged {
    /// The plugin name unless it calls `dylease.plugin`: the file's stem.
    pub(crate) default_name: String,
    /// (module name suffix, path shown, source): `""` is the plugin file (a package's
    /// `__init__.py`).
    pub(crate) files: Vec<(String, String, String)>,
    pub(crate) package: bool,
}

thread_local! {
    /// See the module documentation.
    static STAGED: RefCell<Option<Staged>> = const { RefCell::new(None) };
}

/// The instance of the plugin `file` whose sources are `staged`: a live one of the same key,
/// or a new execution of them.
pub(crate) fn instance(
    file: FileRef<'_>,
    staged: Staged,
    deadline: Option<Instant>,
) -> Result<Arc<LibraryInstance<PyOpener>>, Error> {
    // Not in a `fork()`ed child: the registry does not ask for each file (`Registry::not_forked`).
    PY_REGISTRY.not_forked()?;
    STAGED.with(|slot| *slot.borrow_mut() = Some(staged));
    let instance = Registry::instance(&PY_REGISTRY, file, deadline);
    STAGED.with(|slot| slot.borrow_mut().take());
    instance
}

/// Runs Python plugins in place of the platform loader.
#[derive(Debug)]
pub(crate) struct PyOpener;

/// An executed module: the instance's "library".
#[derive(Debug)]
pub(crate) struct PyModuleInstance {
    handle: usize,
    private: String,
    origin: Origin,
    /// `None` once its modules were removed (by `finish`, or by the drop of a failed start).
    objects: Option<(Py<PyModule>, Py<PyAny>)>,
}

impl PyModuleInstance {
    /// The module and its `dylease` API object.
    pub(crate) fn objects<'py>(&self, py: Python<'py>) -> (Bound<'py, PyModule>, Bound<'py, PyAny>) {
        let (module, api) = self.objects.as_ref().expect("an instance in use has its modules");
        (module.bind(py).clone(), api.bind(py).clone())
    }

    /// Removes its modules from `sys.modules` and lets go of them; returns weak references
    /// to every module object, to check that they are gone.
    fn remove(&mut self, py: Python<'_>) -> Vec<Py<PyAny>> {
        let Some((module, api)) = self.objects.take() else {
            return Vec::new();
        };
        let refs = helpers(py)
            .getattr("unload")
            .and_then(|unload| unload.call1((self.private.as_str(), module.bind(py), api.bind(py))))
            .and_then(|refs| refs.extract::<Vec<Py<PyAny>>>());
        drop((module, api));
        refs.unwrap_or_else(|error| {
            log::error!("{}: cannot remove its Python modules: {error}", self.origin);
            Vec::new()
        })
    }
}

impl Drop for PyModuleInstance {
    /// An instance whose `on_load` failed (the registry drops it unstarted) still leaves
    /// nothing behind.
    fn drop(&mut self) {
        if self.objects.is_some() {
            attach(|py| drop(self.remove(py)));
        }
    }
}

/// A started instance: its module objects, for registrations, and whether its `on_load` ran
/// (then `on_unload` is owed).
#[derive(Debug)]
pub(crate) struct Started {
    module: Py<PyModule>,
    api: Py<PyAny>,
    on_load_ran: bool,
}

impl Started {
    /// The module and its `dylease` API object.
    pub(crate) fn objects<'py>(&self, py: Python<'py>) -> (Bound<'py, PyModule>, Bound<'py, PyAny>) {
        (self.module.bind(py).clone(), self.api.bind(py).clone())
    }
}

/// A torn-down instance whose module objects are still to be looked for.
#[derive(Debug)]
pub(crate) struct Closing {
    origin: Origin,
    refs: Vec<Py<PyAny>>,
}

impl Opener for PyOpener {
    type Library = PyModuleInstance;
    type Plugin = Started;
    type Closing = Closing;
    /// Whether a module object survived.
    type Closed = bool;

    fn open(&self, file: FileRef<'_>) -> Result<PyModuleInstance, Error> {
        let origin = Origin::File(file.shown.to_owned());
        let Some(staged) = STAGED.with(|slot| slot.borrow_mut().take()) else {
            return Err(Error::Config {
                reason: format!("{origin}: dylease opened a Python plugin without its sources (a bug)"),
            });
        };
        let handle = NEXT.fetch_add(1, Ordering::Relaxed);
        let private = format!("_dylease.{handle}");
        attach(|py| {
            let executed = helpers(py).getattr("execute").and_then(|execute| {
                execute.call1((private.as_str(), staged.default_name, staged.files, staged.package))
            });
            let (module, api) = executed
                .and_then(|pair| pair.extract::<(Py<PyModule>, Py<PyAny>)>())
                .map_err(|error| plugin_failed(&origin, "importing it", py, &error))?;
            Ok(PyModuleInstance {
                handle,
                private,
                origin,
                objects: Some((module, api)),
            })
        })
    }

    fn handle(library: &PyModuleInstance) -> usize {
        library.handle
    }

    fn start(&self, library: &mut PyModuleInstance, _: FileRef<'_>) -> Result<Started, Error> {
        attach(|py| {
            let (module, api) = library.objects(py);
            let started = |on_load_ran| Started {
                module: module.clone().unbind(),
                api: api.clone().unbind(),
                on_load_ran,
            };
            let on_load = helpers(py)
                .getattr("hook")
                .and_then(|hook| hook.call1((&module, "on_load")))
                .map_err(|error| plugin_failed(&library.origin, "looking up on_load", py, &error))?;
            if on_load.is_none() {
                return Ok(started(false));
            }
            on_load
                .call0()
                .map_err(|error| plugin_failed(&library.origin, "on_load", py, &error))?;
            Ok(started(true))
        })
    }

    fn finish(&self, started: Started, mut library: PyModuleInstance, registered: bool) -> Closing {
        attach(|py| {
            if registered || started.on_load_ran {
                let (module, _) = library.objects(py);
                let on_unload = helpers(py)
                    .getattr("hook")
                    .and_then(|hook| hook.call1((&module, "on_unload")))
                    .and_then(|on_unload| match on_unload.is_none() {
                        true => Ok(()),
                        false => on_unload.call0().map(drop),
                    });
                if let Err(error) = on_unload {
                    log::error!(
                        "{}on_unload of {} raised {}",
                        crate::log_scope::prefix(),
                        library.origin,
                        crate::load::python::interpreter::describe(py, &error)
                    );
                }
            }
            drop(started);
            let refs = library.remove(py);
            Closing {
                origin: library.origin.clone(),
                refs,
            }
        })
    }

    fn settle(&self, closing: Closing) -> bool {
        attach(|py| {
            let survivors = helpers(py)
                .getattr("settle")
                .and_then(|settle| settle.call1((closing.refs,)))
                .and_then(|names| names.extract::<Vec<String>>())
                .unwrap_or_default();
            if survivors.is_empty() {
                return false;
            }
            log::warn!(
                "{}{} stays in memory after its unload: its module {} is still referenced from outside \
                 the plugin (a global of another module, a thread it started, a callback it registered \
                 elsewhere); its code and data stay until that reference goes",
                crate::log_scope::prefix(),
                closing.origin,
                survivors.join(", ")
            );
            true
        })
    }
}

/// The registry key of a plugin: its file's identity and a hash of its sources.
pub(crate) fn key(identity: &Identity, staged: &Staged) -> Identity {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    identity.hash(&mut hasher);
    let root = hasher.finish();
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    staged.files.hash(&mut hasher);
    staged.package.hash(&mut hasher);
    combine(identity, root, hasher.finish())
}

#[cfg(unix)]
fn combine(_: &Identity, root: u64, sources: u64) -> Identity {
    crate::sys::FileId {
        dev: root,
        ino: sources,
    }
}

#[cfg(not(unix))]
fn combine(identity: &Identity, _: u64, sources: u64) -> Identity {
    let mut key = identity.clone().into_os_string();
    key.push(format!("#{sources:016x}"));
    std::path::PathBuf::from(key)
}
