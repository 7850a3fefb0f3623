//! The file that runs is the file that was checked (I9), against what another user could
//! swap in after the trust check: a symlink (to the very file checked), a FIFO (which would
//! block an open that waits for a writer), and a file of another file system with the checked
//! inode number.

use std::ffi::CString;
use std::fs::{self, OpenOptions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use dylease::{Error, PluginHost};

use crate::support::{TestDir, assert_unloaded};

/// How long a test waits for a load: a load that blocks fails the test instead of hanging.
const PATIENCE: Duration = Duration::from_secs(30);

/// A directory whose `liba.so` (`swap_on_load`), loaded first, renames `stage.new` onto
/// `libb.so` (a plugin, checked before `liba.so`'s constructor runs). Returns the directory
/// and `libb.so`'s path; the caller makes `stage.new`.
fn swapping_dir(test: &str) -> (TestDir, PathBuf) {
    let dir = TestDir::new(test);
    dir.add("swap_on_load", "liba.so");
    let checked = dir.add("p1", "libb.so");
    (dir, checked)
}

/// Acquires from a strict host over `dir` on a thread of its own; the outcome, or `None` if
/// it did not finish within [`PATIENCE`] (the thread is then left behind, blocked).
fn acquire_bounded(dir: &Path) -> Option<Result<usize, Error>> {
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(dir).build() }.unwrap();
    let (done, outcome) = mpsc::channel();
    thread::spawn(move || {
        let _ = done.send(host.acquire().map(|lease| lease.plugins().len()));
    });
    outcome.recv_timeout(PATIENCE).ok()
}

#[test]
fn a_symlink_to_the_checked_file_swapped_in_after_the_check_is_not_followed() {
    // The checked inode stays the same (a hard link keeps it), but the name now goes through
    // a link the check never saw, into a directory others can write: the open does not follow
    // it, and the new name is checked again (and refused) instead.
    let (dir, checked) = swapping_dir("swapped_symlink");
    let aside = dir.sub("aside");
    fs::set_permissions(&aside, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    fs::hard_link(&checked, aside.join("real.so")).unwrap();
    symlink("aside/real.so", dir.path().join("stage.new")).unwrap();
    let outcome = acquire_bounded(dir.path()).expect("the load did not finish");
    assert!(
        fs::symlink_metadata(&checked).unwrap().file_type().is_symlink(),
        "the constructor did not swap the file: the test proves nothing"
    );
    let error = outcome.expect_err("a symlink swapped in after the check was followed");
    assert!(
        matches!(&error, Error::Open { path, .. } | Error::Untrusted { path, .. } if path == &checked),
        "{error:?}"
    );
    assert_unloaded(&aside.join("real.so"));
}

#[test]
fn a_fifo_swapped_in_after_the_check_fails_the_load_instead_of_blocking_it() {
    let (dir, checked) = swapping_dir("swapped_fifo");
    let stage = CString::new(dir.path().join("stage.new").as_os_str().as_bytes()).unwrap();
    // SAFETY: `stage` is a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(stage.as_ptr(), 0o644) }, 0);
    let outcome = acquire_bounded(dir.path());
    let Some(outcome) = outcome else {
        // Let the blocked open go (it waits for a writer), then fail.
        let _ = OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&checked);
        panic!("opening a FIFO swapped in after the check blocked the load");
    };
    assert!(
        fs::symlink_metadata(&checked).unwrap().file_type().is_fifo(),
        "the constructor did not swap the file: the test proves nothing"
    );
    let error = outcome.expect_err("a FIFO was loaded");
    assert!(
        matches!(&error, Error::Open { path, .. } | Error::Untrusted { path, .. } if path == &checked),
        "{error:?}"
    );
}

/// `mount(2)` with C strings; panics naming the call if it fails.
fn mount(source: &str, target: &Path, fstype: Option<&str>, flags: libc::c_ulong, data: Option<&str>) {
    let c = |s: &str| CString::new(s).unwrap();
    let (source, target) = (c(source), CString::new(target.as_os_str().as_bytes()).unwrap());
    let (fstype, data) = (fstype.map(c), data.map(c));
    // SAFETY: every pointer is NULL or a NUL-terminated string that outlives the call.
    let done = unsafe {
        libc::mount(
            source.as_ptr(),
            target.as_ptr(),
            fstype.as_ref().map_or(std::ptr::null(), |s| s.as_ptr()),
            flags,
            data.as_ref().map_or(std::ptr::null(), |s| s.as_ptr().cast()),
        )
    };
    assert_eq!(done, 0, "mount {target:?}: {}", std::io::Error::last_os_error());
}

