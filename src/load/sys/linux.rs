//! Linux: the platform loader (`dlopen`, `dladdr1`, `RTLD_NOLOAD`), the process's user and
//! rights (`geteuid`, `getauxval`), and file identities.
//!
//! The loader is told which file to map by a name under `/proc/self/fd` of the checked
//! descriptor; why, and the three traps that shape [`Names`], are in `docs::internals` ("The
//! identity guarantee").
// `unsafe` here: the calls into the platform loader and libc.
#![allow(unsafe_code)]

use std::ffi::{CStr, CString, c_void};
use std::io;
use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use super::FileId;

/// The descriptors behind the names one open gave the loader.
#[derive(Debug, Default)]
pub(crate) struct Names {
    fds: Vec<OwnedFd>,
    /// `/proc/self/fd/N` of the checked file: finds exactly its mapping.
    exact: CString,
    /// Whether the loader was given another name (the directory's), so that the mapping
    /// must be compared with the checked file.
    through_dir: bool,
}

/// The name to give the loader for the checked `file`, found at `resolved` (symlinks
/// resolved); `origin`: whether its run paths or needed names use `$ORIGIN`.
pub(crate) fn name(file: &std::fs::File, resolved: &std::path::Path, origin: bool) -> io::Result<(PathBuf, Names)> {
    let file = OwnedFd::from(file.try_clone()?);
    let exact = format!("/proc/self/fd/{}", file.as_raw_fd());
    let mut names = Names {
        exact: CString::new(exact.clone()).expect("a number holds no NUL"),
        fds: vec![file],
        through_dir: false,
    };
    let (Some(dir), Some(file_name), true) = (resolved.parent(), resolved.file_name(), origin) else {
        return Ok((PathBuf::from(exact), names));
    };
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
        .open(dir)?;
    let mut name = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
    name.push(file_name);
    names.fds.push(dir.into());
    names.through_dir = true;
    debug_assert!(!name.as_os_str().as_bytes().contains(&0));
    Ok((name, names))
}

/// Whether the mapping `handle` is of the checked file, where the loader was given
/// another name for it; `None` where it was given the checked descriptor itself.
pub(crate) fn maps_checked_file(names: &Names, handle: usize) -> Option<bool> {
    names.through_dir.then(|| loaded(&names.exact) == Some(handle))
}

/// Whether the mapping is still there after its last `dlclose`.
pub(crate) fn still_mapped(names: &Names, handle: usize) -> Option<bool> {
    if names.fds.is_empty() {
        return None;
    }
    Some(loaded(&names.exact) == Some(handle))
}

/// The handle of the loaded library `name` names, without loading anything: by the
/// loader's record of the name, or by the device and inode of the file it opens.
fn loaded(name: &CStr) -> Option<usize> {
    // SAFETY: `RTLD_NOLOAD` maps nothing and runs no initialisation routine: it returns a
    // library that is already loaded (one more reference) or NULL; `name` is
    // NUL-terminated.
    let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    if handle.is_null() {
        return None;
    }
    // SAFETY: `handle` came from the `dlopen` above, whose reference this gives back; the
    // library stays loaded by its other references, so no termination routine runs.
    unsafe { libc::dlclose(handle.cast::<c_void>()) };
    Some(handle as usize)
}

/// What a failure to get a descriptor means here, for the message.
pub(crate) fn descriptor_hint(error: &io::Error) -> &'static str {
    match error.raw_os_error() {
        Some(libc::EMFILE) => {
            " (EMFILE: this process has as many files open as `ulimit -n` allows; dylease keeps one \
             descriptor open per loaded library, so raise the limit)"
        }
        Some(libc::ENFILE) => " (ENFILE: the system's table of open files is full)",
        _ => "",
    }
}

/// Keeps the descriptors open for the life of the process: the loader may still match
/// their names to a mapping it keeps.
pub(crate) fn keep_for_ever(names: Names) {
    for fd in names.fds {
        let _kept_open = fd.into_raw_fd();
    }
}

/// `EMFILE`, the error of a process out of file descriptors.
pub(crate) const EMFILE: i32 = libc::EMFILE;

