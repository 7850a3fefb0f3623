//! A plugin file found by discovery, and what identifies it: the value the trust check, the
//! pipeline and the registry pass between them.

use std::fs::{File, Metadata};
use std::path::{Path, PathBuf};

use dylease_elf::{Elf, Linkage};

use crate::error::{Error, OpenCause};
use crate::inspect::manifest::Manifest;
use crate::inspect::parse_cache::{self, Parsed};
use crate::inspect::pinning::Pinning;
use crate::sync::Arc;

/// A library file found by discovery, not yet opened.
#[derive(Debug)]
pub(crate) struct Candidate {
    /// The path as discovered (what errors and `PluginInfo::origin` show).
    pub(crate) path: PathBuf,
    /// The absolute path that is opened: under `Strict`, the path the trust check walked,
    /// every symlink resolved; before the check (and under `Permissive`), a directory entry's
    /// path made absolute, a symlinked entry resolved.
    pub(crate) resolved: PathBuf,
    /// What makes it the same file as another ((dev, ino) on Unix).
    pub(crate) identity: Identity,
    /// The file the trust check passed at `resolved`, if it ran: what is opened must be it.
    pub(crate) checked: Option<FileId>,
    /// The file's status as discovery read it, where its directory entry is no symlink: the
    /// trust check judges the file by it instead of reading it again, once (the open then
    /// holds the file to this identity, as to any the check passed).
    pub(crate) discovered: Option<Status>,
    /// The file's status as discovery read it (the parse cache's key): an on-demand load
    /// judges an unchanged file whose parse the cache holds by it, without opening the file
    /// (`Candidate::judge`), and a strict load resolves its dependencies from the linkage the
    /// cache holds for it (`resolved_by_status`). For a first use since an on-demand acquire
    /// (`since_acquire`), the status judged then, which the file opened must still have.
    pub(crate) listed: Option<parse_cache::Key>,
    /// The checked file as the trust check opened it to read what it links against: the
    /// load uses this descriptor (and what was read of it) if the file is still at
    /// `resolved` then, instead of opening and reading it again.
    pub(crate) opened: Option<Box<Opened>>,
    /// The libraries the trust check resolved for the file it opened (`opened`), or for the
    /// status `listed` (`resolved_by_status`), to map before it, dependencies first; `None` where none was
    /// resolved for the descriptor the load uses (the load resolves them then, under `Strict`).
    pub(crate) dependencies: Option<Vec<Dependency>>,
    /// Whether the trust check resolved the `dependencies` from the linkage the parse cache
    /// holds for the status discovery read (`listed`) instead of opening the file: the
    /// descriptor the load opens must have that status, or they are resolved again from it.
    pub(crate) resolved_by_status: bool,
    /// Whether this is the file of an on-demand plugin judged when its set was acquired
    /// (`load::pipeline::Deferred`), opened now for its first use: a file replaced since
    /// (another identity than `checked`, or gone) is refused
    /// ([`OpenCause::ReplacedSinceAcquire`]), not checked again.
    pub(crate) since_acquire: bool,
}

pub(crate) use crate::sys::{FileId, Identity};

/// A library file opened for its checks: the descriptor they read (and the loader maps),
/// wrapped in the ELF reader that keeps what they read of it (`dylease_elf::Elf`: the ELF
/// check, the dependency walk and the pinning prediction read the same headers and tables,
/// from the disk once), its status as read from that descriptor, and what parsing the file
/// at that status decided (`inspect::parse_cache`: shared with earlier loads of the unchanged
/// file, which then read none of it).
#[derive(Debug)]
pub(crate) struct Opened {
    pub(crate) elf: Elf<File>,
    pub(crate) metadata: Metadata,
    parsed: Arc<Parsed>,
    /// Whether `parsed` is the parse cache's entry for this status, made of bytes of the
    /// fingerprint this descriptor's have.
    from_cache: bool,
    /// What the library makes the loader look up, decided once for this descriptor (the
    /// dependency walk and the load ask both): from the parse cache, or read from it.
    linkage: std::cell::OnceCell<Result<Arc<Linkage>, String>>,
}

impl Candidate {
    /// The refusal of a file replaced since its on-demand set was acquired (`since_acquire`).
    pub(crate) fn replaced_since_acquire(&self) -> Error {
        Error::Open {
            path: self.path.clone(),
            reason: format!(
                "the file `{}` was replaced, removed or rewritten since the set was acquired; the set maps \
                 only the file it judged then: reload() to load the new file",
                self.resolved.display()
            ),
            cause: OpenCause::ReplacedSinceAcquire,
        }
    }
}

