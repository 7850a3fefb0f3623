//! The trust room: discovery of plugin files (`discover`), the [`Candidate`] each file becomes
//! (`candidate`), and the trust check of a file and of the libraries it needs (this module,
//! `walk`, `deps`, `policy`). It may call `inspect`, `log_scope`, `sys` and `sync` (and the
//! shared `error`), never `registrar`, `registry`, `load`, `host` or `python`.
//!
//! The trust check: who could have chosen the code a plugin file holds.
//!
//! Opening a library runs its code with all of this process's rights. If another user can
//! write the file, or any directory on the way to it (and so rename the file, or a whole
//! directory, or a symlink, out from under the path), that user can run code as this
//! process. The check walks the path one component at a time on open descriptors, as the
//! kernel would resolve it, and looks at the owner and mode of every directory and symlink
//! it traverses and of the file it ends at, before `dlopen`: a refused plugin runs no code at
//! all. The file is then opened once, and that descriptor is what the ELF check reads (see
//! [`open_checked`]).

#[cfg(unix)]
use std::path::{Path, PathBuf};

use crate::error::{Error, OpenCause};
#[cfg(unix)]
use crate::sys::walk as sys;
use crate::sys::{file_id, is_replacement, no_follow};
#[cfg(not(unix))]
use crate::trust::candidate::Dependency;
use crate::trust::candidate::{Candidate, FileId, Identity, Opened};

pub(crate) mod candidate;
#[cfg(unix)]
mod deps;
pub(crate) mod discover;
mod policy;

#[cfg(unix)]
mod walk;

pub use policy::TrustPolicy;
#[cfg(unix)]
use walk::Walk;

/// Why the trust check did not pass a file: it refused it, or it could not judge it for lack
/// of file descriptors.
#[derive(Debug)]
pub(crate) enum Refused {
    /// Another user could have chosen the code the loader would run, or the check cannot
    /// vouch for it: the reason, with its fix ([`Error::Untrusted`]).
    Untrusted(String),
    /// The process or the system ran out of file descriptors: what could not be opened, the
    /// system's error and the limit reached ([`OpenCause::Descriptors`]). The plugin is not
    /// loaded (what was not checked is not left to the loader), but nothing says it is not
    /// to be trusted.
    Descriptors(String),
}

impl Refused {
    /// The error of the plugin file `path`: a refusal, or a resource error.
    pub(crate) fn into_error(self, path: std::path::PathBuf) -> Error {
        match self {
            Refused::Untrusted(reason) => Error::Untrusted { path, reason },
            Refused::Descriptors(reason) => Error::Open {
                path,
                reason,
                cause: OpenCause::Descriptors,
            },
        }
    }
}

/// The parenthesis naming the limit that `error` reached, if it is a lack of file descriptors
/// (the process's, EMFILE, or the system's, ENFILE): what every open of the trust check tells
/// apart from a reason not to trust the file.
pub(crate) fn out_of_descriptors(error: &std::io::Error) -> Option<&'static str> {
    Some(crate::sys::library::descriptor_hint(error)).filter(|hint| !hint.is_empty())
}

/// A host's signature policy as a load reaches it (`HostBuilder::require_signed`): the
/// verification of a library plugin and the libraries it needs, and of a Python plugin's
/// sources. `load::signed` implements it for `provenance::Signatures`; a load calls it through
/// [`Verifier`]'s trait object, whose only maker is `HostBuilder::require_signed`, so that a
/// program that never requires signatures links none of it.
pub(crate) trait Verify: std::fmt::Debug + Send + Sync {
    /// Verifies the plugin `candidate`, opened as `checked` (its `linkage` and `manifest` read
    /// from that descriptor), and the libraries it needs that dylease maps (`dependencies`: the
    /// sealed copy of one replaces its descriptor); what it returns holds their bytes still
    /// until the mapping.
    fn verify(
        &self,
        candidate: (&Candidate, TrustPolicy),
        read: (
            &Opened,
            &dylease_elf::Linkage,
            Option<&crate::inspect::manifest::Manifest>,
        ),
        dependencies: &mut [candidate::Dependency],
    ) -> Result<crate::provenance::Provenance, Error>;

    /// Verifies a Python plugin's sources (`files`, by their paths in its index) against its
    /// signed index (`index`, read from `paths.1`; `paths.0` is the plugin's).
    #[cfg(feature = "python")]
    fn verify_files(
        &self,
        index: Option<std::fs::File>,
        paths: (&Path, &Path),
        expected: Option<&str>,
        files: &[(&Path, &[u8])],
    ) -> Result<dylease_sign::Verified, Error>;
}

/// A [`Verify`] behind a pointer: its calls and its drop go through the vtable made where it
/// is made (`HostBuilder::require_signed`), and nowhere else.
#[derive(Debug)]
pub(crate) struct Verifier(Box<dyn Verify>);

