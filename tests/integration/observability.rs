//! What a host lets you observe: `stats()`, `wait_unloaded()`, and its `log` events. None of
//! it may change when the plugins load or unload.

use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use dylease::{Error, Lease, PluginHost, Registrar, Stats};
use log::Level;

use crate::logger;

fn double(x: i32) -> i32 {
    x * 2
}

/// A host of two static plugins with three passes between them.
fn two_plugin_host(prefix: &str) -> PluginHost {
    let pass =
        |reg: &mut dylease::StaticRegistrar, name: &str| reg.add_pass(name, double as fn(i32) -> i32, ptr::null_mut());
    let (a, b) = (format!("{prefix}_a"), format!("{prefix}_b"));
    PluginHost::builder()
        .static_plugin(a, move |reg| pass(reg, "one").and_then(|()| pass(reg, "two")))
        .static_plugin(b, move |reg| pass(reg, "three"))
        .build()
        .unwrap()
}

#[test]
fn stats_follow_loads_unloads_and_leases() {
    let host = two_plugin_host("stats");
    let mut fresh = Stats::default();
    fresh.name = host.stats().name;
    assert_eq!(host.stats(), fresh, "nothing happened yet");

    let lease = host.acquire().unwrap();
    let loaded = host.stats();
    assert!(loaded.loaded);
    assert_eq!(
        (loaded.generation, loaded.live_leases, loaded.plugins, loaded.passes),
        (1, 1, 2, 3)
    );
    assert_eq!((loaded.loads, loaded.unloads, loaded.pinned_libraries), (1, 0, 0));
    assert!(loaded.last_load.is_some() && loaded.last_unload.is_none());
    // The load's own duration (registering two plugins takes some nanoseconds), not zero.
    assert!(loaded.last_load > Some(Duration::ZERO), "{:?}", loaded.last_load);

    let clone = lease.clone();
    let weak = lease.downgrade();
    let second = host.acquire().unwrap();
    assert_eq!(
        host.stats().live_leases,
        3,
        "clones and acquires count, weak leases do not"
    );
    drop((clone, second));
    assert_eq!(host.stats().live_leases, 1);

    drop(lease);
    let unloaded = host.stats();
    assert!(!unloaded.loaded);
    assert_eq!(
        (
            unloaded.generation,
            unloaded.live_leases,
            unloaded.plugins,
            unloaded.passes
        ),
        (1, 0, 0, 0)
    );
    assert_eq!((unloaded.loads, unloaded.unloads), (1, 1));
    assert!(unloaded.last_unload.is_some());
    assert!(weak.upgrade().is_none());

    let again = host.acquire().unwrap();
    let stats = host.stats();
    assert_eq!(
        (stats.generation, stats.loads, stats.unloads, stats.live_leases),
        (2, 2, 1, 1)
    );
    drop(again);
}

#[test]
fn a_failed_load_is_not_counted_as_a_load() {
    let host = PluginHost::builder()
        .static_plugin("stats_fails", |_reg| Err(dylease::RegisterError::custom("no")))
        .build()
        .unwrap();
    assert!(host.acquire().is_err());
    let mut fresh = Stats::default();
    fresh.name = host.stats().name;
    assert_eq!(host.stats(), fresh);
}

#[test]
fn reading_stats_never_keeps_a_set_loaded() {
    crate::bounded::bounded(
        "reading_stats_never_keeps_a_set_loaded",
        crate::bounded::LIMIT,
        reading_stats_never_keeps_a_set_loaded_body,
    );
}

fn reading_stats_never_keeps_a_set_loaded_body() {
    // A `stats()` that held a lease while reading could be holding it when the last user
    // drops theirs: that drop would then not unload (breaking "the last lease's drop unloads
    // before it returns"), and the observer would run the unload later. The window is short:
    // against such a `stats()`, this test fails in about half of its runs on two cores.
    let host = Arc::new(two_plugin_host("stats_observer"));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Arc::new(Barrier::new(2));
    let observer = {
        let (host, stop, started) = (host.clone(), stop.clone(), started.clone());
        thread::spawn(move || {
            started.wait();
            let mut reads = 0u64;
            while !stop.load(Ordering::Relaxed) {
                reads += host.stats().live_leases as u64;
            }
            reads
        })
    };
    started.wait();
    let rounds = 30_000;
    for _ in 0..rounds {
        let lease = host.acquire().unwrap();
        drop(lease);
        assert!(
            !host.is_loaded(),
            "the last lease's drop returned with the set still loaded"
        );
    }
    stop.store(true, Ordering::Relaxed);
    observer.join().unwrap();
    assert_eq!(host.stats().unloads, rounds);
}

