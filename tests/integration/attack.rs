//! An independent review's attacks on issue 16's claim, "the file that runs is the file that
//! was checked" (I9). Each test asserts the security property, so it FAILS while the attack
//! succeeds.

use std::fs::{self, Permissions};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use dylease::PluginHost;

use crate::support::{TestDir, compile_plugin, fixture};

/// A fixture of this module's own: `sources` (under tests/plugins, or absolute) compiled with
/// `args` into `lib<name>.so`, once per process.
fn own_fixture(name: &str, sources: &[&str], args: &[&str]) -> PathBuf {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("attack-fixtures");
    fs::create_dir_all(&out_dir).unwrap();
    let out = out_dir.join(format!("lib{name}.so"));
    if out.exists() {
        return out;
    }
    let plugins = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plugins");
    let sources: Vec<PathBuf> = sources.iter().map(|s| plugins.join(s)).collect();
    let sources: Vec<&Path> = sources.iter().map(PathBuf::as_path).collect();
    compile_plugin(&sources, &out, args).unwrap_or_else(|e| panic!("{e}"))
}

/// `slow_unload` with a run path that uses `$ORIGIN`: dylease hands the loader
/// `/proc/self/fd/D/<name>` for it (the directory mode), not the checked descriptor.
fn slow_unload_origin() -> PathBuf {
    own_fixture(
        "slow_unload_origin",
        &["slow_unload.c"],
        &["-Wl,--no-as-needed", "-ldl", "-Wl,-rpath,$ORIGIN"],
    )
}

fn copy_in(dir: &Path, from: &Path, file: &str, mode: u32) -> PathBuf {
    let to = dir.join(file);
    fs::copy(from, &to).unwrap();
    fs::set_permissions(&to, Permissions::from_mode(mode)).unwrap();
    to
}

fn host(dir: &Path) -> PluginHost {
    // SAFETY: the libraries are this suite's own fixtures, whose initialisation code is sound.
    unsafe { PluginHost::builder().dir(dir).build() }.unwrap()
}

fn beside(file: &Path, suffix: &str) -> PathBuf {
    PathBuf::from(format!("{}{suffix}", file.display()))
}

#[track_caller]
fn await_that(what: &str, done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// How many of this process's descriptors are open on the inode `ino`.
fn descriptors_on_inode(ino: u64) -> usize {
    fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|fd| fs::metadata(fd.path()).is_ok_and(|m| std::os::unix::fs::MetadataExt::ino(&m) == ino))
        .count()
}

fn ino(path: &Path) -> u64 {
    std::os::unix::fs::MetadataExt::ino(&fs::metadata(path).unwrap())
}

fn open_descriptors() -> usize {
    fs::read_dir("/proc/self/fd").unwrap().count()
}

/// The deterministic race of issue 16, item 1, against the `$ORIGIN` directory mode: host B
/// checked `libx.so` and waits for host A's slow unload of it; meanwhile a file that fails
/// the check (mode 0666) is renamed over `libx.so`. B's loader is given
/// `/proc/self/fd/D/libx.so`, a *path*, so it maps the renamed-in file and runs its
/// constructor; the comparison with the checked file comes after, when the code has run.
#[test]
fn origin_mode_a_file_renamed_in_during_the_wait_runs_no_code() {
    let plugins = TestDir::new("attack_origin_wait_rename");
    let lib = copy_in(plugins.path(), &slow_unload_origin(), "libx.so", 0o755);
    let checked_ino = ino(&lib);
    let (a, b) = (host(plugins.path()), host(plugins.path()));
    let lease = a.acquire().unwrap();
    let outcome = std::thread::scope(|scope| {
        let unloading = scope.spawn(move || drop(lease));
        // In the directory mode the loader's name for A is `/proc/self/fd/D/libx.so`, which is
        // where on_unload's side channel goes: the directory itself.
        await_that("A's on_unload started", || beside(&lib, ".unloading").exists());
        let waiting = scope.spawn(|| b.acquire());
        await_that("B opened the checked file", || descriptors_on_inode(checked_ino) >= 2);
        let theirs = copy_in(plugins.path(), &fixture("by_hand_marker"), ".theirs.partial", 0o666);
        fs::rename(&theirs, &lib).unwrap();
        fs::write(beside(&lib, ".go"), "").unwrap();
        unloading.join().unwrap();
        waiting.join().unwrap().map(|lease| lease.plugins()[0].name().to_owned())
    });
    eprintln!("B's load: {outcome:?}");
    assert!(
        !beside(&lib, ".ran").exists(),
        "the renamed-in file (mode 0666, which the trust check refuses) ran its constructor \
         inside B's dlopen; B's load then said {outcome:?}"
    );
}

/// Descriptors per load/unload cycle: a normal plugin, a `$ORIGIN` one, and a pinned one
/// (`-z nodelete`). Each cycle is a fresh host's acquire and drop of the same file.
#[test]
fn load_unload_cycles_leak_no_descriptors() {
    let mut report = Vec::new();
    for (what, lib) in [
        ("normal", fixture("by_hand")),
        ("origin", slow_unload_origin()),
        ("pinned", fixture("ctor_nodelete")),
    ] {
        let plugins = TestDir::new(&format!("attack_fd_{what}"));
        let file = copy_in(plugins.path(), &lib, "libx.so", 0o755);
        fs::write(beside(&file, ".go"), "").unwrap();
        let host = host(plugins.path());
        drop(host.acquire().unwrap());
        let before = open_descriptors();
        for _ in 0..100 {
            drop(host.acquire().unwrap());
        }
        let after = open_descriptors();
        report.push(format!("{what}: {before} -> {after} after 100 cycles"));
    }
    eprintln!("{report:#?}");
    for line in &report {
        let (b, a) = line.split_once(": ").unwrap().1.split_once(" -> ").unwrap();
        let a = a.split_whitespace().next().unwrap();
        assert!(
            a.parse::<usize>().unwrap() <= b.parse::<usize>().unwrap() + 2,
            "descriptors grow with load/unload cycles: {report:#?}"
        );
    }
}
