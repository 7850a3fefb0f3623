//! What a plugin pulls in is part of the trust check: the directories of its run path and the
//! libraries it needs. A run path naming a directory another user can create (a stale
//! build-tree entry under a sticky, world-writable directory) is refused under `Strict`
//! before and after that user plants a library there, and the planted code never runs.

use std::fs::{self, Permissions};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use dylease::{Error, PluginHost, TrustPolicy};

use crate::support::{TestDir, assert_unloaded, compile_plugin, compile_settled as compile, mapped, stale_run_path};

/// Serializes this module's tests. Their libraries share sonames (`libdep.so`), and glibc
/// answers a needed name with any library loaded under it, whoever loaded it: two of these
/// tests loading at once would see each other's copy (a wrong value under `Permissive`, a
/// refusal under `Strict`).
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static SONAMES: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SONAMES.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `libdep.so` in `dir`, returning `value` from `dep_value()`; with `marker`, its constructor
/// leaves `libdep.so.ran` next to it.
fn dependency(dir: &Path, value: i32, marker: bool) -> PathBuf {
    let mut args = vec![
        format!("-DDEP_VALUE={value}"),
        "-Wl,-soname,libdep.so".to_owned(),
        "-Wl,--no-as-needed".to_owned(),
        "-ldl".to_owned(),
    ];
    if marker {
        args.push("-DMARK_CONSTRUCTOR".into());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    compile("dep.c", &dir.join("libdep.so"), &args)
}

/// The `uses_dep` plugin in `dir`, linked against the `libdep.so` in `link_dir` and with
/// `run_path` as its DT_RUNPATH.
fn plugin(dir: &Path, link_dir: &Path, run_path: &str) -> PathBuf {
    plugin_needing(dir, link_dir, "dep", run_path, false)
}

fn marker(lib: &Path) -> PathBuf {
    let mut marker = lib.as_os_str().to_owned();
    marker.push(".ran");
    marker.into()
}

fn strict(plugin: &Path) -> PluginHost {
    // SAFETY: the libraries are this suite's own fixtures, whose initialisation code is sound.
    unsafe { PluginHost::builder().file(plugin).build() }.unwrap()
}

fn permissive(plugin: &Path) -> PluginHost {
    // SAFETY: the libraries are this suite's own fixtures, whose initialisation code is sound.
    unsafe {
        PluginHost::builder()
            .file(plugin)
            .trust(TrustPolicy::Permissive)
            .build()
    }
    .unwrap()
}

/// What the plugin's pass returns: which `libdep.so` the loader found.
fn dep_value(host: &PluginHost) -> i32 {
    let lease = host.acquire().unwrap();
    // SAFETY: `uses_dep.c` registers `dep_value` as `int (*)(void)`; called while `lease` lives.
    let pass = unsafe { lease.pass::<unsafe extern "C" fn() -> i32>("dep_value") }.unwrap();
    // SAFETY: the pass takes no arguments and only calls `dep_value()` of its dependency.
    unsafe { pass() }
}

/// Asserts `error` refuses `plugin` for its run path entry naming `dir`.
#[track_caller]
fn assert_refused_for(error: &Error, plugin: &Path, dir: &Path, cause: &str) {
    let message = error.to_string();
    assert!(
        matches!(error, Error::Untrusted { path, .. } if path == plugin),
        "{error:?}"
    );
    assert!(message.contains("run path (DT_RUNPATH) entry"), "{message}");
    assert!(message.contains(&format!("`{}", dir.display())), "{message}");
    assert!(message.contains(cause), "{message}");
    assert!(
        message.contains("$ORIGIN"),
        "the fix is a run path relative to $ORIGIN: {message}"
    );
}

#[test]
fn a_run_path_naming_a_missing_directory_others_can_create_is_refused_and_permissive_loads_the_trusted_one() {
    let _serial = one_at_a_time();
    let layout = stale_run_path("deps_stale_missing");
    let missing = layout.open.join("build/lib");
    let error = strict(&layout.plugin).acquire().unwrap_err();
    assert_refused_for(
        &error,
        &layout.plugin,
        &missing,
        &format!(
            "it does not exist, and other users can create it: `{}` is writable by group and others (mode 1777, sticky)",
            layout.open.display()
        ),
    );
    assert_unloaded(&layout.plugin);

    // The loader skips the missing entry and takes the genuine dependency.
    let host = permissive(&layout.plugin);
    assert_eq!(dep_value(&host), 1);
    drop(host);
    assert_unloaded(&layout.plugin);
    drop(layout.dir);
}

/// Every plugin's dependencies are judged before any plugin is opened: a directory whose
/// second plugin has an untrusted run path is refused before the first plugin's constructor
/// runs. (Caught: the trust check's dependency walk skipped, which leaves the resolution to
/// each plugin's own open, after the plugins before it ran.)
#[test]
fn an_untrusted_dependency_of_a_later_plugin_is_refused_before_any_plugin_runs() {
    let _serial = one_at_a_time();
    let layout = stale_run_path("deps_before_any");
    let plugins = TestDir::new("deps_before_any_plugins");
    let first = plugins.add("by_hand_marker", "liba_first.so");
    // The run path is absolute: the copy needs the same dependencies.
    fs::copy(&layout.plugin, plugins.path().join("libb_uses_dep.so")).unwrap();
    // SAFETY: the libraries are this suite's own fixtures, whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(plugins.path()) }.build().unwrap();
    let error = host.acquire().unwrap_err();
    assert!(matches!(error, Error::Untrusted { .. }), "{error:?}");
    assert!(
        !marker(&first).exists(),
        "the first plugin ran before the second was refused"
    );
    assert_unloaded(&first);
    drop(layout.dir);
}

/// In an on-demand set a plugin's dependencies are judged at its first use: the acquire
/// lists the plugin unmapped, and the first use of its pass fails naming the untrusted run
/// path, with nothing mapped; the set's failure is kept.
#[test]
fn on_demand_a_plugin_with_an_untrusted_run_path_fails_its_first_use_not_the_acquire() {
    let _serial = one_at_a_time();
    let layout = stale_run_path("deps_on_demand");
    // SAFETY: the libraries are this suite's own fixtures, whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&layout.plugin) }
        .on_demand()
        .build()
        .unwrap();
    let lease = host.acquire().unwrap();
    assert!(!lease.plugins()[0].is_mapped());
    // SAFETY: `dep_value` is `int (*)(void)`; it is not called.
    let error = unsafe { lease.pass::<unsafe extern "C" fn() -> i32>("dep_value") }.unwrap_err();
    let Error::MapFailed { cause, .. } = &error else {
        panic!("expected MapFailed, got {error:?}");
    };
    assert_refused_for(
        cause,
        &layout.plugin,
        &layout.open.join("build/lib"),
        "it does not exist, and other users can create it",
    );
    assert!(!mapped(&layout.plugin));
    // SAFETY: as above.
    let again = unsafe { lease.pass::<unsafe extern "C" fn() -> i32>("dep_value") }.unwrap_err();
    assert_eq!(again.to_string(), error.to_string(), "the set keeps the failure");
    drop(lease);
    assert_unloaded(&layout.plugin);
    drop(layout.dir);
}

#[test]
#[ignore = "needs root"]
fn a_dependency_planted_by_another_user_in_a_stale_run_path_never_runs_under_strict() {
    let _serial = one_at_a_time();
    let layout = stale_run_path("deps_stale_planted");
    let error = strict(&layout.plugin).acquire().unwrap_err();
    assert!(matches!(error, Error::Untrusted { .. }), "{error:?}");

    // Another user (uid 65534) creates the missing directories and plants a library whose
    // constructor leaves a marker.
    let build = layout.open.join("build");
    let lib = build.join("lib");
    fs::create_dir_all(&lib).unwrap();
    let planted = dependency(&lib, 666, true);
    for path in [&build, &lib, &planted] {
        std::os::unix::fs::chown(path, Some(65534), Some(65534)).unwrap();
    }

    let error = strict(&layout.plugin).acquire().unwrap_err();
    assert_refused_for(
        &error,
        &layout.plugin,
        &build,
        "is owned by uid 65534, which is neither this process's effective user",
    );
    assert!(!marker(&planted).exists(), "the planted constructor ran: {error}");
    assert!(!mapped(&planted), "the planted library is mapped");
    assert_unloaded(&layout.plugin);

    // What Strict refused is real: a permissive host runs the planted code.
    let host = permissive(&layout.plugin);
    assert_eq!(dep_value(&host), 666);
    assert!(marker(&planted).exists(), "the marker must show planted code that ran");
    drop(host);
    assert_unloaded(&layout.plugin);
}

#[test]
fn an_origin_relative_run_path_inside_a_trusted_directory_loads() {
    let _serial = one_at_a_time();
    let dir = TestDir::new("deps_origin");
    let plugins = dir.sub("plugins");
    let libs = dir.sub("plugins/lib");
    dependency(&libs, 7, false);
    let plugin = plugin(&plugins, &libs, "$ORIGIN/lib:$ORIGIN/missing");
    let host = strict(&plugin);
    assert_eq!(dep_value(&host), 7);
    drop(host);
    assert_unloaded(&plugin);
}

/// How many times the linkage of `file` was taken from the parse cache, and how many times
/// any part of its parse was made by reading it.
fn linkage_cached_and_parsed(file: &Path) -> (usize, usize) {
    let count = |needle: String| crate::logger::records(log::Level::Trace, &needle).len();
    (
        count(format!(
            "the linkage of `{}` taken from the parse cache",
            file.display()
        )),
        count(format!("parsed `{}`: ", file.display())),
    )
}

/// The linkage is cached with the rest of an unchanged file's parse (the plugin's and its
/// dependency's), and what it names is still judged at every load: once the run-path
/// directory is made writable by others, the next load is refused with the linkage taken from
/// the cache, and the dependency's code does not run. Caught: the linkage never stored (read
/// at every load).
#[test]
fn a_cached_linkage_has_what_it_names_judged_at_every_load() {
    let _serial = one_at_a_time();
    crate::logger::install();
    let dir = TestDir::new("deps_cached_linkage");
    let libs = dir.sub("plugins/lib");
    let dep = dependency(&libs, 7, true);
    let plugin = plugin(&dir.sub("plugins"), &libs, "$ORIGIN/lib");
    // Older than the parse cache's racy window (2.1 s), so that their parses are stored.
    std::thread::sleep(Duration::from_millis(2300));
    let host = strict(&plugin);
    assert_eq!(dep_value(&host), 7);
    assert_unloaded(&plugin);
    let (plugin_first, dep_first) = (linkage_cached_and_parsed(&plugin), linkage_cached_and_parsed(&dep));
    assert_eq!(
        (plugin_first.0, dep_first.0),
        (0, 0),
        "a first load takes no linkage from the cache"
    );
    assert!(plugin_first.1 > 0 && dep_first.1 > 0, "a first load parses both files");
    assert_eq!(dep_value(&host), 7);
    assert_unloaded(&plugin);
    let (plugin_second, dep_second) = (linkage_cached_and_parsed(&plugin), linkage_cached_and_parsed(&dep));
    assert!(
        plugin_second.0 > 0 && dep_second.0 > 0,
        "the linkages came from the cache"
    );
    assert_eq!(
        (plugin_second.1, dep_second.1),
        (plugin_first.1, dep_first.1),
        "parsed again"
    );
    fs::remove_file(marker(&dep)).unwrap();
    fs::set_permissions(&libs, Permissions::from_mode(0o777)).unwrap();
    let refused = host.acquire().map(drop);
    fs::set_permissions(&libs, Permissions::from_mode(0o755)).unwrap();
    let error = refused.unwrap_err();
    assert_refused(
        &error,
        &plugin,
        &["run path (DT_RUNPATH) entry `$ORIGIN/lib`", "writable by"],
    );
    assert!(
        linkage_cached_and_parsed(&plugin).0 > plugin_second.0,
        "the refused load took the linkage from the cache"
    );
    assert!(!marker(&dep).exists(), "the dependency ran");
    assert!(!mapped(&dep));
    assert_unloaded(&plugin);
}

/// A plugin whose dependencies the trust check resolved from the parse cache (the file
/// unchanged since it was cached, so not opened by the check), rewritten in place before the
/// load opens it into one that needs a library from a run path other users can write, is
/// resolved again from the descriptor the load opened, and refused: the planted library never
/// runs. Caught: the closure resolved by status kept for a descriptor of another status (the
/// loader then searches the new run path itself and runs the planted library).
#[test]
fn a_plugin_rewritten_in_place_after_its_closure_was_resolved_from_the_cache_is_resolved_again() {
    let _serial = one_at_a_time();
    crate::logger::install();
    let dir = TestDir::new("deps_rewritten_after_cache");
    let plugins = dir.sub("plugins");
    let libs = dir.sub("plugins/lib");
    dependency(&libs, 7, false);
    let first = dir.add("p1", "plugins/liba.so");
    let plugin = plugin(&plugins, &libs, "$ORIGIN/lib");
    // What the rewrite writes: the plugin, needing `libevil.so` from a directory others may
    // write, where another user planted one.
    let open = dir.sub("open");
    let planted = dependency_as(&open, "libevil.so", Some("libevil.so"), 9, true, &[]);
    fs::set_permissions(&open, Permissions::from_mode(0o777)).unwrap();
    let other_build = plugin_needing(&dir.sub("build"), &open, "evil", &open.display().to_string(), false);
    let rewrite = fs::read(other_build).unwrap();
    // Older than the parse cache's racy window (2.1 s), so that the first load caches them.
    std::thread::sleep(Duration::from_millis(2300));
    // SAFETY: the libraries are this suite's own fixtures, whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(&plugins).build() }.unwrap();
    drop(host.acquire().unwrap());
    let by_status = || {
        crate::logger::records(
            log::Level::Trace,
            &format!(
                "the linkage of `{}` taken from the parse cache by the status discovery read",
                plugin.display()
            ),
        )
        .len()
    };
    let before = by_status();
    let loaded_first = format!("loaded plugin file `{}`", first.display());
    let target = plugin.clone();
    let error = crate::trust::acquire_with_installer(host, move |line| {
        if line.contains(&loaded_first) {
            // In place: the same inode, other bytes (a new ctime).
            fs::write(&target, &rewrite).unwrap();
        }
    })
    .unwrap_err();
    assert_eq!(
        by_status(),
        before + 1,
        "the check did not resolve the closure from the cache"
    );
    assert_refused(
        &error,
        &plugin,
        &[
            &format!("run path (DT_RUNPATH) entry `{}`", open.display()),
            "writable by",
        ],
    );
    assert!(!marker(&planted).exists(), "the planted library ran");
    assert!(!mapped(&planted));
    assert_unloaded(&plugin);
}

#[test]
fn a_needed_library_named_by_path_is_refused_with_the_soname_fix() {
    let _serial = one_at_a_time();
    let dir = TestDir::new("deps_needed_path");
    let writable = dir.sub("writable");
    // Without a soname, the linker records the path it was given as DT_NEEDED.
    let dependency = compile("dep.c", &writable.join("libdep.so"), &["-DDEP_VALUE=3"]);
    fs::set_permissions(&writable, Permissions::from_mode(0o777)).unwrap();
    let plugin = compile(
        "uses_dep.c",
        &dir.sub("plugin").join("libuses_dep.so"),
        &["-Wl,--no-as-needed", &dependency.display().to_string()],
    );
    let error = strict(&plugin).acquire().unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(&error, Error::Untrusted { path, .. } if path == &plugin),
        "{error:?}"
    );
    assert!(
        message.contains(&format!(
            "the needed library `{}` of `{}` lets the loader run code dylease did not check: it names a path",
            dependency.display(),
            plugin.display(),
        )),
        "{message}"
    );
    assert!(
        message.contains("-Wl,-soname,NAME"),
        "the fix names a soname: {message}"
    );
    assert!(!mapped(&dependency));
    assert_eq!(dep_value(&permissive(&plugin)), 3);
    assert_unloaded(&plugin);
}

