//! The plugin ABI, version 2: the C types every plugin and host agree on.
//!
//! `include/dylease.h` is the normative copy of these declarations; this module mirrors
//! it for Rust, with `#[repr(C)]` layouts that match field for field. Hosts never need this
//! module. Plugin authors who write Rust use [`export_plugin!`](crate::export_plugin), which
//! fills these structures for them; it is public so that unusual plugins can fill them by
//! hand.
//!
//! Version 2 only appends fields to version 1's structures, so a version-1 table is a prefix
//! of a version-2 one. A host reads a plugin's descriptor only as far as the plugin's
//! `abi_version` says it goes ([`dylease_plugin_abi1`] for version 1), and hands each plugin
//! a host API table that carries the plugin's own version ([`dylease_host_api_abi1`] for a
//! version-1 plugin): a version-1 plugin checks `api->abi_version == 1` and would refuse a
//! table that said 2.
//!
//! The names keep the C spelling so that the header and this module can be read side by side.
#![allow(non_camel_case_types)]
// `unsafe` here: the C types of the plugin ABI, whose layout checks and `Sync` impls are `unsafe`.
#![allow(unsafe_code)]

use core::ffi::{c_char, c_void};
use core::mem::offset_of;

/// The ABI version this crate speaks and builds plugins for. A host also accepts plugins of
/// every version from [`DYLEASE_OLDEST_ABI_VERSION`] up to this one; any other value is
/// refused with the host's `Error::AbiMismatch`.
pub const DYLEASE_ABI_VERSION: u32 = 2;

/// The oldest ABI version a host still loads: plugins built against version 1 of the header
/// load unchanged.
pub const DYLEASE_OLDEST_ABI_VERSION: u32 = 1;

/// The name of the one symbol every plugin exports: a [`dylease_plugin_v1_fn`]. It names the
/// entry convention, not the ABI version, and stays the same in version 2.
pub const DYLEASE_ENTRY_SYMBOL: &str = "dylease_plugin_v1";

/// Opaque registration context handed to `register_passes`.
///
/// It is valid only during that call and only on the calling thread; a plugin must not
/// keep the pointer.
#[repr(C)]
#[derive(Debug)]
pub struct dylease_registrar {
    _opaque: [u8; 0],
    // Not Send, not Sync, not Unpin: it is a foreign, thread-bound handle.
    _marker: core::marker::PhantomData<(*mut u8, core::marker::PhantomPinned)>,
}

/// Any function: the host stores it as this type and casts it back to the signature the
/// caller names in the host's `Lease::pass`.
pub type dylease_fn = unsafe extern "C" fn();

/// `add_pass`: registers one pass. Returns 0 when added, a negative value when refused.
pub type dylease_add_pass_fn = unsafe extern "C" fn(
    reg: *mut dylease_registrar,
    name: *const c_char,
    func: Option<dylease_fn>,
    user_data: *mut c_void,
) -> i32;

/// `add_typed_pass` (ABI version 2): registers one pass that implements `interface`, a
/// pass signature hosts and plugins agree on (UTF-8, 1 to 256 bytes, by convention
/// `domain.name/MAJOR`). Returns 0 when added, a negative value when refused.
pub type dylease_add_typed_pass_fn = unsafe extern "C" fn(
    reg: *mut dylease_registrar,
    name: *const c_char,
    interface: *const c_char,
    func: Option<dylease_fn>,
    user_data: *mut c_void,
) -> i32;

/// `report` (ABI version 2): tells the host why `register_passes` is about to fail. The
/// message (NUL-terminated, UTF-8 or not, at most 1024 bytes of it kept) appears in the load
/// error.
pub type dylease_report_fn = unsafe extern "C" fn(reg: *mut dylease_registrar, message: *const c_char);

