//! The signature block appended to a library file (the crate docs give its layout): how it is
//! made, how its trailer is found from the end of the file, and how it is parsed. The checks
//! against a keyring are the keyring's (`keyring.rs`).

use std::fs;
use std::io::{self, Write as _};
use std::path::Path;

use sha2::{Digest as _, Sha256};

use crate::error::{Cause, SignError};
use crate::key::{KeyId, SigningKey};
use crate::release::{MAX_TEXT_LEN, Release, text_problem};

/// The first 8 bytes of a block.
const HEAD_MAGIC: [u8; 8] = *b"DYLSIG>>";
/// The last 8 bytes of a block, and so of a signed file.
const TRAILER_MAGIC: [u8; 8] = *b"<<DYLSIG";
/// The format version this crate writes and reads.
const FORMAT_VERSION: u32 = 1;
/// What the signature covers before the statement: no signature of anything else (an index,
/// another protocol's message) can pass for a block's.
const DOMAIN: &[u8] = b"dylease-signature-v1\0";
/// Magic, format version, key id, statement length.
const HEAD_LEN: usize = 8 + 4 + 8 + 4;
const SIGNATURE_LEN: usize = 64;
/// Block length, magic.
pub(crate) const TRAILER_LEN: usize = 8 + 8;
/// A block's length without its statement.
const FIXED_LEN: usize = HEAD_LEN + SIGNATURE_LEN + TRAILER_LEN;
/// The largest block a reader accepts: a version 1 block is at most
/// `FIXED_LEN + 8 + 32 + 8 + 2 * (1 + 255)` bytes; the rest is room for later versions.
pub(crate) const MAX_BLOCK_LEN: u64 = 64 * 1024;

/// What a block's signature covers (after [`DOMAIN`]): the image's length and SHA-256 digest,
/// and the release it is.
#[derive(Debug)]
pub(crate) struct Statement {
    pub(crate) image_len: u64,
    pub(crate) digest: [u8; 32],
    pub(crate) release: Release,
}

impl Statement {
    /// Image length (`u64`), digest (32 bytes), serial (`u64`), then the name and the version,
    /// each a length byte and UTF-8; integers little-endian.
    fn encode(&self) -> Vec<u8> {
        let Release { name, version, serial } = &self.release;
        let mut bytes = Vec::with_capacity(8 + 32 + 8 + 2 + name.len() + version.len());
        bytes.extend(self.image_len.to_le_bytes());
        bytes.extend(self.digest);
        bytes.extend(serial.to_le_bytes());
        for text in [name, version] {
            // `Release::problem` bounds both to `MAX_TEXT_LEN`, which fits in the length byte.
            bytes.push(text.len() as u8);
            bytes.extend(text.as_bytes());
        }
        bytes
    }

    fn decode(bytes: &[u8]) -> Result<Statement, String> {
        let mut fields = Fields(bytes);
        let image_len = u64::from_le_bytes(fields.array("image length")?);
        let digest = fields.array("digest")?;
        let serial = u64::from_le_bytes(fields.array("serial")?);
        let name = fields.text("name")?;
        let version = fields.text("version")?;
        if !fields.0.is_empty() {
            return Err(format!("{} bytes follow its last field", fields.0.len()));
        }
        Ok(Statement {
            image_len,
            digest,
            release: Release { name, version, serial },
        })
    }
}

/// The fields of a statement not read yet.
struct Fields<'a>(&'a [u8]);

impl Fields<'_> {
    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N], String> {
        let Some((field, rest)) = self.0.split_first_chunk::<N>() else {
            return Err(format!("it ends inside its {what}"));
        };
        self.0 = rest;
        Ok(*field)
    }

    fn text(&mut self, what: &str) -> Result<String, String> {
        let [len] = self.array(what)?;
        let Some((text, rest)) = self.0.split_at_checked(usize::from(len)) else {
            return Err(format!("it ends inside its {what}"));
        };
        self.0 = rest;
        let text = std::str::from_utf8(text).map_err(|_| format!("its {what} is not UTF-8"))?;
        match text_problem(what, text) {
            Some(problem) => Err(problem),
            None => Ok(text.to_owned()),
        }
    }
}

/// A parsed block: the key id, the statement as signed and as read, and the signature.
#[derive(Debug)]
pub(crate) struct Block<'a> {
    pub(crate) key: KeyId,
    pub(crate) statement: Statement,
    statement_bytes: &'a [u8],
    pub(crate) signature: [u8; 64],
}

