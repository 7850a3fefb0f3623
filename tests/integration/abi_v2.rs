//! ABI version 2: typed passes and their interfaces, `on_load` and when `on_unload` follows
//! it, `report`'s message in the load error, a Rust plugin's own error reaching the host, and
//! plugins of version 1 loading unchanged. The C plugins log their hooks into a file next to
//! themselves (`tests/plugins/events.h`), which survives the unload.

use std::path::Path;

use dylease::{Error, OpenCause, Origin, PluginHost, Registrar};

use crate::rust_plugin::built_rust_plugins;
use crate::support::{TestDir, assert_unloaded, strip_manifest};

type IntPass = extern "C" fn(i32) -> i32;
type IntSource = extern "C" fn() -> i32;

/// The hooks the plugin at `lib` ran so far, in order ("on_load", "register", "on_unload").
fn events(lib: &Path) -> Vec<String> {
    let log = format!("{}.log", lib.display());
    match std::fs::read_to_string(&log) {
        Ok(text) => text.lines().map(str::to_owned).collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("cannot read {log}: {e}"),
    }
}

/// Loads the fixture `name` alone and returns the error its load fails with, after checking
/// that nothing of it stayed mapped.
fn load_error(name: &str) -> (TestDir, std::path::PathBuf, Error) {
    let dir = TestDir::new(name);
    let lib = dir.add(name, &format!("lib{name}.so"));
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&lib).build() }.unwrap();
    let error = host.acquire().unwrap_err();
    assert_unloaded(&lib);
    (dir, lib, error)
}

/// How long an acquire may wait for the previous set's unload: far beyond it, on a loaded
/// machine; no speed assertion.
const UNLOAD_BOUND: std::time::Duration = std::time::Duration::from_secs(30);
#[test]
fn typed_passes_carry_their_interface_and_untyped_passes_none() {
    let dir = TestDir::new("typed");
    let lib = dir.add("typed", "libtyped.so");
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&lib).build() }.unwrap();
    for generation in 1..=2 {
        // Bounded: the second acquire waits for the first set's unload, which a bug in the
        // set's drop could leave unmarked for ever.
        let lease = host.acquire_timeout(UNLOAD_BOUND).unwrap();
        let interfaces: Vec<_> = lease.passes().iter().map(|p| (p.name(), p.interface())).collect();
        assert_eq!(
            interfaces,
            [
                ("fuse", Some("test.fusion_pass/1")),
                ("scale", Some("test.int_op/2")),
                ("plain", None)
            ]
        );
        // SAFETY: all three are `int (*)(int)`; used while `lease` lives.
        let (fuse, scale) = unsafe {
            (
                lease.pass::<IntPass>("fuse").unwrap(),
                lease.pass::<IntPass>("scale").unwrap(),
            )
        };
        // `fuse` reads the state `on_load` made (100): `on_load` ran before any pass could.
        assert_eq!(fuse(10), 105);
        // SAFETY: `scale` was registered with a pointer to a live `int` (3).
        assert_eq!(unsafe { *scale.user_data().cast::<i32>() }, 3);
        drop(lease);
        assert_unloaded(&lib);
        let once_per_load = ["on_load", "on_unload"].repeat(generation);
        assert_eq!(events(&lib), once_per_load, "generation {generation}");
    }
}

