//! Many threads acquiring, cloning and dropping leases of real plugins: one set at a time,
//! every lease sees a fully loaded set, every load is matched by one unload, nothing mapped at
//! the end.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;
use std::time::Duration;

use dylease::PluginHost;

use crate::bounded::bounded;
use crate::support::{TestDir, assert_unloaded};

/// How long a test of this module may take before it fails instead of hanging (a deadlock,
/// a lost wake-up): far beyond its time on a loaded machine, under valgrind too.
const LIMIT: Duration = Duration::from_secs(900);

#[test]
fn eight_threads_share_one_set_at_a_time_and_leave_nothing_mapped() {
    bounded(
        "eight_threads_share_one_set_at_a_time_and_leave_nothing_mapped",
        LIMIT,
        eight_threads_share_one_set_at_a_time_and_leave_nothing_mapped_body,
    );
}

fn eight_threads_share_one_set_at_a_time_and_leave_nothing_mapped_body() {
    let dir = TestDir::new("threads");
    let lib = dir.add("arith", "libarith.so");
    let counted = dir.add("by_hand", "libcounted.so");
    let live = Arc::new(AtomicBool::new(false));
    let (loads, unloads) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let (l, u, live_r) = (loads.clone(), unloads.clone(), live.clone());
    // A static plugin after the library observes each generation's load and unload.
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe {
        PluginHost::builder()
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
    }
    .unwrap();
    let host = Arc::new(host);
    let threads = 8;
    let start = Arc::new(Barrier::new(threads));
    // Bounded by work, not time: enough rounds to churn through thousands of generations.
    let rounds = 3000u64;
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (host, start) = (host.clone(), start.clone());
            thread::spawn(move || {
                start.wait();
                let mut acquired = 0u64;
                let mut last_generation = 0;
                while acquired < rounds {
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

/// What `churn.c` counts, in memory this test owns; laid out as its `churn_counters`.
#[repr(C)]
#[derive(Default)]
struct ChurnCounters {
    loads: AtomicI32,
    unloads: AtomicI32,
    late_calls: AtomicI32,
    double_unloads: AtomicI32,
}

/// Rounds of the churn test: `DYLEASE_CHURN_ROUNDS`, or 1000. Every round loads at least one
/// generation. (`scripts/memcheck.sh` runs fewer under valgrind.)
fn churn_rounds() -> u64 {
    std::env::var("DYLEASE_CHURN_ROUNDS").map_or(1000, |n| n.parse().expect("DYLEASE_CHURN_ROUNDS is a number"))
}

#[test]
fn eight_threads_churning_their_only_leases_match_every_load_with_one_unload() {
    bounded(
        "eight_threads_churning_their_only_leases_match_every_load_with_one_unload",
        LIMIT,
        eight_threads_churning_their_only_leases_match_every_load_with_one_unload_body,
    );
}

fn eight_threads_churning_their_only_leases_match_every_load_with_one_unload_body() {
    let dir = TestDir::new("churn");
    let churn = dir.add("churn", "libchurn.so");
    let counted = dir.add("by_hand", "libcounted.so");
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(dir.path()).build() }.unwrap();
    let counters = ChurnCounters::default();
    let (threads, rounds) = (8, churn_rounds());
    let round_done = Barrier::new(threads);

    thread::scope(|scope| {
        for t in 0..threads {
            let (host, counters, round_done) = (&host, &counters, &round_done);
            scope.spawn(move || {
                for round in 0..rounds {
                    // One to three times per round, this thread acquires and drops its only
                    // lease while the others do the same: its acquire meets their loads,
                    // shared sets, and unloads still in progress.
                    for _ in 0..=(t as u64 + round) % 3 {
                        let lease = host.acquire().unwrap();
                        // SAFETY: churn.c registers `attach` as `void (*)(churn_counters *)`,
                        // `work` as `int (*)(int)`; by_hand.c `registrations` as
                        // `int (*)(void)`. All are called while `lease` lives.
                        let (attach, work, registrations) = unsafe {
                            (
                                lease.pass::<extern "C" fn(*const ChurnCounters)>("attach").unwrap(),
                                lease.pass::<extern "C" fn(i32) -> i32>("work").unwrap(),
                                lease.pass::<extern "C" fn() -> i32>("registrations").unwrap(),
                            )
                        };
                        attach(counters);
                        assert_eq!(work(t as i32), t as i32 + 1);
                        assert_eq!(registrations(), 1, "generation {} reused a mapping", lease.generation());
                        drop(lease);
                    }
                    // Every thread has dropped its lease, so the set unloaded before the last
                    // drop returned: the next round starts by loading a new generation.
                    round_done.wait();
                }
            });
        }
    });

    let generations = host.generation();
    assert!(generations >= rounds, "{generations} generations in {rounds} rounds");
    let stats = host.stats();
    assert_eq!((stats.loads, stats.unloads), (generations, generations));
    let count = |c: &AtomicI32| u64::try_from(c.load(Ordering::SeqCst)).unwrap();
    assert_eq!(count(&counters.loads), generations, "every generation a fresh mapping");
    assert_eq!(count(&counters.unloads), generations, "every load unloaded once");
    assert_eq!(count(&counters.double_unloads), 0);
    assert_eq!(count(&counters.late_calls), 0, "a pass ran after its library's unload");
    assert_eq!(stats.pinned_libraries, 0);
    assert!(!host.is_loaded());
    assert_unloaded(&churn);
    assert_unloaded(&counted);
    eprintln!("{generations} generations in {rounds} rounds of 8 threads");
}
