//! Private copies of changed library files.
//!
//! glibc resolves an open by name first: `dlopen` of a path whose file was replaced (a new
//! version installed by rename) while the old mapping is alive returns the *old* mapping. So a
//! changed file is loaded from a copy in a directory of its own, owned by the effective user
//! with mode 0700, the copy keeping the file's name (so `/proc/self/maps` and the loader's
//! messages still name the plugin). The copy is made from the descriptor the trust and ELF
//! checks looked at, and removed, with its directory, once its instance unloaded (or at once
//! if making it failed).
// `unsafe` here: `geteuid` for the check of a private directory.
#![allow(unsafe_code)]

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use crate::error::Error;

/// Where private copies go: the host's `reload_dir`, and why it may not be used, if the trust
/// check refused it (another user could change what is in it, and so choose the code loaded
/// from a copy).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Copies<'a> {
    pub(crate) dir: &'a Path,
    pub(crate) refused: Option<&'a str>,
}

/// A private copy of one library file; dropping it removes the copy and its directory.
#[derive(Debug)]
pub(crate) struct PrivateCopy {
    dir: PathBuf,
    file: PathBuf,
}

impl PrivateCopy {
    /// Copies what `source` reads (the file found as `shown`) into a new private directory
    /// under `base`, as a file named like `shown`.
    pub(crate) fn make(copies: Copies<'_>, shown: &Path, source: &File) -> Result<PrivateCopy, Error> {
        let base = copies.dir;
        if let Some(reason) = copies.refused {
            return Err(Error::Untrusted {
                path: shown.to_owned(),
                reason: format!(
                    "the file changed since its loaded instance opened it, so it must load from a private copy, \
                     but the directory for copies `{}` is not safe: {reason}; point `HostBuilder::reload_dir` \
                     at a directory only this user (or root) can change",
                    base.display()
                ),
            });
        }
        let failed = |context: &'static str, path: &Path, source: io::Error| Error::Io {
            path: path.to_owned(),
            context,
            source,
        };
        let dir = private_dir(base).map_err(|e| failed("cannot make a private directory for a reload in", base, e))?;
        // From here on, `copy` removes what exists of it if a step fails.
        let copy = PrivateCopy {
            file: dir.join(shown.file_name().unwrap_or(shown.as_os_str())),
            dir,
        };
        let written = write_copy(&copy.file, source);
        written.map_err(|e| failed("cannot copy the changed plugin file to", &copy.file, e))?;
        Ok(copy)
    }

    /// The path of the copy: what is opened.
    pub(crate) fn path(&self) -> &Path {
        &self.file
    }
}

impl Drop for PrivateCopy {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.file);
        if let Err(error) = fs::remove_dir(&self.dir) {
            log::warn!(
                "{}cannot remove the reload directory `{}`: {error}",
                crate::load::log_scope::prefix(),
                self.dir.display()
            );
        }
    }
}

/// A new directory under `base` that only this user can enter: created with mode 0700 (it
/// must not exist before), then checked to be a directory, not a link, owned by the effective
/// user, with that mode.
fn private_dir(base: &Path) -> io::Result<PathBuf> {
    use std::hash::{BuildHasher, Hasher};
    // Random names (std's per-process random hash keys, fresh for each `RandomState`), so
    // that another user cannot plant the next ones in a shared directory such as /tmp.
    for _ in 0..64 {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        let dir = base.join(format!(
            "dylease-reload-{}-{:016x}",
            std::process::id(),
            hasher.finish()
        ));
        match imp::create_private(&dir) {
            Ok(()) => {
                imp::check_private(&dir)?;
                return Ok(dir);
            }
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(error) => return Err(error),
        }
    }
    Err(io::Error::new(io::ErrorKind::AlreadyExists, "no unused directory name"))
}

/// Writes the bytes `source` reads, from its start, into the new file `to`.
fn write_copy(to: &Path, source: &File) -> io::Result<()> {
    let mut reader = source.try_clone()?;
    io::Seek::seek(&mut reader, io::SeekFrom::Start(0))?;
    let mut writer = imp::create_new_private_file(to)?;
    // No `sync_all`: the copy is read back by this process's loader at once and removed
    // after use; durability would only cost an fsync per plugin (measured: most of a
    // changed reload's time).
    io::copy(&mut reader, &mut writer).map(drop)
}

#[cfg(unix)]
mod imp {
    use std::fs::{self, File};
    use std::io;
    use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
    use std::path::Path;

    pub(super) fn create_private(dir: &Path) -> io::Result<()> {
        fs::DirBuilder::new().mode(0o700).create(dir)
    }

    pub(super) fn check_private(dir: &Path) -> io::Result<()> {
        let metadata = fs::symlink_metadata(dir)?;
        // SAFETY: `geteuid` has no preconditions and cannot fail.
        let euid = unsafe { libc::geteuid() };
        let private = metadata.is_dir() && metadata.uid() == euid && metadata.mode() & 0o777 == 0o700;
        if private {
            Ok(())
        } else {
            let _ = fs::remove_dir(dir);
            Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                "the new directory is not private (not a directory owned by this user with mode 0700)",
            ))
        }
    }

    pub(super) fn create_new_private_file(path: &Path) -> io::Result<File> {
        fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o700)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
    }
}

#[cfg(not(unix))]
mod imp {
    use std::fs::{self, File};
    use std::io;
    use std::path::Path;

    pub(super) fn create_private(dir: &Path) -> io::Result<()> {
        fs::create_dir(dir)
    }

    pub(super) fn check_private(_dir: &Path) -> io::Result<()> {
        Ok(())
    }

    pub(super) fn create_new_private_file(path: &Path) -> io::Result<File> {
        fs::OpenOptions::new().write(true).create_new(true).open(path)
    }
}
