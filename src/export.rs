//! The plugin side: what a Rust plugin needs to export itself (`export_plugin!`).
//!
//! This module does not depend on the host's loading code, so a plugin crate can depend on
//! dylease with `default-features = false`.
// `unsafe` here: the plugin side of the C ABI: calls through the host's function table.
#![allow(unsafe_code)]

use core::ffi::{c_char, c_void};
use std::ffi::CString;
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::abi::{
    dylease_add_pass_fn, dylease_add_typed_pass_fn, dylease_host_api, dylease_host_api_abi1, dylease_registrar,
    dylease_report_fn,
};
use crate::{Error, PassFn};

/// The registration context a Rust plugin receives in its `register` function.
///
/// It wraps the host's [`dylease_host_api`] and the opaque registrar for the duration of one
/// `register_passes` call. It is neither `Send` nor `Sync` and cannot be stored: it borrows
/// the call.
#[derive(Debug)]
pub struct PluginRegistrar<'call> {
    abi_version: u32,
    add_pass: dylease_add_pass_fn,
    /// The functions of ABI version 2, when the host's table has them.
    v2: Option<(dylease_add_typed_pass_fn, dylease_report_fn)>,
    reg: *mut dylease_registrar,
    plugin: &'static str,
    _call: PhantomData<&'call dylease_host_api>,
}

impl PluginRegistrar<'_> {
    /// The ABI version of the host API table this plugin was handed (the host's own version,
    /// at most [`DYLEASE_ABI_VERSION`](crate::abi::DYLEASE_ABI_VERSION)).
    pub fn host_abi_version(&self) -> u32 {
        self.abi_version
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
        let c_name = self.c_string(name, name, "name")?;
        // SAFETY: `self.reg` is the registrar of the `register_passes` call this value
        // borrows, and `c_name` is NUL-terminated and outlives the call.
        let code = unsafe { (self.add_pass)(self.reg, c_name.as_ptr(), Some(func.into_raw()), user_data) };
        self.added(name, code)
    }

    /// Registers `func` under `name` as an implementation of interface `I` (recorded under
    /// `I::ID`): the host's [`Lease::get::<I>`](crate::Lease::get) hands it out. `func` must
    /// be an `I::Fn`, which the compiler checks.
    ///
    /// # Errors
    ///
    /// As for [`add_pass_with_interface`](PluginRegistrar::add_pass_with_interface).
    #[allow(
        clippy::not_unsafe_ptr_arg_deref,
        reason = "`user_data` is only stored by the host, never dereferenced"
    )]
    pub fn add_typed_pass<I: crate::Interface>(
        &mut self,
        name: &str,
        func: I::Fn,
        user_data: *mut c_void,
    ) -> Result<(), Error> {
        self.add_pass_with_interface(name, I::ID, func, user_data)
    }

    /// Registers a pass with the host as an implementation of `interface`, given as a string
    /// (the unchecked form of [`add_typed_pass`](PluginRegistrar::add_typed_pass)): a pass
    /// signature the host and its plugins agree on (UTF-8, 1 to 256 bytes, by convention
    /// `domain.name/MAJOR`, such as `ge.fusion_pass/1`). The host shows it in
    /// [`PassInfo::interface`](crate::PassInfo::interface).
    ///
    /// # Errors
    ///
    /// As for [`add_pass`](PluginRegistrar::add_pass), and [`Error::InvalidPass`] when the
    /// host refused the interface (empty or too long) or speaks only ABI version 1, which has
    /// no typed passes.
    #[allow(
        clippy::not_unsafe_ptr_arg_deref,
        reason = "`user_data` is only stored by the host, never dereferenced"
    )]
    pub fn add_pass_with_interface<F: PassFn>(
        &mut self,
        name: &str,
        interface: &str,
        func: F,
        user_data: *mut c_void,
    ) -> Result<(), Error> {
        let c_name = self.c_string(name, name, "name")?;
        let c_interface = self.c_string(name, interface, "interface")?;
        let Some((add_typed_pass, _)) = self.v2 else {
            return Err(self.refused(name, "the host speaks ABI version 1, which has no typed passes".into()));
        };
        // SAFETY: as in `add_pass`; `c_interface` is NUL-terminated and outlives the call.
        let code = unsafe {
            add_typed_pass(
                self.reg,
                c_name.as_ptr(),
                c_interface.as_ptr(),
                Some(func.into_raw()),
                user_data,
            )
        };
        self.added(name, code)
    }

    /// Tells the host why registration fails: the message appears in the host's load error
    /// ("plugin file `…` failed to register its passes: no NPU device found (`register_passes`
    /// returned -1)"). The host keeps the first message, up to 1024 bytes of it; a NUL byte
    /// ends it. Does nothing on a host of ABI version 1.
    ///
    /// `export_plugin!` reports the error a `register` function returns by itself; call this
    /// only to say more than that error does.
    pub fn report(&mut self, message: &str) {
        let Some((_, report)) = self.v2 else { return };
        let message = message.split('\0').next().unwrap_or_default();
        let Ok(message) = CString::new(message) else { return };
        // SAFETY: `self.reg` is the registrar of the call in progress; `message` is
        // NUL-terminated and outlives the call.
        unsafe { report(self.reg, message.as_ptr()) };
    }

    /// `text` as a C string, or the refusal of pass `name` whose `what` contains a NUL byte.
    fn c_string(&self, name: &str, text: &str, what: &str) -> Result<CString, Error> {
        CString::new(text).map_err(|_| self.refused(name, format!("the {what} contains a NUL byte")))
    }

    fn added(&self, name: &str, code: i32) -> Result<(), Error> {
        if code == 0 {
            Ok(())
        } else {
            Err(self.refused(name, format!("the host refused it (code {code})")))
        }
    }

    fn refused(&self, name: &str, reason: String) -> Error {
        Error::InvalidPass {
            plugin: crate::Origin::Named(self.plugin.to_owned()),
            pass: name.to_owned(),
            reason,
        }
    }
}