impl Verifier {
    pub(crate) fn new(verify: impl Verify + 'static) -> Verifier {
        Verifier(Box::new(verify))
    }
}

impl std::ops::Deref for Verifier {
    type Target = dyn Verify;

    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

/// The trust checks of one load: each directory is walked and checked once per load,
/// however many plugin files it holds.
#[derive(Debug, Default)]
pub(crate) struct Checks {
    /// Whether a passed file's dependencies are left to be resolved when it is opened to be
    /// mapped (`Candidate::open`, which resolves them from the descriptor it maps), instead
    /// of at its check: for an on-demand load, most of whose plugins are never mapped.
    pub(crate) defer_dependencies: bool,
    /// Whether this load asked, before its first open of a library instance, that it is not
    /// in a `fork()`ed child (`load::pipeline`): once per load.
    pub(crate) not_forked: bool,
    /// The keyring every file this load maps or runs must be signed for
    /// (`HostBuilder::require_signed`; `provenance`), if the host requires signatures.
    pub(crate) signatures: Option<crate::sync::Arc<Verifier>>,
    /// This process's effective user, asked once.
    #[cfg(unix)]
    euid: Option<u32>,
    /// The directories that passed so far, by the absolute path that named them (as written,
    /// and resolved): where the path resolves to, and an open descriptor of it. No other user
    /// can change what a passed path resolves to, so the verdict holds for the whole load.
    #[cfg(unix)]
    passed: std::collections::HashMap<PathBuf, std::rc::Rc<sys::Dir>>,
}

impl Checks {
    /// Checks `candidate` under `policy`, before anything opens it. Under
    /// [`TrustPolicy::Strict`] a passed candidate's `resolved` path becomes the path the
    /// check walked, and `checked` the file it found there.
    pub(crate) fn check(&mut self, policy: TrustPolicy, candidate: &mut Candidate) -> Result<(), Error> {
        // A file checked again is opened and resolved again.
        candidate.opened = None;
        candidate.dependencies = None;
        candidate.resolved_by_status = false;
        match policy {
            TrustPolicy::Permissive => Ok(()),
            TrustPolicy::Strict => match self.strict(&candidate.path, candidate.discovered.take()) {
                Ok(Some((resolved, id))) => {
                    candidate.resolved = resolved;
                    candidate.checked = Some(id);
                    if self.defer_dependencies {
                        return Ok(());
                    }
                    self.dependencies(candidate)
                        .map_err(|refused| refused.into_error(candidate.path.clone()))
                }
                Ok(None) => Ok(()),
                Err(refused) => Err(refused.into_error(candidate.path.clone())),
            },
        }
    }

    /// Walks `path` (whose own status discovery may have read: `discovered`, used once).
    #[cfg(unix)]
    fn strict(&mut self, path: &Path, discovered: Option<sys::Stat>) -> Result<Option<(PathBuf, FileId)>, Refused> {
        let euid = *self.euid.get_or_insert_with(crate::sys::imp::effective_uid);
        // A relative path, a bare file name too, is resolved from the current directory,
        // whose every ancestor counts like those of any other directory.
        let absolute = if path.is_absolute() {
            path.to_owned()
        } else {
            let cwd = std::env::current_dir().map_err(|e| {
                Refused::Untrusted(format!(
                    "cannot find the current directory the relative path starts from: {e}"
                ))
            })?;
            cwd.join(path)
        };
        let mut walk = Walk {
            passed: &mut self.passed,
            euid,
            links: 0,
        };
        walk.file(&absolute, discovered).map(Some).map_err(|mut problem| {
            problem.holder = problem.through.is_empty() && Some(problem.path.as_path()) == absolute.parent();
            if problem.out_of_descriptors() {
                Refused::Descriptors(problem.to_string())
            } else {
                Refused::Untrusted(problem.to_string())
            }
        })
    }

    /// Under [`TrustPolicy::Strict`], after the plugin file itself passed: resolves its
    /// dependency closure (`deps`). For the file the check passed at the status discovery
    /// read, if the parse cache holds a passed ELF check and the linkage for that status,
    /// from that linkage, without opening the file: the load opens it and holds it to that
    /// status (`open_checked`). Otherwise from the descriptor the load will map, which it
    /// keeps for the load with the closure. A file that changed since its check, or whose
    /// linkage cannot be read, is resolved when it is opened to load ([`Checks::resolve`]),
    /// where the ELF check refuses an unsound one first.
    #[cfg(unix)]
    fn dependencies(&mut self, candidate: &mut Candidate) -> Result<(), Refused> {
        if let Some(linkage) = cached_linkage(candidate) {
            candidate.dependencies = Some(self.resolve(&candidate.resolved, &linkage)?);
            candidate.resolved_by_status = true;
            return Ok(());
        }
        let Some(file) = open_if_unchanged(candidate, self)? else {
            return Ok(());
        };
        let Ok(Some(linkage)) = file.linkage(&candidate.path) else {
            return Ok(());
        };
        candidate.dependencies = Some(self.resolve(&candidate.resolved, &linkage)?);
        // The load uses this descriptor, and what was decided of it.
        candidate.opened = Some(Box::new(file.shed()));
        Ok(())
    }

