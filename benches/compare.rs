//! The interleaved comparisons: every claim of BENCHMARKS.md is a ratio between dylease and a
//! baseline whose arms alternate in rounds inside this one process
//! (`benches/common/interleave.rs`), reported per round as min / median / max. Criterion's
//! benches (`lease`, `pass_lookup`, `load`, `reload`) stay for absolute times; the verdicts
//! come from here, through `scripts/bench.sh`, which turns the lines this prints into tables.
//!
//! Groups (each a set of arms run in the same rounds):
//! - `acquire_hot`, 1 thread: `PluginHost::acquire` + drop with a lease held elsewhere (the
//!   cached fast path) against `Arc::clone` + drop (the floor), `Lease::clone`,
//!   `ArcSwapWeak::load` + `Weak::upgrade` (the slot without the cache), the graph compiler's
//!   counter (an atomic count, a mutex only at 0 ↔ 1) and the lock-both-ways counter.
//! - `acquire_hot`, 2 threads: the same arms on two threads at once, on the same host or
//!   baseline; a round counts only if the two threads really overlapped (each thread's CPU
//!   time at least 90% of the round's wall time); rounds that did not are dropped and counted.
//! - `acquire_hosts`: 1 to 64 hosts, each with a lease held elsewhere, acquired in turn,
//!   against one host and against as many `Arc`s cloned in turn.
//! - `cold_cycle`: load and unload of 16 unchanged C plugins, every check on (their parses
//!   from the parse cache after the first cycle), against raw `libloading` `dlopen`
//!   (`RTLD_NOW | RTLD_LOCAL`) + `dlsym` of the entry point + `dlclose` of the same files;
//!   beside them a permissive host (no trust check), the strict host with the parse cache off
//!   (every file parsed at every load), the first-ever load (a new file over every plugin
//!   before each cycle, not timed, so that the cache has none of them) and raw loading with
//!   discovery and the checks' file work done by hand.
//! - `load_scaling`: the same cycle over 16, 64 and 256 plugins; dylease's extra µs per plugin
//!   over raw loading, per size and per round, and its ratio between sizes.
//! - `manifest`: the cold cycle of 16 plugins whose manifests the host reads (and gates and
//!   compares) against the same 16 with their manifest notes removed (`objcopy`); and
//!   `PluginHost::catalog` of 256 plugins (trust, ELF check, manifest and pin prediction, no
//!   plugin code run) against loading and unloading the same 256 eagerly.
//! - `on_demand`: a single-operator compile in a process whose directory holds 256 plugins:
//!   `acquire()` + the lookup and call of one pass + the drop of the lease, on an on-demand
//!   host (`HostBuilder::on_demand`: the 256 files judged, one mapped) against an eager host
//!   (all 256 mapped) and raw `dlopen` + `dlsym` + `dlclose` of the one library; beside them
//!   the on-demand host without the trust check.
//! - `signed`: 16 signed plugins under `HostBuilder::require_signed` against the same 16
//!   unsigned under the default host: their first-ever load (a new file over every plugin
//!   before each cycle, not timed, and, for the signed ones, signed with a new serial, so that
//!   neither the parse cache nor the memo of signature checks knows them) and their repeated
//!   cold cycle; and the verification of a signed 1 MiB library from the page cache
//!   (`Keyring::verify_file`, its signature check remembered) against `sha2`'s SHA-256 of the
//!   same bytes in memory (`cargo bench -p dylease-sign --bench digest` has the absolute
//!   throughputs).
//! - `isolated`: calls of a message pass in an isolated set (`HostBuilder::isolated`): a small
//!   message (8 bytes each way) against a raw ping-pong of the same bytes with a forked child
//!   over a `SOCK_SEQPACKET` socket pair (the floor of any round trip between processes) and
//!   against the same pass called in an ordinary set; 1 MiB in (through a sealed shared
//!   region) with a short answer, and 1 MiB each way, against a `memcpy` of 1 MiB.
//! - `isolated_cold`: `acquire()` of an isolated set of 16 plugins (the worker's start, the
//!   16 mapped in it), one call, and the drop of the last lease (the worker's unload and
//!   reap) against the same cycle of an eager set in the process plus a bare `posix_spawn` +
//!   `waitpid` of `/bin/true`.
//! - `isolated_threads`: small calls from 1, 2 and 4 threads at once on one lease of an
//!   isolated set: calls per second.
//! - `reload`: a changed reload of 16 plugins (every file replaced by rename, not timed; then
//!   `reload()` and the drop of the old generation's last lease, its drain) against a cold
//!   load and unload of 16, on a tmpfs (`$DYLEASE_BENCH_DIR`, else `/dev/shm`) and on the
//!   target directory's file system.
//!
//! Before timing, it checks what it claims to measure: 0 allocations on the hot paths, the
//! fast path returning the held set, every cold cycle leaving every file out of the process
//! (`RTLD_NOLOAD`), a changed reload's old generation fully unmapped after its drain; after
//! timing, that no generation moved during the hot loops.
//!
//! Output: one JSON object per line on stdout per reported quantity, then one `"done"` line;
//! human-readable progress on stderr.
//!
//! ```text
//! cargo bench --bench compare -- [--rounds N] [--scale F] [--quick] [--only GROUP,...]
//!                                [--max-plugins N]
//! ```
//!
//! `--rounds` (default 31) is the number of timed rounds of every group (twice as many for the
//! two-thread one, whose rounds are cheap and often dropped); `--scale` (default 1)
//! multiplies every arm's iterations per round; `--quick` is `--rounds 5 --scale 0.1`;
//! `--only` runs the named groups; `--max-plugins` (default 256) is the largest
//! `load_scaling` size.

use std::hint::black_box;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapWeak;
use dylease::{Lease, PluginHost};
use serde_json::json;

#[path = "common/baselines.rs"]
mod baselines;
#[path = "../tests/support/cc.rs"]
mod cc;
mod common;
#[path = "common/interleave.rs"]
mod interleave;
#[path = "common/isolated.rs"]
mod isolated;
#[path = "../tests/support/loader.rs"]
mod loader;
#[path = "common/plugins.rs"]
mod plugins;

