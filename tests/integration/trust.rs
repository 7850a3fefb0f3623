//! The trust check: a plugin file that another user could have changed is refused before any
//! of its code runs, with an error that says which file or directory, why, and the fix.

use std::fs::{self, Permissions};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};
use std::time::Duration;

use dylease::{Error, PluginHost, TrustPolicy};

use crate::support::{TestDir, assert_unloaded, exchange};

/// The file the `by_hand_marker` fixture's constructor creates when its code runs.
fn marker(lib: &Path) -> PathBuf {
    let mut marker = lib.canonicalize().unwrap().into_os_string();
    marker.push(".ran");
    marker.into()
}

/// Loads `lib` (a copy of `by_hand_marker`, reached through `source`) under the strict
/// policy, which must refuse it without running any of its code, then under the permissive
/// one, which must load it and so run its constructor (proof that the marker works). Returns
/// the strict error.
fn refused_then_permitted(source: &Path, lib: &Path) -> Error {
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let strict = unsafe { PluginHost::builder().file(source).build() }.unwrap();
    assert_eq!(strict.trust(), TrustPolicy::Strict, "the default on Unix");
    let error = strict.acquire().unwrap_err();
    assert!(
        matches!(&error, Error::Untrusted { path, .. } if path == source),
        "{error:?}"
    );
    assert!(!marker(lib).exists(), "the plugin's constructor ran: {error}");
    assert_unloaded(lib);
    assert!(!strict.is_loaded());

    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let permissive = unsafe {
        PluginHost::builder()
            .file(source)
            .trust(TrustPolicy::Permissive)
            .build()
    }
    .unwrap();
    let lease = permissive.acquire().unwrap();
    assert_eq!(lease.plugins()[0].name(), "by-hand");
    assert!(marker(lib).exists(), "the marker must show code that ran");
    drop(lease);
    assert_unloaded(lib);
    error
}

#[test]
fn a_library_writable_by_its_group_is_refused_before_any_of_its_code_runs() {
    let dir = TestDir::new("trust_group_writable");
    let lib = dir.add("by_hand_marker", "libmarker.so");
    fs::set_permissions(&lib, Permissions::from_mode(0o775)).unwrap();
    let error = refused_then_permitted(&lib, &lib);
    assert_eq!(
        error.to_string(),
        format!(
            "refusing to load plugin file `{lib}`: the library file `{lib}` is writable by group (mode 0775), \
             so other users can change the code this process would run; fix: `chmod go-w {lib}`, or, if every \
             user who can write there is trusted, build the host with `TrustPolicy::Permissive`",
            lib = lib.display()
        )
    );
}

/// The sticky bit exempts a directory (others cannot rename what they do not own in it), never
/// a file: a world-writable plugin file with the sticky bit is anyone's to rewrite. (Caught
/// planted: `sticky_dir` in `load/trust/walk.rs` without its `subject == Subject::Directory`.)
#[test]
fn a_world_writable_library_file_with_the_sticky_bit_is_refused() {
    let dir = TestDir::new("trust_sticky_file");
    let lib = dir.add("by_hand_marker", "libmarker.so");
    fs::set_permissions(&lib, Permissions::from_mode(0o1777)).unwrap();
    let error = refused_then_permitted(&lib, &lib);
    let message = error.to_string();
    assert!(
        message.contains(&format!(
            "the library file `{}` is writable by group and others (mode 1777)",
            lib.display()
        )),
        "{message}"
    );
}

#[test]
fn a_library_in_a_directory_writable_by_others_is_refused() {
    let dir = TestDir::new("trust_dir_writable");
    let open = dir.sub("open");
    let lib = dir.add("by_hand_marker", "open/libmarker.so");
    fs::set_permissions(&open, Permissions::from_mode(0o757)).unwrap();
    let error = refused_then_permitted(&lib, &lib);
    let message = error.to_string();
    assert!(
        message.contains(&format!(
            "its directory `{}` is writable by others (mode 0757)",
            open.display()
        )),
        "{message}"
    );
    assert!(
        message.contains(&format!("`chmod go-w {}`", open.display())),
        "{message}"
    );
}

