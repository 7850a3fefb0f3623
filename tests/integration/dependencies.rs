//! What a plugin pulls in is part of the trust check: the directories of its run path and the
//! libraries it needs. A run path naming a directory another user can create (a stale
//! build-tree entry under a sticky, world-writable directory) is refused under `Strict`
//! before and after that user plants a library there, and the planted code never runs.

use std::fs::{self, Permissions};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use dylease::{Error, PluginHost, TrustPolicy};

use crate::support::{TestDir, assert_unloaded, compile_plugin, mapped};

/// Compiles `tests/plugins/<source>` into `out` with `args`.
fn compile(source: &str, out: &Path, args: &[&str]) -> PathBuf {
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plugins").join(source);
    let path = compile_plugin(&[&source], out, args).unwrap_or_else(|e| panic!("{e}"));
    fs::set_permissions(&path, Permissions::from_mode(0o755)).unwrap();
    // Out of the checker's "may still be being written" window.
    let file = fs::File::options().write(true).open(&path).unwrap();
    file.set_modified(SystemTime::now() - Duration::from_secs(60)).unwrap();
    path
}

/// `libdep.so` in `dir`, returning `value` from `dep_value()`; with `marker`, its constructor
/// leaves `libdep.so.ran` next to it.
fn dependency(dir: &Path, value: i32, marker: bool) -> PathBuf {
    let mut args = vec![
        format!("-DDEP_VALUE={value}"),
        "-Wl,-soname,libdep.so".to_owned(),
        "-Wl,--no-as-needed".to_owned(),
        "-ldl".to_owned(),
    ];
    if marker {
        args.push("-DMARK_CONSTRUCTOR".into());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    compile("dep.c", &dir.join("libdep.so"), &args)
}

/// The `uses_dep` plugin in `dir`, linked against the `libdep.so` in `link_dir` and with
/// `run_path` as its DT_RUNPATH.
fn plugin(dir: &Path, link_dir: &Path, run_path: &str) -> PathBuf {
    compile(
        "uses_dep.c",
        &dir.join("libuses_dep.so"),
        &[
            "-Wl,--no-as-needed",
            "-L",
            &link_dir.display().to_string(),
            "-ldep",
            &format!("-Wl,-rpath,{run_path}"),
            "-Wl,--enable-new-dtags",
        ],
    )
}

fn marker(lib: &Path) -> PathBuf {
    let mut marker = lib.as_os_str().to_owned();
    marker.push(".ran");
    marker.into()
}

fn strict(plugin: &Path) -> PluginHost {
    // SAFETY: the libraries are this suite's own fixtures, whose initialisation code is sound.
    unsafe { PluginHost::builder().file(plugin).build() }.unwrap()
}

fn permissive(plugin: &Path) -> PluginHost {
    // SAFETY: the libraries are this suite's own fixtures, whose initialisation code is sound.
    unsafe {
        PluginHost::builder()
            .file(plugin)
            .trust(TrustPolicy::Permissive)
            .build()
    }
    .unwrap()
}

/// What the plugin's pass returns: which `libdep.so` the loader found.
fn dep_value(host: &PluginHost) -> i32 {
    let lease = host.acquire().unwrap();
    // SAFETY: `uses_dep.c` registers `dep_value` as `int (*)(void)`; called while `lease` lives.
    let pass = unsafe { lease.pass::<unsafe extern "C" fn() -> i32>("dep_value") }.unwrap();
    // SAFETY: the pass takes no arguments and only calls `dep_value()` of its dependency.
    unsafe { pass() }
}

/// A test layout: `open/` (mode 1777, like `/tmp`), `trusted/libdep.so` (the genuine
/// dependency, returning 1), and `plugin/libuses_dep.so` whose run path lists the
/// missing `open/build/lib` first, then `trusted/`.
struct StaleRunPath {
    dir: TestDir,
    open: PathBuf,
    plugin: PathBuf,
}

fn stale_run_path(test: &str) -> StaleRunPath {
    let dir = TestDir::new(test);
    let open = dir.sub("open");
    fs::set_permissions(&open, Permissions::from_mode(0o1777)).unwrap();
    let trusted = dir.sub("trusted");
    dependency(&trusted, 1, false);
    let run_path = format!("{}:{}", open.join("build/lib").display(), trusted.display());
    let plugin = plugin(&dir.sub("plugin"), &trusted, &run_path);
    StaleRunPath { dir, open, plugin }
}

/// Asserts `error` refuses `plugin` for its run path entry naming `dir`.
#[track_caller]
fn assert_refused_for(error: &Error, plugin: &Path, dir: &Path, cause: &str) {
    let message = error.to_string();
    assert!(
        matches!(error, Error::Untrusted { path, .. } if path == plugin),
        "{error:?}"
    );
    assert!(message.contains("run path (DT_RUNPATH) entry"), "{message}");
    assert!(message.contains(&format!("`{}", dir.display())), "{message}");
    assert!(message.contains(cause), "{message}");
    assert!(
        message.contains("$ORIGIN"),
        "the fix is a run path relative to $ORIGIN: {message}"
    );
}

#[test]
fn a_run_path_naming_a_missing_directory_others_can_create_is_refused_and_permissive_loads_the_trusted_one() {
    let layout = stale_run_path("deps_stale_missing");
    let missing = layout.open.join("build/lib");
    let error = strict(&layout.plugin).acquire().unwrap_err();
    assert_refused_for(
        &error,
        &layout.plugin,
        &missing,
        &format!(
            "it does not exist, and other users can create it: `{}` is writable by group and others (mode 1777, sticky)",
            layout.open.display()
        ),
    );
    assert_unloaded(&layout.plugin);

    // The loader skips the missing entry and takes the genuine dependency.
    let host = permissive(&layout.plugin);
    assert_eq!(dep_value(&host), 1);
    drop(host);
    assert_unloaded(&layout.plugin);
    drop(layout.dir);
}

#[test]
#[ignore = "needs root"]
fn a_dependency_planted_by_another_user_in_a_stale_run_path_never_runs_under_strict() {
    let layout = stale_run_path("deps_stale_planted");
    let error = strict(&layout.plugin).acquire().unwrap_err();
    assert!(matches!(error, Error::Untrusted { .. }), "{error:?}");

    // Another user (uid 65534) creates the missing directories and plants a library whose
    // constructor leaves a marker.
    let build = layout.open.join("build");
    let lib = build.join("lib");
    fs::create_dir_all(&lib).unwrap();
    let planted = dependency(&lib, 666, true);
    for path in [&build, &lib, &planted] {
        std::os::unix::fs::chown(path, Some(65534), Some(65534)).unwrap();
    }

    let error = strict(&layout.plugin).acquire().unwrap_err();
    assert_refused_for(
        &error,
        &layout.plugin,
        &build,
        "is owned by uid 65534, which is neither this process's effective user",
    );
    assert!(!marker(&planted).exists(), "the planted constructor ran: {error}");
    assert!(!mapped(&planted), "the planted library is mapped");
    assert_unloaded(&layout.plugin);

    // What Strict refused is real: a permissive host runs the planted code.
    let host = permissive(&layout.plugin);
    assert_eq!(dep_value(&host), 666);
    assert!(marker(&planted).exists(), "the marker must show planted code that ran");
    drop(host);
    assert_unloaded(&layout.plugin);
}

#[test]
fn an_origin_relative_run_path_inside_a_trusted_directory_loads() {
    let dir = TestDir::new("deps_origin");
    let plugins = dir.sub("plugins");
    let libs = dir.sub("plugins/lib");
    dependency(&libs, 7, false);
    let plugin = plugin(&plugins, &libs, "$ORIGIN/lib:$ORIGIN/missing");
    let host = strict(&plugin);
    assert_eq!(dep_value(&host), 7);
    drop(host);
    assert_unloaded(&plugin);
}

#[test]
fn a_needed_library_named_by_path_in_a_writable_directory_is_refused() {
    let dir = TestDir::new("deps_needed_path");
    let writable = dir.sub("writable");
    // Without a soname, the linker records the path it was given as DT_NEEDED.
    let dependency = compile("dep.c", &writable.join("libdep.so"), &["-DDEP_VALUE=3"]);
    fs::set_permissions(&writable, Permissions::from_mode(0o777)).unwrap();
    let plugin = compile(
        "uses_dep.c",
        &dir.sub("plugin").join("libuses_dep.so"),
        &["-Wl,--no-as-needed", &dependency.display().to_string()],
    );
    let error = strict(&plugin).acquire().unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(&error, Error::Untrusted { path, .. } if path == &plugin),
        "{error:?}"
    );
    assert!(
        message.contains(&format!(
            "the needed library `{}` of `{}` lets the loader run code another user can choose: `{}` is writable \
             by group and others (mode 0777)",
            dependency.display(),
            plugin.display(),
            writable.display()
        )),
        "{message}"
    );
    assert!(!mapped(&dependency));
    assert_eq!(dep_value(&permissive(&plugin)), 3);
    assert_unloaded(&plugin);
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
