//! `acquire_hot`, `acquire_hosts` and `lease_clone`: what a lease costs once its set is
//! loaded, next to the designs a user would otherwise pick.
//!
//! - `acquire_hot`: a lease is held elsewhere, so `PluginHost::acquire` takes its fast path
//!   (this thread's cache of `(generation, Weak)`); each iteration is one acquire plus the
//!   drop of the lease it returned. Baselines, all over the same kind of shared value:
//!   - `arc_clone`: `Arc::clone` plus drop, the floor (one atomic increment, one decrement);
//!   - `arcswap_weak`: `ArcSwapWeak::load` then `Weak::upgrade` (then drop the `Arc`): the
//!     host's slot without the cache in front, i.e. what the cache saves;
//!   - `mutex_weak`: lock a `Mutex<Weak<T>>`, upgrade, unlock (then drop the `Arc`);
//!   - `rwlock_weak`: read-lock an `RwLock<Weak<T>>`, upgrade (then drop the `Arc`);
//!   - `counter_ge`: the upstream graph compiler's shape, an atomic user count incremented on
//!     acquire and decremented on release, with a mutex taken only at 0 ↔ 1 (load, unload);
//!   - `counter_locked`: a stricter counter that is *not* the upstream shape, a user count
//!     under a mutex taken on acquire and on release, with the set in an `Arc`.
//!
//!   Each runs `uncontended` (one thread) and with `2_threads` doing the same operation on the
//!   same host or baseline at once. For `2_threads` the reported time is per operation per
//!   thread: the wall time from the moment both threads start their loops until the last
//!   one finishes, divided by the iterations each thread ran.
//! - `acquire_hosts`: 1, 4, 5, 8 and 9 hosts, each with a lease held elsewhere, acquired in
//!   turn (one acquire plus drop per iteration, the next host each time); `arc_clone` does the
//!   same over as many `Arc`s. The thread cache has 8 entries: up to 8 hosts should cost what 1
//!   does, and 9 show what happens past the cache (every acquire misses and takes the slot
//!   path).
//! - `lease_clone`: `Lease::clone` plus drop against `Arc::clone` plus drop.
//!
//! Before timing, the bench checks that the fast path really is taken (same set, no new
//! generation) and that acquire (1, 4, 5, 8 and 9 hosts in turn) and clone allocate nothing.
//!
//! Run with `cargo bench --bench lease` for absolute times. The ratios the targets are stated
//! in come from the interleaved harness (`benches/compare.rs`, `scripts/bench.sh`), where the
//! arms alternate in rounds; here each arm is its own criterion block.

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

use arc_swap::ArcSwapWeak;
use std::thread;
use std::time::{Duration, Instant};

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, criterion_group, criterion_main};
use dylease::{Lease, PluginHost};

#[path = "common/baselines.rs"]
mod baselines;
mod common;
use baselines::{GeCounter, LockedCounter, Payload, host, in_turn, payload};

#[global_allocator]
static ALLOC: common::CountingAlloc = common::CountingAlloc;

/// How many threads hammer the same host in the contended runs.
const THREADS: usize = 2;

/// Runs `op` `iters` times on each of [`THREADS`] threads at once, and returns the wall time
/// from the first thread's start to the last thread's end. Criterion divides it by `iters`:
/// the time one operation takes on one thread while the others do the same. Spawning, the
/// start rendezvous and joining are outside the timed span.
fn contended<S: Sync, F: Fn(&S) + Sync>(state: &S, iters: u64, op: &F) -> Duration {
    let arrived = AtomicUsize::new(0);
    let spans: Vec<(Instant, Instant)> = thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                scope.spawn(|| {
                    arrived.fetch_add(1, Ordering::AcqRel);
                    while arrived.load(Ordering::Acquire) < THREADS {
                        thread::yield_now();
                    }
                    let start = Instant::now();
                    for _ in 0..iters {
                        op(state);
                    }
                    (start, Instant::now())
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("a bench thread panicked"))
            .collect()
    });
    let start = spans.iter().map(|span| span.0).min().expect("threads ran");
    let end = spans.iter().map(|span| span.1).max().expect("threads ran");
    end - start
}

/// Benchmarks `op` on `state` uncontended and with [`THREADS`] threads.
fn both_ways<S: Sync, F: Fn(&S) + Sync>(group: &mut BenchmarkGroup<'_, WallTime>, name: &str, state: &S, op: F) {
    group.bench_function(BenchmarkId::new(name, "uncontended"), |b| b.iter(|| op(state)));
    group.bench_function(BenchmarkId::new(name, format!("{THREADS}_threads")), |b| {
        b.iter_custom(|iters| contended(state, iters, &op))
    });
}

