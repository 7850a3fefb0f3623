//! Attacks on reload's private copies, and a stale mapping under a plugin's name: under
//! `TrustPolicy::Strict` another user must not choose the code a reload runs, and a reload
//! must run the code that is installed now. Each test fails if its protection is removed.

use std::fs::{self, Permissions};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use dylease::{Error, PluginHost};

use crate::support::{TestDir, exchange, mapped, mapped_containing};

/// Installs fixture `name` as `dir/libx.so` by rename, as plugins must be installed.
fn install(dir: &TestDir, name: &str) -> PathBuf {
    let partial = dir.add(name, ".libx.so.partial");
    let to = dir.path().join("libx.so");
    fs::rename(&partial, &to).unwrap();
    to
}

fn host(plugins: &TestDir, copies: &Path) -> PluginHost {
    // SAFETY: the libraries are this suite's own fixtures, whose initialisation code is sound.
    unsafe { PluginHost::builder().dir(plugins.path()).reload_dir(copies).build() }.unwrap()
}

/// A reload that needs a private copy, with `copies` as the reload directory: returns what
/// the reload gave, and whether any code was mapped from under `copies` while it was held.
fn reload_through(copies: &Path, test: &str) -> (Result<(), Error>, bool) {
    let plugins = TestDir::new(test);
    install(&plugins, "stateful");
    let host = host(&plugins, copies);
    let session = host.acquire().unwrap();
    assert_eq!(session.plugins()[0].name(), "stateful");
    install(&plugins, "by_hand");
    let fresh = host.reload();
    let from_copies = mapped_containing(&copies.display().to_string());
    drop((session, fresh.as_ref().ok()));
    (fresh.map(drop), from_copies)
}

#[test]
fn a_strict_reload_never_loads_a_copy_from_a_reload_dir_others_can_write() {
    // I8: under Strict no code runs unless every directory on the way to the file opened
    // passed the checks. The private copy is opened by path from `reload_dir`; in a directory
    // that others can write and that is not sticky, another user can rename the private
    // directory away between the copy and `dlopen` and put one of their own in its place.
    let dir = TestDir::new("review_reload_dir_writable");
    let shared = dir.sub("shared");
    fs::set_permissions(&shared, Permissions::from_mode(0o777)).unwrap();
    let (result, from_copies) = reload_through(&shared, "review_reload_dir_writable_plugins");
    assert!(
        !from_copies,
        "code was mapped from a copy in `{}` (mode 0777, not sticky) under TrustPolicy::Strict; reload gave {result:?}",
        shared.display()
    );
    if let Err(error) = result {
        assert!(matches!(error, Error::Untrusted { .. }), "{error}");
        assert!(error.to_string().contains(&shared.display().to_string()), "{error}");
    }
}

#[test]
fn a_strict_reload_never_loads_a_copy_from_a_reload_dir_another_user_owns() {
    let dir = TestDir::new("review_reload_dir_theirs");
    let theirs = dir.sub("theirs");
    if let Err(e) = std::os::unix::fs::chown(&theirs, Some(12345), None) {
        panic!(
            "cannot chown {} to another user ({e}); run the tests as root",
            theirs.display()
        );
    }
    let (result, from_copies) = reload_through(&theirs, "review_reload_dir_theirs_plugins");
    assert!(
        !from_copies,
        "code was mapped from a copy in `{}` (owned by uid 12345) under TrustPolicy::Strict; reload gave {result:?}",
        theirs.display()
    );
    if let Err(error) = result {
        assert!(matches!(error, Error::Untrusted { .. }), "{error}");
    }
}

#[test]
fn names_planted_in_a_sticky_reload_dir_do_not_stop_a_reload() {
    // Another user can create entries in a sticky directory like /tmp, but not take ours. The
    // private directory's name is `dylease-reload-<pid>-<n>` with n counting from 0, and a
    // reload gives up after 16 taken names: planting the next names blocks every reload (1,000
    // covers the copies the rest of this suite makes first).
    let dir = TestDir::new("review_reload_dir_planted");
    let tmp = dir.sub("tmp");
    fs::set_permissions(&tmp, Permissions::from_mode(0o1777)).unwrap();
    for n in 0..1_000 {
        let planted = tmp.join(format!("dylease-reload-{}-{n}", std::process::id()));
        fs::create_dir(&planted).unwrap();
        std::os::unix::fs::chown(&planted, Some(12345), None).unwrap();
    }
    let (result, _) = reload_through(&tmp, "review_reload_dir_planted_plugins");
    result.expect("a reload failed because another user planted directory names in a sticky reload_dir");
}

