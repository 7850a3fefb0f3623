//! The C plugins the load and reload benches time, and the raw `libloading` cycle they are
//! compared with. Shared by `benches/load.rs`, `benches/reload.rs` and `benches/compare.rs`
//! through `#[path]`; each of them also includes `tests/support/cc.rs` as `cc` (and, for
//! [`check_full_close`], `tests/support/loader.rs` as `loader`).

#![allow(dead_code)] // Each bench binary uses its own part of this file.

use std::hint::black_box;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dylease::abi::DYLEASE_ENTRY_SYMBOL;
use dylease::{Lease, PluginHost, TrustPolicy, UnloadPolicy};
use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};

/// Where benches put their plugins by default: cargo's target tmp dir (the target
/// directory's file system, ext4 on the machines these run on).
pub(crate) fn default_base() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
}

/// A tmpfs to put plugins on: `$DYLEASE_BENCH_DIR` if set, else `/dev/shm` when present.
pub(crate) fn tmpfs_base() -> Option<PathBuf> {
    std::env::var_os("DYLEASE_BENCH_DIR")
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from("/dev/shm")).filter(|dir| dir.is_dir()))
}

/// The name of the file system `dir` is on (`ext4`, `tmpfs`, ...), for the reports.
pub(crate) fn file_system(dir: &Path) -> String {
    let c_dir = std::ffi::CString::new(dir.as_os_str().as_bytes()).expect("no NUL in a path");
    let mut stat = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `c_dir` is NUL-terminated and outlives the call; `stat` is writable memory of the
    // right type.
    if unsafe { libc::statfs(c_dir.as_ptr(), stat.as_mut_ptr()) } != 0 {
        return "unknown".into();
    }
    // SAFETY: `statfs` succeeded, so it filled `stat`.
    let kind = unsafe { stat.assume_init() }.f_type;
    match kind {
        0xEF53 => "ext4".into(),
        0x0102_1994 => "tmpfs".into(),
        0x5846_5342 => "xfs".into(),
        0x9123_683E => "btrfs".into(),
        0x794C_7630 => "overlayfs".into(),
        other => format!("fs type {other:#x}"),
    }
}

/// The first `n` plugins built from `tests/plugins/numbered.c`, each with its own plugin and pass
/// name, compiled once into a cache directory under cargo's target tmp dir named after what
/// they are built from (the source, the header, `$CC`), so that later bench processes only copy
/// them. Compiles the missing ones, as many at once as there are CPUs.
fn compiled(n: usize) -> Vec<PathBuf> {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let source = root.join("tests/plugins/numbered.c");
    let mut hasher = DefaultHasher::new();
    for input in [&source, &root.join("include/dylease.h")] {
        std::fs::read(input)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", input.display()))
            .hash(&mut hasher);
    }
    std::env::var_os("CC").hash(&mut hasher);
    let cache = default_base().join(format!("bench-plugins-{:016x}", hasher.finish()));
    std::fs::create_dir_all(&cache).unwrap_or_else(|e| panic!("cannot create {}: {e}", cache.display()));
    let files: Vec<PathBuf> = (0..n).map(|i| cache.join(PluginDirs::file_name(i))).collect();
    let missing: Vec<(usize, &PathBuf)> = files.iter().enumerate().filter(|(_, file)| !file.exists()).collect();
    let workers = std::thread::available_parallelism().map_or(2, |n| n.get());
    std::thread::scope(|scope| {
        for worker in 0..workers {
            let (missing, source) = (&missing, &source);
            scope.spawn(move || {
                for &(i, out) in missing.iter().skip(worker).step_by(workers) {
                    let plugin = format!("-DPLUGIN_NAME=\"bench{i:03}\"");
                    let pass = format!("-DPASS_NAME=\"bench{i:03}_pass\"");
                    // The compiler writes a temporary file and renames it: a file that exists is
                    // whole, even with another bench process compiling beside this one.
                    crate::cc::compile_plugin(&[source], out, &[&plugin, &pass]).unwrap_or_else(|e| panic!("{e}"));
                }
            });
        }
    });
    files
}

/// Directories of distinct compiled plugins: the first `n` of [`compiled`]'s copied into one
/// directory per size. Every file is its own inode, so the loader never shares a mapping
/// between two of them (nor with the cache). Removed on drop.
pub(crate) struct PluginDirs {
    root: PathBuf,
    largest: usize,
}

