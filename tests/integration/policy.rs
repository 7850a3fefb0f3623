//! `LoadPolicy::SkipFailed`: failed plugins are closed, logged and recorded; the others load.

use std::fs::{self, Permissions};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::ptr;

use dylease::{Error, LoadPolicy, Origin, PluginHost, Registrar};
use log::Level;

use crate::logger;
use crate::support::{TestDir, assert_loaded, assert_unloaded, mapped};

extern "C" fn double(x: i32) -> i32 {
    2 * x
}

#[test]
fn skip_failed_loads_the_good_plugins_and_reports_each_failure() {
    logger::install();
    let dir = TestDir::new("skip_failed");
    let good = [dir.add("p1", "liba.so"), dir.add("p3", "libf.so")];
    let no_entry = dir.add("noentry", "libb.so");
    let text = dir.path().join("libc.so");
    fs::write(&text, "not a library").unwrap();
    let dangling = dir.path().join("libd.so");
    symlink(dir.path().join("libgone.so"), &dangling).unwrap();
    let untrusted = dir.add("p2", "libe.so");
    fs::set_permissions(&untrusted, Permissions::from_mode(0o775)).unwrap();
    let configure = |policy| {
        // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
        unsafe {
            PluginHost::builder()
                .dir(dir.path())
                .static_plugin("refuses", |_reg| Err(dylease::RegisterError::custom("not today")))
                .static_plugin("panics", |_reg| panic!("skip_failed test panic"))
                .static_plugin("fine", |_reg| Ok(()))
                .policy(policy)
                .build()
        }
        .unwrap()
    };

    // Strict: the first file that cannot be used fails the load before any library opens.
    let error = configure(LoadPolicy::Strict).acquire().unwrap_err();
    assert!(
        matches!(&error, Error::Io { path, .. } if path == &dangling),
        "{error:?}"
    );
    good.iter().for_each(|lib| assert_unloaded(lib));

    let host = configure(LoadPolicy::SkipFailed);
    assert_eq!(host.policy(), LoadPolicy::SkipFailed);
    let lease = host.acquire().unwrap();
    let names: Vec<_> = lease.plugins().iter().map(|p| p.name()).collect();
    assert_eq!(names, ["p1", "p3", "fine"]);
    good.iter().for_each(|lib| assert_loaded(lib));
    for bad in [&no_entry, &text, &untrusted] {
        assert!(!mapped(bad), "{} stayed mapped", bad.display());
    }

    let failures: Vec<_> = lease
        .failures()
        .iter()
        .map(|f| (f.origin().clone(), f.error()))
        .collect();
    assert_eq!(failures.len(), 6, "{failures:#?}");
    assert!(matches!(failures[0], (Origin::File(ref p), Error::MissingEntry { .. }) if p == &no_entry));
    assert!(matches!(failures[1], (Origin::File(ref p), Error::Open { .. }) if p == &text));
    assert!(matches!(failures[2], (Origin::File(ref p), Error::Io { .. }) if p == &dangling));
    assert!(matches!(failures[3], (Origin::File(ref p), Error::Untrusted { .. }) if p == &untrusted));
    assert!(matches!(failures[4], (Origin::Static(ref n), Error::RegisterFailed { .. }) if n == "refuses"));
    assert!(matches!(failures[5], (Origin::Static(ref n), Error::Panicked { .. }) if n == "panics"));
    assert_eq!(lease.failures()[0].origin().path(), Some(no_entry.as_path()));
    assert_eq!(lease.failures()[4].origin().path(), None);

    // Each failure is logged as a warning with the error's message, which names the plugin.
    for failure in lease.failures() {
        let warnings = logger::records(Level::Warn, &failure.to_string());
        assert!(!warnings.is_empty(), "no warning for {failure}");
    }
    assert!(!logger::records(Level::Warn, &format!("`{}`", untrusted.display())).is_empty());

    drop(lease);
    good.iter().for_each(|lib| assert_unloaded(lib));
}

#[test]
fn skip_failed_keeps_the_first_registration_of_a_pass_name_and_the_rest_of_the_second_plugin() {
    logger::install();
    let dir = TestDir::new("skip_duplicate");
    let arith = dir.add("arith", "libarith.so");
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe {
        PluginHost::builder()
            .static_plugin("first", |reg| {
                reg.add_pass("double", double as extern "C" fn(i32) -> i32, ptr::null_mut())
            })
            .file(&arith)
            .policy(LoadPolicy::SkipFailed)
            .build()
    }
    .unwrap();
    let lease = host.acquire().unwrap();
    assert_eq!(lease.plugins().len(), 2, "the second plugin stays");
    assert_eq!(lease.pass_info("double").unwrap().plugin(), "first");
    // SAFETY: arith.c registers `add_one` as `int (*)(int)`.
    let add_one = unsafe { lease.pass::<extern "C" fn(i32) -> i32>("add_one") }.unwrap();
    assert_eq!(add_one(1), 2);
    assert_eq!(add_one.info().plugin(), "arith");

    let [failure] = lease.failures() else {
        panic!("expected one failure, got {:?}", lease.failures());
    };
    assert_eq!(failure.origin().path(), Some(arith.as_path()));
    match failure.error() {
        Error::DuplicatePass {
            pass, first, second, ..
        } => {
            assert_eq!(pass, "double");
            assert_eq!(first, &Origin::Static("first".into()));
            assert_eq!(second, &Origin::File(arith.clone()));
        }
        other => panic!("expected DuplicatePass, got {other:?}"),
    }
    let warning = format!(
        "skipped under LoadPolicy::SkipFailed: pass `double` is registered by both static plugin `first` and \
         plugin file `{}`; rename one of them",
        arith.display()
    );
    assert_eq!(logger::records(Level::Warn, &warning).len(), 1);

    // Under the default policy the same configuration is an error naming both plugins.
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let strict = unsafe {
        PluginHost::builder()
            .static_plugin("first", |reg| {
                reg.add_pass("double", double as extern "C" fn(i32) -> i32, ptr::null_mut())
            })
            .file(&arith)
            .build()
    }
    .unwrap();
    drop(lease);
    let error = strict.acquire().unwrap_err();
    assert!(matches!(error, Error::DuplicatePass { .. }), "{error:?}");
    assert_unloaded(&arith);
}

#[test]
fn a_plugin_skipped_at_every_load_is_warned_about_once_per_host() {
    logger::install();
    let dir = TestDir::new("skip_once");
    let noentry = dir.add("noentry", "libnoentry.so");
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&noentry) }
        .name("skip-once-host")
        .policy(LoadPolicy::SkipFailed)
        .build()
        .unwrap();
    for _ in 0..3 {
        let lease = host.acquire().unwrap();
        assert_eq!(lease.failures().len(), 1);
    }
    assert_eq!(host.stats().loads, 3);
    let needle = format!(
        "[skip-once-host] skipped under LoadPolicy::SkipFailed: plugin file `{}`",
        noentry.display()
    );
    assert_eq!(logger::records(Level::Warn, &needle).len(), 1, "one warning per cause");
    assert_eq!(logger::records(Level::Debug, &needle).len(), 2, "the repeats at debug");
}
