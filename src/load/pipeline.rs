//! The load pipeline as typestates: `Candidate` → `Verified` → `Registered`.
//!
//! Each step consumes the previous state, so a library cannot be registered before its ABI
//! is checked, and only a `Registered` plugin can enter a set. Opening goes through the
//! process-wide [registry](super::registry): a `Verified` plugin holds a shared
//! [`LibraryInstance`], opened and checked once for the whole process (the [`Dlopen`]
//! opener's `start`, which is where the descriptor is checked: `registry::opener`). Every failure
//! drops what the step held: an instance whose last holder goes out of scope unloads
//! (`registry::teardown`). Plugins compiled into the host skip the first two states
//! (`load::static_plugin`). The call of the plugin's `register_passes` is the instance's
//! library's (`registry::opener::PluginLibrary`), which alone holds the plugin's functions.

use std::path::PathBuf;
use std::time::Instant;

use crate::error::{Error, OpenCause, Origin};
use crate::inspect::manifest::Manifest;
use crate::inspect::parse_cache;
use crate::inspect::pinning::Pinning;
use crate::registrar::{Collected, Finished, StaticRegistrar};
use crate::registry::opener::{Dlopen, library_instance};
use crate::registry::teardown::{Teardown, teardown_all};
use crate::registry::{FileRef, LibraryInstance};
use crate::sync::Arc;
use crate::sys::file_id;
use crate::trust::candidate::{Candidate, Dependency, FileId, Identity, Opened};
use crate::trust::{Checks, REPLACEMENTS, TrustPolicy, open_checked};

use super::signed::{self, Provenance};

/// A plugin file whose library instance is open and whose descriptor passed every check.
#[derive(Debug)]
pub(crate) struct Verified {
    path: PathBuf,
    instance: Arc<LibraryInstance<Dlopen>>,
    /// Whether its file predicts that the platform keeps it mapped.
    pinning: Pinning,
    /// What its file declares, read before it was mapped (shared with the parse cache).
    manifest: Option<Arc<Manifest>>,
}

/// A plugin whose passes are collected: the only state a set is built from.
#[derive(Debug)]
pub(crate) struct Registered {
    pub(crate) origin: Origin,
    pub(crate) name: String,
    pub(crate) version: String,
    pub(crate) passes: Vec<Collected>,
    pub(crate) teardown: Teardown,
    pub(crate) pinning: Pinning,
}

impl Candidate {
    /// The library instance of this file: a live one shared, or the file opened
    /// (`RTLD_NOW | RTLD_LOCAL`, running its constructors) and its descriptor checked. Its ELF
    /// headers are checked first: a truncated library would crash the process inside the
    /// loader, and the loader misreports one built for another architecture.
    ///
    /// The file is opened once ([`open_checked`], which checks a replaced file again); the
    /// ELF check reads that descriptor, the registry knows the instance by its identity, and
    /// the loader maps that descriptor (I9, `docs::internals`). A library that the loader must
    /// find by name in its directory (`$ORIGIN`) and that was replaced there meanwhile is
    /// checked again too, before any of its code runs.
    pub(crate) fn open(
        mut self,
        checks: &mut Checks,
        trust: TrustPolicy,
        deadline: Option<Instant>,
    ) -> Result<Verified, Error> {
        let mut replaced = 0;
        loop {
            let Prepared {
                checked,
                identity,
                linkage,
                manifest,
                dependencies,
                pinning,
                provenance,
            } = self.prepare(checks, trust)?;
            let strict = trust == TrustPolicy::Strict;
            // A signed plugin's bytes are held still (`provenance`) until this iteration ends,
            // after the mapping: the loader maps its checked descriptor, or its sealed copy.
            let file = FileRef {
                shown: &self.path,
                resolved: &self.resolved,
                identity: &identity,
                source: Some(provenance.source(checked.file())),
                origin: linkage.names_origin() && !provenance.sealed(),
                loads: &linkage.loads,
                strict,
                dependencies: &dependencies,
                deadline,
            };
            if !checks.not_forked {
                crate::registry::opener::not_forked()?;
                checks.not_forked = true;
            }
            match library_instance(file, deadline) {
                Err(Error::Open {
                    cause: OpenCause::Replaced,
                    ..
                }) if self.since_acquire => return Err(self.replaced_since_acquire()),
                Err(Error::Open {
                    cause: OpenCause::Replaced,
                    ..
                }) if replaced < REPLACEMENTS => {
                    replaced += 1;
                    checks.check(trust, &mut self)?;
                }
                instance => {
                    return Ok(Verified {
                        path: self.path,
                        instance: instance?,
                        pinning,
                        manifest,
                    });
                }
            }
        }
    }
}

