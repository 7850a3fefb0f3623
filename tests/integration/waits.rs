//! Waits that end: `reload_timeout` against an unload that does not finish, and a `fork()`ed
//! child that fails fast instead of waiting on locks its parent's threads hold (and leaves
//! the parent's plugins alone when it drops what it inherited).

use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::time::{Duration, Instant};

use dylease::{Error, PluginHost, Waited};

use crate::support::{TestDir, await_that, beside};

fn host(dir: &Path) -> PluginHost {
    // SAFETY: the libraries are this suite's own fixtures, whose initialisation code is sound.
    unsafe { PluginHost::builder().dir(dir).build() }.unwrap()
}

/// A directory of the `slow_unload` fixture (its `on_unload` waits for a `.go` file beside
/// it), the fixture's path, and two hosts over the directory.
fn slow_unload_hosts(test: &str) -> (TestDir, std::path::PathBuf, PluginHost, PluginHost) {
    let plugins = TestDir::new(test);
    let lib = plugins.add("slow_unload", "libslow.so");
    let (a, b) = (host(plugins.path()), host(plugins.path()));
    (plugins, lib, a, b)
}

#[test]
fn reload_timeout_gives_up_on_an_unload_that_does_not_finish_and_names_the_file() {
    let (_plugins, lib, a, b) = slow_unload_hosts("waits_reload_timeout");
    let lease = a.acquire().unwrap();
    std::thread::scope(|scope| {
        let unloading = scope.spawn(move || drop(lease));
        await_that("the on_unload started", || beside(&lib, ".unloading").exists());
        let error = b.reload_timeout(Duration::from_millis(100)).unwrap_err();
        assert!(
            matches!(&error, Error::TimedOut { waited: Waited::File(path), .. } if path == &lib),
            "{error:?}"
        );
        assert!(error.to_string().contains(&lib.display().to_string()), "{error}");
        assert_eq!(b.generation(), 0, "a failed reload made a generation");
        fs::write(beside(&lib, ".go"), "").unwrap();
        unloading.join().unwrap();
    });
    let lease = b.reload_timeout(Duration::from_secs(20)).unwrap();
    assert_eq!(lease.plugins()[0].name(), "slow-unload");
}

#[test]
fn a_forked_child_fails_fast_to_load_and_keeps_using_what_it_inherited() {
    let plugins = TestDir::new("waits_fork");
    plugins.add("p1", "libp1.so");
    let (held, other) = (host(plugins.path()), host(plugins.path()));
    let lease = held.acquire().unwrap();
    let code = in_forked_child(|| {
        // The inherited lease works, the other host fails with Forked, and so does a new one.
        let inherited = held.acquire().is_ok_and(|l| l.plugins().len() == 1);
        let forked = |r: Result<dylease::Lease, Error>| matches!(r, Err(Error::Forked { .. }));
        let code = match (
            inherited,
            forked(other.acquire()),
            forked(host(plugins.path()).acquire()),
        ) {
            (true, true, true) => 0,
            (false, _, _) => 1,
            (_, false, _) => 2,
            (_, _, false) => 3,
        };
        drop(held.acquire());
        code
    });
    assert_eq!(
        code, 0,
        "1: the inherited lease failed; 2: the other host did not fail with Forked; 3: nor a new host"
    );
    // The parent's plugins are untouched by the child's drop.
    assert_eq!(lease.plugins().len(), 1);
}

