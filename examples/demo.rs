//! The scenario dylease exists for, with real plugins: two components of one process, a long-lived graph
//! session and a short-lived single-operator compiler, each build their own `PluginHost` over
//! the same plugin directory. The compiler's hosts come and go; the plugins' libraries load
//! once (one `on_load` each), are shared by every host, and unload once, when the session's
//! last lease is dropped at the end. The compiler uses one pass per operator, so its hosts are
//! on-demand (`HostBuilder::on_demand`): each of its sets maps only the plugin whose pass it
//! uses, and says which.
//!
//! Run with `cargo run -p dylease-demo` (the workspace member `examples/demo`, which builds
//! only what the demo needs; `cargo run --example demo` runs the same file). It first builds
//! the three example plugins into a temporary directory with dylease's build recipe (position-
//! independent code, hidden visibility, the version script `include/dylease.map`): C
//! (`examples/plugins/fusion.c`) with the system C compiler, C++ (`examples/plugins/layout*.cpp`,
//! two translation units, with a singleton, a `std::string`, a `thread_local` and an exception)
//! with the system C++ compiler, and Rust (`examples/plugins/folding.rs`, the crate
//! `examples/rust-plugin`) with a nested `cargo build`. With the `python` feature
//! (`cargo run -p dylease-demo --features python`) the hosts also load a Python pass,
//! `examples/plugins/simplify.py`, into the same sets.
//!
//! A third component, a filter service, runs a plugin it does not trust to behave
//! (`examples/plugins/filters.c`, whose `crash` pass writes through a NULL pointer) in an
//! isolated host (`HostBuilder::isolated`, the crate feature `isolate`): its set's plugins run
//! in a worker process. The crash ends the worker, fails that set's calls with an error
//! naming the plugin, the pass and the signal, and leaves the process and the graph session
//! running; the next `acquire()` gets a fresh worker.

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
/// each plugin's passes in name order, on a thread of its own (the C++ plugin's `thread_local`
/// then ends with that thread instead of keeping its library mapped); returns how many ran.
fn run_all_passes(lease: &Lease, graph: &mut Graph) -> usize {
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let mut ran = 0;
                for pass in lease.passes_of::<GraphPass>().expect("mapped") {
                    // SAFETY: `graph` is a valid, exclusive `demo_graph`, and the pass is
                    // called while `lease` is alive.
                    unsafe { pass(graph) };
                    ran += 1;
                }
                ran
            })
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }) + python::run(lease, graph)
}

/// The Python pass of the demo (the `python` feature): `examples/plugins/simplify.py`.
#[cfg(feature = "python")]
mod python {
    use std::path::Path;

    use dylease::{HostBuilder, Lease, PyInterface};

    use super::Graph;

    /// The signature of the demo's Python passes: the graph's counters in, new ones out.
    struct GraphPyPass;
    impl PyInterface for GraphPyPass {
        const ID: &'static str = "demo.graph_py_pass/1";
        type Args = (i32, i32);
        type Output = (i32, i32);
    }

    /// Copies the Python pass next to the libraries.
    pub(crate) fn install(sources: &Path, dir: &Path) -> Result<(), String> {
        println!("  Py    examples/plugins/simplify.py                       -> simplify.py");
        std::fs::copy(sources.join("simplify.py"), dir.join("simplify.py"))
            .map(drop)
            .map_err(|e| format!("cannot copy simplify.py: {e}"))
    }

    /// The builder with the Python plugins of `dir` too.
    pub(crate) fn with_python(builder: HostBuilder, dir: &Path) -> HostBuilder {
        // SAFETY: the directory holds the example plugins this program just installed.
        unsafe { builder.python_dir(dir) }
    }

    /// Runs every Python pass of the lease over `graph`; returns how many ran.
    pub(crate) fn run(lease: &Lease, graph: &mut Graph) -> usize {
        let mut ran = 0;
        for pass in lease.py_passes_of::<GraphPyPass>() {
            match pass.call((graph.nodes, graph.rewrites)) {
                Ok((nodes, rewrites)) => (graph.nodes, graph.rewrites) = (nodes, rewrites),
                Err(error) => eprintln!("{error}"),
            }
            ran += 1;
        }
        ran
    }
}

