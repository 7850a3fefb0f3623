//! Discovery: which files a directory contributes, in what order, and the errors that name
//! a bad source.

use std::fs;
use std::os::unix::fs::symlink;

use dylease::{Error, PluginHost};

use crate::support::TestDir;

#[test]
fn a_directory_loads_its_libraries_in_byte_order_of_name_and_ignores_other_files() {
    let dir = TestDir::new("discovery_order");
    dir.add("p3", "libc.so");
    dir.add("p1", "liba.so");
    dir.add("p2", "libB.so"); // 'B' < 'a' in byte order
    fs::write(dir.path().join("README.txt"), "not a plugin").unwrap();
    fs::write(dir.path().join("libd.so.disabled"), "not a plugin").unwrap();
    fs::create_dir(dir.path().join("sub.so")).unwrap(); // a directory, not a library
    let host = PluginHost::builder().dir(dir.path()).build().unwrap();
    let lease = host.acquire().unwrap();
    let names: Vec<_> = lease.plugins().iter().map(|p| p.name()).collect();
    assert_eq!(names, ["p2", "p1", "p3"]);
}

#[test]
fn a_library_reached_twice_through_a_symlink_or_two_sources_loads_once() {
    let dir = TestDir::new("discovery_dedupe");
    let lib = dir.add("p1", "liba.so");
    symlink(&lib, dir.path().join("libz.so")).unwrap();
    let host = PluginHost::builder().dir(dir.path()).file(&lib).build().unwrap();
    let lease = host.acquire().unwrap();
    assert_eq!(lease.plugins().len(), 1);
    assert_eq!(lease.plugins()[0].path(), Some(lib.as_path()));
}

#[test]
fn a_missing_directory_is_an_error_naming_it() {
    let dir = TestDir::new("discovery_missing");
    let missing = dir.path().join("nope");
    let host = PluginHost::builder().dir(&missing).build().unwrap();
    let error = host.acquire().unwrap_err();
    assert!(
        matches!(&error, Error::Io { path, .. } if path == &missing),
        "{error:?}"
    );
    assert!(error.to_string().contains(&*missing.to_string_lossy()), "{error}");
}

#[test]
fn a_file_given_as_a_directory_is_an_error_naming_it() {
    let dir = TestDir::new("discovery_not_dir");
    let lib = dir.add("p1", "liba.so");
    let host = PluginHost::builder().dir(&lib).build().unwrap();
    let error = host.acquire().unwrap_err();
    assert!(matches!(&error, Error::Io { path, .. } if path == &lib), "{error:?}");
    assert!(error.to_string().contains("not a directory"), "{error}");
}

#[test]
fn a_hard_link_to_a_library_already_planned_loads_once() {
    // glibc matches an already-loaded object by device and inode: two names, one library.
    let dir = TestDir::new("discovery_hardlink");
    let lib = dir.add("p1", "liba.so");
    fs::hard_link(&lib, dir.path().join("libb.so")).unwrap();
    let host = PluginHost::builder().dir(dir.path()).build().unwrap();
    let lease = host.acquire().unwrap();
    assert_eq!(lease.plugins().len(), 1);
    assert_eq!(lease.plugins()[0].path(), Some(lib.as_path()));
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
    let host = PluginHost::builder().dir(dir.path()).build().unwrap();
    let lease = host.acquire().unwrap();
    let loaded: Vec<_> = lease.plugins().iter().map(|p| p.path().unwrap().to_owned()).collect();
    assert_eq!(loaded, files);

    let missing = dir.path().join("nope");
    let error = dylease::plugin_files_in(&missing).unwrap_err();
    assert!(
        matches!(&error, Error::Io { path, .. } if path == &missing),
        "{error:?}"
    );
}