impl PluginDirs {
    /// Builds the directories of `sizes` plugins under `base`.
    pub(crate) fn build(base: &Path, tag: &str, sizes: &[usize]) -> PluginDirs {
        use std::os::unix::fs::PermissionsExt;
        let largest = sizes.iter().copied().max().unwrap_or(0);
        let root = base.join(format!("bench-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let dirs = PluginDirs { root, largest };
        for &n in sizes {
            let dir = dirs.dir(n);
            std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
            // The trust check refuses group- or world-writable directories.
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))
                .unwrap_or_else(|e| panic!("cannot chmod {}: {e}", dir.display()));
        }
        let compiled = compiled(largest);
        for (from, to) in compiled.iter().zip(dirs.files(largest)) {
            std::fs::copy(from, &to).unwrap_or_else(|e| panic!("cannot copy to {}: {e}", to.display()));
        }
        for &n in sizes.iter().filter(|&&n| n != largest) {
            for (from, to) in dirs.files(largest).iter().zip(dirs.files(n)) {
                std::fs::copy(from, &to).unwrap_or_else(|e| panic!("cannot copy to {}: {e}", to.display()));
            }
        }
        dirs
    }

    fn file_name(i: usize) -> String {
        format!("libbench{i:03}.so")
    }

    /// The directory all the others are in.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// The size of the largest directory.
    pub(crate) fn largest(&self) -> usize {
        self.largest
    }

    /// The directory holding the first `n` plugins.
    pub(crate) fn dir(&self, n: usize) -> PathBuf {
        self.root.join(format!("n{n}"))
    }

    /// The library files of [`PluginDirs::dir`], in the order the host loads them.
    pub(crate) fn files(&self, n: usize) -> Vec<PathBuf> {
        assert!(n <= self.largest);
        (0..n).map(|i| self.dir(n).join(Self::file_name(i))).collect()
    }

    /// A host over the directory of `n` plugins, every check on (the default policies).
    pub(crate) fn host(&self, n: usize) -> PluginHost {
        // SAFETY: the bench's own plugins, built from `numbered.c`; their only initialisation
        // code is the header's constructor that links a static node.
        unsafe { PluginHost::builder().dir(self.dir(n)).build() }.expect("a host over a directory builds")
    }

    /// A host over the directory of `n` plugins without the trust check.
    pub(crate) fn permissive_host(&self, n: usize) -> PluginHost {
        // SAFETY: as for `host`.
        unsafe {
            PluginHost::builder()
                .dir(self.dir(n))
                .trust(TrustPolicy::Permissive)
                .build()
        }
        .expect("a host over a directory builds")
    }
}

impl Drop for PluginDirs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// A directory of plugins to reload, and a second copy of each (another inode, the same code)
/// to install over them by rename, so that every reload finds every file changed.
pub(crate) struct ReloadDir {
    root: PathBuf,
    names: Vec<std::ffi::OsString>,
}