#[test]
fn a_symlink_is_followed_and_its_target_is_checked() {
    let dir = TestDir::new("trust_symlink");
    let shared = dir.sub("shared");
    let target = dir.add("by_hand_marker", "shared/libmarker.so");
    fs::set_permissions(&shared, Permissions::from_mode(0o777)).unwrap();
    let plugins = dir.sub("plugins");
    let link = plugins.join("libmarker.so");
    symlink(&target, &link).unwrap();
    let error = refused_then_permitted(&link, &target);
    let message = error.to_string();
    assert!(
        message.starts_with(&format!("refusing to load plugin file `{}`", link.display())),
        "{message}"
    );
    assert!(
        message.contains(&format!(
            "the directory `{}` on the way to it, reached through the symlink `{}`, is writable by group and \
             others (mode 0777)",
            shared.display(),
            link.display()
        )),
        "{message}"
    );
}

#[test]
fn a_symlink_in_a_directory_writable_by_others_is_refused_even_if_its_target_is_safe() {
    let dir = TestDir::new("trust_link_dir");
    let target = dir.add("by_hand_marker", "libmarker.so");
    let drop_box = dir.sub("drop_box");
    fs::set_permissions(&drop_box, Permissions::from_mode(0o777)).unwrap();
    let link = drop_box.join("libmarker.so");
    symlink(&target, &link).unwrap();
    let error = refused_then_permitted(&link, &target);
    assert!(
        error.to_string().contains(&format!(
            "its directory `{}` is writable by group and others (mode 0777)",
            drop_box.display()
        )),
        "{error}"
    );
}

/// `chown`s `path` to uid 12345; panics if it cannot (the tests that call it are
/// `#[ignore = "needs root"]`).
fn give_away(path: &Path) {
    std::os::unix::fs::chown(path, Some(12345), None).unwrap_or_else(|e| {
        panic!(
            "cannot chown {} to another user ({e}); run the tests as root (`-- --ignored`)",
            path.display()
        )
    });
}

#[test]
#[ignore = "needs root"]
fn a_library_owned_by_another_user_is_refused() {
    let dir = TestDir::new("trust_other_owner");
    let lib = dir.add("by_hand_marker", "libmarker.so");
    give_away(&lib);
    let error = refused_then_permitted(&lib, &lib);
    let message = error.to_string();
    // SAFETY: `geteuid` has no preconditions.
    let euid = unsafe { libc::geteuid() };
    assert!(
        message.contains(&format!(
            "the library file `{}` is owned by uid 12345, which is neither this process's effective user \
             (uid {euid}) nor root",
            lib.display()
        )),
        "{message}"
    );
    assert!(
        message.contains(&format!("fix: `chown {euid} {}`", lib.display())),
        "{message}"
    );
}

#[test]
#[ignore = "needs root"]
fn a_library_in_a_directory_owned_by_another_user_is_refused() {
    let dir = TestDir::new("trust_other_dir_owner");
    let theirs = dir.sub("theirs");
    let lib = dir.add("by_hand_marker", "theirs/libmarker.so");
    give_away(&theirs);
    let error = refused_then_permitted(&lib, &lib);
    assert!(
        error
            .to_string()
            .contains(&format!("its directory `{}` is owned by uid 12345", theirs.display())),
        "{error}"
    );
}

#[test]
fn an_untrusted_plugin_fails_a_strict_load_before_any_plugin_opens() {
    // The good plugin comes first in load order; under the strict load policy it must not
    // even be opened, since the load is bound to fail.
    let dir = TestDir::new("trust_before_open");
    let first = dir.add("by_hand_marker", "liba.so");
    let second = dir.add("p1", "libb.so");
    fs::set_permissions(&second, Permissions::from_mode(0o766)).unwrap();
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(dir.path()).build() }.unwrap();
    let error = host.acquire().unwrap_err();
    assert!(
        matches!(&error, Error::Untrusted { path, .. } if path == &second),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("writable by group and others (mode 0766)"),
        "{error}"
    );
    assert!(
        !marker(&first).exists(),
        "a plugin opened although the load was bound to fail"
    );
    assert_unloaded(&first);
}

