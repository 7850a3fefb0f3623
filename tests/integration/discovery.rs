//! Discovery: which files a directory contributes, in what order, and the errors that name
//! a bad source.

use std::ffi::OsStr;
use std::fs::{self, Permissions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use dylease::{Error, PluginHost};

use crate::support::{TestDir, assert_unloaded, mapped, with_permission_checks};

#[test]
fn a_directory_loads_its_libraries_in_byte_order_of_name_and_ignores_other_files() {
    let dir = TestDir::new("discovery_order");
    dir.add("p3", "libc.so");
    dir.add("p1", "liba.so");
    dir.add("p2", "libB.so"); // 'B' < 'a' in byte order
    fs::write(dir.path().join("README.txt"), "not a plugin").unwrap();
    fs::write(dir.path().join("libd.so.disabled"), "not a plugin").unwrap();
    fs::create_dir(dir.path().join("sub.so")).unwrap(); // a directory, not a library
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(dir.path()).build() }.unwrap();
    let lease = host.acquire().unwrap();
    let names: Vec<_> = lease.plugins().iter().map(|p| p.name()).collect();
    assert_eq!(names, ["p2", "p1", "p3"]);
}

#[test]
fn a_library_reached_twice_through_a_symlink_or_two_sources_loads_once() {
    let dir = TestDir::new("discovery_dedupe");
    let lib = dir.add("p1", "liba.so");
    symlink(&lib, dir.path().join("libz.so")).unwrap();
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(dir.path()).file(&lib).build() }.unwrap();
    let lease = host.acquire().unwrap();
    assert_eq!(lease.plugins().len(), 1);
    assert_eq!(lease.plugins()[0].origin().path(), Some(lib.as_path()));
}

/// Loads a good plugin from `dir` and then the plugins of `source`: the load must fail with
/// an I/O error about `culprit` that names it, with nothing loaded (discovery fails before any
/// library opens); returns the error and the host.
fn refused_source(dir: &TestDir, source: &Path, culprit: &Path) -> (Error, PluginHost) {
    let good = dir.add("p1", "libgood.so");
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&good).dir(source).build() }.unwrap();
    let error = host.acquire().unwrap_err();
    assert!(matches!(&error, Error::Io { path, .. } if path == culprit), "{error:?}");
    assert!(error.to_string().contains(&*culprit.to_string_lossy()), "{error}");
    assert_unloaded(&good);
    assert!(!host.is_loaded());
    (error, host)
}

/// The message of an `Error::Io`, and its source's: the operating system's error is the
/// source, and only the source (the `std::error::Error` convention).
fn message_and_cause(error: &Error) -> (String, String) {
    let cause = std::error::Error::source(error).expect("an I/O error has the OS error as its source");
    let message = error.to_string();
    assert!(
        !message.contains(&cause.to_string()),
        "the cause is printed twice: {message}"
    );
    (message, cause.to_string())
}

#[test]
fn a_missing_directory_is_an_error_naming_it() {
    let dir = TestDir::new("discovery_missing");
    let missing = dir.path().join("nope");
    let (error, _) = refused_source(&dir, &missing, &missing);
    assert_eq!(
        message_and_cause(&error),
        (
            format!("cannot read plugin directory `{}`", missing.display()),
            "No such file or directory (os error 2)".to_owned()
        )
    );
}

#[test]
fn a_file_given_as_a_directory_is_an_error_naming_it() {
    let dir = TestDir::new("discovery_not_dir");
    let lib = dir.add("p2", "liba.so");
    let (error, _) = refused_source(&dir, &lib, &lib);
    assert_eq!(message_and_cause(&error).1, "it is not a directory");
}

#[test]
fn a_directory_without_read_permission_is_an_error_naming_it() {
    let dir = TestDir::new("discovery_unreadable");
    let locked = dir.sub("locked");
    dir.add("p2", "locked/libhidden.so");
    fs::set_permissions(&locked, Permissions::from_mode(0o311)).unwrap();
    let good = dir.add("p1", "libgood.so");
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&good).dir(&locked).build() }.unwrap();

    // Root reads any directory; a thread without the DAC capabilities does not. A process
    // that still reads it cannot check this promise: that fails the test rather than pass it.
    let outcome = with_permission_checks(|| (fs::read_dir(&locked).is_err(), host.acquire().map(drop)));
    let error = match outcome {
        Ok((true, result)) => result.unwrap_err(),
        Ok((false, _)) | Err(_) => {
            fs::set_permissions(&locked, Permissions::from_mode(0o755)).unwrap();
            let why = outcome.err().unwrap_or_else(|| "the directory stayed readable".into());
            panic!("this process can read a directory of mode 0311 ({why}): the promise cannot be tested here");
        }
    };
    assert!(matches!(&error, Error::Io { path, .. } if path == &locked), "{error:?}");
    assert_eq!(
        message_and_cause(&error),
        (
            format!("cannot read plugin directory `{}`", locked.display()),
            "Permission denied (os error 13)".to_owned()
        )
    );
    assert_unloaded(&good);

    fs::set_permissions(&locked, Permissions::from_mode(0o755)).unwrap();
    assert_eq!(host.acquire().unwrap().plugins().len(), 2);
}

