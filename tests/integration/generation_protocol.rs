//! The generation protocol's promises that only show with several generations, hosts or
//! threads at once: a draining generation's unload is not the current one's; a thread's cache
//! never hands out an older generation or another host's set; and the host's own lease under
//! `UnloadPolicy::After` is dropped by the host, after the idle time, and reported right.
//! Each test here was seen failing with a planted bug of `src/host/generations.rs`
//! (TESTING.md lists which).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::{self, ThreadId};
use std::time::{Duration, Instant};

use dylease::{Error, Lease, PluginHost, UnloadPolicy};

use crate::bounded::bounded;

/// How long a test waits for another thread before it fails instead of hanging.
const PATIENCE: Duration = Duration::from_secs(30);

#[test]
fn a_draining_generations_unload_leaves_the_current_one_loaded_and_waited_for() {
    bounded(
        "a_draining_generations_unload_leaves_the_current_one_loaded_and_waited_for",
        PATIENCE * 2,
        || {
            // The current generation's unload blocks in its hook until the test lets it go.
            let (started_tx, started) = mpsc::channel::<u64>();
            let (go, go_rx) = mpsc::channel::<()>();
            let (started_tx, go_rx) = (Mutex::new(started_tx), Arc::new(Mutex::new(go_rx)));
            let loads = Arc::new(AtomicUsize::new(0));
            let counted = loads.clone();
            let host = PluginHost::builder()
                .static_plugin("gate", move |reg| {
                    let generation = counted.fetch_add(1, Ordering::SeqCst) + 1;
                    let started = started_tx.lock().unwrap().clone();
                    let go = go_rx.clone();
                    reg.on_unload(move || {
                        if generation == 2 {
                            started.send(2).unwrap();
                            // Bounded: a broken test fails here instead of hanging.
                            go.lock().unwrap().recv_timeout(PATIENCE).expect("the test let go");
                        }
                    });
                    Ok(())
                })
                .build()
                .unwrap();

            let old = host.acquire().unwrap();
            let current = host.reload().unwrap();
            assert_eq!((old.generation(), current.generation()), (1, 2));
            drop(old); // generation 1 drains and unloads; generation 2 stays current and loaded
            let stats = host.stats();
            assert!(host.is_loaded() && stats.loaded, "{stats:?}");
            assert_eq!(
                (stats.generation, stats.live_leases, stats.loads, stats.unloads),
                (2, 1, 2, 1)
            );
            assert!(Lease::ptr_eq(&host.acquire().unwrap(), &current));

            // The current generation's last lease goes on another thread; its unload is in progress.
            thread::scope(|scope| {
                let dropper = scope.spawn(move || drop(current));
                assert_eq!(started.recv_timeout(PATIENCE), Ok(2));
                assert!(host.is_loaded(), "generation 2 is still unloading");
                // I1: no new generation loads while the current one unloads; the wait is bounded.
                let early = host.acquire_timeout(Duration::from_millis(200));
                assert!(
                    matches!(early, Err(Error::TimedOut { .. })),
                    "a generation loaded while the current one was still unloading: {early:?}"
                );
                assert_eq!(loads.load(Ordering::SeqCst), 2);
                go.send(()).unwrap();
                let deadline = Instant::now() + PATIENCE;
                while !dropper.is_finished() {
                    assert!(Instant::now() < deadline, "the unload did not finish");
                    thread::sleep(Duration::from_millis(5));
                }
            });
            assert!(!host.is_loaded());
            let stats = host.stats();
            assert_eq!((stats.loads, stats.unloads, stats.live_leases), (2, 2, 0));
            let next = host.acquire().unwrap();
            assert_eq!(next.generation(), 3);
        },
    )
}

