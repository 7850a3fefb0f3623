//! What a host would load, judged without loading it: discovery, the trust check, the ELF
//! check, the manifest and the pin prediction of every plugin of the sources, from the files
//! alone. No plugin code runs (a library is never mapped, a Python module never executed),
//! and no lease is taken.

use crate::error::{Error, Origin};
use crate::inspect::manifest::Manifest;
use crate::inspect::pinning::Pinning;
use crate::load::plan::{Planned, Source, plan};
use crate::sync::Arc;
use crate::trust::Verifier;
use crate::trust::candidate::{Candidate, Opened};
use crate::trust::{Checks, TrustPolicy, open_checked};
use dylease_sign::Verified;

use super::signed;

/// One plugin a host would load, as [`PluginHost::catalog`](crate::PluginHost::catalog)
/// describes it without running any of its code.
#[derive(Debug)]
pub struct CatalogEntry {
    origin: Origin,
    manifest: Option<Manifest>,
    refusal: Option<Error>,
    pinning: Pinning,
    signature: Option<Verified>,
}

impl CatalogEntry {
    /// Where the plugin comes from: its file as discovered, or the static plugin's name.
    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// What the plugin's file declares about it, if it carries a manifest (see [`Manifest`]).
    /// `None` for a library built without one, a Python plugin whose name is not a literal,
    /// a static plugin, and a file refused before its manifest could be read (by the trust
    /// check, or as no ELF file). A library the ELF check refuses still shows its manifest:
    /// one built for another machine, a big-endian one say, is described beside the reason
    /// this host cannot load it.
    pub fn manifest(&self) -> Option<&Manifest> {
        self.manifest.as_ref()
    }

    /// Why a load would refuse the plugin before running any of its code: the trust check
    /// ([`Error::Untrusted`]; out of file descriptors, [`Error::Open`] with
    /// [`OpenCause::Descriptors`](crate::OpenCause::Descriptors)), the ELF check or the
    /// manifest ([`Error::Open`]), an ABI
    /// version its manifest declares that the host does not speak ([`Error::AbiMismatch`]),
    /// discovery (a file or directory that cannot be read: [`Error::Io`]). `None` if every check made without running its code passed
    /// (its constructors, `on_load` and `register_passes` may still fail a load).
    pub fn refusal(&self) -> Option<&Error> {
        self.refusal.as_ref()
    }

    /// Whether the platform is expected to keep the library mapped after its last lease,
    /// and why, as predicted from its file ([`PluginInfo::pinning`](crate::PluginInfo::pinning)).
    /// Empty for a Python or static plugin, and for a file refused before it was read.
    pub fn pinning(&self) -> &Pinning {
        &self.pinning
    }

    /// Who signed the plugin, as a host that requires signatures
    /// ([`HostBuilder::require_signed`](crate::HostBuilder::require_signed)) verified it from
    /// its file (the key, the release: name, version, serial; the digest): `Some` once its
    /// plugin file (or a Python plugin's signed index) passed. `None` for a host that requires
    /// no signature, for a static plugin, and for a plugin refused (then [`refusal`] says
    /// why: an [`Error::Signature`] for a signature's refusal, naming the key it found).
    ///
    /// [`refusal`]: CatalogEntry::refusal
    pub fn signature(&self) -> Option<&Verified> {
        self.signature.as_ref()
    }

    fn new(origin: Origin) -> CatalogEntry {
        CatalogEntry {
            origin,
            manifest: None,
            refusal: None,
            pinning: Pinning::default(),
            signature: None,
        }
    }

    fn refused(origin: Origin, error: Error) -> CatalogEntry {
        CatalogEntry {
            refusal: Some(error),
            ..CatalogEntry::new(origin)
        }
    }
}

/// Every plugin of `sources`, in load order, judged as a load under `trust` would judge it
/// before running any of its code. `Err` only where a load would fail before any plugin is
/// judged (an unusable environment variable source); a directory that cannot be read is an
/// entry with its refusal.
pub(crate) fn catalog(
    sources: &[Source],
    trust: TrustPolicy,
    signatures: Option<&Arc<Verifier>>,
) -> Result<Vec<CatalogEntry>, Error> {
    let mut checks = Checks::default();
    checks.signatures = signatures.cloned();
    let entries = plan(sources)?.into_iter().map(|planned| match planned {
        Planned::Unusable { path, error } => CatalogEntry::refused(Origin::File(path), error),
        Planned::Static(plugin) => CatalogEntry::new(Origin::Static(plugin.name.clone())),
        Planned::File(mut candidate) => {
            let origin = Origin::File(candidate.path.clone());
            let judged = checks.check(trust, &mut candidate).and_then(|()| {
                let (opened, _, _) = open_checked(&mut candidate, &mut checks, trust)?;
                // The manifest is read whatever the ELF check says of the file: a plugin built
                // for another machine (a big-endian one, say) is described, with the reason
                // this host cannot load it.
                let verdict = opened.verify(&candidate.path);
                let pinning = if verdict.is_ok() {
                    opened.pinning()
                } else {
                    Pinning::default()
                };
                Ok((verdict, opened.manifest(&candidate.path), pinning, opened))
            });
            match judged {
                Ok((verdict, Ok(manifest), pinning, opened)) => {
                    let mut entry = CatalogEntry {
                        refusal: verdict
                            .err()
                            .or_else(|| manifest.as_ref().and_then(|m| m.gate(&candidate.path).err())),
                        manifest: manifest.as_ref().map(|manifest| (**manifest).clone()),
                        pinning,
                        ..CatalogEntry::new(origin)
                    };
                    if entry.refusal.is_none() && checks.signatures.is_some() {
                        match signature(&mut checks, trust, &mut candidate, &opened, manifest.as_deref()) {
                            Ok(verified) => entry.signature = verified,
                            Err(refusal) => entry.refusal = Some(refusal),
                        }
                    }
                    entry
                }
                Ok((verdict, Err(refusal), pinning, _)) => CatalogEntry {
                    pinning,
                    ..CatalogEntry::refused(origin, verdict.err().unwrap_or(refusal))
                },
                Err(refusal) => CatalogEntry::refused(origin, refusal),
            }
        }
        #[cfg(feature = "python")]
        Planned::Python(mut plugin) => {
            let origin = Origin::File(plugin.path().to_owned());
            let manifest = plugin
                .check(&mut checks, trust)
                .and_then(|()| plugin.manifest_and_signature(&mut checks, trust));
            match manifest {
                Ok((manifest, signature)) => CatalogEntry {
                    manifest,
                    signature,
                    ..CatalogEntry::new(origin)
                },
                Err(refusal) => CatalogEntry::refused(origin, refusal),
            }
        }
    });
    Ok(entries.collect())
}

/// The verification of the plugin `candidate` (opened as `opened`) and of the libraries it
/// needs, as its load makes it (`load::signed`), releasing what it held at once.
fn signature(
    checks: &mut Checks,
    trust: TrustPolicy,
    candidate: &mut Candidate,
    opened: &Opened,
    manifest: Option<&Manifest>,
) -> Result<Option<Verified>, Error> {
    let linkage = opened.check(&candidate.path)?;
    let mut dependencies = match candidate.dependencies.take() {
        Some(dependencies) => dependencies,
        None if trust == TrustPolicy::Strict => checks
            .resolve(&candidate.resolved, &linkage)
            .map_err(|refused| refused.into_error(candidate.path.clone()))?,
        None => Vec::new(),
    };
    let provenance = signed::verify(
        checks,
        (candidate, trust),
        (opened, &linkage, manifest),
        &mut dependencies,
    )?;
    Ok(provenance.signature().cloned())
}
