//! A plugin file found by discovery, and what identifies it: the value the trust check, the
//! pipeline and the registry pass between them.

use std::path::PathBuf;

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
}

pub(crate) use crate::load::sys::{FileId, Identity};
