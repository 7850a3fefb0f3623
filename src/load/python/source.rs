//! Python plugin sources: discovery (files, directories, packages, a path variable), the trust
//! check of every file, and reading the sources from the checked descriptors.
//!
//! A package is read through one descriptor of its directory (`sys::walk::Tree`: its
//! resolved path opened once, `O_DIRECTORY | O_NOFOLLOW`), so that an install that swaps the
//! package's directory for a new version (`renameat2(RENAME_EXCHANGE)`, then removing the old
//! tree) during a load never gives the load files of two versions. Discovery lists it through
//! that descriptor (on Linux `/proc/self/fd/N`, the directory it holds), recording each file's
//! status, which the trust check judges; the sources are then opened relative to it
//! (`openat`, each subdirectory opened from the one above, no symlink followed), and each
//! must be the file listed and checked. A file gone or replaced since (the old tree removed,
//! a file renamed over) makes the whole package listed, checked and read again from its path,
//! at most [`REPLACEMENTS`] times. The import system needs no path: the sources are
//! read here, whole, before any of them runs, and compiled from memory (`bootstrap.py`
//! serves a package's submodules from them), so `openat` suffices and no
//! `/proc/self/fd/N/...` path reaches Python. The trust check itself walks the paths, as for
//! any plugin file: only this user or root can change what they name once they passed.

use std::collections::HashSet;
use std::ffi::OsString;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::time::Instant;

use pyo3::prelude::*;

use crate::error::{Error, Origin};
use crate::inspect::manifest::{DeclaredPass, Manifest};
use crate::inspect::pinning::Pinning;
use crate::load::pipeline::Registered;
use crate::load::python::instance::{self, Staged};
use crate::load::python::interpreter::{attach, helpers, plugin_failed};
use crate::registrar::python::{PyCallable, placeholder};
use crate::registrar::{Collected, MAX_NAME_LEN, UserData};
use crate::registry::FileRef;
use crate::registry::teardown::Teardown;
#[cfg(unix)]
use crate::sys::walk::{Kind, Tree};
use crate::trust::candidate::Candidate;
use crate::trust::candidate::Identity;
use crate::trust::{Checks, REPLACEMENTS, TrustPolicy, open_checked};

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
    /// A package's directory, opened once: its files are listed and read through it (see
    /// [`Tree`]).
    #[cfg(unix)]
    tree: Option<Tree>,
}

#[derive(Debug)]
struct PyFile {
    /// The module name below the plugin's (`""` for the plugin file itself, `sub.mod`); `None`
    /// for a file that is not Python source.
    module: Option<String>,
    /// A package's file: its names below the package directory (`sub`, `mod.py`).
    #[cfg(unix)]
    at: Vec<OsString>,
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
    if metadata.is_dir() {
        return package(path, &metadata);
    }
    let files = vec![PyFile {
        module: Some(String::new()),
        #[cfg(unix)]
        at: Vec::new(),
        candidate: candidate(path).map_err(io_error(path, "cannot read Python plugin"))?,
    }];
    Ok(PyCandidate {
        path: path.to_owned(),
        package: false,
        identity: file_identity(path, &metadata),
        files,
        #[cfg(unix)]
        tree: None,
    })
}

fn no_init(path: &Path) -> (PathBuf, Error) {
    let source = io::Error::new(io::ErrorKind::InvalidInput, "it is a directory without `__init__.py`");
    io_error(path, "cannot load Python package")(source)
}

/// The package at `path`, listed through one descriptor of its directory (its path resolved
/// first, as a plugin file's is).
#[cfg(unix)]
fn package(path: &Path, _: &fs::Metadata) -> Result<PyCandidate, (PathBuf, Error)> {
    let resolved = fs::canonicalize(path).map_err(io_error(path, "cannot read Python package"))?;
    let (tree, stat) = Tree::open(&resolved).map_err(io_error(path, "cannot read Python package"))?;
    match tree.stat(std::ffi::OsStr::new("__init__.py")) {
        Ok(init) if init.kind() == Kind::File => {}
        _ => return Err(no_init(path)),
    }
    let mut files = Vec::new();
    let root = Listed {
        tree: &tree,
        shown: path,
        resolved: &resolved,
        at: &[],
    };
    package_files(&root, &mut files).map_err(io_error(path, "cannot read Python package"))?;
    Ok(PyCandidate {
        path: path.to_owned(),
        package: true,
        identity: stat.id(),
        files,
        tree: Some(tree),
    })
}

