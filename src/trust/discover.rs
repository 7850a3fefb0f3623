//! Discovery: the plugin files of a directory, a file source or an environment variable, each
//! as a [`Candidate`] with what makes it the same library as another (`load::plan` orders them
//! into one load's plan).

use std::ffi::{OsStr, OsString};
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::inspect::parse_cache;
use crate::sys::identity;
use crate::trust::candidate::{Candidate, Identity};

/// A file discovery found (as found, resolved, and what makes it the same library as
/// another), or the file and why it cannot be used.
pub(crate) type Found = Result<(Candidate, Identity), (PathBuf, Error)>;

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
pub(crate) fn library_file(path: &Path) -> Found {
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
pub(crate) fn libraries_in(dir: &Path) -> Result<Vec<Found>, Error> {
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
                        // A file's identity is `Copy` on Unix, a path elsewhere.
                        #[allow(clippy::clone_on_copy)]
                        identity: identity.clone(),
                        checked: None,
                        discovered: (!is_link).then(|| crate::trust::candidate::status(&metadata)).flatten(),
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
