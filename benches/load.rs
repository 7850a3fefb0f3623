//! `cold_cycle` and `load_scaling`: what a load and an unload of real C plugins cost, next
//! to raw `libloading` opens and closes of the same files.
//!
//! At start the bench compiles `tests/plugins/numbered.c` 128 times (each with its own plugin
//! and pass name) into a fresh directory under cargo's target tmp dir, with the system C
//! compiler as the tests do, and copies the first 16 and the first one into two more
//! directories: every library file is distinct, so the loader never shares a mapping.
//!
//! - `cold_cycle`: with no lease alive, `acquire()` on a host over the 16-plugin directory
//!   (discovery, `dlopen` with `RTLD_NOW | RTLD_LOCAL`, entry point, ABI check, registration
//!   of one pass each, after the trust and ELF checks) plus the drop of that last lease
//!   (unload: `dlclose` of all 16, then the pinned-library check); against `libloading`
//!   opening the same 16 files with the same flags and closing them in reverse order. glibc
//!   keeps nothing across a full close, so every side does real `dlopen`/`dlclose` work every
//!   iteration; the bench checks that with `RTLD_NOLOAD` before timing. Three diagnostic
//!   sides split the gap in the same run: `libloading_discover` adds to the raw cycle a
//!   directory scan making the same file-system calls as dylease's discovery;
//!   `libloading_discover_check` also does the trust and ELF checks' file work by hand (the
//!   walk from `/` through every ancestor directory included); `dylease_permissive` is a host
//!   without the trust check; and `dylease_shared` is a second host over the same directory
//!   while a first host holds a lease, so the registry hands it the live instances: the cycle
//!   without `dlopen` and `dlclose`, what the registry and the rest of the machinery cost.
//! - `load_scaling`: the same cycle over 1, 16 and 128 plugins, with criterion's throughput
//!   in plugins, so time per plugin can be read off; raw `libloading` alongside.
//!
//! Run with `cargo bench --bench load`.

use std::hint::black_box;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use dylease::PluginHost;
use libloading::os::unix::{Library, RTLD_LOCAL, RTLD_NOW};

#[path = "../tests/support/cc.rs"]
mod cc;
#[path = "../tests/support/loader.rs"]
mod loader;

/// The largest set `load_scaling` loads; `cold_cycle` uses the first 16.
const MAX_PLUGINS: usize = 128;
const SCALING_SIZES: [usize; 3] = [1, 16, 128];
const COLD_PLUGINS: usize = 16;

/// The compiled plugins: one directory per size, removed when the bench ends.
struct Fixtures {
    root: PathBuf,
}

