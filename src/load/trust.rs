//! The trust check: who could have chosen the code a plugin file holds.
//!
//! Opening a library runs its code with all of this process's rights. If another user can
//! write the file, or any directory on the way to it (and so rename the file, or a whole
//! directory, or a symlink, out from under the path), that user can run code as this
//! process. The check walks the path one component at a time on open descriptors, as the
//! kernel would resolve it, and looks at the owner and mode of every directory and symlink
//! it traverses and of the file it ends at, before `dlopen`: a refused plugin runs no code at
//! all. The file is then opened once, and that descriptor is what the ELF check reads (see
//! [`open_checked`]).

use std::fs::File;
#[cfg(unix)]
use std::path::{Component, Path, PathBuf};

use crate::error::Error;
use crate::load::candidate::{Candidate, FileId, Identity};
#[cfg(unix)]
use crate::load::sys::walk as sys;
use crate::load::sys::{file_id, is_replacement, no_follow};

#[cfg(unix)]
mod deps;

/// Which plugin files a host agrees to open.
///
/// # Example
///
/// ```no_run
/// use dylease::{PluginHost, TrustPolicy};
///
/// // The default on Unix: refuse files that other users could have changed.
/// // SAFETY: /opt/app/plugins holds this application's own plugins.
/// let strict = unsafe { PluginHost::builder().dir("/opt/app/plugins") }.build()?;
/// assert_eq!(strict.trust(), TrustPolicy::Strict);
///
/// // A build tree shared by a group of developers: open what is there.
/// // SAFETY: the group's plugins are trusted to be sound.
/// let permissive = unsafe { PluginHost::builder().dir("/srv/shared-build/plugins") }
///     .trust(TrustPolicy::Permissive)
///     .build()?;
/// # Ok::<(), dylease::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TrustPolicy {
    /// Refuses, with [`Error::Untrusted`] and before opening it, a plugin file that another
    /// user could have chosen. The path is resolved one component at a time (a relative
    /// path, even a bare file name, from the current directory), and every directory
    /// traversed counts — each ancestor up to `/` of the directory the file or a symlink is
    /// found in, and of each symlink's target — as does every symlink and the file itself.
    /// Each must be owned by this process's effective user or root; the file and the
    /// directories must not be writable by group or others, except a directory with the
    /// sticky bit (like `/tmp`), where others cannot rename what they do not own. The file is
    /// then opened once and its device and inode compared with the file checked, so a file
    /// renamed into place after the check (by a plugin loaded before it, say) is refused too.
    ///
    /// What the file pulls in counts too: every directory of its run path (DT_RUNPATH or
    /// DT_RPATH, with `$ORIGIN`, `$LIB` and `$PLATFORM` expanded to every value the loader
    /// may give them) passes the same checks, and one that does not exist passes only when
    /// no other user could create it (its nearest existing ancestor is not writable by group
    /// or others, sticky or not: `/tmp/build/lib` is refused). A needed library (DT_NEEDED)
    /// named by a path, or found in one of those directories or the subdirectories the loader
    /// tries below them, is checked like the plugin file, and so is what it pulls in.
    ///
    /// Not checked: access control lists; `LD_LIBRARY_PATH`, `LD_PRELOAD`, the loader's cache
    /// and the system's default directories, which are the process owner's choice; and what
    /// the effective user or root change between the check and `dlopen`. On platforms other
    /// than Unix there are no owners and modes to check, and nothing is refused.
    Strict,
    /// Opens every plugin file the sources name, whoever could have written it.
    Permissive,
}

impl Default for TrustPolicy {
    /// [`TrustPolicy::Strict`] on Unix; [`TrustPolicy::Permissive`] elsewhere, where
    /// `Strict` would check nothing.
    fn default() -> Self {
        if cfg!(unix) {
            TrustPolicy::Strict
        } else {
            TrustPolicy::Permissive
        }
    }
}

/// The trust checks of one load: each directory is walked and checked once per load,
/// however many plugin files it holds.
#[derive(Debug, Default)]
pub(crate) struct Checks {
    /// This process's effective user, asked once.
    #[cfg(unix)]
    euid: Option<u32>,
    /// The directories that passed so far, by the absolute path that named them (as written,
    /// and resolved): where the path resolves to, and an open descriptor of it. No other user
    /// can change what a passed path resolves to, so the verdict holds for the whole load.
    #[cfg(unix)]
    passed: std::collections::HashMap<PathBuf, std::rc::Rc<sys::Dir>>,
}

