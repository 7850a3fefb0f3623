//! The load room: one load attempt. Its plan (`plan`), the pipeline each plugin goes through
//! (`pipeline`), the loaded set's contents (`plugins`), the load policy that decides what a
//! failure does (`policy`), on-demand mapping (`demand`), static plugins (`static_plugin`),
//! Python plugins' loading side (`python`), and the dry run that judges every plugin without
//! loading it (`catalog`). It may call every room below it: `registry`, `registrar`, `trust`,
//! `inspect`, `log_scope`, `sys` and `sync` (and the shared `error`), never `host` or `python`.

use std::time::Instant;

use crate::error::{Error, Origin};
use crate::log_scope::{self, count};
use crate::trust::candidate::Candidate;
use crate::trust::{self, TrustPolicy};
use demand::Deferral;

mod catalog;
pub(crate) mod demand;
pub(crate) mod pipeline;
pub(crate) mod plan;
mod plugins;
mod policy;
#[cfg(feature = "python")]
pub(crate) mod python;
mod signed;
pub(crate) mod static_plugin;

pub use catalog::CatalogEntry;
pub(crate) use catalog::catalog;
pub(crate) use demand::Defer;
pub(crate) use plan::Source;
pub use plan::plugin_files_in;
pub(crate) use plugins::Callable;
pub(crate) use plugins::{DEFAULT_MAP_TIMEOUT, Isolated, LoadedPlugins};
pub use plugins::{PassInfo, PluginInfo};
pub use policy::{LoadFailure, LoadPolicy};
pub(crate) use signed::verifier;
pub(crate) use static_plugin::StaticPlugin;

use pipeline::{Registered, Verified};

/// Where an isolated set's plugin files go instead of this process's loader
/// (`HostBuilder::isolated`): the `isolate` room, above this one, implements it, and the host
/// hands it to [`load`].
pub(crate) trait Isolate {
    /// Hands over the plugin file `candidate`, trusted by the trust check, for the set's
    /// worker: its load may start now (its checks, then the worker's mapping), while the
    /// load hands over the next. Its outcome is taken by [`load`](Isolate::load), in the
    /// order the files were handed over.
    fn send(&mut self, candidate: Candidate, checks: &mut trust::Checks, trust: TrustPolicy);

    /// The outcome of the first file handed over whose outcome was not taken: it joins
    /// `set`; returns its failures, as the load policy takes them. No plugin handed over
    /// after a failed one runs before its failure is taken.
    fn load(&mut self, checks: &mut trust::Checks, trust: TrustPolicy, set: &mut LoadedPlugins)
    -> Vec<(Origin, Error)>;
}
use plan::{Planned, plan};

