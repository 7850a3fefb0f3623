//! The file that runs is the file that was checked (I9): the loader maps the descriptor the
//! trust and ELF checks read, whatever is renamed over the path meanwhile, and the registry
//! never takes one file for another. Each test fails if the loader is given the path again.

use std::fs::{self, Permissions};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};

use dylease::{Error, PluginHost};

use crate::support::{TestDir, assert_unloaded, await_that, beside, mapped, mapped_containing};

/// Installs fixture `name` as `dir/libx.so` by rename, as plugins must be installed.
fn install(dir: &TestDir, name: &str) -> PathBuf {
    let partial = dir.add(name, ".libx.so.partial");
    let to = dir.path().join("libx.so");
    fs::rename(&partial, &to).unwrap();
    to
}

fn host(plugins: &TestDir) -> PluginHost {
    // SAFETY: the libraries are this suite's own fixtures, whose initialisation code is sound.
    unsafe { PluginHost::builder().dir(plugins.path()).build() }.unwrap()
}

/// How many of this process's descriptors are open on `path`'s current file.
fn descriptors_on(path: &Path) -> usize {
    let wanted = fs::metadata(path).map(|m| std::os::unix::fs::MetadataExt::ino(&m)).ok();
    fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|fd| {
            fs::metadata(fd.path())
                .map(|m| Some(std::os::unix::fs::MetadataExt::ino(&m)) == wanted)
                .unwrap_or(false)
        })
        .count()
}

/// Whether thread `tid` of this process sleeps in `futex` (a condition variable's wait).
fn in_futex_wait(tid: i32) -> bool {
    // `/proc/self/task/TID/syscall`: the number of the system call the thread is blocked in.
    let state = fs::read_to_string(format!("/proc/self/task/{tid}/syscall")).unwrap_or_default();
    tid != 0 && state.split(' ').next() == Some(libc::SYS_futex.to_string().as_str())
}

type Version = unsafe extern "C" fn() -> i32;

/// The address and result of the plugin's `version` pass.
fn version(lease: &dylease::Lease) -> (usize, i32) {
    // SAFETY: `version` is `int (*)(void)` in every fixture that has it.
    let pass = unsafe { lease.pass::<Version>("version") }.unwrap();
    // SAFETY: called while `lease`, which the pass borrows, lives.
    (*pass as usize, unsafe { (*pass)() })
}

#[test]
fn a_load_waiting_for_an_unload_maps_the_file_it_checked_not_the_one_renamed_in_meanwhile() {
    // Host A's instance of `libx.so` unloads slowly (its on_unload waits for the test). Host B
    // checks the same file and waits for that unload (I1). Meanwhile another file, writable
    // by others, is renamed over `libx.so`. B must map the file it checked: version 1's code
    // runs again, and not one instruction of the renamed-in file (whose constructor marks).
    let plugins = TestDir::new("identity_wait_rename");
    let lib = install(&plugins, "slow_unload");
    let (a, b) = (host(&plugins), host(&plugins));
    let lease = a.acquire().unwrap();
    let waiter = AtomicI32::new(0);
    std::thread::scope(|scope| {
        let unloading = scope.spawn(move || drop(lease));
        await_that("A's on_unload started", || beside(&lib, ".unloading").exists());
        let waiting = scope.spawn(|| {
            // SAFETY: gettid has no preconditions.
            waiter.store(unsafe { libc::gettid() }, Ordering::Release);
            b.acquire()
        });
        // B holds the checked descriptor once it opened the file (A's instance holds one),
        // and waits for A's unload in the registry (a futex wait) once it checked it: only
        // then is the rename "meanwhile", not during B's checks (which may refuse it). A futex
        // wait is any blocked lock or condition variable; after the open, the only one B can
        // block in for long is the registry's wait for A's unload, which lasts until `.go`.
        await_that("B checked the file and waits for A's unload", || {
            descriptors_on(&lib) >= 2 && in_futex_wait(waiter.load(Ordering::Acquire))
        });
        let theirs = plugins.add("by_hand_marker", ".theirs.partial");
        fs::set_permissions(&theirs, Permissions::from_mode(0o666)).unwrap();
        fs::rename(&theirs, &lib).unwrap();
        fs::write(beside(&lib, ".go"), "").unwrap();
        unloading.join().unwrap();
        let lease = waiting.join().unwrap().expect("B loads the file it checked");
        assert_eq!(lease.plugins()[0].name(), "slow-unload");
        assert_eq!(version(&lease).1, 1);
        assert!(!beside(&lib, ".ran").exists(), "the renamed-in file's code ran");
        drop(lease);
    });
    // What is there now is refused by a new load, before any of its code runs.
    let error = host(&plugins).acquire().unwrap_err();
    assert!(
        matches!(&error, Error::Untrusted { path, .. } if path == &lib),
        "{error:?}"
    );
    assert!(!beside(&lib, ".ran").exists(), "the renamed-in file's code ran");
    assert!(!mapped_containing(&lib.display().to_string()));
}