#[test]
fn an_invalid_interface_is_refused_naming_the_pass_and_the_reason() {
    for (fixture, reason) in [
        ("typed_empty_interface", "the interface is empty"),
        ("typed_bad_utf8_interface", "the interface is not valid UTF-8"),
        ("typed_long_interface", "the interface is longer than 256 bytes"),
        ("hooks_null_interface", "the interface is NULL"),
    ] {
        let (_dir, lib, error) = if fixture == "typed_bad_utf8_interface" {
            // Its manifest declares the pass with that interface too: the host refuses the
            // manifest before the file is mapped (no code of it ran) ...
            let (dir, lib, error) = load_error(fixture);
            assert!(
                matches!(&error, Error::Open { cause: OpenCause::Manifest, reason, .. }
                    if reason.contains("an interface that is not UTF-8")),
                "{error:?}"
            );
            assert_eq!(events(&lib), Vec::<String>::new(), "no code of it ran");
            // ... and without the manifest, the registration refuses the pass.
            strip_manifest(&lib);
            // SAFETY: the suite's own fixture, whose initialisation code is sound.
            let host = unsafe { PluginHost::builder().file(&lib).build() }.unwrap();
            let error = host.acquire().unwrap_err();
            assert_unloaded(&lib);
            (dir, lib, error)
        } else {
            load_error(fixture)
        };
        match &error {
            Error::InvalidPass {
                plugin,
                pass,
                reason: why,
                ..
            } => {
                assert_eq!(plugin.path(), Some(lib.as_path()), "{fixture}");
                let expected = if fixture.starts_with("hooks") { "untyped" } else { "bad" };
                assert_eq!(pass, expected, "{fixture}");
                assert_eq!(why, reason, "{fixture}");
            }
            other => panic!("{fixture}: expected InvalidPass, got {other:?}"),
        }
        // The refusal came after a successful `on_load`: `on_unload` is owed, and ran once.
        assert_eq!(events(&lib).first().map(String::as_str), Some("on_load"), "{fixture}");
        assert_eq!(events(&lib).last().map(String::as_str), Some("on_unload"), "{fixture}");
        assert_eq!(
            events(&lib).iter().filter(|e| *e == "on_unload").count(),
            1,
            "{fixture}"
        );
    }
}

#[test]
fn a_failing_on_load_fails_the_load_before_register_passes_and_without_on_unload() {
    let dir = TestDir::new("on_load_fails");
    let lib = dir.add("hooks_on_load_fails", "libnpu.so");
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&lib).build() }.unwrap();
    let error = host.acquire().unwrap_err();
    match &error {
        Error::OnLoadFailed { path, code, .. } => {
            assert_eq!(path, &lib);
            assert_eq!(*code, -3);
        }
        other => panic!("expected OnLoadFailed, got {other:?}"),
    }
    assert_eq!(
        error.to_string(),
        format!(
            "plugin file `{}` failed to initialise: its `on_load` returned -3",
            lib.display()
        )
    );
    assert_eq!(events(&lib), ["on_load"], "no register_passes, no on_unload");
    assert_unloaded(&lib);
    // The next acquire tries again, from a fresh instance.
    assert!(matches!(host.acquire(), Err(Error::OnLoadFailed { .. })));
    assert_eq!(events(&lib), ["on_load", "on_load"]);
    assert_unloaded(&lib);
}

#[test]
fn the_message_a_plugin_reports_is_in_the_load_error() {
    let (_dir, lib, error) = load_error("hooks_register_fails_reported");
    assert!(matches!(error, Error::RegisterFailed { .. }), "{error:?}");
    // The first report is the one shown; the second is dropped.
    assert_eq!(
        error.to_string(),
        format!(
            "plugin file `{}` failed to register its passes: no NPU device found (`register_passes` returned -1)",
            lib.display()
        )
    );
    assert_eq!(events(&lib), ["on_load", "register", "on_unload"]);
}

#[test]
fn a_reported_message_is_cut_to_1024_bytes_and_decoded_lossily() {
    let (_dir, lib, error) = load_error("hooks_register_fails_huge_report");
    let message = error.to_string();
    let kept = format!("{}…", "r".repeat(1024));
    assert!(
        message.contains(&format!(": {kept} (`register_passes` returned -1)")),
        "{message:.2000}"
    );
    // The path, the kept bytes and a sentence around them.
    let path = lib.display().to_string().len();
    assert!(message.len() < path + 1024 + 200, "{} bytes", message.len());

    let (_dir, _lib, error) = load_error("hooks_register_fails_bad_utf8_report");
    assert!(
        error.to_string().contains(": no dev\u{FFFD}ice (`register_passes`"),
        "{error}"
    );
}

