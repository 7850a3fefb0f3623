//! [`TrustPolicy`]: which plugin files a host agrees to open.

/// Which plugin files a host agrees to open.
///
/// # Example
///
/// ```no_run
/// use dylease::{PluginHost, TrustPolicy};
///
/// // The default on Unix: refuse files that other users could have changed.
/// // SAFETY: /opt/app/plugins holds this application's own plugins.
/// let strict = unsafe { PluginHost::builder().dir("/opt/app/plugins") }.build()?;
/// assert_eq!(strict.trust(), TrustPolicy::Strict);
///
/// // A build tree shared by a group of developers: open what is there.
/// // SAFETY: the group's plugins are trusted to be sound.
/// let permissive = unsafe { PluginHost::builder().dir("/srv/shared-build/plugins") }
///     .trust(TrustPolicy::Permissive)
///     .build()?;
/// # Ok::<(), dylease::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TrustPolicy {
    /// Refuses, with [`Error::Untrusted`](crate::Error::Untrusted) and before opening it, a plugin file that another
    /// user could have chosen. The path is resolved one component at a time (a relative
    /// path, even a bare file name, from the current directory), and every directory
    /// traversed counts — each ancestor up to `/` of the directory the file or a symlink is
    /// found in, and of each symlink's target — as does every symlink and the file itself.
    /// Each must be owned by this process's effective user or root; the file and the
    /// directories must not be writable by group or others, except a directory with the
    /// sticky bit (like `/tmp`), where others cannot rename what they do not own. The file is
    /// then opened once and its device and inode compared with the file checked, so a file
    /// renamed into place after the check (by a plugin loaded before it, say) is refused too.
    ///
    /// What the file pulls in counts too: every directory of its run path (DT_RUNPATH or
    /// DT_RPATH, with `$ORIGIN`, `$LIB` and `$PLATFORM` expanded to every value the loader
    /// may give them) passes the same checks, and one that does not exist passes only when
    /// no other user could create it (its nearest existing ancestor is not writable by group
    /// or others, sticky or not: `/tmp/build/lib` is refused). A needed library (DT_NEEDED)
    /// named by a path, or found in one of those directories or the subdirectories the loader
    /// tries below them, is checked like the plugin file, and so is what it pulls in.
    ///
    /// Not checked: access control lists; `LD_LIBRARY_PATH`, `LD_PRELOAD`, the loader's cache
    /// and the system's default directories, which are the process owner's choice; and what
    /// the effective user or root change between the check and `dlopen`. On platforms other
    /// than Unix there are no owners and modes to check, and nothing is refused.
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