#[test]
fn a_world_writable_grandparent_is_refused() {
    // `shared` can rename `sub`, and so swap in a directory of its own users' choosing.
    let dir = TestDir::new("trust_grandparent");
    let shared = dir.sub("shared");
    dir.sub("shared/sub");
    let lib = dir.add("by_hand_marker", "shared/sub/libmarker.so");
    fs::set_permissions(&shared, Permissions::from_mode(0o777)).unwrap();
    let error = refused_then_permitted(&lib, &lib);
    assert!(
        error.to_string().contains(&format!(
            "the directory `{}` on the way to it is writable by group and others (mode 0777)",
            shared.display()
        )),
        "{error}"
    );
}

/// The `.ran` markers under `dir`, one level of subdirectories deep.
fn markers_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for sub in fs::read_dir(dir).unwrap().flatten() {
        let Ok(entries) = fs::read_dir(sub.path()) else {
            continue;
        };
        found.extend(
            entries
                .flatten()
                .map(|entry| entry.path())
                .filter(|path| path.extension().is_some_and(|e| e == "ran")),
        );
    }
    found
}

#[test]
fn a_directory_swapped_by_another_user_during_loads_never_runs_their_code() {
    // The attack of the first round: `plugins/libx.so -> shared/sub/libx.so`, everything
    // root's and 0755 but `shared` (0777). Another user keeps exchanging `sub` with a
    // directory of their own while this process loads. Every load must be refused for the
    // writable `shared` (whichever `sub` it saw), and their constructor must never run.
    let dir = TestDir::new("trust_swap_race");
    let shared = dir.sub("shared");
    let plugins = dir.sub("plugins");
    dir.sub("shared/sub");
    dir.sub("shared/theirs");
    dir.add("p1", "shared/sub/libx.so");
    let theirs = dir.add("by_hand_marker", "shared/theirs/libx.so");
    fs::set_permissions(&shared, Permissions::from_mode(0o777)).unwrap();
    let link = plugins.join("libx.so");
    symlink(shared.join("sub/libx.so"), &link).unwrap();

    let stop = std::sync::atomic::AtomicBool::new(false);
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&link).build() }.unwrap();
    let swaps = std::thread::scope(|scope| {
        let swapper = scope.spawn(|| {
            let mut swaps = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                exchange(&shared.join("sub"), &shared.join("theirs")).unwrap();
                swaps += 1;
            }
            swaps
        });
        // Set however this thread leaves (a failed assertion too): the scope waits for the
        // swapper, which would otherwise swap for ever. Each outcome is judged at once, so a
        // bug fails the first load it breaks instead of every load waiting out a bound.
        {
            let _stop = StopOnDrop(&stop);
            for _ in 0..300 {
                let error = host
                    .acquire()
                    .map(drop)
                    .expect_err("a load through the writable directory succeeded");
                assert!(
                    matches!(&error, Error::Untrusted { path, .. } if path == &link)
                        && error.to_string().contains(&format!(
                            "the directory `{}` on the way to it, reached through the symlink `{}`, is writable by \
                             group and others (mode 0777)",
                            shared.display(),
                            link.display()
                        )),
                    "{error}"
                );
            }
        }
        swapper.join().unwrap()
    });
    assert!(swaps > 0, "the attacker never swapped");
    assert_eq!(
        markers_under(dir.path()),
        Vec::<PathBuf>::new(),
        "their constructor ran"
    );
    assert!(!crate::support::mapped(&theirs));
}

/// Sets the flag when dropped.
struct StopOnDrop<'a>(&'a std::sync::atomic::AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

#[test]
fn a_file_renamed_into_place_after_the_check_is_checked_again_and_refused_if_it_fails() {
    // Every file of a load is checked before the first opens, so the constructors of the
    // plugins loaded first run between the check of a later file and its opening. Here
    // `liba.so`'s constructor renames `stage.new` (writable by others) onto `libb.so` (checked):
    // the file there now is checked in turn, fails, and none of its code runs.
    let dir = TestDir::new("trust_renamed_after_check");
    dir.add("swap_on_load", "liba.so");
    let checked = dir.add("p1", "libb.so");
    let stage = dir.add("by_hand_marker", "stage.new");
    fs::set_permissions(&stage, Permissions::from_mode(0o666)).unwrap();
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(dir.path()).build() }.unwrap();
    let error = host.acquire().unwrap_err();
    assert!(
        !stage.exists(),
        "the constructor did not swap the file: the test proves nothing"
    );
    assert!(
        matches!(&error, Error::Untrusted { path, .. } if path == &checked),
        "{error:?}"
    );
    assert!(
        error.to_string().contains(&format!(
            "the library file `{}` is writable by group and others (mode 0666)",
            checked.display()
        )),
        "{error}"
    );
    assert!(!marker(&checked).exists(), "the swapped-in library's constructor ran");
    assert_unloaded(&checked);
    assert!(!host.is_loaded());
}

