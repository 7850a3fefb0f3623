//! The libraries a plugin pulls in: its run path and needed libraries are part of the path
//! to the code it runs.
//!
//! The loader searches a plugin's DT_RUNPATH (or DT_RPATH) directories for each DT_NEEDED
//! name, and opens a DT_NEEDED that holds a `/` as a path. A directory there that another user
//! can write, or can *create* (a build-tree entry such as `/tmp/build/lib` that does not
//! exist, under the sticky, world-writable `/tmp`), lets that user plant a library whose
//! constructor runs with this process's rights. Under [`TrustPolicy::Strict`] the check walks
//! every such directory as it walks a plugin's own, tolerating a missing directory only when
//! no other user could create it, and checks each needed library found there (owner and
//! mode), then does the same for that library's own run path and needed libraries.
//!
//! Not walked: `LD_LIBRARY_PATH`, `/etc/ld.so.cache` and the system's default directories, and
//! the run path of the host executable: those are the process owner's choice.

use std::collections::HashSet;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::walk::{Issue, Problem, Subject, Walk};
use super::{Checks, sys};
use crate::load::candidate::Candidate;
use crate::load::elf_layout::Linkage;

/// How many libraries (the plugin included) one plugin's walk looks at, at most: more than
/// any real dependency tree has within run paths, so a loop of libraries ends.
const MAX_OBJECTS: usize = 256;

/// The subdirectories glibc tries below each directory it searches (`glibc-hwcaps/<level>`
/// and the legacy platform and capability names, nested up to four deep): an existing one
/// is searched too, so it is checked too.
const SUBDIRECTORIES: &[&str] = &[
    "glibc-hwcaps",
    "tls",
    "haswell",
    "xeon_phi",
    "avx512_1",
    "x86_64",
    "i386",
    "i486",
    "i586",
    "i686",
    "sse2",
    "aarch64",
    "atomics",
    "power8",
    "power9",
    "power10",
    "z13",
    "z14",
    "z15",
];

/// What `$PLATFORM` may expand to: glibc uses the CPU's platform name (`haswell`,
/// `xeon_phi` on x86_64), the kernel's `AT_PLATFORM` otherwise. Every candidate is checked.
const PLATFORMS: &[&str] = &[
    std::env::consts::ARCH,
    "haswell",
    "xeon_phi",
    "i386",
    "i486",
    "i586",
    "i686",
    "aarch64",
    "armv7l",
    "ppc64le",
    "power8",
    "power9",
    "power10",
    "s390x",
    "z13",
];

/// What `$LIB` may expand to: `lib`, `lib64` and the multiarch directories of the
/// distributions. Every candidate is checked.
fn lib_names() -> Vec<String> {
    let mut names: Vec<String> = ["lib", "lib64", "lib32", "libx32"].map(String::from).to_vec();
    for triple in [
        format!("{}-linux-gnu", std::env::consts::ARCH),
        "i386-linux-gnu".into(),
        "arm-linux-gnueabihf".into(),
        "powerpc64le-linux-gnu".into(),
    ] {
        names.push(format!("lib/{triple}"));
        names.push(format!("lib64/{triple}"));
    }
    names
}

/// One library of the walk: its resolved path, what it makes the loader look up, and the
/// DT_RPATH directories of the libraries that loaded it (glibc searches those too when it has
/// no DT_RUNPATH of its own).
struct Object {
    path: PathBuf,
    linkage: Linkage,
    inherited: Vec<PathBuf>,
}

impl Checks {
    /// Under [`TrustPolicy::Strict`](super::TrustPolicy::Strict), after the plugin file
    /// itself passed: its run paths and needed libraries, and theirs. `Err` with the reason.
    ///
    /// A file that cannot be read, or whose ELF structure is unsound, passes here: the ELF
    /// check refuses it next, with that cause. One that cannot be opened for lack of file
    /// descriptors does not: the check could not run.
    pub(super) fn dependencies(&mut self, candidate: &mut Candidate) -> Result<(), String> {
        let Some(file) = super::open_if_unchanged(candidate)? else {
            return Ok(());
        };
        let Ok(Some(linkage)) = crate::load::elf::linkage(&file, file.metadata.len()) else {
            // Not a library whose linkage could be read (a Python file, a data file of a
            // package, an unsound ELF file): nothing of it is kept open, and the ELF check, if
            // any, opens it again.
            return Ok(());
        };
        // The load uses this descriptor, and what was read of it.
        candidate.opened = Some(Box::new(file));
        let mut queue = vec![Object {
            path: candidate.resolved.clone(),
            linkage,
            inherited: Vec::new(),
        }];
        let mut seen: HashSet<PathBuf> = HashSet::from([candidate.resolved.clone()]);
        while let Some(object) = queue.pop() {
            for found in self.object(&object)? {
                if seen.len() < MAX_OBJECTS && seen.insert(found.path.clone()) {
                    queue.push(found);
                }
            }
        }
        Ok(())
    }