/// A plugin file opened and checked, not mapped yet: the descriptor the checks read (which
/// the loader maps, here or in an isolated set's worker) and what they found.
#[derive(Debug)]
pub(crate) struct Prepared {
    pub(crate) checked: Opened,
    pub(crate) identity: Identity,
    pub(crate) linkage: Arc<dylease_elf::Linkage>,
    /// What its file declares (shared with the parse cache).
    pub(crate) manifest: Option<Arc<Manifest>>,
    /// The libraries to map before it, dependencies first (under `Strict`).
    pub(crate) dependencies: Vec<Dependency>,
    pub(crate) pinning: Pinning,
    /// Under `HostBuilder::require_signed`, the plugin and its dependencies verified and held
    /// still until they are mapped (`load::signed`): map `provenance.source(checked.file())`.
    pub(crate) provenance: Provenance,
}

impl Candidate {
    /// Everything a load does before mapping the file: the open ([`open_checked`], which
    /// checks a replaced file again), the ELF check, the manifest read and its ABI gate,
    /// under `Strict` the resolution of the libraries it needs, for that descriptor, and under
    /// `HostBuilder::require_signed` the verification of the file and of those libraries
    /// (`load::signed`).
    pub(crate) fn prepare(&mut self, checks: &mut Checks, trust: TrustPolicy) -> Result<Prepared, Error> {
        let (checked, _, identity) = open_checked(self, checks, trust)?;
        // A first use since an on-demand acquire maps the file judged then, unchanged.
        if self.since_acquire
            && let Some(judged) = &self.listed
            && parse_cache::key(&checked.metadata).as_ref() != Some(judged)
        {
            return Err(self.replaced_since_acquire());
        }
        let linkage = checked.check(&self.path)?;
        // The ABI gate of a plugin with a manifest: before the file is mapped.
        let manifest = checked.manifest(&self.path)?;
        if let Some(manifest) = &manifest {
            manifest.gate(&self.path)?;
        }
        let mut dependencies = match self.dependencies.take() {
            Some(dependencies) => dependencies,
            // Resolved for the descriptor the loader maps (its linkage, from the parse cache
            // for its status or read from it), if the trust check's does not hold for it.
            None if trust == TrustPolicy::Strict => checks
                .resolve(&self.resolved, &linkage)
                .map_err(|refused| refused.into_error(self.path.clone()))?,
            None => Vec::new(),
        };
        let provenance = signed::verify(
            checks,
            (self, trust),
            (&checked, &linkage, manifest.as_deref()),
            &mut dependencies,
        )?;
        let pinning = checked.pinning();
        Ok(Prepared {
            checked,
            identity,
            linkage,
            manifest,
            dependencies,
            pinning,
            provenance,
        })
    }
}

