//! Python passes (`--features python`): real CPython, real files. Each plugin logs what runs
//! (`load`, `unload`, …) to a file of its test's own directory, which the test reads.

use std::fs::{self, Permissions};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use dylease::pyo3::prelude::*;
use dylease::{Error, LookupFailure, PluginHost, PyInterface, Registrar};

use crate::support::{TestDir, await_that};

/// The interface of the test passes: an integer in, an integer out.
struct IntOp;
impl PyInterface for IntOp {
    const ID: &'static str = "test.int_op/1";
    type Args = (i64,);
    type Output = i64;
}

/// Another interface, for mismatches.
struct TextOp;
impl PyInterface for TextOp {
    const ID: &'static str = "test.text_op/1";
    type Args = (String,);
    type Output = String;
}

/// Writes `source` to `dir/name` (mode 0644), with `LOG` replaced by the log file's path.
fn write(dir: &Path, name: &str, source: &str) -> PathBuf {
    let path = dir.join(name);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).unwrap();
        fs::set_permissions(parent, Permissions::from_mode(0o755)).unwrap();
    }
    let log = dir.join("log.txt");
    fs::write(
        &path,
        source.replace("LOG", &format!("{:?}", log.display().to_string())),
    )
    .unwrap();
    fs::set_permissions(&path, Permissions::from_mode(0o644)).unwrap();
    path
}

