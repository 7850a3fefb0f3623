//! What the hot-path benches compare dylease with: a stand-in for a loaded set, a host over
//! one static plugin, and the two counter designs (the graph compiler's, and a stricter one
//! that locks both ways). Shared by `benches/lease.rs` (criterion) and `benches/compare.rs`
//! (the interleaved harness) through `#[path]`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use std::hint::black_box;

use dylease::{PluginHost, Registrar};

/// What the baselines share: a stand-in for a loaded plugin set. Its contents are never read
/// on the timed paths; only the reference counts are touched, as with a real set.
pub(crate) struct Payload {
    _generation: u64,
    _data: [u64; 7],
}

pub(crate) fn payload() -> Arc<Payload> {
    Arc::new(Payload {
        _generation: 1,
        _data: [0; 7],
    })
}

extern "C" fn double(x: i32) -> i32 {
    x * 2
}

/// A host over one static plugin: no files needed.
pub(crate) fn host() -> PluginHost {
    PluginHost::builder()
        .static_plugin("bench", |reg| {
            reg.add_pass("double", double as extern "C" fn(i32) -> i32, std::ptr::null_mut())
        })
        .build()
        .expect("a host over one static plugin builds")
}

/// The upstream graph compiler's shape: an atomic user count incremented on every acquire and
/// decremented on every release; the mutex is taken only at the 0 → 1 transition (to load) and
/// at 1 → 0 (to unload). While another user holds the set, an acquire and its release are two
/// atomic read-modify-writes and no lock. (Its race, a load and an unload crossing at the
/// transitions, is the upstream's; with a user held elsewhere, as in the benches, it never
/// takes the lock.)
pub(crate) struct GeCounter {
    users: AtomicUsize,
    /// Whether the set is loaded: the stand-in for the libraries' handles.
    loaded: Mutex<Option<Arc<Payload>>>,
}

/// A user of [`GeCounter`]: releases its count on drop.
pub(crate) struct GeUser<'host> {
    host: &'host GeCounter,
}

impl GeCounter {
    pub(crate) fn new() -> GeCounter {
        GeCounter {
            users: AtomicUsize::new(0),
            loaded: Mutex::new(None),
        }
    }

    pub(crate) fn acquire(&self) -> GeUser<'_> {
        if self.users.fetch_add(1, Ordering::AcqRel) == 0 {
            self.loaded.lock().expect("not poisoned").get_or_insert_with(payload);
        }
        GeUser { host: self }
    }
}

impl Drop for GeUser<'_> {
    fn drop(&mut self) {
        if self.host.users.fetch_sub(1, Ordering::AcqRel) == 1 {
            let unloaded = self.host.loaded.lock().expect("not poisoned").take();
            drop(unloaded);
        }
    }
}

/// A stricter counter, *not* the upstream shape (the one the first editions of these benches
/// called "counter"): a user count under a mutex taken on every acquire and every release,
/// with the set in an `Arc` cloned per user, which the count's last release takes out.
pub(crate) struct LockedCounter {
    state: Mutex<LockedState>,
}

struct LockedState {
    users: usize,
    set: Option<Arc<Payload>>,
}

/// A user of [`LockedCounter`]: releases its count on drop.
pub(crate) struct LockedUser<'host> {
    host: &'host LockedCounter,
    _set: Arc<Payload>,
}

impl LockedCounter {
    pub(crate) fn new() -> LockedCounter {
        LockedCounter {
            state: Mutex::new(LockedState { users: 0, set: None }),
        }
    }

    pub(crate) fn acquire(&self) -> LockedUser<'_> {
        let mut state = self.state.lock().expect("not poisoned");
        let set = Arc::clone(state.set.get_or_insert_with(payload));
        state.users += 1;
        drop(state);
        LockedUser { host: self, _set: set }
    }
}

impl Drop for LockedUser<'_> {
    fn drop(&mut self) {
        let mut state = self.host.state.lock().expect("not poisoned");
        state.users -= 1;
        // The last user takes the set out, to drop ("unload") it outside the lock.
        let last = if state.users == 0 { state.set.take() } else { None };
        drop(state);
        drop(last);
    }
}

/// Returns a closure that applies `op` to the next item of `items` each time it is called,
/// round robin: the same loop for the hosts and for the `Arc` floor.
pub(crate) fn in_turn<'a, T>(items: &'a [T], op: impl Fn(&T) + 'a) -> impl FnMut() + 'a {
    let mut next = 0;
    move || {
        op(black_box(&items[next]));
        next += 1;
        if next == items.len() {
            next = 0;
        }
    }
}
