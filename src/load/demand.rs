//! On-demand sets ([`HostBuilder::on_demand`](crate::HostBuilder::on_demand)): the judgement
//! of a plugin file at its set's load ([`defer`]), and the map-once state of the set's
//! on-demand plugins ([`Plugins`]): the first use of a plugin's pass maps it, once, however
//! many threads of however many leases of the set ask at once; the others wait for that
//! mapping, at most until a deadline, and all of them then see its outcome, which the set
//! keeps.
//!
//! None of it is linked into a program that never calls `HostBuilder::on_demand`: the
//! builder stores [`defer`] (a [`Defer`]), which only it names; the load calls it through
//! that pointer, and only `defer` makes the set's [`Demand`], through whose vtable a lease's
//! first use reaches the mapping. This is the crate's pattern for a part an application may
//! not use: the one function that starts it is named only by the builder method that turns it
//! on, which stores it (`HostBuilder::isolated` stores `isolate::Begin` the same way).
//!
//! Each on-demand plugin of a set is in one state, under the set's one lock:
//!
//! ```text
//!   Unmapped ──first use──▶ Mapping(thread) ──ok──▶ Mapped
//!      ▲                        │  │
//!      └── Reentrant, TimedOut ─┘  └──other error──▶ Failed(cause)
//! ```
//!
//! `Mapped` and `Failed` are final for the set. The mapping itself (the plugin's file opened,
//! checked, mapped through the registry, its `on_load` and `register_passes` run) happens
//! outside the lock, on the thread that moved the state to `Mapping`; a thread that finds
//! `Mapping` of another thread waits on the set's condition variable, one that finds its own
//! (a `get` from the plugin's `on_load`) fails with [`Error::Reentrant`]. A waiter that reaches
//! its deadline fails with [`Error::TimedOut`] ([`Waited::Mapping`]) and leaves the state as it
//! is. Transient failures of the mapping (`Reentrant`, `TimedOut` waiting for another set's
//! unload of the same file) return the state to `Unmapped`: a later call tries again.

use std::time::Instant;

use crate::error::{Error, Origin, Waited, time_left};
use crate::load::pipeline::{Deferred, Judged, Registered};
use crate::load::plugins::{Demand, LoadedPlugins, Scope};
use crate::log_scope::{self, count};
use crate::sync::{Condvar, Mutex, ThreadId, current_thread};
use crate::trust::candidate::Candidate;
use crate::trust::{Checks, TrustPolicy};

/// What judging a plugin file for an on-demand set ([`defer`]) leaves to the load.
#[allow(
    clippy::large_enum_variant,
    reason = "one per plugin of a load, returned once and matched at once: a box would be an allocation each"
)]
pub(crate) enum Deferral {
    /// No manifest, or an incomplete one: it is loaded now, as an eager set loads it, from
    /// the descriptor the judgement opened.
    Now(Candidate),
    /// It joined the set unmapped, or was refused: its failures (the refusal, or each name
    /// it declares that an earlier plugin has), for the load policy.
    Judged(Vec<(Origin, Error)>),
}

/// How a load judges a plugin file for an on-demand set: [`defer`], stored by
/// `HostBuilder::on_demand` and named nowhere else.
pub(crate) type Defer = fn(Candidate, &mut Checks, TrustPolicy, &mut LoadedPlugins) -> Deferral;

/// Judges `candidate` (passed by the trust check) for an on-demand set: a library plugin
/// whose manifest is complete joins `set` unmapped, with the passes it declares
/// ([`Candidate::judge`], [`LoadedPlugins::add_deferred`]); any other comes back to be
/// loaded now.
pub(crate) fn defer(
    candidate: Candidate,
    checks: &mut Checks,
    trust: TrustPolicy,
    set: &mut LoadedPlugins,
) -> Deferral {
    let origin = Origin::File(candidate.path.clone());
    match candidate.judge(checks, trust) {
        Ok(Judged::Deferred(plugin)) => {
            // What the log says, taken only if it is kept (an on-demand acquire of a large
            // directory spends more on formatting than on judging).
            let logged = log::log_enabled!(log::Level::Debug)
                .then(|| (plugin.manifest.name.clone(), plugin.manifest.passes.len()));
            let duplicates = set.add_deferred(plugin, || Box::new(Plugins::new()));
            if let Some((name, passes)) = logged {
                log::debug!(
                    "{}judged {origin} as `{name}`, not mapped: {}",
                    log_scope::prefix(),
                    count(passes - duplicates.len(), "pass", "passes")
                );
            }
            Deferral::Judged(duplicates.into_iter().map(|error| (origin.clone(), error)).collect())
        }
        Ok(Judged::Eager(candidate)) => Deferral::Now(candidate),
        Err(error) => Deferral::Judged(vec![(origin, error)]),
    }
}

