//! On-demand sets (`HostBuilder::on_demand`): a plugin with a complete manifest joins a set
//! unmapped, and the first use of one of its passes maps it, once, for the rest of the set's
//! life. The plugins (`tests/plugins/demand.c`) log their constructor, `on_load`, registration
//! and `on_unload` into a file next to themselves (`tests/plugins/events.h`).

use std::path::Path;
use std::sync::{Arc, Barrier, Mutex};

use dylease::{Error, Interface, Lease, LookupFailure, OpenCause, PluginHost};

use crate::support::{TestDir, assert_unloaded, mapped};

pub(crate) struct IntOp;
// SAFETY: every pass of demand.c under "test.int_op/1" is an `int (*)(int)`.
unsafe impl Interface for IntOp {
    const ID: &'static str = "test.int_op/1";
    type Fn = unsafe extern "C" fn(i32) -> i32;
}

type IntPass = extern "C" fn(i32) -> i32;

/// Asserts that `error` is the failure to map `lib` because its file changed since the
/// acquire (`MapFailed` with `OpenCause::ReplacedSinceAcquire`).
#[track_caller]
pub(crate) fn assert_replaced_since_acquire(error: &Error, lib: &Path) {
    let Error::MapFailed { plugin, cause, .. } = error else {
        panic!("{error:?}")
    };
    assert_eq!(plugin.path(), Some(lib), "{error}");
    assert!(
        matches!(
            **cause,
            Error::Open {
                cause: OpenCause::ReplacedSinceAcquire,
                ..
            }
        ),
        "{cause:?}"
    );
}

/// The hooks the plugin at `lib` ran so far, in order.
fn events(lib: &Path) -> Vec<String> {
    match std::fs::read_to_string(format!("{}.log", lib.display())) {
        Ok(text) => text.lines().map(str::to_owned).collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("cannot read the events of {}: {e}", lib.display()),
    }
}

/// How many times `lib` logged `event`.
fn count(lib: &Path, event: &str) -> usize {
    events(lib).iter().filter(|e| *e == event).count()
}

/// A directory of the fixtures `names` (`demand_…`), each as `lib<name>.so`.
fn plugins(test: &str, names: &[&str]) -> (TestDir, Vec<std::path::PathBuf>) {
    let dir = TestDir::new(test);
    let libs = names
        .iter()
        .map(|name| dir.add(&format!("demand_{name}"), &format!("lib{name}.so")))
        .collect();
    (dir, libs)
}

fn on_demand(dir: &Path) -> PluginHost {
    // SAFETY: the directory holds this suite's own fixtures, whose initialisation code is sound.
    unsafe { PluginHost::builder().dir(dir) }.on_demand().build().unwrap()
}

