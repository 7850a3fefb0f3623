//! The parse cache: a library file loaded again unchanged is not parsed again (its ELF check,
//! manifest and pin prediction come from the process's cache, keyed by the file's status),
//! a file changed in any way the status shows is parsed again, and the trust check runs at
//! every load whatever is cached.
//!
//! The tests count the `trace` lines the host logs for each ELF check: "parsed `…`: the ELF
//! check" when it read the file, "… taken from the parse cache" when it did not.

use std::fs::{self, Permissions};
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use dylease::{Error, OpenCause, PluginHost};
use log::Level;

use crate::logger;
use crate::support::{TestDir, assert_unloaded};

/// Longer than the cache's racy window (`inspect::parse_cache::RACY_WINDOW`, 2.1 s): a file last
/// changed this long ago is cached on its next load.
const SETTLE: Duration = Duration::from_millis(2300);

/// How many times the host read the file at `path` for its ELF check so far.
fn parsed(path: &Path) -> usize {
    logger::records(Level::Trace, &format!("parsed `{}`: the ELF check", path.display())).len()
}

/// How many times the host took the ELF check of `path` from the cache so far.
fn cached(path: &Path) -> usize {
    logger::records(
        Level::Trace,
        &format!("the ELF check of `{}` taken from the parse cache", path.display()),
    )
    .len()
}

fn host(lib: &Path) -> PluginHost {
    // SAFETY: the library is this suite's own fixture, whose initialisation code is sound.
    unsafe { PluginHost::builder().file(lib).build() }.unwrap()
}

/// One cold cycle: load the file, and unload it with the last lease.
fn cycle(host: &PluginHost, lib: &Path) {
    let lease = host.acquire().unwrap();
    assert_eq!(lease.plugins().len(), 1);
    drop(lease);
    assert_unloaded(lib);
}

/// `lib` rewritten so that it is built for another machine (its header's `e_machine`), its
/// size and modification time kept: only its ctime (and content) says it changed.
fn retarget(lib: &Path) {
    let before = fs::metadata(lib).unwrap();
    let file = fs::File::options().write(true).open(lib).unwrap();
    // EM_MIPS, far from any machine these tests run on.
    file.write_all_at(&8u16.to_le_bytes(), 18).unwrap();
    file.set_modified(before.modified().unwrap()).unwrap();
    drop(file);
    let after = fs::metadata(lib).unwrap();
    assert_eq!(after.len(), before.len());
    assert_eq!(after.modified().unwrap(), before.modified().unwrap());
}

#[track_caller]
fn assert_refused_by_the_elf_check(error: &Error, lib: &Path) {
    assert!(
        matches!(error, Error::Open { path, cause: OpenCause::Headers, .. } if path == lib),
        "not the ELF check's refusal: {error:?}"
    );
}

/// An unchanged file loaded in two cold cycles (acquire, drop, acquire, drop) is parsed once:
/// the second load takes the ELF check from the cache. Caught: nothing stored in the cache
/// (every `settled` false), or a key that differs between two opens of the same file (the
/// descriptor's number, say).
#[test]
fn an_unchanged_file_loaded_in_two_cold_cycles_is_parsed_once() {
    logger::install();
    let dir = TestDir::new("parse_cache_unchanged");
    let lib = dir.add("by_hand", "libcached.so");
    std::thread::sleep(SETTLE);
    let host = host(&lib);
    cycle(&host, &lib);
    cycle(&host, &lib);
    assert_eq!((parsed(&lib), cached(&lib)), (1, 1), "(parsed, cached)");
}