#[test]
fn wait_unloaded_returns_true_at_once_when_nothing_is_loaded() {
    let host = two_plugin_host("wait_idle");
    assert!(host.wait_unloaded(Duration::ZERO), "never loaded");
    drop(host.acquire().unwrap());
    assert!(host.wait_unloaded(Duration::ZERO), "loaded, then unloaded");
}

#[test]
fn wait_unloaded_returns_false_after_the_timeout_while_a_lease_is_held() {
    let host = two_plugin_host("wait_held");
    let lease = host.acquire().unwrap();
    assert!(!host.wait_unloaded(Duration::ZERO));
    assert!(!host.wait_unloaded(Duration::from_millis(20)));
    assert!(host.is_loaded(), "waiting forces nothing");
    assert_eq!(lease.generation(), 1);
}

#[test]
fn wait_unloaded_returns_true_when_another_thread_drops_the_last_lease() {
    crate::bounded::bounded(
        "wait_unloaded_returns_true_when_another_thread_drops_the_last_lease",
        crate::bounded::LIMIT,
        wait_unloaded_returns_true_when_another_thread_drops_the_last_lease_body,
    );
}

fn wait_unloaded_returns_true_when_another_thread_drops_the_last_lease_body() {
    let host = Arc::new(two_plugin_host("wait_woken"));
    let lease = host.acquire().unwrap();
    // A channel, not a barrier: a waiter that fails its first assertion drops its sender, and
    // the test fails at once instead of waiting for it for ever.
    let (waiting, started) = std::sync::mpsc::channel();
    let waiter = {
        let host = host.clone();
        thread::spawn(move || {
            assert!(!host.wait_unloaded(Duration::ZERO));
            waiting.send(()).unwrap();
            // Without a wake-up from the unload this would only return, `false`, after a
            // minute.
            host.wait_unloaded(Duration::from_secs(60))
        })
    };
    if started.recv_timeout(Duration::from_secs(10)).is_err() {
        std::panic::resume_unwind(
            waiter
                .join()
                .err()
                .unwrap_or_else(|| Box::new("the waiter did not start")),
        );
    }
    // Give the waiter time to block (not needed for correctness, only so that the wake-up
    // path is what the test exercises).
    thread::sleep(Duration::from_millis(50));
    thread::spawn(move || drop(lease)).join().unwrap();
    assert!(waiter.join().unwrap());
    assert!(!host.is_loaded());
}

#[test]
fn wait_unloaded_from_inside_the_hosts_own_unload_returns_false_at_once() {
    let result: Arc<std::sync::Mutex<Option<bool>>> = Arc::default();
    let slot: Arc<std::sync::OnceLock<std::sync::Weak<PluginHost>>> = Arc::default();
    let (r, s) = (result.clone(), slot.clone());
    let host = Arc::new(
        PluginHost::builder()
            .static_plugin("wait_self", move |reg| {
                let (r, s) = (r.clone(), s.clone());
                reg.on_unload(move || {
                    let host = s.get().unwrap().upgrade().unwrap();
                    *r.lock().unwrap() = Some(host.wait_unloaded(Duration::from_secs(60)));
                });
                Ok(())
            })
            .build()
            .unwrap(),
    );
    slot.set(Arc::downgrade(&host)).unwrap();
    drop(host.acquire().unwrap());
    assert_eq!(*result.lock().unwrap(), Some(false));
}

