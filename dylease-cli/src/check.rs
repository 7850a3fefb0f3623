//! Running the checks: each one builds a `PluginHost` and acquires a lease, exactly as a
//! program that uses the plugins would, then drops the lease (which unloads the plugins).

use std::cell::LazyCell;
use std::collections::{HashMap, HashSet};
use std::fs;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

use dylease::{Error, HostBuilder, Lease, LoadPolicy, PluginHost, TrustPolicy};

use crate::advice::{self, Advice};
use crate::python;
use crate::rewrite;
use crate::sys;

/// What one check was about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// One library file, in a host of its own.
    File,
    /// A directory as a whole, as `HostBuilder::dir` loads it.
    Directory,
    /// Every argument at once, in one host.
    Together,
}

impl Kind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Kind::File => "file",
            Kind::Directory => "directory",
            Kind::Together => "together",
        }
    }
}

/// A plugin that loaded.
#[derive(Debug)]
pub(crate) struct Plugin {
    pub(crate) name: String,
    pub(crate) version: String,
    pub(crate) path: Option<PathBuf>,
    pub(crate) passes: Vec<PassEntry>,
}

/// A pass a plugin registered, with the interface it registered it under (typed passes).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct PassEntry {
    pub(crate) name: String,
    pub(crate) interface: Option<String>,
}

/// Why a check failed, and what to do about it.
#[derive(Debug)]
pub(crate) struct Problem {
    /// The file the problem is about, when it is about one.
    pub(crate) file: Option<PathBuf>,
    /// The host's error message.
    pub(crate) message: String,
    pub(crate) advice: Advice,
}

/// A directory entry a host does not load, and why.
#[derive(Debug)]
pub(crate) struct Skipped {
    pub(crate) path: PathBuf,
    pub(crate) reason: String,
}

/// The result of one check.
#[derive(Debug)]
pub(crate) struct Check {
    pub(crate) kind: Kind,
    /// The argument checked; `None` for `Kind::Together`.
    pub(crate) path: Option<PathBuf>,
    /// The plugins in load order, or why the host would not load them.
    pub(crate) outcome: Result<Vec<Plugin>, Problem>,
    /// For a directory: entries a host does not load.
    pub(crate) skipped: Vec<Skipped>,
    /// For a directory: how many plugin files it has (when it could be listed).
    pub(crate) files: Option<usize>,
    /// For `Kind::Together`: how many arguments.
    pub(crate) arguments: usize,
    /// For `Kind::File`: what may go wrong although the check passed (a file that may still
    /// be being written).
    pub(crate) warnings: Vec<String>,
}

impl Check {
    pub(crate) fn ok(&self) -> bool {
        self.outcome.is_ok()
    }
}

/// The policies of the deployment's host (`--trust`, `--policy`), which every checking host
/// uses.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Options {
    pub(crate) trust: TrustPolicy,
    pub(crate) policy: LoadPolicy,
    /// `--python`: Python plugins are loaded as `python_file` and `python_dir` load them (the
    /// `python` feature); otherwise a directory is only what `HostBuilder::dir` loads.
    pub(crate) python: bool,
}

impl Options {
    fn builder(self) -> HostBuilder {
        PluginHost::builder()
            .name("dylease-check")
            .trust(self.trust)
            .policy(self.policy)
    }
}

/// `builder` with `path` added as the commands take their arguments: a Python plugin (with
/// `python`), a directory (with `python`, its Python plugins too), else a library file.
pub(crate) fn add_path(builder: HostBuilder, python: bool, path: &Path) -> HostBuilder {
    if python && python::is_plugin(path) {
        sys::add_python_file(builder, path)
    } else if path.is_dir() {
        let builder = sys::add_dir(builder, path);
        if python {
            sys::add_python_dir(builder, path)
        } else {
            builder
        }
    } else {
        sys::add_file(builder, path)
    }
}

/// The warning of a Python plugin argument checked without `--python`.
const NOT_PYTHON: &str = "a Python plugin, checked as `HostBuilder::file` loads a library: `--python` checks it as \
                          `python_file` loads it";

