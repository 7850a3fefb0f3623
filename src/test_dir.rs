//! A directory of one unit test's own, removed when the test ends, passed or failed (a failed
//! assertion unwinds through its drop), so that no run, a mutation run's failing ones
//! included, leaves directories behind in the system's temporary directory.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

/// A new empty directory under the system's temporary directory, removed on drop.
#[derive(Debug)]
pub(crate) struct TestDir(PathBuf);

impl TestDir {
    /// A directory for the test `name`, unique to this process and call (a test that makes
    /// two gets two).
    pub(crate) fn new(name: &str) -> TestDir {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("dylease-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create `{}`: {e}", dir.display()));
        TestDir(dir)
    }
}

impl std::ops::Deref for TestDir {
    type Target = Path;

    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TestDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