impl Block<'_> {
    /// What the signature signs: the domain and the statement's bytes.
    pub(crate) fn message(&self) -> Vec<u8> {
        [DOMAIN, self.statement_bytes].concat()
    }
}

/// The length of the block that a file of `file_len` bytes ending with `trailer` holds.
///
/// # Errors
///
/// [`Cause::Unsigned`] when the trailer's magic is not there; [`Cause::Corrupt`] when the
/// length it gives is shorter than a block, longer than [`MAX_BLOCK_LEN`], or longer than the
/// file.
pub(crate) fn block_len(trailer: &[u8; TRAILER_LEN], file_len: u64) -> Result<u64, Cause> {
    let (len, magic) = trailer.split_at(8);
    if magic != TRAILER_MAGIC {
        return Err(Cause::Unsigned);
    }
    let len = u64::from_le_bytes(len.try_into().unwrap_or_default());
    let problem = if len < FIXED_LEN as u64 {
        "shorter than the smallest block"
    } else if len > MAX_BLOCK_LEN {
        "longer than the longest block (64 KiB)"
    } else if len > file_len {
        "longer than the file (it was truncated)"
    } else {
        return Ok(len);
    };
    Err(Cause::Corrupt(format!(
        "its trailer gives a block of {len} bytes, {problem}"
    )))
}

/// Parses a whole block, trailer included, as [`block_len`] delimited it.
///
/// # Errors
///
/// What is wrong with the block, as a phrase for [`Cause::Corrupt`].
pub(crate) fn parse(block: &[u8]) -> Result<Block<'_>, String> {
    let Some((head, rest)) = block.split_first_chunk::<HEAD_LEN>() else {
        return Err(format!(
            "its block of {} bytes is shorter than a block's head",
            block.len()
        ));
    };
    let (magic, head) = head.split_at(8);
    let (version, head) = head.split_at(4);
    let (key, statement_len) = head.split_at(8);
    if magic != HEAD_MAGIC {
        return Err("the block its trailer points to does not begin with a block's magic".to_owned());
    }
    let version = u32::from_le_bytes(version.try_into().unwrap_or_default());
    if version != FORMAT_VERSION {
        return Err(format!(
            "its block is of format version {version}, and this verifier reads version {FORMAT_VERSION} \
             (a newer signer's: update dylease)"
        ));
    }
    let key = KeyId::from_bytes(key.try_into().unwrap_or_default());
    let statement_len = u32::from_le_bytes(statement_len.try_into().unwrap_or_default());
    let statement_fits =
        usize::try_from(statement_len).is_ok_and(|len| len.checked_add(FIXED_LEN) == Some(block.len()));
    if !statement_fits {
        return Err(format!(
            "its head gives a statement of {statement_len} bytes, which does not fill its block of {} bytes",
            block.len()
        ));
    }
    let (statement_bytes, rest) = rest.split_at(statement_len as usize);
    let Some((signature, trailer)) = rest.split_first_chunk::<SIGNATURE_LEN>() else {
        return Err("it ends inside its signature".to_owned());
    };
    let trailer_fits = trailer.len() == TRAILER_LEN
        && trailer[8..] == TRAILER_MAGIC
        && trailer[..8] == (block.len() as u64).to_le_bytes();
    if !trailer_fits {
        return Err("its trailer does not close its block".to_owned());
    }
    let statement =
        Statement::decode(statement_bytes).map_err(|e| format!("its signed statement is malformed: {e}"))?;
    Ok(Block {
        key,
        statement,
        statement_bytes,
        signature: *signature,
    })
}

