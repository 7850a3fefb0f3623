//! Loom models of the lease lifecycle: each runs dylease's real code, built with `--cfg loom`,
//! through every interleaving up to the preemption bound, and asserts the invariant of
//! the crate docs (`dylease::docs::internals`) it is named after. Run them with `loom-tests/run.sh`.
//!
//! dlopen cannot run under loom, so the plugins are static plugins whose load and unload
//! record into loom atomics ([`Probe`]).
#![cfg(loom)]

use std::sync::atomic::AtomicUsize as StdAtomicUsize;
use std::time::Instant;

use dylease::{Error, Lease, PluginHost, UnloadPolicy};
use loom::sync::Arc;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use loom::thread;

/// Runs `model` under loom with the bound from `LOOM_MAX_PREEMPTIONS` (run.sh sets it), and
/// prints how many interleavings it explored and how long that took.
fn check(name: &str, model: impl Fn() + Send + Sync + 'static) {
    static ITERATIONS: StdAtomicUsize = StdAtomicUsize::new(0);
    // Tests run one at a time (run.sh passes `--test-threads=1`), so one counter serves all.
    ITERATIONS.store(0, std::sync::atomic::Ordering::Relaxed);
    let started = Instant::now();
    loom::model::Builder::new().check(move || {
        ITERATIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        model();
    });
    println!(
        "loom model {name}: {} interleavings in {:.2} s",
        ITERATIONS.load(std::sync::atomic::Ordering::Relaxed),
        started.elapsed().as_secs_f64()
    );
}

/// Counts, across all interleavings of one model, how often each outcome happened, so a
/// model can show that it explored both sides of a race instead of passing vacuously.
/// (std atomics: loom runs the interleavings one after another on one OS thread.)
#[derive(Default)]
struct Outcomes([StdAtomicUsize; 2]);

impl Outcomes {
    const fn new() -> Self {
        Outcomes([StdAtomicUsize::new(0), StdAtomicUsize::new(0)])
    }

    fn saw(&self, which: bool) {
        self.0[usize::from(which)].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }

    /// Panics unless both outcomes were seen; `what` names them (false, true).
    fn assert_both(&self, what: [&str; 2]) {
        let seen = self.0.each_ref().map(|n| n.load(std::sync::atomic::Ordering::Relaxed));
        println!("    outcomes: {} {}, {} {}", seen[0], what[0], seen[1], what[1]);
        assert!(
            seen[0] > 0 && seen[1] > 0,
            "the model never explored both outcomes: {seen:?} {what:?}"
        );
    }
}

/// What a static plugin's loads and unloads recorded.
#[derive(Default)]
struct Probe {
    /// Registrations begun (each load calls the plugin's registration once).
    loads: AtomicUsize,
    /// Unload hooks run.
    unloads: AtomicUsize,
}

impl Probe {
    /// Loaded generations not yet unloaded.
    fn live(&self) -> usize {
        self.loads.load(SeqCst) - self.unloads.load(SeqCst)
    }
}

/// A static plugin that records into `probe`, and checks I1 as each load begins: the previous
/// generation's unload has finished.
fn recording(
    probe: &Arc<Probe>,
) -> impl Fn(&mut dylease::StaticRegistrar) -> Result<(), dylease::RegisterError> + Send + Sync + 'static {
    let probe = probe.clone();
    move |reg| {
        let unloads = probe.unloads.load(SeqCst);
        let loads = probe.loads.fetch_add(1, SeqCst);
        assert_eq!(
            loads, unloads,
            "I1: a load began before the previous generation finished unloading"
        );
        let probe = probe.clone();
        reg.on_unload(move || {
            probe.unloads.fetch_add(1, SeqCst);
        });
        Ok(())
    }
}

fn host_with(probe: &Arc<Probe>) -> PluginHost {
    PluginHost::builder()
        .static_plugin("probe", recording(probe))
        .build()
        .unwrap()
}