/// `dep.c` built into `dir/file` with the soname `soname` (none if `None`), returning `value`
/// from `dep_value()`; with `marker`, its constructor leaves `<its path>.ran`.
fn dependency_as(dir: &Path, file: &str, soname: Option<&str>, value: i32, marker: bool, extra: &[&str]) -> PathBuf {
    let mut args = vec![
        format!("-DDEP_VALUE={value}"),
        "-Wl,--no-as-needed".to_owned(),
        "-ldl".to_owned(),
    ];
    if let Some(soname) = soname {
        args.push(format!("-Wl,-soname,{soname}"));
    }
    if marker {
        args.push("-DMARK_CONSTRUCTOR".into());
    }
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    compile("dep.c", &dir.join(file), &args)
}

/// The loader's names of every object it has loaded, in its order.
fn loader_objects() -> Vec<String> {
    unsafe extern "C" fn push(info: *mut libc::dl_phdr_info, _: usize, data: *mut libc::c_void) -> libc::c_int {
        // SAFETY: `data` is the vector below, alive for the walk; `info` is the loader's.
        let (names, info) = unsafe { (&mut *data.cast::<Vec<String>>(), &*info) };
        let name = if info.dlpi_name.is_null() {
            String::new()
        } else {
            // SAFETY: a non-NULL name is NUL-terminated, valid during the call.
            unsafe { std::ffi::CStr::from_ptr(info.dlpi_name) }
                .to_string_lossy()
                .into_owned()
        };
        names.push(name);
        0
    }
    let mut names: Vec<String> = Vec::new();
    // SAFETY: `push` only reads what the loader hands it and writes `names`, which outlives
    // the walk.
    unsafe { libc::dl_iterate_phdr(Some(push), (&raw mut names).cast()) };
    names
}

/// Whether the loader's name `name` is one dylease gave it: `/proc/self/fd/N` or
/// `/proc/self/fd/N/<file>`, N a descriptor (of the file, or of the directory it is in). The
/// loader's own search through a run path relative to such a name's `$ORIGIN` gives names
/// with more components (`/proc/self/fd/N/lib/libdep.so`).
fn given_by_dylease(name: &str) -> bool {
    let Some(rest) = name.strip_prefix("/proc/self/fd/") else {
        return false;
    };
    let (fd, file) = rest.split_once('/').unwrap_or((rest, ""));
    !fd.is_empty() && fd.bytes().all(|b| b.is_ascii_digit()) && !file.contains('/')
}

/// The objects `load` adds to the loader's list that lie outside the system's library
/// directories and that dylease did not map from a descriptor (see [`given_by_dylease`]).
fn searched_by_the_loader(load: impl FnOnce()) -> Vec<String> {
    let before = loader_objects();
    load();
    loader_objects()
        .into_iter()
        .filter(|name| !before.contains(name))
        .filter(|name| !given_by_dylease(name))
        .filter(|name| {
            !["/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/"]
                .iter()
                .any(|d| name.starts_with(d))
        })
        .collect()
}

/// How many separate mappings of `file` the process has (mappings at file offset 0).
fn mappings_of(file: &Path) -> usize {
    use std::os::unix::fs::MetadataExt;
    let ino = fs::metadata(file).unwrap().ino().to_string();
    crate::support::maps_text()
        .lines()
        .filter(|line| {
            let fields: Vec<&str> = line.split_ascii_whitespace().collect();
            fields.len() >= 5 && fields[2] == "00000000" && fields[4] == ino
        })
        .count()
}

/// `plugins/libuses_dep.so` with the run path `$ORIGIN/lib`, and `plugins/lib/libdep.so`
/// (soname `libdep.so`) returning `value`.
fn beside(dir: &TestDir, value: i32) -> (PathBuf, PathBuf) {
    let libs = dir.sub("plugins/lib");
    let dep = dependency(&libs, value, false);
    let plugin = plugin(&dir.sub("plugins"), &libs, "$ORIGIN/lib");
    (plugin, dep)
}