use baselines::{GeCounter, LockedCounter, Payload, host, in_turn, payload};
use interleave::{Arm, Rounds, Summary, two_threads};
use plugins::{
    PluginDirs, ReloadDir, check_by_hand, check_full_close, descriptor_cycle, discover_by_hand, host_cycle, raw_cycle,
};

#[global_allocator]
static ALLOC: common::CountingAlloc = common::CountingAlloc;

const GROUPS: [&str; 13] = [
    "acquire_hot",
    "acquire_hot_2_threads",
    "acquire_hosts",
    "cold_cycle",
    "cold_dependencies",
    "isolated",
    "isolated_cold",
    "isolated_threads",
    "load_scaling",
    "manifest",
    "on_demand",
    "reload",
    "signed",
];

/// The command line, after cargo's own `--bench`.
#[derive(Debug)]
struct Options {
    rounds: usize,
    scale: f64,
    only: Vec<String>,
    max_plugins: usize,
}

impl Options {
    fn parse() -> Result<Options, String> {
        let mut options = Options {
            rounds: 31,
            scale: 1.0,
            only: Vec::new(),
            max_plugins: 256,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
            match arg.as_str() {
                "--bench" => {}
                "--rounds" => options.rounds = number(&value("--rounds")?, "--rounds")?,
                "--scale" => options.scale = number(&value("--scale")?, "--scale")?,
                "--max-plugins" => options.max_plugins = number(&value("--max-plugins")?, "--max-plugins")?,
                "--quick" => (options.rounds, options.scale) = (5, 0.1),
                "--only" => {
                    for group in value("--only")?.split(',') {
                        if !GROUPS.contains(&group) {
                            return Err(format!("unknown group {group:?}; the groups are {GROUPS:?}"));
                        }
                        options.only.push(group.to_owned());
                    }
                }
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        if options.rounds == 0 || options.scale <= 0.0 || options.max_plugins < 16 {
            return Err("--rounds must be at least 1, --scale above 0, --max-plugins at least 16".into());
        }
        Ok(options)
    }

    fn runs(&self, group: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|g| g == group)
    }

    /// `base` iterations scaled by `--scale`, at least one.
    fn iters(&self, base: u64) -> u64 {
        ((base as f64 * self.scale).round() as u64).max(1)
    }
}

fn number<T: std::str::FromStr>(text: &str, name: &str) -> Result<T, String> {
    text.parse().map_err(|_| format!("{name}: not a number: {text:?}"))
}

/// Prints one reported quantity: a JSON line on stdout, a readable line on stderr.
fn emit(group: &str, threads: usize, quantity: &str, unit: &str, summary: &Summary, times: &[(&str, Option<f64>)]) {
    let times_ns: serde_json::Map<String, serde_json::Value> =
        times.iter().map(|(arm, ns)| ((*arm).to_owned(), json!(ns))).collect();
    let line = json!({
        "group": group,
        "threads": threads,
        "quantity": quantity,
        "unit": unit,
        "kept": summary.kept,
        "dropped": summary.dropped,
        "min": summary.min(),
        "median": summary.median(),
        "max": summary.max(),
        "times_ns": times_ns,
    });
    println!("{line}");
    let show = |v: Option<f64>| v.map_or_else(|| "n/a".to_owned(), |v| format!("{v:.3}"));
    eprintln!(
        "  {group} ({threads} thread{}) {quantity}: median {} {unit} [min {}, max {}], {} rounds kept, {} dropped",
        if threads == 1 { "" } else { "s" },
        show(summary.median()),
        show(summary.min()),
        show(summary.max()),
        summary.kept,
        summary.dropped,
    );
}

/// Reports `arm ÷ baseline` per round.
fn emit_ratio(group: &str, threads: usize, rounds: &Rounds, arm: &str, baseline: &str) {
    emit(
        group,
        threads,
        &format!("{arm} ÷ {baseline}"),
        "×",
        &rounds.ratio(arm, baseline),
        &[(arm, rounds.median_ns(arm)), (baseline, rounds.median_ns(baseline))],
    );
}

/// The hot-path designs, each over a set held elsewhere, as `acquire_hot` compares them.
struct HotArms {
    host: PluginHost,
    held: Lease,
    arc: Arc<Payload>,
    arcswap_weak: ArcSwapWeak<Payload>,
    counter_ge: GeCounter,
    counter_locked: LockedCounter,
}

impl HotArms {
    fn new() -> HotArms {
        let host = host();
        let held = host.acquire().expect("the static plugin loads");
        let again = host.acquire().expect("fast path");
        assert!(Lease::ptr_eq(&held, &again), "acquire returned another set");
        let arc = payload();
        let arcswap_weak = ArcSwapWeak::new(Arc::downgrade(&arc));
        HotArms {
            host,
            held,
            arc,
            arcswap_weak,
            counter_ge: GeCounter::new(),
            counter_locked: LockedCounter::new(),
        }
    }

    fn dylease(host: &PluginHost) {
        drop(black_box(host.acquire()));
    }

    fn arc_clone(arc: &Arc<Payload>) {
        drop(black_box(Arc::clone(arc)));
    }

    fn arcswap_weak(slot: &ArcSwapWeak<Payload>) {
        let set: Option<Arc<Payload>> = Weak::upgrade(&slot.load());
        drop(black_box(set));
    }

    fn counter_ge(counter: &GeCounter) {
        drop(black_box(counter.acquire()));
    }

    fn counter_locked(counter: &LockedCounter) {
        drop(black_box(counter.acquire()));
    }

