//! The file that runs is the file that was checked (I8), against what another user could
//! swap in after the trust check: a symlink (to the very file checked), a FIFO (which would
//! block an open that waits for a writer), and a directory for private copies that others
//! could enter.

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

/// A directory whose `liba.so` (`swap_on_load`), loaded first, renames `stage.so` onto
/// `libb.so` (a plugin, checked before `liba.so`'s constructor runs). Returns the directory
/// and `libb.so`'s path; the caller makes `stage.so`.
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
    // a link the check never saw: the open does not follow it.
    let (dir, checked) = swapping_dir("swapped_symlink");
    let aside = dir.sub("aside");
    fs::hard_link(&checked, aside.join("real.so")).unwrap();
    symlink("aside/real.so", dir.path().join("stage.so")).unwrap();
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
    let stage = CString::new(dir.path().join("stage.so").as_os_str().as_bytes()).unwrap();
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

#[test]
fn a_private_copy_lives_in_a_directory_of_mode_0700_owned_by_this_user() {
    let plugins = TestDir::new("private_copy_mode");
    let copies = TestDir::new("private_copy_mode_copies");
    let lib = plugins.add("p1", "libp1.so");
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe {
        PluginHost::builder()
            .dir(plugins.path())
            .reload_dir(copies.path())
            .build()
    }
    .unwrap();
    let old = host.acquire().unwrap();
    // A changed file (a new inode by rename) while the old instance lives: loaded from a copy.
    let partial = plugins.add("p1", ".libp1.so.partial");
    fs::rename(&partial, &lib).unwrap();
    let fresh = host.reload().unwrap();
    let private: Vec<PathBuf> = fs::read_dir(copies.path())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert_eq!(private.len(), 1, "one private directory: {private:?}");
    let metadata = fs::symlink_metadata(&private[0]).unwrap();
    assert!(metadata.is_dir());
    assert_eq!(metadata.mode() & 0o7777, 0o700, "{}", private[0].display());
    // SAFETY: `geteuid` has no preconditions.
    assert_eq!(metadata.uid(), unsafe { libc::geteuid() });
    assert!(
        crate::support::mapped(&private[0].join("libp1.so")),
        "the copy is what runs"
    );
    drop((old, fresh));
    assert!(fs::read_dir(copies.path()).unwrap().next().is_none(), "the copy stayed");
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
fn a_private_copy_is_made_from_the_checked_file_even_if_its_path_is_swapped_after_the_check() {
    // A pinned library's old instance unloads slowly (its `on_unload` waits while `hold`
    // exists); meanwhile another host's load of the file's new version passes the check and
    // waits for the file (I1). Then theirs is renamed onto the path and the unload let go.
    // The old mapping stays (pinned), so the new version loads from a private copy, which,
    // made from what was checked, is the new version, never theirs. Theirs is group-writable:
    // a load that checked it after the swap refuses it (`Untrusted`), so a lost race is seen
    // and tried again with a longer pause, never taken for a pass.
    crate::bounded::bounded("the copy-swap test", PATIENCE * 4, || {
        for attempt in 1..=5u32 {
            let plugins = TestDir::new("copy_swap");
            let copies = TestDir::new("copy_swap_copies");
            let lib = plugins.add("slow_unload_nodelete", "libslow.so");
            let hold = plugins.path().join("hold");
            fs::write(&hold, "").unwrap();
            // SAFETY: the libraries are this suite's own fixtures, whose initialisation code is sound.
            let first = unsafe { PluginHost::builder().dir(plugins.path()).build() }.unwrap();
            let old = first.acquire().unwrap();
            let partial = plugins.add("slow_unload_nodelete", ".libslow.so.partial");
            fs::rename(&partial, &lib).unwrap(); // the new version, installed by rename
            let theirs = plugins.add("by_hand_marker", ".theirs");
            fs::set_permissions(&theirs, std::os::unix::fs::PermissionsExt::from_mode(0o775)).unwrap();

            let dropper = thread::spawn(move || drop(old));
            let unloading = plugins.path().join("unloading");
            let started = std::time::Instant::now();
            while !unloading.exists() {
                assert!(started.elapsed() < PATIENCE, "the old instance did not start unloading");
                thread::sleep(Duration::from_millis(5));
            }
            // SAFETY: as above.
            let second = unsafe {
                PluginHost::builder()
                    .dir(plugins.path())
                    .reload_dir(copies.path())
                    .build()
            }
            .unwrap();
            let (done, loaded) = mpsc::channel();
            let loader = thread::spawn(move || {
                let _ = done.send(second.acquire().map(|lease| lease.plugins()[0].name().to_owned()));
            });
            // Time for the load to pass the check and wait for the file.
            thread::sleep(Duration::from_millis(200) * attempt);
            fs::rename(&theirs, &lib).unwrap();
            fs::remove_file(&hold).unwrap();
            let loaded = loaded.recv_timeout(PATIENCE).expect("the second load did not finish");
            dropper.join().unwrap();
            loader.join().unwrap();
            match loaded {
                Ok(name) => {
                    assert_eq!(name, "slow-unload", "their code ran: the copy was made from the path");
                    return;
                }
                Err(Error::Untrusted { .. }) => eprintln!("attempt {attempt}: the swap came before the check"),
                Err(error) => panic!("{error:?}"),
            }
        }
        panic!("the load never passed the check before the swap, in 5 attempts: the test proves nothing");
    });
}
