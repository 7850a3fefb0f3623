//! `pass_lookup`: `Lease::pass` and the typed `Lease::get` (lookup plus interface check) by
//! name with 10, 100 and 1,000 registered passes, against a
//! plain `HashMap<String, F>` lookup and a linear scan of a `Vec<(String, F)>` (the shape of
//! the upstream registry). Every lookup asks for the pass in the middle of registration
//! order, with the name behind `black_box`.
//!
//! Before timing, the bench checks with a counting global allocator that a lookup through
//! the lease allocates nothing, at every size, nor does iterating `Lease::passes_of`.
//!
//! Run with `cargo bench --bench pass_lookup`.

use std::collections::HashMap;
use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use dylease::{Interface, PluginHost, Registrar};

mod common;

#[global_allocator]
static ALLOC: common::CountingAlloc = common::CountingAlloc;

/// The pass signature every generated pass is registered with.
type PassFn = extern "C" fn(i32) -> i32;

extern "C" fn identity(x: i32) -> i32 {
    x
}

/// The interface the typed host's passes are registered under.
struct IntOp;
// SAFETY: every pass this bench registers under "bench.int_op/1" is a `PassFn`.
unsafe impl Interface for IntOp {
    const ID: &'static str = "bench.int_op/1";
    type Fn = unsafe extern "C" fn(i32) -> i32;
}

const SIZES: [usize; 3] = [10, 100, 1_000];

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("pass_{i:04}")).collect()
}

/// A host whose one static plugin registers the passes `names`.
fn host(names: Vec<String>) -> PluginHost {
    PluginHost::builder()
        .static_plugin("passes", move |reg| {
            names
                .iter()
                .try_for_each(|name| reg.add_pass(name, identity as PassFn, std::ptr::null_mut()))
        })
        .build()
        .expect("a host over one static plugin builds")
}

/// A host whose one static plugin registers the passes `names` as typed `IntOp` passes.
fn typed_host(names: Vec<String>) -> PluginHost {
    PluginHost::builder()
        .static_plugin("passes", move |reg| {
            names
                .iter()
                .try_for_each(|name| reg.add_typed_pass::<IntOp>(name, identity, std::ptr::null_mut()))
        })
        .build()
        .expect("a host over one static plugin builds")
}

fn pass_lookup(c: &mut Criterion) {
    let mut group = c.benchmark_group("pass_lookup");
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(2));

    for n in SIZES {
        let names = names(n);
        let wanted = names[n / 2].clone();
        let host = host(names.clone());
        let lease = host.acquire().expect("the static plugin loads");
        assert_eq!(lease.passes().len(), n);
        let map: HashMap<String, PassFn> = names.iter().map(|name| (name.clone(), identity as PassFn)).collect();
        let vec: Vec<(String, PassFn)> = names.iter().map(|name| (name.clone(), identity as PassFn)).collect();

        // SAFETY: (every `pass` call below) each pass was registered as `PassFn`, and the
        // returned pointer is never used after `lease` drops (it is not even called).
        let found = unsafe { lease.pass::<PassFn>(&wanted) }.expect("registered");
        assert_eq!(found.name(), wanted);
        common::assert_no_allocation(&format!("pass_lookup: Lease::pass with {n} passes"), 100_000, || {
            let name = black_box(&wanted);
            // SAFETY: as above.
            let _ = black_box(unsafe { lease.pass::<PassFn>(name) });
        });

        group.bench_with_input(BenchmarkId::new("dylease", n), &wanted, |b, wanted| {
            // SAFETY: as above.
            b.iter(|| black_box(unsafe { lease.pass::<PassFn>(black_box(wanted.as_str())) }).is_ok())
        });
        let typed = typed_host(names.clone());
        let typed_lease = typed.acquire().expect("the static plugin loads");
        assert_eq!(typed_lease.get::<IntOp>(&wanted).expect("registered").name(), wanted);
        common::assert_no_allocation(&format!("pass_lookup: Lease::get with {n} passes"), 100_000, || {
            black_box(typed_lease.get::<IntOp>(black_box(&wanted)).is_ok());
        });
        assert_eq!(typed_lease.passes_of::<IntOp>().unwrap().count(), n);
        common::assert_no_allocation(&format!("pass_lookup: Lease::passes_of with {n} passes"), 100, || {
            black_box(
                typed_lease
                    .passes_of::<IntOp>()
                    .unwrap()
                    .map(|p| black_box(p.name()).len())
                    .sum::<usize>(),
            );
        });
        group.bench_with_input(BenchmarkId::new("dylease_get", n), &wanted, |b, wanted| {
            b.iter(|| black_box(typed_lease.get::<IntOp>(black_box(wanted.as_str()))).is_ok())
        });

        group.bench_with_input(BenchmarkId::new("hashmap", n), &wanted, |b, wanted| {
            b.iter(|| black_box(map.get(black_box(wanted.as_str())).copied()).is_some())
        });
        group.bench_with_input(BenchmarkId::new("vec_scan", n), &wanted, |b, wanted| {
            b.iter(|| {
                let wanted = black_box(wanted.as_str());
                black_box(vec.iter().find(|(name, _)| name == wanted).map(|&(_, f)| f)).is_some()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, pass_lookup);
criterion_main!(benches);
