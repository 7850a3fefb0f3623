//! `dylease check`, the real binary: what it prints for good and broken plugins, one file at
//! a time and as a directory, in text and in JSON, and its exit status.

use std::fs;
use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::support::{TestDir, fixture};

/// The `dylease` binary, which cargo builds for this crate's tests.
pub(crate) fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_dylease"))
}

/// Sets the file's modification time a minute back, out of the checker's "may still be
/// being written" window.
fn settle(path: &Path) {
    let file = fs::File::options().write(true).open(path).unwrap();
    file.set_modified(SystemTime::now() - Duration::from_secs(60)).unwrap();
}

/// A copy of a fixture in `dir`, settled (see [`settle`]).
pub(crate) fn add(dir: &TestDir, name: &str, file: &str) -> PathBuf {
    let path = dir.add(name, file);
    settle(&path);
    path
}

/// One run of the binary.
#[derive(Debug)]
pub(crate) struct Run {
    pub(crate) status: i32,
    /// Standard output with the lines the binary wrapped joined again ([`unwrapped`]): the
    /// report's logical lines, which the tests compare.
    pub(crate) stdout: String,
    /// Standard output as printed, wrapped.
    pub(crate) printed: String,
    pub(crate) stderr: String,
}

/// Runs `dylease` in `dir`, so that the paths it prints are the relative ones given.
pub(crate) fn dylease(dir: &Path, args: &[&str]) -> Run {
    let output = Command::new(binary())
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the dylease binary runs");
    let printed = String::from_utf8(output.stdout).unwrap();
    Run {
        status: output.status.code().expect("exited, not killed"),
        stdout: unwrapped(&printed),
        printed,
        stderr: String::from_utf8(output.stderr).unwrap(),
    }
}

/// A `plugins` directory inside `dir` holding copies of the fixtures, as `(fixture, file)`.
fn plugins(dir: &TestDir, files: &[(&str, &str)]) {
    let plugins = dir.sub("plugins");
    for (name, file) in files {
        fs::copy(fixture(name), plugins.join(file)).unwrap();
        settle(&plugins.join(file));
    }
}

/// The report `text` with the lines the binary wrapped joined again: a line indented four
/// columns deeper than the line it continues is joined to it with a space (no line of a
/// report is indented so on its own).
pub(crate) fn unwrapped(text: &str) -> String {
    let mut out = String::new();
    let mut indent = None;
    for line in text.split('\n') {
        let own = line.len() - line.trim_start_matches(' ').len();
        match indent {
            Some(logical) if !line.trim().is_empty() && own == logical + 4 => {
                out.push(' ');
                out.push_str(&line[own..]);
            }
            _ => {
                if indent.is_some() {
                    out.push('\n');
                }
                out.push_str(line);
                indent = Some(own);
            }
        }
    }
    out
}

pub(crate) fn json(run: &Run) -> Value {
    serde_json::from_str(&run.printed).unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {run:?}"))
}

#[test]
fn a_good_plugin_is_listed_with_its_version_and_passes_and_exits_0() {
    let dir = TestDir::new("cli_good");
    add(&dir, "arith", "libarith.so");
    let run = dylease(dir.path(), &["check", "libarith.so"]);
    assert_eq!(run.status, 0, "{run:?}");
    assert_eq!(
        run.stdout,
        "ok    libarith.so\n\
         \x20       plugin `arith` 1.2.3: 3 passes: double, add_one, set_unload_counter\n\
         \n\
         The check passed: a host would load these plugins.\n"
    );
}