impl Checks {
    /// Checks `candidate` under `policy`, before anything opens it. Under
    /// [`TrustPolicy::Strict`] a passed candidate's `resolved` path becomes the path the
    /// check walked, and `checked` the file it found there.
    pub(crate) fn check(&mut self, policy: TrustPolicy, candidate: &mut Candidate) -> Result<(), Error> {
        match policy {
            TrustPolicy::Permissive => Ok(()),
            TrustPolicy::Strict => match self.strict(&candidate.path) {
                Ok(Some((resolved, id))) => {
                    candidate.resolved = resolved;
                    candidate.checked = Some(id);
                    self.dependencies(candidate).map_err(|reason| Error::Untrusted {
                        path: candidate.path.clone(),
                        reason,
                    })
                }
                Ok(None) => Ok(()),
                Err(reason) => Err(Error::Untrusted {
                    path: candidate.path.clone(),
                    reason,
                }),
            },
        }
    }

    #[cfg(unix)]
    fn strict(&mut self, path: &Path) -> Result<Option<(PathBuf, FileId)>, String> {
        let euid = *self.euid.get_or_insert_with(crate::load::sys::imp::effective_uid);
        // A relative path, a bare file name too, is resolved from the current directory,
        // whose every ancestor counts like those of any other directory.
        let absolute = if path.is_absolute() {
            path.to_owned()
        } else {
            let cwd = std::env::current_dir()
                .map_err(|e| format!("cannot find the current directory the relative path starts from: {e}"))?;
            cwd.join(path)
        };
        let mut walk = Walk {
            passed: &mut self.passed,
            euid,
            links: 0,
        };
        walk.file(&absolute).map(Some).map_err(|mut problem| {
            problem.holder = problem.through.is_empty() && Some(problem.path.as_path()) == absolute.parent();
            problem.to_string()
        })
    }

    #[cfg(not(unix))]
    fn dependencies(&mut self, _: &Candidate) -> Result<(), String> {
        Ok(())
    }

    #[cfg(not(unix))]
    fn strict(&mut self, _: &std::path::Path) -> Result<Option<(std::path::PathBuf, FileId)>, String> {
        Ok(None)
    }
}

/// How many times [`open_checked`] checks a file again that was replaced after its check.
const REPLACEMENTS: u32 = 8;

/// Opens the file `candidate` names for reading, once: the descriptor the ELF check reads and
/// the loader maps. After a trust check it must be the file checked (same device and inode),
/// and the last component is not followed (the check resolved every symlink already). Returns
/// the file, its length and its identity.
///
/// A file replaced after its check (renamed over, or removed and created again) was replaced
/// by this user or root: only they can change a directory that passed. That is an install,
/// not an attack, so the new file is checked in turn (at most [`REPLACEMENTS`] times) and
/// opened if it passes; `Untrusted` only if what is there now fails the check.
pub(crate) fn open_checked(
    candidate: &mut Candidate,
    checks: &mut Checks,
    policy: TrustPolicy,
) -> Result<(File, u64, Identity), Error> {
    let mut replaced = 0;
    loop {
        let refused = |reason: String| Error::Open {
            path: candidate.path.clone(),
            reason,
            cause: crate::error::OpenCause::Headers,
        };
        let (file, metadata) = match open_once(candidate) {
            Ok(opened) => opened,
            // Gone, or a symlink now: replaced after the check, if it was checked.
            Err(e) if candidate.checked.is_some() && replaced < REPLACEMENTS && is_replacement(&e) => {
                replaced += 1;
                checks.check(policy, candidate)?;
                continue;
            }
            Err(e) => {
                return Err(refused(format!(
                    "cannot open `{}`: {e}{}",
                    candidate.resolved.display(),
                    crate::load::library::descriptor_hint(&e)
                )));
            }
        };
        let id = file_id(&metadata);
        match candidate.checked {
            Some(checked) if id != Some(checked) => {
                if replaced == REPLACEMENTS {
                    return Err(Error::Untrusted {
                        path: candidate.path.clone(),
                        reason: format!(
                            "the library file `{}` was replaced {REPLACEMENTS} times while this host checked \
                             and opened it; try again once its installation is done",
                            candidate.resolved.display()
                        ),
                    });
                }
                replaced += 1;
                drop(file);
                checks.check(policy, candidate)?;
            }
            _ => {
                // `Identity` is `Copy` on Unix and a path elsewhere (where `checked_identity` is
                // not the identity function): one spelling for both.
                #[allow(clippy::clone_on_copy, clippy::unnecessary_option_map_or_else)]
                let identity = id.map_or_else(|| candidate.identity.clone(), crate::load::sys::checked_identity);
                return Ok((file, metadata.len(), identity));
            }
        }
    }
}