/// I2: the lease refers to a fully loaded set that is not unloading: its plugin list is
/// readable (loom checks that read against the set's write and drop) and its generation's
/// unload has not run.
fn assert_live(lease: &Lease, probe: &Probe) {
    assert_eq!(
        lease.plugins().len(),
        1,
        "I2: a lease sees a set that is not fully loaded"
    );
    assert_eq!(lease.plugins()[0].name(), "probe");
    assert_eq!(probe.live(), 1, "I2: a lease sees a set whose unload has run");
}

/// 1. Two threads race the first `acquire()`: exactly one load, and both leases are of the same
///    set.
#[test]
fn model_1_first_acquire_race_loads_once() {
    check("1 first acquire race (one load)", || {
        let probe = Arc::new(Probe::default());
        let host = Arc::new(host_with(&probe));
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let (host, probe) = (host.clone(), probe.clone());
                thread::spawn(move || {
                    let lease = host.acquire().unwrap();
                    assert_live(&lease, &probe);
                    lease
                })
            })
            .collect();
        let leases: Vec<Lease> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert!(Lease::ptr_eq(&leases[0], &leases[1]), "both leases must share one set");
        assert_eq!(probe.loads.load(SeqCst), 1, "exactly one load");
        assert_eq!(leases[0].generation(), 1);
        drop(leases);
        assert_eq!(probe.unloads.load(SeqCst), 1);
        assert!(!host.is_loaded());
    });
}

/// 2. The last lease drops on one thread while another acquires: a new load starts only after
///    the old unload finished (I1, asserted by the plugin), and no lease ever observes an
///    unloading set (I2).
#[test]
fn model_2_last_drop_races_acquire() {
    static RELOADED: Outcomes = Outcomes::new();
    check("2 last drop vs acquire (I1, I2)", || {
        let probe = Arc::new(Probe::default());
        let host = Arc::new(host_with(&probe));
        let first = host.acquire().unwrap();
        let dropper = thread::spawn(move || drop(first));
        let acquirer = {
            let (host, probe) = (host.clone(), probe.clone());
            thread::spawn(move || {
                let lease = host.acquire().unwrap();
                assert_live(&lease, &probe);
                lease.generation()
            })
        };
        dropper.join().unwrap();
        let generation = acquirer.join().unwrap();
        assert!(generation == 1 || generation == 2);
        RELOADED.saw(generation == 2);
        // Every generation that loaded has unloaded, each exactly once (I3).
        assert_eq!(probe.loads.load(SeqCst), generation as usize);
        assert_eq!(probe.unloads.load(SeqCst), generation as usize);
        assert!(!host.is_loaded());
    });
    RELOADED.assert_both(["shared generation 1", "loaded generation 2"]);
}

/// 3. Three threads clone and drop leases of one set: exactly one unload, after the last drop
///    (I3).
#[test]
fn model_3_clones_dropped_on_three_threads_unload_once() {
    check("3 clone/drop on three threads (I3)", || {
        let probe = Arc::new(Probe::default());
        let host = host_with(&probe);
        let lease = host.acquire().unwrap();
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let (lease, probe) = (lease.clone(), probe.clone());
                thread::spawn(move || {
                    let again = lease.clone();
                    drop(lease);
                    // This thread still holds a lease: nothing may have unloaded.
                    assert_live(&again, &probe);
                    drop(again);
                })
            })
            .collect();
        drop(lease);
        for thread in threads {
            thread.join().unwrap();
        }
        // The last drop, wherever it happened, unloaded before it returned.
        assert_eq!(probe.loads.load(SeqCst), 1);
        assert_eq!(
            probe.unloads.load(SeqCst),
            1,
            "I3: exactly one unload after the last drop"
        );
        assert!(!host.is_loaded());
    });
}

