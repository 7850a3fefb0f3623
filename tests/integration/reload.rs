//! Reload with draining: new plugin code without a restart, while leases of older generations
//! keep the code they started with; and the unload policies that keep a set loaded a little
//! longer.

use std::fs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use dylease::{Error, Lease, PluginHost, UnloadPolicy};

use crate::support::{TestDir, assert_unloaded};

/// The test-owned counters of `tests/plugins/versioned.c` (same layout).
#[repr(C)]
struct Counters {
    loads: [AtomicI32; 32],
    unloads: [AtomicI32; 32],
}

impl Counters {
    fn new() -> Arc<Counters> {
        Arc::new(Counters {
            loads: std::array::from_fn(|_| AtomicI32::new(0)),
            unloads: std::array::from_fn(|_| AtomicI32::new(0)),
        })
    }

    fn loads(&self, version: usize) -> i32 {
        self.loads[version].load(Ordering::SeqCst)
    }

    fn unloads(&self, version: usize) -> i32 {
        self.unloads[version].load(Ordering::SeqCst)
    }
}

/// The version the lease's plugin was built as (negative if its instance was torn down).
fn version(lease: &Lease, counters: &Counters) -> i32 {
    // SAFETY: versioned.c registers `attach` as `void (*)(versioned_counters *)` and
    // `version` as `int (*)(void)`; `Counters` has the C layout, and outlives the libraries.
    unsafe {
        let attach = lease.pass::<extern "C" fn(*const Counters)>("attach").expect("attach");
        attach(counters);
        let version = lease.pass::<extern "C" fn() -> i32>("version").expect("version");
        version()
    }
}

/// Installs version `n` as `dir/libversioned.so` the way plugins must be installed: written
/// beside it, then renamed over it.
fn install(dir: &TestDir, n: usize) -> PathBuf {
    let partial = dir.add(&format!("versioned_{n}"), ".libversioned.so.partial");
    let to = dir.path().join("libversioned.so");
    fs::rename(&partial, &to).unwrap();
    to
}

fn reload_host(dir: &TestDir) -> PluginHost {
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    unsafe { PluginHost::builder().dir(dir.path()).build() }.unwrap()
}

#[test]
fn a_reload_serves_new_code_while_an_old_lease_keeps_the_old() {
    let plugins = TestDir::new("reload-plugins");
    let counters = Counters::new();
    let lib = install(&plugins, 1);
    let host = reload_host(&plugins);

    let session = host.acquire().unwrap();
    assert_eq!(version(&session, &counters), 1);
    install(&plugins, 2);
    let fresh = host.reload().unwrap();
    assert_eq!(fresh.generation(), 2);
    assert_eq!(version(&fresh, &counters), 2, "the reload did not load the new code");
    assert_eq!(version(&session, &counters), 1, "the old lease lost its code");
    let shared = host.acquire().unwrap();
    assert!(
        Lease::ptr_eq(&shared, &fresh),
        "acquire() must share the new generation"
    );
    assert_eq!(counters.unloads(1), 0);
    drop(session);
    assert_eq!(counters.unloads(1), 1, "v1 unloads when its last lease drops");
    assert_eq!(counters.unloads(2), 0);
    assert_eq!(version(&shared, &counters), 2);
    drop((fresh, shared));
    assert_eq!((counters.loads(1), counters.unloads(1)), (1, 1));
    assert_eq!((counters.loads(2), counters.unloads(2)), (1, 1));
    assert_unloaded(&lib);
}

#[test]
fn an_unchanged_file_keeps_sharing_its_instance_across_a_reload() {
    let plugins = TestDir::new("reload-unchanged");
    let counters = Counters::new();
    install(&plugins, 3);
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe {
        PluginHost::builder()
            .file(plugins.path().join("libversioned.so"))
            .build()
    }
    .unwrap();
    let old = host.acquire().unwrap();
    assert_eq!(version(&old, &counters), 3);
    let new = host.reload().unwrap();
    assert_eq!(version(&new, &counters), 3);
    assert_eq!(counters.loads(3), 1, "an unchanged file was loaded again");
    drop(old);
    assert_eq!(
        counters.unloads(3),
        0,
        "the instance the new generation shares unloaded"
    );
    drop(new);
    assert_eq!(counters.unloads(3), 1);
}

