//! Static plugins: registration, unload hooks and their order, panics, re-entrancy.

use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use dylease::{Error, Origin, PluginHost, Registrar};

fn double(x: i32) -> i32 {
    x * 2
}

type Log = Arc<Mutex<Vec<String>>>;

/// A static plugin that logs its registration and unload into `log`.
fn logging_plugin(
    log: &Log,
    name: &'static str,
) -> impl Fn(&mut dylease::StaticRegistrar) -> Result<(), dylease::RegisterError> + Send + Sync + use<> {
    let log = log.clone();
    move |reg| {
        log.lock().unwrap().push(format!("load {name}"));
        let (a, b) = (log.clone(), log.clone());
        reg.on_unload(move || a.lock().unwrap().push(format!("unload {name} first hook")));
        reg.on_unload(move || b.lock().unwrap().push(format!("unload {name} second hook")));
        Ok(())
    }
}

#[test]
fn unload_hooks_run_once_in_reverse_order_when_the_last_lease_drops() {
    let log = Log::default();
    let host = PluginHost::builder()
        .static_plugin("a", logging_plugin(&log, "a"))
        .static_plugin("b", logging_plugin(&log, "b"))
        .build()
        .unwrap();
    let lease = host.acquire().unwrap();
    let clone = lease.clone();
    drop(lease);
    assert_eq!(log.lock().unwrap().len(), 2, "a clone still holds the set");
    drop(clone);
    assert_eq!(
        *log.lock().unwrap(),
        [
            "load a",
            "load b",
            "unload b second hook",
            "unload b first hook",
            "unload a second hook",
            "unload a first hook"
        ]
    );
    assert!(!host.is_loaded());
}

#[test]
fn static_passes_are_callable_and_unknown_names_are_none() {
    let host = PluginHost::builder()
        .static_plugin("math", |reg| {
            reg.add_pass("double", double as fn(i32) -> i32, ptr::null_mut())
        })
        .build()
        .unwrap();
    let lease = host.acquire().unwrap();
    assert_eq!(lease.plugins()[0].origin().path(), None);
    assert_eq!(lease.passes()[0].plugin(), "math");
    // SAFETY: "double" is registered as `fn(i32) -> i32`.
    let pass = unsafe { lease.pass::<fn(i32) -> i32>("double") }.unwrap();
    assert_eq!(pass(4), 8);
    assert!(pass.user_data().is_null());
    // SAFETY: not called.
    assert!(unsafe { lease.pass::<fn(i32) -> i32>("triple") }.is_err());
}

#[test]
fn a_failed_load_runs_the_unload_hooks_of_plugins_registered_before_it_and_retries() {
    let log = Log::default();
    let fail = Arc::new(Mutex::new(true));
    let fail_r = fail.clone();
    let host = PluginHost::builder()
        .static_plugin("a", logging_plugin(&log, "a"))
        .static_plugin("b", move |_reg| match *fail_r.lock().unwrap() {
            true => Err(dylease::RegisterError::custom("b is not ready")),
            false => Ok(()),
        })
        .build()
        .unwrap();

    let error = host.acquire().unwrap_err();
    assert!(
        matches!(&error, Error::RegisterFailed { plugin: Origin::Static(n), .. } if n == "b"),
        "{error:?}"
    );
    assert!(error.to_string().contains("static plugin `b`"), "{error}");
    assert!(matches!(&error, Error::RegisterFailed { source: Some(_), .. }));
    assert_eq!(
        error.to_string(),
        "static plugin `b` failed to register its passes: b is not ready"
    );
    assert_eq!(
        *log.lock().unwrap(),
        ["load a", "unload a second hook", "unload a first hook"]
    );
    assert!(!host.is_loaded());

    *fail.lock().unwrap() = false;
    let lease = host.acquire().unwrap();
    assert_eq!(lease.generation(), 1);
}

#[test]
fn a_panicking_register_function_becomes_an_error_and_the_host_stays_usable() {
    let panics = Arc::new(AtomicUsize::new(1));
    let p = panics.clone();
    let host = PluginHost::builder()
        .static_plugin("fragile", move |_reg| {
            if p.fetch_sub(1, Ordering::SeqCst) > 0 {
                panic!("fragile plugin gave up");
            }
            Ok(())
        })
        .build()
        .unwrap();
    let error = host.acquire().unwrap_err();
    match &error {
        Error::Panicked { plugin, message, .. } => {
            assert_eq!(plugin, &Origin::Static("fragile".into()));
            assert_eq!(message, "fragile plugin gave up");
        }
        other => panic!("expected Panicked, got {other:?}"),
    }
    assert!(host.acquire().is_ok());
}