/// The lines the plugins of `dir` logged so far.
fn log(dir: &Path) -> Vec<String> {
    fs::read_to_string(dir.join("log.txt"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The entries of `sys.modules` executed from a file under `dir`.
fn modules_from(dir: &Path) -> Vec<String> {
    let dir = dir.display().to_string();
    Python::attach(|py| {
        let modules = py.import("sys").unwrap().getattr("modules").unwrap();
        let items: Vec<(String, Py<PyAny>)> = modules
            .call_method0("copy")
            .unwrap()
            .call_method0("items")
            .unwrap()
            .try_iter()
            .unwrap()
            .map(|item| item.unwrap().extract().unwrap())
            .collect();
        items
            .into_iter()
            .filter(|(_, module)| {
                module
                    .bind(py)
                    .getattr("__file__")
                    .ok()
                    .and_then(|file| file.extract::<String>().ok())
                    .is_some_and(|file| file.starts_with(&dir))
            })
            .map(|(name, _)| name)
            .collect()
    })
}

/// A plugin that logs its lifecycle and offers `add_<tag>` (x + `add`) under [`IntOp`].
fn counter(tag: &str, add: i64) -> String {
    format!(
        r#"
import dylease
dylease.plugin("{tag}", "1.0")

def log(line):
    with open(LOG, "a") as f:
        f.write(line + "\n")

log("exec {tag}")

def on_load():
    log("load {tag}")

def on_unload():
    log("unload {tag}")

@dylease.typed_pass("add_{tag}", "test.int_op/1")
def add(x):
    return x + {add}
"#
    )
}

fn host_of_file(file: &Path) -> PluginHost {
    // SAFETY: the test's own plugin.
    unsafe { PluginHost::builder().python_file(file) }.build().unwrap()
}

#[test]
fn last_lease_drop_unloads_and_the_next_load_executes_again() {
    let dir = TestDir::new("py-cycle");
    let file = write(dir.path(), "counter.py", &counter("c", 1));
    let host = host_of_file(&file);
    let lease = host.acquire().unwrap();
    assert_eq!(lease.get_py::<IntOp>("add_c").unwrap().call((41,)).unwrap(), 42);
    let plugin = &lease.plugins()[0];
    assert_eq!(
        (plugin.name(), plugin.version(), plugin.origin().path()),
        ("c", "1.0", Some(file.as_path()))
    );
    assert_eq!(lease.passes()[0].interface(), Some(IntOp::ID));
    assert_eq!(modules_from(dir.path()).len(), 1);
    drop(lease);
    assert_eq!(log(dir.path()), ["exec c", "load c", "unload c"]);
    assert!(modules_from(dir.path()).is_empty(), "the private module is removed");
    let lease = host.acquire().unwrap();
    assert_eq!(lease.get_py::<IntOp>("add_c").unwrap().call((1,)).unwrap(), 2);
    drop(lease);
    assert_eq!(
        log(dir.path()),
        ["exec c", "load c", "unload c", "exec c", "load c", "unload c"]
    );
}

#[test]
fn a_python_plugin_is_refused_in_an_isolated_set_saying_why() {
    let dir = TestDir::new("py-isolated");
    let file = write(dir.path(), "counter.py", &counter("i", 1));
    // SAFETY: the test's own plugin.
    let host = unsafe { PluginHost::builder().python_file(&file) }
        .isolated()
        .build()
        .unwrap();
    let error = host.acquire().unwrap_err();
    assert!(
        matches!(&error, Error::Open { path, cause: dylease::OpenCause::Isolation, .. } if *path == file),
        "{error:?}"
    );
    let message = error.to_string();
    for needed in ["isolated", "interpreter of its own", "not isolated"] {
        assert!(message.contains(needed), "{needed:?} missing from: {message}");
    }
    // None of its code ran.
    assert!(log(dir.path()).is_empty());
}

#[test]
fn two_hosts_share_one_instance() {
    let dir = TestDir::new("py-share");
    let file = write(dir.path(), "shared.py", &counter("s", 2));
    let (first, second) = (host_of_file(&file), host_of_file(&file));
    let a = first.acquire().unwrap();
    let b = second.acquire().unwrap();
    assert_eq!(b.get_py::<IntOp>("add_s").unwrap().call((1,)).unwrap(), 3);
    drop(a);
    assert_eq!(log(dir.path()), ["exec s", "load s"], "one execution, one on_load");
    drop(b);
    assert_eq!(
        log(dir.path()),
        ["exec s", "load s", "unload s"],
        "on_unload after both"
    );
}

#[test]
fn a_failed_import_names_file_and_line_leaves_nothing_and_a_retry_works() {
    let dir = TestDir::new("py-import");
    let source = "import dylease\n\n\nraise ValueError('no config')\n";
    let file = write(dir.path(), "broken.py", source);
    let host = host_of_file(&file);
    let error = host.acquire().unwrap_err().to_string();
    assert!(error.contains(&file.display().to_string()), "{error}");
    assert!(error.contains("ValueError: no config"), "{error}");
    assert!(error.contains("line 4"), "{error}");
    assert!(modules_from(dir.path()).is_empty());
    assert!(!host.is_loaded());
    write(dir.path(), "broken.py", &counter("fixed", 0));
    let lease = host.acquire().unwrap();
    assert_eq!(lease.get_py::<IntOp>("add_fixed").unwrap().call((5,)).unwrap(), 5);
}

#[test]
fn a_syntax_error_names_file_and_line() {
    let dir = TestDir::new("py-syntax");
    let file = write(dir.path(), "syntax.py", "x = 1\ndef broken(:\n");
    let error = host_of_file(&file).acquire().unwrap_err().to_string();
    assert!(error.contains("SyntaxError") && error.contains("line 2"), "{error}");
    assert!(error.contains(&file.display().to_string()), "{error}");
}

#[test]
fn a_failed_import_names_the_plugins_own_line_not_the_hosts_import_shim() {
    let dir = TestDir::new("py-import-line");
    let file = write(
        dir.path(),
        "importer.py",
        "import dylease\n\n\nimport not_there_module\n",
    );
    let error = host_of_file(&file).acquire().unwrap_err().to_string();
    assert!(error.contains("No module named 'not_there_module'"), "{error}");
    assert!(
        error.contains(&format!("raised at {}, line 4", file.display())),
        "{error}"
    );
    assert!(!error.contains("dylease host"), "{error}");
}

#[test]
fn a_failed_relative_import_names_the_package_not_its_private_module() {
    let dir = TestDir::new("py-import-relative");
    let package = dir.sub("fusion");
    let init = write(&package, "__init__.py", "import dylease\nfrom . import not_there\n");
    let error = host_of_file(&package).acquire().unwrap_err().to_string();
    assert!(error.contains("fusion.not_there"), "{error}");
    assert!(
        error.contains(&format!("raised at {}, line 2", init.display())),
        "{error}"
    );
    assert!(!error.contains("_dylease"), "{error}");
    // A module of the package that is missing, imported by name.
    write(&package, "__init__.py", "import dylease\nfrom .gone import thing\n");
    let error = host_of_file(&package).acquire().unwrap_err().to_string();
    assert!(error.contains("No module named 'fusion.gone'"), "{error}");
    assert!(!error.contains("_dylease"), "{error}");
}

#[test]
fn report_and_false_fail_the_load_and_unload_what_loaded() {
    let dir = TestDir::new("py-report");
    let file = write(
        dir.path(),
        "refuses.py",
        r#"
def on_load():
    open(LOG, "a").write("load\n")
def on_unload():
    open(LOG, "a").write("unload\n")
def register_passes(reg):
    reg.report("no GPU")
    return False
"#,
    );
    let error = host_of_file(&file).acquire().unwrap_err();
    assert!(matches!(error, Error::RegisterFailed { .. }), "{error:?}");
    assert!(error.to_string().contains("no GPU"), "{error}");
    assert_eq!(log(dir.path()), ["load", "unload"], "the new instance is torn down");
    assert!(modules_from(dir.path()).is_empty());
}

#[test]
fn register_passes_is_called_once_per_set() {
    let dir = TestDir::new("py-register");
    let file = write(
        dir.path(),
        "explicit.py",
        r#"
import dylease
def double(x):
    return 2 * x
def register_passes(reg):
    open(LOG, "a").write("register\n")
    reg.add_typed_pass("double", "test.int_op/1", double)
"#,
    );
    let host = host_of_file(&file);
    let first = host.acquire().unwrap();
    let second = host.reload().unwrap();
    assert_eq!(second.get_py::<IntOp>("double").unwrap().call((4,)).unwrap(), 8);
    assert_eq!(log(dir.path()), ["register", "register"]);
    drop((first, second));
}

#[test]
fn an_exception_in_a_pass_names_pass_file_and_line() {
    let dir = TestDir::new("py-raise");
    let file = write(
        dir.path(),
        "raises.py",
        "import dylease\n\n@dylease.typed_pass('boom', 'test.int_op/1')\ndef boom(x):\n    raise KeyError(x)\n",
    );
    let host = host_of_file(&file);
    let lease = host.acquire().unwrap();
    let error = lease
        .get_py::<IntOp>("boom")
        .unwrap()
        .call((7,))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("`boom`") && error.contains(&file.display().to_string()),
        "{error}"
    );
    assert!(error.contains("KeyError: 7") && error.contains("line 5"), "{error}");
}

#[test]
fn a_return_value_of_the_wrong_type_is_an_error() {
    let dir = TestDir::new("py-type");
    let file = write(
        dir.path(),
        "wrong.py",
        "import dylease\n@dylease.typed_pass('text', 'test.int_op/1')\ndef text(x):\n    return 'seven'\n",
    );
    let lease = host_of_file(&file).acquire().unwrap();
    let error = lease
        .get_py::<IntOp>("text")
        .unwrap()
        .call((7,))
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("`text`") && error.contains("str") && error.contains(IntOp::ID),
        "{error}"
    );
}

#[test]
fn an_interface_mismatch_names_both_ids() {
    let dir = TestDir::new("py-mismatch");
    let file = write(dir.path(), "counter.py", &counter("m", 1));
    let host = PluginHost::builder().static_plugin("native", |reg| {
        reg.add_pass("native_pass", (|| ()) as fn(), std::ptr::null_mut())?;
        reg.add_pass_with_interface(
            "native_typed",
            "test.native_op/1",
            (|| ()) as fn(),
            std::ptr::null_mut(),
        )
    });
    // SAFETY: the test's own plugin.
    let host = unsafe { host.python_file(&file) }.build().unwrap();
    let lease = host.acquire().unwrap();
    let error = lease.get_py::<TextOp>("add_m").unwrap_err();
    let Error::PassLookup { cause, .. } = &error else {
        panic!("{error:?}")
    };
    assert!(matches!(**cause, LookupFailure::OtherInterface { .. }));
    let message = error.to_string();
    assert!(message.contains(IntOp::ID) && message.contains(TextOp::ID), "{message}");
    let missing = lease.get_py::<IntOp>("nothing").unwrap_err();
    assert!(matches!(missing, Error::PassLookup { ref cause, .. } if **cause == LookupFailure::Missing));
    let untyped = lease.get_py::<IntOp>("native_pass").unwrap_err();
    assert!(matches!(untyped, Error::PassLookup { ref cause, .. } if matches!(**cause, LookupFailure::Untyped { .. })));
    // The native lookup never hands out a Python pass as a function pointer.
    struct NativeIntOp;
    // SAFETY: no pass of this test is called through it.
    unsafe impl dylease::Interface for NativeIntOp {
        const ID: &'static str = "test.int_op/1";
        type Fn = unsafe extern "C" fn(i64) -> i64;
    }
    let python = lease.get::<NativeIntOp>("add_m").unwrap_err();
    assert!(
        matches!(python, Error::PassLookup { ref cause, .. }
            if matches!(**cause, LookupFailure::OtherKind { python: true, .. })),
        "{python:?}"
    );
    assert_eq!(
        python.to_string(),
        format!(
            "pass `add_m` of plugin file `{}` is a Python pass of interface `test.int_op/1`: look it up \
             with `Lease::get_py`, not `Lease::get`",
            file.display()
        )
    );
    assert_eq!(lease.passes_of::<NativeIntOp>().unwrap().len(), 0);
    assert_eq!(lease.py_passes_of::<IntOp>().len(), 1);
    let native = lease.get_py::<IntOp>("native_typed").unwrap_err();
    assert_eq!(
        native.to_string(),
        "pass `native_typed` of static plugin `native` is a native pass of interface `test.native_op/1`: \
         look it up with `Lease::get`, not `Lease::get_py`"
    );
    for message in [python.to_string(), native.to_string()] {
        assert!(spans_do_not_nest(&message), "{message}");
    }
}

/// Whether every backtick span of `message` is one word (a name, an id, a path without
/// spaces): a span that holds another span pairs its backticks wrongly, and then some span
/// starts or ends inside the prose.
fn spans_do_not_nest(message: &str) -> bool {
    let pieces: Vec<&str> = message.split('`').collect();
    pieces.len() % 2 == 1
        && pieces
            .iter()
            .skip(1)
            .step_by(2)
            .all(|span| !span.is_empty() && !span.contains(char::is_whitespace))
}

#[test]
fn a_duplicate_with_a_static_plugin_fails_the_load_and_unloads_both() {
    let dir = TestDir::new("py-duplicate");
    let file = write(dir.path(), "counter.py", &counter("d", 1));
    let unloaded = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = Arc::clone(&unloaded);
    let host = PluginHost::builder().static_plugin("native", move |reg| {
        let seen = Arc::clone(&seen);
        reg.on_unload(move || {
            seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        });
        reg.add_pass("add_d", (|| ()) as fn(), std::ptr::null_mut())
    });
    // SAFETY: the test's own plugin.
    let host = unsafe { host.python_file(&file) }.build().unwrap();
    let error = host.acquire().unwrap_err();
    assert!(matches!(error, Error::DuplicatePass { .. }), "{error:?}");
    assert_eq!(unloaded.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(log(dir.path()), ["exec d", "load d", "unload d"]);
    assert!(modules_from(dir.path()).is_empty());
}

#[test]
fn a_directory_loads_in_byte_order_and_skips_private_names() {
    let dir = TestDir::new("py-order");
    let plugins = dir.sub("plugins");
    write(&plugins, "b.py", &counter("b", 2));
    write(&plugins, "a.py", &counter("a", 1));
    write(&plugins, "_private.py", "raise RuntimeError('never imported')\n");
    write(&plugins, ".hidden.py", "raise RuntimeError('never imported')\n");
    write(&plugins, "c/__init__.py", &counter("c", 3));
    write(&plugins, "notes.txt", "not a plugin");
    let host = PluginHost::builder().static_plugin("native", |_reg| Ok(()));
    // SAFETY: the test's own plugins.
    let host = unsafe { host.python_dir(&plugins) }.build().unwrap();
    let lease = host.acquire().unwrap();
    let names: Vec<&str> = lease.plugins().iter().map(|plugin| plugin.name()).collect();
    assert_eq!(names, ["native", "a", "b", "c"], "Python plugins after the native ones");
    let passes: Vec<(&str, i64)> = lease
        .py_passes_of::<IntOp>()
        .map(|pass| (pass.name(), pass.call((0,)).unwrap()))
        .collect();
    assert_eq!(passes, [("add_a", 1), ("add_b", 2), ("add_c", 3)]);
}

#[test]
fn a_world_writable_file_is_refused_before_any_code_runs() {
    let dir = TestDir::new("py-trust");
    let file = write(dir.path(), "open.py", &counter("w", 1));
    fs::set_permissions(&file, Permissions::from_mode(0o666)).unwrap();
    let error = host_of_file(&file).acquire().unwrap_err();
    assert!(matches!(error, Error::Untrusted { .. }), "{error:?}");
    assert!(log(dir.path()).is_empty(), "no code of it ran");
    let package = dir.sub("pkg");
    write(&package, "__init__.py", &counter("p", 1));
    let inner = write(&package, "helper.py", "");
    fs::set_permissions(&inner, Permissions::from_mode(0o666)).unwrap();
    let error = host_of_file(&package).acquire().unwrap_err();
    assert!(
        error.to_string().contains("helper.py"),
        "every file of a package is checked: {error}"
    );
    assert!(log(&package).is_empty());
}

#[test]
fn a_reload_runs_new_code_beside_the_old_lease() {
    let dir = TestDir::new("py-reload");
    let file = write(dir.path(), "counter.py", &counter("r", 1));
    let host = host_of_file(&file);
    let old = host.acquire().unwrap();
    write(dir.path(), "counter.py", &counter("r", 100));
    let new = host.reload().unwrap();
    assert_eq!(old.get_py::<IntOp>("add_r").unwrap().call((0,)).unwrap(), 1);
    assert_eq!(new.get_py::<IntOp>("add_r").unwrap().call((0,)).unwrap(), 100);
    drop(old);
    assert_eq!(log(dir.path()), ["exec r", "load r", "exec r", "load r", "unload r"]);
    assert_eq!(new.get_py::<IntOp>("add_r").unwrap().call((0,)).unwrap(), 100);
}

#[test]
fn a_package_with_relative_imports_survives_three_rounds() {
    let dir = TestDir::new("py-package");
    let package = dir.sub("fusion");
    write(
        &package,
        "__init__.py",
        "import dylease\nfrom . import helper\nfrom .sub.deep import factor\n\
         @dylease.typed_pass('scale', 'test.int_op/1')\ndef scale(x):\n    return helper.offset() + factor * x\n",
    );
    write(
        &package,
        "helper.py",
        "open(LOG, 'a').write('helper\\n')\ndef offset():\n    return 1\n",
    );
    write(&package, "sub/__init__.py", "");
    write(&package, "sub/deep.py", "factor = 10\n");
    let host = host_of_file(&package);
    for round in 1..=3 {
        let lease = host.acquire().unwrap();
        assert_eq!(
            lease.get_py::<IntOp>("scale").unwrap().call((2,)).unwrap(),
            21,
            "round {round}"
        );
        assert_eq!(lease.plugins()[0].name(), "fusion");
        assert_eq!(
            modules_from(dir.path()).len(),
            4,
            "round {round}: the package and 3 submodules"
        );
        drop(lease);
        assert!(modules_from(dir.path()).is_empty(), "round {round}");
        assert_eq!(log(&package).len(), round, "every file runs afresh in each round");
    }
}

/// Loads the package `fusion` (version 1: `value` returns 1) while a static plugin that
/// registers before it swaps its directory for version 2's (`value` returns 10 + 100, from
/// `one.py` and a new `two.py`) with `renameat2(RENAME_EXCHANGE)`, as an installer does,
/// after the package was listed and checked and before it is read; with `remove_old`, it
/// then removes the old tree. Returns what `value` returns: a mix of the two versions fails
/// the load or returns another number.
fn value_after_a_swap_during_the_load(name: &str, remove_old: bool, trust: dylease::TrustPolicy) -> i64 {
    let dir = TestDir::new(name);
    let package = dir.path().join("fusion");
    let next = dir.path().join("fusion-next");
    let pass = "@dylease.typed_pass('value', 'test.int_op/1')\ndef value(x):\n    return ";
    write(
        &package,
        "__init__.py",
        &format!("import dylease\nfrom . import one\n{pass}one.X\n"),
    );
    write(&package, "one.py", "X = 1\n");
    write(
        &next,
        "__init__.py",
        &format!("import dylease\nfrom . import one, two\n{pass}one.X + two.Y\n"),
    );
    write(&next, "one.py", "X = 10\n");
    write(&next, "two.py", "Y = 100\n");
    let (from, to) = (package.clone(), next.clone());
    let host = PluginHost::builder().static_plugin("installer", move |_reg| {
        let path = |path: &Path| std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        let (from_c, to_c) = (path(&from), path(&to));
        // SAFETY: both are NUL-terminated paths that outlive the call.
        let done = unsafe {
            libc::renameat2(
                libc::AT_FDCWD,
                from_c.as_ptr(),
                libc::AT_FDCWD,
                to_c.as_ptr(),
                libc::RENAME_EXCHANGE,
            )
        };
        assert_eq!(done, 0, "renameat2: {}", std::io::Error::last_os_error());
        if remove_old {
            fs::remove_dir_all(&to).unwrap();
        }
        Ok(())
    });
    // SAFETY: the test's own plugin.
    let host = unsafe { host.trust(trust).python_file(&package) }.build().unwrap();
    let lease = host.acquire().unwrap_or_else(|error| panic!("{trust:?}: {error}"));
    lease.get_py::<IntOp>("value").unwrap().call((0,)).unwrap()
}

const POLICIES: [dylease::TrustPolicy; 2] = [dylease::TrustPolicy::Strict, dylease::TrustPolicy::Permissive];

#[test]
fn a_package_swapped_after_its_listing_is_read_whole_from_the_tree_listed() {
    for trust in POLICIES {
        assert_eq!(
            value_after_a_swap_during_the_load("py-swap-keep", false, trust),
            1,
            "{trust:?}: version 1, every file of it: the directory the load opened"
        );
    }
}

#[test]
fn a_package_swapped_and_removed_after_its_listing_is_read_again_whole_from_the_new_tree() {
    for trust in POLICIES {
        assert_eq!(
            value_after_a_swap_during_the_load("py-swap-remove", true, trust),
            110,
            "{trust:?}: version 2, every file of it"
        );
    }
}

#[test]
fn a_symlink_inside_a_package_is_refused_naming_it() {
    let dir = TestDir::new("py-package-link");
    let package = dir.sub("fusion");
    write(&package, "__init__.py", "import dylease\nfrom . import shared\n");
    let outside = write(dir.path(), "shared.py", "X = 1\n");
    std::os::unix::fs::symlink(&outside, package.join("shared.py")).unwrap();
    let error = host_of_file(&package).acquire().unwrap_err();
    let mut chain = error.to_string();
    let mut cause = std::error::Error::source(&error);
    while let Some(next) = cause {
        chain = format!("{chain}: {next}");
        cause = next.source();
    }
    assert!(
        chain.contains(&format!("`{}` is a symlink", package.join("shared.py").display())),
        "{chain}"
    );
}

#[test]
fn python_env_lists_a_file_and_a_directory() {
    let dir = TestDir::new("py-env");
    let single = write(dir.path(), "single.py", &counter("one", 1));
    let more = dir.sub("more");
    write(&more, "two.py", &counter("two", 2));
    let var = format!("DYLEASE_TEST_PY_PATH_{}", std::process::id());
    // SAFETY: this variable is this test's own; no other thread reads or writes it.
    unsafe { std::env::set_var(&var, format!("{}:{}", single.display(), more.display())) };
    // SAFETY: the test's own plugins.
    let host = unsafe { PluginHost::builder().python_env(&var) }.build().unwrap();
    let lease = host.acquire().unwrap();
    let names: Vec<&str> = lease.plugins().iter().map(|plugin| plugin.name()).collect();
    assert_eq!(names, ["one", "two"]);
}

#[test]
fn no_pycache_is_written() {
    let dir = TestDir::new("py-cache");
    let package = dir.sub("pkg");
    write(&package, "__init__.py", "from . import helper\n");
    write(&package, "helper.py", "");
    write(dir.path(), "single.py", "import json\n");
    let host = PluginHost::builder();
    // SAFETY: the test's own plugins.
    let host = unsafe { host.python_file(&package).python_file(dir.path().join("single.py")) }
        .build()
        .unwrap();
    drop(host.acquire().unwrap());
    assert!(!package.join("__pycache__").exists());
    assert!(!dir.path().join("__pycache__").exists());
}

#[test]
fn four_threads_call_passes_while_sets_come_and_go() {
    let dir = TestDir::new("py-threads");
    let file = write(dir.path(), "counter.py", &counter("t", 1));
    let host = host_of_file(&file);
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for i in 0..50 {
                    let lease = host.acquire_timeout(Duration::from_secs(30)).unwrap();
                    assert_eq!(lease.get_py::<IntOp>("add_t").unwrap().call((i,)).unwrap(), i + 1);
                }
            });
        }
    });
    let lines = log(dir.path());
    let loads = lines.iter().filter(|line| *line == "load t").count();
    let unloads = lines.iter().filter(|line| *line == "unload t").count();
    assert_eq!(loads, unloads, "every instance unloaded: {lines:?}");
}

