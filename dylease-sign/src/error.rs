//! The errors: why a verification refused a file ([`SignatureError`], its [`Cause`]) and why
//! signing failed ([`SignError`]).

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use crate::key::KeyId;

/// Why a file (or a file set) was refused: the file it concerns and the [`Cause`].
///
/// Its `Display` is a sentence that names the file, what is wrong and what to do about it.
#[derive(Debug)]
pub struct SignatureError {
    path: PathBuf,
    cause: Cause,
    key: Option<KeyId>,
}

/// Why a verification refused a file.
///
/// The file set causes ([`Cause::FileChanged`], [`Cause::FileNotCovered`],
/// [`Cause::FileMissing`]) concern one file of the set, which the error's path names; the
/// others concern the signed file itself, or the index of a set.
#[derive(Debug)]
#[non_exhaustive]
pub enum Cause {
    /// The file does not end with a signature block (a library signed before `strip`, or
    /// never signed); for a file set, the host found no index (it builds this error itself
    /// with [`SignatureError::new`]).
    Unsigned,
    /// The signature block (or index) is there but malformed or truncated: what was wrong.
    Corrupt(String),
    /// The signature is by a key the keyring does not trust: its id.
    UnknownKey(KeyId),
    /// The signature is by a key the keyring revokes: its id.
    RevokedKey(KeyId),
    /// The signature does not verify under the trusted key of this id: the signed statement
    /// (name, version, serial, digest) was altered, or the signature was taken from another
    /// statement.
    BadSignature(KeyId),
    /// The signature verifies, but the bytes it covers are not the file's: the file was
    /// changed after it was signed, or the block was grafted from another file signed by the
    /// same key.
    ContentChanged,
    /// The signature names another plugin than the one expected: a block or index grafted
    /// from another plugin.
    NameMismatch {
        /// The name the host expected.
        expected: String,
        /// The name the signature holds.
        signed: String,
    },
    /// The signed release is older than the keyring's minimum for its name.
    RolledBack {
        /// The plugin's name.
        name: String,
        /// The signed release's serial.
        serial: u64,
        /// The keyring's minimum serial for the name.
        minimum: u64,
    },
    /// A file of a set differs from the digest its signed index lists.
    FileChanged,
    /// A file of a set is not listed in its signed index (added after signing).
    FileNotCovered,
    /// A file the signed index lists is not among the set's files (removed after signing).
    FileMissing,
    /// The file could not be read (or changed length while it was read).
    Io(io::Error),
}

impl SignatureError {
    /// An error of `cause` about the file at `path`. Verification makes these; a host makes
    /// one itself for a cause it finds first, such as [`Cause::Unsigned`] for a package without
    /// an index.
    pub fn new(path: impl Into<PathBuf>, cause: Cause) -> SignatureError {
        SignatureError {
            path: path.into(),
            cause,
            key: None,
        }
    }

    /// This error, saying that the signature found names the key `key` (`None`: none was
    /// read, as for an unsigned file).
    pub fn with_key(mut self, key: Option<KeyId>) -> SignatureError {
        self.key = key;
        self
    }

    /// The id of the key the refused signature names, if a signature was read (its block or
    /// index parsed): whatever the cause, so that a host can say which key signed a file it
    /// refuses for its name, serial or bytes.
    pub fn key(&self) -> Option<KeyId> {
        self.key
    }

    /// The file the error concerns: the signed file, the index of a file set, or one file of
    /// the set for the file set causes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Why the file was refused.
    pub fn cause(&self) -> &Cause {
        &self.cause
    }
}

impl From<io::Error> for Cause {
    fn from(error: io::Error) -> Cause {
        Cause::Io(error)
    }
}