/// A directory of a package being listed: its descriptor, its path as shown and as
/// resolved, and its names below the package directory.
#[cfg(unix)]
struct Listed<'a> {
    tree: &'a Tree,
    shown: &'a Path,
    resolved: &'a Path,
    at: &'a [OsString],
}

/// Every file of the package directory `dir`, recursively, but not `__pycache__` nor names
/// starting with `.`. A symlink in it is refused: the package is read through its
/// directory's descriptor, which no link out of it is followed from.
#[cfg(unix)]
fn package_files(dir: &Listed<'_>, files: &mut Vec<PyFile>) -> io::Result<()> {
    let mut names = dir.tree.names(dir.resolved)?;
    names.sort_by(|a, b| a.as_encoded_bytes().cmp(b.as_encoded_bytes()));
    for name in names {
        let text = name.to_string_lossy();
        if text.starts_with('.') || text == "__pycache__" {
            continue;
        }
        let mut at = dir.at.to_vec();
        at.push(name.clone());
        let shown = dir.shown.join(&name);
        let resolved = dir.resolved.join(&name);
        let stat = dir.tree.stat(&name)?;
        match stat.kind() {
            Kind::Directory => {
                let (tree, opened) = dir.tree.dir(&name)?;
                if opened.id() != stat.id() {
                    return Err(changed(&shown));
                }
                let below = Listed {
                    tree: &tree,
                    shown: &shown,
                    resolved: &resolved,
                    at: &at,
                };
                package_files(&below, files)?;
            }
            Kind::File => files.push(PyFile {
                module: module_name(&at),
                candidate: Candidate {
                    path: shown,
                    resolved,
                    identity: stat.id(),
                    checked: None,
                    discovered: Some(stat),
                    listed: None,
                    opened: None,
                    dependencies: None,
                    resolved_by_status: false,
                    since_acquire: false,
                },
                at,
            }),
            Kind::Symlink => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "`{}` is a symlink: a package is read through its own directory, so its files and \
                         directories must be in it (copy the file in instead of linking it)",
                        shown.display()
                    ),
                ));
            }
            Kind::Other => {}
        }
        if files.len() > MAX_PACKAGE_FILES {
            return Err(io::Error::other(format!(
                "it holds more than {MAX_PACKAGE_FILES} files"
            )));
        }
    }
    Ok(())
}

/// A package's file or directory was replaced or removed after the package was listed.
#[cfg(unix)]
fn changed(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("`{}` changed while the package was read", path.display()),
    )
}

/// The module a package's file at `at` (names below the package directory) is: `sub.mod`
/// for `sub/mod.py`, `sub` for `sub/__init__.py`; `None` for a file that is not `.py`.
#[cfg(unix)]
fn module_name(at: &[OsString]) -> Option<String> {
    let (file, dirs) = at.split_last()?;
    let file = file.to_string_lossy();
    let stem = file.strip_suffix(".py")?;
    let mut parts: Vec<String> = dirs.iter().map(|dir| dir.to_string_lossy().into_owned()).collect();
    if stem != "__init__" {
        parts.push(stem.to_owned());
    }
    Some(parts.join("."))
}

/// The package at `path`, listed by path (no `openat` here).
#[cfg(not(unix))]
fn package(path: &Path, metadata: &fs::Metadata) -> Result<PyCandidate, (PathBuf, Error)> {
    if !path.join("__init__.py").is_file() {
        return Err(no_init(path));
    }
    let mut files = Vec::new();
    package_files(path, "", &mut files).map_err(io_error(path, "cannot read Python package"))?;
    Ok(PyCandidate {
        path: path.to_owned(),
        package: true,
        identity: file_identity(path, metadata),
        files,
    })
}

/// Every file of the package at `dir` (module prefix `prefix`), recursively, but not
/// `__pycache__` nor names starting with `.`.
#[cfg(not(unix))]
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

/// A package's file, opened through the package directory's descriptor (each directory on
/// the way opened relative to the one before, no symlink followed): it must be the file
/// listed, and checked (same device and inode), or it changed since.
#[cfg(unix)]
fn open_in(tree: &Tree, file: &PyFile) -> io::Result<fs::File> {
    let Some((name, dirs)) = file.at.split_last() else {
        return Err(changed(&file.candidate.path));
    };
    let mut below: Option<Tree> = None;
    for dir in dirs {
        let (next, _) = below.as_ref().unwrap_or(tree).dir(dir)?;
        below = Some(next);
    }
    let (opened, stat) = below.as_ref().unwrap_or(tree).file(name)?;
    let listed = file.candidate.checked.unwrap_or(file.candidate.identity);
    if stat.kind() != Kind::File || stat.id() != listed {
        return Err(changed(&file.candidate.path));
    }
    Ok(opened)
}

