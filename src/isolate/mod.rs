//! Isolated sets: a host whose sets run their plugins in a worker process
//! ([`HostBuilder::isolated`](crate::HostBuilder::isolated)).
//!
//! This room owns the worker: its start, its channel and the protocol on it, the calls of
//! message passes ([`Lease::call`](crate::Lease::call)), and the load of plugin files into a
//! worker. It calls the load pipeline up to the mapping (`Candidate::prepare`, whose checks
//! are those of every load) and, in the worker, the pipeline's mapping of a received
//! descriptor (`load::pipeline::map_received`); the host side reaches a set through
//! `LoadedPlugins::add_remote` and `LoadedPlugins::isolate`. Its `unsafe` sits in one file,
//! `sys`.
//!
//! # What an isolated set is
//!
//! Each set (each generation) of an isolated host has a worker process of its own, which
//! holds the set's library plugins: the host does everything a load does up to the mapping
//! (discovery, the trust check, the ELF and manifest checks, on the one descriptor it opened),
//! then passes the checked descriptors to the worker over a Unix socket (`SCM_RIGHTS`); the
//! worker maps each by that descriptor (`/proc/self/fd/N`, `RTLD_NOW | RTLD_LOCAL`), never by
//! a path, and runs its constructors, `on_load` and `register_passes`. The file the worker
//! runs is the file the host checked. The set's last lease asks the worker to run the
//! plugins' `on_unload` hooks (in reverse load order) and exit, and reaps it: nothing of the
//! plugins was ever mapped into the host, and nothing of them outlives the worker, whatever
//! pins a library (`-z nodelete`, a C++ GNU unique symbol, thread-local destructors).
//! Static plugins ([`HostBuilder::static_plugin`](crate::HostBuilder::static_plugin)) are the
//! host's own code and stay in the host.
//!
//! A function pointer cannot cross a process boundary: the passes a host calls in an isolated
//! set are **message passes**, bytes in and bytes out, registered under the interface
//! `dylease.message/1` (`DYLEASE_MESSAGE_PASS` in C, [`MessagePass`](crate::MessagePass) in
//! Rust). [`Lease::call`](crate::Lease::call) calls one, in an ordinary set directly and in an
//! isolated one through the worker: the same plugin file serves both. In an isolated set,
//! [`Lease::get`](crate::Lease::get), [`Lease::pass`](crate::Lease::pass) and
//! [`Lease::passes_of`](crate::Lease::passes_of) refuse a plugin's pointer passes with
//! [`LookupFailure::Isolated`](crate::LookupFailure::Isolated).
//!
//! # When to choose it
//!
//! - Plugins that may crash, abort, `exit()` or hang: a fault of a plugin fails its set
//!   ([`Error::WorkerFailed`](crate::Error::WorkerFailed), naming the plugin, the pass, the
//!   signal or exit status and what to do), never the host process. A call that runs past the
//!   [`call_deadline`](crate::HostBuilder::call_deadline) kills the worker.
//! - Plugins that the platform will not unload in-process (a library built with
//!   `-z nodelete`, C++ code with GNU unique symbols, thread-local destructors): the worker's
//!   exit unloads them all.
//! - Plugins whose libraries would clash with the host's, or with each other across sets.
//!
//! # What it costs
//!
//! - A worker process per set: its start (a `fork`, an `exec` of the program and the mapping
//!   of its libraries) is added to the set's first `acquire()`, and its exit to the unload.
//! - Each call is a round trip over a socket (a message each way, and the scheduler's wake-ups
//!   of both processes), plus the copies of its input and output, instead of a direct call.
//! - A call's input, and its output, are at most 64 KiB in this version (a larger one is
//!   refused with [`Error::CallRefused`](crate::Error::CallRefused); shared memory for large
//!   payloads is future work).
//!
//! # It isolates faults, not privileges
//!
//! The worker runs as the host's user, with the host's rights: an isolated plugin can read and
//! write whatever the host can. The worker starts with `PR_SET_NO_NEW_PRIVS` (no set-user-id
//! gain), inherits no descriptor of the host's but its standard streams (standard input is
//! `/dev/null`) and its channel, and gets none of the host's `LD_*` environment variables
//! (unless [`worker_env_passthrough`](crate::HostBuilder::worker_env_passthrough)). It is
//! killed if the host process dies. Nothing else confines it: for a sandbox, run the worker
//! under one ([`worker_command`](crate::HostBuilder::worker_command)).
//!
//! # The worker program
//!
//! By default the worker is the host's own executable, run again (`/proc/self/exe`): every
//! program that builds an isolated host carries a hook that the C runtime calls before `main`
//! (the code that spawns workers names it, so the linker keeps it), which
//! recognises a worker by its channel (an environment variable naming a descriptor that must
//! be a `SOCK_SEQPACKET` socket, then a handshake) and runs the worker instead of the
//! program, ending with the worker's exit status. So a host, a downstream `cargo test` binary
//! or a benchmark gets its workers with no set-up. A host that cannot be run again (an
//! interpreter embedding dylease through a loaded library, a program that must not start
//! twice) names another program with
//! [`worker_command`](crate::HostBuilder::worker_command): any program that links dylease
//! and names `HostBuilder::isolated` will do, built from the same version of dylease as the
//! host (the handshake refuses another protocol), for example a crate depending on `dylease`
//! whose `main` is `std::hint::black_box(dylease::PluginHost::builder().isolated());` (it never
//! runs in a worker).
//!
//! # Not yet
//!
//! This version's worker maps plugins whose dependencies are all system libraries: a plugin
//! that needs a library dylease itself maps from a checked descriptor (found through its run
//! path, under [`TrustPolicy::Strict`](crate::TrustPolicy::Strict)) is refused in an isolated
//! set with an error that says so ([`OpenCause::Isolation`](crate::OpenCause::Isolation)).
//! Python plugins, and on-demand isolated sets, are refused too. Workers are Linux only.

#[cfg(feature = "isolate")]
mod config;
#[cfg(all(feature = "isolate", target_os = "linux", not(loom)))]
pub(crate) mod frame;
#[cfg(all(feature = "isolate", target_os = "linux", not(loom)))]
mod remote;
// The platform calls of isolated sets: the worker's early hook and spawn, the channel's
// socket, and the call of a message pass (see its module documentation).
#[allow(unsafe_code)]
mod sys;
#[cfg(all(feature = "isolate", target_os = "linux", not(loom)))]
mod worker;

#[cfg(feature = "isolate")]
pub(crate) use config::{Begin, DEFAULT_CALL_DEADLINE, Isolation, supported};
#[cfg(all(feature = "isolate", target_os = "linux", not(loom)))]
pub(crate) use remote::begin;
pub(crate) use sys::call_message_pass;
