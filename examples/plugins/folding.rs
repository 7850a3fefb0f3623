//! An example dylease plugin written in Rust: a typed constant-folding pass over the demo's
//! graph, a load hook and an unload hook. It declares its pass in `export_plugin!`, which
//! writes a complete manifest into the library (`readelf -n` shows its `dylease` notes).
//!
//! Build it with `cargo build -p dylease-example-rust-plugin`; the library lands in
//! `target/debug/` (`libdylease_example_rust_plugin.so` on Linux). `cargo run --example demo`
//! builds and loads it next to the C and C++ example plugins.

use std::sync::atomic::{AtomicBool, Ordering};

/// Set by `on_load`, cleared by `on_unload`: state that belongs to one loaded instance of the
/// library. Kept in `on_load` rather than in a constructor (or a lazily initialised static),
/// it is fresh at every load even where the platform keeps the library mapped.
static READY: AtomicBool = AtomicBool::new(false);

/// The demo's graph: the same layout as `demo_graph` in `examples/plugins/graph.h`.
#[repr(C)]
#[derive(Debug)]
pub struct Graph {
    nodes: i32,
    rewrites: i32,
}

/// The interface of every example pass: `void (*)(demo_graph *)` under "demo.graph_pass/1".
#[derive(Debug)]
pub struct GraphPass;
// SAFETY: every pass registered under "demo.graph_pass/1" (by this plugin and the C and C++
// example plugins) is a `void (*)(demo_graph *)`.
unsafe impl dylease_plugin::Interface for GraphPass {
    const ID: &'static str = "demo.graph_pass/1";
    type Fn = unsafe extern "C" fn(*mut Graph);
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
    if !READY.load(Ordering::Acquire) {
        return;
    }
    let folded = graph.nodes / 5;
    graph.nodes -= folded;
    graph.rewrites += folded;
}

dylease_plugin::export_plugin! {
    name: "folding",
    version: env!("CARGO_PKG_VERSION"),
    // The passes, declared: the macro registers them, and writes them into the library's
    // manifest, which says this is the complete list.
    passes: [
        typed GraphPass: "fold_constants" => fold_constants,
    ],
    on_load: || {
        println!("             [folding plugin, Rust] on_load");
        READY.store(true, Ordering::Release);
        Ok(())
    },
    on_unload: || {
        READY.store(false, Ordering::Release);
        println!("             [folding plugin, Rust] on_unload");
    },
}