#[test]
fn hosts_over_two_names_of_one_file_share_its_instance_and_its_code() {
    // A hard link is the same file: its instance is shared (one on_load), whichever name a
    // host was given, and a host over the other name runs that file's code.
    let first = TestDir::new("identity_link_a");
    let second = TestDir::new("identity_link_b");
    let lib = install(&first, "slow_unload_2");
    let link = second.path().join("liby.so");
    fs::hard_link(&lib, &link).unwrap();
    fs::write(beside(&lib, ".go"), "").unwrap();
    let (a, b) = (host(&first), host(&second));
    let (one, two) = (a.acquire().unwrap(), b.acquire().unwrap());
    assert_eq!(version(&two).1, 2);
    assert_eq!(version(&one), version(&two), "two instances of one file");
    let log = fs::read_to_string(beside(&lib, ".log")).unwrap_or_default()
        + &fs::read_to_string(beside(&link, ".log")).unwrap_or_default();
    assert_eq!(log.matches("on_load").count(), 1, "{log}");
    drop((one, two));
    assert_unloaded(&lib);
}

#[test]
fn a_changed_file_loads_beside_its_old_mapping_without_a_private_copy() {
    // The loader is given the checked descriptor, under a name no other file has, so a new
    // version is mapped beside the draining old one from its own file: nothing is copied.
    let plugins = TestDir::new("identity_no_copy");
    let lib = install(&plugins, "stateful");
    let host = host(&plugins);
    let old = host.acquire().unwrap();
    install(&plugins, "by_hand");
    let new = host.reload().unwrap();
    assert_eq!(old.plugins()[0].name(), "stateful");
    assert_eq!(new.plugins()[0].name(), "by-hand");
    let maps = crate::support::maps_text();
    let name = lib.display().to_string();
    assert!(
        maps.lines().any(|l| l.ends_with(&format!("{name} (deleted)"))),
        "the old version is not mapped"
    );
    assert!(mapped(&lib), "the new version is not mapped from its own file");
    assert!(!mapped_containing("dylease-reload-"), "a private copy was made");
    drop((old, new));
    assert_unloaded(&lib);
}

#[test]
fn a_file_replaced_after_its_pinned_instance_unloaded_loads_the_new_code() {
    // glibc matches an open by name before anything else. A pinned library (-z nodelete)
    // keeps its mapping after its instance unloaded; had the loader been given the path, it
    // would hand back that old mapping and the "new" instance would run the old code.
    let plugins = TestDir::new("review_pinned_replaced");
    let lib = install(&plugins, "on_load_state_nodelete");
    let host = host(&plugins);
    let first = host.acquire().unwrap();
    assert_eq!(first.plugins()[0].name(), "on-load-state");
    drop(first);
    assert!(
        mapped(&lib),
        "the fixture is linked with -z nodelete and must stay mapped"
    );
    install(&plugins, "by_hand");
    let second = host.acquire().unwrap();
    assert_eq!(
        second.plugins()[0].name(),
        "by-hand",
        "the file was replaced, but the lease runs the pinned old mapping's code"
    );
    drop(second);
    let third = host.reload().unwrap();
    assert_eq!(third.plugins()[0].name(), "by-hand", "reload too");
}

#[test]
fn a_new_file_is_never_handed_a_pinned_library_whose_descriptor_number_it_reuses() {
    // The loader keeps the name it was given (`/proc/self/fd/N`) for a library it never
    // unloads (-z nodelete), and matches a later open of the same name to it without looking
    // at the file. Files loaded one after another get the lowest free descriptor numbers:
    // each must still run its own code.
    let fixtures = ["ctor_nodelete", "on_load_state_nodelete"];
    let names = ["ctor", "on-load-state"];
    for round in 0..8 {
        let plugins = TestDir::new("identity_pinned_names");
        install(&plugins, fixtures[round % 2]);
        let lease = host(&plugins).acquire().unwrap();
        assert_eq!(
            lease.plugins()[0].name(),
            names[round % 2],
            "round {round}: another file's pinned mapping"
        );
    }
}
