//! Sends what plugins print to standard error while `--json` checks run, so that standard
//! output holds the JSON document alone. Plugins print through C's stdio or straight to file
//! descriptor 1, so the descriptor itself is pointed at standard error, and C's buffers are
//! flushed before it is pointed back.

/// Points standard output back where it was when dropped.
#[derive(Debug)]
pub(crate) struct Redirect {
    #[cfg(unix)]
    saved: Option<std::ffi::c_int>,
}

#[cfg(unix)]
mod sys {
    use std::ffi::{c_int, c_void};

    // SAFETY: POSIX and ISO C declare these functions with exactly these signatures, and the
    // C library std links on every Unix defines them.
    unsafe extern "C" {
        pub(super) fn dup(fd: c_int) -> c_int;
        pub(super) fn dup2(from: c_int, to: c_int) -> c_int;
        pub(super) fn close(fd: c_int) -> c_int;
        /// With NULL, flushes every C output stream.
        pub(super) fn fflush(stream: *mut c_void) -> c_int;
    }
}

/// Flushes what plugins left in C's stdio buffers, so that it appears next to the check that
/// made them print rather than when the process exits.
pub(crate) fn flush_plugins() {
    // SAFETY: `fflush(NULL)` flushes the C library's own streams; it touches no Rust memory.
    #[cfg(unix)]
    unsafe {
        sys::fflush(std::ptr::null_mut())
    };
}

/// Flushes Rust's and C's buffered standard output into whatever descriptor 1 is now.
#[cfg(unix)]
fn flush_all() {
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    flush_plugins();
}

/// Until the returned guard is dropped, writes to standard output go to standard error. If
/// the descriptors cannot be duplicated, nothing changes.
pub(crate) fn to_stderr() -> Redirect {
    #[cfg(unix)]
    {
        flush_all();
        // SAFETY: `dup` only duplicates descriptor 1 (standard output), which this process
        // owns; the copy is closed by the guard's drop.
        let saved = unsafe { sys::dup(1) };
        if saved < 0 {
            return Redirect { saved: None };
        }
        // SAFETY: points descriptor 1 at standard error's open file description; descriptor
        // 1's previous file stays open through `saved`.
        if unsafe { sys::dup2(2, 1) } < 0 {
            // SAFETY: `saved` is the descriptor `dup` just returned, used nowhere else.
            unsafe { sys::close(saved) };
            return Redirect { saved: None };
        }
        Redirect { saved: Some(saved) }
    }
    #[cfg(not(unix))]
    Redirect {}
}

impl Drop for Redirect {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(saved) = self.saved.take() {
            // Whatever plugins left in the buffers belongs to standard error too.
            flush_all();
            // SAFETY: `saved` is the original standard output, duplicated by `to_stderr` and
            // still open; this points descriptor 1 back at it.
            unsafe { sys::dup2(saved, 1) };
            // SAFETY: descriptor 1 now refers to the same file; the copy is used nowhere else.
            unsafe { sys::close(saved) };
        }
    }
}
