//! `dylease`: the command-line companion of the dylease crate.
//!
//! `dylease check <file-or-dir>...` loads plugins exactly as a `PluginHost` would (the same
//! discovery, pipeline and checks, through the crate's public API), reports each plugin with
//! its version and passes and each problem with the file and a fix, and exits with 0 only when
//! everything would load; it runs the plugins' code, as loading them does. `dylease inspect
//! <file-or-dir>...` runs none of it: it prints what a host's catalog says of each plugin
//! (`PluginHost::catalog`: its manifest, a refusal made before any of its code runs, with
//! the fix, and its pin prediction). `dylease install <file>... <dir>` installs plugins
//! atomically (a checked temporary file renamed into place), prints the manifest and pin
//! prediction of what it installs, and refuses a plugin that declares a pass another plugin
//! of the directory declares. `dylease header` prints `include/dylease.h`
//! for C builds (`--version-script`: `include/dylease.map`, the linker version script).
//! `dylease keygen`, `sign` and `verify` make a publisher's keys, sign plugins and verify them
//! as a host built with `HostBuilder::require_signed` would. The
//! crate `dylease-cli` of dylease's workspace; its features forward to dylease's (`python`):
//!
//! ```sh
//! cargo run -p dylease-cli -- check path/to/plugins/
//! ```

#![deny(missing_docs)]
// Every `unsafe` operation is in `sys`, behind safe functions; the other modules forbid it.
#![deny(unsafe_code)]

use std::io::{self, Write as _};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[forbid(unsafe_code)]
mod advice;
#[forbid(unsafe_code)]
mod check;
#[forbid(unsafe_code)]
mod inspect;
#[forbid(unsafe_code)]
mod install;
#[forbid(unsafe_code)]
mod names;
#[forbid(unsafe_code)]
mod python;
#[forbid(unsafe_code)]
mod report;
#[forbid(unsafe_code)]
mod rewrite;
#[forbid(unsafe_code)]
mod sign;
#[forbid(unsafe_code)]
mod stdout;
#[allow(unsafe_code)]
mod sys;
#[forbid(unsafe_code)]
mod wrap;

/// Checks dylease plugins the way a host loads them.
#[derive(Debug, Parser)]
#[command(name = "dylease", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Loads plugin files and directories exactly as a host would, which runs their code, and
    /// reports what loads, what does not, and why. Check only plugins you would load; `inspect`
    /// reads what the files declare without running any of their code.
    #[command(after_long_help = CHECK_HELP)]
    Check(CheckArgs),
    /// Describes the plugins that files and directories hold without running any of their
    /// code: each one's manifest (name, version, ABI version, declared passes), why a host
    /// would refuse it before running it (trust, ELF, manifest, ABI), with the fix, and whether
    /// it will stay mapped after its unload.
    #[command(after_long_help = INSPECT_HELP)]
    Inspect(InspectArgs),
    /// Prints `dylease.h`, the C header plugins are built with (the copy of this dylease
    /// version): `dylease header > dylease.h`.
    Header(HeaderArgs),
    /// Installs plugin files (and, with the `python` feature, Python plugins) into a directory
    /// that running hosts read, atomically: each is written into DIR, flushed, given a
    /// temporary name, checked as `check` does (which runs its code), and renamed into place
    /// only if it would load and declares no pass another plugin of DIR declares. Prints the
    /// manifest and the pin prediction of what it installs, and warns when an older version
    /// replaces a newer one.
    #[command(after_long_help = INSTALL_HELP)]
    Install(InstallArgs),
    /// Makes a publisher's key pair for signing plugins: the secret key in KEYFILE (mode
    /// 0600; keep it secret), the public key in KEYFILE.pub (give it to the hosts).
    Keygen(KeygenArgs),
    /// Signs a plugin: a library gets a signature block appended (after `strip`, which drops
    /// it), a Python `.py` file or package a signed index of its sources (`FILE.dylease-sig`
    /// beside the file, `.dylease-sig` in the package). Hosts built with
    /// `HostBuilder::require_signed` load only plugins signed by a key they trust.
    #[command(after_long_help = SIGN_HELP)]
    Sign(sign::SignArgs),
    /// Verifies plugins as a host that requires signatures would (`HostBuilder::require_signed`):
    /// each library, Python file or package (a directory: each of its plugins) must be signed by
    /// a key of the keyring, over its bytes, not revoked, at or above the minimum serial.
    /// Runs none of their code.
    Verify(VerifyArgs),
    /// What `install` runs in a child process to check its temporary copy: prints the verdict
    /// on standard output (anything the plugin prints goes to standard error).
    #[command(name = install::CHECK_COPY, hide = true)]
    CheckCopy(CheckCopyArgs),
}

