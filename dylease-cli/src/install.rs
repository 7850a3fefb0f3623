//! `dylease install FILE... DIR`: installs plugin files where running hosts read them, the
//! one way a host can never see half of one: each file is written inside DIR without a name
//! (`O_TMPFILE`), flushed to disk, given a temporary name (`.NAME.dylease-install-PID-
//! RANDOM`, which no host loads), checked as `dylease check` checks a file, and only then
//! renamed over its final name, which is atomic within one file system. A host loading
//! meanwhile sees the old file or the new one, whole.
//!
//! The check needs the copy named in DIR (a host judges a file's trust by its directory and
//! resolves `$ORIGIN` by it), so the name exists from the check to the rename. An installer
//! killed meanwhile cannot remove it; the next install into DIR does (`remove_stale`): the
//! name carries the installer's process id.
//!
//! The check runs in a child process (this binary again, with the hidden `check-copy`
//! command): loading a plugin runs its code, and a constructor that aborts, or a file that
//! makes the loader give up on the process, ends that child, not the installer, which still
//! removes its temporary file and says why. The child ends with the installer
//! (`sys::end_with_parent`).
//!
//! Python plugins (with the `python` feature) are installed as `HostBuilder::python_dir`
//! loads them: a `.py` file, or a package (a directory with an `__init__.py`). The copy is
//! made under its own name inside a hidden temporary directory in DIR (`.NAME.dylease-install-
//! PID-RANDOM`, which no host loads), flushed and checked there (as `python_file` loads it), then
//! renamed into place. A package that replaces an installed one cannot be renamed over it (a
//! rename never replaces a directory that is not empty): the two trees are exchanged in one
//! step (`renameat2` with `RENAME_EXCHANGE`, Linux), and the old tree, now in the temporary
//! directory, is removed with it. A host sees the old package or the new one, whole.
//!
//! Before the rename, what is installed is compared with the other plugins of DIR (`compare`),
//! from their files alone (`PluginHost::catalog`, which runs no plugin code): a pass the new
//! plugin declares in its manifest, or registered in its check, that another plugin declares
//! in its manifest makes a host given DIR fail to load (with `LoadPolicy::SkipFailed`, leave
//! out one plugin's pass), so the file is not installed.
//! The file it replaces (the same name in DIR) is not compared. Another plugin without a
//! manifest, or with an incomplete one (for the passes it does not declare), gets a warning: only loading it (running its code) would tell its passes, and
//! the installer runs the code of the file it installs only. The manifest and pin
//! prediction of the installed file are printed under it.
//!
//! GNU `install` is not that: it removes the old file, creates the new one under the final
//! name and then writes it, so a host loading meanwhile finds no file, or a truncated one.

use std::ffi::{OsStr, OsString};
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt, PermissionsExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use dylease::{CatalogEntry, Manifest, PluginHost};

use crate::check::{self, Check};
use crate::sign::Signing;
use crate::{inspect, names, python, report, stdout, sys};

/// The hidden command a child process checks the temporary copy with.
pub(crate) const CHECK_COPY: &str = "check-copy";

/// What the child prints first on standard output when the copy would load, then what loaded.
const LOADS: &str = "loads\n";
/// What the child prints first when the copy would not load, then the check's report.
const REFUSED: &str = "refused\n";

/// Installs every file into `dir`, reporting each through `say`. `Ok(false)` when a file was
/// not installed (the others are); `Err` only when the report cannot be written.
pub(crate) fn run(
    files: &[PathBuf],
    dir: &Path,
    options: check::Options,
    signing: &Signing,
    say: impl FnMut(&str) -> io::Result<()>,
) -> io::Result<bool> {
    run_with(files, dir, (options, signing), &mut Real, say)
}

/// [`run`] through `seam`'s file operations and check.
fn run_with(
    files: &[PathBuf],
    dir: &Path,
    (options, signing): (check::Options, &Signing),
    seam: &mut impl Seam,
    mut say: impl FnMut(&str) -> io::Result<()>,
) -> io::Result<bool> {
    if let Some(problem) = not_a_directory(dir) {
        say(&format!("not installed: {problem}\n"))?;
        return Ok(false);
    }
    for line in remove_stale(dir) {
        say(&format!("{line}\n"))?;
    }
    let mut ok = true;
    for file in files {
        let text = match install(file, dir, (options, signing), seam) {
            Ok(Installed { to, what, details }) => {
                let mut text = format!(
                    "installed `{}` as `{}` ({what})\n",
                    names::escape(file),
                    names::escape(&to)
                );
                for line in details {
                    text.push_str(DETAIL);
                    text.push_str(&line);
                    text.push('\n');
                }
                text
            }
            Err(Refused::Check(report)) => {
                ok = false;
                format!(
                    "not installed: `{}` would not load, so `{}` is unchanged:\n{report}",
                    names::escape(file),
                    names::escape(dir),
                )
            }
            Err(Refused::Crashed { how, to }) => {
                ok = false;
                format!(
                    "not installed: the process that checked `{}` {how} before it gave a verdict, so `{}` \
                     was left as it was and the temporary copy was removed. The plugin's code (a \
                     constructor, `on_load`, its registration or `on_unload`) or the platform loader ended \
                     that process: run `dylease check {}` to see what it printed, then fix the plugin and \
                     install it again\n",
                    names::escape(file),
                    names::escape(&to),
                    names::escape(file),
                )
            }
            Err(Refused::Io(message) | Refused::Collision(message)) => {
                ok = false;
                format!("not installed: {message}\n")
            }
        };
        say(&text)?;
    }
    Ok(ok)
}

/// Why `dir` cannot be installed into, with the fix, when it is missing or no directory.
/// Another failure to reach it is said by the first step that fails.
fn not_a_directory(dir: &Path) -> Option<String> {
    match fs::metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Some(format!(
            "`{}` does not exist: create it first (`mkdir -p -m 755 {}`), then install again",
            names::escape(dir),
            names::shell_word(dir)
        )),
        Ok(metadata) if !metadata.is_dir() => Some(format!(
            "`{}` is not a directory: name the plugin directory the hosts read",
            names::escape(dir)
        )),
        _ => None,
    }
}

/// What the check of a temporary copy found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// It would load: what loaded, as a phrase (`plugin `x` 1.2, 3 passes`), and the names of
    /// the passes it registered.
    Loads(String, Vec<String>),
    /// It would not load: the check's report.
    Refused(String),
    /// The checking process ended without a verdict: how, as a phrase ("was killed by signal 6
    /// (SIGABRT)", "exited with status 127").
    Crashed(String),
}

/// The steps of an install that tests watch or replace: the creation of the unnamed copy,
/// the temporary names it tries, the flush of the copy, its naming, the check, the rename and
/// the flush of the directory. Each default is what `dylease install` does; a test that
/// records a step still performs the real one.
pub(crate) trait Seam {
    /// Creates an unnamed file in `dir` (`O_TMPFILE`), where the copy is written: a copy
    /// that has no name leaves nothing behind when the installer is killed.
    fn unnamed(&mut self, dir: &Path) -> io::Result<File> {
        create_unnamed(dir)
    }

    /// The temporary name to try for the plugin file `name`, at the `attempt`-th try (from 0).
    fn temporary_name(&mut self, name: &OsStr, attempt: u32) -> OsString {
        let _ = attempt;
        random_name(name)
    }

