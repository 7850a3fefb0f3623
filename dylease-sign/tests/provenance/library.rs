//! Libraries signed by an appended block.

use std::fs;
use std::io::Cursor;
use std::path::{Path, PathBuf};

use dylease_sign::{Cause, Release, SignError, sign_file, sign_file_bytes, strip_signature};
use sha2::{Digest as _, Sha256};

use crate::{Counting, Random, cause, key, keyring, signed};

const PATH: &str = "plugins/libgreeter.so";

fn release() -> Release {
    Release::new("greeter", "1.4.0", 14)
}

fn image() -> Vec<u8> {
    let mut image = b"\x7fELF".to_vec();
    image.extend(Random::new(1).bytes(252));
    image
}

/// A fresh directory of its own for a test.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("library").join(name);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn a_signed_library_verifies_from_its_open_file_and_from_its_bytes_naming_its_key_and_release() {
    let key = key(1);
    let signed = signed(&image(), &release(), &key);
    let dir = scratch("round_trip");
    let path = dir.join("libgreeter.so");
    fs::write(&path, &signed).unwrap();

    let keyring = keyring(&[&key]);
    let mut file = fs::File::open(&path).unwrap();
    let verified = keyring.verify_file(&mut file, &path, Some("greeter")).unwrap();
    assert_eq!(verified.key, key.id());
    assert_eq!(verified.release, release());
    assert_eq!(verified.digest, <[u8; 32]>::from(Sha256::digest(image())));
    assert_eq!(keyring.verify_bytes(&signed, Path::new(PATH), None).unwrap(), verified);
}

#[test]
fn the_verifier_reads_the_trailer_the_block_and_the_image_once_each() {
    let key = key(1);
    let signed = signed(&image(), &release(), &key);
    let mut counting = Counting {
        inner: Cursor::new(&signed),
        read: 0,
    };
    keyring(&[&key])
        .verify_file(&mut counting, Path::new(PATH), None)
        .unwrap();
    let block_len = signed.len() - image().len();
    assert_eq!(counting.read, (image().len() + block_len + 16) as u64);

    // A block that signs an image of another length is refused before the image is read.
    let shorter = &signed[1..];
    let mut counting = Counting {
        inner: Cursor::new(shorter),
        read: 0,
    };
    let result = keyring(&[&key]).verify_file(&mut counting, Path::new(PATH), None);
    assert!(matches!(cause(&result), Cause::ContentChanged), "{result:?}");
    assert_eq!(counting.read, (block_len + 16) as u64);
}

#[test]
fn a_trailer_announcing_a_block_larger_than_64_kib_is_corrupt_and_nothing_more_is_read() {
    for announced in [64 * 1024 + 1, u64::MAX, 1 << 40] {
        let mut file = vec![0; 100_000];
        file.extend(announced.to_le_bytes());
        file.extend(b"<<DYLSIG");
        let mut counting = Counting {
            inner: Cursor::new(&file),
            read: 0,
        };
        let result = keyring(&[&key(1)]).verify_file(&mut counting, Path::new(PATH), None);
        assert!(
            matches!(cause(&result), Cause::Corrupt(what) if what.contains("64 KiB")),
            "{result:?}"
        );
        assert_eq!(counting.read, 16, "{announced}");
    }
}

#[test]
fn signing_the_same_bytes_twice_gives_the_same_file_and_signing_a_signed_file_replaces_its_block() {
    let key = key(1);
    let dir = scratch("resign");
    let (input, output) = (dir.join("built.so"), dir.join("libgreeter.so"));
    fs::write(&input, image()).unwrap();
    sign_file(&input, &output, &release(), &key).unwrap();
    let first = fs::read(&output).unwrap();
    assert_eq!(first, signed(&image(), &release(), &key));
    sign_file(&input, &output, &release(), &key).unwrap();
    assert_eq!(fs::read(&output).unwrap(), first);

    // Signed again in place, as a newer release: one block, the new one.
    let newer = Release::new("greeter", "1.5.0", 15);
    sign_file(&output, &output, &newer, &key).unwrap();
    let again = fs::read(&output).unwrap();
    assert_eq!(again.len(), first.len());
    assert_eq!(strip_signature(&again), &image()[..]);
    assert_eq!(
        keyring(&[&key]).verify_bytes(&again, &output, None).unwrap().release,
        newer
    );
    // Nothing is left beside it.
    assert_eq!(fs::read_dir(&dir).unwrap().count(), 2);

    // The block of a signed image is not signed over.
    assert!(matches!(
        sign_file_bytes(&first, &newer, &key),
        Err(SignError::AlreadySigned)
    ));
}

