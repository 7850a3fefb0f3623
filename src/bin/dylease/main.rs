//! `dylease`: the command-line companion of the dylease crate.
//!
//! `dylease check <file-or-dir>...` loads plugins exactly as a `PluginHost` would (the same
//! discovery, pipeline and checks, through the crate's public API), reports each plugin with
//! its version and passes and each problem with the file and a fix, and exits with 0 only when
//! everything would load. `dylease install <file>... <dir>` installs plugins atomically (a
//! checked temporary file renamed into place). `dylease header` prints `include/dylease.h`
//! for C builds. Built
//! only with the `cli` feature:
//!
//! ```sh
//! cargo run --features cli --bin dylease -- check path/to/plugins/
//! ```

use std::io::{self, Write as _};
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};

mod advice;
mod check;
mod install;
mod report;
mod rewrite;
mod stdout;

/// Checks dylease plugins the way a host loads them.
#[derive(Debug, Parser)]
#[command(name = "dylease", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Loads plugin files and directories exactly as a host would, and reports what loads,
    /// what does not, and why.
    #[command(after_long_help = CHECK_HELP)]
    Check(CheckArgs),
    /// Prints `dylease.h`, the C header plugins are built with (the copy of this dylease
    /// version): `dylease header > dylease.h`.
    Header,
    /// Installs plugin files into a directory that running hosts read, atomically: each is
    /// written under a temporary name in DIR, flushed, checked as `check` does, and renamed
    /// into place only if it would load.
    #[command(after_long_help = INSTALL_HELP)]
    Install(InstallArgs),
}

#[derive(Debug, Args)]
struct InstallArgs {
    /// Plugin library files to install (named `*.so`: the name they get in DIR).
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,

    /// The plugin directory the hosts read.
    #[arg(value_name = "DIR")]
    dir: PathBuf,
}

const INSTALL_HELP: &str = "\
A host that loads while a plugin is installed sees the old file or the new one, whole: the
new file is written as `.NAME.dylease-install-PID` inside DIR (a name no host loads),
flushed to disk, checked by loading it in a host of its own (which runs its code, as
`dylease check` does), and renamed over DIR/NAME, which the file system does atomically.
A file that would not load is removed again and DIR stays as it was.

GNU `install` does not do this: it removes the old file and writes the new one under its
final name, so a host loading meanwhile finds no file, or half of one. By hand: `cp` to a
temporary name in the same directory, then `mv`.

The installed file gets mode 0755. Exit status: 0 when every file was installed, 1 when one
was not (the others are), 2 on a usage error.";

/// The normative C header, as packaged with this crate.
const HEADER: &str = include_str!("../../../include/dylease.h");

#[derive(Debug, Args)]
struct CheckArgs {
    /// Plugin library files, and directories of them (as `HostBuilder::dir` reads them).
    #[arg(required = true, value_name = "FILE_OR_DIR")]
    paths: Vec<PathBuf>,

    /// Print one JSON document on standard output instead of text (schema in --help).
    #[arg(long)]
    json: bool,
}

const CHECK_HELP: &str = "\
Each file is loaded by a host of its own. A directory is checked file by file (the files a
host would load, in its order; other entries are listed as not loaded, with the reason),
then as a whole: a host given the directory loads all of its plugins or none, and two
plugins that register the same pass name fail it together. With more than one FILE_OR_DIR,
all of them are also checked together, as one host configured with all of them in order.

Checking a plugin runs its code (constructors, register and unload functions), as loading
it in a host does: check only plugins you would load.

Install plugins by rename (`dylease install`, or `cp` to a temporary name in the same
directory, then `mv`; GNU `install` removes the old file first), never by writing over a
file in place: a library rewritten while a host loads
it kills that host with SIGBUS inside the loader, and no check can prevent it. The checker
warns when a plugin file changed less than 10 s ago and this user can write it.

Exit status: 0 when everything would load, 1 when anything would not, 2 on a usage error.

JSON output (--json): one document on standard output; anything the plugins themselves
print goes to standard error meanwhile.
  {
    \"ok\": bool,                      every check passed
    \"checks\": [{                     in the order of the text output
      \"kind\": \"file\" | \"directory\" | \"together\",
      \"path\": string | null,         as given; null for \"together\"
      \"ok\": bool,
      \"plugins\": [{\"name\": string, \"version\": string, \"path\": string,
                   \"passes\": [{\"name\": string,
                               \"interface\": string | null}]}],   in load order; [] when not ok
      \"problem\": null | {\"cause\": string, \"file\": string | null,
                          \"message\": string, \"fix\": string},
      \"warnings\": [string],            for a file: it may still be being written; it stays
                                      mapped after unload; its second load differs
      \"skipped\": [{\"path\": string, \"reason\": string}]   directory entries a host does not load
    }]
  }
\"cause\" is one of: headers (dylease's ELF check refused the file), open (the platform
loader refused it), missing-entry, abi-mismatch, invalid-plugin, invalid-pass,
register-failed, duplicate-pass, io, reentrant, other.";

fn main() -> ExitCode {
    let ok = match Cli::parse().command {
        Command::Check(args) if args.json => check_json(&args.paths),
        Command::Check(args) => check_human(&args.paths),
        Command::Header => print(HEADER).map(|()| true),
        Command::Install(args) => install::run(&args.files, &args.dir, print),
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

/// 128 + SIGPIPE, as shells report a process that SIGPIPE killed.
const BROKEN_PIPE: u8 = 141;

/// Text, printed as each check finishes (anything a plugin prints appears next to its check).
fn check_human(paths: &[PathBuf]) -> io::Result<bool> {
    let mut report = report::Human::default();
    let mut ok = true;
    let mut written = Ok(());
    // Once the report cannot be written, the remaining checks would load plugins for nobody.
    let _ = check::run(paths, |check| {
        ok &= check.ok();
        stdout::flush_plugins();
        written = print(&report.check(&check));
        match written {
            Ok(()) => ControlFlow::Continue(()),
            Err(_) => ControlFlow::Break(()),
        }
    });
    written?;
    print(&report.summary())?;
    Ok(ok)
}

/// One JSON document, printed when every check is done.
fn check_json(paths: &[PathBuf]) -> io::Result<bool> {
    let mut checks = Vec::new();
    {
        // Plugins may print while they load and unload; standard output must hold the
        // document alone.
        let _redirect = stdout::to_stderr();
        let _ = check::run(paths, |check| {
            checks.push(check);
            ControlFlow::Continue(())
        });
    }
    print(&report::json(&checks))?;
    Ok(checks.iter().all(check::Check::ok))
}

fn print(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}
