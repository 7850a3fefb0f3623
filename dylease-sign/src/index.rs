//! The signed index of a file set (a Python file, a package directory): its text format (the
//! crate docs give it), how it is made and how it is parsed. The checks against a keyring and
//! the set's files are the keyring's (`keyring.rs`).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use crate::digest;
use crate::error::SignError;
use crate::hex;
use crate::key::{KeyId, SigningKey};
use crate::release::{Release, text_problem};

/// The name of an index: a package directory's is this file in the directory; a single file's
/// is the file's name with this appended ([`file_index_path`]).
pub const INDEX_NAME: &str = ".dylease-sig";

/// The first line of an index, with its format version.
const HEADER: &str = "dylease-index 1";
/// What the signature covers before the index's lines: no signature of anything else (a
/// library's block, another protocol's message) can pass for an index's.
const DOMAIN: &[u8] = b"dylease-index-v1\0";
/// The largest index a reader accepts: some forty thousand files of short names.
pub(crate) const MAX_INDEX_LEN: u64 = 4 << 20;

/// The index of a package directory: [`INDEX_NAME`] in it. Its paths are relative to `dir`.
pub fn package_index_path(dir: &Path) -> PathBuf {
    dir.join(INDEX_NAME)
}

/// The index of a single file (a Python plugin `greeter.py`): beside it, named as the file
/// with [`INDEX_NAME`] appended (`greeter.py.dylease-sig`). It lists the file by its name.
pub fn file_index_path(file: &Path) -> PathBuf {
    let mut path = file.as_os_str().to_owned();
    path.push(INDEX_NAME);
    PathBuf::from(path)
}

/// A parsed index: the key id, the release, the files and their digests, the signed lines
/// and the signature.
#[derive(Debug)]
pub(crate) struct Index<'a> {
    pub(crate) key: KeyId,
    pub(crate) release: Release,
    pub(crate) files: BTreeMap<&'a str, [u8; 32]>,
    body: &'a str,
    pub(crate) signature: [u8; 64],
}

impl Index<'_> {
    /// What the signature signs: the domain and every line before the signature's.
    pub(crate) fn message(&self) -> Vec<u8> {
        [DOMAIN, self.body.as_bytes()].concat()
    }
}

/// Parses an index, strictly: one spelling of each index is accepted, the one
/// [`sign_index`] writes.
///
/// # Errors
///
/// What is wrong with the index, as a phrase for [`Cause::Corrupt`](crate::Cause::Corrupt).
pub(crate) fn parse(bytes: &[u8]) -> Result<Index<'_>, String> {
    let text = std::str::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".to_owned())?;
    let Some(lines) = text.strip_suffix('\n') else {
        return Err("its last line does not end with a newline (it was truncated)".to_owned());
    };
    let Some((lines, last)) = lines.rsplit_once('\n') else {
        return Err("it has a single line".to_owned());
    };
    let body = &text[..lines.len() + 1];
    let signature = last
        .strip_prefix("signature ")
        .and_then(hex::decode::<64>)
        .ok_or("its last line is not `signature` and 128 lowercase hexadecimal digits")?;

    let mut lines = lines.split('\n').zip(1..);
    match lines.next() {
        Some((HEADER, _)) => {}
        Some((other, _)) if other.starts_with("dylease-index ") => {
            return Err(format!(
                "it is of format `{other}`, and this verifier reads `{HEADER}` (a newer signer's: update dylease)"
            ));
        }
        _ => return Err(format!("its first line is not `{HEADER}`")),
    }
    let mut field = |name: &str| match lines.next() {
        Some((line, number)) => line
            .strip_prefix(name)
            .and_then(|l| l.strip_prefix(' '))
            .ok_or(format!("line {number} is not its `{name}` line")),
        None => Err(format!("it has no `{name}` line")),
    };
    let key = field("key")?;
    let key = hex::decode(key)
        .map(KeyId::from_bytes)
        .ok_or("its key id is not 16 lowercase hexadecimal digits")?;
    let name = field("name")?.to_owned();
    let version = field("version")?.to_owned();
    let serial = field("serial")?;
    let canonical = serial == "0" || (!serial.starts_with('0') && serial.bytes().all(|b| b.is_ascii_digit()));
    let serial = serial.parse().ok().filter(|_| canonical).ok_or(format!(
        "its serial `{serial}` is not a decimal number below 2^64 without leading zeros"
    ))?;
    if let Some(problem) = text_problem("name", &name).or_else(|| text_problem("version", &version)) {
        return Err(problem);
    }

    let mut files = BTreeMap::new();
    let mut last: Option<&str> = None;
    for (line, number) in lines {
        let entry = line.strip_prefix("file ").and_then(|l| l.split_once(' '));
        let Some((digest, path)) = entry.and_then(|(digest, path)| Some((hex::decode::<32>(digest)?, path))) else {
            return Err(format!(
                "line {number} is not a `file` line (a 64-digit digest and a path)"
            ));
        };
        if let Some(problem) = path_problem(path) {
            return Err(format!("line {number} lists a path that cannot be listed: {problem}"));
        }
        if last.is_some_and(|last| last >= path) {
            return Err(format!("line {number} lists `{path}` out of order or twice"));
        }
        last = Some(path);
        files.insert(path, digest);
    }
    if files.is_empty() {
        return Err("it lists no file".to_owned());
    }
    Ok(Index {
        key,
        release: Release { name, version, serial },
        files,
        body,
        signature,
    })
}

