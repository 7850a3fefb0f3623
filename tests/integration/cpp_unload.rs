//! C++ plugins that really unload: the example plugin `examples/plugins/layout*.cpp` (a
//! function-local static singleton holding a `std::string`, a `thread_local` with a destructor,
//! an exception thrown and caught inside) built with the recipe unmaps after each last lease;
//! built plainly, its GNU unique symbols pin it, and the host predicts, reports and counts
//! that once.

use std::path::Path;
use std::time::Duration;

use dylease::{Lease, PinCause, PluginHost};
use log::Level;

use crate::logger;
use crate::support::{Graph, GraphPass, TestDir, assert_loaded, assert_unloaded};

type IntFn = unsafe extern "C" fn() -> i32;

/// Runs the plugin's `nchw_to_nhwc` on a thread of its own that has ended when this returns
/// (the pass touches a `thread_local` with a destructor, which keeps the library mapped while
/// its thread lives), then returns the instance's conversion count. The thread is joined
/// explicitly: the end of a `thread::scope` waits only for the closure, not for the thread's
/// thread-local destructors, which run after it.
fn convert_on_a_worker(lease: &Lease) -> i32 {
    std::thread::scope(|scope| {
        let worker = scope.spawn(|| {
            let pass = lease.get::<GraphPass>("nchw_to_nhwc").unwrap();
            let mut graph = Graph { nodes: 4, rewrites: 0 };
            // SAFETY: `graph` is a valid `demo_graph`, and `lease` is alive.
            unsafe { pass(&mut graph) };
            assert_eq!(graph.rewrites, 1);
        });
        worker.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
    });
    // SAFETY: the plugin registers `conversions` as `int (*)(void)`.
    let conversions = unsafe { lease.pass::<IntFn>("conversions") }.unwrap();
    // SAFETY: `lease` is alive.
    unsafe { conversions() }
}

fn host(lib: &Path) -> PluginHost {
    // SAFETY: the library is this suite's build of the example plugin, whose code is sound.
    unsafe { PluginHost::builder().file(lib) }.build().unwrap()
}

#[test]
fn a_cpp_plugin_built_with_the_version_script_unmaps_after_each_last_lease() {
    let dir = TestDir::new("cpp_recipe");
    let lib = dir.add("layout_recipe", "liblayout_recipe.so");
    let host = host(&lib);
    for round in 1..=3 {
        let lease = host.acquire().unwrap();
        let pinning = lease.plugins()[0].pinning();
        assert!(!pinning.expected(), "round {round}: {pinning:?}");
        // Only the thread-local's destructor is left, which pins only while its thread lives.
        assert_eq!(pinning.causes(), [PinCause::ThreadLocalDestructors], "round {round}");
        assert_eq!(
            convert_on_a_worker(&lease),
            1,
            "round {round}: on_load's state is fresh"
        );
        drop(lease);
        assert_unloaded(&lib);
    }
    assert_eq!(host.stats().unloads, 3);
    assert_eq!(host.stats().pinned_libraries, 0);
}

/// The prediction for the plain C++ example (no version script): pinned by its two GNU unique
/// symbols, then the causes that may pin: the thread-local, and what else it exports.
#[track_caller]
fn assert_predicted_pinned_as_the_plain_example(pinning: &dylease::Pinning, round: usize) {
    assert!(pinning.expected(), "round {round}: {pinning:?}");
    assert_eq!(
        pinning.causes()[0],
        PinCause::GnuUnique {
            count: 2,
            example: "_ZZN6layout8Registry3getEvE8instance".into()
        }
    );
    assert_eq!(pinning.causes()[1], PinCause::ThreadLocalDestructors);
    assert!(
        matches!(&pinning.causes()[2], PinCause::Exports { count, .. } if *count > 0),
        "{pinning:?}"
    );
    assert_eq!(pinning.causes().len(), 3, "{pinning:?}");
}

#[test]
fn a_cpp_plugin_built_without_it_is_reported_pinned_by_its_gnu_unique_symbols_once() {
    logger::install();
    let dir = TestDir::new("cpp_plain");
    let lib = dir.add("layout_plain", "liblayout_plain.so");
    let host = host(&lib);
    for round in 1..=5 {
        let lease = host.acquire().unwrap();
        assert_predicted_pinned_as_the_plain_example(lease.plugins()[0].pinning(), round);
        convert_on_a_worker(&lease);
        drop(lease);
        assert_loaded(&lib);
    }
    assert_eq!(host.stats().unloads, 5);
    assert_eq!(host.stats().pinned_libraries, 1, "counted once, not once per unload");
    let warnings = logger::records(Level::Warn, &format!("plugin file `{}` is still loaded", lib.display()));
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let warning = &warnings[0];
    assert!(
        warning.contains(
            "as its file predicted: it exports 2 GNU unique symbols, e.g. `_ZZN6layout8Registry3getEvE8instance`"
        ) && warning.contains("glibc never unloads such a library")
            && warning.contains("fix: link the plugin with dylease's version script"),
        "{warning}"
    );
    assert!(warning.starts_with("[host-"), "the line names the host: {warning}");
}