/// Checks every path, handing each finished check to `report` as soon as it is done; stops
/// when `report` says so (nobody reads the report any more).
pub(crate) fn run(
    paths: &[PathBuf],
    options: Options,
    mut report: impl FnMut(Check) -> ControlFlow<()>,
) -> ControlFlow<()> {
    for path in paths {
        if options.python && python::is_plugin(path) {
            report(load(
                Kind::File,
                Some(path),
                sys::add_python_file(options.builder(), path),
            ))?;
        } else if path.is_dir() {
            check_dir(path, options, &mut report)?;
        } else {
            let mut check = load(Kind::File, Some(path), sys::add_file(options.builder(), path));
            if python::is_plugin(path) {
                check.warnings.push(NOT_PYTHON.to_owned());
            }
            report(check)?;
        }
    }
    if paths.len() > 1 {
        let mut builder = options.builder();
        for path in paths {
            builder = add_path(builder, options.python, path);
        }
        let mut together = load(Kind::Together, None, builder);
        together.arguments = paths.len();
        report(together)?;
    }
    ControlFlow::Continue(())
}

/// A directory: each plugin file on its own, in the host's order, then the directory whole.
fn check_dir(dir: &Path, options: Options, report: &mut impl FnMut(Check) -> ControlFlow<()>) -> ControlFlow<()> {
    let files = match dylease::plugin_files_in(dir) {
        Ok(files) => files,
        Err(error) => {
            // A host given this directory would fail the same way before opening anything.
            return report(Check {
                kind: Kind::Directory,
                path: Some(dir.to_owned()),
                outcome: Err(problem(&error)),
                skipped: Vec::new(),
                files: None,
                arguments: 0,
                warnings: Vec::new(),
            });
        }
    };
    for file in &files {
        report(load(Kind::File, Some(file), sys::add_file(options.builder(), file)))?;
    }
    // Python plugins (`--python`) after the libraries, as a host loads them.
    let python_plugins = if options.python {
        python::plugins_in(dir)
    } else {
        Vec::new()
    };
    for plugin in &python_plugins {
        report(load(
            Kind::File,
            Some(plugin),
            sys::add_python_file(options.builder(), plugin),
        ))?;
    }
    let builder = sys::add_dir(options.builder(), dir);
    let builder = if options.python {
        sys::add_python_dir(builder, dir)
    } else {
        builder
    };
    let mut whole = load(Kind::Directory, Some(dir), builder);
    let files: Vec<PathBuf> = files.into_iter().chain(python_plugins).collect();
    whole.skipped = skipped(dir, &files);
    whole.files = Some(files.len());
    report(whole)
}

/// Builds the host, acquires a lease, describes what loaded, and drops the lease.
fn load(kind: Kind, path: Option<&Path>, builder: HostBuilder) -> Check {
    // Looked at before loading: what matters is whether the file may change while it loads.
    let warnings = match (kind, path) {
        (Kind::File, Some(path)) => rewrite::warning(path).into_iter().collect(),
        _ => Vec::new(),
    };
    let mut warnings = warnings;
    let outcome = builder
        .build()
        .map_err(|error| problem(&error))
        .and_then(|host| load_twice(kind, &host, &mut warnings));
    Check {
        kind,
        path: path.map(Path::to_owned),
        outcome,
        skipped: Vec::new(),
        files: None,
        arguments: 0,
        warnings,
    }
}

/// Loads the plugins, unloads them, and (for a single file) loads them a second time, as a
/// long-lived program that reloads would: a library the platform keeps mapped after its
/// unload (`-z nodelete`, a C++ `thread_local`, musl) does not run its constructors again, so
/// state a constructor made and `on_unload` freed is gone from the second load on.
///
/// Under `--policy skip-failed` a plugin the host left out fails the check of its own file
/// (it does not load), and is a warning of a directory's or all arguments' check (which
/// loads without it).
fn load_twice(kind: Kind, host: &PluginHost, warnings: &mut Vec<String>) -> Result<Vec<Plugin>, Problem> {
    let lease = host.acquire().map_err(|error| problem(&error))?;
    if let (Kind::File, Some(failure)) = (kind, lease.failures().first()) {
        return Err(problem(failure.error()));
    }
    let first = describe(&lease);
    warnings.extend(lease.failures().iter().map(|failure| format!("left out: {failure}")));
    let pinning: Vec<dylease::Pinning> = lease.plugins().iter().map(|p| p.pinning().clone()).collect();
    drop(lease);
    if kind != Kind::File {
        return Ok(first);
    }
    if host.stats().pinned_libraries > 0 {
        warnings.push(advice::pinned(&pinning));
    }
    let second = host.acquire().map_err(|error| {
        warnings.push("it loaded once, but the second load, after an unload, failed".to_owned());
        problem(&error)
    })?;
    let second = describe(&second);
    let passes = |plugins: &[Plugin]| plugins.iter().map(|p| p.passes.len()).sum::<usize>();
    if passes(&second) != passes(&first) {
        warnings.push(format!(
            "the second load registered {} passes, the first {}: registration depends on state that does not \
             survive an unload; register every pass from `register_passes` (or the header's macros) each time",
            passes(&second),
            passes(&first)
        ));
    }
    Ok(first)
}

