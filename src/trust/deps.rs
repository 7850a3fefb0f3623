//! The libraries a plugin pulls in, resolved once and mapped by dylease itself, so that the
//! loader never searches for one (the dependency protocol, `docs::internals`).
//!
//! glibc answers a needed name with an object it has loaded already whose `DT_SONAME` is that
//! name, before it searches any directory. So under [`TrustPolicy::Strict`](super::TrustPolicy)
//! the check resolves a plugin's dependency closure here — DT_NEEDED, DT_AUXILIARY and
//! DT_FILTER, in glibc's order of directories — and every library found in a run path is
//! opened once, checked on that descriptor (owner, mode, every directory on the way, ELF
//! structure, its soname) and handed to the load, which maps it by that descriptor before the
//! plugin, dependencies first (`registry::opener`). What is left to glibc's own search is
//! what dylease does not judge: names found through `LD_LIBRARY_PATH` and the system's
//! libraries (names found in no run path). glibc still tries every run-path directory (and
//! the `glibc-hwcaps` and legacy subdirectories below it) for those first, so each such
//! directory must be one in which nobody but this user and root can create names.
//!
//! Whatever this mechanism cannot cover is refused, with the reason: a needed name holding a
//! `/` or a `$` (glibc opens it as a path), a dependency whose soname is not the name it is
//! needed by, a cycle, an audit library (DT_AUDIT, DT_DEPAUDIT), a relative run-path entry, a
//! name found twice below one run-path directory (which one glibc takes depends on the CPU),
//! more than [`MAX_OBJECTS`] libraries, a file that cannot be opened or read, and, on a C
//! library that does not match needed names by soname (musl), any dependency in a run path.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use dylease_elf::Linkage;

use super::walk::{Issue, Problem, Subject, Walk};
use super::{Checks, Refused, sys};
use crate::sync::Arc;
use crate::trust::candidate::{Dependency, FileId, Opened};

/// How many libraries one plugin's closure may hold. More is refused (not cut short): a
/// closure the check did not finish is one it cannot vouch for.
pub(crate) const MAX_OBJECTS: usize = 512;

/// How deep below a run-path directory glibc's subdirectories are looked at.
const MAX_DEPTH: usize = 4;

/// The subdirectories glibc tries below each directory it searches (`glibc-hwcaps/<level>`
/// and the legacy platform and capability names, nested): an existing one is searched too,
/// so it is checked too.
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
/// `xeon_phi` on x86_64), the kernel's `AT_PLATFORM` otherwise. Every candidate is searched,
/// in this order.
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
/// distributions. Every candidate is searched, in this order.
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

/// How a needed name was answered in one closure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    /// Being resolved: meeting it again is a cycle.
    Resolving,
    /// By a library of the closure, mapped by dylease.
    Mapped,
    /// Left to glibc: found through `LD_LIBRARY_PATH`, or in no run path (a system library).
    Loader,
}

/// One library whose names are being resolved.
struct Object<'a> {
    /// Where it was found (for messages).
    path: &'a Path,
    /// What `$ORIGIN` is for it: the directory the loader is given its name in.
    origin: &'a Path,
    linkage: &'a Linkage,
    /// The DT_RPATH directories of the libraries that led to it, searched for its names after
    /// its own when it has no DT_RUNPATH (glibc's chain of loaders).
    inherited: &'a [PathBuf],
}

/// One directory of a search, and what it is to the loader.
#[derive(Debug, Clone)]
struct SearchDir {
    path: PathBuf,
    /// `Some(tag)`: a run-path directory (DT_RPATH, DT_RUNPATH), whose libraries dylease maps;
    /// `None`: an `LD_LIBRARY_PATH` directory, left to the loader.
    tag: Option<&'static str>,
}

/// The resolution of one plugin's closure.
struct Resolver<'c> {
    checks: &'c mut Checks,
    /// Dependencies in mapping order: each after every library it needs.
    order: Vec<Dependency>,
    answers: HashMap<Vec<u8>, Answer>,
    /// `LD_LIBRARY_PATH`'s directories (none under secure execution, where glibc ignores it).
    library_path: Vec<PathBuf>,
}

