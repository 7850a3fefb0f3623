//! `init_global`: the process-wide host configured once, before its first use, with policies.
//! A test binary of its own with a single test: the global host is per process.
#![cfg(all(target_os = "linux", target_env = "gnu"))]

use dylease::{Error, LoadPolicy, PluginHost};

#[test]
fn init_global_configures_the_global_host_once_before_its_first_use() {
    let missing = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("global-config-missing-dir");
    let configure = || {
        // SAFETY: the only native source is a directory that does not exist.
        unsafe { PluginHost::builder().dir(&missing) }
            .static_plugin("builtin", |_reg| Ok(()))
            .policy(LoadPolicy::SkipFailed)
    };
    let invalid = PluginHost::builder().static_plugin("", |_reg| Ok(()));
    // SAFETY: no native source.
    let error = unsafe { dylease::init_global(invalid) }.unwrap_err();
    assert!(
        matches!(error, Error::Config { .. }),
        "an invalid configuration is refused at once: {error}"
    );

    // SAFETY: as in `configure`.
    unsafe { dylease::init_global(configure()) }.unwrap();
    // SAFETY: as in `configure`.
    let again = unsafe { dylease::init_global(configure()) }.unwrap_err();
    assert!(again.to_string().contains("already configured or used"), "{again}");

    let host = dylease::global();
    assert_eq!(host.policy(), LoadPolicy::SkipFailed);
    // The missing directory is one skipped failure, not the failure of every load.
    let lease = host.acquire().unwrap();
    assert_eq!(lease.plugins().len(), 1);
    assert_eq!(lease.plugins()[0].name(), "builtin");
    assert_eq!(lease.failures().len(), 1);
    assert_eq!(lease.failures()[0].origin().path(), Some(missing.as_path()));
    assert!(std::ptr::eq(host, dylease::global()), "one global host");
}
