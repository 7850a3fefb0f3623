//! Python plugins (the `python` feature), the loading side: Python plugins in the same leased
//! sets as native and static ones. The user-facing API (`HostBuilder::python_*`,
//! `PyInterface`, `PyPass`, `Lease::get_py`) is in the crate's `python` module, above the host.
//!
//! A Python plugin is a `.py` file or a package. Its **instance** is one execution of its
//! module, shared process-wide as a library instance is: `instance` runs it through the same
//! registry (`registry`, generic over its `Opener`) with `instance::PyOpener` in the
//! platform loader's place, so the invariants of `docs::sharing` hold by the same code: one
//! instance of an unchanged plugin at a time (I1), whose `on_load` and `on_unload` run once
//! (I7), and no plugin code under the registry's lock (I4). The registry's key is the plugin's
//! (dev, ino) with a hash of its sources: a changed plugin is a new instance beside the old
//! one, which keeps serving the leases of older generations until they drop.
//!
//! Each instance lives under a private module name, `_dylease.<n>` (a package's submodules
//! below it), never its bare name and never on `sys.path`, so nothing is cached under a name
//! another load would find: every file is executed afresh for a new instance. Its sources are
//! read from the descriptors the trust check looked at (`read`) and compiled from memory
//! (`compile(src, path, "exec")`), so no `__pycache__` is read or written. The host's side
//! of this, run inside the interpreter, is `bootstrap.py`. Its messages speak of the plugin,
//! not of that machinery: an exception's location is the innermost frame of the plugin's own
//! files (an `import` that fails is the plugin's `import` line, not the host's import shim),
//! and a private module name is shown as the public one (`package.not_there`, not
//! `_dylease.<n>.not_there`).
//!
//! A Python pass is an ordinary [`PassInfo`](crate::PassInfo) with its callable attached;
//! its function pointer is a placeholder that does nothing, and the native lookups refuse it:
//! [`Lease::get`](crate::Lease::get) names it a Python pass, and
//! [`Lease::passes_of`](crate::Lease::passes_of) does not list it, because the index keys
//! Python passes apart (`registrar::python::index_key`). Calling one through the `unsafe`
//! [`Lease::pass`](crate::Lease::pass) breaks that function's contract (a Python pass has no
//! native signature).
//!
//! The interpreter (`interpreter`) is the process's if it has one, and otherwise started
//! once; dylease never finalises it. Every wait on dylease's own locks gives the GIL up
//! (`sys::wait_detached`), so a pass that calls `acquire()` does not deadlock with a
//! thread that loads Python plugins of the same host.

mod check;
pub(crate) mod discover;
mod instance;
pub(crate) mod interpreter;
mod read;
mod register;
mod signed;
