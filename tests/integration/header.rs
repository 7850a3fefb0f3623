//! `include/dylease.h` from C and C++: a plugin whose passes come from two translation units,
//! and every macro under the strictest flags the header promises to pass.

use dylease::{Error, PluginHost};

use crate::support::{TestDir, assert_unloaded};

type IntPass = extern "C" fn(i32) -> i32;

#[test]
fn a_cpp_plugin_registers_passes_from_two_translation_units() {
    let dir = TestDir::new("cpp_multi");
    let lib = dir.add("cpp_multi", "libcpp_multi.so");
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&lib).build() }.unwrap();
    let lease = host.acquire().unwrap();
    assert_eq!(lease.plugins()[0].name(), "cpp-multi");
    let mut names: Vec<_> = lease.passes().iter().map(|p| p.name()).collect();
    names.sort_unstable();
    assert_eq!(names, ["add_offset", "negate", "square"]);

    // SAFETY: the plugin registers all three as `int (*)(int)`; used while `lease` lives.
    let (square, negate, add_offset) = unsafe {
        (
            lease.pass::<IntPass>("square").unwrap(),
            lease.pass::<IntPass>("negate").unwrap(),
            lease.pass::<IntPass>("add_offset").unwrap(),
        )
    };
    assert_eq!(square(7), 49);
    assert_eq!(negate(7), -7);
    assert_eq!(add_offset(7), 107);
    // The user data is the plugin's own `Offset`, whose first field is 100.
    // SAFETY: `add_offset` was registered with a pointer to a live `struct { int by; }`.
    assert_eq!(unsafe { *add_offset.user_data().cast::<i32>() }, 100);
    drop(lease);
    assert_unloaded(&lib);
}

#[test]
fn every_header_macro_compiles_cleanly_as_strict_c99_and_cpp11_and_registers_its_pass() {
    for lang in ["c", "cpp"] {
        for variant in ["plain", "unload", "hooks"] {
            let name = format!("macros_{lang}_{variant}");
            let dir = TestDir::new(&name);
            // Built with -Wall -Wextra -Wpedantic -Werror (and the C++ casts' warnings).
            let lib = dir.add(&name, "libmacros.so");
            // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
            let host = unsafe { PluginHost::builder().file(&lib).build() }.unwrap();
            let lease = host.acquire().unwrap();
            assert_eq!(lease.plugins()[0].version(), "1.2.3", "{name}");
            // The macros export nothing but the entry point: nothing predicts a pinned library.
            assert_eq!(lease.plugins()[0].pinning().causes(), [], "{name}");
            let passes: Vec<_> = lease.passes().iter().map(|p| (p.name(), p.interface())).collect();
            assert_eq!(
                passes,
                [
                    ("pass", None),
                    ("pass_with_data", None),
                    ("typed_pass", Some("test.int_op/1")),
                    ("typed_pass_with_data", Some("test.int_op/1")),
                ],
                "{name}"
            );
            for pass in ["pass", "pass_with_data", "typed_pass", "typed_pass_with_data"] {
                // SAFETY: every pass is `int (*)(int)`; called while `lease` lives.
                let twice = unsafe { lease.pass::<IntPass>(pass) }.unwrap();
                assert_eq!(twice(21), 42, "{name}: {pass}");
                let data = twice.user_data().cast::<i32>();
                if pass.ends_with("with_data") {
                    // SAFETY: registered with a pointer to the plugin's live `int` (5).
                    assert_eq!(unsafe { *data }, 5, "{name}: {pass}");
                } else {
                    assert!(data.is_null(), "{name}: {pass}");
                }
            }
            drop(lease);
            assert_unloaded(&lib);
        }
    }
}

#[test]
fn a_plugin_written_with_the_macros_fails_with_its_own_message() {
    for lang in ["c", "cpp"] {
        let name = format!("macros_{lang}_failing");
        let dir = TestDir::new(&name);
        let lib = dir.add(&name, "libmacros_failing.so");
        // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
        let host = unsafe { PluginHost::builder().file(&lib).build() }.unwrap();
        let error = host.acquire().unwrap_err();
        assert!(matches!(error, Error::RegisterFailed { .. }), "{name}: {error:?}");
        assert_eq!(
            error.to_string(),
            format!(
                "plugin file `{}` failed to register its passes: no NPU device found (`register_passes` returned -1)",
                lib.display()
            ),
            "{name}"
        );
        assert_unloaded(&lib);
    }
}
