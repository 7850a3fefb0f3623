//! `dylease check` of Python plugins (the `python` feature).

use std::fs::{self, Permissions};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::support::TestDir;

/// Writes the Python plugin `name` into `dir` (mode 0644, its directory 0755).
fn write(dir: &Path, name: &str, source: &str) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).unwrap();
        fs::set_permissions(parent, Permissions::from_mode(0o755)).unwrap();
    }
    fs::write(&path, source).unwrap();
    fs::set_permissions(&path, Permissions::from_mode(0o644)).unwrap();
    path
}

/// A plugin `tag` 1.0 that offers `add_<tag>` (x + `add`) under `test.int_op/1`.
fn counter(tag: &str, add: i64) -> String {
    format!(
        r#"
import dylease
dylease.plugin("{tag}", "1.0")

@dylease.typed_pass("add_{tag}", "test.int_op/1")
def add(x):
    return x + {add}
"#
    )
}

#[test]
fn dylease_check_lists_python_plugins_and_names_the_line_of_an_import_error() {
    let dir = TestDir::new("py-check");
    let plugins = dir.sub("plugins");
    write(&plugins, "a.py", &counter("a", 1));
    write(&plugins, "broken.py", "import dylease\n\nraise ValueError('bad')\n");
    let output = std::process::Command::new(crate::cli::binary())
        .arg("check")
        .arg(&plugins)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success(), "{stdout}");
    assert!(
        stdout.contains("plugin `a` 1.0: 1 pass: add_a (test.int_op/1)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("ValueError: bad") && stdout.contains("broken.py, line 3"),
        "{stdout}"
    );
}
