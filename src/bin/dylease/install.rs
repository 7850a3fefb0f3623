//! `dylease install FILE... DIR`: installs plugin files where running hosts read them, the
//! one way a host can never see half of one: each file is written under a temporary name
//! inside DIR (a name no host loads), flushed to disk, checked as `dylease check` checks a
//! file, and only then renamed over its final name, which is atomic within one file system.
//! A host loading meanwhile sees the old file or the new one, whole.
//!
//! GNU `install` is not that: it removes the old file, creates the new one under the final
//! name and then writes it, so a host loading meanwhile finds no file, or a truncated one.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::check::{self, Check};
use crate::report;

/// Installs every file into `dir`, reporting each through `say`. `Ok(false)` when a file was
/// not installed (the others are); `Err` only when the report cannot be written.
pub(crate) fn run(
    files: &[PathBuf],
    dir: &Path,
    options: check::Options,
    mut say: impl FnMut(&str) -> io::Result<()>,
) -> io::Result<bool> {
    let mut ok = true;
    for file in files {
        let text = match install(file, dir, options) {
            Ok(Installed { to, check }) => {
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
                format!(
                    "installed `{}` as `{}` ({})\n",
                    file.display(),
                    to.display(),
                    what.join(", ")
                )
            }
            Err(Refused::Check(check)) => {
                ok = false;
                format!(
                    "not installed: `{}` would not load, so `{}` is unchanged:\n{}",
                    file.display(),
                    dir.display(),
                    report::Human::default().check(&check)
                )
            }
            Err(Refused::Io(message)) => {
                ok = false;
                format!("not installed: {message}\n")
            }
        };
        say(&text)?;
    }
    Ok(ok)
}

struct Installed {
    to: PathBuf,
    check: Check,
}

enum Refused {
    /// The file was copied and checked, and would not load.
    Check(Box<Check>),
    /// The file could not be copied, or renamed into place: why, naming the path.
    Io(String),
}

fn install(file: &Path, dir: &Path, options: check::Options) -> Result<Installed, Refused> {
    let io = |what: &str, path: &Path, e: io::Error| Refused::Io(format!("{what} `{}`: {e}", path.display()));
    let Some(name) = file.file_name() else {
        return Err(Refused::Io(format!("`{}` names no file", file.display())));
    };
    let suffix = std::env::consts::DLL_SUFFIX;
    if !name.to_string_lossy().ends_with(suffix) || name.len() == suffix.len() {
        return Err(Refused::Io(format!(
            "`{}` is not named like a plugin library (`*{}`): a host reading `{}` would not load it",
            file.display(),
            suffix,
            dir.display()
        )));
    }
    let to = dir.join(name);
    let mut source = open_source(file).map_err(|e| io("cannot read", file, e))?;
    let (partial, copy_file) =
        create_partial(dir, name).map_err(|e| io("cannot create a temporary file in", dir, e))?;
    // From here on the temporary file is ours: removed unless renamed into place.
    let mut temporary = Temporary {
        path: &partial,
        renamed: false,
    };
    write_copy(&mut source, copy_file).map_err(|e| io(&format!("cannot copy `{}` to", file.display()), &partial, e))?;
    let mut checked = None;
    let _ = check::run(std::slice::from_ref(&partial), options, |check| {
        checked = Some(check);
        std::ops::ControlFlow::Break(())
    });
    let check = checked.expect("checking one file reports one check");
    if !check.ok() {
        return Err(Refused::Check(Box::new(check)));
    }
    fs::rename(&partial, &to).map_err(|e| io(&format!("cannot rename `{}` to", partial.display()), &to, e))?;
    temporary.renamed = true;
    // The rename itself is durable once the directory is.
    File::open(dir)
        .and_then(|dir| dir.sync_all())
        .map_err(|e| io("cannot flush the directory", dir, e))?;
    Ok(Installed { to, check })
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

/// Creates a new temporary file in `dir` for `name`: hidden and without the library suffix
/// (no host reading `dir` loads it), under a random name that nobody can have planted (an
/// existing name is never opened or removed: another is drawn).
fn create_partial(dir: &Path, name: &std::ffi::OsStr) -> io::Result<(PathBuf, File)> {
    use std::hash::{BuildHasher, Hasher};
    for _ in 0..64 {
        // std's per-process random hash keys, fresh for each `RandomState`.
        let mut random = std::collections::hash_map::RandomState::new().build_hasher();
        random.write_u32(std::process::id());
        let partial = dir.join(format!(
            ".{}.dylease-install-{:016x}",
            name.to_string_lossy(),
            random.finish()
        ));
        let created = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o755)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(&partial);
        match created {
            Ok(file) => return Ok((partial, file)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(io::ErrorKind::AlreadyExists, "no unused temporary name"))
}

/// Writes what `source` reads into `copy` (mode 0755 whatever the umask), on disk.
fn write_copy(source: &mut File, mut copy: File) -> io::Result<()> {
    copy.set_permissions(fs::Permissions::from_mode(0o755))?;
    io::copy(source, &mut copy)?;
    copy.sync_all()
}

/// Removes the temporary file unless the install renamed it into place.
struct Temporary<'a> {
    path: &'a Path,
    renamed: bool,
}

impl Drop for Temporary<'_> {
    fn drop(&mut self) {
        if !self.renamed {
            let _ = fs::remove_file(self.path);
        }
    }
}
