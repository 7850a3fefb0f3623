//! Testing: what is guaranteed and how each promise is checked, the test commands, the loom
//! models, the memory checks, and the platforms.
//!
//! The repository's [`TESTING.md`](https://github.com/dylease/dylease/blob/main/TESTING.md)
//! says how the suite is built (bounded waits, forced races, faults injected), which planted
//! bugs each test catches, and the latest mutation-testing table. To test code of your own
//! that uses a host, see [`recipes`](super::recipes#testing-a-host-with-static-plugins).
//!
//! # Running the tests
//!
//! ```sh
//! cargo test --workspace                       # unit, integration (one binary of modules), doc tests
//! cargo test --workspace --tests -- --ignored  # the tests that need root (CI runs as root)
//! loom-tests/run.sh                            # the loom models
//! scripts/memcheck.sh                          # valgrind
//! ```
//!
//! Besides Rust, the tests need the C and C++ compilers (`cc`, `c++`: the tests compile their
//! plugins), CMake and pkg-config (the build-recipe tests), and LLD (`ld.lld`: one ELF-layout
//! test links with it); on Debian or Ubuntu, `apt-get install gcc g++ cmake pkg-config lld`.
//! On Linux glibc they prove unloading through `/proc/self/maps` and the loader's list; they
//! include the tests of the `dylease` command (the workspace's `dylease-cli` crate). The
//! Python passes build and test separately ([`python`](super::python#building-and-testing)).
//!
//! # Tests that need root
//!
//! The tests that plant files as another user, or run a child process as one, need root:
//! they are `#[ignore = "needs root"]`, run by CI as root with `-- --ignored`, and fail, not
//! skip, without root. Those that run a child as uid 65534 (`nobody`) need that user to reach
//! the test binary and its fixtures, which live in the checkout's `target/`: every directory
//! from `/` down to the checkout must be traversable by other users (`o+x`). A clone made
//! under a directory only its owner may enter (a `mkdtemp` directory, mode 0700) is not: such
//! a test then fails before starting its child, naming the first directory on the way that
//! others cannot traverse and the fix, `chmod o+x DIR`, or clone the repository under a
//! directory others can traverse (as a clone under `/tmp` is).
//!
//! # What is guaranteed, and how it is checked
//!
//! | Promise | Checked by |
//! | --- | --- |
//! | One generation at a time: a new load starts only after the previous unload finished | loom model 2; a deterministic test with a lingering unload hook; the eight-thread churn test (thousands of generations of real C plugins, each of which must have registered exactly once in its own mapping) |
//! | A lease never sees an unloading set | loom models 2 and 4; the slot never hands out a set whose lease count reached zero (as `Weak::upgrade`); eight-thread test |
//! | The last lease's drop unloads before it returns | loom model 3; `session_and_compiler::` tests: the library leaves `/proc/self/maps` and `on_unload` ran exactly once |
//! | A failed load leaves nothing loaded and the host usable | loom model 5; failure at the 3rd of 5 plugins: none mapped, then success once fixed |
//! | No deadlock: a nested `acquire()` from plugin code returns `Error::Reentrant` | loom model 6; static-plugin tests from register and unload hooks |
//! | Registration per load, even when the platform did not unmap | a `-z nodelete` plugin registers again in generation 2 |
//! | One library instance per process: two hosts over one directory never unload what the other uses | two hosts sharing a stateful C plugin (state freed in `on_unload`): 20 single-op cycles of one host while the other holds a lease, both orders of leaving; four threads churning two hosts (no pass sees torn-down state, set-ups equal tear-downs); loom registry models with a model of the platform loader (I1, I7) |
//! | `on_load` state is fresh in every instance, even in a pinned library | a `-z nodelete` v2 plugin: state made in `on_load` is fresh in generations 1, 2 and 3 on one mapping |
//! | On-demand sets map a plugin once per set, on first use, and unload it with the set | the on-demand loom model; `on_demand::` tests: nothing in `/proc/self/maps` after `acquire()`, one plugin after one `get`, two threads' first use behind a barrier register once, a file replaced after the acquire is refused with none of its code run, a failed mapping is kept |
//! | An isolated set's calls always return, and its worker ends once | the isolated loom models (below); `isolated::` tests: a pass that segfaults, aborts, exits, hangs past the deadline or whose worker is killed from outside fails its calls and never the host; a worker that breaks the protocol or whose shared region lies is killed; the worker is reaped after the set's last lease (`/proc/<pid>` gone, no child left to wait for) |
//! | The entry point must be the library's own | a library without one that links against a plugin is `MissingEntry`; under `SkipFailed` the plugin registers and unloads once |
//!
//! Unloading is proven, never assumed: a zero from `dlclose` proves nothing, so the tests
//! look at the kernel's mappings and at `dlopen(path, RTLD_NOLOAD)`, each test on its own
//! copies of the library files. Real unmapping is asserted on Linux glibc only; musl never
//! unmaps, macOS often does not, and libraries pinned by `-z nodelete` or thread-local
//! destructors stay mapped (dylease still registers their passes correctly on the next load).
//! Each refusal of [`trust`](super::trust) is a test too.
//!
//! # Model checking
//!
//! The promise is a concurrency promise, so it is checked exhaustively, not only by stress
//! tests. `loom-tests/` runs the crate's real code, built with `--cfg loom`, through every
//! interleaving of small scenarios up to a preemption bound, with loom's types behind every
//! atomic, lock, condition variable and thread-local of the crate (they all come from one
//! shim, `src/sync/`). loom has no `Weak`, so under loom the shim supplies an `Arc`/`Weak`
//! pair built from loom atomics that follows std's algorithm step for step, with loom's
//! `UnsafeCell` around the value: loom checks that a set's construction and its drop are
//! ordered with every lease's access to it. loom cannot see inside arc-swap, so under loom the
//! host slot is a loom `Mutex<Weak>` (arc-swap's own tests cover arc-swap), and the thread
//! cache uses `loom::thread_local!`. `dlopen` cannot run under loom: the library registry is
//! generic over its opener, and its models (`src/registry/mod.rs`) use a model of the
//! platform loader that counts handles per mapping and checks the plugin state `on_load` and
//! `on_unload` manage.
//!
//! ```sh
//! loom-tests/run.sh                          # CI: LOOM_MAX_PREEMPTIONS=4
//! LOOM_MAX_PREEMPTIONS=5 loom-tests/run.sh   # before a release
//! ```
//!
//! | Model | Asserts |
//! | --- | --- |
//! | 1. two threads race the first `acquire()` | exactly one load; both leases share the set |
//! | 2. the last lease drops while another thread acquires | I1 (a load starts only after the previous unload finished) and I2 (no lease sees an unloading set); both sharing generation 1 and loading generation 2 must occur |
//! | 3. three threads clone and drop leases of one set | I3: exactly one unload, after the last drop |
//! | 4. `WeakLease::upgrade` races the last drop | a live lease or `None`, never an unloading set (both outcomes must occur) |
//! | 4b. a weak lease of generation 1 races the last drop of generation 2, the host already dropped | the stale weak lease never upgrades nor takes a share of generation 2, so the last drop unloads before it returns (I3) |
//! | 5. a failing load races another `acquire()` | I5: nothing stays loaded, the retry succeeds |
//! | 6. nested `acquire()` from registration and from an unload hook | I4: `Error::Reentrant`, and the model finishes (no deadlock) |
//! | 7. this thread's cached generation 1 races its last drop on another thread and a third thread's load of generation 2 | I1, I2: the cached `Weak` is used only while current and alive; both outcomes must occur |
//! | 8. `reload()` races the last drop of generation 1 and an `acquire()` | I2 per generation (several are alive at once under reload), the reload's or a newer generation is current, every generation unloads exactly once; both sharing the reload's generation and loading another must occur |
//! | 9. a failing `reload()` races `acquire()` | I5: the current generation stays current and loaded |
//! | 10. a thread reads the current generation while a `reload()` publishes generation 2, generation 1 still draining | a thread that saw generation 2 current never gets a lease of generation 1 (the slot's `Weak` is published before the generation number); both readings must occur |
//! | 11. two `reload()`s race under `UnloadPolicy::WithHost` | whichever reaches the host's own lease last, the host keeps the newest generation and the older one unloads with its last lease (I3) |
//! | registry: two hosts open, use and release one file | I1 (never opened while an instance of it unloads), I7 (one `on_load` and one `on_unload` per instance, never over live state) |
//! | registry: one host's last release races the other host's open | I1, I7, every handle closed |
//! | registry: one host holds the instance while the other cycles | the other's sets share it: no `on_unload` under a holder |
//! | on-demand: two threads' first use of one unmapped plugin of one set (`src/load/demand.rs`, the set's real map-once state, once-set callables and teardown list; the mapping step a model's) | it is mapped once and its `on_load` runs once, both threads see its callable, and it unloads once, with the set |
//! | isolated sets: two calls in flight, the worker living, dying in a call or killed from outside, and the set's last lease dropped by either caller (`src/isolate/table.rs`, the set's real table of requests and the worker's end; the worker and the channel a model's) | every call returns, answered with its own answer or failed with the worker's signal, later calls fail at once; the worker ends once and the unload, once, sees its end |
//!
//! The invariants I1–I9 are defined in [`internals`](super::internals). Each model runs in a
//! process of its own, so a model that fails (or aborts, as loom failures can) does not keep
//! the models after it from running; the script lists every failed model. It also proves that
//! the models can fail. Each planted bug is a patch, `scripts/planted/<name>.patch`: the
//! script copies the working tree to `target/loom/planted/<name>`, applies the patch there
//! (`git apply scripts/planted/<name>.patch`), rebuilds the models with `--cfg loom` and
//! requires the model that guards against the bug to fail with the violation it asserts:
//!
//! - `upgrade`: a loom `Weak::upgrade` that checks for zero and then increments; model 2
//!   fails (loom reports the set being read while it is dropped, or I1/I2 fails).
//! - `registry`: a registry that does not wait for a busy file; a registry model fails with
//!   an I1 or I7 violation.
//! - `identity`: a loader that maps the file the path names, not the checked descriptor's;
//!   the rename model fails with I9.
//! - `on_demand`: a first use that maps without the set's guard; the on-demand model fails.
//! - `publication`: a generation number stored and read `Relaxed`; model 10b fails.
//! - `isolate`: an isolated worker's end that wakes none of the calls and the unload waiting
//!   for it; the isolated models fail (loom reports the deadlock).
//!
//! The shipped source holds none of them. Weakening any other ordering of the lease count
//! (the Release that publishes a new set, the Acquire fence before a set is dropped),
//! removing the wait for the previous unload, or letting a weak lease upgrade without its
//! generation's tag also makes a model fail (checked by hand when the models were written;
//! the patches above are the ones run every time).
//!
//! Code of your own that holds leases can be model-checked the same way
//! ([`recipes`](super::recipes#model-checking-your-own-code-with-loom)).
//!
//! # Memory checks
//!
//! `scripts/memcheck.sh` runs the eight-thread churn test (`DYLEASE_CHURN_ROUNDS` rounds, 500 by default) and
//! the session-and-compiler tests under valgrind memcheck: any memory error and any definite
//! leak fails the run. CI runs it after the tests. With `--asan` it then runs them again under
//! AddressSanitizer (1000 rounds), which needs a nightly toolchain (`-Zsanitizer`); without one that part is
//! skipped with a message. The C test plugins are not instrumented. `--tsan` runs the thread
//! and static-plugin tests under ThreadSanitizer (a nightly with `rust-src`, for
//! `-Zbuild-std`, so that std is instrumented too), and `--miri` runs the static-plugin tests
//! under Miri (`cargo +nightly miri`); each is skipped with a message when its toolchain is
//! missing. ThreadSanitizer does not model fences: a hand-written reference count that follows
//! std's `Arc` (a Release decrement, then an Acquire fence) must switch to an Acquire load
//! under `cfg(sanitize = "thread")`, as std's does, or TSan reports false races.
//!
//! ```sh
//! bash scripts/memcheck.sh                 # valgrind (installed with apt-get if missing)
//! bash scripts/memcheck.sh --asan          # valgrind, then AddressSanitizer
//! bash scripts/memcheck.sh --tsan --miri   # valgrind, then ThreadSanitizer and Miri
//! ```
//!
//! On Debian 12 (glibc 2.36, valgrind 3.19) both parts are clean: valgrind reports
//! `ERROR SUMMARY: 0 errors from 0 contexts` and `definitely lost: 0 bytes in 0 blocks` after
//! thousands of generations (how many depends on the scheduling), and AddressSanitizer reports
//! nothing.
//!
//! # Platforms
//!
//! - **Tested** (every test, CI): Linux with glibc on x86_64. Unloading is proved there
//!   through `/proc/self/maps` and `RTLD_NOLOAD`, and the real-library tests need glibc's
//!   loader. `scripts/package-check.sh` also runs the tests and the demo from the published
//!   `.crate` alone, unpacked outside the repository (CI runs it).
//! - **Type-checked only**: `scripts/cross-check.sh` runs `cargo +nightly check -Zbuild-std`
//!   for the host library and the plugin-side crate `dylease-plugin` on
//!   `x86_64-pc-windows-msvc`, `x86_64-apple-darwin` and `aarch64-unknown-linux-musl`, and for
//!   the `dylease` tool on macOS. It needs a nightly with `rust-src` (or the target's standard
//!   library installed) and fails for a target it cannot check; CI calls it with
//!   `--available`, which checks what the machine's toolchains can and names every target it
//!   did not check. Compiling there says nothing about behaviour: on Windows the trust check
//!   checks nothing, and musl and macOS keep many libraries mapped
//!   ([`trust`](super::trust), step 8).
//! - Elsewhere: untested and unchecked.
