//! The trust check: who could have changed a plugin file before it is opened.
//!
//! Opening a library runs its code with all of this process's rights. If another user can
//! write the file, or the directory that holds it (and so replace the file), that user can
//! run code as this process. The check looks at owners and modes before `dlopen`, so a
//! refused plugin runs no code at all.

#[cfg(unix)]
use std::fmt;
#[cfg(unix)]
use std::path::Path;

use crate::error::Error;
use crate::pipeline::Candidate;

/// Which plugin files a host agrees to open.
///
/// # Example
///
/// ```no_run
/// use dylease::{PluginHost, TrustPolicy};
///
/// // The default on Unix: refuse files that other users could have changed.
/// let strict = PluginHost::builder().dir("/opt/app/plugins").build()?;
/// assert_eq!(strict.trust(), TrustPolicy::Strict);
///
/// // A build tree shared by a group of developers: open what is there.
/// let permissive = PluginHost::builder()
///     .dir("/srv/shared-build/plugins")
///     .trust(TrustPolicy::Permissive)
///     .build()?;
/// # Ok::<(), dylease::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TrustPolicy {
    /// Refuses, with [`Error::Untrusted`] and before opening it, a plugin file that another
    /// user could have changed: one whose file, or whose containing directory, is writable by
    /// group or others, or is owned by a user other than this process's effective user or
    /// root. Symlinks are resolved and their target is checked, together with the directory
    /// that holds the target and the directory the link was found in.
    ///
    /// Not checked: directories further up (a writable parent can rename the whole
    /// directory), access control lists, and the libraries a plugin depends on. On platforms
    /// other than Unix there are no owners and modes to check, and nothing is refused.
    Strict,
    /// Opens every plugin file the sources name, whoever could have written it.
    Permissive,
}

impl Default for TrustPolicy {
    /// [`TrustPolicy::Strict`] on Unix; [`TrustPolicy::Permissive`] elsewhere, where
    /// `Strict` would check nothing.
    fn default() -> Self {
        if cfg!(unix) {
            TrustPolicy::Strict
        } else {
            TrustPolicy::Permissive
        }
    }
}

/// Checks `candidate` under `policy`, before anything opens it.
pub(crate) fn check(policy: TrustPolicy, candidate: &Candidate) -> Result<(), Error> {
    match policy {
        TrustPolicy::Permissive => Ok(()),
        TrustPolicy::Strict => strict(candidate).map_err(|reason| Error::Untrusted {
            path: candidate.path.clone(),
            reason,
        }),
    }
}

#[cfg(unix)]
fn strict(candidate: &Candidate) -> Result<(), String> {
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    inspect(&candidate.resolved, Kind::Library, euid)?;
    let holder = candidate.resolved.parent();
    if let Some(dir) = holder {
        inspect(dir, Kind::Directory, euid)?;
    }
    // Reached through a symlink elsewhere: whoever can write the link's directory can point
    // the link at other code.
    let found_in = candidate.path.parent().and_then(|dir| dir.canonicalize().ok());
    if let Some(dir) = found_in.as_deref()
        && Some(dir) != holder
    {
        inspect(dir, Kind::LinkDirectory, euid)?;
    }
    Ok(())
}

#[cfg(not(unix))]
fn strict(_: &Candidate) -> Result<(), String> {
    Ok(())
}

/// What a checked path is to the plugin, for the message.
#[cfg(unix)]
#[derive(Clone, Copy)]
enum Kind {
    Library,
    Directory,
    LinkDirectory,
}

#[cfg(unix)]
impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Library => "the library file",
            Kind::Directory => "its directory",
            Kind::LinkDirectory => "the directory of the symlink to it",
        })
    }
}

/// Checks the owner and mode of one file or directory.
#[cfg(unix)]
fn inspect(path: &Path, kind: Kind, euid: u32) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;

    let metadata = std::fs::metadata(path)
        .map_err(|e| format!("cannot read the owner and mode of {kind} `{}`: {e}", path.display()))?;
    let (owner, mode) = (metadata.uid(), metadata.mode() & 0o7777);
    const OPT_OUT: &str = "or, if every user who can write there is trusted, build the host with \
                           `TrustPolicy::Permissive`";
    if owner != euid && owner != 0 {
        return Err(format!(
            "{kind} `{path}` is owned by uid {owner}, which is neither this process's effective user \
             (uid {euid}) nor root, so that user can change the code this process would run; \
             fix: `chown {euid} {path}`, {OPT_OUT}",
            path = path.display(),
        ));
    }
    let writers = match (mode & 0o020 != 0, mode & 0o002 != 0) {
        (false, false) => return Ok(()),
        (true, false) => "group",
        (false, true) => "others",
        (true, true) => "group and others",
    };
    Err(format!(
        "{kind} `{path}` is writable by {writers} (mode {mode:04o}), so other users can change the \
         code this process would run; fix: `chmod go-w {path}`, {OPT_OUT}",
        path = path.display(),
    ))
}
