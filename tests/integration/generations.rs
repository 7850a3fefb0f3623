//! A new generation after the last lease dropped registers its passes afresh (invariant I6),
//! whether or not the platform really unmapped the library; a library the platform kept is
//! reported.

use dylease::PluginHost;
use log::Level;

use crate::logger;
use crate::support::{TestDir, assert_loaded, assert_unloaded};

type IntFn = extern "C" fn() -> i32;

fn ctor_runs(lease: &dylease::Lease) -> i32 {
    // SAFETY: ctor.c registers `ctor_runs` as `int (*)(void)`.
    let pass = unsafe { lease.pass::<IntFn>("ctor_runs") }.expect("ctor_runs is registered");
    pass()
}

#[test]
fn a_second_generation_after_a_real_unload_runs_constructors_and_registers_again() {
    let dir = TestDir::new("generation_reload");
    let lib = dir.add("ctor", "libctor.so");
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(dir.path()).build() }.unwrap();

    let first = host.acquire().unwrap();
    assert_eq!(first.generation(), 1);
    assert_eq!(ctor_runs(&first), 1);
    drop(first);
    assert_unloaded(&lib);

    let second = host.acquire().unwrap();
    assert_eq!(second.generation(), 2);
    assert_eq!(host.generation(), 2);
    // A fresh mapping: the constructor ran again on fresh statics.
    assert_eq!(ctor_runs(&second), 1);
    // SAFETY: `answer` is `int (*)(void)`.
    assert_eq!(unsafe { second.pass::<IntFn>("answer") }.unwrap()(), 42);
    drop(second);
    assert_unloaded(&lib);
    // The pinned check looked in the loader's list and found nothing.
    assert_eq!(host.stats().pinned_libraries, 0);
    assert_eq!(host.stats().unloads, 2);
}

#[test]
fn a_nodelete_library_that_never_unmaps_still_registers_its_passes_in_the_next_generation() {
    let dir = TestDir::new("generation_nodelete");
    let lib = dir.add("ctor_nodelete", "libctor_nodelete.so");
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&lib).build() }.unwrap();

    logger::install();
    let first = host.acquire().unwrap();
    assert_eq!(ctor_runs(&first), 1);
    // Predicted from the file before it was loaded.
    let pinning = first.plugins()[0].pinning();
    assert!(pinning.expected());
    assert_eq!(pinning.causes()[0], dylease::PinCause::NoDelete);
    drop(first);
    // `-z nodelete` pins the library: this is the platform case I6 is about.
    assert_loaded(&lib);
    assert!(
        !host.is_loaded(),
        "the set unloaded even though the library stayed mapped"
    );
    // The host noticed, counted and said so.
    assert_eq!(host.stats().pinned_libraries, 1);
    let warnings = logger::records(Level::Warn, &format!("plugin file `{}` is still loaded", lib.display()));
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("the platform pinned it"), "{}", warnings[0]);
    assert!(
        warnings[0].contains("as its file predicted: it is linked with `-z nodelete`"),
        "{}",
        warnings[0]
    );

    let second = host.acquire().unwrap();
    assert_eq!(second.generation(), 2);
    // The constructor did not run again (same mapping), yet the passes are registered,
    // because registration happens per load, not in constructors.
    assert_eq!(ctor_runs(&second), 1);
    assert!(second.pass_info("answer").is_some());
    assert_eq!(second.passes().len(), 2);
    drop(second);
    // The same mapping stayed: counted and warned about once, not once per unload.
    assert_eq!(host.stats().pinned_libraries, 1, "counted again by the second unload");
    let warnings = logger::records(Level::Warn, &format!("plugin file `{}` is still loaded", lib.display()));
    assert_eq!(warnings.len(), 1, "{warnings:?}");
}

#[test]
fn a_library_another_user_of_the_process_keeps_open_is_reported_as_pinned() {
    let dir = TestDir::new("generation_shared_file");
    let lib = dir.add("ctor", "libctor.so");
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(dir.path()).build() }.unwrap();
    // Another part of the process opened the same file through another path (a symlink), so
    // glibc shares one mapping between it and the host.
    let link = dir.path().join("elsewhere.so.link");
    std::os::unix::fs::symlink(&lib, &link).unwrap();
    // SAFETY: ctor.c's only initialisation code is a constructor that counts its runs.
    let other = unsafe { libloading::Library::new(&link) }.unwrap();
    drop(host.acquire().unwrap());
    assert_loaded(&lib);
    assert_eq!(
        host.stats().pinned_libraries,
        1,
        "the shared mapping is reported as pinned"
    );
    other.close().unwrap();
    assert_unloaded(&lib);
    // With the other user gone, the next unload really unmaps, and is not counted.
    drop(host.acquire().unwrap());
    assert_unloaded(&lib);
    assert_eq!(host.stats().pinned_libraries, 1);
}

#[test]
fn a_pinned_v2_plugin_starts_each_generation_with_fresh_on_load_state() {
    let dir = TestDir::new("generation_on_load_pinned");
    let lib = dir.add("on_load_state_nodelete", "libpinned.so");
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(dir.path()).build() }.unwrap();
    for generation in 1..=3 {
        let lease = host.acquire().unwrap();
        assert_eq!(lease.generation(), generation);
        // SAFETY: on_load_state.c registers `bump` and `ctor_runs` as `int (*)(void)`.
        let bump = unsafe { lease.pass::<IntFn>("bump") }.unwrap();
        // SAFETY: as above.
        let ctor_runs = unsafe { lease.pass::<IntFn>("ctor_runs") }.unwrap();
        // `on_load` made the state of this instance: fresh, whatever the mapping kept.
        assert_eq!(bump(), 1, "generation {generation}: on_load state is not fresh");
        assert_eq!(bump(), 2);
        // The mapping is the same one (its constructor ran once): only on_load made it fresh.
        assert_eq!(ctor_runs(), 1, "generation {generation}: the library was not pinned");
        drop(lease);
        assert_loaded(&lib);
    }
}