/// Opens the library the loader knows as `name` with `RTLD_NOW | RTLD_LOCAL`, and returns it
/// with the loader's handle of its mapping.
///
/// # Safety
///
/// Opening a library runs its initialisation routines (and closing it later runs its
/// termination routines): the caller vouches for that code.
pub(crate) unsafe fn open(name: &std::path::Path) -> Result<(libloading::Library, usize), libloading::Error> {
    use libloading::os::unix::{Library as Unix, RTLD_LOCAL, RTLD_NOW};
    // SAFETY: the caller vouches for the library's initialisation routines.
    unsafe { Unix::open(Some(name), RTLD_NOW | RTLD_LOCAL) }.map(|library| {
        let raw = library.into_raw();
        // SAFETY: `raw` was just returned by `into_raw` of an open library, and is taken back
        // exactly once.
        let library = unsafe { Unix::from_raw(raw) };
        (libloading::Library::from(library), raw as usize)
    })
}

/// The object `address` lies in: the loader's handle of it (its `link_map`, which is what
/// `dlopen` returns on glibc) and the loader's name of it; `None` where the loader cannot tell.
#[cfg(target_env = "gnu")]
pub(crate) fn object_of(address: *const c_void) -> Option<(usize, CString)> {
    /// glibc's `RTLD_DL_LINKMAP` (dlfcn.h), which the `libc` crate does not declare.
    const RTLD_DL_LINKMAP: libc::c_int = 2;
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    let mut link_map: *mut c_void = std::ptr::null_mut();
    // SAFETY: `dladdr1` only reads the loader's tables; `address` is a symbol the loader
    // resolved in an open library; both out-pointers are writable, and with RTLD_DL_LINKMAP
    // the extra one receives a `struct link_map *`.
    let found = unsafe { libc::dladdr1(address, info.as_mut_ptr(), &mut link_map, RTLD_DL_LINKMAP) };
    if found == 0 || link_map.is_null() {
        return None;
    }
    // SAFETY: `dladdr1` succeeded, so it filled `info` (zeroed before: a pointer is either set
    // or NULL).
    let name = unsafe { info.assume_init() }.dli_fname;
    // SAFETY: a non-NULL `dli_fname` is the loader's NUL-terminated name of the object, valid
    // while it is loaded; it is copied at once.
    let name = (!name.is_null()).then(|| unsafe { CStr::from_ptr(name) }.to_owned());
    Some((link_map as usize, name.unwrap_or_default()))
}

/// Without glibc's `dladdr1` the loader cannot say which object a symbol lies in.
#[cfg(not(target_env = "gnu"))]
pub(crate) fn object_of(_: *const c_void) -> Option<(usize, CString)> {
    None
}

/// This process's effective user.
pub(crate) fn effective_uid() -> u32 {
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Whether this process runs with elevated rights given by its executable (set-user-ID,
/// set-group-ID, file capabilities): the platform loader's `AT_SECURE`.
pub(crate) fn secure_execution() -> bool {
    // SAFETY: `getauxval` only reads the auxiliary vector the kernel gave the process.
    unsafe { libc::getauxval(libc::AT_SECURE) != 0 }
}

/// What makes two paths the same library to the platform loader: the device and inode
/// (glibc matches an already-loaded object by them, so a hard link is the same library).
pub(crate) type Identity = FileId;

/// The file `metadata` describes.
pub(crate) fn file_id(metadata: &std::fs::Metadata) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    Some(FileId {
        dev: metadata.dev(),
        ino: metadata.ino(),
    })
}

/// The identity of the file at `path`, whose `metadata` (symlinks followed) is given.
pub(crate) fn identity(_path: &std::path::Path, metadata: &std::fs::Metadata) -> Identity {
    use std::os::unix::fs::MetadataExt;
    FileId {
        dev: metadata.dev(),
        ino: metadata.ino(),
    }
}

/// The identity of a file the trust check passed.
pub(crate) fn checked_identity(id: FileId) -> Identity {
    id
}

/// Whether opening a checked path failed because the file was replaced: removed (an
/// installer that unlinks first) or turned into a symlink or something else.
pub(crate) fn is_replacement(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::ENOENT | libc::ELOOP | libc::ENXIO | libc::EISDIR)
    )
}

/// Opens without following a symlink in the last component, and without blocking on a FIFO.
pub(crate) fn no_follow(options: &mut std::fs::OpenOptions) {
    options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
}
