//! Sources read from the environment, including the process-wide `dylease::global()` host.
//!
//! This is a test binary of its own with a single test: changing the environment is only
//! sound while no other thread reads it, and here no other test runs.
#![cfg(all(target_os = "linux", target_env = "gnu"))]

use std::fs::Permissions;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

#[path = "support/cc.rs"]
mod cc;

fn plugin(dir: &Path, name: &str) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plugins/numbered.c");
    let defines = [
        format!("-DPLUGIN_NAME=\"{name}\""),
        format!("-DPASS_NAME=\"{name}_pass\""),
    ];
    let defines: Vec<&str> = defines.iter().map(String::as_str).collect();
    let lib = cc::compile_plugin(&[&source], &dir.join(format!("lib{name}.so")), &defines).unwrap();
    // Not writable by group or others whatever the umask: the host's default trust check.
    std::fs::set_permissions(&lib, Permissions::from_mode(0o755)).unwrap();
    lib
}

#[test]
fn environment_sources_list_absolute_directories_and_refuse_relative_ones() {
    let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("environment-{}", std::process::id()));
    let (a, b) = (root.join("a"), root.join("b"));
    for dir in [&a, &b] {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::set_permissions(dir, Permissions::from_mode(0o755)).unwrap();
    }
    plugin(&a, "env_a");
    plugin(&b, "env_b");

    // The global host: DYLEASE_PLUGIN_PATH, read at each load; unset means no plugins.
    // SAFETY: this binary's only test runs on this thread; nothing else reads the environment.
    unsafe { std::env::remove_var(dylease::GLOBAL_PATH_VAR) };
    assert!(dylease::global().acquire().unwrap().plugins().is_empty());
    // SAFETY: as above.
    unsafe { std::env::set_var(dylease::GLOBAL_PATH_VAR, std::env::join_paths([&a, &b]).unwrap()) };
    let lease = dylease::global().acquire().unwrap();
    let names: Vec<_> = lease.plugins().iter().map(|p| p.name()).collect();
    assert_eq!(names, ["env_a", "env_b"]);
    assert!(std::ptr::eq(dylease::global(), dylease::global()));
    drop(lease);

    // A relative directory would make the plugins depend on the current directory.
    // SAFETY: as above.
    unsafe { std::env::set_var("DYLEASE_TEST_PATH", format!("{}::relative/plugins", a.display())) };
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { dylease::PluginHost::builder().env("DYLEASE_TEST_PATH").build() }.unwrap();
    let error = host.acquire().unwrap_err();
    assert!(matches!(error, dylease::Error::Config { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("DYLEASE_TEST_PATH"), "{message}");
    assert!(message.contains("relative directory `relative/plugins`"), "{message}");
    let _ = std::fs::remove_dir_all(&root);
}