#[test]
fn a_file_renamed_into_place_after_the_check_that_passes_is_loaded() {
    // The same swap by the directory's owner of a file that passes the check: an install, not
    // an attack. The load checks the new file and loads it, with no error.
    let dir = TestDir::new("trust_installed_after_check");
    dir.add("swap_on_load", "liba.so");
    let checked = dir.add("p1", "libb.so");
    let stage = dir.add("by_hand_marker", "stage.new");
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(dir.path()).build() }.unwrap();
    let lease = host.acquire().unwrap();
    assert!(
        !stage.exists(),
        "the constructor did not swap the file: the test proves nothing"
    );
    assert!(marker(&checked).exists(), "the installed library did not load");
    let names: Vec<_> = lease.plugins().iter().map(|p| p.name()).collect();
    assert_eq!(names, ["swap-on-load", "by-hand"]);
    drop(lease);
    assert_unloaded(&checked);
}

#[test]
fn a_symlink_chain_through_a_world_writable_directory_is_refused() {
    // plugins/libx.so -> ww/hop.so -> trusted/libx.so: `ww` can re-point `hop.so`.
    let dir = TestDir::new("trust_chain");
    let plugins = dir.sub("plugins");
    let ww = dir.sub("ww");
    dir.sub("trusted");
    let target = dir.add("by_hand_marker", "trusted/libx.so");
    symlink(&target, ww.join("hop.so")).unwrap();
    let link = plugins.join("libx.so");
    symlink("../ww/hop.so", &link).unwrap();
    fs::set_permissions(&ww, Permissions::from_mode(0o777)).unwrap();
    let error = refused_then_permitted(&link, &target);
    assert!(
        error.to_string().contains(&format!(
            "the directory `{}` on the way to it, reached through the symlink `{}`, is writable by group and \
             others (mode 0777)",
            ww.display(),
            link.display()
        )),
        "{error}"
    );
}

#[test]
fn a_directory_symlink_through_a_world_writable_directory_is_refused() {
    // top/lib -> ww/real: whoever writes `ww` can swap `real` for a directory of their own.
    let dir = TestDir::new("trust_dir_link");
    let top = dir.sub("top");
    let ww = dir.sub("ww");
    dir.sub("ww/real");
    let target = dir.add("by_hand_marker", "ww/real/libx.so");
    symlink(ww.join("real"), top.join("lib")).unwrap();
    fs::set_permissions(&ww, Permissions::from_mode(0o777)).unwrap();
    let named = top.join("lib/libx.so");
    let error = refused_then_permitted(&named, &target);
    assert!(
        error.to_string().contains(&format!(
            "the directory `{}` on the way to it, reached through the symlink `{}`, is writable by group and \
             others (mode 0777)",
            ww.display(),
            top.join("lib").display()
        )),
        "{error}"
    );
}

#[test]
fn a_sticky_world_writable_directory_on_the_way_is_accepted() {
    // Like /tmp: others can create entries there but not rename or remove root's.
    let dir = TestDir::new("trust_sticky");
    let sticky = dir.sub("sticky");
    dir.sub("sticky/mine");
    let lib = dir.add("by_hand_marker", "sticky/mine/libmarker.so");
    let link = sticky.join("libmarker.so");
    symlink(&lib, &link).unwrap();
    fs::set_permissions(&sticky, Permissions::from_mode(0o1777)).unwrap();
    for named in [&lib, &link] {
        // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
        let host = unsafe { PluginHost::builder().file(named).build() }.unwrap();
        let lease = host.acquire().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(lease.plugins()[0].origin().path(), Some(named.as_path()));
        assert!(marker(&lib).exists());
        fs::remove_file(marker(&lib)).unwrap();
        drop(lease);
        assert_unloaded(&lib);
    }
}

