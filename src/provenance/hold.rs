//! A library's bytes held still from before their digest until the loader mapped them, and a
//! Python plugin's sources checked against their signed index.
//!
//! The loader maps the checked descriptor (`/proc/self/fd/N`), so a file rewritten *in place*
//! between its digest and the `dlopen` would be mapped with bytes nobody verified. Before the
//! digest, [`hold_library`] takes a read lease on that descriptor (`fcntl(F_SETLEASE,
//! F_RDLCK)`): the kernel grants it only while no open file description has the file open
//! for writing, and while it is held every new open for writing (and every truncation) blocks
//! until [`Held`]'s drop releases it, once the library is mapped. Where no lease can be taken
//! (the file is another user's and this process lacks `CAP_LEASE`, or its file system has no
//! leases), and for a file other users can write (a lease would only hold them off until the
//! release, and their later writes would reach the mapped pages), the file is copied into a
//! sealed `memfd` (no write, no resize, ever), the copy is verified, and the loader maps the
//! copy. A file that someone has open for writing is refused.

use std::fs::{File, Metadata};
use std::path::Path;

use dylease_sign::{Keyring, Verified};

use crate::error::Error;
use crate::provenance::refusal::{not_held, refused};

/// A verified library whose bytes stay what was verified while this is alive: keep it until
/// the loader has mapped the library.
#[derive(Debug)]
pub(crate) struct Held {
    kind: Kind,
    verified: Verified,
}

#[derive(Debug)]
enum Kind {
    /// The checked descriptor holds a read lease.
    Leased(Lease),
    /// A sealed copy: the loader must map it instead of the checked descriptor.
    Sealed(File),
}

/// A read lease, held by a duplicate of the checked descriptor (which shares its open file
/// description, the lease's owner): released on drop, whatever refused the load meanwhile.
#[derive(Debug)]
struct Lease(File);

impl Drop for Lease {
    fn drop(&mut self) {
        if let Err(error) = crate::sys::imp::release_lease(&self.0) {
            // The lease goes with the descriptor's last close at the latest.
            log::warn!(
                "{}releasing the read lease of a verified library failed: {error}",
                crate::log_scope::prefix()
            );
        }
    }
}

impl Held {
    /// The sealed copy the loader must map instead of the checked descriptor, where the file
    /// could not be leased; `None` where the checked descriptor is leased.
    pub(crate) fn sealed(&self) -> Option<&File> {
        match &self.kind {
            Kind::Sealed(copy) => Some(copy),
            Kind::Leased(_) => None,
        }
    }

    /// What the verification found: the key, the release, the digest.
    pub(crate) fn verified(&self) -> &Verified {
        &self.verified
    }
}

/// Verifies the library file `file` (the checked descriptor, whose status `metadata` was read
/// from it when it was opened; `shown` names it) against `keyring`, as a file of the plugin
/// `plugin` (as discovered) expected to be signed as `expected` (its manifest's name, if it
/// has one): holds its bytes still (a lease, or a sealed copy: see the module documentation),
/// digests what is held, checks the signature. Keep the result until the library is mapped.
pub(super) fn hold_library(
    keyring: &Keyring,
    (file, metadata): (&File, &Metadata),
    (plugin, shown): (&Path, &Path),
    expected: Option<&str>,
) -> Result<Held, Error> {
    let prefix = crate::log_scope::prefix();
    let kind = match lease_or_copy(file, metadata, shown) {
        Ok(Ok(lease)) => Kind::Leased(lease),
        Ok(Err(reason)) => {
            let copy = copy_unchanged(file, metadata, shown).map_err(|reason| not_held(plugin, reason))?;
            log::debug!(
                "{prefix}`{}` is verified and mapped as a sealed copy in memory: {reason}",
                shown.display()
            );
            Kind::Sealed(copy)
        }
        Err(reason) => return Err(not_held(plugin, reason)),
    };
    let mut held: &File = match &kind {
        Kind::Leased(Lease(file)) | Kind::Sealed(file) => file,
    };
    // A refusal drops `kind`, releasing the lease.
    let verified = keyring
        .verify_file(&mut held, shown, expected)
        .map_err(|refusal| refused(plugin, refusal, keyring))?;
    log::debug!(
        "{prefix}verified the signature of `{}`: key {}, `{}` {} serial {}",
        shown.display(),
        verified.key,
        verified.release.name,
        verified.release.version,
        verified.release.serial
    );
    Ok(Held { kind, verified })
}

