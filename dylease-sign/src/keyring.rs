//! What a host trusts ([`Keyring`]: keys, revocations, minimum serials) and the
//! verifications against it, which give a [`Verified`] or a [`SignatureError`].

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Cursor, Read, Seek, SeekFrom};
use std::path::Path;

use sha2::{Digest as _, Sha256};

use crate::block;
use crate::claim::{self, CheckMemo};
use crate::digest;
use crate::error::{Cause, SignatureError};
use crate::index::{self, MAX_INDEX_LEN};
use crate::key::{KeyId, PublicKey};
use crate::release::Release;

/// What a host trusts: the publishers' public keys, the key ids it revokes, and the oldest
/// release serial it accepts for each plugin name.
///
/// A revoked key id is refused even while its key is trusted, so revoking is one line of a
/// host's configuration whatever the list of keys says.
///
/// ```
/// use dylease_sign::{Keyring, SigningKey};
/// # let (old, new) = (SigningKey::from_seed(&[1; 32]), SigningKey::from_seed(&[2; 32]));
/// let mut keyring = Keyring::new();
/// keyring
///     .trust(new.public_key())
///     .trust(old.public_key())
///     .revoke(old.id())
///     .require_serial("greeter", 12);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Keyring {
    trusted: BTreeMap<KeyId, PublicKey>,
    revoked: BTreeSet<KeyId>,
    minimum_serial: BTreeMap<String, u64>,
    /// Where the Ed25519 checks that passed are remembered ([`Keyring::remember_checks`]).
    memo: Option<std::sync::Arc<dyn CheckMemo>>,
}

/// What a successful verification found: which key signed, and what release the bytes are.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Verified {
    /// The id of the (trusted, not revoked) key that signed.
    pub key: KeyId,
    /// The signed release: name, version and serial.
    pub release: Release,
    /// The SHA-256 digest of the verified bytes: of a library's image (its bytes before the
    /// signature block), or of a file set's index (which lists every file's digest).
    pub digest: [u8; 32],
}

impl Keyring {
    /// A keyring that trusts no key: it refuses every signature.
    pub fn new() -> Keyring {
        Keyring::default()
    }

    /// Trusts signatures by `key` (unless its id is revoked).
    pub fn trust(&mut self, key: PublicKey) -> &mut Keyring {
        self.trusted.insert(key.id(), key);
        self
    }

    /// Refuses signatures by the key of id `id`, trusted or not.
    pub fn revoke(&mut self, id: KeyId) -> &mut Keyring {
        self.revoked.insert(id);
        self
    }

    /// Refuses releases of the plugin `name` whose serial is below `minimum` (no rollback to
    /// an older signed release). Setting it again replaces the minimum.
    pub fn require_serial(&mut self, name: &str, minimum: u64) -> &mut Keyring {
        self.minimum_serial.insert(name.to_owned(), minimum);
        self
    }

    /// Remembers the signature checks that pass in `memo`, and asks it before checking one:
    /// whether a key signed a message is a pure function of the key's bytes, the message and
    /// the signature, so an answer remembered under a digest of all three
    /// ([`CheckMemo`]'s key) is the answer, whatever file the message came from. The digests
    /// of the signed bytes (a library's image, a set's files) are never remembered: every
    /// verification reads them again.
    pub fn remember_checks(&mut self, memo: std::sync::Arc<dyn CheckMemo>) -> &mut Keyring {
        self.memo = Some(memo);
        self
    }