#[test]
fn a_panicking_unload_hook_does_not_stop_the_unload() {
    crate::logger::install();
    let log = Log::default();
    let host = PluginHost::builder()
        .static_plugin("a", logging_plugin(&log, "a"))
        .static_plugin("fragile_unload", |reg| {
            reg.on_unload(|| panic!("fragile_unload's teardown failed"));
            Ok(())
        })
        .build()
        .unwrap();
    drop(host.acquire().unwrap());
    assert_eq!(log.lock().unwrap().len(), 3, "a's hooks ran after the panic");
    assert!(!host.is_loaded());
    // No error can be returned from a drop: the panic is logged, naming the plugin.
    let line = "unload hook of static plugin `fragile_unload` panicked: fragile_unload's teardown failed";
    let logged = crate::logger::records(log::Level::Error, line);
    assert_eq!(logged.len(), 1, "{logged:?}");
    // The line names the host it happened in.
    let host_name = format!("[{}] ", host.stats().name);
    assert_eq!(logged[0], format!("{host_name}{line}"));
    assert_eq!(host.stats().unloads, 1);
    assert_eq!(host.acquire().unwrap().generation(), 2);
}

/// Runs `body` on another thread and fails if it has not finished within `seconds`: a
/// deadlock becomes a test failure instead of a hung run.
fn within(seconds: u64, body: impl FnOnce() + Send + 'static) {
    let (done, finished) = std::sync::mpsc::channel();
    let worker = std::thread::spawn(move || {
        body();
        let _ = done.send(());
    });
    match finished.recv_timeout(std::time::Duration::from_secs(seconds)) {
        Ok(()) => worker.join().unwrap(),
        // The body panicked: re-raise its panic.
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => std::panic::resume_unwind(worker.join().unwrap_err()),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => panic!("deadlock: not finished within {seconds} s"),
    }
}

#[test]
fn nested_acquire_from_registration_or_unload_fails_fast_with_reentrant() {
    within(30, nested_acquire_body);
}

/// A host whose static plugin calls `acquire()` on its own host from its register function
/// and from its unload hook, logging each result.
fn self_acquiring_host() -> (Arc<PluginHost>, Log) {
    let seen = Log::default();
    let this_host: Arc<OnceLock<Weak<PluginHost>>> = Arc::default();
    let (s, h) = (seen.clone(), this_host.clone());
    let nested = move |when: &str, h: &OnceLock<Weak<PluginHost>>, s: &Log| {
        let host = h.get().unwrap().upgrade().unwrap();
        s.lock()
            .unwrap()
            .push(format!("{when}: {:?}", host.acquire().map(|_| ())));
    };
    let host = Arc::new(
        PluginHost::builder()
            .static_plugin("nested", move |reg| {
                nested("register", &h, &s);
                let (s, h) = (s.clone(), h.clone());
                reg.on_unload(move || nested("unload", &h, &s));
                Ok(())
            })
            .build()
            .unwrap(),
    );
    this_host.set(Arc::downgrade(&host)).unwrap();
    (host, seen)
}

fn nested_acquire_body() {
    let (host, seen) = self_acquiring_host();
    drop(host.acquire().unwrap());
    assert_eq!(
        *seen.lock().unwrap(),
        ["register: Err(Reentrant)", "unload: Err(Reentrant)"]
    );
    // Another host may be acquired from inside a load: only the same host is refused.
    let other = PluginHost::builder().build().unwrap();
    let host2 = PluginHost::builder()
        .static_plugin("uses_other", move |_reg| {
            other.acquire().map(drop).map_err(dylease::RegisterError::custom)
        })
        .build()
        .unwrap();
    assert!(host2.acquire().is_ok());
}

#[test]
fn invalid_and_duplicate_pass_names_are_refused_even_if_the_plugin_ignores_it() {
    let host = PluginHost::builder()
        .static_plugin("careless", |reg| {
            let _ = reg.add_pass("", double as fn(i32) -> i32, ptr::null_mut());
            Ok(())
        })
        .build()
        .unwrap();
    let error = host.acquire().unwrap_err();
    assert!(
        matches!(&error, Error::InvalidPass { pass, .. } if pass.is_empty()),
        "{error:?}"
    );
    assert!(error.to_string().contains("the name is empty"), "{error}");

    let host = PluginHost::builder()
        .static_plugin("twice", |reg| {
            reg.add_pass("double", double as fn(i32) -> i32, ptr::null_mut())?;
            let again = reg.add_pass("double", double as fn(i32) -> i32, ptr::null_mut());
            assert!(matches!(again, Err(dylease::RegisterError::Duplicate { .. })));
            Ok(())
        })
        .build()
        .unwrap();
    let error = host.acquire().unwrap_err();
    assert_eq!(
        error.to_string(),
        "static plugin `twice` registered pass `double` twice"
    );
    let host = PluginHost::builder()
        .static_plugin("verbose", |reg| {
            let _ = reg.add_pass(&"x".repeat(257), double as fn(i32) -> i32, ptr::null_mut());
            Ok(())
        })
        .build()
        .unwrap();
    let error = host.acquire().unwrap_err();
    assert_eq!(
        error.to_string(),
        "static plugin `verbose` registered an invalid pass \"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx…\": \
         the name is longer than 256 bytes"
    );
}

