//! dylease compared with the usual ways of sharing plugins inside one process.
//!
//! The situation: several independent parts of one program (a long-lived graph session, a
//! short single-operator compile, a command-line tool) use the same dynamically loaded
//! plugins, and each plugin may keep state that its unload code frees. The alternatives:
//!
//! - **a plain `libloading::Library` per user**: each part opens the library itself, fills
//!   its own pass table from it, calls the plugin's unload function and closes it when done;
//! - **process-wide `load()` / `shutdown()`**: each part calls `load()` at start and a
//!   shared `shutdown()` at end (what the graph compiler that motivated this crate did);
//! - **a global user counter**: `load()` increments, `release()` decrements, the last one
//!   unloads (the upstream fix);
//! - **leaking the library**: load once, never close (`mem::forget`, `RTLD_NODELETE`).
//!
//! | | plain `Library` per user | `load()` / `shutdown()` | global user counter | leaking the library | dylease |
//! | --- | --- | --- | --- | --- | --- |
//! | One part finishes while another still uses the plugins | the loader's own count keeps the mapping, but the finishing part's unload call frees state the other's passes still read | the first `shutdown()` unloads under the others: the bug this crate exists for | safe while every caller is perfect | safe | safe: unload is the drop of the last lease, and a lease cannot be dropped twice |
//! | A forgotten or doubled call | — (`Drop` closes) | unloads too early, or never | one missed decrement leaks for ever; one extra unloads under a user | — | impossible: there is no call; the compiler tracks the leases |
//! | Two components each build a host (or a loader of their own) over one directory | each part's unload call frees the other's state; the second is a double free | each component's shutdown unloads the other's plugins | one counter per component: the first to reach zero unloads under the other (dylease's first edition had this bug) | safe | safe: one library instance per process, found by the loader's handle; `on_load` once, `on_unload` after the last set of any host ([`sharing`](super::sharing)) |
//! | A library the platform keeps mapped (`-z nodelete`, GNU unique symbols of a C++ build, a C++ `thread_local`, musl) | constructors do not run again: state they made is gone after the first unload | as for a plain `Library` | as for a plain `Library` | never unloads, so nothing is lost | `on_load` runs for every new instance, mapped afresh or not, and every set registers its passes afresh; pinned libraries are predicted from the file ([`PluginInfo::pinning`](crate::PluginInfo::pinning)), logged once with the cause and the fix, and counted ([`Stats::pinned_libraries`](crate::Stats::pinned_libraries)) |
//! | Does it ever unload? | yes, per handle | yes, at the first `shutdown()` | yes, if every call is right | never: no `on_unload`, no reload of a rebuilt plugin | yes, when the last lease drops; the next `acquire()` loads a new generation |
//! | Cost of a use | a `dlopen` and a registration per user | none | an atomic or a lock per use | none | while a set is loaded, a lock-free `acquire()`: a generation check and one compare-and-swap (`BENCHMARKS.md` has the measured ratios to an `Arc` clone) |
//!
//! Leaking is the simplest choice when plugins never need unloading and never hold state
//! that must be released: no unload can go wrong if none happens. dylease is for the other
//! case: plugins that must be unloaded (to free memory or devices, to pick up a rebuilt
//! library, to finalise something plugin code calls into) while any number of independent
//! users come and go.
