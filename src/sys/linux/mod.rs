//! Linux: the platform layer's functions for this platform, one file per job, re-exported
//! here as the one module that `sys` aliases as `imp`. All are safe code over `sys::raw`.
//!
//! - `loader`: the platform loader (`dlopen`, `dladdr1`, `dl_iterate_phdr`).
//! - `identity`: file identities (device and inode), and opening without following a symlink.
//! - `hold`: a file's bytes held still between their digest and their mapping (a read lease;
//!   a sealed copy in memory).
//!
//! The process's user and rights (`geteuid`, `getauxval`) are `raw`'s own, re-exported.

mod hold;
pub(crate) mod identity;
mod loader;

pub(crate) use crate::sys::raw::{effective_uid, secure_execution};
pub(crate) use hold::*;
pub(crate) use identity::*;
pub(crate) use loader::*;