#[test]
fn acquire_maps_nothing_and_a_first_use_maps_only_its_plugin_until_the_last_lease() {
    let (dir, libs) = plugins("demand_maps_one", &["a", "b", "c"]);
    let host = on_demand(dir.path());
    let lease = host.acquire().unwrap();
    // The set lists every plugin and pass, from the manifests, with nothing mapped.
    let names: Vec<&str> = lease.plugins().iter().map(|p| p.name()).collect();
    assert_eq!(names, ["a", "b", "c"]);
    assert!(lease.plugins().iter().all(|p| !p.is_mapped()));
    assert_eq!(lease.passes().len(), 9);
    let b_typed = lease.pass_info("b_pass_a").unwrap();
    assert_eq!(
        (b_typed.interface(), b_typed.plugin(), b_typed.plugin_index()),
        (Some("test.int_op/1"), "b", 1)
    );
    for lib in &libs {
        assert!(!mapped(lib), "{} is mapped after acquire()", lib.display());
        assert!(events(lib).is_empty(), "{:?}", events(lib));
    }
    // A mismatch of interfaces is told from the manifest: still nothing mapped.
    let untyped = lease.get::<IntOp>("b_pass").unwrap_err();
    assert!(
        matches!(&untyped, Error::PassLookup { cause, .. } if matches!(**cause, LookupFailure::Untyped { .. })),
        "{untyped:?}"
    );
    assert!(!mapped(&libs[1]));

    let pass = lease.get::<IntOp>("b_pass_a").unwrap();
    // SAFETY: the lease is alive; the pass takes any `i32`.
    assert_eq!(unsafe { pass(41) }, 42);
    assert!(mapped(&libs[1]) && lease.plugins()[1].is_mapped());
    assert!(!mapped(&libs[0]) && !mapped(&libs[2]));
    assert_eq!(events(&libs[1]), ["constructor", "on_load", "register"]);
    // The unsafe lookup maps too; a second use maps nothing more.
    // SAFETY: `c_pass` is an `int (*)(int)`, called while the lease lives.
    let c = unsafe { lease.pass::<IntPass>("c_pass") }.unwrap();
    assert_eq!(c(1), 2);
    let _again = lease.get::<IntOp>("b_pass_z").unwrap();
    assert_eq!(count(&libs[1], "register"), 1);
    assert!(mapped(&libs[2]) && !mapped(&libs[0]));
    // SAFETY: not called.
    let missing = unsafe { lease.pass::<IntPass>("nope") }.unwrap_err();
    assert!(
        matches!(&missing, Error::PassLookup { expected: "", cause, .. } if **cause == LookupFailure::Missing),
        "{missing:?}"
    );
    assert_eq!(missing.to_string(), "no plugin registered a pass `nope`");

    drop(lease);
    assert_unloaded(&libs[1]);
    assert_unloaded(&libs[2]);
    assert_eq!(events(&libs[1]).last().map(String::as_str), Some("on_unload"));
    assert!(events(&libs[0]).is_empty());
}

#[test]
fn racing_first_uses_map_the_plugin_once() {
    let (dir, libs) = plugins("demand_race", &["s_slow", "t"]);
    let host = on_demand(dir.path());
    let lease = host.acquire().unwrap();
    let barrier = Barrier::new(2);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                barrier.wait();
                let pass = lease.get::<IntOp>("s_pass_a").unwrap();
                // SAFETY: the lease is alive; the pass takes any `i32`.
                assert_eq!(unsafe { pass(1) }, 2);
            });
        }
    });
    assert_eq!(events(&libs[0]), ["constructor", "on_load", "register"]);
    assert!(!mapped(&libs[1]));
    drop(lease);
    assert_unloaded(&libs[0]);
    assert_eq!(count(&libs[0], "on_unload"), 1);
}

#[test]
fn a_file_replaced_between_acquire_and_first_use_is_refused_until_reload() {
    let (dir, libs) = plugins("demand_replaced", &["r"]);
    let new = dir.add("demand_r_two", "new.so.tmp");
    let host = on_demand(dir.path());
    let lease = host.acquire().unwrap();
    std::fs::rename(&new, &libs[0]).unwrap();
    let error = lease.get::<IntOp>("r_pass_a").unwrap_err();
    let Error::MapFailed { plugin, cause, .. } = &error else {
        panic!("{error:?}")
    };
    assert_eq!(plugin.path(), Some(libs[0].as_path()));
    assert!(
        matches!(
            **cause,
            Error::Open {
                cause: OpenCause::ReplacedSinceAcquire,
                ..
            }
        ),
        "{cause:?}"
    );
    let message = cause.to_string();
    assert!(
        message.contains("was replaced, removed or rewritten since the set was acquired")
            && message.contains("reload()"),
        "{message}"
    );
    assert!(message.contains(&libs[0].display().to_string()), "{message}");
    // None of the new file's code ran (its constructor logs to the same name).
    assert!(events(&libs[0]).is_empty(), "{:?}", events(&libs[0]));
    assert!(!mapped(&libs[0]));
    // The set keeps the failure.
    let Error::MapFailed { cause: again, .. } = lease.get::<IntOp>("r_pass_z").unwrap_err() else {
        panic!("not MapFailed")
    };
    assert!(Arc::ptr_eq(cause, &again));
    // A new set maps the new file.
    let fresh = host.reload().unwrap();
    // SAFETY: the lease is alive; the pass takes any `i32`.
    assert_eq!(unsafe { fresh.get::<IntOp>("r_pass_a").unwrap()(1) }, 3);
}

