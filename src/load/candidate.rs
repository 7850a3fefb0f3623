//! A plugin file found by discovery, and what identifies it: the value the trust check, the
//! pipeline and the registry pass between them.

use std::path::PathBuf;

/// A library file found by discovery, not yet opened.
#[derive(Debug)]
pub(crate) struct Candidate {
    /// The path as discovered (what errors and `PluginInfo::path` show).
    pub(crate) path: PathBuf,
    /// The path with symlinks resolved (what is opened).
    pub(crate) resolved: PathBuf,
    /// What makes it the same file as another ((dev, ino) on Unix).
    pub(crate) identity: Identity,
    /// The file the trust check passed at `resolved`, if it ran: what is opened must be it.
    pub(crate) checked: Option<FileId>,
}

/// The file a trust check passed: its device and inode, which the file opened later must
/// have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(not(unix), allow(dead_code))]
pub(crate) struct FileId {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
}

/// What makes two paths the same library to the platform loader: on Unix the device and
/// inode (glibc matches an already-loaded object by them, so a hard link is the same
/// library), elsewhere the path. `metadata` is the file's, with symlinks followed.
#[cfg(unix)]
pub(crate) type Identity = (u64, u64);
#[cfg(not(unix))]
pub(crate) type Identity = PathBuf;

/// The identity of the file `file` is open on (what was checked and will be copied), or
/// `discovered` where the platform has no (dev, ino) to ask.
#[cfg(unix)]
pub(crate) fn identity_of(file: &std::fs::File, discovered: &Identity) -> Identity {
    use std::os::unix::fs::MetadataExt;
    file.metadata().map_or(*discovered, |m| (m.dev(), m.ino()))
}

#[cfg(not(unix))]
pub(crate) fn identity_of(_file: &std::fs::File, discovered: &Identity) -> Identity {
    discovered.clone()
}