#[test]
fn a_thread_holding_the_gil_waits_for_a_load_of_python_plugins_without_deadlock() {
    let dir = TestDir::new("py-gil");
    let file = write(dir.path(), "counter.py", &counter("g", 1));
    let (started, loading) = std::sync::mpsc::channel();
    let started = std::sync::Mutex::new(started);
    let host = PluginHost::builder().static_plugin("signal", move |_reg| {
        let _ = started.lock().unwrap().send(());
        Ok(())
    });
    // SAFETY: the test's own plugin.
    let host = Arc::new(unsafe { host.python_file(&file) }.build().unwrap());
    // This thread holds the GIL (as a pass calling `acquire()` would) while another thread
    // loads the set: its static plugin runs, then its Python plugin needs the GIL. This
    // thread's `acquire` waits for that load, and must give the GIL up while it waits.
    Python::attach(|_py| {
        let loader = Arc::clone(&host);
        let thread = std::thread::spawn(move || loader.acquire().map(drop));
        loading.recv_timeout(Duration::from_secs(30)).unwrap();
        let lease = host.acquire_timeout(Duration::from_secs(30)).unwrap();
        assert_eq!(lease.get_py::<IntOp>("add_g").unwrap().call((1,)).unwrap(), 2);
        drop(lease);
        _py.detach(|| thread.join().unwrap().unwrap());
    });
}