/// The plugins `check` and `inspect` read, and how.
#[derive(Debug, Args)]
struct Sources {
    /// Plugin library files, and directories of them (as `HostBuilder::dir` reads them).
    #[arg(required = true, value_name = "FILE_OR_DIR")]
    paths: Vec<PathBuf>,

    /// Also read Python plugins, as a host with the `python` feature loads them: a `.py` file
    /// or package argument as `HostBuilder::python_file`, and each directory also as
    /// `HostBuilder::python_dir` (its `.py` files and packages, after its libraries). Without
    /// it a directory is judged as `HostBuilder::dir` loads it, libraries only. Needs a
    /// `dylease` built with the `python` feature.
    #[arg(long)]
    python: bool,

    /// Print one JSON document on standard output instead of text (schema in --help).
    #[arg(long)]
    json: bool,

    /// Which files the hosts agree to open, as the deployment's host does (`TrustPolicy`):
    /// `permissive` for a deployment that deliberately trusts, say, a group-writable
    /// directory.
    #[arg(long, value_enum, default_value_t = Trust::Strict)]
    trust: Trust,
}

#[derive(Debug, Args)]
struct InspectArgs {
    #[command(flatten)]
    sources: Sources,

    /// Verify each plugin's signature against these keys, as a host built with
    /// `HostBuilder::require_signed` would (without it, the signature each plugin claims is
    /// shown, not verified).
    #[command(flatten)]
    signing: sign::KeyringArgs,
}

#[derive(Debug, Args)]
struct KeygenArgs {
    /// The secret key file to create (never over an existing file); the public key goes to
    /// KEYFILE.pub.
    #[arg(long, value_name = "KEYFILE")]
    out: PathBuf,
}

#[derive(Debug, Args)]
struct VerifyArgs {
    /// Plugin library files, Python `.py` files and packages, and directories of them.
    #[arg(required = true, value_name = "FILE_OR_DIR")]
    paths: Vec<PathBuf>,

    #[command(flatten)]
    signing: sign::KeyringArgs,
}

const SIGN_HELP: &str = "\
A library is signed in place: its bytes (the image, after `strip` and anything else that
rewrites it) followed by a block holding the key id, the release (name, version, serial),
the image's SHA-256 digest and the Ed25519 signature. The loader never reads past the ELF
image, so a signed library loads anywhere; `strip` drops the block, so sign last. Signing a
signed library again replaces its block (a new file renamed over the old one).

A Python plugin is signed by an index: for a `.py` file, FILE.dylease-sig beside it; for a
package, .dylease-sig inside it, listing every `.py` file below it (not `__pycache__` nor
names starting with `.`) with its digest. A host that requires signatures refuses a source
added, removed or changed since.

The name defaults to the plugin's manifest name (a host requires it of a plugin with a
manifest); a library without a manifest (one a plugin needs) needs --name. The serial orders
releases: a host's minimum (`Keyring::require_serial`, `--min-serial`) refuses older ones;
it defaults to the current time in seconds, so each later signing is newer.

CMake: `dylease_add_plugin(NAME SOURCES... SIGN_KEY KEYFILE)` signs after each build. Cargo:
after `cargo build --release`, `dylease sign target/release/libNAME.so --key KEYFILE`.";

impl InspectArgs {
    fn options(&self) -> check::Options {
        check::Options {
            trust: self.sources.trust.policy(),
            policy: dylease::LoadPolicy::Strict,
            python: self.sources.python,
        }
    }
}