/// Runs a plugin's Rust `register` function on behalf of `export_plugin!`.
///
/// Returns 0 on success, -1 when `register` failed or the host API is unusable, -2 when it
/// panicked (the panic never crosses the C boundary). On a host of ABI version 2 or later, the
/// error's message, or "panicked: " and the panic's, is given to the host's `report` first.
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
    // SAFETY: the caller passes the host's `api` pointer, valid for the whole call; every ABI
    // version's table begins with version 1's.
    let Some(abi1) = (unsafe { api.cast::<dylease_host_api_abi1>().as_ref() }) else {
        return -1;
    };
    let v2 = match abi1.abi_version {
        0 => return -1,
        1 => None,
        _ => {
            // SAFETY: a table of version 2 or later has the layout of `dylease_host_api`
            // (later versions only append fields).
            let api = unsafe { &*api };
            Some((api.add_typed_pass, api.report))
        }
    };
    let mut registrar = PluginRegistrar {
        abi_version: abi1.abi_version,
        add_pass: abi1.add_pass,
        v2,
        reg,
        plugin,
        _call: PhantomData,
    };
    match catch_unwind(AssertUnwindSafe(|| register(&mut registrar))) {
        Ok(Ok(())) => 0,
        Ok(Err(error)) => {
            registrar.report(&error.to_string());
            -1
        }
        Err(panic) => {
            let message = crate::error::panic_text(&*panic);
            registrar.report(&format!("panicked: {message}"));
            -2
        }
    }
}

/// Runs a plugin's Rust load hook on behalf of `export_plugin!`: 0 on success, -1 when it
/// returned an error, -2 when it panicked (caught: it never unwinds into the host's C call).
/// The ABI gives `on_load` no registrar, so the error's message cannot reach the host; only
/// the code does.
#[doc(hidden)]
pub fn run_load(hook: fn() -> Result<(), Error>) -> i32 {
    match catch_unwind(hook) {
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

/// Named by `export_plugin!` in a plugin crate built with `panic = "abort"`, so that the
/// compiler warns there (deprecation is the warning stable Rust lets a library raise in its
/// user's crate). The `allow-panic-abort` feature turns the warning off.
#[doc(hidden)]
#[cfg_attr(
    not(feature = "allow-panic-abort"),
    deprecated(
        note = "this dylease plugin crate is built with panic = \"abort\": a panic in its register, on_load or \
                on_unload aborts the host process instead of failing the load. Build it with panic = \"unwind\" \
                (the default), or turn this warning off with dylease's `allow-panic-abort` feature"
    )
)]
pub const PANIC_ABORT: () = ();

