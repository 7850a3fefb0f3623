//! `dylease check` applies the host's trust check: a bare relative name is checked like
//! `./name`.

use std::fs::{self, Permissions};
use std::os::unix::fs::PermissionsExt;

use crate::support::TestDir;

#[test]
fn a_bare_relative_name_in_a_directory_others_can_write_is_refused_without_running_it() {
    let dir = TestDir::new("trust_relative_cli");
    let open = dir.sub("open");
    dir.add("by_hand_marker", "open/libmarker.so");
    fs::set_permissions(&open, Permissions::from_mode(0o757)).unwrap();
    let checker = std::process::Command::new(crate::cli::binary())
        .args(["check", "libmarker.so"])
        .current_dir(&open)
        .output()
        .unwrap();
    let report = crate::cli::unwrapped(&String::from_utf8_lossy(&checker.stdout));
    assert!(
        !checker.status.success(),
        "the checker passed a bare name in a writable directory:\n{report}"
    );
    assert!(report.contains("writable by others (mode 0757)"), "{report}");
    assert!(
        !open.join("libmarker.so.ran").exists(),
        "the checker ran the plugin's code"
    );
}