const INSPECT_HELP: &str = "\
Each FILE_OR_DIR is given to a host of its own, as `check` gives it (a directory as
`HostBuilder::dir`, with --python also `HostBuilder::python_dir`; a file as
`HostBuilder::file`), and the host's catalog (`PluginHost::catalog`) is printed: every
plugin it would load, in its order, judged from its file alone. No plugin code runs: no
library is mapped (its constructors do not run), no Python module is executed. That is the
difference from `check`, which loads the plugins and so runs their code, and which alone can
tell what a plugin without a manifest registers, or whether its constructors, `on_load` and
`register_passes` succeed.

For each plugin:
  manifest      what its file declares (written by the header's DYLEASE_PLUGIN and
                DYLEASE_PASS macros, DYLEASE_MANIFEST, or `export_plugin!`): its name,
                version, plugin ABI version, and its passes, each with its interface or
                \"untyped\"; \"complete manifest\" when the file claims the list is every
                pass the plugin registers (a host that loads it holds it to that: `dylease
                check` tells whether it does), else \"incomplete manifest\". What the
                manifest claims is printed, not checked. A plugin built without one prints
                \"no manifest\": only `dylease check` (which runs its code) can say which
                passes it registers.
  signature     who signed it: the key id and the release (name, version, serial) its
                signature claims, \"verified\" with --keyring (a host built with
                HostBuilder::require_signed over those keys), or \"unsigned\".
  problem, fix  why a host would refuse it before running any of its code: the trust check,
                dylease's ELF check, a corrupt manifest, an ABI version the host does not
                speak; with the fix `check` gives.
  warning, note the prediction, from its file, of whether the platform will keep it mapped
                after its unload (`-z nodelete`, GNU unique symbols of a C++ build: warning;
                thread-local destructors, other exported symbols: note), each cause with its
                fix (for C++, the version script `dylease header --version-script` prints).

Two plugins of one FILE_OR_DIR that both declare a pass (and are not refused) get a
warning after its plugins: all the plugins of a host share one namespace of pass names, so
a host given it would fail to load (with LoadPolicy::Strict, the default, none of its
plugins load), or, with LoadPolicy::SkipFailed, keep the first-loaded plugin's
registration of each shared pass and leave the other's out. A plugin without a manifest
cannot be compared so, nor the passes a plugin with an incomplete manifest registers
beyond those it declares (only `dylease check`, which runs its code, sees them).

A Python plugin (a `.py` file or a package) is read only with --python; without it, it is
a problem of its argument that says so.

Text output is wrapped to the terminal's width (100 columns when standard output is not a
terminal), at spaces only, never inside a `quoted` name; each continuation is indented four
columns deeper than its line.

Exit status: 0 when no plugin is refused (warnings do not count), 1 when one is, an
argument cannot be read or a Python plugin is given without --python, 2 on a usage error.

JSON output (--json): one document on standard output, in the style of `check --json`
(never wrapped).
  {
    \"ok\": bool,                      nothing refused
    \"sources\": [{                    one per FILE_OR_DIR, in order
      \"path\": string,                as given
      \"path_bytes\": [int] | null,
      \"ok\": bool,
      \"problem\": null | {...},        the argument itself could not be read (as in check)
      \"plugins\": [{                  in load order
        \"path\": string, \"path_bytes\": [int] | null,
        \"ok\": bool,                    not refused
        \"manifest\": null | {\"name\": string, \"version\": string,
                      \"abi_version\": int | null, \"complete\": bool,
                      \"passes\": [{\"name\": string, \"interface\": string | null}]},
        \"signature\": null | {\"key\": string, \"name\": string, \"version\": string,
                       \"serial\": int, \"verified\": bool},   null: unsigned
        \"problem\": null | {\"cause\": string, \"file\": string | null,
                     \"file_bytes\": [int] | null, \"message\": string, \"fix\": string},
        \"pinning\": {\"expected\": bool,     it will stay mapped after its unload
                    \"causes\": [{\"cause\": \"nodelete\" | \"gnu-unique\" |
                                         \"thread-local-destructors\" | \"exports\" | \"other\",
                                \"always\": bool, \"message\": string, \"fix\": string}]}
      }],
      \"warnings\": [string]           passes two of its plugins declare
    }]
  }