/// Opens the file `candidate` names for reading, not following a symlink in the last
/// component if it was checked, and reads its status from the descriptor.
fn open_once(candidate: &Candidate) -> std::io::Result<(File, std::fs::Metadata)> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    if candidate.checked.is_some() {
        no_follow(&mut options);
    }
    let file = options.open(&candidate.resolved)?;
    let metadata = file.metadata()?;
    Ok((file, metadata))
}

/// The checked file, opened as [`open_checked`] opens it, if it is still the file checked
/// (the dependency walk reads its linkage; a replaced file is checked again when it is
/// opened to load).
#[cfg(unix)]
fn open_if_unchanged(candidate: &Candidate) -> Option<(File, u64)> {
    let (file, metadata) = open_once(candidate).ok()?;
    let len = metadata.len();
    (file_id(&metadata) == candidate.checked).then_some((file, len))
}

/// How many symlinks one path may traverse, as Linux allows (`ELOOP` beyond).
#[cfg(unix)]
const MAX_LINKS: u32 = 40;

/// One path's walk, component by component, on descriptors of the directories it passes.
#[cfg(unix)]
struct Walk<'a> {
    passed: &'a mut std::collections::HashMap<PathBuf, std::rc::Rc<sys::Dir>>,
    euid: u32,
    /// Symlinks traversed so far.
    links: u32,
}

#[cfg(unix)]
impl Walk<'_> {
    /// Resolves the absolute path `path` to a regular file, checking everything traversed.
    fn file(&mut self, path: &Path) -> Result<(PathBuf, FileId), Problem> {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(Problem::io(path, "is not a regular file"));
        };
        let dir = self.dir(parent)?;
        let resolved = dir.path.join(name);
        let stat = sys::stat_at(&dir, name).map_err(|e| Problem::io(&resolved, &e.to_string()))?;
        match stat.kind() {
            sys::Kind::Symlink => {
                let target = self.follow(&dir, name, &resolved, &stat)?;
                self.file(&target).map_err(|problem| problem.through(&resolved))
            }
            sys::Kind::File => {
                self.verdict(Subject::File, &resolved, &stat)?;
                Ok((resolved, stat.id()))
            }
            sys::Kind::Directory | sys::Kind::Other => Err(Problem::io(&resolved, "is not a regular file")),
        }
    }

    /// Resolves the absolute path `path` to a directory, checking it and every directory and
    /// symlink on the way to it.
    fn dir(&mut self, path: &Path) -> Result<std::rc::Rc<sys::Dir>, Problem> {
        if let Some(dir) = self.passed.get(path) {
            return Ok(dir.clone());
        }
        // Every path here is absolute, so only the root has no parent.
        let parent = path.parent().unwrap_or(Path::new("/"));
        let dir = match path.components().next_back() {
            None | Some(Component::RootDir | Component::Prefix(_)) => {
                let root = sys::Dir::root().map_err(|e| Problem::io(Path::new("/"), &e.to_string()))?;
                self.verdict(Subject::Directory, &root.path, &root.stat)?;
                std::rc::Rc::new(root)
            }
            Some(Component::ParentDir) => {
                // The parent of a resolved directory: walked (and so passed) already.
                let from = self.dir(parent)?;
                let up = from.path.parent().unwrap_or(&from.path).to_owned();
                self.dir(&up)?
            }
            Some(Component::CurDir) => self.dir(parent)?,
            Some(Component::Normal(name)) => {
                let parent = self.dir(parent)?;
                let resolved = parent.path.join(name);
                match sys::Dir::open_at(&parent, name, resolved.clone()) {
                    Ok(dir) => {
                        self.verdict(Subject::Directory, &dir.path, &dir.stat)?;
                        std::rc::Rc::new(dir)
                    }
                    Err(open_error) => {
                        let stat = sys::stat_at(&parent, name).map_err(|e| Problem::io(&resolved, &e.to_string()))?;
                        if stat.kind() != sys::Kind::Symlink {
                            return Err(Problem::io(&resolved, &open_error.to_string()));
                        }
                        let target = self.follow(&parent, name, &resolved, &stat)?;
                        self.dir(&target).map_err(|problem| problem.through(&resolved))?
                    }
                }
            }
        };
        self.passed.insert(path.to_owned(), dir.clone());
        if dir.path != path {
            self.passed.insert(dir.path.clone(), dir.clone());
        }
        Ok(dir)
    }

    /// Checks the symlink `name` in `dir` (at `resolved`) and returns the absolute path it
    /// points to.
    fn follow(
        &mut self,
        dir: &sys::Dir,
        name: &std::ffi::OsStr,
        resolved: &Path,
        stat: &sys::Stat,
    ) -> Result<PathBuf, Problem> {
        self.links += 1;
        if self.links > MAX_LINKS {
            return Err(Problem::io(resolved, "leads through too many symlinks (a loop?)"));
        }
        self.verdict(Subject::Symlink, resolved, stat)?;
        let target = sys::read_link_at(dir, name).map_err(|e| Problem::io(resolved, &e.to_string()))?;
        Ok(dir.path.join(target))
    }

    /// Checks the owner and mode of a file, directory or symlink.
    fn verdict(&self, subject: Subject, path: &Path, stat: &sys::Stat) -> Result<(), Problem> {
        let (owner, mode) = (stat.owner(), stat.mode());
        if owner != self.euid && owner != 0 {
            return Err(Problem::new(subject, path, Issue::Owner { owner, euid: self.euid }));
        }
        // A symlink's own mode means nothing; whoever owns it or its directory can replace it.
        let sticky_dir = subject == Subject::Directory && mode & 0o1000 != 0;
        if subject == Subject::Symlink || sticky_dir {
            return Ok(());
        }
        let writers = match (mode & 0o020 != 0, mode & 0o002 != 0) {
            (false, false) => return Ok(()),
            (true, false) => "group",
            (false, true) => "others",
            (true, true) => "group and others",
        };
        Err(Problem::new(subject, path, Issue::Writable { writers, mode }))
    }
}