    /// Checks the run paths of `object` and where its needed libraries are found; returns
    /// those found through them, to walk next.
    fn object(&mut self, object: &Object) -> Result<Vec<Object>, String> {
        let origin = object.path.parent().unwrap_or(Path::new("/"));
        let mut search = Vec::new();
        let mut rpath = Vec::new();
        let lists = [
            ("DT_RUNPATH", &object.linkage.runpath),
            ("DT_RPATH", &object.linkage.rpath),
        ];
        for (tag, list) in lists {
            let Some(list) = list else { continue };
            for entry in list.split(|&b| b == b':') {
                for dir in expand(entry, origin) {
                    self.run_path_dir(&dir)
                        .map_err(|problem| refusal(object, &format!("run path ({tag}) entry"), entry, &problem))?;
                    if tag == "DT_RPATH" {
                        rpath.push(dir.clone());
                    }
                    search.push(dir);
                }
            }
        }
        search.extend(object.inherited.iter().cloned());
        rpath.extend(object.inherited.iter().cloned());

        let mut found = Vec::new();
        for name in &object.linkage.needed {
            let paths: Vec<PathBuf> = if name.contains(&b'/') {
                // Opened as a path (from the current directory when relative), never searched.
                expand(name, origin).into_iter().map(|p| absolute(&p)).collect()
            } else {
                self.search(&search, OsStr::from_bytes(name))
                    .map_err(|problem| refusal(object, "needed library", name, &problem))?
            };
            for path in paths {
                if !exists(&path) {
                    // The loader will not find it there: refused only if another user could
                    // put it there.
                    self.run_path_dir(&path)
                        .map_err(|problem| refusal(object, "needed library", name, &problem))?;
                    continue;
                }
                let (resolved, _) = self
                    .walk()
                    .file(&path, None)
                    .map_err(|problem| refusal(object, "needed library", name, &problem))?;
                if let Some(linkage) = linkage_of(&resolved) {
                    found.push(Object {
                        path: resolved,
                        linkage,
                        inherited: rpath.clone(),
                    });
                }
            }
        }
        Ok(found)
    }

    fn walk(&mut self) -> Walk<'_> {
        let euid = *self.euid.get_or_insert_with(crate::load::sys::imp::effective_uid);
        Walk {
            passed: &mut self.passed,
            euid,
            links: 0,
        }
    }

    /// Checks the run-path directory `dir` and the directories on the way to it. A missing
    /// directory passes when its nearest existing ancestor passed and lets no other user
    /// create names in it.
    fn run_path_dir(&mut self, dir: &Path) -> Result<(), Problem> {
        let dir = absolute(dir);
        let mut walk = self.walk();
        let mut here = PathBuf::from("/");
        for component in dir.components() {
            let next = here.join(component);
            if let std::path::Component::Normal(name) = component {
                let parent = walk.dir(&here)?;
                if let Err(e) = sys::stat_at(&parent, name)
                    && e.kind() == std::io::ErrorKind::NotFound
                {
                    let mode = parent.stat.mode();
                    if mode & 0o022 != 0 {
                        return Err(Problem::new(
                            Subject::Directory,
                            &next,
                            Issue::Io(format!(
                                "it does not exist, and other users can create it: `{}` is writable by {} \
                                 (mode {mode:04o}{})",
                                parent.path.display(),
                                match (mode & 0o020 != 0, mode & 0o002 != 0) {
                                    (true, true) => "group and others",
                                    (true, false) => "group",
                                    _ => "others",
                                },
                                if mode & 0o1000 != 0 { ", sticky" } else { "" },
                            )),
                        ));
                    }
                    return Ok(());
                }
            }
            walk.dir(&next)?;
            here = next;
        }
        Ok(())
    }

    /// Where the loader finds `name` in the directories `search` (and the subdirectories it
    /// tries below each): every file of that name there, checked by the caller. Existing
    /// subdirectories it tries are checked on the way.
    fn search(&mut self, search: &[PathBuf], name: &OsStr) -> Result<Vec<PathBuf>, Problem> {
        let mut files = Vec::new();
        for dir in search {
            let mut dirs = vec![(absolute(dir), 0)];
            while let Some((dir, depth)) = dirs.pop() {
                let walk_dir = {
                    let mut walk = self.walk();
                    match walk.dir(&dir) {
                        Ok(found) => found,
                        // A missing directory was judged by `run_path_dir`.
                        Err(_) if !exists(&dir) => continue,
                        Err(problem) => return Err(problem),
                    }
                };
                if sys::stat_at(&walk_dir, name).is_ok() {
                    files.push(walk_dir.path.join(name));
                }
                if depth == 4 {
                    continue;
                }
                let below_hwcaps = walk_dir.path.file_name() == Some(OsStr::new("glibc-hwcaps"));
                for sub in std::fs::read_dir(&walk_dir.path).into_iter().flatten().flatten() {
                    let sub_name = sub.file_name();
                    let tried = below_hwcaps || SUBDIRECTORIES.iter().any(|s| OsStr::new(s) == sub_name);
                    if tried && sub.file_type().is_ok_and(|t| t.is_dir() || t.is_symlink()) {
                        dirs.push((walk_dir.path.join(sub_name), depth + 1));
                    }
                }
            }
        }
        Ok(files)
    }
}

