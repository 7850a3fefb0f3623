//! Python plugins in checks (the `python` feature, and `check --python`): a `.py` file or a
//! package argument is checked in a host of its own with `HostBuilder::python_file`, and a
//! directory's Python plugins are checked one by one and with its libraries, as
//! `HostBuilder::python_dir` loads them (`sys::add_python_file`, `sys::add_python_dir`).
//! Without the feature, nothing is loaded as a Python plugin.

use std::path::{Path, PathBuf};

/// Whether `path` is a Python plugin: a `.py` file or a package (a directory with an
/// `__init__.py`). Also without the `python` feature, which this build cannot load.
pub(crate) fn is_plugin(path: &Path) -> bool {
    (path.extension().is_some_and(|ext| ext == "py") && path.is_file()) || path.join("__init__.py").is_file()
}

/// The Python plugins `HostBuilder::python_dir(dir)` loads, in its order.
pub(crate) fn plugins_in(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut plugins: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .filter(|entry| {
            let name = entry.file_name();
            let bytes = name.as_encoded_bytes();
            !bytes.starts_with(b"_") && !bytes.starts_with(b".") && is_plugin(&entry.path())
        })
        .map(|entry| entry.path())
        .collect();
    plugins.sort_by(|a, b| {
        let name = |path: &PathBuf| path.file_name().unwrap_or_default().as_encoded_bytes().to_vec();
        name(a).cmp(&name(b))
    });
    plugins
}