#[test]
fn a_pass_name_shared_by_two_static_plugins_is_a_duplicate_naming_both() {
    let host = PluginHost::builder()
        .static_plugin("first", |reg| {
            reg.add_pass("double", double as fn(i32) -> i32, ptr::null_mut())
        })
        .static_plugin("second", |reg| {
            reg.add_pass("double", double as fn(i32) -> i32, ptr::null_mut())
        })
        .build()
        .unwrap();
    let error = host.acquire().unwrap_err();
    assert_eq!(
        error.to_string(),
        "pass `double` is registered by both static plugin `first` and static plugin `second`; rename one of them"
    );
}

#[test]
fn bad_static_plugin_names_are_configuration_errors() {
    let empty = PluginHost::builder().static_plugin("", |_| Ok(())).build().unwrap_err();
    assert!(matches!(empty, Error::Config { .. }), "{empty:?}");
    let twice = PluginHost::builder()
        .static_plugin("x", |_| Ok(()))
        .static_plugin("x", |_| Ok(()))
        .build();
    assert!(
        twice
            .unwrap_err()
            .to_string()
            .contains("two static plugins are named `x`")
    );
    let long = PluginHost::builder()
        .static_plugin("x".repeat(257), |_| Ok(()))
        .build()
        .unwrap_err();
    assert!(long.to_string().contains("longer than 256 bytes"), "{long}");
}

#[test]
fn the_set_unloads_even_when_the_host_value_is_dropped_first() {
    let log = Log::default();
    let host = PluginHost::builder()
        .static_plugin("a", logging_plugin(&log, "a"))
        .build()
        .unwrap();
    let lease = host.acquire().unwrap();
    drop(host);
    assert_eq!(log.lock().unwrap().len(), 1);
    drop(lease);
    assert_eq!(log.lock().unwrap().len(), 3);
}

#[test]
fn a_weak_lease_upgrades_only_to_its_own_generation() {
    let host = PluginHost::builder().static_plugin("a", |_| Ok(())).build().unwrap();
    assert!(dylease::WeakLease::default().upgrade().is_none());
    let first = host.acquire().unwrap();
    let weak = first.downgrade();
    let again = weak.upgrade().expect("generation 1 is alive");
    assert!(dylease::Lease::ptr_eq(&first, &again));
    drop((first, again));
    assert!(!host.is_loaded());
    assert!(weak.upgrade().is_none());
    // The next generation lives in the same place: the old weak lease must not reach it.
    let second = host.acquire().unwrap();
    assert_eq!(second.generation(), 2);
    assert!(weak.upgrade().is_none());
    assert!(second.downgrade().upgrade().is_some());
    // The refused upgrade took no share of generation 2 with it.
    drop(second);
    assert!(!host.is_loaded());
}

#[test]
fn a_load_waits_until_the_previous_generation_finished_unloading() {
    crate::bounded::bounded(
        "a_load_waits_until_the_previous_generation_finished_unloading",
        crate::bounded::LIMIT,
        a_load_waits_until_the_previous_generation_finished_unloading_body,
    );
}

fn a_load_waits_until_the_previous_generation_finished_unloading_body() {
    use std::sync::Barrier;
    use std::thread;
    use std::time::Duration;

    // Invariant I1, deterministically: generation 1's unload hook signals that it started,
    // then lingers; another thread acquires meanwhile. Its load must not begin before the
    // hook (and the rest of the unload) finished.
    let unloading = Arc::new(Barrier::new(2));
    let unload_finished = Arc::new(AtomicUsize::new(0));
    let (u, f) = (unloading.clone(), unload_finished.clone());
    let generation = Arc::new(AtomicUsize::new(0));
    let g = generation.clone();
    let host = Arc::new(
        PluginHost::builder()
            .static_plugin("slow_unload", move |reg| {
                let generation = g.fetch_add(1, Ordering::SeqCst) + 1;
                if generation == 2 {
                    assert_eq!(
                        f.load(Ordering::SeqCst),
                        1,
                        "generation 2 loaded during the unload of 1"
                    );
                }
                let (u, f) = (u.clone(), f.clone());
                reg.on_unload(move || {
                    if generation == 1 {
                        u.wait();
                        thread::sleep(Duration::from_millis(100));
                    }
                    f.fetch_add(1, Ordering::SeqCst);
                });
                Ok(())
            })
            .build()
            .unwrap(),
    );
    let first = host.acquire().unwrap();
    let dropper = thread::spawn(move || drop(first));
    unloading.wait(); // the unload of generation 1 is under way
    let second = host.acquire().expect("generation 2 loads once generation 1 is gone");
    assert_eq!(second.generation(), 2);
    dropper.join().unwrap();
}