/// A plugin file that an isolated set's worker (`isolate::worker`) received, prepared by the
/// host ([`Candidate::prepare`]): `file` is the descriptor the host checked, received over
/// the channel, with the identity `identity` the host read from it; `dependencies` are the
/// libraries it needs, received the same way. `shown` only names it in messages; `resolved`
/// is the name the loader is given for it in its directory when `origin` (a name in a
/// directory descriptor the host sent). Its manifest was compared by the host, not here.
#[cfg(all(feature = "isolate", target_os = "linux", not(loom)))]
#[derive(Debug)]
pub(crate) struct Received<'a> {
    pub(crate) shown: &'a std::path::Path,
    pub(crate) resolved: &'a std::path::Path,
    pub(crate) file: &'a std::fs::File,
    pub(crate) identity: &'a Identity,
    pub(crate) origin: bool,
    pub(crate) loads: &'a [std::ops::Range<u64>],
    pub(crate) strict: bool,
    pub(crate) dependencies: &'a [Dependency],
}

/// Maps a plugin file an isolated set's worker received ([`Received`]) by the usual path (the
/// process-wide registry, its dependencies first, the instance's `on_load`, the set's
/// `register_passes`), by its descriptor, never by a path the worker opened.
#[cfg(all(feature = "isolate", target_os = "linux", not(loom)))]
pub(crate) fn map_received(received: Received<'_>) -> Result<Registered, Error> {
    let file = FileRef {
        shown: received.shown,
        resolved: received.resolved,
        identity: received.identity,
        source: Some(received.file),
        origin: received.origin,
        loads: received.loads,
        strict: received.strict,
        dependencies: received.dependencies,
        deadline: None,
    };
    let instance = library_instance(file, None)?;
    Verified {
        path: received.shown.to_owned(),
        instance,
        pinning: Pinning::default(),
        manifest: None,
    }
    .register()
}

/// An on-demand plugin judged at its set's acquire and not mapped
/// ([`HostBuilder::on_demand`](crate::HostBuilder::on_demand)): what its file is (its path,
/// and the identity of the file judged) and what it declares. It holds no descriptor: the
/// file is opened again, and must be the same file, when a lease first asks for one of its
/// passes ([`Deferred::map`]).
#[derive(Debug)]
pub(crate) struct Deferred {
    pub(crate) path: PathBuf,
    resolved: PathBuf,
    identity: Identity,
    /// The identity of the file judged, read from its descriptor.
    checked: Option<FileId>,
    /// The status of the file judged (the parse cache's key): the file opened at the first
    /// use must still have it, so that a file rewritten in place since (the same inode, new
    /// bytes, another manifest) is refused like one replaced.
    status: Option<parse_cache::Key>,
    /// Its complete manifest (shared with the parse cache).
    pub(crate) manifest: Arc<Manifest>,
    /// Its file's prediction.
    pub(crate) pinning: Pinning,
    /// The keyring it was verified with at judgement (`HostBuilder::require_signed`): its
    /// mapping verifies it again, holding its bytes still until they are mapped.
    signatures: Option<Arc<crate::trust::Verifier>>,
}

/// What judging a plugin file for an on-demand set decided.
pub(crate) enum Judged {
    /// A complete manifest: it joins the set unmapped.
    Deferred(Deferred),
    /// No manifest, or an incomplete one: it is loaded now, from the descriptor already open.
    Eager(Candidate),
}

impl Candidate {
    /// Judges the file as a load would before mapping it, without mapping it: the trust
    /// check (done by the caller), the open ([`open_checked`]), the ELF check, the manifest
    /// read and its ABI gate (or, for a file the parse cache knows unchanged, none of them but
    /// the gate: `judged_by_status`). A plugin with a complete manifest comes back [`Judged::Deferred`]
    /// with its descriptor closed; any other comes back to be loaded as usual, its descriptor
    /// kept for that load.
    pub(crate) fn judge(mut self, checks: &mut Checks, trust: TrustPolicy) -> Result<Judged, Error> {
        // A signed plugin is verified at judgement, which reads it: never judged by status.
        if checks.signatures.is_none()
            && let Some(deferred) = self.judged_by_status()
        {
            return deferred.map(Judged::Deferred);
        }
        let (checked, _, identity) = open_checked(&mut self, checks, trust)?;
        checked.verify(&self.path)?;
        match checked.manifest(&self.path)? {
            Some(manifest) if manifest.complete => {
                manifest.gate(&self.path)?;
                if checks.signatures.is_some() {
                    // Its dependencies are resolved and verified when it is mapped.
                    let linkage = checked.check(&self.path)?;
                    signed::verify(checks, (&self, trust), (&checked, &linkage, Some(&manifest)), &mut [])?;
                }
                Ok(Judged::Deferred(Deferred {
                    signatures: checks.signatures.clone(),
                    checked: file_id(&checked.metadata),
                    status: parse_cache::key(&checked.metadata),
                    pinning: checked.pinning(),
                    path: self.path,
                    resolved: self.resolved,
                    identity,
                    manifest,
                }))
            }
            manifest => {
                if let Some(manifest) = &manifest {
                    manifest.gate(&self.path)?;
                }
                self.opened = Some(Box::new(checked));
                Ok(Judged::Eager(self))
            }
        }
    }
}