#[cfg(unix)]
#[test]
fn a_signed_copy_keeps_the_permissions_of_its_input() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = scratch("permissions");
    let (input, output) = (dir.join("built.so"), dir.join("libgreeter.so"));
    fs::write(&input, image()).unwrap();
    fs::set_permissions(&input, fs::Permissions::from_mode(0o750)).unwrap();
    sign_file(&input, &output, &release(), &key(1)).unwrap();
    assert_eq!(fs::metadata(&output).unwrap().permissions().mode() & 0o777, 0o750);
}

#[test]
fn one_flipped_byte_anywhere_in_the_image_is_refused_as_changed() {
    let key = key(1);
    let keyring = keyring(&[&key]);
    let signed = signed(&image(), &release(), &key);
    for at in 0..image().len() {
        let mut changed = signed.clone();
        changed[at] ^= 0xff;
        let result = keyring.verify_bytes(&changed, Path::new(PATH), Some("greeter"));
        assert!(matches!(cause(&result), Cause::ContentChanged), "byte {at}: {result:?}");
    }
    // A byte more or less before the block.
    let block = &signed[image().len()..];
    for image in [[image(), vec![0]].concat(), image()[1..].to_vec()] {
        let result = keyring.verify_bytes(&[&image, block].concat(), Path::new(PATH), None);
        assert!(matches!(cause(&result), Cause::ContentChanged), "{result:?}");
    }
}

#[test]
fn one_flipped_byte_anywhere_in_the_block_is_refused() {
    let key = key(1);
    let keyring = keyring(&[&key]);
    let signed = signed(&image(), &release(), &key);
    let block_at = image().len();
    let block_len = signed.len() - block_at;
    // Head: magic 8, version 4, key id 8, statement length 4; then the statement, the
    // signature (64) and the trailer (16).
    let (key_id, statement, signature) = (
        block_at + 12..block_at + 20,
        block_at + 24..signed.len() - 80,
        signed.len() - 80..signed.len() - 16,
    );
    for at in block_at..signed.len() {
        let mut changed = signed.clone();
        changed[at] ^= 0xff;
        let result = keyring.verify_bytes(&changed, Path::new(PATH), Some("greeter"));
        let cause = cause(&result);
        if key_id.contains(&at) {
            assert!(
                matches!(cause, Cause::UnknownKey(_)),
                "byte {} of the block: {result:?}",
                at - block_at
            );
        } else if statement.contains(&at) {
            // Or a statement that no longer parses (a length byte, the name's UTF-8).
            let bad_signature = matches!(cause, Cause::BadSignature(id) if *id == key.id());
            assert!(
                bad_signature || matches!(cause, Cause::Corrupt(_)),
                "byte {} of the block: {result:?}",
                at - block_at
            );
        } else if signature.contains(&at) {
            assert!(
                matches!(cause, Cause::BadSignature(id) if *id == key.id()),
                "byte {} of the block: {result:?}",
                at - block_at
            );
        } else {
            assert!(
                matches!(cause, Cause::Corrupt(_) | Cause::Unsigned),
                "byte {} of the block: {result:?}",
                at - block_at
            );
        }
    }
    assert_eq!(block_len, 104 + 8 + 32 + 8 + 1 + "greeter".len() + 1 + "1.4.0".len());
}

#[test]
fn a_block_grafted_from_another_plugin_is_refused_by_name_or_by_digest() {
    let key = key(1);
    let keyring = keyring(&[&key]);
    let other = Release::new("mailer", "3.0", 30);
    let other_block = sign_file_bytes(b"the mailer's library", &other, &key).unwrap();
    let grafted = [image(), other_block].concat();

    let result = keyring.verify_bytes(&grafted, Path::new(PATH), Some("greeter"));
    assert!(
        matches!(cause(&result), Cause::NameMismatch { expected, signed } if expected == "greeter" && signed == "mailer"),
        "{result:?}"
    );
    let message = result.unwrap_err().to_string();
    assert!(message.starts_with(PATH) && message.contains("`mailer`"), "{message}");
    // A host that does not say which plugin it loads still refuses the bytes.
    let result = keyring.verify_bytes(&grafted, Path::new(PATH), None);
    assert!(matches!(cause(&result), Cause::ContentChanged), "{result:?}");

    // The block of another release of the same plugin, on this image.
    let older = [image(), sign_file_bytes(&image()[..255], &release(), &key).unwrap()].concat();
    let result = keyring.verify_bytes(&older, Path::new(PATH), Some("greeter"));
    assert!(matches!(cause(&result), Cause::ContentChanged), "{result:?}");
}