/// A read lease on `file` (`Ok(Ok)`), or why it is to be verified as a sealed copy instead
/// (`Ok(Err)`); `Err` with the refusal's reason where it can be neither.
fn lease_or_copy(file: &File, metadata: &Metadata, shown: &Path) -> Result<Result<Lease, String>, String> {
    if let Some(writers) = writable_by_others(metadata) {
        return Ok(Err(format!(
            "it is writable by {writers}, whose writes would reach the mapped pages once a lease was released"
        )));
    }
    // The lease's holder, duplicated first so that a lease taken is always released.
    let holder = file
        .try_clone()
        .map_err(|e| format!("cannot hold `{}` still to verify it: {e}", shown.display()))?;
    match crate::sys::imp::take_read_lease(&holder) {
        Ok(()) => Ok(Ok(Lease(holder))),
        Err(error) if crate::sys::imp::open_for_writing(&error) => Err(format!(
            "`{}` is open for writing by another process (or mapped writable and shared), so its bytes could \
             change between their verification and their mapping: refused; install plugins by rename (`dylease \
             install`, or `mv` of a finished copy), never by writing over the file, and try again once the \
             writer closed it",
            shown.display()
        )),
        Err(error) if crate::sys::imp::not_lease_owner(&error) => Ok(Err(
            "no read lease can be taken on it: this process neither owns it nor holds CAP_LEASE".to_owned(),
        )),
        Err(error) => Ok(Err(format!("no read lease can be taken on it ({error})"))),
    }
}

/// Who other than this process's user and root can write the file `metadata` describes, if
/// anyone: its group or others by its mode, or its owner.
#[cfg(unix)]
fn writable_by_others(metadata: &Metadata) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let (mode, owner) = (metadata.mode(), metadata.uid());
    let euid = crate::sys::imp::effective_uid();
    let owner_is_other = owner != euid && owner != 0;
    match (
        owner_is_other && mode & 0o200 != 0,
        mode & 0o020 != 0,
        mode & 0o002 != 0,
    ) {
        (_, _, true) => Some(format!("others (mode {:04o})", mode & 0o7777)),
        (_, true, _) => Some(format!("its group (mode {:04o})", mode & 0o7777)),
        (true, _, _) => Some(format!("its owner, uid {owner}")),
        _ => None,
    }
}

#[cfg(not(unix))]
fn writable_by_others(_: &Metadata) -> Option<String> {
    None
}

/// A sealed copy of `file`, refused if the file changed while it was read: its status after
/// the copy must be the one read when it was opened (`metadata`), so that the ELF facts the
/// load read from it are facts of the bytes copied.
fn copy_unchanged(file: &File, metadata: &Metadata, shown: &Path) -> Result<File, String> {
    let name = shown.file_name().unwrap_or_default().to_string_lossy();
    let copy = crate::sys::imp::sealed_copy(file, &format!("dylease:{name}")).map_err(|e| {
        format!(
            "cannot copy `{}` into a sealed file in memory to verify and map it: {e}",
            shown.display()
        )
    })?;
    let now = file
        .metadata()
        .map_err(|e| format!("cannot read the status of `{}`: {e}", shown.display()))?;
    let key = crate::inspect::parse_cache::key;
    if key(&now) != key(metadata) {
        return Err(format!(
            "`{}` changed while it was copied to be verified (its size or times differ from its open's): \
             refused; install plugins by rename, never by writing over the file",
            shown.display()
        ));
    }
    Ok(copy)
}

/// Verifies a Python plugin's sources, as read into memory before any of them runs, against
/// its signed index: `index` is the index found at `index_path` (`None`: there is none),
/// `files` every source the plugin will execute, by its path relative to the index's
/// directory, with the bytes read. `plugin` is the plugin's file or package as discovered,
/// `expected` its name if its manifest gives one.
#[cfg(feature = "python")]
pub(super) fn verify_files<'a>(
    keyring: &Keyring,
    index: Option<impl std::io::Read>,
    (plugin, index_path): (&Path, &Path),
    expected: Option<&str>,
    files: impl IntoIterator<Item = (&'a Path, &'a [u8])>,
) -> Result<Verified, Error> {
    let Some(index) = index else {
        let unsigned = dylease_sign::SignatureError::new(plugin, dylease_sign::Cause::Unsigned);
        return Err(refused(plugin, unsigned, keyring));
    };
    let verified = keyring
        .verify_index(index, index_path, expected, files)
        .map_err(|refusal| refused(plugin, refusal, keyring))?;
    log::debug!(
        "{}verified the signed index of `{}`: key {}, `{}` {} serial {}",
        crate::log_scope::prefix(),
        plugin.display(),
        verified.key,
        verified.release.name,
        verified.release.version,
        verified.release.serial
    );
    Ok(verified)
}
