//! `dylease keygen`, `sign`, `verify`, and the signatures `inspect` shows and
//! `install --keyring` requires: the real binary on real C plugins whose constructors leave a
//! marker (`<library>.ran`), so that "none of its code ran" is asserted.

use std::fs;
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::cli::{add, dylease, json};
use crate::support::TestDir;

/// Makes a key pair `name` (and `name.pub`) in `dir`.
fn keygen(dir: &Path, name: &str) {
    let run = dylease(dir, &["keygen", "--out", name]);
    assert_eq!(run.status, 0, "{run:?}");
}

/// Signs `file` (in `dir`) with the key `key` as serial `serial`, asserting success.
fn sign(dir: &Path, file: &str, key: &str, serial: u64) {
    let run = dylease(dir, &["sign", file, "--key", key, "--serial", &serial.to_string()]);
    assert_eq!(run.status, 0, "{run:?}");
}

/// Flips one bit of the compiler's `.comment` string in `path`: only a signature can tell.
fn flip_comment_byte(path: &Path) {
    let bytes = fs::read(path).unwrap();
    let at = bytes.windows(5).position(|w| w == b"GCC: ").expect("a .comment string") as u64 + 5;
    let file = fs::OpenOptions::new().read(true).write(true).open(path).unwrap();
    let mut byte = [0];
    file.read_exact_at(&mut byte, at).unwrap();
    file.write_all_at(&[byte[0] ^ 1], at).unwrap();
}

/// The files of `dir` whose names end with `.ran`: markers of code that ran.
fn markers(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.to_string_lossy().ends_with(".ran"))
        .collect()
}

#[test]
fn keygen_writes_a_private_secret_key_and_its_public_key_and_never_overwrites_one() {
    let dir = TestDir::new("cli_keygen");
    let run = dylease(dir.path(), &["keygen", "--out", "publisher"]);
    assert_eq!(run.status, 0, "{run:?}");
    let mode = fs::metadata(dir.path().join("publisher")).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let public = fs::read_to_string(dir.path().join("publisher.pub")).unwrap();
    assert!(public.starts_with("dylease-ed25519-public:"), "{public}");
    assert!(run.stdout.contains(public.trim()), "{run:?}");
    let again = dylease(dir.path(), &["keygen", "--out", "publisher"]);
    assert_eq!(again.status, 1, "{again:?}");
    assert_eq!(fs::read_to_string(dir.path().join("publisher.pub")).unwrap(), public);
}

#[test]
fn a_signed_library_verifies_and_a_changed_byte_an_untrusted_or_revoked_key_or_an_old_serial_fail() {
    let dir = TestDir::new("cli_sign_verify");
    keygen(dir.path(), "k1");
    keygen(dir.path(), "k2");
    add(&dir, "by_hand_marker_manifest", "libx.so");
    let unsigned = dylease(dir.path(), &["verify", "libx.so", "--keyring", "k1.pub"]);
    assert_eq!(unsigned.status, 1, "{unsigned:?}");
    assert!(unsigned.stdout.contains("carries no dylease signature"), "{unsigned:?}");

    sign(dir.path(), "libx.so", "k1", 5);
    let run = dylease(dir.path(), &["verify", "libx.so", "--keyring", "k1.pub"]);
    assert_eq!(run.status, 0, "{run:?}");
    assert!(run.stdout.contains("`by-hand` version 1 serial 5"), "{run:?}");

    let untrusted = dylease(dir.path(), &["verify", "libx.so", "--keyring", "k2.pub"]);
    assert_eq!(untrusted.status, 1, "{untrusted:?}");
    assert!(
        untrusted.stdout.contains("which this host does not trust"),
        "{untrusted:?}"
    );

    let k1_id = run.stdout.split("key ").nth(1).unwrap()[..16].to_owned();
    let revoked = dylease(
        dir.path(),
        &["verify", "libx.so", "--keyring", "k1.pub", "--revoke", &k1_id],
    );
    assert_eq!(revoked.status, 1, "{revoked:?}");
    assert!(
        revoked
            .stdout
            .contains(&format!("key {k1_id}, which this host revokes")),
        "{revoked:?}"
    );

    let old = dylease(
        dir.path(),
        &["verify", "libx.so", "--keyring", "k1.pub", "--min-serial", "by-hand=6"],
    );
    assert_eq!(old.status, 1, "{old:?}");
    assert!(
        old.stdout.contains("serial 5") && old.stdout.contains("serial 6"),
        "{old:?}"
    );

    flip_comment_byte(&dir.path().join("libx.so"));
    let changed = dylease(dir.path(), &["verify", "libx.so", "--keyring", "k1.pub"]);
    assert_eq!(changed.status, 1, "{changed:?}");
    assert!(
        changed.stdout.contains("is not the bytes its signature covers"),
        "{changed:?}"
    );
    assert!(markers(dir.path()).is_empty(), "verify ran the plugin's code");
}