/// The racy rule: a file changed less than one timestamp tick (the cache's racy window)
/// before it is opened is parsed at each load, since a same-size rewrite within that tick
/// could keep its whole status. Caught: `settled` always true.
#[test]
fn a_file_changed_just_before_its_loads_is_parsed_at_each() {
    logger::install();
    let dir = TestDir::new("parse_cache_racy");
    let lib = dir.add("by_hand", "libracy.so");
    let host = host(&lib);
    // Each load follows a change of the file's status (a `chmod` to the same mode sets its
    // ctime to now), so each is within the window however slow the machine is.
    let touch = || {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    touch();
    cycle(&host, &lib);
    touch();
    cycle(&host, &lib);
    assert_eq!((parsed(&lib), cached(&lib)), (2, 0), "(parsed, cached)");
}

/// A cached file rewritten in place with the same size and the same modification time but
/// other bytes is parsed again (its ctime changed), and refused by the ELF check, as a fresh
/// load would refuse it. Caught: a key of size and mtime alone (the cached verdict then lets
/// the loader open a file built for another machine).
#[test]
fn a_same_size_rewrite_keeping_the_mtime_is_parsed_again() {
    logger::install();
    let dir = TestDir::new("parse_cache_rewrite");
    let lib = dir.add("by_hand", "librewritten.so");
    std::thread::sleep(SETTLE);
    let host = host(&lib);
    cycle(&host, &lib);
    retarget(&lib);
    let error = host.acquire().unwrap_err();
    assert_refused_by_the_elf_check(&error, &lib);
    assert_eq!((parsed(&lib), cached(&lib)), (2, 0), "(parsed, cached)");
}

/// A cached file replaced by rename (a new inode) with a file of the same size and
/// modification time is parsed again, and refused by the ELF check. Caught: a key without
/// the inode and ctime (size and mtime alone).
#[test]
fn a_file_replaced_by_rename_is_parsed_again() {
    logger::install();
    let dir = TestDir::new("parse_cache_renamed");
    let lib = dir.add("by_hand", "librenamed.so");
    std::thread::sleep(SETTLE);
    let host = host(&lib);
    cycle(&host, &lib);
    let next = dir.path().join("librenamed.so.new");
    fs::copy(&lib, &next).unwrap();
    fs::set_permissions(&next, Permissions::from_mode(0o755)).unwrap();
    let modified = fs::metadata(&lib).unwrap().modified().unwrap();
    fs::File::options()
        .write(true)
        .open(&next)
        .unwrap()
        .set_modified(modified)
        .unwrap();
    retarget(&next);
    fs::rename(&next, &lib).unwrap();
    let error = host.acquire().unwrap_err();
    assert_refused_by_the_elf_check(&error, &lib);
    assert_eq!((parsed(&lib), cached(&lib)), (2, 0), "(parsed, cached)");
}

/// A cached file whose directory becomes writable by others is refused by the trust check:
/// the cache answers what the file holds, never whether another user may have chosen it
/// (the directory's mode changes nothing of the file's status). Caught: a trust check that
/// passes a file whose status the cache knows.
#[test]
fn a_cached_file_whose_directory_becomes_world_writable_is_still_refused() {
    logger::install();
    let dir = TestDir::new("parse_cache_trust");
    let plugins = dir.sub("plugins");
    let lib = plugins.join("libtrusted.so");
    fs::copy(dir.add("by_hand", "libsource.so"), &lib).unwrap();
    fs::set_permissions(&lib, Permissions::from_mode(0o755)).unwrap();
    std::thread::sleep(SETTLE);
    let host = host(&lib);
    cycle(&host, &lib);
    cycle(&host, &lib);
    assert_eq!((parsed(&lib), cached(&lib)), (1, 1), "the file is cached");
    fs::set_permissions(&plugins, Permissions::from_mode(0o777)).unwrap();
    let refused = host.acquire().map(drop);
    fs::set_permissions(&plugins, Permissions::from_mode(0o755)).unwrap();
    let error = refused.unwrap_err();
    assert!(
        matches!(&error, Error::Untrusted { path, reason, .. } if path == &lib && reason.contains("writable by")),
        "{error:?}"
    );
    assert_unloaded(&lib);
    // And so is the file itself made world-writable (which changes its ctime, too).
    fs::set_permissions(&lib, Permissions::from_mode(0o777)).unwrap();
    let error = host.acquire().unwrap_err();
    assert!(matches!(&error, Error::Untrusted { .. }), "{error:?}");
}

/// How many times an on-demand acquire judged `path` from the cache, by the status discovery
/// read, without opening it.
fn judged_unopened(path: &Path) -> usize {
    logger::records(
        Level::Trace,
        &format!(
            "judged `{}` by its status from the parse cache, not opened",
            path.display()
        ),
    )
    .len()
}

/// An on-demand acquire judges an unchanged file whose parse the cache holds without opening
/// it (no ELF check of any descriptor at the acquire: neither parsed nor taken from the cache),
/// still judges its trust at every acquire, and still holds the first use to the file judged:
/// one replaced after the acquire is refused, none of its code run. Caught: the judgement by
/// status never used (the acquire opens the file and takes its ELF check from the cache),
/// the trust check skipped for a file judged by status, and a `Deferred` made by status that
/// does not keep the identity judged (the replacement is mapped).
#[test]
fn an_unchanged_on_demand_plugin_is_judged_without_being_opened_and_its_first_use_holds_it_to_that_file() {
    use crate::on_demand::IntOp;

    logger::install();
    let dir = TestDir::new("parse_cache_on_demand");
    let plugins = dir.sub("plugins");
    let lib = plugins.join("libr.so");
    fs::copy(dir.add("demand_r", "libsource.so"), &lib).unwrap();
    fs::set_permissions(&lib, Permissions::from_mode(0o755)).unwrap();
    let new = plugins.join("new.so.tmp");
    fs::copy(dir.add("demand_r_two", "libnew.so"), &new).unwrap();
    std::thread::sleep(SETTLE);
    // SAFETY: the directory holds this suite's own fixtures, whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(&plugins) }
        .on_demand()
        .build()
        .unwrap();
    // The first acquire opens the file, parses it and caches what it decided.
    drop(host.acquire().unwrap());
    assert_eq!((parsed(&lib), cached(&lib), judged_unopened(&lib)), (1, 0, 0));

    // The second judges it by its status: no descriptor of it read at all.
    let lease = host.acquire().unwrap();
    assert_eq!((parsed(&lib), cached(&lib), judged_unopened(&lib)), (1, 0, 1));
    assert!(!lease.plugins()[0].is_mapped());
    // Its first use opens it, and takes the ELF check of that descriptor from the cache.
    // SAFETY: the lease is alive; the pass takes any `i32`.
    assert_eq!(unsafe { lease.get::<IntOp>("r_pass_a").unwrap()(1) }, 2);
    assert_eq!((parsed(&lib), cached(&lib)), (1, 1));
    drop(lease);
    assert_unloaded(&lib);

    // Trust is judged at every acquire, whatever is cached.
    fs::set_permissions(&plugins, Permissions::from_mode(0o777)).unwrap();
    let refused = host.acquire().map(drop);
    fs::set_permissions(&plugins, Permissions::from_mode(0o755)).unwrap();
    let error = refused.unwrap_err();
    assert!(
        matches!(&error, Error::Untrusted { path, reason, .. } if path == &lib && reason.contains("writable by")),
        "{error:?}"
    );

    // A set judged by status maps only the file it judged.
    let lease = host.acquire().unwrap();
    assert_eq!(judged_unopened(&lib), 2);
    let events = Path::new(&format!("{}.log", lib.display())).to_owned();
    let ran = fs::read_to_string(&events).unwrap();
    fs::rename(&new, &lib).unwrap();
    let error = lease.get::<IntOp>("r_pass_a").unwrap_err();
    crate::on_demand::assert_replaced_since_acquire(&error, &lib);
    assert!(!crate::support::mapped(&lib), "the replacement was mapped");
    assert_eq!(fs::read_to_string(&events).unwrap(), ran, "the replacement's code ran");
}
