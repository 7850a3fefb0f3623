//! What a signature claims, read without a keyring ([`Claim`], [`read_claim`],
//! [`read_index_claim`]: for tools that show who signed a file before anyone verifies it), and
//! the memo of signature checks a keyring may keep ([`CheckMemo`]).

use std::io::{Read, Seek, SeekFrom};

use sha2::{Digest as _, Sha256};

use crate::block::{self, TRAILER_LEN};
use crate::error::Cause;
use crate::index::{self, MAX_INDEX_LEN};
use crate::key::{KeyId, PublicKey};
use crate::release::Release;

/// What a signature block or index says of its bytes, before anything is verified: the key id
/// it names and the release it claims. Nothing in it is trusted: anyone can write a claim; a
/// [`Keyring`](crate::Keyring)'s verification is what tells whether the named key signed it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Claim {
    /// The id of the key the signature names.
    pub key: KeyId,
    /// The release it claims: name, version and serial.
    pub release: Release,
}

/// What the signature block at the end of a library file claims, read with two bounded reads
/// from its end and not verified: `Ok(None)` if the file ends with no block (unsigned).
///
/// # Errors
///
/// [`Cause::Corrupt`] for a block that is there but malformed, [`Cause::Io`] when the file
/// cannot be read.
pub fn read_claim<R: Read + Seek + ?Sized>(file: &mut R) -> Result<Option<Claim>, Cause> {
    let bytes = match read_block(file) {
        Ok((_, bytes)) => bytes,
        Err(Cause::Unsigned) => return Ok(None),
        Err(cause) => return Err(cause),
    };
    let block = block::parse(&bytes).map_err(Cause::Corrupt)?;
    Ok(Some(Claim {
        key: block.key,
        release: block.statement.release,
    }))
}