/// Builds a NUL-terminated C string pointer from a string literal at compile time.
#[doc(hidden)]
pub const fn literal_ptr(with_nul: &'static str) -> *const c_char {
    with_nul.as_ptr().cast()
}

/// Exports the enclosing `cdylib` crate as a dylease plugin.
///
/// Expands to the entry point `dylease_plugin_v1` and a static descriptor of ABI version 2.
/// `register` is a function or closure `FnOnce(&mut PluginRegistrar<'_>) -> Result<(),
/// dylease::Error>`; it is called once per load. The optional `on_load` is a
/// `fn() -> Result<(), dylease::Error>` (a closure that captures nothing will do) run once
/// per loaded instance of the library, before its first `register`; the optional `on_unload`
/// is a `fn()` run once per instance, before the library is closed. Once `on_load`
/// succeeded, `on_unload` runs even if `register` then fails; without an `on_load`, it runs
/// only after a successful `register`. Register `extern "C" fn` passes: only the C calling
/// convention is stable between a plugin and a host built by different compiler versions.
///
/// The error `register` returns reaches the host's load error through the ABI's `report`:
/// `Err(Error::custom("no NPU device found"))` fails the load with "plugin file `…` failed
/// to register its passes: no NPU device found (`register_passes` returned -1)". A panic in
/// any of the three is caught inside the plugin (it never unwinds across the C boundary); in
/// `register` it is reported as "panicked: " and its message. An error or panic in `on_load`
/// reaches the host only as a code (-1 or -2): `on_load` has no registrar to report through.
///
/// # `panic = "abort"`
///
/// Panics are caught only when the plugin crate is built with `panic = "unwind"`, Rust's
/// default. Built with `panic = "abort"` (a `[profile]` setting, or `-C panic=abort`), a panic
/// in `register`, `on_load` or `on_unload` **aborts the host process** (`SIGABRT`, exit status
/// 134), whatever the host does: nothing can catch it. `export_plugin!` therefore warns at
/// compile time in such a crate ("use of deprecated constant
/// `dylease::export::PANIC_ABORT`", with this explanation). Build plugins with unwinding; or,
/// if a plugin must abort and its author has made sure these three functions do not panic,
/// turn the warning off with dylease's `allow-panic-abort` feature:
///
/// ```toml
/// [dependencies]
/// dylease = { version = "0.1", default-features = false, features = ["allow-panic-abort"] }
/// ```
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
/// pub struct IntOp;
/// // SAFETY: every pass registered under "math.int_op/1" is an `extern "C" fn(i32) -> i32`.
/// unsafe impl dylease::Interface for IntOp {
///     const ID: &'static str = "math.int_op/1";
///     type Fn = unsafe extern "C" fn(i32) -> i32;
/// }
///
/// extern "C" fn triple(x: i32) -> i32 {
///     x * 3
/// }
///
/// dylease::export_plugin! {
///     name: "rust-math",
///     version: "1.0.0",
///     register: |reg| {
///         reg.add_typed_pass::<IntOp>("triple", triple, ptr::null_mut())
///     },
///     on_load: || Ok(()),
///     on_unload: || {},
/// }
/// # fn main() {}
/// ```
#[macro_export]
macro_rules! export_plugin {
    (
        name: $name:expr,
        version: $version:expr,
        register: $register:expr
        $(, on_load: $on_load:expr)?
        $(, on_unload: $on_unload:expr)?
        $(,)?
    ) => {
        // A plugin crate built with `panic = "abort"` cannot catch the panics the ABI says are
        // caught: warn (see "`panic = \"abort\"`" in the macro's documentation).
        #[cfg(panic = "abort")]
        const _: () = $crate::export::PANIC_ABORT;

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
                on_load: $crate::export_plugin!(@load $($on_load)?),
            };
            &__DYLEASE_DESCRIPTOR
        }
    };
    (@load) => { None };
    (@load $on_load:expr) => {{
        unsafe extern "C" fn __dylease_on_load() -> i32 {
            $crate::export::run_load($on_load)
        }
        Some(__dylease_on_load as $crate::abi::dylease_on_load_fn)
    }};
    (@unload) => { None };
    (@unload $on_unload:expr) => {{
        unsafe extern "C" fn __dylease_on_unload() {
            $crate::export::run_unload($on_unload);
        }
        Some(__dylease_on_unload as $crate::abi::dylease_on_unload_fn)
    }};
}