#[test]
#[ignore = "needs root"]
fn a_symlink_owned_by_another_user_in_a_sticky_directory_is_refused() {
    // In a sticky directory the owner of an entry can still replace it.
    let dir = TestDir::new("trust_sticky_link");
    let sticky = dir.sub("sticky");
    let lib = dir.add("by_hand_marker", "libmarker.so");
    let link = sticky.join("libmarker.so");
    symlink(&lib, &link).unwrap();
    fs::set_permissions(&sticky, Permissions::from_mode(0o1777)).unwrap();
    std::os::unix::fs::lchown(&link, Some(12345), None)
        .unwrap_or_else(|e| panic!("cannot lchown {} ({e}); run the tests as root", link.display()));
    let error = refused_then_permitted(&link, &lib);
    assert!(
        error.to_string().contains(&format!(
            "the symlink `{}` on the way to it is owned by uid 12345",
            link.display()
        )),
        "{error}"
    );
}

/// The environment variable that turns [`a_bare_relative_name_is_checked_like_dot_slash`]
/// into its own child process, whose current directory the parent chose.
const RELATIVE_CHILD: &str = "DYLEASE_TEST_RELATIVE_CHILD";

#[test]
fn a_bare_relative_name_is_checked_like_dot_slash() {
    if std::env::var_os(RELATIVE_CHILD).is_some() {
        // The child: the current directory is the parent's writable test directory.
        let cwd = std::env::current_dir().unwrap();
        for named in ["libmarker.so", "./libmarker.so"] {
            // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
            let host = unsafe { PluginHost::builder().file(named).build() }.unwrap();
            let error = host.acquire().unwrap_err();
            assert!(
                matches!(&error, Error::Untrusted { path, .. } if path == Path::new(named)),
                "{named}: {error:?}"
            );
            assert!(
                error.to_string().contains(&format!(
                    "its directory `{}` is writable by others (mode 0757)",
                    cwd.display()
                )),
                "{named}: {error}"
            );
            assert!(!cwd.join("libmarker.so.ran").exists(), "{named}: the constructor ran");
        }
        return;
    }
    // The parent: a directory others can write, made the current directory of a child
    // process (tests share this process's current directory, so it is not changed here).
    let dir = TestDir::new("trust_relative");
    let open = dir.sub("open");
    dir.add("by_hand_marker", "open/libmarker.so");
    fs::set_permissions(&open, Permissions::from_mode(0o757)).unwrap();
    crate::bounded::run_in_child("trust::a_bare_relative_name_is_checked_like_dot_slash", |child| {
        child.env(RELATIVE_CHILD, "1").current_dir(&open);
    });
}

/// Runs an acquire of `host` on a thread of its own, bounded, with `hook` called on every
/// message the host logs meanwhile (`logger::with_hook`): the hook plays the installer.
pub(crate) fn acquire_with_installer(
    host: PluginHost,
    hook: impl Fn(&str) + Send + 'static,
) -> Result<Vec<String>, Error> {
    crate::bounded::bounded("an acquire racing an installer", Duration::from_secs(60), move || {
        crate::logger::with_hook(hook, || {
            let lease = host.acquire()?;
            Ok(lease.plugins().iter().map(|p| p.name().to_owned()).collect())
        })
    })
}

/// How many `debug` lines about `path` contain `what` so far.
fn logged(path: &Path, what: &str) -> usize {
    crate::logger::records(log::Level::Debug, &format!("`{}` {what}", path.display())).len()
}

/// `from` copied to `to` as a new file (a new inode), renamed into place as installers do.
fn install(from: &Path, to: &Path) {
    let staged = to.with_extension("staged");
    fs::copy(from, &staged).unwrap();
    fs::set_permissions(&staged, Permissions::from_mode(0o755)).unwrap();
    fs::rename(&staged, to).unwrap();
}

