//! `UnloadPolicy::After` keeps its host's set with one background thread per host, whatever
//! the number of generations it loads, and that thread ends with the host. A test binary of
//! its own with a single test: it counts the process's threads by name.
#![cfg(target_os = "linux")]

use std::fs;
use std::thread;
use std::time::{Duration, Instant};

use dylease::{PluginHost, UnloadPolicy};

/// The threads of this process named `name` (as `/proc` shows it: at most 15 bytes).
fn threads_named(name: &str) -> usize {
    let name = &name.as_bytes()[..name.len().min(15)];
    fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| fs::read(task.ok()?.path().join("comm")).ok())
        .filter(|comm| comm.strip_suffix(b"\n").unwrap_or(comm) == name)
        .count()
}

/// Waits (bounded) until `count` threads are named `name`; whether they were.
fn await_threads(name: &str, count: usize) -> bool {
    let started = Instant::now();
    while threads_named(name) != count {
        if started.elapsed() > Duration::from_secs(30) {
            return false;
        }
        thread::sleep(Duration::from_millis(5));
    }
    true
}

#[test]
fn one_keeper_thread_per_host_whatever_the_reloads_and_none_after_the_host() {
    let host = PluginHost::builder()
        .static_plugin("kept", |_reg| Ok(()))
        .unload(UnloadPolicy::After(Duration::from_secs(3600)))
        .build()
        .unwrap();
    assert_eq!(threads_named("dylease-keeper"), 0);
    drop(host.acquire().unwrap());
    for generation in 2..=4 {
        assert_eq!(host.reload().unwrap().generation(), generation);
    }
    assert!(await_threads("dylease-keeper", 1), "no keeper thread");
    // A keeper started by a later load names itself as soon as it runs: give it the time.
    thread::sleep(Duration::from_millis(200));
    assert_eq!(threads_named("dylease-keeper"), 1, "one keeper per host");
    assert!(host.is_loaded(), "the host keeps the newest generation");
    drop(host);
    assert!(await_threads("dylease-keeper", 0), "the keeper outlived its host");
}