Paths and \"cause\" of a problem are as in `check --help` (non-UTF-8 names escaped, with
their exact bytes in \"path_bytes\" / \"file_bytes\"); a refusal's \"cause\" is one of headers,
manifest (dylease's reading of the manifest refused it: corrupt, a pass declared twice, a
format version it does not read), open (the file kept being replaced while it was read),
abi-mismatch, untrusted, signature (with --keyring: its signature does not verify),
invalid-plugin (with --python: a source that does not parse), io, python (a source's: a
Python plugin given without --python, which reads it), other.";

#[derive(Debug, Args)]
struct CheckCopyArgs {
    /// The temporary copy to check.
    #[arg(value_name = "FILE")]
    file: PathBuf,

    /// As `install --trust`.
    #[arg(long, value_enum, default_value_t = Trust::Strict)]
    trust: Trust,

    /// The copy is a Python plugin, checked as `python_file` loads it.
    #[arg(long)]
    python: bool,
}

#[derive(Debug, Args)]
struct HeaderArgs {
    /// Print the linker version script `dylease.map` instead, which keeps only the entry point
    /// global (`-Wl,--version-script=dylease.map`): without it, glibc never unloads most C++
    /// plugins.
    #[arg(long, conflicts_with = "install")]
    version_script: bool,

