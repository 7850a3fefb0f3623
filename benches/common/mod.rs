//! Shared by the bench binaries: a global allocator that counts allocations, so a bench can
//! prove that a hot path allocates nothing before it times it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

/// The system allocator, counting every allocation (`alloc`, `alloc_zeroed`, `realloc`).
/// The count costs one relaxed atomic add per allocation and nothing on code that does not
/// allocate, which is all the code these benches time on their hot paths.
pub(crate) struct CountingAlloc;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every method forwards to `System` with the caller's arguments unchanged; the
// counter has no effect on the memory handed out.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is `System.alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is `System.realloc`'s.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: the caller's contract is `System.dealloc`'s.
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Runs `op` `times` times and returns how many allocations the process made meanwhile.
/// Call it before any other thread of the bench is running.
pub(crate) fn allocations_in(times: u64, mut op: impl FnMut()) -> u64 {
    let before = ALLOCATIONS.load(Ordering::SeqCst);
    for _ in 0..times {
        op();
    }
    ALLOCATIONS.load(Ordering::SeqCst) - before
}

/// Asserts that `times` runs of `op` allocate nothing, and says so on stderr (criterion's
/// report goes to stdout).
pub(crate) fn assert_no_allocation(what: &str, times: u64, op: impl FnMut()) {
    let allocations = allocations_in(times, op);
    assert_eq!(
        allocations, 0,
        "{what}: {allocations} allocations in {times} runs; expected none"
    );
    eprintln!("{what}: 0 allocations in {times} runs");
}
