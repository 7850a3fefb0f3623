//! The sys room, the platform layer: every call into the platform loader, the C library and
//! CPython that the crate makes, one module per platform behind one alias, `imp` (as
//! libloading's `os::unix` and `os::windows`). It may call `sync` (and the shared `error`),
//! nothing else of the crate. The rest of the crate calls these functions and keeps no `cfg`
//! of its own for them.
//!
//! The `unsafe` of the FFI sits in three files, each allowed it on its declaration below:
//! `raw` (the C library's and the loader's calls), `library` (opening a library and calling
//! its functions) and `python` (CPython's). The others are safe code over them.
//!
//! - `id`: [`FileId`], a file's (dev, ino).
//! - `raw`: the raw calls, wrapped in safe functions where the call is safe to wrap.
//! - `library`: an open plugin library over `imp` and `raw`: `Library::open` (`dlopen`), its
//!   entry point (`dlsym`), the plugin's own functions it returns (`register_passes`,
//!   `on_load`, `on_unload`), and `close` (`dlclose`).
//! - `linux`, one file per job: `loader`, the loader is given the checked descriptor
//!   (`/proc/self/fd/N`: I9 and "The identity guarantee" in `docs::internals`), told where it
//!   mapped a library (its `link_map`) and asked whether a closed library stayed
//!   (`dl_iterate_phdr`); `identity`, a file's (dev, ino) and opening without following a
//!   symlink.
//! - `other`: every other platform: the loader is given the file's path, and what the
//!   platform cannot tell is `None`.
//! - `walk`: the `openat` walk of the trust check, on Unix.
//! - `python` (the `python` feature): detaching a thread from CPython's interpreter while
//!   dylease waits.

#[forbid(unsafe_code)]
mod id;
// The platform's raw calls (see above).
#[allow(unsafe_code)]
pub(crate) mod library;
#[forbid(unsafe_code)]
#[cfg(target_os = "linux")]
pub(crate) mod linux;
#[allow(unsafe_code)]
pub(crate) mod raw;
#[cfg(target_os = "linux")]
pub(crate) use linux as imp;
#[forbid(unsafe_code)]
#[cfg(not(target_os = "linux"))]
pub(crate) mod other;
#[cfg(not(target_os = "linux"))]
pub(crate) use other as imp;

#[cfg(feature = "python")]
#[allow(unsafe_code)]
pub(crate) mod python;
#[forbid(unsafe_code)]
#[cfg(unix)]
pub(crate) mod walk;

pub(crate) use id::FileId;
pub(crate) use imp::{Identity, checked_identity, file_id, identity, is_replacement, no_follow};

/// Every wait of dylease on one of its condition variables: `wait` (which releases the lock,
/// waits and takes the lock back) runs with this thread detached from the Python interpreter
/// if it is attached, and the lock is taken again (`lock`) only once the thread is attached
/// again (`python::wait_detached`: the GIL, then dylease's locks); without the `python`
/// feature it just waits. The caller looks at the state again after it, as after any wake-up.
pub(crate) fn wait_detached<G>(wait: impl FnOnce() -> G, lock: impl FnOnce() -> G) -> G {
    #[cfg(feature = "python")]
    return python::wait_detached(wait, lock);
    #[cfg(not(feature = "python"))]
    {
        let _ = lock;
        wait()
    }
}
