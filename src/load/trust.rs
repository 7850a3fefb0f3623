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
use crate::load::pipeline::Candidate;

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

/// The trust checks of one load: directories are looked at once per load, however many
/// plugin files they hold.
#[derive(Debug, Default)]
pub(crate) struct Checks {
    /// This process's effective user, asked once.
    #[cfg(unix)]
    euid: Option<u32>,
    /// The verdict for each directory checked so far, by role (a [`Kind`]) and resolved path.
    #[cfg(unix)]
    directories: [std::collections::HashMap<std::path::PathBuf, Result<(), String>>; 3],
    /// The resolved form of each directory a plugin file was found in.
    #[cfg(unix)]
    resolved: std::collections::HashMap<std::path::PathBuf, Option<std::path::PathBuf>>,
}

impl Checks {
    /// Checks `candidate` under `policy`, before anything opens it.
    pub(crate) fn check(&mut self, policy: TrustPolicy, candidate: &Candidate) -> Result<(), Error> {
        match policy {
            TrustPolicy::Permissive => Ok(()),
            TrustPolicy::Strict => self.strict(candidate).map_err(|reason| Error::Untrusted {
                path: candidate.path.clone(),
                reason,
            }),
        }
    }

    #[cfg(unix)]
    fn strict(&mut self, candidate: &Candidate) -> Result<(), String> {
        // SAFETY: `geteuid` has no preconditions and cannot fail.
        let euid = *self.euid.get_or_insert_with(|| unsafe { libc::geteuid() });
        inspect(&candidate.resolved, Kind::Library, euid)?;
        let holder = candidate.resolved.parent();
        if let Some(dir) = holder {
            self.directory(dir, Kind::Directory, euid)?;
        }
        // Reached through a symlink elsewhere: whoever can write the link's directory can
        // point the link at other code.
        let found_in = candidate.path.parent().and_then(|dir| match self.resolved.get(dir) {
            Some(resolved) => resolved.clone(),
            None => {
                let resolved = dir.canonicalize().ok();
                self.resolved.insert(dir.to_owned(), resolved.clone());
                resolved
            }
        });
        if let Some(dir) = found_in.as_deref()
            && Some(dir) != holder
        {
            self.directory(dir, Kind::LinkDirectory, euid)?;
        }
        Ok(())
    }

    #[cfg(unix)]
    fn directory(&mut self, dir: &Path, kind: Kind, euid: u32) -> Result<(), String> {
        let verdicts = &mut self.directories[kind as usize];
        if let Some(verdict) = verdicts.get(dir) {
            return verdict.clone();
        }
        let verdict = inspect(dir, kind, euid);
        verdicts.insert(dir.to_owned(), verdict.clone());
        verdict
    }

    #[cfg(not(unix))]
    fn strict(&mut self, _: &Candidate) -> Result<(), String> {
        Ok(())
    }
}

/// What a checked path is to the plugin, for the message.
#[cfg(unix)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
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
