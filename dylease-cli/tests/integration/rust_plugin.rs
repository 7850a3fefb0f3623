//! The example Rust plugins, built once per test process (for the checks of `corruption`).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

#[allow(dead_code)]
#[path = "../../../tests/support/rust_plugin.rs"]
mod build;

/// Builds the example Rust plugins once per test process; returns the directory the
/// libraries are in.
pub(crate) fn built_rust_plugins() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("rust-plugin");
        build::build_rust_plugins(&target, true).unwrap()
    })
}
