//! The generations of one host: the slot protocol.
//!
//! A host's plugin sets are numbered 1, 2, … in load order ("generations"). The host keeps
//! only a `Weak` to its current set, in a lock-free slot (`ArcSwapWeak`); every user holds a
//! `Lease`, an `Arc` of the set obtained by upgrading that weak or by loading a fresh set. The
//! set unloads in the `Drop` of its last `Arc`. Nothing counts users: every count is an
//! `Arc`'s.
//!
//! The invariants I1–I5 this file keeps, the three paths of `acquire()` and the traps of its
//! thread cache are written once in `docs::internals` ("The slot protocol"); the arguments
//! below cite them by number, as "I3 (docs::internals)". The first path, each thread's cache,
//! is `host::thread_cache`; the host's own lease and its keeper thread are `host::keeper`; a
//! set reaches its generations only through the [`Teardown`] they implement.

use std::time::Instant;

use crate::error::{Error, Waited, time_left};
use crate::host::keeper::Keeper;
use crate::host::policy::UnloadPolicy;
use crate::host::reentry::inside_host;
use crate::host::set::{PluginSet, Teardown};
use crate::host::stats::Recorder;
use crate::host::thread_cache as cache;
use crate::load::LoadedPlugins;
// A wait lets go of the Python interpreter, which the thread waited for may need.
use crate::sync::{Arc, AtomicU64, Condvar, Mutex, MutexGuard, Ordering, WeakSlot};
use crate::sys::wait_detached;

/// How a new generation number is published: Release, after the slot's `Weak`, so that a
/// thread that sees the number (Acquire, in its thread cache) finds the new set in the slot.
const PUBLISH: Ordering = Ordering::Release;

/// The state of one host that its sets point back to, so a set can mark itself unloaded even
/// after the `PluginHost` value is gone.
#[derive(Debug)]
pub(crate) struct Generations {
    /// Unique for the life of the process (never reused, unlike an address).
    id: u64,
    /// The process that made it: a `fork()`ed child has copies of its locks, which threads
    /// that do not exist there may hold, so the child never waits on them.
    pid: u32,
    /// The current generation's set, held weakly: it never keeps the set alive (I3).
    slot: WeakSlot<PluginSet>,
    /// The number of the generation in the slot; 0 before the first load. Stored after the
    /// slot, with Release, so a thread that sees it also sees the slot's new `Weak`.
    current: AtomicU64,
    /// Generations loaded and not yet finished unloading, mirrored for observers.
    alive: AtomicU64,
    life: Mutex<Life>,
    /// Signalled when a load finishes (or fails) and when a generation finishes unloading.
    changed: Condvar,
    /// Observed by `PluginHost::stats`; never decides anything.
    pub(crate) stats: Recorder,
    /// The host's own lease (see [`UnloadPolicy`]) and its keeper thread. A set in it holds
    /// this `Generations` alive in turn: the host's drop breaks the cycle (`stop_keeping`).
    keeper: Arc<Keeper>,
}

/// The lifecycle under the host's lock.
#[derive(Debug, Default)]
struct Life {
    /// Whether the current generation (`Generations::current`, written only under this
    /// lock) finished unloading (true before the first load).
    current_unloaded: bool,
    /// Generations loaded and not yet finished unloading.
    alive: u64,
    /// A thread is loading the next generation outside the lock.
    loading: bool,
}

impl Generations {
    /// A host's generations; `name` is the host's name for its log lines (by default
    /// `host-N`, N its id).
    pub(crate) fn new(policy: UnloadPolicy, name: Option<String>) -> Self {
        crate::sync::lazy_static! {
            /// Host ids, never reused.
            static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        }
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        Generations {
            id,
            pid: std::process::id(),
            slot: WeakSlot::empty(),
            current: AtomicU64::new(0),
            alive: AtomicU64::new(0),
            life: Mutex::new(Life {
                current_unloaded: true,
                ..Life::default()
            }),
            changed: Condvar::new(),
            stats: Recorder::new(name.unwrap_or_else(|| format!("host-{id}"))),
            keeper: Arc::new(Keeper::new(policy)),
        }
    }

    /// A lease of the current set, loading one with `load` if none is alive. `deadline`
    /// bounds the waits for other threads (`None`: wait as long as it takes).
    #[inline]
    pub(crate) fn acquire(
        this: &Arc<Self>,
        deadline: Option<Instant>,
        load: impl FnOnce(Option<Instant>) -> Result<LoadedPlugins, Error>,
    ) -> Result<Arc<PluginSet>, Error> {
        // Step 1. The generation check comes first: a cached `Weak` of an older generation
        // may still upgrade while it drains, but it is not current.
        if let Some(set) = cache::lookup(this.id, &this.current) {
            return Ok(set);
        }
        Generations::acquire_uncached(this, deadline, load)
    }