/// Whether an error opening a package's file means that the package changed since it was
/// listed: the file or a directory on its way is gone, or is a symlink or no directory now.
#[cfg(unix)]
fn is_change(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::NotFound
        || matches!(error.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR | libc::ENOENT))
}

fn candidate(path: &Path) -> io::Result<Candidate> {
    let metadata = fs::metadata(path)?;
    Ok(Candidate {
        path: path.to_owned(),
        resolved: fs::canonicalize(path)?,
        identity: file_identity(path, &metadata),
        checked: None,
        discovered: None,
        listed: None,
        opened: None,
        dependencies: None,
        resolved_by_status: false,
        since_acquire: false,
    })
}

fn file_identity(path: &Path, metadata: &fs::Metadata) -> Identity {
    crate::sys::identity(path, metadata)
}

/// `(module name suffix, path shown, source)` of every Python file of a plugin.
type Sources = Vec<(String, String, String)>;

impl PyCandidate {
    /// Reads the sources of every `.py` file; `Ok(Err(_))` if a package's file was replaced
    /// or removed since the package was listed (the package must then be read again, whole).
    fn sources(&mut self, checks: &mut Checks, trust: TrustPolicy) -> Result<io::Result<Sources>, Error> {
        let mut sources = Vec::new();
        for file in &mut self.files {
            let Some(module) = &file.module else { continue };
            #[cfg(unix)]
            let opened = match &self.tree {
                Some(tree) => match open_in(tree, file) {
                    Ok(opened) => opened,
                    Err(error) if is_change(&error) => return Ok(Err(error)),
                    Err(source) => {
                        return Err(Error::Io {
                            path: file.candidate.path.clone(),
                            context: "cannot open Python source",
                            source,
                        });
                    }
                },
                None => open_checked(&mut file.candidate, checks, trust)?.0.elf.into_source(),
            };
            // The descriptor the trust check's identity was compared with: the bytes compiled
            // are the file checked, and no `__pycache__` is read or written.
            #[cfg(not(unix))]
            let opened = open_checked(&mut file.candidate, checks, trust)?.0.file;
            let mut source = String::new();
            (&opened).read_to_string(&mut source).map_err(|source| Error::Io {
                path: file.candidate.path.clone(),
                context: "cannot read Python source (it must be UTF-8)",
                source,
            })?;
            sources.push((module.clone(), file.candidate.path.display().to_string(), source));
        }
        Ok(Ok(sources))
    }

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

    /// Reads the sources from the checked files (every file, again, if a package's directory
    /// was swapped meanwhile): what the manifest is read from and what the instance runs.
    fn read(&mut self, checks: &mut Checks, trust: TrustPolicy) -> Result<Staged, Error> {
        let mut replaced = 0;
        let sources = loop {
            match self.sources(checks, trust)? {
                Ok(sources) => break sources,
                // A package replaced after it was listed (an install that swaps its
                // directory): listed, checked and read again, whole, never mixed.
                Err(changed) if replaced < REPLACEMENTS => {
                    replaced += 1;
                    log::debug!("{}: {changed}; reading the package again", self.path.display());
                    *self = plugin(&self.path).map_err(|(_, error)| error)?;
                    // Checked afresh: `checks` remembers the directories it passed by path,
                    // and the package's path names another directory now.
                    self.check(&mut Checks::default(), trust)?;
                }
                Err(changed) => {
                    return Err(Error::Io {
                        path: self.path.clone(),
                        context: "the Python package kept changing while it was read; try again once its \
                                  installation is done",
                        source: changed,
                    });
                }
            }
        };
        let stem = self.path.file_stem().unwrap_or(self.path.as_os_str());
        Ok(Staged {
            default_name: stem.to_string_lossy().into_owned(),
            files: sources,
            package: self.package,
        })
    }

    /// The plugin's manifest, read from its sources' syntax trees without running any of its
    /// code (see [`Staged::manifest`]); `None` if its name or version cannot be read. The
    /// sources are read from the checked files as [`register`](PyCandidate::register) reads
    /// them: call [`check`](PyCandidate::check) first. A file that does not parse is an
    /// [`Error::InvalidPlugin`] naming the file and line.
    pub(crate) fn manifest(&mut self, checks: &mut Checks, trust: TrustPolicy) -> Result<Option<Manifest>, Error> {
        let origin = Origin::File(self.path.clone());
        self.read(checks, trust)?.manifest(&origin)
    }

