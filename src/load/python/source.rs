//! Python plugin sources: discovery (files, directories, packages, a path variable), the trust
//! check of every file, and reading the sources from the checked descriptors.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Instant;

use pyo3::prelude::*;

use crate::error::{Error, Origin};
use crate::load::candidate::Candidate;
use crate::load::candidate::Identity;
use crate::load::pinning::Pinning;
use crate::load::pipeline::Registered;
use crate::load::python::callable::{PyCallable, placeholder};
use crate::load::python::instance::{self, Staged};
use crate::load::python::interpreter::{attach, helpers, plugin_failed};
use crate::load::registrar::{Collected, MAX_NAME_LEN, UserData};
use crate::load::registry::FileRef;
use crate::load::teardown::Teardown;
use crate::load::trust::{Checks, TrustPolicy, open_checked};

/// Where a host finds Python plugins, as given to the builder.
#[derive(Debug)]
pub(crate) enum PySource {
    /// Every `*.py` file and package directly in a directory.
    Dir(PathBuf),
    /// One `.py` file or package directory.
    File(PathBuf),
    /// A path list of files and directories in an environment variable, read at each load.
    Env(OsString),
}

/// How many files one package may hold: a directory tree that large is not a plugin.
const MAX_PACKAGE_FILES: usize = 4096;

/// A Python plugin discovery found, not yet checked or run.
#[derive(Debug)]
pub(crate) struct PyCandidate {
    /// The `.py` file or package directory, as configured (what errors and
    /// `PluginInfo::origin` show).
    path: PathBuf,
    package: bool,
    /// What makes it the same plugin as another ((dev, ino) of the file or directory).
    identity: Identity,
    /// Every file of it, each checked for trust; only `.py` ones are read.
    files: Vec<PyFile>,
}

#[derive(Debug)]
struct PyFile {
    /// The module name below the plugin's (`""` for the plugin file itself, `sub.mod`); `None`
    /// for a file that is not Python source.
    module: Option<String>,
    candidate: Candidate,
}

/// A plugin found, or the path that could not be used and why.
pub(crate) type Found = Result<PyCandidate, (PathBuf, Error)>;

/// The plugins of `source` in load order; a plugin reached twice (listed twice, or through a
/// symlink) is planned once, where it first appears (`seen`).
pub(crate) fn plan(source: &PySource, seen: &mut HashSet<Identity>) -> Result<Vec<Found>, Error> {
    let mut found = Vec::new();
    plan_all(source, &mut found)?;
    found.retain(|found| match found {
        // `Identity` is `Copy` on Unix and a path elsewhere: one spelling for both.
        #[allow(clippy::clone_on_copy)]
        Ok(candidate) => seen.insert(candidate.identity.clone()),
        Err(_) => true,
    });
    Ok(found)
}

fn plan_all(source: &PySource, plan: &mut Vec<Found>) -> Result<(), Error> {
    match source {
        PySource::Dir(dir) => in_dir(dir, plan),
        PySource::File(path) => plan.push(plugin(path)),
        PySource::Env(var) => {
            let Some(value) = std::env::var_os(var) else {
                return Ok(());
            };
            for path in std::env::split_paths(&value) {
                if path.as_os_str().is_empty() {
                    continue;
                }
                if path.is_relative() {
                    return Err(Error::Config {
                        reason: format!(
                            "environment variable {} lists the relative path `{}`; list absolute paths, so \
                             that which Python plugins load does not depend on the current directory",
                            var.to_string_lossy(),
                            path.display()
                        ),
                    });
                }
                if path.is_dir() && !path.join("__init__.py").is_file() {
                    in_dir(&path, plan);
                } else {
                    plan.push(plugin(&path));
                }
            }
        }
    }
    Ok(())
}

fn io_error(path: &Path, context: &'static str) -> impl FnOnce(io::Error) -> (PathBuf, Error) {
    let path = path.to_owned();
    move |source| (path.clone(), Error::Io { path, context, source })
}

