//! The warning for a plugin file that is being written. A library rewritten in place (`cp
//! new.so plugins/lib.so`) while a host maps it kills the host with SIGBUS inside the loader,
//! and no check can prevent that: plugins must be installed by rename. The checker warns when
//! a process has the file it is about to load open for writing, as a copy in progress does.
//!
//! It does not warn about a file merely because it changed recently: a build that writes a
//! plugin and then checks it is the normal case, and a file installed by rename is complete
//! however new it is. Only processes whose `/proc/PID/fd` this user may read are seen (all of
//! them for root); elsewhere than Linux nothing is seen and nothing is said.

use std::fs;
use std::path::Path;

/// The warning for `path`, if a process has it open for writing.
pub(crate) fn warning(path: &Path) -> Option<String> {
    let (pid, command) = writer(path)?;
    Some(format!(
        "`{}` is open for writing by process {pid} ({command}): a library rewritten in place (`cp` over \
         it) while a host loads it kills that host with SIGBUS; install plugins by rename (`dylease \
         install`, or `cp` to a temporary name in the same directory, then `mv`)",
        crate::names::escape(path),
    ))
}

/// A process that has `path` open for writing: its id and command name.
#[cfg(target_os = "linux")]
fn writer(path: &Path) -> Option<(u32, String)> {
    use std::os::unix::fs::MetadataExt as _;
    let file = fs::metadata(path).ok()?;
    let wanted = (file.dev(), file.ino());
    for process in fs::read_dir("/proc").ok()?.filter_map(Result::ok) {
        let Some(pid) = process.file_name().to_str().and_then(|name| name.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = fs::read_dir(process.path().join("fd")) else {
            continue;
        };
        for fd in fds.filter_map(Result::ok) {
            // The magic link leads to the open file itself, whatever its path is now.
            let same = fs::metadata(fd.path()).is_ok_and(|open| (open.dev(), open.ino()) == wanted);
            if same && open_for_writing(&process.path().join("fdinfo").join(fd.file_name())) {
                let command = fs::read_to_string(process.path().join("comm")).unwrap_or_default();
                return Some((pid, command.trim_end().to_owned()));
            }
        }
    }
    None
}

/// Whether the descriptor `/proc/PID/fdinfo/N` describes was opened for writing: its `flags`
/// line (octal) has an access mode other than `O_RDONLY`.
#[cfg(target_os = "linux")]
fn open_for_writing(fdinfo: &Path) -> bool {
    let Ok(info) = fs::read_to_string(fdinfo) else {
        return false;
    };
    info.lines()
        .find_map(|line| line.strip_prefix("flags:"))
        .and_then(|flags| i32::from_str_radix(flags.trim(), 8).ok())
        .is_some_and(|flags| flags & libc::O_ACCMODE != libc::O_RDONLY)
}

#[cfg(not(target_os = "linux"))]
fn writer(_path: &Path) -> Option<(u32, String)> {
    None
}
