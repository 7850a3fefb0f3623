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
//!   rename: fresh loads beside the draining old ones), against a cold load of the same 16.
//!
//! Run with `cargo bench --bench reload`; `scripts/bench.sh` summarises the ratios. The
//! plugins live under `CARGO_TARGET_TMPDIR`, or under `$DYLEASE_BENCH_DIR` when it is set (a
//! tmpfs such as `/dev/shm`, to take the file system's inode allocation out of the changed
//! case).

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use dylease::{Lease, PluginHost, UnloadPolicy};

#[path = "../tests/support/cc.rs"]
mod cc;

const PLUGINS: usize = 16;

/// 16 compiled plugins in a directory of their own (mode 0755, for the trust check), and a
/// second build of each (another inode, the same code) to install over them by rename.
struct Fixtures {
    root: PathBuf,
}

impl Fixtures {
    fn build() -> Fixtures {
        use std::os::unix::fs::PermissionsExt;
        let base = std::env::var_os("DYLEASE_BENCH_DIR")
            .map_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")), PathBuf::from);
        let root = base.join(format!("bench-reload-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let fixtures = Fixtures { root };
        for dir in [fixtures.plugins(), fixtures.spares()] {
            std::fs::create_dir_all(&dir).expect("create a bench directory");
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plugins/numbered.c");
        for i in 0..PLUGINS {
            let plugin = format!("-DPLUGIN_NAME=\"reload{i:02}\"");
            let pass = format!("-DPASS_NAME=\"reload{i:02}_pass\"");
            let out = fixtures.spares().join(Self::file_name(i));
            cc::compile_plugin(&[&source], &out, &[&plugin, &pass]).unwrap_or_else(|e| panic!("{e}"));
            std::fs::copy(&out, fixtures.plugins().join(Self::file_name(i))).unwrap();
        }
        fixtures
    }

    fn file_name(i: usize) -> String {
        format!("libreload{i:02}.so")
    }

    fn plugins(&self) -> PathBuf {
        self.root.join("plugins")
    }

    fn spares(&self) -> PathBuf {
        self.root.join("spares")
    }

    /// Installs a new file (a new inode, the same code) over every plugin, by rename.
    fn install_all(&self) {
        for i in 0..PLUGINS {
            let partial = self.plugins().join(format!(".partial{i}"));
            std::fs::copy(self.spares().join(Self::file_name(i)), &partial).unwrap();
            std::fs::rename(&partial, self.plugins().join(Self::file_name(i))).unwrap();
        }
    }

    fn host(&self, unload: UnloadPolicy) -> PluginHost {
        // SAFETY: the bench's own plugins, compiled from tests/plugins/numbered.c.
        unsafe { PluginHost::builder().dir(self.plugins()) }
            .unload(unload)
            .build()
            .unwrap()
    }
}

impl Drop for Fixtures {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// One pass call, as a single-op compile would make.
fn call(lease: &Lease) -> i32 {
    // SAFETY: numbered.c registers every pass as `int (*)(int)`.
    let pass = unsafe { lease.pass::<extern "C" fn(i32) -> i32>("reload00_pass") }.expect("registered");
    pass(black_box(1))
}

fn acquire_hot_during_reloads(c: &mut Criterion) {
    let host = Arc::new(
        PluginHost::builder()
            .static_plugin("builtin", |_reg: &mut dylease::Registrar| Ok(()))
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

fn single_op(c: &mut Criterion, fixtures: &Fixtures) {
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

fn reload_latency(c: &mut Criterion, fixtures: &Fixtures) {
    let mut group = c.benchmark_group("reload_latency");
    group.sample_size(20).measurement_time(Duration::from_secs(5));
    let host = fixtures.host(UnloadPolicy::Immediately);
    // Each iteration holds a lease of the current generation, as a session would, reloads,
    // and returns both leases: criterion drops them after the measurement, so the old
    // generation's drain is not timed.
    group.bench_function("unchanged_16", |b| {
        b.iter_batched(
            || host.acquire().unwrap(),
            |old| (old, host.reload().unwrap()),
            BatchSize::PerIteration,
        )
    });
    group.bench_function("changed_16", |b| {
        b.iter_batched(
            || {
                let old = host.acquire().unwrap();
                fixtures.install_all();
                old
            },
            |old| (old, host.reload().unwrap()),
            BatchSize::PerIteration,
        )
    });
    let cold = fixtures.host(UnloadPolicy::Immediately);
    group.bench_function("cold_16", |b| {
        b.iter_batched(|| (), |()| cold.acquire().unwrap(), BatchSize::PerIteration)
    });
    group.finish();
}

fn reload_benches(c: &mut Criterion) {
    acquire_hot_during_reloads(c);
    let fixtures = Fixtures::build();
    single_op(c, &fixtures);
    reload_latency(c, &fixtures);
}

criterion_group!(benches, reload_benches);
criterion_main!(benches);