#[test]
fn verify_without_a_keyring_and_a_library_without_a_manifest_and_no_name_are_refused() {
    let dir = TestDir::new("cli_sign_usage");
    keygen(dir.path(), "k");
    add(&dir, "p1", "libp1.so");
    let run = dylease(dir.path(), &["verify", "libp1.so"]);
    assert_eq!(run.status, 2, "{run:?}");
    // A library without a manifest (as one a plugin needs): its name must be given.
    let noentry = add(&dir, "noentry", "libnoentry.so");
    let run = dylease(dir.path(), &["sign", "libnoentry.so", "--key", "k"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(run.stderr.contains("--name"), "{run:?}");
    let run = dylease(dir.path(), &["sign", "libnoentry.so", "--key", "k", "--name", "helper"]);
    assert_eq!(run.status, 0, "{run:?}");
    assert!(fs::read(noentry).unwrap().ends_with(b"<<DYLSIG"));
}

#[test]
fn inspect_shows_the_signer_claimed_or_verified_or_that_a_plugin_is_unsigned_running_none_of_it() {
    let dir = TestDir::new("cli_inspect_signer");
    keygen(dir.path(), "k");
    keygen(dir.path(), "other");
    add(&dir, "by_hand_marker_manifest", "libx.so");
    let run = dylease(dir.path(), &["inspect", "libx.so"]);
    assert!(run.stdout.contains("signature: unsigned"), "{run:?}");
    sign(dir.path(), "libx.so", "k", 9);
    let run = dylease(dir.path(), &["inspect", "libx.so"]);
    assert_eq!(run.status, 0, "{run:?}");
    assert!(
        run.stdout
            .contains("`by-hand` version 1 serial 9 (claimed, not verified"),
        "{run:?}"
    );
    let run = dylease(dir.path(), &["inspect", "libx.so", "--keyring", "k.pub", "--json"]);
    assert_eq!(run.status, 0, "{run:?}");
    let signature = &json(&run)["sources"][0]["plugins"][0]["signature"];
    assert_eq!(signature["name"], "by-hand");
    assert_eq!(signature["serial"], 9);
    assert_eq!(signature["verified"], true);
    let run = dylease(dir.path(), &["inspect", "libx.so", "--keyring", "k.pub"]);
    assert_eq!(run.status, 0, "{run:?}");
    assert!(
        run.stdout.contains("`by-hand` version 1 serial 9 (verified)\n"),
        "{run:?}"
    );
    // A keyring that refuses the signature: the signer it claims, and the refusal below it.
    let run = dylease(dir.path(), &["inspect", "libx.so", "--keyring", "other.pub"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(run.stdout.contains("which this host does not trust"), "{run:?}");
    assert!(
        run.stdout
            .contains("`by-hand` version 1 serial 9 (claimed; the keyring refused it: see the problem)\n"),
        "{run:?}"
    );
    assert!(markers(dir.path()).is_empty(), "inspect ran the plugin's code");
}

/// `dylease install FILE DIR --keyring k.pub [extra]` run in `dir`.
fn install_signed(dir: &TestDir, file: &str, extra: &[&str]) -> crate::cli::Run {
    let mut args = vec!["install", file, "plugins", "--keyring", "k.pub"];
    args.extend(extra);
    dylease(dir.path(), &args)
}

#[test]
fn install_with_a_keyring_refuses_unsigned_changed_and_rolled_back_copies_before_running_them() {
    let dir = TestDir::new("cli_install_signed");
    keygen(dir.path(), "k");
    let plugins = dir.sub("plugins");
    add(&dir, "by_hand_marker_manifest", "libx.so");

    let run = install_signed(&dir, "libx.so", &[]);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(run.stdout.contains("carries no dylease signature"), "{run:?}");
    assert!(!plugins.join("libx.so").exists());

    sign(dir.path(), "libx.so", "k", 5);
    let run = install_signed(&dir, "libx.so", &[]);
    assert_eq!(run.status, 0, "{run:?}");
    assert!(run.stdout.contains("serial 5 (verified)"), "{run:?}");
    let installed = fs::read(plugins.join("libx.so")).unwrap();

    // An older release over it is refused, naming both serials, unless rollbacks are allowed.
    sign(dir.path(), "libx.so", "k", 4);
    for marker in markers(&plugins) {
        fs::remove_file(marker).unwrap();
    }
    let run = install_signed(&dir, "libx.so", &[]);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(
        run.stdout.contains("serial 4") && run.stdout.contains("serial 5"),
        "{run:?}"
    );
    assert!(run.stdout.contains("--allow-rollback"), "{run:?}");
    assert_eq!(fs::read(plugins.join("libx.so")).unwrap(), installed);

    // A changed byte: refused, and no code of the copy ran (its constructor leaves a marker).
    flip_comment_byte(&dir.path().join("libx.so"));
    let run = install_signed(&dir, "libx.so", &["--allow-rollback"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(run.stdout.contains("is not the bytes its signature covers"), "{run:?}");
    assert!(
        markers(&plugins).is_empty(),
        "the refused copy's code ran: {:?}",
        markers(&plugins)
    );
    assert_eq!(fs::read(plugins.join("libx.so")).unwrap(), installed);

    sign(dir.path(), "libx.so", "k", 4);
    let run = install_signed(&dir, "libx.so", &["--allow-rollback"]);
    assert_eq!(run.status, 0, "{run:?}");
    assert!(run.stdout.contains("serial 4 (verified)"), "{run:?}");
}

#[cfg(feature = "python")]
#[test]
fn a_signed_python_package_verifies_and_a_source_added_after_signing_fails() {
    let dir = TestDir::new("cli_sign_python");
    keygen(dir.path(), "k");
    let package = dir.sub("talker");
    fs::write(package.join("__init__.py"), "from . import talk\n").unwrap();
    fs::write(package.join("talk.py"), "def hello():\n    return 1\n").unwrap();
    let run = dylease(dir.path(), &["sign", "talker", "--key", "k", "--serial", "2"]);
    assert_eq!(run.status, 0, "{run:?}");
    assert!(run.stdout.contains("lists 2 source files"), "{run:?}");
    let run = dylease(dir.path(), &["verify", "talker", "--keyring", "k.pub"]);
    assert_eq!(run.status, 0, "{run:?}");
    fs::write(package.join("evil.py"), "import os\n").unwrap();
    let run = dylease(dir.path(), &["verify", "talker", "--keyring", "k.pub"]);
    assert_eq!(run.status, 1, "{run:?}");
    assert!(run.stdout.contains("talker/evil.py is not listed"), "{run:?}");
}
