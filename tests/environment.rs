//! Sources read from the environment, including the process-wide `dylease::global()` host.
//!
//! Each test runs its body in a child process of its own (this test binary, run again for that
//! one test) whose environment it sets: no test changes the environment of a process in which
//! another test reads it.
#![cfg(all(target_os = "linux", target_env = "gnu"))]

use std::ffi::OsString;
use std::fs::Permissions;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

#[path = "support/cc.rs"]
mod cc;

/// Set in the child process: the test body runs there.
const CHILD: &str = "DYLEASE_TEST_ENVIRONMENT_CHILD";

/// In the parent: runs the test `name` again in a child process with `vars` set (and
/// `dylease::GLOBAL_PATH_VAR` removed unless given), asserts that it passed and returns `false`.
/// In that child: returns `true`, and the caller runs the test's body.
fn in_child(name: &str, vars: &[(&str, OsString)]) -> bool {
    if std::env::var_os(CHILD).is_some() {
        return true;
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env_remove(dylease::GLOBAL_PATH_VAR)
        .envs(vars.iter().map(|(k, v)| (k, v)))
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{name} failed in its child process:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    false
}

/// A fresh directory of this test's own under the target's temporary directory.
fn test_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("environment-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, Permissions::from_mode(0o755)).unwrap();
    dir
}

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
fn the_global_host_without_its_variable_has_no_plugins() {
    if !in_child("the_global_host_without_its_variable_has_no_plugins", &[]) {
        return;
    }
    assert!(std::env::var_os(dylease::GLOBAL_PATH_VAR).is_none());
    assert!(dylease::global().acquire().unwrap().plugins().is_empty());
}

#[test]
fn the_global_host_loads_the_directories_its_variable_lists_in_order() {
    let name = "the_global_host_loads_the_directories_its_variable_lists_in_order";
    let (a, b) = if std::env::var_os(CHILD).is_some() {
        (PathBuf::new(), PathBuf::new())
    } else {
        let root = test_dir("global");
        let (a, b) = (root.join("a"), root.join("b"));
        for dir in [&a, &b] {
            std::fs::create_dir_all(dir).unwrap();
            std::fs::set_permissions(dir, Permissions::from_mode(0o755)).unwrap();
        }
        plugin(&a, "env_a");
        plugin(&b, "env_b");
        (a, b)
    };
    if !in_child(
        name,
        &[(dylease::GLOBAL_PATH_VAR, std::env::join_paths([&a, &b]).unwrap())],
    ) {
        let _ = std::fs::remove_dir_all(a.parent().unwrap());
        return;
    }
    let lease = dylease::global().acquire().unwrap();
    let names: Vec<_> = lease.plugins().iter().map(|p| p.name()).collect();
    assert_eq!(names, ["env_a", "env_b"]);
    assert!(std::ptr::eq(dylease::global(), dylease::global()));
}

#[test]
fn an_environment_source_refuses_a_relative_directory_and_names_its_variable() {
    let name = "an_environment_source_refuses_a_relative_directory_and_names_its_variable";
    let a = if std::env::var_os(CHILD).is_some() {
        PathBuf::new()
    } else {
        let a = test_dir("relative");
        plugin(&a, "env_a");
        a
    };
    // A relative directory would make the plugins depend on the current directory.
    let value = OsString::from(format!("{}::relative/plugins", a.display()));
    if !in_child(name, &[("DYLEASE_TEST_PATH", value)]) {
        let _ = std::fs::remove_dir_all(&a);
        return;
    }
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { dylease::PluginHost::builder().env("DYLEASE_TEST_PATH").build() }.unwrap();
    let error = host.acquire().unwrap_err();
    assert!(matches!(error, dylease::Error::Config { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("DYLEASE_TEST_PATH"), "{message}");
    assert!(message.contains("relative directory `relative/plugins`"), "{message}");
}