/// A file removed between `acquire()` and its first use is refused as replaced since the
/// acquire, not checked again. Caught: the removal taken for an install under way (the
/// `since_acquire` guard of `open_checked` forced false: the file is looked for again, and
/// the cause is the trust check's).
#[test]
fn a_file_removed_between_acquire_and_first_use_is_refused_as_replaced() {
    let (dir, libs) = plugins("demand_removed", &["r"]);
    let host = on_demand(dir.path());
    let lease = host.acquire().unwrap();
    std::fs::remove_file(&libs[0]).unwrap();
    let error = lease.get::<IntOp>("r_pass_a").unwrap_err();
    assert_replaced_since_acquire(&error, &libs[0]);
}

/// A file rewritten in place between `acquire()` and its first use (the same inode, other
/// bytes: a `cp` over it) is refused as replaced, none of its code run: the set's passes and
/// their interfaces come from the manifest judged at the acquire, and a rewritten file may
/// declare the same names with other types. Caught: the first use held to the inode alone
/// (the new file mapped, its passes handed out under the old interfaces).
#[test]
fn a_file_rewritten_in_place_between_acquire_and_first_use_is_refused_as_replaced() {
    let (dir, libs) = plugins("demand_rewritten", &["r"]);
    let new = dir.add("demand_r_two", "new.so.tmp");
    let host = on_demand(dir.path());
    let lease = host.acquire().unwrap();
    let inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&libs[0]).unwrap());
    std::fs::write(&libs[0], std::fs::read(&new).unwrap()).unwrap();
    assert_eq!(
        std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&libs[0]).unwrap()),
        inode,
        "not rewritten in place"
    );
    let error = lease.get::<IntOp>("r_pass_a").unwrap_err();
    assert_replaced_since_acquire(&error, &libs[0]);
    assert!(events(&libs[0]).is_empty(), "{:?}", events(&libs[0]));
    assert!(!mapped(&libs[0]));
}

/// A first use is a load: the trust of the file is judged again, and a directory on its way
/// that others can write since the acquire refuses it, none of its code run. Caught: the
/// first use held only to the identity judged at the acquire.
#[test]
fn a_first_use_judges_trust_again() {
    use std::os::unix::fs::PermissionsExt;
    let (dir, libs) = plugins("demand_trust_again", &["r"]);
    let host = on_demand(dir.path());
    let lease = host.acquire().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let refused = lease.get::<IntOp>("r_pass_a").map(drop);
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let error = refused.unwrap_err();
    let Error::MapFailed { cause, .. } = &error else {
        panic!("{error:?}")
    };
    assert!(
        matches!(&**cause, Error::Untrusted { reason, .. } if reason.contains("writable by")),
        "{cause:?}"
    );
    assert!(events(&libs[0]).is_empty(), "{:?}", events(&libs[0]));
    assert!(!mapped(&libs[0]));
}

#[test]
fn a_failed_mapping_is_the_error_of_every_call_and_other_passes_still_work() {
    let (dir, libs) = plugins("demand_fails", &["a", "f_fails"]);
    let host = on_demand(dir.path());
    let lease = host.acquire().unwrap();
    let first = lease.get::<IntOp>("f_pass_a").unwrap_err();
    let Error::MapFailed { plugin, cause, .. } = &first else {
        panic!("{first:?}")
    };
    assert_eq!(plugin.path(), Some(libs[1].as_path()));
    assert!(matches!(**cause, Error::OnLoadFailed { code: -3, .. }), "{cause:?}");
    assert!(first.to_string().contains(&libs[1].display().to_string()), "{first}");
    assert!(std::error::Error::source(&first).is_some());
    assert!(!lease.plugins()[1].is_mapped());
    assert_unloaded(&libs[1]);
    // SAFETY: not called.
    let later = unsafe { lease.pass::<IntPass>("f_pass") }.unwrap_err();
    let Error::MapFailed { cause: same, .. } = &later else {
        panic!("{later:?}")
    };
    assert!(Arc::ptr_eq(cause, same));
    assert_eq!(count(&libs[1], "on_load"), 1, "the failure is kept, not retried");
    // SAFETY: the lease is alive; the pass takes any `i32`.
    assert_eq!(unsafe { lease.get::<IntOp>("a_pass_z").unwrap()(1) }, 2);
    // passes_of needs every provider: it fails with the same error.
    assert!(matches!(lease.passes_of::<IntOp>(), Err(Error::MapFailed { .. })));
}

