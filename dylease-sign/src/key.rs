//! Keys: a publisher's Ed25519 [`SigningKey`], its [`PublicKey`], the [`KeyId`] that names
//! it in signatures and messages, and the one-line text files that hold them.

use std::fmt;
use std::fs;
use std::io::{self, Read as _, Write as _};
use std::path::Path;
use std::str::FromStr;

use ed25519_dalek::Signer as _;
use sha2::{Digest as _, Sha256};
use zeroize::Zeroize as _;

use crate::hex;

/// What a public key's text begins with; 64 lowercase hexadecimal digits (the key's 32 bytes)
/// follow, on one line.
pub const PUBLIC_KEY_PREFIX: &str = "dylease-ed25519-public:";

/// What a secret key's text begins with; 64 lowercase hexadecimal digits (the key's 32-byte
/// seed) follow, on one line.
pub const SECRET_KEY_PREFIX: &str = "dylease-ed25519-secret:";

/// The name of a public key in signatures, keyrings and messages: the first 8 bytes of the
/// SHA-256 digest of its 32 bytes, written as 16 lowercase hexadecimal digits.
///
/// A key id only selects a key: verification uses the trusted key's own bytes, so a forged
/// key with a colliding id gains nothing.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct KeyId([u8; 8]);

impl KeyId {
    /// The key id of these 8 bytes.
    pub fn from_bytes(bytes: [u8; 8]) -> KeyId {
        KeyId(bytes)
    }

    /// The id's 8 bytes.
    pub fn to_bytes(self) -> [u8; 8] {
        self.0
    }

    fn of(public: &[u8; 32]) -> KeyId {
        let digest = Sha256::digest(public);
        let mut id = [0; 8];
        id.copy_from_slice(&digest[..8]);
        KeyId(id)
    }
}

impl fmt::Display for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex::encode(&self.0))
    }
}

impl fmt::Debug for KeyId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "KeyId({self})")
    }
}

/// Parses the 16 lowercase hexadecimal digits that [`Display`](fmt::Display) writes (as a
/// revocation list would hold them).
impl FromStr for KeyId {
    type Err = KeyError;

    fn from_str(text: &str) -> Result<KeyId, KeyError> {
        hex::decode(text.trim_end())
            .map(KeyId)
            .ok_or(KeyError::new(Form::Id, "not 16 lowercase hexadecimal digits"))
    }
}

/// A publisher's Ed25519 public key: what a [`Keyring`](crate::Keyring) trusts.
///
/// Its text form (its [`Display`](fmt::Display) and [`FromStr`]) is one line:
/// [`PUBLIC_KEY_PREFIX`] then the key's 32 bytes in lowercase hexadecimal.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct PublicKey {
    key: ed25519_dalek::VerifyingKey,
    id: KeyId,
}

impl PublicKey {
    /// The public key of these 32 bytes (the Ed25519 encoding of a curve point).
    ///
    /// # Errors
    ///
    /// When the bytes encode no curve point, or a point of small order (a weak key, which
    /// verifies signatures it never made).
    pub fn from_bytes(bytes: &[u8; 32]) -> Result<PublicKey, KeyError> {
        match ed25519_dalek::VerifyingKey::from_bytes(bytes) {
            Ok(key) if !key.is_weak() => Ok(PublicKey {
                key,
                id: KeyId::of(bytes),
            }),
            Ok(_) => Err(KeyError::new(Form::Public, "the key is a weak (small-order) point")),
            Err(_) => Err(KeyError::new(Form::Public, "the bytes encode no Ed25519 point")),
        }
    }

    /// The key's 32 bytes.
    pub fn to_bytes(&self) -> [u8; 32] {
        self.key.to_bytes()
    }

    /// The key's id.
    pub fn id(&self) -> KeyId {
        self.id
    }

    /// Reads a public key file (its text form; a trailing newline is allowed).
    ///
    /// # Errors
    ///
    /// When the file cannot be read, or does not hold a public key's text
    /// ([`io::ErrorKind::InvalidData`]); the message names the file.
    pub fn read_file(path: &Path) -> io::Result<PublicKey> {
        read_key_file(path)
    }

    /// Whether `signature` is this key's Ed25519 signature of `message`, checked strictly
    /// (no malleable signature encodings).
    pub(crate) fn verifies(&self, message: &[u8], signature: &[u8; 64]) -> bool {
        let signature = ed25519_dalek::Signature::from_bytes(signature);
        self.key.verify_strict(message, &signature).is_ok()
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{PUBLIC_KEY_PREFIX}{}", hex::encode(self.key.as_bytes()))
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PublicKey")
            .field("id", &self.id)
            .field("key", &format_args!("{self}"))
            .finish()
    }
}

/// Parses the text form: [`PUBLIC_KEY_PREFIX`] and 64 lowercase hexadecimal digits, with
/// trailing white space (a newline) allowed.
impl FromStr for PublicKey {
    type Err = KeyError;

    fn from_str(text: &str) -> Result<PublicKey, KeyError> {
        PublicKey::from_bytes(&key_bytes(text, Form::Public)?)
    }
}

