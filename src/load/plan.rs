//! The plan of one load: a host's sources turned into the ordered list of plugins the load
//! will try (the files from `trust::discover`, static plugins, Python plugins last).

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::load::static_plugin::StaticPlugin;
use crate::trust::candidate::Candidate;
use crate::trust::discover::{Found, env_dirs, libraries_in, library_file};

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
    Python(crate::load::python::discover::PySource),
}

/// One step of a load plan.
#[derive(Debug)]
pub(crate) enum Planned<'host> {
    File(Candidate),
    Static(&'host StaticPlugin),
    /// A Python plugin (`load::python`).
    #[cfg(feature = "python")]
    Python(crate::load::python::discover::PyCandidate),
    /// A plugin file that discovery could not use (a dangling symlink, a symlink loop, a
    /// missing file source): a failure of that one plugin, which a load policy may skip.
    Unusable {
        path: PathBuf,
        error: Error,
    },
}

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
                for found in crate::load::python::discover::plan(source, &mut seen)? {
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