#[test]
fn a_python_failure_unloads_the_native_libraries_of_the_set() {
    let dir = TestDir::new("py-native");
    let lib = dir.add("stateful", "libstateful.so");
    let file = write(
        dir.path(),
        "broken.py",
        "def on_load():\n    raise OSError('no device')\n",
    );
    let host = PluginHost::builder();
    // SAFETY: the test's own plugins.
    let host = unsafe { host.file(&lib).python_file(&file) }.build().unwrap();
    let error = host.acquire().unwrap_err().to_string();
    assert!(
        error.contains("on_load raised OSError: no device") && error.contains("line 2"),
        "{error}"
    );
    crate::support::assert_unloaded(&lib);
    assert!(modules_from(dir.path()).is_empty());
    write(dir.path(), "broken.py", &counter("ok", 1));
    let lease = host.acquire().unwrap();
    crate::support::assert_loaded(&lib);
    assert_eq!(lease.plugins().len(), 2);
    drop(lease);
    crate::support::assert_unloaded(&lib);
}

#[test]
fn a_module_kept_alive_from_outside_is_reported_after_unload() {
    crate::logger::install();
    let dir = TestDir::new("py-survivor");
    let file = write(
        dir.path(),
        "clingy.py",
        "import sys\nimport json\nsys.modules['json'].__dict__.setdefault('_kept', []).append(sys.modules[__name__])\n",
    );
    drop(host_of_file(&file).acquire().unwrap());
    let warnings = crate::logger::records(log::Level::Warn, &format!("plugin file `{}` stays", file.display()));
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("_dylease."), "names the module: {}", warnings[0]);
    Python::attach(|py| {
        let json = py.import("json").unwrap();
        json.getattr("_kept").unwrap().call_method0("clear").unwrap();
    });
}

