//! The `dylease` command's tests: the real binary, run on real C plugins (compiled by the
//! tests with the system C compiler from the root crate's `tests/plugins` and
//! `examples/plugins`), with the root crate's test support (`tests/integration/support.rs`).

// As in the root crate's integration tests: one `// SAFETY:` reason covers a block that
// vouches for this suite's own fixtures.
#![allow(clippy::multiple_unsafe_ops_per_block)]

#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(dead_code, unreachable_pub)]
#[path = "../../../tests/integration/support.rs"]
mod support;

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod attack;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod build_recipe;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod cli;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod corruption;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod dependencies;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod identity;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod inspect;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod install;
#[cfg(all(target_os = "linux", target_env = "gnu", feature = "python"))]
mod python;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod rust_plugin;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod signing;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod trust;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod wrap;
