//! The builder's Python sources.
// `unsafe` here: the builder methods are `unsafe fn`s (the caller vouches for the code).
#![allow(unsafe_code)]

use std::ffi::OsString;
use std::path::PathBuf;

use crate::host::HostBuilder;
use crate::load::Source;
use crate::load::python::source::PySource;

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
        self.python_source(PySource::Dir(dir.into()))
    }

    /// One Python plugin: a `.py` file, or a package directory (with an `__init__.py`).
    ///
    /// # Safety
    ///
    /// As for [`python_dir`](HostBuilder::python_dir): the caller vouches that running the
    /// plugin's code, with all of this process's rights, is sound.
    pub unsafe fn python_file(self, file: impl Into<PathBuf>) -> Self {
        self.python_source(PySource::File(file.into()))
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
        self.python_source(PySource::Env(var.into()))
    }

    fn python_source(self, source: PySource) -> Self {
        self.source(Source::Python(source))
    }
}
