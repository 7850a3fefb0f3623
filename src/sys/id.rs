//! The crate's one spelling of a file's identity on the platform, (dev, ino).

/// A file as the platform tells files apart: its device and inode. The crate's one spelling
/// of (dev, ino): what the trust check passed, what the registry finds an instance by (I9,
/// `docs::internals`), what makes two paths one plugin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(not(unix), allow(dead_code))]
pub(crate) struct FileId {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
}