/// 4. `WeakLease::upgrade` races the last drop: it returns either a live lease or `None`.
#[test]
fn model_4_weak_upgrade_races_last_drop() {
    static UPGRADED: Outcomes = Outcomes::new();
    check("4 weak upgrade vs last drop", || {
        let probe = Arc::new(Probe::default());
        let host = host_with(&probe);
        let lease = host.acquire().unwrap();
        let weak = lease.downgrade();
        let dropper = thread::spawn(move || drop(lease));
        let upgrader = {
            let probe = probe.clone();
            thread::spawn(move || match weak.upgrade() {
                Some(lease) => {
                    assert_live(&lease, &probe);
                    assert_eq!(lease.generation(), 1);
                    true
                }
                None => false,
            })
        };
        dropper.join().unwrap();
        UPGRADED.saw(upgrader.join().unwrap());
        assert_eq!(probe.loads.load(SeqCst), 1);
        assert_eq!(probe.unloads.load(SeqCst), 1);
        assert!(!host.is_loaded());
    });
    UPGRADED.assert_both(["None", "a live lease"]);
}

/// 4b. A weak lease of an unloaded generation races the last drop of the next generation,
///     with the host itself already dropped: the stale weak lease never upgrades, and never
///     takes a share of the newer set even for a moment, so the real last drop unloads before
///     it returns (I3). Leases and weak leases keep working without their `PluginHost`.
#[test]
fn model_4b_stale_weak_lease_races_last_drop_of_the_next_generation() {
    check("4b stale weak lease vs next generation's last drop (I3)", || {
        let probe = Arc::new(Probe::default());
        let host = host_with(&probe);
        let stale = host.acquire().unwrap().downgrade();
        let second = host.acquire().unwrap();
        assert_eq!(second.generation(), 2);
        drop(host);
        let dropper = {
            let probe = probe.clone();
            thread::spawn(move || {
                drop(second);
                assert_eq!(probe.unloads.load(SeqCst), 2, "I3: the last drop did not unload");
            })
        };
        let upgrader = thread::spawn(move || assert!(stale.upgrade().is_none(), "a stale weak lease upgraded"));
        dropper.join().unwrap();
        upgrader.join().unwrap();
        assert_eq!(probe.loads.load(SeqCst), 2);
    });
}

/// 5. A load that fails races another `acquire()`: the failed attempt leaves nothing loaded
///    (the plugin registered before the failure is unloaded again), and the retry succeeds
///    (I5).
#[test]
fn model_5_failed_load_races_acquire() {
    check("5 failed load vs acquire (I5)", || {
        let probe = Arc::new(Probe::default());
        let failed_once = Arc::new(AtomicBool::new(false));
        let host = {
            let failed_once = failed_once.clone();
            Arc::new(
                PluginHost::builder()
                    .static_plugin("probe", recording(&probe))
                    .static_plugin("flaky", move |_| {
                        if failed_once.swap(true, SeqCst) {
                            Ok(())
                        } else {
                            Err(dylease::RegisterError::custom("fails the first time"))
                        }
                    })
                    .build()
                    .unwrap(),
            )
        };
        let threads: Vec<_> = (0..2)
            .map(|_| {
                let host = host.clone();
                thread::spawn(move || host.acquire())
            })
            .collect();
        let results: Vec<_> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        let failures = results.iter().filter(|r| r.is_err()).count();
        assert_eq!(failures, 1, "exactly the first load fails");
        let error = results.iter().find_map(|r| r.as_ref().err()).unwrap();
        assert!(
            error.to_string().contains("flaky"),
            "the error names the plugin: {error}"
        );
        // The successful load is generation 1: the failed one counted for nothing.
        let lease = results.iter().find_map(|r| r.as_ref().ok()).unwrap();
        assert_eq!(lease.generation(), 1);
        assert_eq!(lease.plugins().len(), 2);
        // Two registrations of "probe" (the failed attempt's and the good one), one unload so
        // far: the failed attempt's.
        assert_eq!(probe.loads.load(SeqCst), 2);
        assert_eq!(probe.unloads.load(SeqCst), 1);
        drop(results);
        assert_eq!(probe.unloads.load(SeqCst), 2);
        assert!(!host.is_loaded());
    });
}

