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

    /// The bytes a manifest string takes in a note (see `dylease_elf::manifest`): its `u32`
    /// length, then the text and its NUL, padded with zeros to a multiple of 4.
    pub const fn string_len(text: &str) -> usize {
        4 + (text.len() + 1).div_ceil(4) * 4
    }

    /// The length of a plugin record note: header (12), owner (8), three `u32`s, two strings.
    pub const fn plugin_note_len(name: &str, version: &str) -> usize {
        12 + 8 + 12 + string_len(name) + string_len(version)
    }

    /// The length of a pass record note: header (12), owner (8), flags, two strings.
    pub const fn pass_note_len(name: &str, interface: &str) -> usize {
        12 + 8 + 4 + string_len(name) + string_len(interface)
    }

    /// One manifest note (`dylease_elf::manifest`, format version 1), `LEN` bytes in the
    /// target's byte order, built at compile time by [`plugin_note`] or [`pass_note`].
    /// `export_plugin!` places each in the section `.note.dylease`, which the linker puts into
    /// a `PT_NOTE` segment: 4-aligned, like the notes of the C header, and `LEN` a multiple of
    /// 4, so that notes placed one after the other need no padding between them.
    #[derive(Debug)]
    #[repr(C, align(4))]
    pub struct Note<const LEN: usize>([u8; LEN]);

    impl<const LEN: usize> Note<LEN> {
        /// The note's bytes, as they appear in the file.
        pub const fn bytes(&self) -> &[u8; LEN] {
            &self.0
        }
    }

    /// Writes the `u32` `value` at `at`; returns the next offset.
    const fn put_u32<const LEN: usize>(bytes: &mut [u8; LEN], at: usize, value: u32) -> usize {
        let value = value.to_ne_bytes();
        let mut i = 0;
        while i < 4 {
            bytes[at + i] = value[i];
            i += 1;
        }
        at + 4
    }

    /// Writes `text` as a manifest string at `at` (length with the NUL, the text; the zeros of
    /// the NUL and the padding are already there); returns the next offset. A NUL inside the
    /// text, which a manifest string cannot carry, fails the build.
    const fn put_string<const LEN: usize>(bytes: &mut [u8; LEN], at: usize, text: &str) -> usize {
        let text = text.as_bytes();
        assert!(text.len() < u32::MAX as usize, "a manifest string is too long");
        let mut at = put_u32(bytes, at, text.len() as u32 + 1);
        let mut i = 0;
        while i < text.len() {
            assert!(
                text[i] != 0,
                "a plugin's or pass's name, version or interface holds a NUL byte, which the manifest cannot carry"
            );
            bytes[at + i] = text[i];
            i += 1;
        }
        at += (text.len() + 1).div_ceil(4) * 4;
        at
    }

    /// The note header (`n_namesz` 8, `n_descsz`, `n_type`) and the owner `dylease\0`; returns
    /// the offset of the descriptor.
    const fn put_header<const LEN: usize>(bytes: &mut [u8; LEN], kind: u32) -> usize {
        let mut at = put_u32(bytes, 0, 8);
        at = put_u32(bytes, at, (LEN - 20) as u32);
        at = put_u32(bytes, at, kind);
        let owner = b"dylease\0";
        let mut i = 0;
        while i < owner.len() {
            bytes[at + i] = owner[i];
            i += 1;
        }
        at + owner.len()
    }

    /// The manifest's plugin record (`n_type` 1): format version 1, `abi_version`, `flags`
    /// (bit 0: the pass records are complete), `name`, `version`. `LEN` must be
    /// [`plugin_note_len`]`(name, version)`; anything else fails the build.
    pub const fn plugin_note<const LEN: usize>(abi_version: u32, flags: u32, name: &str, version: &str) -> Note<LEN> {
        assert!(
            LEN == plugin_note_len(name, version),
            "the note's length is not its fields'"
        );
        let mut bytes = [0u8; LEN];
        let mut at = put_header(&mut bytes, 1);
        at = put_u32(&mut bytes, at, 1);
        at = put_u32(&mut bytes, at, abi_version);
        at = put_u32(&mut bytes, at, flags);
        at = put_string(&mut bytes, at, name);
        at = put_string(&mut bytes, at, version);
        assert!(at == LEN);
        Note(bytes)
    }

    /// A pass record (`n_type` 2): flags 0, `name`, `interface` (empty for an untyped pass).
    /// `LEN` must be [`pass_note_len`]`(name, interface)`; anything else fails the build.
    pub const fn pass_note<const LEN: usize>(name: &str, interface: &str) -> Note<LEN> {
        assert!(
            LEN == pass_note_len(name, interface),
            "the note's length is not its fields'"
        );
        let mut bytes = [0u8; LEN];
        let mut at = put_header(&mut bytes, 2);
        at = put_u32(&mut bytes, at, 0);
        at = put_string(&mut bytes, at, name);
        at = put_string(&mut bytes, at, interface);
        assert!(at == LEN);
        Note(bytes)
    }

    /// Whether `names` holds no name twice (a manifest declaring a pass twice is refused, and so
    /// is the second registration).
    pub const fn distinct(names: &[&str]) -> bool {
        let mut i = 0;
        while i < names.len() {
            let mut j = i + 1;
            while j < names.len() {
                if same(names[i].as_bytes(), names[j].as_bytes()) {
                    return false;
                }
                j += 1;
            }
            i += 1;
        }
        true
    }

    const fn same(a: &[u8], b: &[u8]) -> bool {
        if a.len() != b.len() {
            return false;
        }
        let mut i = 0;
        while i < a.len() {
            if a[i] != b[i] {
                return false;
            }
            i += 1;
        }
        true
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
/// Expands to the entry point `dylease_plugin_v1`, a static descriptor of ABI version 2 and
/// the plugin's [manifest](#manifest). Its two forms differ in who registers the passes:
///
/// - **Declared passes**, `passes: [...]`: the macro writes the register function, which
///   registers exactly the passes listed, in their order, and the manifest lists them as the
///   complete set. Each entry is one of
///   - `typed I: "name" => func`: [`add_typed_pass::<I>`](Registrar::add_typed_pass), `func`
///     an `I::Fn` (a function item coerces to it);
///   - `untyped: "name" => func as extern "C" fn(i32) -> i32`:
///     [`add_pass`](Registrar::add_pass), `func` a [`PassFn`](crate::PassFn), that is a
///     function pointer (cast a function item to its pointer type);
///
///   and `=> (func, user_data)` gives the pass a `user_data` (a `*mut c_void`, see
///   [`add_pass`](Registrar::add_pass)) other than the default null pointer. A name is any
///   constant `&str` expression (a literal, `env!`, a `const`): a name declared twice fails
///   the build.
/// - **A register closure**, `register: ...`: a function or closure `FnOnce(&mut
///   LibraryRegistrar<'_>) -> Result<(), RegisterError>`, in which the [`Registrar`] trait's
///   methods are in scope. It is called once per load, and may register anything: the
///   manifest lists no pass and says so.
///
/// The optional `on_load` is a `fn() -> Result<(), RegisterError>` (a closure that captures
/// nothing will do) run once per loaded instance of the library, before its first
/// registration; the optional `on_unload` is a `fn()` run once per instance, before the
/// library is closed. Once `on_load` succeeded, `on_unload` runs even if the registration
/// then fails; without an `on_load`, it runs only after a successful registration. Register
/// `extern "C" fn` passes: only the C calling convention is stable between a plugin and a
/// host built by different compiler versions.
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
/// # Manifest
///
/// Both forms write the plugin's manifest into the library as constant data, built at compile
/// time: ELF notes of owner `dylease` in a section `.note.dylease`, which the linker puts into
/// a `PT_NOTE` segment (the format is dylease-elf's, `dylease_elf::manifest`; the C header's
/// macros write the same notes). A host reads the plugin's name, version, ABI version and
/// passes from the file without running any of its code, and refuses an ABI it does not
/// speak before the library is mapped.
///
/// - The declared form writes a **complete** manifest: a pass record per declared pass, with
///   the interface's [`ID`](crate::Interface::ID) for a typed pass and none for an untyped
///   one. A host that loads the plugin checks that it registered exactly these passes.
/// - The closure form writes an **incomplete** manifest, naming no pass: what its `register`
///   registers is known only once it ran.
///
/// `strip --strip-all` keeps the notes, and so does the linkers' garbage collection of
/// unused sections (`--gc-sections`, which rustc passes for a `cdylib`): lld (rustc's default
/// linker on x86_64 Linux), GNU ld and gold keep note sections. A link step that drops
/// `.note*` sections (a linker script, `objcopy --remove-section`) leaves no manifest. On a
/// target whose libraries are not ELF files the macro writes none.
///
/// # Example
///
/// Declared passes, with a complete manifest:
///
/// ```
/// use std::ffi::c_void;
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
/// extern "C" fn negate(x: i32) -> i32 {
///     -x
/// }
///
/// static FACTOR: i32 = 7;
///
/// dylease_plugin::export_plugin! {
///     name: "rust-math",
///     version: "1.0.0",
///     passes: [
///         typed IntOp: "triple" => triple,
///         // With a user data pointer, which the host hands back untouched.
///         typed IntOp: "triple_again" => (triple, (&raw const FACTOR).cast_mut().cast::<c_void>()),
///         untyped: "negate" => negate as extern "C" fn(i32) -> i32,
///     ],
///     on_load: || Ok(()),
///     on_unload: || {},
/// }
/// # fn main() {}
/// ```
///
/// A register closure, with an incomplete manifest:
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
/// A pass declared twice fails the build (its second registration would fail the load):
///
/// ```compile_fail,E0080
/// extern "C" fn negate(x: i32) -> i32 {
///     -x
/// }
///
/// dylease_plugin::export_plugin! {
///     name: "twice",
///     version: "1.0.0",
///     passes: [
///         untyped: "negate" => negate as extern "C" fn(i32) -> i32,
///         untyped: "negate" => negate as extern "C" fn(i32) -> i32,
///     ],
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
/// ```compile_fail,E0133
/// extern "C" fn negate(x: i32) -> i32 {
///     -x
/// }
///
/// dylease_plugin::export_plugin! {
///     name: "raw",
///     version: "1.0.0",
///     passes: [
///         untyped: "negate" => (negate as extern "C" fn(i32) -> i32, {
///             let x = 5;
///             let p = &x as *const i32;
///             let _copy = *p; // error: dereference of raw pointer is unsafe
///             std::ptr::null_mut()
///         }),
///     ],
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
    // The closure form: `register` may register anything, so the manifest lists no pass and
    // is not complete.
    (
        name: $name:expr,
        version: $version:expr,
        register: $register:expr
        $(, on_load: $on_load:expr)?
        $(, on_unload: $on_unload:expr)?
        $(,)?
    ) => {
        $crate::export_plugin!(@plugin $name, $version, 0, $register, [$($on_load)?], [$($on_unload)?]);
    };
    // The declared form: the passes, read one by one into `[name, interface, how, func, data]`
    // entries, then registered by a register function of the macro's and declared in a
    // complete manifest.
    (
        name: $name:expr,
        version: $version:expr,
        passes: [$($passes:tt)*]
        $(, on_load: $on_load:expr)?
        $(, on_unload: $on_unload:expr)?
        $(,)?
    ) => {
        $crate::export_plugin!(
            @passes [$name, $version, [$($on_load)?], [$($on_unload)?]] [] $($passes)*
        );
    };
    (@passes $plugin:tt [$($done:tt)*] typed $interface:ty : $pass:expr => ($func:expr, $data:expr) $(, $($rest:tt)*)?) => {
        $crate::export_plugin!(
            @passes $plugin [$($done)* [$pass, <$interface as $crate::Interface>::ID, [typed $interface], $func, $data]] $($($rest)*)?
        );
    };
    (@passes $plugin:tt [$($done:tt)*] typed $interface:ty : $pass:expr => $func:expr $(, $($rest:tt)*)?) => {
        $crate::export_plugin!(
            @passes $plugin [$($done)* [$pass, <$interface as $crate::Interface>::ID, [typed $interface], $func, ::core::ptr::null_mut()]] $($($rest)*)?
        );
    };
    (@passes $plugin:tt [$($done:tt)*] untyped : $pass:expr => ($func:expr, $data:expr) $(, $($rest:tt)*)?) => {
        $crate::export_plugin!(
            @passes $plugin [$($done)* [$pass, "", [untyped], $func, $data]] $($($rest)*)?
        );
    };
    (@passes $plugin:tt [$($done:tt)*] untyped : $pass:expr => $func:expr $(, $($rest:tt)*)?) => {
        $crate::export_plugin!(
            @passes $plugin [$($done)* [$pass, "", [untyped], $func, ::core::ptr::null_mut()]] $($($rest)*)?
        );
    };
    (
        @passes [$name:expr, $version:expr, [$($on_load:expr)?], [$($on_unload:expr)?]]
        [$([$pass:expr, $interface:expr, [$($how:tt)*], $func:expr, $data:expr])*]
    ) => {
        const _: () = ::core::assert!(
            $crate::__private::distinct(&[$($pass),*]),
            "export_plugin! declares a pass name twice"
        );
        $(
            $crate::export_plugin!(@pass_note $pass, $interface);
        )*
        $crate::export_plugin!(
            @plugin $name, $version, 1,
            |reg| {
                $(
                    $crate::export_plugin!(@add reg, [$($how)*], $pass, $func, $data)?;
                )*
                ::core::result::Result::Ok(())
            },
            [$($on_load)?], [$($on_unload)?]
        );
    };
    (@passes $plugin:tt [$($done:tt)*] $($rest:tt)+) => {
        ::core::compile_error!(
            "export_plugin!: each pass is `typed Interface: \"name\" => function` or `untyped: \"name\" => function as fn type`, optionally with user data: `=> (function, user_data)`"
        );
    };
    (@add $reg:ident, [typed $interface:ty], $pass:expr, $func:expr, $data:expr) => {
        $reg.add_typed_pass::<$interface>($pass, $func, $data)
    };
    (@add $reg:ident, [untyped], $pass:expr, $func:expr, $data:expr) => {
        $reg.add_pass($pass, $func, $data)
    };
    // The manifest's plugin record and a pass record: const data, each in the section
    // `.note.dylease`, on the targets whose libraries are ELF files.
    (@plugin_note $name:expr, $version:expr, $flags:expr) => {
        $crate::export_plugin!(@elf const _: () = {
            const NAME: &str = $name;
            const VERSION: &str = $version;
            const LEN: usize = $crate::__private::plugin_note_len(NAME, VERSION);
            $crate::export_plugin!(@note LEN, $crate::__private::plugin_note::<LEN>(
                $crate::abi::DYLEASE_ABI_VERSION, $flags, NAME, VERSION
            ));
        };);
    };
    (@pass_note $pass:expr, $interface:expr) => {
        $crate::export_plugin!(@elf const _: () = {
            const NAME: &str = $pass;
            const INTERFACE: &str = $interface;
            const LEN: usize = $crate::__private::pass_note_len(NAME, INTERFACE);
            $crate::export_plugin!(@note LEN, $crate::__private::pass_note::<LEN>(NAME, INTERFACE));
        };);
    };
    (@note $len:ident, $note:expr) => {
        // `used`: emitted although nothing refers to it, and marked `SHF_GNU_RETAIN`, which
        // `--gc-sections` keeps; a section named `.note.*` is an `SHT_NOTE` section, which
        // linkers keep too and put into a `PT_NOTE` segment (lld, GNU ld and gold do).
        #[used]
        // SAFETY: the section holds notes only, and this is one: 4-aligned, its length a
        // multiple of 4, so that the next note follows it without padding. Nothing reads it as
        // anything else.
        #[unsafe(link_section = ".note.dylease")]
        static NOTE: $crate::__private::Note<$len> = $note;
    };
    (@elf $($item:item)*) => {
        $(
            #[cfg(any(
                target_os = "linux",
                target_os = "android",
                target_os = "freebsd",
                target_os = "netbsd",
                target_os = "openbsd",
                target_os = "dragonfly",
                target_os = "illumos",
                target_os = "solaris",
                target_os = "fuchsia",
                target_os = "hurd"
            ))]
            $item
        )*
    };
    (@plugin $name:expr, $version:expr, $flags:expr, $register:expr, [$($on_load:expr)?], [$($on_unload:expr)?]) => {
        // A plugin crate built with `panic = "abort"` cannot catch the panics the ABI says are
        // caught: warn (see "`panic = \"abort\"`" in the macro's documentation).
        #[cfg(panic = "abort")]
        const _: () = $crate::__private::PANIC_ABORT;

        $crate::export_plugin!(@plugin_note $name, $version, $flags);

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

#[cfg(all(test, target_endian = "little"))]
mod tests {
    use super::__private::*;

    /// A note as the format (`dylease_elf::manifest`) and the C header's
    /// `DYLEASE_PLUGIN_NOTE_` / `DYLEASE_PASS_NOTE_` write it, by hand: little-endian `u32`s,
    /// each string's length counting its NUL, the bytes padded with zeros to 4.
    #[rustfmt::skip]
    const MATH: [u8; 56] = [
        8, 0, 0, 0,   36, 0, 0, 0,   1, 0, 0, 0,   b'd', b'y', b'l', b'e', b'a', b's', b'e', 0,
        1, 0, 0, 0,   2, 0, 0, 0,   1, 0, 0, 0,
        5, 0, 0, 0,   b'm', b'a', b't', b'h', 0, 0, 0, 0,
        6, 0, 0, 0,   b'1', b'.', b'0', b'.', b'0', 0, 0, 0,
    ];

    #[rustfmt::skip]
    const TRIPLE: [u8; 48] = [
        8, 0, 0, 0,   28, 0, 0, 0,   2, 0, 0, 0,   b'd', b'y', b'l', b'e', b'a', b's', b'e', 0,
        0, 0, 0, 0,
        7, 0, 0, 0,   b't', b'r', b'i', b'p', b'l', b'e', 0, 0,
        8, 0, 0, 0,   b'm', b'a', b't', b'h', b'/', b'1', b'2', 0,
    ];

    #[rustfmt::skip]
    const PLAIN: [u8; 40] = [
        8, 0, 0, 0,   20, 0, 0, 0,   2, 0, 0, 0,   b'd', b'y', b'l', b'e', b'a', b's', b'e', 0,
        0, 0, 0, 0,
        2, 0, 0, 0,   b'p', 0, 0, 0,
        1, 0, 0, 0,   0, 0, 0, 0,
    ];

    #[test]
    fn the_notes_are_the_bytes_the_format_and_the_c_header_give() {
        const LEN: usize = plugin_note_len("math", "1.0.0");
        static NOTE: Note<LEN> = plugin_note::<LEN>(2, 1, "math", "1.0.0");
        assert_eq!(NOTE.bytes(), &MATH);
        const TRIPLE_LEN: usize = pass_note_len("triple", "math/12");
        assert_eq!(pass_note::<TRIPLE_LEN>("triple", "math/12").bytes(), &TRIPLE);
        const PLAIN_LEN: usize = pass_note_len("p", "");
        assert_eq!(pass_note::<PLAIN_LEN>("p", "").bytes(), &PLAIN);
        // 4-aligned, as the note segment's `p_align` of 4 needs.
        assert_eq!(core::mem::align_of::<Note<LEN>>(), 4);
        assert_eq!((&raw const NOTE).addr() % 4, 0);
    }

    #[test]
    fn pass_names_must_be_distinct() {
        assert!(distinct(&[]));
        assert!(distinct(&["a", "b", "ab"]));
        assert!(!distinct(&["a", "b", "a"]));
        assert!(!distinct(&["ab", "ab"]));
    }
}
