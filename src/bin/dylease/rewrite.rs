//! The warning for a plugin file that may still be being written. A library rewritten in
//! place (`cp new.so plugins/lib.so`) while a host maps it kills the host with SIGBUS inside
//! the loader, and no check can prevent that: plugins must be installed by rename. The checker
//! warns when the file it is about to load changed moments ago and the user running it could
//! be the one still writing it.

use std::fs;
use std::path::Path;
use std::time::{Duration, SystemTime};

/// A file modified less than this long ago (or in the future) may still be being written.
pub(crate) const SETTLING: Duration = Duration::from_secs(10);

/// The warning for `path`, if it changed within [`SETTLING`] and this user can write it.
pub(crate) fn warning(path: &Path) -> Option<String> {
    let modified = fs::metadata(path).and_then(|m| m.modified()).ok()?;
    // A modification time in the future counts as just now.
    let age = SystemTime::now().duration_since(modified).unwrap_or(Duration::ZERO);
    if age >= SETTLING || !writable(path) {
        return None;
    }
    Some(format!(
        "`{}` changed {} s ago and this user can write it: a library rewritten in place (`cp` over \
         it) while a host loads it kills that host with SIGBUS; install plugins by rename \
         (`dylease install`, or `cp` to a temporary name in the same directory, then `mv`)",
        path.display(),
        age.as_secs()
    ))
}

/// Whether the effective user may write the file (as the kernel decides, ACLs included).
#[cfg(unix)]
fn writable(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt as _;
    let Ok(path) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `path` is a NUL-terminated string that outlives the call; `faccessat` only
    // reads it and touches no other memory of this process.
    unsafe { libc::faccessat(libc::AT_FDCWD, path.as_ptr(), libc::W_OK, libc::AT_EACCESS) == 0 }
}

/// Whether the file may be written: its read-only attribute.
#[cfg(not(unix))]
fn writable(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| !m.permissions().readonly())
}
