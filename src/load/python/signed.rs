//! A Python plugin's signature (`HostBuilder::require_signed`): its sources, as read into
//! memory from the checked descriptors before any of them runs (`read`), checked against the
//! signed index beside the file (`greeter.py.dylease-sig`) or in the package
//! (`.dylease-sig`, read through the package directory's descriptor). The bytes executed are
//! the bytes verified: they are compiled from memory.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use dylease_sign::{INDEX_NAME, Verified, file_index_path, package_index_path};

use crate::error::{Error, Origin};
use crate::inspect::manifest::Manifest;
use crate::load::python::discover::PyCandidate;
use crate::load::python::instance::Staged;
use crate::trust::Verifier;
use crate::trust::{Checks, TrustPolicy};

impl PyCandidate {
    /// Checks `staged`, the sources this load read and will execute, against the plugin's
    /// signed index under `signatures`; the plugin must be signed under its manifest's name
    /// where `manifest` gives one.
    pub(super) fn verify_sources(
        &self,
        signatures: &Verifier,
        staged: &Staged,
        manifest: Option<&Manifest>,
    ) -> Result<Verified, Error> {
        let (index_path, index) = self.index()?;
        let relative = self.files.iter().filter(|file| file.module.is_some()).map(|file| {
            #[cfg(unix)]
            if self.package {
                return file.at.iter().collect::<PathBuf>();
            }
            #[cfg(not(unix))]
            if self.package {
                let below = file
                    .candidate
                    .path
                    .strip_prefix(&self.path)
                    .unwrap_or(&file.candidate.path);
                return below.to_owned();
            }
            PathBuf::from(self.path.file_name().unwrap_or_default())
        });
        let relative: Vec<PathBuf> = relative.collect();
        let files: Vec<(&Path, &[u8])> = relative
            .iter()
            .zip(&staged.files)
            .map(|(path, (_, _, source))| (path.as_path(), source.as_bytes()))
            .collect();
        signatures.verify_files(
            index,
            (&self.path, &index_path),
            manifest.map(|manifest| manifest.name.as_str()),
            &files,
        )
    }

    /// The plugin's signed index: where it is, and the file if there is one (a package's
    /// read through its directory's descriptor, as its sources are).
    fn index(&self) -> Result<(PathBuf, Option<File>), Error> {
        let io_error = |path: &Path, source: io::Error| Error::Io {
            path: path.to_owned(),
            context: "cannot read the signed index of a Python plugin",
            source,
        };
        if self.package {
            let path = package_index_path(&self.path);
            #[cfg(unix)]
            if let Some(tree) = &self.tree {
                return match tree.file(std::ffi::OsStr::new(INDEX_NAME)) {
                    Ok((file, _)) => Ok((path, Some(file))),
                    Err(error) if error.kind() == io::ErrorKind::NotFound => Ok((path, None)),
                    Err(error) => Err(io_error(&path, error)),
                };
            }
            return open_index(path, io_error);
        }
        open_index(file_index_path(&self.path), io_error)
    }

    /// The manifest and, if the host requires signatures, the verified signature of the
    /// plugin, from its sources read as a load reads them, none of them run (for the catalog).
    pub(crate) fn manifest_and_signature(
        &mut self,
        checks: &mut Checks,
        trust: TrustPolicy,
    ) -> Result<(Option<Manifest>, Option<Verified>), Error> {
        let staged = self.read(checks, trust)?;
        let manifest = staged.manifest(&Origin::File(self.path.clone()))?;
        let signature = match &checks.signatures {
            Some(signatures) => Some(self.verify_sources(signatures, &staged, manifest.as_ref())?),
            None => None,
        };
        Ok((manifest, signature))
    }
}

/// The index file at `path`, `None` if there is none.
fn open_index(path: PathBuf, io_error: impl Fn(&Path, io::Error) -> Error) -> Result<(PathBuf, Option<File>), Error> {
    match File::open(&path) {
        Ok(file) => Ok((path, Some(file))),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok((path, None)),
        Err(error) => Err(io_error(&path, error)),
    }
}
