//! Signed plugins in a load ([`HostBuilder::require_signed`](crate::HostBuilder::require_signed)):
//! the verification of a library plugin and of the libraries it needs, made where the ABI
//! gate is (`Candidate::prepare`, after the manifest is read from the checked descriptor and
//! before anything is mapped), and what it holds until the mapping (`provenance`).

#[cfg(feature = "python")]
use std::fs::File;
use std::path::Path;

use dylease_elf::Linkage;
#[cfg(feature = "python")]
use dylease_sign::Verified;

use crate::error::Error;
use crate::inspect::manifest::Manifest;
pub(crate) use crate::provenance::Provenance;
use crate::provenance::{Held, Signatures, not_held};
use crate::trust::candidate::{Candidate, Dependency, Opened};
use crate::trust::{Checks, TrustPolicy, Verifier, Verify};

/// What `HostBuilder::require_signed` stores: the load's verifications over `signatures`.
pub(crate) fn verifier(signatures: Signatures) -> Verifier {
    Verifier::new(signatures)
}

/// Verifies the plugin `candidate`, opened as `checked` (its `linkage` and `manifest` read
/// from that descriptor), and the libraries it needs that dylease maps (`dependencies`: the
/// sealed copy of one replaces its descriptor), against the keyring of `checks`; nothing
/// where the host requires no signature. The plugin must be signed under its manifest's name
/// if it has a manifest; a library it needs, under any name (its own minimum serial holds).
pub(crate) fn verify(
    checks: &Checks,
    candidate: (&Candidate, TrustPolicy),
    read: (&Opened, &Linkage, Option<&Manifest>),
    dependencies: &mut [Dependency],
) -> Result<Provenance, Error> {
    match &checks.signatures {
        None => Ok(Provenance::default()),
        Some(signatures) => signatures.verify(candidate, read, dependencies),
    }
}

/// The verifications of a host that requires signatures, as the load reaches them: through
/// the [`Verifier`] that only `HostBuilder::require_signed` makes, so that a program that
/// never requires signatures links none of them (nor the keyring's teardown).
impl Verify for Signatures {
    fn verify(
        &self,
        candidate: (&Candidate, TrustPolicy),
        read: (&Opened, &Linkage, Option<&Manifest>),
        dependencies: &mut [Dependency],
    ) -> Result<Provenance, Error> {
        verify_signed(self, candidate, read, dependencies)
    }

    #[cfg(feature = "python")]
    fn verify_files(
        &self,
        index: Option<File>,
        paths: (&Path, &Path),
        expected: Option<&str>,
        files: &[(&Path, &[u8])],
    ) -> Result<Verified, Error> {
        Signatures::verify_files(self, index, paths, expected, files)
    }
}

/// [`verify`] for a host that requires signatures.
fn verify_signed(
    signatures: &Signatures,
    (candidate, trust): (&Candidate, TrustPolicy),
    (checked, linkage, manifest): (&Opened, &Linkage, Option<&Manifest>),
    dependencies: &mut [Dependency],
) -> Result<Provenance, Error> {
    let plugin = candidate.path.as_path();
    if trust == TrustPolicy::Permissive
        && let Some(searched) = searched_by_loader(linkage)
    {
        return Err(not_held(
            plugin,
            format!(
                "{searched}, which the loader would search for a library nobody verified: under \
                 TrustPolicy::Permissive dylease maps (and verifies) no library a plugin needs; use \
                 TrustPolicy::Strict, under which the libraries found through a run path are verified too, or \
                 link the plugin without a run path"
            ),
        ));
    }
    let expected = manifest.map(|manifest| manifest.name.as_str());
    let held = signatures.hold_library((checked.file(), &checked.metadata), (plugin, &candidate.path), expected)?;
    let held_dependencies = dependencies
        .iter_mut()
        .map(|dependency| hold_dependency(signatures, plugin, dependency))
        .collect::<Result<Vec<Held>, Error>>()?;
    Ok(Provenance::holding(held, held_dependencies))
}

/// Verifies `dependency`, a library the plugin `plugin` needs, and holds it still; its sealed
/// copy, if it has one, replaces its descriptor (the loader is given the copy).
#[cfg(unix)]
fn hold_dependency(signatures: &Signatures, plugin: &Path, dependency: &mut Dependency) -> Result<Held, Error> {
    let metadata = dependency.file.metadata().map_err(|e| Error::Io {
        path: dependency.found.clone(),
        context: "cannot read the status of a library the plugin needs",
        source: e,
    })?;
    let held = signatures.hold_library((&dependency.file, &metadata), (plugin, &dependency.found), None)?;
    if let Some(copy) = held.sealed() {
        dependency.file = copy.try_clone().map_err(|e| Error::Io {
            path: dependency.found.clone(),
            context: "cannot hold the sealed copy of a library the plugin needs",
            source: e,
        })?;
        dependency.sealed = true;
    }
    Ok(held)
}

/// No library is mapped by dylease for a plugin where there is no trust check.
#[cfg(not(unix))]
fn hold_dependency(_: &Signatures, _: &Path, dependency: &mut Dependency) -> Result<Held, Error> {
    match *dependency {}
}

/// What in `linkage` makes the loader search for (or open by path) a library, if anything:
/// a run path, a needed name that is a path, an auxiliary or filter library, an audit
/// library.
fn searched_by_loader(linkage: &Linkage) -> Option<String> {
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    if let Some(runpath) = linkage.runpath.as_deref().or(linkage.rpath.as_deref()) {
        return Some(format!("it names the run path `{}`", text(runpath)));
    }
    if let Some(path) = linkage.needed.iter().find(|name| name.contains(&b'/')) {
        return Some(format!("it needs the library `{}` by path", text(path)));
    }
    if let Some((tag, name)) = linkage.filtees.first().or(linkage.audit.first()) {
        return Some(format!("its {tag} entry names `{}`", text(name)));
    }
    None
}
