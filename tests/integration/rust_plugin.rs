//! A plugin written in Rust with `export_plugin!` loads and its passes are callable.

use std::path::Path;

use dylease::PluginHost;

use crate::support::{TestDir, assert_unloaded};

#[path = "../support/rust_plugin.rs"]
mod build;
use build::build_rust_plugin;

#[test]
fn a_rust_plugin_built_with_export_plugin_loads_and_its_pass_is_callable() {
    let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("rust-plugin");
    let built = build_rust_plugin(&target, true).unwrap();

    let dir = TestDir::new("rust_plugin");
    let lib = dir.path().join("libfolding.so");
    std::fs::copy(built, &lib).unwrap();
    let host = PluginHost::builder().file(&lib).build().unwrap();
    for generation in 1..=2 {
        let lease = host.acquire().unwrap();
        assert_eq!(lease.generation(), generation);
        assert_eq!(lease.plugins()[0].name(), "folding");
        assert_eq!(lease.plugins()[0].version(), "0.1.0");
        // SAFETY: the plugin registers `fold_constants` as `unsafe extern "C" fn(*mut Graph)`,
        // with the layout of `Graph`; it is called while `lease` lives.
        let fold = unsafe { lease.pass::<unsafe extern "C" fn(*mut Graph)>("fold_constants") }.unwrap();
        let mut graph = Graph { nodes: 10, rewrites: 0 };
        // SAFETY: `graph` is valid and exclusive.
        unsafe { fold(&mut graph) };
        assert_eq!((graph.nodes, graph.rewrites), (8, 2));
        drop(lease);
        // A Rust cdylib with no thread-locals in use unmaps like a C library, and registers
        // its pass again at the next load.
        assert_unloaded(&lib);
    }
}

/// `demo_graph` from `examples/plugins/graph.h`, as the example plugins see it.
#[repr(C)]
struct Graph {
    nodes: i32,
    rewrites: i32,
}