/// A publisher's Ed25519 secret key: what signs. Its [`Debug`](fmt::Debug) shows the key id
/// only, and it has no `Display`; its memory is cleared when it is dropped.
///
/// Its text form ([`SigningKey::to_secret_text`] and [`FromStr`]) is one line:
/// [`SECRET_KEY_PREFIX`] then the key's 32-byte seed in lowercase hexadecimal. Anyone who reads
/// it can sign as the publisher: [`SigningKey::write_new_file`] creates the file readable by
/// its owner only.
#[derive(Clone)]
pub struct SigningKey {
    key: ed25519_dalek::SigningKey,
    public: PublicKey,
}

impl SigningKey {
    /// A new key from the operating system's random number generator.
    ///
    /// # Errors
    ///
    /// When the system gives no random bytes.
    pub fn generate() -> io::Result<SigningKey> {
        let mut seed = [0; 32];
        getrandom::fill(&mut seed).map_err(|e| io::Error::other(format!("no random bytes for a new key: {e}")))?;
        let key = SigningKey::from_seed(&seed);
        seed.zeroize();
        Ok(key)
    }

    /// The key of this 32-byte seed (an Ed25519 secret key). Tests use fixed seeds; real keys
    /// come from [`SigningKey::generate`].
    pub fn from_seed(seed: &[u8; 32]) -> SigningKey {
        let key = ed25519_dalek::SigningKey::from_bytes(seed);
        let public = key.verifying_key();
        let public = PublicKey {
            key: public,
            id: KeyId::of(public.as_bytes()),
        };
        SigningKey { key, public }
    }

    /// The public key to give to hosts.
    pub fn public_key(&self) -> PublicKey {
        self.public
    }

    /// The key's id (its public key's).
    pub fn id(&self) -> KeyId {
        self.public.id
    }

    /// The secret key's text form: [`SECRET_KEY_PREFIX`] and the seed in hexadecimal. Keep it
    /// secret.
    pub fn to_secret_text(&self) -> String {
        format!("{SECRET_KEY_PREFIX}{}", hex::encode(self.key.as_bytes()))
    }

    /// Reads a secret key file (its text form; a trailing newline is allowed).
    ///
    /// # Errors
    ///
    /// When the file cannot be read, or does not hold a secret key's text
    /// ([`io::ErrorKind::InvalidData`]); the message names the file.
    pub fn read_file(path: &Path) -> io::Result<SigningKey> {
        read_key_file(path)
    }

    /// Writes the secret key's text form and a newline to a new file at `path`, created
    /// readable and writable by its owner only (mode 0600 on Unix).
    ///
    /// # Errors
    ///
    /// When a file already exists at `path` ([`io::ErrorKind::AlreadyExists`]: a key is never
    /// overwritten), or it cannot be created or written; the message names the file.
    pub fn write_new_file(&self, path: &Path) -> io::Result<()> {
        let mut file = create_private(path).map_err(|e| in_file(path, e))?;
        let text = self.to_secret_text() + "\n";
        file.write_all(text.as_bytes())
            .and_then(|()| file.sync_all())
            .map_err(|e| in_file(path, e))
    }

    /// The Ed25519 signature of `message`.
    pub(crate) fn sign(&self, message: &[u8]) -> [u8; 64] {
        self.key.sign(message).to_bytes()
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SigningKey")
            .field("id", &self.public.id)
            .finish_non_exhaustive()
    }
}

/// Parses the text form: [`SECRET_KEY_PREFIX`] and 64 lowercase hexadecimal digits, with
/// trailing white space (a newline) allowed.
impl FromStr for SigningKey {
    type Err = KeyError;

    fn from_str(text: &str) -> Result<SigningKey, KeyError> {
        let mut seed = key_bytes(text, Form::Secret)?;
        let key = SigningKey::from_seed(&seed);
        seed.zeroize();
        Ok(key)
    }
}

/// Why a text is not a key or key id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyError {
    form: Form,
    problem: &'static str,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Form {
    Public,
    Secret,
    Id,
}

impl KeyError {
    fn new(form: Form, problem: &'static str) -> KeyError {
        KeyError { form, problem }
    }
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let expected = match self.form {
            Form::Public => {
                format!("a dylease public key (one line: `{PUBLIC_KEY_PREFIX}` and 64 lowercase hexadecimal digits)")
            }
            Form::Secret => {
                format!("a dylease secret key (one line: `{SECRET_KEY_PREFIX}` and 64 lowercase hexadecimal digits)")
            }
            Form::Id => "a dylease key id (16 lowercase hexadecimal digits)".to_owned(),
        };
        write!(f, "not {expected}: {}", self.problem)
    }
}

impl std::error::Error for KeyError {}

