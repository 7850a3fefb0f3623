//! Many threads acquiring, cloning and dropping leases of real plugins: one set at a time,
//! every lease sees a fully loaded set, nothing mapped at the end.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use dylease::PluginHost;

use crate::support::{TestDir, assert_unloaded};

#[test]
fn eight_threads_share_one_set_at_a_time_and_leave_nothing_mapped() {
    let dir = TestDir::new("threads");
    let lib = dir.add("arith", "libarith.so");
    let counted = dir.add("by_hand", "libcounted.so");
    let live = Arc::new(AtomicBool::new(false));
    let (loads, unloads) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (l, u, live_r) = (loads.clone(), unloads.clone(), live.clone());
    // A static plugin after the library observes each generation's load and unload.
    let host = PluginHost::builder()
        .dir(dir.path())
        .static_plugin("observer", move |reg| {
            assert!(!live_r.swap(true, Ordering::SeqCst), "two sets were loaded at once");
            l.fetch_add(1, Ordering::SeqCst);
            let (live, u) = (live_r.clone(), u.clone());
            reg.on_unload(move || {
                // Linger while still marked live: a load that began before this unload
                // finished (a broken invariant I1) would find `live` set.
                thread::sleep(Duration::from_micros(50));
                assert!(live.swap(false, Ordering::SeqCst));
                u.fetch_add(1, Ordering::SeqCst);
            });
            Ok(())
        })
        .build()
        .unwrap();
    let host = Arc::new(host);
    let threads = 8;
    let start = Arc::new(Barrier::new(threads));
    let deadline = Duration::from_secs(3);
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (host, start) = (host.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                let began = Instant::now();
                let mut acquired = 0u64;
                let mut last_generation = 0;
                while began.elapsed() < deadline {
                    let lease = host.acquire().unwrap();
                    assert!(lease.generation() >= last_generation, "generations went backwards");
                    last_generation = lease.generation();
                    let copy = lease.clone();
                    // SAFETY: `double` is `int (*)(int)`; called while the lease lives.
                    let double = unsafe { copy.pass::<extern "C" fn(i32) -> i32>("double") }.unwrap();
                    assert_eq!(double(t as i32), 2 * t as i32);
                    // SAFETY: by_hand.c registers `registrations` as `int (*)(void)`.
                    let registrations = unsafe { copy.pass::<extern "C" fn() -> i32>("registrations") }.unwrap();
                    // A library reopened before its previous unload finished would be the old
                    // mapping, registered twice.
                    assert_eq!(registrations(), 1, "generation {} reused a mapping", copy.generation());
                    drop(lease);
                    drop(copy);
                    // Pause now and then with no lease held, so that at times every thread
                    // is idle and the set unloads: the test churns through generations.
                    if acquired.is_multiple_of(64) {
                        thread::sleep(Duration::from_micros(200 + 50 * t as u64));
                    }
                    acquired += 1;
                }
                acquired
            })
        })
        .collect();
    let total: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();

    assert!(total > 0);
    assert!(!host.is_loaded());
    let generations = host.generation();
    assert_eq!(loads.load(Ordering::SeqCst), generations);
    assert_eq!(
        unloads.load(Ordering::SeqCst),
        generations,
        "every load is matched by one unload"
    );
    assert!(
        generations > 10,
        "only {generations} generations: the test did not churn"
    );
    assert_unloaded(&lib);
    assert_unloaded(&counted);
    eprintln!("{total} leases over {generations} generations");
}