#[test]
fn passes_of_maps_every_provider_and_orders_as_an_eager_set() {
    let (dir, libs) = plugins("demand_order", &["b", "a", "c"]);
    let listed = |lease: &Lease| -> Vec<(String, i32)> {
        let passes = lease.passes_of::<IntOp>().unwrap();
        // SAFETY: the lease is alive; the passes take any `i32`.
        passes
            .map(|pass| (pass.name().to_owned(), unsafe { pass(1) }))
            .collect()
    };
    // SAFETY: the directory holds this suite's own fixtures.
    let eager = unsafe { PluginHost::builder().dir(dir.path()) }.build().unwrap();
    let eager_order = listed(&eager.acquire().unwrap());
    drop(eager);
    for lib in &libs {
        assert_unloaded(lib);
    }
    let host = on_demand(dir.path());
    let lease = host.acquire().unwrap();
    assert_eq!(listed(&lease), eager_order);
    assert_eq!(eager_order[0].0, "a_pass_a");
    assert_eq!(eager_order[1].0, "a_pass_z");
    assert!(lease.plugins().iter().all(|p| p.is_mapped()));
}

#[test]
fn names_declared_twice_fail_acquire_as_an_eager_load_does() {
    let dir = TestDir::new("demand_collision");
    dir.add("demand_a", "liba.so");
    dir.add("demand_a_two", "liba2.so");
    let error = on_demand(dir.path()).acquire().unwrap_err();
    assert!(
        matches!(&error, Error::DuplicatePass { pass, .. } if pass.starts_with("a_pass")),
        "{error:?}"
    );
    // Judged from the files: none of their code ran.
    assert!(events(&dir.path().join("liba.so")).is_empty());
    assert!(events(&dir.path().join("liba2.so")).is_empty());
    // SAFETY: the directory holds this suite's own fixtures.
    let eager = unsafe { PluginHost::builder().dir(dir.path()) }.build().unwrap();
    // The same error between the same plugins (the first colliding name may differ: an
    // unmapped plugin's passes are in its manifest's order, a mapped one's in registration
    // order).
    let (
        Error::DuplicatePass { first, second, .. },
        Error::DuplicatePass {
            first: f, second: s, ..
        },
    ) = (&error, &eager.acquire().unwrap_err())
    else {
        panic!("the eager load did not fail with DuplicatePass")
    };
    assert_eq!((first, second), (f, s));
    drop(eager);
    // Under SkipFailed the second plugin's names are left out, as in an eager set.
    // SAFETY: the directory holds this suite's own fixtures.
    let skipping = unsafe { PluginHost::builder().dir(dir.path()) }
        .on_demand()
        .policy(dylease::LoadPolicy::SkipFailed)
        .build()
        .unwrap();
    let lease = skipping.acquire().unwrap();
    assert_eq!(lease.failures().len(), 3);
    assert_eq!(lease.passes().len(), 3);
    // SAFETY: the lease is alive; the pass takes any `i32`.
    assert_eq!(unsafe { lease.get::<IntOp>("a_pass_a").unwrap()(1) }, 2);
}

/// The lease and host `reentering`'s `on_load` hook uses, and what it saw.
static REENTERED: Mutex<Option<(Lease, Arc<PluginHost>, String)>> = Mutex::new(None);

/// Called by demand.c's `on_load` (`-DREENTER`) on the mapping thread: asks for the plugin's
/// own pass through a clone of the lease being used, then reloads the host, and records what
/// each did.
extern "C" fn reentering(_dir: *const std::ffi::c_char) -> i32 {
    let Some((lease, host)) = REENTERED
        .lock()
        .unwrap()
        .as_ref()
        .map(|(lease, host, _)| (lease.clone(), host.clone()))
    else {
        return 1;
    };
    let got = match lease.get::<IntOp>("e_pass_a") {
        Ok(_) => "mapped".to_owned(),
        Err(error) => format!("{error:?}"),
    };
    let reloaded = match host.reload() {
        Ok(_) => "reloaded".to_owned(),
        Err(error) => format!("{error:?}"),
    };
    REENTERED.lock().unwrap().as_mut().unwrap().2 = format!("{got}, {reloaded}");
    0
}

