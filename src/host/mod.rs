//! The host: its configuration (the builder), its generations, and the process-wide host of
//! [`global()`].

mod builder;
mod generations;
mod global;
mod keeper;
mod lease;
mod plugin_host;
mod policy;
mod reentry;
mod set;
mod stats;
mod thread_cache;
#[cfg(feature = "watch")]
mod watch;

pub use builder::HostBuilder;
pub use global::{GLOBAL_PATH_VAR, global, init_global};
pub use lease::{Lease, OwnedPass, Pass, WeakLease};
pub use plugin_host::PluginHost;
pub use policy::UnloadPolicy;
pub use set::PluginSet;
pub use stats::Stats;