#[test]
fn a_report_from_a_registration_that_succeeds_does_not_fail_the_load() {
    let dir = TestDir::new("reported_success");
    let lib = dir.add("hooks_reported_success", "libhooks.so");
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&lib).build() }.unwrap();
    let lease = host.acquire().unwrap();
    assert_eq!(lease.passes().len(), 3);
    drop(lease);
    assert_unloaded(&lib);
}

#[test]
fn after_a_successful_on_load_on_unload_runs_once_even_if_register_passes_fails() {
    let (_dir, lib, error) = load_error("hooks_register_fails");
    assert_eq!(
        error.to_string(),
        format!(
            "plugin file `{}` failed to register its passes: `register_passes` returned -1",
            lib.display()
        )
    );
    assert_eq!(events(&lib), ["on_load", "register", "on_unload"]);
}

#[test]
fn without_on_load_a_failed_register_passes_is_not_followed_by_on_unload() {
    let (_dir, lib, error) = load_error("hooks_no_on_load_register_fails");
    assert!(matches!(error, Error::RegisterFailed { .. }), "{error:?}");
    assert_eq!(events(&lib), ["register"]);
}

#[test]
fn after_a_successful_on_load_a_duplicate_pass_under_strict_still_runs_on_unload_once() {
    let dir = TestDir::new("on_load_duplicate");
    let first = dir.add("hooks", "libfirst.so");
    let second = dir.add("hooks", "libsecond.so");
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&first).file(&second).build() }.unwrap();
    let error = host.acquire().unwrap_err();
    assert!(matches!(error, Error::DuplicatePass { .. }), "{error:?}");
    for lib in [&first, &second] {
        assert_eq!(events(lib), ["on_load", "register", "on_unload"], "{}", lib.display());
        assert_unloaded(lib);
    }
}

#[test]
fn a_version_2_plugin_gets_the_version_2_host_api() {
    let dir = TestDir::new("v2_table");
    let lib = dir.add("hooks", "libhooks.so");
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&lib).build() }.unwrap();
    let lease = host.acquire().unwrap();
    // SAFETY: `api_version` is `int (*)(void)`; called while `lease` lives.
    let api_version = unsafe { lease.pass::<IntSource>("api_version") }.unwrap();
    assert_eq!(api_version(), 2);
    let typed = lease.passes().iter().find(|p| p.name() == "typed_seven").unwrap();
    assert_eq!(typed.interface(), Some("test.int_source/1"));
    drop(lease);
    assert_eq!(events(&lib), ["on_load", "register", "on_unload"]);
    assert_unloaded(&lib);
}

#[test]
fn a_version_1_descriptor_is_read_only_as_far_as_version_1_and_gets_a_version_1_table() {
    // The descriptor says version 1 but its struct (the version-2 header's) carries an
    // `on_load`: the host must neither call it nor offer the version-2 functions.
    let dir = TestDir::new("v1_table");
    let lib = dir.add("hooks_abi1", "libhooks.so");
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&lib).build() }.unwrap();
    let lease = host.acquire().unwrap();
    // SAFETY: `api_version` is `int (*)(void)`; called while `lease` lives.
    let api_version = unsafe { lease.pass::<IntSource>("api_version") }.unwrap();
    assert_eq!(api_version(), 1);
    assert!(lease.passes().iter().all(|p| p.interface().is_none()));
    assert!(lease.passes().iter().all(|p| p.name() != "typed_seven"));
    drop(lease);
    assert_eq!(events(&lib), ["register", "on_unload"]);
    assert_unloaded(&lib);
}