impl Checks {
    /// Resolves the dependency closure of the plugin at `path` (found at `resolved`, whose
    /// directory is its `$ORIGIN`), whose dynamic section says `linkage`: the libraries to
    /// map before it, dependencies first. `Err` with the reason under which the plugin is
    /// refused, or with what could not be opened for lack of file descriptors.
    pub(crate) fn resolve(&mut self, resolved: &Path, linkage: &Linkage) -> Result<Vec<Dependency>, Refused> {
        let library_path = if crate::sys::imp::secure_execution() {
            Vec::new()
        } else {
            // As glibc reads it (`_dl_init_paths`): entries split at `:` and `;`, an empty
            // entry is the current directory, an empty variable is none.
            std::env::var_os("LD_LIBRARY_PATH")
                .filter(|list| !list.is_empty())
                .map(|list| {
                    list.as_bytes()
                        .split(|&b| b == b':' || b == b';')
                        .map(|entry| match entry {
                            b"" => PathBuf::from("."),
                            entry => PathBuf::from(OsStr::from_bytes(entry)),
                        })
                        .collect()
                })
                .unwrap_or_default()
        };
        let mut resolver = Resolver {
            checks: self,
            order: Vec::new(),
            answers: HashMap::new(),
            library_path,
        };
        let origin = resolved.parent().unwrap_or(Path::new("/"));
        resolver.visit(&Object {
            path: resolved,
            origin,
            linkage,
            inherited: &[],
        })?;
        Ok(resolver.order)
    }

    fn walk(&mut self) -> Walk<'_> {
        let euid = *self.euid.get_or_insert_with(crate::sys::imp::effective_uid);
        Walk {
            passed: &mut self.passed,
            euid,
            links: 0,
        }
    }

    /// Checks the run-path directory `dir` (absolute) and the directories on the way to it.
    /// The directory itself must let nobody but this user and root create names in it —
    /// sticky or not, since glibc looks there for subdirectories that may not exist yet — and
    /// so must every subdirectory glibc tries below it that exists. A missing directory
    /// passes when its nearest existing ancestor lets nobody else create names.
    fn run_path_dir(&mut self, dir: &Path) -> Result<(), Problem> {
        let mut here = PathBuf::from("/");
        for component in dir.components() {
            let next = here.join(component);
            if let std::path::Component::Normal(name) = component {
                let parent = self.walk().dir(&here)?;
                match sys::stat_at(&parent, name) {
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        return creatable_by_others(&parent.path, parent.stat.mode())
                            .map_or(Ok(()), |issue| Err(Problem::new(Subject::Directory, &next, issue)));
                    }
                    Err(e) => return Err(Problem::os(&next, &e)),
                    Ok(_) => {}
                }
            }
            self.walk().dir(&next)?;
            here = next;
        }
        self.searched_below(&here, 0)
    }

    /// Checks `dir` (walked and passed already) as a directory glibc searches: nobody else
    /// may create names in it, nor in the subdirectories glibc tries below it.
    fn searched_below(&mut self, dir: &Path, depth: usize) -> Result<(), Problem> {
        let found = self.walk().dir(dir)?;
        if let Some(mut issue) = creatable_by_others(&found.path, found.stat.mode()) {
            if let Issue::Io(what) = &mut issue {
                *what = what.replacen("it does not exist, and ", "", 1);
            }
            return Err(Problem::new(Subject::Directory, &found.path, issue));
        }
        if depth == MAX_DEPTH {
            return Ok(());
        }
        for (sub, kind) in tried_below(&found.path)? {
            match self.walk().dir(&sub) {
                // A symlink to something other than a directory: glibc finds nothing there.
                Err(_) if kind.is_symlink() && !sub.is_dir() => continue,
                Err(problem) => return Err(problem),
                Ok(_) => self.searched_below(&sub, depth + 1)?,
            }
        }
        Ok(())
    }

    /// Every file named `name` in the searched directory `dir` and the subdirectories glibc
    /// tries below it (which `searched_below` checked).
    fn files_named(&mut self, dir: &Path, name: &OsStr, depth: usize, files: &mut Vec<PathBuf>) -> Result<(), Problem> {
        let found = match self.walk().dir(dir) {
            Ok(found) => found,
            // A missing run-path directory was judged by `run_path_dir`.
            Err(_) if dir.symlink_metadata().is_err() => return Ok(()),
            Err(problem) => return Err(problem),
        };
        match sys::stat_at(&found, name) {
            Ok(_) => files.push(found.path.join(name)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Problem::os(&found.path.join(name), &e)),
        }
        if depth == MAX_DEPTH {
            return Ok(());
        }
        for (sub, _) in tried_below(&found.path)? {
            if sub.is_dir() {
                self.files_named(&sub, name, depth + 1, files)?;
            }
        }
        Ok(())
    }
}