#[test]
fn a_file_that_is_not_a_plugin_is_reported_with_the_file_the_cause_and_a_fix_and_exits_1() {
    let dir = TestDir::new("cli_bad");
    add(&dir, "noentry", "libnoentry.so");
    let run = dylease(dir.path(), &["check", "libnoentry.so"]);
    assert_eq!(run.status, 1, "{run:?}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines[0], "FAIL  libnoentry.so", "{run:?}");
    assert!(
        lines[1].starts_with("        problem: plugin file `libnoentry.so` does not export `dylease_plugin_v1`"),
        "{run:?}"
    );
    assert!(
        lines[2].starts_with("        fix: ") && lines[2].contains("DYLEASE_PLUGIN("),
        "{run:?}"
    );
    assert_eq!(
        lines.last(),
        Some(&"1 of 1 check failed: a host would not load these plugins. Fix the first problem first.")
    );
}

#[test]
fn a_plugin_writable_by_others_is_reported_as_untrusted_with_the_mode_and_a_fix() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TestDir::new("cli_untrusted");
    let file = add(&dir, "arith", "libarith.so");
    fs::set_permissions(&file, fs::Permissions::from_mode(0o666)).unwrap();
    let run = dylease(dir.path(), &["check", "--json", "libarith.so"]);
    assert_eq!(run.status, 1, "{run:?}");
    let report = json(&run);
    let problem = &report["checks"][0]["problem"];
    assert_eq!(problem["cause"], "untrusted", "{report}");
    let message = problem["message"].as_str().unwrap();
    assert!(
        message.contains("(mode 0666)") && message.contains("chmod go-w"),
        "{report}"
    );
    assert!(
        problem["fix"].as_str().unwrap().contains("TrustPolicy::Permissive"),
        "{report}"
    );
}

#[test]
fn a_directory_with_a_good_and_a_bad_plugin_is_reported_file_by_file_then_as_a_whole() {
    let dir = TestDir::new("cli_dir_text");
    plugins(&dir, &[("arith", "libarith.so"), ("noentry", "libnoentry.so")]);
    fs::write(dir.path().join("plugins/README.txt"), "not a plugin").unwrap();
    let run = dylease(dir.path(), &["check", "plugins"]);
    assert_eq!(run.status, 1, "{run:?}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    let expected_starts = [
        "ok    plugins/libarith.so",
        "        plugin `arith` 1.2.3: 3 passes: double, add_one, set_unload_counter",
        "FAIL  plugins/libnoentry.so",
        "        problem: plugin file `plugins/libnoentry.so` does not export `dylease_plugin_v1`",
        "        fix: ",
        "FAIL  plugins (directory of 2 plugin files) as a whole: a host given this directory loads none of its \
         plugins, so none of their passes run",
        // The directory fails on the file above: it points back instead of repeating it.
        "        problem: `plugins/libnoentry.so` does not load (above)",
        "        not loaded: `plugins/README.txt` (the name does not end in `.so`)",
        "",
        "2 of 3 checks failed",
    ];
    assert_eq!(lines.len(), expected_starts.len(), "{run:?}");
    for (line, start) in lines.iter().zip(expected_starts) {
        assert!(
            line.starts_with(start),
            "expected {start:?}, got {line:?} in\n{}",
            run.stdout
        );
    }
}

#[test]
fn json_reports_each_file_and_the_directory_with_causes_and_fixes() {
    let dir = TestDir::new("cli_dir_json");
    plugins(&dir, &[("arith", "libarith.so"), ("noentry", "libnoentry.so")]);
    fs::write(dir.path().join("plugins/README.txt"), "not a plugin").unwrap();
    let run = dylease(dir.path(), &["check", "--json", "plugins"]);
    assert_eq!(run.status, 1, "{run:?}");
    let report = json(&run);
    assert_eq!(report["ok"], false);
    let checks = report["checks"].as_array().unwrap();
    assert_eq!(checks.len(), 3, "{report:#}");

    let good = &checks[0];
    assert_eq!(
        (&good["kind"], &good["path"], &good["ok"]),
        (&"file".into(), &"plugins/libarith.so".into(), &true.into())
    );
    assert_eq!(good["problem"], Value::Null);
    assert_eq!(good["plugins"][0]["name"], "arith");
    assert_eq!(good["plugins"][0]["version"], "1.2.3");
    assert_eq!(good["plugins"][0]["path"], "plugins/libarith.so");
    assert_eq!(
        good["plugins"][0]["passes"],
        serde_json::json!([
            {"name": "double", "interface": null},
            {"name": "add_one", "interface": null},
            {"name": "set_unload_counter", "interface": null},
        ])
    );

    let bad = &checks[1];
    assert_eq!(
        (&bad["kind"], &bad["path"], &bad["ok"]),
        (&"file".into(), &"plugins/libnoentry.so".into(), &false.into())
    );
    assert_eq!(bad["plugins"], serde_json::json!([]));
    assert_eq!(bad["problem"]["cause"], "missing-entry");
    assert_eq!(bad["problem"]["file"], "plugins/libnoentry.so");
    let message = bad["problem"]["message"].as_str().unwrap();
    assert!(
        message.contains("`plugins/libnoentry.so` does not export `dylease_plugin_v1`"),
        "{message}"
    );
    assert!(
        bad["problem"]["fix"].as_str().unwrap().contains("DYLEASE_PLUGIN("),
        "{report:#}"
    );

    let whole = &checks[2];
    assert_eq!(
        (&whole["kind"], &whole["path"], &whole["ok"]),
        (&"directory".into(), &"plugins".into(), &false.into())
    );
    assert_eq!(whole["problem"]["file"], "plugins/libnoentry.so");
    assert_eq!(
        whole["skipped"],
        serde_json::json!([{"path": "plugins/README.txt", "path_bytes": null, "reason": "the name does not end in `.so`"}])
    );
}

