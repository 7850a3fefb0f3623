//! The inspect room: what can be read of a plugin file without running any of its code. The
//! manifest a library declares (`manifest`), the prediction of whether it will stay mapped
//! after it is closed (`pinning`), and the process's cache of both, keyed by the file's status
//! (`parse_cache`). It may call `log_scope`, `sys` and `sync` (and the shared `error`), never
//! `trust`, `registrar`, `registry`, `load`, `host` or `python`.

pub(crate) mod manifest;
// Stores nothing where there are no ELF checks (only `set_enabled` is reached there).
#[cfg_attr(not(all(unix, not(target_vendor = "apple"))), allow(dead_code))]
pub(crate) mod parse_cache;
pub(crate) mod pinning;

pub use manifest::{DeclaredPass, Manifest};
pub use pinning::{PinCause, Pinning};
