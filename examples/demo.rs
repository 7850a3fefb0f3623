//! The mission scenario, with real plugins: a long-lived graph session and a short-lived
//! single-operator compiler share plugins in one process. The compiler finishing must not
//! unload the session's passes; the plugins unload once, when the last user is done.
//!
//! Run with `cargo run --example demo`. It compiles the C plugins in `examples/plugins/`
//! with the system C compiler into a temporary directory first.

use std::path::{Path, PathBuf};
use std::time::Instant;

use dylease::{Lease, PluginHost};

#[path = "../tests/support/cc.rs"]
mod cc;

/// The graph the passes rewrite; `examples/plugins/graph.h` declares the same layout.
#[repr(C)]
#[derive(Debug, Default)]
struct Graph {
    nodes: i32,
    rewrites: i32,
}

type GraphPass = unsafe extern "C" fn(*mut Graph);

/// Runs every pass of the lease over `graph`.
fn run_all_passes(lease: &Lease, graph: &mut Graph) -> Vec<String> {
    let mut ran = Vec::new();
    for info in lease.passes() {
        // SAFETY: every example plugin registers its passes as `void (*)(demo_graph *)`, and
        // the pass is called while `lease` is alive.
        let pass = unsafe { lease.pass::<GraphPass>(info.name()) }.expect("listed by the lease");
        // SAFETY: `graph` is a valid, exclusive `demo_graph`.
        unsafe { pass(graph) };
        ran.push(format!("{}::{}", info.plugin(), info.name()));
    }
    ran
}

fn build_plugins() -> Result<(PathBuf, Vec<PathBuf>), String> {
    let sources = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/plugins");
    let dir = std::env::temp_dir().join(format!("dylease-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let include = format!("-I{}", sources.display());
    let mut libs = Vec::new();
    for name in ["fusion", "layout"] {
        let source = sources.join(format!("{name}.c"));
        libs.push(cc::compile_plugin(
            &[&source],
            &dir.join(format!("lib{name}.so")),
            &[&include],
        )?);
    }
    Ok((dir, libs))
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

    println!("Plugins built into {}\n", dir.display());
    let host = PluginHost::builder().dir(&dir).build()?;

    let session = host.acquire()?;
    let plugins: Vec<String> = session
        .plugins()
        .iter()
        .map(|p| format!("{} {}", p.name(), p.version()))
        .collect();
    say(
        "session",
        &format!(
            "acquire() loaded generation {}: {} ({} passes); libraries {}",
            session.generation(),
            plugins.join(", "),
            session.passes().len(),
            where_mapped(&libs)
        ),
    );

    for op in 1..=3 {
        let who = format!("single-op #{op}");
        let compiler = host.acquire()?;
        say(
            &who,
            &format!("acquire() shares generation {} (no load)", compiler.generation()),
        );
        let mut graph = Graph {
            nodes: 8 * op,
            rewrites: 0,
        };
        let ran = run_all_passes(&compiler, &mut graph);
        say(&who, &format!("ran {} -> {graph:?}", ran.join(", ")));
        drop(compiler);
        say(
            &who,
            &format!(
                "finished and dropped its lease; plugins still loaded: {}, libraries {}",
                host.is_loaded(),
                where_mapped(&libs)
            ),
        );
    }

    let mut graph = Graph { nodes: 40, rewrites: 0 };
    let ran = run_all_passes(&session, &mut graph);
    say("session", &format!("still runs all {} passes -> {graph:?}", ran.len()));
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
