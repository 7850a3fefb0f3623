//! The plugin side of [dylease](https://docs.rs/dylease): what a plugin and a host agree on,
//! with no host code.
//!
//! A Rust plugin crate (a `cdylib`) depends on this crate alone and exports itself with
//! [`export_plugin!`]; its register function registers passes into a [`Registrar`]. A host
//! (the `dylease` crate) loads it, and re-exports everything here, so that the same register
//! function can also be compiled into a host as a static plugin.
//!
//! - [`abi`]: the C types of the plugin ABI, mirroring `include/dylease.h` field for field;
//! - [`Interface`]: a pass signature named by an id that hosts and plugins agree on;
//!   [`MessagePass`] is the one every host can call across a process boundary (bytes in,
//!   bytes out);
//! - [`PassFn`]: the function-pointer types that travel through the ABI as passes;
//! - [`Registrar`] and [`RegisterError`]: the one registration surface, and how it fails;
//!   [`LibraryRegistrar`] is the registrar `export_plugin!` hands a library plugin.
//!
//! # Example
//!
//! ```
//! use dylease_plugin::{Interface, RegisterError, Registrar};
//!
//! pub struct IntOp;
//! // SAFETY: every pass registered under "math.int_op/1" is an `extern "C" fn(i32) -> i32`.
//! unsafe impl Interface for IntOp {
//!     const ID: &'static str = "math.int_op/1";
//!     type Fn = unsafe extern "C" fn(i32) -> i32;
//! }
//!
//! extern "C" fn triple(x: i32) -> i32 { x * 3 }
//!
//! fn register(reg: &mut impl Registrar) -> Result<(), RegisterError> {
//!     reg.add_typed_pass::<IntOp>("triple", triple, std::ptr::null_mut())
//! }
//!
//! dylease_plugin::export_plugin! {
//!     name: "rust-math",
//!     version: "1.0.0",
//!     register: |reg| register(reg),
//! }
//! # fn main() {}
//! ```
//!
//! # Features
//!
//! - `allow-panic-abort`: silences `export_plugin!`'s compile-time warning in a plugin crate
//!   built with `panic = "abort"` (see the macro's documentation).
#![deny(unsafe_code)]

pub mod abi;
mod export;
mod pass_fn;
mod registrar;

#[doc(hidden)]
pub use export::__private;
pub use export::LibraryRegistrar;
pub use pass_fn::{Interface, MessagePass, PassFn, UnsafePassFn};
pub use registrar::{RegisterError, Registrar};
