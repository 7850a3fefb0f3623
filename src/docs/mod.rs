//! Long-form documentation: a cookbook, a comparison, process-wide sharing, the design,
//! writing plugins, and an FAQ.
//!
//! This module holds no code; each page is a module with only documentation, so that the
//! crate root stays short and the reasoning stays findable. The examples on these pages are
//! doctests: they compile and run with `cargo test --doc`.
//!
//! - [`recipes`]: how to hold, store, share and end leases, and how to test code that uses
//!   a host.
//! - [`comparison`]: what dylease does that a plain `libloading::Library`, a global user
//!   counter or a leaked library does not.
//! - [`sharing`]: one library instance per process, shared by every host: what runs once per
//!   instance and what once per set.
//! - [`internals`]: the design, for maintainers: the invariants I1–I9, the slot protocol
//!   behind [`PluginHost::acquire`](crate::PluginHost::acquire), the registry protocol, the
//!   identity guarantee and the platform facts.
//! - [`writing_plugins`]: the C header, [`export_plugin!`](crate::export_plugin), ABI v2 and
//!   the upgrade path for v1 plugins, checking plugins with `dylease check`.
//! - [`faq`]: short answers to the questions users ask first.

pub mod comparison;
pub mod faq;
pub mod internals;
pub mod recipes;
pub mod sharing;
pub mod writing_plugins;