/// The signature block to append to `image` to sign it as `release` with `key`: the bytes of
/// the signed file are `image` followed by the returned bytes.
///
/// Sign a library after `strip` (which would drop the block) and after anything else that
/// rewrites it. Signing is deterministic: the same image, release and key give the same block.
///
/// ```
/// # fn main() -> Result<(), dylease_sign::SignError> {
/// use dylease_sign::{Release, SigningKey, sign_file_bytes};
/// let key = SigningKey::from_seed(&[1; 32]);
/// let image = b"\x7fELF and the rest of the library".to_vec();
/// let block = sign_file_bytes(&image, &Release::new("greeter", "1.0.0", 1), &key)?;
/// let signed = [image, block].concat();
/// # assert!(signed.ends_with(b"<<DYLSIG"));
/// # Ok(())
/// # }
/// ```
///
/// # Errors
///
/// [`SignError::InvalidRelease`] when the release's name or version cannot be signed;
/// [`SignError::AlreadySigned`] when `image` already ends with a block's trailer (sign
/// [`strip_signature`]'s bytes instead, or use [`sign_file`]).
pub fn sign_file_bytes(image: &[u8], release: &Release, key: &SigningKey) -> Result<Vec<u8>, SignError> {
    if let Some(problem) = release.problem() {
        return Err(SignError::InvalidRelease(problem));
    }
    if image.ends_with(&TRAILER_MAGIC) {
        return Err(SignError::AlreadySigned);
    }
    let statement = Statement {
        image_len: image.len() as u64,
        digest: Sha256::digest(image).into(),
        release: release.clone(),
    };
    let statement = statement.encode();
    let signature = key.sign(&[DOMAIN, &statement].concat());
    let len = FIXED_LEN + statement.len();
    debug_assert!(statement.len() <= 8 + 32 + 8 + 2 * (1 + MAX_TEXT_LEN));
    let mut block = Vec::with_capacity(len);
    block.extend(HEAD_MAGIC);
    block.extend(FORMAT_VERSION.to_le_bytes());
    block.extend(key.id().to_bytes());
    block.extend((statement.len() as u32).to_le_bytes());
    block.extend(&statement);
    block.extend(signature);
    block.extend((len as u64).to_le_bytes());
    block.extend(TRAILER_MAGIC);
    Ok(block)
}

/// `bytes` without the signature block they end with, if they end with one (its trailer gives
/// a block length that fits and the block begins with a block's magic, whatever else it
/// holds); otherwise `bytes` unchanged.
pub fn strip_signature(bytes: &[u8]) -> &[u8] {
    let Some((_, trailer)) = bytes.split_last_chunk::<TRAILER_LEN>() else {
        return bytes;
    };
    match block_len(trailer, bytes.len() as u64) {
        // `block_len` bounds the length by the slice's.
        Ok(len) if bytes[bytes.len() - len as usize..].starts_with(&HEAD_MAGIC) => &bytes[..bytes.len() - len as usize],
        _ => bytes,
    }
}

