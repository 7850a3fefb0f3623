//! Failure atomicity (invariant I5): a failed load leaves nothing loaded and the host usable.

use std::fs;
use std::path::{Path, PathBuf};

use dylease::{Error, OpenCause, PluginHost};

use crate::support::{TestDir, assert_unloaded, fixture, loader_has, mapped, strip_manifest};

#[test]
fn a_load_failing_at_the_third_of_five_plugins_leaves_none_mapped_and_succeeds_once_fixed() {
    let dir = TestDir::new("fail_third");
    let libs = [
        dir.add("p1", "lib1.so"),
        dir.add("p2", "lib2.so"),
        dir.add("noentry", "lib3.so"),
        dir.add("p4", "lib4.so"),
        dir.add("p5", "lib5.so"),
    ];
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(dir.path()).build() }.unwrap();

    let error = host.acquire().unwrap_err();
    match &error {
        Error::MissingEntry { path, .. } => assert_eq!(path, &libs[2]),
        other => panic!("expected MissingEntry for lib3.so, got {other:?}"),
    }
    let message = error.to_string();
    assert!(message.contains(&*libs[2].to_string_lossy()), "{message}");
    assert!(message.contains("dylease_plugin_v1"), "{message}");
    for lib in &libs {
        assert_unloaded(lib);
    }
    assert!(!host.is_loaded());
    assert_eq!(host.generation(), 0);

    // The same failure again: the host is not stuck.
    assert!(matches!(host.acquire(), Err(Error::MissingEntry { .. })));

    fs::remove_file(&libs[2]).unwrap();
    let lease = host.acquire().unwrap();
    let names: Vec<_> = lease.plugins().iter().map(|p| p.name()).collect();
    assert_eq!(names, ["p1", "p2", "p4", "p5"]);
    assert_eq!(lease.generation(), 1);
    // SAFETY: numbered.c registers `<name>_pass` as `int (*)(int)`.
    let identity = unsafe { lease.pass::<extern "C" fn(i32) -> i32>("p4_pass") }.unwrap();
    assert_eq!(identity(9), 9);
    drop(lease);
    for lib in libs.iter().filter(|l| l.exists()) {
        assert_unloaded(lib);
    }
}

#[test]
fn a_file_that_is_not_a_library_is_an_open_error_naming_it() {
    let dir = TestDir::new("not_a_library");
    let good = dir.add("p1", "lib1.so");
    let text = dir.path().join("libx.so");
    fs::write(&text, "not an ELF file\n").unwrap();
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(dir.path()).build() }.unwrap();

    let error = host.acquire().unwrap_err();
    assert!(
        matches!(&error, Error::Open { path, cause: OpenCause::Headers, .. } if path == &text),
        "{error:?}"
    );
    assert!(
        error.to_string().starts_with(&format!(
            "cannot load plugin file `{}`: it is not an ELF shared library",
            text.display()
        )),
        "{error}"
    );
    assert!(!mapped(&text));
    assert_unloaded(&good);
}

#[test]
fn two_plugins_registering_one_pass_name_fail_with_both_named() {
    let dir = TestDir::new("duplicate_across");
    let first = dir.add("arith", "liba.so");
    let second = dir.add("arith", "libb.so");
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(dir.path()).build() }.unwrap();

    let error = host.acquire().unwrap_err();
    match &error {
        Error::DuplicatePass {
            pass,
            first: a,
            second: b,
            ..
        } => {
            assert_eq!(pass, "double");
            assert_eq!(a.path(), Some(first.as_path()));
            assert_eq!(b.path(), Some(second.as_path()));
        }
        other => panic!("expected DuplicatePass, got {other:?}"),
    }
    assert_unloaded(&first);
    assert_unloaded(&second);
}

#[test]
fn a_plugin_built_for_another_abi_version_is_refused_before_registering() {
    let dir = TestDir::new("abi_mismatch");
    let good = dir.add("by_hand", "libgood.so");
    let future = dir.add("by_hand_abi3", "libfuture.so");
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&good).build() }.unwrap();
    let lease = host.acquire().unwrap();
    // SAFETY: `seven` is `int (*)(void)`.
    assert_eq!(unsafe { lease.pass::<extern "C" fn() -> i32>("seven") }.unwrap()(), 7);
    drop(lease);

    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&future).build() }.unwrap();
    let error = host.acquire().unwrap_err();
    match &error {
        Error::AbiMismatch {
            path,
            found: 3,
            expected: 2,
            ..
        } => assert_eq!(path, &future),
        other => panic!("expected AbiMismatch, got {other:?}"),
    }
    assert!(
        error
            .to_string()
            .contains("built for dylease ABI version 3, but this host speaks versions 1 and 2"),
        "{error}"
    );
    assert_unloaded(&future);
    assert_unloaded(&good);
}

