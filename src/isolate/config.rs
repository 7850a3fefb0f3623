//! How an isolated host runs its workers: the builder's options (`HostBuilder::isolated`,
//! `call_deadline`, `worker_command`, `worker_env_passthrough`), and where isolation is
//! supported.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::load::{Isolate, LoadedPlugins};

/// The call deadline of an isolated host unless [`HostBuilder::call_deadline`] says
/// otherwise.
///
/// [`HostBuilder::call_deadline`]: crate::HostBuilder::call_deadline
pub(crate) const DEFAULT_CALL_DEADLINE: Duration = Duration::from_secs(30);

/// One load of an isolated set, as the host drives it: the [`Isolate`] the load hands each
/// plugin file to, then [`finish`](Load::finish), which hands the worker to the loaded set.
pub(crate) trait Load {
    /// What the load hands each plugin file to.
    fn isolate(&mut self) -> &mut dyn Isolate;
    /// Hands the worker, if one started, to `set`, which unloads it with its plugins.
    fn finish(self: Box<Self>, set: &mut LoadedPlugins);
}

/// Starts one load of an isolated set (`remote::begin`). Named only by
/// `HostBuilder::isolated`, which stores it: a program that never builds an isolated host
/// never names the worker's code, and its link leaves it out (the worker's hook with it).
pub(crate) type Begin = for<'a> fn(&'a Isolation) -> Box<dyn Load + 'a>;

/// How an isolated host runs its workers (`HostBuilder::isolated` and its options).
#[cfg_attr(not(all(feature = "isolate", target_os = "linux", not(loom))), allow(dead_code))]
#[derive(Debug, Clone)]
pub(crate) struct Isolation {
    /// Starts each load.
    pub(crate) begin: Begin,
    /// `HostBuilder::worker_command`; the host's own executable when `None`.
    pub(crate) command: Option<PathBuf>,
    /// How long a call (and the handshake, each plugin's load and the unload) may take.
    pub(crate) deadline: Duration,
    /// Whether the worker gets the host's `LD_*` variables.
    pub(crate) ld_passthrough: bool,
}

impl Isolation {
    /// The program a worker runs.
    #[cfg_attr(not(all(feature = "isolate", target_os = "linux", not(loom))), allow(dead_code))]
    pub(crate) fn program(&self) -> &Path {
        self.command.as_deref().unwrap_or(Path::new("/proc/self/exe"))
    }
}

/// Why an isolated host cannot be built here, if it cannot: `Err` with the reason.
pub(crate) fn supported(on_demand: bool) -> Result<(), String> {
    if !cfg!(all(feature = "isolate", target_os = "linux", not(loom))) {
        return Err("isolated sets need Linux (their workers map plugins through /proc/self/fd)".to_owned());
    }
    if on_demand {
        return Err(
            "a host cannot be both on-demand and isolated yet: choose one (HostBuilder::on_demand or \
             HostBuilder::isolated)"
                .to_owned(),
        );
    }
    Ok(())
}