#[test]
fn a_dependency_beside_the_plugin_is_mapped_by_dylease_from_its_checked_descriptor_and_unmapped_with_it() {
    let _serial = one_at_a_time();
    let dir = TestDir::new("deps_mapped_by_descriptor");
    let (plugin, dep) = beside(&dir, 7);
    let host = strict(&plugin);
    let before = loader_objects();
    let lease = host.acquire().unwrap();
    // The loader searched for nothing outside the system's directories: the dependency is
    // the object dylease gave it, by the name of its directory's descriptor.
    let added: Vec<String> = loader_objects().into_iter().filter(|n| !before.contains(n)).collect();
    let given = added
        .iter()
        .find(|n| given_by_dylease(n) && n.ends_with("/libdep.so"))
        .unwrap_or_else(|| panic!("the dependency was not mapped by dylease: {added:?}"));
    // Named in its own directory, whose descriptor dylease holds.
    let dir_of = Path::new(given).parent().unwrap();
    assert_eq!(fs::read_link(dir_of).unwrap(), dep.parent().unwrap(), "{given}");
    assert!(
        added.iter().all(|n| given_by_dylease(n)),
        "the loader found objects by itself: {added:?}"
    );
    assert_eq!(mappings_of(&dep), 1);
    drop(lease);
    assert_eq!(dep_value(&host), 7);
    drop(host);
    assert_unloaded(&plugin);
    assert_unloaded(&dep);
}

#[test]
fn the_plugins_of_the_suite_add_no_object_the_loader_searched_for_itself() {
    let _serial = one_at_a_time();
    let dir = TestDir::new("deps_none_searched");
    let (plugin, dep) = beside(&dir, 5);
    // Every fixture of the suite that loads (C, C++ with and without the recipe, ABI 1 and 2,
    // typed, pinned), each in a host of its own (some register the same pass names).
    let others = TestDir::new("deps_none_searched_fixtures");
    let mut hosts = vec![strict(&plugin)];
    for name in [
        "arith",
        "ctor",
        "by_hand",
        "churn",
        "typed",
        "typed_ab",
        "hooks",
        "hooks_abi1",
        "v1_plugin",
        "macros_c_plain",
        "macros_c_hooks",
        "macros_cpp_plain",
        "macros_cpp_unload",
        "cpp_multi",
        // Not `layout_plain`: glibc pins the first library of the process that defines its GNU
        // unique symbols, which `cpp_unload::` tests expect to be their own copy.
        "layout_recipe",
        "stateful",
        "on_load_state_nodelete",
        "noisy",
        "versioned_1",
        "p1",
    ] {
        hosts.push(strict(&others.add(name, &format!("lib{name}.so"))));
    }
    let mut leases = Vec::new();
    let searched = searched_by_the_loader(|| leases.extend(hosts.iter().map(|h| h.acquire().unwrap())));
    assert!(searched.is_empty(), "the loader found these itself: {searched:?}");
    drop(leases);
    drop(hosts);
    assert_unloaded(&dep);
}

#[test]
fn two_plugins_needing_one_library_share_one_mapping_of_it_gone_after_the_last() {
    let _serial = one_at_a_time();
    let dir = TestDir::new("deps_shared");
    let (plugin, dep) = beside(&dir, 9);
    let second = plugin.with_file_name("libuses_dep_too.so");
    fs::copy(&plugin, &second).unwrap();
    let (first_host, second_host) = (strict(&plugin), strict(&second));
    let (a, b) = (first_host.acquire().unwrap(), second_host.acquire().unwrap());
    assert_eq!(
        mappings_of(&dep),
        1,
        "one file, one mapping, whatever the number of plugins"
    );
    drop(a);
    drop(first_host);
    assert_unloaded(&plugin);
    assert_eq!(mappings_of(&dep), 1, "the other plugin still needs it");
    assert_eq!(dep_value(&second_host), 9);
    drop(b);
    drop(second_host);
    assert_unloaded(&second);
    assert_unloaded(&dep);
}

/// Asserts `error` refuses `plugin` under Strict for a reason that holds every one of `words`.
#[track_caller]
fn assert_refused(error: &Error, plugin: &Path, words: &[&str]) {
    let message = error.to_string();
    assert!(
        matches!(error, Error::Untrusted { path, .. } if path == plugin),
        "{error:?}"
    );
    for word in words {
        assert!(message.contains(word), "`{word}` missing from: {message}");
    }
}

#[test]
fn a_dependency_without_a_soname_is_refused_with_the_soname_fix_and_permissive_loads_it() {
    let _serial = one_at_a_time();
    let dir = TestDir::new("deps_no_soname");
    let libs = dir.sub("plugins/lib");
    let dep = dependency_as(&libs, "libdep.so", None, 4, false, &[]);
    let plugin = plugin(&dir.sub("plugins"), &libs, "$ORIGIN/lib");
    let error = strict(&plugin).acquire().unwrap_err();
    assert_refused(
        &error,
        &plugin,
        &["needed library `libdep.so`", "has no soname", "-Wl,-soname,libdep.so"],
    );
    assert!(!mapped(&dep));
    assert_eq!(dep_value(&permissive(&plugin)), 4);
    assert_unloaded(&dep);
}

#[test]
fn a_cycle_of_dependencies_is_refused() {
    let _serial = one_at_a_time();
    let dir = TestDir::new("deps_cycle");
    let libs = dir.sub("plugins/lib");
    // libdep.so needs libloop.so, which needs libdep.so.
    let first = dependency_as(&libs, "libdep.so", Some("libdep.so"), 1, false, &[]);
    let lib_dir = libs.display().to_string();
    dependency_as(
        &libs,
        "libloop.so",
        Some("libloop.so"),
        2,
        false,
        &["-L", &lib_dir, "-ldep"],
    );
    fs::remove_file(&first).unwrap();
    dependency_as(
        &libs,
        "libdep.so",
        Some("libdep.so"),
        1,
        false,
        &["-L", &lib_dir, "-lloop", "-Wl,-rpath,$ORIGIN"],
    );
    let plugin = plugin(&dir.sub("plugins"), &libs, "$ORIGIN/lib");
    let error = strict(&plugin).acquire().unwrap_err();
    assert_refused(&error, &plugin, &["part of a cycle"]);
}

#[test]
fn an_under_linked_dependency_is_refused_with_the_link_fix() {
    let _serial = one_at_a_time();
    let dir = TestDir::new("deps_under_linked");
    let libs = dir.sub("plugins/lib");
    // Its `dep_value` calls `plugin_side`, which only the plugin defines.
    let dep = compile(
        "dep_under_linked.c",
        &libs.join("libdep.so"),
        &["-Wl,-soname,libdep.so"],
    );
    let plugin = compile(
        "uses_dep.c",
        &dir.sub("plugins").join("libuses_dep.so"),
        &[
            "-DDEFINE_PLUGIN_SIDE",
            "-Wl,--no-as-needed",
            "-L",
            &libs.display().to_string(),
            "-ldep",
            "-Wl,-rpath,$ORIGIN/lib",
            "-Wl,--enable-new-dtags",
        ],
    );
    let error = strict(&plugin).acquire().unwrap_err();
    let message = error.to_string();
    assert!(message.contains("plugin_side"), "{message}");
    assert!(message.contains("-Wl,-z,defs"), "{message}");
    assert!(message.contains(&dep.display().to_string()), "{message}");
    assert_unloaded(&plugin);
    assert_unloaded(&dep);
}

#[test]
fn an_audit_library_entry_is_refused_before_any_code_runs() {
    let _serial = one_at_a_time();
    let dir = TestDir::new("deps_audit");
    let libs = dir.sub("plugins/lib");
    dependency(&libs, 1, false);
    let plugin = compile(
        "uses_dep.c",
        &dir.sub("plugins").join("libuses_dep.so"),
        &[
            "-Wl,--no-as-needed",
            "-L",
            &libs.display().to_string(),
            "-ldep",
            "-Wl,--audit,libaudit.so",
        ],
    );
    let error = strict(&plugin).acquire().unwrap_err();
    assert_refused(&error, &plugin, &["DT_AUDIT entry `libaudit.so`", "auditing library"]);
    assert_unloaded(&plugin);
}

#[test]
fn a_relative_run_path_entry_is_refused() {
    let _serial = one_at_a_time();
    let dir = TestDir::new("deps_relative");
    let libs = dir.sub("plugins/lib");
    dependency(&libs, 1, false);
    let plugin = plugin(&dir.sub("plugins"), &libs, "lib");
    let error = strict(&plugin).acquire().unwrap_err();
    assert_refused(
        &error,
        &plugin,
        &["run path (DT_RUNPATH) entry `lib`", "it is relative"],
    );
    assert_unloaded(&plugin);
}

#[test]
fn a_run_path_directory_others_or_the_group_can_create_names_in_is_refused_sticky_or_not() {
    let _serial = one_at_a_time();
    for (mode, writers) in [
        (0o1777, "group and others (mode 1777, sticky)"),
        (0o1770, "group (mode 1770, sticky)"),
    ] {
        let dir = TestDir::new(&format!("deps_open_run_path_{mode:o}"));
        let libs = dir.sub("plugins/lib");
        let dep = dependency(&libs, 1, false);
        fs::set_permissions(&libs, Permissions::from_mode(mode)).unwrap();
        let plugin = plugin(&dir.sub("plugins"), &libs, "$ORIGIN/lib");
        let error = strict(&plugin).acquire().unwrap_err();
        assert_refused(&error, &plugin, &["run path (DT_RUNPATH) entry `$ORIGIN/lib`", writers]);
        assert!(!mapped(&dep));
        assert_unloaded(&plugin);
    }
}

#[test]
fn a_name_another_plugins_bundled_copy_answers_is_refused_until_that_copy_is_gone() {
    let _serial = one_at_a_time();
    let dir = TestDir::new("deps_answered");
    let (first, _) = beside(&dir, 1);
    let other = TestDir::new("deps_answered_other");
    let (second, second_dep) = beside(&other, 2);
    let first_host = strict(&first);
    assert_eq!(dep_value(&first_host), 1);
    let lease = first_host.acquire().unwrap();
    let error = strict(&second).acquire().unwrap_err();
    assert_refused(
        &error,
        &second,
        &["the name `libdep.so` is already answered by another file"],
    );
    assert!(!mapped(&second_dep), "the checked copy was mapped for nothing");
    drop(lease);
    drop(first_host);
    assert_eq!(dep_value(&strict(&second)), 2);
    assert_unloaded(&second_dep);
}