#[test]
fn the_last_lease_may_be_dropped_by_a_thread_local_destructor() {
    use std::cell::RefCell;
    use std::thread;

    thread_local! {
        static HELD: RefCell<Option<dylease::Lease>> = const { RefCell::new(None) };
    }
    let log = Log::default();
    let host = Arc::new(
        PluginHost::builder()
            .static_plugin("a", logging_plugin(&log, "a"))
            .build()
            .unwrap(),
    );
    let h = host.clone();
    thread::spawn(move || {
        // Registered before the host's own thread-local is first used by the slow path, so
        // this destructor runs after that thread-local is gone.
        HELD.with(|held| *held.borrow_mut() = None);
        let lease = h.acquire().unwrap();
        HELD.with(|held| *held.borrow_mut() = Some(lease));
    })
    .join()
    .expect("dropping a lease during thread exit must not abort or panic");
    assert_eq!(log.lock().unwrap().len(), 3, "the set unloaded when the thread exited");
    assert!(!host.is_loaded());
    assert_eq!(host.acquire().unwrap().generation(), 2);
}

#[test]
fn nested_acquire_from_an_unload_on_an_exiting_thread_still_fails_fast() {
    use std::cell::RefCell;

    thread_local! {
        static HELD: RefCell<Option<dylease::Lease>> = const { RefCell::new(None) };
    }
    within(30, || {
        let (host, seen) = self_acquiring_host();
        let h = host.clone();
        std::thread::spawn(move || {
            HELD.with(|held| *held.borrow_mut() = Some(h.acquire().unwrap()));
        })
        .join()
        .unwrap();
        assert_eq!(
            *seen.lock().unwrap(),
            ["register: Err(Reentrant)", "unload: Err(Reentrant)"]
        );
    });
}

#[test]
fn acquire_timeout_turns_a_cross_thread_acquire_from_registration_into_timed_out() {
    within(30, || {
        let seen = Log::default();
        let this_host: Arc<OnceLock<Weak<PluginHost>>> = Arc::default();
        let (s, h) = (seen.clone(), this_host.clone());
        let host = Arc::new(
            PluginHost::builder()
                .static_plugin("hands_off", move |_reg| {
                    let host = h.get().unwrap().upgrade().unwrap();
                    // The nested check is per thread: another thread waits for this very load.
                    let (outcome, waited) = std::thread::spawn(move || {
                        let start = std::time::Instant::now();
                        let outcome = host.acquire_timeout(std::time::Duration::from_millis(200)).map(drop);
                        (outcome, start.elapsed())
                    })
                    .join()
                    .unwrap();
                    // It waited for the load, as long as it was told to (not less: a timeout
                    // taken as zero, or a wait skipped, would also end in `TimedOut`).
                    assert!(
                        waited >= std::time::Duration::from_millis(200),
                        "waited only {waited:?}"
                    );
                    s.lock().unwrap().push(match outcome {
                        Err(error) => error.to_string(),
                        Ok(()) => "acquired".into(),
                    });
                    Ok(())
                })
                .build()
                .unwrap(),
        );
        this_host.set(Arc::downgrade(&host)).unwrap();
        let lease = host.acquire().unwrap();
        assert_eq!(lease.generation(), 1);
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 1);
        assert!(
            seen[0].contains("gave up waiting for another thread's load of this host"),
            "{seen:?}"
        );
    });
}

#[test]
fn acquire_timeout_acquires_like_acquire_when_nothing_blocks() {
    let host = PluginHost::builder()
        .static_plugin("plain", |_reg| Ok(()))
        .build()
        .unwrap();
    let lease = host.acquire_timeout(std::time::Duration::ZERO).unwrap();
    let again = host.acquire_timeout(std::time::Duration::ZERO).unwrap();
    assert!(dylease::Lease::ptr_eq(&lease, &again));
}
