//! The walk of the trust check: one path, component by component, on descriptors of the
//! directories it passes (the system calls are `sys::walk`'s), and what it found wrong,
//! as a message.

use std::path::{Component, Path, PathBuf};

use crate::sys::walk as sys;
use crate::trust::candidate::FileId;

/// How many symlinks one path may traverse, as Linux allows (`ELOOP` beyond).
pub(super) const MAX_LINKS: u32 = 40;

/// One path's walk, component by component, on descriptors of the directories it passes.
pub(super) struct Walk<'a> {
    pub(super) passed: &'a mut std::collections::HashMap<PathBuf, std::rc::Rc<sys::Dir>>,
    pub(super) euid: u32,
    /// Symlinks traversed so far.
    pub(super) links: u32,
}

impl Walk<'_> {
    /// Resolves the absolute path `path` to a regular file, checking everything traversed.
    /// `known`: the status of the file at `path` read already (discovery's, of a directory
    /// entry that is no symlink), which spares reading it again here. Whatever it says is
    /// held to the file opened later: its identity must be the one returned.
    pub(super) fn file(&mut self, path: &Path, known: Option<sys::Stat>) -> Result<(PathBuf, FileId), Problem> {
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(Problem::io(path, "is not a regular file"));
        };
        let dir = self.dir(parent)?;
        let resolved = dir.path.join(name);
        let stat = match known {
            Some(stat) => stat,
            None => sys::stat_at(&dir, name).map_err(|e| Problem::os(&resolved, &e))?,
        };
        match stat.kind() {
            sys::Kind::Symlink => {
                let target = self.follow(&dir, name, &resolved, &stat)?;
                self.file(&target, None).map_err(|problem| problem.through(&resolved))
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
    pub(super) fn dir(&mut self, path: &Path) -> Result<std::rc::Rc<sys::Dir>, Problem> {
        if let Some(dir) = self.passed.get(path) {
            return Ok(dir.clone());
        }
        // Every path here is absolute, so only the root has no parent.
        let parent = path.parent().unwrap_or(Path::new("/"));
        let dir = match path.components().next_back() {
            None | Some(Component::RootDir | Component::Prefix(_)) => {
                let root = sys::Dir::root().map_err(|e| Problem::os(Path::new("/"), &e))?;
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
                        let stat = sys::stat_at(&parent, name).map_err(|e| Problem::os(&resolved, &e))?;
                        if stat.kind() != sys::Kind::Symlink {
                            return Err(Problem::os(&resolved, &open_error));
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
    pub(super) fn follow(
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
        let target = sys::read_link_at(dir, name).map_err(|e| Problem::os(resolved, &e))?;
        Ok(dir.path.join(target))
    }

    /// Checks the owner and mode of a file, directory or symlink.
    pub(super) fn verdict(&self, subject: Subject, path: &Path, stat: &sys::Stat) -> Result<(), Problem> {
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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Subject {
    File,
    Directory,
    Symlink,
}

#[derive(Debug)]
pub(super) enum Issue {
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
    /// It cannot be looked at for lack of file descriptors (the process's, EMFILE, or the
    /// system's, ENFILE): how the system put it, and the limit reached. The check could not
    /// judge it, which says nothing of who can change it.
    Descriptors(String),
}

/// Why a path failed the check, and the symlinks through which the walk reached it.
#[derive(Debug)]
pub(super) struct Problem {
    pub(super) subject: Subject,
    pub(super) path: PathBuf,
    pub(super) issue: Issue,
    /// Symlinks that led here, innermost first.
    pub(super) through: Vec<PathBuf>,
    /// The directory the plugin file, as named, is in.
    pub(super) holder: bool,
}

impl Problem {
    pub(super) fn new(subject: Subject, path: &Path, issue: Issue) -> Problem {
        Problem {
            subject,
            path: path.to_owned(),
            issue,
            through: Vec::new(),
            holder: false,
        }
    }

    pub(super) fn io(path: &Path, what: &str) -> Problem {
        Problem::new(Subject::File, path, Issue::Io(what.to_owned()))
    }

    /// `path` cannot be looked at: the system's `error`, a lack of descriptors told apart.
    pub(super) fn os(path: &Path, error: &std::io::Error) -> Problem {
        Problem::os_doing(path, "", error)
    }

    /// As [`Problem::os`], with what was being done (`"cannot list it: "`) before the error.
    pub(super) fn os_doing(path: &Path, doing: &str, error: &std::io::Error) -> Problem {
        let issue = match super::out_of_descriptors(error) {
            Some(limit) => Issue::Descriptors(format!("{doing}{error}{limit}")),
            None => Issue::Io(format!("{doing}{error}")),
        };
        Problem::new(Subject::File, path, issue)
    }

    /// Whether the check could not judge the path for lack of file descriptors.
    pub(super) fn out_of_descriptors(&self) -> bool {
        matches!(self.issue, Issue::Descriptors(_))
    }

    pub(super) fn through(mut self, link: &Path) -> Problem {
        self.through.push(link.to_owned());
        self
    }
}

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
            Issue::Io(what) | Issue::Descriptors(what) => {
                write!(f, "cannot check `{path}`{}: {what}", through.trim_end_matches(','))
            }
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

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    /// A lack of descriptors, the process's (EMFILE) or the system's (ENFILE), is told apart
    /// from every other failure to look at a path, and its message names the limit reached.
    #[test]
    fn a_lack_of_descriptors_is_told_apart_from_a_path_that_cannot_be_looked_at() {
        let problem = |errno| Problem::os(Path::new("/lib"), &std::io::Error::from_raw_os_error(errno));
        for (errno, limit) in [
            (libc::EMFILE, "`ulimit -n`"),
            (libc::ENFILE, "the system's table of open files"),
        ] {
            let problem = problem(errno);
            assert!(problem.out_of_descriptors(), "{errno}");
            let message = problem.to_string();
            assert!(
                message.starts_with("cannot check `/lib`: ") && message.contains(limit),
                "{message}"
            );
        }
        for errno in [libc::EACCES, libc::ENOENT, libc::EIO] {
            assert!(!problem(errno).out_of_descriptors(), "{errno}");
        }
        let listing = Problem::os_doing(
            Path::new("/lib"),
            "cannot list it: ",
            &std::io::Error::from_raw_os_error(libc::EMFILE),
        );
        assert!(listing.out_of_descriptors());
        assert!(
            listing.to_string().contains("cannot list it: Too many open files"),
            "{listing}"
        );
    }
}