    /// The ids of the keys this keyring trusts (revoked ones included), in order.
    pub fn trusted(&self) -> impl Iterator<Item = KeyId> + '_ {
        self.trusted.keys().copied()
    }

    /// The ids this keyring revokes, in order.
    pub fn revoked(&self) -> impl Iterator<Item = KeyId> + '_ {
        self.revoked.iter().copied()
    }

    /// The minimum serial this keyring holds for the plugin `name`, if any.
    pub fn minimum_serial(&self, name: &str) -> Option<u64> {
        self.minimum_serial.get(name).copied()
    }

    /// Verifies a signed library file: finds the signature block at its end (two bounded
    /// reads), checks the block's key and signature against this keyring, its name against
    /// `expected_name` (when the host knows which plugin it is loading) and its serial against
    /// the name's minimum, then digests the image (every byte before the block) in one
    /// streamed pass and compares it with the signed digest.
    ///
    /// `file` is any reader that can seek, such as the very `std::fs::File` the host then has
    /// the loader map, or a `Cursor` over bytes in memory; it is left at any position. `path`
    /// names the file in errors only.
    ///
    /// # Errors
    ///
    /// A [`SignatureError`] for `path` whose [`Cause`] says why the file is refused:
    /// [`Unsigned`](Cause::Unsigned), [`Corrupt`](Cause::Corrupt),
    /// [`RevokedKey`](Cause::RevokedKey), [`UnknownKey`](Cause::UnknownKey),
    /// [`BadSignature`](Cause::BadSignature), [`NameMismatch`](Cause::NameMismatch),
    /// [`RolledBack`](Cause::RolledBack), [`ContentChanged`](Cause::ContentChanged) (checked in
    /// this order), or [`Io`](Cause::Io).
    pub fn verify_file<R: Read + Seek + ?Sized>(
        &self,
        file: &mut R,
        path: &Path,
        expected_name: Option<&str>,
    ) -> Result<Verified, SignatureError> {
        self.verify_image(file, expected_name)
            .map_err(|(cause, key)| SignatureError::new(path, cause).with_key(key))
    }

    /// [`Keyring::verify_file`] over a signed library's bytes in memory.
    ///
    /// # Errors
    ///
    /// As [`Keyring::verify_file`]'s.
    pub fn verify_bytes(
        &self,
        bytes: &[u8],
        path: &Path,
        expected_name: Option<&str>,
    ) -> Result<Verified, SignatureError> {
        self.verify_file(&mut Cursor::new(bytes), path, expected_name)
    }

    /// Verifies a file set (a Python file, a package directory) against its signed index:
    /// reads the index (at most 4 MiB), checks its key and signature against this keyring, its
    /// name against `expected_name` and its serial against the name's minimum, then checks
    /// that `files` are exactly the files it lists, with the digests it lists.
    ///
    /// `index` reads the index found at `index_path` ([`package_index_path`] or
    /// [`file_index_path`]). `files` are every file the host will execute, each by its path
    /// relative to the index's directory and a reader of the bytes the host will execute (an
    /// open file, or the bytes it read), read to its end.
    ///
    /// [`package_index_path`]: crate::package_index_path
    /// [`file_index_path`]: crate::file_index_path
    ///
    /// # Errors
    ///
    /// A [`SignatureError`] for `index_path` as for [`Keyring::verify_file`] (no
    /// [`Cause::ContentChanged`]: a file set's causes say which file), or for one file of the
    /// set, in the index's directory: [`Cause::FileNotCovered`] for a file the index does not
    /// list (added after signing), [`Cause::FileChanged`] for a file whose digest differs,
    /// [`Cause::FileMissing`] for a listed file not among `files` (removed after signing),
    /// [`Cause::Io`] for a reader that fails. A host that finds no index makes
    /// [`Cause::Unsigned`] itself.
    pub fn verify_index<P: AsRef<Path>, R: Read>(
        &self,
        index: impl Read,
        index_path: &Path,
        expected_name: Option<&str>,
        files: impl IntoIterator<Item = (P, R)>,
    ) -> Result<Verified, SignatureError> {
        let refuse = |cause| SignatureError::new(index_path, cause);
        let mut bytes = Vec::new();
        index
            .take(MAX_INDEX_LEN + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| refuse(Cause::Io(e)))?;
        if bytes.len() as u64 > MAX_INDEX_LEN {
            return Err(refuse(Cause::Corrupt(
                "it is longer than the longest index (4 MiB)".to_owned(),
            )));
        }
        let parsed = index::parse(&bytes).map_err(|what| refuse(Cause::Corrupt(what)))?;
        let key = Some(parsed.key);
        self.check(
            parsed.key,
            &parsed.message(),
            &parsed.signature,
            &parsed.release,
            expected_name,
        )
        .map_err(|cause| refuse(cause).with_key(key))?;

        let dir = index_path.parent().unwrap_or(Path::new(""));
        let mut seen = BTreeSet::new();
        for (path, mut reader) in files {
            let path = path.as_ref();
            let refuse = |cause| SignatureError::new(dir.join(path), cause).with_key(key);
            let listed = index::listed_name(path).ok();
            let Some((&name, digest)) = listed.and_then(|name| parsed.files.get_key_value(name.as_str())) else {
                return Err(refuse(Cause::FileNotCovered));
            };
            let (actual, _) = digest::sha256(&mut reader, None).map_err(|e| refuse(Cause::Io(e)))?;
            if actual != *digest {
                return Err(refuse(Cause::FileChanged));
            }
            seen.insert(name);
        }
        if let Some(missing) = parsed.files.keys().find(|name| !seen.contains(*name)) {
            return Err(SignatureError::new(dir.join(missing), Cause::FileMissing).with_key(key));
        }
        Ok(Verified {
            key: parsed.key,
            release: parsed.release,
            digest: Sha256::digest(&bytes).into(),
        })
    }

    /// [`Keyring::verify_file`]'s work; a refusal comes with the key id the block names, once
    /// it was read.
    fn verify_image<R: Read + Seek + ?Sized>(
        &self,
        file: &mut R,
        expected_name: Option<&str>,
    ) -> Result<Verified, (Cause, Option<KeyId>)> {
        let (image_len, bytes) = claim::read_block(file).map_err(|cause| (cause, None))?;
        let block = block::parse(&bytes).map_err(|what| (Cause::Corrupt(what), None))?;
        let refuse = |cause| (cause, Some(block.key));
        let statement = &block.statement;
        self.check(
            block.key,
            &block.message(),
            &block.signature,
            &statement.release,
            expected_name,
        )
        .map_err(refuse)?;

        if statement.image_len != image_len {
            return Err(refuse(Cause::ContentChanged));
        }
        file.seek(SeekFrom::Start(0)).map_err(|e| refuse(Cause::Io(e)))?;
        let (digest, read) = digest::sha256(file, Some(image_len)).map_err(|e| refuse(Cause::Io(e)))?;
        if read != image_len {
            return Err(refuse(Cause::Io(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                format!("it ended after {read} of its {image_len} signed bytes: it changed while it was verified"),
            ))));
        }
        if digest != statement.digest {
            return Err(refuse(Cause::ContentChanged));
        }
        Ok(Verified {
            key: block.key,
            release: statement.release.clone(),
            digest,
        })
    }

    /// Whether `signature` is `public`'s signature of `message`: remembered, or checked (and
    /// remembered if it passes).
    fn verifies(&self, public: &PublicKey, message: &[u8], signature: &[u8; 64]) -> bool {
        let Some(memo) = &self.memo else {
            return public.verifies(message, signature);
        };
        let check = claim::check_key(public, message, signature);
        if memo.passed(&check) {
            return true;
        }
        let passed = public.verifies(message, signature);
        if passed {
            memo.remember(check);
        }
        passed
    }

    /// The checks of a signed statement, in the order the errors document: the key (revoked,
    /// then trusted), the signature, the name, the serial.
    fn check(
        &self,
        key: KeyId,
        message: &[u8],
        signature: &[u8; 64],
        release: &Release,
        expected_name: Option<&str>,
    ) -> Result<(), Cause> {
        if self.revoked.contains(&key) {
            return Err(Cause::RevokedKey(key));
        }
        let Some(public) = self.trusted.get(&key) else {
            return Err(Cause::UnknownKey(key));
        };
        if !self.verifies(public, message, signature) {
            return Err(Cause::BadSignature(key));
        }
        if let Some(expected) = expected_name
            && expected != release.name
        {
            return Err(Cause::NameMismatch {
                expected: expected.to_owned(),
                signed: release.name.clone(),
            });
        }
        if let Some(&minimum) = self.minimum_serial.get(&release.name)
            && release.serial < minimum
        {
            return Err(Cause::RolledBack {
                name: release.name.clone(),
                serial: release.serial,
                minimum,
            });
        }
        Ok(())
    }
}
