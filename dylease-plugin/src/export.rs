//! What a Rust library plugin exports itself with: [`export_plugin!`](crate::export_plugin),
//! the [`LibraryRegistrar`] it hands the plugin's register function, and the macro's support
//! items (`__private`, not part of the API).
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
use crate::{PassFn, RegisterError, Registrar};

/// The [`Registrar`] a Rust library plugin's register function receives from
/// [`export_plugin!`](crate::export_plugin).
///
/// It wraps the host's [`dylease_host_api`] and the opaque registrar for the duration of one
/// `register_passes` call. It is neither `Send` nor `Sync` and cannot be stored: it borrows
/// the call.
#[derive(Debug)]
pub struct LibraryRegistrar<'call> {
    abi_version: u32,
    add_pass: dylease_add_pass_fn,
    /// The functions of ABI version 2, when the host's table has them.
    v2: Option<(dylease_add_typed_pass_fn, dylease_report_fn)>,
    reg: *mut dylease_registrar,
    _call: PhantomData<&'call dylease_host_api>,
}

impl LibraryRegistrar<'_> {
    /// The ABI version of the host API table this plugin was handed (the host's own version,
    /// at most [`DYLEASE_ABI_VERSION`](crate::abi::DYLEASE_ABI_VERSION)).
    pub fn host_abi_version(&self) -> u32 {
        self.abi_version
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
    fn c_string(name: &str, text: &str, what: &str) -> Result<CString, RegisterError> {
        CString::new(text).map_err(|_| refused(name, format!("the {what} contains a NUL byte")))
    }
}

/// The refusal of pass `name`.
fn refused(name: &str, reason: String) -> RegisterError {
    RegisterError::Refused {
        pass: name.to_owned(),
        reason,
    }
}

/// The result of a host API call that returned `code` for pass `name`.
fn added(name: &str, code: i32) -> Result<(), RegisterError> {
    if code == 0 {
        Ok(())
    } else {
        Err(refused(name, format!("the host refused it (code {code})")))
    }
}

impl Registrar for LibraryRegistrar<'_> {
    #[allow(
        clippy::not_unsafe_ptr_arg_deref,
        reason = "`user_data` is only stored by the host, never dereferenced"
    )]
    fn add_pass<F: PassFn>(&mut self, name: &str, func: F, user_data: *mut c_void) -> Result<(), RegisterError> {
        let c_name = Self::c_string(name, name, "name")?;
        // SAFETY: `self.reg` is the registrar of the `register_passes` call this value
        // borrows, and `c_name` is NUL-terminated and outlives the call.
        let code = unsafe { (self.add_pass)(self.reg, c_name.as_ptr(), Some(func.into_raw()), user_data) };
        added(name, code)
    }

    #[allow(
        clippy::not_unsafe_ptr_arg_deref,
        reason = "`user_data` is only stored by the host, never dereferenced"
    )]
    fn add_pass_with_interface<F: PassFn>(
        &mut self,
        name: &str,
        interface: &str,
        func: F,
        user_data: *mut c_void,
    ) -> Result<(), RegisterError> {
        let c_name = Self::c_string(name, name, "name")?;
        let c_interface = Self::c_string(name, interface, "interface")?;
        let Some((add_typed_pass, _)) = self.v2 else {
            return Err(refused(
                name,
                "the host speaks ABI version 1, which has no typed passes".into(),
            ));
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
        added(name, code)
    }
}

/// The support items of [`export_plugin!`](crate::export_plugin), public only because the
/// macro expands in the plugin's crate: not part of the API, and free to change.
#[doc(hidden)]
pub mod __private {
    use super::*;