/// A plugin file removed after its check, and installed again before the load opens it (an
/// installer that unlinks first), is checked again and the new file loads. Caught: a removal
/// not retried (the `open_checked` guard forced false, its `<` as `==` or `>`), or taken for a
/// replacement since an on-demand acquire (the acquire fails).
#[test]
fn a_file_removed_after_its_check_and_installed_again_is_checked_again_and_loaded() {
    crate::logger::install();
    let dir = TestDir::new("trust_removed_after_check");
    let first = dir.add("p1", "liba.so");
    let lib = dir.add("by_hand_marker", "libb.so");
    let templates = TestDir::new("trust_removed_after_check_templates");
    let new = templates.add("by_hand_marker", "libnew.so");
    // SAFETY: the libraries are this suite's own fixtures, whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(dir.path()).build() }.unwrap();
    let (loaded_first, removed) = (format!("loaded plugin file `{}`", first.display()), lib.clone());
    let lib_in_hook = lib.clone();
    let names = acquire_with_installer(host, move |line| {
        if line.contains(&loaded_first) {
            fs::remove_file(&removed).unwrap();
        } else if line.contains(&format!("`{}` was removed or replaced", lib_in_hook.display())) {
            install(&new, &lib_in_hook);
        }
    })
    .unwrap();
    assert_eq!(names, ["p1", "by-hand"]);
    assert_eq!(logged(&lib, "was removed or replaced"), 1);
    assert!(marker(&lib).exists(), "the installed library did not run");
}

/// A file that is gone at every open although it passes every check in between (an install
/// that never settles) is given up after `REPLACEMENTS` (8) checks, naming it; and so is one
/// replaced by another file at every open (`Untrusted`, "replaced 8 times"). Caught: the count
/// never advancing (`+=` as `*=`: the load checks for ever, the bound fails the test), or a
/// bound of nine (`<` as `<=`).
#[test]
fn a_file_that_keeps_changing_between_its_checks_and_its_open_is_given_up_after_eight_checks() {
    crate::logger::install();
    for removed in [true, false] {
        let dir = TestDir::new("trust_keeps_changing");
        let first = dir.add("p1", "liba.so");
        let lib = dir.add("by_hand_marker", "libb.so");
        let templates = TestDir::new("trust_keeps_changing_templates");
        let new = templates.add("by_hand_marker", "libnew.so");
        // SAFETY: as above.
        let host = unsafe { PluginHost::builder().dir(dir.path()).build() }.unwrap();
        let loaded_first = format!("loaded plugin file `{}`", first.display());
        let (changed, checked) = (
            format!("`{}` was", lib.display()),
            format!("`{}` checked again", lib.display()),
        );
        let lib_in_hook = lib.clone();
        let changes = std::sync::atomic::AtomicU32::new(0);
        let error = acquire_with_installer(host, move |line| {
            // Past the bound, the installer stops: a load that does not count its checks
            // then loads the file (and fails the assertion below) instead of spinning.
            if changes.load(std::sync::atomic::Ordering::Relaxed) > 20 {
                return;
            }
            let change = || {
                changes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                if removed {
                    fs::remove_file(&lib_in_hook).unwrap();
                } else {
                    install(&new, &lib_in_hook);
                }
            };
            if line.contains(&loaded_first) || line.contains(&checked) {
                change();
            } else if removed && line.contains(&changed) {
                // Back for the check: gone again once it passed.
                install(&new, &lib_in_hook);
            }
        })
        .unwrap_err();
        let what = if removed {
            "was removed or replaced"
        } else {
            "was replaced by another file"
        };
        assert_eq!(logged(&lib, what), 8, "{error}");
        if removed {
            assert!(
                matches!(&error, Error::Open { path, reason, .. } if path == &lib && reason.contains("cannot open")),
                "{error:?}"
            );
        } else {
            assert!(
                matches!(&error, Error::Untrusted { path, reason, .. } if path == &lib && reason.contains("replaced 8 times")),
                "{error:?}"
            );
        }
        // (The directory's path is canonical: the marker's name needs no file at `lib`.)
        let marker = PathBuf::from(format!("{}.ran", lib.display()));
        assert!(!marker.exists(), "a library that kept changing ran");
    }
}

