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

    // Loading opens (reads) the library in the watched directory: no event of that may start
    // another reload.
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
    assert!(current.pass_info("p1_pass").is_none());
    assert!(!mapped(&half), "the half-written library is mapped");
    drop(current);

    file.write_all(rest).unwrap();
    file.sync_all().unwrap();
    drop(file);
    await_generation(&host, 2);
    let whole = host.acquire().unwrap();
    assert_eq!(whole.generation(), 2);
    assert!(
        whole.pass_info("p1_pass").is_some(),
        "the completed library did not load"
    );
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

#[test]
fn swapping_a_symlinked_plugin_directory_reloads_from_the_new_target_and_watches_it() {
    // The usual deploy layout: `current -> releases/v1`, swapped by rename to `releases/v2`.
    let _serial = one_at_a_time();
    logger::install();
    let root = TestDir::new("watch-symlink");
    let releases: Vec<TestDir> = (1..=3).map(|_| TestDir::new("watch-symlink-release")).collect();
    for (n, release) in releases.iter().enumerate() {
        install(release, n + 1);
    }
    let current = root.path().join("current");
    let point = |release: &TestDir| {
        let next = root.path().join("current.next");
        std::os::unix::fs::symlink(release.path(), &next).unwrap();
        fs::rename(&next, &current).unwrap();
    };
    point(&releases[0]);
    let host = watching_host(&current);
    assert_eq!(version(&host.acquire().unwrap()), 1);
    point(&releases[1]);
    await_generation(&host, 2);
    assert_eq!(
        version(&host.acquire().unwrap()),
        2,
        "the reload did not follow the link"
    );
    // The watches moved with the link: a change in the new target reloads too.
    install(&releases[1], 3);
    await_generation(&host, 3);
    assert_eq!(version(&host.acquire().unwrap()), 3, "the new target is not watched");
    drop(host);
    assert!(threads_end("dylease-watch"), "the watcher thread outlived its host");
}

#[test]
fn dropping_a_watched_host_gives_up_on_a_stuck_reload_after_a_bound_and_says_so() {
    // The watcher's reload waits for another host's unload of the same file, which does not
    // finish until the test says so. Dropping the watched host must not wait for it.
    let _serial = one_at_a_time();
    logger::install();
    let plugins = TestDir::new("watch-stuck-drop");
    let slow = plugins.add("slow_unload", "libslow.so");
    // SAFETY: the libraries are this suite's own fixtures, whose initialisation code is sound.
    let other = unsafe { PluginHost::builder().dir(plugins.path()).build() }.unwrap();
    let lease = other.acquire().unwrap();
    // SAFETY: as above.
    let watched = unsafe { PluginHost::builder().dir(plugins.path()) }
        .watch(DEBOUNCE)
        .build()
        .unwrap();
    thread::scope(|scope| {
        let unloading = scope.spawn(move || drop(lease));
        let marker = |suffix: &str| std::path::PathBuf::from(format!("{}{suffix}", slow.display()));
        let started = Instant::now();
        while !marker(".unloading").exists() {
            assert!(started.elapsed() < PATIENCE, "the on_unload did not start");
            thread::sleep(Duration::from_millis(1));
        }
        let p1 = plugins.add("p1", "libp1.so").display().to_string();
        // The watcher's reload loaded `libp1.so`; next it waits for `libslow.so` (byte order).
        await_record(Level::Debug, &["loaded", &p1]);
        let (done, dropped) = std::sync::mpsc::channel();
        scope.spawn(move || {
            drop(watched);
            done.send(()).unwrap();
        });
        dropped
            .recv_timeout(PATIENCE)
            .expect("dropping the watched host waited for the stuck reload");
        await_record(Level::Warn, &["its watcher's reload did not finish within"]);
        fs::write(marker(".go"), "").unwrap();
        unloading.join().unwrap();
    });
    assert!(threads_end("dylease-watch"), "the watcher thread never ended");
}

#[test]
fn watching_under_immediately_warns_and_a_failed_reload_with_nothing_loaded_says_so() {
    let _serial = one_at_a_time();
    logger::install();
    let plugins = TestDir::new("watch-immediately");
    install(&plugins, 1);
    // SAFETY: the libraries are this suite's own fixtures, whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(plugins.path()) }
        .watch(DEBOUNCE)
        .build()
        .unwrap();
    await_record(Level::Warn, &["under UnloadPolicy::Immediately"]);
    // No lease is held: a reload that fails leaves nothing loaded, and says that.
    let broken = plugins.path().join(".libversioned.so.partial");
    fs::write(&broken, b"not a library").unwrap();
    fs::rename(&broken, plugins.path().join("libversioned.so")).unwrap();
    let dir = plugins.path().display().to_string();
    let line = await_record(Level::Warn, &["failed, and no set is loaded", &dir]);
    assert!(!line.contains("stays current"), "{line}");
    assert!(!host.is_loaded());
}
