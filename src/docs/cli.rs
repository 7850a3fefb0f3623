//! The `dylease` command: `check`, `inspect`, `install`, `header`, and `keygen`, `sign` and
//! `verify` for signed plugins.
//!
//! The tool is a crate of its own, `dylease-cli` (in the workspace's `dylease-cli/`, binary
//! `dylease`), so the library's build does not pull in `clap`; its feature `python` turns on
//! dylease's. Install it from a checkout with `cargo install --path dylease-cli`, or run it
//! with `cargo run -p dylease-cli -- ...`. Each subcommand's `--help` documents every option
//! and, for `--json`, every field.
//!
//! # `dylease check`: why is my pass not running?
//!
//! `check` loads plugin files and directories exactly as a host would (same discovery, same
//! pipeline, same checks) and answers for each file: which plugin and passes it brings, or
//! why it does not load and how to fix it. Checking runs the plugins' code, as loading them
//! does.
//!
//! ```sh
//! cargo run -p dylease-cli -- check path/to/plugins/
//! ```
//!
//! - A directory is checked file by file and then as a whole, since a host loads all of a
//!   directory's plugins or none of them (two plugins that register the same pass name fail
//!   it together).
//! - Each file is loaded, unloaded and loaded again, as a long-lived program that reloads
//!   would: a library that stays mapped after its unload gets a warning naming the cause its
//!   file shows (`-z nodelete`, GNU unique symbols of a C++ build, thread-local destructors)
//!   and the fix (for C++, the version script), and so does state its constructors set up and
//!   `on_unload` freed, gone from the second load on ("move it to `on_load`").
//! - `--trust permissive` and `--policy skip-failed` check with the deployment's host policies
//!   ([`TrustPolicy::Permissive`](crate::TrustPolicy::Permissive),
//!   [`LoadPolicy::SkipFailed`](crate::LoadPolicy::SkipFailed): a directory then loads
//!   without its failed plugins, listed as warnings; each failed file still fails its own
//!   check).
//! - Typed passes are listed with their interface (`fuse (ge.fusion_pass/1)`).
//! - `--python` (a `dylease` built with the `python` feature) checks `.py` files, packages and
//!   the Python plugins of a directory as `python_file` and `python_dir` load them, and names
//!   the file and line of an import error; without it, a directory is checked as `dir` loads
//!   it: its libraries ([`python`](super::python)).
//!
//! For a directory with one good plugin, one built without the library it needs, and two
//! files a host does not load (the loader's own message names the file by its resolved path):
//!
//! ```text
//! ok    plugins/libmath.so
//!         plugin `math` 1.0.0: 1 pass: double
//! FAIL  plugins/libquantize.so
//!         problem: cannot load plugin file `plugins/libquantize.so`: /srv/app/plugins/libquantize.so: undefined symbol: calibrate_int8
//!         fix: the plugin uses `calibrate_int8`, which nothing it links against defines: link the library that defines it when building the plugin (-l...), or define it. Hosts load with RTLD_NOW, so every symbol must resolve when the plugin loads
//! FAIL  plugins/ (directory of 2 plugin files) as a whole: a host given this directory loads none of its plugins, so none of their passes run
//!         problem: `plugins/libquantize.so` does not load (above); a load stops at the first plugin that fails
//!         not loaded: `plugins/NOTES.txt` (the name does not end in `.so`)
//!         not loaded: `plugins/libmath.so.1` (the name does not end in `.so`)
//!
//! 2 of 3 checks failed: a host would not load these plugins. Fix the first problem first.
//! ```
//!
//! The exit status is 0 only when everything would load (1 otherwise, 2 for a usage error).
//! `--json` prints one document for scripts, and sends what plugins print to standard error:
//! `{"ok": bool, "checks": [...]}`, each check with `kind` (`file`, `directory`, or
//! `together` when several arguments are also checked as one host), `path`, `ok`, `plugins`
//! (`name`, `version`, `path`, `passes`: each `name` and `interface`, `null` if untyped),
//! `problem` (`null`, or `cause`, `file`, `message`, `fix`), `warnings` (strings) and
//! `skipped` (`path`, `reason`). `dylease check --help` documents every field and the values
//! of `cause` (`headers` when dylease's own ELF check refused the file, `open` when the
//! platform loader did, …).
//!
//! A file name that is not UTF-8 prints escaped, in the text and in `path`: a byte that is
//! not UTF-8 (or a control character) as `\xNN`, a backslash as `\\`, never a replacement
//! character; beside each such path JSON gives its exact bytes, `path_bytes` (`file_bytes`
//! for `problem.file`; `null` for a UTF-8 path).
//!
//! A plugin file that a process has open for writing (as a copy in progress has; the tool
//! looks through `/proc/*/fd`, the processes this user may see) gets a warning: a library
//! written in place kills a host loading it
//! ([`trust`](super::trust#install-plugins-by-rename-never-in-place); install by rename). A
//! freshly built, closed file gets none: a build that writes a plugin and then checks it is
//! the normal case.
//!
//! When the reader of the report goes away (`dylease check plugins/ | head`), the tool stops
//! checking and exits quietly with status 141, what a shell reports for a tool killed by
//! `SIGPIPE`: under `set -o pipefail` a report nobody read to the end is not a pass.
//!
//! # `dylease inspect`: what a file declares, without running it
//!
//! `dylease inspect <file-or-dir>...` runs none of the plugins' code: it prints what a host's
//! catalog ([`PluginHost::catalog`](crate::PluginHost::catalog), [`manifests`](super::manifests))
//! says of each plugin it would load, judged from the files alone: the manifest (name,
//! version, ABI version, each declared pass with its interface or "untyped"; "no manifest"
//! for a plugin built without one, whose passes only `check` can tell), a refusal made before
//! any code runs (trust, ELF, manifest, ABI) with the fix `check` gives, and the pin
//! prediction with each cause and its fix. `--python` (a `dylease` built with the `python`
//! feature) inspects Python plugins too, found as `check --python` finds them, their
//! manifests read from the syntax tree; `--trust` is `check`'s. It exits with 1 if a plugin is
//! refused; `--json` gives `{"ok": bool, "sources": [{"path", "ok", "problem", "plugins":
//! [{"path", "manifest", "problem", "pinning"}]}]}` (`dylease inspect --help` documents every
//! field).
//!
//! ```text
//! ok    plugins/libmath.so
//!         manifest: plugin `math` 1.0.0 (ABI version 2); declares 1 pass (complete manifest): double (untyped)
//! ok    plugins/liblegacy.so
//!         no manifest: which passes it registers is known only by loading it, which runs its code (`dylease check plugins/liblegacy.so`)
//! ```
//!
//! # `dylease install`: by rename, checked first
//!
//! `dylease install FILE... DIR` writes each file under a temporary name inside DIR, flushes
//! it, checks it as `dylease check` does, and renames it into place only if it would load
//! ([`reload`](super::reload#installing) has the details, Python plugins included). It prints
//! the manifest and pin prediction of what it installs, and refuses a plugin that declares
//! (or, in its check, registers) a pass another plugin of the directory declares in its
//! manifest, naming both and the pass; the file it replaces is not compared, and a plugin of
//! the directory without a manifest gets a warning.
//!
//! # `dylease header`: the C header, for builds outside this repository
//!
//! `dylease header` prints the C header of this dylease version (the crate's
//! `include/dylease.h`, built into the tool):
//!
//! ```sh
//! cargo install --path dylease-cli   # from a checkout of this repository
//! dylease header > third_party/dylease.h
//! dylease header --version-script > third_party/dylease.map
//! dylease header --install /opt/dylease   # header, version script, CMake package, dylease.pc
//! ```
//!
//! # `dylease keygen`, `sign` and `verify`: signed plugins
//!
//! For hosts built with [`HostBuilder::require_signed`](crate::HostBuilder::require_signed)
//! ([`signing`](super::signing) has the threat model and the build recipes):
//!
//! ```sh
//! dylease keygen --out publisher.key                 # publisher.key (0600), publisher.key.pub
//! dylease sign libgreeter.so --key publisher.key     # name and version from its manifest
//! dylease sign greeter/ --key publisher.key          # a Python package: greeter/.dylease-sig
//! dylease verify plugins/ --keyring publisher.key.pub --min-serial greeter=14
//! dylease inspect plugins/ --keyring publisher.key.pub
//! dylease install libgreeter.so /opt/app/plugins --keyring publisher.key.pub
//! ```
//!
//! `verify` checks each plugin as such a host would, running none of its code, and exits with
//! 1 if one is refused. `inspect` shows each plugin's signer, as claimed or, with
//! `--keyring`, verified. `install --keyring` verifies the copy before it checks it (which
//! runs its code) or renames it, and refuses a release older (by serial) than the signed
//! plugin of the same name it replaces unless `--allow-rollback`.