/// Forks; the child runs `child` and exits with its code. Returns the child's exit code,
/// failing the test if the child hangs for 20 s or dies.
fn in_forked_child(child: impl FnOnce() -> i32) -> i32 {
    // SAFETY: the child only calls into dylease, allocates (glibc makes malloc usable in a
    // child of a threaded process) and `_exit`s; it never returns into the test harness.
    let pid = unsafe { libc::fork() };
    assert!(pid >= 0, "fork failed");
    if pid == 0 {
        let code = child();
        // SAFETY: ends the child at once, without running the parent's exit handlers.
        unsafe { libc::_exit(code) };
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let mut status = 0;
        // SAFETY: `pid` is this process's child; `status` is writable.
        if unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } == pid {
            assert!(libc::WIFEXITED(status), "the child died: status {status}");
            return libc::WEXITSTATUS(status);
        }
        if Instant::now() > deadline {
            // SAFETY: as above; the child is ours to kill.
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("the forked child hung");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_child_forked_during_another_threads_unload_fails_fast_instead_of_waiting_for_it() {
    // At the fork, another thread of the parent is inside a slow on_unload of `libslow.so`:
    // the file is marked busy, and only that thread (which the child does not have) would
    // unmark it. A load of the file in the child would wait for ever.
    let plugins = TestDir::new("waits_fork_unloading");
    let lib = plugins.add("slow_unload", "libslow.so");
    let lease = host(plugins.path()).acquire().unwrap();
    std::thread::scope(|scope| {
        let unloading = scope.spawn(move || drop(lease));
        await_that("the on_unload started", || beside(&lib, ".unloading").exists());
        let code = in_forked_child(|| match host(plugins.path()).acquire() {
            Err(Error::Forked { .. }) => 0,
            Err(_) => 1,
            Ok(_) => 2,
        });
        assert_eq!(code, 0, "1: another error than Forked; 2: it loaded");
        fs::write(beside(&lib, ".go"), "").unwrap();
        unloading.join().unwrap();
    });
}

#[test]
fn a_child_forked_while_another_thread_loads_fails_fast_instead_of_waiting_for_that_load() {
    // At the fork, another thread of the parent is inside the host's load (a static plugin's
    // register function, no registry involved): the host is marked loading, and only that
    // thread, which the child does not have, would clear the mark.
    static ENTERED: AtomicBool = AtomicBool::new(false);
    static RELEASE: AtomicBool = AtomicBool::new(false);
    let host = PluginHost::builder()
        .static_plugin("slow_register", |_| {
            ENTERED.store(true, SeqCst);
            let deadline = Instant::now() + Duration::from_secs(20);
            while !RELEASE.load(SeqCst) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            Ok(())
        })
        .build()
        .unwrap();
    std::thread::scope(|scope| {
        let loading = scope.spawn(|| host.acquire().map(|lease| lease.generation()));
        await_that("the load started", || ENTERED.load(SeqCst));
        let code = in_forked_child(|| match host.acquire_timeout(Duration::from_secs(5)) {
            Err(Error::Forked { .. }) => 0,
            Err(_) => 1,
            Ok(_) => 2,
        });
        RELEASE.store(true, SeqCst);
        assert_eq!(loading.join().unwrap().unwrap(), 1);
        assert_eq!(
            code, 0,
            "1: another error than Forked (the child waited for a load no thread of it runs); 2: it loaded"
        );
    });
}

#[test]
fn an_inherited_lease_dropped_last_in_a_forked_child_runs_no_plugin_teardown() {
    let dir = TestDir::new("waits_fork_teardown");
    let marker = dir.path().join("unloaded");
    let hook = marker.clone();
    let host = PluginHost::builder()
        .static_plugin("marks_unload", move |reg| {
            let hook = hook.clone();
            reg.on_unload(move || {
                let _ = fs::write(&hook, std::process::id().to_string());
            });
            Ok(())
        })
        .build()
        .unwrap();
    let mut lease = Some(host.acquire().unwrap());
    // The child drops its copy of the only lease: the plugins belong to the parent, whose
    // lease still holds them, so the child must run no teardown of theirs.
    let code = in_forked_child(|| {
        drop(lease.take());
        0
    });
    assert_eq!(code, 0);
    assert!(
        !marker.exists(),
        "the child's drop ran the plugin's on_unload (pid {})",
        fs::read_to_string(&marker).unwrap_or_default()
    );
    drop(lease);
    assert_eq!(
        fs::read_to_string(&marker).ok(),
        Some(std::process::id().to_string()),
        "the parent's last drop runs on_unload (without it this test proves nothing)"
    );
}

/// Set in the child process of the acquire-bound test.
const ACQUIRE_BOUND_CHILD: &str = "DYLEASE_TEST_ACQUIRE_BOUND_CHILD";

/// `dylease::set_acquire_bound` bounds every `acquire()` of the process, as `acquire_timeout`
/// bounds one: an acquire that waits for another host's unload of the same file, which does
/// not finish, gives up with `TimedOut` naming the file. In a child process: the bound is the
/// process's, and this suite sets its own. Caught: `set_acquire_bound` made a no-op
/// (cargo-mutants): the acquire waits until the unload is let go, here after 20 s.
#[test]
fn the_process_wide_acquire_bound_ends_a_wait_for_an_unload_that_does_not_finish() {
    if std::env::var_os(ACQUIRE_BOUND_CHILD).is_none() {
        crate::bounded::run_in_child(
            "waits::the_process_wide_acquire_bound_ends_a_wait_for_an_unload_that_does_not_finish",
            |child| {
                child.env(ACQUIRE_BOUND_CHILD, "1");
            },
        );
        return;
    }
    dylease::set_acquire_bound(Some(Duration::from_millis(100)));
    let (_plugins, lib, a, b) = slow_unload_hosts("waits_acquire_bound");
    let lease = a.acquire().unwrap();
    std::thread::scope(|scope| {
        let unloading = scope.spawn(move || drop(lease));
        await_that("the on_unload started", || beside(&lib, ".unloading").exists());
        let (done, acquired) = std::sync::mpsc::channel();
        let b = &b;
        scope.spawn(move || done.send(b.acquire().map(drop)));
        let outcome = acquired.recv_timeout(Duration::from_secs(20));
        // Let the unload finish, whatever happened, so that the scope ends.
        fs::write(beside(&lib, ".go"), "").unwrap();
        let error = outcome
            .expect("the acquire waited past its bound")
            .expect_err("the acquire passed while the file was unloading");
        assert!(
            matches!(&error, Error::TimedOut { waited: Waited::File(path), .. } if path == &lib),
            "{error:?}"
        );
        unloading.join().unwrap();
    });
}
