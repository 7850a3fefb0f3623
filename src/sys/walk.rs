//! The system calls of the walk: `openat`, `fstat`, `fstatat` and `readlinkat` on
//! descriptors, so that each step looks at exactly the inode the previous one led to.
//! The trust check (`trust`) walks a path with them (Unix), and a Python package is
//! read through one descriptor of its directory ([`Tree`]). Safe code over `sys::raw`.

use std::ffi::{CString, OsStr, OsString};
use std::io;
#[cfg(feature = "python")]
use std::os::fd::AsRawFd;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
#[cfg(feature = "python")]
use std::path::Path;
use std::path::PathBuf;

use crate::sys::FileId;
use crate::sys::raw;

/// Opens a directory only to walk through it and `fstat` it: no read permission needed.
#[cfg(any(target_os = "linux", target_os = "android"))]
const SEARCH: libc::c_int = libc::O_PATH;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const SEARCH: libc::c_int = libc::O_RDONLY;

/// A directory the walk passed: its resolved path, an open descriptor and its status.
#[derive(Debug)]
pub(crate) struct Dir {
    pub(crate) path: PathBuf,
    fd: OwnedFd,
    pub(crate) stat: Stat,
}

impl Dir {
    pub(crate) fn root() -> io::Result<Dir> {
        let fd = open_at(None, OsStr::new("/"), SEARCH | libc::O_DIRECTORY)?;
        let stat = fstat(&fd)?;
        Ok(Dir {
            path: PathBuf::from("/"),
            fd,
            stat,
        })
    }

    /// The directory `name` in `parent`, not following a symlink.
    pub(crate) fn open_at(parent: &Dir, name: &OsStr, path: PathBuf) -> io::Result<Dir> {
        let fd = open_at(
            Some(parent.fd.as_fd()),
            name,
            SEARCH | libc::O_DIRECTORY | libc::O_NOFOLLOW,
        )?;
        let stat = fstat(&fd)?;
        Ok(Dir { path, fd, stat })
    }
}

/// A directory opened to be listed, whose entries are opened relative to it (`openat`, not
/// following a symlink): what a Python package is read through, so that every file read is
/// of the one directory tree this descriptor holds, whatever is renamed over its path since.
#[cfg(feature = "python")]
#[derive(Debug)]
pub(crate) struct Tree {
    fd: OwnedFd,
}

#[cfg(feature = "python")]
impl Tree {
    /// The directory at `path`, not following a symlink in its last component.
    pub(crate) fn open(path: &Path) -> io::Result<(Tree, Stat)> {
        Tree::at(None, path.as_os_str())
    }

    /// The directory `name` in this one, not following a symlink.
    pub(crate) fn dir(&self, name: &OsStr) -> io::Result<(Tree, Stat)> {
        Tree::at(Some(self.fd.as_fd()), name)
    }

    fn at(dir: Option<BorrowedFd<'_>>, name: &OsStr) -> io::Result<(Tree, Stat)> {
        let fd = open_at(dir, name, libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW)?;
        let stat = fstat(&fd)?;
        Ok((Tree { fd }, stat))
    }

    /// The file `name` in this directory, opened for reading, not following a symlink (nor
    /// waiting on a FIFO), with its status read from the descriptor.
    pub(crate) fn file(&self, name: &OsStr) -> io::Result<(std::fs::File, Stat)> {
        let fd = open_at(
            Some(self.fd.as_fd()),
            name,
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK,
        )?;
        let stat = fstat(&fd)?;
        Ok((std::fs::File::from(fd), stat))
    }

    /// The status of `name` in this directory, not following a symlink.
    pub(crate) fn stat(&self, name: &OsStr) -> io::Result<Stat> {
        stat_in(self.fd.as_fd(), name)
    }

