//! Isolated sets (the `isolate` feature): each set's plugins in a worker process of its own,
//! whose crash, hang or pinned library never reaches the host.
//!
//! With the crate feature `isolate` (off by default: a program built with it carries the
//! worker, see [Binary cost](super::performance#binary-cost)), `HostBuilder::isolated()` makes
//! every set (every generation) of a host run its library plugins in a worker process: one
//! worker per set. The host does everything a load does up to the mapping (discovery, the
//! trust check, the ELF and manifest checks, dependency resolution, on the one descriptor it
//! opened), then passes the checked descriptors to the worker over a Unix socket
//! (`SCM_RIGHTS`). The worker maps each by that descriptor (`/proc/self/fd/N`), never by a
//! path, and runs its constructors, `on_load` and `register_passes`: the file the worker runs
//! is the file the host checked. The set's last lease drop asks the worker to run the
//! plugins' `on_unload` hooks (in reverse load order) and exit, and reaps it. Static plugins
//! are the host's own code and stay in the host.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! // SAFETY: /opt/app/filters holds this application's filters; their faults stay in the worker.
//! let host = unsafe { dylease::PluginHost::builder().dir("/opt/app/filters") }
//!     .isolated()
//!     .call_deadline(Duration::from_secs(5))
//!     .build()?;
//! let lease = host.acquire()?; // starts the worker, which maps the filters
//! println!("worker: process {:?}", lease.worker_pid());
//! match lease.call("sanitize", b"<b>hi</b>") {
//!     Ok(output) => println!("{}", String::from_utf8_lossy(&output)),
//!     // A crash or a hang of the filter: the host goes on. This set is failed for good; once
//!     // its last lease is dropped, the next acquire() starts a fresh worker.
//!     Err(error) => eprintln!("{error}"),
//! }
//! # Ok::<(), dylease::Error>(())
//! ```
//!
//! # When to choose it
//!
//! - **Plugins you do not trust to behave**: code that may crash, `abort()`, call `exit()`,
//!   run out of memory or hang. A fault of a plugin fails its set with
//!   [`Error::WorkerFailed`](crate::Error::WorkerFailed), which names the plugin, the pass,
//!   the signal or exit status and what to do, and never the host process. A call that runs
//!   past the call deadline (`HostBuilder::call_deadline`, 30 s by default) kills the worker.
//!   The other leases of the failed set get the same error; once the last of them is dropped,
//!   the next `acquire()` starts a fresh worker.
//! - **Libraries that pin**: the platform will not unload in a process a library linked with
//!   `-z nodelete`, C++ code with GNU unique symbols (`STB_GNU_UNIQUE`: inline functions' and
//!   templates' static locals), or a library whose thread-local variables have destructors on
//!   threads still alive ([`writing_plugins`](super::writing_plugins) explains the pin
//!   prediction, `PluginInfo::pinning`). In-process, such a plugin's code stays mapped after
//!   its last lease and a reload does not bring its new code. The worker's exit ends them all:
//!   nothing of an isolated plugin is ever mapped into the host.
//! - **Libraries that clash**: two sets of one host, or two hosts, load different versions of
//!   a library with the same soname; each worker has its own.
//!
//! Dependencies work as in an ordinary set: under `TrustPolicy::Strict` the host resolves and
//! checks the libraries a plugin needs from its run path ([`sharing`](super::sharing),
//! [`trust`](super::trust)) and sends each checked descriptor, with its directory's, to the
//! worker, which maps them before the plugin, dependencies before dependents, by their names in
//! those directories (`/proc/self/fd/D/<name>`, so that `$ORIGIN` is where the host found them);
//! glibc answers the plugin's needed names with them by soname. The worker opens no path, and
//! nothing of them is mapped in the host.
//!
//! Choose an ordinary set for passes called in tight loops or with pointers into the host's
//! data (a pass over a graph the host owns): an isolated call is a round trip between two
//! processes, and only bytes cross.
//!
//! # What it costs
//!
//! Measured by `benches/compare.rs` ([`BENCHMARKS.md`], "Isolated sets"), on a 2-core guest,
//! mostly quiet:
//!
//! - **A worker per set**: its start (a worker the zygote forked ahead, the handshake) is added to the
//!   set's first `acquire()`, and the zygote's own start (the program executed and linked
//!   again, about 1 ms there) to the first isolated set of the process; the plugins' loads
//!   are sent to the worker all at once and their answers read in order, so the worker maps
//!   one while the host checks the next; the worker's unload of its plugins, its exit and
//!   its reap are added to the unload. An isolated set of 16 plugins took 2.6–3.2 ms to
//!   acquire, call once and drop: 3.1× the same cycle in the process, 1.35× that cycle plus
//!   a bare `posix_spawn` and `waitpid` (3.4–3.7 ms, 1.8×, when each worker was executed
//!   anew).
//! - **Each call is a round trip** over the worker's socket: a message each way and four
//!   wake-ups (the caller, the worker's reading thread, its call thread, the host's reader
//!   thread), plus the copies of the input and the output (for a large input, the host's copy
//!   into a shared region it keeps for the next calls, which the worker keeps mapped; for a
//!   large output of such a call, the pass's writes into the output region kept beside it,
//!   and the host's read out of it into the `Vec` it returns), instead of a direct call. A small call took about 77 µs there when its threads ran on both CPUs
//!   (about 1,800× a direct call; a raw socket-pair ping-pong with another process took
//!   3.3 µs on one CPU, 56–65 µs across the two); 4 caller threads made about 3× the calls
//!   per second of one. A call with 1 MiB of input took 4× a `memcpy` of 1 MiB: the copy into
//!   the region and the round trip.
//! - **Memory**: the worker's own address space (the program's libraries, the plugins).
//! - **Binary**: the `isolate` feature adds the worker to every program built with it, and
//!   the host's side to one that calls `isolated()`
//!   ([Binary cost](super::performance#binary-cost)).
//!
//! [`BENCHMARKS.md`]: https://github.com/dylease/dylease/blob/main/BENCHMARKS.md
//!
//! # The worker program
//!
//! By default the worker is the host's own executable (`/proc/self/exe`), with `argv[0]`
//! `dylease-worker`: every program built with the feature carries a hook in its
//! `.init_array`, which the C runtime calls before `main`. The hook recognises a worker by
//! its channel (an environment variable naming a descriptor that must be a Unix
//! `SOCK_SEQPACKET` socket, then a handshake) and runs the worker instead of the program,
//! ending with the worker's exit status: the program's `main` never runs in a worker, and in
//! any other process the hook returns at once. So a host, a downstream `cargo test` binary or
//! a benchmark gets its workers with no set-up.
//!
//! The program is not executed anew for each worker: the first isolated `acquire()` of a
//! host process starts a **zygote**, the same program in another role (the hook again,
//! recognised by another variable), which then `fork`s every worker on request (one ahead,
//! which waits for its channel, so that a start takes a worker already forked). A fork of a
//! process that ran nothing but the C runtime's start is much cheaper than loading and
//! linking the program again (about 1.1 ms of a 2.8 ms cycle for the benchmark's 2 MiB
//! program, more for a large one). The zygote is the host's child, lives as long as the host
//! process (it dies with it), serves one request at a time, and reaps the workers it forked
//! when the host asks (their process descriptors tell the host when they ended). A zygote
//! killed from outside takes its workers with it (their sets fail with `SIGKILL`); the next
//! worker comes from a new one. A child the host `fork`s gets a zygote of its own.
//! `HostBuilder::worker_command` programs are executed
//! for each worker, without a zygote.
//!
//! An operator names another program with `HostBuilder::worker_command(path)`: for a host
//! that cannot be run again (an interpreter embedding dylease through a library it loads, a
//! program that must not start twice), or to start workers through a wrapper of the
//! operator's (a sandbox, below). Any program that links dylease with the `isolate` feature
//! will do, built from the same version of dylease as the host (the handshake refuses
//! another protocol): a crate depending on `dylease` with the feature, whose `main` is
//! `std::hint::black_box(dylease::PluginHost::builder().isolated());` (it never runs). A
//! program without the hook fails the `acquire()` with
//! [`WorkerCause::Start`](crate::WorkerCause::Start), saying so.
//!
//! # What the worker inherits
//!
//! - The host's user and groups, its current directory, resource limits and cgroup, and
//!   its process group (a terminal's Ctrl-C reaches the worker too).
//! - Its standard output and error (a plugin's prints appear where the host's do); standard
//!   input is `/dev/null`.
//! - No other descriptor of the host's: only its channel, and the descriptors of the plugin
//!   and dependency files (and of their directories) and of the input regions the host
//!   sends. The zygote (or a `worker_command` program) is started by `posix_spawn`, whose
//!   file actions close every descriptor above 3 before the `exec` (with a C library that
//!   lacks that action, glibc before 2.34, a `fork` whose child makes them close-on-exec
//!   instead); a worker the zygote forks closes every descriptor but its channel.
//! - The host's environment without its `LD_*` variables (`LD_PRELOAD`, `LD_LIBRARY_PATH`,
//!   …) unless `HostBuilder::worker_env_passthrough()`, and without the channel's variable,
//!   removed as the worker starts.
//! - With a zygote, its credentials, current directory and environment are the host's when
//!   the zygote started; a host that changed any of them since (dropped a privilege, changed
//!   directory, set a variable) gets a new zygote for its next worker, so a worker always
//!   starts with the host's current ones. Its resource limits, cgroup and standard streams
//!   are the zygote's, from its start. (One zygote for the hosts that pass `LD_*` through,
//!   one for the others.)
//! - The zygote's address space layout: workers forked from one zygote share the addresses
//!   of the program and its libraries (not of the plugins, mapped after the fork).
//! - Not the host's state: the program is executed anew and its `main` never runs, so a
//!   logger the host installed is not installed in the worker (the worker's own log records
//!   go nowhere; the host logs what it learns from the worker).
//! - `PR_SET_NO_NEW_PRIVS` (no set-user-id gain through `exec`: the host's thread that
//!   spawns workers, which does nothing else, takes it before the first, and every worker
//!   inherits it), and `PR_SET_PDEATHSIG`: the worker is killed if the host process dies
//!   (the zygote's hook sets it before it reads its channel, and each worker it forks sets it
//!   against the zygote; a host that died before that closed its end of the channel, and
//!   the zygote exits on reading it).
//!
//! # It isolates faults, not privileges
//!
//! The worker runs as the host's user, with the host's rights: an isolated plugin can read
//! and write whatever the host can, open sockets, and start processes. Isolation here
//! contains a plugin's crashes, hangs, memory corruption of its own and pinned libraries; it
//! does not confine a malicious plugin. dylease applies no sandbox (no seccomp filter, no
//! namespaces): for one, run the worker under one with `worker_command` (a wrapper that sets
//! up the confinement and then runs a program with the hook, passing descriptor 3 and the
//! environment through). The trust check ([`trust`](super::trust)) still decides which files
//! are loaded at all, and a host that requires signed plugins
//! ([`HostBuilder::require_signed`](crate::HostBuilder::require_signed)) verifies them before
//! the worker is sent them: the worker maps the bytes the host verified ([`signing`](super::signing)).
//!
//! # Message passes
//!
//! A function pointer cannot cross a process: the passes a host calls in an isolated set are
//! **message passes**, bytes in and bytes out, registered under the interface
//! `dylease.message/1`. [`Lease::call(name, input)`](crate::Lease::call) calls one and
//! returns its output, in an ordinary set directly (no feature needed) and in an isolated one
//! through the worker: the same plugin file serves both. A pass appends its output through
//! the `dylease_out` it is given and returns 0, or a non-zero status of its own, which fails
//! the call with [`Error::PassFailed`](crate::Error::PassFailed) and leaves the set working.
//! In an isolated set, [`Lease::get`](crate::Lease::get), [`Lease::pass`](crate::Lease::pass)
//! and [`Lease::passes_of`](crate::Lease::passes_of) refuse a worker's plugin's passes with
//! [`LookupFailure::Isolated`](crate::LookupFailure::Isolated), saying why.
//!
//! In C, with `dylease.h` (`DYLEASE_MESSAGE_PASS` checks the signature at compile time):
//!
//! ```c
//! #include <stdint.h>
//! #include "dylease.h"
//!
//! static int32_t upper(const uint8_t *in, size_t len, dylease_out *out, void *data) {
//!     uint8_t buffer[256];
//!     size_t i;
//!     (void)data;
//!     if (len > sizeof buffer) return 2;          /* the caller gets PassFailed, status 2 */
//!     for (i = 0; i < len; i++) buffer[i] = (in[i] >= 'a' && in[i] <= 'z') ? in[i] - 32 : in[i];
//!     return out->write(out, buffer, len) == 0 ? 0 : 1;
//! }
//!
//! DYLEASE_PLUGIN("text", "1.0")
//! DYLEASE_MESSAGE_PASS("upper", upper)
//! ```
//!
//! In Rust, with [`MessagePass`](crate::MessagePass) in `export_plugin!` (a plugin crate
//! depends on `dylease-plugin` alone; `dylease` re-exports the same items):
//!
//! ```
//! use std::ffi::c_void;
//! use dylease::MessagePass;
//! use dylease::abi::dylease_out;
//!
//! /// Answers its input in upper case.
//! unsafe extern "C" fn upper(input: *const u8, len: usize, out: *mut dylease_out, _: *mut c_void) -> i32 {
//!     let input = match len {
//!         0 => &[][..],
//!         // SAFETY: the host hands `len` readable bytes at `input`.
//!         _ => unsafe { std::slice::from_raw_parts(input, len) },
//!     };
//!     // SAFETY: `out` is this call's output.
//!     if unsafe { dylease_out::append(out, &input.to_ascii_uppercase()) } { 0 } else { 1 }
//! }
//!
//! dylease::export_plugin! {
//!     name: "text",
//!     version: "1.0.0",
//!     passes: [
//!         typed MessagePass: "upper" => upper,
//!     ],
//! }
//! # fn main() {}
//! ```
//!
//! The host side is the same for both, in either kind of set:
//!
//! ```no_run
//! // SAFETY: /opt/app/text holds this application's text plugins.
//! let host = unsafe { dylease::PluginHost::builder().dir("/opt/app/text") }.isolated().build()?;
//! assert_eq!(host.acquire()?.call("upper", b"shout")?, b"SHOUT");
//! # Ok::<(), dylease::Error>(())
//! ```
//!
//! Any number of threads may call passes of one lease at once: the worker runs up to four
//! calls at a time and queues the others.
//!
//! # Limits and refusals
//!
//! - **Payloads**: a call's input, and its output, travel in the socket's message up to
//!   64 KiB, and above that in a shared memory region (`memfd_create`, sealed against any
//!   change of its size, passed beside the message). An input region is the host's: it
//!   keeps up to four of them (of up to 4 MiB each) per worker and writes each call's input
//!   through its own mapping, made before it sealed the region against any new write access
//!   (`F_SEAL_FUTURE_WRITE`: the worker can read it, never write it, whatever descriptor it
//!   opens) and against new seals; it reuses a region only once the call that used it is
//!   answered, and the worker keeps its mapping of each. A larger input gets a region of its
//!   own, sealed against writes. The worker checks the seals and that the region holds the
//!   bytes announced. With each pooled input region the host keeps an output region of the
//!   same capacity (sealed against any change of its size and of its seals, writable by the
//!   worker, never mapped by the host), handed beside the call's input: the pass's output goes
//!   straight into it while it fits, and the reply says only its length; the host checks that
//!   length against the region's capacity and reads (`pread`) exactly that many bytes once,
//!   so no byte of an earlier, longer output comes with it. An output that does not fit, or
//!   of a call whose input fit a frame, comes in a region of the worker's own, made for it;
//!   the host checks that such a region is sealed and holds exactly the bytes announced, and
//!   reads it once. A worker whose region, or length, lies is killed. Each is at most
//!   256 MiB; a larger input is refused
//!   with [`Error::CallRefused`](crate::Error::CallRefused) before anything is copied, and
//!   the set goes on.
//! - **Pointer passes** of a worker's plugins are refused (above); a static plugin's passes
//!   work as usual.
//! - **Python plugins** are refused in an isolated set
//!   ([`OpenCause::Isolation`](crate::OpenCause::Isolation)): a Python plugin runs in the
//!   host's embedded interpreter, and the worker would need an interpreter of its own (a later
//!   version). Load them in a host that is not isolated.
//! - **On-demand**: a host cannot be both `on_demand()` and `isolated()` yet: `build()` fails
//!   with [`Error::Config`](crate::Error::Config).
//! - **Platforms**: Linux only (the worker maps through `/proc/self/fd`); elsewhere
//!   `build()` fails with [`Error::Config`](crate::Error::Config).