/// Loads fixture `name` after a good plugin and returns the error, after checking that the
/// error names the file, that neither library is loaded any more, and that the host loads the
/// good plugin once the bad one is gone.
fn refused(name: &str) -> Error {
    refused_file(name, |dir| dir.add(name, &format!("lib{name}.so")))
}

/// As [`refused`], for the bad file that `make` puts into the directory it is given.
fn refused_file(test: &str, make: impl FnOnce(&TestDir) -> PathBuf) -> Error {
    let dir = TestDir::new(test);
    let good = dir.add("p1", "libgood.so");
    let bad_dir = TestDir::new(&format!("{test}_bad"));
    let bad = make(&bad_dir);
    // The good plugin loads first: the failure must close it again.
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&good).dir(bad_dir.path()).build() }.unwrap();
    let error = host.acquire().unwrap_err();
    assert!(!mapped(&bad), "{} is still mapped", bad.display());
    assert!(!loader_has(&bad), "the loader still has {}", bad.display());
    assert_unloaded(&good);
    assert!(!host.is_loaded());
    assert!(
        error.to_string().contains(&*bad.to_string_lossy()),
        "the error must name the file: {error}"
    );
    assert_eq!(
        error.origin().and_then(|o| o.path().map(Path::to_owned)),
        Some(bad.clone())
    );
    fs::remove_file(&bad).unwrap();
    let lease = host.acquire().unwrap();
    assert_eq!(lease.plugins().len(), 1);
    assert_eq!(lease.plugins()[0].name(), "p1");
    drop(lease);
    assert_unloaded(&good);
    error
}

