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

impl FileId {
    /// The file's identity.
    #[cfg(unix)]
    pub(crate) fn identity(self) -> Identity {
        (self.dev, self.ino)
    }

    /// The file's identity, where the platform has no (dev, ino): never asked there.
    #[cfg(not(unix))]
    pub(crate) fn identity(self) -> Identity {
        PathBuf::new()
    }
}