    /// The arms on this thread (`threads == 1`) or on two threads at once.
    fn arms(&self, threads: usize, iters: u64) -> Vec<Arm<'_>> {
        fn arm<'a, S: Sync>(name: &str, threads: usize, iters: u64, state: &'a S, op: fn(&S)) -> Arm<'a> {
            if threads == 1 {
                Arm::looped(name, iters, move || op(black_box(state)))
            } else {
                Arm::new(name, iters, move |iters| two_threads(state, iters, &op))
            }
        }
        let mut arms = vec![
            arm("dylease", threads, iters, &self.host, Self::dylease),
            arm("arc_clone", threads, iters, &self.arc, Self::arc_clone),
            arm("arcswap_weak", threads, iters, &self.arcswap_weak, Self::arcswap_weak),
            arm("counter_ge", threads, iters, &self.counter_ge, Self::counter_ge),
            arm(
                "counter_locked",
                threads,
                iters,
                &self.counter_locked,
                Self::counter_locked,
            ),
        ];
        if threads == 1 {
            let lease = &self.held;
            arms.push(Arm::looped("lease_clone", iters, move || {
                drop(black_box(black_box(lease).clone()))
            }));
        }
        arms
    }
}

fn acquire_hot(options: &Options, threads: usize) {
    let hot = HotArms::new();
    if threads == 1 {
        common::assert_no_allocation("acquire_hot: dylease acquire+drop (fast path)", 100_000, || {
            HotArms::dylease(&hot.host)
        });
        common::assert_no_allocation("lease_clone: Lease::clone+drop", 100_000, || {
            drop(black_box(hot.held.clone()))
        });
    }
    // A user holds each counter's set, as `held` does for the host.
    let _users = (hot.counter_ge.acquire(), hot.counter_locked.acquire());
    let iters = options.iters(if threads == 1 { 200_000 } else { 100_000 });
    // Two-thread rounds are cheap and, on a busy machine, often dropped: twice as many.
    let rounds = interleave::run(options.rounds * threads, &mut hot.arms(threads, iters));
    assert_eq!(hot.host.generation(), 1, "the hot path loaded a new set");
    for arm in ["dylease", "arcswap_weak", "counter_ge", "counter_locked"] {
        emit_ratio("acquire_hot", threads, &rounds, arm, "arc_clone");
    }
    if threads == 1 {
        emit_ratio("acquire_hot", threads, &rounds, "lease_clone", "arc_clone");
    }
    for arm in ["arcswap_weak", "counter_ge", "counter_locked"] {
        emit_ratio("acquire_hot", threads, &rounds, arm, "dylease");
    }
    if threads > 1 {
        eprintln!(
            "  acquire_hot (2 threads): rounds without overlap per arm: {}",
            ["dylease", "arc_clone", "arcswap_weak", "counter_ge", "counter_locked"]
                .map(|arm| format!("{arm} {}", rounds.missing(arm)))
                .join(", ")
        );
    }
}

/// How many hosts `acquire_hosts` uses in turn: the thread cache holds 8.
const HOST_COUNTS: [usize; 6] = [1, 4, 8, 9, 16, 64];

fn acquire_hosts(options: &Options) {
    let hosts: Vec<Vec<PluginHost>> = HOST_COUNTS.iter().map(|&n| (0..n).map(|_| host()).collect()).collect();
    let _held: Vec<Lease> = hosts
        .iter()
        .flatten()
        .map(|host| host.acquire().expect("the static plugin loads"))
        .collect();
    let arcs: Vec<Vec<Arc<Payload>>> = HOST_COUNTS
        .iter()
        .map(|&n| (0..n).map(|_| payload()).collect())
        .collect();
    let acquire = |host: &PluginHost| drop(black_box(host.acquire()));
    for (n, group) in HOST_COUNTS.iter().zip(&hosts) {
        let mut round = in_turn(group, acquire);
        for _ in 0..2 * n {
            round();
        }
        common::assert_no_allocation(
            &format!("acquire_hosts: dylease acquire+drop, {n} hosts in turn"),
            100_000,
            round,
        );
    }
    let iters = options.iters(100_000);
    let mut arms = Vec::new();
    for ((n, group), arcs) in HOST_COUNTS.iter().zip(&hosts).zip(&arcs) {
        arms.push(Arm::looped(format!("dylease_{n}"), iters, in_turn(group, acquire)));
        let clone = |arc: &Arc<Payload>| drop(black_box(Arc::clone(arc)));
        arms.push(Arm::looped(format!("arc_{n}"), iters, in_turn(arcs, clone)));
    }
    let rounds = interleave::run(options.rounds, &mut arms);
    drop(arms);
    for host in hosts.iter().flatten() {
        assert_eq!(host.generation(), 1, "the hot path loaded a new set");
    }
    for n in HOST_COUNTS {
        emit_ratio(
            "acquire_hosts",
            1,
            &rounds,
            &format!("dylease_{n}"),
            &format!("arc_{n}"),
        );
        if n > 1 {
            emit_ratio("acquire_hosts", 1, &rounds, &format!("dylease_{n}"), "dylease_1");
        }
    }
}

const COLD_PLUGINS: usize = 16;

/// Waits until files just written are older than the parse cache's racy window (2.1 s): it
/// keeps a file's parse only then, and every group but the first-ever load times unchanged
/// files, as a long-running process meets them.
fn settle() {
    std::thread::sleep(Duration::from_millis(2300));
}