    #[cold]
    fn acquire_uncached(
        this: &Arc<Self>,
        deadline: Option<Instant>,
        load: impl FnOnce(Option<Instant>) -> Result<LoadedPlugins, Error>,
    ) -> Result<Arc<PluginSet>, Error> {
        // Step 2.
        if let Some(set) = this.slot.upgrade() {
            cache::refresh(this.id, &set);
            return Ok(set);
        }
        this.not_forked()?;
        // A process-wide bound, if a test suite set one (`set_acquire_bound`): only here,
        // off the cached path.
        let deadline = deadline.or_else(|| match ACQUIRE_BOUND_MS.load(std::sync::atomic::Ordering::Relaxed) {
            0 => None,
            ms => Instant::now().checked_add(std::time::Duration::from_millis(ms)),
        });
        // Step 3. A nested call from this host's own load or unload would wait for itself.
        inside_host(this.id, |already_inside| match already_inside {
            true => Err(Error::Reentrant),
            false => Generations::acquire_slow(this, Mode::Acquire, deadline, load),
        })
    }

    /// Loads a new generation now and makes it current, whatever is loaded; older generations
    /// keep serving their leases and unload when their last lease drops. Waits for another
    /// thread's load or reload to finish first (reloads serialise). A failed load leaves the
    /// current generation current (I5).
    pub(crate) fn reload(
        this: &Arc<Self>,
        deadline: Option<Instant>,
        load: impl FnOnce(Option<Instant>) -> Result<LoadedPlugins, Error>,
    ) -> Result<Arc<PluginSet>, Error> {
        this.not_forked()?;
        inside_host(this.id, |already_inside| match already_inside {
            true => Err(Error::Reentrant),
            false => Generations::acquire_slow(this, Mode::Reload, deadline, load),
        })
    }

    /// `Err(Error::Forked)` in a `fork()`ed child of the process that made this host.
    pub(crate) fn not_forked(&self) -> Result<(), Error> {
        if self.forked() {
            return Err(Error::Forked { parent: self.pid });
        }
        Ok(())
    }

    /// Whether this is a `fork()`ed child of the process that made this host.
    pub(crate) fn forked(&self) -> bool {
        std::process::id() != self.pid
    }

    /// Step 3, with this thread marked as inside this host.
    fn acquire_slow(
        this: &Arc<Self>,
        mode: Mode,
        deadline: Option<Instant>,
        load: impl FnOnce(Option<Instant>) -> Result<LoadedPlugins, Error>,
    ) -> Result<Arc<PluginSet>, Error> {
        let mut life = this.life.lock();
        loop {
            let waited = if life.loading {
                Waited::Load
            } else if mode == Mode::Reload {
                break;
            } else if let Some(set) = this.slot.upgrade() {
                // Another thread loaded while this one waited. A lease made here leaves the
                // lock's scope before it can be dropped.
                drop(life);
                cache::refresh(this.id, &set);
                return Ok(set);
            } else if !life.current_unloaded {
                // The current set's last lease is gone, its teardown has not finished (I1).
                Waited::Unload
            } else {
                break;
            };
            life = this.wait(life, deadline, waited)?;
        }
        life.loading = true;
        // `current` is written only under this lock, so this read is exact.
        let generation = this.current.load(Ordering::Relaxed) + 1;
        drop(life);

        // Plugin code runs here, outside the lock (I4); other acquirers wait for `loading`.
        // If the load fails or panics, `Loading` clears the flag and wakes them (I5).
        let loading = Loading(this);
        let contents = load(deadline)?;
        let set = Arc::new(PluginSet::new(generation, contents, Box::new(Arc::clone(this))));
        let mut life = this.life.lock();
        // Publish: the slot's `Weak`, then the generation (Release), so a thread that sees the
        // new generation finds the new `Weak` in the slot (I1: one current generation).
        this.slot.store(Arc::downgrade(&set));
        this.current.store(generation, PUBLISH);
        life.current_unloaded = false;
        life.alive += 1;
        this.alive.store(life.alive, Ordering::Release);
        // `Loading` would take the lock to clear the flag: clear it here instead.
        life.loading = false;
        std::mem::forget(loading);
        drop(life);
        this.changed.notify_all();
        // Outside the lock: should the logger panic, the only lease unwinds normally.
        cache::refresh(this.id, &set);
        Keeper::keep(&this.keeper, &set, this.stats.name());
        this.stats.loaded(&set);
        Ok(set)
    }