/// 6. A nested `acquire()` from inside a static plugin's registration and from its unload hook
///    returns `Error::Reentrant`, while another thread acquires too; the model finishing proves
///    there is no deadlock (loom fails a model whose threads all block) (I4).
#[test]
fn model_6_nested_acquire_is_reentrant_not_a_deadlock() {
    check("6 nested acquire (I4)", || {
        let host_cell: Arc<std::sync::OnceLock<std::sync::Weak<PluginHost>>> = Arc::default();
        let nested = Arc::new(AtomicUsize::new(0));
        let register = {
            let (host_cell, nested) = (host_cell.clone(), nested.clone());
            move |reg: &mut dylease::StaticRegistrar| {
                let this = host_cell.get().and_then(std::sync::Weak::upgrade).unwrap();
                assert!(
                    matches!(this.acquire(), Err(Error::Reentrant)),
                    "nested acquire in register"
                );
                nested.fetch_add(1, SeqCst);
                let (host_cell, nested) = (host_cell.clone(), nested.clone());
                reg.on_unload(move || {
                    // The host may be gone by now; if not, a nested acquire must fail fast.
                    if let Some(this) = host_cell.get().and_then(std::sync::Weak::upgrade) {
                        assert!(
                            matches!(this.acquire(), Err(Error::Reentrant)),
                            "nested acquire in unload"
                        );
                        nested.fetch_add(1, SeqCst);
                    }
                });
                Ok(())
            }
        };
        let host = std::sync::Arc::new(PluginHost::builder().static_plugin("nested", register).build().unwrap());
        host_cell.set(std::sync::Arc::downgrade(&host)).unwrap();
        let other = {
            let host = host.clone();
            thread::spawn(move || drop(host.acquire().unwrap()))
        };
        drop(host.acquire().unwrap());
        other.join().unwrap();
        // At least one load and its unload ran, each with its nested acquire refused.
        let nested = nested.load(SeqCst);
        assert!(
            nested >= 2 && nested.is_multiple_of(2),
            "every load and unload tried a nested acquire"
        );
        assert!(!host.is_loaded());
    });
}

/// 7. The cached fast path races the last drop and a new generation: this thread's cache holds
///    generation 1 while another thread drops its last lease and a third loads generation 2.
///    The cached `Weak` is used only while it is current and alive (I2), and nothing is loaded
///    twice at once (I1, asserted by the plugin).
#[test]
fn model_7_cached_lease_races_last_drop_and_new_generation() {
    static FROM_CACHE: Outcomes = Outcomes::new();
    check("7 cached fast path vs last drop and generation 2 (I1, I2)", || {
        let probe = Arc::new(Probe::default());
        let host = Arc::new(host_with(&probe));
        // Fills this thread's cache with generation 1.
        let first = host.acquire().unwrap();
        let dropper = thread::spawn(move || drop(first));
        let loader = {
            let (host, probe) = (host.clone(), probe.clone());
            thread::spawn(move || {
                let lease = host.acquire().unwrap();
                assert_live(&lease, &probe);
            })
        };
        let lease = host.acquire().unwrap();
        assert_live(&lease, &probe);
        FROM_CACHE.saw(lease.generation() == 1);
        drop(lease);
        dropper.join().unwrap();
        loader.join().unwrap();
        assert_eq!(probe.loads.load(SeqCst), probe.unloads.load(SeqCst), "I3");
        assert!(!host.is_loaded());
    });
    FROM_CACHE.assert_both(["a newer generation", "generation 1 shared"]);
}

/// Which generations a static plugin has seen loaded and unloaded: under reload, several
/// generations are alive at once, so I2 is asked per generation.
#[derive(Default)]
struct Generations {
    /// Loads begun (load `n` is generation `n`: every load of these hosts succeeds or fails
    /// before the next begins).
    loads: AtomicUsize,
    /// `unloaded[n]`: generation `n`'s unload hook ran.
    unloaded: loom::sync::Mutex<Vec<bool>>,
}

impl Generations {
    fn assert_live(&self, lease: &Lease) {
        let unloaded = self.unloaded.lock().unwrap();
        let generation = lease.generation() as usize;
        assert!(
            generation < unloaded.len(),
            "I2: a lease of a generation that never loaded"
        );
        assert!(
            !unloaded[generation],
            "I2: a lease sees generation {generation}, which unloaded"
        );
    }
}