#[test]
fn a_truncated_library_is_an_open_error_saying_it_is_truncated() {
    let error = refused_file("truncated", |dir| {
        let bytes = fs::read(fixture("by_hand")).unwrap();
        let path = dir.path().join("libtruncated.so");
        fs::write(&path, &bytes[..bytes.len() / 3]).unwrap();
        path
    });
    assert!(
        matches!(
            error,
            Error::Open {
                cause: OpenCause::Headers,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        error.to_string().contains(": the file is truncated: it has "),
        "{error}"
    );
}

#[test]
fn a_library_for_another_architecture_is_an_open_error_naming_both_architectures() {
    // A copy of a real plugin with its ELF machine field patched: the loader refuses it, in
    // glibc's words, as "No such file or directory"; the error must say what is wrong.
    let (other, other_name, this_name) = if cfg!(target_arch = "aarch64") {
        (62u16, "x86_64", "AArch64")
    } else {
        (183u16, "AArch64", std::env::consts::ARCH)
    };
    let error = refused_file("other_arch", |dir| {
        let mut bytes = fs::read(fixture("by_hand")).unwrap();
        bytes[18..20].copy_from_slice(&other.to_le_bytes());
        let path = dir.path().join("libforeign.so");
        fs::write(&path, bytes).unwrap();
        path
    });
    assert!(
        matches!(
            error,
            Error::Open {
                cause: OpenCause::Headers,
                ..
            }
        ),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains(&format!("it is built for {other_name} (ELF machine {other})")),
        "{message}"
    );
    assert!(
        message.contains(&format!("but this process runs on {this_name}")),
        "{message}"
    );
}

#[test]
fn a_plugin_built_for_abi_version_zero_is_refused() {
    let error = refused("by_hand_abi0");
    assert!(
        matches!(
            error,
            Error::AbiMismatch {
                found: 0,
                expected: 2,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("built for dylease ABI version 0"), "{error}");
}

#[test]
fn a_plugin_name_one_mebibyte_long_is_refused_without_being_echoed() {
    let error = refused("by_hand_huge_name");
    assert!(matches!(error, Error::InvalidPlugin { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.ends_with("is not a valid plugin: its name is longer than 256 bytes"),
        "{message}"
    );
    assert!(
        message.len() < 1024,
        "the message repeats the name: {} bytes",
        message.len()
    );
}

#[test]
fn invalid_pass_names_fail_the_load_even_if_the_plugin_ignores_the_refusal() {
    for (fixture, pass, reason) in [
        ("by_hand_null_pass_name", "", "the name is NULL"),
        ("by_hand_empty_pass_name", "", "the name is empty"),
        (
            "by_hand_bad_utf8_pass_name",
            "bad\u{FFFD}",
            "the name is not valid UTF-8",
        ),
        (
            "by_hand_huge_pass_name",
            "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa…",
            "the name is longer than 256 bytes",
        ),
    ] {
        let error = refused(fixture);
        match &error {
            Error::InvalidPass { pass: p, reason: r, .. } => {
                assert_eq!((p.as_str(), r.as_str()), (pass, reason), "{fixture}");
            }
            other => panic!("{fixture}: expected InvalidPass, got {other:?}"),
        }
        assert!(error.to_string().ends_with(reason), "{fixture}: {error}");
    }
}

#[test]
fn a_pass_name_registered_twice_by_one_plugin_fails_even_if_the_plugin_ignores_the_refusal() {
    let error = refused("by_hand_same_pass_twice");
    assert!(
        matches!(&error, Error::DuplicatePass { pass, first, second, .. } if pass == "seven" && first == second),
        "{error:?}"
    );
    assert!(error.to_string().ends_with("registered pass `seven` twice"), "{error}");
}

#[test]
fn broken_descriptors_are_invalid_plugins_with_the_reason() {
    for (fixture, reason) in [
        ("by_hand_null_descriptor", "`dylease_plugin_v1` returned NULL"),
        ("by_hand_null_name", "its name is NULL"),
        ("by_hand_empty_name", "its name is empty"),
        ("by_hand_bad_utf8_name", "its name is not valid UTF-8"),
        ("by_hand_null_register", "its `register_passes` is NULL"),
    ] {
        let error = refused(fixture);
        assert!(matches!(error, Error::InvalidPlugin { .. }), "{fixture}: {error:?}");
        assert!(error.to_string().ends_with(reason), "{fixture}: {error}");
    }
}

#[test]
fn a_register_function_that_fails_is_reported_with_its_code() {
    let error = refused("by_hand_register_fails");
    assert!(matches!(error, Error::RegisterFailed { .. }), "{error:?}");
    assert!(
        error
            .to_string()
            .ends_with("failed to register its passes: `register_passes` returned -7"),
        "{error}"
    );
}

#[test]
fn a_pass_with_a_null_function_fails_the_load_even_if_the_plugin_ignores_the_refusal() {
    let error = refused("by_hand_null_function");
    assert!(
        matches!(&error, Error::InvalidPass { pass, .. } if pass == "broken"),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .ends_with("registered an invalid pass \"broken\": the function pointer is NULL"),
        "{error}"
    );
}

#[test]
fn a_pass_name_registered_twice_by_the_header_macros_names_the_pass() {
    // Its manifest declares the pass twice: refused before the file is mapped.
    let error = refused("duplicate");
    assert!(
        matches!(&error, Error::Open { cause: OpenCause::Manifest, reason, .. }
            if reason == "its dylease manifest declares the pass `same` twice"),
        "{error:?}"
    );
    // Without the manifest, the header's `register_passes` stops at the first refusal and
    // returns -1; the host reports the refusal, not the bare code.
    let error = refused_file("duplicate_bare", |dir| {
        let lib = dir.add("duplicate", "libduplicate.so");
        strip_manifest(&lib);
        lib
    });
    assert!(
        matches!(&error, Error::DuplicatePass { pass, .. } if pass == "same"),
        "{error:?}"
    );
    assert!(error.to_string().ends_with("registered pass `same` twice"), "{error}");
}

#[test]
fn an_unresolved_symbol_fails_at_load_not_at_first_call() {
    // RTLD_NOW: the missing function is reported by `acquire`, not by a crash later.
    let error = refused("by_hand_unresolved");
    // The ELF check passed it; the loader refused it.
    assert!(
        matches!(
            error,
            Error::Open {
                cause: OpenCause::Loader,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("dylease_test_symbol_nobody_defines"),
        "{error}"
    );
}

#[test]
fn add_pass_through_a_registrar_kept_past_registration_is_refused() {
    let dir = TestDir::new("stale_registrar");
    let lib = dir.add("by_hand_stale", "libstale.so");
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&lib).build() }.unwrap();
    let lease = host.acquire().unwrap();
    // SAFETY: by_hand.c registers `add_late` as `int (*)(void)`.
    let add_late = unsafe { lease.pass::<extern "C" fn() -> i32>("add_late") }.unwrap();
    assert!(add_late() < 0, "add_pass after registration must be refused");
    // A copy of the pointer, used only before `lease` is dropped (the thread is joined).
    let copied: extern "C" fn() -> i32 = *add_late;
    assert!(
        std::thread::spawn(move || copied()).join().unwrap() < 0,
        "and from another thread"
    );
    assert!(lease.pass_info("late").is_none());
}
