//! How an isolated host runs its workers: the builder's options (`HostBuilder::isolated`,
//! `call_deadline`, `worker_command`, `worker_env_passthrough`), and where isolation is
//! supported.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// The call deadline of an isolated host unless [`HostBuilder::call_deadline`] says
/// otherwise.
///
/// [`HostBuilder::call_deadline`]: crate::HostBuilder::call_deadline
pub(crate) const DEFAULT_CALL_DEADLINE: Duration = Duration::from_secs(30);

/// How an isolated host runs its workers (`HostBuilder::isolated` and its options).
#[derive(Debug, Clone)]
pub(crate) struct Isolation {
    /// `HostBuilder::worker_command`; the host's own executable when `None`.
    pub(crate) command: Option<PathBuf>,
    /// How long a call (and the handshake, each plugin's load and the unload) may take.
    pub(crate) deadline: Duration,
    /// Whether the worker gets the host's `LD_*` variables.
    pub(crate) ld_passthrough: bool,
}

impl Isolation {
    /// The program a worker runs.
    #[cfg_attr(not(all(target_os = "linux", not(loom))), allow(dead_code))]
    pub(crate) fn program(&self) -> &Path {
        self.command.as_deref().unwrap_or(Path::new("/proc/self/exe"))
    }
}

/// Why an isolated host cannot be built here, if it cannot: `Err` with the reason.
pub(crate) fn supported(on_demand: bool) -> Result<(), String> {
    if !cfg!(all(target_os = "linux", not(loom))) {
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