#[test]
fn more_libraries_than_the_check_covers_is_an_error_naming_the_limit_not_a_silent_pass() {
    let _serial = one_at_a_time();
    let dir = TestDir::new("deps_limit");
    let libs = dir.sub("plugins/lib");
    // One library, copied under 513 sonames of one length (libd000.so …), the name patched.
    let model = dependency_as(&libs, "libd000.so", Some("libd000.so"), 1, false, &[]);
    let bytes = fs::read(&model).unwrap();
    let at = bytes.windows(10).position(|w| w == b"libd000.so").unwrap();
    let mut link = vec![
        "-Wl,--no-as-needed".to_owned(),
        "-L".to_owned(),
        libs.display().to_string(),
    ];
    for n in 0..513 {
        let name = format!("libd{n:03}.so");
        let mut copy = bytes.clone();
        copy[at..at + 10].copy_from_slice(name.as_bytes());
        fs::write(libs.join(&name), copy).unwrap();
        link.push(format!("-ld{n:03}"));
    }
    link.push("-Wl,-rpath,$ORIGIN/lib".into());
    link.push("-Wl,--enable-new-dtags".into());
    let link: Vec<&str> = link.iter().map(String::as_str).collect();
    let plugin = compile("uses_dep.c", &dir.sub("plugins").join("libuses_dep.so"), &link);
    let error = strict(&plugin).acquire().unwrap_err();
    assert_refused(&error, &plugin, &["more than 512 libraries"]);
    assert_unloaded(&plugin);
}

/// Gives `paths` to the other user of the attacks (uid 65534).
fn give_away(paths: &[&Path]) {
    for path in paths {
        std::os::unix::fs::chown(path, Some(65534), Some(65534)).unwrap();
    }
}

/// Acquires a lease of a permissive host over `plugin`, and drops it: glibc's own search.
fn load_permissive(plugin: &Path) {
    let host = permissive(plugin);
    drop(host.acquire().unwrap());
    drop(host);
}

#[test]
#[ignore = "needs root"]
fn a_filtee_planted_by_another_user_never_runs_under_strict_and_runs_under_permissive() {
    let _serial = one_at_a_time();
    let dir = TestDir::new("deps_attack_filtee");
    let theirs = dir.sub("theirs");
    let evil = dependency_as(&theirs, "libevil.so", Some("libevil.so"), 666, true, &[]);
    give_away(&[&theirs, &evil]);
    let libs = dir.sub("plugins/lib");
    dependency(&libs, 1, false);
    let auxiliary = format!("-Wl,--auxiliary,{}", evil.display());
    let plugin = compile(
        "uses_dep.c",
        &dir.sub("plugins").join("libuses_dep.so"),
        &[
            "-Wl,--no-as-needed",
            "-L",
            &libs.display().to_string(),
            "-ldep",
            "-Wl,-rpath,$ORIGIN/lib",
            "-Wl,--enable-new-dtags",
            &auxiliary,
        ],
    );
    let error = strict(&plugin).acquire().unwrap_err();
    assert_refused(
        &error,
        &plugin,
        &[&format!("DT_AUXILIARY `{}`", evil.display()), "names a path"],
    );
    assert!(!marker(&evil).exists(), "the planted filtee ran: {error}");
    assert_unloaded(&plugin);
    // The threat is real: glibc maps the filtee, constructor and all.
    load_permissive(&plugin);
    assert!(
        marker(&evil).exists(),
        "the positive control: the filtee runs under glibc's search"
    );
}

#[test]
#[ignore = "needs root"]
fn the_origin_of_a_dependency_reached_through_a_symlink_is_the_directory_it_was_found_in() {
    let _serial = one_at_a_time();
    // plugins/lib/libdep.so is a link to real/libdep.so, whose run path is `$ORIGIN/../evil`:
    // glibc expands it from the directory it found the name in (plugins/lib), so it searches
    // plugins/evil, which belongs to the other user; real/../evil holds a genuine copy.
    let dir = TestDir::new("deps_attack_link_origin");
    let genuine = dir.sub("evil");
    dependency_as(&genuine, "libevil.so", Some("libevil.so"), 1, false, &[]);
    let theirs = dir.sub("plugins/evil");
    let planted = dependency_as(&theirs, "libevil.so", Some("libevil.so"), 666, true, &[]);
    give_away(&[&theirs, &planted]);
    let real = dir.sub("real");
    let genuine_dir = genuine.display().to_string();
    let dep = dependency_as(
        &real,
        "libdep.so",
        Some("libdep.so"),
        1,
        false,
        &[
            "-L",
            &genuine_dir,
            "-levil",
            "-Wl,-rpath,$ORIGIN/../evil",
            "-Wl,--enable-new-dtags",
        ],
    );
    let libs = dir.sub("plugins/lib");
    std::os::unix::fs::symlink(&dep, libs.join("libdep.so")).unwrap();
    let plugin = plugin(&dir.sub("plugins"), &libs, "$ORIGIN/lib");
    let error = strict(&plugin).acquire().unwrap_err();
    assert_refused(
        &error,
        &plugin,
        &["run path (DT_RUNPATH) entry `$ORIGIN/../evil`", "is owned by uid 65534"],
    );
    assert!(!marker(&planted).exists(), "the planted library ran: {error}");
    assert_unloaded(&plugin);
    load_permissive(&plugin);
    assert!(
        marker(&planted).exists(),
        "the positive control: glibc searches the link's directory"
    );
}

#[test]
#[ignore = "needs root"]
fn a_library_planted_in_a_hwcaps_subdirectory_of_a_sticky_run_path_never_runs() {
    let _serial = one_at_a_time();
    let dir = TestDir::new("deps_attack_hwcaps");
    let open = dir.sub("open");
    dependency(&open, 1, false);
    fs::set_permissions(&open, Permissions::from_mode(0o1777)).unwrap();
    let plugin = plugin(&dir.sub("plugins"), &open, &open.display().to_string());
    // The other user creates the subdirectory glibc tries first on this CPU.
    let hwcaps = open.join("glibc-hwcaps");
    let level = hwcaps.join("x86-64-v2");
    fs::create_dir_all(&level).unwrap();
    let planted = dependency(&level, 666, true);
    give_away(&[&hwcaps, &level, &planted]);
    let error = strict(&plugin).acquire().unwrap_err();
    assert_refused(
        &error,
        &plugin,
        &[
            &format!("run path (DT_RUNPATH) entry `{}`", open.display()),
            "writable by group and others (mode 1777, sticky)",
        ],
    );
    assert!(!marker(&planted).exists(), "the planted library ran: {error}");
    assert_unloaded(&plugin);
    let host = permissive(&plugin);
    assert_eq!(
        dep_value(&host),
        666,
        "the positive control: glibc prefers the hwcaps copy"
    );
    assert!(marker(&planted).exists());
}

/// Set in the child process of the descriptor-exhaustion test: the layout's directory.
const EXHAUSTED_CHILD: &str = "DYLEASE_TEST_EXHAUSTED_LAYOUT";

/// `fail_open_arm(n)` of `tests/plugins/fail_open.c`, preloaded into the child process.
fn arm_failing_open(n: i32) {
    // SAFETY: the name is a NUL-terminated string; `RTLD_DEFAULT` searches the preloaded shim.
    let arm = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"fail_open_arm".as_ptr()) };
    assert!(!arm.is_null(), "the fault-injection shim is not preloaded");
    // SAFETY: `fail_open_arm` is `void (*)(int)` in the shim.
    let arm: extern "C" fn(i32) = unsafe { std::mem::transmute(arm) };
    arm(n);
}

/// `attempt()` with the n-th open of the process's own code failing (EMFILE, by the
/// preloaded shim), and whether that open happened: when it did not, every open of the
/// attempt had its turn.
fn with_open_failing<R>(n: i32, attempt: impl FnOnce() -> R) -> (R, bool) {
    arm_failing_open(n);
    let result = attempt();
    let hit = failing_open_left() == 0;
    arm_failing_open(0);
    (result, hit)
}

/// `fail_open_left()` of the shim: 0 once the armed failure happened.
fn failing_open_left() -> i32 {
    // SAFETY: as in `arm_failing_open`.
    let left = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"fail_open_left".as_ptr()) };
    assert!(!left.is_null(), "the fault-injection shim is not preloaded");
    // SAFETY: `fail_open_left` is `int (*)(void)` in the shim.
    let left: extern "C" fn() -> i32 = unsafe { std::mem::transmute(left) };
    left()
}

#[test]
fn running_out_of_descriptors_at_any_step_of_the_dependency_check_is_a_refusal_never_a_pass() {
    let _serial = one_at_a_time();
    // `plugin/libuses_dep.so` needs `libdep.so` beside it, which needs `libevil.so` through a
    // run path into a directory anyone can write, where `libevil.so`'s constructor marks.
    // Under `Strict` that run path is refused; a step of the check that, out of descriptors,
    // skipped what it could not read (the dependency's linkage, its run path) would leave the
    // name to glibc, which would search that directory and run the marking constructor.
    // The child process preloads a shim that fails exactly the n-th `open` of the process's
    // own code with EMFILE (glibc's loader opens files without it), for n = 1, 2, ... until
    // the load makes fewer opens than n: at every step the load fails, and nothing marks.
    // (Caught: a resolver that leaves a dependency it cannot open to glibc — the planted code
    // runs at the step that opens `libdep.so`.)
    if let Some(layout) = std::env::var_os(EXHAUSTED_CHILD) {
        let layout = PathBuf::from(layout);
        let plugin = layout.join("plugin/libuses_dep.so");
        let evil = layout.join("open/libevil.so");
        let mut failed_steps = 0;
        // A load makes a few dozen opens; the bound turns a loop that never ends into a failure.
        for n in 1..=1000 {
            assert!(n < 1000, "the load still failed an open at its 1000th");
            let host = strict(&plugin);
            let (result, hit) = with_open_failing(n, || host.acquire());
            assert!(!marker(&evil).exists(), "open {n} failed: the planted code ran");
            let error = result.expect_err("the load passed");
            let message = error.to_string();
            drop(host);
            assert_unloaded(&plugin);
            if !hit {
                // Every open of the load had its turn: with none failed, the run path is refused.
                assert!(message.contains("run path (DT_RUNPATH) entry"), "{message}");
                break;
            }
            assert_out_of_descriptors(&error, &[dylease::OpenCause::Descriptors], &format!("open {n} failed"));
            failed_steps += 1;
        }
        assert!(failed_steps >= 3, "the load made only {failed_steps} opens");
        return;
    }
    let dir = TestDir::new("deps_exhausted");
    let shim = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plugins/fail_open.c");
    let shim =
        compile_plugin(&[&shim], &dir.path().join("libfail_open.so"), &["-ldl"]).unwrap_or_else(|e| panic!("{e}"));
    let open = dir.sub("open");
    dependency_as(&open, "libevil.so", Some("libevil.so"), 2, true, &[]);
    fs::set_permissions(&open, Permissions::from_mode(0o777)).unwrap();
    let libs = dir.sub("plugin");
    let open_dir = open.display().to_string();
    dependency_as(
        &libs,
        "libdep.so",
        Some("libdep.so"),
        1,
        false,
        &[
            "-L",
            &open_dir,
            "-levil",
            &format!("-Wl,-rpath,{open_dir}"),
            "-Wl,--enable-new-dtags",
        ],
    );
    plugin(&libs, &libs, "$ORIGIN");
    crate::bounded::run_in_child(
        "dependencies::running_out_of_descriptors_at_any_step_of_the_dependency_check_is_a_refusal_never_a_pass",
        |child| {
            child.env(EXHAUSTED_CHILD, dir.path()).env("LD_PRELOAD", &shim);
        },
    );
    // The positive control: glibc's own search runs the planted code.
    load_permissive(&libs.join("libuses_dep.so"));
    assert!(
        marker(&open.join("libevil.so")).exists(),
        "the planted library never ran"
    );
}

