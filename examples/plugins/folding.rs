//! An example dylease plugin written in Rust: a constant-folding pass over the demo's graph,
//! and an unload hook.
//!
//! Build it with `cargo build -p dylease-example-rust-plugin`; the library lands in
//! `target/debug/` (`libdylease_example_rust_plugin.so` on Linux). `cargo run --example demo`
//! builds and loads it next to the C and C++ example plugins.

use std::ptr;

/// The demo's graph: the same layout as `demo_graph` in `examples/plugins/graph.h`.
#[repr(C)]
#[derive(Debug)]
pub struct Graph {
    nodes: i32,
    rewrites: i32,
}

/// Folds one node in five. The type of every example pass: `void (*)(demo_graph *)`.
///
/// # Safety
///
/// `graph` is NULL or points to a valid graph that nothing else uses during the call.
unsafe extern "C" fn fold_constants(graph: *mut Graph) {
    // SAFETY: the caller's contract.
    let Some(graph) = (unsafe { graph.as_mut() }) else {
        return;
    };
    let folded = graph.nodes / 5;
    graph.nodes -= folded;
    graph.rewrites += folded;
}

dylease::export_plugin! {
    name: "folding",
    version: env!("CARGO_PKG_VERSION"),
    register: |reg| reg.add_pass(
        "fold_constants",
        fold_constants as unsafe extern "C" fn(*mut Graph),
        ptr::null_mut(),
    ),
    on_unload: || println!("             [folding plugin, Rust] on_unload"),
}