#[test]
fn plugins_that_load_alone_but_clash_together_fail_the_directory_and_the_combined_check() {
    let dir = TestDir::new("cli_clash");
    plugins(&dir, &[("arith", "liba.so"), ("arith", "libb.so")]);
    let clash = "pass `double` is registered by both plugin file `plugins/liba.so` and plugin file `plugins/libb.so`";

    let run = dylease(dir.path(), &["check", "plugins"]);
    assert_eq!(run.status, 1, "{run:?}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines[0], "ok    plugins/liba.so", "{run:?}");
    assert_eq!(lines[2], "ok    plugins/libb.so", "{run:?}");
    assert!(
        lines[4].starts_with("FAIL  plugins (directory of 2 plugin files) as a whole"),
        "{run:?}"
    );
    assert!(lines[5].starts_with(&format!("        problem: {clash}")), "{run:?}");
    assert!(
        lines[6].starts_with("        fix: ") && lines[6].contains("rename the pass"),
        "{run:?}"
    );

    // Two files named on the command line: each loads, one host with both does not.
    let run = dylease(dir.path(), &["check", "--json", "plugins/liba.so", "plugins/libb.so"]);
    assert_eq!(run.status, 1, "{run:?}");
    let report = json(&run);
    let checks = report["checks"].as_array().unwrap();
    let summary: Vec<_> = checks
        .iter()
        .map(|c| (c["kind"].as_str().unwrap(), c["ok"] == true))
        .collect();
    assert_eq!(
        summary,
        [("file", true), ("file", true), ("together", false)],
        "{report:#}"
    );
    assert_eq!(checks[2]["path"], Value::Null);
    assert_eq!(checks[2]["problem"]["cause"], "duplicate-pass");
    assert!(
        checks[2]["problem"]["message"].as_str().unwrap().starts_with(clash),
        "{report:#}"
    );
}

#[test]
fn a_good_directory_exits_0_and_what_plugins_print_stays_out_of_the_json() {
    let dir = TestDir::new("cli_noisy");
    plugins(&dir, &[("arith", "libarith.so"), ("noisy", "libnoisy.so")]);
    let run = dylease(dir.path(), &["check", "--json", "plugins"]);
    assert_eq!(run.status, 0, "{run:?}");
    let report = json(&run);
    assert_eq!(report["ok"], true);
    let whole = &report["checks"][2];
    assert_eq!((&whole["kind"], &whole["ok"]), (&"directory".into(), &true.into()));
    let names: Vec<_> = whole["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| &p["name"])
        .collect();
    assert_eq!(names, ["arith", "noisy"]);
    // The plugin printed at each of its three loads (its own check loads it twice, to see
    // whether it unloads; then the directory's).
    assert_eq!(run.stderr.matches("noisy: constructor ran").count(), 3, "{run:?}");
    assert_eq!(run.stderr.matches("noisy: on_unload ran").count(), 3, "{run:?}");

    // In text mode it shows next to the check that made it print, even from C's buffer.
    let run = dylease(dir.path(), &["check", "plugins"]);
    assert_eq!(run.status, 0, "{run:?}");
    let before_its_check = run.stdout.split("ok    plugins/libnoisy.so\n").next().unwrap();
    let after_the_previous = before_its_check.split("set_unload_counter\n").nth(1).unwrap();
    let mut printed: Vec<_> = after_the_previous.lines().collect();
    printed.sort_unstable();
    // Twice each: the file's check loads it, unloads it, and loads it again.
    assert_eq!(
        printed,
        [
            "noisy: constructor ran",
            "noisy: constructor ran",
            "noisy: on_unload ran",
            "noisy: on_unload ran"
        ],
        "{run:?}"
    );
    assert!(
        run.stdout
            .contains("ok    plugins (directory of 2 plugin files) as a whole: loads 2 plugins, 4 passes"),
        "{run:?}"
    );
    assert!(
        run.stdout
            .ends_with("All 3 checks passed: a host would load these plugins.\n"),
        "{run:?}"
    );
}

/// A build without the `python` feature cannot load what `--python` asks for: a usage error,
/// not a check that quietly skips the Python plugins.
#[cfg(not(feature = "python"))]
#[test]
fn python_without_the_python_feature_is_a_usage_error_with_status_2() {
    let dir = TestDir::new("cli_python_flag");
    let run = dylease(dir.path(), &["check", "--python", "."]);
    assert_eq!(run.status, 2, "{run:?}");
    assert!(run.stderr.contains("built without Python support"), "{run:?}");
}

/// Installing a Python plugin needs the `python` feature: without it the file is refused
/// and DIR is left as it was.
#[cfg(not(feature = "python"))]
#[test]
fn install_of_a_python_plugin_without_the_python_feature_is_refused_and_changes_nothing() {
    let dir = TestDir::new("cli_install_py");
    let plugins = dir.sub("plugins");
    fs::write(dir.path().join("x.py"), "import dylease\n").unwrap();
    let run = dylease(dir.path(), &["install", "x.py", "plugins"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(run.stdout.contains("built without Python support"), "{run:?}");
    assert_eq!(fs::read_dir(&plugins).unwrap().count(), 0, "{run:?}");
}

/// The help says that checking runs the plugin's code, and it does: a constructor runs.
#[test]
fn check_says_it_runs_the_plugins_code_and_it_does() {
    for help in ["-h", "--help"] {
        let run = dylease(Path::new("."), &["check", help]);
        assert_eq!(run.status, 0, "{run:?}");
        assert!(run.stdout.contains("which runs their code"), "{run:?}");
    }
    let long = dylease(Path::new("."), &["check", "--help"]);
    assert!(long.stdout.contains("Checking a plugin runs its code"), "{long:?}");
    let dir = TestDir::new("cli_runs_code");
    add(&dir, "by_hand_marker", "libmarker.so");
    let run = dylease(dir.path(), &["check", "libmarker.so"]);
    assert_eq!(run.status, 0, "{run:?}");
    assert!(
        dir.path().join("libmarker.so.ran").exists(),
        "the constructor did not run: {run:?}"
    );
}

#[test]
fn no_path_is_a_usage_error_with_status_2() {
    let dir = TestDir::new("cli_usage");
    let run = dylease(dir.path(), &["check"]);
    assert_eq!(run.status, 2, "{run:?}");
    assert!(run.stderr.contains("<FILE_OR_DIR>"), "{run:?}");
    assert!(run.stdout.is_empty(), "{run:?}");
}

#[test]
fn a_directory_without_plugin_files_loads_nothing_and_says_why() {
    let dir = TestDir::new("cli_empty");
    plugins(&dir, &[("arith", "libarith.so.1")]);
    let run = dylease(dir.path(), &["check", "plugins"]);
    assert_eq!(run.status, 0, "a host loads an empty directory without error: {run:?}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(
        lines[..3],
        [
            "ok    plugins (directory of 0 plugin files) as a whole: loads 0 plugins, 0 passes",
            "        note: no plugin library here: a host given it loads nothing (only regular files named \
             `*.so` directly in a directory are loaded)",
            "        not loaded: `plugins/libarith.so.1` (the name does not end in `.so`)",
        ],
        "{run:?}"
    );
}

#[test]
fn a_plugin_file_open_for_writing_is_loaded_with_a_warning_to_install_by_rename_a_fresh_closed_one_is_not() {
    let dir = TestDir::new("cli_fresh");
    // Written just now, and closed: a build that writes a plugin then checks it.
    let fresh = dir.add("arith", "libarith.so");
    let run = dylease(dir.path(), &["check", "libarith.so"]);
    assert_eq!(run.status, 0, "{run:?}");
    assert!(
        !run.stdout.contains("warning"),
        "a fresh, closed file is no warning: {run:?}"
    );

    // Open for writing (by this test's process), as a copy in progress is.
    let writer = fs::File::options().append(true).open(&fresh).unwrap();
    let run = dylease(dir.path(), &["check", "libarith.so"]);
    assert_eq!(run.status, 0, "a warning does not fail the check: {run:?}");
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines[0], "ok    libarith.so", "{run:?}");
    let by = format!(
        "        warning: `libarith.so` is open for writing by process {} (",
        std::process::id()
    );
    assert!(
        lines[1].starts_with(&by) && lines[1].contains("SIGBUS") && lines[1].contains("install plugins by rename"),
        "{run:?}"
    );
    let run = dylease(dir.path(), &["check", "--json", "libarith.so"]);
    let report = json(&run);
    let warnings = report["checks"][0]["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{report:#}");
    assert!(warnings[0].as_str().unwrap().contains("`mv`"), "{report:#}");

    // Closed again: no warning.
    drop(writer);
    let report = json(&dylease(dir.path(), &["check", "--json", "libarith.so"]));
    assert_eq!(report["checks"][0]["warnings"], serde_json::json!([]), "{report:#}");
}

#[test]
fn trust_permissive_checks_a_group_writable_directory_the_deployment_trusts() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TestDir::new("cli_trust");
    let plugins = dir.sub("plugins");
    fs::copy(fixture("arith"), plugins.join("libarith.so")).unwrap();
    settle(&plugins.join("libarith.so"));
    fs::set_permissions(&plugins, fs::Permissions::from_mode(0o775)).unwrap();
    let strict = dylease(dir.path(), &["check", "--json", "plugins/libarith.so"]);
    assert_eq!(strict.status, 1, "{strict:?}");
    assert_eq!(
        json(&strict)["checks"][0]["problem"]["cause"],
        "untrusted",
        "{strict:?}"
    );
    assert!(
        json(&strict)["checks"][0]["problem"]["fix"]
            .as_str()
            .unwrap()
            .contains("`--trust permissive`"),
        "{strict:?}"
    );
    let permissive = dylease(dir.path(), &["check", "--trust", "permissive", "plugins"]);
    assert_eq!(permissive.status, 0, "{permissive:?}");
    assert!(
        permissive.stdout.starts_with("ok    plugins/libarith.so\n"),
        "{permissive:?}"
    );
    let wrong = dylease(dir.path(), &["check", "--trust", "lax", "plugins"]);
    assert_eq!(wrong.status, 2, "a usage error: {wrong:?}");
}

#[test]
fn policy_skip_failed_loads_a_directory_without_its_broken_plugin_and_names_it() {
    let dir = TestDir::new("cli_skip_failed");
    plugins(&dir, &[("arith", "libarith.so"), ("noentry", "libnoentry.so")]);
    let strict = json(&dylease(dir.path(), &["check", "--json", "plugins"]));
    let whole = |report: &Value| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["kind"] == "directory")
            .unwrap()
            .clone()
    };
    assert_eq!(whole(&strict)["ok"], false, "{strict:#}");
    let run = dylease(dir.path(), &["check", "--json", "--policy", "skip-failed", "plugins"]);
    // The broken file still fails its own check: it does not load.
    assert_eq!(run.status, 1, "{run:?}");
    let report = json(&run);
    let directory = whole(&report);
    assert_eq!(directory["ok"], true, "{report:#}");
    assert_eq!(directory["plugins"].as_array().unwrap().len(), 1, "{report:#}");
    let warnings = directory["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{report:#}");
    let warning = warnings[0].as_str().unwrap();
    assert!(
        warning.starts_with("left out: ") && warning.contains("libnoentry.so") && warning.contains("dylease_plugin_v1"),
        "{report:#}"
    );
    let noentry = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["path"] == "plugins/libnoentry.so")
        .unwrap();
    assert_eq!(noentry["problem"]["cause"], "missing-entry", "{report:#}");
}

