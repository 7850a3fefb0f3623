//! An example dylease plugin written in Rust: one pass, `triple`, and an unload hook.
//!
//! Build it with `cargo build -p dylease-example-rust-plugin`; the library lands in
//! `target/debug/` (`libdylease_example_rust_plugin.so` on Linux).

use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

/// How many times `register` ran in this copy of the library (reset when it is unmapped).
static REGISTERED: AtomicU32 = AtomicU32::new(0);

extern "C" fn triple(x: i32) -> i32 {
    x * 3
}

extern "C" fn registrations() -> u32 {
    REGISTERED.load(Ordering::SeqCst)
}

dylease::export_plugin! {
    name: "rust-example",
    version: env!("CARGO_PKG_VERSION"),
    register: |reg| {
        REGISTERED.fetch_add(1, Ordering::SeqCst);
        reg.add_pass("triple", triple as extern "C" fn(i32) -> i32, ptr::null_mut())?;
        reg.add_pass("registrations", registrations as extern "C" fn() -> u32, ptr::null_mut())
    },
}