/// A static plugin that records each generation's load and unload into `seen`, and fails the
/// load whose number is `fail_on` (0: none).
fn per_generation(
    seen: &Arc<Generations>,
    fail_on: usize,
) -> impl Fn(&mut dylease::StaticRegistrar) -> Result<(), dylease::RegisterError> + Send + Sync + 'static {
    let seen = seen.clone();
    move |reg| {
        let generation = seen.loads.fetch_add(1, SeqCst) + 1;
        if generation == fail_on {
            return Err(dylease::RegisterError::custom("this load fails"));
        }
        {
            let mut unloaded = seen.unloaded.lock().unwrap();
            unloaded.resize(generation + 1, false);
        }
        let seen = seen.clone();
        reg.on_unload(move || {
            let mut unloaded = seen.unloaded.lock().unwrap();
            assert!(!unloaded[generation], "I3: generation {generation} unloaded twice");
            unloaded[generation] = true;
        });
        Ok(())
    }
}

/// A host whose one static plugin records into `seen` ([`per_generation`]).
fn per_generation_host(seen: &Arc<Generations>, fail_on: usize) -> Arc<PluginHost> {
    Arc::new(
        PluginHost::builder()
            .static_plugin("generations", per_generation(seen, fail_on))
            .build()
            .unwrap(),
    )
}

/// 8. `reload()` on one thread races the last drop of generation 1 and an `acquire()` on
///    another: every lease is of a loaded generation (I2), the reload's generation or a newer
///    one is current after it, and every generation unloads exactly once at the end (I3).
#[test]
fn model_8_reload_races_acquire_and_the_last_drop_of_the_old_generation() {
    static SAW_OLD: Outcomes = Outcomes::new();
    check("8 reload vs last drop of generation 1 and acquire (I2, I3)", || {
        let seen = Arc::new(Generations::default());
        let host = per_generation_host(&seen, 0);
        let first = host.acquire().unwrap();
        let reloader = {
            let (host, seen) = (host.clone(), seen.clone());
            thread::spawn(move || {
                let fresh = host.reload().unwrap();
                seen.assert_live(&fresh);
                assert!(
                    host.generation() >= fresh.generation(),
                    "I1: an older generation is current"
                );
            })
        };
        drop(first);
        let lease = host.acquire().unwrap();
        seen.assert_live(&lease);
        // Generation 2 is the reload's (shared) or this acquire's own load before the reload;
        // generation 3 a load after the reload's lease was gone, or the reload's after it.
        SAW_OLD.saw(lease.generation() == 2);
        drop(lease);
        reloader.join().unwrap();
        let unloaded = seen.unloaded.lock().unwrap();
        assert!(
            unloaded[1..].iter().all(|&u| u),
            "I3: a generation stayed loaded: {unloaded:?}"
        );
        assert!(!host.is_loaded());
    });
    SAW_OLD.assert_both(["generation 3", "generation 2"]);
}

/// 9. A failing `reload()` races `acquire()`: the current generation stays current and loaded
///    (I5), and the acquirer gets a loaded generation.
#[test]
fn model_9_failed_reload_leaves_the_current_generation() {
    check("9 failed reload vs acquire (I5)", || {
        let seen = Arc::new(Generations::default());
        let host = per_generation_host(&seen, 2);
        let session = host.acquire().unwrap();
        let acquirer = {
            let (host, seen) = (host.clone(), seen.clone());
            thread::spawn(move || {
                let lease = host.acquire().unwrap();
                seen.assert_live(&lease);
                assert_eq!(
                    lease.generation(),
                    1,
                    "I5: a failed reload changed the current generation"
                );
            })
        };
        assert!(host.reload().is_err());
        assert_eq!(host.generation(), 1, "I5");
        let again = host.acquire().unwrap();
        assert!(Lease::ptr_eq(&again, &session), "I5: the current generation changed");
        acquirer.join().unwrap();
        drop((again, session));
        assert!(!host.is_loaded());
    });
}