/// The plugins directly in `dir`: `*.py` files and packages, not names starting with `_` or
/// `.`, in byte order of name.
fn in_dir(dir: &Path, plan: &mut Vec<Found>) {
    let listed = fs::read_dir(dir).and_then(|entries| {
        let mut names = Vec::new();
        for entry in entries {
            let name = entry?.file_name();
            let bytes = name.as_encoded_bytes();
            if bytes.starts_with(b"_") || bytes.starts_with(b".") {
                continue;
            }
            let path = dir.join(&name);
            let is_plugin = if bytes.ends_with(b".py") {
                path.is_file()
            } else {
                path.join("__init__.py").is_file()
            };
            if is_plugin {
                names.push(name);
            }
        }
        Ok(names)
    });
    match listed {
        Ok(mut names) => {
            names.sort_by(|a, b| a.as_encoded_bytes().cmp(b.as_encoded_bytes()));
            plan.extend(names.into_iter().map(|name| plugin(&dir.join(name))));
        }
        Err(source) => {
            plan.push(Err(io_error(dir, "cannot read Python plugin directory")(source)));
        }
    }
}

/// The plugin at `path`: a `.py` file, or a package directory (with `__init__.py`).
fn plugin(path: &Path) -> Result<PyCandidate, (PathBuf, Error)> {
    let metadata = fs::metadata(path).map_err(io_error(path, "cannot read Python plugin"))?;
    let mut files = Vec::new();
    let package = metadata.is_dir();
    if package {
        if !path.join("__init__.py").is_file() {
            let source = io::Error::new(io::ErrorKind::InvalidInput, "it is a directory without `__init__.py`");
            return Err(io_error(path, "cannot load Python package")(source));
        }
        package_files(path, "", &mut files).map_err(io_error(path, "cannot read Python package"))?;
    } else {
        files.push(PyFile {
            module: Some(String::new()),
            candidate: candidate(path).map_err(io_error(path, "cannot read Python plugin"))?,
        });
    }
    Ok(PyCandidate {
        path: path.to_owned(),
        package,
        identity: file_identity(path, &metadata),
        files,
    })
}

/// Every file of the package at `dir` (module prefix `prefix`), recursively, but not
/// `__pycache__` nor names starting with `.`.
fn package_files(dir: &Path, prefix: &str, files: &mut Vec<PyFile>) -> io::Result<()> {
    let mut entries = fs::read_dir(dir)?.collect::<Result<Vec<_>, _>>()?;
    entries.sort_by_key(|entry| entry.file_name());
    for entry in entries {
        let name = entry.file_name();
        let text = name.to_string_lossy();
        if text.starts_with('.') || text == "__pycache__" {
            continue;
        }
        let path = entry.path();
        let metadata = fs::metadata(&path)?;
        if metadata.is_dir() {
            let below = if prefix.is_empty() {
                text.to_string()
            } else {
                format!("{prefix}.{text}")
            };
            package_files(&path, &below, files)?;
        } else if metadata.is_file() {
            let module = text.strip_suffix(".py").map(|stem| match (prefix.is_empty(), stem) {
                (_, "__init__") => prefix.to_owned(),
                (true, stem) => stem.to_owned(),
                (false, stem) => format!("{prefix}.{stem}"),
            });
            files.push(PyFile {
                module,
                candidate: candidate(&path)?,
            });
        }
        if files.len() > MAX_PACKAGE_FILES {
            return Err(io::Error::other(format!(
                "it holds more than {MAX_PACKAGE_FILES} files"
            )));
        }
    }
    Ok(())
}

fn candidate(path: &Path) -> io::Result<Candidate> {
    let metadata = fs::metadata(path)?;
    Ok(Candidate {
        path: path.to_owned(),
        resolved: fs::canonicalize(path)?,
        identity: file_identity(path, &metadata),
        checked: None,
        discovered: None,
        opened: None,
        dependencies: None,
    })
}

fn file_identity(path: &Path, metadata: &fs::Metadata) -> Identity {
    crate::load::sys::identity(path, metadata)
}

impl PyCandidate {
    /// The path as configured.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The trust check of every file, before any code of any plugin runs (I8).
    pub(crate) fn check(&mut self, checks: &mut Checks, trust: TrustPolicy) -> Result<(), Error> {
        for file in &mut self.files {
            checks.check(trust, &mut file.candidate)?;
        }
        Ok(())
    }

