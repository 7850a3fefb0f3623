//! `dylease inspect`, the real binary: what a host's catalog says of each plugin (its
//! manifest, its refusal, its pin prediction), with none of the plugins' code run.

use std::path::Path;

use serde_json::Value;

use crate::cli::{add, dylease, json};
use crate::support::TestDir;

/// A directory of a plugin with a manifest and one without, both with a constructor that
/// writes `<lib>.ran`: the manifest and "no manifest" are printed, in text and JSON, and no
/// constructor runs. `check` of the same directory then writes the markers (they work).
#[test]
fn inspect_prints_manifests_and_runs_none_of_the_plugins_code() {
    let dir = TestDir::new("cli_inspect");
    let plugins = dir.sub("plugins");
    let with = add_in(&plugins, "by_hand_marker_manifest", "liba_with.so");
    let without = add_in(&plugins, "by_hand_marker", "libb_without.so");
    add_in(&plugins, "macros_c_plain", "libc_macros.so");
    let ran = |lib: &Path| lib.with_file_name(format!("{}.ran", lib.file_name().unwrap().to_str().unwrap()));

    let text = dylease(dir.path(), &["inspect", "plugins"]);
    assert_eq!(text.status, 0, "{text:?}");
    assert!(
        text.stdout.contains(
            "ok    plugins/liba_with.so\n        manifest: plugin `by-hand` 1 (ABI version 2); declares no passes \
             (incomplete manifest: it may register others)\n"
        ),
        "{text:?}"
    );
    assert!(
        text.stdout.contains(
            "ok    plugins/libb_without.so\n        no manifest: which passes it registers is known only by loading \
             it, which runs its code (`dylease check plugins/libb_without.so`)\n"
        ),
        "{text:?}"
    );
    // The passes in the order of the file's notes, which the compiler chooses.
    assert!(
        text.stdout
            .contains("manifest: plugin `macros` 1.2.3 (ABI version 2); declares 4 passes (complete manifest): ")
            && [
                " pass (untyped)",
                " pass_with_data (untyped)",
                " typed_pass (interface `test.int_op/1`)",
                " typed_pass_with_data (interface `test.int_op/1`)"
            ]
            .iter()
            .all(|pass| text.stdout.contains(pass)),
        "{text:?}"
    );
    assert!(
        text.stdout
            .contains("\n3 plugins, none refused. No plugin code was run"),
        "{text:?}"
    );

    let run = dylease(dir.path(), &["inspect", "--json", "plugins"]);
    assert_eq!(run.status, 0, "{run:?}");
    let document = json(&run);
    assert_eq!(document["ok"], true, "{document}");
    let entries = document["sources"][0]["plugins"].as_array().unwrap();
    let paths: Vec<&str> = entries.iter().map(|e| e["path"].as_str().unwrap()).collect();
    assert_eq!(
        paths,
        [
            "plugins/liba_with.so",
            "plugins/libb_without.so",
            "plugins/libc_macros.so"
        ]
    );
    assert_eq!(entries[0]["manifest"]["name"], "by-hand");
    assert_eq!(entries[0]["manifest"]["abi_version"], 2);
    assert_eq!(entries[0]["manifest"]["complete"], false);
    assert_eq!(entries[1]["manifest"], Value::Null);
    assert_eq!(entries[2]["manifest"]["complete"], true);
    let mut passes: Vec<(&str, &Value)> = entries[2]["manifest"]["passes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), &p["interface"]))
        .collect();
    passes.sort_by_key(|(name, _)| *name);
    assert_eq!(
        passes,
        [
            ("pass", &Value::Null),
            ("pass_with_data", &Value::Null),
            ("typed_pass", &Value::from("test.int_op/1")),
            ("typed_pass_with_data", &Value::from("test.int_op/1")),
        ]
    );
    for entry in entries {
        assert_eq!(
            (&entry["ok"], &entry["problem"], &entry["pinning"]["expected"]),
            (&Value::Bool(true), &Value::Null, &Value::Bool(false)),
            "{entry}"
        );
    }

    for lib in [&with, &without] {
        assert!(!ran(lib).exists(), "inspect ran the constructor of {}", lib.display());
    }
    // The markers work: loading the plugins runs both constructors (the directory as a whole
    // fails: both by-hand plugins register `seven`).
    let check = dylease(dir.path(), &["check", "plugins"]);
    assert!(ran(&with).exists() && ran(&without).exists(), "{check:?}");
}

/// The plain build of the C++ example plugin (no version script) is predicted to stay mapped,
/// with the cause and the fix; built with the recipe it is not.
#[test]
fn inspect_warns_that_a_cpp_plugin_built_without_the_version_script_stays_mapped() {
    let dir = TestDir::new("cli_inspect_cpp");
    add(&dir, "layout_plain", "liblayout_plain.so");
    add(&dir, "layout_recipe", "liblayout_recipe.so");
    let run = dylease(dir.path(), &["inspect", "liblayout_plain.so"]);
    assert_eq!(run.status, 0, "a warning refuses nothing: {run:?}");
    assert!(
        run.stdout.contains("manifest: plugin `layout` 0.4.0 (ABI version 2)")
            && run
                .stdout
                .contains("warning: it will stay mapped after its unload, so its constructors run once per process")
            && run
                .stdout
                .contains("it exports 2 GNU unique symbols, e.g. `_ZZN6layout8Registry3getEvE8instance`")
            && run
                .stdout
                .contains("fix: link the plugin with dylease's version script")
            && run.stdout.contains("dylease header --version-script"),
        "{run:?}"
    );
    let json_run = dylease(dir.path(), &["inspect", "--json", "liblayout_plain.so"]);
    let pinning = &json(&json_run)["sources"][0]["plugins"][0]["pinning"];
    assert_eq!(pinning["expected"], true, "{pinning}");
    assert_eq!(pinning["causes"][0]["cause"], "gnu-unique", "{pinning}");

    let recipe = dylease(dir.path(), &["inspect", "liblayout_recipe.so"]);
    assert_eq!(recipe.status, 0, "{recipe:?}");
    assert!(
        recipe.stdout.contains("manifest: plugin `layout`") && !recipe.stdout.contains("warning:"),
        "built with the recipe: no warning: {recipe:?}"
    );
}

/// A refusal made before any code runs (a file others can write) fails the inspection, with
/// check's fix, and exit status 1.
#[test]
fn inspect_reports_a_refusal_with_its_fix_and_exits_1() {
    let dir = TestDir::new("cli_inspect_refused");
    let open = add(&dir, "by_hand_marker_manifest", "libopen.so");
    std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o757)).unwrap();
    let run = dylease(dir.path(), &["inspect", "libopen.so"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(
        run.stdout.starts_with("FAIL  libopen.so\n")
            && run.stdout.contains("problem: ")
            && run.stdout.contains("fix: hosts refuse, before running any of its code"),
        "{run:?}"
    );
    let document = json(&dylease(dir.path(), &["inspect", "--json", "libopen.so"]));
    assert_eq!(document["ok"], false, "{document}");
    assert_eq!(
        document["sources"][0]["plugins"][0]["problem"]["cause"], "untrusted",
        "{document}"
    );
    assert!(
        run.stdout
            .contains("\n1 plugin; 1 refused (FAIL above): a host would not load it. No plugin code was run."),
        "{run:?}"
    );
    // A refused plugin without a manifest: nothing is said of the passes it would register
    // (it registers none: no host loads it), only its refusal.
    let bare = add(&dir, "by_hand_marker", "libbare.so");
    std::fs::set_permissions(&bare, std::os::unix::fs::PermissionsExt::from_mode(0o757)).unwrap();
    let run = dylease(dir.path(), &["inspect", "libopen.so", "libbare.so"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(
        run.stdout
            .contains("FAIL  libbare.so\n        signature: unsigned (`dylease sign` signs it)\n        problem: ")
            && !run.stdout.contains("no manifest")
            && run
                .stdout
                .contains("\n2 plugins; 2 refused (FAIL above): a host would not load them. No plugin code was run."),
        "{run:?}"
    );
    assert!(!dir.path().join("libopen.so.ran").exists() && !dir.path().join("libbare.so.ran").exists());
}

/// A directory without plugin files is no failure: a host given it loads nothing, which
/// `inspect` says under it, and it counts no plugin.
#[test]
fn inspect_of_a_directory_without_plugins_says_a_host_given_it_loads_nothing() {
    let dir = TestDir::new("cli_inspect_empty");
    let plugins = dir.sub("plugins");
    add_in(&plugins, "arith", "libarith.so.1");
    let run = dylease(dir.path(), &["inspect", "plugins"]);
    assert_eq!(run.status, 0, "{run:?}");
    assert!(
        run.stdout.starts_with(
            "ok    plugins\n        note: no plugin here: a host given it loads nothing (only regular files named \
             `*.so` directly in a directory are loaded)\n"
        ) && run.stdout.contains("\n0 plugins, none refused. No plugin code was run"),
        "{run:?}"
    );
}

/// Each cause of a pin prediction has its word in the JSON report: `-z nodelete`, and the
/// GNU unique symbols, thread-local destructors and exports of the C++ example plugin built
/// without the recipe.
#[test]
fn inspect_json_names_each_pin_cause_by_its_word() {
    let dir = TestDir::new("cli_inspect_pin_words");
    add(&dir, "ctor_nodelete", "libnodelete.so");
    add(&dir, "layout_plain", "liblayout_plain.so");
    let run = dylease(
        dir.path(),
        &["inspect", "--json", "libnodelete.so", "liblayout_plain.so"],
    );
    let document = json(&run);
    let words = |source: usize| -> Vec<String> {
        document["sources"][source]["plugins"][0]["pinning"]["causes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|cause| cause["cause"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(words(0), ["nodelete"], "{document}");
    assert_eq!(
        words(1),
        ["gnu-unique", "thread-local-destructors", "exports"],
        "{document}"
    );
}

/// `plugins/NAME`: a settled copy of fixture `name` in `plugins` (mode 0755).
fn add_in(plugins: &Path, name: &str, file: &str) -> std::path::PathBuf {
    let to = plugins.join(file);
    std::fs::copy(crate::support::fixture(name), &to).unwrap();
    std::fs::set_permissions(&to, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    to
}

/// The helps say which command runs the plugins' code: `check` does, `inspect` does not.
#[test]
fn the_helps_say_that_check_runs_the_plugins_code_and_inspect_does_not() {
    let check = dylease(Path::new("."), &["check", "--help"]);
    assert!(
        check.stdout.contains("which runs their code") && check.stdout.contains("`dylease inspect` runs none of it"),
        "{check:?}"
    );
    let inspect = dylease(Path::new("."), &["inspect", "--help"]);
    assert_eq!(inspect.status, 0, "{inspect:?}");
    assert!(
        inspect.stdout.contains("without running any of their") && inspect.stdout.contains("No plugin code runs"),
        "{inspect:?}"
    );
}

/// Two plugins of a directory that declare the same passes get a warning naming both and
/// the passes (a host given the directory would fail to load, or leave one out); it refuses
/// nothing.
#[test]
fn inspect_warns_about_passes_two_plugins_of_a_directory_declare() {
    let dir = TestDir::new("cli_inspect_clash");
    let plugins = dir.sub("plugins");
    add_in(&plugins, "macros_c_plain", "liba.so");
    add_in(&plugins, "macros_c_plain", "libb.so");
    add_in(&plugins, "by_hand_marker", "libc.so");
    let run = dylease(dir.path(), &["inspect", "plugins"]);
    assert_eq!(run.status, 0, "a warning refuses nothing: {run:?}");
    assert!(
        run.stdout
            .contains("warning: `plugins/liba.so` and `plugins/libb.so` both declare passes `")
            && run.stdout.contains("`typed_pass_with_data`")
            && run
                .stdout
                .contains("so a host given `plugins` would fail to load (with LoadPolicy::Strict")
            && run
                .stdout
                .contains("with LoadPolicy::SkipFailed, keep the plugin loaded first's")
            && !run.stdout.contains("load neither"),
        "{run:?}"
    );
    let document = json(&dylease(dir.path(), &["inspect", "--json", "plugins"]));
    let warnings = document["sources"][0]["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{document}");
    assert_eq!(document["ok"], true, "{document}");
}

/// The fix and `cause` of the refusal of `file` (in `dir`) by `inspect`, text and JSON.
fn refusal(dir: &Path, file: &str) -> (String, Value) {
    let run = dylease(dir, &["inspect", file]);
    assert_eq!(run.status, 1, "{run:?}");
    let fix = run
        .stdout
        .lines()
        .find_map(|line| line.trim_start().strip_prefix("fix: "))
        .unwrap_or_else(|| panic!("no fix: {run:?}"))
        .to_owned();
    let document = json(&dylease(dir, &["inspect", "--json", file]));
    (fix, document["sources"][0]["plugins"][0]["problem"].clone())
}

/// A pass declared twice in a manifest (a DYLEASE_PASS expanded in two translation units
/// writes two records) gets the advice for a manifest, not the platform loader's, and says to
/// expand each DYLEASE_PASS in one translation unit: from `inspect` and from `check`.
#[test]
fn a_pass_declared_twice_is_advised_to_be_expanded_in_one_translation_unit() {
    let dir = TestDir::new("cli_inspect_declared_twice");
    add(&dir, "duplicate", "libdup.so");
    let (fix, problem) = refusal(dir.path(), "libdup.so");
    assert!(
        fix.contains("expand each DYLEASE_PASS in exactly one translation unit")
            && !fix.contains("platform loader")
            && !fix.contains("ldd"),
        "{fix}"
    );
    assert_eq!(problem["cause"], "manifest", "{problem}");
    assert!(
        problem["message"]
            .as_str()
            .unwrap()
            .contains("declares the pass `same` twice"),
        "{problem}"
    );
    let check = json(&dylease(dir.path(), &["check", "--json", "libdup.so"]));
    assert_eq!(check["checks"][0]["problem"]["cause"], "manifest", "{check}");
    assert!(
        check["checks"][0]["problem"]["fix"]
            .as_str()
            .unwrap()
            .contains("exactly one translation unit"),
        "{check}"
    );
}

/// A manifest of a format version this dylease does not read: cause `manifest`, and the fix
/// says to update dylease or rebuild the plugin, not to ask the loader.
#[test]
fn a_manifest_of_an_unknown_format_is_advised_to_update_dylease_or_rebuild() {
    let dir = TestDir::new("cli_inspect_manifest_format");
    let lib = add(&dir, "by_hand_marker_manifest", "libformat.so");
    let mut bytes = std::fs::read(&lib).unwrap();
    // The plugin record's format version, as the root crate's manifest tests find it.
    let record: Vec<u8> = [&b"dylease\0"[..], &1u32.to_ne_bytes()].concat();
    let at = bytes
        .windows(record.len())
        .position(|w| w == record)
        .expect("a plugin record");
    bytes[at + 8..at + 12].copy_from_slice(&7u32.to_ne_bytes());
    std::fs::write(&lib, &bytes).unwrap();
    let (fix, problem) = refusal(dir.path(), "libformat.so");
    assert!(
        fix.contains("manifest format version this dylease does not read")
            && fix.contains("rebuild the plugin")
            && !fix.contains("platform loader"),
        "{fix}"
    );
    assert_eq!(problem["cause"], "manifest", "{problem}");
    assert!(!dir.path().join("libformat.so.ran").exists());
}

/// A plugin whose registration differs from its complete manifest: cause
/// `manifest-mismatch`, with a fix about the declared passes, not "other".
#[test]
fn check_advises_on_a_plugin_registering_other_passes_than_its_manifest_declares() {
    let dir = TestDir::new("cli_check_manifest_mismatch");
    add(&dir, "by_hand_ghost_manifest", "libghost.so");
    let run = dylease(dir.path(), &["check", "--json", "libghost.so"]);
    assert_eq!(run.status, 1, "{run:?}");
    let problem = &json(&run)["checks"][0]["problem"];
    assert_eq!(problem["cause"], "manifest-mismatch", "{problem}");
    let fix = problem["fix"].as_str().unwrap();
    assert!(
        fix.contains("DYLEASE_MANIFEST") && fix.contains("export_plugin!"),
        "{fix}"
    );
}

/// The documented lists of `cause` name `manifest` (and `check`'s `manifest-mismatch`), and
/// `untrusted`.
#[test]
fn the_helps_list_every_cause() {
    for command in ["check", "inspect"] {
        let help = dylease(Path::new("."), &[command, "--help"]).stdout;
        let causes = &help[help.rfind("\"cause\" is one of").unwrap_or(0)..];
        for cause in ["manifest", "untrusted", "headers", "open", "abi-mismatch"] {
            assert!(causes.contains(cause), "{command}: {cause}: {causes}");
        }
        if command == "check" {
            assert!(causes.contains("manifest-mismatch"), "{causes}");
        }
    }
}

/// A plugin with an incomplete manifest (DYLEASE_MANIFEST) may register passes it does not
/// declare: `inspect` says that only loading it tells which, and that those are not compared.
#[test]
fn inspect_says_what_an_incomplete_manifest_leaves_uncompared() {
    let dir = TestDir::new("cli_inspect_incomplete");
    let plugins = dir.sub("plugins");
    add_in(&plugins, "by_hand_manifest", "liba.so");
    add_in(&plugins, "by_hand", "libb.so");
    let run = dylease(dir.path(), &["inspect", "plugins"]);
    assert_eq!(run.status, 0, "{run:?}");
    assert!(
        run.stdout.contains(
            "(incomplete manifest: it may register others)\n        which other passes it registers is known only by \
             loading it, which runs its code (`dylease check plugins/liba.so`): only those it declares are \
             compared with other plugins'\n"
        ),
        "{run:?}"
    );
}

/// An argument that cannot be read (a missing path) is a problem of the argument, not a
/// refused plugin: no plugin is counted, and the JSON gives it as the source's `problem`.
#[test]
fn inspect_reports_an_argument_that_cannot_be_read_as_the_arguments_problem() {
    let dir = TestDir::new("cli_inspect_missing");
    let run = dylease(dir.path(), &["inspect", "missing.so"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(
        run.stdout.starts_with("FAIL  missing.so\n")
            && run.stdout.contains("problem: cannot read plugin file `missing.so`")
            && run
                .stdout
                .contains("\n0 plugins, none refused. 1 argument cannot be read (FAIL above).")
            && !run.stdout.contains("1 plugin;"),
        "{run:?}"
    );
    let document = json(&dylease(dir.path(), &["inspect", "--json", "missing.so"]));
    let source = &document["sources"][0];
    assert_eq!(source["problem"]["cause"], "io", "{document}");
    assert_eq!(source["plugins"], Value::Array(Vec::new()), "{document}");
    assert_eq!(document["ok"], false, "{document}");
}

/// A plugin whose complete manifest declares a pass (`ghost`) it never registers: `inspect`,
/// which runs none of its code, says what the manifest claims (that it is complete) and
/// claims nothing about what the plugin registers; `check`, which loads it, finds the
/// mismatch.
#[test]
fn inspect_says_what_a_complete_manifest_claims_and_leaves_the_verdict_to_check() {
    let dir = TestDir::new("cli_inspect_ghost");
    add(&dir, "by_hand_ghost_manifest", "libghost.so");
    let run = dylease(dir.path(), &["inspect", "libghost.so"]);
    assert_eq!(run.status, 0, "{run:?}");
    assert!(
        run.stdout.contains(
            "manifest: plugin `by-hand` 1 (ABI version 2); declares 3 passes (complete manifest): ghost (untyped), "
        ) && !run.stdout.contains("all it registers"),
        "{run:?}"
    );
    let check = dylease(dir.path(), &["check", "libghost.so"]);
    assert_eq!(check.status, 1, "{check:?}");
    assert!(
        check.stdout.contains("did not register the declared pass `ghost`"),
        "{check:?}"
    );
}

/// A Python plugin given to `inspect` without `--python` is not judged as a library (which
/// it is not: "not an ELF shared library", with a C or Rust build fix): `inspect` says that
/// `--python` reads Python plugins, as `check` does, and reads nothing else of it.
#[test]
fn inspect_of_a_python_plugin_without_python_says_that_python_reads_it() {
    let dir = TestDir::new("cli_inspect_py_without_python");
    std::fs::write(
        dir.path().join("counter.py"),
        "import dylease\ndylease.plugin(\"c\", \"1.0\")\n",
    )
    .unwrap();
    let run = dylease(dir.path(), &["inspect", "counter.py"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(
        run.stdout.contains("`counter.py` is a Python plugin")
            && run.stdout.contains("`dylease inspect --python counter.py`")
            && !run.stdout.contains("ELF")
            && !run.stdout.contains("cdylib")
            && run.stdout.contains(
                "\n0 plugins, none refused. 1 Python plugin not read without `--python`. No plugin code was run"
            ),
        "{run:?}"
    );
    let document = json(&dylease(dir.path(), &["inspect", "--json", "counter.py"]));
    let source = &document["sources"][0];
    assert_eq!(source["problem"]["cause"], "python", "{document}");
    assert_eq!(source["plugins"], Value::Array(Vec::new()), "{document}");
}