    /// The names in this directory (not `.` and `..`), in no particular order. On Linux they
    /// are listed through the descriptor (`/proc/self/fd/N`, which names the directory it
    /// holds, renamed or not); elsewhere by `path`, the path it was opened by, checked to
    /// name this directory before and after the listing (`Err` otherwise).
    pub(crate) fn names(&self, path: &Path) -> io::Result<Vec<OsString>> {
        #[cfg(any(target_os = "linux", target_os = "android"))]
        {
            let _ = path;
            let listed = std::fs::read_dir(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))?;
            listed.map(|entry| entry.map(|entry| entry.file_name())).collect()
        }
        #[cfg(not(any(target_os = "linux", target_os = "android")))]
        {
            let this = fstat(&self.fd)?.id();
            let named = || std::fs::symlink_metadata(path).map(|metadata| Stat::of_metadata(&metadata).id());
            let moved = || io::Error::new(io::ErrorKind::NotFound, "the directory was moved while it was listed");
            if named()? != this {
                return Err(moved());
            }
            let names = std::fs::read_dir(path)?
                .map(|entry| entry.map(|entry| entry.file_name()))
                .collect::<io::Result<Vec<_>>>()?;
            if named()? != this {
                return Err(moved());
            }
            Ok(names)
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    File,
    Directory,
    Symlink,
    Other,
}

/// What `fstat` says about a file: what the trust check looks at.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stat {
    kind: Kind,
    owner: u32,
    mode: u32,
    id: FileId,
    /// The length, and the modification and status-change times (seconds, nanoseconds):
    /// what tells a file rewritten in place since a descriptor of it was read (the ctime also
    /// when the mtime was set back).
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stat {
    // `st_mode` is a `u16` on some platforms (macOS); the id fields' types differ between
    // platforms, and both fit in 64 bits.
    #[allow(clippy::useless_conversion, clippy::unnecessary_cast)]
    fn of(stat: &libc::stat) -> Stat {
        let kind = match stat.st_mode & libc::S_IFMT {
            libc::S_IFREG => Kind::File,
            libc::S_IFDIR => Kind::Directory,
            libc::S_IFLNK => Kind::Symlink,
            _ => Kind::Other,
        };
        Stat {
            kind,
            owner: stat.st_uid,
            mode: u32::from(stat.st_mode) & 0o7777,
            id: FileId {
                dev: stat.st_dev as u64,
                ino: stat.st_ino as u64,
            },
            size: stat.st_size as u64,
            mtime: (stat.st_mtime as i64, stat.st_mtime_nsec as i64),
            ctime: (stat.st_ctime as i64, stat.st_ctime_nsec as i64),
        }
    }

    /// The same, from the status std read (`lstat`-like, or of a file that is no symlink).
    pub(crate) fn of_metadata(metadata: &std::fs::Metadata) -> Stat {
        use std::os::unix::fs::MetadataExt;
        let kind = metadata.file_type();
        let kind = if kind.is_symlink() {
            Kind::Symlink
        } else if kind.is_file() {
            Kind::File
        } else if kind.is_dir() {
            Kind::Directory
        } else {
            Kind::Other
        };
        Stat {
            kind,
            owner: metadata.uid(),
            mode: metadata.mode() & 0o7777,
            id: FileId {
                dev: metadata.dev(),
                ino: metadata.ino(),
            },
            size: metadata.size(),
            mtime: (metadata.mtime(), metadata.mtime_nsec()),
            ctime: (metadata.ctime(), metadata.ctime_nsec()),
        }
    }

    /// Whether this is the status of the file `metadata` was read from, unchanged since: the
    /// same identity, length, modification and status-change times.
    pub(crate) fn unchanged_since(&self, metadata: &std::fs::Metadata) -> bool {
        let then = Stat::of_metadata(metadata);
        (self.id, self.size, self.mtime, self.ctime) == (then.id, then.size, then.mtime, then.ctime)
    }

    pub(crate) fn kind(&self) -> Kind {
        self.kind
    }

    pub(crate) fn owner(&self) -> u32 {
        self.owner
    }

    pub(crate) fn mode(&self) -> u32 {
        self.mode
    }

    pub(crate) fn id(&self) -> FileId {
        self.id
    }
}

fn c_name(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "the name holds a NUL byte"))
}