#[test]
fn a_failed_reload_leaves_the_current_generation_current() {
    let plugins = TestDir::new("reload-failed");
    let counters = Counters::new();
    let lib = install(&plugins, 4);
    let host = reload_host(&plugins);
    let lease = host.acquire().unwrap();
    assert_eq!(version(&lease, &counters), 4);
    let garbage = plugins.path().join(".garbage");
    fs::write(&garbage, b"not a library at all").unwrap();
    fs::rename(&garbage, &lib).unwrap();
    let error = host.reload().unwrap_err();
    assert!(matches!(&error, Error::Open { path, .. } if path == &lib), "{error:?}");
    assert_eq!(host.generation(), 1);
    let again = host.acquire().unwrap();
    assert!(Lease::ptr_eq(&again, &lease), "the current generation changed");
    assert_eq!(version(&again, &counters), 4);
}

#[test]
fn three_threads_call_while_nineteen_versions_are_installed_and_reloaded() {
    let plugins = TestDir::new("reload-threads");
    let counters = Counters::new();
    let lib = install(&plugins, 1);
    let host = Arc::new(reload_host(&plugins));
    // The main thread holds the current generation, as a long session would: every version
    // then loads once, and each older one drains while the callers still hold it.
    let mut current = host.acquire().unwrap();
    assert_eq!(version(&current, &counters), 1);
    let installed = Arc::new(Mutex::new(vec![1]));
    let done = Arc::new(AtomicBool::new(false));
    let callers: Vec<_> = (0..3)
        .map(|_| {
            let (host, counters, installed, done) = (host.clone(), counters.clone(), installed.clone(), done.clone());
            thread::spawn(move || {
                let mut calls = 0u64;
                while !done.load(Ordering::SeqCst) || calls == 0 {
                    let lease = host.acquire().unwrap();
                    let v = version(&lease, &counters);
                    assert!(v > 0, "a pass ran in an unloaded instance ({v})");
                    assert!(
                        installed.lock().unwrap().contains(&(v as usize)),
                        "version {v} was never installed"
                    );
                    calls += 1;
                }
                calls
            })
        })
        .collect();
    for n in 2..=20 {
        installed.lock().unwrap().push(n);
        install(&plugins, n);
        current = host.reload().unwrap();
        assert_eq!(version(&current, &counters), n as i32);
    }
    done.store(true, Ordering::SeqCst);
    for caller in callers {
        assert!(caller.join().unwrap() > 0);
    }
    drop(current);
    // Every generation's instance unloaded exactly once, and nothing is left.
    for n in 1..=20 {
        assert_eq!(counters.loads(n), 1, "version {n} loads");
        assert_eq!(counters.unloads(n), 1, "version {n} unloads");
    }
    assert_eq!(host.generation(), 20);
    assert_unloaded(&lib);
}

#[test]
fn after_keeps_a_churned_set_loaded_then_unloads_it_when_idle() {
    let plugins = TestDir::new("unload-after");
    let counters = Counters::new();
    let lib = install(&plugins, 5);
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe {
        PluginHost::builder()
            .dir(plugins.path())
            .unload(UnloadPolicy::After(Duration::from_millis(300)))
            .build()
    }
    .unwrap();
    for _ in 0..200 {
        let lease = host.acquire().unwrap();
        assert_eq!(version(&lease, &counters), 5);
    }
    assert_eq!(host.stats().loads, 1, "200 short users loaded more than once");
    assert!(host.is_loaded());
    assert_eq!(
        host.stats().unload_policy,
        UnloadPolicy::After(Duration::from_millis(300))
    );
    assert!(
        host.stats().unloads_at.is_some(),
        "no user holds a lease: an unload is planned"
    );
    // Within a few seconds of the last drop, the host's own lease goes and the set unloads.
    assert!(
        host.wait_unloaded(Duration::from_secs(10)),
        "the idle set never unloaded"
    );
    assert_eq!(counters.unloads(5), 1);
    assert_unloaded(&lib);
}

#[test]
fn with_host_keeps_the_set_loaded_until_the_host_drops() {
    let plugins = TestDir::new("unload-with-host");
    let counters = Counters::new();
    let lib = install(&plugins, 6);
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe {
        PluginHost::builder()
            .dir(plugins.path())
            .unload(UnloadPolicy::WithHost)
            .build()
    }
    .unwrap();
    drop(host.acquire().unwrap());
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(200) {
        assert!(host.is_loaded());
        thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(counters.unloads(6), 0);
    let lease = host.acquire().unwrap();
    assert_eq!(version(&lease, &counters), 6);
    assert_eq!(host.stats().loads, 1);
    drop(lease);
    drop(host);
    assert_eq!(counters.unloads(6), 1, "the host's drop did not unload");
    assert_unloaded(&lib);
}