/// Without a trust check nothing was checked, so nothing is checked again: a file removed
/// after discovery fails the load at once, naming it. Caught: the retry guard's `&&`s as `||`
/// (the file is looked for again; with the second, for ever).
#[test]
fn a_file_removed_under_the_permissive_policy_fails_the_load_at_once() {
    crate::logger::install();
    let dir = TestDir::new("trust_removed_permissive");
    let first = dir.add("p1", "liba.so");
    let lib = dir.add("by_hand_marker", "libb.so");
    // SAFETY: as above.
    let host = unsafe { PluginHost::builder().dir(dir.path()) }
        .trust(TrustPolicy::Permissive)
        .build()
        .unwrap();
    let loaded_first = format!("loaded plugin file `{}`", first.display());
    let removed = lib.clone();
    let error = acquire_with_installer(host, move |line| {
        if line.contains(&loaded_first) {
            fs::remove_file(&removed).unwrap();
        }
    })
    .unwrap_err();
    assert!(
        matches!(&error, Error::Open { path, reason, .. } if path == &lib && reason.contains("cannot open")),
        "{error:?}"
    );
    assert_eq!(logged(&lib, "was removed or replaced"), 0);
}

/// A plugin reached through a chain of 40 symlinks (as many as Linux follows in one path)
/// loads (the walk follows as many as the kernel); through 41 the load fails, naming the
/// file and the kernel's cause. Caught: the walk's count compared with `==` or `>=` (the
/// longest chain the kernel follows refused).
#[test]
fn a_chain_of_forty_symlinks_is_followed_and_a_forty_first_is_refused() {
    let dir = TestDir::new("trust_symlink_chain");
    let lib = dir.add("p1", "libp1.so");
    let chain = |links: usize| {
        let links_dir = dir.sub(&format!("chain{links}"));
        let mut next = lib.clone();
        for n in (0..links).rev() {
            let link = links_dir.join(format!("link{n}.so"));
            symlink(&next, &link).unwrap();
            next = link;
        }
        next
    };
    let forty = chain(40);
    // SAFETY: the library is this suite's own fixture, whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&forty).build() }.unwrap();
    let names: Vec<String> = host
        .acquire()
        .unwrap()
        .plugins()
        .iter()
        .map(|p| p.name().to_owned())
        .collect();
    assert_eq!(names, ["p1"]);
    drop(host);
    let forty_one = chain(41);
    // SAFETY: as above.
    let host = unsafe { PluginHost::builder().file(&forty_one).build() }.unwrap();
    let error = host.acquire().map(drop).unwrap_err();
    // The kernel refuses it first (ELOOP), when discovery reads the file's status.
    let mut message = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        message.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    assert!(
        message.contains(&forty_one.display().to_string()) && message.contains("symbolic links"),
        "{message}"
    );
    assert_unloaded(&lib);
}

/// Set in the child process of the other-user test: the plugin to load.
const OTHER_USER_CHILD: &str = "DYLEASE_TEST_OTHER_USER_PLUGIN";

/// For a process that is not root, a plugin it owns, in directories it owns below directories
/// root owns, passes the trust check: root's directories are trusted too. In a child process
/// run as uid 65534 (the suite's tests run as root, which passes either way). Caught: the
/// owner rule asking for both owners (`&&` as `||`: every root-owned directory refused to
/// any other user). It needs the checkout, its target directory and their ancestors to be
/// root's and traversable by other users (as a clone under `/tmp` is): the child runs this
/// test binary, and the trust check walks those directories.
#[test]
#[ignore = "needs root"]
fn a_user_other_than_root_loads_its_own_plugin_below_directories_root_owns() {
    if let Some(plugin) = std::env::var_os(OTHER_USER_CHILD) {
        // SAFETY: as above.
        let host = unsafe { PluginHost::builder().file(PathBuf::from(plugin)).build() }.unwrap();
        let lease = host.acquire().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(lease.plugins()[0].name(), "p1");
        return;
    }
    let dir = TestDir::new("trust_other_user");
    let own = dir.sub("own");
    let lib = dir.add("p1", "own/libp1.so");
    for path in [&own, &lib] {
        std::os::unix::fs::chown(path, Some(65534), Some(65534)).unwrap();
    }
    crate::bounded::run_in_child(
        "trust::a_user_other_than_root_loads_its_own_plugin_below_directories_root_owns",
        |child| {
            child.env(OTHER_USER_CHILD, &lib);
            crate::bounded::as_other_user(child, &[&lib]);
        },
    );
}