/// Asserts that `error` is a failure for lack of file descriptors, as such: a resource error
/// that names the limit (`ulimit -n`), not a refusal of the plugin's trust (whose fix would be
/// to rebuild the plugin or trust everyone). `cause` is the step that ran out: dylease's own
/// opens ([`OpenCause::Descriptors`](dylease::OpenCause::Descriptors)), or the loader's
/// ([`OpenCause::Loader`](dylease::OpenCause::Loader)). `when` says at which open, for the
/// message.
#[track_caller]
fn assert_out_of_descriptors(error: &Error, causes: &[dylease::OpenCause], when: &str) {
    let message = error.to_string();
    assert!(
        matches!(error, Error::Open { cause, .. } if causes.contains(cause)),
        "{when}: {error:?}"
    );
    assert!(
        message.contains("Too many open files") && message.contains("`ulimit -n`"),
        "{when}: {message}"
    );
    assert!(
        !message.contains("did not check") && !message.contains("Permissive"),
        "{when}, taken for distrust: {message}"
    );
}

/// Set in the child process of the run-path exhaustion test: the layout's directory.
const EXHAUSTED_RUN_PATH_CHILD: &str = "DYLEASE_TEST_EXHAUSTED_RUN_PATH";

/// The lowest descriptor number this process has free: under a limit of open files that
/// low (`RLIMIT_NOFILE` bounds the numbers), no open succeeds.
fn lowest_free_descriptor() -> u64 {
    use std::os::fd::AsRawFd;
    let probe = fs::File::open("/dev/null").unwrap();
    probe.as_raw_fd().try_into().unwrap()
}

/// Sets this process's soft limit of open files (`ulimit -n`) to `soft`; returns the old one.
fn set_open_files_limit(soft: u64) -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `getrlimit` writes the limit it reads into `limit`, a valid `rlimit`.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) }, 0);
    let old = limit.rlim_cur;
    limit.rlim_cur = soft;
    // SAFETY: `setrlimit` reads `limit`, a valid `rlimit`; a soft limit below the hard one is allowed.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) }, 0);
    old
}

/// A plugin whose run path is `$ORIGIN/../lib`, a trusted directory holding the library it
/// needs: out of descriptors at any open of its trust check (the walk to the plugin, the
/// plugin's open, the run-path directory's walk and listing, the dependency's walk and open),
/// the check fails with a resource error naming the limit, never a refusal of the run path as
/// untrusted; with every open served it passes, and the plugin loads. The check is the
/// catalog's (what `dylease inspect` shows), which is a load's up to the mapping. Both as the
/// shim of the tests above fails the n-th open, for n = 1, 2, ..., and under a real limit of
/// open files (`ulimit -n`) swept up from the descriptors the process has open, in a child
/// process. Caught: a run-path directory that could not be opened or listed for lack of
/// descriptors was refused as letting the loader run code dylease did not check, with the fix
/// to rebuild the plugin; the plugin's own walk, as untrusted.
#[test]
fn running_out_of_descriptors_at_any_open_of_a_run_path_walk_is_a_resource_error_naming_the_limit() {
    if let Some(dir) = std::env::var_os(EXHAUSTED_RUN_PATH_CHILD) {
        let plugin = PathBuf::from(dir).join("plugin/libuses_dep.so");
        let host = strict(&plugin);
        // The check's verdict on the plugin: its refusal, if any.
        let judge = || {
            let mut catalog = host.catalog().unwrap();
            assert_eq!(catalog.len(), 1);
            catalog.pop().unwrap()
        };
        let only_dyleases = [dylease::OpenCause::Descriptors];
        let mut failed_steps = 0;
        for n in 1..=1000 {
            assert!(n < 1000, "the check still failed an open at its 1000th");
            let (judged, hit) = with_open_failing(n, judge);
            if !hit {
                assert!(
                    judged.refusal().is_none(),
                    "with every open served: {:?}",
                    judged.refusal()
                );
                break;
            }
            let refusal = judged.refusal().expect("an open failed, and the check passed");
            assert_out_of_descriptors(refusal, &only_dyleases, &format!("open {n} failed"));
            failed_steps += 1;
        }
        assert!(failed_steps >= 5, "the check made only {failed_steps} opens");

        // Under a real limit, as `ulimit -n` sets it: from one under which no open succeeds,
        // up, until the check passes.
        let lowest = lowest_free_descriptor();
        let mut failed_limits = 0;
        for limit in lowest..lowest + 1000 {
            assert!(limit < lowest + 999, "the check still failed under a limit of {limit}");
            let old = set_open_files_limit(limit);
            let judged = judge();
            set_open_files_limit(old);
            let Some(refusal) = judged.refusal() else { break };
            assert_out_of_descriptors(refusal, &only_dyleases, &format!("under a limit of {limit}"));
            failed_limits += 1;
        }
        assert!(failed_limits >= 5, "the check failed under only {failed_limits} limits");

        // The load itself, out of descriptors at each of its opens in turn. A plugin whose run
        // path uses `$ORIGIN` is mapped through its directory's name, and that mapping is then
        // compared with the checked file through `/proc/self/maps`, an open of its own: each
        // failure names the limit (never a file replaced) and leaves nothing mapped.
        let mut failed_loads = 0;
        for n in 1..=1000 {
            assert!(n < 1000, "the load still failed an open at its 1000th");
            let host = strict(&plugin);
            let (result, hit) = with_open_failing(n, || host.acquire().map(drop));
            if !hit {
                result.unwrap_or_else(|e| panic!("with every open served: {e}"));
                break;
            }
            let message = result
                .expect_err(&format!("open {n} failed, and the load passed"))
                .to_string();
            assert!(
                message.contains("Too many open files") && !message.contains("replaced"),
                "open {n} failed: {message}"
            );
            drop(host);
            assert_unloaded(&plugin);
            failed_loads += 1;
        }
        assert!(failed_loads >= 5, "the load made only {failed_loads} opens");

        assert_eq!(dep_value(&host), 7, "with every open served, it loads");
        return;
    }
    let _serial = one_at_a_time();
    let dir = TestDir::new("deps_exhausted_run_path");
    let shim = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plugins/fail_open.c");
    let shim =
        compile_plugin(&[&shim], &dir.path().join("libfail_open.so"), &["-ldl"]).unwrap_or_else(|e| panic!("{e}"));
    let lib = dir.sub("lib");
    named_dependency(&lib, "exhausted_dep", 7, &[]);
    plugin_needing(&dir.sub("plugin"), &lib, "exhausted_dep", "$ORIGIN/../lib", false);
    crate::bounded::run_in_child(
        "dependencies::running_out_of_descriptors_at_any_open_of_a_run_path_walk_is_a_resource_error_naming_the_limit",
        |child| {
            child.env(EXHAUSTED_RUN_PATH_CHILD, dir.path()).env("LD_PRELOAD", &shim);
        },
    );
}

/// Set in the child process of the plain-plugin exhaustion test: the plugins' directory.
const EXHAUSTED_PLAIN_CHILD: &str = "DYLEASE_TEST_EXHAUSTED_PLAIN";