#[test]
fn a_thread_local_destructor_keeps_the_library_mapped_while_its_thread_lives() {
    // Bounded as a whole: the scope below joins its worker, which a bug could leave stuck
    // (in its acquire or its lease's drop) after the main thread's own bounded wait failed.
    crate::bounded::bounded(
        "a_thread_local_destructor_keeps_the_library_mapped_while_its_thread_lives",
        crate::bounded::LIMIT,
        a_thread_local_destructor_keeps_the_library_mapped_while_its_thread_lives_body,
    );
}

fn a_thread_local_destructor_keeps_the_library_mapped_while_its_thread_lives_body() {
    logger::install();
    let dir = TestDir::new("cpp_thread_local");
    let lib = dir.add("layout_recipe", "liblayout_tls.so");
    let host = host(&lib);
    // The pass runs on the thread that drops the last lease: its thread-local is still alive.
    let (dropped, ready) = std::sync::mpsc::channel();
    let (checked, go) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|scope| {
        let host = &host;
        scope.spawn(move || {
            let lease = host.acquire().unwrap();
            let pass = lease.get::<GraphPass>("nchw_to_nhwc").unwrap();
            let mut graph = Graph { nodes: 4, rewrites: 0 };
            // SAFETY: `graph` is a valid `demo_graph`, and `lease` is alive.
            unsafe { pass(&mut graph) };
            drop(lease);
            dropped.send(()).unwrap();
            // Checked while this thread (and its thread-local) lives.
            let _ = go.recv_timeout(Duration::from_secs(60));
        });
        ready
            .recv_timeout(Duration::from_secs(60))
            .expect("the worker dropped its lease");
        assert_loaded(&lib);
        assert_eq!(host.stats().pinned_libraries, 1);
        let warnings = logger::records(Level::Warn, &format!("plugin file `{}` is still loaded", lib.display()));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(
            warnings[0].contains("it registers thread-local destructors"),
            "{}",
            warnings[0]
        );
        checked.send(()).unwrap();
    });
}

/// The prediction reads what the loader reads (the dynamic section and the symbols it
/// reaches through DT_SYMTAB and the hash table), not the section headers, which the loader
/// never reads and a file may lack: the plain C++ plugin with its section header table gone
/// (`e_shoff`, `e_shnum` and `e_shstrndx` zeroed) loads as before and is still predicted
/// pinned by its GNU unique symbols. (Whether this copy then stays mapped depends on the order
/// of the tests: glibc pins only the first library of the process that defines a unique
/// symbol, and the other tests load the same plugin.)
#[test]
fn a_cpp_plugin_without_section_headers_is_still_predicted_pinned() {
    // In a child process: glibc pins only the first library of a process that defines a
    // given GNU unique symbol (later ones bind to it and unload), so loading this copy here
    // would decide whether the test above sees its own copy pinned.
    const CHILD: &str = "DYLEASE_TEST_NO_SECTION_HEADERS";
    if std::env::var_os(CHILD).is_none() {
        let mut child = std::process::Command::new(std::env::current_exe().unwrap());
        child
            .args([
                "--exact",
                "cpp_unload::a_cpp_plugin_without_section_headers_is_still_predicted_pinned",
            ])
            .args(["--test-threads", "1"])
            .env(CHILD, "1");
        let output = crate::bounded::bounded("the child process", std::time::Duration::from_secs(120), move || {
            child.output().unwrap()
        });
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && stdout.contains("1 passed"),
            "the child failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        return;
    }
    let dir = TestDir::new("cpp_no_sections");
    let lib = dir.add("layout_plain", "liblayout_no_sections.so");
    let mut bytes = std::fs::read(&lib).unwrap();
    assert_eq!(&bytes[..6], b"\x7fELF\x02\x01", "a 64-bit little-endian library");
    // e_shoff (8 bytes at 40), e_shnum (2 at 60), e_shstrndx (2 at 62).
    bytes[40..48].fill(0);
    bytes[60..64].fill(0);
    std::fs::write(&lib, &bytes).unwrap();
    let host = host(&lib);
    let lease = host.acquire().unwrap();
    // The imports (which the hash table does not index) are read too.
    assert_predicted_pinned_as_the_plain_example(lease.plugins()[0].pinning(), 1);
    drop(lease);
}
