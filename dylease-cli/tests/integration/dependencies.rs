//! What `dylease check` says about a plugin whose run path names a directory others can
//! create.

use crate::support::stale_run_path;

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