/// Out of descriptors at any open of a plugin's load (a plugin without dependencies), the load
/// fails naming the cause and leaves nothing mapped, and a load with every open served
/// succeeds; so does the first use of an on-demand plugin (here without the trust check, so
/// that the first use opens the file itself), whose failure to open it is not taken for the
/// file's replacement since the acquire. In a child process preloading the shim of the test
/// above, for n = 1, 2, ... until the load makes fewer opens than n. Caught: every failure to
/// open taken for a replacement (`sys::is_replacement` forced `true`, cargo-mutants): the
/// first use reported `ReplacedSinceAcquire`, a cause that is not the one that happened.
#[test]
fn running_out_of_descriptors_at_any_open_of_a_plugins_load_fails_naming_the_cause() {
    if let Some(dir) = std::env::var_os(EXHAUSTED_PLAIN_CHILD) {
        let dir = PathBuf::from(dir);
        let plugin = dir.join("eager/libp1.so");
        let mut failed_steps = 0;
        // A load makes a few opens; the bound turns a loop that never ends into a failure.
        for n in 1..=1000 {
            assert!(n < 1000, "the load still failed an open at its 1000th");
            let host = strict(&plugin);
            let (result, hit) = with_open_failing(n, || host.acquire());
            if !hit {
                // Every open of the load had its turn: with none failed, it loads.
                let lease = result.unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(lease.plugins().len(), 1);
                break;
            }
            let message = result
                .expect_err(&format!("open {n} failed, and the load passed"))
                .to_string();
            assert!(message.contains("Too many open files"), "open {n} failed: {message}");
            drop(host);
            assert_unloaded(&plugin);
            failed_steps += 1;
        }
        assert!(failed_steps >= 2, "the load made only {failed_steps} opens");

        let plugin = dir.join("demand/libr.so");
        let mut failed_steps = 0;
        for n in 1..=1000 {
            assert!(n < 1000, "the first use still failed an open at its 1000th");
            // SAFETY: the directory holds this suite's own fixture, whose initialisation code is sound.
            let host = unsafe { PluginHost::builder().dir(dir.join("demand")) }
                .on_demand()
                .trust(TrustPolicy::Permissive)
                .build()
                .unwrap();
            let lease = host.acquire().unwrap();
            let (result, hit) = with_open_failing(n, || lease.get::<crate::on_demand::IntOp>("r_pass_a").map(drop));
            if !hit {
                result.unwrap_or_else(|e| panic!("{e}"));
                break;
            }
            let error = result.expect_err(&format!("open {n} failed, and the first use passed"));
            let Error::MapFailed { cause, .. } = &error else {
                panic!("open {n} failed: {error:?}")
            };
            assert!(
                matches!(
                    **cause,
                    Error::Open {
                        cause: dylease::OpenCause::Descriptors,
                        ..
                    }
                ) && cause.to_string().contains("Too many open files"),
                "open {n} failed: {cause:?}"
            );
            drop(lease);
            drop(host);
            assert_unloaded(&plugin);
            failed_steps += 1;
        }
        assert!(failed_steps >= 1, "the first use opened nothing");
        return;
    }
    let dir = TestDir::new("deps_exhausted_plain");
    let shim = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plugins/fail_open.c");
    let shim =
        compile_plugin(&[&shim], &dir.path().join("libfail_open.so"), &["-ldl"]).unwrap_or_else(|e| panic!("{e}"));
    dir.sub("eager");
    dir.add("p1", "eager/libp1.so");
    dir.sub("demand");
    dir.add("demand_r", "demand/libr.so");
    crate::bounded::run_in_child(
        "dependencies::running_out_of_descriptors_at_any_open_of_a_plugins_load_fails_naming_the_cause",
        |child| {
            child.env(EXHAUSTED_PLAIN_CHILD, dir.path()).env("LD_PRELOAD", &shim);
        },
    );
}

/// `lib<name>.so` (soname the same) in `dir`, returning `value` from `dep_value()`. Tests that
/// run beside others give their dependency a name of its own: glibc shares a library loaded
/// already under the same soname, whoever loaded it.
fn named_dependency(dir: &Path, name: &str, value: i32, extra: &[&str]) -> PathBuf {
    let file = format!("lib{name}.so");
    dependency_as(dir, &file, Some(&file), value, false, extra)
}

/// The `uses_dep` plugin in `dir`, needing `lib<name>.so` from `link_dir`, with `run_path` as
/// its DT_RUNPATH (or DT_RPATH if `rpath`).
fn plugin_needing(dir: &Path, link_dir: &Path, name: &str, run_path: &str, rpath: bool) -> PathBuf {
    compile(
        "uses_dep.c",
        &dir.join("libuses_dep.so"),
        &[
            "-Wl,--no-as-needed",
            "-L",
            &link_dir.display().to_string(),
            &format!("-l{name}"),
            &format!("-Wl,-rpath,{run_path}"),
            if rpath {
                "-Wl,--disable-new-dtags"
            } else {
                "-Wl,--enable-new-dtags"
            },
        ],
    )
}

/// Loads `plugin` under `Strict` and asserts that every object its load added is one dylease
/// mapped itself (none the loader searched for), `lib<dep>.so` among them, returning what its
/// pass returns.
fn strict_value_mapped_by_dylease(plugin: &Path, dep: &str) -> i32 {
    let host = strict(plugin);
    let before = loader_objects();
    let lease = host.acquire().unwrap_or_else(|e| panic!("{e}"));
    let added: Vec<String> = loader_objects().into_iter().filter(|n| !before.contains(n)).collect();
    assert!(
        added.iter().all(|n| given_by_dylease(n)),
        "the loader found objects by itself: {added:?}"
    );
    assert!(
        added.iter().any(|n| n.ends_with(&format!("/lib{dep}.so"))),
        "lib{dep}.so was not mapped by this load: {added:?}"
    );
    drop(lease);
    dep_value(&host)
}

/// What `plugin`'s pass returns under glibc's own search (`Permissive`), or its error.
/// The host is dropped before this returns: nothing of the load stays mapped.
fn permissive_value(plugin: &Path) -> Result<i32, Error> {
    let host = permissive(plugin);
    let lease = host.acquire()?;
    drop(lease);
    let value = dep_value(&host);
    drop(host);
    assert_unloaded(plugin);
    Ok(value)
}

#[test]
fn a_braced_origin_in_a_run_path_resolves_as_the_bare_one() {
    let _serial = one_at_a_time();
    // `${ORIGIN}` is `$ORIGIN` to glibc. (Caught: a resolver that takes the braced form
    // literally leaves the name to glibc, which maps a library dylease did not check.)
    let dir = TestDir::new("deps_braced_origin");
    let libs = dir.sub("plugins/lib");
    let dep = named_dependency(&libs, "dep_braced", 7, &[]);
    let plugin = plugin_needing(&dir.sub("plugins"), &libs, "dep_braced", "${ORIGIN}/lib", false);
    assert_eq!(permissive_value(&plugin).unwrap(), 7, "glibc's own search");
    assert_eq!(strict_value_mapped_by_dylease(&plugin, "dep_braced"), 7);
    assert_unloaded(&dep);
}

#[test]
fn a_plugins_rpath_is_searched_for_the_libraries_its_dependencies_need() {
    let _serial = one_at_a_time();
    // The plugin has a DT_RPATH (no DT_RUNPATH) naming `lib/` and `lib2/`; it needs
    // `libmid_rpath.so` (in `lib/`, no run path of its own), which needs `libdep_rpath.so`,
    // found only in `lib2/`: glibc searches the DT_RPATH of every loader up the chain.
    // (Caught: a resolver that searches only the needing library's own run path leaves
    // `libdep_rpath.so` to glibc.)
    let dir = TestDir::new("deps_inherited_rpath");
    let lib2 = dir.sub("plugins/lib2");
    let dep = named_dependency(&lib2, "dep_rpath", 9, &[]);
    let lib = dir.sub("plugins/lib");
    let lib2_path = lib2.display().to_string();
    let mid = named_dependency(&lib, "mid_rpath", 9, &["-L", &lib2_path, "-ldep_rpath"]);
    let plugin = plugin_needing(&dir.sub("plugins"), &lib, "mid_rpath", "$ORIGIN/lib:$ORIGIN/lib2", true);
    assert_eq!(permissive_value(&plugin).unwrap(), 9, "glibc's own search");
    assert_eq!(strict_value_mapped_by_dylease(&plugin, "dep_rpath"), 9);
    assert_unloaded(&dep);
    assert_unloaded(&mid);
}

#[test]
#[cfg(target_arch = "x86_64")]
fn a_library_in_a_subdirectory_glibc_searches_below_a_run_path_is_found_where_glibc_finds_it() {
    let _serial = one_at_a_time();
    // glibc also looks for a name in `glibc-hwcaps/<level>/` below each run-path directory and,
    // up to glibc 2.36, in the legacy `tls/` and platform subdirectories, where this CPU and
    // this glibc support them. Whatever this machine's glibc does, a library glibc finds there
    // is mapped by dylease from there. (Caught: a resolver that never looks in the
    // subdirectories leaves the name to glibc.)
    let mut found_by_glibc = 0;
    for (n, sub) in [
        "glibc-hwcaps/x86-64-v2",
        "glibc-hwcaps/x86-64-v3",
        "tls",
        "x86_64",
        "haswell",
    ]
    .iter()
    .enumerate()
    {
        // A run path of its own per case: glibc remembers, per run-path string for the life of
        // the process, which subdirectories it found missing (and the plugin's `$ORIGIN` is a
        // `/proc/self/fd/N` name, whose N a later case may reuse).
        let dir = TestDir::new(&format!("deps_subdirectory_{n}"));
        let libs = dir.sub(&format!("plugins/subdirectory_case_{n}"));
        let name = format!("dep_subdirectory_{n}");
        let link = dir.sub("link");
        named_dependency(&link, &name, 1, &[]);
        let below = libs.join(sub);
        fs::create_dir_all(&below).unwrap();
        named_dependency(&below, &name, 10 + n as i32, &[]);
        let plugin = plugin_needing(
            &dir.sub("plugins"),
            &link,
            &name,
            &format!("$ORIGIN/subdirectory_case_{n}"),
            false,
        );
        fs::remove_dir_all(&link).unwrap();
        match permissive_value(&plugin) {
            Ok(value) => {
                found_by_glibc += 1;
                assert_eq!(value, 10 + n as i32, "{sub}");
                assert_eq!(strict_value_mapped_by_dylease(&plugin, &name), value, "{sub}");
            }
            // Not found by this glibc (a level or platform name this CPU or glibc does not
            // use): dylease may still consider the subdirectory (it takes every value
            // `$PLATFORM` and the hwcaps levels may have), and then maps the file it checked
            // there, never one the loader searched for.
            Err(_) => match strict(&plugin).acquire() {
                Err(error) => assert!(error.to_string().contains(&format!("lib{name}.so")), "{sub}: {error}"),
                Ok(lease) => {
                    drop(lease);
                    assert_eq!(strict_value_mapped_by_dylease(&plugin, &name), 10 + n as i32, "{sub}");
                }
            },
        }
        assert_unloaded(&below.join(format!("lib{name}.so")));
    }
    // On x86-64 glibc searches at least the baseline-above hwcaps level of any CPU of the last
    // decade: a machine where it searched none would test nothing here.
    assert!(
        found_by_glibc > 0,
        "glibc found the library in none of the subdirectories"
    );
}

