//! The host's own lease of its newest set, kept under [`UnloadPolicy::After`] and
//! [`UnloadPolicy::WithHost`], and the keeper thread of `After`, which drops it once no user
//! lease has been seen for the policy's duration.
//!
//! The keeper's lease is an ordinary one: its drop is an ordinary last drop (I3
//! (docs::internals)). A set in it points back to the host's generations, which own the
//! keeper: the host's drop breaks that cycle ([`Keeper::stop`]).

use std::time::{Duration, Instant};

use crate::host::policy::UnloadPolicy;
use crate::host::set::PluginSet;
use crate::sync::{Arc, Condvar, Mutex};

/// The host's own lease and its keeper's state.
#[derive(Debug)]
pub(crate) struct Keeper {
    policy: UnloadPolicy,
    kept: Mutex<Kept>,
    changed: Condvar,
}

/// The host's own lease, kept under [`UnloadPolicy::After`] and [`UnloadPolicy::WithHost`].
#[derive(Debug)]
struct Kept {
    /// The newest set the host keeps loaded, if any.
    set: Option<Arc<PluginSet>>,
    /// When the keeper last saw a user lease of `set` (or `set` was loaded).
    last_busy: Instant,
    /// The host was dropped: keep nothing, and the keeper thread ends.
    stopped: bool,
    /// The keeper thread of `After` runs.
    keeper_started: bool,
    /// The keeper is dropping the set it took (outside the lock): the host's drop waits for it.
    dropping: bool,
}

impl Keeper {
    /// The keeper of a host under `policy`, keeping nothing yet.
    pub(crate) fn new(policy: UnloadPolicy) -> Self {
        Keeper {
            policy,
            kept: Mutex::new(Kept {
                set: None,
                last_busy: Instant::now(),
                stopped: false,
                keeper_started: false,
                dropping: false,
            }),
            changed: Condvar::new(),
        }
    }

    /// The host's unload policy.
    pub(crate) fn policy(&self) -> UnloadPolicy {
        self.policy
    }

    /// Keeps `set`, the newest generation, loaded under the host's unload policy: the host's
    /// own lease replaces the one it kept of an older generation (dropped here, outside every
    /// lock: it may be the older generation's last). `host` names the host in log lines.
    pub(crate) fn keep(this: &Arc<Self>, set: &Arc<PluginSet>, host: &str) {
        if this.policy == UnloadPolicy::Immediately {
            return;
        }
        let mut kept = this.kept.lock();
        if kept.stopped
            || kept
                .set
                .as_ref()
                .is_some_and(|held| held.generation() >= set.generation())
        {
            return;
        }
        let older = kept.set.replace(Arc::clone(set));
        kept.last_busy = Instant::now();
        let start_keeper = matches!(this.policy, UnloadPolicy::After(_)) && !kept.keeper_started;
        kept.keeper_started |= start_keeper;
        drop(kept);
        this.changed.notify_all();
        drop(older);
        if start_keeper {
            let keeper = Arc::clone(this);
            if let Err(error) = crate::sync::spawn("dylease-keeper", move || Keeper::run(keeper)) {
                // Without its keeper the host would keep the set for ever: let it go, so the
                // policy falls back to `Immediately` until a later load tries again.
                log::error!(
                    "[{host}] cannot start the thread of UnloadPolicy::After ({error}); the set unloads with its last lease"
                );
                let mut kept = this.kept.lock();
                kept.keeper_started = false;
                let set = kept.set.take();
                drop(kept);
                drop(set);
            }
        }
    }