    /// `register`, as the register function of `export_plugin!`: the bound gives a closure its
    /// argument type where it is written, outside the `unsafe` block that runs it.
    pub fn register_fn<F>(register: F) -> F
    where
        F: FnOnce(&mut LibraryRegistrar<'_>) -> Result<(), RegisterError>,
    {
        register
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
    pub unsafe fn run_register<F>(api: *const dylease_host_api, reg: *mut dylease_registrar, register: F) -> i32
    where
        F: FnOnce(&mut LibraryRegistrar<'_>) -> Result<(), RegisterError>,
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
        let mut registrar = LibraryRegistrar {
            abi_version: abi1.abi_version,
            add_pass: abi1.add_pass,
            v2,
            reg,
            _call: PhantomData,
        };
        match catch_unwind(AssertUnwindSafe(|| register(&mut registrar))) {
            Ok(Ok(())) => 0,
            Ok(Err(error)) => {
                registrar.report(&error.to_string());
                -1
            }
            Err(panic) => {
                let message = panic_text(&*panic);
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
    pub fn run_load(hook: fn() -> Result<(), RegisterError>) -> i32 {
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
                (the default), or turn this warning off with dylease-plugin's `allow-panic-abort` feature"
        )
    )]
    pub const PANIC_ABORT: () = ();

    /// Builds a NUL-terminated C string pointer from a string literal at compile time.
    #[doc(hidden)]
    pub const fn literal_ptr(with_nul: &'static str) -> *const c_char {
        with_nul.as_ptr().cast()
    }

    /// The message of a caught panic's payload.
    pub fn panic_text(payload: &(dyn std::any::Any + Send)) -> &str {
        if let Some(s) = payload.downcast_ref::<&str>() {
            s
        } else if let Some(s) = payload.downcast_ref::<String>() {
            s
        } else {
            "a panic without a message"
        }
    }
}

/// Exports the enclosing `cdylib` crate as a dylease plugin.
///
/// Expands to the entry point `dylease_plugin_v1` and a static descriptor of ABI version 2.
/// `register` is a function or closure `FnOnce(&mut LibraryRegistrar<'_>) -> Result<(),
/// RegisterError>`, in which the [`Registrar`] trait's methods are in scope; it is called
/// once per load. The optional `on_load` is a `fn() -> Result<(), RegisterError>` (a closure that captures nothing will do) run once
/// per loaded instance of the library, before its first `register`; the optional `on_unload`
/// is a `fn()` run once per instance, before the library is closed. Once `on_load`
/// succeeded, `on_unload` runs even if `register` then fails; without an `on_load`, it runs
/// only after a successful `register`. Register `extern "C" fn` passes: only the C calling
/// convention is stable between a plugin and a host built by different compiler versions.
///
/// The error `register` returns reaches the host's load error through the ABI's `report`:
/// `Err(RegisterError::custom("no NPU device found"))` fails the load with "plugin file `…` failed
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
/// `dylease_plugin::__private::PANIC_ABORT`", with this explanation). Build plugins with
/// unwinding; or, if a plugin must abort and its author has made sure these three functions
/// do not panic, turn the warning off with this crate's `allow-panic-abort` feature:
///
/// ```toml
/// [dependencies]
/// dylease-plugin = { version = "0.1", features = ["allow-panic-abort"] }
/// ```
///
/// A plugin crate depends on this crate only, never on the host's:
///
/// ```toml
/// [lib]
/// crate-type = ["cdylib"]
///
/// [dependencies]
/// dylease-plugin = "0.1"
/// ```
///
/// # Example
///
/// ```
/// use std::ptr;
///
/// pub struct IntOp;
/// // SAFETY: every pass registered under "math.int_op/1" is an `extern "C" fn(i32) -> i32`.
/// unsafe impl dylease_plugin::Interface for IntOp {
///     const ID: &'static str = "math.int_op/1";
///     type Fn = unsafe extern "C" fn(i32) -> i32;
/// }
///
/// extern "C" fn triple(x: i32) -> i32 {
///     x * 3
/// }
///
/// dylease_plugin::export_plugin! {
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
///
/// The plugin's functions are its own code, compiled as safe code: an unsafe operation in
/// them needs an `unsafe` block of the author's, as anywhere else.
///
/// ```compile_fail,E0133
/// dylease_plugin::export_plugin! {
///     name: "raw",
///     version: "1.0.0",
///     register: |_reg| {
///         let x = 5;
///         let p = &x as *const i32;
///         let _copy = *p; // error: dereference of raw pointer is unsafe
///         Ok(())
///     },
/// }
/// # fn main() {}
/// ```
///
/// ```compile_fail,E0133
/// dylease_plugin::export_plugin! {
///     name: "raw",
///     version: "1.0.0",
///     register: |_reg| Ok(()),
///     on_load: || {
///         let x = 5;
///         let p = &x as *const i32;
///         let _copy = *p; // error: dereference of raw pointer is unsafe
///         Ok(())
///     },
/// }
/// # fn main() {}
/// ```
///
/// With the author's `unsafe` and its reason, it compiles:
///
/// ```
/// dylease_plugin::export_plugin! {
///     name: "raw",
///     version: "1.0.0",
///     register: |_reg| {
///         let x = 5;
///         let p = &x as *const i32;
///         // SAFETY: `p` points to `x`, alive here.
///         let _copy = unsafe { *p };
///         Ok(())
///     },
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
        const _: () = $crate::__private::PANIC_ABORT;

        /// The dylease plugin entry point.
        #[unsafe(no_mangle)]
        pub extern "C" fn dylease_plugin_v1() -> *const $crate::abi::dylease_plugin {
            // The plugin's own code (`$register`, `$on_load`, `$on_unload`) is expanded outside
            // any `unsafe` block, in functions whose bodies are not unsafe contexts: an unsafe
            // operation in it needs the plugin author's own `unsafe`.
            #[deny(unsafe_op_in_unsafe_fn)]
            unsafe extern "C" fn __dylease_register(
                api: *const $crate::abi::dylease_host_api,
                reg: *mut $crate::abi::dylease_registrar,
            ) -> i32 {
                // The registrar's methods are the trait's: in scope for `$register`.
                #[allow(unused_imports)]
                use $crate::Registrar as _;
                let register = $crate::__private::register_fn($register);
                // SAFETY: the host calls `register_passes` with its own API table and
                // registrar, exactly what `run_register` requires.
                unsafe { $crate::__private::run_register(api, reg, register) }
            }
            static __DYLEASE_DESCRIPTOR: $crate::abi::dylease_plugin = $crate::abi::dylease_plugin {
                abi_version: $crate::abi::DYLEASE_ABI_VERSION,
                name: $crate::__private::literal_ptr(concat!($name, "\0")),
                version: $crate::__private::literal_ptr(concat!($version, "\0")),
                register_passes: Some(__dylease_register),
                on_unload: $crate::export_plugin!(@unload $($on_unload)?),
                on_load: $crate::export_plugin!(@load $($on_load)?),
            };
            &__DYLEASE_DESCRIPTOR
        }
    };
    (@load) => { None };
    (@load $on_load:expr) => {{
        #[deny(unsafe_op_in_unsafe_fn)]
        unsafe extern "C" fn __dylease_on_load() -> i32 {
            $crate::__private::run_load($on_load)
        }
        Some(__dylease_on_load as $crate::abi::dylease_on_load_fn)
    }};
    (@unload) => { None };
    (@unload $on_unload:expr) => {{
        #[deny(unsafe_op_in_unsafe_fn)]
        unsafe extern "C" fn __dylease_on_unload() {
            $crate::__private::run_unload($on_unload);
        }
        Some(__dylease_on_unload as $crate::abi::dylease_on_unload_fn)
    }};
}