/// A dependency loaded again unchanged is not parsed again either (the trust check's ELF
/// check of it comes from the parse cache), while the walk of its run path and directories
/// runs at every load. Caught: the dependency resolver checking its descriptor with an
/// `Opened` that bypasses the cache (a fresh `Parsed` each time).
#[test]
fn an_unchanged_dependency_is_parsed_once_over_two_cold_cycles() {
    let _serial = one_at_a_time();
    crate::logger::install();
    let dir = TestDir::new("deps_parse_cache");
    let (plugin, dep) = beside(&dir, 5);
    std::thread::sleep(Duration::from_millis(2300));
    let host = strict(&plugin);
    assert_eq!(dep_value(&host), 5);
    assert_eq!(dep_value(&host), 5);
    let count = |what: &str| crate::logger::records(log::Level::Trace, &format!("{what}`{}`", dep.display())).len();
    assert_eq!(count("parsed "), 1, "the dependency was parsed again");
    assert_eq!(
        count("the ELF check of "),
        1,
        "the dependency's check was not taken from the cache"
    );
    drop(host);
    assert_unloaded(&dep);
}

/// The subdirectories glibc tries below a run-path directory are judged as the directory is,
/// and only those: one others can write (a hwcaps level; `tls` as a symlink to such a
/// directory) is refused; a symlink there to a file (glibc finds nothing through it) passes,
/// and so do a directory of another name and one deeper than glibc ever tries. Caught: every
/// subdirectory taken for one glibc tries (the name's `==` as `!=`), no descent below the run
/// path (`depth == MAX_DEPTH` as `!=`), a symlink to a directory skipped unchecked (its guard
/// forced `true`, or `&&` as `||`), a symlink to a file refused (the guard forced `false`, or
/// its `!` deleted), the depth never advancing (`+` as `*`).
#[test]
fn the_subdirectories_glibc_searches_below_a_run_path_are_judged_and_only_those() {
    let _serial = one_at_a_time();
    let writable = |dir: &Path| fs::set_permissions(dir, Permissions::from_mode(0o777)).unwrap();
    let make = |dir: &Path| {
        fs::create_dir_all(dir).unwrap();
        fs::set_permissions(dir, Permissions::from_mode(0o755)).unwrap();
    };
    type Layout = Box<dyn Fn(&Path, &Path) -> Option<PathBuf>>;
    let cases: Vec<(&str, Layout)> = vec![
        (
            "hwcaps level others can write",
            Box::new(move |lib, _| {
                let level = lib.join("glibc-hwcaps/x86-64-v2");
                make(&level);
                writable(&level);
                Some(level)
            }),
        ),
        (
            "tls a symlink to a directory others can write",
            Box::new(move |lib, scratch| {
                let open = scratch.join("open");
                make(&open);
                writable(&open);
                std::os::unix::fs::symlink(&open, lib.join("tls")).unwrap();
                Some(open)
            }),
        ),
        (
            "tls a symlink to a file",
            Box::new(|lib, scratch| {
                let file = scratch.join("not-a-directory");
                fs::write(&file, b"").unwrap();
                std::os::unix::fs::symlink(&file, lib.join("tls")).unwrap();
                None
            }),
        ),
        (
            "a directory others can write whose name glibc never tries",
            Box::new(move |lib, _| {
                let other = lib.join("plugins-cache");
                make(&other);
                writable(&other);
                None
            }),
        ),
        (
            "a directory others can write deeper than glibc tries",
            Box::new(move |lib, _| {
                let deep = lib.join("tls/x86_64/tls/x86_64/haswell");
                make(&deep);
                writable(&deep);
                None
            }),
        ),
    ];
    for (n, (case, layout)) in cases.into_iter().enumerate() {
        let dir = TestDir::new(&format!("deps_searched_below_{n}"));
        let libs = dir.sub("plugins/lib");
        dependency(&libs, 30 + n as i32, false);
        let plugin = plugin(&dir.sub("plugins"), &libs, "$ORIGIN/lib");
        let refused = layout(&libs, &dir.sub("scratch"));
        let outcome = strict(&plugin).acquire().map(drop);
        match refused {
            Some(subdirectory) => {
                let error = outcome.expect_err(case);
                assert_refused(
                    &error,
                    &plugin,
                    &[
                        "run path (DT_RUNPATH) entry `$ORIGIN/lib`",
                        &format!("`{}`", subdirectory.display()),
                        "writable by group and others (mode 0777)",
                    ],
                );
            }
            None => {
                outcome.unwrap_or_else(|e| panic!("{case}: {e}"));
                assert_eq!(dep_value(&strict(&plugin)), 30 + n as i32, "{case}");
            }
        }
        assert_unloaded(&plugin);
    }
}

/// Set in the child process of the `LD_LIBRARY_PATH` test: the plugin to load.
const LIBRARY_PATH_CHILD: &str = "DYLEASE_TEST_LIBRARY_PATH_PLUGIN";

/// A dependency glibc finds through `LD_LIBRARY_PATH` is left to glibc there, as the process
/// owner's choice, although the plugin's run path holds another copy: under `Strict` the
/// plugin gets the copy glibc's own search gives it. The variable is read as glibc reads it:
/// `first;second` is two directories (glibc splits at `;` as at `:`), and in `first::other`
/// the empty entry is the current directory. And a name the variable's directories do not
/// hold is mapped by dylease from the run path. In child processes whose environment sets
/// the variable, as glibc reads it at start-up. Caught: the list split wrongly, an empty
/// entry dropped, every name taken for one the variable holds, or none (`in_library_path`
/// forced either way, its `||` as `&&`): dylease then maps a copy glibc would not have chosen.
#[test]
fn a_dependency_found_through_ld_library_path_is_the_one_glibc_would_find() {
    if let Some(plugin) = std::env::var_os(LIBRARY_PATH_CHILD) {
        let plugin = PathBuf::from(plugin);
        let expected: i32 = std::env::var("DYLEASE_TEST_LIBRARY_PATH_VALUE")
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(permissive_value(&plugin).unwrap(), expected, "glibc's own search");
        assert_eq!(dep_value(&strict(&plugin)), expected, "under Strict");
        // A name the variable's directories do not hold is still dylease's to map.
        let other = plugin.with_file_name("other/libuses_dep.so");
        assert_eq!(strict_value_mapped_by_dylease(&other, "dep_not_in_library_path"), 19);
        return;
    }
    let dir = TestDir::new("deps_library_path");
    let first = dir.sub("first");
    let second = dir.sub("second");
    let cwd = dir.sub("cwd");
    named_dependency(&second, "dep_library_path", 12, &[]);
    named_dependency(&cwd, "dep_library_path", 21, &[]);
    let plugins = dir.sub("plugins");
    named_dependency(&dir.sub("plugins/lib"), "dep_library_path", 13, &[]);
    let plugin = plugin_needing(&plugins, &second, "dep_library_path", "$ORIGIN/lib", false);
    let other_libs = dir.sub("plugins/other/lib");
    named_dependency(&other_libs, "dep_not_in_library_path", 19, &[]);
    plugin_needing(
        &dir.sub("plugins/other"),
        &other_libs,
        "dep_not_in_library_path",
        "$ORIGIN/lib",
        false,
    );
    for (list, expected) in [
        (format!("{};{}", first.display(), second.display()), 12),
        (format!("{}::{}", first.display(), dir.sub("none").display()), 21),
    ] {
        crate::bounded::run_in_child(
            "dependencies::a_dependency_found_through_ld_library_path_is_the_one_glibc_would_find",
            |child| {
                child
                    .current_dir(&cwd)
                    .env(LIBRARY_PATH_CHILD, &plugin)
                    .env("DYLEASE_TEST_LIBRARY_PATH_VALUE", expected.to_string())
                    .env("LD_LIBRARY_PATH", &list);
            },
        );
    }
    // Without the variable, the run path's copy is the one: the children's was the variable's.
    let _serial = one_at_a_time();
    assert_eq!(strict_value_mapped_by_dylease(&plugin, "dep_library_path"), 13);
}

/// A run-path directory whose status cannot be read for another cause than its absence (a
/// name longer than the file system allows) is refused with that cause: the check cannot
/// judge it, so it fails closed. Caught: every failure to read it taken for a missing
/// directory, which passes when nobody else can create it.
#[test]
fn a_run_path_directory_that_cannot_be_looked_at_is_refused_with_the_cause() {
    let _serial = one_at_a_time();
    let dir = TestDir::new("deps_run_path_unreadable");
    let libs = dir.sub("plugins/lib");
    dependency(&libs, 13, false);
    let long = "d".repeat(300);
    let plugin = plugin(&dir.sub("plugins"), &libs, &format!("$ORIGIN/{long}:$ORIGIN/lib"));
    let error = strict(&plugin).acquire().unwrap_err();
    assert_refused(&error, &plugin, &["run path (DT_RUNPATH) entry", "File name too long"]);
    assert_unloaded(&plugin);
}

/// A run-path directory that does not exist, in a directory nobody else can create it in, is
/// skipped as glibc skips it: the next one answers. Caught: the missing directory refused when
/// its name is searched (the guard that lets it pass forced false).
#[test]
fn a_missing_run_path_directory_nobody_else_can_create_is_skipped() {
    let _serial = one_at_a_time();
    let dir = TestDir::new("deps_missing_run_path");
    let libs = dir.sub("plugins/lib");
    named_dependency(&libs, "dep_after_missing", 14, &[]);
    let plugin = plugin_needing(
        &dir.sub("plugins"),
        &libs,
        "dep_after_missing",
        "$ORIGIN/missing:$ORIGIN/lib",
        false,
    );
    assert_eq!(permissive_value(&plugin).unwrap(), 14, "glibc's own search");
    assert_eq!(strict_value_mapped_by_dylease(&plugin, "dep_after_missing"), 14);
    assert_unloaded(&plugin);
}

/// A needed name longer than a file name may be cannot be looked for: the check refuses it
/// with the cause instead of leaving it to glibc. Caught: every failure to look a name up in
/// a run-path directory taken for its absence.
#[test]
fn a_needed_name_that_cannot_be_looked_up_is_refused_with_the_cause() {
    let _serial = one_at_a_time();
    let dir = TestDir::new("deps_needed_too_long");
    let libs = dir.sub("plugins/lib");
    let soname = format!("lib{}.so", "n".repeat(300));
    dependency_as(&libs, "libshort_name.so", Some(&soname), 15, false, &[]);
    let plugin = plugin_needing(&dir.sub("plugins"), &libs, "short_name", "$ORIGIN/lib", false);
    let error = strict(&plugin).acquire().unwrap_err();
    assert_refused(&error, &plugin, &["File name too long"]);
    assert_unloaded(&plugin);
}