impl Fixtures {
    fn build() -> Fixtures {
        let root = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("bench-load-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let fixtures = Fixtures { root };
        let all = fixtures.dir(MAX_PLUGINS);
        std::fs::create_dir_all(&all).expect("create the plugin directory");
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plugins/numbered.c");
        // Two compilers at a time: the machines these run on have two cores.
        std::thread::scope(|scope| {
            for half in 0..2 {
                let (all, source) = (&all, &source);
                scope.spawn(move || {
                    for i in (half..MAX_PLUGINS).step_by(2) {
                        let out = all.join(Self::file_name(i));
                        let plugin = format!("-DPLUGIN_NAME=\"bench{i:03}\"");
                        let pass = format!("-DPASS_NAME=\"bench{i:03}_pass\"");
                        cc::compile_plugin(&[source], &out, &[&plugin, &pass]).unwrap_or_else(|e| panic!("{e}"));
                    }
                });
            }
        });
        for n in SCALING_SIZES.into_iter().filter(|&n| n != MAX_PLUGINS) {
            let dir = fixtures.dir(n);
            std::fs::create_dir_all(&dir).expect("create the plugin directory");
            for i in 0..n {
                std::fs::copy(all.join(Self::file_name(i)), dir.join(Self::file_name(i))).expect("copy a plugin");
            }
        }
        fixtures
    }

    fn file_name(i: usize) -> String {
        format!("libbench{i:03}.so")
    }

    /// The directory holding the first `n` plugins.
    fn dir(&self, n: usize) -> PathBuf {
        self.root.join(format!("n{n}"))
    }

    /// The library files of [`Fixtures::dir`], in the order the host loads them.
    fn files(&self, n: usize) -> Vec<PathBuf> {
        (0..n).map(|i| self.dir(n).join(Self::file_name(i))).collect()
    }
}

impl Drop for Fixtures {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Opens every file as dylease does (`RTLD_NOW | RTLD_LOCAL`), then closes them in reverse.
fn raw_cycle(files: &[PathBuf]) {
    let libraries: Vec<Library> = files
        .iter()
        // SAFETY: the bench's own plugins, built just now from `numbered.c`; their only
        // initialisation code is the header's constructor that links a static node.
        .map(|file| unsafe { Library::open(Some(file), RTLD_NOW | RTLD_LOCAL) }.expect("open a plugin"))
        .collect();
    for library in black_box(libraries).into_iter().rev() {
        library.close().expect("close a plugin");
    }
}

/// What discovery costs a directory, done by hand as dylease does it: list it, resolve the
/// directory once, then per library file one `metadata` (is it a regular file? its device and
/// inode, to load a file reached twice only once). Returns the resolved paths in order. Only a
/// diagnostic beside `raw_cycle`: it tells how much of dylease's cold cycle is discovery
/// rather than loading.
fn discover_by_hand(dir: &Path) -> Vec<PathBuf> {
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
fn check_by_hand(files: &[PathBuf]) {
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
fn host_cycle(host: &PluginHost) {
    let lease = host.acquire().expect("the plugins load");
    drop(black_box(lease));
}

/// Checks that each kind of cycle really unloads every file, so every timed iteration does
/// a real `dlopen` and `dlclose`.
fn check_full_close(host: &PluginHost, files: &[PathBuf]) {
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
        let loaded: Vec<_> = files.iter().filter(|file| loader::loader_has(file)).collect();
        assert!(loaded.is_empty(), "still loaded after a full close: {loaded:?}");
        eprintln!(
            "{} plugins: every file left the process after each cycle (RTLD_NOLOAD)",
            files.len()
        );
    }
}

fn cold_cycle(c: &mut Criterion, fixtures: &Fixtures) {
    let files = fixtures.files(COLD_PLUGINS);
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(fixtures.dir(COLD_PLUGINS)).build() }
        .expect("a host over a directory builds");
    check_full_close(&host, &files);

    let mut group = c.benchmark_group("cold_cycle");
    group.sample_size(50);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));
    group.bench_function("dylease", |b| b.iter(|| host_cycle(&host)));
    group.bench_function("libloading", |b| b.iter(|| raw_cycle(&files)));
    let dir = fixtures.dir(COLD_PLUGINS);
    assert_eq!(discover_by_hand(&dir).len(), files.len());
    group.bench_function("libloading_discover", |b| b.iter(|| raw_cycle(&discover_by_hand(&dir))));
    group.bench_function("libloading_discover_check", |b| {
        b.iter(|| {
            let files = discover_by_hand(&dir);
            check_by_hand(&files);
            raw_cycle(&files);
        })
    });
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let permissive = unsafe {
        PluginHost::builder()
            .dir(&dir)
            .trust(dylease::TrustPolicy::Permissive)
            .build()
    }
    .expect("a host over a directory builds");
    check_full_close(&permissive, &files);
    group.bench_function("dylease_permissive", |b| b.iter(|| host_cycle(&permissive)));

    // The registry's share path: the files stay loaded by `owner`'s lease, so each cycle of
    // `sharer` finds their instances alive (no `dlopen`, no `dlclose`, no `on_load`).
    // SAFETY: the libraries are this suite's own fixtures, whose initialisation code is sound.
    let owner = unsafe { PluginHost::builder().dir(&dir).build() }.expect("a host over a directory builds");
    // SAFETY: as for `owner`.
    let sharer = unsafe { PluginHost::builder().dir(&dir).build() }.expect("a host over a directory builds");
    let held = owner.acquire().expect("the plugins load");
    let generation = sharer.generation();
    host_cycle(&sharer);
    assert_eq!(
        sharer.generation(),
        generation + 1,
        "the cycle did not load a new generation"
    );
    assert!(!sharer.is_loaded());
    group.bench_function("dylease_shared", |b| b.iter(|| host_cycle(&sharer)));
    drop(held);
    assert!(!owner.is_loaded());
    group.finish();
}

fn load_scaling(c: &mut Criterion, fixtures: &Fixtures) {
    let mut group = c.benchmark_group("load_scaling");
    group.sample_size(20);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));
    for n in SCALING_SIZES {
        let files = fixtures.files(n);
        // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
        let host =
            unsafe { PluginHost::builder().dir(fixtures.dir(n)).build() }.expect("a host over a directory builds");
        check_full_close(&host, &files);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("dylease", n), &host, |b, host| {
            b.iter(|| host_cycle(host))
        });
        group.bench_with_input(BenchmarkId::new("libloading", n), &files, |b, files| {
            b.iter(|| raw_cycle(files))
        });
    }
    group.finish();
}

fn load_benches(c: &mut Criterion) {
    let fixtures = Fixtures::build();
    cold_cycle(c, &fixtures);
    load_scaling(c, &fixtures);
}

criterion_group!(benches, load_benches);
criterion_main!(benches);
