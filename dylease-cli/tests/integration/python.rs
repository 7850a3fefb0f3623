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
        .args(["check", "--python"])
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

/// `dylease check` of the directory `dir` with `args` before it.
fn check(args: &[&str], dir: &Path) -> (Option<i32>, String) {
    let output = std::process::Command::new(crate::cli::binary())
        .arg("check")
        .args(args)
        .arg(dir)
        .output()
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
    )
}

#[test]
fn a_directory_is_judged_as_dir_loads_it_and_its_python_plugins_only_with_python() {
    let dir = TestDir::new("py-check-dir");
    let plugins = dir.sub("plugins");
    for n in ["p1", "p2", "p3"] {
        dir.add(n, &format!("plugins/lib{n}.so"));
    }
    write(&plugins, "broken.py", "import dylease\n\nraise ValueError('bad')\n");

    // SAFETY: the test's own plugins (three C fixtures; the broken Python file is not loaded).
    let host = unsafe { dylease::PluginHost::builder().dir(&plugins) }.build().unwrap();
    assert_eq!(
        host.acquire().unwrap().plugins().len(),
        3,
        "a `dir` host loads the three"
    );

    let (status, stdout) = check(&[], &plugins);
    assert_eq!(status, Some(0), "{stdout}");
    assert!(
        stdout.contains("(directory of 3 plugin files) as a whole: loads 3 plugins, 3 passes"),
        "{stdout}"
    );
    assert!(!stdout.contains("ValueError"), "the Python file was run: {stdout}");
    assert!(
        stdout.contains("not loaded: `") && stdout.contains("broken.py` ("),
        "{stdout}"
    );

    // With --python, the directory is also a `python_dir`: its Python plugin fails it, as a
    // host given `.dir(d).python_dir(d)` fails.
    // SAFETY: as above; the broken Python file fails the load by raising.
    let host = unsafe { dylease::PluginHost::builder().dir(&plugins).python_dir(&plugins) }
        .build()
        .unwrap();
    assert!(host.acquire().is_err(), "a `python_dir` host fails on broken.py");
    let (status, stdout) = check(&["--python"], &plugins);
    assert_eq!(status, Some(1), "{stdout}");
    assert!(
        stdout.contains("ValueError: bad") && stdout.contains("broken.py, line 3"),
        "{stdout}"
    );
    assert!(
        stdout.contains("(directory of 4 plugin files) as a whole: a host given this directory loads none"),
        "{stdout}"
    );
}