    /// Instead of printing, install what plugin builds need under PREFIX: the header and the
    /// version script in PREFIX/include, the CMake package (`find_package(dylease)`,
    /// `dylease_add_plugin`) in PREFIX/lib/cmake/dylease, and `dylease.pc` in
    /// PREFIX/lib/pkgconfig.
    #[arg(long, value_name = "PREFIX")]
    install: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct InstallArgs {
    /// Plugin library files to install (named `*.so`: the name they get in DIR); with the
    /// `python` feature also Python plugins, `.py` files and packages (directories with an
    /// `__init__.py`), as `HostBuilder::python_dir` loads them.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,

    /// The plugin directory the hosts read.
    #[arg(value_name = "DIR")]
    dir: PathBuf,

    /// Whose files the checking host opens, as the deployment's host does (`TrustPolicy`).
    #[arg(long, value_enum, default_value_t = Trust::Strict)]
    trust: Trust,

    /// Require each file to be signed by one of these keys (as `HostBuilder::require_signed`
    /// does), verified on the copy before it is checked or renamed: an unsigned, changed or
    /// rolled-back copy is not installed and none of its code runs.
    #[command(flatten)]
    signing: sign::KeyringArgs,

    /// With --keyring, install a signed release older (by serial) than the signed plugin of
    /// the same name it replaces.
    #[arg(long)]
    allow_rollback: bool,
}

const INSTALL_HELP: &str = "\
A host that loads while a plugin is installed sees the old file or the new one, whole: the
new file is written in DIR without a name (O_TMPFILE), flushed to disk, named
`.NAME.dylease-install-PID-RANDOM` (a name no host loads; PID is the installer's),
checked by loading it in a host of its own (which runs its code, as `dylease check` does),
and renamed over DIR/NAME, which the file system does atomically. A file that would not
load is removed again and DIR stays as it was. The check runs in a process of its own: a
plugin that crashes it (or makes the loader end it) is not installed, and the installer
says how that process ended; if the installer itself is killed, its check ends with it.
What the plugin prints while it is checked goes to standard error.

An installer killed after it named its copy leaves that name behind; the next install into
DIR removes every such name (file or directory) whose installer process no longer exists
and that belongs to the user installing, and says so.

GNU `install` does not do this: it removes the old file and writes the new one under its
final name, so a host loading meanwhile finds no file, or half of one. By hand: `cp` to a
temporary name in the same directory, then `mv`.

Python plugins (a dylease built with the `python` feature): a `.py` file or a package is
copied under its own name into a new directory `.NAME.dylease-install-PID-RANDOM` in DIR
(a name no host loads), flushed, checked as `HostBuilder::python_file` loads it (which runs
its code), and renamed into place. A package that replaces an installed one cannot be
renamed over it (the old directory is not empty): the two trees are exchanged in one step
(`renameat2` with RENAME_EXCHANGE, Linux), and the old tree is removed with the temporary
directory. A host sees the old package or the new one, whole. `__pycache__` is not copied.

What it installs is described as `dylease inspect` describes it, from the checked copy:
its manifest (or \"no manifest\", with the passes its check saw it register) and the
prediction of whether it will stay mapped after its unload (for a C++ plugin linked without
the version script: a warning, with the fix).

All the plugins of a host share one namespace of pass names: if two registered the same
pass, a host given DIR would fail to load (with LoadPolicy::Strict, the default, none of
its plugins load), or, with LoadPolicy::SkipFailed, keep the first-loaded plugin's
registration of each shared pass and leave the other's out. A plugin that declares in its
manifest, or registered in its check, a pass that another plugin of DIR declares in its
manifest is not installed: the installer names both plugins and the passes, removes its
temporary copy and leaves DIR as it was. The file it replaces (DIR/NAME, the same file
name) is not compared: installing a new version over itself is no collision. The other
plugins of DIR are judged from their files alone (`PluginHost::catalog`; with the `python`
feature also DIR's Python plugins), with none of their code run. One without a manifest
cannot be compared without running its code, which the installer does not do for plugins
it is not installing, nor can the passes one with an incomplete manifest
(DYLEASE_MANIFEST, the closure form of `export_plugin!`) registers beyond those it
declares: each gets a warning instead (`dylease check DIR` loads them all, and fails on a
pass registered twice). Plugins a host would refuse before running their code (trust, ELF,
manifest, ABI) register nothing, and are not compared.

An older version of a plugin installed over a newer one (the same plugin name, the
versions its manifests declare compared as dotted numbers: 1.10 is newer than 1.9) is
installed, with a warning that names both versions.

DIR must exist: a missing one is not created (the installer says how to create it), since
its owner and mode decide whether hosts trust what is in it.

Text output is wrapped to the terminal's width (100 columns when standard output is not a
terminal), at spaces only, never inside a `quoted` name; each continuation is indented four
columns deeper than its line.

The installed file gets mode 0755 (a Python file 0644, a package's directories 0755).
Exit status: 0 when every file was installed, 1 when one was not (the others are), 2 on a
usage error.";

/// The normative C header, as packaged with this crate.
const HEADER: &str = include_str!("../include/dylease.h");

/// The linker version script for plugins, as packaged with this crate.
const VERSION_SCRIPT: &str = include_str!("../include/dylease.map");

#[forbid(unsafe_code)]
mod sdk;

#[derive(Debug, Args)]
struct CheckArgs {
    #[command(flatten)]
    sources: Sources,

    /// What the checking hosts do when one plugin fails, as the deployment's host does
    /// (`LoadPolicy`): with `skip-failed` a failed plugin is left out (and listed as a
    /// warning) and the others load.
    #[arg(long, value_enum, default_value_t = Policy::Strict)]
    policy: Policy,
}

/// `--trust`: the host's `TrustPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Trust {
    /// `TrustPolicy::Strict`: refuse files other users could have changed.
    Strict,
    /// `TrustPolicy::Permissive`: open whatever is named.
    Permissive,
}

impl Trust {
    fn policy(self) -> dylease::TrustPolicy {
        match self {
            Trust::Strict => dylease::TrustPolicy::Strict,
            Trust::Permissive => dylease::TrustPolicy::Permissive,
        }
    }
}

/// `--policy`: the host's `LoadPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Policy {
    /// `LoadPolicy::Strict`: one failed plugin fails the load.
    Strict,
    /// `LoadPolicy::SkipFailed`: a failed plugin is left out.
    SkipFailed,
}

impl CheckArgs {
    /// The host configuration every check uses.
    fn options(&self) -> check::Options {
        check::Options {
            trust: self.sources.trust.policy(),
            policy: match self.policy {
                Policy::Strict => dylease::LoadPolicy::Strict,
                Policy::SkipFailed => dylease::LoadPolicy::SkipFailed,
            },
            python: self.sources.python,
        }
    }
}

const CHECK_HELP: &str = "\
Each file is loaded by a host of its own. A directory is checked file by file (the files a
host would load, in its order; other entries are listed as not loaded, with the reason),
then as a whole: a host given the directory (`HostBuilder::dir`; with --python also
`HostBuilder::python_dir`) loads all of its plugins or none, and two
plugins that register the same pass name fail it together. With more than one FILE_OR_DIR,
all of them are also checked together, as one host configured with all of them in order.

Checking a plugin runs its code (a library's constructors, register and unload functions;
with --python, a Python plugin's module code and hooks), as loading it in a host does: check
only plugins you would load. `dylease inspect` runs none of it: it prints what the files
declare (their manifests), the refusals a host makes before running a plugin's code, and the
pin prediction. The hosts use the default policies
unless --trust and --policy give the deployment's.

Install plugins by rename (`dylease install`, or `cp` to a temporary name in the same
directory, then `mv`; GNU `install` removes the old file first), never by writing over a
file in place: a library rewritten while a host loads
it kills that host with SIGBUS inside the loader, and no check can prevent it. The checker
warns when a process (one whose descriptors this user may see) has a plugin file open for
writing.

A plugin that stays mapped after its unload is loaded twice and warned about with the cause
its file shows (`-z nodelete`, GNU unique symbols of a C++ build, thread-local destructors)
and the fix; for C++ that is the version script `dylease header --version-script` prints.

Text output is wrapped to the terminal's width (100 columns when standard output is not a
terminal), at spaces only, never inside a `quoted` name; each continuation is indented four
columns deeper than its line.

Exit status: 0 when everything would load, 1 when anything would not, 2 on a usage error.

JSON output (--json): one document on standard output, never wrapped; anything the plugins
themselves print goes to standard error meanwhile.
  {
    \"ok\": bool,                      every check passed
    \"checks\": [{                     in the order of the text output
      \"kind\": \"file\" | \"directory\" | \"together\",
      \"path\": string | null,         as given; null for \"together\"
      \"path_bytes\": [int] | null,    see below
      \"ok\": bool,
      \"plugins\": [{\"name\": string, \"version\": string, \"path\": string,
                   \"path_bytes\": [int] | null,
                   \"passes\": [{\"name\": string,
                               \"interface\": string | null}]}],   in load order; [] when not ok
      \"problem\": null | {\"cause\": string, \"file\": string | null,
                          \"file_bytes\": [int] | null,
                          \"message\": string, \"fix\": string},
      \"warnings\": [string],            for a file: it is open for writing; it stays mapped
                                      after unload (and why); its second load differs;
                                      with --policy skip-failed: each plugin left out
      \"skipped\": [{\"path\": string, \"path_bytes\": [int] | null,
                    \"reason\": string}]   directory entries a host does not load
    }]
  }
