//! Python passes (the `python` feature): Python plugins in the same sets as native and static
//! ones.
//!
//! With the crate feature `python` (off by default: it embeds CPython through
//! [pyo3](https://docs.rs/pyo3), re-exported as `dylease::pyo3`; [`api`](super::api#features-and-versions)
//! says how dylease's version follows pyo3's), a host also loads Python plugins: `.py` files
//! and packages, given with `HostBuilder::python_dir`, `python_file` or `python_env` (a
//! `:`-separated list of `.py` files and directories, such as `python_env("GE_PY_PASS_PATH")`).
//! In a directory, each `*.py` file and each package (a subdirectory with `__init__.py`) is a
//! plugin; names starting with `_` or `.` are not; they load in byte order of their file
//! names, after the host's native and static plugins, into the same sets: one lease holds
//! both kinds.
//!
//! # A plugin
//!
//! ```python
//! import dylease                          # the host's module, importable only by plugins
//! dylease.plugin("fusion", "1.2")         # optional: name (default: the file stem), version
//!
//! @dylease.typed_pass("fuse_add", "ge.fusion_pass/1")
//! def fuse_add(graph):
//!     return True
//!
//! def on_load(): ...        # optional: once per instance, before its first registration
//! def on_unload(): ...      # optional: once per instance, after the last set using it
//! def register_passes(reg): # optional: if defined, called once per set instead of the list
//!     reg.add_typed_pass("fuse_add", "ge.fusion_pass/1", fuse_add)
//!     # reg.report("why"); return False    (or raise) fails the plugin
//! ```
//!
//! # The host
//!
//! The host declares the pass signature as a `PyInterface` (argument tuple, output type) and
//! calls a pass through `Lease::get_py::<I>(name)?.call(args)` or `Lease::py_passes_of::<I>()`
//! (plugins in load order, then names). An exception, or a return value that does not
//! convert, is an error naming the pass, its file, the exception and the file and line it was
//! raised at.
//!
//! ```rust,ignore
//! struct FusionPass;
//! impl dylease::PyInterface for FusionPass {
//!     const ID: &'static str = "ge.fusion_pass/1";
//!     type Args = (String,);
//!     type Output = bool;
//! }
//!
//! // SAFETY: these are the application's own plugins.
//! let host = unsafe { PluginHost::builder().dir("/opt/app/plugins").python_dir("/opt/app/py-passes") }
//!     .build()?;
//! let lease = host.acquire()?;
//! let changed = lease.get_py::<FusionPass>("fuse_add")?.call(("add(x, y)".into(),))?;
//! for pass in lease.py_passes_of::<FusionPass>() { /* plugins in load order, then names */ }
//! ```
//!
//! # The rules
//!
//! The rules are the native ones:
//!
//! - **An instance is one execution of the module**, shared process-wide: every host and
//!   generation loading the same unchanged plugin shares it, with one `on_load` and one
//!   `on_unload`. A changed plugin (any of its files) is a new instance beside the draining old
//!   one. Each instance lives under a private module name (`_dylease.<n>`, a package's
//!   submodules below it), never its bare name and never on `sys.path`, so a package's relative
//!   imports resolve inside the instance and every file runs afresh in a new instance.
//! - **A package is read whole from one version**: its directory is opened once and every
//!   file of it is listed and read through that descriptor, so an install that swaps the
//!   package's directory for a new one during a load gives the load the old tree or, if that
//!   is removed first, the new one read again whole; never files of both. A symlink inside a
//!   package is refused (copy the file in).
//! - **The manifest** is read from the plugin's syntax tree (Python's `ast`, from the same
//!   checked sources the load runs), none of its code run: its name and version from a
//!   module-level `dylease.plugin(...)` call in the plugin file (a package's `__init__.py`),
//!   its passes from `@dylease.typed_pass(...)` decorators on module-level functions and
//!   classes of any of its files, under whatever names the file imports them as (`import
//!   dylease as d`, `from dylease import plugin, typed_pass as tp`, or from another module of
//!   the package: `from .api import tp`). Arguments must be string literals. A name or
//!   version it cannot read (computed, `plugin` called elsewhere, the `dylease` module passed
//!   on or renamed, `exec`, `eval`, `compile`, `__builtins__`) leaves the plugin without a
//!   manifest. Its pass list is **incomplete** if the plugin defines, assigns or imports
//!   `register_passes` (or a module `__getattr__`, or has a `*` import) in its plugin file,
//!   has a `typed_pass` decorator inside an `if`, `try`, function or class, with a computed
//!   argument, or uses `typed_pass` any other way (called, not as a decorator), if a submodule
//!   with decorators is imported other than by plain module-level imports from the plugin file
//!   on (a conditional `try: from . import cuda` counts), or if it uses what reaches a
//!   namespace or an object the reader cannot follow: frames (`sys._getframe`,
//!   `inspect.currentframe`, `f_globals`, `f_locals`, `f_back`), `globals()`, `locals()`,
//!   `vars()`, `__dict__`, `__globals__`, closures' cells, the garbage collector's
//!   `get_objects` and `get_referrers`; a lookup by a name that is not a string literal
//!   (`getattr`, `setattr`, `delattr`, `operator.attrgetter`, `__getattribute__`, …);
//!   `__import__` or `importlib`; or the host's own record of its passes. Why it is
//!   incomplete (each cause with its file and line) is logged at `debug`. A submodule that no
//!   file imports keeps its passes declared. When the plugin is loaded, its name, version
//!   and, for a complete manifest, its passes must be what it registered: otherwise the load
//!   fails with [`Error::ManifestMismatch`](crate::Error::ManifestMismatch) naming the pass
//!   (such as the pass of a submodule nothing imports). A file that does not parse leaves no
//!   manifest, and loading reports the syntax error.
//! - **Unload**: `on_unload`, then the set's callables and the module objects go, the private
//!   names leave `sys.modules`, `gc.collect()` runs, and weak references check that the
//!   modules are gone; one that survives (held by a global elsewhere) is logged as a warning,
//!   as a pinned library is. What cannot be undone: C extensions a plugin imported stay
//!   loaded (CPython never unloads them), threads it started keep running, and changes it made
//!   to other modules (monkey-patches, registrations in other libraries) stay.
//! - **Failure atomicity**: an exception at import, in `on_load` or in `register_passes`, a
//!   `report` with `False`, or a pass name another plugin (of any kind) registered fails the
//!   load naming the file (and line); the modules it imported are removed, the instances it
//!   created torn down, and the native plugins of the same set unloaded.
//! - **Trust**: under `TrustPolicy::Strict` the `.py` file (for a package, every file in it)
//!   passes the native checks, the source is read from the checked descriptor and compiled
//!   from memory (`compile(src, path, "exec")`), so no `__pycache__` is read or written.
//!   Python code runs with the process's full rights, as a native plugin does.
//! - **The interpreter** is the process's if it has one (dylease used from a Python
//!   extension), otherwise dylease initialises it once. It is never finalised: CPython cannot
//!   safely be initialised again after `Py_Finalize`, and whoever embedded it owns its
//!   shutdown. Passes take the GIL for their call; dylease gives the GIL up while it waits on
//!   its own locks, and never waits for the GIL while it holds one (the GIL comes first), so
//!   a pass may call `acquire()`, or drop a lease or a host, while another thread loads or
//!   unloads a set.
//! - Python sources are not watched by `HostBuilder::watch`. `dylease check --python` (built
//!   with the `python` feature) checks `.py` files, packages and the Python plugins of a
//!   directory as `python_file` and `python_dir` load them, and names the file and line of an
//!   import error.
//! - The demo runs a Python pass beside its C, C++ and Rust ones with
//!   `cargo run -p dylease-demo --features python`.
//!
//! # Building and testing
//!
//! The build needs Python's development files (Debian: `apt-get install python3-dev`);
//! `PYO3_PYTHON` picks the interpreter to build against (CI uses the system's,
//! `/usr/bin/python3`):
//!
//! ```text
//! PYO3_PYTHON=/usr/bin/python3 cargo test --features python --lib
//! PYO3_PYTHON=/usr/bin/python3 cargo test --features python --test integration python::
//! PYO3_PYTHON=/usr/bin/python3 cargo test -p dylease-cli --features python --test integration python::
//! PYO3_PYTHON=/usr/bin/python3 cargo run -p dylease-demo --features python
//! ```
//!
//! `dylease check --python` and `dylease inspect --python` (the `dylease-cli` crate built
//! with `--features python`, whose `python` feature turns on dylease's) check and inspect
//! `.py` files, packages and the Python plugins of a directory as `python_file` and
//! `python_dir` load them; without `--python`, a directory is checked as `dir` loads it: its
//! libraries ([`cli`](super::cli)).