    #[cfg(not(unix))]
    fn dependencies(&mut self, _: &mut Candidate) -> Result<(), Refused> {
        Ok(())
    }

    /// No dependency is mapped by dylease where there is no trust check.
    #[cfg(not(unix))]
    pub(crate) fn resolve(
        &mut self,
        _: &std::path::Path,
        _: &dylease_elf::Linkage,
    ) -> Result<Vec<Dependency>, Refused> {
        Ok(Vec::new())
    }

    #[cfg(not(unix))]
    fn strict(
        &mut self,
        _: &std::path::Path,
        _: Option<crate::trust::candidate::Status>,
    ) -> Result<Option<(std::path::PathBuf, FileId)>, Refused> {
        Ok(None)
    }
}

/// How many times [`open_checked`] checks a file again that was replaced after its check.
pub(crate) const REPLACEMENTS: u32 = 8;

/// Opens the file `candidate` names for reading, once: the descriptor the ELF check reads and
/// the loader maps. After a trust check it must be the file checked (same device and inode),
/// and the last component is not followed (the check resolved every symlink already). Returns
/// the opened file, its length and its identity.
///
/// A file replaced after its check (renamed over, or removed and created again) was replaced
/// by this user or root: only they can change a directory that passed. That is an install,
/// not an attack, so the new file is checked in turn (at most [`REPLACEMENTS`] times) and
/// opened if it passes; `Untrusted` only if what is there now fails the check.
pub(crate) fn open_checked(
    candidate: &mut Candidate,
    checks: &mut Checks,
    policy: TrustPolicy,
) -> Result<(Opened, u64, Identity), Error> {
    let mut replaced = 0;
    loop {
        let refused = |reason: String, cause| Error::Open {
            path: candidate.path.clone(),
            reason,
            cause,
        };
        let held = candidate
            .opened
            .take()
            .filter(|held| still_named(candidate, checks, &held.metadata));
        let reopened = held.is_none();
        let file = match held.map_or_else(|| open_once(candidate, checks), |held| Ok(*held)) {
            Ok(opened) => opened,
            // Gone, or a symlink now: replaced after the check, if it was checked.
            Err(e) if candidate.since_acquire && is_replacement(&e) => return Err(candidate.replaced_since_acquire()),
            Err(e) if candidate.checked.is_some() && replaced < REPLACEMENTS && is_replacement(&e) => {
                replaced += 1;
                check_again(checks, policy, candidate, &format!("was removed or replaced ({e})"))?;
                continue;
            }
            Err(e) => {
                let (limit, cause) = match out_of_descriptors(&e) {
                    Some(limit) => (limit, OpenCause::Descriptors),
                    None => ("", OpenCause::Headers),
                };
                return Err(refused(
                    format!("cannot open `{}`: {e}{limit}", candidate.resolved.display()),
                    cause,
                ));
            }
        };
        // The closure resolved from the cache's linkage for the status discovery read holds
        // for a descriptor of that status whose bytes the entry still describes (its
        // fingerprint: a write through a shared mapping keeps the status).
        let resolved_for_this = candidate.resolved_by_status
            && candidate.listed.is_some()
            && candidate.listed == crate::inspect::parse_cache::key(&file.metadata)
            && file.parse_was_cached();
        if reopened && !resolved_for_this {
            // The closure was resolved for another descriptor or status, if at all: the load
            // resolves it again for this one (`Candidate::open`).
            candidate.dependencies = None;
        }
        let (id, len) = (file_id(&file.metadata), file.metadata.len());
        match candidate.checked {
            Some(checked) if id != Some(checked) => {
                if candidate.since_acquire {
                    return Err(candidate.replaced_since_acquire());
                }
                if replaced == REPLACEMENTS {
                    return Err(Error::Untrusted {
                        path: candidate.path.clone(),
                        reason: format!(
                            "the library file `{}` was replaced {REPLACEMENTS} times while this host checked \
                             and opened it; try again once its installation is done",
                            candidate.resolved.display()
                        ),
                    });
                }
                replaced += 1;
                drop(file);
                check_again(checks, policy, candidate, "was replaced by another file")?;
            }
            _ => {
                // `Identity` is `Copy` on Unix and a path elsewhere (where `checked_identity` is
                // not the identity function): one spelling for both.
                #[allow(clippy::clone_on_copy, clippy::unnecessary_option_map_or_else)]
                let identity = id.map_or_else(|| candidate.identity.clone(), crate::sys::checked_identity);
                return Ok((file, len, identity));
            }
        }
    }
}

/// Checks `candidate` again, its file having `changed` after its check (said in the log, at
/// `debug`, before and after: an install under way shows there).
fn check_again(
    checks: &mut Checks,
    policy: TrustPolicy,
    candidate: &mut Candidate,
    changed: &str,
) -> Result<(), Error> {
    let prefix = crate::log_scope::prefix();
    let path = candidate.resolved.display().to_string();
    log::debug!("{prefix}`{path}` {changed} after its check: checking what is there now");
    checks.check(policy, candidate)?;
    log::debug!("{prefix}`{path}` checked again");
    Ok(())
}

/// Opens the file `candidate` names for reading, not following a symlink in the last
/// component if it was checked, and reads its status from the descriptor. A checked file is
/// opened relative to the descriptor of its directory, which the walk passed (no path is
/// resolved again).
fn open_once(candidate: &Candidate, checks: &Checks) -> std::io::Result<Opened> {
    #[cfg(unix)]
    if candidate.checked.is_some()
        && let Some((dir, name)) = checks.passed_dir(&candidate.resolved)
    {
        let file = sys::open_file_at(dir, name)?;
        let metadata = file.metadata()?;
        return Ok(Opened::new(file, metadata));
    }
    let _ = checks;
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    if candidate.checked.is_some() {
        no_follow(&mut options);
    }
    let file = options.open(&candidate.resolved)?;
    let metadata = file.metadata()?;
    Ok(Opened::new(file, metadata))
}

/// The linkage the parse cache holds for the status discovery read (`listed`) of the file the
/// trust check passed (the same file, by identity), if it holds a passed ELF check and the
/// linkage for that status.
#[cfg(unix)]
fn cached_linkage(candidate: &Candidate) -> Option<crate::sync::Arc<dylease_elf::Linkage>> {
    let key = candidate.listed?;
    if candidate.checked != Some(key.id()) {
        return None;
    }
    let parsed = crate::inspect::parse_cache::find(&key)?;
    parsed.check.known()?.ok()?;
    let linkage = parsed.linkage.known()?.ok()?;
    log::trace!(
        "{}the linkage of `{}` taken from the parse cache by the status discovery read, the file not opened",
        crate::log_scope::prefix(),
        candidate.path.display()
    );
    Some(linkage)
}

/// Whether the checked file is still the one at its resolved path (`fstatat` in its
/// directory, or `lstat`), unchanged since the check opened it (`read`: its status then): a
/// file the check opened is used by the load only then, so that a file replaced in between is
/// checked again, and a file rewritten in place (same inode, another length or modification
/// time) is opened and read again, as if it had been opened only now.
fn still_named(candidate: &Candidate, checks: &Checks, read: &std::fs::Metadata) -> bool {
    #[cfg(unix)]
    if let Some((dir, name)) = checks.passed_dir(&candidate.resolved) {
        return sys::stat_at(dir, name)
            .is_ok_and(|now| Some(now.id()) == candidate.checked && now.unchanged_since(read));
    }
    let _ = checks;
    let Ok(now) = std::fs::symlink_metadata(&candidate.resolved) else {
        return false;
    };
    file_id(&now) == candidate.checked && now.len() == read.len() && now.modified().ok() == read.modified().ok()
}

#[cfg(unix)]
impl Checks {
    /// The directory holding `path` that the walk passed in this load, and `path`'s name in
    /// it: what a checked file is opened and looked at through.
    fn passed_dir<'a>(&self, path: &'a Path) -> Option<(&sys::Dir, &'a std::ffi::OsStr)> {
        let dir = self.passed.get(path.parent()?)?;
        Some((dir, path.file_name()?))
    }
}

/// The checked file, opened as [`open_checked`] opens it, if it is still the file checked
/// (the dependency walk reads its linkage; a replaced file is checked again when it is
/// opened to load). `Err` if it cannot be opened for lack of descriptors: its dependencies
/// would go unchecked.
#[cfg(unix)]
fn open_if_unchanged(candidate: &Candidate, checks: &Checks) -> Result<Option<Opened>, Refused> {
    let file = match open_once(candidate, checks) {
        Ok(file) => file,
        Err(e) => {
            let Some(limit) = out_of_descriptors(&e) else {
                return Ok(None);
            };
            return Err(Refused::Descriptors(format!(
                "cannot open `{}` to read what it links against: {e}{limit}",
                candidate.resolved.display()
            )));
        }
    };
    Ok((file_id(&file.metadata) == candidate.checked).then_some(file))
}