File names are bytes, not always UTF-8. A path that is UTF-8 is its string, and its
\"path_bytes\" (\"file_bytes\") is null. One that is not is given escaped, as the text output
gives every path: a byte that is not UTF-8, or a control character, as \\xNN (two hex
digits), a backslash as \\\\; its \"path_bytes\" (\"file_bytes\") holds its exact bytes (numbers
0-255). Messages name such files escaped too. No path is printed with replacement
characters, so two different names never print alike.
\"cause\" is one of: headers (dylease's ELF check refused the file), manifest (dylease's
reading of its manifest refused it: corrupt, a pass declared twice, a format version this
dylease does not read), open (the platform loader refused it), untrusted (the trust check
refused it), missing-entry, abi-mismatch, invalid-plugin, invalid-pass, register-failed,
manifest-mismatch (it registered other passes, or another name or version, than its
manifest declares), duplicate-pass, signature, io, reentrant, other.";

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Check(CheckArgs { sources, .. }) | Command::Inspect(InspectArgs { sources, .. }) = &cli.command
        && sources.python
        && !cfg!(feature = "python")
    {
        eprintln!(
            "dylease: --python: this dylease was built without Python support (build dylease-cli with \
             `--features python`)"
        );
        return ExitCode::from(USAGE);
    }
    let ok = match cli.command {
        Command::Check(args) if args.sources.json => check_json(&args.sources.paths, args.options()),
        Command::Check(args) => check_human(&args.sources.paths, args.options()),
        Command::Inspect(args) => {
            let keyring = match args.signing.keyring() {
                Ok(keyring) => keyring,
                Err(problem) => return usage(&problem),
            };
            let sources = inspect::run(&args.sources.paths, args.options(), keyring.as_ref());
            let ok = sources.iter().all(inspect::Source::ok);
            let written = if args.sources.json {
                print(&inspect::json(&sources))
            } else {
                print_wrapped(&inspect::human(&sources))
            };
            written.map(|()| ok)
        }
        Command::Header(HeaderArgs {
            install: Some(prefix), ..
        }) => sdk::install(&prefix),
        Command::Header(args) if args.version_script => print(VERSION_SCRIPT).map(|()| true),
        Command::Header(_) => print(HEADER).map(|()| true),
        Command::Install(args) => {
            let options = check::Options {
                trust: args.trust.policy(),
                policy: dylease::LoadPolicy::Strict,
                python: false,
            };
            let signing = match args.signing.keyring() {
                Ok(keyring) => sign::Signing {
                    keyring,
                    allow_rollback: args.allow_rollback,
                },
                Err(problem) => return usage(&problem),
            };
            install::run(&args.files, &args.dir, options, &signing, print_wrapped)
        }
        Command::Keygen(args) => match sign::keygen(&args.out) {
            Ok(report) => print(&report).map(|()| true),
            Err(problem) => failed(&problem),
        },
        Command::Sign(args) => match sign::sign(&args) {
            Ok(report) => print_wrapped(&report).map(|()| true),
            Err(problem) => failed(&problem),
        },
        Command::Verify(args) => match args.signing.keyring() {
            Ok(Some(keyring)) => {
                let (report, ok) = sign::verify(&args.paths, &keyring);
                print_wrapped(&report).map(|()| ok)
            }
            Ok(None) => return usage("verify needs the trusted keys: give --keyring PUBFILE (one per key)"),
            Err(problem) => return usage(&problem),
        },
        Command::CheckCopy(args) => {
            let options = check::Options {
                trust: args.trust.policy(),
                policy: dylease::LoadPolicy::Strict,
                python: args.python,
            };
            install::check_copy(&args.file, options, print)
        }
    };
    match ok {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        // The reader went away (`dylease check | head`): stop quietly, with the status a shell
        // reports for a tool that SIGPIPE killed, so that `set -o pipefail` sees the report
        // was not read to the end and no verdict is claimed for checks that did not run.
        Err(error) if error.kind() == io::ErrorKind::BrokenPipe => ExitCode::from(BROKEN_PIPE),
        Err(error) => {
            eprintln!("dylease: cannot write the report: {error}");
            ExitCode::FAILURE
        }
    }
}

