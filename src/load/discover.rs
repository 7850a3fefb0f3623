//! Discovery: turns a host's sources into the ordered list of plugins one load will try.

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::load::candidate::{Candidate, Identity};
use crate::load::parse_cache;
use crate::load::static_plugin::StaticPlugin;
use crate::load::sys::identity;

/// Where a host finds plugins, in the order given to the builder.
#[derive(Debug)]
pub(crate) enum Source {
    /// Every library in a directory (not recursive).
    Dir(PathBuf),
    /// One library file.
    File(PathBuf),
    /// Directories listed in an environment variable, read at each load.
    Env(OsString),
    /// A plugin compiled into the host.
    Static(StaticPlugin),
    /// Python plugins (`load::python`): planned after every other source.
    #[cfg(feature = "python")]
    Python(crate::load::python::source::PySource),
}

/// One step of a load plan.
#[derive(Debug)]
pub(crate) enum Planned<'host> {
    File(Candidate),
    Static(&'host StaticPlugin),
    /// A Python plugin (`load::python`).
    #[cfg(feature = "python")]
    Python(crate::load::python::source::PyCandidate),
    /// A plugin file that discovery could not use (a dangling symlink, a symlink loop, a
    /// missing file source): a failure of that one plugin, which a load policy may skip.
    Unusable {
        path: PathBuf,
        error: Error,
    },
}

/// A file discovery found (as found, resolved, and what makes it the same library as
/// another), or the file and why it cannot be used.
type Found = Result<(Candidate, Identity), (PathBuf, Error)>;

/// Lists the plugins of `sources` in load order: sources in the order given, each
/// directory's libraries in byte order of file name. A file reached twice (through a
/// symlink, or listed twice) is planned once, where it first appears.
///
/// A directory that cannot be listed (missing, not a directory) and a single file that
/// cannot be used are planned as [`Planned::Unusable`], a failure a load policy may skip; an
/// environment variable that lists a relative directory fails the whole plan.
pub(crate) fn plan(sources: &[Source]) -> Result<Vec<Planned<'_>>, Error> {
    let mut plan = Vec::new();
    let mut seen = HashSet::new();
    let mut add_file = |found: Found, plan: &mut Vec<Planned<'_>>| match found {
        Ok((candidate, identity)) => {
            if seen.insert(identity) {
                plan.push(Planned::File(candidate));
            }
        }
        Err((path, error)) => plan.push(Planned::Unusable { path, error }),
    };
    for source in sources {
        match source {
            Source::Dir(dir) => match libraries_in(dir) {
                Ok(found) => found.into_iter().for_each(|found| add_file(found, &mut plan)),
                Err(error) => plan.push(Planned::Unusable {
                    path: dir.clone(),
                    error,
                }),
            },
            Source::File(path) => add_file(library_file(path), &mut plan),
            Source::Env(var) => {
                for dir in env_dirs(var)? {
                    match libraries_in(&dir) {
                        Ok(found) => found.into_iter().for_each(|found| add_file(found, &mut plan)),
                        Err(error) => plan.push(Planned::Unusable { path: dir, error }),
                    }
                }
            }
            Source::Static(plugin) => plan.push(Planned::Static(plugin)),
            #[cfg(feature = "python")]
            Source::Python(_) => {}
        }
    }
    // Python plugins load after the native and static ones, in the order of their sources.
    #[cfg(feature = "python")]
    {
        let mut seen = HashSet::new();
        for source in sources {
            if let Source::Python(source) = source {
                for found in crate::load::python::source::plan(source, &mut seen)? {
                    plan.push(match found {
                        Ok(candidate) => Planned::Python(candidate),
                        Err((path, error)) => Planned::Unusable { path, error },
                    });
                }
            }
        }
    }
    Ok(plan)
}

/// The error for a plugin file that cannot be used.
fn unusable(path: &Path, context: &'static str, source: io::Error) -> (PathBuf, Error) {
    (
        path.to_owned(),
        Error::Io {
            path: path.to_owned(),
            context,
            source,
        },
    )
}

/// A plugin file named by the configuration, if it is a regular file (after symlinks).
fn library_file(path: &Path) -> Found {
    let metadata = fs::metadata(path).map_err(|source| unusable(path, "cannot read plugin file", source))?;
    if !metadata.is_file() {
        let source = io::Error::new(io::ErrorKind::InvalidInput, "it is not a regular file");
        return Err(unusable(path, "cannot load plugin file", source));
    }
    let resolved = fs::canonicalize(path).map_err(|source| unusable(path, "cannot resolve plugin file", source))?;
    let identity = identity(&resolved, &metadata);
    let candidate = Candidate {
        path: path.to_owned(),
        resolved,
        #[allow(clippy::clone_on_copy, reason = "`Identity` is a path on platforms other than Unix")]
        identity: identity.clone(),
        checked: None,
        discovered: None,
        listed: parse_cache::key(&metadata),
        opened: None,
        dependencies: None,
        resolved_by_status: false,
        since_acquire: false,
    };
    Ok((candidate, identity))
}

/// The directories listed in `var`, separated by the platform's path-list separator; empty
/// entries are ignored and an unset variable lists none.
pub(crate) fn env_dirs(var: &OsString) -> Result<Vec<PathBuf>, Error> {
    let Some(value) = std::env::var_os(var) else {
        return Ok(Vec::new());
    };
    let mut dirs = Vec::new();
    for dir in std::env::split_paths(&value) {
        if dir.as_os_str().is_empty() {
            continue;
        }
        if dir.is_relative() {
            return Err(Error::Config {
                reason: format!(
                    "environment variable {} lists the relative directory `{}`; list absolute directories, \
                     so that which plugins load does not depend on the current directory",
                    var.to_string_lossy(),
                    dir.display()
                ),
            });
        }
        dirs.push(dir);
    }
    Ok(dirs)
}

