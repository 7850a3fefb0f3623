//! `cold_cycle` and `load_scaling`: what a load and an unload of real C plugins cost, next
//! to raw `libloading` opens and closes of the same files.
//!
//! At start the bench compiles `tests/plugins/numbered.c` 128 times (each with its own plugin
//! and pass name) into a fresh directory under cargo's target tmp dir, with the system C
//! compiler as the tests do, and copies the first 16 and the first one into two more
//! directories: every library file is distinct, so the loader never shares a mapping
//! (`benches/common/plugins.rs`, shared with the interleaved harness).
//!
//! - `cold_cycle`: with no lease alive, `acquire()` on a host over the 16-plugin directory
//!   (discovery, `dlopen` with `RTLD_NOW | RTLD_LOCAL`, entry point, ABI check, registration
//!   of one pass each, after the trust and ELF checks) plus the drop of that last lease
//!   (unload: `dlclose` of all 16, then the pinned-library check); against `libloading`
//!   opening the same 16 files with the same flags and closing them in reverse order. glibc
//!   keeps nothing across a full close, so every side does real `dlopen`/`dlclose` work every
//!   iteration; the bench checks that with `RTLD_NOLOAD` before timing. Three diagnostic
//!   sides split the gap in the same run: `libloading_discover` adds to the raw cycle a
//!   directory scan making the same file-system calls as dylease's discovery;
//!   `libloading_discover_check` also does the trust and ELF checks' file work by hand (the
//!   walk from `/` through every ancestor directory included); `dylease_permissive` is a host
//!   without the trust check; and `dylease_shared` is a second host over the same directory
//!   while a first host holds a lease, so the registry hands it the live instances: the cycle
//!   without `dlopen` and `dlclose`, what the registry and the rest of the machinery cost.
//! - `load_scaling`: the same cycle over 1, 16 and 128 plugins, with criterion's throughput
//!   in plugins, so time per plugin can be read off; raw `libloading` alongside.
//!
//! Run with `cargo bench --bench load` for absolute times; the ratios the targets are stated in
//! come from the interleaved harness (`benches/compare.rs`, `scripts/bench.sh`).

use std::time::Duration;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

#[path = "../tests/support/cc.rs"]
mod cc;
#[path = "../tests/support/loader.rs"]
mod loader;
#[path = "common/plugins.rs"]
mod plugins;
use plugins::{PluginDirs, check_by_hand, check_full_close, discover_by_hand, host_cycle, raw_cycle};

/// The sizes `load_scaling` loads; `cold_cycle` uses the 16.
const SCALING_SIZES: [usize; 3] = [1, 16, 128];
const COLD_PLUGINS: usize = 16;

fn cold_cycle(c: &mut Criterion, fixtures: &PluginDirs) {
    let files = fixtures.files(COLD_PLUGINS);
    let host = fixtures.host(COLD_PLUGINS);
    check_full_close(&host, &files);

    let mut group = c.benchmark_group("cold_cycle");
    group.sample_size(50);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));
    group.bench_function("dylease", |b| b.iter(|| host_cycle(&host)));
    group.bench_function("libloading", |b| b.iter(|| raw_cycle(&files)));
    let dir = fixtures.dir(COLD_PLUGINS);
    assert_eq!(discover_by_hand(&dir).len(), files.len());
    group.bench_function("libloading_discover", |b| b.iter(|| raw_cycle(&discover_by_hand(&dir))));
    group.bench_function("libloading_discover_check", |b| {
        b.iter(|| {
            let files = discover_by_hand(&dir);
            check_by_hand(&files);
            raw_cycle(&files);
        })
    });
    let permissive = fixtures.permissive_host(COLD_PLUGINS);
    check_full_close(&permissive, &files);
    group.bench_function("dylease_permissive", |b| b.iter(|| host_cycle(&permissive)));

    // The registry's share path: the files stay loaded by `owner`'s lease, so each cycle of
    // `sharer` finds their instances alive (no `dlopen`, no `dlclose`, no `on_load`).
    let owner = fixtures.host(COLD_PLUGINS);
    let sharer = fixtures.host(COLD_PLUGINS);
    let held = owner.acquire().expect("the plugins load");
    let generation = sharer.generation();
    host_cycle(&sharer);
    assert_eq!(
        sharer.generation(),
        generation + 1,
        "the cycle did not load a new generation"
    );
    assert!(!sharer.is_loaded());
    group.bench_function("dylease_shared", |b| b.iter(|| host_cycle(&sharer)));
    drop(held);
    assert!(!owner.is_loaded());
    group.finish();
}

fn load_scaling(c: &mut Criterion, fixtures: &PluginDirs) {
    let mut group = c.benchmark_group("load_scaling");
    group.sample_size(20);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(4));
    for n in SCALING_SIZES {
        let files = fixtures.files(n);
        let host = fixtures.host(n);
        check_full_close(&host, &files);
        group.throughput(Throughput::Elements(n as u64));
        group.bench_with_input(BenchmarkId::new("dylease", n), &host, |b, host| {
            b.iter(|| host_cycle(host))
        });
        group.bench_with_input(BenchmarkId::new("libloading", n), &files, |b, files| {
            b.iter(|| raw_cycle(files))
        });
    }
    group.finish();
}

fn load_benches(c: &mut Criterion) {
    let fixtures = PluginDirs::build(&plugins::default_base(), "load", &SCALING_SIZES);
    cold_cycle(c, &fixtures);
    load_scaling(c, &fixtures);
}

criterion_group!(benches, load_benches);
criterion_main!(benches);
