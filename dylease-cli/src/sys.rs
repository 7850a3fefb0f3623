//! Every `unsafe` operation of the `dylease` command, each behind a safe function: the system
//! calls std has no safe API for, and the host builder's loading calls. The rest of the crate
//! denies `unsafe` code (`main.rs`), so a reader finds all of it here.
//!
//! The loading calls (`HostBuilder::file`, `dir`, `python_file`, `python_dir`) are `unsafe`
//! because a host that loads a plugin runs its code, and only the caller can vouch for that
//! code. The command's caller does: `check` and `install` load exactly the plugins the user
//! named, which is what the commands are for (their help says that checking runs the
//! plugins' code), and `inspect` and `install`'s comparison only ask a host for its catalog,
//! which maps no library and runs no Python module.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd as _, BorrowedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use dylease::HostBuilder;

/// `builder` with the library file `path` (`HostBuilder::file`).
pub(crate) fn add_file(builder: HostBuilder, path: &Path) -> HostBuilder {
    // SAFETY: the user named this plugin to the command, to be loaded and checked or only
    // described (see the module's documentation).
    unsafe { builder.file(path) }
}

/// `builder` with the plugin libraries of `dir` (`HostBuilder::dir`).
pub(crate) fn add_dir(builder: HostBuilder, dir: &Path) -> HostBuilder {
    // SAFETY: as for `add_file`: the user named this directory's plugins.
    unsafe { builder.dir(dir) }
}

/// `builder` with the Python plugin `path` (`HostBuilder::python_file`); without the
/// `python` feature, `builder` unchanged.
pub(crate) fn add_python_file(builder: HostBuilder, path: &Path) -> HostBuilder {
    #[cfg(feature = "python")]
    {
        // SAFETY: as for `add_file`: the user named this plugin.
        unsafe { builder.python_file(path) }
    }
    #[cfg(not(feature = "python"))]
    {
        let _ = path;
        builder
    }
}

/// `builder` with the Python plugins of `dir` (`HostBuilder::python_dir`); without the
/// `python` feature, `builder` unchanged.
pub(crate) fn add_python_dir(builder: HostBuilder, dir: &Path) -> HostBuilder {
    #[cfg(feature = "python")]
    {
        // SAFETY: as for `add_file`: the user named this directory's plugins.
        unsafe { builder.python_dir(dir) }
    }
    #[cfg(not(feature = "python"))]
    {
        let _ = dir;
        builder
    }
}

/// Flushes every C stdio output stream (`fflush(NULL)`): what plugins printed through C's
/// buffered `stdout` is written now, to whatever descriptor 1 is.
pub(crate) fn flush_c_streams() {
    // SAFETY: `fflush(NULL)` flushes the C library's own streams; it touches no Rust memory.
    unsafe { libc::fflush(std::ptr::null_mut()) };
}

/// Makes descriptor 1 (standard output) a duplicate of `to` (`dup2`). Whatever descriptor 1
/// referred to is closed, unless another descriptor keeps it open.
pub(crate) fn point_stdout_at(to: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: `to` is an open descriptor for the call's duration; descriptor 1 belongs to
    // the process's standard output, which std's `Stdout` writes by number and never closes.
    if unsafe { libc::dup2(to.as_raw_fd(), libc::STDOUT_FILENO) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "a path holds a NUL byte, which no file name can",
        )
    })
}

/// Exchanges the directory entries `a` and `b` in one step: `renameat2` with
/// `RENAME_EXCHANGE`.
#[cfg(target_os = "linux")]
pub(crate) fn exchange(a: &Path, b: &Path) -> io::Result<()> {
    let (a, b) = (c_path(a)?, c_path(b)?);
    // SAFETY: both are NUL-terminated strings that outlive the call, which only reads them.
    let done = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            a.as_ptr(),
            libc::AT_FDCWD,
            b.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if done == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// No atomic exchange of two directories here: an installed package is not replaced.
#[cfg(not(target_os = "linux"))]
pub(crate) fn exchange(_: &Path, _: &Path) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "replacing an installed package needs `renameat2(RENAME_EXCHANGE)` (Linux)",
    ))
}