#[test]
fn a_file_the_elf_check_refuses_gets_the_elf_checks_fix_not_the_loaders() {
    let dir = TestDir::new("cli_headers");
    let text = dir.path().join("libtext.so");
    fs::write(&text, "this is a text file, not a library\n").unwrap();
    settle(&text);
    // A real library cut short, as an interrupted copy leaves it.
    let truncated = add(&dir, "arith", "libtruncated.so");
    let bytes = fs::read(&truncated).unwrap();
    fs::write(&truncated, &bytes[..bytes.len() / 4]).unwrap();
    settle(&truncated);

    for file in ["libtext.so", "libtruncated.so"] {
        let report = json(&dylease(dir.path(), &["check", "--json", file]));
        let problem = &report["checks"][0]["problem"];
        assert_eq!(problem["cause"], "headers", "{report:#}");
        assert_eq!(problem["file"], file, "{report:#}");
        let fix = problem["fix"].as_str().unwrap();
        assert!(fix.contains("ELF headers"), "{report:#}");
        assert!(
            !fix.contains("ldd") && !fix.contains("platform loader refused"),
            "{report:#}"
        );
    }
    let run = dylease(dir.path(), &["check", "libtext.so"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(
        run.stdout.contains("fix: dylease read the file's ELF headers"),
        "{run:?}"
    );
}

#[test]
fn an_io_error_is_reported_with_the_operating_systems_cause() {
    let dir = TestDir::new("cli_io");
    std::os::unix::fs::symlink("libgone.so", dir.path().join("libdangling.so")).unwrap();
    let report = json(&dylease(dir.path(), &["check", "--json", "libdangling.so"]));
    let problem = &report["checks"][0]["problem"];
    assert_eq!(problem["cause"], "io", "{report:#}");
    // `Error::Io` keeps the cause in `source()`; the checker prints the chain.
    assert_eq!(
        problem["message"], "cannot read plugin file `libdangling.so`: No such file or directory (os error 2)",
        "{report:#}"
    );
}

#[test]
fn a_reader_that_stops_early_ends_the_checks_quietly_with_status_141() {
    let dir = TestDir::new("cli_pipe");
    let plugins = dir.sub("plugins");
    // Far more report than a pipe holds (64 KiB on Linux): one "not loaded" line per file.
    for i in 0..4000 {
        fs::write(plugins.join(format!("{i:04}-{}.txt", "n".repeat(200))), "").unwrap();
    }
    let mut child = Command::new(binary())
        .args(["check", "plugins"])
        .current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // The reader is dropped here, as `head -1` exits after its line.
    assert!(
        first.starts_with("ok    plugins (directory of 0 plugin files)"),
        "{first:?}"
    );
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr, "", "nothing about the closed pipe on stderr");
    assert_eq!(output.status.code(), Some(141), "{:?}", output.status);
}

#[test]
fn header_prints_the_c_header_plugins_are_built_with() {
    let dir = TestDir::new("cli_header");
    let run = dylease(dir.path(), &["header"]);
    assert_eq!(run.status, 0, "{run:?}");
    let header = fs::read_to_string(crate::support::crate_root().join("include/dylease.h")).unwrap();
    assert_eq!(run.printed, header, "the header is printed as it is, never wrapped");
    assert!(run.stdout.contains("DYLEASE_ABI_VERSION"), "{run:?}");
}

#[test]
fn a_plugin_that_stays_mapped_after_unload_is_loaded_twice_and_told_to_move_its_state_to_on_load() {
    let dir = TestDir::new("cli_pinned");
    add(&dir, "ctor_nodelete", "libpinned.so");
    add(&dir, "ctor", "libplain.so");
    let warnings = |file: &str| {
        let run = dylease(dir.path(), &["check", "--json", file]);
        assert_eq!(run.status, 0, "a warning does not fail the check: {run:?}");
        json(&run)["checks"][0]["warnings"].as_array().unwrap().clone()
    };
    let pinned = warnings("libpinned.so");
    assert_eq!(pinned.len(), 1, "{pinned:?}");
    let warning = pinned[0].as_str().unwrap();
    assert!(
        warning.contains("stays mapped after its unload") && warning.contains("move it to `on_load`"),
        "{warning}"
    );
    assert_eq!(
        warnings("libplain.so"),
        Vec::<Value>::new(),
        "a plugin that really unloads gets no warning"
    );

    assert!(
        warning.contains("it is linked with `-z nodelete`"),
        "the real cause: {warning}"
    );

    let text = dylease(dir.path(), &["check", "libpinned.so"]);
    assert!(text.stdout.contains("move it to `on_load`"), "{text:?}");
}

#[test]
fn a_cpp_plugin_pinned_by_gnu_unique_symbols_is_told_to_use_the_version_script() {
    let dir = TestDir::new("cli_cpp_pinned");
    add(&dir, "layout_plain", "liblayout_plain.so");
    add(&dir, "layout_recipe", "liblayout_recipe.so");
    let warnings = |file: &str| {
        let run = dylease(dir.path(), &["check", "--json", file]);
        assert_eq!(run.status, 0, "a warning does not fail the check: {run:?}");
        json(&run)["checks"][0]["warnings"].as_array().unwrap().clone()
    };
    let pinned = warnings("liblayout_plain.so");
    assert_eq!(pinned.len(), 1, "{pinned:?}");
    let warning = pinned[0].as_str().unwrap();
    assert!(
        warning.contains("it exports 2 GNU unique symbols, e.g. `_ZZN6layout8Registry3getEvE8instance`")
            && warning.contains("fix: link the plugin with dylease's version script")
            && warning.contains("dylease header --version-script"),
        "{warning}"
    );
    assert_eq!(
        warnings("liblayout_recipe.so"),
        Vec::<Value>::new(),
        "built with the recipe: no warning"
    );
}

#[test]
fn header_version_script_prints_the_linker_script_that_keeps_only_the_entry_point() {
    let dir = TestDir::new("cli_version_script");
    let run = dylease(dir.path(), &["header", "--version-script"]);
    assert_eq!(run.status, 0, "{run:?}");
    let script = fs::read_to_string(crate::support::crate_root().join("include/dylease.map")).unwrap();
    assert_eq!(run.stdout, script);
    assert!(run.stdout.contains("global: dylease_plugin_v1;") && run.stdout.contains("local: *;"));
}

#[test]
fn typed_passes_are_listed_with_their_interfaces() {
    let dir = TestDir::new("cli_typed");
    add(&dir, "typed_ab", "libtyped.so");
    let run = dylease(dir.path(), &["check", "--json", "libtyped.so"]);
    assert_eq!(run.status, 0, "{run:?}");
    let report = json(&run);
    let passes = report["checks"][0]["plugins"][0]["passes"].as_array().unwrap();
    assert!(
        passes.iter().any(|p| p["interface"].is_string()),
        "no typed pass listed: {report:#}"
    );
    assert!(
        passes.iter().any(|p| p["interface"].is_null()),
        "no untyped pass listed: {report:#}"
    );
    let typed = passes.iter().find(|p| p["interface"].is_string()).unwrap();
    let text = dylease(dir.path(), &["check", "libtyped.so"]);
    let listed = format!(
        "{} ({})",
        typed["name"].as_str().unwrap(),
        typed["interface"].as_str().unwrap()
    );
    assert!(text.stdout.contains(&listed), "{listed} not in {text:?}");
}

#[test]
fn a_library_that_links_against_a_plugin_is_reported_as_missing_its_entry_point() {
    let dir = TestDir::new("cli_dt_needed");
    plugins(&dir, &[("stateful_core", "libcore.so"), ("links_core", "libext.so")]);
    let run = dylease(dir.path(), &["check", "--json", "plugins"]);
    assert_eq!(run.status, 1, "{run:?}");
    let report = json(&run);
    let checks = report["checks"].as_array().unwrap();
    let ext = checks
        .iter()
        .find(|c| c["path"] == "plugins/libext.so")
        .unwrap_or_else(|| panic!("{report:#}"));
    assert_eq!(ext["ok"], false);
    assert_eq!(ext["problem"]["cause"], "missing-entry", "{report:#}");
    assert!(
        ext["problem"]["message"].as_str().unwrap().contains("libcore.so"),
        "{report:#}"
    );
    let core = checks.iter().find(|c| c["path"] == "plugins/libcore.so").unwrap();
    assert_eq!(core["ok"], true, "the real plugin checks ok: {report:#}");
}

/// The inverse of the reports' escaping of file names: `\\` is a backslash, `\xNN` a byte.
fn unescape(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        match bytes.next() {
            Some(b'\\') => out.push(b'\\'),
            Some(b'x') => {
                let hex: Vec<u8> = bytes.by_ref().take(2).collect();
                out.push(u8::from_str_radix(std::str::from_utf8(&hex).unwrap(), 16).unwrap());
            }
            other => panic!("`{text}` has an escape that is not one: {other:?}"),
        }
    }
    out
}