    /// The keeper of [`UnloadPolicy::After`]: drops the host's lease once no user lease has
    /// been seen for the policy's duration, looking every [`poll_interval`]. A user lease
    /// that lives shorter than that between two looks may go unseen: the set then unloads up
    /// to that much earlier. Ends when the host is dropped.
    fn run(this: Arc<Self>) {
        let UnloadPolicy::After(idle) = this.policy else { return };
        let poll = poll_interval(idle);
        let mut kept = this.kept.lock();
        while !kept.stopped {
            let Some(set) = &kept.set else {
                kept = this.changed.wait(kept);
                continue;
            };
            let now = Instant::now();
            let due;
            (kept.last_busy, due) = look(Arc::strong_count(set), kept.last_busy, now, idle);
            if due {
                // Only if the host's lease is the only one, atomically: a user who acquired
                // meanwhile (through a thread cache, which never asks the host) keeps the set,
                // and the host keeps its lease, as if the user had been seen.
                let Some(set) = kept.set.take() else { continue };
                match Arc::try_unwrap(set) {
                    Ok(set) => {
                        kept.dropping = true;
                        drop(kept);
                        // The drop that unloads, as any last drop.
                        drop(set);
                        kept = this.kept.lock();
                        kept.dropping = false;
                        this.changed.notify_all();
                    }
                    Err(set) => {
                        // Seen busy: look again after `poll`, as after any look. (Looking
                        // again at once would spin with the lock held under `After(ZERO)`.)
                        kept.set = Some(set);
                        kept.last_busy = now;
                        kept = this.changed.wait_timeout(kept, poll);
                    }
                }
                continue;
            }
            kept = this.changed.wait_timeout(kept, poll);
        }
    }

    /// The host is gone: drop its own lease (which may unload now) and stop the keeper.
    pub(crate) fn stop(&self) {
        let mut kept = self.kept.lock();
        kept.stopped = true;
        let set = kept.set.take();
        // A set the keeper took is unloading on its thread: the host's drop returns after it.
        // Detached from the Python interpreter meanwhile: that unload may need the GIL (a
        // Python plugin's teardown), and the host may be dropped by a thread that holds it.
        while kept.dropping {
            kept = crate::sys::wait_detached(|| self.changed.wait(kept), || self.kept.lock());
        }
        drop(kept);
        self.changed.notify_all();
        drop(set);
    }

    /// When the host plans to drop its own lease: under `After`, if no user lease is alive.
    pub(crate) fn unloads_at(&self) -> Option<Instant> {
        let UnloadPolicy::After(idle) = self.policy else {
            return None;
        };
        let kept = self.kept.lock();
        let set = kept.set.as_ref()?;
        (Arc::strong_count(set) == 1).then(|| kept.last_busy + idle)
    }
}

/// How often the keeper of `After(idle)` looks: every eighth of `idle`, between 1 ms and
/// 250 ms.
fn poll_interval(idle: Duration) -> Duration {
    (idle / 8).clamp(Duration::from_millis(1), Duration::from_millis(250))
}

/// One look of the keeper at `now`, at a set with `leases` strong references (the host's own
/// among them) last seen busy at `last_busy`: when it was last seen busy now, and whether it
/// has been idle for `idle` (then the keeper lets its lease go, if it is still the only one).
fn look(leases: usize, last_busy: Instant, now: Instant, idle: Duration) -> (Instant, bool) {
    let last_busy = if leases > 1 { now } else { last_busy };
    (last_busy, now.duration_since(last_busy) >= idle)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// The keeper looks every eighth of the idle time, never more often than every 1 ms nor
    /// less often than every 250 ms.
    #[test]
    fn the_keeper_looks_every_eighth_of_the_idle_time_within_bounds() {
        assert_eq!(poll_interval(80 * MS), 10 * MS);
        assert_eq!(poll_interval(Duration::from_secs(1)), 125 * MS);
        assert_eq!(poll_interval(2000 * MS), 250 * MS);
        assert_eq!(poll_interval(Duration::from_secs(60)), 250 * MS);
        assert_eq!(poll_interval(4 * MS), MS);
        assert_eq!(poll_interval(Duration::ZERO), MS);
    }

    /// A user lease besides the host's own makes the set busy now, whatever its idle time;
    /// the host's lease alone lets the set go once `idle` has passed since it was last busy,
    /// and not a moment before.
    #[test]
    fn the_keeper_lets_go_only_after_the_idle_time_without_a_user_lease() {
        let start = Instant::now();
        let idle = Duration::from_secs(1);
        // A user lease alive: busy now, long after the last look.
        let later = start + 3 * idle;
        assert_eq!(look(2, start, later, idle), (later, false));
        assert_eq!(look(5, start, later, idle), (later, false));
        // The host's lease alone.
        assert_eq!(look(1, start, start + idle - MS, idle), (start, false));
        assert_eq!(look(1, start, start + idle, idle), (start, true));
        assert_eq!(look(1, start, start + 3 * idle, idle), (start, true));
        assert_eq!(look(1, start, start, Duration::ZERO), (start, true));
    }
}
