//! A plugin written in Rust with `export_plugin!` loads and its passes are callable.

use std::path::Path;
use std::process::Command;

use dylease::PluginHost;

use crate::support::{TestDir, assert_unloaded};

#[test]
fn a_rust_plugin_built_with_export_plugin_loads_and_its_pass_is_callable() {
    // Build the example plugin crate with its own target directory, so this nested cargo
    // never waits on the lock of the build that is running these tests.
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("rust-plugin");
    let status = Command::new(env!("CARGO"))
        .args([
            "build",
            "--offline",
            "--quiet",
            "-p",
            "dylease-example-rust-plugin",
            "--target-dir",
        ])
        .arg(&target)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building the example Rust plugin failed");

    let dir = TestDir::new("rust_plugin");
    let lib = dir.path().join("librust_example.so");
    std::fs::copy(target.join("debug/libdylease_example_rust_plugin.so"), &lib).unwrap();
    let host = PluginHost::builder().file(&lib).build().unwrap();
    let lease = host.acquire().unwrap();
    assert_eq!(lease.plugins()[0].name(), "rust-example");
    assert_eq!(lease.plugins()[0].version(), "0.1.0");
    // SAFETY: the plugin registers `triple` as `extern "C" fn(i32) -> i32`.
    let triple = unsafe { lease.pass::<extern "C" fn(i32) -> i32>("triple") }.unwrap();
    assert_eq!(triple(14), 42);
    // SAFETY: `registrations` is `extern "C" fn() -> u32`.
    let registrations = unsafe { lease.pass::<extern "C" fn() -> u32>("registrations") }.unwrap();
    assert_eq!(registrations(), 1);
    drop(lease);
    // A Rust cdylib with no thread-locals in use unmaps like a C library.
    assert_unloaded(&lib);
}