impl Candidate {
    /// The judgement of an unchanged file from what the parse cache holds for the status
    /// discovery read (`listed`), without opening it: `Some` if the cache holds, for exactly
    /// that status, a passed ELF check, a complete manifest and a pin prediction, and the
    /// trust check (if it ran, and walked to the file itself: for a directory entry that is no
    /// symlink it judges the same status) passed that very file (its dev and ino); `None` to
    /// judge it by opening it. The file is opened at its first use, its trust judged again,
    /// and refused there if it is another file than the one judged or has another status (a
    /// rewrite in place) ([`Deferred::map`]).
    fn judged_by_status(&mut self) -> Option<Result<Deferred, Error>> {
        let key = self.listed.take()?;
        let id = key.id();
        if self.checked.is_some_and(|checked| checked != id) {
            return None;
        }
        let parsed = parse_cache::find(&key)?;
        parsed.check.known()?.ok()?;
        let manifest = parsed.manifest.known()?.ok()??;
        if !manifest.complete {
            return None;
        }
        let pinning = parsed.pinning.known()?;
        log::trace!(
            "{}judged `{}` by its status from the parse cache, not opened",
            crate::log_scope::prefix(),
            self.path.display()
        );
        Some(manifest.gate(&self.path).map(|()| Deferred {
            signatures: None,
            path: std::mem::take(&mut self.path),
            resolved: std::mem::take(&mut self.resolved),
            identity: crate::sys::checked_identity(id),
            checked: Some(id),
            status: Some(key),
            manifest,
            pinning,
        }))
    }
}

impl Deferred {
    /// An on-demand plugin named `name` declaring the untyped passes `passes`, for the loom
    /// model of the map-once state (`load::demand`), which maps it with a model's own step.
    #[cfg(all(test, loom))]
    pub(crate) fn for_model(name: &str, passes: &[&str]) -> Deferred {
        let path = PathBuf::from(format!("/model/lib{name}.so"));
        Deferred {
            resolved: path.clone(),
            path,
            identity: crate::sys::FileId { dev: 1, ino: 1 },
            checked: None,
            status: None,
            manifest: Arc::new(Manifest {
                abi_version: Some(dylease_plugin::abi::DYLEASE_ABI_VERSION),
                name: name.to_owned(),
                version: String::new(),
                complete: true,
                passes: passes
                    .iter()
                    .map(|pass| crate::inspect::manifest::DeclaredPass::new(*pass, None))
                    .collect(),
            }),
            pinning: Pinning::default(),
            signatures: None,
        }
    }