#[test]
#[ignore = "needs root"]
fn a_file_of_another_file_system_with_the_checked_inode_number_is_refused() {
    // Two tmpfs mounts number their inodes alike, so a file on the second can have the inode
    // number of the checked file on the first; `liba.so`'s constructor bind-mounts it over the
    // checked `libb.so`. Only the device tells the two apart. All of it happens in a mount
    // namespace of this test's thread, which ends with it.
    crate::bounded::bounded("the other-device test", PATIENCE, || {
        // SAFETY: `unshare` has no memory preconditions; CLONE_NEWNS gives this thread (and
        // only it: it also unshares the file system attributes) a mount namespace of its own.
        let unshared = unsafe { libc::unshare(libc::CLONE_NEWNS) };
        assert_eq!(
            unshared,
            0,
            "unshare: {} (run as root)",
            std::io::Error::last_os_error()
        );
        mount("none", Path::new("/"), None, libc::MS_REC | libc::MS_PRIVATE, None);
        let base = TestDir::new("other_device");
        let (a, b) = (base.sub("a"), base.sub("b"));
        for dir in [&a, &b] {
            mount("tmpfs", dir, Some("tmpfs"), 0, Some("mode=0755"));
        }
        let plugins = TestDir::new("other_device_fixtures");
        let copy = |fixture: &str, to: &Path| {
            let from = plugins.add(fixture, "lib.so");
            fs::copy(&from, to).unwrap();
            fs::set_permissions(to, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        };
        copy("mount_on_load", &a.join("liba.so"));
        let checked = a.join("libb.so");
        copy("p1", &checked);
        let wanted = fs::metadata(&checked).unwrap().ino();
        // Files on `b` until one has the checked inode number: that one becomes theirs.
        let theirs = b.join("libb.so");
        for n in 0..10_000 {
            let candidate = b.join(format!("f{n}"));
            fs::write(&candidate, b"").unwrap();
            if fs::metadata(&candidate).unwrap().ino() == wanted {
                fs::rename(&candidate, &theirs).unwrap();
                break;
            }
        }
        let theirs_metadata = fs::metadata(&theirs).expect("no file on b with the checked inode number");
        assert_eq!(theirs_metadata.ino(), wanted);
        assert_ne!(theirs_metadata.dev(), fs::metadata(&checked).unwrap().dev());
        copy("by_hand_marker", &theirs);
        // Theirs fails the trust check (writable by others): a file seen as replaced is
        // checked again and refused; one taken for the checked file would run.
        fs::set_permissions(&theirs, std::os::unix::fs::PermissionsExt::from_mode(0o666)).unwrap();

        // SAFETY: the libraries are this suite's own fixtures, whose initialisation code is sound.
        let host = unsafe { PluginHost::builder().dir(&a).build() }.unwrap();
        let outcome = host.acquire().map(|lease| lease.plugins().len());
        assert_eq!(
            fs::metadata(&checked).unwrap().dev(),
            theirs_metadata.dev(),
            "the constructor did not bind theirs over the checked file: the test proves nothing"
        );
        let error = outcome.expect_err("a file of another file system was loaded as the checked one");
        assert!(
            matches!(&error, Error::Untrusted { path, .. } if path == &checked),
            "{error:?}"
        );
        assert!(
            !b.join("libb.so.ran").exists() && !a.join("libb.so.ran").exists(),
            "their constructor ran"
        );
        drop(host);
        for target in [&checked, &a, &b] {
            let target = CString::new(target.as_os_str().as_bytes()).unwrap();
            // SAFETY: a NUL-terminated path that outlives the call.
            unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
        }
    });
}

#[test]
fn a_file_rewritten_in_place_after_the_check_is_read_and_checked_again() {
    // The same inode at the same path, so the descriptor the trust check opened would still
    // name it; but its bytes changed after the check read them. The load must judge what is
    // there now (a 64-byte stub, which the ELF check refuses), not what the check read.
    let dir = TestDir::new("rewritten_in_place");
    let first = dir.add("truncate_on_load", "liba.so");
    let checked = dir.add("p1", "libb.so");
    let inode = fs::metadata(&checked).unwrap().ino();
    let outcome = acquire_bounded(dir.path()).expect("the load did not finish");
    let now = fs::metadata(&checked).unwrap();
    assert!(
        now.len() == 64 && now.ino() == inode,
        "the constructor did not rewrite the file in place: the test proves nothing"
    );
    let error = outcome.expect_err("a file truncated after its check was loaded");
    assert!(
        matches!(&error, Error::Open { path, cause: dylease::OpenCause::Headers, .. } if path == &checked),
        "the ELF check did not judge the file as it is now (a refusal by the loader means it \
         judged the bytes read before the rewrite): {error:?}"
    );
    assert_unloaded(&first);
    assert_unloaded(&checked);
}

/// An on-demand host under `Permissive` over a directory holding the plugin `libq.so`
/// (`demand_q`, complete manifest), acquired: the plugin is judged (its identity kept) and
/// not mapped. Then `swap` replaces it, and its first use opens the path again: the open of a
/// file judged earlier whose directory this load's walk did not pass, by `no_follow`
/// (`O_NOFOLLOW | O_NONBLOCK`). Returns the first use's outcome (`None` if it did not finish
/// within [`PATIENCE`]: the thread is left behind, after `unblock` ran) and the plugin's path.
fn first_use_after(
    dir: &TestDir,
    swap: impl FnOnce(&Path),
    unblock: impl FnOnce(&Path),
) -> (Option<Result<(), Error>>, PathBuf) {
    let plugins = dir.sub("plugins");
    let lib = plugins.join("libq.so");
    fs::copy(crate::support::fixture("demand_q"), &lib).unwrap();
    // SAFETY: the directory holds this suite's own fixture, whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(&plugins) }
        .trust(dylease::TrustPolicy::Permissive)
        .on_demand()
        .build()
        .unwrap();
    let lease = host.acquire().unwrap();
    assert!(
        !lease.plugins()[0].is_mapped(),
        "mapped at the acquire: the test proves nothing"
    );
    swap(&lib);
    let (done, outcome) = mpsc::channel();
    thread::spawn(move || {
        // SAFETY: the pass is an `int (*)(int)`; it is looked up, not called.
        let used = unsafe { lease.pass::<unsafe extern "C" fn(i32) -> i32>("q_pass") }.map(drop);
        let _ = done.send(used);
    });
    let outcome = outcome.recv_timeout(PATIENCE).ok();
    if outcome.is_none() {
        unblock(&lib);
    }
    (outcome, lib)
}

/// A FIFO swapped in for an on-demand plugin after its acquire, right before its first use's
/// open: the first use fails, as a file replaced since the acquire, instead of blocking (an
/// open of a FIFO for reading waits for a writer). Caught: that open without `O_NONBLOCK`.
#[test]
fn a_fifo_swapped_in_before_an_on_demand_first_use_fails_it_instead_of_blocking() {
    let dir = TestDir::new("swapped_fifo_first_use");
    let (outcome, lib) = first_use_after(
        &dir,
        |lib| {
            let stage = dir.path().join("stage.fifo");
            let name = CString::new(stage.as_os_str().as_bytes()).unwrap();
            // SAFETY: `name` is a NUL-terminated path that outlives the call.
            assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o644) }, 0);
            fs::rename(&stage, lib).unwrap();
        },
        |lib| {
            // Let the blocked open go (it waits for a writer).
            let _ = OpenOptions::new().write(true).custom_flags(libc::O_NONBLOCK).open(lib);
        },
    );
    let outcome = outcome.expect("opening a FIFO swapped in before the first use blocked it");
    assert!(fs::symlink_metadata(&lib).unwrap().file_type().is_fifo());
    crate::on_demand::assert_replaced_since_acquire(&outcome.unwrap_err(), &lib);
}

/// A symlink to another user's library swapped in for an on-demand plugin after its acquire,
/// right before its first use's open: the first use fails, as a file replaced since the
/// acquire, and none of that library's code runs. (The identity the acquire judged refuses
/// the library too once it is opened, so this holds with or without `O_NOFOLLOW`: the FIFO
/// test is the one that catches that open's flags.)
#[test]
fn a_symlink_to_another_library_swapped_in_before_an_on_demand_first_use_runs_none_of_it() {
    let dir = TestDir::new("swapped_symlink_first_use");
    let theirs = dir.add("demand_evil", "libevil.so");
    let (outcome, lib) = first_use_after(
        &dir,
        |lib| {
            let stage = dir.path().join("stage.link");
            symlink(&theirs, &stage).unwrap();
            fs::rename(&stage, lib).unwrap();
        },
        |_| {},
    );
    let outcome = outcome.expect("the first use did not finish");
    assert!(fs::symlink_metadata(&lib).unwrap().file_type().is_symlink());
    crate::on_demand::assert_replaced_since_acquire(&outcome.unwrap_err(), &lib);
    assert!(
        !crate::support::beside(&theirs, ".log").exists(),
        "the swapped-in library's code ran"
    );
    assert_unloaded(&theirs);
}
