//! Whether the dynamic loader still has a library: shared by the integration tests and the
//! load benches (`#[path]`), which both prove that an unload really unmapped.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Whether the dynamic loader still has `path` loaded: `dlopen(path, RTLD_NOLOAD)` returns a
/// handle only for a loaded object (the handle is closed again). A zero from `dlclose`
/// proves nothing; this does.
pub(crate) fn loader_has(path: &Path) -> bool {
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).expect("no NUL in the path");
    // SAFETY: RTLD_NOLOAD never loads anything, so no library code runs.
    let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY) };
    if handle.is_null() {
        false
    } else {
        // SAFETY: closing the handle just returned undoes the reference count it added.
        unsafe { libc::dlclose(handle) };
        true
    }
}