#[test]
fn a_plugin_listed_twice_loads_once() {
    let dir = TestDir::new("py-twice");
    let file = write(dir.path(), "counter.py", &counter("twice", 1));
    let host = PluginHost::builder();
    // SAFETY: the test's own plugin.
    let host = unsafe { host.python_file(&file).python_dir(dir.path()) }
        .build()
        .unwrap();
    let lease = host.acquire().unwrap();
    assert_eq!(lease.plugins().len(), 1);
}

#[test]
fn skip_failed_leaves_a_broken_python_plugin_out() {
    let dir = TestDir::new("py-skip");
    write(dir.path(), "a.py", "raise ImportError('missing numpy')\n");
    write(dir.path(), "b.py", &counter("b", 2));
    let host = PluginHost::builder().policy(dylease::LoadPolicy::SkipFailed);
    // SAFETY: the test's own plugins.
    let host = unsafe { host.python_dir(dir.path()) }.build().unwrap();
    let lease = host.acquire().unwrap();
    assert_eq!(lease.plugins().iter().map(|p| p.name()).collect::<Vec<_>>(), ["b"]);
    assert_eq!(lease.failures().len(), 1);
    assert!(lease.failures()[0].to_string().contains("missing numpy"));
    assert_eq!(modules_from(dir.path()).len(), 1, "only b's module is left");
}

