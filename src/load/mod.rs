//! One load attempt: discovery, the trust check, the pipeline for each plugin, and the load
//! policy that decides what a failure does.

use std::fmt;
use std::path::Path;
use std::time::Instant;

use crate::error::{Error, Origin};

pub(crate) mod candidate;
pub(crate) mod discover;
mod elf;
mod elf_layout;
mod library;
pub(crate) mod log_scope;
mod pinning;
pub(crate) mod pipeline;
mod plugins;
mod registrar;
mod registry;
mod trust;

pub(crate) use discover::Source;
pub use discover::plugin_files_in;
#[cfg(feature = "watch")]
pub(crate) use discover::{env_dirs, is_library_name};
pub use pinning::{PinCause, Pinning};
pub(crate) use pipeline::StaticPlugin;
pub(crate) use plugins::{LoadedPlugins, count};
pub use plugins::{PassInfo, PluginInfo};
pub(crate) use registrar::MAX_NAME_LEN;
pub use registrar::Registrar;
pub use trust::TrustPolicy;

// What the Python plugins of `crate::python` share with library plugins: the trust check,
// the registry of instances, and the parts of a registered plugin.
#[cfg(feature = "python")]
pub(crate) use {
    candidate::Identity,
    pipeline::Teardown,
    registrar::{Collected, UserData},
    registry::{FileRef, LibraryInstance, Opener, Registry},
    trust::{Checks, open_checked},
};

/// The ELF checks (headers, then structure) over a file's bytes in memory: `Err` with the
/// cause. Only for the fuzz target (`--cfg fuzzing`).
#[cfg(fuzzing)]
pub fn fuzz_elf_check(bytes: &[u8]) -> Result<(), String> {
    elf::check_bytes(bytes)
}

use candidate::Candidate;
use discover::{Planned, plan};
use pipeline::{Registered, Verified};

/// What a load does when one plugin fails.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum LoadPolicy {
    /// One failed plugin fails the whole [`acquire`](crate::PluginHost::acquire): every library the
    /// attempt opened is closed, nothing stays loaded, and the next `acquire` tries again.
    #[default]
    Strict,
    /// A plugin that fails (to be found, trusted, opened, verified or registered) is left
    /// out: whatever of it was opened is closed, and the failure is logged as a warning (once
    /// per host and cause; a later load that meets it again logs it at `debug`) and
    /// recorded in [`PluginSet::failures`](crate::PluginSet::failures); the others load. A pass whose name an earlier plugin registered is left
    /// out the same way, and its plugin stays: the first registration keeps the name.
    ///
    /// A directory that cannot be listed (missing, or not a directory; say one entry of a
    /// path variable) is left out the same way. An environment variable that lists a relative
    /// directory still fails the whole load: it is a configuration error, not a missing plugin.
    SkipFailed,
}

/// Something that went wrong in a load and was skipped under
/// [`LoadPolicy::SkipFailed`]: a plugin left out of the set, or a pass left out because an
/// earlier plugin had registered its name. See [`PluginSet::failures`](crate::PluginSet::failures).
#[derive(Debug)]
#[non_exhaustive]
pub struct LoadFailure {
    origin: Origin,
    error: Error,
}

impl LoadFailure {
    /// The plugin the failure is about: the file (as discovered) or the static plugin.
    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// The plugin's library file, as discovered; `None` for a static plugin.
    pub fn path(&self) -> Option<&Path> {
        self.origin.path()
    }

    /// What went wrong: the error a [`LoadPolicy::Strict`] load would have failed with.
    pub fn error(&self) -> &Error {
        &self.error
    }
}

impl fmt::Display for LoadFailure {
    /// The error's message, which names the plugin.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

/// Loads every plugin of `sources`. Under [`LoadPolicy::Strict`] the first failure closes
/// everything opened so far and is returned; under [`LoadPolicy::SkipFailed`] a failed plugin
/// (already closed by the pipeline) is logged and recorded, and the others load.
///
/// Every file is found and checked for trust before any is opened, so under `Strict` no
/// plugin code runs at all when one file is missing or untrusted.
pub(crate) fn load(
    sources: &[Source],
    policy: LoadPolicy,
    trust: TrustPolicy,
    deadline: Option<Instant>,
) -> Result<LoadedPlugins, Error> {
    let mut set = LoadedPlugins::new();
    let mut steps = Vec::new();
    let mut checks = trust::Checks::default();
    for planned in plan(sources)? {
        let step = match planned {
            Planned::Unusable { path, error } => Err((Origin::File(path), error)),
            Planned::File(mut candidate) => match checks.check(trust, &mut candidate) {
                Ok(()) => Ok(Step::File(candidate)),
                Err(error) => Err((Origin::File(candidate.path), error)),
            },
            Planned::Static(plugin) => Ok(Step::Static(plugin)),
            #[cfg(feature = "python")]
            Planned::Python(mut plugin) => match plugin.check(&mut checks, trust) {
                Ok(()) => Ok(Step::Python(plugin)),
                Err(error) => Err((Origin::File(plugin.path().to_owned()), error)),
            },
        };
        match (policy, step) {
            (LoadPolicy::Strict, Err((_, error))) => return Err(error),
            (_, step) => steps.push(step),
        }
    }

    for step in steps {
        let failures = match step.and_then(|step| step.register(&mut checks, trust, deadline)) {
            Ok(plugin) => {
                let (origin, name, passes) = (plugin.origin.clone(), plugin.name.clone(), plugin.passes.len());
                let duplicates = set.add(plugin);
                let passes = count(passes - duplicates.len(), "pass", "passes");
                log::debug!("{}loaded {origin} as `{name}`: {passes}", log_scope::prefix());
                duplicates.into_iter().map(|error| (origin.clone(), error)).collect()
            }
            Err(failure) => vec![failure],
        };
        for (origin, error) in failures {
            if policy == LoadPolicy::Strict {
                drop(set);
                return Err(error);
            }
            // Once per host and cause: every later load meets the same failure again.
            log_scope::warn_once(&format!(
                "{}skipped under LoadPolicy::SkipFailed: {}",
                log_scope::prefix(),
                crate::error::WithSources(&error)
            ));
            set.skipped(LoadFailure { origin, error });
        }
    }
    Ok(set.finished())
}

/// A plugin that discovery found and the trust check let through.
enum Step<'host> {
    File(Candidate),
    Static(&'host StaticPlugin),
    #[cfg(feature = "python")]
    Python(crate::python::PyCandidate),
}

impl Step<'_> {
    /// Runs the pipeline; a failure comes with the plugin it is about.
    fn register(
        self,
        checks: &mut trust::Checks,
        trust: TrustPolicy,
        deadline: Option<Instant>,
    ) -> Result<Registered, (Origin, Error)> {
        match self {
            Step::File(candidate) => {
                let origin = Origin::File(candidate.path.clone());
                let registered = candidate.open(checks, trust, deadline).and_then(Verified::register);
                registered.map_err(|error| (origin, error))
            }
            Step::Static(plugin) => plugin
                .register()
                .map_err(|error| (Origin::Static(plugin.name.clone()), error)),
            #[cfg(feature = "python")]
            Step::Python(plugin) => {
                let origin = Origin::File(plugin.path().to_owned());
                plugin
                    .register(checks, trust, deadline)
                    .map_err(|error| (origin, error))
            }
        }
    }
}