    /// Reads the sources from the checked files, runs (or shares) the instance, and calls
    /// its registration for this set.
    pub(crate) fn register(
        mut self,
        checks: &mut Checks,
        trust: TrustPolicy,
        deadline: Option<Instant>,
    ) -> Result<Registered, Error> {
        let origin = Origin::File(self.path.clone());
        let mut sources = Vec::new();
        for file in &mut self.files {
            let Some(module) = &file.module else { continue };
            // The descriptor the trust check's identity was compared with: the bytes compiled
            // are the file checked, and no `__pycache__` is read or written.
            let (opened, len, _) = open_checked(&mut file.candidate, checks, trust)?;
            let mut source = String::with_capacity(usize::try_from(len).unwrap_or(0));
            opened.file().read_to_string(&mut source).map_err(|source| Error::Io {
                path: file.candidate.path.clone(),
                context: "cannot read Python source (it must be UTF-8)",
                source,
            })?;
            sources.push((module.clone(), file.candidate.path.display().to_string(), source));
        }
        let stem = self.path.file_stem().unwrap_or(self.path.as_os_str());
        let staged = Staged {
            default_name: stem.to_string_lossy().into_owned(),
            files: sources,
            package: self.package,
        };
        let key = instance::key(&self.identity, &staged);
        let file = FileRef {
            shown: &self.path,
            resolved: &self.path,
            identity: &key,
            source: None,
            origin: false,
            loads: &[],
            strict: false,
            dependencies: &[],
            deadline,
        };
        let instance = instance::instance(file, staged, deadline)?;
        let (name, version, passes) = attach(|py| {
            let (module, api) = instance.plugin().objects(py);
            let helpers = helpers(py);
            let failed = |error: PyErr| plugin_failed(&origin, "register_passes", py, &error);
            let (name, version) = helpers
                .getattr("identity")
                .and_then(|identity| identity.call1((&module, &api)))
                .and_then(|pair| pair.extract::<(String, String)>())
                .map_err(failed)?;
            let passes = helpers
                .getattr("register")
                .and_then(|register| register.call1((&module, &api)))
                .and_then(|passes| passes.extract::<Vec<(String, String, Py<PyAny>)>>())
                .map_err(|error| plugin_failed(&origin, "registering its passes", py, &error))?;
            Ok::<_, Error>((name, version, passes))
        })?;
        let mut collected: Vec<Collected> = Vec::with_capacity(passes.len());
        for (pass, interface, func) in passes {
            let invalid = |reason: &str| Error::InvalidPass {
                plugin: origin.clone(),
                pass: pass.clone(),
                reason: reason.to_owned(),
            };
            if pass.is_empty() || pass.len() > MAX_NAME_LEN {
                return Err(invalid("a pass name has 1 to 256 bytes"));
            }
            if interface.is_empty() || interface.len() > MAX_NAME_LEN {
                return Err(invalid("an interface has 1 to 256 bytes"));
            }
            if collected.iter().any(|earlier| *earlier.name == *pass) {
                return Err(Error::DuplicatePass {
                    pass,
                    first: origin.clone(),
                    second: origin.clone(),
                });
            }
            collected.push(Collected {
                name: pass.into(),
                interface: Some(interface.into()),
                func: placeholder,
                user_data: UserData(std::ptr::null_mut()),
                python: Some(PyCallable::new(func)),
            });
        }
        if name.is_empty() || name.len() > MAX_NAME_LEN {
            return Err(Error::InvalidPlugin {
                plugin: origin,
                reason: "its name (dylease.plugin) must have 1 to 256 bytes".into(),
            });
        }
        instance.registered();
        let callables: Vec<PyCallable> = collected.iter().filter_map(|pass| pass.python.clone()).collect();
        let unload = move || {
            // The set's references to the passes go first, then (if this set was the last
            // one using it) the instance: `on_unload`, its modules, the check that they went.
            attach(|_| callables.iter().for_each(PyCallable::clear));
            if let Some(released) = crate::load::registry::LibraryInstance::release(instance) {
                released.settle();
            }
        };
        Ok(Registered {
            origin: origin.clone(),
            name,
            version,
            passes: collected,
            teardown: Teardown::with_hooks(origin, vec![Box::new(unload)]),
            pinning: Pinning::default(),
        })
    }
}