    /// Waits for a change, until `deadline` if there is one.
    fn wait<'a>(
        &'a self,
        life: MutexGuard<'a, Life>,
        deadline: Option<Instant>,
        waited: Waited,
    ) -> Result<MutexGuard<'a, Life>, Error> {
        let left = time_left(deadline, || waited)?;
        let wait = || match left {
            None => self.changed.wait(life),
            Some(left) => self.changed.wait_timeout(life, left),
        };
        // The thread waited for may need the GIL (a load of Python plugins); and a thread that
        // holds it may be waiting for this lock: it is not held while the GIL is waited for.
        Ok(wait_detached(wait, || self.life.lock()))
    }

    /// Whether a set of this host is loaded (or still unloading). Observes only.
    pub(crate) fn is_loaded(&self) -> bool {
        self.alive.load(Ordering::Acquire) != 0
    }

    /// The generation of the newest set (0 before the first load).
    pub(crate) fn generation(&self) -> u64 {
        self.current.load(Ordering::Acquire)
    }

    /// The number of leases of the current set. Reads the count without taking a lease (an
    /// observer holding one might end up dropping the last, and run the unload itself).
    pub(crate) fn live_leases(&self) -> usize {
        self.slot.strong_count()
    }

    /// Blocks until no generation is loaded or `deadline` passed: `true` if none is.
    pub(crate) fn wait_unloaded(&self, deadline: Option<Instant>) -> bool {
        inside_host(self.id, |already_inside| {
            if already_inside {
                return false;
            }
            let mut life = self.life.lock();
            while life.alive > 0 || life.loading {
                match self.wait(life, deadline, Waited::Unload) {
                    Ok(next) => life = next,
                    Err(_) => return false,
                }
            }
            true
        })
    }
}

/// Whether the slow path shares a live set (`acquire`) or always loads a new one (`reload`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Acquire,
    Reload,
}

impl Generations {
    /// The host is gone: drop its own lease (which may unload now) and stop the keeper.
    pub(crate) fn stop_keeping(&self) {
        self.keeper.stop();
    }

    /// The host's unload policy.
    pub(crate) fn policy(&self) -> UnloadPolicy {
        self.keeper.policy()
    }

    /// When the host plans to drop its own lease: under `After`, if no user lease is alive.
    pub(crate) fn unloads_at(&self) -> Option<Instant> {
        self.keeper.unloads_at()
    }
}

/// A set's teardown reaches its host through this, and holds the host's generations alive
/// until it ends: the set's drop guard marks its generation unloaded here (I1
/// (docs::internals): loaders waiting for it go on).
impl Teardown for Arc<Generations> {
    fn host_id(&self) -> u64 {
        self.id
    }

    fn host_name(&self) -> &str {
        self.stats.name()
    }

    fn forked(&self) -> bool {
        Generations::forked(self)
    }

    fn record_unload(&self, set: &PluginSet, took: std::time::Duration, pinned: usize) {
        self.stats.unloaded(set, took, pinned);
    }

    fn mark_unloaded(&self, generation: u64) {
        let mut life = self.life.lock();
        life.alive -= 1;
        self.alive.store(life.alive, Ordering::Release);
        if generation == self.current.load(Ordering::Relaxed) {
            life.current_unloaded = true;
        }
        drop(life);
        self.changed.notify_all();
    }
}

/// Clears the host's `loading` flag if a load fails or unwinds, so waiters try again (I5).
struct Loading<'a>(&'a Generations);

impl Drop for Loading<'_> {
    fn drop(&mut self) {
        self.0.life.lock().loading = false;
        self.0.changed.notify_all();
    }
}

/// The bound `acquire()` puts on its waits, in milliseconds (0: none): set by
/// [`set_acquire_bound`].
static ACQUIRE_BOUND_MS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Makes every [`PluginHost::acquire`](crate::PluginHost::acquire) of the process wait at
/// most `bound` for other threads (as
/// [`PluginHost::acquire_timeout`](crate::PluginHost::acquire_timeout) does), or without a
/// bound again (`None`, the default). A call that finds its set cached or in the host's slot
/// waits for nothing and never reads the bound. For test suites, whose every wait must have
/// a bound so that a bug fails a test instead of hanging it; hidden, not part of the stable
/// API.
pub fn set_acquire_bound(bound: Option<std::time::Duration>) {
    let ms = bound.map_or(0, |bound| u64::try_from(bound.as_millis()).unwrap_or(u64::MAX).max(1));
    ACQUIRE_BOUND_MS.store(ms, std::sync::atomic::Ordering::Relaxed);
}