#[test]
fn set_events_log_at_debug_a_hosts_first_load_and_last_unload_at_info_every_line_named() {
    logger::install();
    // Four plugins and five passes, and a name no other test's host has.
    let pass =
        |reg: &mut dylease::StaticRegistrar, name: &str| reg.add_pass(name, double as fn(i32) -> i32, ptr::null_mut());
    let host = PluginHost::builder()
        .name("logged-session")
        .static_plugin("logged_a", move |reg| pass(reg, "one").and_then(|()| pass(reg, "two")))
        .static_plugin("logged_b", move |reg| pass(reg, "three"))
        .static_plugin("logged_c", move |reg| {
            pass(reg, "four").and_then(|()| pass(reg, "five"))
        })
        .static_plugin("logged_d", |_reg| Ok(()))
        .build()
        .unwrap();
    assert_eq!(host.stats().name, "logged-session");
    drop(host.acquire().unwrap());
    let second = host.acquire().unwrap();
    // The host's own first load: `info`; its second, and the unload between: `debug`.
    let named = "[logged-session] ";
    let load = |generation: u64| format!("{named}loaded generation {generation}: 4 plugins, 5 passes in ");
    let unload = |generation: u64| format!("{named}unloaded generation {generation}: 4 plugins, 5 passes in ");
    let starting = |level, needle: &str| {
        let lines = logger::records(level, needle);
        lines.iter().filter(|line| line.starts_with(needle)).count()
    };
    assert_eq!(starting(Level::Info, &load(1)), 1);
    assert_eq!(starting(Level::Debug, &load(1)), 0);
    assert_eq!(starting(Level::Debug, &unload(1)), 1);
    assert_eq!(starting(Level::Info, &unload(1)), 0);
    assert_eq!(starting(Level::Debug, &load(2)), 1);
    assert_eq!(starting(Level::Info, &load(2)), 0);
    // The last unload, after the host is gone: `info`.
    drop(host);
    drop(second);
    assert_eq!(starting(Level::Info, &unload(2)), 1);
    for (plugin, passes) in [
        ("logged_a", "2 passes"),
        ("logged_b", "1 pass"),
        ("logged_d", "0 passes"),
    ] {
        let line = format!("{named}loaded static plugin `{plugin}` as `{plugin}`: {passes}");
        assert_eq!(logger::records(Level::Debug, &line), [line.clone(), line]);
    }
    // Without a name, a short one of its own.
    let unnamed = PluginHost::builder()
        .static_plugin("logged_unnamed", |_reg| Ok(()))
        .build()
        .unwrap();
    let name = unnamed.stats().name;
    assert!(name.starts_with("host-") && name.len() < 16, "{name}");
    drop(unnamed.acquire().unwrap());
    let line = logger::records(Level::Info, "loaded static plugin `logged_unnamed`");
    assert!(line.is_empty(), "per-plugin lines are debug: {line:?}");
    let line = logger::records(Level::Debug, "loaded static plugin `logged_unnamed`");
    assert_eq!(line.len(), 1);
    assert!(line[0].starts_with(&format!("[{name}] ")), "{line:?}");
}

/// A logger may call back into the library. One that acquires the host while the host logs
/// its unload must get `Error::Reentrant`, not wait for the very unload it is part of.
#[test]
fn a_logger_that_acquires_the_host_during_its_unload_gets_reentrant_not_a_deadlock() {
    let (done, finished) = std::sync::mpsc::channel();
    let worker = thread::spawn(move || {
        let host = Arc::new(
            PluginHost::builder()
                .static_plugin("reentrant_logger", |_| Ok(()))
                .build()
                .unwrap(),
        );
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (in_hook, seen_in_hook) = (Arc::downgrade(&host), seen.clone());
        logger::with_hook(
            move |line| {
                if (line.contains("] unloaded generation") || line.contains("] loaded generation"))
                    && let Some(host) = in_hook.upgrade()
                {
                    let outcome = host.acquire().map(|lease| lease.generation());
                    seen_in_hook.lock().unwrap().push((line.to_owned(), outcome));
                }
            },
            || drop(host.acquire().unwrap()),
        );
        assert!(!host.is_loaded());
        let seen = seen.lock().unwrap();
        let during_unload: Vec<_> = seen.iter().filter(|(line, _)| line.contains("] unloaded")).collect();
        assert_eq!(during_unload.len(), 1, "{seen:?}");
        assert!(matches!(during_unload[0].1, Err(Error::Reentrant)), "{seen:?}");
        let _ = done.send(());
    });
    match finished.recv_timeout(Duration::from_secs(20)) {
        Ok(()) => worker.join().unwrap(),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => std::panic::resume_unwind(worker.join().unwrap_err()),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("deadlock: a logger acquiring during unload hung"),
    }
}

