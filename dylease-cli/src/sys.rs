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

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd as _, BorrowedFd};
use std::path::Path;
use std::process::Command;

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

/// `builder` with the Python plugin `path` (`HostBuilder::python_file`).
#[cfg(feature = "python")]
pub(crate) fn add_python_file(builder: HostBuilder, path: &Path) -> HostBuilder {
    // SAFETY: as for `add_file`: the user named this plugin.
    unsafe { builder.python_file(path) }
}

/// Without the `python` feature, `builder` unchanged.
#[cfg(not(feature = "python"))]
pub(crate) fn add_python_file(builder: HostBuilder, _: &Path) -> HostBuilder {
    builder
}

/// `builder` with the Python plugins of `dir` (`HostBuilder::python_dir`).
#[cfg(feature = "python")]
pub(crate) fn add_python_dir(builder: HostBuilder, dir: &Path) -> HostBuilder {
    // SAFETY: as for `add_file`: the user named this directory's plugins.
    unsafe { builder.python_dir(dir) }
}

/// Without the `python` feature, `builder` unchanged.
#[cfg(not(feature = "python"))]
pub(crate) fn add_python_dir(builder: HostBuilder, _: &Path) -> HostBuilder {
    builder
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

/// The width in columns of the terminal `fd` is, when it is one that knows its size.
pub(crate) fn terminal_columns(fd: BorrowedFd<'_>) -> Option<usize> {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `winsize` through the pointer, which points at `size`;
    // `fd` is open for the call's duration.
    let done = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TIOCGWINSZ, &raw mut size) };
    (done == 0 && size.ws_col > 0).then_some(usize::from(size.ws_col))
}

/// `path` for a system call: its bytes, NUL-terminated.
#[cfg(target_os = "linux")]
fn c_path(path: &Path) -> io::Result<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt as _;
    std::ffi::CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "a path holds a NUL byte, which no file name can",
        )
    })
}

/// Gives the file `file` is open on (made with `O_TMPFILE`, so it has no name yet) the
/// name `to`: `linkat` of `/proc/self/fd/N` with `AT_SYMLINK_FOLLOW`, which needs no
/// privilege (unlike `AT_EMPTY_PATH`). Fails with `AlreadyExists` when `to` exists, whatever
/// it is (a symbolic link there is not followed).
#[cfg(target_os = "linux")]
pub(crate) fn link_open_file(file: &File, to: &Path) -> io::Result<()> {
    let from = std::ffi::CString::new(format!("/proc/self/fd/{}", file.as_raw_fd())).expect("no NUL in a number");
    let to = c_path(to)?;
    // SAFETY: both are NUL-terminated strings that outlive the call, which only reads them.
    let done = unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    };
    if done == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// No `O_TMPFILE` file to name here.
#[cfg(not(target_os = "linux"))]
pub(crate) fn link_open_file(_: &File, _: &Path) -> io::Result<()> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "naming an unnamed file needs Linux",
    ))
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

/// Whether a process `pid` exists (`kill(pid, 0)`: it does unless that fails with `ESRCH`;
/// one of another user, which this user may not signal, exists). A zombie exists until it is
/// reaped.
pub(crate) fn process_exists(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    if pid <= 0 {
        // 0 and negative numbers name process groups, not a process.
        return false;
    }
    // SAFETY: signal 0 delivers nothing: the call only checks that the process exists.
    let done = unsafe { libc::kill(pid, 0) };
    done == 0 || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// The effective user id of this process.
pub(crate) fn effective_uid() -> u32 {
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Makes the process `command` starts end (SIGKILL) when this process does, also when this
/// process ends before the child arranged it (then the child ends at once, before `exec`):
/// `PR_SET_PDEATHSIG`.
#[cfg(target_os = "linux")]
pub(crate) fn end_with_parent(command: &mut Command) {
    use std::os::unix::process::CommandExt as _;
    let parent = std::process::id();
    let end_if_orphaned = move || {
        // SAFETY: `prctl(PR_SET_PDEATHSIG)` only sets an attribute of the calling process; it
        // is async-signal-safe, as code between `fork` and `exec` must be.
        if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // The parent may have ended between the `fork` and the `prctl`, too early for the
        // signal: then the child has been handed to another process already.
        // SAFETY: `getppid` has no preconditions and is async-signal-safe.
        let now = unsafe { libc::getppid() };
        if u32::try_from(now).ok() != Some(parent) {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
        Ok(())
    };
    // SAFETY: the closure makes only async-signal-safe system calls and allocates nothing
    // (an `io::Error` of an OS error code holds no allocation).
    unsafe { command.pre_exec(end_if_orphaned) };
}

/// Elsewhere than Linux, no parent-death signal: a check outlives a killed installer.
#[cfg(not(target_os = "linux"))]
pub(crate) fn end_with_parent(_: &mut Command) {}