/// The subdirectories of the searched directory `dir` that glibc tries for a name (the hwcaps
/// levels below `glibc-hwcaps`, and [`SUBDIRECTORIES`] elsewhere), as directories or symlinks
/// with their type.
fn tried_below(dir: &Path) -> Result<Vec<(PathBuf, std::fs::FileType)>, Problem> {
    let below_hwcaps = dir.file_name() == Some(OsStr::new("glibc-hwcaps"));
    let listing_failed = |e: std::io::Error| Problem::os_doing(dir, "cannot list it: ", &e);
    let mut tried = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(listing_failed)? {
        let entry = entry.map_err(listing_failed)?;
        let name = entry.file_name();
        if !(below_hwcaps || SUBDIRECTORIES.iter().any(|s| OsStr::new(s) == name)) {
            continue;
        }
        let kind = entry.file_type().map_err(|e| Problem::os(&dir.join(&name), &e))?;
        if kind.is_dir() || kind.is_symlink() {
            tried.push((dir.join(&name), kind));
        }
    }
    Ok(tried)
}

/// Why others can create names in a directory of mode `mode` at `path`, if they can: group
/// members count, and the sticky bit does not help (it stops renames of others' files, not
/// the creation of new names).
fn creatable_by_others(path: &Path, mode: u32) -> Option<Issue> {
    if mode & 0o022 == 0 {
        return None;
    }
    Some(Issue::Io(format!(
        "it does not exist, and other users can create it: `{}` is writable by {} (mode {mode:04o}{})",
        path.display(),
        match (mode & 0o020 != 0, mode & 0o002 != 0) {
            (true, true) => "group and others",
            (true, false) => "group",
            _ => "others",
        },
        if mode & 0o1000 != 0 { ", sticky" } else { "" },
    )))
}