/// What a checked path is to the plugin, for the message.
#[cfg(unix)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Subject {
    File,
    Directory,
    Symlink,
}

#[cfg(unix)]
#[derive(Debug)]
enum Issue {
    Owner {
        owner: u32,
        euid: u32,
    },
    Writable {
        writers: &'static str,
        mode: u32,
    },
    /// It cannot be looked at: how the system put it.
    Io(String),
}

/// Why a path failed the check, and the symlinks through which the walk reached it.
#[cfg(unix)]
#[derive(Debug)]
struct Problem {
    subject: Subject,
    path: PathBuf,
    issue: Issue,
    /// Symlinks that led here, innermost first.
    through: Vec<PathBuf>,
    /// The directory the plugin file, as named, is in.
    holder: bool,
}

#[cfg(unix)]
impl Problem {
    fn new(subject: Subject, path: &Path, issue: Issue) -> Problem {
        Problem {
            subject,
            path: path.to_owned(),
            issue,
            through: Vec::new(),
            holder: false,
        }
    }

    fn io(path: &Path, what: &str) -> Problem {
        Problem::new(Subject::File, path, Issue::Io(what.to_owned()))
    }

    fn through(mut self, link: &Path) -> Problem {
        self.through.push(link.to_owned());
        self
    }
}

#[cfg(unix)]
impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const OPT_OUT: &str = "or, if every user who can write there is trusted, build the host with \
                               `TrustPolicy::Permissive`";
        let path = self.path.display();
        let subject = match self.subject {
            Subject::File => "the library file",
            Subject::Directory if self.holder => "its directory",
            Subject::Directory => "the directory",
            Subject::Symlink => "the symlink",
        };
        let mut through = String::new();
        for (i, link) in self.through.iter().rev().enumerate() {
            through.push_str(if i == 0 {
                ", reached through the symlink "
            } else {
                ", then "
            });
            through.push_str(&format!("`{}`", link.display()));
        }
        if !through.is_empty() {
            through.push(',');
        }
        let on_the_way = if self.subject == Subject::File || self.holder {
            ""
        } else {
            " on the way to it"
        };
        match &self.issue {
            Issue::Io(what) => write!(f, "cannot check `{path}`{}: {what}", through.trim_end_matches(',')),
            Issue::Owner { owner, euid } => write!(
                f,
                "{subject} `{path}`{on_the_way}{through} is owned by uid {owner}, which is neither this \
                 process's effective user (uid {euid}) nor root, so that user can change the code this \
                 process would run; fix: `chown {euid} {path}`, {OPT_OUT}"
            ),
            Issue::Writable { writers, mode } => write!(
                f,
                "{subject} `{path}`{on_the_way}{through} is writable by {writers} (mode {mode:04o}), so \
                 other users can change the code this process would run; fix: `chmod go-w {path}`, {OPT_OUT}"
            ),
        }
    }
}