#[test]
fn a_version_1_plugin_built_against_the_old_header_loads_and_runs_unchanged() {
    let dir = TestDir::new("v1_plugin");
    let lib = dir.add("v1_plugin", "libold.so");
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&lib).build() }.unwrap();
    for generation in 1..=2 {
        // Bounded: the second acquire waits for the first set's unload, which a bug in the
        // set's drop could leave unmarked for ever.
        let lease = host.acquire_timeout(UNLOAD_BOUND).unwrap();
        assert_eq!(
            (lease.plugins()[0].name(), lease.plugins()[0].version()),
            ("old", "1.0.0")
        );
        // SAFETY: `eleven` is `int (*)(void)`; called while `lease` lives.
        let eleven = unsafe { lease.pass::<IntSource>("eleven") }.unwrap();
        assert_eq!(eleven(), 11);
        assert_eq!(lease.passes()[0].interface(), None);
        drop(lease);
        assert_unloaded(&lib);
        assert_eq!(events(&lib), ["on_unload"].repeat(generation));
    }
}

#[test]
fn a_rust_plugins_own_error_reaches_the_host_error() {
    let built = built_rust_plugins();
    let dir = TestDir::new("rust_no_device");
    let lib = dir.path().join("libnpu.so");
    std::fs::copy(built.join("examples/libno_device.so"), &lib).unwrap();
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&lib).build() }.unwrap();
    let error = host.acquire().unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "plugin file `{}` failed to register its passes: no NPU device found (`register_passes` returned -1)",
            lib.display()
        )
    );
    assert_unloaded(&lib);
}

#[test]
fn a_rust_plugins_panic_is_caught_and_its_message_reaches_the_host_error() {
    let built = built_rust_plugins();
    let dir = TestDir::new("rust_panicking");
    let lib = dir.path().join("libfragile.so");
    std::fs::copy(built.join("examples/libpanicking.so"), &lib).unwrap();
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&lib).build() }.unwrap();
    let error = host.acquire().unwrap_err();
    assert_eq!(
        error.to_string(),
        format!(
            "plugin file `{}` failed to register its passes: panicked: the NPU driver is too old \
             (`register_passes` returned -2)",
            lib.display()
        )
    );
    // No unmapping check here: unwinding inside the plugin makes its std register
    // thread-local destructors, and glibc then pins the library (measured: it stays mapped).
}

#[test]
fn a_static_plugin_records_typed_passes_and_refuses_invalid_interfaces() {
    extern "C" fn one() -> i32 {
        1
    }
    let host = PluginHost::builder()
        .static_plugin("typed", |reg| {
            reg.add_pass_with_interface("one", "test.int_source/1", one as IntSource, std::ptr::null_mut())?;
            reg.add_pass("plain", one as IntSource, std::ptr::null_mut())
        })
        .build()
        .unwrap();
    let lease = host.acquire().unwrap();
    let interfaces: Vec<_> = lease.passes().iter().map(|p| (p.name(), p.interface())).collect();
    assert_eq!(interfaces, [("one", Some("test.int_source/1")), ("plain", None)]);
    drop(lease);

    let long = "i".repeat(257);
    for (interface, reason) in [
        ("", "the interface is empty"),
        (long.as_str(), "the interface is longer than 256 bytes"),
    ] {
        let interface = interface.to_owned();
        let host = PluginHost::builder()
            .static_plugin("typed", move |reg| {
                reg.add_pass_with_interface("one", &interface, one as IntSource, std::ptr::null_mut())
            })
            .build()
            .unwrap();
        // The function returned the registrar's refusal: the load fails with the refusal
        // itself, naming the plugin, not with a wrapper around it.
        let error = host.acquire().unwrap_err();
        match &error {
            Error::InvalidPass {
                plugin: Origin::Static(plugin),
                pass,
                reason: why,
                ..
            } => assert_eq!((plugin.as_str(), pass.as_str(), why.as_str()), ("typed", "one", reason)),
            other => panic!("expected InvalidPass, got {other:?}"),
        }
    }
}
