//! The plugin ABI, version 1: the C types every plugin and host agree on.
//!
//! `include/dylease.h` is the normative copy of these declarations; this module mirrors
//! it for Rust, with `#[repr(C)]` layouts that match field for field. Hosts never need this
//! module. Plugin authors who write Rust use [`export_plugin!`](crate::export_plugin), which
//! fills these structures for them; it is public so that unusual plugins can fill them by
//! hand.
//!
//! The names keep the C spelling so that the header and this module can be read side by side.
#![allow(non_camel_case_types)]

use core::ffi::{c_char, c_void};

/// The ABI version this crate speaks. A plugin whose descriptor carries another value is
/// refused with [`Error::AbiMismatch`](crate::Error::AbiMismatch).
pub const DYLEASE_ABI_VERSION: u32 = 1;

/// The name of the one symbol every plugin exports: a [`dylease_plugin_v1_fn`].
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
/// caller names in [`Lease::pass`](crate::Lease::pass).
pub type dylease_fn = unsafe extern "C" fn();

/// `add_pass`: registers one pass. Returns 0 when added, a negative value when refused.
pub type dylease_add_pass_fn = unsafe extern "C" fn(
    reg: *mut dylease_registrar,
    name: *const c_char,
    func: Option<dylease_fn>,
    user_data: *mut c_void,
) -> i32;

/// What the host offers a plugin during `register_passes`.
#[repr(C)]
#[derive(Debug)]
pub struct dylease_host_api {
    /// The host's [`DYLEASE_ABI_VERSION`].
    pub abi_version: u32,
    /// Registers a pass; see [`dylease_add_pass_fn`].
    pub add_pass: dylease_add_pass_fn,
}

/// `register_passes`: called once per load; returns 0 on success.
pub type dylease_register_fn = unsafe extern "C" fn(api: *const dylease_host_api, reg: *mut dylease_registrar) -> i32;

/// The static descriptor a plugin returns from its entry point.
#[repr(C)]
#[derive(Debug)]
pub struct dylease_plugin {
    /// The [`DYLEASE_ABI_VERSION`] the plugin was built for.
    pub abi_version: u32,
    /// NUL-terminated UTF-8, non-empty, at most 256 bytes.
    pub name: *const c_char,
    /// NUL-terminated UTF-8, may be empty, at most 256 bytes.
    pub version: *const c_char,
    /// Registers the plugin's passes; 0 means success.
    pub register_passes: Option<dylease_register_fn>,
    /// Called once per unload of a successful load, before the library is closed. May be
    /// absent.
    pub on_unload: Option<unsafe extern "C" fn()>,
}

// SAFETY: every field is a `u32`, a raw pointer or an `unsafe fn` pointer, and `&dylease_plugin`
// gives safe code no way to dereference or call any of them: sharing a reference between
// threads shares only plain values. Whoever dereferences the pointers does so in `unsafe` code
// under the ABI's contract (immutable, NUL-terminated, valid while the library is loaded). A
// field added in a later ABI version must keep this true. Without this a plugin could not
// keep its descriptor in a `static`.
unsafe impl Sync for dylease_plugin {}

/// The type of the entry point `dylease_plugin_v1`.
pub type dylease_plugin_v1_fn = unsafe extern "C" fn() -> *const dylease_plugin;