#[test]
fn a_thread_with_a_cached_older_generation_gets_the_new_one_after_a_reload_elsewhere() {
    bounded(
        "a_thread_with_a_cached_older_generation_gets_the_new_one_after_a_reload_elsewhere",
        PATIENCE * 2,
        || {
            let host = PluginHost::builder()
                .static_plugin("plain", |_reg| Ok(()))
                .build()
                .unwrap();
            let (to_user, user_rx) = mpsc::channel::<()>();
            let (user_tx, from_user) = mpsc::channel::<Lease>();
            thread::scope(|scope| {
                let host = &host;
                scope.spawn(move || {
                    // Fills this thread's cache with generation 1, then acquires again when told.
                    user_tx.send(host.acquire().unwrap()).unwrap();
                    if user_rx.recv_timeout(PATIENCE).is_ok() {
                        user_tx.send(host.acquire().unwrap()).unwrap();
                    }
                });
                let first = from_user.recv_timeout(PATIENCE).unwrap();
                assert_eq!(first.generation(), 1);
                // Reloaded on this thread; `first` keeps generation 1 alive (draining), so the user
                // thread's cached `Weak` of it still upgrades.
                let second = host.reload().unwrap();
                to_user.send(()).unwrap();
                let again = from_user.recv_timeout(PATIENCE).unwrap();
                assert_eq!(again.generation(), 2, "a cached older generation was handed out");
                assert!(Lease::ptr_eq(&again, &second));
                drop(first);
            });
        },
    )
}

#[test]
fn two_hosts_used_in_turn_on_one_thread_never_hand_out_each_others_set() {
    bounded(
        "two_hosts_used_in_turn_on_one_thread_never_hand_out_each_others_set",
        PATIENCE * 2,
        || {
            let one = PluginHost::builder()
                .static_plugin("one", |_reg| Ok(()))
                .build()
                .unwrap();
            let two = PluginHost::builder()
                .static_plugin("two", |_reg| Ok(()))
                .build()
                .unwrap();
            let (a, b) = (one.acquire().unwrap(), two.acquire().unwrap());
            for _ in 0..3 {
                let (a2, b2) = (one.acquire().unwrap(), two.acquire().unwrap());
                assert_eq!(a2.plugins()[0].name(), "one");
                assert_eq!(b2.plugins()[0].name(), "two");
                assert!(Lease::ptr_eq(&a, &a2) && Lease::ptr_eq(&b, &b2));
            }
        },
    )
}

/// A host under `After(idle)` whose plugin records the thread each unload ran on.
fn keeping_host(idle: Duration) -> (PluginHost, Arc<Mutex<Vec<ThreadId>>>) {
    let unloaded_on = Arc::new(Mutex::new(Vec::new()));
    let record = unloaded_on.clone();
    let host = PluginHost::builder()
        .static_plugin("kept", move |reg| {
            let record = record.clone();
            reg.on_unload(move || record.lock().unwrap().push(thread::current().id()));
            Ok(())
        })
        .unload(UnloadPolicy::After(idle))
        .build()
        .unwrap();
    (host, unloaded_on)
}

#[test]
fn after_a_user_acquires_through_the_cache_while_the_keeper_decides_the_host_still_unloads() {
    bounded(
        "after_a_user_acquires_through_the_cache_while_the_keeper_decides_the_host_still_unloads",
        PATIENCE * 2,
        || {
            // With no idle time the keeper decides at every look (each millisecond): while the user
            // holds a lease it must see that lease and keep its own, so the user's last drop never
            // unloads; the keeper's does, on its thread.
            let (host, unloaded_on) = keeping_host(Duration::ZERO);
            let lease = host.acquire().unwrap();
            let started = Instant::now();
            while started.elapsed() < Duration::from_millis(200) {
                let again = host.acquire().unwrap(); // from this thread's cache
                assert!(Lease::ptr_eq(&again, &lease));
                drop(again);
                thread::sleep(Duration::from_millis(1));
            }
            assert_eq!(host.stats().loads, 1);
            drop(lease);
            assert!(host.wait_unloaded(PATIENCE), "the keeper did not unload");
            let unloaded_on = unloaded_on.lock().unwrap();
            assert_eq!(unloaded_on.len(), 1);
            assert_ne!(
                unloaded_on[0],
                thread::current().id(),
                "a user's drop unloaded: the host had let go of its own lease while the user held one"
            );
        },
    )
}