    /// Flushes the written copy `file` to disk. `path` names it for the record: the name it
    /// is installed as (a library's copy, which may have no name yet), or its own path (a
    /// file of a Python plugin's copy).
    fn sync(&mut self, file: &File, path: &Path) -> io::Result<()> {
        let _ = path;
        file.sync_all()
    }

    /// Gives the unnamed copy `file` the temporary name `to`; `AlreadyExists` if anything
    /// is there (which is left alone, a symbolic link not followed).
    fn link(&mut self, file: &File, to: &Path) -> io::Result<()> {
        sys::link_open_file(file, to)
    }

    /// Checks the copy at `partial` as the deployment's host would load it.
    fn check(&mut self, partial: &Path, options: check::Options) -> io::Result<Verdict> {
        check_in_child(partial, options)
    }

    /// Renames the checked copy over its final name.
    fn rename(&mut self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    /// Flushes the directory, which makes the rename durable.
    fn sync_dir(&mut self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
}

/// The install `dylease install` runs.
struct Real;

impl Seam for Real {}

/// A file renamed into place.
struct Installed {
    /// Its final name.
    to: PathBuf,
    /// What loaded, as a phrase.
    what: String,
    /// Lines about it: its manifest, its pin prediction, the plugins of the directory whose
    /// passes could not be compared with its own.
    details: Vec<String>,
}

/// The indentation of the lines under an installed file.
const DETAIL: &str = "        ";

/// Why a file was not installed (the directory is as it was).
enum Refused {
    /// The file was copied and checked, and would not load: the check's report.
    Check(String),
    /// The process that checked the copy ended without a verdict: how, and the target that
    /// was left as it was.
    Crashed { how: String, to: PathBuf },
    /// The file could not be copied, or renamed into place: why, naming the path.
    Io(String),
    /// It would load, but declares or registers a pass that another plugin of the directory
    /// declares: a host given the directory would fail to load (or, with
    /// `LoadPolicy::SkipFailed`, leave out the second's pass). Both plugins and the pass.
    Collision(String),
}

/// Installs `file` into `dir` through `seam`: copied under a temporary name, flushed,
/// checked, renamed over its final name, and the directory flushed; the temporary copy is
/// removed on every other way out.
fn install(
    file: &Path,
    dir: &Path,
    (options, signing): (check::Options, &Signing),
    seam: &mut impl Seam,
) -> Result<Installed, Refused> {
    let io = |what: &str, path: &Path, e: io::Error| Refused::Io(format!("{what} `{}`: {e}", names::escape(path)));
    let Some(name) = file.file_name() else {
        return Err(Refused::Io(format!("`{}` names no file", names::escape(file))));
    };
    if python::is_plugin(file) {
        return install_python(file, name, dir, (options, signing), seam);
    }
    let suffix = std::env::consts::DLL_SUFFIX;
    if !name.to_string_lossy().ends_with(suffix) || name.len() == suffix.len() {
        return Err(Refused::Io(format!(
            "`{}` is not named like a plugin library (`*{}`): a host reading `{}` would not load it",
            names::escape(file),
            suffix,
            names::escape(dir)
        )));
    }
    let to = dir.join(name);
    let mut source = open_source(file).map_err(|e| io("cannot read", file, e))?;
    let copying = format!("cannot copy `{}` into", names::escape(file));
    let mut temporary = match seam.unnamed(dir) {
        Ok(mut copy) => {
            write_copy(&mut source, &mut copy, 0o755).map_err(|e| io(&copying, dir, e))?;
            seam.sync(&copy, &to).map_err(|e| io(&copying, dir, e))?;
            // Named only now, flushed: the check needs a name in `dir` (a host checks the
            // directory's trust and resolves `$ORIGIN` by it). Closed before the check: the
            // checker warns about a file open for writing.
            let partial =
                link_partial(dir, name, &copy, seam).map_err(|e| io("cannot name the temporary copy in", dir, e))?;
            Temporary::new(partial)
        }
        Err(e) if no_unnamed_files(&e) => {
            // A file system without `O_TMPFILE`: the copy is written under its temporary name.
            let (partial, mut copy) =
                create_partial(dir, name, seam).map_err(|e| io("cannot create a temporary file in", dir, e))?;
            // From here on the temporary file is ours: removed unless renamed into place.
            let temporary = Temporary::new(partial);
            write_copy(&mut source, &mut copy, 0o755).map_err(|e| io(&copying, dir, e))?;
            seam.sync(&copy, &to).map_err(|e| io(&copying, dir, e))?;
            temporary
        }
        Err(e) => return Err(io("cannot create a temporary file in", dir, e)),
    };
    let partial = temporary.path.clone();
    // Its signature first, on the copy that will be renamed: an unsigned or changed copy runs
    // no code, not even in the check.
    let signed = signing.check(&partial, file, &to).map_err(Refused::Io)?;
    let verdict = seam
        .check(&partial, options)
        .map_err(|e| io("cannot run the check of", file, e))?;
    let (what, registered) = match verdict {
        Verdict::Loads(what, registered) => (what, registered),
        Verdict::Refused(report) => return Err(Refused::Check(as_named(&report, &partial, file))),
        Verdict::Crashed(how) => return Err(Refused::Crashed { how, to }),
    };
    // The host is only asked for its catalog, which maps nothing and runs none of the copy's
    // code (the check above ran it, in a process of its own).
    let copy = inspect::catalog(sys::add_file(PluginHost::builder(), &partial), options);
    let mut details = compare(file, name, dir, copy, &registered, options).map_err(Refused::Collision)?;
    details.extend(signed);
    seam.rename(&partial, &to).map_err(|e| {
        io(
            &format!("cannot rename the checked copy of `{}` to", names::escape(file)),
            &to,
            e,
        )
    })?;
    temporary.renamed = true;
    // The rename itself is durable once the directory is.
    seam.sync_dir(dir)
        .map_err(|e| io("cannot flush the directory", dir, e))?;
    Ok(Installed { to, what, details })
}

/// The report of the check of the copy at `checked` as the user reads it: about `file`, the
/// file they named, which the copy was made from. The copy's name (hidden, temporary, gone by
/// the time the report is read) is replaced wherever the report gives it: in the escaped
/// form of the status line and in the form of the messages, whose UTF-8 components are as
/// they are; a package's modules (`checked/mod.py`) become the user's (`file/mod.py`).
fn as_named(report: &str, checked: &Path, file: &Path) -> String {
    let in_message = |path: &Path| names::in_message(&path.to_string_lossy(), &[path]);
    let mut report = report.replace(&names::escape(checked), &names::escape(file));
    if in_message(checked) != names::escape(checked) {
        report = report.replace(&in_message(checked), &in_message(file));
    }
    report
}

/// What the plugins already in `dir` (as a host reads it: `HostBuilder::dir` and, with the
/// `python` feature, `python_dir`) declare, compared with the new plugin `file`, installed as
/// `name`: `copy` is the catalog of its checked copy, `registered` the passes its check saw it
/// register. A plugin of the directory named `name` is the one it replaces, and not compared.
///
/// `Ok` with the lines to print under the install (the new plugin's manifest and pin
/// prediction; each plugin of the directory without a manifest or with an incomplete one,
/// whose passes only loading it would tell); `Err` naming both plugins and each pass when the new plugin declares or
/// registers a pass that one of the directory declares. Runs none of the plugins' code.
fn compare(
    file: &Path,
    name: &OsStr,
    dir: &Path,
    copy: Result<Vec<CatalogEntry>, check::Problem>,
    registered: &[String],
    options: check::Options,
) -> Result<Vec<String>, String> {
    let mut details = Vec::new();
    let copy = copy.ok().and_then(|entries| entries.into_iter().next());
    let manifest = copy.as_ref().and_then(CatalogEntry::manifest);
    match manifest {
        Some(manifest) => details.push(format!("manifest: {}", inspect::describe(manifest))),
        None => details.push(format!(
            "no manifest: what it registers is known only by loading it; its check (in a process of its own) \
             saw {}",
            match registered {
                [] => "no passes".to_owned(),
                passes => passes
                    .iter()
                    .map(|pass| format!("`{pass}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
            }
        )),
    }
    if let Some(copy) = &copy {
        details.extend(inspect::pin_lines(copy.pinning()));
    }
    // Its passes: those it declares, and those its check saw it register.
    let mut passes: Vec<&str> = manifest
        .into_iter()
        .flat_map(|m| m.passes().iter().map(|pass| pass.name.as_str()))
        .collect();
    for pass in registered {
        if !passes.contains(&pass.as_str()) {
            passes.push(pass);
        }
    }
    // As for the copy: a catalog runs none of the directory's plugins' code.
    let builder = sys::add_python_dir(sys::add_dir(PluginHost::builder(), dir), dir);
    // `Err` only for a host that cannot be built: a directory that cannot be listed is an
    // entry refused with `Error::Io`, passed over below as every refusal is (the rename into
    // it then fails, and says why).
    let Ok(others) = inspect::catalog(builder, options) else {
        return Ok(details);
    };
    let new = match manifest {
        Some(manifest) => format!("`{}` (plugin `{}`)", names::escape(file), manifest.name()),
        None => format!("`{}`", names::escape(file)),
    };
    let mut collisions = Vec::new();
    for other in &others {
        let Some(path) = other.origin().path() else { continue };
        // Plugins a host refuses before running their code register nothing.
        if other.refusal().is_some() {
            continue;
        }
        // The file it replaces is no collision; an older version replacing it is warned about.
        if path.file_name() == Some(name) {
            details.extend(manifest.and_then(|new| older_over_newer(new, other.manifest()?, path)));
            continue;
        }
        let Some(declared) = other.manifest() else {
            details.push(format!(
                "warning: cannot tell whether `{}` declares the same passes: it has no manifest; `dylease check \
                 {}{}` loads it (and runs its code)",
                names::escape(path),
                if python::is_plugin(path) { "--python " } else { "" },
                names::escape(dir)
            ));
            continue;
        };
        if !declared.is_complete() {
            // It may register passes it does not declare (DYLEASE_MANIFEST, the closure form of
            // `export_plugin!`, a Python plugin whose registration the reader cannot follow):
            // those it declares are compared below, the others cannot be without running it.
            details.push(format!(
                "warning: cannot tell whether `{}` registers the same passes: its manifest is incomplete (it \
                 may register passes it does not declare){}; `dylease check {}{}` loads it (and runs its code)",
                names::escape(path),
                match declared.passes() {
                    [] => ", and declares none",
                    _ => "",
                },
                if python::is_plugin(path) { "--python " } else { "" },
                names::escape(dir)
            ));
        }
        let shared: Vec<String> = declared
            .passes()
            .iter()
            .filter(|pass| passes.contains(&pass.name.as_str()))
            .map(|pass| format!("`{}`", pass.name))
            .collect();
        if !shared.is_empty() {
            collisions.push(format!(
                "{new} {} {} {}, which `{}` (plugin `{}`), already in `{}`, declares too",
                if manifest.is_some() { "declares" } else { "registers" },
                if shared.len() == 1 { "pass" } else { "passes" },
                shared.join(", "),
                names::escape(path),
                declared.name(),
                names::escape(dir)
            ));
        }
    }
    if collisions.is_empty() {
        return Ok(details);
    }
    Err(format!(
        "{}: {}; so `{}` is unchanged and the temporary copy was removed. Rename the pass in one of the \
         plugins, or take the other plugin out of the directory first",
        collisions.join("; "),
        inspect::shared_pass(dir),
        names::escape(dir)
    ))
}

/// The warning for the plugin `new` replacing `old` (at `path`), the same plugin of a
/// newer version, when it does: both versions as their manifests declare them, compared as
/// dotted release numbers (`1.10` is newer than `1.9`; `1.0` and `1.0.0` are the same).
/// `None` for another plugin's name, the same or a newer version, or versions that are not
/// only numbers and dots.
fn older_over_newer(new: &Manifest, old: &Manifest, path: &Path) -> Option<String> {
    if new.name() != old.name() || release(new.version())? >= release(old.version())? {
        return None;
    }
    Some(format!(
        "warning: version {} of plugin `{}` replaces version {}, a newer one, at `{}`: install version {} \
         again if that was not meant",
        new.version(),
        new.name(),
        old.version(),
        names::escape(path),
        old.version()
    ))
}

/// `version` as a release to compare: its dot-separated numbers without trailing zeros
/// (`1.10.0` is `[1, 10]`, greater than `1.9`'s `[1, 9]`). `None` unless it is only decimal
/// numbers and dots.
fn release(version: &str) -> Option<Vec<u64>> {
    let mut numbers = version
        .split('.')
        .map(|n| {
            if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            n.parse().ok()
        })
        .collect::<Option<Vec<u64>>>()?;
    while numbers.last() == Some(&0) {
        numbers.pop();
    }
    Some(numbers)
}

/// Installs the Python plugin `file` (a `.py` file or a package directory), named `name`,
/// into `dir` through `seam`: copied under its own name into a new hidden directory in `dir`,
/// flushed, checked as `python_file` loads it, and renamed into place (a package over an
/// installed one: exchanged with it). The temporary directory, with the old package in it
/// after an exchange, is removed on every way out.
fn install_python(
    file: &Path,
    name: &OsStr,
    dir: &Path,
    (options, signing): (check::Options, &Signing),
    seam: &mut impl Seam,
) -> Result<Installed, Refused> {
    let io = |what: &str, path: &Path, e: io::Error| Refused::Io(format!("{what} `{}`: {e}", names::escape(path)));
    if !cfg!(feature = "python") {
        return Err(Refused::Io(format!(
            "`{}` is a Python plugin, and this dylease was built without Python support (build \
             dylease-cli with `--features python`)",
            names::escape(file)
        )));
    }
    if name.as_encoded_bytes().starts_with(b"_") || name.as_encoded_bytes().starts_with(b".") {
        return Err(Refused::Io(format!(
            "`{}` is named like no Python plugin (a name starting with `_` or `.`): a host reading \
             `{}` with `python_dir` would not load it",
            names::escape(file),
            names::escape(dir)
        )));
    }
    let to = dir.join(name);
    let package = fs::metadata(file).map_err(|e| io("cannot read", file, e))?.is_dir();
    let staging = create_staging(dir, name, seam).map_err(|e| io("cannot create a temporary directory in", dir, e))?;
    // From here on the temporary directory is ours: removed, whatever it then holds.
    let _staging = Staging(&staging);
    let copy = staging.join(name);
    let copying = format!("cannot copy `{}` into", names::escape(file));
    if package {
        copy_tree(file, &copy, seam).map_err(|e| io(&copying, dir, e))?;
    } else {
        let mut source = open_source(file).map_err(|e| io("cannot read", file, e))?;
        let mut written = create_new(&copy).map_err(|e| io(&copying, dir, e))?;
        write_copy(&mut source, &mut written, 0o644).map_err(|e| io(&copying, dir, e))?;
        seam.sync(&written, &copy).map_err(|e| io(&copying, dir, e))?;
    }
    seam.sync_dir(&staging).map_err(|e| {
        io(
            &format!("cannot flush the copy of `{}` in", names::escape(file)),
            dir,
            e,
        )
    })?;
    let options = check::Options {
        python: true,
        ..options
    };
    let signed = signing.check(&copy, file, &to).map_err(Refused::Io)?;
    let verdict = seam
        .check(&copy, options)
        .map_err(|e| io("cannot run the check of", file, e))?;
    let (what, registered) = match verdict {
        Verdict::Loads(what, registered) => (what, registered),
        Verdict::Refused(report) => return Err(Refused::Check(as_named(&report, &copy, file))),
        Verdict::Crashed(how) => return Err(Refused::Crashed { how, to }),
    };
    // The host is only asked for its catalog, which executes none of the copy's code.
    let catalog = inspect::catalog(sys::add_python_file(PluginHost::builder(), &copy), options);
    let mut details = compare(file, name, dir, catalog, &registered, options).map_err(Refused::Collision)?;
    details.extend(signed);
    let replaces_a_directory = fs::symlink_metadata(&to).is_ok_and(|m| m.is_dir());
    if package && replaces_a_directory {
        // The old tree ends up in the temporary directory, removed with it.
        sys::exchange(&copy, &to).map_err(|e| {
            io(
                &format!("cannot exchange the checked copy of `{}` with", names::escape(file)),
                &to,
                e,
            )
        })?;
    } else {
        seam.rename(&copy, &to).map_err(|e| {
            io(
                &format!("cannot rename the checked copy of `{}` to", names::escape(file)),
                &to,
                e,
            )
        })?;
    }
    seam.sync_dir(dir)
        .map_err(|e| io("cannot flush the directory", dir, e))?;
    Ok(Installed { to, what, details })
}

/// Creates a new hidden directory in `dir` for installing `name`, under a name from `seam`
/// (mode 0755): an existing name is never used, another is drawn.
fn create_staging(dir: &Path, name: &OsStr, seam: &mut impl Seam) -> io::Result<PathBuf> {
    for attempt in 0..64 {
        let staging = dir.join(seam.temporary_name(name, attempt));
        match fs::create_dir(&staging) {
            Ok(()) => {
                fs::set_permissions(&staging, fs::Permissions::from_mode(0o755))?;
                return Ok(staging);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(io::ErrorKind::AlreadyExists, "no unused temporary name"))
}

/// Copies the package directory `from` to the new directory `to`: its regular files (mode
/// 0644) and subdirectories (0755), each flushed, but not `__pycache__` (which a host never
/// reads). Anything else (a symbolic link, a device) is refused.
fn copy_tree(from: &Path, to: &Path, seam: &mut impl Seam) -> io::Result<()> {
    fs::create_dir(to)?;
    fs::set_permissions(to, fs::Permissions::from_mode(0o755))?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let name = entry.file_name();
        if name == "__pycache__" {
            continue;
        }
        let (source, copy) = (entry.path(), to.join(&name));
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_tree(&source, &copy, seam)?;
        } else if kind.is_file() {
            let mut read = open_source(&source)?;
            let mut written = create_new(&copy)?;
            write_copy(&mut read, &mut written, 0o644)?;
            seam.sync(&written, &copy)?;
        } else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{}` is not a regular file or directory", names::escape(&source)),
            ));
        }
    }
    seam.sync_dir(to)
}

/// Removes the temporary directory of a Python install, with whatever it holds.
struct Staging<'a>(&'a Path);

impl Drop for Staging<'_> {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(self.0);
    }
}

/// Opens the file to install: a regular file (never blocking on a FIFO, say).
fn open_source(from: &Path) -> io::Result<File> {
    let source = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(from)?;
    if !source.metadata()?.is_file() {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "it is not a regular file"));
    }
    Ok(source)
}

/// What the temporary names of installs have between the plugin's name and the installer's
/// process id: `.NAME.dylease-install-PID-RANDOM`.
const TEMPORARY_MARK: &str = ".dylease-install-";

/// A hidden name without the library suffix (no host reading the directory loads it) for a
/// temporary copy of `name`: `.NAME.dylease-install-PID-RANDOM`, with this installer's
/// process id (an install that finds the name of a process that no longer exists removes
/// it: `remove_stale`) and 16 random hex digits, so that nobody can plant it in advance.
fn random_name(name: &OsStr) -> OsString {
    use std::hash::{BuildHasher, Hasher};
    // std's per-process random hash keys, fresh for each `RandomState`.
    let mut random = std::collections::hash_map::RandomState::new().build_hasher();
    random.write_u32(std::process::id());
    format!(
        ".{}{TEMPORARY_MARK}{}-{:016x}",
        name.to_string_lossy(),
        std::process::id(),
        random.finish()
    )
    .into()
}

/// The process id in `name` when it is a temporary name of an install (`random_name`'s
/// pattern exactly), else `None`.
fn installer_of(name: &OsStr) -> Option<u32> {
    let rest = name.to_str()?.strip_prefix('.')?;
    let (plugin, tail) = rest.rsplit_once(TEMPORARY_MARK)?;
    let (pid, random) = tail.split_once('-')?;
    let digits = |text: &str| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit());
    let hex = random.len() == 16 && random.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if plugin.is_empty() || !digits(pid) || !hex {
        return None;
    }
    pid.parse().ok()
}

/// Removes from `dir` what installs that ended before they finished left there (killed, or
/// the machine stopped): each entry with a temporary name of an install (`random_name`'s
/// pattern) whose process no longer exists, and that belongs to this user (another user's
/// is not this installer's to remove). A file, or a Python install's directory with what it
/// holds. Says what it removed, one line each.
fn remove_stale(dir: &Path) -> Vec<String> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let me = sys::effective_uid();
    let mut removed = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let Some(pid) = installer_of(&entry.file_name()) else {
            continue;
        };
        let Ok(metadata) = entry.path().symlink_metadata() else {
            continue;
        };
        if metadata.uid() != me || sys::process_exists(pid) {
            continue;
        }
        let path = entry.path();
        let gone = if metadata.is_dir() {
            fs::remove_dir_all(&path)
        } else {
            fs::remove_file(&path)
        };
        if gone.is_ok() {
            removed.push(format!(
                "removed `{}`, the temporary copy of an install (process {pid}) that ended before it finished",
                names::escape(&path)
            ));
        }
    }
    removed.sort();
    removed
}

/// Creates an unnamed file in `dir`, open for writing (`O_TMPFILE`, which keeps it
/// linkable); it is gone when closed unless given a name (`Seam::link`).
#[cfg(target_os = "linux")]
fn create_unnamed(dir: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .mode(0o755)
        .custom_flags(libc::O_TMPFILE | libc::O_CLOEXEC)
        .open(dir)
}

/// No unnamed files here: every copy is written under its temporary name.
#[cfg(not(target_os = "linux"))]
fn create_unnamed(_: &Path) -> io::Result<File> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "no O_TMPFILE"))
}

/// Whether `error`, from [`create_unnamed`], means that the file system (or the kernel)
/// makes no unnamed files, so that the copy is to be written under its temporary name.
fn no_unnamed_files(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::Unsupported
        || matches!(
            error.raw_os_error(),
            Some(libc::EOPNOTSUPP | libc::EISDIR | libc::EINVAL)
        )
}

/// Gives the unnamed copy `copy` a temporary name in `dir` for `name`, drawn from `seam`: an
/// existing name (a file, or a symbolic link, anyone planted) is never replaced or followed:
/// another is drawn.
fn link_partial(dir: &Path, name: &OsStr, copy: &File, seam: &mut impl Seam) -> io::Result<PathBuf> {
    for attempt in 0..64 {
        let partial = dir.join(seam.temporary_name(name, attempt));
        match seam.link(copy, &partial) {
            Ok(()) => return Ok(partial),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(io::ErrorKind::AlreadyExists, "no unused temporary name"))
}

/// Creates a new temporary file in `dir` for `name`, under a name from `seam`: an existing
/// name (a file, or a symbolic link, anyone planted) is never opened, followed or removed:
/// another is drawn.
fn create_partial(dir: &Path, name: &OsStr, seam: &mut impl Seam) -> io::Result<(PathBuf, File)> {
    for attempt in 0..64 {
        let partial = dir.join(seam.temporary_name(name, attempt));
        match create_new(&partial) {
            Ok(file) => return Ok((partial, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(io::ErrorKind::AlreadyExists, "no unused temporary name"))
}

/// Creates `path`, which must not exist: `O_EXCL` (never an existing file, nor the target of
/// a symbolic link at `path`) and `O_NOFOLLOW`.
fn create_new(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .mode(0o755)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Writes what `source` reads into `copy` (mode `mode` whatever the umask).
fn write_copy(source: &mut File, copy: &mut File, mode: u32) -> io::Result<()> {
    copy.set_permissions(fs::Permissions::from_mode(mode))?;
    io::copy(source, copy)?;
    Ok(())
}

/// Checks `partial` in a child process, this binary's hidden `check-copy` command, whose
/// standard output says the verdict (anything the plugin prints goes to standard error).
fn check_in_child(partial: &Path, options: check::Options) -> io::Result<Verdict> {
    let trust = if options.trust == dylease::TrustPolicy::Permissive {
        "permissive"
    } else {
        "strict"
    };
    let mut command = Command::new(std::env::current_exe()?);
    command
        .arg(CHECK_COPY)
        .args(["--trust", trust])
        .args(options.python.then_some("--python"))
        .arg("--")
        .arg(partial)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    // A check whose installer was killed would go on running the plugin's code for nobody.
    sys::end_with_parent(&mut command);
    let output = command.output()?;
    let said = String::from_utf8_lossy(&output.stdout);
    Ok(
        match (
            output.status.code(),
            said.strip_prefix(LOADS),
            said.strip_prefix(REFUSED),
        ) {
            (Some(0), Some(loaded), _) => {
                // `pass NAME` lines, then what loaded as a phrase.
                let mut passes = Vec::new();
                let mut rest = loaded;
                while let Some(line) = rest.strip_prefix(PASS) {
                    let (pass, after) = line.split_once('\n').unwrap_or((line, ""));
                    passes.push(unescape_line(pass));
                    rest = after;
                }
                Verdict::Loads(rest.trim_end().to_owned(), passes)
            }
            (Some(1), _, Some(report)) => Verdict::Refused(report.to_owned()),
            (Some(code), ..) => Verdict::Crashed(format!("exited with status {code}")),
            (None, ..) => Verdict::Crashed(match output.status.signal() {
                Some(signal) => format!("was killed by signal {signal} ({})", signal_name(signal)),
                None => format!("ended ({})", output.status),
            }),
        },
    )
}

/// The usual name of a signal that ends a process.
fn signal_name(signal: i32) -> &'static str {
    match signal {
        libc::SIGABRT => "SIGABRT",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGSYS => "SIGSYS",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGHUP => "SIGHUP",
        libc::SIGPIPE => "SIGPIPE",
        _ => "an unusual signal",
    }
}

/// The hidden `check-copy` command, run by [`check_in_child`]: checks `partial` and prints the
/// verdict through `say`. `Ok(true)` when it would load.
pub(crate) fn check_copy(
    partial: &Path,
    options: check::Options,
    mut say: impl FnMut(&str) -> io::Result<()>,
) -> io::Result<bool> {
    let mut checked = None;
    {
        // Standard output carries the verdict alone.
        let _redirect = stdout::to_stderr();
        let _ = check::run(std::slice::from_ref(&partial.to_owned()), options, |check| {
            checked = Some(check);
            std::ops::ControlFlow::Break(())
        });
    }
    let check = checked.expect("checking one file reports one check");
    if check.ok() {
        let passes: String = check
            .outcome
            .as_deref()
            .unwrap_or_default()
            .iter()
            .flat_map(|plugin| &plugin.passes)
            .map(|pass| format!("{PASS}{}\n", escape_line(&pass.name)))
            .collect();
        say(&format!("{LOADS}{passes}{}\n", describe(&check)))?;
    } else {
        say(&format!("{REFUSED}{}", report::Human::default().check(&check)))?;
    }
    Ok(check.ok())
}

/// What the child prints, after [`LOADS`], before each pass the copy registered.
const PASS: &str = "pass ";

/// A pass name on one line: backslashes and line feeds escaped.
fn escape_line(name: &str) -> String {
    name.replace('\\', "\\\\").replace('\n', "\\n")
}

/// The inverse of [`escape_line`].
fn unescape_line(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// What loaded, as a phrase: "plugin `x` 1.2, 3 passes".
fn describe(check: &Check) -> String {
    let plugins = check.outcome.as_deref().unwrap_or_default();
    let what: Vec<String> = plugins
        .iter()
        .map(|p| {
            let passes = p.passes.len();
            let version = if p.version.is_empty() {
                String::new()
            } else {
                format!(" {}", p.version)
            };
            format!(
                "plugin `{}`{version}, {passes} pass{}",
                p.name,
                if passes == 1 { "" } else { "es" }
            )
        })
        .collect();
    what.join(", ")
}

/// Removes the temporary file unless the install renamed it into place.
struct Temporary {
    path: PathBuf,
    renamed: bool,
}

impl Temporary {
    /// The temporary file `path`, from now on removed unless renamed into place.
    fn new(path: PathBuf) -> Temporary {
        Temporary { path, renamed: false }
    }
}

impl Drop for Temporary {
    fn drop(&mut self) {
        if !self.renamed {
            let _ = fs::remove_file(&self.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    /// A directory of one test's own under the system's temporary directory, removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new(test: &str) -> Scratch {
            let path = std::env::temp_dir().join(format!("dylease-install-{test}-{}", std::process::id()));
            let _ = fs::remove_dir_all(&path);
            fs::create_dir_all(&path).unwrap();
            Scratch(path)
        }

        fn dir(&self, name: &str) -> PathBuf {
            let dir = self.0.join(name);
            fs::create_dir_all(&dir).unwrap();
            dir
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    /// One step of an install, as [`Recorder`] saw it.
    #[derive(Debug, Clone, PartialEq, Eq)]
    enum Step {
        /// The copy, to be installed as (or, written under its name, at) the path, flushed.
        Synced(PathBuf),
        /// The unnamed copy given the temporary name.
        Linked(PathBuf),
        Checked(PathBuf),
        Renamed(PathBuf, PathBuf),
        DirSynced(PathBuf),
    }

    /// The real install's file operations, recorded in order; the temporary names come from
    /// `names` (the real random ones once it runs out) and the check is stood in for (every
    /// copy would load), so that any bytes can be installed and no plugin code runs. With
    /// `named`, it plays a file system without unnamed files (`O_TMPFILE`), whose creation of
    /// one fails with that error number: the copy is written under its temporary name.
    #[derive(Default)]
    struct Recorder {
        names: Vec<OsString>,
        named: Option<i32>,
        steps: Vec<Step>,
    }

    impl Seam for Recorder {
        fn unnamed(&mut self, dir: &Path) -> io::Result<File> {
            if let Some(errno) = self.named {
                return Err(io::Error::from_raw_os_error(errno));
            }
            create_unnamed(dir)
        }

        fn temporary_name(&mut self, name: &OsStr, attempt: u32) -> OsString {
            match self.names.get(attempt as usize) {
                Some(planted) => planted.clone(),
                None => random_name(name),
            }
        }

        fn sync(&mut self, file: &File, path: &Path) -> io::Result<()> {
            self.steps.push(Step::Synced(path.to_owned()));
            file.sync_all()
        }

        fn link(&mut self, file: &File, to: &Path) -> io::Result<()> {
            sys::link_open_file(file, to)?;
            self.steps.push(Step::Linked(to.to_owned()));
            Ok(())
        }

        fn check(&mut self, partial: &Path, _options: check::Options) -> io::Result<Verdict> {
            self.steps.push(Step::Checked(partial.to_owned()));
            Ok(Verdict::Loads("plugin `stand_in`, 0 passes".to_owned(), Vec::new()))
        }

        fn rename(&mut self, from: &Path, to: &Path) -> io::Result<()> {
            self.steps.push(Step::Renamed(from.to_owned(), to.to_owned()));
            fs::rename(from, to)
        }

        fn sync_dir(&mut self, dir: &Path) -> io::Result<()> {
            self.steps.push(Step::DirSynced(dir.to_owned()));
            File::open(dir)?.sync_all()
        }
    }

    fn options() -> check::Options {
        check::Options {
            trust: dylease::TrustPolicy::Strict,
            policy: dylease::LoadPolicy::Strict,
            python: false,
        }
    }

    /// Installs `source` into `dir` through `recorder`: whether it was installed, and what
    /// the installer said.
    fn install_with(source: &Path, dir: &Path, recorder: &mut Recorder) -> (bool, String) {
        let mut said = String::new();
        let ok = run_with(
            &[source.to_owned()],
            dir,
            (options(), &Signing::default()),
            recorder,
            |text| {
                said.push_str(text);
                Ok(())
            },
        )
        .unwrap();
        (ok, said)
    }

    /// A report about the copy names the user's file instead, in both forms a report gives a
    /// path (escaped on the status line; in messages, only components that are not UTF-8
    /// escaped), also for names with a backslash or bytes that are not UTF-8.
    #[test]
    fn a_report_about_the_copy_names_the_users_file_in_every_form() {
        use std::os::unix::ffi::OsStrExt as _;
        let file = Path::new(OsStr::from_bytes(b"in\\put/lib\xffx.so"));
        let checked = Path::new(OsStr::from_bytes(
            b"plu\\gins/.lib\xffx.so.dylease-install-1-0123456789abcdef",
        ));
        let message = |path: &Path| names::in_message(&path.to_string_lossy(), &[path]);
        let report = format!(
            "FAIL  {}\n        problem: cannot load `{}`\n        fix: fix the syntax at {}/mod.py, line 1\n",
            names::escape(checked),
            message(checked),
            message(checked)
        );
        let named = as_named(&report, checked, file);
        assert_eq!(
            named,
            format!(
                "FAIL  {}\n        problem: cannot load `{}`\n        fix: fix the syntax at {}/mod.py, line 1\n",
                names::escape(file),
                message(file),
                message(file)
            )
        );
        assert!(!named.contains("dylease-install"), "{named}");
    }

    /// Versions compare as releases: number by number, trailing zeros aside; anything but
    /// numbers and dots is not compared.
    #[test]
    fn versions_compare_as_dotted_numbers() {
        assert!(release("1.9") < release("1.10"));
        assert!(release("1.0.0") < release("2.0.0"));
        assert!(release("0.9.12") < release("0.10"));
        assert_eq!(release("1.0"), release("1.0.0"));
        assert_eq!(release("1"), Some(vec![1]));
        for other in ["", "1.0.0-rc1", "v1.0", "1..0", "+1.0", "1.0.", "a"] {
            assert_eq!(release(other), None, "{other}");
        }
    }

    /// The pass names the child reports survive the trip, whatever characters they hold.
    #[test]
    fn pass_names_survive_the_childs_report() {
        for name in ["plain", "back\\slash", "line\nfeed", "\\n", "trailing\\", "é"] {
            let line = escape_line(name);
            assert!(!line.contains('\n'), "{line:?}");
            assert_eq!(unescape_line(&line), name);
        }
    }

    /// A check ended by a signal is said with the signal's usual name: those a plugin's code
    /// or the loader ends a process with (an abort, a fault, a trap, a refused system call)
    /// and those another process sends; any other is "an unusual signal".
    #[test]
    fn the_signals_that_end_a_check_are_named() {
        for (signal, name) in [
            (libc::SIGABRT, "SIGABRT"),
            (libc::SIGSEGV, "SIGSEGV"),
            (libc::SIGBUS, "SIGBUS"),
            (libc::SIGILL, "SIGILL"),
            (libc::SIGFPE, "SIGFPE"),
            (libc::SIGTRAP, "SIGTRAP"),
            (libc::SIGSYS, "SIGSYS"),
            (libc::SIGKILL, "SIGKILL"),
            (libc::SIGTERM, "SIGTERM"),
            (libc::SIGINT, "SIGINT"),
            (libc::SIGHUP, "SIGHUP"),
            (libc::SIGPIPE, "SIGPIPE"),
            (libc::SIGUSR1, "an unusual signal"),
        ] {
            assert_eq!(signal_name(signal), name, "signal {signal}");
        }
    }

    /// The copy must be on disk before it is renamed over the installed file: renamed first,
    /// a crash of the machine could leave the final name on a file whose data never reached
    /// the disk (an empty or partial library). It is written without a name, flushed, and
    /// only then named (a name no host loads), checked and renamed; the directory is flushed
    /// last, which makes the rename durable.
    #[test]
    fn the_copy_is_flushed_before_it_is_checked_and_renamed() {
        let scratch = Scratch::new("order");
        let (staging, plugins) = (scratch.dir("staging"), scratch.dir("plugins"));
        let source = staging.join("libx.so");
        fs::write(&source, b"new version").unwrap();
        let target = plugins.join("libx.so");
        fs::write(&target, b"old version").unwrap();
        let mut recorder = Recorder {
            names: vec![".libx.so.chosen".into()],
            ..Recorder::default()
        };
        let (ok, said) = install_with(&source, &plugins, &mut recorder);
        assert!(ok, "{said}");
        let partial = plugins.join(".libx.so.chosen");
        assert_eq!(
            recorder.steps,
            [
                Step::Synced(target.clone()),
                Step::Linked(partial.clone()),
                Step::Checked(partial.clone()),
                Step::Renamed(partial, target.clone()),
                Step::DirSynced(plugins.clone()),
            ],
            "the install's steps are out of order: {said}"
        );
        assert_eq!(fs::read(&target).unwrap(), b"new version");
    }

    /// On a file system without unnamed files the copy is written under its temporary name,
    /// and still flushed before it is checked and renamed. Such a file system (or kernel)
    /// says so with any of the three errors `O_TMPFILE` fails with there.
    #[test]
    fn without_unnamed_files_the_copy_is_written_under_its_temporary_name_and_flushed_first() {
        for errno in [libc::EOPNOTSUPP, libc::EISDIR, libc::EINVAL] {
            let scratch = Scratch::new(&format!("order_named_{errno}"));
            let (staging, plugins) = (scratch.dir("staging"), scratch.dir("plugins"));
            let source = staging.join("libx.so");
            fs::write(&source, b"new version").unwrap();
            let target = plugins.join("libx.so");
            let mut recorder = Recorder {
                names: vec![".libx.so.chosen".into()],
                named: Some(errno),
                ..Recorder::default()
            };
            let (ok, said) = install_with(&source, &plugins, &mut recorder);
            assert!(ok, "error {errno}: {said}");
            let partial = plugins.join(".libx.so.chosen");
            assert_eq!(
                recorder.steps,
                [
                    Step::Synced(target.clone()),
                    Step::Checked(partial.clone()),
                    Step::Renamed(partial, target.clone()),
                    Step::DirSynced(plugins.clone()),
                ],
                "error {errno}: {said}"
            );
            assert_eq!(fs::read(&target).unwrap(), b"new version");
        }
    }

    /// A file whose name a host reading the directory would not load (not `*.so`, or `.so`
    /// alone) is not installed, and says why.
    #[test]
    fn a_file_not_named_like_a_plugin_library_is_not_installed() {
        let scratch = Scratch::new("not_a_library_name");
        let (staging, plugins) = (scratch.dir("staging"), scratch.dir("plugins"));
        for name in ["libx.txt", ".so"] {
            let source = staging.join(name);
            fs::write(&source, b"any bytes").unwrap();
            let mut recorder = Recorder::default();
            let (ok, said) = install_with(&source, &plugins, &mut recorder);
            assert!(!ok, "{name}: {said}");
            assert!(
                said.contains("is not named like a plugin library (`*.so`): a host reading"),
                "{name}: {said}"
            );
            assert_eq!(recorder.steps, [], "{name}: {said}");
            assert_eq!(fs::read_dir(&plugins).unwrap().count(), 0, "{name}: {said}");
        }
    }

    /// A temporary name that cannot be taken for another reason than being taken (here: in a
    /// directory that does not exist) fails the install with its cause, whether the copy is
    /// named by `linkat` or created under its name: another name is drawn only for a name
    /// that exists, and nothing is installed.
    #[test]
    fn a_temporary_name_that_fails_otherwise_than_taken_fails_the_install_with_its_cause() {
        for (named, step) in [
            (None, "cannot name the temporary copy in"),
            (Some(libc::EOPNOTSUPP), "cannot create a temporary file in"),
        ] {
            let scratch = Scratch::new(&format!("name_fails_{}", named.is_some()));
            let (staging, plugins) = (scratch.dir("staging"), scratch.dir("plugins"));
            let source = staging.join("libx.so");
            fs::write(&source, b"new version").unwrap();
            let mut recorder = Recorder {
                names: vec!["missing/.libx.so.chosen".into()],
                named,
                ..Recorder::default()
            };
            let (ok, said) = install_with(&source, &plugins, &mut recorder);
            assert!(!ok, "{said}");
            assert!(
                said.contains(step) && said.contains("No such file or directory (os error 2)"),
                "{said}"
            );
            assert_eq!(fs::read_dir(&plugins).unwrap().count(), 0, "{said}");
        }
    }

    /// A target that is a file is said to be no directory, and one below a file (which the
    /// system cannot look up: `ENOTDIR`) is not said to be missing, with a `mkdir` that would
    /// fail: the step that cannot reach it names the system's cause. Neither is installed.
    #[test]
    fn a_target_that_is_a_file_or_below_a_file_is_refused_for_what_it_is() {
        let scratch = Scratch::new("file_target");
        let source = scratch.dir("staging").join("libx.so");
        fs::write(&source, b"new version").unwrap();
        let file = scratch.0.join("plugins");
        fs::write(&file, b"a file").unwrap();
        let (ok, said) = install_with(&source, &file, &mut Recorder::default());
        assert!(!ok, "{said}");
        assert!(
            said.starts_with("not installed: `")
                && said.contains("plugins` is not a directory: name the plugin directory the hosts read"),
            "{said}"
        );
        let below = file.join("sub");
        let (ok, said) = install_with(&source, &below, &mut Recorder::default());
        assert!(!ok, "{said}");
        assert!(
            !said.contains("does not exist") && said.contains("Not a directory (os error 20)"),
            "{said}"
        );
        assert_eq!(fs::read(&file).unwrap(), b"a file");
    }

    /// A Python plugin's temporary directory is drawn as a library's temporary name is: a
    /// name that exists (anyone's file) is left alone and another drawn, and one that cannot
    /// be made for another reason (here: in a directory that does not exist) fails the
    /// install with its cause. A file named like no Python plugin a host loads (`_` or `.`
    /// first) is not installed.
    #[cfg(feature = "python")]
    #[test]
    fn a_python_installs_temporary_directory_is_drawn_as_a_librarys_temporary_name_is() {
        let scratch = Scratch::new("python_staging");
        let (staging, plugins) = (scratch.dir("staging"), scratch.dir("plugins"));
        let source = staging.join("counter.py");
        let text = "import dylease\ndylease.plugin(\"counter\", \"1.0\")\n";
        fs::write(&source, text).unwrap();
        let planted = plugins.join(".counter.py.planted");
        fs::write(&planted, b"someone else's").unwrap();
        let mut recorder = Recorder {
            names: vec![".counter.py.planted".into(), ".counter.py.free".into()],
            ..Recorder::default()
        };
        let (ok, said) = install_with(&source, &plugins, &mut recorder);
        assert!(ok, "{said}");
        assert_eq!(fs::read(&planted).unwrap(), b"someone else's", "{said}");
        assert_eq!(fs::read_to_string(plugins.join("counter.py")).unwrap(), text);
        assert!(!plugins.join(".counter.py.free").exists(), "{said}");

        let mut recorder = Recorder {
            names: vec!["missing/.counter.py.chosen".into()],
            ..Recorder::default()
        };
        let (ok, said) = install_with(&source, &plugins, &mut recorder);
        assert!(!ok, "{said}");
        assert!(
            said.contains("cannot create a temporary directory in")
                && said.contains("No such file or directory (os error 2)"),
            "{said}"
        );

        for name in ["_private.py", ".hidden.py"] {
            let source = staging.join(name);
            fs::write(&source, text).unwrap();
            let (ok, said) = install_with(&source, &plugins, &mut Recorder::default());
            assert!(!ok, "{name}: {said}");
            assert!(said.contains("is named like no Python plugin"), "{name}: {said}");
            assert!(!plugins.join(name).exists(), "{name}: {said}");
        }
    }

    /// A symbolic link planted at exactly the temporary name the installer takes (to a file
    /// outside the directory) must not be followed, whether the copy is named by `linkat`
    /// (which never replaces a name) or created under its name (`O_EXCL`, `O_NOFOLLOW`): the
    /// installer draws another name and the outside file keeps its bytes; the link is not
    /// the installer's to remove.
    #[test]
    fn a_symbolic_link_planted_at_the_temporary_name_is_not_followed() {
        for named in [false, true] {
            let scratch = Scratch::new(&format!("symlink_{named}"));
            let (staging, plugins, outside) = (scratch.dir("staging"), scratch.dir("plugins"), scratch.dir("outside"));
            let source = staging.join("libx.so");
            fs::write(&source, b"new version").unwrap();
            let victim = outside.join("victim");
            fs::write(&victim, b"not the installer's").unwrap();
            let planted = plugins.join(".libx.so.planted");
            std::os::unix::fs::symlink(&victim, &planted).unwrap();
            let mut recorder = Recorder {
                names: vec![".libx.so.planted".into(), ".libx.so.free".into()],
                named: named.then_some(libc::EOPNOTSUPP),
                ..Recorder::default()
            };
            let (ok, said) = install_with(&source, &plugins, &mut recorder);
            assert_eq!(
                fs::read(&victim).unwrap(),
                b"not the installer's",
                "named {named}: the installer wrote through the planted link: {said}"
            );
            assert_eq!(
                fs::read_link(&planted)
                    .unwrap_or_else(|e| panic!("named {named}: the planted link is gone ({e}): {said}")),
                victim,
                "named {named}: the planted link was replaced: {said}"
            );
            // Retrying under another name is what it does; failing would be safe too.
            if ok {
                let target = plugins.join("libx.so");
                assert!(
                    recorder
                        .steps
                        .contains(&Step::Renamed(plugins.join(".libx.so.free"), target.clone())),
                    "named {named}: {:?}",
                    recorder.steps
                );
                assert_eq!(fs::read(&target).unwrap(), b"new version");
            }
        }
    }

    /// Another user's file at exactly the temporary name the installer takes is neither
    /// opened, truncated, replaced nor removed: the installer draws another name.
    #[test]
    fn a_file_planted_at_the_temporary_name_is_left_alone() {
        for named in [false, true] {
            let scratch = Scratch::new(&format!("planted_{named}"));
            let (staging, plugins) = (scratch.dir("staging"), scratch.dir("plugins"));
            let source = staging.join("libx.so");
            fs::write(&source, b"new version").unwrap();
            let planted = plugins.join(".libx.so.planted");
            fs::write(&planted, b"someone else's").unwrap();
            let planted_inode = fs::metadata(&planted).unwrap().ino();
            let mut recorder = Recorder {
                names: vec![".libx.so.planted".into(), ".libx.so.free".into()],
                named: named.then_some(libc::EOPNOTSUPP),
                ..Recorder::default()
            };
            let (ok, said) = install_with(&source, &plugins, &mut recorder);
            let now = fs::symlink_metadata(&planted)
                .unwrap_or_else(|e| panic!("named {named}: the planted file is gone ({e}): {said}"));
            assert_eq!(now.ino(), planted_inode, "named {named}: {said}");
            assert_eq!(fs::read(&planted).unwrap(), b"someone else's", "named {named}: {said}");
            assert!(ok, "named {named}: {said}");
            assert_eq!(fs::read(plugins.join("libx.so")).unwrap(), b"new version");
        }
    }

    /// The id of a process that has ended (and been reaped).
    fn ended_process() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    /// The temporary names carry the installer's process id, and only names of exactly that
    /// pattern are taken for an installer's.
    #[test]
    fn only_temporary_names_of_an_install_give_an_installer() {
        let name = random_name(OsStr::new("libx.so"));
        assert_eq!(installer_of(&name), Some(std::process::id()), "{name:?}");
        assert_eq!(
            installer_of(OsStr::new(".pkg.dylease-install-42-0123456789abcdef")),
            Some(42)
        );
        for other in [
            "libx.so",
            ".libx.so",
            ".libx.so.dylease-install-0123456789abcdef",
            ".libx.so.dylease-install-42-0123456789abcde",
            ".libx.so.dylease-install-42-0123456789abcdeff",
            ".libx.so.dylease-install-42-0123456789ABCDEF",
            ".libx.so.dylease-install--0123456789abcdef",
            ".libx.so.dylease-install-4x2-0123456789abcdef",
            ".libx.so.dylease-install-+42-0123456789abcdef",
            "..dylease-install-42-0123456789abcdef",
            "libx.so.dylease-install-42-0123456789abcdef",
            ".libx.so.dylease-install-42-0123456789abcdef.so",
        ] {
            assert_eq!(installer_of(OsStr::new(other)), None, "{other}");
        }
    }

    /// What an installer that ended left (a file, a Python install's directory) is removed;
    /// the temporary of a running installer, and names of any other pattern, are not.
    #[test]
    fn the_temporaries_of_ended_installers_are_removed_and_nothing_else() {
        let scratch = Scratch::new("stale");
        let plugins = scratch.dir("plugins");
        let ended = ended_process();
        let stale_file = plugins.join(format!(".libx.so.dylease-install-{ended}-0123456789abcdef"));
        fs::write(&stale_file, b"half").unwrap();
        let stale_dir = plugins.join(format!(".pkg.dylease-install-{ended}-00000000000000ff"));
        fs::create_dir_all(stale_dir.join("pkg")).unwrap();
        fs::write(stale_dir.join("pkg/__init__.py"), b"").unwrap();
        let running = plugins.join(format!(
            ".liby.so.dylease-install-{}-0123456789abcdef",
            std::process::id()
        ));
        fs::write(&running, b"in progress").unwrap();
        let other = plugins.join(format!(".libz.so.dylease-install-{ended}-not-random"));
        fs::write(&other, b"not an install's").unwrap();
        let plugin = plugins.join("libx.so");
        fs::write(&plugin, b"installed").unwrap();
        let removed = remove_stale(&plugins);
        assert!(!stale_file.exists() && !stale_dir.exists(), "{removed:?}");
        assert!(running.exists() && other.exists() && plugin.exists(), "{removed:?}");
        assert_eq!(removed.len(), 2, "{removed:?}");
        assert!(
            removed.iter().all(|line| line.contains(&format!("(process {ended})"))),
            "{removed:?}"
        );
    }

    /// Another user's temporary is not this installer's to remove, even when its installer
    /// has ended.
    #[test]
    #[ignore = "needs root"]
    fn another_users_temporary_of_an_ended_installer_is_left_alone() {
        let scratch = Scratch::new("stale_other_user");
        let plugins = scratch.dir("plugins");
        let stale = plugins.join(format!(".libx.so.dylease-install-{}-0123456789abcdef", ended_process()));
        fs::write(&stale, b"theirs").unwrap();
        std::os::unix::fs::lchown(&stale, Some(65534), Some(65534)).unwrap();
        let removed = remove_stale(&plugins);
        assert!(stale.exists(), "{removed:?}");
        assert_eq!(removed, Vec::<String>::new());
    }
}
