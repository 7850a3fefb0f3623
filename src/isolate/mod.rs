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
//! The user's page is [`docs::isolation`](crate::docs::isolation): what an isolated set is,
//! when to choose it, what it costs, the worker program, what the worker inherits, message
//! passes and the limits. The protocol is in `frame`; the host's side (the worker, its reader
//! thread, the load) in `remote`, over `table` (the requests in flight and the worker's end,
//! which the loom models check); the worker's in `worker`; the process that forks workers,
//! and the host's requests to it, in `zygote`; every `unsafe` (the early hook, the spawn and
//! the fork, the socket, the call of a message pass) in `sys`.
//!
//! Only `sys::call_message_pass` (an ordinary set's `Lease::call`) is compiled without the
//! crate feature `isolate`; the rest needs it, and the worker's process code (`frame`,
//! `remote`, `worker`, `zygote`, `sys::process`) needs Linux too and is left out under
//! `--cfg loom`.

#[forbid(unsafe_code)]
#[cfg(feature = "isolate")]
mod config;
#[forbid(unsafe_code)]
#[cfg(all(feature = "isolate", target_os = "linux", not(loom)))]
pub(crate) mod frame;
#[forbid(unsafe_code)]
#[cfg(all(feature = "isolate", target_os = "linux", not(loom)))]
mod remote;
// The set's side of the protocol (the requests in flight, the worker's end), which the loom
// models drive.
#[forbid(unsafe_code)]
#[cfg(feature = "isolate")]
#[cfg_attr(not(all(target_os = "linux", not(loom))), allow(dead_code))]
mod table;
// The platform calls of isolated sets: the worker's early hook and spawn, the channel's
// socket, and the call of a message pass (see its module documentation).
#[allow(unsafe_code)]
mod sys;
#[forbid(unsafe_code)]
#[cfg(all(feature = "isolate", target_os = "linux", not(loom)))]
mod worker;
#[forbid(unsafe_code)]
#[cfg(all(feature = "isolate", target_os = "linux", not(loom)))]
mod zygote;

#[cfg(feature = "isolate")]
pub(crate) use config::{Begin, DEFAULT_CALL_DEADLINE, Isolation, supported};
#[cfg(all(feature = "isolate", target_os = "linux", not(loom)))]
pub(crate) use remote::begin;
pub(crate) use sys::call_message_pass;