    /// Maps the plugin by the usual path (`Candidate::open`, `Verified::register`), from the
    /// file judged at acquire. Its trust is judged again (a first use is a load: a directory
    /// on the way made writable by others since is refused), and the path must still lead to
    /// the file judged, unchanged: a file replaced, removed or rewritten in place since is
    /// refused ([`OpenCause::ReplacedSinceAcquire`]), not checked again, so that the passes
    /// the set lists from its manifest are the ones mapped.
    pub(crate) fn map(&self, trust: TrustPolicy, deadline: Option<Instant>) -> Result<Registered, Error> {
        let mut candidate = Candidate {
            path: self.path.clone(),
            resolved: self.resolved.clone(),
            #[allow(clippy::clone_on_copy, reason = "`Identity` is a path on platforms other than Unix")]
            identity: self.identity.clone(),
            checked: self.checked,
            discovered: None,
            listed: self.status,
            opened: None,
            dependencies: None,
            resolved_by_status: false,
            since_acquire: true,
        };
        let mut checks = Checks::default();
        checks.signatures = self.signatures.clone();
        if let Err(refused) = checks.check(trust, &mut candidate) {
            // A file gone since is that, not a failure of its trust.
            let gone = std::fs::symlink_metadata(&self.resolved).is_err_and(|e| crate::sys::is_replacement(&e));
            return Err(if gone {
                candidate.replaced_since_acquire()
            } else {
                refused
            });
        }
        if self.checked.is_some() && candidate.checked.is_some() && candidate.checked != self.checked {
            return Err(candidate.replaced_since_acquire());
        }
        candidate.checked = self.checked;
        let replaced = candidate.replaced_since_acquire();
        let verified = candidate.open(&mut checks, trust, deadline)?;
        // The set lists the passes of the manifest judged at acquire, and hands the mapping's
        // callables to them by name: the file must declare the same now (a write through a
        // shared mapping keeps the file's status, which `open` holds it to).
        if verified.manifest.as_deref() != Some(&*self.manifest) {
            return Err(replaced);
        }
        verified.register()
    }
}

impl Verified {
    /// Calls the plugin's `register_passes` and collects what it registered.
    pub(crate) fn register(self) -> Result<Registered, Error> {
        let origin = Origin::File(self.path);
        let descriptor = self.instance.plugin();
        let mut registrar = StaticRegistrar::new(origin.clone());
        let code = self.instance.library().register(&mut registrar);
        let Finished { passes, report, .. } = registrar.finish();
        let (name, version) = (descriptor.name.clone(), descriptor.version.clone());
        let abi_version = descriptor.abi_version;
        if code != 0 {
            // The plugin's registration failed: it undoes its own work, so this registration
            // does not make its `on_unload` due (its `on_load` may have: see
            // `InstanceHooks`). Dropping the instance unloads it if no other set uses it.
            drop(self.instance);
            // A refused pass is the likely cause (the header's `register_passes` stops at
            // the first refusal): report it rather than a bare code. Otherwise the plugin's
            // own word (`report`), if it gave one.
            return Err(match passes {
                Err(refused) => refused,
                Ok(_) => Error::RegisterFailed {
                    plugin: origin,
                    reason: match report {
                        Some(message) => format!("{message} (`register_passes` returned {code})"),
                        None => format!("`register_passes` returned {code}"),
                    },
                    source: None,
                },
            });
        }
        if let Some(message) = report {
            log::debug!("{origin} reported {message:?}, then registered its passes successfully");
        }
        // Registration itself succeeded, so the plugin expects its `on_unload`, even if the
        // host refuses a pass below.
        self.instance.registered();
        let teardown = Teardown::of_instance(origin.clone(), self.instance, self.pinning.clone());
        let checked = passes.and_then(|passes| match &self.manifest {
            Some(manifest) => {
                let registered = passes.iter().map(|p| (&*p.name, p.func.interface()));
                let descriptor = (Some(abi_version), name.as_str(), version.as_str());
                manifest.compare(&origin, descriptor, registered).map(|()| passes)
            }
            None => Ok(passes),
        });
        let passes = match checked {
            Ok(passes) => passes,
            Err(refused) => {
                teardown_all(vec![teardown]);
                return Err(refused);
            }
        };
        Ok(Registered {
            origin,
            name,
            version,
            passes,
            teardown,
            pinning: self.pinning,
        })
    }
}
