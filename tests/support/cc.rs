//! Compiles C and C++ plugins with the system compilers (`$CC`, else `cc`; `$CXX`, else
//! `c++`, when any source is C++). Shared by the tests and the demo.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The dylease crate's root: the manifest's directory, or the nearest directory above it that
/// holds the header and the test plugins (for the workspace members that build this file
/// too: the CLI's tests in `dylease-cli`, whose `include` links to the root's, and the demo
/// in `examples/demo`).
pub(crate) fn crate_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .take(3)
        .find(|dir| dir.join("include/dylease.h").exists() && dir.join("tests/plugins").is_dir())
        .unwrap_or(manifest)
        .to_owned()
}

/// Compiles the C (or C++) `sources` into the shared library `out`, with `include/` on the include
/// path and the extra `args` (defines, linker flags). Writes to a temporary name and renames,
/// so that concurrent test processes never see a half-written library.
pub(crate) fn compile_plugin(sources: &[&Path], out: &Path, args: &[&str]) -> Result<PathBuf, String> {
    let include = crate_root().join("include");
    let partial = out.with_extension(format!("{}.partial", std::process::id()));
    let cpp = sources.iter().any(|s| s.extension().is_some_and(|e| e == "cpp"));
    let (var, default) = if cpp { ("CXX", "c++") } else { ("CC", "cc") };
    let cc = std::env::var_os(var).unwrap_or_else(|| default.into());
    let output = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O1", "-Wall", "-Werror"])
        .arg("-I")
        .arg(&include)
        .args(args)
        .args(sources)
        .arg("-o")
        .arg(&partial)
        .output()
        .map_err(|e| format!("cannot run the C compiler {cc:?}: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "{cc:?} failed to build {}:\n{}",
            out.display(),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    std::fs::rename(&partial, out).map_err(|e| format!("cannot move {} into place: {e}", partial.display()))?;
    Ok(out.to_owned())
}