/// A usage error's status, as clap's.
const USAGE: u8 = 2;

/// A usage error the arguments' parser cannot see (a key id or a pair that does not parse).
fn usage(problem: &str) -> ExitCode {
    eprintln!("dylease: {problem}");
    ExitCode::from(USAGE)
}

/// A command that failed: its problem on standard error, and status 1.
fn failed(problem: &str) -> io::Result<bool> {
    eprintln!("dylease: {problem}");
    Ok(false)
}

/// 128 + SIGPIPE, as shells report a process that SIGPIPE killed.
const BROKEN_PIPE: u8 = 141;

/// Text, printed as each check finishes (anything a plugin prints appears next to its check).
fn check_human(paths: &[PathBuf], options: check::Options) -> io::Result<bool> {
    let mut report = report::Human::default();
    let mut ok = true;
    let mut written = Ok(());
    // Once the report cannot be written, the remaining checks would load plugins for nobody.
    let _ = check::run(paths, options, |check| {
        ok &= check.ok();
        stdout::flush_plugins();
        written = print_wrapped(&report.check(&check));
        match written {
            Ok(()) => ControlFlow::Continue(()),
            Err(_) => ControlFlow::Break(()),
        }
    });
    written?;
    print_wrapped(&report.summary())?;
    Ok(ok)
}

/// One JSON document, printed when every check is done.
fn check_json(paths: &[PathBuf], options: check::Options) -> io::Result<bool> {
    let mut checks = Vec::new();
    {
        // Plugins may print while they load and unload; standard output must hold the
        // document alone.
        let _redirect = stdout::to_stderr();
        let _ = check::run(paths, options, |check| {
            checks.push(check);
            ControlFlow::Continue(())
        });
    }
    print(&report::json(&checks))?;
    Ok(checks.iter().all(check::Check::ok))
}

/// Text for people, wrapped to the terminal's width (`wrap`).
fn print_wrapped(text: &str) -> io::Result<()> {
    print(&wrap::wrap(text, wrap::width()))
}

fn print(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}