/// What a signed index claims (a Python file's or package's, [`file_index_path`] or
/// [`package_index_path`]), read (at most 4 MiB) and parsed, not verified.
///
/// [`file_index_path`]: crate::file_index_path
/// [`package_index_path`]: crate::package_index_path
///
/// # Errors
///
/// [`Cause::Corrupt`] for an index that does not parse (or is longer than 4 MiB),
/// [`Cause::Io`] when it cannot be read.
pub fn read_index_claim(index: impl Read) -> Result<Claim, Cause> {
    let mut bytes = Vec::new();
    index.take(MAX_INDEX_LEN + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_INDEX_LEN {
        return Err(Cause::Corrupt("it is longer than the longest index (4 MiB)".to_owned()));
    }
    let parsed = index::parse(&bytes).map_err(Cause::Corrupt)?;
    Ok(Claim {
        key: parsed.key,
        release: parsed.release,
    })
}

/// The image length and the block bytes of a signed file: the 16-byte trailer from the end,
/// then the block it announces (bounded by [`block::block_len`]).
pub(crate) fn read_block<R: Read + Seek + ?Sized>(file: &mut R) -> Result<(u64, Vec<u8>), Cause> {
    let file_len = file.seek(SeekFrom::End(0))?;
    let Some(trailer_at) = file_len.checked_sub(TRAILER_LEN as u64) else {
        return Err(Cause::Unsigned);
    };
    file.seek(SeekFrom::Start(trailer_at))?;
    let mut trailer = [0; TRAILER_LEN];
    file.read_exact(&mut trailer)?;
    let block_len = block::block_len(&trailer, file_len)?;
    let image_len = file_len - block_len;
    file.seek(SeekFrom::Start(image_len))?;
    // `block_len` bounds the length by the largest block.
    let mut bytes = vec![0; block_len as usize];
    file.read_exact(&mut bytes)?;
    Ok((image_len, bytes))
}

/// Where a [`Keyring`](crate::Keyring) remembers the Ed25519 checks that passed
/// ([`Keyring::remember_checks`](crate::Keyring::remember_checks)), so that verifying the same
/// signed statement again (the same library loaded again) costs its digest only.
///
/// A check is named by a SHA-256 digest of everything it depends on (a domain string, the
/// public key's 32 bytes, the signature's 64 bytes and the signed message): a remembered
/// answer is the answer for exactly those bytes, whichever file they come from next, and
/// nothing about the file (its path, its status) is part of it. Only passed checks are
/// remembered. An implementation may forget any entry at any time (a bounded memo should).
pub trait CheckMemo: std::fmt::Debug + Send + Sync {
    /// Whether the check named `check` passed before (and is still remembered).
    fn passed(&self, check: &[u8; 32]) -> bool;
    /// Remembers that the check named `check` passed.
    fn remember(&self, check: [u8; 32]);
}

/// What the domain of a memo key begins with: no other digest of this crate's is computed
/// over the same bytes.
const CHECK_DOMAIN: &[u8] = b"dylease-check-v1\0";

/// The name of the check "`signature` is `public`'s signature of `message`" in a
/// [`CheckMemo`].
pub(crate) fn check_key(public: &PublicKey, message: &[u8], signature: &[u8; 64]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(CHECK_DOMAIN);
    hasher.update(public.to_bytes());
    hasher.update(signature);
    hasher.update(message);
    hasher.finalize().into()
}

#[cfg(test)]
mod tests {
    use std::io::Cursor;
    use std::path::Path;
    use std::sync::Mutex;

    use super::*;
    use crate::{Keyring, SigningKey, sign_file_bytes, sign_index};

    #[test]
    fn a_claim_is_what_the_block_or_index_says_and_an_unsigned_file_has_none() {
        let key = SigningKey::from_seed(&[5; 32]);
        let release = Release::new("greeter", "1.0", 3);
        let image = b"an image".to_vec();
        let signed = [image.clone(), sign_file_bytes(&image, &release, &key).unwrap()].concat();
        let claim = read_claim(&mut Cursor::new(&signed)).unwrap().unwrap();
        assert_eq!((claim.key, claim.release), (key.id(), release.clone()));
        assert_eq!(read_claim(&mut Cursor::new(&image)).unwrap(), None);
        assert!(matches!(
            read_claim(&mut Cursor::new(&signed[..signed.len() - 1])),
            Ok(None) | Err(Cause::Corrupt(_))
        ));
        let index = sign_index([("a.py", b"x = 1\n".as_slice())], &release, &key).unwrap();
        let claim = read_index_claim(index.as_slice()).unwrap();
        assert_eq!((claim.key, claim.release), (key.id(), release));
        assert!(matches!(read_index_claim(&b"nonsense\n"[..]), Err(Cause::Corrupt(_))));
    }

    /// A memo that counts what it is asked.
    #[derive(Debug, Default)]
    struct Counting {
        passed: Mutex<Vec<[u8; 32]>>,
    }

    impl CheckMemo for Counting {
        fn passed(&self, check: &[u8; 32]) -> bool {
            self.passed.lock().unwrap().contains(check)
        }
        fn remember(&self, check: [u8; 32]) {
            self.passed.lock().unwrap().push(check);
        }
    }

    #[test]
    fn a_remembered_check_is_the_same_bytes_only_and_a_failed_one_is_never_remembered() {
        let key = SigningKey::from_seed(&[6; 32]);
        let memo = std::sync::Arc::new(Counting::default());
        let mut keyring = Keyring::new();
        keyring.trust(key.public_key()).remember_checks(memo.clone());
        let image = b"an image".to_vec();
        let release = Release::new("greeter", "1.0", 3);
        let signed = [image.clone(), sign_file_bytes(&image, &release, &key).unwrap()].concat();
        let path = Path::new("libgreeter.so");
        keyring.verify_bytes(&signed, path, None).unwrap();
        keyring.verify_bytes(&signed, path, None).unwrap();
        assert_eq!(memo.passed.lock().unwrap().len(), 1);
        // The same statement with another signature byte: another check, which fails and is
        // not remembered; the image is digested every time (a changed byte is refused).
        let mut forged = signed.clone();
        let at = forged.len() - 16 - 1;
        forged[at] ^= 1;
        let error = keyring.verify_bytes(&forged, path, None).unwrap_err();
        assert!(matches!(error.cause(), Cause::BadSignature(_)), "{error}");
        assert_eq!(error.key(), Some(key.id()));
        assert_eq!(memo.passed.lock().unwrap().len(), 1);
        let mut changed = signed.clone();
        changed[0] ^= 1;
        let error = keyring.verify_bytes(&changed, path, None).unwrap_err();
        assert!(matches!(error.cause(), Cause::ContentChanged), "{error}");
        assert_eq!(error.key(), Some(key.id()));
    }
}