/// What the host offers a plugin during `register_passes` (ABI version 2).
///
/// A version-1 plugin is handed a [`dylease_host_api_abi1`] instead, whose `abi_version` is 1.
#[repr(C)]
#[derive(Debug)]
pub struct dylease_host_api {
    /// The ABI version of this table: the plugin's own version, at most the host's
    /// [`DYLEASE_ABI_VERSION`]. The fields below `add_pass` exist when it is at least 2.
    pub abi_version: u32,
    /// Registers a pass; see [`dylease_add_pass_fn`].
    pub add_pass: dylease_add_pass_fn,
    /// Registers a typed pass; see [`dylease_add_typed_pass_fn`]. ABI version 2.
    pub add_typed_pass: dylease_add_typed_pass_fn,
    /// Says why registration fails; see [`dylease_report_fn`]. ABI version 2.
    pub report: dylease_report_fn,
}

/// The host API table of ABI version 1: the prefix of [`dylease_host_api`] that a version-1
/// plugin reads.
#[repr(C)]
#[derive(Debug)]
pub struct dylease_host_api_abi1 {
    /// Always 1.
    pub abi_version: u32,
    /// Registers a pass; see [`dylease_add_pass_fn`].
    pub add_pass: dylease_add_pass_fn,
}

/// `register_passes`: called once per load; returns 0 on success.
///
/// `api` points to a [`dylease_host_api`] when `(*api).abi_version >= 2`, and to a
/// [`dylease_host_api_abi1`] when it is 1.
pub type dylease_register_fn = unsafe extern "C" fn(api: *const dylease_host_api, reg: *mut dylease_registrar) -> i32;

/// `on_load` (ABI version 2): runs once per loaded instance of the library, before its first
/// `register_passes`; 0 means success.
pub type dylease_on_load_fn = unsafe extern "C" fn() -> i32;

/// `on_unload`: runs once per loaded instance of the library, before it is closed.
pub type dylease_on_unload_fn = unsafe extern "C" fn();

/// The static descriptor a plugin returns from its entry point (ABI version 2).
#[repr(C)]
#[derive(Debug)]
pub struct dylease_plugin {
    /// The ABI version the plugin was built for: 1 or 2. The fields below `on_unload` exist
    /// when it is at least 2.
    pub abi_version: u32,
    /// NUL-terminated UTF-8, non-empty, at most 256 bytes.
    pub name: *const c_char,
    /// NUL-terminated UTF-8, may be empty, at most 256 bytes.
    pub version: *const c_char,
    /// Registers the plugin's passes; 0 means success.
    pub register_passes: Option<dylease_register_fn>,
    /// Called once per loaded instance, before the library is closed. May be absent.
    pub on_unload: Option<dylease_on_unload_fn>,
    /// Called once per loaded instance, before its first `register_passes`. May be absent.
    /// ABI version 2.
    pub on_load: Option<dylease_on_load_fn>,
}

/// The descriptor of ABI version 1: the prefix of [`dylease_plugin`] that a host reads from
/// a version-1 plugin (reading further would read past the plugin's static).
#[repr(C)]
#[derive(Debug)]
pub struct dylease_plugin_abi1 {
    /// Always 1.
    pub abi_version: u32,
    /// NUL-terminated UTF-8, non-empty, at most 256 bytes.
    pub name: *const c_char,
    /// NUL-terminated UTF-8, may be empty, at most 256 bytes.
    pub version: *const c_char,
    /// Registers the plugin's passes; 0 means success.
    pub register_passes: Option<dylease_register_fn>,
    /// Called once per unload of a successful registration, before the library is closed.
    pub on_unload: Option<dylease_on_unload_fn>,
}

