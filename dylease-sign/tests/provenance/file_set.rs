//! File sets (Python files and packages) signed by a detached index.

use std::fs;
use std::path::Path;

use dylease_sign::{
    Cause, INDEX_NAME, Release, SignError, SignatureError, Verified, file_index_path, package_index_path, sign_index,
};
use sha2::{Digest as _, Sha256};

use crate::{cause, key, keyring};

const INDEX: &str = "plugins/talker/.dylease-sig";

fn release() -> Release {
    Release::new("talker", "0.3", 3)
}

/// A package's files, by path relative to its directory.
fn package() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("__init__.py", b"from .talk import hello\n".to_vec()),
        ("talk.py", b"def hello():\n    return 'hello'\n".to_vec()),
        ("data/words.txt", b"hello\nworld\n".to_vec()),
        ("empty.py", Vec::new()),
    ]
}

fn files<'a>(set: &'a [(&'static str, Vec<u8>)]) -> Vec<(&'static str, &'a [u8])> {
    set.iter().map(|(path, bytes)| (*path, bytes.as_slice())).collect()
}

fn index() -> Vec<u8> {
    sign_index(files(&package()), &release(), &key(1)).unwrap()
}

fn verify(index: &[u8], set: &[(&'static str, Vec<u8>)]) -> Result<Verified, SignatureError> {
    keyring(&[&key(1)]).verify_index(index, Path::new(INDEX), Some("talker"), files(set))
}

#[test]
fn a_signed_package_verifies_naming_its_key_and_release() {
    let index = index();
    let verified = verify(&index, &package()).unwrap();
    assert_eq!(verified.key, key(1).id());
    assert_eq!(verified.release, release());
    assert_eq!(verified.digest, <[u8; 32]>::from(Sha256::digest(&index)));
    // The files may come in any order.
    let mut reversed = package();
    reversed.reverse();
    assert!(verify(&index, &reversed).is_ok());
}

#[test]
fn a_package_on_disk_verifies_from_its_open_files_and_its_index_beside_them() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("file_set/talker");
    let _ = fs::remove_dir_all(&dir);
    for (path, bytes) in package() {
        let path = dir.join(path);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, bytes).unwrap();
    }
    let open = || {
        package()
            .into_iter()
            .map(|(path, _)| (path, fs::File::open(dir.join(path)).unwrap()))
    };
    let index_path = package_index_path(&dir);
    assert_eq!(index_path, dir.join(".dylease-sig"));
    fs::write(&index_path, sign_index(open(), &release(), &key(1)).unwrap()).unwrap();

    let index = fs::File::open(&index_path).unwrap();
    let verified = keyring(&[&key(1)])
        .verify_index(index, &index_path, Some("talker"), open())
        .unwrap();
    assert_eq!(verified.release, release());

    fs::write(dir.join("talk.py"), b"import os; os.system('evil')\n").unwrap();
    let index = fs::File::open(&index_path).unwrap();
    let result = keyring(&[&key(1)]).verify_index(index, &index_path, Some("talker"), open());
    assert!(matches!(cause(&result), Cause::FileChanged), "{result:?}");
    assert_eq!(result.unwrap_err().path(), dir.join("talk.py"));
}

#[test]
fn a_single_file_is_signed_by_an_index_beside_it_that_lists_it_by_name() {
    let path = Path::new("plugins/greeter.py");
    let index_path = file_index_path(path);
    assert_eq!(index_path, Path::new("plugins/greeter.py.dylease-sig"));
    assert!(index_path.to_str().unwrap().ends_with(INDEX_NAME));
    let source = b"def hello(): return 1\n".as_slice();
    let index = sign_index([("greeter.py", source)], &Release::new("greeter", "1", 1), &key(1)).unwrap();
    let keyring = keyring(&[&key(1)]);
    assert!(
        keyring
            .verify_index(index.as_slice(), &index_path, Some("greeter"), [("greeter.py", source)])
            .is_ok()
    );
    let result = keyring.verify_index(
        index.as_slice(),
        &index_path,
        Some("greeter"),
        [("greeter.py", b"".as_slice())],
    );
    assert!(matches!(cause(&result), Cause::FileChanged), "{result:?}");
    assert_eq!(result.unwrap_err().path(), Path::new("plugins/greeter.py"));
}

#[test]
fn a_file_added_after_signing_is_refused_as_not_covered() {
    let mut set = package();
    set.push(("sitecustomize.py", b"import evil\n".to_vec()));
    let result = verify(&index(), &set);
    assert!(matches!(cause(&result), Cause::FileNotCovered), "{result:?}");
    let error = result.unwrap_err();
    assert_eq!(error.path(), Path::new("plugins/talker/sitecustomize.py"));
    assert!(
        error.to_string().contains("not listed in its package's signed index"),
        "{error}"
    );
}

#[test]
fn a_file_removed_after_signing_is_refused_as_missing() {
    for removed in 0..package().len() {
        let mut set = package();
        let (name, _) = set.remove(removed);
        let result = verify(&index(), &set);
        assert!(matches!(cause(&result), Cause::FileMissing), "{name}: {result:?}");
        assert_eq!(result.unwrap_err().path(), Path::new("plugins/talker").join(name));
    }
}

#[test]
fn a_file_changed_after_signing_is_refused_as_changed() {
    for changed in 0..package().len() {
        let mut set = package();
        // One byte flipped, or one added to the empty file.
        match set[changed].1.first_mut() {
            Some(byte) => *byte ^= 1,
            None => set[changed].1.push(b'\n'),
        }
        let result = verify(&index(), &set);
        assert!(
            matches!(cause(&result), Cause::FileChanged),
            "{}: {result:?}",
            set[changed].0
        );
        assert_eq!(
            result.unwrap_err().path(),
            Path::new("plugins/talker").join(set[changed].0)
        );
    }
}

#[test]
fn a_file_renamed_after_signing_is_refused() {
    let mut set = package();
    set[1].0 = "talk2.py";
    let result = verify(&index(), &set);
    assert!(matches!(cause(&result), Cause::FileNotCovered), "{result:?}");
}

#[test]
fn files_given_by_paths_outside_the_index_directory_are_not_covered() {
    for outside in ["../talker/talk.py", "/plugins/talker/talk.py"] {
        let mut set = package();
        set[1].0 = outside;
        let result = verify(&index(), &set);
        assert!(matches!(cause(&result), Cause::FileNotCovered), "{outside}: {result:?}");
    }
}

#[test]
fn one_flipped_byte_anywhere_in_the_index_is_refused() {
    let index = index();
    for at in 0..index.len() {
        let mut changed = index.clone();
        changed[at] ^= 0x01;
        let result = verify(&changed, &package());
        assert!(result.is_err(), "byte {at} ({:?}): {result:?}", index[at] as char);
    }
}

#[test]
fn an_index_with_its_signed_lines_edited_is_refused_as_a_bad_signature() {
    let index = String::from_utf8(index()).unwrap();
    let mut set = package();
    set[1].1 = b"import evil\n".to_vec();
    let evil_digest = format!("{:x}", Sha256::digest(&set[1].1));
    let good_digest = format!("{:x}", Sha256::digest(&package()[1].1));
    for (from, to) in [
        ("serial 3", "serial 4"),
        ("version 0.3", "version 9.9"),
        (good_digest.as_str(), evil_digest.as_str()),
    ] {
        let edited = index.replace(from, to);
        assert_ne!(edited, index);
        let result = verify(edited.as_bytes(), &set);
        assert!(
            matches!(cause(&result), Cause::BadSignature(_)),
            "{from} -> {to}: {result:?}"
        );
    }
}

#[test]
fn an_index_grafted_from_another_plugin_is_refused_by_name() {
    let index = sign_index(files(&package()), &Release::new("mailer", "1", 1), &key(1)).unwrap();
    let result = verify(&index, &package());
    assert!(
        matches!(cause(&result), Cause::NameMismatch { expected, signed } if expected == "talker" && signed == "mailer"),
        "{result:?}"
    );
}

#[test]
fn an_index_by_an_unknown_or_revoked_key_or_below_the_minimum_serial_is_refused() {
    let (trusted, stranger) = (key(1), key(2));
    let by_stranger = sign_index(files(&package()), &release(), &stranger).unwrap();
    let result = verify(&by_stranger, &package());
    assert!(
        matches!(cause(&result), Cause::UnknownKey(id) if *id == stranger.id()),
        "{result:?}"
    );

    let mut keyring = keyring(&[&trusted]);
    keyring.revoke(trusted.id());
    let result = keyring.verify_index(index().as_slice(), Path::new(INDEX), None, files(&package()));
    assert!(
        matches!(cause(&result), Cause::RevokedKey(id) if *id == trusted.id()),
        "{result:?}"
    );

    let mut keyring = crate::keyring(&[&trusted]);
    keyring.require_serial("talker", 4);
    let result = keyring.verify_index(index().as_slice(), Path::new(INDEX), None, files(&package()));
    assert!(
        matches!(
            cause(&result),
            Cause::RolledBack {
                serial: 3,
                minimum: 4,
                ..
            }
        ),
        "{result:?}"
    );
}

#[test]
fn an_index_truncated_at_any_length_is_refused_as_corrupt() {
    let index = index();
    for len in 0..index.len() {
        let result = verify(&index[..len], &package());
        assert!(matches!(cause(&result), Cause::Corrupt(_)), "{len} bytes: {result:?}");
    }
}

#[test]
fn an_index_larger_than_4_mib_is_corrupt_without_being_read_whole() {
    let huge = std::io::Read::take(std::io::repeat(b'x'), u64::MAX);
    let result = keyring(&[&key(1)]).verify_index(huge, Path::new(INDEX), None, files(&package()));
    assert!(
        matches!(cause(&result), Cause::Corrupt(what) if what.contains("4 MiB")),
        "{result:?}"
    );
}

/// An index of exactly 4 MiB is signed and verifies; one byte more is not signed.
#[test]
fn an_index_of_exactly_4_mib_is_signed_and_verifies_and_one_byte_more_is_not_signed() {
    let key = key(1);
    let sign = |paths: &[String]| sign_index(paths.iter().map(|p| (p, &b""[..])), &release(), &key);
    // An index is its fixed lines plus a line per file: "file", the digest and the path.
    let fixed = sign(&["a".to_owned()]).unwrap().len() - "file  a\n".len() - 64;
    let line = |path_len: usize| "file  \n".len() + 64 + path_len;
    let rest = (4 << 20) - fixed;
    let count = (rest - line(100)) / line(100);
    let last = rest - count * line(100) - line(0);
    let paths = |last: usize| -> Vec<String> {
        let mut paths: Vec<String> = (0..count).map(|i| format!("{i:0>100}")).collect();
        paths.push("z".repeat(last));
        paths
    };
    let index = sign(&paths(last)).unwrap();
    assert_eq!(index.len(), 4 << 20);
    let set = paths(last);
    let files = set.iter().map(|p| (p.as_str(), &b""[..]));
    let verified = keyring(&[&key]).verify_index(&index[..], Path::new(INDEX), None, files);
    assert!(verified.is_ok(), "{:?}", verified.err());
    assert!(matches!(sign(&paths(last + 1)), Err(SignError::IndexTooLarge(len)) if len == (4 << 20) + 1));
}

#[test]
fn sets_that_cannot_be_listed_are_not_signed() {
    let key = key(1);
    let sign = |set: Vec<(&str, &[u8])>| sign_index(set, &release(), &key);
    assert!(matches!(sign(vec![]), Err(SignError::NoFiles)));
    assert!(
        matches!(sign(vec![("a.py", b""), ("./a.py", b"")]), Err(SignError::DuplicatePath(p)) if p == Path::new("./a.py"))
    );
    for bad in ["../a.py", "/a.py", "a\nb.py"] {
        assert!(
            matches!(sign(vec![(bad, b"")]), Err(SignError::InvalidPath { .. })),
            "{bad:?}"
        );
    }
}