/// How an on-demand plugin is mapped: [`Deferred::map`], or a loom model's own step.
type MapStep = fn(&Deferred, TrustPolicy, Option<Instant>) -> Result<Registered, Error>;

/// The on-demand plugins of a set and their map-once states.
pub(crate) struct Plugins<M = MapStep> {
    /// In load order (`PluginInfo::deferred` indexes it).
    deferred: Vec<Deferred>,
    /// Their states, made when the load finished.
    states: MapOnce,
    /// Maps one.
    map: M,
}

impl Plugins {
    /// None yet, mapped by [`Deferred::map`].
    pub(crate) fn new() -> Self {
        Plugins::with_map(Deferred::map)
    }
}

impl<M> Plugins<M> {
    /// None yet, mapped by `map`.
    pub(crate) fn with_map(map: M) -> Self {
        Plugins {
            deferred: Vec::new(),
            states: MapOnce::new(0),
            map,
        }
    }
}

impl<M> Demand for Plugins<M>
where
    M: Fn(&Deferred, TrustPolicy, Option<Instant>) -> Result<Registered, Error> + Send + Sync,
{
    fn push(&mut self, plugin: Deferred) -> usize {
        self.deferred.push(plugin);
        self.deferred.len() - 1
    }

    fn finished(&mut self) {
        self.states = MapOnce::new(self.deferred.len());
    }

    fn ensure(
        &self,
        set: &LoadedPlugins,
        plugin: usize,
        deferred: usize,
        deadline: Option<Instant>,
        scope: Scope<'_>,
    ) -> Result<(), Error> {
        let origin = set.plugins()[plugin].origin();
        self.states.ensure(deferred, origin, deadline, || {
            let registered = scope(&|| (self.map)(&self.deferred[deferred], set.trust, deadline))?;
            set.mapped(plugin, registered);
            Ok(())
        })
    }
}

/// One on-demand plugin's state.
#[derive(Debug)]
enum State {
    Unmapped,
    Mapping(ThreadId),
    Mapped,
    Failed(std::sync::Arc<Error>),
}

/// The states of a set's on-demand plugins, and the condition variable their waiters wait on.
#[derive(Debug)]
pub(crate) struct MapOnce {
    states: Mutex<Vec<State>>,
    changed: Condvar,
}

impl MapOnce {
    /// `plugins` on-demand plugins, none mapped.
    pub(crate) fn new(plugins: usize) -> Self {
        MapOnce {
            states: Mutex::new((0..plugins).map(|_| State::Unmapped).collect()),
            changed: Condvar::new(),
        }
    }

    /// Makes on-demand plugin `which` (shown as `plugin` in errors) mapped: runs `map` if no
    /// thread did, waits (until `deadline`) for the thread mapping it, or returns the failure
    /// the set kept.
    ///
    /// # Errors
    ///
    /// [`Error::MapFailed`] with `map`'s error as the cause, now and on every later call;
    /// [`Error::Reentrant`] if this thread is mapping it; [`Error::TimedOut`] if another
    /// thread's mapping outlasted `deadline`; `map`'s own `Reentrant` and `TimedOut`, which
    /// are not kept.
    pub(crate) fn ensure(
        &self,
        which: usize,
        plugin: &Origin,
        deadline: Option<Instant>,
        map: impl FnOnce() -> Result<(), Error>,
    ) -> Result<(), Error> {
        let me = current_thread();
        let failed = |cause: &std::sync::Arc<Error>| Error::MapFailed {
            plugin: plugin.clone(),
            cause: cause.clone(),
        };
        let mut states = self.states.lock();
        loop {
            match &states[which] {
                State::Mapped => return Ok(()),
                State::Failed(cause) => return Err(failed(cause)),
                State::Mapping(thread) if *thread == me => return Err(Error::Reentrant),
                State::Mapping(_) => {
                    let left = time_left(deadline, || Waited::Mapping(plugin.clone()))?;
                    let wait = || match left {
                        None => self.changed.wait(states),
                        Some(left) => self.changed.wait_timeout(states, left),
                    };
                    // Detached from the Python interpreter meanwhile, as every wait of
                    // dylease's (the mapping thread may need the GIL, to log say).
                    states = crate::sys::wait_detached(wait, || self.states.lock());
                }
                State::Unmapped => break,
            }
        }
        // The guard: this thread maps it, the others wait.
        states[which] = State::Mapping(me);
        drop(states);
        /// However the mapping ends (a panic included), its state leaves `Mapping` and the
        /// waiters wake.
        struct Settle<'a> {
            once: &'a MapOnce,
            which: usize,
            state: Option<State>,
        }
        impl Drop for Settle<'_> {
            fn drop(&mut self) {
                let state = self.state.take().unwrap_or(State::Unmapped);
                self.once.states.lock()[self.which] = state;
                self.once.changed.notify_all();
            }
        }
        let mut settle = Settle {
            once: self,
            which,
            state: None,
        };
        match map() {
            Ok(()) => {
                settle.state = Some(State::Mapped);
                Ok(())
            }
            Err(error @ (Error::Reentrant | Error::TimedOut { .. })) => Err(error),
            Err(error) => {
                let cause = std::sync::Arc::new(error);
                let error = failed(&cause);
                settle.state = Some(State::Failed(cause));
                Err(error)
            }
        }
    }
}