fn cold_cycle(options: &Options, dirs: &PluginDirs) {
    let files = dirs.files(COLD_PLUGINS);
    let dir = dirs.dir(COLD_PLUGINS);
    let strict = dirs.host(COLD_PLUGINS);
    let permissive = dirs.permissive_host(COLD_PLUGINS);
    // The first-ever load: a new file (a new inode, the same code) over every plugin before
    // each cycle, not timed, so that nothing of them is in the parse cache.
    let fresh = ReloadDir::new(&plugins::default_base(), "compare-first-load", &files);
    let first_load = fresh.host(dylease::UnloadPolicy::Immediately);
    check_full_close(&strict, &files);
    check_full_close(&permissive, &files);
    check_full_close(&first_load, &fresh.files());
    assert_eq!(discover_by_hand(&dir).len(), files.len());
    let iters = options.iters(16);
    let mut arms = vec![
        Arm::looped("dylease", iters, || host_cycle(&strict)),
        Arm::looped("dylease_permissive", iters, || host_cycle(&permissive)),
        // Every file parsed at every load, as before the parse cache (which is bypassed).
        Arm::new("dylease_uncached", iters, |iters| {
            dylease::set_parse_cache(false);
            let start = Instant::now();
            for _ in 0..iters {
                host_cycle(&strict);
            }
            let took = start.elapsed();
            dylease::set_parse_cache(true);
            Some(took)
        }),
        Arm::new("dylease_first_load", iters, |iters| {
            let mut took = Duration::ZERO;
            for _ in 0..iters {
                fresh.install_all();
                let start = Instant::now();
                host_cycle(&first_load);
                took += start.elapsed();
            }
            Some(took)
        }),
        Arm::looped("libloading", iters, || raw_cycle(&files)),
        Arm::looped("dlopen_by_descriptor", iters, || descriptor_cycle(&files)),
        Arm::looped("libloading_discover_check", iters, || {
            let found = discover_by_hand(&dir);
            check_by_hand(&found);
            raw_cycle(&found);
        }),
    ];
    let rounds = interleave::run(options.rounds, &mut arms);
    drop(arms);
    assert!(!strict.is_loaded() && !permissive.is_loaded() && !first_load.is_loaded());
    emit_ratio("cold_cycle", 1, &rounds, "dylease", "libloading");
    emit_ratio("cold_cycle", 1, &rounds, "dylease_permissive", "libloading");
    emit_ratio("cold_cycle", 1, &rounds, "dylease_uncached", "libloading");
    emit_ratio("cold_cycle", 1, &rounds, "dylease_first_load", "libloading");
    emit_ratio("cold_cycle", 1, &rounds, "dylease_uncached", "dylease");
    emit_ratio("cold_cycle", 1, &rounds, "dlopen_by_descriptor", "libloading");
    emit_ratio("cold_cycle", 1, &rounds, "dylease", "dlopen_by_descriptor");
    emit_ratio("cold_cycle", 1, &rounds, "libloading_discover_check", "libloading");
    emit_ratio("cold_cycle", 1, &rounds, "dylease", "libloading_discover_check");
}

/// A plugin needing `k` libraries of its own (`lib/libdepN.so`, found through the run path
/// `$ORIGIN/lib`), under `base`: the plugin's path. With none, `dep.c` is compiled into it.
fn plugin_with_dependencies(base: &std::path::Path, k: usize) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plugins");
    let dir = base.join(format!("deps{k}"));
    let lib = dir.join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    for d in [&dir, &lib] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let mut link = vec![
        "-Wl,--no-as-needed".to_owned(),
        "-L".to_owned(),
        lib.display().to_string(),
    ];
    for n in 0..k {
        let soname = format!("-Wl,-soname,libdep{n}.so");
        cc::compile_plugin(&[&root.join("dep.c")], &lib.join(format!("libdep{n}.so")), &[&soname])
            .unwrap_or_else(|e| panic!("{e}"));
        link.push(format!("-ldep{n}"));
    }
    link.extend(["-Wl,-rpath,$ORIGIN/lib".to_owned(), "-Wl,--enable-new-dtags".to_owned()]);
    let link: Vec<&str> = link.iter().map(String::as_str).collect();
    let plugin = dir.join("libuses_dep.so");
    let sources = if k == 0 {
        vec![root.join("uses_dep.c"), root.join("dep.c")]
    } else {
        vec![root.join("uses_dep.c")]
    };
    let sources: Vec<&std::path::Path> = sources.iter().map(|p| p.as_path()).collect();
    cc::compile_plugin(&sources, &plugin, &link).unwrap_or_else(|e| panic!("{e}"));
    plugin
}