impl ReloadDir {
    /// Copies `files` into `plugins` and `spares` directories of their own under `base`.
    pub(crate) fn new(base: &Path, tag: &str, files: &[PathBuf]) -> ReloadDir {
        use std::os::unix::fs::PermissionsExt;
        let root = base.join(format!("bench-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let names = files
            .iter()
            .map(|file| file.file_name().expect("a file name").to_owned())
            .collect();
        let dir = ReloadDir { root, names };
        for sub in [dir.plugins(), dir.spares()] {
            std::fs::create_dir_all(&sub).unwrap_or_else(|e| panic!("cannot create {}: {e}", sub.display()));
            std::fs::set_permissions(&sub, std::fs::Permissions::from_mode(0o755))
                .unwrap_or_else(|e| panic!("cannot chmod {}: {e}", sub.display()));
            for (file, name) in files.iter().zip(&dir.names) {
                std::fs::copy(file, sub.join(name)).unwrap_or_else(|e| panic!("cannot copy {}: {e}", file.display()));
            }
        }
        dir
    }

    pub(crate) fn plugins(&self) -> PathBuf {
        self.root.join("plugins")
    }

    /// The library files of [`ReloadDir::plugins`].
    pub(crate) fn files(&self) -> Vec<PathBuf> {
        self.names.iter().map(|name| self.plugins().join(name)).collect()
    }

    fn spares(&self) -> PathBuf {
        self.root.join("spares")
    }

    /// Installs a new file (a new inode, the same code) over every plugin, by rename.
    pub(crate) fn install_all(&self) {
        for (i, name) in self.names.iter().enumerate() {
            let partial = self.plugins().join(format!(".partial{i}"));
            std::fs::copy(self.spares().join(name), &partial).expect("copy a spare plugin");
            std::fs::rename(&partial, self.plugins().join(name)).expect("install a plugin by rename");
        }
    }

    /// One changed reload of `host` (over [`ReloadDir::plugins`]), whose current generation
    /// `current` holds: installs a new file over every plugin (not timed), then reloads and
    /// drops `current`, the old generation's last lease, so that the old generation drains
    /// (unloads). `current` becomes the new generation's lease. Returns the time of the reload
    /// and that of the drain.
    pub(crate) fn changed_reload(&self, host: &PluginHost, current: &mut Lease) -> (Duration, Duration) {
        self.install_all();
        let start = Instant::now();
        let old = std::mem::replace(current, host.reload().expect("the changed plugins load"));
        let reloaded = Instant::now();
        drop(old);
        (reloaded - start, reloaded.elapsed())
    }

    /// A host over [`ReloadDir::plugins`] with the unload policy `unload`.
    pub(crate) fn host(&self, unload: UnloadPolicy) -> PluginHost {
        // SAFETY: the bench's own plugins, compiled from tests/plugins/numbered.c.
        unsafe { PluginHost::builder().dir(self.plugins()) }
            .unload(unload)
            .build()
            .expect("a host over a directory builds")
    }

    /// How many mappings of this process are of files under this directory that have been
    /// replaced or removed: an old generation's libraries still mapped.
    pub(crate) fn stale_mappings(&self) -> usize {
        let maps =
            String::from_utf8_lossy(&std::fs::read("/proc/self/maps").expect("read /proc/self/maps")).into_owned();
        let root = self.root.to_string_lossy();
        maps.lines()
            .filter(|line| line.contains(root.as_ref()) && line.ends_with("(deleted)"))
            .count()
    }
}

impl Drop for ReloadDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Opens every file as dylease does (`RTLD_NOW | RTLD_LOCAL`) and looks up its entry point
/// (`dlsym`), then closes them in reverse: raw `dlopen` + `dlsym` + `dlclose`.
pub(crate) fn raw_cycle(files: &[PathBuf]) {
    let libraries: Vec<Library> = files
        .iter()
        .map(|file| {
            // SAFETY: the bench's own plugins, built from `numbered.c`; their only
            // initialisation code is the header's constructor that links a static node.
            let library = unsafe { Library::open(Some(file), RTLD_NOW | RTLD_LOCAL) }.expect("open a plugin");
            // SAFETY: the symbol is only looked up, never called or read through.
            let entry = unsafe { library.get::<*mut std::ffi::c_void>(DYLEASE_ENTRY_SYMBOL.as_bytes()) };
            black_box(entry.expect("a plugin's entry point").into_raw());
            library
        })
        .collect();
    for library in black_box(libraries).into_iter().rev() {
        library.close().expect("close a plugin");
    }
}

/// As [`raw_cycle`], but each library mapped by descriptor as dylease maps it: the file
/// opened (`O_RDONLY | O_NOFOLLOW | O_CLOEXEC`), the loader given `/proc/self/fd/N`, the
/// descriptor closed after the unload. No check at all: the least a load that maps the file it
/// opened costs, beside which dylease's checks are measured.
pub(crate) fn descriptor_cycle(files: &[PathBuf]) {
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::OpenOptionsExt;
    let libraries: Vec<(std::fs::File, Library)> = files
        .iter()
        .map(|file| {
            let opened = std::fs::File::options()
                .read(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(file)
                .expect("open a plugin file");
            let name = format!("/proc/self/fd/{}", opened.as_raw_fd());
            // SAFETY: as in `raw_cycle`: the bench's own plugins.
            let library = unsafe { Library::open(Some(&name), RTLD_NOW | RTLD_LOCAL) }.expect("open a plugin");
            // SAFETY: the symbol is only looked up, never called or read through.
            let entry = unsafe { library.get::<*mut std::ffi::c_void>(DYLEASE_ENTRY_SYMBOL.as_bytes()) };
            black_box(entry.expect("a plugin's entry point").into_raw());
            (opened, library)
        })
        .collect();
    for (opened, library) in black_box(libraries).into_iter().rev() {
        library.close().expect("close a plugin");
        drop(opened);
    }
}

/// What discovery costs a directory, done by hand as dylease does it: list it, resolve the
/// directory once, then per library file one `metadata` (is it a regular file? its device and
/// inode, to load a file reached twice only once). Returns the resolved paths in order. Only a
/// diagnostic beside [`raw_cycle`]: it tells how much of dylease's cold cycle is discovery
/// rather than loading.
pub(crate) fn discover_by_hand(dir: &Path) -> Vec<PathBuf> {
    use std::os::unix::fs::MetadataExt;
    let resolved = std::fs::canonicalize(dir).expect("resolve the plugin directory");
    let mut names: Vec<_> = std::fs::read_dir(dir)
        .expect("read the plugin directory")
        .map(|entry| entry.expect("a directory entry").file_name())
        .filter(|name| name.as_bytes().ends_with(b".so"))
        .collect();
    names.sort();
    let mut seen = std::collections::HashSet::new();
    names
        .into_iter()
        .filter(|name| {
            let metadata = std::fs::metadata(dir.join(name)).expect("stat a plugin");
            metadata.is_file() && seen.insert((metadata.dev(), metadata.ino()))
        })
        .map(|name| resolved.join(name))
        .collect()
}

/// The checks dylease makes before it opens a file, done by hand with the same system calls:
/// the trust check walks the directory from `/` one component at a time, opening each
/// directory (`O_PATH`) relative to its parent and `fstat`ing it, once per load; then per
/// file one `fstatat` of the name (not following a link), one `open` of the file
/// (`O_NOFOLLOW`), its `fstat` (length, and the device and inode compared with the check's),
/// one `pread` of the first page for the ELF check, and the `close`. Only a diagnostic: with
/// discovery, it is the file-system work dylease adds to `dlopen`, so what remains of the
/// difference is the machinery itself (the registry, the entry point and descriptor checks,
/// registration, the set, the lease, the unload bookkeeping).
pub(crate) fn check_by_hand(files: &[PathBuf]) {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};

    /// `openat(parent, name, O_PATH | O_DIRECTORY | O_NOFOLLOW)` then `fstat`, as the walk does.
    fn open_dir(parent: libc::c_int, name: &std::ffi::OsStr) -> OwnedFd {
        let name = std::ffi::CString::new(name.as_bytes()).expect("no NUL in a path");
        let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        // SAFETY: `name` is a NUL-terminated string that outlives the call; `parent` is an
        // open descriptor or `AT_FDCWD`.
        let fd = unsafe { libc::openat(parent, name.as_ptr(), flags) };
        assert!(
            fd >= 0,
            "open a directory on the way: {}",
            std::io::Error::last_os_error()
        );
        // SAFETY: `openat` just returned this descriptor, and nothing else owns it.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        fstat(&fd);
        fd
    }

    fn fstat(fd: &OwnedFd) -> libc::stat {
        let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: `fd` is open and `stat` is writable memory of the right type.
        assert_eq!(unsafe { libc::fstat(fd.as_raw_fd(), stat.as_mut_ptr()) }, 0, "fstat");
        // SAFETY: `fstat` succeeded, so it filled `stat`.
        unsafe { stat.assume_init() }
    }

    let Some(dir) = files.first().and_then(|file| file.parent()) else {
        return;
    };
    // The walk, down from the root, once per load (dylease remembers passed directories).
    let mut at = open_dir(libc::AT_FDCWD, std::ffi::OsStr::new("/"));
    for component in dir.components().skip(1) {
        at = open_dir(at.as_raw_fd(), component.as_os_str());
    }
    let mut page = vec![0u8; 4096];
    for file in files {
        let name = std::ffi::CString::new(file.file_name().expect("a file name").as_bytes()).expect("no NUL");
        let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: `at` is an open directory, `name` a NUL-terminated string and `stat`
        // writable memory of the right type.
        let found = unsafe {
            libc::fstatat(
                at.as_raw_fd(),
                name.as_ptr(),
                stat.as_mut_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        assert_eq!(found, 0, "fstatat a plugin");
        // SAFETY: `fstatat` succeeded, so it filled `stat`.
        let checked = unsafe { stat.assume_init() };
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(file)
            .expect("open a plugin");
        let metadata = opened.metadata().expect("stat an open plugin");
        assert_eq!((metadata.dev(), metadata.ino()), (checked.st_dev, checked.st_ino));
        let got = opened.read_at(&mut page, 0).expect("read a plugin");
        black_box((metadata.len(), &page[..got]));
    }
}

/// One cold cycle through the host: load every plugin, then unload them with the last lease.
pub(crate) fn host_cycle(host: &PluginHost) {
    let lease = host.acquire().expect("the plugins load");
    drop(black_box(lease));
}

/// Checks that each kind of cycle really unloads every file, so every timed iteration does
/// a real `dlopen` and `dlclose`: a host cycle makes a new generation and leaves the host
/// unloaded, and after it and a raw cycle the loader has none of `files` (`RTLD_NOLOAD`).
pub(crate) fn check_full_close(host: &PluginHost, files: &[PathBuf]) {
    let generation = host.generation();
    host_cycle(host);
    assert_eq!(
        host.generation(),
        generation + 1,
        "the cycle did not load a new generation"
    );
    assert!(!host.is_loaded());
    raw_cycle(files);
    if cfg!(all(target_os = "linux", target_env = "gnu")) {
        let loaded: Vec<_> = files.iter().filter(|file| crate::loader::loader_has(file)).collect();
        assert!(loaded.is_empty(), "still loaded after a full close: {loaded:?}");
        eprintln!(
            "{} plugins: every file left the process after each cycle (RTLD_NOLOAD)",
            files.len()
        );
    }
}
