//! The host room: the public handles above the loading side. It may call every room below it
//! (`load`, `registry`, `registrar`, `trust`, `inspect`, `log_scope`, `sys`, `sync`, and
//! `error`), never `python`.
//!
//! The host: its configuration (`builder`; and `sources`, the public `unsafe fn`s: the
//! builder methods that name code, and `init_global`), the host itself (`plugin_host`), its
//! generations and the slot protocol (`generations`, with `thread_cache`), the host's own
//! lease and its keeper thread (`keeper`), one generation's set (`set`) and its leases
//! (`lease`), and the process-wide host of [`global()`] (`global`). `watch` (feature `watch`)
//! is a watcher over sources that the host starts; it names no host type.

#[forbid(unsafe_code)]
mod builder;
// `Lease::call` (message passes) and what a set tells of its worker.
#[forbid(unsafe_code)]
mod call;
#[forbid(unsafe_code)]
mod generations;
#[forbid(unsafe_code)]
mod global;
#[forbid(unsafe_code)]
mod keeper;
mod lease;
#[forbid(unsafe_code)]
mod plugin_host;
#[forbid(unsafe_code)]
mod policy;
#[forbid(unsafe_code)]
mod reentry;
#[forbid(unsafe_code)]
mod set;
// `HostBuilder::require_signed`.
mod signed;
// The public `unsafe fn`s: the builder methods that name native code, and `init_global`.
mod sources;
#[forbid(unsafe_code)]
mod stats;
#[forbid(unsafe_code)]
mod thread_cache;
#[forbid(unsafe_code)]
#[cfg(feature = "watch")]
mod watch;
/// Without the `watch` feature: no builder can ask for a watcher, and none is started.
#[cfg(not(feature = "watch"))]
mod watch {
    use std::ops::ControlFlow;
    use std::path::Path;
    use std::time::Duration;

    use crate::error::Error;
    use crate::load::Source;

    /// A watcher that never exists.
    pub(crate) enum Watch {}

    /// Never watches: without the feature, `HostBuilder::watch` does not exist.
    pub(crate) fn start(
        _: &[Source],
        _: &str,
        _: Duration,
        _: impl FnMut(&Path) -> ControlFlow<()> + Send + 'static,
    ) -> Result<Option<Watch>, Error> {
        Ok(None)
    }
}

pub use builder::HostBuilder;
pub use generations::set_acquire_bound;
pub use global::{GLOBAL_PATH_VAR, global};
pub use lease::{Lease, OwnedPass, Pass, WeakLease};
pub use plugin_host::PluginHost;
pub use policy::UnloadPolicy;
pub use set::PluginSet;
pub use sources::init_global;
pub use stats::Stats;
