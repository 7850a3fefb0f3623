//! Each thread's cache of the sets it acquired last: a few entries keyed by host id, the
//! first path of `acquire()` ("The slot protocol", docs::internals).
//!
//! The cache holds `Weak`s only, so it never keeps a set loaded (I3 (docs::internals)); an
//! entry is used only while its generation is the host's current one.

use std::cell::RefCell;

use crate::host::set::PluginSet;
use crate::sync::{Arc, AtomicU64, Ordering, Weak};

/// How many hosts one thread's cache remembers: eight hosts used in turn all stay cached; a
/// ninth evicts an entry (round robin), which then takes the slot path (what each costs:
/// `acquire_hosts` in BENCHMARKS.md).
const CACHE_ENTRIES: usize = 8;

/// How a lookup reads the host's current generation: Acquire, pairing with the Release that
/// publishes it after the slot's `Weak`.
const OBSERVE: Ordering = Ordering::Acquire;

struct Entry {
    /// 0: unused (host ids start at 1).
    host: u64,
    generation: u64,
    set: Weak<PluginSet>,
}

struct Cache {
    entries: [Entry; CACHE_ENTRIES],
    /// The entry a new host replaces next (round robin).
    next: usize,
}

crate::sync::thread_locals! {
    static CACHE: RefCell<Cache> = RefCell::new(Cache {
        entries: std::array::from_fn(|_| Entry { host: 0, generation: 0, set: Weak::new() }),
        next: 0,
    });
}

/// The current set of host `host`, if this thread's cache has it and it is alive. `current`
/// is the host's current generation, published (Release) after the slot's `Weak`.
#[inline]
pub(crate) fn lookup(host: u64, current: &AtomicU64) -> Option<Arc<PluginSet>> {
    CACHE
        .try_with(|cache| {
            let cache = cache.borrow();
            let entry = cache.entries.iter().find(|entry| entry.host == host)?;
            if entry.generation != current.load(OBSERVE) {
                return None;
            }
            // One compare-and-swap that never increments from zero (I2).
            entry.set.upgrade()
        })
        .ok()
        .flatten()
}

/// Remembers `set` as host `host`'s current set on this thread.
pub(crate) fn refresh(host: u64, set: &Arc<PluginSet>) {
    let _ = CACHE.try_with(|cache| {
        let mut cache = cache.borrow_mut();
        let at = match cache.entries.iter().position(|entry| entry.host == host) {
            Some(at) => at,
            None => {
                let at = cache.next;
                cache.next = (at + 1) % CACHE_ENTRIES;
                at
            }
        };
        let entry = Entry {
            host,
            generation: set.generation(),
            set: Arc::downgrade(set),
        };
        // Only a `Weak` is dropped here: it may free the set's memory, never unload it.
        drop(std::mem::replace(&mut cache.entries[at], entry));
    });
}