/// The cold cycle of one plugin needing 0, 1 and 4 libraries of its own, every check on
/// (dylease resolves, checks and maps each dependency from its descriptor) against raw
/// `dlopen` + `dlsym` + `dlclose` of the same plugin (glibc finds the dependencies itself).
fn cold_dependencies(options: &Options) {
    let base = plugins::default_base().join(format!("bench-deps-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    let plugins: Vec<(usize, std::path::PathBuf)> = [0, 1, 4]
        .into_iter()
        .map(|k| (k, plugin_with_dependencies(&base, k)))
        .collect();
    settle();
    // SAFETY: the bench's own plugins, whose initialisation code only links a static node.
    let hosts: Vec<PluginHost> = plugins
        .iter()
        .map(|(_, plugin)| unsafe { PluginHost::builder().file(plugin).build() }.unwrap())
        .collect();
    for (host, (_, plugin)) in hosts.iter().zip(&plugins) {
        check_full_close(host, std::slice::from_ref(plugin));
    }
    let iters = options.iters(64);
    let mut arms = Vec::new();
    for (host, (k, plugin)) in hosts.iter().zip(&plugins) {
        arms.push(Arm::looped(format!("dylease_{k}"), iters, move || host_cycle(host)));
        arms.push(Arm::looped(format!("libloading_{k}"), iters, move || {
            raw_cycle(std::slice::from_ref(plugin))
        }));
    }
    let rounds = interleave::run(options.rounds, &mut arms);
    drop(arms);
    for (k, _) in &plugins {
        emit_ratio(
            "cold_dependencies",
            1,
            &rounds,
            &format!("dylease_{k}"),
            &format!("libloading_{k}"),
        );
    }
    drop(hosts);
    let _ = std::fs::remove_dir_all(&base);
}

/// The groups of isolated sets (`isolated`, `isolated_cold`, `isolated_threads`), over plugins
/// built once for them.
fn isolated_groups(options: &Options) {
    let dir = isolated::message_plugins(&plugins::default_base(), COLD_PLUGINS);
    let single = dir.join("single");
    std::fs::create_dir_all(&single).unwrap();
    let plugin = isolated::isolated_plugin(&single);
    settle();
    if options.runs("isolated") {
        isolated_calls(options, &plugin);
    }
    if options.runs("isolated_cold") {
        isolated_cold(options, &dir);
    }
    if options.runs("isolated_threads") {
        isolated_threads(options, &plugin);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// An isolated host over `file`, and an ordinary one.
fn isolated_and_ordinary(file: &std::path::Path) -> (PluginHost, PluginHost) {
    // SAFETY: the bench's own plugin, tests/plugins/isolated.c.
    let isolated = unsafe { PluginHost::builder().file(file) }.isolated().build().unwrap();
    // SAFETY: as above.
    let ordinary = unsafe { PluginHost::builder().file(file) }.build().unwrap();
    (isolated, ordinary)
}

fn isolated_calls(options: &Options, plugin: &std::path::Path) {
    const MIB: usize = 1 << 20;
    let (isolated, ordinary) = isolated_and_ordinary(plugin);
    let (remote, local) = (isolated.acquire().unwrap(), ordinary.acquire().unwrap());
    let worker = remote.worker_pid().expect("an isolated set has a worker");
    let small = *b"12345678";
    assert_eq!(remote.call("echo", &small).unwrap(), small);
    assert_eq!(local.call("echo", &small).unwrap(), small);
    let large: Vec<u8> = (0..MIB).map(|i| i as u8).collect();
    assert_eq!(remote.call("size", &large).unwrap(), MIB.to_string().as_bytes());
    assert_eq!(remote.call("echo", &large).unwrap(), large);
    let mut ping = isolated::PingPong::start();
    assert_eq!(ping.round_trip(&small), small.len());
    let mut copy = vec![0u8; MIB];
    let iters = options.iters(2000);
    let large_iters = options.iters(200);
    let mut arms = vec![
        Arm::looped("isolated_call", iters, || {
            black_box(remote.call("echo", black_box(&small)).unwrap());
        }),
        Arm::looped("in_process_call", iters, || {
            black_box(local.call("echo", black_box(&small)).unwrap());
        }),
        Arm::looped("socketpair_ping_pong", iters, || {
            black_box(ping.round_trip(black_box(&small)));
        }),
        Arm::looped("isolated_1mib_in", large_iters, || {
            black_box(remote.call("size", black_box(&large)).unwrap());
        }),
        Arm::looped("isolated_1mib_each_way", large_iters, || {
            black_box(remote.call("echo", black_box(&large)).unwrap());
        }),
        Arm::looped("memcpy_1mib", large_iters, || {
            copy.copy_from_slice(black_box(&large));
            black_box(&mut copy);
        }),
    ];
    let rounds = interleave::run(options.rounds, &mut arms);
    drop(arms);
    assert_eq!(remote.worker_pid(), Some(worker), "the worker was replaced while timed");
    emit_ratio("isolated", 1, &rounds, "isolated_call", "socketpair_ping_pong");
    emit_ratio("isolated", 1, &rounds, "isolated_call", "in_process_call");
    // Throughput against memcpy's: memcpy's time over the call's.
    emit_ratio("isolated", 1, &rounds, "memcpy_1mib", "isolated_1mib_in");
    emit_ratio("isolated", 1, &rounds, "memcpy_1mib", "isolated_1mib_each_way");
}

fn isolated_cold(options: &Options, dir: &std::path::Path) {
    // SAFETY: the bench's own plugins, built from numbered.c.
    let isolated = unsafe { PluginHost::builder().dir(dir) }.isolated().build().unwrap();
    // SAFETY: as above.
    let eager = unsafe { PluginHost::builder().dir(dir) }.build().unwrap();
    let cycle = |host: &PluginHost| {
        let lease = host.acquire().expect("the plugins load");
        assert_eq!(lease.plugins().len(), COLD_PLUGINS);
        black_box(lease.call("m7", b"x").unwrap());
        drop(lease);
    };
    for host in [&isolated, &eager] {
        let generation = host.generation();
        cycle(host);
        assert_eq!(
            host.generation(),
            generation + 1,
            "the cycle did not load a new generation"
        );
        assert!(!host.is_loaded());
    }
    isolated::spawn_and_wait();
    let iters = options.iters(10);
    let mut arms = vec![
        Arm::looped("isolated_cycle", iters, || cycle(&isolated)),
        Arm::looped("eager_cycle", iters, || cycle(&eager)),
        Arm::looped("spawn_wait", iters, isolated::spawn_and_wait),
    ];
    let rounds = interleave::run(options.rounds, &mut arms);
    drop(arms);
    let summary = rounds.per_round(|time| Some(time("isolated_cycle")? / (time("eager_cycle")? + time("spawn_wait")?)));
    emit(
        "isolated_cold",
        1,
        "isolated_cycle ÷ (eager_cycle + spawn_wait)",
        "×",
        &summary,
        &[
            ("isolated_cycle", rounds.median_ns("isolated_cycle")),
            ("eager_cycle", rounds.median_ns("eager_cycle")),
            ("spawn_wait", rounds.median_ns("spawn_wait")),
        ],
    );
    emit_ratio("isolated_cold", 1, &rounds, "isolated_cycle", "eager_cycle");
}

fn isolated_threads(options: &Options, plugin: &std::path::Path) {
    let (isolated, _) = isolated_and_ordinary(plugin);
    let lease = isolated.acquire().unwrap();
    let iters = options.iters(1000);
    let calls = |threads: usize| {
        let lease = &lease;
        move |iters: u64| {
            let start = Instant::now();
            std::thread::scope(|scope| {
                for _ in 0..threads {
                    scope.spawn(move || {
                        for _ in 0..iters {
                            black_box(lease.call("echo", black_box(b"12345678")).unwrap());
                        }
                    });
                }
            });
            Some(start.elapsed())
        }
    };
    let mut arms = vec![
        Arm::new("threads_1", iters, calls(1)),
        Arm::new("threads_2", iters, calls(2)),
        Arm::new("threads_4", iters, calls(4)),
    ];
    let rounds = interleave::run(options.rounds, &mut arms);
    drop(arms);
    for threads in [1, 2, 4] {
        let arm = format!("threads_{threads}");
        // Each iteration is one call on each thread.
        let summary = rounds.per_round(|time| Some(threads as f64 * 1e9 / time(&arm)?));
        emit(
            "isolated_threads",
            threads,
            "calls per second",
            "calls/s",
            &summary,
            &[(&arm, rounds.median_ns(&arm))],
        );
    }
}

/// The cost of manifests: the cold cycle of `COLD_PLUGINS` plugins with and without manifest
/// notes (the host reads one more block of each file, and compares what it registered), and
/// the catalog of the largest directory against its eager load.
fn manifest(options: &Options, dirs: &PluginDirs) {
    let files = dirs.files(COLD_PLUGINS);
    let bare = dirs.root().join("bare");
    std::fs::create_dir_all(&bare).unwrap();
    std::fs::set_permissions(&bare, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    for file in &files {
        let to = bare.join(file.file_name().unwrap());
        let status = std::process::Command::new("objcopy")
            .args(["--remove-section", ".note.dylease"])
            .arg(file)
            .arg(&to)
            .status()
            .expect("cannot run objcopy");
        assert!(status.success(), "objcopy {}", file.display());
    }
    settle();
    let with = dirs.host(COLD_PLUGINS);
    // SAFETY: the bench's own plugins (built from `numbered.c`) without their notes.
    let without = unsafe { PluginHost::builder().dir(&bare).build() }.unwrap();
    check_full_close(&with, &files);
    let bare_files: Vec<_> = files.iter().map(|f| bare.join(f.file_name().unwrap())).collect();
    check_full_close(&without, &bare_files);
    let catalog_of = |host: &PluginHost| {
        let catalog = host.catalog().expect("a catalog");
        assert!(catalog.iter().all(|e| e.refusal().is_none() && e.manifest().is_some()));
        catalog.len()
    };
    assert_eq!(catalog_of(&with), COLD_PLUGINS);
    assert!(without.catalog().unwrap().iter().all(|e| e.manifest().is_none()));

    let n = dirs.largest();
    let large = dirs.host(n);
    assert_eq!(catalog_of(&large), n);
    check_full_close(&large, &dirs.files(n));
    let mut arms = vec![
        Arm::looped("with_manifest", options.iters(16), || host_cycle(&with)),
        Arm::looped("without_manifest", options.iters(16), || host_cycle(&without)),
        Arm::looped(format!("catalog_{n}"), options.iters(1), || {
            black_box(large.catalog().unwrap());
        }),
        Arm::looped(format!("eager_{n}"), options.iters(1), || host_cycle(&large)),
    ];
    let rounds = interleave::run(options.rounds, &mut arms);
    drop(arms);
    assert!(!with.is_loaded() && !without.is_loaded() && !large.is_loaded());
    emit_ratio("manifest", 1, &rounds, "with_manifest", "without_manifest");
    emit_ratio("manifest", 1, &rounds, &format!("catalog_{n}"), &format!("eager_{n}"));
    let _ = std::fs::remove_dir_all(&bare);
}

fn load_scaling(options: &Options, dirs: &PluginDirs, sizes: &[usize]) {
    let hosts: Vec<PluginHost> = sizes.iter().map(|&n| dirs.host(n)).collect();
    let files: Vec<_> = sizes.iter().map(|&n| dirs.files(n)).collect();
    for (host, files) in hosts.iter().zip(&files) {
        check_full_close(host, files);
    }
    let mut arms = Vec::new();
    for ((n, host), files) in sizes.iter().zip(&hosts).zip(&files) {
        // About the same time per arm and round at every size: 64 plugins' worth of cycles.
        let iters = options.iters((64 / n).max(1) as u64);
        arms.push(Arm::looped(format!("dylease_{n}"), iters, move || host_cycle(host)));
        arms.push(Arm::looped(format!("libloading_{n}"), iters, move || raw_cycle(files)));
    }
    let rounds = interleave::run(options.rounds, &mut arms);
    drop(arms);
    // dylease's extra time per plugin over raw loading at `n` plugins, in µs, in one round.
    let extra = |time: &dyn Fn(&str) -> Option<f64>, n: usize| {
        Some((time(&format!("dylease_{n}"))? - time(&format!("libloading_{n}"))?) / n as f64 / 1e3)
    };
    for &n in sizes {
        let (d, l) = (format!("dylease_{n}"), format!("libloading_{n}"));
        let times = [(d.as_str(), rounds.median_ns(&d)), (l.as_str(), rounds.median_ns(&l))];
        emit(
            "load_scaling",
            1,
            &format!("extra µs per plugin, {n} plugins"),
            "µs",
            &rounds.per_round(|time| extra(time, n)),
            &times,
        );
        emit_ratio("load_scaling", 1, &rounds, &d, &l);
    }
    let first = sizes[0];
    for &n in &sizes[1..] {
        emit(
            "load_scaling",
            1,
            &format!("extra per plugin, {n} ÷ {first} plugins"),
            "×",
            &rounds.per_round(|time| Some(extra(time, n)? / extra(time, first)?)),
            &[],
        );
    }
}

fn reload(options: &Options, dirs: &PluginDirs) {
    let files = dirs.files(COLD_PLUGINS);
    let mut bases = Vec::new();
    match plugins::tmpfs_base() {
        Some(base) => bases.push(base),
        None => eprintln!("reload: no tmpfs (/dev/shm absent, DYLEASE_BENCH_DIR unset): target directory only"),
    }
    bases.push(plugins::default_base());
    for base in bases {
        let fs = plugins::file_system(&base);
        let reloaded = ReloadDir::new(&base, "compare-reload", &files);
        let cold_dir = ReloadDir::new(&base, "compare-cold", &files);
        let host = reloaded.host(dylease::UnloadPolicy::Immediately);
        let cold = cold_dir.host(dylease::UnloadPolicy::Immediately);
        check_full_close(&cold, &cold_dir.files());
        // The changed reload really replaces every library and the drain unmaps the old ones.
        let mut current = host.acquire().expect("the plugins load");
        reloaded.install_all();
        let old = std::mem::replace(&mut current, host.reload().expect("the changed plugins load"));
        assert!(
            reloaded.stale_mappings() >= COLD_PLUGINS,
            "the reload shared the replaced files' instances"
        );
        drop(old);
        assert_eq!(
            reloaded.stale_mappings(),
            0,
            "the old generation is still mapped after its drain"
        );
        eprintln!("reload ({fs}): a changed reload maps 16 new files; the drain unmaps the 16 old ones");

        let iters = options.iters(8);
        // Per round (the warm-up's first), the drain's share of the changed reload's time.
        let mut drain_shares = Vec::new();
        let mut arms = vec![
            Arm::new("changed_reload", iters, |iters| {
                let (mut reload, mut drain) = (Duration::ZERO, Duration::ZERO);
                for _ in 0..iters {
                    let (r, d) = reloaded.changed_reload(&host, &mut current);
                    (reload, drain) = (reload + r, drain + d);
                }
                drain_shares.push(drain.as_secs_f64() / (reload + drain).as_secs_f64());
                Some(reload + drain)
            }),
            Arm::looped("cold", iters, || host_cycle(&cold)),
        ];
        let rounds = interleave::run(options.rounds, &mut arms);
        drop(arms);
        drop(current);
        assert!(!host.is_loaded() && !cold.is_loaded());
        emit_ratio(&format!("reload/{fs}"), 1, &rounds, "changed_reload", "cold");
        emit(
            &format!("reload/{fs}"),
            1,
            "the old generation's drain ÷ the changed reload",
            "×",
            &Summary::of(drain_shares.split_off(1)),
            &[],
        );
    }
}

/// A single-operator compile over the largest directory: one pass of one plugin used. The
/// on-demand host judges every file and maps that one; the eager host maps them all; the raw
/// arm opens, looks up and closes that one library.
fn on_demand(options: &Options, dirs: &PluginDirs) {
    type IntPass = extern "C" fn(i32) -> i32;
    let n = dirs.largest();
    let used = n / 2;
    let pass_name = format!("bench{used:03}_pass");
    let files = dirs.files(n);
    let one = [files[used].clone()];
    let eager = dirs.host(n);
    // SAFETY: the bench's own plugins, as for `PluginDirs::host`.
    let lazy = unsafe { PluginHost::builder().dir(dirs.dir(n)) }
        .on_demand()
        .build()
        .expect("a host over a directory builds");
    // For diagnosis: the same without the trust check.
    // SAFETY: as above.
    let lazy_permissive = unsafe { PluginHost::builder().dir(dirs.dir(n)) }
        .on_demand()
        .trust(dylease::TrustPolicy::Permissive)
        .build()
        .expect("a host over a directory builds");
    let compile = |host: &PluginHost| {
        let lease = host.acquire().expect("the plugins load");
        // SAFETY: numbered.c's pass is an `int (*)(int)`, called while the lease lives.
        let pass = unsafe { lease.pass::<IntPass>(&pass_name) }.expect("the pass maps");
        assert_eq!(black_box(*pass)(black_box(3)), 3);
    };
    // What each arm does: the on-demand host maps exactly the one plugin, and every cycle of
    // either host leaves every file out of the process.
    {
        let lease = lazy.acquire().unwrap();
        assert_eq!(lease.plugins().len(), n);
        assert!(lease.plugins().iter().all(|p| !p.is_mapped()));
        // SAFETY: as above.
        let _pass = unsafe { lease.pass::<IntPass>(&pass_name) }.unwrap();
        let mapped: Vec<usize> = (0..n).filter(|&i| lease.plugins()[i].is_mapped()).collect();
        assert_eq!(mapped, [used]);
    }
    assert!(!lazy.is_loaded());
    check_full_close(&eager, &files);
    compile(&lazy);
    if cfg!(all(target_os = "linux", target_env = "gnu")) {
        assert!(
            files.iter().all(|file| !loader::loader_has(file)),
            "a file stayed loaded"
        );
    }
    let mut arms = vec![
        Arm::looped("on_demand", options.iters(16), || compile(&lazy)),
        Arm::looped("on_demand_permissive", options.iters(16), || compile(&lazy_permissive)),
        Arm::looped(format!("eager_{n}"), options.iters(1), || compile(&eager)),
        Arm::looped("dlopen_one", options.iters(64), || raw_cycle(&one)),
    ];
    let rounds = interleave::run(options.rounds, &mut arms);
    drop(arms);
    assert!(!lazy.is_loaded() && !eager.is_loaded());
    emit_ratio("on_demand", 1, &rounds, "on_demand", &format!("eager_{n}"));
    emit_ratio("on_demand", 1, &rounds, "on_demand", "dlopen_one");
    emit_ratio("on_demand", 1, &rounds, "on_demand_permissive", &format!("eager_{n}"));
    emit_ratio("on_demand", 1, &rounds, &format!("eager_{n}"), "dlopen_one");
}

/// Signs every library of `files` with `key` as serial `serial` of its plugin (`libbenchNNN.so`
/// is `benchNNN`).
fn sign_all(files: &[std::path::PathBuf], key: &dylease::sign::SigningKey, serial: u64) {
    for file in files {
        let stem = file.file_stem().expect("a file name").to_string_lossy();
        let name = stem.strip_prefix("lib").unwrap_or(&stem);
        let release = dylease::sign::Release::new(name, "0.1", serial);
        dylease::sign::sign_file(file, file, &release, key).expect("sign a bench plugin");
    }
}

fn signed(options: &Options, dirs: &PluginDirs) {
    use dylease::sign::{Keyring, Release, SigningKey, sign_file_bytes};
    use sha2::{Digest as _, Sha256};
    let files = dirs.files(COLD_PLUGINS);
    let key = SigningKey::from_seed(&[7; 32]);
    let keyring = || {
        let mut keyring = Keyring::new();
        keyring.trust(key.public_key());
        keyring
    };
    let signed_host = |dir: std::path::PathBuf| {
        // SAFETY: the bench's own plugins, compiled from tests/plugins/numbered.c.
        unsafe { PluginHost::builder().dir(dir) }
            .require_signed(keyring())
            .build()
            .expect("a host over a directory builds")
    };
    // Repeated cold cycles: the same files every time.
    let unsigned = dirs.host(COLD_PLUGINS);
    let signed_dir = ReloadDir::new(&plugins::default_base(), "compare-signed", &files);
    sign_all(&signed_dir.files(), &key, 1);
    let signed = signed_host(signed_dir.plugins());
    // First-ever loads: a new file over every plugin before each cycle; the signed ones signed
    // again with a new serial first, so that their signature checks are new too.
    let fresh_unsigned = ReloadDir::new(&plugins::default_base(), "compare-signed-first-unsigned", &files);
    let first_unsigned = fresh_unsigned.host(dylease::UnloadPolicy::Immediately);
    let fresh_signed = ReloadDir::new(&plugins::default_base(), "compare-signed-first", &files);
    let spares: Vec<std::path::PathBuf> = fresh_signed
        .files()
        .iter()
        .map(|file| {
            file.parent()
                .unwrap()
                .with_file_name("spares")
                .join(file.file_name().unwrap())
        })
        .collect();
    sign_all(&fresh_signed.files(), &key, 1);
    let first_signed = signed_host(fresh_signed.plugins());
    check_full_close(&signed, &signed_dir.files());
    check_full_close(&first_signed, &fresh_signed.files());
    // The digest: a signed 1 MiB image from the page cache, against SHA-256 in memory.
    let image: Vec<u8> = (0..1usize << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let block = sign_file_bytes(&image, &Release::new("mib", "1", 1), &key).expect("sign 1 MiB");
    let mib_path = signed_dir.plugins().with_file_name("one-mib.bin");
    std::fs::write(&mib_path, [image.as_slice(), &block].concat()).expect("write 1 MiB");
    let mib_keyring = keyring();
    let mut mib_file = std::fs::File::open(&mib_path).expect("open 1 MiB");
    mib_keyring
        .verify_file(&mut mib_file, &mib_path, None)
        .expect("1 MiB verifies");
    let serial = std::cell::Cell::new(1u64);
    let iters = options.iters(16);
    let mut arms = vec![
        Arm::looped("unsigned_cold", iters, || host_cycle(&unsigned)),
        Arm::looped("signed_cold", iters, || host_cycle(&signed)),
        Arm::new("unsigned_first_load", iters, |iters| {
            let mut took = Duration::ZERO;
            for _ in 0..iters {
                fresh_unsigned.install_all();
                let start = Instant::now();
                host_cycle(&first_unsigned);
                took += start.elapsed();
            }
            Some(took)
        }),
        Arm::new("signed_first_load", iters, |iters| {
            let mut took = Duration::ZERO;
            for _ in 0..iters {
                serial.set(serial.get() + 1);
                sign_all(&spares, &key, serial.get());
                fresh_signed.install_all();
                let start = Instant::now();
                host_cycle(&first_signed);
                took += start.elapsed();
            }
            Some(took)
        }),
        Arm::looped("verify_1mib", iters, || {
            black_box(
                mib_keyring
                    .verify_file(&mut mib_file, &mib_path, None)
                    .expect("verifies"),
            );
        }),
        Arm::looped("sha256_1mib", iters, || {
            black_box(Sha256::digest(black_box(&image)));
        }),
    ];
    let rounds = interleave::run(options.rounds, &mut arms);
    drop(arms);
    assert!(!signed.is_loaded() && !first_signed.is_loaded() && !unsigned.is_loaded());
    emit_ratio("signed", 1, &rounds, "signed_first_load", "unsigned_first_load");
    emit_ratio("signed", 1, &rounds, "signed_cold", "unsigned_cold");
    emit_ratio("signed", 1, &rounds, "verify_1mib", "sha256_1mib");
}

fn main() {
    let options = Options::parse().unwrap_or_else(|message| {
        eprintln!("compare: {message}");
        std::process::exit(2);
    });
    let start = Instant::now();
    eprintln!("compare: {options:?}");
    if options.runs("acquire_hot") {
        acquire_hot(&options, 1);
    }
    if options.runs("acquire_hot_2_threads") {
        acquire_hot(&options, 2);
    }
    if options.runs("acquire_hosts") {
        acquire_hosts(&options);
    }
    if options.runs("cold_dependencies") {
        cold_dependencies(&options);
    }
    if ["isolated", "isolated_cold", "isolated_threads"]
        .iter()
        .any(|g| options.runs(g))
    {
        isolated_groups(&options);
    }
    let file_groups = [
        "cold_cycle",
        "load_scaling",
        "manifest",
        "on_demand",
        "reload",
        "signed",
    ];
    if file_groups.iter().any(|g| options.runs(g)) {
        let sizes: Vec<usize> = [16, 64, options.max_plugins]
            .into_iter()
            .filter(|&n| n <= options.max_plugins)
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let compiling = Instant::now();
        let dirs = PluginDirs::build(&plugins::default_base(), "compare", &sizes);
        eprintln!(
            "compiled {} plugins in {:.1} s",
            options.max_plugins,
            compiling.elapsed().as_secs_f64()
        );
        settle();
        if options.runs("cold_cycle") {
            cold_cycle(&options, &dirs);
        }
        if options.runs("load_scaling") {
            load_scaling(&options, &dirs, &sizes);
        }
        if options.runs("manifest") {
            manifest(&options, &dirs);
        }
        if options.runs("on_demand") {
            on_demand(&options, &dirs);
        }
        if options.runs("reload") {
            reload(&options, &dirs);
        }
        if options.runs("signed") {
            signed(&options, &dirs);
        }
    }
    println!(
        "{}",
        json!({"done": true, "rounds": options.rounds, "scale": options.scale,
               "overlap": interleave::OVERLAP, "seconds": start.elapsed().as_secs_f64()})
    );
}