impl Resolver<'_> {
    /// Resolves every name `object` needs (and its filtees), depth first, and appends each
    /// library found in a run path to `order` after the libraries it needs.
    fn visit(&mut self, object: &Object<'_>) -> Result<(), Refused> {
        if let Some((tag, value)) = object.linkage.audit.first() {
            return Err(refusal(
                object.path,
                &format!("{tag} entry"),
                value,
                "it makes the loader open an auditing library, which dylease cannot map itself",
                "build the library without `--audit`/`--depaudit`",
            ));
        }
        let search = self.search_dirs(object)?;
        let names = object
            .linkage
            .needed
            .iter()
            .map(|name| ("needed library", name))
            .chain(object.linkage.filtees.iter().map(|(tag, name)| (*tag, name)));
        for (what, name) in names {
            self.answer(object, &search, what, name)?;
        }
        Ok(())
    }

    /// The directories glibc searches for `object`'s names, in its order, each checked:
    /// DT_RPATH (its own, then its loaders') when it has no DT_RUNPATH, then
    /// `LD_LIBRARY_PATH`, then DT_RUNPATH.
    fn search_dirs(&mut self, object: &Object<'_>) -> Result<Vec<SearchDir>, Refused> {
        let mut search = Vec::new();
        if object.linkage.runpath.is_none() {
            for dir in self.run_path(object, "DT_RPATH", object.linkage.rpath.as_deref())? {
                search.push(SearchDir {
                    path: dir,
                    tag: Some("DT_RPATH"),
                });
            }
            search.extend(object.inherited.iter().map(|dir| SearchDir {
                path: dir.clone(),
                tag: Some("DT_RPATH"),
            }));
        }
        search.extend(self.library_path.iter().map(|dir| SearchDir {
            path: dir.clone(),
            tag: None,
        }));
        for dir in self.run_path(object, "DT_RUNPATH", object.linkage.runpath.as_deref())? {
            search.push(SearchDir {
                path: dir,
                tag: Some("DT_RUNPATH"),
            });
        }
        Ok(search)
    }

    /// The directories of one run-path list of `object`, expanded and checked.
    fn run_path(&mut self, object: &Object<'_>, tag: &str, list: Option<&[u8]>) -> Result<Vec<PathBuf>, Refused> {
        let Some(list) = list else { return Ok(Vec::new()) };
        let what = format!("run path ({tag}) entry");
        let mut dirs = Vec::new();
        for entry in list.split(|&b| b == b':') {
            for dir in expand(entry, object.origin) {
                if !dir.is_absolute() {
                    return Err(refusal(
                        object.path,
                        &what,
                        entry,
                        "it is relative, so the loader resolves it against whatever the current directory is when \
                         it loads, which any thread of the process may change",
                        "build the library with an absolute run path or one relative to `$ORIGIN` \
                         (`-Wl,-rpath,'$ORIGIN'`)",
                    ));
                }
                self.checks
                    .run_path_dir(&dir)
                    .map_err(|problem| judged(&problem, object.path, &what, entry, FIX_PLACE))?;
                dirs.push(dir);
            }
        }
        Ok(dirs)
    }

    /// Answers the needed name `name` of `object`: from what this closure resolved already,
    /// or by searching `search` as glibc would; a library found in a run path is checked,
    /// resolved in turn and appended to `order`.
    fn answer(&mut self, object: &Object<'_>, search: &[SearchDir], what: &str, name: &[u8]) -> Result<(), Refused> {
        if name.contains(&b'/') || name.contains(&b'$') {
            return Err(refusal(
                object.path,
                what,
                name,
                "it names a path, which the loader opens as it is (no soname can answer it)",
                "link against the library by name (`-L DIR -lNAME`) with a soname (`-Wl,-soname,NAME`), and find \
                 it through a run path relative to `$ORIGIN`",
            ));
        }
        match self.answers.get(name) {
            Some(Answer::Resolving) => {
                return Err(refusal(
                    object.path,
                    what,
                    name,
                    "it is part of a cycle of libraries that need each other, so one of them would be searched \
                     by path while the other maps",
                    "break the cycle: link the libraries so that one needs the other, not both ways",
                ));
            }
            Some(_) => return Ok(()),
            None => {}
        }
        let os_name = OsStr::from_bytes(name);
        let mut found = None;
        for dir in search {
            let mut files = Vec::new();
            match dir.tag {
                // The process owner's directory: only whether glibc finds the name there.
                None if in_library_path(&dir.path, os_name) => files.push(dir.path.join(os_name)),
                None => {}
                Some(_) => self
                    .checks
                    .files_named(&dir.path, os_name, 0, &mut files)
                    .map_err(|problem| judged(&problem, object.path, what, name, FIX_PLACE))?,
            }
            if files.is_empty() {
                continue;
            }
            found = match dir.tag {
                None => None,
                Some(_) if files.len() > 1 => {
                    let list: Vec<String> = files.iter().map(|f| format!("`{}`", f.display())).collect();
                    return Err(refusal(
                        object.path,
                        what,
                        name,
                        &format!(
                            "it is found {} times below one run-path directory ({}): which the loader takes \
                             depends on this CPU",
                            files.len(),
                            list.join(", ")
                        ),
                        "keep one copy of each library in the run-path directory",
                    ));
                }
                Some(_) => files.pop(),
            };
            break;
        }
        let Some(found) = found else {
            // Found through LD_LIBRARY_PATH, or in no run path: the loader's to find.
            self.answers.insert(name.to_vec(), Answer::Loader);
            return Ok(());
        };
        if !crate::sys::imp::MATCHES_SONAME {
            return Err(refusal(
                object.path,
                what,
                name,
                &format!(
                    "it is found in a run path (`{}`), and this C library matches needed names by path, not \
                     by soname, so dylease cannot map it for the loader",
                    found.display()
                ),
                "install the library in a system directory, or use `TrustPolicy::Permissive`",
            ));
        }
        if self.order.len() >= MAX_OBJECTS {
            return Err(refusal(
                object.path,
                what,
                name,
                &format!("the plugin needs more than {MAX_OBJECTS} libraries from run paths, the most dylease checks"),
                "bundle fewer libraries, or install them in a system directory",
            ));
        }
        self.answers.insert(name.to_vec(), Answer::Resolving);
        let (file, identity, linkage) = self.open(&found).map_err(|refused| match refused {
            Refused::Untrusted(why) => refusal(object.path, what, name, &why, FIX_PLACE),
            Refused::Descriptors(why) => unjudged(object.path, what, name, &why),
        })?;
        if linkage.soname.as_deref() != Some(name) {
            return Err(refusal(
                object.path,
                what,
                name,
                &match &linkage.soname {
                    None => format!("`{}` has no soname (DT_SONAME)", found.display()),
                    Some(other) => format!(
                        "the soname (DT_SONAME) of `{}` is `{}`, not the name it is needed by",
                        found.display(),
                        String::from_utf8_lossy(other)
                    ),
                },
                &format!(
                    "link the library with its soname: `-Wl,-soname,{0}` (CMake: a `SHARED` library target; \
                     Rust: `-C link-arg=-Wl,-soname,{0}`)",
                    String::from_utf8_lossy(name)
                ),
            ));
        }
        let origin = found.parent().unwrap_or(Path::new("/")).to_owned();
        let mut inherited = Vec::new();
        if object.linkage.runpath.is_none() {
            inherited.extend(self.run_path(object, "DT_RPATH", object.linkage.rpath.as_deref())?);
            inherited.extend(object.inherited.iter().cloned());
        }
        self.visit(&Object {
            path: &found,
            origin: &origin,
            linkage: &linkage,
            inherited: &inherited,
        })?;
        self.answers.insert(name.to_vec(), Answer::Mapped);
        self.order.push(Dependency {
            found,
            file,
            identity,
            loads: linkage.loads.clone(),
            sealed: false,
        });
        Ok(())
    }

    /// Opens the library found at `found` once, after checking it and the way to it, and
    /// checks its ELF structure on that descriptor. `Err` with the cause, as a clause.
    fn open(&mut self, found: &Path) -> Result<(File, FileId, Arc<Linkage>), Refused> {
        let (resolved, id) = self.checks.walk().file(found, None).map_err(|problem| {
            if problem.out_of_descriptors() {
                Refused::Descriptors(cause(&problem))
            } else {
                Refused::Untrusted(cause(&problem))
            }
        })?;
        let mut options = std::fs::OpenOptions::new();
        options.read(true);
        crate::sys::no_follow(&mut options);
        let file = options.open(&resolved).map_err(|e| {
            let opening = format!("cannot open `{}`: {e}", resolved.display());
            match super::out_of_descriptors(&e) {
                Some(limit) => Refused::Descriptors(format!("{opening}{limit}")),
                None => Refused::Untrusted(opening),
            }
        })?;
        let metadata = file
            .metadata()
            .map_err(|e| Refused::Untrusted(format!("cannot read the status of `{}`: {e}", resolved.display())))?;
        if crate::sys::file_id(&metadata) != Some(id) {
            return Err(Refused::Untrusted(format!(
                "`{}` was replaced while it was checked; try again once its installation is done",
                resolved.display()
            )));
        }
        let opened = Opened::new(file, metadata);
        let linkage = opened.check(found).map_err(|e| {
            Refused::Untrusted(match e {
                crate::error::Error::Open { reason, .. } => format!("`{}`: {reason}", found.display()),
                other => other.to_string(),
            })
        })?;
        Ok((opened.elf.into_source(), id, linkage))
    }
}

