//! Writing plugins: the C header, Rust's [`export_plugin!`](crate::export_plugin), ABI
//! version 2, and the upgrade path for version-1 plugins.
//!
//! A plugin is a shared library that exports one function, `dylease_plugin_v1`, returning a
//! static descriptor: its name, version, `register_passes`, and optionally `on_load` and
//! `on_unload`. [`abi`](crate::abi) mirrors the declarations for Rust;
//! `include/dylease.h` is the normative copy and documents the contract in full.
//!
//! # The build recipe (C and C++)
//!
//! Start here: a plugin must be position-independent code with `dylease.h` on its include
//! path, and, to really unload, linked with the version script `include/dylease.map`, which
//! keeps only `dylease_plugin_v1` global, with hidden visibility. The CMake package does all
//! of it:
//!
//! ```cmake
//! find_package(dylease REQUIRED)  # -DCMAKE_PREFIX_PATH=<prefix>, or -Ddylease_DIR=<dylease>/cmake
//! dylease_add_plugin(math SOURCES math.c more_passes.cpp)
//! ```
//!
//! `dylease header --install <prefix>` (the `dylease` command, the workspace's `dylease-cli` crate) writes the header, the
//! version script, the CMake package and a `dylease.pc` under a prefix; without CMake:
//!
//! ```sh
//! cc -shared $(pkg-config --cflags --libs dylease) math.c -o libmath.so
//! # which is:
//! cc -shared -fPIC -fvisibility=hidden -Wl,--version-script=dylease.map -I include math.c -o libmath.so
//! ```
//!
//! ## Why the version script: what keeps a library mapped
//!
//! glibc never unloads a library that has `DF_1_NODELETE` (`-z nodelete`) or that exports an
//! `STB_GNU_UNIQUE` symbol. g++ makes one of every function-local static in an inline function
//! or a template, so a C++ plugin with a "Meyers singleton" holding a `std::string` never
//! unloads, whatever its hosts do. `-fvisibility=hidden` alone is not enough (code
//! instantiated from libstdc++'s headers, which push default visibility, stays exported with
//! its statics); the version script is. A library whose other exports a
//! never-unloaded library (libstdc++) bound to stays too; the script removes those exports. A
//! thread-local with a destructor (C++ `thread_local std::string`, Rust `thread_local!` with
//! `Drop`) keeps the library mapped while a thread that used it is alive: run such passes on
//! threads that end (joined with `join`, which waits for their thread-local destructors) before
//! the last lease drops.
//!
//! The host reads the library's dynamic section and dynamic symbols before loading it, as
//! the loader reads them (not its section headers, which the loader never reads):
//! [`PluginInfo::pinning`](crate::PluginInfo::pinning) says whether it is expected to stay
//! mapped and why ([`PinCause`](crate::PinCause), each with its
//! [`fix`](crate::PinCause::fix)). After each unload the host compares: a library that stayed
//! mapped is logged once, as a warning naming the cause and the fix ("as its file predicted:
//! it exports 2 GNU unique symbols, e.g. `_ZZN6layout8Registry3getEvE8instance` …"), and
//! counted once in [`Stats::pinned_libraries`](crate::Stats::pinned_libraries). Its statics
//! keep their values and every reload of a changed file adds a mapping, so a pinned plugin
//! reloaded all day grows the process.
//!
//! # In C or C++
//!
//! ```c
//! #include <stdlib.h>
//! #include "dylease.h"
//!
//! static int *calls;   /* this instance's state: made in on_load, freed in on_unload */
//!
//! static int32_t on_load(void) {
//!     calls = calloc(1, sizeof *calls);
//!     return calls ? 0 : -1;     /* non-zero: the load fails, on_unload is not called */
//! }
//! static void on_unload(void) { free(calls); calls = 0; }
//!
//! static int double_it(int x) { ++*calls; return 2 * x; }
//! static void fuse(void *graph) { /* ... */ }
//!
//! DYLEASE_PLUGIN_WITH_HOOKS("math", "1.0.0", on_load, on_unload)
//! DYLEASE_PASS("double", double_it)
//! DYLEASE_TYPED_PASS("fuse", "ge.fusion_pass/1", fuse)
//! ```
//!
//! - `DYLEASE_PLUGIN(name, version)` stands once per plugin, at global scope;
//!   `DYLEASE_PLUGIN_WITH_UNLOAD(name, version, on_unload)` adds an `on_unload`, and
//!   `DYLEASE_PLUGIN_WITH_HOOKS(name, version, on_load, on_unload)` both (either may be
//!   `NULL`).
//! - `DYLEASE_PASS(name, fn)`, `DYLEASE_PASS_WITH_DATA(name, fn, data)`,
//!   `DYLEASE_TYPED_PASS(name, interface, fn)` and `DYLEASE_TYPED_PASS_WITH_DATA` may stand
//!   in any translation unit of the plugin, each expanded in exactly one. Their constructors
//!   only link nodes into a list private to the plugin; `register_passes` walks it, once per
//!   set (I6 in [`sharing`](super::sharing)).
//! - A typed pass carries an *interface*, the pass signature that hosts and plugins agree on:
//!   UTF-8, 1 to 256 bytes, by convention `domain.name/MAJOR`. Hosts read it with
//!   [`PassInfo::interface`](crate::PassInfo::interface) (`None` for an untyped pass).
//! - `DYLEASE_REGISTER_CHECK(fn)` fails the registration with the plugin's own message: `fn`
//!   (`const char *(*)(void)`) runs at each registration before any pass is added, and returns
//!   `NULL` when all is well, else the reason, which the host's error shows ("… failed to
//!   register its passes: no NPU device found (`register_passes` returned -1)"):
//!
//! ```c
//! static const char *npu_present(void) { return have_npu() ? NULL : "no NPU device found"; }
//! DYLEASE_REGISTER_CHECK(npu_present)
//! ```
//!
//! ## Manifests
//!
//! The macros also write what the plugin is into its file, as ELF notes of owner `dylease`
//! in a section `.note.dylease`, which the linker puts into a `PT_NOTE` segment:
//! `DYLEASE_PLUGIN*` a plugin record (the ABI version, name and version; its pass list is
//! complete), each `DYLEASE_PASS` and `DYLEASE_TYPED_PASS` a pass record (name, interface).
//! A plugin that fills its descriptor by hand may write its plugin record with
//! `DYLEASE_MANIFEST(name, version)`, whose pass list is not complete. Reading the file,
//! [`dylease_elf::Elf::manifest`] returns the merged [`dylease_elf::Manifest`] without running
//! any of the plugin's code; `readelf -n` shows the notes. The format is defined in
//! [`dylease_elf::manifest`]. `strip --strip-all` keeps the notes; a link step that drops
//! `.note*` sections (a linker script, `objcopy --remove-section`) leaves no manifest.
//!
//! What a host does with it (the contract of the header's manifest):
//! - **Before the file is mapped**, it reads the manifest from the descriptor its checks
//!   read (no open and no read of its own). A plugin ABI version the host does not speak is
//!   refused there ([`Error::AbiMismatch`](crate::Error::AbiMismatch) with `declared: true`),
//!   as is a corrupt manifest or one of a format version it does not read
//!   ([`Error::Open`](crate::Error::Open) with [`OpenCause::Manifest`](crate::OpenCause::Manifest)):
//!   none of the plugin's code ran, not even its constructors. A plugin *without* a manifest is
//!   judged by its descriptor, which the loader maps first: its constructors (and its
//!   dependencies') have run by the time an ABI version is refused.
//! - **After `register_passes`**, the descriptor's name and version must be the manifest's,
//!   and, if the manifest is complete, the passes registered exactly the ones declared (name
//!   and interface); a difference fails the load
//!   ([`Error::ManifestMismatch`](crate::Error::ManifestMismatch), naming each pass).
//! - [`PluginHost::catalog`](crate::PluginHost::catalog) and `dylease inspect` list the
//!   manifest with the trust, ELF and ABI verdicts and the pin prediction, without running any
//!   code of the plugin.
//!
//! The plugin ABI version changes only when the descriptor does; the manifest's format has a
//! version of its own, which changes only for a layout an older reader would misread (the
//! reader ignores unknown flag bits, bytes past a record's last field and notes of other
//! types, so fields are added without a new version). A host that speaks ABI 2 loads a plugin
//! of ABI 2 whose manifest is of a format it reads, and refuses one of a later format, naming
//! both versions.
//!
//! # In Rust
//!
//! A `cdylib` that depends on the plugin-side crate `dylease-plugin` alone (no host code):
//!
//! ```no_run
//! extern "C" fn fuse(x: i32) -> i32 { x / 2 }
//!
//! dylease_plugin::export_plugin! {
//!     name: "npu",
//!     version: "1.0.0",
//!     register: |reg| reg.add_pass_with_interface("fuse", "ge.fusion_pass/1", fuse as extern "C" fn(i32) -> i32, std::ptr::null_mut()),
//!     on_load: || Ok(()),  // open the device here; an `Err` fails the load
//!     on_unload: || {},    // and close it here
//! }
//! # fn main() {}
//! ```
//!
//! An `Err(RegisterError::custom("no NPU device found"))` from `register` reaches the host's
//! load error through the ABI's `report` ("plugin file `…/libnpu.so` failed to register its
//! passes: no NPU device found (`register_passes` returned -1)"), and so does a panic
//! ("panicked: …"). An error or panic in `on_load` reaches the host only as a code
//! ([`Error::OnLoadFailed`](crate::Error::OnLoadFailed)): the ABI gives `on_load` no
//! registrar to report through. No panic ever unwinds into the host — when the plugin crate
//! is built with `panic = "unwind"` (the default): built with `panic = "abort"`, a panic in
//! any of the three aborts the host process, and `export_plugin!` warns at compile time (see
//! its documentation; dylease-plugin's `allow-panic-abort` feature turns the warning off).
//!
//! `export_plugin!` writes the plugin's [manifest](#manifests) too: the same notes as the C
//! macros, as constant data in `.note.dylease`, read by a host before any of the plugin's
//! code runs. With a `register` closure, as above, it is the plugin record alone, whose pass
//! list is not complete: the closure may register anything. Declaring the passes in the macro
//! instead makes it write the register function, which registers exactly those, and a
//! complete manifest with a pass record each, which a host checks against what the plugin
//! registered:
//!
//! ```no_run
//! pub struct Fusion;
//! // SAFETY: every pass registered under "ge.fusion_pass/1" is an `extern "C" fn(i32) -> i32`.
//! unsafe impl dylease_plugin::Interface for Fusion {
//!     const ID: &'static str = "ge.fusion_pass/1";
//!     type Fn = unsafe extern "C" fn(i32) -> i32;
//! }
//!
//! extern "C" fn fuse(x: i32) -> i32 { x / 2 }
//! extern "C" fn split(x: i32) -> i32 { x * 2 }
//!
//! dylease_plugin::export_plugin! {
//!     name: "npu",
//!     version: "1.0.0",
//!     passes: [
//!         typed Fusion: "fuse" => fuse,                              // add_typed_pass::<Fusion>
//!         untyped: "split" => split as extern "C" fn(i32) -> i32,    // add_pass
//!     ],
//!     on_load: || Ok(()),
//! }
//! # fn main() {}
//! ```
//!
//! A plugin that needs other libraries finds them through a run path relative to its own
//! directory (`-Wl,-rpath,'$ORIGIN'`, or `$ORIGIN/lib`): a host under
//! [`TrustPolicy::Strict`](crate::TrustPolicy::Strict) refuses a plugin whose run path names
//! a directory that another user can write or create, such as a build directory under `/tmp`.
//!
//! # ABI version 2
//!
//! Version 2 only appends fields to version 1's structures:
//!
//! - **`on_load`** in the descriptor: runs once per library instance, before its first
//!   `register_passes`; non-zero fails the load naming the file and the code, and then
//!   neither `register_passes` nor `on_unload` runs. Once it succeeded, `on_unload` runs
//!   exactly once, even if a later step fails.
//! - **`add_typed_pass`** in the host API: `add_pass` with an interface.
//! - **`report`** in the host API: why `register_passes` is about to fail; the first message
//!   of a registration appears in the load error.
//!
//! A version-2 plugin calls `add_typed_pass` and `report` only when `api->abi_version >= 2`.
//! The entry symbol stays `dylease_plugin_v1`: it names the entry convention, not the version.
//!
//! # Upgrading a version-1 plugin
//!
//! Nothing is required: a plugin built against the version-1 header keeps loading unchanged,
//! without a rebuild. The host reads only version 1's fields of its descriptor, hands its
//! `register_passes` a host API table whose `abi_version` is 1 (the only one a version-1
//! plugin accepts), and runs its `on_unload` once per instance after a successful
//! `register_passes`. To use version 2:
//!
//! 1. Rebuild against the new `include/dylease.h`. A declarative plugin (`DYLEASE_PLUGIN`,
//!    `DYLEASE_PASS`) becomes version 2 with no source change.
//! 2. Move state that `on_unload` frees out of constructors (and out of "only on the first
//!    call" flags in `register_passes`) into an `on_load`, and declare both with
//!    `DYLEASE_PLUGIN_WITH_HOOKS(name, version, on_load, on_unload)`. Until then, such state
//!    is lost from the second load on wherever the platform keeps the library mapped (see
//!    [`faq`](super::faq)).
//! 3. Optionally register typed passes and `report` failures.
//!
//! A hand-written descriptor sets `abi_version` to `DYLEASE_ABI_VERSION` (2) and fills the
//! new `on_load` field (or `NULL`); a hand-written `register_passes` accepts any
//! `api->abi_version >= 1` and uses the version-2 functions only when it is at least 2, so
//! it also works with a host that speaks only version 1. Descriptors of any other version
//! (0, 3, …) are refused with [`Error::AbiMismatch`](crate::Error::AbiMismatch).
//!
//! # In Python (the `python` feature)
//!
//! With the crate feature `python` (off by default; it embeds CPython through
//! [`pyo3`](https://docs.rs/pyo3), re-exported as `dylease::pyo3`), a host also loads Python
//! plugins: `.py` files and packages, given with `HostBuilder::python_dir`, `python_file` or
//! `python_env` (a `:`-separated list of files and directories). In a directory, each `*.py`
//! file and each package (a subdirectory with `__init__.py`) is a plugin; names starting with
//! `_` or `.` are not; they load in byte order of their file names, after the host's native
//! and static plugins, into the same sets: one lease holds both kinds.
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
//! The host declares the pass signature as a `PyInterface` (argument tuple, output type) and
//! calls a pass through `Lease::get_py::<I>(name)?.call(args)` or `Lease::py_passes_of::<I>()`.
//! An exception, or a return value that does not convert, is an error naming the pass, its
//! file, the exception and the file and line it was raised at.
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
//!   on or renamed, `exec`, `eval`, `globals()`, …) leaves the plugin without a manifest. Its
//!   pass list is **incomplete** if the plugin defines, assigns or imports `register_passes`
//!   (or a module `__getattr__`, or has a `*` import) in its plugin file, has a `typed_pass`
//!   decorator inside an `if`, `try`, function or class, with a computed argument, or uses
//!   `typed_pass` any other way (called, not as a decorator), uses `importlib`, or if a
//!   submodule with decorators is imported other than by plain module-level imports from the
//!   plugin file on (a conditional `try: from . import cuda` counts). A submodule that no
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
//!
//! # Checking plugins
//!
//! The `dylease` command (the workspace's `dylease-cli` crate) loads plugin files and directories exactly
//! as a host would and says, for each file, which plugin and passes it brings, or why it does
//! not load and how to fix it — the answer to "why is my pass not running?":
//!
//! ```sh
//! cargo run -p dylease-cli -- check path/to/plugins/
//! ```
//!
//! `--json` prints the same report for scripts; the exit status is 0 only when everything
//! would load. [`plugin_files_in`](crate::plugin_files_in) lists a directory's plugin files
//! by the same rules. The repository's `examples/` has one plugin in each language, which
//! `cargo run -p dylease-demo` builds (with the recipe) and loads, and an
//! `examples/plugins/CMakeLists.txt` that builds the C and C++ ones with the CMake package.
