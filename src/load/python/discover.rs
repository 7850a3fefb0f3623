//! Python plugin discovery: files, directories, packages and a path variable, each plugin
//! found as a [`PyCandidate`] with every file of it (`check` then checks each for trust,
//! `read` reads the sources from the checked descriptors, `register` runs it).
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
use std::io;
use std::path::{Path, PathBuf};

use crate::error::Error;
#[cfg(unix)]
use crate::sys::walk::{Kind, Tree};
use crate::trust::candidate::Candidate;
use crate::trust::candidate::Identity;

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
    pub(super) path: PathBuf,
    pub(super) package: bool,
    /// What makes it the same plugin as another ((dev, ino) of the file or directory).
    pub(super) identity: Identity,
    /// Every file of it, each checked for trust; only `.py` ones are read.
    pub(super) files: Vec<PyFile>,
    /// A package's directory, opened once: its files are listed and read through it (see
    /// [`Tree`]).
    #[cfg(unix)]
    pub(super) tree: Option<Tree>,
}

#[derive(Debug)]
pub(super) struct PyFile {
    /// The module name below the plugin's (`""` for the plugin file itself, `sub.mod`); `None`
    /// for a file that is not Python source.
    pub(super) module: Option<String>,
    /// A package's file: its names below the package directory (`sub`, `mod.py`).
    #[cfg(unix)]
    pub(super) at: Vec<OsString>,
    pub(super) candidate: Candidate,
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
pub(super) fn plugin(path: &Path) -> Result<PyCandidate, (PathBuf, Error)> {
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
pub(super) fn changed(path: &Path) -> io::Error {
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

impl PyCandidate {
    /// The path as configured.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}