fn open_at(dir: Option<BorrowedFd<'_>>, name: &OsStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    raw::openat(dir, &c_name(name)?, flags)
}

fn fstat(fd: &OwnedFd) -> io::Result<Stat> {
    raw::fstat(fd.as_fd()).map(|stat| Stat::of(&stat))
}

/// The file `name` in `dir`, opened for reading, not following a symlink (nor waiting on a
/// FIFO): relative to the descriptor of a directory the walk passed, so no path is resolved
/// again.
pub(crate) fn open_file_at(dir: &Dir, name: &OsStr) -> io::Result<std::fs::File> {
    let fd = open_at(
        Some(dir.fd.as_fd()),
        name,
        libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK,
    )?;
    Ok(std::fs::File::from(fd))
}

/// The status of `name` in `dir`, not following a symlink.
pub(crate) fn stat_at(dir: &Dir, name: &OsStr) -> io::Result<Stat> {
    stat_in(dir.fd.as_fd(), name)
}

fn stat_in(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<Stat> {
    raw::fstatat(dir, &c_name(name)?, false).map(|stat| Stat::of(&stat))
}

/// The target of the symlink `name` in `dir`.
pub(crate) fn read_link_at(dir: &Dir, name: &OsStr) -> io::Result<OsString> {
    let name = c_name(name)?;
    let mut buffer = vec![0u8; 256];
    loop {
        let len = raw::readlinkat(dir.fd.as_fd(), &name, &mut buffer)?;
        if len < buffer.len() {
            buffer.truncate(len);
            return Ok(OsString::from_vec(buffer));
        }
        // The target may have been cut: read again with room to spare.
        let longer = buffer.len() * 4;
        buffer.resize(longer, 0);
    }
}

#[cfg(all(test, feature = "python", not(loom)))]
mod tree_tests {
    use super::*;

    /// A package's tree follows no symlink, takes no file for a directory and waits on no
    /// FIFO: `dir` refuses a symlink to a directory and a regular file, `file` refuses a
    /// symlink to a file and opens a FIFO at once (bounded): `O_NOFOLLOW`, `O_DIRECTORY` and
    /// `O_NONBLOCK` each hold.
    #[test]
    fn a_tree_follows_no_symlink_takes_no_file_for_a_directory_and_waits_on_no_fifo() {
        let root = crate::test_dir::TestDir::new("tree");
        std::fs::create_dir_all(root.join("sub")).unwrap();
        std::fs::write(root.join("module.py"), b"x = 1\n").unwrap();
        std::os::unix::fs::symlink(root.join("sub"), root.join("linked_dir")).unwrap();
        std::os::unix::fs::symlink(root.join("module.py"), root.join("linked.py")).unwrap();
        raw::testing::mkfifo(&root.join("fifo.py"));
        let (tree, _) = Tree::open(&root).unwrap();
        let errno = |result: io::Result<(Tree, Stat)>| result.map(drop).map_err(|e| e.raw_os_error());
        assert_eq!(errno(tree.dir(OsStr::new("sub"))), Ok(()));
        assert_eq!(errno(tree.dir(OsStr::new("linked_dir"))), Err(Some(libc::ENOTDIR)));
        assert_eq!(errno(tree.dir(OsStr::new("module.py"))), Err(Some(libc::ENOTDIR)));
        assert!(tree.file(OsStr::new("module.py")).is_ok());
        let linked = tree
            .file(OsStr::new("linked.py"))
            .map(drop)
            .map_err(|e| e.raw_os_error());
        assert_eq!(linked, Err(Some(libc::ELOOP)));
        let (done, opened) = std::sync::mpsc::channel();
        std::thread::spawn(move || done.send(tree.file(OsStr::new("fifo.py")).map(drop).map_err(|e| e.to_string())));
        let opened = opened.recv_timeout(std::time::Duration::from_secs(20));
        assert_eq!(opened, Ok(Ok(())), "the FIFO's open waited for a writer");
    }
}