#[test]
fn file_names_that_are_not_utf8_print_distinctly_and_reversibly_in_text_and_json() {
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt as _;
    let dir = TestDir::new("cli_bytes");
    let names: [&[u8]; 3] = [b"lib\xffx.so", b"lib\xfex.so", b"lib\\x.so"];
    for (name, fixture) in names.iter().zip(["p1", "p2", "p3"]) {
        add(
            &dir,
            fixture,
            OsStr::from_bytes(name).to_str().unwrap_or("placeholder.so"),
        );
        if OsStr::from_bytes(name).to_str().is_none() {
            fs::rename(
                dir.path().join("placeholder.so"),
                dir.path().join(OsStr::from_bytes(name)),
            )
            .unwrap();
        }
    }
    let args: Vec<&OsStr> = names.iter().map(|n| OsStr::from_bytes(n)).collect();

    let output = Command::new(binary())
        .arg("check")
        .args(&args)
        .current_dir(dir.path())
        .output()
        .unwrap();
    let text = unwrapped(&String::from_utf8(output.stdout).unwrap());
    assert_eq!(output.status.code(), Some(0), "{text}");
    assert!(!text.contains('\u{FFFD}'), "a replacement character: {text}");
    let subjects: Vec<&str> = text
        .lines()
        .filter_map(|line| line.strip_prefix("ok    "))
        .filter(|subject| subject.starts_with("lib"))
        .collect();
    assert_eq!(subjects, ["lib\\xffx.so", "lib\\xfex.so", "lib\\\\x.so"], "{text}");
    for (subject, name) in subjects.iter().zip(names) {
        assert_eq!(unescape(subject), name);
    }

    let output = Command::new(binary())
        .args(["check", "--json"])
        .arg(dir.path())
        .output()
        .unwrap();
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(
        !report.to_string().contains('\u{FFFD}'),
        "a replacement character: {report}"
    );
    let files: Vec<&Value> = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|check| check["kind"] == "file")
        .collect();
    assert_eq!(files.len(), 3, "{report}");
    let mut seen = Vec::new();
    for check in files {
        let path = check["path"].as_str().unwrap();
        let exact: Vec<u8> = match check["path_bytes"].as_array() {
            Some(bytes) => bytes
                .iter()
                .map(|b| u8::try_from(b.as_u64().unwrap()).unwrap())
                .collect(),
            None => path.as_bytes().to_vec(),
        };
        let name = Path::new(OsStr::from_bytes(&exact))
            .file_name()
            .unwrap()
            .as_bytes()
            .to_vec();
        if check["path_bytes"].is_array() {
            assert_eq!(unescape(path), exact, "the display string reverses too: {check}");
        }
        let plugin = &check["plugins"][0];
        assert_eq!(plugin["path"], check["path"], "{check}");
        assert_eq!(plugin["path_bytes"], check["path_bytes"], "{check}");
        seen.push(name);
    }
    seen.sort();
    let mut expected: Vec<Vec<u8>> = names.iter().map(|n| n.to_vec()).collect();
    expected.sort();
    assert_eq!(seen, expected, "{report}");
}