impl fmt::Display for SignatureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = self.path.display();
        match &self.cause {
            Cause::Unsigned => write!(
                f,
                "{path} carries no dylease signature: have its publisher sign it (a library after `strip`, \
                 which drops an appended signature; a Python file or package with a signed index beside it)"
            ),
            Cause::Corrupt(what) => write!(
                f,
                "{path} has a damaged dylease signature ({what}): install it again from its publisher, \
                 or have it signed again"
            ),
            Cause::UnknownKey(id) => write!(
                f,
                "{path} is signed by key {id}, which this host does not trust: add that public key to the \
                 host's keyring if you trust its publisher"
            ),
            Cause::RevokedKey(id) => write!(
                f,
                "{path} is signed by key {id}, which this host revokes: install a release signed with a \
                 current key"
            ),
            Cause::BadSignature(id) => write!(
                f,
                "{path}'s signature does not verify under key {id}: what it signs was altered, or the \
                 signature was copied from another file; install the file again from its publisher"
            ),
            Cause::ContentChanged => write!(
                f,
                "{path} is not the bytes its signature covers: it was changed after signing, or its \
                 signature was copied from another file; install it again from its publisher"
            ),
            Cause::NameMismatch { expected, signed } => write!(
                f,
                "{path} is signed as `{signed}`, not as `{expected}`: its signature belongs to another \
                 plugin; install `{expected}` from its publisher"
            ),
            Cause::RolledBack { name, serial, minimum } => write!(
                f,
                "{path} is serial {serial} of `{name}`, older than serial {minimum}, the oldest this host \
                 accepts (no rollback): install serial {minimum} or newer"
            ),
            Cause::FileChanged => write!(
                f,
                "{path} changed after it was signed (its digest is not the one its signed index lists): \
                 install its package again from its publisher"
            ),
            Cause::FileNotCovered => write!(
                f,
                "{path} is not listed in its package's signed index (it was added after signing): remove it, \
                 or have the package signed again"
            ),
            Cause::FileMissing => write!(
                f,
                "{path} is listed in its package's signed index but is not among the package's files (it was \
                 removed after signing): install the package again from its publisher"
            ),
            Cause::Io(error) => write!(f, "{path} could not be read to verify its signature: {error}"),
        }
    }
}

impl std::error::Error for SignatureError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.cause {
            Cause::Io(error) => Some(error),
            _ => None,
        }
    }
}

/// Why signing failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum SignError {
    /// The release cannot be signed: its name or version is empty, longer than 255 bytes, or
    /// holds a control character.
    InvalidRelease(String),
    /// The bytes to sign already end with a signature block: sign
    /// [`strip_signature`](crate::strip_signature)'s bytes, or use
    /// [`sign_file`](crate::sign_file), which replaces the block.
    AlreadySigned,
    /// A path of a file set cannot be listed in an index: it is not relative, climbs out of
    /// the index's directory, is not UTF-8, or holds a control character.
    InvalidPath {
        /// The path as given.
        path: PathBuf,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// A path of a file set was given twice.
    DuplicatePath(PathBuf),
    /// A file set to sign has no file.
    NoFiles,
    /// The index of a file set would be longer than a verifier reads (4 MiB): its length.
    IndexTooLarge(usize),
    /// A file could not be read or written.
    Io {
        /// The file.
        path: PathBuf,
        /// The error.
        error: io::Error,
    },
}

impl fmt::Display for SignError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SignError::InvalidRelease(problem) => write!(
                f,
                "cannot sign this release: {problem}; give a name and version of 1 to 255 bytes without \
                 control characters"
            ),
            SignError::AlreadySigned => f.write_str(
                "the bytes to sign already end with a dylease signature block: strip it first (`strip` does, \
                 as does signing the file again, which replaces the block)",
            ),
            SignError::InvalidPath { path, problem } => write!(
                f,
                "cannot list {} in a signed index: {problem}; give paths relative to the index's directory",
                path.display()
            ),
            SignError::DuplicatePath(path) => {
                write!(f, "{} is given twice: list each file of the set once", path.display())
            }
            SignError::NoFiles => f.write_str("a signed index needs at least one file: give the files to sign"),
            SignError::IndexTooLarge(len) => write!(
                f,
                "the signed index would be {len} bytes long, longer than a verifier reads (4 MiB): shorten the \
                 package's paths, or split it into smaller plugins"
            ),
            SignError::Io { path, error } => write!(f, "{}: {error}", path.display()),
        }
    }
}

impl std::error::Error for SignError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SignError::Io { error, .. } => Some(error),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    /// A failure to read or write is the error's source, for a verification and for signing
    /// (other causes have none), and signing's errors are sentences naming the file or the
    /// cause and what to do.
    #[test]
    fn an_io_failure_is_the_source_and_signing_errors_say_what_to_do() {
        let failure = || io::Error::other("the disk is gone");
        let refused = SignatureError::new("libgreeter.so", Cause::Io(failure()));
        assert_eq!(refused.source().unwrap().to_string(), "the disk is gone");
        assert!(
            SignatureError::new("libgreeter.so", Cause::ContentChanged)
                .source()
                .is_none()
        );
        let failed = SignError::Io {
            path: "libgreeter.so".into(),
            error: failure(),
        };
        assert_eq!(failed.source().unwrap().to_string(), "the disk is gone");
        assert_eq!(failed.to_string(), "libgreeter.so: the disk is gone");
        assert!(SignError::NoFiles.source().is_none());
        assert_eq!(
            SignError::NoFiles.to_string(),
            "a signed index needs at least one file: give the files to sign"
        );
        let twice = SignError::DuplicatePath("lib/a.so".into()).to_string();
        assert_eq!(twice, "lib/a.so is given twice: list each file of the set once");
    }
}