/// Writes a signed copy of the file at `input` to `output` (which may be `input`): its bytes
/// without any signature block they end with, then a new block signing them as `release`
/// with `key`. Signing a signed file again so replaces its block.
///
/// The copy is written to a new file beside `output`, with `input`'s permissions, flushed,
/// and renamed over `output`: a host loading `output` meanwhile sees the old file or the new
/// one, never a part.
///
/// # Errors
///
/// [`SignError::Io`] when `input` cannot be read or the copy cannot be written (the new file
/// is then removed); the errors of [`sign_file_bytes`].
pub fn sign_file(input: &Path, output: &Path, release: &Release, key: &SigningKey) -> Result<(), SignError> {
    let read_error = |error| SignError::Io {
        path: input.to_owned(),
        error,
    };
    let bytes = fs::read(input).map_err(read_error)?;
    let permissions = fs::metadata(input).map_err(read_error)?.permissions();
    let image = strip_signature(&bytes);
    let block = sign_file_bytes(image, release, key)?;

    let Some(name) = output.file_name() else {
        let error = io::Error::new(io::ErrorKind::InvalidInput, "the path names no file");
        return Err(SignError::Io {
            path: output.to_owned(),
            error,
        });
    };
    // Hidden, and not named as a library is, so that a host scanning the directory skips it.
    let mut temporary = std::ffi::OsString::from(".");
    temporary.push(name);
    temporary.push(format!(".signing-{}", std::process::id()));
    let temporary = output.with_file_name(temporary);
    let write = || -> io::Result<()> {
        let mut file = fs::OpenOptions::new().write(true).create_new(true).open(&temporary)?;
        file.write_all(image)?;
        file.write_all(&block)?;
        file.set_permissions(permissions)?;
        file.sync_all()?;
        fs::rename(&temporary, output)
    };
    write().map_err(|error| {
        let _ = fs::remove_file(&temporary);
        SignError::Io {
            path: output.to_owned(),
            error,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release() -> Release {
        Release::new("greeter", "1.2.3", 42)
    }

    #[test]
    fn a_block_parses_back_to_what_was_signed() {
        let key = SigningKey::from_seed(&[3; 32]);
        let image = b"the image".as_slice();
        let block = sign_file_bytes(image, &release(), &key).unwrap();
        let (_, trailer) = block.split_last_chunk::<TRAILER_LEN>().unwrap();
        assert_eq!(
            block_len(trailer, (image.len() + block.len()) as u64).unwrap(),
            block.len() as u64
        );
        let parsed = parse(&block).unwrap();
        assert_eq!(parsed.key, key.id());
        assert_eq!(parsed.statement.release, release());
        assert_eq!(parsed.statement.image_len, image.len() as u64);
        assert_eq!(parsed.statement.digest, <[u8; 32]>::from(Sha256::digest(image)));
        assert!(key.public_key().verifies(&parsed.message(), &parsed.signature));
        assert!(parsed.message().starts_with(b"dylease-signature-v1\0"));
    }

    /// The block lengths a trailer may give: from the smallest block (no statement) to 64
    /// KiB, and no longer than the file; one byte outside any of these is corrupt, naming why.
    #[test]
    fn a_trailers_block_length_is_taken_within_its_bounds_and_refused_one_byte_past_them() {
        let trailer = |len: u64| {
            let mut trailer = [0; TRAILER_LEN];
            trailer[..8].copy_from_slice(&len.to_le_bytes());
            trailer[8..].copy_from_slice(&TRAILER_MAGIC);
            trailer
        };
        let refusal = |len: u64, file_len: u64| match block_len(&trailer(len), file_len) {
            Err(Cause::Corrupt(reason)) => reason,
            other => panic!("a block of {len} in {file_len} bytes: {other:?}"),
        };
        let (smallest, longest) = (FIXED_LEN as u64, MAX_BLOCK_LEN);
        assert_eq!(longest, 64 << 10);
        assert_eq!(block_len(&trailer(smallest), smallest).unwrap(), smallest);
        assert_eq!(block_len(&trailer(longest), longest).unwrap(), longest);
        assert!(refusal(smallest - 1, longest).ends_with("shorter than the smallest block"));
        assert!(refusal(longest + 1, longest + 1).ends_with("longer than the longest block (64 KiB)"));
        assert!(refusal(longest, longest - 1).ends_with("longer than the file (it was truncated)"));
    }

    #[test]
    fn the_longest_release_fits_and_a_longer_one_is_refused() {
        let key = SigningKey::from_seed(&[3; 32]);
        let longest = Release::new("n".repeat(255), "v".repeat(255), u64::MAX);
        let block = sign_file_bytes(b"", &longest, &key).unwrap();
        assert_eq!(parse(&block).unwrap().statement.release, longest);
        for bad in [
            Release::new("n".repeat(256), "1", 1),
            Release::new("", "1", 1),
            Release::new("a\nb", "1", 1),
        ] {
            assert!(
                matches!(sign_file_bytes(b"", &bad, &key), Err(SignError::InvalidRelease(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn a_trailer_length_out_of_bounds_is_corrupt_before_anything_is_read() {
        let trailer = |len: u64| {
            let mut t = [0; TRAILER_LEN];
            t[..8].copy_from_slice(&len.to_le_bytes());
            t[8..].copy_from_slice(&TRAILER_MAGIC);
            t
        };
        for len in [0, FIXED_LEN as u64 - 1, MAX_BLOCK_LEN + 1, u64::MAX] {
            assert!(
                matches!(block_len(&trailer(len), u64::MAX), Err(Cause::Corrupt(_))),
                "{len}"
            );
        }
        assert!(matches!(block_len(&trailer(200), 199), Err(Cause::Corrupt(_))));
        assert!(matches!(block_len(&trailer(200), 200), Ok(200)));
        assert!(matches!(block_len(&[0; TRAILER_LEN], 200), Err(Cause::Unsigned)));
    }

    #[test]
    fn stripping_removes_one_block_and_leaves_other_bytes() {
        let key = SigningKey::from_seed(&[3; 32]);
        let image = b"image bytes".to_vec();
        let signed = [image.clone(), sign_file_bytes(&image, &release(), &key).unwrap()].concat();
        assert_eq!(strip_signature(&signed), &image[..]);
        assert_eq!(strip_signature(&image), &image[..]);
        // Bytes that end like a trailer but have no block's head are not a block.
        let mut fake = vec![0; 200];
        fake.extend(120u64.to_le_bytes());
        fake.extend(TRAILER_MAGIC);
        assert_eq!(strip_signature(&fake), &fake[..]);
        assert!(matches!(
            sign_file_bytes(&signed, &release(), &key),
            Err(SignError::AlreadySigned)
        ));
    }
}