/// Why `path` cannot be listed in an index, if it cannot: indexes list relative paths
/// below their directory, components joined by `/`.
fn path_problem(path: &str) -> Option<&'static str> {
    if path.chars().any(char::is_control) {
        Some("it holds a control character")
    } else if path.split('/').any(|part| matches!(part, "" | "." | "..")) {
        Some("it is empty, absolute, or has an empty, `.` or `..` component")
    } else {
        None
    }
}

/// How an index lists `path`, a path relative to its directory: its components joined by `/`.
///
/// # Errors
///
/// Why it cannot be listed.
pub(crate) fn listed_name(path: &Path) -> Result<String, &'static str> {
    let mut name = String::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => {
                if !name.is_empty() {
                    name.push('/');
                }
                name.push_str(part.to_str().ok_or("it is not UTF-8")?);
            }
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return Err("it is absolute"),
            Component::ParentDir => return Err("it climbs out of the index's directory"),
        }
    }
    path_problem(&name).map_or(Ok(name), Err)
}

/// The index that signs a file set as `release` with `key`: each file is given by its path
/// relative to the index's directory (a single file by its name) and a reader of its bytes,
/// which is read to its end.
///
/// Write the index to [`package_index_path`] for a package directory, or to
/// [`file_index_path`] for a single file; give every file the host will execute (and not the
/// index itself). The index is text, one line a field or file, files sorted by path; signing
/// is deterministic.
///
/// # Errors
///
/// [`SignError::InvalidRelease`]; [`SignError::InvalidPath`] for a path not relative to the
/// index's directory, not UTF-8 or with a control character; [`SignError::DuplicatePath`];
/// [`SignError::NoFiles`]; [`SignError::Io`] when a reader fails;
/// [`SignError::IndexTooLarge`].
pub fn sign_index<P: AsRef<Path>, R: Read>(
    files: impl IntoIterator<Item = (P, R)>,
    release: &Release,
    key: &SigningKey,
) -> Result<Vec<u8>, SignError> {
    if let Some(problem) = release.problem() {
        return Err(SignError::InvalidRelease(problem));
    }
    let mut listed = BTreeMap::new();
    for (path, mut reader) in files {
        let path = path.as_ref();
        let name = listed_name(path).map_err(|problem| SignError::InvalidPath {
            path: path.to_owned(),
            problem,
        })?;
        if listed.contains_key(&name) {
            return Err(SignError::DuplicatePath(path.to_owned()));
        }
        let (digest, _) = digest::sha256(&mut reader, None).map_err(|error| SignError::Io {
            path: path.to_owned(),
            error,
        })?;
        listed.insert(name, digest);
    }
    if listed.is_empty() {
        return Err(SignError::NoFiles);
    }
    let Release { name, version, serial } = release;
    let mut index = format!(
        "{HEADER}\nkey {}\nname {name}\nversion {version}\nserial {serial}\n",
        key.id()
    );
    for (path, digest) in &listed {
        // Writing to a `String` cannot fail.
        let _ = writeln!(index, "file {} {path}", hex::encode(digest));
    }
    let signature = key.sign(&[DOMAIN, index.as_bytes()].concat());
    let _ = writeln!(index, "signature {}", hex::encode(&signature));
    if index.len() as u64 > MAX_INDEX_LEN {
        return Err(SignError::IndexTooLarge(index.len()));
    }
    Ok(index.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_index_parses_back_to_what_was_signed() {
        let key = SigningKey::from_seed(&[5; 32]);
        let files = [
            ("pkg/b.py", b"b".as_slice()),
            ("pkg/__init__.py", b"".as_slice()),
            ("a b.py", b"x"),
        ];
        let index = sign_index(files, &Release::new("greeter", "2.0", 9), &key).unwrap();
        let parsed = parse(&index).unwrap();
        assert_eq!(parsed.key, key.id());
        assert_eq!(parsed.release, Release::new("greeter", "2.0", 9));
        assert_eq!(
            parsed.files.keys().copied().collect::<Vec<_>>(),
            ["a b.py", "pkg/__init__.py", "pkg/b.py"]
        );
        assert!(key.public_key().verifies(&parsed.message(), &parsed.signature));
        let text = String::from_utf8(index).unwrap();
        assert!(text.starts_with("dylease-index 1\nkey "), "{text}");
    }

    #[test]
    fn only_relative_paths_below_the_directory_are_listed() {
        assert_eq!(listed_name(Path::new("pkg//mod.py")).as_deref(), Ok("pkg/mod.py"));
        assert_eq!(listed_name(Path::new("./pkg/mod.py")).as_deref(), Ok("pkg/mod.py"));
        for bad in ["/etc/passwd", "../x.py", "pkg/../../x.py", "", ".", "a\nb.py"] {
            assert!(listed_name(Path::new(bad)).is_err(), "{bad:?}");
        }
        for bad in ["/x", "a//b", "./a", "a/..", "a/", "a\tb"] {
            assert!(path_problem(bad).is_some(), "{bad:?}");
        }
    }

    #[test]
    fn non_canonical_spellings_of_an_index_are_refused() {
        let key = SigningKey::from_seed(&[5; 32]);
        let index =
            String::from_utf8(sign_index([("a.py", b"a".as_slice())], &Release::new("n", "1", 7), &key).unwrap())
                .unwrap();
        assert!(parse(index.as_bytes()).is_ok());
        for (from, to) in [
            ("serial 7", "serial 07"),
            ("serial 7", "serial +7"),
            ("key ", "key  "),
            ("\n", "\r\n"),
            ("name n", "name"),
        ] {
            let changed = index.replacen(from, to, 1);
            assert!(parse(changed.as_bytes()).is_err(), "{from:?} -> {to:?}");
        }
        assert!(parse(index.trim_end().as_bytes()).is_err());
        // Files out of order, or listed twice.
        let two = sign_index(
            [("a.py", b"a".as_slice()), ("b.py", b"b")],
            &Release::new("n", "1", 7),
            &key,
        )
        .unwrap();
        let two = String::from_utf8(two).unwrap();
        let lines: Vec<&str> = two.lines().collect();
        for (first, second) in [(lines[6], lines[5]), (lines[5], lines[5])] {
            let edited = [&lines[..5], &[first, second], &lines[7..]].concat().join("\n") + "\n";
            assert!(
                parse(edited.as_bytes()).unwrap_err().contains("out of order or twice"),
                "{edited}"
            );
        }
        assert!(
            parse(index.replace("dylease-index 1", "dylease-index 2").as_bytes())
                .unwrap_err()
                .contains("update")
        );
        // A first line of no index format is not taken for a newer one.
        let other = index.replace("dylease-index 1", "dylease-manifest 1");
        assert_eq!(
            parse(other.as_bytes()).unwrap_err(),
            "its first line is not `dylease-index 1`"
        );
    }
}
