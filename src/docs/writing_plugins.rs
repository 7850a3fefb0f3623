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
//! # PKG_CONFIG_PATH=<prefix>/lib/pkgconfig
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
//! the last lease drops. The C++ case shows in the file (a strong import of
//! `__cxa_thread_atexit`) and is predicted; the Rust case does not (the standard library imports
//! the hook weakly in every library, used only if such a thread-local is), so a Rust plugin is
//! reported only if it does stay mapped.
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
//! A host reads the manifest before it maps the file, refuses there an ABI version it does
//! not speak, and checks after `register_passes` that a complete manifest lists exactly the
//! passes registered: [`manifests`](super::manifests) has the contract, the catalog and the
//! format's versioning.
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
//! Only this declared form writes a complete manifest, so among Rust plugins only it can be
//! held unmapped by an [on-demand](super::on_demand) set. `add_typed_pass::<I>` in a
//! `register` closure checks at compile time that the function is an `I::Fn`, as `typed I:`
//! does here. A complete plugin is the repository's crate `examples/rust-plugin`, whose
//! source is `examples/plugins/folding.rs`.
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
//! - **`add_typed_pass`** in the host API: `add_pass` with an interface (C:
//!   `DYLEASE_TYPED_PASS` and `DYLEASE_TYPED_PASS_WITH_DATA`; Rust: `add_typed_pass::<I>`,
//!   checked at compile time against `I::Fn`, or `add_pass_with_interface` with the id as a
//!   string).
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
//! With the crate feature `python`, a host also loads Python plugins (`.py` files and
//! packages) into the same sets: [`python`](super::python) shows one and gives the rules.
//!
//! # Examples
//!
//! `cargo run -p dylease-demo` builds and loads one example plugin in each language (with the
//! build recipe); every pass rewrites the toy graph of `examples/plugins/graph.h`:
//!
//! | Language | Source | What it shows |
//! | --- | --- | --- |
//! | C | `examples/plugins/fusion.c` | `DYLEASE_PLUGIN_WITH_UNLOAD` and two `DYLEASE_TYPED_PASS`es |
//! | C++ | `examples/plugins/layout.cpp`, `layout_transpose.cpp` | the same header; one plugin whose passes come from two translation units, one with user data; a singleton holding a `std::string`, a `thread_local` and an exception, and still it unmaps after its last lease (built with the recipe, by `examples/plugins/CMakeLists.txt`) |
//! | Rust | `examples/plugins/folding.rs` (the crate `examples/rust-plugin`) | `export_plugin!` in a `cdylib` depending on `dylease-plugin`: a typed pass, load and unload hooks |
//!
//! To build them by hand, from the repository root, with the recipe:
//!
//! ```sh
//! cmake -S examples/plugins -B build -Ddylease_DIR=$PWD/cmake && cmake --build build   # C and C++
//! cc  -shared -fPIC -fvisibility=hidden -Wl,--version-script=include/dylease.map -I include -I examples/plugins examples/plugins/fusion.c -o libfusion.so
//! c++ -shared -fPIC -fvisibility=hidden -Wl,--version-script=include/dylease.map -I include -I examples/plugins examples/plugins/layout.cpp examples/plugins/layout_transpose.cpp -o liblayout.so
//! cargo build -p dylease-example-rust-plugin   # target/debug/libdylease_example_rust_plugin.so
//! ```
//!
//! # Checking plugins
//!
//! The `dylease` command (the workspace's `dylease-cli` crate) loads plugin files and
//! directories exactly as a host would and says, for each file, which plugin and passes it
//! brings, or why it does not load and how to fix it — the answer to "why is my pass not
//! running?" — and `dylease inspect` says what a file declares without running it
//! ([`cli`](super::cli)):
//!
//! ```sh
//! cargo run -p dylease-cli -- check path/to/plugins/
//! ```
//!
//! [`plugin_files_in`](crate::plugin_files_in) lists a directory's plugin files by the same
//! rules.
