//! `HostBuilder::watch` (feature `watch`): a changed plugin source reloads the host after the
//! debounce; a half-written file never loads; the watcher ends with its host.

use std::fs::{self, File, Permissions};
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use dylease::{Error, Lease, PluginHost, UnloadPolicy};
use log::Level;

use crate::logger;
use crate::support::{TestDir, assert_unloaded, fixture, mapped};

/// Short, so the tests are quick; every wait for a reload below is generous instead.
const DEBOUNCE: Duration = Duration::from_millis(100);
/// How long a test waits for something the watcher should do: far beyond the debounce, so a
/// slow machine does not fail the test; this is no speed assertion.
const PATIENCE: Duration = Duration::from_secs(20);

/// The watch tests count the process's watcher threads: one test at a time.
fn one_at_a_time() -> MutexGuard<'static, ()> {
    static WATCHING: Mutex<()> = Mutex::new(());
    WATCHING.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Installs version `n` of `versioned.c` as `dir/libversioned.so`, by rename.
fn install(dir: &TestDir, n: usize) {
    let partial = dir.add(&format!("versioned_{n}"), ".libversioned.so.partial");
    fs::rename(&partial, dir.path().join("libversioned.so")).unwrap();
}

/// The version of `versioned.c` that the lease's plugin was built as.
fn version(lease: &Lease) -> i32 {
    // SAFETY: versioned.c registers `version` as `int (*)(void)`.
    unsafe {
        let version = lease.pass::<extern "C" fn() -> i32>("version").expect("version");
        version()
    }
}

