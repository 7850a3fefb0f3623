//! The public `unsafe fn`s of the host, in one place: the builder methods that name native
//! code ([`HostBuilder::dir`], [`HostBuilder::file`], [`HostBuilder::env`]), with the
//! `python` feature those that name Python code, and [`init_global`]. Each only records a
//! source (or installs a host); its `unsafe` is the caller's word for the code the source
//! names, which the loading side relies on when it runs that code.
// `unsafe` here: these functions are `unsafe fn`s (the caller vouches for the code).
#![allow(unsafe_code)]

use std::ffi::OsString;
use std::path::PathBuf;

use crate::error::Error;
use crate::host::builder::HostBuilder;
use crate::load::Source;
#[cfg(feature = "python")]
use crate::load::python::discover::PySource;

impl HostBuilder {
    /// Every plugin library directly in `dir` (not in subdirectories): regular files with the
    /// platform's library suffix (`.so` on Linux), in byte order of file name. Symlinks are
    /// followed; a file reached twice loads once.
    ///
    /// The directory is read at each load. A missing directory, or a path that is not a
    /// directory, makes the load fail with an error naming it.
    ///
    /// # Safety
    ///
    /// Loading a library runs its initialisation routines (constructors), and the host then
    /// calls its entry point, `on_load`, `register_passes` and later `on_unload` and its
    /// termination routines, from whichever thread acquires or drops the last lease. The
    /// caller vouches that running that code is sound, as for calling any unknown foreign
    /// function (the same contract as `libloading::Library::new`): the libraries this source
    /// names are plugins built for this host's ABI, whose code upholds Rust's rules for
    /// whatever they touch, and whose passes have the signatures the host later asks for.
    /// [`TrustPolicy::Strict`](crate::TrustPolicy::Strict) (the default) checks who could have *changed* the files; it
    /// cannot check what the code does.
    ///
    /// # Example
    ///
    /// ```no_run
    /// // SAFETY: /opt/app/plugins holds this application's own plugins.
    /// let host = unsafe { dylease::PluginHost::builder().dir("/opt/app/plugins") }.build()?;
    /// # Ok::<(), dylease::Error>(())
    /// ```
    pub unsafe fn dir(self, dir: impl Into<PathBuf>) -> Self {
        self.source(Source::Dir(dir.into()))
    }

    /// One plugin library.
    ///
    /// # Safety
    ///
    /// As for [`dir`](HostBuilder::dir): the caller vouches for the code of the library
    /// `file` names.
    pub unsafe fn file(self, file: impl Into<PathBuf>) -> Self {
        self.source(Source::File(file.into()))
    }

    /// The directories listed in the environment variable `var`, separated by the
    /// platform's path-list separator (`:` on Unix), read at each load. An unset variable
    /// lists none; a relative directory is refused.
    ///
    /// # Safety
    ///
    /// As for [`dir`](HostBuilder::dir): the caller vouches for the code of the libraries in
    /// every directory whoever sets the variable lists.
    pub unsafe fn env(self, var: impl Into<OsString>) -> Self {
        self.source(Source::Env(var.into()))
    }
}

/// The Python sources (the `python` feature).
#[cfg(feature = "python")]
impl HostBuilder {
    /// Every Python plugin directly in `dir`: each `*.py` file and each package (a
    /// subdirectory with an `__init__.py`), not names starting with `_` or `.`, in byte order
    /// of file name. Python plugins load after the host's native and static plugins. The
    /// directory is read at each load.
    ///
    /// # Safety
    ///
    /// Importing a Python plugin runs its code with all of this process's rights, and the
    /// host then calls its `on_load`, `register_passes`, passes and later `on_unload`, from
    /// whichever thread acquires, calls, or drops the last lease. The caller vouches that
    /// running that code is sound, as for calling any unknown foreign function (the same
    /// contract as `libloading::Library::new`): the files this source names are plugins
    /// written for this host, whose code (and the C extensions it imports) upholds Rust's
    /// rules for whatever it touches. [`TrustPolicy::Strict`](crate::TrustPolicy::Strict) (the
    /// default) checks who could have *changed* the files; it cannot check what the code does.
    ///
    /// # Example
    ///
    /// ```no_run
    /// // SAFETY: /opt/app/py-passes holds this application's own Python plugins.
    /// let host = unsafe { dylease::PluginHost::builder().python_dir("/opt/app/py-passes") }.build()?;
    /// # Ok::<(), dylease::Error>(())
    /// ```
    pub unsafe fn python_dir(self, dir: impl Into<PathBuf>) -> Self {
        self.source(Source::Python(PySource::Dir(dir.into())))
    }

    /// One Python plugin: a `.py` file, or a package directory (with an `__init__.py`).
    ///
    /// # Safety
    ///
    /// As for [`python_dir`](HostBuilder::python_dir): the caller vouches that running the
    /// plugin's code, with all of this process's rights, is sound.
    pub unsafe fn python_file(self, file: impl Into<PathBuf>) -> Self {
        self.source(Source::Python(PySource::File(file.into())))
    }

    /// The `.py` files, packages and directories listed in the environment variable `var`,
    /// separated by the platform's path-list separator (`:` on Unix), read at each load: a
    /// directory that is not a package is read as by [`python_dir`](HostBuilder::python_dir).
    /// An unset variable lists none; a relative path is refused.
    ///
    /// # Safety
    ///
    /// As for [`python_dir`](HostBuilder::python_dir), for every plugin whoever sets the
    /// variable lists.
    pub unsafe fn python_env(self, var: impl Into<OsString>) -> Self {
        self.source(Source::Python(PySource::Env(var.into())))
    }
}

/// Configures the process-wide host that [`global`](crate::global) returns, once, before its
/// first use: its sources and policies (say,
/// [`LoadPolicy::SkipFailed`](crate::LoadPolicy::SkipFailed), so that one missing directory
/// in a path variable does not fail every load), like `log::set_logger`.
///
/// # Safety
///
/// As for [`HostBuilder::dir`], [`HostBuilder::file`] and [`HostBuilder::env`]: the caller
/// vouches for the native code the configured sources name.
///
/// # Errors
///
/// [`Error::Config`] if the global host was already configured or used, or if the
/// configuration is invalid (see [`HostBuilder::build`]).
///
/// # Example
///
/// ```no_run
/// use dylease::{LoadPolicy, PluginHost};
///
/// fn main() -> Result<(), dylease::Error> {
///     // SAFETY: the directories in MYAPP_PLUGIN_PATH hold this application's own plugins.
///     unsafe {
///         dylease::init_global(
///             PluginHost::builder().env("MYAPP_PLUGIN_PATH").policy(LoadPolicy::SkipFailed),
///         )
///     }?;
///     let lease = dylease::global().acquire()?;
///     # drop(lease);
///     Ok(())
/// }
/// ```
pub unsafe fn init_global(builder: HostBuilder) -> Result<(), Error> {
    crate::host::global::install(builder)
}