    /// Reads the sources from the checked files, runs (or shares) the instance, and calls
    /// its registration for this set. A manifest read from those sources must match what it
    /// registered ([`Manifest::compare`]); a file that does not parse leaves it without one,
    /// and its execution then reports the syntax error.
    pub(crate) fn register(
        mut self,
        checks: &mut Checks,
        trust: TrustPolicy,
        deadline: Option<Instant>,
    ) -> Result<Registered, Error> {
        let origin = Origin::File(self.path.clone());
        let staged = self.read(checks, trust)?;
        let manifest = staged.manifest(&origin).unwrap_or_else(|error| {
            log::debug!("{error}; loading it without a manifest");
            None
        });
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
        if let Some(manifest) = &manifest {
            let registered = collected.iter().map(|pass| (&*pass.name, pass.interface.as_deref()));
            manifest.compare(&origin, (None, &name, &version), registered)?;
        }
        instance.registered();
        let callables: Vec<PyCallable> = collected.iter().filter_map(|pass| pass.python.clone()).collect();
        let unload = move || {
            // The set's references to the passes go first, then (if this set was the last
            // one using it) the instance: `on_unload`, its modules, the check that they went.
            attach(|_| callables.iter().for_each(PyCallable::clear));
            if let Some(released) = crate::registry::LibraryInstance::release(instance) {
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

impl Staged {
    /// The manifest of the plugin these are the sources of (`origin`), read by `ast` in the
    /// interpreter (`bootstrap.py`'s `manifest`) without running any of it: `None` if its name
    /// or version cannot be read statically. A file that does not parse is an
    /// [`Error::InvalidPlugin`] naming the file and the line.
    pub(crate) fn manifest(&self, origin: &Origin) -> Result<Option<Manifest>, Error> {
        type Read = Option<(String, String, bool, Vec<(String, String)>)>;
        let read = attach(|py| {
            helpers(py)
                .getattr("manifest")
                .and_then(|manifest| manifest.call1((&self.default_name, self.files.clone(), self.package)))
                .and_then(|read| read.extract::<Read>())
                .map_err(|error| Error::InvalidPlugin {
                    plugin: origin.clone(),
                    reason: format!(
                        "its manifest cannot be read: {}",
                        crate::load::python::interpreter::describe(py, &error)
                    ),
                })
        })?;
        Ok(read.map(|(name, version, complete, passes)| Manifest {
            abi_version: None,
            name,
            version,
            complete,
            passes: passes
                .into_iter()
                .map(|(name, interface)| DeclaredPass::new(name, Some(interface)))
                .collect(),
        }))
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use crate::registry::teardown::teardown_all;

    /// A fresh directory of this test's own (0755), with `files` (path below it, source) in it.
    fn plugin_dir(test: &str, files: &[(&str, &str)]) -> crate::test_dir::TestDir {
        use std::os::unix::fs::PermissionsExt;
        let dir = crate::test_dir::TestDir::new(&format!("py-manifest-{test}"));
        for (name, source) in files {
            let path = dir.join(name);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, source).unwrap();
        }
        for entry in walk(&dir) {
            let mode = if entry.is_dir() { 0o755 } else { 0o644 };
            fs::set_permissions(&entry, fs::Permissions::from_mode(mode)).unwrap();
        }
        dir
    }

    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut all = vec![dir.to_owned()];
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                all.extend(walk(&path));
            } else {
                all.push(path);
            }
        }
        all
    }

    fn candidate(path: &Path) -> PyCandidate {
        let mut candidate = plugin(path).map_err(|(_, error)| error).unwrap();
        candidate
            .check(&mut Checks::default(), TrustPolicy::Permissive)
            .unwrap();
        candidate
    }

    fn manifest_of(path: &Path) -> Result<Option<Manifest>, Error> {
        candidate(path).manifest(&mut Checks::default(), TrustPolicy::Permissive)
    }

    /// The (name, version, passes) the plugin registers when it is loaded.
    fn registered(path: &Path) -> (String, String, Vec<DeclaredPass>) {
        let registered = candidate(path)
            .register(&mut Checks::default(), TrustPolicy::Permissive, None)
            .unwrap();
        let passes = registered
            .passes
            .iter()
            .map(|pass| DeclaredPass::new(&*pass.name, pass.interface.as_deref().map(str::to_owned)))
            .collect();
        let (name, version) = (registered.name.clone(), registered.version.clone());
        teardown_all(vec![registered.teardown]);
        (name, version, passes)
    }

    /// The manifest is complete and lists exactly what the plugin registers.
    fn assert_matches(path: &Path) -> Manifest {
        let manifest = manifest_of(path).unwrap().expect("a manifest");
        assert!(manifest.is_complete(), "{manifest:?}");
        let (name, version, mut passes) = registered(path);
        passes.sort_by(|a, b| a.name.cmp(&b.name));
        let mut declared = manifest.passes().to_vec();
        declared.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(
            (manifest.name(), manifest.version(), declared),
            (&*name, &*version, passes)
        );
        assert_eq!(manifest.abi_version(), None);
        manifest
    }

    fn pass(name: &str, interface: &str) -> DeclaredPass {
        DeclaredPass::new(name, Some(interface.to_owned()))
    }

    #[test]
    fn the_example_plugins_manifest_is_what_it_registers() {
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/plugins/simplify.py");
        let source = fs::read_to_string(example).unwrap();
        let dir = plugin_dir("example", &[("simplify.py", &source)]);
        let manifest = assert_matches(&dir.join("simplify.py"));
        assert_eq!(
            (manifest.name(), manifest.version(), manifest.passes()),
            (
                "simplify",
                "1.0",
                &[pass("simplify_identity", "demo.graph_py_pass/1")][..]
            )
        );
    }

    #[test]
    fn aliased_imports_and_a_packages_submodule_are_read() {
        let dir = plugin_dir(
            "aliases",
            &[
                (
                    "aliased.py",
                    "import dylease as d\nd.plugin(name='aliased', version='2')\n\n\
                     @d.typed_pass('one', interface='i/1')\ndef one(x):\n    return x\n",
                ),
                (
                    "from_import.py",
                    "from dylease import typed_pass as tp, plugin\n\n\
                     @tp('two', 'i/1')\ndef two(x):\n    return x\n",
                ),
                (
                    "pkg/__init__.py",
                    "import dylease\nfrom . import sub\ndylease.plugin('pkg', '3')\n\n\
                     @dylease.typed_pass('top', 'i/1')\ndef top(x):\n    return x\n",
                ),
                (
                    "pkg/sub.py",
                    "from dylease import typed_pass\n\n@typed_pass('below', 'i/2')\ndef below(x):\n    return x\n",
                ),
            ],
        );
        let aliased = assert_matches(&dir.join("aliased.py"));
        assert_eq!((aliased.name(), aliased.version()), ("aliased", "2"));
        let from_import = assert_matches(&dir.join("from_import.py"));
        assert_eq!(
            (from_import.name(), from_import.passes()),
            ("from_import", &[pass("two", "i/1")][..])
        );
        // The API as another module of the package holds it.
        fs::create_dir(dir.join("relayed")).unwrap();
        fs::write(dir.join("relayed/api.py"), "from dylease import typed_pass as tp\n").unwrap();
        fs::write(
            dir.join("relayed/__init__.py"),
            "from .api import tp\n\n@tp('relayed', 'i/3')\ndef relayed(x):\n    return x\n",
        )
        .unwrap();
        let relayed = assert_matches(&dir.join("relayed"));
        assert_eq!(relayed.passes(), &[pass("relayed", "i/3")]);
        let package = assert_matches(&dir.join("pkg"));
        assert_eq!(
            (package.name(), package.passes()),
            ("pkg", &[pass("top", "i/1"), pass("below", "i/2")][..])
        );
    }

    #[test]
    fn what_the_reader_cannot_see_makes_the_manifest_incomplete() {
        let decorated = "import dylease\n\n@dylease.typed_pass('seen', 'i/1')\ndef seen(x):\n    return x\n";
        let dir = plugin_dir(
            "incomplete",
            &[
                (
                    "register_passes.py",
                    &format!("{decorated}\ndef register_passes(reg):\n    reg.add_typed_pass('other', 'i/1', seen)\n"),
                ),
                (
                    "conditional.py",
                    &format!(
                        "{decorated}\nif True:\n    @dylease.typed_pass('hidden', 'i/1')\n    def hidden(x):\n        return x\n"
                    ),
                ),
                (
                    "computed.py",
                    &format!("{decorated}\n@dylease.typed_pass('a' + 'b', 'i/1')\ndef ab(x):\n    return x\n"),
                ),
                (
                    "called.py",
                    &format!("{decorated}\ndef plain(x):\n    return x\n\ndylease.typed_pass('plain', 'i/1')(plain)\n"),
                ),
                (
                    "module_getattr.py",
                    &format!("{decorated}\ndef __getattr__(name):\n    raise AttributeError(name)\n"),
                ),
                (
                    "conditional_import/__init__.py",
                    "try:\n    from . import sub\nexcept ImportError:\n    pass\n",
                ),
                ("conditional_import/sub.py", decorated),
            ],
        );
        for plugin in [
            "register_passes.py",
            "conditional.py",
            "computed.py",
            "called.py",
            "module_getattr.py",
            "conditional_import",
        ] {
            let path = dir.join(plugin);
            let manifest = manifest_of(&path).unwrap().expect("a manifest");
            assert!(!manifest.is_complete(), "{plugin}: {manifest:?}");
            assert_eq!(manifest.passes(), &[pass("seen", "i/1")], "{plugin}");
            // It loads: an incomplete manifest allows passes it does not list.
            let (_, _, passes) = registered(&path);
            assert!(
                passes.contains(&pass("seen", "i/1")) || plugin == "register_passes.py",
                "{plugin}"
            );
        }
    }

    #[test]
    fn a_name_that_cannot_be_read_leaves_no_manifest() {
        let dir = plugin_dir(
            "unnamed",
            &[
                ("computed.py", "import dylease\ndylease.plugin('a' + 'b')\n"),
                ("conditional.py", "import dylease\nif True:\n    dylease.plugin('a')\n"),
                ("passed_on.py", "import dylease\nimport json\njson.dumps(dylease)\n"),
                ("executes.py", "exec('x = 1')\n"),
            ],
        );
        for plugin in ["computed.py", "conditional.py", "passed_on.py", "executes.py"] {
            assert_eq!(manifest_of(&dir.join(plugin)).unwrap(), None, "{plugin}");
        }
    }

    #[test]
    fn reading_the_manifest_runs_none_of_the_plugins_code() {
        let marker_dir = crate::test_dir::TestDir::new("py-manifest-marker-written");
        let marker = marker_dir.join("marker");
        let source = format!(
            "import dylease\nopen({:?}, 'w').close()\n\n@dylease.typed_pass('p', 'i/1')\ndef p(x):\n    return x\n",
            marker.display().to_string()
        );
        let dir = plugin_dir("marker", &[("marker.py", &source)]);
        let path = dir.join("marker.py");
        let manifest = manifest_of(&path).unwrap().expect("a manifest");
        assert_eq!(manifest.passes(), &[pass("p", "i/1")]);
        assert!(!marker.exists(), "reading the manifest ran the plugin's code");
        // The positive control: loading it runs that line.
        registered(&path);
        assert!(marker.exists());
    }

    /// Deeply nested source under a recursion limit an application raised is an error (or
    /// no manifest), never a crash of the process: the reader bounds the limit while it
    /// parses, and restores it. (Caught: the bound left out, which overflows the C stack.)
    #[test]
    fn deeply_nested_source_under_a_raised_recursion_limit_is_no_crash() {
        let source = format!("x = a{}\n", ".b".repeat(1_000_000));
        let dir = plugin_dir("nested", &[("nested.py", &source)]);
        let path = dir.join("nested.py");
        let limit = |set: Option<u32>| {
            attach(|py| {
                let sys = py.import("sys").unwrap();
                if let Some(n) = set {
                    sys.call_method1("setrecursionlimit", (n,)).unwrap();
                }
                sys.call_method0("getrecursionlimit").unwrap().extract::<u32>().unwrap()
            })
        };
        let old = limit(None);
        limit(Some(10_000_000));
        let result = manifest_of(&path);
        let after = limit(None);
        limit(Some(old));
        assert_eq!(after, 10_000_000, "the reader did not restore the recursion limit");
        match result {
            Ok(None) | Err(_) => {}
            Ok(Some(manifest)) => assert!(manifest.passes().is_empty()),
        }
    }

    #[test]
    fn a_syntax_error_is_an_error_naming_file_and_line() {
        let dir = plugin_dir("syntax", &[("syntax.py", "x = 1\ndef broken(:\n")]);
        let path = dir.join("syntax.py");
        let error = manifest_of(&path).unwrap_err().to_string();
        assert!(error.contains("SyntaxError") && error.contains("line 2"), "{error}");
        assert!(error.contains(&path.display().to_string()), "{error}");
    }
}
