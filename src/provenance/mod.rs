//! The provenance room: whether the bytes a load is about to run are the bytes a publisher
//! the host trusts signed ([`HostBuilder::require_signed`](crate::HostBuilder::require_signed)),
//! and the kernel's promise that they stay those bytes until the loader mapped them. It may
//! call `inspect`, `log_scope`, `sys` and `sync` (and the shared `error`), never `trust` or a
//! room above it; the verification itself is `dylease-sign`'s (`Keyring`).
//!
//! - `policy`: [`Signatures`], a host's keyring and the verifications, which a load reaches
//!   through the trait object (`trust::Verifier`) that only `HostBuilder::require_signed`
//!   makes (a program that never requires signatures links no cryptography, no verification
//!   step and no keyring).
//! - `hold`: a library file held still from its digest to its mapping: a read lease on the
//!   checked descriptor, or a sealed copy in memory that the loader maps instead
//!   ([`Held`]); and a file set (a Python plugin's sources, read into memory before any of
//!   them runs) checked against its signed index.
//! - `held`: [`Provenance`], what a plugin's load holds until the mapping (its file's
//!   `Held` and its libraries').
//! - `refusal`: the errors that name the file refused, the key its signature names and the
//!   fix.
//! - `memo`: the process's memo of the Ed25519 checks that passed (`Keyring::remember_checks`),
//!   so that a library loaded again costs its digest, not a signature check.
//!
//! `docs::signing` is the user's page: the threat model, the recipes, the costs.

mod held;
mod hold;
mod memo;
mod policy;
mod refusal;

pub(crate) use held::Provenance;
pub(crate) use hold::Held;
pub(crate) use policy::Signatures;
pub(crate) use refusal::not_held;
