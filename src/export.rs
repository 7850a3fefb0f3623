//! The plugin side: what a Rust plugin needs to export itself (`export_plugin!`).
//!
//! This module does not depend on the host's loading code, so a plugin crate can depend on
//! dylease with `default-features = false`.

use core::ffi::{c_char, c_void};
use std::ffi::CString;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::abi::{DYLEASE_ABI_VERSION, dylease_host_api, dylease_registrar};
use crate::{Error, PassFn};

/// The registration context a Rust plugin receives in its `register` function.
///
/// It wraps the host's [`dylease_host_api`] and the opaque registrar for the duration of one
/// `register_passes` call. It is neither `Send` nor `Sync` and cannot be stored: it borrows
/// the call.
#[derive(Debug)]
pub struct PluginRegistrar<'call> {
    api: &'call dylease_host_api,
    reg: *mut dylease_registrar,
    plugin: &'static str,
}

impl PluginRegistrar<'_> {
    /// The ABI version of the host that is loading this plugin.
    pub fn host_abi_version(&self) -> u32 {
        self.api.abi_version
    }

    /// Registers a pass with the host.
    ///
    /// Prefer `extern "C" fn` passes: the host may be built by another compiler version, and
    /// only the C calling convention is stable across that boundary.
    ///
    /// `user_data` is handed back to callers through [`Pass::user_data`](crate::Pass::user_data);
    /// it must stay valid, and be usable from any thread, until the plugin is unloaded.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPass`] if `name` contains a NUL byte or the host refused the pass (an
    /// empty or duplicate name).
    #[allow(
        clippy::not_unsafe_ptr_arg_deref,
        reason = "`user_data` is only stored by the host, never dereferenced"
    )]
    pub fn add_pass<F: PassFn>(&mut self, name: &str, func: F, user_data: *mut c_void) -> Result<(), Error> {
        let refused = |reason: String| Error::InvalidPass {
            plugin: crate::Origin::Named(self.plugin.to_owned()),
            pass: name.to_owned(),
            reason,
        };
        let c_name = CString::new(name).map_err(|_| refused("the name contains a NUL byte".into()))?;
        // SAFETY: `self.reg` is the registrar of the `register_passes` call this value
        // borrows, and `c_name` is NUL-terminated and outlives the call.
        let code = unsafe { (self.api.add_pass)(self.reg, c_name.as_ptr(), Some(func.into_raw()), user_data) };
        if code == 0 {
            Ok(())
        } else {
            Err(refused(format!("the host refused it (code {code})")))
        }
    }
}

/// Runs a plugin's Rust `register` function on behalf of `export_plugin!`.
///
/// Returns 0 on success, -1 when `register` failed or the host API is unusable, -2 when it
/// panicked (the panic never crosses the C boundary).
///
/// # Safety
///
/// `api` and `reg` must be the arguments the host passed to `register_passes`.
#[doc(hidden)]
pub unsafe fn run_register<F>(
    api: *const dylease_host_api,
    reg: *mut dylease_registrar,
    plugin: &'static str,
    register: F,
) -> i32
where
    F: FnOnce(&mut PluginRegistrar<'_>) -> Result<(), Error>,
{
    // SAFETY: the caller passes the host's `api` pointer, valid for the whole call.
    let Some(api) = (unsafe { api.as_ref() }) else {
        return -1;
    };
    if api.abi_version != DYLEASE_ABI_VERSION {
        return -1;
    }
    let mut registrar = PluginRegistrar { api, reg, plugin };
    match catch_unwind(AssertUnwindSafe(|| register(&mut registrar))) {
        Ok(Ok(())) => 0,
        Ok(Err(_)) => -1,
        Err(_) => -2,
    }
}

/// Runs a plugin's Rust unload hook on behalf of `export_plugin!`, swallowing a panic so
/// that it never unwinds into the host's C call.
#[doc(hidden)]
pub fn run_unload(hook: fn()) {
    let _ = catch_unwind(hook);
}

/// Builds a NUL-terminated C string pointer from a string literal at compile time.
#[doc(hidden)]
pub const fn literal_ptr(with_nul: &'static str) -> *const c_char {
    with_nul.as_ptr().cast()
}

/// Exports the enclosing `cdylib` crate as a dylease plugin.
///
/// Expands to the entry point `dylease_plugin_v1` and a static descriptor. `register` is a
/// function or closure `FnOnce(&mut PluginRegistrar<'_>) -> Result<(), dylease::Error>`; it is
/// called once per load. The optional `on_unload` is a `fn()` called once per unload, before
/// the library is closed. Register `extern "C" fn` passes: only the C calling convention is
/// stable between a plugin and a host built by different compiler versions. Panics in either are caught inside the plugin and reported to the
/// host as a failure; they never unwind across the C boundary.
///
/// Depend on dylease with `default-features = false` so the plugin does not link the host's
/// loading code:
///
/// ```toml
/// [lib]
/// crate-type = ["cdylib"]
///
/// [dependencies]
/// dylease = { version = "0.1", default-features = false }
/// ```
///
/// # Example
///
/// ```
/// use std::ptr;
///
/// extern "C" fn triple(x: i32) -> i32 {
///     x * 3
/// }
///
/// dylease::export_plugin! {
///     name: "rust-math",
///     version: "1.0.0",
///     register: |reg| reg.add_pass("triple", triple as extern "C" fn(i32) -> i32, ptr::null_mut()),
/// }
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! export_plugin {
    (
        name: $name:expr,
        version: $version:expr,
        register: $register:expr
        $(, on_unload: $on_unload:expr)?
        $(,)?
    ) => {
        /// The dylease plugin entry point.
        #[unsafe(no_mangle)]
        pub extern "C" fn dylease_plugin_v1() -> *const $crate::abi::dylease_plugin {
            unsafe extern "C" fn __dylease_register(
                api: *const $crate::abi::dylease_host_api,
                reg: *mut $crate::abi::dylease_registrar,
            ) -> i32 {
                // SAFETY: the host calls `register_passes` with its own API table and
                // registrar, exactly what `run_register` requires.
                unsafe { $crate::export::run_register(api, reg, $name, $register) }
            }
            static __DYLEASE_DESCRIPTOR: $crate::abi::dylease_plugin = $crate::abi::dylease_plugin {
                abi_version: $crate::abi::DYLEASE_ABI_VERSION,
                name: $crate::export::literal_ptr(concat!($name, "\0")),
                version: $crate::export::literal_ptr(concat!($version, "\0")),
                register_passes: Some(__dylease_register),
                on_unload: $crate::export_plugin!(@unload $($on_unload)?),
            };
            &__DYLEASE_DESCRIPTOR
        }
    };
    (@unload) => { None };
    (@unload $on_unload:expr) => {{
        unsafe extern "C" fn __dylease_on_unload() {
            $crate::export::run_unload($on_unload);
        }
        Some(__dylease_on_unload as unsafe extern "C" fn())
    }};
}
