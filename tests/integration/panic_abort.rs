//! `export_plugin!` warns at compile time in a plugin crate built with `panic = "abort"`,
//! where the panics its documentation says are caught abort the host instead; the
//! `allow-panic-abort` feature turns the warning off, and an unwinding crate never sees it.

use std::path::Path;
use std::process::Command;

/// A plugin crate using `export_plugin!`, checked (`cargo check`) with the given panic
/// strategy and dylease-plugin features; returns the compiler's diagnostics.
fn check_plugin(name: &str, panic: &str, features: &str) -> String {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("panic-abort").join(name);
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let manifest = format!(
        "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2024\"\npublish = false\n\n\
         [lib]\ncrate-type = [\"cdylib\"]\n\n\
         [dependencies]\ndylease-plugin = {{ path = {:?}, features = [{features}] }}\n\n\
         [profile.dev]\npanic = \"{panic}\"\n\n[workspace]\n",
        crate::rust_plugin::build::plugin_crate(Path::new(env!("CARGO_MANIFEST_DIR")))
            .unwrap_or_else(|e| panic!("{e}")),
    );
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    std::fs::write(
        dir.join("src/lib.rs"),
        "dylease_plugin::export_plugin! {\n    name: \"abort-demo\",\n    version: \"0.1.0\",\n    \
         register: |_registrar| Ok(()),\n}\n",
    )
    .unwrap();
    let output = Command::new(env!("CARGO"))
        .args(["check", "--offline", "--color", "never", "--manifest-path"])
        .arg(dir.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(Path::new(env!("CARGO_TARGET_TMPDIR")).join("panic-abort/target"))
        .env_remove("RUSTFLAGS")
        .env_remove("CARGO_ENCODED_RUSTFLAGS")
        .output()
        .expect("cargo runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    stderr
}

const WARNING: &str = "this dylease plugin crate is built with panic = \"abort\"";

#[test]
fn export_plugin_warns_when_the_plugin_crate_aborts_on_panic_unless_allowed() {
    let aborting = check_plugin("aborting", "abort", "");
    assert!(aborting.contains(WARNING), "{aborting}");
    assert!(aborting.contains("allow-panic-abort"), "{aborting}");

    let allowed = check_plugin("allowed", "abort", "\"allow-panic-abort\"");
    assert!(!allowed.contains(WARNING), "{allowed}");
    assert!(!allowed.contains("deprecated"), "{allowed}");

    let unwinding = check_plugin("unwinding", "unwind", "");
    assert!(!unwinding.contains(WARNING), "{unwinding}");
}
