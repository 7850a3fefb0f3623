//! What `dylease check` says about a plugin whose run path names a directory others can
//! create.

use std::fs::{self, Permissions};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;

use crate::support::{TestDir, compile_settled as compile};

/// A test layout: `open/` (mode 1777, like `/tmp`), `trusted/libdep.so` (the genuine
/// dependency), and `plugin/libuses_dep.so` whose run path lists the missing
/// `open/build/lib` first, then `trusted/`.
struct StaleRunPath {
    _dir: TestDir,
    open: PathBuf,
    plugin: PathBuf,
}

fn stale_run_path(test: &str) -> StaleRunPath {
    let dir = TestDir::new(test);
    let open = dir.sub("open");
    fs::set_permissions(&open, Permissions::from_mode(0o1777)).unwrap();
    let trusted = dir.sub("trusted");
    compile(
        "dep.c",
        &trusted.join("libdep.so"),
        &["-DDEP_VALUE=1", "-Wl,-soname,libdep.so", "-Wl,--no-as-needed", "-ldl"],
    );
    let run_path = format!("{}:{}", open.join("build/lib").display(), trusted.display());
    let plugin = compile(
        "uses_dep.c",
        &dir.sub("plugin").join("libuses_dep.so"),
        &[
            "-Wl,--no-as-needed",
            "-L",
            &trusted.display().to_string(),
            "-ldep",
            &format!("-Wl,-rpath,{run_path}"),
            "-Wl,--enable-new-dtags",
        ],
    );
    StaleRunPath {
        _dir: dir,
        open,
        plugin,
    }
}

#[test]
fn the_checker_names_the_run_path_directory_and_advises_origin_not_an_rpath_into_it() {
    let layout = stale_run_path("deps_checker");
    let output = std::process::Command::new(crate::cli::binary())
        .args(["check", "--json"])
        .arg(&layout.plugin)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let problem = &report["checks"][0]["problem"];
    assert_eq!(problem["cause"], "untrusted", "{report}");
    let message = problem["message"].as_str().unwrap();
    let missing = layout.open.join("build/lib");
    assert!(
        message.contains(&format!("run path (DT_RUNPATH) entry `{}`", missing.display())),
        "{message}"
    );
    let fix = problem["fix"].as_str().unwrap();
    assert!(fix.contains("run path relative to `$ORIGIN`"), "{fix}");
    assert!(fix.contains("rebuild the plugin without that entry"), "{fix}");
}