/// Without the `python` feature: no Python pass.
#[cfg(not(feature = "python"))]
mod python {
    use std::path::Path;

    use dylease::{HostBuilder, Lease};

    use super::Graph;

    pub(crate) fn install(_: &Path, _: &Path) -> Result<(), String> {
        Ok(())
    }

    pub(crate) fn with_python(builder: HostBuilder, _: &Path) -> HostBuilder {
        builder
    }

    pub(crate) fn run(_: &Lease, _: &mut Graph) -> usize {
        0
    }
}

/// One line per plugin of the lease: name, version, passes, and whether its file predicts
/// that it stays mapped after unload.
fn plugin_lines(lease: &Lease) -> String {
    let mut lines = String::new();
    for (index, plugin) in lease.plugins().iter().enumerate() {
        let passes: Vec<&str> = lease
            .passes()
            .iter()
            .filter(|pass| pass.plugin_index() == index)
            .map(|pass| pass.name())
            .collect();
        let stays = if plugin.pinning().expected() {
            "stays mapped after unload"
        } else {
            "unloads"
        };
        let line = format!(
            "{} {}: {} ({stays})",
            plugin.name(),
            plugin.version(),
            passes.join(", ")
        );
        lines.push_str(&format!("\n{:29}{line}", ""));
    }
    lines
}

/// Builds the C, C++ and Rust example plugins into a fresh directory; returns it, the library
/// files, and the filter plugin, built into a subdirectory (which the session's host, over the
/// directory alone, does not load).
fn build_plugins() -> Result<(PathBuf, Vec<PathBuf>, PathBuf), String> {
    let root = cc::crate_root();
    let sources = root.join("examples/plugins");
    let dir = std::env::temp_dir().join(format!("dylease-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    // The recipe (what CMake's `dylease_add_plugin` sets): hidden visibility and the version
    // script that keeps only `dylease_plugin_v1` global; `compile_plugin` adds -fPIC.
    let recipe = [
        format!("-I{}", sources.display()),
        "-fvisibility=hidden".to_owned(),
        format!("-Wl,--version-script={}", root.join("include/dylease.map").display()),
    ];
    let recipe: Vec<&str> = recipe.iter().map(String::as_str).collect();
    let mut libs = Vec::new();

    println!("Building the example plugins with the recipe (-fvisibility=hidden, the version script):");
    println!("  C     examples/plugins/fusion.c                          -> libfusion.so");
    let fusion = sources.join("fusion.c");
    libs.push(cc::compile_plugin(&[&fusion], &dir.join("libfusion.so"), &recipe)?);

    println!("  C++   examples/plugins/layout.cpp, layout_transpose.cpp -> liblayout.so");
    let (layout, transpose) = (sources.join("layout.cpp"), sources.join("layout_transpose.cpp"));
    libs.push(cc::compile_plugin(
        &[&layout, &transpose],
        &dir.join("liblayout.so"),
        &recipe,
    )?);

    println!("  Rust  examples/plugins/folding.rs (cargo build)         -> libfolding.so");
    libs.push(build_rust_plugin(&dir.join("libfolding.so"))?);
    python::install(&sources, &dir)?;

    println!("  C     examples/plugins/filters.c                         -> isolated/libfilters.so");
    let isolated = dir.join("isolated");
    std::fs::create_dir_all(&isolated).map_err(|e| format!("cannot create {}: {e}", isolated.display()))?;
    let filters = cc::compile_plugin(&[&sources.join("filters.c")], &isolated.join("libfilters.so"), &recipe)?;
    Ok((dir, libs, filters))
}

/// Builds the example Rust plugin with cargo, in a target directory of its own next to this
/// program (so it never waits for another build's lock), and copies it to `out`.
fn build_rust_plugin(out: &Path) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
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
    // Bytes: another mapped file's path need not be UTF-8.
    let maps = String::from_utf8_lossy(&std::fs::read("/proc/self/maps").ok()?).into_owned();
    let path = path.canonicalize().ok()?;
    Some(maps.lines().any(|line| line.ends_with(&*path.to_string_lossy())))
}

/// Prints dylease's `info` lines (each names its host), so the timeline shows which host
/// loaded and unloaded.
struct Logger(Instant);

impl log::Log for Logger {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        metadata.level() <= log::Level::Info
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            let at = self.0.elapsed().as_secs_f64() * 1e3;
            println!("[{at:>8.3} ms] {:<14} {}", "log", record.args());
        }
    }

    fn flush(&self) {}
}

