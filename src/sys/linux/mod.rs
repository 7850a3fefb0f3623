//! Linux: the platform layer's functions for this platform, one file per job, re-exported
//! here as the one module that `sys` aliases as `imp`.
//!
//! - `loader`: the platform loader (`dlopen`, `dladdr1`, `dl_iterate_phdr`).
//! - `rights`: the process's user and rights (`geteuid`, `getauxval`).
//! - `identity`: file identities (device and inode), and opening without following a symlink.
//! - `hold`: a file's bytes held still between their digest and their mapping (a read lease;
//!   a sealed copy in memory).

mod hold;
pub(crate) mod identity;
mod loader;
mod rights;

pub(crate) use hold::*;
pub(crate) use identity::*;
pub(crate) use loader::*;
pub(crate) use rights::*;
