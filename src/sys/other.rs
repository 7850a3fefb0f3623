//! Every platform but Linux: the loader is given the file's absolute path, and a mapping cannot be
//! looked for. dylease is built and type-checked there, not tested: a library loads through
//! the platform loader, without the identity guarantee of Linux's `/proc/self/fd`. Safe code:
//! the calls it needs (opening a library, `geteuid`) are `sys::raw`'s.

use std::io;
use std::path::PathBuf;

use crate::sys::id::FileId;

#[derive(Debug, Default)]
pub(crate) struct Names;

/// The name to give the loader for the checked `file`, found at `resolved` (absolute);
/// `origin`: whether its run paths or needed names use `$ORIGIN`.
pub(crate) fn name(
    _file: &std::fs::File,
    _checked: &Identity,
    resolved: &std::path::Path,
    _origin: bool,
    _follow: bool,
    _strict: bool,
) -> io::Result<(PathBuf, Names)> {
    Ok((resolved.to_owned(), Names))
}

/// Only glibc matches needed names by soname: elsewhere dylease cannot map a plugin's
/// dependencies for the loader, and a strict host refuses a plugin that has some in a run
/// path.
pub(crate) const MATCHES_SONAME: bool = false;

/// Which loaded object answers a needed name cannot be asked here.
pub(crate) fn answering(_: &std::ffi::OsStr) -> Option<Result<FileId, std::ffi::CString>> {
    None
}

/// Nothing to record: the loader's handle is not read here.
pub(crate) fn opened(_: &mut Names, _: Option<crate::sys::raw::LinkHead>) {}

/// Where the loader mapped the library is not known here.
pub(crate) fn lies_in(_: &Names, _: &[std::ops::Range<u64>], _: usize) -> Option<bool> {
    None
}

/// The loader was given the path: it cannot be compared.
pub(crate) fn maps_checked_file(_: &Names) -> std::io::Result<Option<bool>> {
    Ok(None)
}

/// The loader's list cannot be asked here.
pub(crate) fn still_mapped(_: &Names) -> Option<bool> {
    None
}

/// No descriptor was given to the loader.
pub(crate) fn release(_: Names, _: Option<bool>) {}

pub(crate) fn descriptor_hint(_: &io::Error) -> &'static str {
    ""
}

/// `EMFILE`, the error of a process out of file descriptors.
#[cfg(unix)]
pub(crate) const EMFILE: i32 = libc::EMFILE;
/// `EMFILE`, the error of a process out of file descriptors (the C runtime's value).
#[cfg(not(unix))]
pub(crate) const EMFILE: i32 = 24;

#[cfg(unix)]
pub(crate) use crate::sys::raw::effective_uid;

/// Whether this process runs with elevated rights given by its executable: not known here.
pub(crate) fn secure_execution() -> bool {
    false
}

/// What makes two paths the same library to the platform loader: on Unix the device and
/// inode, elsewhere the path.
#[cfg(unix)]
pub(crate) type Identity = FileId;
/// What makes two paths the same library to the platform loader: on Unix the device and
/// inode, elsewhere the path.
#[cfg(not(unix))]
pub(crate) type Identity = PathBuf;

/// The file `metadata` describes.
#[cfg(unix)]
pub(crate) fn file_id(metadata: &std::fs::Metadata) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    Some(FileId {
        dev: metadata.dev(),
        ino: metadata.ino(),
    })
}

/// The file `metadata` describes: not known here.
#[cfg(not(unix))]
pub(crate) fn file_id(_: &std::fs::Metadata) -> Option<FileId> {
    None
}

/// The identity of the file at `path`, whose `metadata` (symlinks followed) is given.
#[cfg(unix)]
pub(crate) fn identity(_path: &std::path::Path, metadata: &std::fs::Metadata) -> Identity {
    use std::os::unix::fs::MetadataExt;
    FileId {
        dev: metadata.dev(),
        ino: metadata.ino(),
    }
}

/// The identity of the file at `path`: its canonical path.
#[cfg(not(unix))]
pub(crate) fn identity(path: &std::path::Path, _metadata: &std::fs::Metadata) -> Identity {
    std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned())
}

/// The identity of a file the trust check passed.
#[cfg(unix)]
pub(crate) fn checked_identity(id: FileId) -> Identity {
    id
}

/// The identity of a file the trust check passed: never asked where it has no (dev, ino).
#[cfg(not(unix))]
pub(crate) fn checked_identity(_: FileId) -> Identity {
    PathBuf::new()
}

/// Whether opening a checked path failed because the file was replaced: removed (an
/// installer that unlinks first) or turned into a symlink or something else.
#[cfg(unix)]
pub(crate) fn is_replacement(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::ENOENT | libc::ELOOP | libc::ENXIO | libc::EISDIR)
    )
}

/// Whether opening a checked path failed because the file was replaced: not known here.
#[cfg(not(unix))]
pub(crate) fn is_replacement(_: &io::Error) -> bool {
    false
}

/// Opens without following a symlink in the last component, and without blocking on a FIFO.
#[cfg(unix)]
pub(crate) fn no_follow(options: &mut std::fs::OpenOptions) {
    use std::os::unix::fs::OpenOptionsExt;
    options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
}

/// Opens as the platform does by default.
#[cfg(not(unix))]
pub(crate) fn no_follow(_: &mut std::fs::OpenOptions) {}

/// No lease is taken here: nothing holds a file's bytes still between a digest and the
/// platform loader's open of its path (signed plugins are refused, `provenance`).
pub(crate) fn take_read_lease(_: &std::fs::File) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "this platform has no file leases",
    ))
}

/// Nothing to release where no lease is taken.
pub(crate) fn release_lease(_: &std::fs::File) -> io::Result<()> {
    Ok(())
}

/// No lease is refused for a writer here: none is taken.
pub(crate) fn open_for_writing(_: &io::Error) -> bool {
    false
}

/// No lease is refused for its owner here: none is taken.
pub(crate) fn not_lease_owner(_: &io::Error) -> bool {
    false
}

/// No sealed copy here: the platform loader opens files by path.
pub(crate) fn sealed_copy(_: &std::fs::File, _: &str) -> io::Result<std::fs::File> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "this platform cannot map a sealed copy in memory",
    ))
}