impl Opened {
    /// The file `file`, whose status `metadata` was just read from it (before any of its
    /// bytes: the parse cache's racy rule needs it so). The parse cache's entry for that
    /// status is taken if the fingerprint of what the checks read of the file, read now from
    /// this descriptor, is the entry's (`parse_cache::lookup`).
    pub(crate) fn new(file: File, metadata: Metadata) -> Opened {
        let elf = Elf::new(file, metadata.len());
        let (parsed, from_cache) = parse_cache::lookup(&metadata, || parse_cache::fingerprint(&elf));
        Opened {
            elf,
            metadata,
            parsed,
            from_cache,
            linkage: std::cell::OnceCell::new(),
        }
    }

    /// Whether what was decided of this descriptor is the parse cache's entry for its status
    /// (the entry a look-up by that status, `parse_cache::find`, answers with), its bytes of
    /// the fingerprint the entry was made with.
    pub(crate) fn parse_was_cached(&self) -> bool {
        self.from_cache
    }

    /// This descriptor without the bytes read of it, if nothing more is left to read: its
    /// linkage was decided, and the parse cache holds the ELF check, linkage, manifest and
    /// pin prediction of its status. A strict load holds the descriptor of every plugin of a
    /// directory that it opened for its dependency walk (those whose linkage the cache did not
    /// hold) until its mapping; their bytes need not be held as well.
    pub(crate) fn shed(self) -> Opened {
        if self.linkage.get().is_none() || !self.parsed.is_complete() {
            return self;
        }
        let Opened {
            elf,
            metadata,
            parsed,
            from_cache,
            linkage,
        } = self;
        Opened {
            elf: Elf::new(elf.into_source(), metadata.len()),
            metadata,
            parsed,
            from_cache,
            linkage,
        }
    }

    /// The descriptor.
    pub(crate) fn file(&self) -> &File {
        self.elf.source()
    }

    /// Checks that the file could be an ELF shared library for this process, and that the
    /// loader can map and link it without crashing (`Elf::check`). A refusal is an error that
    /// names the plugin file `path` (as discovered) and says what is wrong ("the file is
    /// truncated: …"); otherwise it returns what the library makes the loader look up.
    /// Decided once per file status: a file opened again unchanged gets the verdict and the
    /// linkage from the parse cache (`inspect::parse_cache`), without a read.
    ///
    /// Only on platforms whose libraries are ELF files; elsewhere it passes.
    pub(crate) fn check(&self, path: &Path) -> Result<Arc<Linkage>, Error> {
        if !cfg!(all(unix, not(target_vendor = "apple"))) {
            return Ok(Arc::new(Linkage::default()));
        }
        self.checked(path)?;
        self.read_linkage(path).map_err(|reason| headers(path, reason))
    }

    /// The ELF check's verdict, from the parse cache or made now; a check made now also
    /// decides the linkage (for this descriptor, and for the cache).
    fn checked(&self, path: &Path) -> Result<(), Error> {
        let (verdict, parsed) = self.parsed.check.get_or_keep(
            || {
                let checked = self.elf.check().map_err(dylease_elf::Refusal::into_reason);
                checked.map(|linkage| {
                    let linkage = Arc::new(linkage);
                    self.parsed.linkage.offer(Ok(linkage.clone()));
                    let _ = self.linkage.set(Ok(linkage));
                })
            },
            parse_cache::about_the_bytes,
        );
        traced(path, "the ELF check", parsed);
        verdict.map_err(|reason| headers(path, reason))
    }

    /// As [`check`](Opened::check), for a caller that does not need the linkage: a verdict
    /// from the parse cache reads nothing.
    pub(crate) fn verify(&self, path: &Path) -> Result<(), Error> {
        if !cfg!(all(unix, not(target_vendor = "apple"))) {
            return Ok(());
        }
        self.checked(path)
    }

    /// The library's manifest (`Elf::manifest`, read from its note segments, which lie in
    /// the blocks the ELF check read), `None` if it has none. A corrupt manifest, or one
    /// of a format this host does not read, is refused with an error naming the plugin file
    /// `path`, before the file is mapped: none of the plugin's code ran. (The ABI version it
    /// declares is checked by [`Manifest::gate`].)
    ///
    /// Only on platforms whose libraries are ELF files; elsewhere there is none.
    pub(crate) fn manifest(&self, path: &Path) -> Result<Option<Arc<Manifest>>, Error> {
        if !cfg!(all(unix, not(target_vendor = "apple"))) {
            return Ok(None);
        }
        let (manifest, parsed) = self.parsed.manifest.get_or_keep(
            || {
                let manifest = self.elf.manifest().map_err(dylease_elf::Refusal::into_reason)?;
                Ok(manifest.map(|manifest| Arc::new(Manifest::from(manifest))))
            },
            parse_cache::about_the_bytes,
        );
        traced(path, "the manifest", parsed);
        manifest.map_err(|reason| Error::Open {
            path: path.to_owned(),
            reason,
            cause: OpenCause::Manifest,
        })
    }