#[test]
fn a_signed_file_truncated_at_any_length_is_refused() {
    let key = key(1);
    let keyring = keyring(&[&key]);
    let signed = signed(&image(), &release(), &key);
    for len in 0..signed.len() {
        let result = keyring.verify_bytes(&signed[..len], Path::new(PATH), None);
        assert!(
            matches!(cause(&result), Cause::Unsigned | Cause::Corrupt(_)),
            "{len} bytes: {result:?}"
        );
    }
    // A block whose beginning was cut, its trailer kept: the length it announces reaches
    // into the image, where no block begins.
    let block_at = image().len();
    for cut in 1..=signed.len() - block_at - 16 {
        let cut_block = [&signed[..block_at], &signed[block_at + cut..]].concat();
        let result = keyring.verify_bytes(&cut_block, Path::new(PATH), None);
        assert!(
            matches!(cause(&result), Cause::Corrupt(_)),
            "{cut} bytes cut: {result:?}"
        );
        // And without an image before it, the block is longer than the file.
        let result = keyring.verify_bytes(&signed[block_at + cut..], Path::new(PATH), None);
        assert!(
            matches!(cause(&result), Cause::Corrupt(what) if what.contains("truncated")),
            "{cut} bytes cut: {result:?}"
        );
    }
}

#[test]
fn an_unsigned_library_is_refused_as_unsigned_with_the_fix() {
    let keyring = keyring(&[&key(1)]);
    for bytes in [&b""[..], b"\x7fELF", &image()] {
        let result = keyring.verify_bytes(bytes, Path::new(PATH), None);
        assert!(matches!(cause(&result), Cause::Unsigned), "{result:?}");
    }
    let message = keyring
        .verify_bytes(&image(), Path::new(PATH), None)
        .unwrap_err()
        .to_string();
    assert!(
        message.starts_with("plugins/libgreeter.so carries no dylease signature: have its publisher sign it"),
        "{message}"
    );
}

#[test]
fn a_signature_by_a_key_the_keyring_does_not_trust_is_refused_naming_the_key() {
    let (trusted, stranger) = (key(1), key(2));
    let signed = signed(&image(), &release(), &stranger);
    let result = keyring(&[&trusted]).verify_bytes(&signed, Path::new(PATH), None);
    assert!(
        matches!(cause(&result), Cause::UnknownKey(id) if *id == stranger.id()),
        "{result:?}"
    );
    let message = result.unwrap_err().to_string();
    assert!(
        message.contains(&stranger.id().to_string()) && message.contains("keyring"),
        "{message}"
    );
    // Nor does an empty keyring trust anything.
    let result = keyring(&[]).verify_bytes(&signed, Path::new(PATH), None);
    assert!(matches!(cause(&result), Cause::UnknownKey(_)), "{result:?}");
}

#[test]
fn a_signature_by_a_revoked_key_is_refused_even_while_the_key_is_trusted() {
    let (old, new) = (key(1), key(2));
    let mut keyring = keyring(&[&old, &new]);
    keyring.revoke(old.id());
    let result = keyring.verify_bytes(&signed(&image(), &release(), &old), Path::new(PATH), None);
    assert!(
        matches!(cause(&result), Cause::RevokedKey(id) if *id == old.id()),
        "{result:?}"
    );
    assert!(
        keyring
            .verify_bytes(&signed(&image(), &release(), &new), Path::new(PATH), None)
            .is_ok()
    );
}

#[test]
fn a_release_below_its_minimum_serial_is_refused_and_one_at_the_minimum_verifies() {
    let key = key(1);
    let mut keyring = keyring(&[&key]);
    keyring.require_serial("greeter", 15);
    let result = keyring.verify_bytes(&signed(&image(), &release(), &key), Path::new(PATH), Some("greeter"));
    assert!(
        matches!(cause(&result), Cause::RolledBack { name, serial: 14, minimum: 15 } if name == "greeter"),
        "{result:?}"
    );
    let message = result.unwrap_err().to_string();
    assert!(
        message.contains("serial 14") && message.contains("install serial 15 or newer"),
        "{message}"
    );

    let at_minimum = Release::new("greeter", "1.5.0", 15);
    assert!(
        keyring
            .verify_bytes(&signed(&image(), &at_minimum, &key), Path::new(PATH), None)
            .is_ok()
    );
    // The minimum is the name's: another plugin's serials are its own.
    let other = Release::new("mailer", "1.0", 1);
    assert!(
        keyring
            .verify_bytes(&signed(&image(), &other, &key), Path::new(PATH), None)
            .is_ok()
    );
}