#[test]
fn a_first_use_or_a_reload_from_the_plugins_own_on_load_is_reentrant_not_a_deadlock() {
    let (dir, libs) = plugins("demand_reenter", &["e_reenter"]);
    let hook: extern "C" fn(*const std::ffi::c_char) -> i32 = reentering;
    std::fs::write(dir.path().join("reenter.hook"), format!("{:p}", hook as *const ())).unwrap();
    let host = Arc::new(on_demand(dir.path()));
    let lease = host.acquire().unwrap();
    *REENTERED.lock().unwrap() = Some((lease.clone(), host.clone(), String::new()));
    let pass = lease.get::<IntOp>("e_pass_z").unwrap();
    // SAFETY: the lease is alive; the pass takes any `i32`.
    assert_eq!(unsafe { pass(1) }, 2);
    let (kept, _, outcome) = REENTERED.lock().unwrap().take().unwrap();
    drop(kept);
    // The plugin's own pass: not a wait for itself. A reload of the host: the mapping runs
    // inside the host's re-entrancy mark, so it fails fast too.
    assert_eq!(outcome, "Reentrant, Reentrant");
    assert_eq!(count(&libs[0], "on_load"), 1);
}

#[test]
fn a_wait_for_another_threads_mapping_is_bounded_by_map_timeout_and_not_kept() {
    let (dir, libs) = plugins("demand_timeout", &["w_slow"]);
    // SAFETY: the directory holds this suite's own fixtures.
    let host = unsafe { PluginHost::builder().dir(dir.path()) }
        .on_demand()
        .map_timeout(std::time::Duration::from_millis(50))
        .build()
        .unwrap();
    let lease = host.acquire().unwrap();
    std::thread::scope(|scope| {
        let mapping = scope.spawn(|| lease.get::<IntOp>("w_pass_a").map(|pass| pass.name().to_owned()));
        // The other thread is inside the plugin's `on_load`, which sleeps 200 ms.
        crate::support::await_that("the mapping thread's on_load", || count(&libs[0], "on_load") == 1);
        let waited = lease.get::<IntOp>("w_pass_z").unwrap_err();
        assert!(
            matches!(&waited, Error::TimedOut { waited: dylease::Waited::Mapping(plugin), .. } if plugin.path() == Some(libs[0].as_path())),
            "{waited:?}"
        );
        assert!(waited.to_string().contains("map_timeout"), "{waited}");
        assert_eq!(mapping.join().unwrap().unwrap(), "w_pass_a");
    });
    // SAFETY: the lease is alive; the pass takes any `i32`.
    assert_eq!(unsafe { lease.get::<IntOp>("w_pass_z").unwrap()(1) }, 2);
    assert_eq!(count(&libs[0], "register"), 1);
}

#[test]
fn a_plugin_mapped_on_demand_shares_the_instance_another_host_loaded() {
    let (dir, libs) = plugins("demand_shared", &["h", "i"]);
    // SAFETY: the directory holds this suite's own fixtures.
    let eager = unsafe { PluginHost::builder().dir(dir.path()) }.build().unwrap();
    let session = eager.acquire().unwrap();
    let host = on_demand(dir.path());
    let lease = host.acquire().unwrap();
    // SAFETY: the lease is alive; the pass takes any `i32`.
    assert_eq!(unsafe { lease.get::<IntOp>("h_pass_a").unwrap()(1) }, 2);
    assert!(lease.plugins()[0].is_mapped() && !lease.plugins()[1].is_mapped());
    // One instance: its on_load ran once; this set registered into its own table.
    assert_eq!(count(&libs[0], "on_load"), 1);
    assert_eq!(count(&libs[0], "register"), 2);
    drop(lease);
    assert!(mapped(&libs[0]), "the session's set still uses it");
    assert_eq!(count(&libs[0], "on_unload"), 0);
    drop(session);
    assert_unloaded(&libs[0]);
    assert_eq!(count(&libs[0], "on_unload"), 1);
}