fn exists(path: &Path) -> bool {
    path.symlink_metadata().is_ok()
}

/// `path` from the current directory when it is relative (as the loader reads it).
fn absolute(path: &Path) -> PathBuf {
    if path.is_absolute() {
        path.to_owned()
    } else {
        std::env::current_dir().map_or_else(|_| path.to_owned(), |cwd| cwd.join(path))
    }
}

/// A run-path entry or needed path with `$ORIGIN`, `$LIB` and `$PLATFORM` (also `${…}`)
/// expanded as the loader does: every value each may take, one path per combination.
fn expand(entry: &[u8], origin: &Path) -> Vec<PathBuf> {
    let text = String::from_utf8_lossy(entry);
    let origin = origin.to_string_lossy();
    let mut paths = vec![String::new()];
    let mut rest: &str = &text;
    while let Some(at) = rest.find('$') {
        let (before, token) = rest.split_at(at);
        for path in &mut paths {
            path.push_str(before);
        }
        let (values, after): (Vec<String>, &str) = if let Some(after) = strip_token(token, "ORIGIN") {
            (vec![origin.to_string()], after)
        } else if let Some(after) = strip_token(token, "LIB") {
            (lib_names(), after)
        } else if let Some(after) = strip_token(token, "PLATFORM") {
            (PLATFORMS.iter().map(|p| (*p).to_owned()).collect(), after)
        } else {
            (vec!["$".to_owned()], &token[1..])
        };
        paths = paths
            .iter()
            .flat_map(|path| values.iter().map(move |value| format!("{path}{value}")))
            .collect();
        rest = after;
    }
    for path in &mut paths {
        path.push_str(rest);
    }
    paths.sort_unstable();
    paths.dedup();
    paths.into_iter().map(PathBuf::from).collect()
}

/// `token` (from its `$`) without `$NAME` or `${NAME}`; `None` if it is not that token.
fn strip_token<'a>(token: &'a str, name: &str) -> Option<&'a str> {
    let rest = &token[1..];
    if let Some(braced) = rest.strip_prefix('{') {
        return braced.strip_prefix(name)?.strip_prefix('}');
    }
    let after = rest.strip_prefix(name)?;
    // `$ORIGINAL` is not `$ORIGIN` followed by `AL`.
    match after.chars().next() {
        Some(c) if c.is_ascii_alphanumeric() || c == '_' => None,
        _ => Some(after),
    }
}

/// What the library at `path` makes the loader look up, if it is a readable ELF library.
fn linkage_of(path: &Path) -> Option<Linkage> {
    let file = std::fs::File::open(path).ok()?;
    let metadata = file.metadata().ok()?;
    let file = crate::load::elf::Opened::new(file, metadata);
    crate::load::elf::linkage(&file, file.metadata.len()).ok().flatten()
}

/// The reason a plugin is refused for a problem found through its dependencies.
fn refusal(object: &Object, what: &str, entry: &[u8], problem: &Problem) -> String {
    let path = problem.path.display();
    let cause = match &problem.issue {
        Issue::Io(what) => format!("`{path}`: {what}"),
        Issue::Owner { owner, euid } => format!(
            "`{path}` is owned by uid {owner}, which is neither this process's effective user (uid {euid}) nor root"
        ),
        Issue::Writable { writers, mode } => format!("`{path}` is writable by {writers} (mode {mode:04o})"),
    };
    format!(
        "the {what} `{entry}` of `{object}` lets the loader run code another user can choose: {cause}; fix: build \
         the plugin without that entry and keep the libraries it needs beside it, found through a run path \
         relative to `$ORIGIN` (`-Wl,-rpath,'$ORIGIN'`), or in a directory only you or root can write; or, if \
         every user who can write there is trusted, build the host with `TrustPolicy::Permissive`",
        entry = String::from_utf8_lossy(entry),
        object = object.path.display(),
    )
}
