//! The trust check: a plugin file that another user could have changed is refused before any
//! of its code runs, with an error that says which file or directory, why, and the fix.

use std::fs::{self, Permissions};
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::{Path, PathBuf};

use dylease::{Error, PluginHost, TrustPolicy};

use crate::support::{TestDir, assert_unloaded};

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
    let strict = PluginHost::builder().file(source).build().unwrap();
    assert_eq!(strict.trust(), TrustPolicy::Strict, "the default on Unix");
    let error = strict.acquire().unwrap_err();
    assert!(
        matches!(&error, Error::Untrusted { path, .. } if path == source),
        "{error:?}"
    );
    assert!(!marker(lib).exists(), "the plugin's constructor ran: {error}");
    assert_unloaded(lib);
    assert!(!strict.is_loaded());

    let permissive = PluginHost::builder()
        .file(source)
        .trust(TrustPolicy::Permissive)
        .build()
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
            "its directory `{}` is writable by group and others (mode 0777)",
            shared.display()
        )),
        "{message}"
    );
}

#[test]
fn a_symlink_in_a_directory_writable_by_others_is_refused_even_if_its_target_is_safe() {
    let dir = TestDir::new("trust_link_dir");
    let target = dir.add("by_hand_marker", "libmarker.so");
    let drop_box = dir.sub("drop_box");
    fs::set_permissions(&drop_box, Permissions::from_mode(0o1777)).unwrap();
    let link = drop_box.join("libmarker.so");
    symlink(&target, &link).unwrap();
    let error = refused_then_permitted(&link, &target);
    assert!(
        error.to_string().contains(&format!(
            "the directory of the symlink to it `{}` is writable by group and others (mode 1777)",
            drop_box.display()
        )),
        "{error}"
    );
}

/// `chown`s `path` to uid 12345, or says why it cannot.
fn give_away(path: &Path) -> Result<(), String> {
    std::os::unix::fs::chown(path, Some(12345), None).map_err(|e| {
        format!(
            "cannot chown {} to another user ({e}); run the tests as root",
            path.display()
        )
    })
}

#[test]
fn a_library_owned_by_another_user_is_refused() {
    let dir = TestDir::new("trust_other_owner");
    let lib = dir.add("by_hand_marker", "libmarker.so");
    if let Err(why) = give_away(&lib) {
        eprintln!("skipped: {why}");
        return;
    }
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
fn a_library_in_a_directory_owned_by_another_user_is_refused() {
    let dir = TestDir::new("trust_other_dir_owner");
    let theirs = dir.sub("theirs");
    let lib = dir.add("by_hand_marker", "theirs/libmarker.so");
    if let Err(why) = give_away(&theirs) {
        eprintln!("skipped: {why}");
        return;
    }
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
    let host = PluginHost::builder().dir(dir.path()).build().unwrap();
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
