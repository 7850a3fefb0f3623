//! The promises of dylease-sign, through its public API: signed libraries and file sets verify
//! under the keyring that trusts their key and are refused, with the cause named, when any
//! byte, file, key, name or serial is not what the publisher signed; no input makes a
//! reader panic.

mod file_set;
mod library;
mod malformed_input;

use std::io::{self, Read, Seek, SeekFrom};

use dylease_sign::{Cause, Keyring, Release, SignatureError, SigningKey, Verified, sign_file_bytes};
use sha2::{Digest as _, Sha256};

/// The key of a fixed seed: the tests' publishers.
fn key(seed: u8) -> SigningKey {
    SigningKey::from_seed(&[seed; 32])
}

/// A keyring that trusts `keys`.
fn keyring(keys: &[&SigningKey]) -> Keyring {
    let mut keyring = Keyring::new();
    for key in keys {
        keyring.trust(key.public_key());
    }
    keyring
}

/// `image` signed as `release` by `key`.
fn signed(image: &[u8], release: &Release, key: &SigningKey) -> Vec<u8> {
    [image, &sign_file_bytes(image, release, key).unwrap()].concat()
}

/// The cause of a refusal, or a failure that says what was verified instead.
fn cause(result: &Result<Verified, SignatureError>) -> &Cause {
    match result {
        Ok(verified) => panic!("verified, where a refusal was expected: {verified:?}"),
        Err(error) => error.cause(),
    }
}

/// Deterministic pseudo-random bytes: SHA-256 of a seed and a counter, so that every run
/// checks the same cases and a failure can be run again.
struct Random {
    seed: u64,
    counter: u64,
}

impl Random {
    fn new(seed: u64) -> Random {
        Random { seed, counter: 0 }
    }

    fn u64(&mut self) -> u64 {
        self.counter += 1;
        let digest = Sha256::digest([self.seed.to_le_bytes(), self.counter.to_le_bytes()].concat());
        u64::from_le_bytes(digest[..8].try_into().unwrap())
    }

    /// A number in `0..n` (`n` > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.u64() % n as u64) as usize
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.u64() as u8).collect()
    }
}

/// A reader that counts the bytes it gives, to hold the verifier to its bounded reads.
struct Counting<R> {
    inner: R,
    read: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

impl<R: Seek> Seek for Counting<R> {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.inner.seek(pos)
    }
}