    /// Whether the platform is predicted to keep the library mapped (`Pinning::predict`),
    /// decided once per file status.
    pub(crate) fn pinning(&self) -> Pinning {
        self.parsed.pinning.get_or(|| Pinning::predict(&self.elf)).0
    }

    /// What the library makes the loader look up (`Elf::linkage`: its DT_NEEDED and run
    /// paths), after the header check and as much of the structural check as that takes;
    /// `None` where libraries are not ELF files. (The trust check reads it on Unix, for the
    /// plugin file at `path`.) Decided once per file status, as the ELF check is: the trust
    /// check then judges, at every load, every directory and library it names.
    #[cfg_attr(not(unix), allow(dead_code))]
    pub(crate) fn linkage(&self, path: &Path) -> Result<Option<Arc<Linkage>>, String> {
        if !cfg!(all(unix, not(target_vendor = "apple"))) {
            return Ok(None);
        }
        self.read_linkage(path).map(Some)
    }

    /// `Elf::linkage` of this descriptor, decided once: from the parse cache, or read from
    /// the descriptor (and kept there).
    fn read_linkage(&self, path: &Path) -> Result<Arc<Linkage>, String> {
        self.linkage
            .get_or_init(|| {
                let (linkage, parsed) = self.parsed.linkage.get_or_keep(
                    || {
                        let linkage = self.elf.linkage().map_err(dylease_elf::Refusal::into_reason);
                        linkage.map(Arc::new)
                    },
                    parse_cache::about_the_bytes,
                );
                traced(path, "the linkage", parsed);
                linkage
            })
            .clone()
    }
}

/// The ELF check's refusal of the plugin file `path`.
fn headers(path: &Path, reason: String) -> Error {
    Error::Open {
        path: path.to_owned(),
        reason,
        cause: OpenCause::Headers,
    }
}

/// Logs (at `trace`) whether `what` of the file at `path` was decided by parsing it now, or
/// taken from the parse cache: what the tests count.
fn traced(path: &Path, what: &str, parsed: bool) {
    if parsed {
        log::trace!("{}parsed `{}`: {what}", crate::log_scope::prefix(), path.display());
    } else {
        log::trace!(
            "{}{what} of `{}` taken from the parse cache (the file's status is unchanged)",
            crate::log_scope::prefix(),
            path.display()
        );
    }
}

/// A library a plugin needs, found in a run path, opened and checked by the trust check: the
/// load maps it by this descriptor before the plugin (`registry::opener`). Its name in `found` is
/// the name it is needed by, which is its soname.
#[cfg(unix)]
#[derive(Debug)]
pub(crate) struct Dependency {
    /// Where it was found: the directory searched (symlinks in the name not followed), and
    /// the name in it. The loader is given `/proc/self/fd/D/<name>`, D that directory's
    /// descriptor, so `$ORIGIN` is that directory, as glibc's own search would make it.
    pub(crate) found: PathBuf,
    /// The checked file, opened once.
    pub(crate) file: std::fs::File,
    /// Its identity, as read from that descriptor.
    pub(crate) identity: FileId,
    /// Its loadable segments (for the owner checks of the loader layer).
    pub(crate) loads: Vec<std::ops::Range<u64>>,
    /// Whether `file` is a sealed copy of it (signed plugins, `provenance`): the loader is
    /// then given that descriptor itself, not the name in its directory.
    pub(crate) sealed: bool,
}

/// No library is mapped by dylease for a plugin where there is no trust check.
#[cfg(not(unix))]
#[derive(Debug)]
pub(crate) enum Dependency {}

/// What the trust check looks at of a file: its kind, owner, mode and identity (Unix).
#[cfg(unix)]
pub(crate) use crate::sys::walk::Stat as Status;
/// Nothing, where there is no trust check.
#[cfg(not(unix))]
pub(crate) type Status = ();

/// What the trust check would look at of the file `metadata` describes; `None` where it has
/// nothing to look at.
#[cfg(unix)]
pub(crate) fn status(metadata: &std::fs::Metadata) -> Option<Status> {
    Some(Status::of_metadata(metadata))
}

#[cfg(not(unix))]
pub(crate) fn status(_: &std::fs::Metadata) -> Option<Status> {
    None
}
