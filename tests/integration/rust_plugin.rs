//! A plugin written in Rust with `export_plugin!` loads and its passes are callable.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use dylease::PluginHost;

use crate::support::{TestDir, assert_unloaded};

#[path = "../support/rust_plugin.rs"]
pub(crate) mod build;

/// Builds the example Rust plugins (the library `examples/plugins/folding.rs` and its two
/// failing example plugins, `no_device` and `panicking`) once per test process; returns the
/// directory the libraries are in (the failing ones under `examples/`).
pub(crate) fn built_rust_plugins() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let target = Path::new(env!("CARGO_TARGET_TMPDIR")).join("rust-plugin");
        build::build_rust_plugins(&target, true).unwrap()
    })
}

#[test]
fn a_rust_plugin_built_with_export_plugin_loads_and_its_pass_is_callable() {
    let built = built_rust_plugins();
    let dir = TestDir::new("rust_plugin");
    let lib = dir.path().join("libfolding.so");
    std::fs::copy(built.join(build::library_name()), &lib).unwrap();
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&lib).build() }.unwrap();
    for generation in 1..=2 {
        let lease = host.acquire().unwrap();
        assert_eq!(lease.generation(), generation);
        assert_eq!(lease.plugins()[0].name(), "folding");
        // The standard library's weak import of glibc's thread-local destructor hook, in
        // every Rust cdylib, predicts nothing: the plugin uses no thread-local with `Drop`.
        assert_eq!(lease.plugins()[0].pinning().causes(), [], "generation {generation}");
        assert_eq!(lease.plugins()[0].version(), "0.1.0");
        assert_eq!(lease.passes()[0].interface(), Some("demo.graph_pass/1"));
        // SAFETY: the plugin registers `fold_constants` as `unsafe extern "C" fn(*mut Graph)`,
        // with the layout of `Graph`; it is called while `lease` lives.
        let fold = unsafe { lease.pass::<unsafe extern "C" fn(*mut Graph)>("fold_constants") }.unwrap();
        let mut graph = Graph { nodes: 10, rewrites: 0 };
        // SAFETY: `graph` is valid and exclusive.
        unsafe { fold(&mut graph) };
        // The pass folds only once the plugin's `on_load` ran in this generation.
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