// Version 1's structures are prefixes of version 2's: same offsets for every shared field.
const _: () = {
    assert!(offset_of!(dylease_host_api, abi_version) == offset_of!(dylease_host_api_abi1, abi_version));
    assert!(offset_of!(dylease_host_api, add_pass) == offset_of!(dylease_host_api_abi1, add_pass));
    assert!(offset_of!(dylease_host_api, add_typed_pass) >= size_of::<dylease_host_api_abi1>());
    assert!(offset_of!(dylease_plugin, abi_version) == 0);
    assert!(offset_of!(dylease_plugin, name) == offset_of!(dylease_plugin_abi1, name));
    assert!(offset_of!(dylease_plugin, version) == offset_of!(dylease_plugin_abi1, version));
    assert!(offset_of!(dylease_plugin, register_passes) == offset_of!(dylease_plugin_abi1, register_passes));
    assert!(offset_of!(dylease_plugin, on_unload) == offset_of!(dylease_plugin_abi1, on_unload));
    assert!(offset_of!(dylease_plugin, on_load) >= size_of::<dylease_plugin_abi1>());
};

// SAFETY: every field is a `u32`, a raw pointer or an `unsafe fn` pointer, and `&dylease_plugin`
// gives safe code no way to dereference or call any of them: sharing a reference between
// threads shares only plain values. Whoever dereferences the pointers does so in `unsafe` code
// under the ABI's contract (immutable, NUL-terminated, valid while the library is loaded). A
// field added in a later ABI version must keep this true. Without this a plugin could not
// keep its descriptor in a `static`.
unsafe impl Sync for dylease_plugin {}
// SAFETY: the same fields as `dylease_plugin`, minus `on_load`; the same argument.
unsafe impl Sync for dylease_plugin_abi1 {}

/// The type of the entry point `dylease_plugin_v1`.
pub type dylease_plugin_v1_fn = unsafe extern "C" fn() -> *const dylease_plugin;

/// The interface id of message passes, `dylease.message/1`: a pass registered under it has
/// the signature [`dylease_message_fn`] (bytes in, bytes out), the one kind of pass that can
/// be called across a process boundary (the host's isolated sets). In C,
/// `DYLEASE_MESSAGE_INTERFACE` and `DYLEASE_MESSAGE_PASS`; in Rust,
/// [`MessagePass`](crate::MessagePass).
pub const DYLEASE_MESSAGE_INTERFACE: &str = "dylease.message/1";

/// Where a message pass appends its output: `write(out, bytes, len)` appends `len` bytes
/// and returns 0, or a non-zero value when the host refuses them (the output grew past what
/// the host accepts); the pass should then fail. Valid only during the call that received
/// it, on that thread.
#[repr(C)]
#[derive(Debug)]
pub struct dylease_out {
    /// The host's; a pass never reads or writes it.
    pub ctx: *mut c_void,
    /// Appends `len` bytes at `bytes` to the output; 0 when appended.
    pub write: unsafe extern "C" fn(out: *mut dylease_out, bytes: *const u8, len: usize) -> i32,
}

impl dylease_out {
    /// Appends `bytes` to the output through `out`: the Rust spelling of
    /// `out->write(out, bytes, len)`. Returns whether the host took them; when it did not,
    /// the pass should return non-zero.
    ///
    /// # Safety
    ///
    /// `out` is the pointer the host handed the running message pass, used during that call
    /// on its thread.
    pub unsafe fn append(out: *mut dylease_out, bytes: &[u8]) -> bool {
        // SAFETY: the caller's contract: `out` is the host's live output of this call.
        let write = unsafe { (*out).write };
        // SAFETY: as above; `bytes` is a live slice of `len` bytes.
        (unsafe { write(out, bytes.as_ptr(), bytes.len()) }) == 0
    }
}

/// A message pass (interface [`DYLEASE_MESSAGE_INTERFACE`]): reads `in_len` bytes at `input`
/// (which may be NULL when `in_len` is 0), appends its output through `out`, and returns 0 on
/// success or a status of its own on failure, which the caller of the pass receives.
/// `user_data` is the pointer the pass was registered with.
pub type dylease_message_fn =
    unsafe extern "C" fn(input: *const u8, in_len: usize, out: *mut dylease_out, user_data: *mut c_void) -> i32;
