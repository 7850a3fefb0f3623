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
//! - In an [isolated](super::isolation) set (the `isolate` feature), a small call is 1.09× a
//!   raw socket-pair round trip with another process; 1 MiB of input goes through a shared
//!   region at 0.074× the throughput of a `memcpy` (target 0.5, not met), and acquiring,
//!   calling and dropping an isolated set of 16 is 2.7× the in-process cycle plus a bare
//!   process spawn (target 1.3×, not met): BENCHMARKS.md, "Isolated sets", says where the
//!   time goes.
//!
//! # Binary cost
//!
//! A default-features application that builds a host and acquires a lease pays **698 KiB** of
//! stripped release binary for dylease (`scripts/binary-size.sh` measures it against the same
//! program without dylease, and fails above its budget of 660 KiB, which signed plugins' share
//! of every program puts it over; CI runs it). Part by part, by the same script:
//!
//! | Program | Over the program without dylease |
//! | --- | --- |
//! | an eager set | 698 KiB, of which 41 KiB are signed plugins' (below) |
//! | an eager set and `catalog()` | +20 KiB: only a program that calls `catalog()` pays for it |
//! | an eager set and an on-demand set | +0 KiB: the on-demand judgement and first-use mapping share the load path, so every program carries them |
//! | an eager set, an on-demand set and `catalog()` | 721 KiB (budget 680 KiB) |
//! | the `watch` feature | only with the feature on (notify and the watcher thread) |
//! | signed plugins (`HostBuilder::require_signed`) | 41 KiB in every program: the verification step of the load path (out of line), `Error::Signature`, the keyring's types and the catalog's signer; the cryptography (SHA-256, Ed25519 with its base-point tables), the leases and sealed copies, only in a program that calls `require_signed`: +147 KiB |
//! | the `isolate` feature, `HostBuilder::isolated` not called | +73 KiB: the worker's side (its early hook in `.init_array`, which the linker keeps whatever calls it, and the worker's loop, mapping, shared regions and call threads): any program built with the feature can be re-run as a worker |
//! | an isolated set (`HostBuilder::isolated`) | +278 KiB: the worker's side and the host's (the spawn through `std::process::Command`, the channel and its reader thread, the frames, the dependencies' and regions' descriptors), linked only by a program that calls `isolated()` |
//!
//! Without the feature a program carries none of the worker; `Lease::call` (message passes
//! in an ordinary set) and the errors of isolated sets are in every program.
//!
//! Of the code
//! (about 412 KiB of `.text`, by `cargo bloat --release` of that program; the rest is its
//! messages, unwind tables and relocations), what each part buys:
//!
//! | Part | `.text` | What it buys |
//! | --- | --- | --- |
//! | trust check and dependency resolver (`trust`) | 48 KiB | no code another user chose runs, dependencies mapped from checked descriptors |
//! | ELF checks and the manifest reader (`dylease-elf`) | 93 KiB | no crash inside `dlopen` on a malformed or truncated file; pin prediction; the manifest, read without running the plugin (19 KiB of it) |
//! | registry, loader and platform layer (`registry`, `sys::library`, `registry::opener`, `sys`) | 51 KiB | one instance per file process-wide, the checked file mapped, unload proven |
//! | discovery, registration, pipeline, teardown, pinning, errors | 85 KiB | the load itself, and errors that name the file and the fix; the ABI gate and comparison of manifests, the catalog and the judgement of on-demand plugins |
//! | manifests on the host side, parse cache (`inspect::manifest`, `inspect::parse_cache`) | 12 KiB | what a plugin declares, compared with what it registers; unchanged files not parsed again |
//! | host (`host::*`, `sync`) | 13 KiB | lock-free `acquire`, generations, unload policies |
//! | generic and std code instantiated for dylease (sorting, formatting, collections, the on-demand state's locking) | 103 KiB | shared by all of the above |
//!
//! Manifests (the reader, the host's gate and comparison, `catalog()`), on-demand sets and the
//! parse cache account for 87 KiB of the total. It is above the 400 KiB a first release aimed
//! at: reaching that would mean dropping a part of the table (the ELF checks or the dependency
//! resolver are the large ones), which the security model needs.
//!
//! The size of the public API is counted by `scripts/public-items.py` (over `cargo doc
//! --no-deps -p dylease-plugin -p dylease -p dylease-elf`: the items of every public module,
//! with their inherent and trait methods), which prints the counts per crate.