/// The loom model of the map-once state, on the crate's real set (`LoadedPlugins`: its
/// `ensure_mapped`, this state machine, the passes' once-set callables and the teardown
/// list): two threads' first uses of one on-demand plugin map it once, run its `on_load`
/// once, both call the one callable, and the set's drop unloads it once. The mapping step is
/// the model's (a static plugin's registration behind a counted `on_load`, given to
/// [`Plugins::with_map`] in place of `Deferred::map`), and so is the host's scope around it
/// (none): files and the platform loader are the registry's models' (`registry`).
#[cfg(all(test, loom))]
mod loom_models {
    use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc as StdArc;

    use super::Plugins;
    use crate::load::pipeline::Deferred;
    use crate::load::plugins::{Demand, LoadedPlugins};
    use crate::load::static_plugin::StaticPlugin;
    use crate::sync::Arc;
    use dylease_plugin::Registrar;

    fn seven() -> i32 {
        7
    }

    #[test]
    fn on_demand_first_uses_race_and_map_once() {
        let mut builder = loom::model::Builder::new();
        if builder.preemption_bound.is_none() {
            builder.preemption_bound = Some(3);
        }
        let runs = StdArc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = runs.clone();
        builder.check(move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let on_loads = StdArc::new(AtomicUsize::new(0));
            let on_unloads = StdArc::new(AtomicUsize::new(0));
            let unloads = on_unloads.clone();
            let plugin = StdArc::new(StaticPlugin {
                name: "p".into(),
                register: Box::new(move |reg| {
                    let unloads = unloads.clone();
                    reg.on_unload(move || {
                        unloads.fetch_add(1, SeqCst);
                    });
                    reg.add_pass("pass", seven as fn() -> i32, std::ptr::null_mut())
                }),
            });
            let mut set = LoadedPlugins::new();
            let counted_on_loads = on_loads.clone();
            let model = move || -> Box<dyn Demand> {
                Box::new(Plugins::with_map(move |_: &Deferred, _, _| {
                    counted_on_loads.fetch_add(1, SeqCst);
                    plugin.register()
                }))
            };
            assert!(set.add_deferred(Deferred::for_model("p", &["pass"]), model).is_empty());
            let set = Arc::new(set.finished());
            let first_use = {
                let set = set.clone();
                move || {
                    set.ensure_mapped(0, None, &|map| map()).expect("the mapping succeeds");
                    let callable = set.passes()[0].callable().expect("mapped: its callable is set");
                    assert!(set.plugins()[0].is_mapped());
                    assert!(callable.user_data.0.is_null());
                }
            };
            let other = loom::thread::spawn(first_use.clone());
            first_use();
            drop(first_use);
            other.join().unwrap();
            let mapped = on_loads.load(SeqCst);
            assert_eq!(mapped, 1, "on-demand: one plugin of one set was mapped {mapped} times");
            let set = Arc::try_unwrap(set).expect("the model's threads are done");
            assert_eq!(on_unloads.load(SeqCst), 0, "on-demand: unloaded before its set");
            drop(set);
            let unloaded = on_unloads.load(SeqCst);
            assert_eq!(unloaded, 1, "on-demand: unloaded {unloaded} times with its set");
        });
        println!(
            "loom model on_demand_first_uses_race_and_map_once: {} interleavings",
            runs.load(std::sync::atomic::Ordering::Relaxed)
        );
    }
}