#[test]
fn after_d_the_set_unloads_no_sooner_than_about_d_after_the_last_lease_and_says_when() {
    bounded(
        "after_d_the_set_unloads_no_sooner_than_about_d_after_the_last_lease_and_says_when",
        PATIENCE * 2,
        || {
            // Idle 2 s: the keeper looks every 250 ms. The user holds its lease for 1.9 idle times,
            // so a keeper that missed the user's lease would have tried (and failed) at about 1 idle
            // time and unload at about 2, soon after the drop. Bounds are generous on purpose.
            let idle = Duration::from_secs(2);
            let (host, unloaded_on) = keeping_host(idle);
            let lease = host.acquire().unwrap();
            assert_eq!(host.stats().unloads_at, None, "a user lease is alive");
            thread::sleep(idle * 19 / 10);
            drop(lease);
            let dropped = Instant::now();
            let at = host.stats().unloads_at.expect("only the host's lease is left");
            assert!(
                at > dropped + idle / 2 && at <= dropped + idle,
                "unloads_at is {:?} after the drop, not about {idle:?}",
                at.checked_duration_since(dropped)
            );
            thread::sleep(idle * 6 / 10);
            assert!(
                host.is_loaded(),
                "unloaded sooner than the idle time after the last lease"
            );
            assert!(
                host.wait_unloaded(PATIENCE),
                "not unloaded {PATIENCE:?} after the idle time"
            );
            assert!(dropped.elapsed() >= idle / 2);
            assert_eq!(host.stats().unloads_at, None);
            assert_eq!(unloaded_on.lock().unwrap().len(), 1);
        },
    )
}

/// The keeper's decision, seen from `unloads_at`: a user lease keeps the host from planning.
#[test]
fn unloads_at_is_none_while_a_user_holds_a_lease_and_after_the_unload() {
    bounded(
        "unloads_at_is_none_while_a_user_holds_a_lease_and_after_the_unload",
        PATIENCE * 2,
        || {
            let (host, _) = keeping_host(Duration::from_secs(3600));
            assert_eq!(host.stats().unloads_at, None, "nothing loaded");
            let lease = host.acquire().unwrap();
            assert_eq!(host.stats().unloads_at, None);
            let before = Instant::now();
            drop(lease);
            let at = host.stats().unloads_at.expect("planned");
            assert!(
                at >= before + Duration::from_secs(3000),
                "{:?}",
                at.checked_duration_since(before)
            );
        },
    )
}

#[test]
fn under_with_host_the_host_keeps_the_newest_generation_across_reloads() {
    bounded("the newest generation kept", PATIENCE, || {
        let loads = Arc::new(AtomicUsize::new(0));
        let unloaded = Arc::new(Mutex::new(Vec::new()));
        let (counted, record) = (loads.clone(), unloaded.clone());
        let host = PluginHost::builder()
            .static_plugin("kept", move |reg| {
                let generation = counted.fetch_add(1, Ordering::SeqCst) + 1;
                let record = record.clone();
                reg.on_unload(move || record.lock().unwrap().push(generation));
                Ok(())
            })
            .unload(UnloadPolicy::WithHost)
            .build()
            .unwrap();
        drop(host.acquire().unwrap());
        assert!(host.is_loaded(), "the host keeps generation 1");
        drop(host.reload().unwrap());
        assert_eq!(
            *unloaded.lock().unwrap(),
            [1],
            "the host let generation 1 go for generation 2"
        );
        let lease = host.acquire().unwrap();
        assert_eq!(lease.generation(), 2);
        drop(host);
        assert_eq!(*unloaded.lock().unwrap(), [1], "a user lease keeps generation 2");
        drop(lease);
        assert_eq!(*unloaded.lock().unwrap(), [1, 2]);
    });
}