/// Waits until `host` has loaded generation `generation`, or panics after [`PATIENCE`].
#[track_caller]
fn await_generation(host: &PluginHost, generation: u64) {
    let started = Instant::now();
    while host.generation() < generation {
        assert!(
            started.elapsed() < PATIENCE,
            "no reload to generation {generation} within {PATIENCE:?}; at {}",
            host.generation()
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until a record at `level` containing every one of `needles` was logged; returns it.
#[track_caller]
fn await_record(level: Level, needles: &[&str]) -> String {
    let started = Instant::now();
    loop {
        let found = logger::records(level, needles[0])
            .into_iter()
            .find(|line| needles.iter().all(|needle| line.contains(needle)));
        if let Some(line) = found {
            return line;
        }
        assert!(
            started.elapsed() < PATIENCE,
            "nothing logged at {level} with {needles:?}"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// The threads of this process named `name` (as `/proc` shows it: at most 15 bytes).
fn threads_named(name: &str) -> usize {
    let name = &name.as_bytes()[..name.len().min(15)];
    fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| fs::read(task.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.strip_suffix(b"\n").unwrap_or(comm) == name)
        .count()
}

/// Waits until no thread named `name` is left; whether none is.
fn threads_end(name: &str) -> bool {
    let started = Instant::now();
    while threads_named(name) > 0 {
        if started.elapsed() > PATIENCE {
            return false;
        }
        thread::sleep(Duration::from_millis(10));
    }
    true
}

fn watching_host(dir: &Path) -> PluginHost {
    // SAFETY: the libraries are this suite's own fixtures, whose initialisation code is sound.
    unsafe { PluginHost::builder().dir(dir) }
        // The copies of changed files go into the watched directory itself: making and
        // removing them must not look like a change.
        .reload_dir(dir)
        .unload(UnloadPolicy::WithHost)
        .watch(DEBOUNCE)
        .build()
        .unwrap()
}

#[test]
fn replacing_a_watched_library_reloads_the_host() {
    crate::bounded::bounded(
        "replacing_a_watched_library_reloads_the_host",
        crate::bounded::LIMIT,
        replacing_a_watched_library_reloads_the_host_body,
    );
}

fn replacing_a_watched_library_reloads_the_host_body() {
    let _serial = one_at_a_time();
    logger::install();
    let plugins = TestDir::new("watch-replace");
    install(&plugins, 1);
    let host = watching_host(plugins.path());
    let session = host.acquire().unwrap();
    assert_eq!(version(&session), 1);

    install(&plugins, 2);
    await_generation(&host, 2);
    let fresh = host.acquire().unwrap();
    assert_eq!(fresh.generation(), 2);
    assert_eq!(version(&fresh), 2, "the reload did not load the new code");
    assert_eq!(version(&session), 1, "the old lease lost its code");
    let lib = plugins.path().join("libversioned.so").display().to_string();
    let line = await_record(Level::Info, &["reloaded plugins after a change of", &lib]);
    assert!(line.contains("generation 2"), "{line}");

    // Loading opens the library and copies it into the watched directory: no event of that
    // may start another reload.
    thread::sleep(DEBOUNCE * 10);
    assert_eq!(
        host.generation(),
        2,
        "the reload's own file accesses triggered a reload"
    );
    drop((session, fresh, host));
    let left: Vec<_> = fs::read_dir(plugins.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name())
        .filter(|name| name != "libversioned.so")
        .collect();
    assert!(left.is_empty(), "left in the plugin directory: {left:?}");
}

#[test]
fn a_library_written_in_two_halves_never_loads_half() {
    crate::bounded::bounded(
        "a_library_written_in_two_halves_never_loads_half",
        crate::bounded::LIMIT,
        a_library_written_in_two_halves_never_loads_half_body,
    );
}

fn a_library_written_in_two_halves_never_loads_half_body() {
    let _serial = one_at_a_time();
    logger::install();
    let plugins = TestDir::new("watch-halves");
    install(&plugins, 3);
    let host = watching_host(plugins.path());
    let session = host.acquire().unwrap();
    assert_eq!(version(&session), 3);

    // A new library, written in place (as a careless `cp` would): half, a pause well past the
    // debounce, then the rest.
    let bytes = fs::read(fixture("p1")).unwrap();
    let (first, rest) = bytes.split_at(bytes.len() / 2);
    let half = plugins.path().join("libhalf.so");
    let mut file = File::create(&half).unwrap();
    file.set_permissions(Permissions::from_mode(0o755)).unwrap();
    file.write_all(first).unwrap();
    file.sync_all().unwrap();

    let half_name = half.display().to_string();
    let line = await_record(
        Level::Warn,
        &["reloading plugins after a change of", &half_name, "truncated"],
    );
    assert!(line.contains("generation 1 stays current"), "{line}");
    assert_eq!(host.generation(), 1, "a half-written library was loaded");
    let current = host.acquire().unwrap();
    assert!(Lease::ptr_eq(&current, &session), "the current generation changed");
    assert!(!current.contains_pass("p1_pass"));
    assert!(!mapped(&half), "the half-written library is mapped");
    drop(current);

    file.write_all(rest).unwrap();
    file.sync_all().unwrap();
    drop(file);
    await_generation(&host, 2);
    let whole = host.acquire().unwrap();
    assert_eq!(whole.generation(), 2);
    assert!(whole.contains_pass("p1_pass"), "the completed library did not load");
    assert_eq!(version(&whole), 3);
    assert_eq!(version(&session), 3);
}

#[test]
fn dropping_the_host_stops_its_watcher() {
    crate::bounded::bounded(
        "dropping_the_host_stops_its_watcher",
        crate::bounded::LIMIT,
        dropping_the_host_stops_its_watcher_body,
    );
}

fn dropping_the_host_stops_its_watcher_body() {
    let _serial = one_at_a_time();
    logger::install();
    let plugins = TestDir::new("watch-drop");
    install(&plugins, 4);
    let lib = plugins.path().join("libversioned.so");
    assert_eq!(
        threads_named("dylease-watch"),
        0,
        "a watcher of another host is running"
    );
    let host = watching_host(plugins.path());
    // The thread names itself when it starts.
    let started = Instant::now();
    while threads_named("dylease-watch") == 0 {
        assert!(started.elapsed() < PATIENCE, "no watcher thread");
        thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(threads_named("dylease-watch"), 1);
    assert_eq!(version(&host.acquire().unwrap()), 4);
    assert!(host.is_loaded(), "UnloadPolicy::WithHost keeps the set");

    drop(host);
    assert_eq!(
        threads_named("dylease-watch"),
        0,
        "the watcher thread outlived its host"
    );
    assert!(
        threads_end("notify-rs inotify loop"),
        "notify's thread outlived the host"
    );
    assert_unloaded(&lib);

    // A change now reloads nothing (nor crashes).
    install(&plugins, 5);
    thread::sleep(DEBOUNCE * 10);
    let dir = plugins.path().display().to_string();
    let reloads = logger::records(Level::Info, "reloaded plugins after a change of");
    assert!(
        !reloads.iter().any(|line| line.contains(&dir)),
        "a dropped host reloaded: {reloads:?}"
    );
    assert_unloaded(&lib);
}

#[test]
fn watching_a_missing_directory_fails_the_build_naming_it() {
    let _serial = one_at_a_time();
    let plugins = TestDir::new("watch-missing");
    let missing = plugins.path().join("absent");
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let error = unsafe { PluginHost::builder().dir(&missing).watch(DEBOUNCE).build() }.unwrap_err();
    assert!(
        matches!(&error, Error::Io { path, source, .. }
            if path == &missing && source.kind() == std::io::ErrorKind::NotFound),
        "{error:?}"
    );
    assert!(error.to_string().contains("absent"), "{error}");
}

#[test]
fn a_watched_file_source_reloads_only_for_its_own_name() {
    crate::bounded::bounded(
        "a_watched_file_source_reloads_only_for_its_own_name",
        crate::bounded::LIMIT,
        a_watched_file_source_reloads_only_for_its_own_name_body,
    );
}

fn a_watched_file_source_reloads_only_for_its_own_name_body() {
    let _serial = one_at_a_time();
    logger::install();
    let plugins = TestDir::new("watch-file");
    install(&plugins, 6);
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe {
        PluginHost::builder()
            .file(plugins.path().join("libversioned.so"))
            .unload(UnloadPolicy::WithHost)
            .watch(DEBOUNCE)
            .build()
    }
    .unwrap();
    assert_eq!(version(&host.acquire().unwrap()), 6);

    // Another library beside it is not a source of this host.
    plugins.add("p2", "libother.so");
    thread::sleep(DEBOUNCE * 10);
    assert_eq!(host.generation(), 1, "a file the host does not load triggered a reload");

    install(&plugins, 7);
    await_generation(&host, 2);
    assert_eq!(version(&host.acquire().unwrap()), 7);
}