#[test]
fn a_file_replaced_after_its_pinned_instance_unloaded_loads_the_new_code() {
    // DESIGN: glibc resolves an open by name first, so a changed file cannot be loaded beside
    // its old mapping under the same path. A pinned library (-z nodelete) keeps its mapping
    // after its instance unloaded; the registry forgot the path, so `dlopen` of the same path
    // hands back the old mapping and the "new" instance runs the old code (its on_load again).
    let plugins = TestDir::new("review_pinned_replaced");
    let copies = TestDir::new("review_pinned_replaced_copies");
    let lib = install(&plugins, "on_load_state_nodelete");
    let host = host(&plugins, copies.path());
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
fn another_user_swapping_the_private_directory_in_a_writable_reload_dir_never_runs_their_code() {
    // The attack itself: `shared` is mode 0777 and not sticky. Another user watches it and,
    // a moment after each private directory appears, exchanges it with a directory of their
    // own that holds their library under the plugin's file name. Their constructor must never
    // run (it leaves `libx.so.ran` beside itself).
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
    let dir = TestDir::new("review_reload_dir_swap");
    let shared = dir.sub("shared");
    fs::set_permissions(&shared, Permissions::from_mode(0o777)).unwrap();
    let plugins = TestDir::new("review_reload_dir_swap_plugins");
    install(&plugins, "stateful");
    let host = host(&plugins, &shared);
    let session = host.acquire().unwrap();
    let stop = AtomicBool::new(false);
    let swaps = AtomicU64::new(0);
    let mut theirs_n = 0u64;
    let ran = std::thread::scope(|scope| {
        scope.spawn(|| {
            let mut seen = std::collections::HashSet::new();
            let mut delay = 0u64;
            while !stop.load(Relaxed) {
                for entry in fs::read_dir(&shared).unwrap().flatten() {
                    let name = entry.file_name();
                    if !name.to_string_lossy().starts_with("dylease-reload-") || !seen.insert(name.clone()) {
                        continue;
                    }
                    // Theirs: a directory of uid 12345 with their library as `libx.so`.
                    let theirs = shared.join(format!("theirs-{theirs_n}"));
                    theirs_n += 1;
                    fs::create_dir(&theirs).unwrap();
                    fs::copy(crate::support::fixture("by_hand_marker"), theirs.join("libx.so")).unwrap();
                    std::os::unix::fs::chown(theirs.join("libx.so"), Some(12345), None).unwrap();
                    std::os::unix::fs::chown(&theirs, Some(12345), None).unwrap();
                    // The copy step takes a moment: try a different lateness each time.
                    delay = (delay + 37) % 400;
                    std::thread::sleep(std::time::Duration::from_micros(delay));
                    if exchange(&entry.path(), &theirs).is_ok() {
                        swaps.fetch_add(1, Relaxed);
                    }
                }
            }
        });
        let mut ran = Vec::new();
        for round in 0..200 {
            install(&plugins, if round % 2 == 0 { "by_hand" } else { "stateful" });
            // Under Strict the writable `shared` is refused before any copy is made.
            if let Err(error) = host.reload() {
                assert!(matches!(error, dylease::Error::Untrusted { .. }), "{error}");
            }
            ran.extend(
                fs::read_dir(&shared)
                    .unwrap()
                    .flatten()
                    .filter_map(|e| fs::read_dir(e.path()).ok())
                    .flatten()
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|e| e == "ran")),
            );
            if !ran.is_empty() {
                break;
            }
        }
        stop.store(true, Relaxed);
        ran
    });
    drop(session);
    // With the protection, no private directory ever appears for the attacker to swap.
    eprintln!("attacker swaps: {}", swaps.load(Relaxed));
    assert_eq!(
        ran,
        Vec::<PathBuf>::new(),
        "their constructor ran: code of uid 12345 under TrustPolicy::Strict"
    );
}
