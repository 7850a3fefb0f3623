//! The map-once state of an on-demand set's plugins
//! ([`HostBuilder::on_demand`](crate::HostBuilder::on_demand)): the first use of a plugin's
//! pass maps it, once, however many threads of however many leases of the set ask at once;
//! the others wait for that mapping, at most until a deadline, and all of them then see its
//! outcome, which the set keeps.
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
use crate::sync::{Condvar, Mutex, ThreadId, current_thread};

/// The default of [`HostBuilder::map_timeout`](crate::HostBuilder::map_timeout).
pub(crate) const DEFAULT_MAP_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

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
/// the model's (a static plugin's registration behind a counted `on_load`): files and the
/// platform loader are the registry's models' (`registry`).
#[cfg(all(test, loom))]
mod loom_models {
    use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};
    use std::sync::Arc as StdArc;

    use crate::load::pipeline::Deferred;
    use crate::load::plugins::LoadedPlugins;
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
            assert!(set.add_deferred(Deferred::for_model("p", &["pass"])).is_empty());
            let set = Arc::new(set.finished());
            let first_use = {
                let (set, plugin, on_loads) = (set.clone(), plugin.clone(), on_loads.clone());
                move || {
                    set.ensure_mapped(0, None, |_| {
                        on_loads.fetch_add(1, SeqCst);
                        plugin.register()
                    })
                    .expect("the mapping succeeds");
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
