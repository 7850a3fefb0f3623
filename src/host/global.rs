//! The process-wide host: [`global`], and what [`init_global`](crate::init_global) configures.

use crate::error::Error;
use crate::host::builder::HostBuilder;
use crate::host::plugin_host::PluginHost;
use crate::load::Source;

/// The name of the environment variable the [`global`] host reads.
pub const GLOBAL_PATH_VAR: &str = "DYLEASE_PLUGIN_PATH";

static GLOBAL: once_cell::sync::OnceCell<PluginHost> = once_cell::sync::OnceCell::new();

/// Makes `builder`'s host the process-wide one, once, before its first use: the work of
/// [`init_global`](crate::init_global), whose caller vouched for the builder's sources.
pub(super) fn install(builder: HostBuilder) -> Result<(), Error> {
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

/// The process-wide host: the one [`init_global`](crate::init_global) configured, or by
/// default one named `global` over the plugin directories listed in `DYLEASE_PLUGIN_PATH`
/// (read at each load; unset means no plugins), with default policies.
///
/// The default is safe to use because the environment of a process already chooses its code
/// (`LD_PRELOAD`, `LD_LIBRARY_PATH`): whoever can set `DYLEASE_PLUGIN_PATH` can set those. Like
/// the platform loader, the default ignores the variable in a process that runs with elevated
/// rights (set-user-ID and the like: `AT_SECURE`), where the environment comes from a less
/// trusted user. A program that names a variable or directory itself vouches for it through
/// the `unsafe` builder methods or [`init_global`](crate::init_global).
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
    // The source of `HostBuilder::env`, without its `unsafe`: the process's environment
    // already chooses its code (see above), and a process whose environment comes from a less
    // trusted user does not get here.
    builder.source(Source::Env(GLOBAL_PATH_VAR.into())).build_unchecked()
}

/// Whether this process runs with elevated rights given by its executable (set-user-ID,
/// set-group-ID, file capabilities): the platform loader's `AT_SECURE`.
fn secure_execution() -> bool {
    crate::sys::imp::secure_execution()
}

#[cfg(test)]
mod tests {
    use super::*;

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