/// A plugin that, while it executes, logs `waiting` and then blocks (outside the GIL, in a
/// read) until a byte arrives through the FIFO `gate`; then it offers `add_gate` (x + 1).
fn gated(gate: &Path) -> String {
    r#"
import os
import dylease
dylease.plugin("gate", "1.0")

def log(line):
    with open(LOG, "a") as f:
        f.write(line + "\n")

# Read-write, so that the open never blocks and the test's writer always finds a reader.
gate = os.open(GATE, os.O_RDWR)
log("waiting")
os.read(gate, 1)
os.close(gate)
log("exec gate")

@dylease.typed_pass("add_gate", "test.int_op/1")
def add(x):
    return x + 1
"#
    .replace("GATE", &format!("{:?}", gate.display().to_string()))
}

/// Writes the byte that lets a [`gated`] plugin go on, once, and at the latest when dropped
/// (so that a failing test never leaves the loading thread blocked).
struct Gate {
    fifo: PathBuf,
    opened: bool,
}

impl Gate {
    fn open(&mut self) {
        if !std::mem::replace(&mut self.opened, true) {
            use std::io::Write as _;
            use std::os::unix::fs::OpenOptionsExt as _;
            // Non-blocking: the plugin holds the FIFO open for reading, or nobody waits.
            if let Ok(mut fifo) = fs::OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&self.fifo)
            {
                // Two: a second execution (a bug) goes on too, and shows in the log.
                let _ = fifo.write_all(b"gg");
            }
        }
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.open();
    }
}