/// Whether glibc finds `name` in the `LD_LIBRARY_PATH` directory `dir` (or a
/// `glibc-hwcaps` subdirectory of it): not judged, since the process owner chose it.
fn in_library_path(dir: &Path, name: &OsStr) -> bool {
    dir.join(name).exists()
        || std::fs::read_dir(dir.join("glibc-hwcaps"))
            .into_iter()
            .flatten()
            .flatten()
            .any(|level| level.path().join(name).exists())
}

/// The fix for a library found in a place another user can change.
const FIX_PLACE: &str = "keep the libraries the plugin needs beside it, found through a run path relative to \
                         `$ORIGIN` (`-Wl,-rpath,'$ORIGIN'`), in a directory only you or root can write";

/// A run-path entry or needed path with `$ORIGIN`, `$LIB` and `$PLATFORM` (also `${…}`)
/// expanded: `$ORIGIN` to `origin` (the directory the loader is given the library's name in),
/// the others to every value each may take, one path per combination, in order.
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
    let mut seen = std::collections::HashSet::new();
    paths.retain(|path| seen.insert(path.clone()));
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

/// What is wrong with a checked path, as a clause.
fn cause(problem: &Problem) -> String {
    let path = problem.path.display();
    match &problem.issue {
        Issue::Io(what) | Issue::Descriptors(what) => format!("`{path}`: {what}"),
        Issue::Owner { owner, euid } => format!(
            "`{path}` is owned by uid {owner}, which is neither this process's effective user (uid {euid}) nor root"
        ),
        Issue::Writable { writers, mode } => format!("`{path}` is writable by {writers} (mode {mode:04o})"),
    }
}

