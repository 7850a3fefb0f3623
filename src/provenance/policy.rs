//! A host's signature policy ([`Signatures`]): its keyring, and the verifications, which the
//! load reaches through function pointers that only `HostBuilder::require_signed` names
//! ([`Signatures::new`]), so that a program that never requires signatures links none of the
//! cryptography (the linker drops what nothing names), as a program that never isolates
//! links no worker.

use std::fs::{File, Metadata};
use std::path::Path;

use dylease_sign::Keyring;
#[cfg(feature = "python")]
use dylease_sign::Verified;

use crate::error::Error;
use crate::provenance::hold::{Held, hold_library};
use crate::provenance::memo::remember_checks;

/// `hold::hold_library`'s signature.
type HoldLibrary = fn(&Keyring, (&File, &Metadata), (&Path, &Path), Option<&str>) -> Result<Held, Error>;

/// `hold::verify_files`, over a file and bytes in memory.
#[cfg(feature = "python")]
type VerifyFiles =
    fn(&Keyring, Option<File>, (&Path, &Path), Option<&str>, &[(&Path, &[u8])]) -> Result<Verified, Error>;

/// What a host requires of its plugins' provenance (`HostBuilder::require_signed`).
#[derive(Debug)]
pub(crate) struct Signatures {
    keyring: Keyring,
    library: HoldLibrary,
    #[cfg(feature = "python")]
    files: VerifyFiles,
}

impl Signatures {
    /// The policy of `keyring`, whose passed checks the process's memo remembers.
    pub(crate) fn new(mut keyring: Keyring) -> Signatures {
        remember_checks(&mut keyring);
        Signatures {
            keyring,
            library: hold_library,
            #[cfg(feature = "python")]
            files: |keyring, index, paths, expected, files| {
                crate::provenance::hold::verify_files(keyring, index, paths, expected, files.iter().copied())
            },
        }
    }

    /// Verifies a library and holds its bytes still until the returned value is dropped
    /// (`hold::hold_library`).
    pub(crate) fn hold_library(
        &self,
        file: (&File, &Metadata),
        paths: (&Path, &Path),
        expected: Option<&str>,
    ) -> Result<Held, Error> {
        (self.library)(&self.keyring, file, paths, expected)
    }

    /// Verifies a Python plugin's sources against its signed index (`hold::verify_files`).
    #[cfg(feature = "python")]
    pub(crate) fn verify_files(
        &self,
        index: Option<File>,
        paths: (&Path, &Path),
        expected: Option<&str>,
        files: &[(&Path, &[u8])],
    ) -> Result<Verified, Error> {
        (self.files)(&self.keyring, index, paths, expected, files)
    }
}