/// A thread holding the GIL (a pass that builds a host of its own) acquires a second host over
/// a Python plugin that another host is loading on another thread: the registry waits for
/// that load, and must give the GIL up while it waits, since the load needs the GIL to finish.
/// The loading thread is held inside the plugin's execution (outside the GIL) until this
/// thread holds the GIL, and let go just before the acquire, so the acquire always finds the
/// file busy and the loader needing the GIL. Waiting with the GIL held, the acquire would
/// only end at its 20 s bound, with `TimedOut`. Caught: the registry's wait (`Registry::wait`)
/// calling `wait()` directly instead of through `interpreter::detached`. Runs in CI's Python
/// step (`cargo test --features python --test integration python::`).
#[test]
fn a_thread_holding_the_gil_waits_for_another_hosts_load_of_the_same_plugin_without_deadlock() {
    let dir = TestDir::new("py-gil-registry");
    let fifo = dir.path().join("gate.fifo");
    let c_fifo = std::ffi::CString::new(fifo.display().to_string()).unwrap();
    // SAFETY: a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(c_fifo.as_ptr(), 0o600) }, 0);
    let file = write(dir.path(), "gate.py", &gated(&fifo));
    let (first, second) = (host_of_file(&file), host_of_file(&file));
    let mut gate = Gate { fifo, opened: false };
    let (done, finished) = std::sync::mpsc::channel();
    let (release, released) = std::sync::mpsc::channel::<()>();
    let loader = std::thread::spawn(move || {
        let lease = first.acquire_timeout(Duration::from_secs(60))?;
        let added = lease.get_py::<IntOp>("add_gate").unwrap().call((1,)).unwrap();
        let _ = done.send(added);
        // Held until the second host has its lease, so that it shares this instance.
        let _ = released.recv_timeout(Duration::from_secs(60));
        Ok::<_, dylease::Error>(())
    });
    await_that("the loading thread executes the plugin", || {
        log(dir.path()).iter().any(|line| line == "waiting")
    });
    Python::attach(|py| {
        // The loader's read returns now, and it needs the GIL, which this thread holds.
        gate.open();
        let lease = second.acquire_timeout(Duration::from_secs(20)).unwrap_or_else(|error| {
            panic!("the second host's acquire, waiting with the GIL held for the first host's load: {error}")
        });
        assert_eq!(lease.get_py::<IntOp>("add_gate").unwrap().call((41,)).unwrap(), 42);
        let added = py.detach(move || finished.recv_timeout(Duration::from_secs(60)));
        assert_eq!(added.expect("the first host's load ended"), 2);
        release.send(()).unwrap();
        drop(lease);
    });
    py_join(loader);
    assert_eq!(
        log(dir.path()),
        ["waiting", "exec gate"],
        "the plugin executed once, for both hosts"
    );
}

/// Joins `thread`, which returns promptly once released, and fails the test with its error.
fn py_join(thread: std::thread::JoinHandle<Result<(), Error>>) {
    if let Err(error) = thread.join().unwrap() {
        panic!("the loading thread's acquire failed: {error}");
    }
}

#[test]
fn plugins_whose_manifests_are_complete_load_as_their_manifests_declare() {
    // Each manifest is complete (see the reader's unit tests in `load::python::source`): a
    // pass registered that it does not declare, or declared and not registered, fails the load.
    let dir = TestDir::new("py-manifest");
    let plugins = dir.sub("plugins");
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/plugins/simplify.py");
    write(&plugins, "simplify.py", &fs::read_to_string(example).unwrap());
    write(
        &plugins,
        "aliased.py",
        "import dylease as d\nd.plugin('aliased', version='2')\n\n\
         @d.typed_pass('twice', interface='test.int_op/1')\ndef twice(x):\n    return 2 * x\n",
    );
    write(
        &plugins,
        "from_import.py",
        "from dylease import plugin, typed_pass as tp\nplugin('from_import')\n\n\
         @tp('thrice', 'test.int_op/1')\ndef thrice(x):\n    return 3 * x\n",
    );
    write(
        &plugins,
        "pkg/__init__.py",
        "import dylease\nfrom . import sub\ndylease.plugin('pkg', '3')\n",
    );
    write(
        &plugins,
        "pkg/sub.py",
        "import dylease\n\n@dylease.typed_pass('below', 'test.int_op/1')\ndef below(x):\n    return x - 1\n",
    );
    // SAFETY: the test's own plugins.
    let host = unsafe { PluginHost::builder().python_dir(&plugins) }.build().unwrap();
    let lease = host.acquire().unwrap();
    let names: Vec<&str> = lease.plugins().iter().map(|plugin| plugin.name()).collect();
    assert_eq!(names, ["aliased", "from_import", "pkg", "simplify"]);
    assert_eq!(lease.get_py::<IntOp>("twice").unwrap().call((4,)).unwrap(), 8);
    assert_eq!(lease.get_py::<IntOp>("thrice").unwrap().call((4,)).unwrap(), 12);
    assert_eq!(lease.get_py::<IntOp>("below").unwrap().call((4,)).unwrap(), 3);
    assert_eq!(lease.passes().len(), 4);
}

#[test]
fn plugins_whose_manifests_are_incomplete_load_with_passes_they_do_not_declare() {
    let dir = TestDir::new("py-manifest-incomplete");
    let plugins = dir.sub("plugins");
    write(
        &plugins,
        "explicit.py",
        "import dylease\n\n@dylease.typed_pass('declared', 'test.int_op/1')\ndef declared(x):\n    return x\n\n\
         def register_passes(reg):\n    reg.add_typed_pass('undeclared', 'test.int_op/1', declared)\n",
    );
    write(
        &plugins,
        "conditional.py",
        "import dylease\nif True:\n    @dylease.typed_pass('conditional', 'test.int_op/1')\n    \
         def conditional(x):\n        return x\n",
    );
    write(
        &plugins,
        "computed.py",
        "import dylease\n\n@dylease.typed_pass('comp' + 'uted', 'test.int_op/1')\ndef computed(x):\n    return x\n",
    );
    // SAFETY: the test's own plugins.
    let host = unsafe { PluginHost::builder().python_dir(&plugins) }.build().unwrap();
    let lease = host.acquire().unwrap();
    let mut passes: Vec<&str> = lease.passes().iter().map(|pass| pass.name()).collect();
    passes.sort_unstable();
    assert_eq!(passes, ["computed", "conditional", "undeclared"]);
}

