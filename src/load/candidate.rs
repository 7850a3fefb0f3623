//! A plugin file found by discovery, and what identifies it: the value the trust check, the
//! pipeline and the registry pass between them.

use std::path::PathBuf;

use crate::load::elf::Opened;

/// A library file found by discovery, not yet opened.
#[derive(Debug)]
pub(crate) struct Candidate {
    /// The path as discovered (what errors and `PluginInfo::origin` show).
    pub(crate) path: PathBuf,
    /// The path with symlinks resolved (what is opened).
    pub(crate) resolved: PathBuf,
    /// What makes it the same file as another ((dev, ino) on Unix).
    pub(crate) identity: Identity,
    /// The file the trust check passed at `resolved`, if it ran: what is opened must be it.
    pub(crate) checked: Option<FileId>,
    /// The file's status as discovery read it, where its directory entry is no symlink: the
    /// trust check judges the file by it instead of reading it again, once (the open then
    /// holds the file to this identity, as to any the check passed).
    pub(crate) discovered: Option<Status>,
    /// The checked file as the trust check opened it to read what it links against: the
    /// load uses this descriptor (and what was read of it) if the file is still at
    /// `resolved` then, instead of opening and reading it again.
    pub(crate) opened: Option<Box<Opened>>,
    /// The libraries the trust check resolved for the file it opened (`opened`), to map
    /// before it, dependencies first; `None` where none was resolved for the descriptor the
    /// load uses (the load resolves them then, under `Strict`).
    pub(crate) dependencies: Option<Vec<Dependency>>,
}

pub(crate) use crate::load::sys::{FileId, Identity};

/// A library a plugin needs, found in a run path, opened and checked by the trust check: the
/// load maps it by this descriptor before the plugin (`load::opener`). Its name in `found` is
/// the name it is needed by, which is its soname.
#[cfg(unix)]
#[derive(Debug)]
pub(crate) struct Dependency {
    /// Where it was found: the directory searched (symlinks in the name not followed), and
    /// the name in it. The loader is given `/proc/self/fd/D/<name>`, D that directory's
    /// descriptor, so `$ORIGIN` is that directory, as glibc's own search would make it.
    pub(crate) found: PathBuf,
    /// The checked file, opened once.
    pub(crate) file: std::fs::File,
    /// Its identity, as read from that descriptor.
    pub(crate) identity: FileId,
    /// Its loadable segments (for the owner checks of the loader layer).
    pub(crate) loads: Vec<std::ops::Range<u64>>,
}

/// No library is mapped by dylease for a plugin where there is no trust check.
#[cfg(not(unix))]
#[derive(Debug)]
pub(crate) enum Dependency {}

/// What the trust check looks at of a file: its kind, owner, mode and identity (Unix).
#[cfg(unix)]
pub(crate) use crate::load::sys::walk::Stat as Status;
/// Nothing, where there is no trust check.
#[cfg(not(unix))]
pub(crate) type Status = ();

/// What the trust check would look at of the file `metadata` describes; `None` where it has
/// nothing to look at.
#[cfg(unix)]
pub(crate) fn status(metadata: &std::fs::Metadata) -> Option<Status> {
    Some(Status::of_metadata(metadata))
}

#[cfg(not(unix))]
pub(crate) fn status(_: &std::fs::Metadata) -> Option<Status> {
    None
}
