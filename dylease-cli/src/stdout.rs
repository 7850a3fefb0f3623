//! Sends what plugins print to standard error while `--json` checks run, so that standard
//! output holds the JSON document alone. Plugins print through C's stdio or straight to file
//! descriptor 1, so the descriptor itself is pointed at standard error, and C's buffers are
//! flushed before it is pointed back.

use std::io::{self, Write as _};
use std::os::fd::{AsFd as _, OwnedFd};

use crate::sys;

/// Points standard output back where it was when dropped.
#[derive(Debug)]
pub(crate) struct Redirect {
    /// A duplicate of the original standard output, closed on drop.
    saved: Option<OwnedFd>,
}

/// Flushes what plugins left in C's stdio buffers, so that it appears next to the check that
/// made them print rather than when the process exits.
pub(crate) fn flush_plugins() {
    sys::flush_c_streams();
}

/// Flushes Rust's and C's buffered standard output into whatever descriptor 1 is now.
fn flush_all() {
    let _ = io::stdout().flush();
    flush_plugins();
}

/// Until the returned guard is dropped, writes to standard output go to standard error. If
/// the descriptors cannot be duplicated, nothing changes.
pub(crate) fn to_stderr() -> Redirect {
    flush_all();
    let Ok(saved) = io::stdout().as_fd().try_clone_to_owned() else {
        return Redirect { saved: None };
    };
    // Descriptor 1's previous file stays open through `saved`; on failure `saved` is closed.
    match sys::point_stdout_at(io::stderr().as_fd()) {
        Ok(()) => Redirect { saved: Some(saved) },
        Err(_) => Redirect { saved: None },
    }
}

impl Drop for Redirect {
    fn drop(&mut self) {
        if let Some(saved) = self.saved.take() {
            // Whatever plugins left in the buffers belongs to standard error too.
            flush_all();
            let _ = sys::point_stdout_at(saved.as_fd());
        }
    }
}