/// Whether a directory entry called `name` is a plugin library candidate: a name with the
/// platform's library suffix, and more than the suffix.
pub(crate) fn is_library_name(name: &OsStr) -> bool {
    let suffix = std::env::consts::DLL_SUFFIX.as_bytes();
    name.as_encoded_bytes().ends_with(suffix) && name.len() > suffix.len()
}

/// The regular files with the platform's library suffix in `dir`, in byte order of name,
/// with the entries whose type cannot be read (a dangling symlink, a symlink loop).
///
/// The directory is made absolute, not resolved: the trust check walks the path and resolves
/// it one component at a time, judging each (what a candidate's `resolved` path then
/// becomes), and without it the kernel resolves it at the open. Only entries that are
/// symlinks are resolved one by one, so a directory of plain files costs one `fstatat` per
/// file.
fn libraries_in(dir: &Path) -> Result<Vec<Found>, Error> {
    let io_error = |source| Error::Io {
        path: dir.to_owned(),
        context: "cannot read plugin directory",
        source,
    };
    let resolved_dir = std::path::absolute(dir).map_err(io_error)?;
    // Listing it says whether it is a directory: no `stat` of its own.
    let entries = fs::read_dir(dir).map_err(|e| match e.kind() {
        io::ErrorKind::NotADirectory => io::Error::new(io::ErrorKind::NotADirectory, "it is not a directory"),
        _ => e,
    });
    let mut found = Vec::new();
    for entry in entries.map_err(io_error)? {
        let entry = entry.map_err(io_error)?;
        let name = entry.file_name();
        if !is_library_name(&name) {
            continue;
        }
        let path = entry.path();
        // The entry's type comes with the directory listing (no system call on Linux).
        let listed_link = entry.file_type().map_or(true, |kind| kind.is_symlink());
        // A link to a library counts (followed), a dangling link is an error. An entry listed
        // as no link is read without following, so that the status the trust check is handed
        // below is the entry's own (read relative to the listed directory's descriptor:
        // `fstatat`, no walk of the whole path); if a link was swapped in since the listing,
        // it is followed as a link.
        let own = if listed_link { None } else { Some(entry.metadata()) };
        let is_link = own
            .as_ref()
            .is_none_or(|own| own.as_ref().is_ok_and(|m| m.file_type().is_symlink()));
        let read = match own {
            Some(own) if !is_link => own,
            _ => fs::metadata(&path),
        };
        let metadata = match read {
            Ok(metadata) if metadata.is_file() => metadata,
            Ok(_) => continue,
            Err(source) => {
                found.push((name, Err(unusable(&path, "cannot read plugin file", source))));
                continue;
            }
        };
        let resolved = if is_link {
            fs::canonicalize(&path)
        } else {
            Ok(resolved_dir.join(&name))
        };
        let identity = identity(&path, &metadata);
        let file = resolved
            .map(|resolved| {
                (
                    Candidate {
                        path: path.clone(),
                        resolved,
                        identity,
                        checked: None,
                        discovered: (!is_link).then(|| crate::load::candidate::status(&metadata)).flatten(),
                        listed: parse_cache::key(&metadata),
                        opened: None,
                        dependencies: None,
                        resolved_by_status: false,
                        since_acquire: false,
                    },
                    identity,
                )
            })
            .map_err(|source| unusable(&path, "cannot resolve plugin file", source));
        found.push((name, file));
    }
    // Names in a directory are unique: an unstable sort orders them all the same, and moves
    // the entries less.
    found.sort_unstable_by(|(a, _), (b, _)| a.as_encoded_bytes().cmp(b.as_encoded_bytes()));
    Ok(found.into_iter().map(|(_, found)| found).collect())
}

/// The plugin library files a host configured with [`HostBuilder::dir(dir)`](crate::HostBuilder::dir)
/// would try at its next load, in load order, without opening any of them.
///
/// The rules are the host's own: regular files directly in `dir` whose names end with the
/// platform's library suffix (`.so` on Linux), in byte order of file name, symlinks followed,
/// and a file reached twice (a symlink or a hard link to another one) listed once, where it
/// first appears. Tools use it to look at a directory one file at a time, as `dylease check`
/// does.
///
/// # Errors
///
/// [`Error::Io`] naming the path if `dir` is missing, not a directory, or cannot be read: the
/// same errors the host's load would report. A file in it that cannot be used (a dangling
/// symlink, say) is listed; loading it reports the cause.
///
/// # Example
///
/// ```no_run
/// for file in dylease::plugin_files_in("/opt/app/plugins")? {
///     println!("{}", file.display());
/// }
/// # Ok::<(), dylease::Error>(())
/// ```
pub fn plugin_files_in(dir: impl AsRef<Path>) -> Result<Vec<PathBuf>, Error> {
    let dir = dir.as_ref();
    let sources = [Source::Dir(dir.to_owned())];
    let mut planned = plan(&sources)?;
    // The directory itself cannot be listed: that is this call's error, not a file in it.
    if matches!(planned.as_slice(), [Planned::Unusable { path, .. }] if path == dir)
        && let Some(Planned::Unusable { error, .. }) = planned.pop()
    {
        return Err(error);
    }
    Ok(planned
        .into_iter()
        .filter_map(|planned| match planned {
            Planned::File(candidate) => Some(candidate.path),
            // Listed too: loading it reports why it cannot be used, as the host's load would.
            Planned::Unusable { path, .. } => Some(path),
            Planned::Static(_) => None,
            #[cfg(feature = "python")]
            Planned::Python(_) => None,
        })
        .collect())
}