/// A plugin whose source reads as one pass but that adds another at run time, through a
/// frame's globals, the host's own record of its passes or an attribute set by a computed
/// name, has an incomplete manifest in the catalog (what `install`'s collision check and
/// `inspect` read), and loads with both passes; an honest plugin beside them stays complete.
#[test]
fn a_pass_added_at_run_time_past_the_reader_leaves_the_manifest_incomplete() {
    let dir = TestDir::new("py-manifest-run-time");
    let plugins = dir.sub("plugins");
    let head = |name: &str| {
        format!(
            "import dylease\nimport sys\ndylease.plugin('{name}')\n\n\
             @dylease.typed_pass('{name}_one', 'test.int_op/1')\ndef one(x):\n    return x\n\n\
             def two(x):\n    return 2 * x\n\n"
        )
    };
    let tricks = [
        (
            "frame",
            "getattr(sys._getframe(0).f_globals['dyl' + 'ease'], 'typed' + '_pass')('frame_two', 'test.int_op/1')(two)\n",
        ),
        (
            "state",
            "import gc\nnext(o for o in gc.get_objects() if getattr(o, '_dylease_state', {}).get('name') == 'state')\
             ._dylease_state['passes'].append(('state_two', 'test.int_op/1', two))\n",
        ),
        (
            "setattr",
            "setattr(sys.modules[__name__], 'register' + '_passes', lambda reg: [reg.add_typed_pass(n, \
             'test.int_op/1', f) for n, f in (('setattr_one', one), ('setattr_two', two))])\n",
        ),
        ("honest", "VERSION = getattr(sys, 'version_info')\n"),
    ];
    for (name, trick) in tricks {
        write(&plugins, &format!("{name}.py"), &format!("{}{trick}", head(name)));
    }
    // SAFETY: the test's own plugins.
    let host = unsafe { PluginHost::builder().python_dir(&plugins) }.build().unwrap();
    for plugin in host.catalog().unwrap() {
        let manifest = plugin.manifest().expect("a manifest");
        let name = manifest.name().to_owned();
        assert_eq!(manifest.is_complete(), name == "honest", "{name}: {manifest:?}");
        let declared: Vec<&str> = manifest.passes().iter().map(|p| p.name.as_str()).collect();
        assert_eq!(declared, [format!("{name}_one")], "{name}");
    }
    let lease = host.acquire().unwrap();
    let mut passes: Vec<&str> = lease.passes().iter().map(|pass| pass.name()).collect();
    passes.sort_unstable();
    assert_eq!(
        passes,
        [
            "frame_one",
            "frame_two",
            "honest_one",
            "setattr_one",
            "setattr_two",
            "state_one",
            "state_two"
        ]
    );
    assert_eq!(lease.get_py::<IntOp>("state_two").unwrap().call((4,)).unwrap(), 8);
}

#[test]
fn a_declared_pass_its_plugin_does_not_register_fails_the_load_naming_it() {
    let dir = TestDir::new("py-manifest-mismatch");
    let package = dir.sub("dead");
    write(
        &package,
        "__init__.py",
        "import dylease\n\n@dylease.typed_pass('alive', 'test.int_op/1')\ndef alive(x):\n    return x\n",
    );
    // A decorated pass in a module nothing imports: declared, never registered.
    write(
        &package,
        "forgotten.py",
        "import dylease\n\n@dylease.typed_pass('ghost', 'test.int_op/1')\ndef ghost(x):\n    return x\n",
    );
    let host = host_of_file(&package);
    let error = host.acquire().unwrap_err();
    assert!(matches!(error, Error::ManifestMismatch { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains("did not register the declared pass `ghost` (interface `test.int_op/1`)"),
        "{message}"
    );
    assert!(message.contains(&package.display().to_string()), "{message}");
    assert!(!host.is_loaded());
    assert!(modules_from(dir.path()).is_empty(), "its modules are removed");
}

#[test]
fn loading_a_plugin_runs_its_top_level_which_reading_its_manifest_and_the_catalog_do_not() {
    // The other half, reading the manifest alone, is `load::python::source`'s unit test
    // `reading_the_manifest_runs_none_of_the_plugins_code`: this is its positive control.
    let dir = TestDir::new("py-manifest-marker");
    let marker = dir.path().join("marker");
    let file = write(
        dir.path(),
        "marker.py",
        &format!(
            "import dylease\nopen({:?}, 'w').close()\n\n@dylease.typed_pass('p', 'test.int_op/1')\ndef p(x):\n    return x\n",
            marker.display().to_string()
        ),
    );
    assert!(!marker.exists());
    let host = host_of_file(&file);
    // The catalog reads its manifest without running it.
    let catalog = host.catalog().unwrap();
    let manifest = catalog[0].manifest().expect("a manifest");
    assert_eq!((manifest.name(), manifest.abi_version()), ("marker", None));
    let declared: Vec<_> = manifest
        .passes()
        .iter()
        .map(|p| (p.name.as_str(), p.interface.as_deref()))
        .collect();
    assert_eq!(declared, [("p", Some("test.int_op/1"))]);
    assert!(manifest.is_complete());
    assert!(!marker.exists(), "the catalog ran the plugin's top level");
    let lease = host.acquire().unwrap();
    assert!(marker.exists());
    assert_eq!(lease.get_py::<IntOp>("p").unwrap().call((7,)).unwrap(), 7);
}