fn acquire_hot(c: &mut Criterion) {
    let host = host();
    let held = host.acquire().expect("the static plugin loads");
    // The fast path is what is measured: the same set comes back, nothing loads again.
    let again = host.acquire().expect("fast path");
    assert!(Lease::ptr_eq(&held, &again), "acquire returned another set");
    drop(again);
    common::assert_no_allocation("acquire_hot: dylease acquire+drop (fast path)", 100_000, || {
        drop(black_box(host.acquire()));
    });

    let arc = payload();
    let arcswap_weak = ArcSwapWeak::new(Arc::downgrade(&arc));
    let mutex_weak = Mutex::new(Arc::downgrade(&arc));
    let rwlock_weak = RwLock::new(Arc::downgrade(&arc));
    let counter_ge = GeCounter::new();
    let counter_locked = LockedCounter::new();
    // A user holds each counter's set too, as `held` does for the host.
    let (ge_held, locked_held) = (counter_ge.acquire(), counter_locked.acquire());

    let mut group = c.benchmark_group("acquire_hot");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));

    both_ways(&mut group, "dylease", &host, |host: &PluginHost| {
        drop(black_box(host.acquire()));
    });
    both_ways(&mut group, "arc_clone", &arc, |arc: &Arc<Payload>| {
        drop(black_box(Arc::clone(arc)));
    });
    both_ways(
        &mut group,
        "arcswap_weak",
        &arcswap_weak,
        |slot: &ArcSwapWeak<Payload>| {
            let set = slot.load().upgrade();
            drop(black_box(set));
        },
    );
    both_ways(&mut group, "mutex_weak", &mutex_weak, |slot: &Mutex<Weak<Payload>>| {
        let set = slot.lock().expect("not poisoned").upgrade();
        drop(black_box(set));
    });
    both_ways(
        &mut group,
        "rwlock_weak",
        &rwlock_weak,
        |slot: &RwLock<Weak<Payload>>| {
            let set = slot.read().expect("not poisoned").upgrade();
            drop(black_box(set));
        },
    );
    both_ways(&mut group, "counter_ge", &counter_ge, |counter: &GeCounter| {
        drop(black_box(counter.acquire()));
    });
    both_ways(
        &mut group,
        "counter_locked",
        &counter_locked,
        |counter: &LockedCounter| {
            drop(black_box(counter.acquire()));
        },
    );
    group.finish();

    assert_eq!(host.generation(), 1, "the hot path reloaded the set");
    drop((ge_held, locked_held));
    drop(held);
    assert!(!host.is_loaded());
}

/// How many hosts `acquire_hosts` uses in turn: one, the first edition's cache size and one
/// more, the thread cache's size (8) and one more.
const HOST_COUNTS: [usize; 5] = [1, 4, 5, 8, 9];

fn acquire_hosts(c: &mut Criterion) {
    let mut group = c.benchmark_group("acquire_hosts");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    for n in HOST_COUNTS {
        let hosts: Vec<PluginHost> = (0..n).map(|_| host()).collect();
        let held: Vec<Lease> = hosts
            .iter()
            .map(|host| host.acquire().expect("the static plugin loads"))
            .collect();
        // A first round fills this thread's cache (and arc-swap's per-thread state).
        let mut round = in_turn(&hosts, |host: &PluginHost| drop(black_box(host.acquire())));
        for _ in 0..2 * n {
            round();
        }
        common::assert_no_allocation(
            &format!("acquire_hosts: dylease acquire+drop, {n} hosts in turn"),
            100_000,
            &mut round,
        );
        group.bench_function(BenchmarkId::new("dylease", n), |b| b.iter(&mut round));
        drop(round);
        for (host, lease) in hosts.iter().zip(&held) {
            assert_eq!(host.generation(), 1, "the hot path reloaded a set");
            assert!(Lease::ptr_eq(lease, &host.acquire().expect("fast path")));
        }

        let arcs: Vec<Arc<Payload>> = (0..n).map(|_| payload()).collect();
        let mut round = in_turn(&arcs, |arc: &Arc<Payload>| drop(black_box(Arc::clone(arc))));
        group.bench_function(BenchmarkId::new("arc_clone", n), |b| b.iter(&mut round));
    }
    group.finish();
}

fn lease_clone(c: &mut Criterion) {
    // `size_of::<Lease>() == size_of::<usize>()` is a const assert in the crate itself
    // (`assert_eq_size!(Lease, usize)` in src/lib.rs); repeated here so the bench says so.
    const { assert!(size_of::<Lease>() == size_of::<usize>()) };

    let host = host();
    let lease = host.acquire().expect("the static plugin loads");
    let arc = payload();
    common::assert_no_allocation("lease_clone: Lease::clone+drop", 100_000, || {
        drop(black_box(lease.clone()));
    });

    let mut group = c.benchmark_group("lease_clone");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(3));
    group.bench_function("dylease", |b| b.iter(|| drop(black_box(black_box(&lease).clone()))));
    group.bench_function("arc_clone", |b| b.iter(|| drop(black_box(Arc::clone(black_box(&arc))))));
    group.finish();
}

criterion_group!(benches, acquire_hot, acquire_hosts, lease_clone);
criterion_main!(benches);
