//! Builds the example Rust plugins with a nested cargo, in a target directory of its own (so it
//! never waits on the lock of the build that runs it): the library `examples/plugins/folding.rs`
//! and the plugins built as its examples (the failing `no_device.rs` and `panicking.rs`, and
//! `messages.rs`, with message passes). Shared by the tests and the demo.
//!
//! In the repository it is the workspace member `examples/rust-plugin`. A packaged crate holds
//! no workspace member, only the source: there a manifest for it is written next to the target
//! directory, with the same name, crate type and dependency on this crate.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The crate name of the example plugin.
const NAME: &str = "dylease-example-rust-plugin";

/// The file name of the example plugin's library in the directory [`build_rust_plugins`]
/// returns (`libdylease_example_rust_plugin.so` on Linux); the plugins built as examples are
/// `examples/lib<name>.so` there.
pub(crate) fn library_name() -> String {
    format!(
        "{}{}{}",
        std::env::consts::DLL_PREFIX,
        NAME.replace('-', "_"),
        std::env::consts::DLL_SUFFIX
    )
}

/// The plugin-side crate `dylease-plugin` that plugin crates depend on: the workspace's member
/// beside the crate's root, or, in a packaged crate tested alone (which holds no other crate),
/// the unpacked package that `DYLEASE_PLUGIN_CRATE` names (scripts/package-check.sh sets it).
pub(crate) fn plugin_crate(root: &Path) -> Result<PathBuf, String> {
    let member = root.join("dylease-plugin");
    if member.join("Cargo.toml").exists() {
        return Ok(member);
    }
    std::env::var_os("DYLEASE_PLUGIN_CRATE")
        .map(PathBuf::from)
        .ok_or_else(|| {
            format!(
                "the crate dylease-plugin is not at {}: set DYLEASE_PLUGIN_CRATE to its directory",
                member.display()
            )
        })
}

/// Builds the plugins (debug profile) into `target` and returns the directory they are in.
/// `offline` passes `--offline` to cargo.
pub(crate) fn build_rust_plugins(target: &Path, offline: bool) -> Result<PathBuf, String> {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    // The crate's root, also when a workspace member (the CLI's tests in `dylease-cli`, the
    // demo in `examples/demo`) builds this.
    let root = manifest_dir
        .ancestors()
        .take(3)
        .find(|dir| dir.join("include/dylease.h").exists() && dir.join("tests/plugins").is_dir())
        .unwrap_or(manifest_dir);
    let member = root.join("examples/rust-plugin/Cargo.toml");
    let manifest = if member.exists() {
        member
    } else {
        // Straight to stderr, past a test harness's capture: shown even when the test passes.
        let _ = writeln!(
            std::io::stderr(),
            "note: examples/rust-plugin is not here (a packaged crate holds no workspace member); \
             building examples/plugins/{{folding,no_device,panicking,messages}}.rs with a manifest written to {}",
            target.display()
        );
        standalone_manifest(root, target)?
    };
    let status = Command::new(env!("CARGO"))
        .args(["build", "--quiet", "--lib", "--examples"])
        .args(offline.then_some("--offline"))
        .arg("--manifest-path")
        .arg(&manifest)
        .arg("--target-dir")
        .arg(target)
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .status()
        .map_err(|e| format!("cannot run cargo: {e}"))?;
    if !status.success() {
        return Err(format!("building the example Rust plugins failed ({status})"));
    }
    Ok(target.join("debug"))
}

/// `examples/rust-plugin/Cargo.toml` with absolute paths, for a tree without the member.
/// (The repository's tests build the member, so a difference between the two shows up as a
/// failure of the packaged crate's tests: scripts/package-check.sh.)
fn standalone_manifest(root: &Path, target: &Path) -> Result<PathBuf, String> {
    let dir = target.join("standalone-manifest");
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let toml_path = |path: &Path| format!("{:?}", path.display().to_string());
    let manifest = format!(
        "[package]\nname = \"{NAME}\"\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n\
         [lib]\ncrate-type = [\"cdylib\"]\npath = {}\n\n\
         [dependencies]\ndylease-plugin = {{ path = {} }}\n\n\
         [[example]]\nname = \"no_device\"\ncrate-type = [\"cdylib\"]\npath = {}\n\n\
         [[example]]\nname = \"panicking\"\ncrate-type = [\"cdylib\"]\npath = {}\n\n\
         [[example]]\nname = \"messages\"\ncrate-type = [\"cdylib\"]\npath = {}\n\n\
         # Not a member of any workspace above it.\n[workspace]\n",
        toml_path(&root.join("examples/plugins/folding.rs")),
        toml_path(&plugin_crate(root)?),
        toml_path(&root.join("examples/plugins/no_device.rs")),
        toml_path(&root.join("examples/plugins/panicking.rs")),
        toml_path(&root.join("examples/plugins/messages.rs")),
    );
    let path = dir.join("Cargo.toml");
    std::fs::write(&path, manifest).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}