/// A logger that panics while the host logs a load: the panic reaches the caller of
/// `acquire()`, and the host stays consistent: the new set unloads with the unwinding lease,
/// the counters agree, and the next `acquire()` loads the next generation.
#[test]
fn a_panicking_logger_during_a_load_leaves_the_host_consistent() {
    let host = PluginHost::builder()
        .static_plugin("panicking_logger", |_| Ok(()))
        .build()
        .unwrap();
    let outcome = logger::with_hook(
        |line| {
            if line.contains("] loaded generation 1: 1 plugin") {
                panic!("the logger fails");
            }
        },
        || std::panic::catch_unwind(|| host.acquire()),
    );
    assert!(outcome.is_err(), "the logger's panic reaches the caller");
    let stats = host.stats();
    assert_eq!((stats.generation, stats.live_leases), (1, 0), "{stats:?}");
    assert!(
        !host.is_loaded(),
        "the set unloaded with the unwinding lease: {stats:?}"
    );
    assert!(host.wait_unloaded(Duration::ZERO));
    // Bounded: a load the panic left marked in progress would make a plain acquire() wait
    // forever; this one fails the test instead.
    let lease = host.acquire_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(lease.generation(), 2);
    assert_eq!(host.stats().live_leases, 1);
    drop(lease);
    assert!(!host.is_loaded());
}

#[test]
fn stats_describe_the_current_generation_after_an_older_one_drains() {
    let host = two_plugin_host("drain");
    let old = host.acquire().unwrap();
    let new = host.reload().unwrap();
    let (plugins, passes) = (new.plugins().len(), new.passes().len());
    assert!(plugins > 0 && passes > 0);
    drop(old);
    let stats = host.stats();
    assert_eq!((stats.generation, stats.plugins, stats.passes), (2, plugins, passes));
    drop(new);
    let stats = host.stats();
    assert_eq!((stats.plugins, stats.passes), (0, 0), "nothing is loaded");
}

/// A set's `Debug` shows its generation, its plugins and its passes by name, and how many
/// failures were skipped: what a log line of it needs; a lease's shows its set.
#[test]
fn a_sets_debug_output_names_its_generation_plugins_and_passes() {
    let host = two_plugin_host("debug");
    let lease = host.acquire().unwrap();
    let shown = format!("{:?}", *lease);
    assert!(shown.starts_with("PluginSet { generation: 1, plugins: ["), "{shown}");
    for plugin in lease.plugins() {
        assert!(shown.contains(&format!("{:?}", plugin.name())), "{shown}");
    }
    for pass in lease.passes() {
        assert!(shown.contains(&format!("{:?}", pass.name())), "{shown}");
    }
    assert!(shown.ends_with("failures: 0 }"), "{shown}");
    // A lease shows its set.
    assert_eq!(format!("{lease:?}"), format!("Lease({shown})"));
}

/// The handles' `Debug` names what they stand for, an owned pass knows its name, and
/// `Lease::ptr_eq` tells leases of one set from leases of another.
#[test]
fn handles_show_what_they_stand_for_and_leases_compare_by_set() {
    let host = two_plugin_host("handles");
    let lease = host.acquire().unwrap();
    // SAFETY: "two" was registered as `fn(i32) -> i32`; used while `lease` lives.
    let pass = unsafe { lease.pass::<fn(i32) -> i32>("two") }.unwrap();
    assert_eq!(format!("{pass:?}"), "Pass { name: \"two\", plugin: \"handles_a\" }");
    let owned = pass.to_owned_pass();
    assert_eq!(owned.name(), "two");
    assert_eq!(format!("{owned:?}"), "OwnedPass { name: \"two\", generation: 1 }");
    assert_eq!(format!("{:?}", lease.downgrade()), "WeakLease");

    assert!(Lease::ptr_eq(&lease, &lease.clone()));
    let other = two_plugin_host("handles_other").acquire().unwrap();
    assert!(!Lease::ptr_eq(&lease, &other), "leases of two hosts' sets");

    // An owned pass carries the pointer the plugin attached, as the borrowed one does.
    let data = Box::leak(Box::new(7_i32)) as *mut i32 as usize;
    let host = PluginHost::builder()
        .static_plugin("with_data", move |reg| {
            reg.add_pass("p", double as fn(i32) -> i32, data as *mut std::ffi::c_void)
        })
        .build()
        .unwrap();
    let lease = host.acquire().unwrap();
    // SAFETY: "p" was registered as `fn(i32) -> i32`; used while `lease` lives.
    let pass = unsafe { lease.pass::<fn(i32) -> i32>("p") }.unwrap();
    assert_eq!(pass.user_data() as usize, data);
    assert_eq!(pass.to_owned_pass().user_data() as usize, data);
}
