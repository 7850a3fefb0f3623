//! Long-form documentation: the manual behind the README.
//!
//! This module holds no code; each page is a module with only documentation, so that the
//! crate root stays short and the reasoning stays findable. The examples on these pages are
//! doctests: they compile and run with `cargo test --doc`.
//!
//! Using a host:
//!
//! - [`api`]: the API in one page: hosts and their sources, leases, typed and untyped
//!   passes, `acquire` and `acquire_timeout` (and why both), the features and how dylease's
//!   version follows pyo3's, the limits, and the errors.
//! - [`recipes`]: how to hold, store, share and end leases, and how to test code that uses
//!   a host.
//! - [`reload`]: reloading while leases are held, the unload policies, `watch`, installing
//!   by rename, descriptors, and `fork`.
//! - [`on_demand`]: sets that judge every plugin at `acquire()` and map one only on first
//!   use.
//! - [`manifests`]: what a plugin declares in its file, read without running it, and
//!   [`PluginHost::catalog`](crate::PluginHost::catalog).
//! - [`python`]: Python plugins (the `python` feature).
//! - [`isolation`]: isolated sets (the `isolate` feature): each set's plugins in a worker
//!   process, whose crash, hang or pinned library never reaches the host; message passes.
//! - [`observability`]: the log, [`Stats`](crate::Stats), waiting for an orderly unload.
//! - [`faq`]: short answers to the questions users ask first.
//!
//! Why and how it holds:
//!
//! - [`comparison`]: what dylease does that a plain `libloading::Library`, a global user
//!   counter or a leaked library does not.
//! - [`sharing`]: one library instance per process, shared by every host: what runs once per
//!   instance and what once per set; dependencies.
//! - [`trust`]: what is checked before a plugin's code runs, in order; the file-identity
//!   guarantee; what dylease cannot do; installing by rename.
//! - [`signing`]: signed plugins (`HostBuilder::require_signed`): the threat model next to
//!   ownership trust, the bytes held still from digest to mapping, signing in a CMake or Cargo
//!   build, and the cost.
//! - [`testing`]: each promise and the test or model that checks it, the loom models, the
//!   memory checks, the tests that need root, and the platforms.
//! - [`performance`]: what a lease, a load and the crate's binary cost, and how it is
//!   measured.
//! - [`internals`]: the design, for maintainers: the invariants I1–I9, the slot protocol
//!   behind [`PluginHost::acquire`](crate::PluginHost::acquire), the registry protocol, the
//!   identity guarantee and the platform facts.
//!
//! Writing plugins:
//!
//! - [`writing_plugins`]: the C header and build recipe, [`export_plugin!`](crate::export_plugin),
//!   ABI v2 and the upgrade path for v1 plugins, the pin prediction, the examples.
//! - [`cli`]: the `dylease` command: `check`, `inspect`, `install`, `header`, `keygen`,
//!   `sign`, `verify`.

pub mod api;
pub mod cli;
pub mod comparison;
pub mod faq;
pub mod internals;
pub mod isolation;
pub mod manifests;
pub mod observability;
pub mod on_demand;
pub mod performance;
pub mod python;
pub mod recipes;
pub mod reload;
pub mod sharing;
pub mod signing;
pub mod testing;
pub mod trust;
pub mod writing_plugins;