/// The graph session: a component with a host of its own, alive for the whole program.
fn session_host(dir: &Path) -> Result<PluginHost, dylease::Error> {
    // SAFETY: the directory holds the example plugins this program just built.
    let builder = unsafe { PluginHost::builder().name("graph-session").dir(dir) };
    python::with_python(builder, dir).build()
}

/// One single-op compile: another component, which builds its own on-demand host over the
/// same directory, compiles one operator with the one pass it needs (`pass`) and drops
/// everything. Returns what it did.
fn single_op_compile(dir: &Path, op: i32, pass: &str) -> Result<String, dylease::Error> {
    // SAFETY: as for the session.
    let builder = unsafe { PluginHost::builder().name(format!("single-op-{op}")).dir(dir) }.on_demand();
    let host = python::with_python(builder, dir).build()?;
    let lease = host.acquire()?;
    let mapped = |lease: &Lease| -> Vec<String> {
        let plugins = lease.plugins().iter().filter(|plugin| plugin.is_mapped());
        plugins.map(|plugin| plugin.name().to_owned()).collect()
    };
    // Plugins without a complete manifest load at acquire(), as in any host; the others are
    // mapped at the first use of one of their passes.
    let at_acquire = mapped(&lease);
    let before = Graph {
        nodes: 8 * op,
        rewrites: 0,
    };
    let mut graph = before;
    let run = lease.get::<GraphPass>(pass)?; // maps the plugin of `pass`, and only it
    // SAFETY: `graph` is a valid, exclusive `demo_graph`, and the lease is alive.
    unsafe { run(&mut graph) };
    let on_use: Vec<String> = mapped(&lease)
        .into_iter()
        .filter(|name| !at_acquire.contains(name))
        .collect();
    let total = lease.plugins().len();
    drop(lease);
    let stats = host.stats();
    Ok(format!(
        "{} (its own on-demand host): {}; `{pass}` {before:?} -> {graph:?} mapped {} on first use, the others stayed \
         unmapped; dropped its lease and its host ({} load, {} unload)",
        stats.name,
        mapped_at_acquire(&at_acquire, total),
        on_use.join(", "),
        stats.loads,
        stats.unloads
    ))
}

/// The filter service: a component whose plugin may crash, in an isolated host of its own.
/// Its plugin crashes in a pass while the graph session (`session`) goes on working; the
/// crash is reported, and the next `acquire()` gets a fresh worker. Tells what it does with
/// `say`.
fn filter_service(file: &Path, session: &Lease, say: &dyn Fn(&str, &str)) -> Result<(), dylease::Error> {
    // SAFETY: the file is the example plugin this program just built; it runs in a worker.
    let host = unsafe { PluginHost::builder().name("filters").file(file) }
        .isolated()
        .build()?;
    let lease = host.acquire()?;
    let first = lease.worker_pid().unwrap_or_default();
    let shouted = lease.call("shout", b"isolate me")?;
    let here = match mapped(file) {
        Some(true) => "mapped",
        Some(false) => "not mapped",
        None => "unknown on this platform",
    };
    say(
        "filters",
        &format!(
            "its isolated host's acquire() started worker process {first}, which maps libfilters.so (in this \
             process: {here}); `shout` \"isolate me\" -> {:?}",
            String::from_utf8_lossy(&shouted)
        ),
    );
    // The pass crashes: its worker dies of SIGSEGV, this process does not.
    let crashed = lease.call("crash", b"").map(drop).unwrap_err();
    say("filters", &format!("`crash` -> Err: {crashed}"));
    let mut graph = Graph { nodes: 40, rewrites: 0 };
    let ran = run_all_passes(session, &mut graph);
    say(
        "graph-session",
        &format!("unharmed: runs all {ran} passes meanwhile: {graph:?}"),
    );
    drop(lease);
    let reaped = match Path::new(&format!("/proc/{first}")).exists() {
        false => "gone",
        true => "still there",
    };
    let lease = host.acquire()?;
    let shouted = lease.call("shout", b"back again")?;
    say(
        "filters",
        &format!(
            "dropped the failed set's lease (worker {first}: {reaped}); acquire() started worker process {}: \
             `shout` \"back again\" -> {:?}",
            lease.worker_pid().unwrap_or_default(),
            String::from_utf8_lossy(&shouted)
        ),
    );
    Ok(())
}