/// Reads the host's current generation, then acquires: the lease is live (I2) and of that
/// generation or a newer one (I1). Returns the generation read.
fn acquire_no_older_than_current(host: &PluginHost, seen: &Generations) -> u64 {
    let current = host.generation();
    let lease = host.acquire().unwrap();
    seen.assert_live(&lease);
    assert!(
        lease.generation() >= current,
        "I1: generation {current} was current, yet acquire handed out generation {}",
        lease.generation()
    );
    current
}

/// 10. Publication order: a thread that sees generation 2 as current while a reload
///     publishes it gets a lease of generation 2 or newer, never the draining generation 1
///     still in an older `Weak` (the slot is written before the generation number).
#[test]
fn model_10_a_thread_that_sees_a_new_generation_never_gets_an_older_one() {
    static SAW_NEW: Outcomes = Outcomes::new();
    check("10 publication order: slot, then generation (I1)", || {
        let seen = Arc::new(Generations::default());
        let host = per_generation_host(&seen, 0);
        // Generation 1, in this thread's cache and kept alive (draining once reloaded).
        let old = host.acquire().unwrap();
        let reloader = {
            let host = host.clone();
            thread::spawn(move || host.reload().unwrap())
        };
        // Lets the reloader run first in some interleavings: without it, loom's schedules
        // never ran the reload before this load (16 interleavings, generation 2 never seen).
        thread::yield_now();
        SAW_NEW.saw(acquire_no_older_than_current(&host, &seen) == 2);
        drop(reloader.join().unwrap());
        drop(old);
        assert!(!host.is_loaded());
    });
    SAW_NEW.assert_both(["generation 1 current", "generation 2 current"]);
}

/// 10b. Publication order, seen from a thread that has not synchronised with the reload: a
///      fresh thread reads the current generation while another thread reloads, then
///      acquires. If it read generation 2, its lease is of generation 2 or newer: the number
///      is published (Release) after the slot's `Weak`, and read with Acquire. (Model 10's
///      `yield_now` keeps loom from handing the yielding thread a value it read before the
///      yield, so it cannot see a stale slot; this thread never yields.)
#[test]
fn model_10b_publication_order_seen_by_a_thread_that_never_synchronised() {
    static SAW_NEW: Outcomes = Outcomes::new();
    check("10b publication order, a fresh thread (I1)", || {
        let seen = Arc::new(Generations::default());
        let host = per_generation_host(&seen, 0);
        // Generation 1, kept alive (draining once reloaded): its `Weak` still upgrades.
        let old = host.acquire().unwrap();
        let reader = {
            let (host, seen) = (host.clone(), seen.clone());
            thread::spawn(move || {
                SAW_NEW.saw(acquire_no_older_than_current(&host, &seen) == 2);
            })
        };
        let fresh = host.reload().unwrap();
        reader.join().unwrap();
        drop(fresh);
        drop(old);
        assert!(!host.is_loaded());
    });
    SAW_NEW.assert_both(["generation 1 current", "generation 2 current"]);
}

/// 11. Two reloads race under `UnloadPolicy::WithHost`: whichever order the two threads reach
///     the host's own lease in, the host keeps the newest generation, and every older one
///     unloads with its last user lease (I3).
#[test]
fn model_11_racing_reloads_leave_the_host_keeping_the_newest_generation() {
    check("11 two reloads vs the host's own lease (WithHost)", || {
        let seen = Arc::new(Generations::default());
        let host = Arc::new(
            PluginHost::builder()
                .static_plugin("generations", per_generation(&seen, 0))
                .unload(UnloadPolicy::WithHost)
                .build()
                .unwrap(),
        );
        let other = {
            let host = host.clone();
            thread::spawn(move || drop(host.reload().unwrap()))
        };
        drop(host.reload().unwrap());
        other.join().unwrap();
        let newest = host.generation() as usize;
        {
            let unloaded = seen.unloaded.lock().unwrap();
            assert_eq!(newest, 2);
            assert!(
                !unloaded[newest],
                "the host let the newest generation go (it kept an older one): {:?}",
                *unloaded
            );
            assert!(unloaded[1], "I3: the older generation stayed loaded");
        }
        drop(host);
        assert!(seen.unloaded.lock().unwrap()[1..].iter().all(|&u| u), "I3");
    });
}