fn key_bytes(text: &str, form: Form) -> Result<[u8; 32], KeyError> {
    let prefix = if form == Form::Public {
        PUBLIC_KEY_PREFIX
    } else {
        SECRET_KEY_PREFIX
    };
    let Some(digits) = text.trim_end().strip_prefix(prefix) else {
        let other = if form == Form::Public {
            SECRET_KEY_PREFIX
        } else {
            PUBLIC_KEY_PREFIX
        };
        let problem = if text.starts_with(other) {
            "it is the other half of a key pair"
        } else {
            "it does not begin with the prefix"
        };
        return Err(KeyError::new(form, problem));
    };
    hex::decode(digits).ok_or(KeyError::new(
        form,
        "the prefix is not followed by exactly 64 lowercase hexadecimal digits",
    ))
}

fn read_key_file<K: FromStr<Err = KeyError>>(path: &Path) -> io::Result<K> {
    // A key file is one short line; anything longer is not one (and is not read whole).
    let file = fs::File::open(path).map_err(|e| in_file(path, e))?;
    let mut text = String::new();
    file.take(4096)
        .read_to_string(&mut text)
        .map_err(|e| in_file(path, e))?;
    text.parse()
        .map_err(|e: KeyError| io::Error::new(io::ErrorKind::InvalidData, format!("{}: {e}", path.display())))
}

fn in_file(path: &Path, error: io::Error) -> io::Error {
    io::Error::new(error.kind(), format!("{}: {error}", path.display()))
}

#[cfg(unix)]
fn create_private(path: &Path) -> io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn create_private(path: &Path) -> io::Result<fs::File> {
    fs::OpenOptions::new().write(true).create_new(true).open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_texts_round_trip_and_are_not_confused() {
        let key = SigningKey::from_seed(&[7; 32]);
        let public = key.public_key();
        assert_eq!(public.to_string().parse::<PublicKey>(), Ok(public));
        assert_eq!(format!("{public}\n").parse::<PublicKey>(), Ok(public));
        let secret = key.to_secret_text();
        assert!(secret.starts_with(SECRET_KEY_PREFIX));
        assert_eq!(secret.parse::<SigningKey>().map(|k| k.public_key()), Ok(public));
        assert_eq!(key.id().to_string().parse::<KeyId>(), Ok(key.id()));
        assert_eq!(key.id().to_string().len(), 16);

        let err = secret.parse::<PublicKey>().unwrap_err();
        assert!(err.to_string().contains("other half"), "{err}");
        assert!(public.to_string().parse::<SigningKey>().is_err());
        assert!(public.to_string().to_uppercase().parse::<PublicKey>().is_err());
        assert!(format!("{PUBLIC_KEY_PREFIX}00").parse::<PublicKey>().is_err());
    }

    #[test]
    fn the_key_id_is_the_first_8_bytes_of_the_public_keys_sha256() {
        let public = SigningKey::from_seed(&[1; 32]).public_key();
        let digest = Sha256::digest(public.to_bytes());
        assert_eq!(public.id().to_bytes(), digest[..8]);
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let key = SigningKey::from_seed(&[9; 32]);
        let shown = format!("{key:?} {key:#?}");
        let seed_hex = &key.to_secret_text()[SECRET_KEY_PREFIX.len()..];
        assert!(!shown.contains(seed_hex), "{shown}");
        assert!(shown.contains(&key.id().to_string()), "{shown}");
        // A public key's shows its id and its text.
        let public = key.public_key();
        let shown = format!("{public:?}");
        assert!(
            shown.contains(&key.id().to_string()) && shown.contains(&public.to_string()),
            "{shown}"
        );
    }

    /// A key written to a new file reads back as the same key, from a file only its owner
    /// may read; an existing file is never overwritten.
    #[test]
    fn a_key_written_to_a_new_file_reads_back_and_is_never_written_over() {
        let dir = std::env::temp_dir().join(format!("dylease-sign-key-file-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("release.key");
        let key = SigningKey::from_seed(&[5; 32]);
        key.write_new_file(&path).unwrap();
        let read = SigningKey::read_file(&path).unwrap();
        assert_eq!(read.to_secret_text(), key.to_secret_text());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        }
        let other = SigningKey::from_seed(&[6; 32]);
        let error = other.write_new_file(&path).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(
            SigningKey::read_file(&path).unwrap().to_secret_text(),
            key.to_secret_text()
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn weak_and_invalid_points_are_not_public_keys() {
        // The identity point (small order) and a y coordinate with no point on the curve.
        let mut identity = [0; 32];
        identity[0] = 1;
        assert!(PublicKey::from_bytes(&identity).is_err());
        assert!(
            PublicKey::from_bytes(&identity)
                .unwrap_err()
                .to_string()
                .contains("weak")
        );
        // About half of all y coordinates have no point on the curve.
        let no_point = (2..40u8).map(|y| {
            let mut bytes = [0; 32];
            bytes[0] = y;
            PublicKey::from_bytes(&bytes)
        });
        assert!(
            no_point
                .filter_map(Result::err)
                .any(|e| e.to_string().contains("no Ed25519 point"))
        );
    }

    #[test]
    fn generated_keys_differ() {
        let (a, b) = (SigningKey::generate().unwrap(), SigningKey::generate().unwrap());
        assert_ne!(a.public_key(), b.public_key());
    }
}