/// What an on-demand host's `acquire()` mapped (`at_acquire`, by name), of `total` plugins,
/// as a phrase.
fn mapped_at_acquire(at_acquire: &[String], total: usize) -> String {
    if at_acquire.is_empty() {
        return format!(
            "acquire() mapped none of its {total} plugins (each declares its passes in a complete manifest, so \
             each is mapped at the first use of one of them)"
        );
    }
    format!(
        "acquire() mapped {} of {total} plugins ({}: loaded as usual, without a complete library manifest)",
        at_acquire.len(),
        at_acquire.join(", ")
    )
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (dir, libs, filters) = build_plugins()?;
    let start = Instant::now();
    // The logger lives as long as the program: leaked once, as `log` asks of a `'static` one.
    if log::set_logger(Box::leak(Box::new(Logger(start)))).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
    let say = |who: &str, what: &str| println!("[{:>8.3} ms] {who:<14} {what}", start.elapsed().as_secs_f64() * 1e3);
    let where_mapped = |libs: &[PathBuf]| match libs.iter().map(|l| mapped(l)).collect::<Option<Vec<_>>>() {
        Some(m) if m.iter().all(|&m| m) => "mapped",
        Some(m) if m.iter().all(|&m| !m) => "not mapped",
        Some(_) => "partly mapped",
        None => "unknown on this platform",
    };

    println!("into {}\n", dir.display());
    let session = session_host(&dir)?;
    let lease = session.acquire()?;
    say(
        "graph-session",
        &format!(
            "acquire() loaded generation {}: {} plugins, {} passes; libraries {}{}",
            lease.generation(),
            lease.plugins().len(),
            lease.passes().len(),
            where_mapped(&libs),
            plugin_lines(&lease)
        ),
    );

    for (op, pass) in (1..=3).zip(["fuse_conv_relu", "drop_identity", "fuse_conv_relu"]) {
        let done = single_op_compile(&dir, op, pass)?;
        say("single-op", &done);
        say(
            "single-op",
            &format!(
                "gone; no on_unload ran, libraries {} (the session holds them)",
                where_mapped(&libs)
            ),
        );
    }

    filter_service(&filters, &lease, &say)?;

    let before = Graph { nodes: 40, rewrites: 0 };
    let mut graph = before;
    let ran = run_all_passes(&lease, &mut graph);
    say(
        "graph-session",
        &format!("still runs all {ran} passes: {before:?} -> {graph:?}"),
    );
    say("graph-session", "ends: drops its host, then its last lease:");
    drop(session);
    drop(lease);
    say("graph-session", &format!("unloaded: libraries {}", where_mapped(&libs)));

    println!("\nWith a process-wide Shutdown(), single-op #1 would have unloaded the session's passes.");
    println!("With dylease there is no unload call to get wrong: the last lease in the process unloads.");
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The phrase reads right whether `acquire()` mapped some plugins or none.
    #[test]
    fn what_acquire_mapped_reads_right_for_none_and_for_some() {
        assert_eq!(
            mapped_at_acquire(&[], 3),
            "acquire() mapped none of its 3 plugins (each declares its passes in a complete manifest, so each \
             is mapped at the first use of one of them)"
        );
        assert_eq!(
            mapped_at_acquire(&["folding".to_owned()], 3),
            "acquire() mapped 1 of 3 plugins (folding: loaded as usual, without a complete library manifest)"
        );
    }
}
