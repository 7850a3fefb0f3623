//! The mission scenario, with real plugins: a long-lived graph session and a short-lived
//! single-operator compiler share plugins in one process. The compiler finishing must not
//! unload the session's passes; the plugins unload once, when the last user is done.
//!
//! Run with `cargo run --example demo`. It first builds the three example plugins into a
//! temporary directory: C (`examples/plugins/fusion.c`) with the system C compiler, C++
//! (`examples/plugins/layout*.cpp`, two translation units) with the system C++ compiler, and
//! Rust (`examples/plugins/folding.rs`, the crate `examples/rust-plugin`) with a nested
//! `cargo build`.

use std::path::{Path, PathBuf};
use std::time::Instant;

use dylease::{Interface, Lease, PluginHost};

#[path = "../tests/support/cc.rs"]
mod cc;
#[path = "../tests/support/rust_plugin.rs"]
mod rust_plugin;

/// The graph the passes rewrite; `examples/plugins/graph.h` declares the same layout.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
struct Graph {
    nodes: i32,
    rewrites: i32,
}

/// The interface of every example pass, in every language: `void (*)(demo_graph *)`.
struct GraphPass;
// SAFETY: every example plugin registers its passes under "demo.graph_pass/1" as
// `void (*)(demo_graph *)` (`DYLEASE_TYPED_PASS` in C and C++, `add_typed_pass` in Rust).
unsafe impl Interface for GraphPass {
    const ID: &'static str = "demo.graph_pass/1";
    type Fn = unsafe extern "C" fn(*mut Graph);
}

/// Runs every `demo.graph_pass/1` pass of the lease over `graph`, plugins in load order and
/// each plugin's passes in name order; returns how many ran.
fn run_all_passes(lease: &Lease, graph: &mut Graph) -> usize {
    let mut ran = 0;
    for pass in lease.passes_of::<GraphPass>() {
        // SAFETY: `graph` is a valid, exclusive `demo_graph`, and the pass is called while
        // `lease` is alive.
        unsafe { pass(graph) };
        ran += 1;
    }
    ran
}

/// One line per plugin of the lease: name, version, passes.
fn plugin_lines(lease: &Lease) -> String {
    let mut lines = String::new();
    for (index, plugin) in lease.plugins().iter().enumerate() {
        let passes: Vec<&str> = lease
            .passes()
            .iter()
            .filter(|pass| pass.plugin_index() == index)
            .map(|pass| pass.name())
            .collect();
        let line = format!("{} {}: {}", plugin.name(), plugin.version(), passes.join(", "));
        lines.push_str(&format!("\n{:27}{line}", ""));
    }
    lines
}

/// Builds the C, C++ and Rust example plugins into a fresh directory; returns it and the
/// library files.
fn build_plugins() -> Result<(PathBuf, Vec<PathBuf>), String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let sources = root.join("examples/plugins");
    let dir = std::env::temp_dir().join(format!("dylease-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let include = format!("-I{}", sources.display());
    let mut libs = Vec::new();

    println!("Building the example plugins:");
    println!("  C     examples/plugins/fusion.c                          -> libfusion.so");
    let fusion = sources.join("fusion.c");
    libs.push(cc::compile_plugin(&[&fusion], &dir.join("libfusion.so"), &[&include])?);

    println!("  C++   examples/plugins/layout.cpp, layout_transpose.cpp -> liblayout.so");
    let (layout, transpose) = (sources.join("layout.cpp"), sources.join("layout_transpose.cpp"));
    libs.push(cc::compile_plugin(
        &[&layout, &transpose],
        &dir.join("liblayout.so"),
        &[&include],
    )?);

    println!("  Rust  examples/plugins/folding.rs (cargo build)         -> libfolding.so");
    libs.push(build_rust_plugin(&dir.join("libfolding.so"))?);
    Ok((dir, libs))
}

/// Builds the example Rust plugin with cargo, in a target directory of its own next to this
/// example's binary (so it never waits for another build's lock), and copies it to `out`.
fn build_rust_plugin(out: &Path) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    // `<target>/<profile>/examples/demo` → `<target>/<profile>/demo-rust-plugin`.
    let target = exe
        .parent()
        .and_then(Path::parent)
        .ok_or("this program is not in a cargo target directory")?
        .join("demo-rust-plugin");
    let built = rust_plugin::build_rust_plugins(&target, false)?.join(rust_plugin::library_name());
    std::fs::copy(&built, out).map_err(|e| format!("cannot copy {} to {}: {e}", built.display(), out.display()))?;
    Ok(out.to_owned())
}

/// Whether `path` is mapped into this process (Linux: `/proc/self/maps`).
fn mapped(path: &Path) -> Option<bool> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let path = path.canonicalize().ok()?;
    Some(maps.lines().any(|line| line.ends_with(&*path.to_string_lossy())))
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (dir, libs) = build_plugins()?;
    let start = Instant::now();
    let say = |who: &str, what: &str| println!("[{:>8.3} ms] {who:<12} {what}", start.elapsed().as_secs_f64() * 1e3);
    let where_mapped = |libs: &[PathBuf]| match libs.iter().map(|l| mapped(l)).collect::<Option<Vec<_>>>() {
        Some(m) if m.iter().all(|&m| m) => "mapped",
        Some(m) if m.iter().all(|&m| !m) => "not mapped",
        Some(_) => "partly mapped",
        None => "unknown on this platform",
    };

    println!("into {}\n", dir.display());
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(&dir).build() }?;

    let session = host.acquire()?;
    say(
        "session",
        &format!(
            "acquire() loaded generation {}: {} plugins, {} passes; libraries {}{}",
            session.generation(),
            session.plugins().len(),
            session.passes().len(),
            where_mapped(&libs),
            plugin_lines(&session)
        ),
    );

    for op in 1..=3 {
        let who = format!("single-op #{op}");
        let compiler = host.acquire()?;
        say(
            &who,
            &format!("acquire() shares generation {} (no load)", compiler.generation()),
        );
        let before = Graph {
            nodes: 8 * op,
            rewrites: 0,
        };
        let mut graph = before;
        let ran = run_all_passes(&compiler, &mut graph);
        say(&who, &format!("ran {ran} passes: {before:?} -> {graph:?}"));
        drop(compiler);
        say(
            &who,
            &format!(
                "dropped its lease; plugins still loaded: {}, libraries {}",
                host.is_loaded(),
                where_mapped(&libs)
            ),
        );
    }

    let before = Graph { nodes: 40, rewrites: 0 };
    let mut graph = before;
    let ran = run_all_passes(&session, &mut graph);
    say(
        "session",
        &format!("still runs all {ran} passes: {before:?} -> {graph:?}"),
    );
    say("session", "drops the last lease:");
    drop(session);
    say(
        "session",
        &format!(
            "unloaded; plugins loaded: {}, libraries {}, loads in total: {}",
            host.is_loaded(),
            where_mapped(&libs),
            host.generation()
        ),
    );

    println!("\nWith a process-wide Shutdown(), single-op #1 would have unloaded the session's passes.");
    println!("With dylease there is no unload call to get wrong: the last lease to go unloads.");
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
