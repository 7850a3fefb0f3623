//! Reload and unload policies (issue "Reload with draining, and unload policies"):
//!
//! - `acquire_hot_during_reloads`: a hot `acquire()` + drop (a lease alive elsewhere) while
//!   another thread reloads the host over and over, against the same without reloads, in the
//!   same run: the fast path must not wait for a reload.
//! - `single_op`: one acquire + pass call + drop with no other lease alive, over 16 C plugins:
//!   `UnloadPolicy::Immediately` (loads and unloads all 16 each time), `After(1 s)` (the host
//!   keeps the set), and the hot path (a session lease alive) as the floor.
//! - `reload_latency`: `reload()` until the first lease of the new generation, for 16
//!   plugins: unchanged files (the instances are shared), every file changed (installed by
//!   rename: fresh loads beside the draining old ones, the old generation's drain included),
//!   against a cold load and unload of the same 16.
//!
//! Run with `cargo bench --bench reload` for absolute times; the changed-reload ratio on tmpfs
//! and on the target directory comes from the interleaved harness (`benches/compare.rs`,
//! `scripts/bench.sh`). The
//! plugins live under `CARGO_TARGET_TMPDIR`, or under `$DYLEASE_BENCH_DIR` when it is set (a
//! tmpfs such as `/dev/shm`, to take the file system's inode allocation out of the changed
//! case).

use std::hint::black_box;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use dylease::{Lease, PluginHost, UnloadPolicy};

#[path = "../tests/support/cc.rs"]
mod cc;
#[path = "../tests/support/loader.rs"]
mod loader;
#[path = "common/plugins.rs"]
mod plugins;
use plugins::{PluginDirs, ReloadDir};

const PLUGINS: usize = 16;

/// One pass call, as a single-op compile would make.
fn call(lease: &Lease) -> i32 {
    // SAFETY: numbered.c registers every pass as `int (*)(int)`.
    let pass = unsafe { lease.pass::<extern "C" fn(i32) -> i32>("bench000_pass") }.expect("registered");
    pass(black_box(1))
}

fn acquire_hot_during_reloads(c: &mut Criterion) {
    let host = Arc::new(
        PluginHost::builder()
            .static_plugin("builtin", |_reg| Ok(()))
            .build()
            .unwrap(),
    );
    let mut group = c.benchmark_group("acquire_hot_during_reloads");
    let session = host.acquire().unwrap();
    group.bench_function("between_reloads", |b| {
        b.iter(|| drop(black_box(host.acquire().unwrap())))
    });
    let stop = Arc::new(AtomicBool::new(false));
    let reloader = {
        let (host, stop) = (host.clone(), stop.clone());
        std::thread::spawn(move || {
            // A reload every 100 µs: far more often than any program reloads plugins, but with
            // room between reloads for the fast path to be the fast path.
            // It holds each new generation until the next reload, as a session that reloads
            // would: the generation `acquire()` returns is alive throughout, and the older one
            // drains when it is replaced.
            let mut reloads = 0u64;
            let mut current = host.reload().unwrap();
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_micros(100));
                current = host.reload().unwrap();
                reloads += 1;
            }
            drop(current);
            reloads
        })
    };
    group.bench_function("while_reloading", |b| {
        b.iter(|| drop(black_box(host.acquire().unwrap())))
    });
    stop.store(true, Ordering::Relaxed);
    let reloads = reloader.join().unwrap();
    // Every generation came from a reload (the first one, then `reloads` more): no timed
    // acquire loaded one of its own.
    assert_eq!(
        host.generation(),
        2 + reloads,
        "an acquire loaded a generation of its own"
    );
    eprintln!("acquire_hot_during_reloads: {reloads} reloads ran meanwhile");
    drop(session);
    group.finish();
}

fn single_op(c: &mut Criterion, fixtures: &ReloadDir) {
    let mut group = c.benchmark_group("single_op");
    group.sample_size(20).measurement_time(Duration::from_secs(5));
    let immediately = fixtures.host(UnloadPolicy::Immediately);
    group.bench_function("immediately", |b| {
        b.iter(|| {
            let lease = immediately.acquire().unwrap();
            black_box(call(&lease));
        })
    });
    drop(immediately);
    let after = fixtures.host(UnloadPolicy::After(Duration::from_secs(1)));
    group.bench_function("after_1s", |b| {
        b.iter(|| {
            let lease = after.acquire().unwrap();
            black_box(call(&lease));
        })
    });
    drop(after);
    let hot = fixtures.host(UnloadPolicy::Immediately);
    let session = hot.acquire().unwrap();
    group.bench_function("hot", |b| {
        b.iter(|| {
            let lease = hot.acquire().unwrap();
            black_box(call(&lease));
        })
    });
    drop(session);
    group.finish();
}

fn reload_latency(c: &mut Criterion, fixtures: &ReloadDir) {
    let mut group = c.benchmark_group("reload_latency");
    group.sample_size(20).measurement_time(Duration::from_secs(5));
    let host = fixtures.host(UnloadPolicy::Immediately);
    // Each iteration holds a lease of the current generation, as a session would, and
    // reloads. The unchanged case returns both leases, so the old generation's drop is not
    // timed (the instances are shared: nothing drains); the changed case drops the old
    // generation's lease inside the timing, so its drain (16 unloads) is timed, as the cold
    // load's unload is.
    group.bench_function("unchanged_16", |b| {
        b.iter_batched(
            || host.acquire().unwrap(),
            |old| (old, host.reload().unwrap()),
            BatchSize::PerIteration,
        )
    });
    let mut current = host.acquire().unwrap();
    group.bench_function("changed_16", |b| {
        b.iter_custom(|iters| {
            (0..iters)
                .map(|_| {
                    let (reload, drain) = fixtures.changed_reload(&host, &mut current);
                    reload + drain
                })
                .sum()
        })
    });
    drop(current);
    let cold = fixtures.host(UnloadPolicy::Immediately);
    group.bench_function("cold_16", |b| b.iter(|| plugins::host_cycle(&cold)));
    group.finish();
}

fn reload_benches(c: &mut Criterion) {
    acquire_hot_during_reloads(c);
    let base = std::env::var_os("DYLEASE_BENCH_DIR").map_or_else(plugins::default_base, Into::into);
    let compiled = PluginDirs::build(&base, "reload-compiled", &[PLUGINS]);
    let fixtures = ReloadDir::new(&base, "reload", &compiled.files(PLUGINS));
    single_op(c, &fixtures);
    reload_latency(c, &fixtures);
}

criterion_group!(benches, reload_benches);
criterion_main!(benches);
