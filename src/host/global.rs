//! The process-wide host: [`global`] and [`init_global`].
// `unsafe` here: the default global host names the plugin directories of its environment.
#![allow(unsafe_code)]

use crate::error::Error;
use crate::host::builder::HostBuilder;
use crate::host::plugin_host::PluginHost;

/// The name of the environment variable the [`global`] host reads.
pub const GLOBAL_PATH_VAR: &str = "DYLEASE_PLUGIN_PATH";

static GLOBAL: once_cell::sync::OnceCell<PluginHost> = once_cell::sync::OnceCell::new();

/// Configures the process-wide host that [`global`] returns, once, before its first use: its
/// sources and policies (say, [`LoadPolicy::SkipFailed`](crate::LoadPolicy::SkipFailed), so that one missing directory in a
/// path variable does not fail every load), like `log::set_logger`.
///
/// # Safety
///
/// As for [`HostBuilder::dir`], [`HostBuilder::file`] and [`HostBuilder::env`]: the caller
/// vouches for the native code the configured sources name.
///
/// # Errors
///
/// [`Error::Config`] if the global host was already configured or used, or if the
/// configuration is invalid (see [`HostBuilder::build`]).
///
/// # Example
///
/// ```no_run
/// use dylease::{LoadPolicy, PluginHost};
///
/// fn main() -> Result<(), dylease::Error> {
///     // SAFETY: the directories in MYAPP_PLUGIN_PATH hold this application's own plugins.
///     unsafe {
///         dylease::init_global(
///             PluginHost::builder().env("MYAPP_PLUGIN_PATH").policy(LoadPolicy::SkipFailed),
///         )
///     }?;
///     let lease = dylease::global().acquire()?;
///     # drop(lease);
///     Ok(())
/// }
/// ```
pub unsafe fn init_global(builder: HostBuilder) -> Result<(), Error> {
    if builder.watch.is_some() {
        return Err(Error::Config {
            reason: "the global host cannot watch its sources; build a host of your own to watch".into(),
        });
    }
    // Built (which loads nothing) and checked now, so that a bad configuration fails here
    // and not at the first `global()`; `set` fails once `global()` has made the default host.
    let host = builder.build()?;
    GLOBAL.set(host).map_err(|_| Error::Config {
        reason: "the global host was already configured or used; call init_global once, before global()".into(),
    })
}

/// The process-wide host: the one [`init_global`] configured, or by default one named
/// `global` over the plugin directories listed in `DYLEASE_PLUGIN_PATH` (read at each load;
/// unset means no plugins), with default policies.
///
/// The default is safe to use because the environment of a process already chooses its code
/// (`LD_PRELOAD`, `LD_LIBRARY_PATH`): whoever can set `DYLEASE_PLUGIN_PATH` can set those. Like
/// the platform loader, the default ignores the variable in a process that runs with elevated
/// rights (set-user-ID and the like: `AT_SECURE`), where the environment comes from a less
/// trusted user. A program that names a variable or directory itself vouches for it through
/// the `unsafe` builder methods or [`init_global`].
///
/// # Example
///
/// ```
/// let lease = dylease::global().acquire()?;
/// println!("{} plugins", lease.plugins().len());
/// # Ok::<(), dylease::Error>(())
/// ```
pub fn global() -> &'static PluginHost {
    GLOBAL.get_or_init(|| default_global(secure_execution()))
}

/// The default global host: over `DYLEASE_PLUGIN_PATH`, unless the process runs with
/// elevated rights (`secure`).
fn default_global(secure: bool) -> PluginHost {
    let builder = HostBuilder::default().name("global");
    if secure {
        log::warn!("[global] {GLOBAL_PATH_VAR} is ignored in a process running with elevated rights");
        return builder.build_unchecked();
    }
    // SAFETY: the process's environment already chooses its code (see above), and a
    // process whose environment comes from a less trusted user does not get here.
    unsafe { builder.env(GLOBAL_PATH_VAR) }.build_unchecked()
}

/// Whether this process runs with elevated rights given by its executable (set-user-ID,
/// set-group-ID, file capabilities): the platform loader's `AT_SECURE`.
fn secure_execution() -> bool {
    crate::load::sys::imp::secure_execution()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::Source;

    #[test]
    fn the_default_global_host_reads_its_variable_only_without_elevated_rights() {
        let plain = default_global(false);
        assert!(
            matches!(&plain.config.sources[..], [Source::Env(var)] if var == GLOBAL_PATH_VAR),
            "{plain:?}"
        );
        let elevated = default_global(true);
        assert!(elevated.config.sources.is_empty(), "{elevated:?}");
        // Bounded, so that a host that waits for an unload that never comes fails the test.
        let lease = elevated.acquire_timeout(std::time::Duration::from_secs(10)).unwrap();
        assert!(lease.plugins().is_empty());
    }

    #[test]
    fn a_test_process_runs_without_elevated_rights() {
        assert!(!secure_execution());
    }
}
