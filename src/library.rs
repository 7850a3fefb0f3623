//! The one place that calls the platform loader. Everything here is `unsafe` by nature:
//! opening a library runs its initialisation routines, closing it runs its termination
//! routines, and a symbol is only as well-typed as the plugin ABI says it is.

use std::path::{Path, PathBuf};

use crate::abi::{DYLEASE_ENTRY_SYMBOL, dylease_plugin_v1_fn};

/// An open shared library. Dropping it closes the library (`dlclose`).
#[derive(Debug)]
pub(crate) struct Library {
    inner: libloading::Library,
    /// The path it was opened with.
    path: PathBuf,
}

impl Library {
    /// Opens `path` with `RTLD_NOW | RTLD_LOCAL`: every undefined symbol is resolved now (a
    /// missing one fails here, not at a first call), and the library's symbols stay out of
    /// the global namespace so two plugins cannot clash.
    ///
    /// # Safety
    ///
    /// Opening a library runs its initialisation routines (and closing it later runs its
    /// termination routines). The caller vouches that running that code is sound, as for
    /// calling any unknown foreign function.
    pub(crate) unsafe fn open(path: &Path) -> Result<Library, String> {
        #[cfg(unix)]
        let opened = {
            use libloading::os::unix::{Library as Unix, RTLD_LOCAL, RTLD_NOW};
            // SAFETY: the caller vouches for the library's initialisation routines.
            unsafe { Unix::open(Some(path), RTLD_NOW | RTLD_LOCAL) }.map(libloading::Library::from)
        };
        #[cfg(not(unix))]
        // SAFETY: the caller vouches for the library's initialisation routines.
        let opened = unsafe { libloading::Library::new(path) };
        opened
            .map(|inner| Library {
                inner,
                path: path.to_owned(),
            })
            .map_err(|e| loader_message(&e))
    }

    /// Resolves the plugin entry point `dylease_plugin_v1`.
    ///
    /// The returned pointer is valid only while `self` is open; callers keep it next to the
    /// library and never past it.
    pub(crate) fn entry(&self) -> Result<dylease_plugin_v1_fn, String> {
        // SAFETY: the plugin ABI defines `dylease_plugin_v1` as a function of type
        // `dylease_plugin_v1_fn`; a library that exports the name with another type breaks
        // the ABI it claims to implement, which is the trust the host places in its plugins.
        let symbol = unsafe { self.inner.get::<dylease_plugin_v1_fn>(DYLEASE_ENTRY_SYMBOL.as_bytes()) };
        symbol.map(|s| *s).map_err(|e| loader_message(&e))
    }

    /// The path the library was opened with.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Closes the library, reporting the loader's complaint, if any. A successful close does
    /// not prove the library left the address space: see [`still_loaded`].
    pub(crate) fn close(self) -> Result<(), String> {
        self.inner.close().map_err(|e| loader_message(&e))
    }
}

/// Whether the library at `path` is still loaded in this process: after this host closed every
/// handle it had to it, `Some(true)` means the platform pinned it (`-z nodelete`,
/// `RTLD_NODELETE`, a thread-local destructor, or another user of the same file). `None`
/// where the platform cannot tell: only glibc is asked (musl never unloads at all).
///
/// The loader is asked with `dlopen(path, RTLD_NOLOAD)`, which loads nothing and returns a
/// handle only to a library that is loaded; such a handle is closed at once.
pub(crate) fn still_loaded(path: &Path) -> Option<bool> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use libloading::os::unix::{Library as Unix, RTLD_LAZY};
        // SAFETY: with RTLD_NOLOAD the loader never maps a library, so no initialisation
        // routine runs; it only adds a reference to a library that is already loaded. Closing
        // that reference at once leaves the library as it was, still referenced by whoever
        // pinned it. (Should another user of the same file close its last handle between the
        // two calls, the library's termination routines run here instead of there: code of a
        // plugin this host already loaded, so vouched for.)
        let handle = unsafe { Unix::open(Some(path), RTLD_LAZY | libc::RTLD_NOLOAD) };
        Some(handle.map(Unix::close).is_ok())
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = path;
        None
    }
}

/// The loader's own words, without libloading's wrapper text.
fn loader_message(error: &libloading::Error) -> String {
    use std::error::Error as _;
    match error.source() {
        Some(source) => source.to_string(),
        None => error.to_string(),
    }
}
