//! The provenance checks of dylease: did a publisher the host trusts produce these bytes, as
//! this release of this plugin, and no older one than the host accepts?
//!
//! - A library (a plugin, or a library it needs) carries its signature in a block appended
//!   to its bytes: [`sign_file_bytes`] makes one, [`sign_file`] writes a signed copy (replacing
//!   any block the file had), [`Keyring::verify_file`] checks one over the open file the host
//!   will have the loader map.
//! - A file set (a Python file, a Python package directory) is signed by a detached index
//!   that lists every file with its digest: [`sign_index`] makes one, [`Keyring::verify_index`]
//!   checks it against exactly the files the host will execute.
//! - Keys are Ed25519 ([`SigningKey`], [`PublicKey`], named by a [`KeyId`]); a [`Keyring`]
//!   holds the trusted keys, the revoked key ids and a minimum serial per plugin name. A
//!   verification gives a [`Verified`] (which key, which [`Release`]) or a [`SignatureError`]
//!   whose [`Cause`] says precisely why not.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::path::Path;
//! use dylease_sign::{Cause, Keyring, Release, SigningKey, sign_file_bytes, sign_index};
//!
//! // The publisher, once: a key pair. The public key's text goes to the hosts.
//! let key = SigningKey::generate()?;
//! let public_text = key.public_key().to_string(); // "dylease-ed25519-public:…"
//!
//! // The publisher, at each release: sign the stripped library (`sign_file` does it to a file).
//! let release = Release::new("greeter", "1.4.0", 14);
//! let image = b"\x7fELF and the rest of libgreeter.so".to_vec();
//! let mut signed = image.clone();
//! signed.extend(sign_file_bytes(&image, &release, &key)?);
//!
//! // The host: its keyring, then a verification of the bytes it is about to load.
//! let mut keyring = Keyring::new();
//! keyring.trust(public_text.parse()?).require_serial("greeter", 12);
//! let path = Path::new("plugins/libgreeter.so");
//! let verified = keyring.verify_bytes(&signed, path, Some("greeter"))?;
//! assert_eq!((verified.key, &verified.release), (key.id(), &release));
//!
//! // One changed byte, and the library is refused, with a sentence saying why.
//! signed[5] ^= 1;
//! let error = keyring.verify_bytes(&signed, path, Some("greeter")).unwrap_err();
//! assert!(matches!(error.cause(), Cause::ContentChanged));
//! assert!(error.to_string().starts_with("plugins/libgreeter.so is not the bytes its signature covers"));
//!
//! // A Python package: one signed index for its files.
//! let files = [("__init__.py", b"from .talk import hello\n".as_slice()), ("talk.py", b"def hello(): ...\n")];
//! let index = sign_index(files, &Release::new("talker", "0.3", 3), &key)?;
//! let index_path = Path::new("plugins/talker/.dylease-sig");
//! keyring.verify_index(index.as_slice(), index_path, Some("talker"), files)?;
//! // A file added since is refused.
//! let added = [files[0], files[1], ("evil.py", b"import os\n")];
//! let error = keyring.verify_index(index.as_slice(), index_path, Some("talker"), added).unwrap_err();
//! assert!(matches!(error.cause(), Cause::FileNotCovered));
//! assert_eq!(error.path(), Path::new("plugins/talker/evil.py"));
//! # Ok(())
//! # }
//! ```
//!
//! # What it answers, and what it does not
//!
//! Whoever can write the plugin directory (or the download, or the copy) without a trusted
//! secret key cannot make the host run bytes the publisher did not sign: any changed byte of
//! a library or of its block, and any file of a set added, removed or changed, is refused; a
//! block or index grafted from another plugin is refused by its name (when the host says which
//! plugin it is loading) or by its digest; and an older signed release, genuine but perhaps
//! vulnerable, is refused below the minimum serial the host holds for its name.
//!
//! It does not answer:
//! - a stolen secret key, which signs anything until the hosts revoke its id;
//! - a rollback above the host's minimum: the minimums are the host's configuration, and
//!   withholding a newer release is not detected;
//! - bytes changed after they were verified: the host must map (or execute) the very bytes it
//!   verified. Verifying a path and then opening it again races a writer; the host verifies
//!   the descriptor it then maps, and refuses files others can write, or copies them into a
//!   sealed `memfd` first. That is the host's job, not this crate's;
//! - which files need signatures: the host verifies the plugin, each library it needs outside
//!   the system's trusted directories, and every file of a Python plugin it will execute.
//!
//! # The appended block (libraries)
//!
//! A signed library is its *image* (every byte of the file before the block: the whole
//! library as built and stripped) followed by a block, all integers little-endian:
//!
//! | bytes | field |
//! | --- | --- |
//! | 8 | head magic `DYLSIG>>` |
//! | 4 | format version, 1 |
//! | 8 | key id of the signing key |
//! | 4 | statement length *S* |
//! | *S* | the signed statement: image length (`u64`), SHA-256 digest of the image (32 bytes), serial (`u64`), then name and version, each a length byte and 1 to 255 bytes of UTF-8 |
//! | 64 | Ed25519 signature of `dylease-signature-v1\0` followed by the statement |
//! | 8 | block length, 104 + *S* |
//! | 8 | trailer magic `<<DYLSIG` |
//!
//! A reader finds the block from the end with two bounded reads: the 16-byte trailer, then
//! the block it announces (a block shorter than 104 bytes, or longer than 64 KiB or than the
//! file, is corrupt), and only then digests the image, in one pass. No length read from the
//! file is used before it is bounded, and no input makes a reader panic.
//!
//! Why appended: the loader uses only what the ELF program headers describe, so bytes after
//! them are never code or data, and the signature covers every byte before the block, which
//! is every byte the loader reads.
//! A section or note inside the ELF would need a relinking tool to add and would have to be
//! left out of its own digest; `strip` removes the block (it rewrites the file as the headers
//! describe it), so a library is signed last. Signing is deterministic (Ed25519 is), so
//! signing the same bytes twice gives the same file.
//!
//! # The signed index (file sets)
//!
//! Python source cannot carry a binary block, and a package is many files under one release:
//! one detached index signs them all. A package directory's index is [`INDEX_NAME`]
//! (`.dylease-sig`) in it ([`package_index_path`]); a single file's is beside it, named as
//! the file with `.dylease-sig` appended ([`file_index_path`]). It is text, so that `cat`
//! shows what it signs:
//!
//! ```text
//! dylease-index 1
//! key b600306cfa76723f
//! name talker
//! version 0.3
//! serial 3
//! file a6146e8084f4d060c76f3e36768d4e7566fdd7fe7c11e870ef0a9420067dc4b6 __init__.py
//! file 233a94ec7e38adb3348cc31053c81bc592aac34ef5ee2dc5f60891bb2431c29e talk.py
//! signature 2fd70395dc83521419065d2005c4424a6a59f2082b21890061b71463b90faf7f08a681f2d36336f3a0f29b4aae3dbfda2e12ff6cf927388616acc5101982cb04
//! ```
//!
//! Paths are relative to the index's directory, `/`-separated, sorted, each listed once; the
//! signature is Ed25519's of `dylease-index-v1\0` followed by every line before the
//! signature's. A reader accepts exactly this spelling (one spelling per index) and at most
//! 4 MiB. The two formats' signatures begin with different domain strings, so no signature
//! of one passes for the other's.
//!
//! # Digest and keys
//!
//! Images and files are digested with SHA-256, streamed in 64 KiB reads (files are never
//! read whole). SHA-256 rather than SHA-512: current x86-64 and ARMv8 processors have
//! instructions for it, which the `sha2` crate detects at run time and which make it the
//! faster of the two there; it is fs-verity's default digest, so a host can later compare a
//! kernel-measured digest; and its 128-bit collision resistance matches Ed25519's security.
//!
//! A key id is the first 8 bytes of the SHA-256 digest of the public key, shown as 16
//! hexadecimal digits. Key files are one line: [`PUBLIC_KEY_PREFIX`] or [`SECRET_KEY_PREFIX`]
//! followed by the key's 32 bytes in lowercase hexadecimal. Signatures are verified strictly
//! (`verify_strict`: no malleable encodings, no weak keys).
//!
//! This crate has no `unsafe` code; its cryptography is RustCrypto's and dalek's
//! (`ed25519-dalek`, `sha2`), and key generation asks the system (`getrandom`).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod block;
mod claim;
mod digest;
mod error;
mod hex;
mod index;
mod key;
mod keyring;
mod release;

pub use block::{sign_file, sign_file_bytes, strip_signature};
pub use claim::{CheckMemo, Claim, read_claim, read_index_claim};
pub use error::{Cause, SignError, SignatureError};
pub use index::{INDEX_NAME, file_index_path, package_index_path, sign_index};
pub use key::{KeyError, KeyId, PUBLIC_KEY_PREFIX, PublicKey, SECRET_KEY_PREFIX, SigningKey};
pub use keyring::{Keyring, Verified};
pub use release::Release;