#[test]
fn a_symlink_loop_is_an_error_naming_the_link() {
    let dir = TestDir::new("discovery_loop");
    let plugins = dir.sub("plugins");
    let link = plugins.join("libloop.so");
    symlink(&link, &link).unwrap();
    let (error, host) = refused_source(&dir, &plugins, &link);
    let (_, cause) = message_and_cause(&error);
    assert!(cause.contains("Too many levels of symbolic links"), "{cause}");
    fs::remove_file(&link).unwrap();
    assert_eq!(host.acquire().unwrap().plugins().len(), 1);
}

#[test]
fn a_dangling_symlink_is_an_error_naming_the_link() {
    let dir = TestDir::new("discovery_dangling");
    let plugins = dir.sub("plugins");
    let link = plugins.join("libdangling.so");
    symlink(plugins.join("libgone.so"), &link).unwrap();
    let (error, host) = refused_source(&dir, &plugins, &link);
    assert_eq!(
        message_and_cause(&error),
        (
            format!("cannot read plugin file `{}`", link.display()),
            "No such file or directory (os error 2)".to_owned()
        )
    );
    fs::remove_file(&link).unwrap();
    assert_eq!(host.acquire().unwrap().plugins().len(), 1);
}

#[test]
fn a_file_name_that_is_not_utf8_loads_and_is_named_exactly_in_errors() {
    let dir = TestDir::new("discovery_not_utf8");
    let lib = dir.path().join(OsStr::from_bytes(b"lib\xff\xfe.so"));
    fs::copy(dir.add("p1", "libp1.tmp"), &lib).unwrap();
    fs::remove_file(dir.path().join("libp1.tmp")).unwrap();
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(dir.path()).build() }.unwrap();
    let lease = host.acquire().unwrap();
    assert_eq!(lease.plugins()[0].origin().path(), Some(lib.as_path()));
    assert!(mapped(&lib));
    drop(lease);
    assert_unloaded(&lib);

    let bad = dir.path().join(OsStr::from_bytes(b"lib\xff\xfd.so"));
    fs::write(&bad, "not a library").unwrap();
    let error = host.acquire().unwrap_err();
    assert!(matches!(&error, Error::Open { path, .. } if path == &bad), "{error:?}");
    assert!(error.to_string().contains("lib\u{FFFD}\u{FFFD}.so"), "{error}");
    assert_unloaded(&lib);
}

#[test]
fn a_file_name_at_the_length_limit_loads_and_one_beyond_it_is_an_error_naming_it() {
    let dir = TestDir::new("discovery_long_name");
    let longest = format!("lib{}.so", "a".repeat(255 - 6));
    assert_eq!(longest.len(), 255, "NAME_MAX on Linux");
    let lib = dir.add("p1", &longest);
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(dir.path()).build() }.unwrap();
    let lease = host.acquire().unwrap();
    assert_eq!(lease.plugins()[0].origin().path(), Some(lib.as_path()));
    drop(lease);
    assert_unloaded(&lib);

    let too_long = dir.path().join(format!("lib{}.so", "a".repeat(256 - 6)));
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&too_long).build() }.unwrap();
    let error = host.acquire().unwrap_err();
    assert!(
        matches!(&error, Error::Io { path, .. } if path == &too_long),
        "{error:?}"
    );
    assert_eq!(message_and_cause(&error).1, "File name too long (os error 36)");
}

#[test]
fn a_hard_link_to_a_library_already_planned_loads_once() {
    // glibc matches an already-loaded object by device and inode: two names, one library.
    let dir = TestDir::new("discovery_hardlink");
    let lib = dir.add("p1", "liba.so");
    fs::hard_link(&lib, dir.path().join("libb.so")).unwrap();
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(dir.path()).build() }.unwrap();
    let lease = host.acquire().unwrap();
    assert_eq!(lease.plugins().len(), 1);
    assert_eq!(lease.plugins()[0].origin().path(), Some(lib.as_path()));
}

#[test]
fn plugin_files_in_lists_what_the_host_would_load_in_the_same_order() {
    let dir = TestDir::new("discovery_listing");
    let c = dir.add("p3", "libc.so");
    let a = dir.add("p1", "liba.so");
    let b = dir.add("p2", "libB.so");
    symlink(&a, dir.path().join("libz.so")).unwrap(); // the same library again: listed once
    fs::write(dir.path().join("libd.so.disabled"), "not a plugin").unwrap();
    fs::create_dir(dir.path().join("sub.so")).unwrap();

    let files = dylease::plugin_files_in(dir.path()).unwrap();
    assert_eq!(files, [b, a, c]);
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(dir.path()).build() }.unwrap();
    let lease = host.acquire().unwrap();
    let loaded: Vec<_> = lease
        .plugins()
        .iter()
        .map(|p| p.origin().path().unwrap().to_owned())
        .collect();
    assert_eq!(loaded, files);

    let missing = dir.path().join("nope");
    let error = dylease::plugin_files_in(&missing).unwrap_err();
    assert!(
        matches!(&error, Error::Io { path, .. } if path == &missing),
        "{error:?}"
    );
}