/// The reason a plugin is refused for its library `object`'s `what` (an entry of its dynamic
/// section, `entry`): `cause`, then `fix`.
fn refusal(object: &Path, what: &str, entry: &[u8], cause: &str, fix: &str) -> Refused {
    Refused::Untrusted(format!(
        "the {what} `{entry}` of `{object}` lets the loader run code dylease did not check: {cause}; fix: {fix}; \
         or, if every user who can write there is trusted, build the host with `TrustPolicy::Permissive`",
        entry = String::from_utf8_lossy(entry),
        object = object.display(),
    ))
}

/// Why the check of what `object`'s `what` (`entry`) leads to failed, `problem`: a refusal
/// with `fix`, or, out of file descriptors, what could not be checked.
fn judged(problem: &Problem, object: &Path, what: &str, entry: &[u8], fix: &str) -> Refused {
    if problem.out_of_descriptors() {
        unjudged(object, what, entry, &cause(problem))
    } else {
        refusal(object, what, entry, &cause(problem), fix)
    }
}

/// What `object`'s `what` (`entry`) leads to could not be checked for lack of file
/// descriptors, `cause` (which names the limit): no reason to distrust it, and no fix but
/// the limit's.
fn unjudged(object: &Path, what: &str, entry: &[u8], cause: &str) -> Refused {
    Refused::Descriptors(format!(
        "cannot check what the {what} `{entry}` of `{object}` leads to: {cause}",
        entry = String::from_utf8_lossy(entry),
        object = object.display(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origin_lib_and_platform_expand_braced_and_bare_alike() {
        let origin = Path::new("/opt/plugins");
        assert_eq!(expand(b"$ORIGIN/lib", origin), [PathBuf::from("/opt/plugins/lib")]);
        assert_eq!(expand(b"${ORIGIN}/lib", origin), [PathBuf::from("/opt/plugins/lib")]);
        assert_eq!(expand(b"$ORIGINAL/lib", origin), [PathBuf::from("$ORIGINAL/lib")]);
        let lib = expand(b"/usr/${LIB}/x", origin);
        assert!(lib.contains(&PathBuf::from("/usr/lib/x")), "{lib:?}");
        assert!(lib.contains(&PathBuf::from("/usr/lib64/x")), "{lib:?}");
        assert_eq!(lib, expand(b"/usr/$LIB/x", origin));
        let platform = expand(b"/p/${PLATFORM}", origin);
        assert!(
            platform.contains(&PathBuf::from(format!("/p/{}", std::env::consts::ARCH))),
            "{platform:?}"
        );
        assert_eq!(platform, expand(b"/p/$PLATFORM", origin));
    }

    #[test]
    fn a_sticky_directory_writable_by_group_or_others_lets_them_create_names() {
        assert!(creatable_by_others(Path::new("/x"), 0o1777).is_some());
        assert!(creatable_by_others(Path::new("/x"), 0o1770).is_some());
        assert!(creatable_by_others(Path::new("/x"), 0o0775).is_some());
        assert!(creatable_by_others(Path::new("/x"), 0o1755).is_none());
        assert!(creatable_by_others(Path::new("/x"), 0o0755).is_none());
    }
}