/// A library only deeper below a run-path directory than glibc ever looks is not found there
/// by dylease either: the load fails as glibc's own does, and nothing of it is mapped.
/// Caught: the depth of the search never advancing (`+` as `*`), which finds and maps it.
#[test]
fn a_library_deeper_below_a_run_path_than_glibc_looks_is_not_mapped() {
    let _serial = one_at_a_time();
    let dir = TestDir::new("deps_too_deep");
    let libs = dir.sub("plugins/lib");
    let deep = dir.sub("plugins/lib/tls/x86_64/tls/x86_64/haswell");
    let dep = named_dependency(&deep, "dep_too_deep", 16, &[]);
    let plugin = plugin_needing(&dir.sub("plugins"), &deep, "dep_too_deep", "$ORIGIN/lib", false);
    let _ = libs;
    assert!(permissive_value(&plugin).is_err(), "glibc found it");
    assert!(strict(&plugin).acquire().is_err(), "dylease found it");
    assert!(!mapped(&dep));
    assert_unloaded(&plugin);
}

/// A library found twice below one run-path directory (in it and in a hwcaps subdirectory
/// glibc tries first on some CPUs) is refused, naming both copies: which one the loader takes
/// depends on the CPU, so dylease cannot map the one glibc would. Caught: the count of copies
/// ignored (the last one found mapped).
#[test]
fn a_library_found_twice_below_one_run_path_directory_is_refused_naming_both() {
    let _serial = one_at_a_time();
    let dir = TestDir::new("deps_found_twice");
    let libs = dir.sub("plugins/lib");
    let top = named_dependency(&libs, "dep_twice", 17, &[]);
    let level = dir.sub("plugins/lib/glibc-hwcaps/x86-64-v2");
    let below = named_dependency(&level, "dep_twice", 18, &[]);
    let plugin = plugin_needing(&dir.sub("plugins"), &libs, "dep_twice", "$ORIGIN/lib", false);
    let error = strict(&plugin).acquire().unwrap_err();
    assert_refused(
        &error,
        &plugin,
        &[
            "found 2 times below one run-path directory",
            &format!("`{}`", top.display()),
            &format!("`{}`", below.display()),
        ],
    );
    assert!(!mapped(&top) && !mapped(&below));
    assert_unloaded(&plugin);
}

/// A run-path entry through a loop of symlinks (which the kernel would refuse with `ELOOP`)
/// is refused by the walk, which counts the links it follows as the kernel does, naming it.
/// Caught: the count never advancing (`+=` as `*=`: the walk follows the loop for ever).
#[test]
fn a_run_path_through_a_symlink_loop_is_refused_naming_the_loop() {
    let _serial = one_at_a_time();
    let dir = TestDir::new("deps_run_path_loop");
    let plugins = dir.sub("plugins");
    let libs = dir.sub("plugins/lib");
    named_dependency(&libs, "dep_after_loop", 20, &[]);
    std::os::unix::fs::symlink("loop_b", plugins.join("loop_a")).unwrap();
    std::os::unix::fs::symlink("loop_a", plugins.join("loop_b")).unwrap();
    let plugin = plugin_needing(&plugins, &libs, "dep_after_loop", "$ORIGIN/loop_a:$ORIGIN/lib", false);
    let outcome = crate::bounded::bounded("a load through a symlink loop", Duration::from_secs(60), {
        let plugin = plugin.clone();
        move || strict(&plugin).acquire().map(drop)
    });
    let error = outcome.unwrap_err();
    assert_refused(&error, &plugin, &["`$ORIGIN/loop_a`", "too many symlinks (a loop?)"]);
    assert_unloaded(&plugin);
}

const EXECUTE_ONLY_CHILD: &str = "DYLEASE_TEST_EXECUTE_ONLY_PLUGIN";

/// A plugin whose run path uses `$ORIGIN`, in a directory that root made execute-only for
/// others (mode 0711: they may reach a file whose name they know, not list it), loads for
/// another user who names it: the directory the loader is given the plugin through is opened
/// `O_PATH`, which needs no permission to read it. (The run-path directories themselves must
/// be listable: the dependency check lists them, and refuses one it cannot.) In a child
/// process run as uid 65534, the plugin's owner (root reads every directory whatever its
/// mode). It needs the checkout, its target directory and their ancestors to be root's and
/// traversable by other users, as a clone under `/tmp` is. Caught: the directory opened for
/// reading (`O_PATH | O_DIRECTORY` as `&`, no flag): the load fails with EACCES.
#[test]
#[ignore = "needs root"]
fn an_origin_plugin_in_a_directory_others_may_only_traverse_loads() {
    if let Some(plugin) = std::env::var_os(EXECUTE_ONLY_CHILD) {
        assert_eq!(dep_value(&strict(Path::new(&plugin))), 7);
        return;
    }
    let dir = TestDir::new("deps_execute_only");
    let plugins = dir.sub("plugins");
    let libs = dir.sub("plugins/lib");
    dependency(&libs, 7, false);
    let plugin = plugin(&plugins, &libs, "$ORIGIN/lib");
    std::os::unix::fs::chown(&plugin, Some(65534), Some(65534)).unwrap();
    // Root's, as its libraries are: only root can change them.
    fs::set_permissions(&plugins, Permissions::from_mode(0o711)).unwrap();
    crate::bounded::run_in_child(
        "dependencies::an_origin_plugin_in_a_directory_others_may_only_traverse_loads",
        |child| {
            child.env(EXECUTE_ONLY_CHILD, &plugin);
            crate::bounded::as_other_user(child, &[&plugin]);
        },
    );
}

/// The descriptors process `pid` holds, as the paths they link to.
fn descriptors_of(pid: u32) -> Vec<PathBuf> {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|entry| fs::read_link(entry.unwrap().path()).ok())
        .collect()
}

#[test]
fn an_isolated_plugins_dependencies_are_mapped_in_its_worker_from_the_hosts_descriptors_and_never_in_the_host() {
    let _serial = one_at_a_time();
    // plugins/libuses_dep.so (run path `$ORIGIN/lib`) needs lib/libdep.so, which needs
    // lib/inner/libisoinner.so through its own run path, `$ORIGIN/inner`.
    let dir = TestDir::new("deps_isolated");
    let inner_dir = dir.sub("plugins/lib/inner");
    let inner = dependency_as(&inner_dir, "libisoinner.so", Some("libisoinner.so"), 2, false, &[]);
    let libs = dir.sub("plugins/lib");
    let inner_link = inner_dir.display().to_string();
    let dep = dependency_as(
        &libs,
        "libdep.so",
        Some("libdep.so"),
        8,
        false,
        &[
            "-L",
            &inner_link,
            "-lisoinner",
            "-Wl,-rpath,$ORIGIN/inner",
            "-Wl,--enable-new-dtags",
        ],
    );
    let plugin = compile(
        "uses_dep.c",
        &dir.sub("plugins").join("libuses_dep.so"),
        &[
            "-DMESSAGE_PASS",
            "-Wl,--no-as-needed",
            "-L",
            &libs.display().to_string(),
            "-ldep",
            "-Wl,-rpath,$ORIGIN/lib",
            "-Wl,--enable-new-dtags",
        ],
    );
    // SAFETY: the libraries are this suite's own fixtures, whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&plugin) }
        .isolated()
        .build()
        .unwrap();
    let lease = host.acquire().unwrap_or_else(|e| panic!("{e}"));
    let worker = lease.worker_pid().unwrap();
    assert_eq!(lease.call("dep_value_message", b"").unwrap(), b"8");
    let maps = String::from_utf8_lossy(&fs::read(format!("/proc/{worker}/maps")).unwrap()).into_owned();
    for file in [&plugin, &dep, &inner] {
        assert!(
            maps.contains(&*file.to_string_lossy()),
            "{} is not mapped in the worker",
            file.display()
        );
        assert!(!mapped(file), "{} is mapped in the host", file.display());
    }
    // dylease mapped each library from the descriptor it checked, named in its directory's
    // descriptor (which the loader's own search would not hold open).
    let held = descriptors_of(worker);
    for file in [&plugin, &dep, &inner, &libs, &inner_dir, &dir.path().join("plugins")] {
        assert!(
            held.contains(file),
            "the worker holds no descriptor of {}: {held:?}",
            file.display()
        );
    }
    drop(lease);
    drop(host);
    for file in [&plugin, &dep, &inner] {
        assert!(!mapped(file), "{} is mapped in the host", file.display());
    }
}

#[test]
fn a_chain_of_dependencies_unloads_dependents_first_and_keeps_no_descriptor_of_any() {
    // A plugin needing `libmid.so`, which needs `libleaf.so`: dylease maps both, the leaf
    // first. Closed in that order, the leaf would still be mapped at its own close (the mid
    // library holds it), taken for pinned, and its descriptor kept for the life of the
    // process; closed dependents first, each is gone at its close.
    let _serial = one_at_a_time();
    let dir = TestDir::new("deps_chain_unloaded");
    let libs = dir.sub("plugins/lib");
    let leaf = named_dependency(&libs, "leaf", 5, &[]);
    let libs_arg = libs.display().to_string();
    let mid = named_dependency(&libs, "mid", 6, &["-L", &libs_arg, "-lleaf", "-Wl,-rpath,$ORIGIN"]);
    let plugin = plugin_needing(&dir.sub("plugins"), &libs, "mid", "$ORIGIN/lib", false);
    let host = strict(&plugin);
    let before = loader_objects();
    let lease = host.acquire().unwrap_or_else(|e| panic!("{e}"));
    let added: Vec<String> = loader_objects().into_iter().filter(|n| !before.contains(n)).collect();
    for name in ["/libleaf.so", "/libmid.so"] {
        assert!(
            added.iter().any(|n| given_by_dylease(n) && n.ends_with(name)),
            "{name} was not mapped by dylease: {added:?}"
        );
    }
    drop(lease);
    drop(host);
    for library in [&plugin, &mid, &leaf] {
        assert_unloaded(library);
        let library = library.canonicalize().unwrap();
        assert!(
            !descriptors_of(std::process::id()).contains(&library),
            "a descriptor of {} is kept",
            library.display()
        );
    }
}