fn describe(lease: &Lease) -> Vec<Plugin> {
    lease
        .plugins()
        .iter()
        .enumerate()
        .map(|(index, plugin)| Plugin {
            name: plugin.name().to_owned(),
            version: plugin.version().to_owned(),
            path: plugin.origin().path().map(Path::to_owned),
            passes: lease
                .passes()
                .iter()
                .filter(|pass| pass.plugin_index() == index)
                .map(|pass| PassEntry {
                    name: pass.name().to_owned(),
                    interface: pass.interface().map(str::to_owned),
                })
                .collect(),
        })
        .collect()
}

/// A failure as the reports give it: the file it is about, its message, the advice.
pub(crate) fn problem(error: &Error) -> Problem {
    let file = match error {
        Error::Io { path, .. } => Some(path.clone()),
        other => other.origin().and_then(|origin| origin.path().map(Path::to_owned)),
    };
    Problem {
        file,
        message: with_sources(error),
        advice: advice::for_error(error),
    }
}

/// The error's message followed by its sources' (`Error::Io` keeps the operating system's
/// error in `source()`), as `: `-separated phrases.
fn with_sources(error: &Error) -> String {
    let mut message = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

/// The entries of `dir` that are not among the plugin files a host loads, with the reason.
/// The selection itself is the crate's (`plugin_files_in`); this only explains it. Linear in
/// the number of entries (a set of the loaded paths, not a comparison of each entry with
/// every plugin file), for directories of many thousands of entries.
fn skipped(dir: &Path, files: &[PathBuf]) -> Vec<Skipped> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let suffix = std::env::consts::DLL_SUFFIX;
    let loaded: HashSet<&Path> = files.iter().map(PathBuf::as_path).collect();
    // Only needed for a library-named entry that is not loaded (a second link to a plugin).
    let by_identity = LazyCell::new(|| {
        files
            .iter()
            .filter_map(|file| Some((identity(file)?, file.as_path())))
            .collect::<HashMap<_, _>>()
    });
    let mut skipped: Vec<Skipped> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| !loaded.contains(path.as_path()))
        .map(|path| {
            let name = path.file_name().unwrap_or_default().to_string_lossy().into_owned();
            let hidden = name.starts_with('_') || name.starts_with('.');
            let reason = if python::is_plugin(&path) && !hidden {
                "a Python plugin: `HostBuilder::dir` does not load it; `--python` checks it as `python_dir` \
                 loads it"
                    .to_owned()
            } else if path.is_dir() {
                "a directory: subdirectories are not searched".to_owned()
            } else if !name.ends_with(suffix) || name.len() == suffix.len() {
                format!("the name does not end in `{suffix}`")
            } else if let Some(same) = identity(&path).and_then(|id| by_identity.get(&id).copied()) {
                format!("the same file as `{}`, which loads once", crate::names::escape(same))
            } else {
                "not a regular file".to_owned()
            };
            Skipped { path, reason }
        })
        .collect();
    skipped.sort_by(|a, b| a.path.cmp(&b.path));
    skipped
}

/// What makes two paths one file to the loader: device and inode.
#[cfg(unix)]
fn identity(path: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    fs::metadata(path).ok().map(|m| (m.dev(), m.ino()))
}

/// What makes two paths one file to the loader: the canonical path.
#[cfg(not(unix))]
fn identity(path: &Path) -> Option<PathBuf> {
    fs::canonicalize(path).ok()
}