/// Loads every plugin of `sources`. Under [`LoadPolicy::Strict`] the first failure closes
/// everything opened so far and is returned; under [`LoadPolicy::SkipFailed`] a failed plugin
/// (already closed by the pipeline) is logged and recorded, and the others load.
///
/// Every file is found and checked for trust before any is opened, so under `Strict` no
/// plugin code runs at all when one file is missing or untrusted.
///
/// With `on_demand` (`HostBuilder::on_demand` stores [`demand::defer`] for it), a library
/// plugin whose manifest is complete is judged (opened, its ELF headers and manifest read, its
/// ABI gated; or, unchanged since the parse cache read it, judged by the status discovery
/// read, unopened) and joins the set unmapped, with the passes it declares; its descriptor is
/// closed. A failure of its
/// judgement, or a name its manifest declares that another plugin has, is handled by the
/// policy as a failure of its load would be. Its dependencies, and those of every plugin
/// of the load, are judged when it is opened to be mapped (not before any plugin is opened).
///
/// With `isolate` (`HostBuilder::isolated`), each library plugin is trusted, opened and
/// checked as usual and then loaded by `isolate`, into the set's worker process; a Python
/// plugin is refused.
pub(crate) fn load(
    sources: &[Source],
    (policy, trust, signatures): (
        LoadPolicy,
        TrustPolicy,
        Option<&crate::sync::Arc<crate::trust::Verifier>>,
    ),
    on_demand: Option<Defer>,
    mut isolate: Option<&mut dyn Isolate>,
    deadline: Option<Instant>,
) -> Result<LoadedPlugins, Error> {
    let mut set = LoadedPlugins::new();
    set.trust = trust;
    let mut steps = Vec::new();
    // On demand, a plugin's dependencies are resolved when it is mapped, if ever.
    let mut checks = trust::Checks::default();
    checks.defer_dependencies = on_demand.is_some();
    checks.signatures = signatures.cloned();
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

    // An isolated set's plugin files are all handed to its worker before the first outcome
    // is taken: the worker maps each while the host checks the next.
    if let Some(isolate) = isolate.as_deref_mut() {
        for step in &mut steps {
            if let Ok(Step::File(_)) = step
                && let Ok(Step::File(candidate)) = std::mem::replace(step, Ok(Step::Isolated))
            {
                isolate.send(candidate, &mut checks, trust);
            }
        }
    }

    for step in steps {
        let step = match (step, on_demand) {
            (Ok(Step::File(candidate)), Some(defer)) => match defer(candidate, &mut checks, trust, &mut set) {
                Deferral::Now(candidate) => Ok(Step::File(candidate)),
                Deferral::Judged(failures) => {
                    if let Err(error) = set.policy_handles(policy, failures) {
                        drop(set);
                        return Err(error);
                    }
                    continue;
                }
            },
            (step, _) => step,
        };
        // An isolated set's plugin files go to its worker.
        let step = match (step, isolate.as_deref_mut()) {
            (Ok(Step::Isolated), Some(isolate)) => {
                let failures = isolate.load(&mut checks, trust, &mut set);
                if let Err(error) = set.policy_handles(policy, failures) {
                    drop(set);
                    return Err(error);
                }
                continue;
            }
            #[cfg(feature = "python")]
            (Ok(Step::Python(plugin)), Some(_)) => {
                let path = plugin.path().to_owned();
                let refused = Error::Open {
                    path: path.clone(),
                    reason: "Python plugins do not run in isolated sets yet: a Python plugin runs in the \
                             host's embedded interpreter, and the worker process would need an interpreter of \
                             its own; load it with a host that is not isolated"
                        .to_owned(),
                    cause: crate::error::OpenCause::Isolation,
                };
                Err((Origin::File(path), refused))
            }
            (step, _) => step,
        };
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
        if let Err(error) = set.policy_handles(policy, failures) {
            drop(set);
            return Err(error);
        }
    }
    Ok(set.finished())
}

impl LoadedPlugins {
    /// Applies `policy` to `failures` of one plugin: under `Strict` the first is returned
    /// (the caller drops the set, unloading what it holds); under `SkipFailed` each is logged
    /// and recorded.
    fn policy_handles(
        &mut self,
        policy: LoadPolicy,
        failures: impl IntoIterator<Item = (Origin, Error)>,
    ) -> Result<(), Error> {
        for (origin, error) in failures {
            if policy == LoadPolicy::Strict {
                return Err(error);
            }
            // Once per host and cause: every later load meets the same failure again.
            log_scope::warn_once(&format!(
                "{}skipped under LoadPolicy::SkipFailed: {}",
                log_scope::prefix(),
                crate::error::WithSources(&error)
            ));
            self.skipped(LoadFailure::new(origin, error));
        }
        Ok(())
    }
}

/// A plugin that discovery found and the trust check let through.
#[allow(
    clippy::large_enum_variant,
    reason = "one step per plugin of a load, built once and moved once: a box would be an allocation each"
)]
enum Step<'host> {
    File(Candidate),
    /// A file handed to an isolated set's worker (`Isolate::send`): its outcome is the
    /// isolate's.
    Isolated,
    Static(&'host StaticPlugin),
    #[cfg(feature = "python")]
    Python(crate::load::python::discover::PyCandidate),
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
            Step::Isolated => unreachable!("an isolated set's files are taken by its isolate, never registered here"),
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
