//! `dylease check` of Python plugins (the `python` feature).

use std::fs::{self, Permissions};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::cli::unwrapped;
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
    let stdout = unwrapped(&String::from_utf8_lossy(&output.stdout));
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

#[test]
fn dylease_check_advises_fixing_the_syntax_at_the_file_and_line_of_a_syntax_error() {
    let dir = TestDir::new("py-check-syntax");
    let file = write(dir.path(), "syntax.py", "x = 1\ndef broken(:\n");
    let output = std::process::Command::new(crate::cli::binary())
        .args(["check", "--python"])
        .arg(&file)
        .output()
        .unwrap();
    let stdout = unwrapped(&String::from_utf8_lossy(&output.stdout));
    assert!(!output.status.success(), "{stdout}");
    let fix = stdout
        .lines()
        .find_map(|line| line.trim_start().strip_prefix("fix: "))
        .unwrap_or_else(|| panic!("no fix line: {stdout}"));
    assert!(
        fix.contains(&format!("fix the syntax at {}, line 2", file.display())),
        "{stdout}"
    );
    assert!(
        !fix.contains("register_passes") && !fix.contains("non-zero"),
        "{stdout}"
    );
}

/// `inspect --python` of a file that does not parse (its manifest cannot be read): the fix is
/// the Python one, at the file and line, not the C descriptor's.
#[test]
fn dylease_inspect_advises_fixing_the_syntax_of_a_file_whose_manifest_cannot_be_read() {
    let dir = TestDir::new("py-inspect-syntax");
    let file = write(dir.path(), "syntax.py", "x = 1\ndef broken(:\n");
    let output = std::process::Command::new(crate::cli::binary())
        .args(["inspect", "--python"])
        .arg(&file)
        .output()
        .unwrap();
    let stdout = unwrapped(&String::from_utf8_lossy(&output.stdout));
    assert_eq!(output.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("its manifest cannot be read: SyntaxError"), "{stdout}");
    let fix = stdout
        .lines()
        .find_map(|line| line.trim_start().strip_prefix("fix: "))
        .unwrap_or_else(|| panic!("no fix line: {stdout}"));
    assert!(
        fix.contains(&format!("fix the syntax at {}, line 2", file.display()))
            && !fix.contains("descriptor")
            && !fix.contains("DYLEASE_PLUGIN"),
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
        unwrapped(&String::from_utf8_lossy(&output.stdout)),
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

/// `dylease install FILE DIR`: its exit status and what it printed.
fn install(file: &Path, dir: &Path) -> (Option<i32>, String) {
    let output = std::process::Command::new(crate::cli::binary())
        .arg("install")
        .arg(file)
        .arg(dir)
        .output()
        .unwrap();
    let said = unwrapped(&String::from_utf8_lossy(&output.stdout)) + &String::from_utf8_lossy(&output.stderr);
    (output.status.code(), said)
}

/// The names in `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// The package `pkg` at `version` in `staging` (replacing any earlier one there): its
/// `__init__.py` and the module `only_<version>.py`, which no other version has.
fn package(staging: &Path, version: u32, init: &str) -> PathBuf {
    let pkg = staging.join("pkg");
    let _ = fs::remove_dir_all(&pkg);
    write(&pkg, "__init__.py", init);
    write(&pkg, &format!("only_{version}.py"), &format!("VERSION = {version}\n"));
    pkg
}

/// What the plugins of `dir` are, loaded as `python_dir` loads them: (name, version) each.
fn loaded(dir: &Path) -> Vec<(String, String)> {
    // SAFETY: the test's own Python plugins.
    let host = unsafe { dylease::PluginHost::builder().python_dir(dir) }
        .build()
        .unwrap();
    let lease = host.acquire().unwrap();
    lease
        .plugins()
        .iter()
        .map(|p| (p.name().to_owned(), p.version().to_owned()))
        .collect()
}

#[test]
fn install_renames_a_checked_python_file_into_place_and_replaces_it_the_same_way() {
    let dir = TestDir::new("py-install-file");
    let (staging, plugins) = (dir.sub("staging"), dir.sub("plugins"));
    for add in [1, 2] {
        let file = write(&staging, "counter.py", &counter("c", add));
        let (status, said) = install(&file, &plugins);
        assert_eq!(status, Some(0), "{said}");
        assert!(said.contains("plugin `c` 1.0"), "{said}");
        assert_eq!(entries(&plugins), ["counter.py"], "leftovers: {said}");
        assert_eq!(fs::read(plugins.join("counter.py")).unwrap(), fs::read(&file).unwrap());
    }
    let broken = write(&staging, "counter.py", "import dylease\n\nraise ValueError('bad')\n");
    let (status, said) = install(&broken, &plugins);
    assert_eq!(status, Some(1), "{said}");
    assert!(said.contains("ValueError: bad"), "{said}");
    assert_eq!(entries(&plugins), ["counter.py"], "leftovers: {said}");
    assert_eq!(
        fs::read_to_string(plugins.join("counter.py")).unwrap(),
        counter("c", 2),
        "the installed version was replaced by one that fails"
    );
}

#[test]
fn install_of_a_package_copies_checks_and_swaps_whole_trees_and_leaves_nothing_else() {
    let dir = TestDir::new("py-install-package");
    let (staging, plugins) = (dir.sub("staging"), dir.sub("plugins"));
    let init = |version: u32| format!("import dylease\ndylease.plugin(\"pkg\", \"{version}.0\")\n");

    // A new install, then an upgrade over it.
    for version in [1, 2] {
        let pkg = package(&staging, version, &init(version));
        let (status, said) = install(&pkg, &plugins);
        assert_eq!(status, Some(0), "version {version}: {said}");
        assert!(said.contains(&format!("plugin `pkg` {version}.0")), "{said}");
        assert_eq!(entries(&plugins), ["pkg"], "leftovers beside the package: {said}");
        assert_eq!(
            entries(&plugins.join("pkg")),
            ["__init__.py".to_owned(), format!("only_{version}.py")],
            "the installed package is not exactly version {version}: {said}"
        );
        assert_eq!(loaded(&plugins), [("pkg".to_owned(), format!("{version}.0"))]);
    }

    // A version that fails its check leaves version 2 as it was.
    let pkg = package(&staging, 3, "import dylease\n\nraise ValueError('bad')\n");
    let (status, said) = install(&pkg, &plugins);
    assert_eq!(status, Some(1), "{said}");
    assert!(said.contains("ValueError: bad"), "{said}");
    assert_eq!(entries(&plugins), ["pkg"], "leftovers after a refusal: {said}");
    assert_eq!(entries(&plugins.join("pkg")), ["__init__.py", "only_2.py"], "{said}");
    assert_eq!(loaded(&plugins), [("pkg".to_owned(), "2.0".to_owned())]);
}

/// A Python plugin declaring (in its syntax tree) a pass another Python plugin of the
/// directory declares is not installed: both manifests are read without running either.
#[test]
fn install_refuses_a_python_plugin_whose_declared_pass_another_python_plugin_declares() {
    let dir = TestDir::new("py-install-collision");
    let (staging, plugins) = (dir.sub("staging"), dir.sub("plugins"));
    let first = write(&staging, "first.py", &counter("c", 1));
    let (status, said) = install(&first, &plugins);
    assert_eq!(status, Some(0), "{said}");
    assert!(said.contains("declares 1 pass (complete manifest)"), "{said}");
    // Another file, another plugin name, the same pass `add_c`.
    let second = write(
        &staging,
        "second.py",
        &counter("c", 2).replace("\"c\", \"1.0\"", "\"d\", \"1.0\""),
    );
    let (status, said) = install(&second, &plugins);
    assert_eq!(status, Some(1), "{said}");
    assert!(
        said.contains("declares pass `add_c`") && said.contains(&plugins.join("first.py").display().to_string()),
        "{said}"
    );
    assert_eq!(entries(&plugins), ["first.py"], "leftovers: {said}");
}

/// A Python plugin that does not compile is reported against the user's file, the fix line
/// too ("fix the syntax at FILE, line N"), never against the installer's temporary copy; a
/// package's module against the module in the user's package.
#[test]
fn install_reports_a_syntax_error_at_the_users_file_and_line() {
    let dir = TestDir::new("py-install-syntax");
    let (staging, plugins) = (dir.sub("staging"), dir.sub("plugins"));
    let file = write(
        &staging,
        "syntax.py",
        "import dylease\ndylease.plugin(\"s\", \"1.0\")\n\nx = 1\ndef broken(:\n",
    );
    let pkg = staging.join("pkg");
    write(
        &pkg,
        "__init__.py",
        "import dylease\ndylease.plugin(\"p\", \"1.0\")\nfrom . import sub\n",
    );
    let module = write(&pkg, "sub.py", "x = (\n");
    for (plugin, at) in [
        (&file, format!("{}, line 5", file.display())),
        (&pkg, format!("{}, line 1", module.display())),
    ] {
        let (status, said) = install(plugin, &plugins);
        assert_eq!(status, Some(1), "{said}");
        let fix = said
            .lines()
            .find_map(|line| line.trim_start().strip_prefix("fix: "))
            .unwrap_or_else(|| panic!("no fix line: {said}"));
        assert!(fix.contains(&format!("fix the syntax at {at}")), "{said}");
        assert!(said.contains(&format!("\nFAIL  {}\n", plugin.display())), "{said}");
        assert!(
            !said.contains(".dylease-install-"),
            "the report names the temporary copy: {said}"
        );
        assert_eq!(entries(&plugins), Vec::<String>::new(), "leftovers: {said}");
    }
}
