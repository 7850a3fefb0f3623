//! Performance and binary cost: what a lease, a load and the crate itself cost, and how to
//! measure it again.
//!
//! # What the operations cost
//!
//! Ratios from `scripts/bench.sh`, which runs the interleaved harness `benches/compare.rs`:
//! the arms being compared alternate in rounds inside one process, each ratio is taken per
//! round, and two-thread figures count only rounds in which both threads really ran. Medians
//! of five runs on a 2-core VM; the repository's
//! [`BENCHMARKS.md`](https://github.com/dylease/dylease/blob/main/BENCHMARKS.md) has every
//! run's ratio, the method and the diagnostics.
//!
//! - A hot `acquire()` (a lease alive elsewhere) hits a per-thread cache: about 2.5 ns more
//!   than an `Arc` clone and drop (6.3 ns against 3.8 ns on one thread: 1.71× on an AMD EPYC
//!   VM, whose atomic operations are cheap; 1.18× on an Intel Xeon VM, where the same few ns
//!   come on top of a 17.5 ns floor); the host's `ArcSwapWeak` slot it skips costs 1.5× as
//!   much. Up to 8 hosts used in turn cost what one does; from the 9th the 8-entry cache
//!   misses and each acquire costs 3.0× (lock-free, no allocation, flat to 64 hosts). A shared
//!   counter in the graph compiler's shape (an atomic count, a mutex only at 0 ↔ 1) is a
//!   little cheaper (0.82× dylease) and breaks the day one caller forgets a call.
//! - A lease clone costs what an `Arc` clone costs. None of these allocate (checked with a
//!   counting allocator). A pass lookup is one hash lookup (`cargo bench --bench pass_lookup`
//!   times it against a `HashMap`).
//! - A cold load and unload of 16 unchanged C plugins with every check on is 1.46× raw
//!   `dlopen` + `dlsym` + `dlclose` through libloading (1.40× without the trust check): their
//!   parses (ELF check, linkage, manifest, pin prediction) come from the parse cache, and each
//!   file is opened once. Mapping the checked descriptor through `/proc/self/fd` alone is
//!   1.12×; the first-ever load, every file new, is 2.28× (BENCHMARKS.md, "The parse cache").
//! - An [on-demand](super::on_demand) host over 256 plugins, of which a single-operator
//!   compile uses one pass, acquires, calls and releases in 0.048× the time of an eager host
//!   (0.99 ms against 20 ms; the target was 1/20); `catalog()` of the 256 costs 0.11× loading
//!   them.
//! - A changed reload of 16 plugins, the old generation's drain included, is 1.14× a cold
//!   load on tmpfs and 2.61× on ext4, where the drain, which frees the replaced files' inodes,
//!   is 57% of it.
//! - In an [isolated](super::isolation) set (the `isolate` feature), a small call is a round
//!   trip of four wake-ups, 1.3–1.7× a raw socket-pair ping-pong with another process when
//!   that crosses the two CPUs and about 20× when it stays on one; 1 MiB of input goes
//!   through a reused shared region at 0.25× the throughput of a `memcpy` (target 0.5, not
//!   met: the round trip alone is about twice the copy), and acquiring, calling and dropping
//!   an isolated set of 16, its worker forked by the zygote, is 1.35× the in-process cycle
//!   plus a bare process spawn (target 1.3×, not met; 1.8× when each worker was executed
//!   anew): BENCHMARKS.md, "Isolated sets", says where the time goes.
//!
//! # Binary cost
//!
//! A default-features application that builds a host and acquires a lease pays **652 KiB** of
//! stripped release binary for dylease (`scripts/binary-size.sh` measures it against the same
//! program without dylease, and fails above its budget of 657 KiB; CI runs it). Part by part,
//! by the same script:
//!
//! | Program | Over the program without dylease |
//! | --- | --- |
//! | an eager set | 652 KiB (budget 657 KiB), of which about 19 KiB are signed plugins' share of every program (below) |
//! | an eager set and `catalog()` | +20 KiB: only a program that calls `catalog()` pays for it |
//! | an eager set and an on-demand set | +27 KiB: only a program that calls `HostBuilder::on_demand` pays for it (the judgement at the load, the map-once state, the first use's mapping): the builder stores the function that starts it, and nothing else names it |
//! | an eager set, an on-demand set and `catalog()` | 702 KiB (budget 707 KiB) |
//! | a host that requires signatures (`HostBuilder::require_signed`) | +171 KiB: the verification (SHA-256, Ed25519 with its base-point tables, the keyring), the read leases and sealed copies, and the load's verification of each library and its dependencies, reached only through the trait object the builder stores (`trust::Verifier`), whose vtable nothing else makes |
//! | the `watch` feature | only with the feature on (notify and the watcher thread) |
//! | the `isolate` feature, `HostBuilder::isolated` not called | +100 KiB: the worker's side (its early hook in `.init_array`, which the linker keeps whatever calls it, the zygote's loop, its forks and its spare, and the worker's loop, mapping, shared regions and call threads): any program built with the feature can be re-run as a zygote or a worker |
//! | an isolated set (`HostBuilder::isolated`) | +351 KiB: the worker's side and the host's (the zygote's start through `posix_spawn`, or `std::process::Command` where the C library lacks its close-from action, the requests to it, the channel and its reader thread, the frames, the dependencies' and regions' descriptors), linked only by a program that calls `isolated()` |
//!
//! Since the figures before them (627 KiB, 672 KiB, +73 KiB and +279 KiB), the eager and
//! three-part programs grew by 6 KiB with the move of `unsafe` into the platform layer's
//! small safe functions and the typed lookup of message passes (not yet traced further), and
//! the isolate parts by 16 KiB and 46 KiB over the same merges (the reused input regions,
//! the `posix_spawn` start and the pipelined map requests among them); the zygote (with its
//! context check and its spare) added 8 KiB and 31 KiB to them.
//!
//! Signed plugins' share of every program, about 19 KiB of the 652 (by the same program
//! built from the tree before signed plugins, unstripped, compared symbol by symbol, and with
//! `Error::Signature`'s `refusal` typed as a boxed `dyn Error` for the experiment): about
//! 5 KiB are `Error::Signature` (its `Debug`, which reaches `dylease-sign`'s `Cause` and
//! `KeyId`, its teardown, their unwind tables), kept typed so that a caller reads the
//! refusal's file and cause without a downcast; the other 14 KiB are the load path's questions
//! (whether a host requires signatures, the sealed copy a dependency or a plugin is mapped
//! from, what a load holds until its mapping: `Provenance`, dropped through a vtable; the
//! fields of `HostBuilder`, `LoadConfig` and the trust checks) and, mostly, the code and unwind
//! tables of the functions those lines are in, which the compiler inlines and lays out
//! otherwise (the largest growths, symbol by symbol: `load::plan`, `Candidate::open`,
//! `log_scope::warn_once`, about 1 KiB each), not traced further. The cryptography, the
//! holds and the verification itself are in none of it.
//!
//! Without the feature a program carries none of the worker; `Lease::call` (message passes
//! in an ordinary set) and the errors of isolated sets are in every program. The script also
//! fails if a program that uses `catalog()` or an on-demand set is not larger than the eager
//! one by at least 4 KiB, or one that calls `require_signed` by at least 64 KiB (its
//! cryptography alone is more): the eager program would then carry that part unused.
//!
//! Of the eager program's code (about 480 KiB of `.text` over the program without dylease,
//! by `cargo bloat --release` of both, grouped by crate and module; the rest is its messages,
//! unwind tables and relocations), what each part buys:
//!
//! | Part | `.text` | What it buys |
//! | --- | --- | --- |
//! | trust check, dependency resolver and discovery (`trust`) | 59 KiB | no code another user chose runs, dependencies mapped from checked descriptors |
//! | ELF checks and the manifest reader (`dylease-elf`) | 97 KiB | no crash inside `dlopen` on a malformed or truncated file; pin prediction; the manifest, read without running the plugin (13 KiB of it), in either byte order; the fingerprint that holds the parse cache to the bytes it parsed (4 KiB) |
//! | registry, loader and platform layer (`registry`, `sys`) | 47 KiB | one instance per file process-wide, the checked file mapped, unload proven |
//! | registration, pipeline, teardown, pinning, errors (`load`, `registrar`, `inspect::pinning`, `error`, `log_scope`) | 52 KiB | the load itself, and errors that name the file and the fix; the ABI gate and comparison of manifests |
//! | manifests on the host side, parse cache (`inspect::manifest`, `inspect::parse_cache`) | 15 KiB | what a plugin declares, compared with what it registers; unchanged files not parsed again |
//! | host (`host::*`, `sync`) | 14 KiB | lock-free `acquire`, generations, unload policies |
//! | generic code instantiated in dylease (drop glue, hash maps, sorting, iterators, formatting) | 119 KiB | shared by all of the above |
//! | the standard library's code that only dylease uses (threads, file-system calls, formatting of numbers and durations, hashing) | 64 KiB | as above |
//!
//! The three-part program (694 KB, 678 KiB) is above the 600 KB aimed at for it. What keeps
//! it there is the eager load's own code, which every program needs: the ELF checks and the
//! dependency resolver are the large parts, and the security model needs both. The largest
//! duplicates left are the registry's two instantiations (its opener of plugins and its
//! opener of dependencies, about 10 KiB) and the drop glue of `Error`, of which each codegen
//! unit of the crate has its own copy.
//!

//! The size of the public API is counted by `scripts/public-items.py` (over `cargo doc
//! --no-deps -p dylease-plugin -p dylease -p dylease-elf`: the items of every public module,
//! with their inherent and trait methods), which prints the counts per crate.