/// A plugin file rewritten in place after its check, its size kept and its modification time
/// set back (only the ctime shows it), is read again before it is mapped: here it was made a
/// library for another machine, which the ELF check then refuses. Caught: the held descriptor
/// reused when its size and mtime match (the ELF verdict of the old bytes, from the parse
/// cache, let the loader map the new ones).
#[test]
fn a_file_rewritten_in_place_keeping_its_size_and_mtime_after_its_check_is_read_again() {
    use std::os::unix::fs::FileExt;
    crate::logger::install();
    let dir = TestDir::new("trust_rewritten_ctime");
    let first = dir.add("p1", "liba.so");
    let lib = dir.add("by_hand_marker", "libb.so");
    // Settled, so that the parse cache keeps its verdict and the held descriptor is reused.
    std::thread::sleep(Duration::from_millis(2300));
    // SAFETY: as above.
    let host = unsafe { PluginHost::builder().dir(dir.path()).build() }.unwrap();
    drop(host.acquire().unwrap());
    let loaded_first = format!("loaded plugin file `{}`", first.display());
    let rewritten = lib.clone();
    let error = acquire_with_installer(host, move |line| {
        if line.contains(&loaded_first) {
            let before = fs::metadata(&rewritten).unwrap();
            let file = fs::File::options().write(true).open(&rewritten).unwrap();
            // e_machine: EM_MIPS.
            file.write_all_at(&8u16.to_le_bytes(), 18).unwrap();
            file.set_modified(before.modified().unwrap()).unwrap();
        }
    })
    .unwrap_err();
    assert!(
        matches!(&error, Error::Open { path, cause: dylease::OpenCause::Headers, .. } if path == &lib),
        "{error:?}"
    );
}

/// Set in the child process of the closed-stdin test.
const NO_STDIN_CHILD: &str = "DYLEASE_TEST_NO_STDIN_CHILD";

/// A process whose standard input is closed (descriptor 0 free, as some daemons run) loads
/// plugins: the walk's first open gets descriptor 0, which is a descriptor like any other. In
/// a child process that closes its descriptor 0 first. Caught: an open returning 0 taken for
/// a failure (`fd < 0` as `<=`, cargo-mutants).
#[test]
fn a_process_without_standard_input_loads_its_plugins() {
    if std::env::var_os(NO_STDIN_CHILD).is_some() {
        let dir = TestDir::new("trust_no_stdin");
        let lib = dir.add("p1", "libp1.so");
        // SAFETY: closes this child's standard input, which nothing of the test reads.
        assert_eq!(unsafe { libc::close(0) }, 0);
        // SAFETY: the libraries are this suite's own fixtures, whose initialisation code is sound.
        let host = unsafe { PluginHost::builder().file(&lib).build() }.unwrap();
        let lease = host.acquire().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(lease.plugins()[0].name(), "p1");
        return;
    }
    crate::bounded::run_in_child("trust::a_process_without_standard_input_loads_its_plugins", |child| {
        child.env(NO_STDIN_CHILD, "1");
    });
}

/// A plugin named through a symlink whose target is longer than the walk's first read of a
/// target (256 bytes) is followed to the whole target and loads. Caught: a target that filled
/// the buffer taken as complete (`len < buffer.len()` as `<=`, cargo-mutants: the target cut
/// at 256 bytes names no file), and the buffer shrunk instead of grown (`*` as `/`).
#[test]
fn a_plugin_named_through_a_symlink_with_a_long_target_loads() {
    let dir = TestDir::new("trust_long_link");
    dir.add("p1", "libp1.so");
    // 600 bytes of `./`, then the name.
    let target = format!("{}libp1.so", "./".repeat(300));
    let link = dir.path().join("link.so");
    symlink(&target, &link).unwrap();
    // SAFETY: the library is this suite's own fixture, whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&link).build() }.unwrap();
    let lease = host.acquire().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(lease.plugins()[0].name(), "p1");
}
