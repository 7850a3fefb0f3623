//! [`UnloadPolicy`]: when a host's plugin set unloads.

use std::time::Duration;

/// When a host's plugin set unloads once no user holds a lease of it.
///
/// Every unload is still the drop of the set's last `Arc`: under `After` and `WithHost` the
/// host holds one lease of its own, and dropping it is what unloads.
///
/// # Example
///
/// ```
/// use std::time::Duration;
/// use dylease::{PluginHost, UnloadPolicy};
///
/// // A compiler that runs many short single-op compiles: keep the plugins for 2 s of quiet.
/// let host = PluginHost::builder()
///     .static_plugin("builtin", |_reg| Ok(()))
///     .unload(UnloadPolicy::After(Duration::from_secs(2)))
///     .build()?;
/// for _ in 0..100 {
///     let lease = host.acquire()?;
///     drop(lease); // the host's own lease keeps the set loaded
/// }
/// assert_eq!(host.stats().loads, 1);
/// # Ok::<(), dylease::Error>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnloadPolicy {
    /// The set unloads in the drop of its last user lease (the default).
    #[default]
    Immediately,
    /// The host keeps the newest set loaded until no user lease of it has been seen for this
    /// long, then drops its own lease, which unloads it. A background thread of the host looks
    /// every eighth of the duration (between 1 ms and 250 ms), so a user lease that lives
    /// shorter than that between two looks may go unseen; the thread ends with the host.
    ///
    /// The unload then runs on that thread, named `dylease-keeper`: the plugins' `on_unload`,
    /// their libraries' termination routines and `dlclose` run there, not on a thread of
    /// yours. Plugin code that needs a particular thread for its teardown (thread-affine
    /// state, a thread-local it registered) must not rely on the unloading thread. (If the
    /// host is dropped first, the host's drop runs the unload instead.)
    After(Duration),
    /// The host keeps the newest set loaded until the host itself is dropped.
    WithHost,
}
