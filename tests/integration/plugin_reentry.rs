//! Plugin code that uses dylease itself: an `on_load` that builds another host and acquires
//! from it (I4: no plugin code runs under a lock it can re-enter). Over another file the
//! nested acquire works; over the very file being loaded it fails within the nested host's
//! `acquire_timeout` (or works); never does it deadlock.

use std::ffi::{CStr, OsStr, c_char};
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use dylease::PluginHost;

use crate::support::TestDir;

/// How long the test waits for the outer load: a deadlock fails the test instead of hanging.
const PATIENCE: Duration = Duration::from_secs(30);
/// The nested host's bound on its waits.
const NESTED_TIMEOUT: Duration = Duration::from_secs(2);

/// Called by `reenter.c`'s `on_load` with the plugin's directory: loads the file named in
/// `nested.path` there with a host of its own, and writes what happened to `nested.outcome`.
extern "C" fn reenter(dir: *const c_char) -> i32 {
    // SAFETY: the plugin passes a NUL-terminated path that outlives this call.
    let dir = Path::new(OsStr::from_bytes(unsafe { CStr::from_ptr(dir) }.to_bytes()));
    let Ok(target) = fs::read_to_string(dir.join("nested.path")) else {
        return 1;
    };
    // SAFETY: the nested plugin is this suite's own fixture, whose initialisation code is sound.
    let outcome = match unsafe { PluginHost::builder().file(target.trim()).build() } {
        Err(error) => format!("error {error:?}"),
        Ok(nested) => match nested.acquire_timeout(NESTED_TIMEOUT) {
            Ok(lease) => format!("ok {}", lease.plugins()[0].name()),
            Err(error) => format!("error {error:?}"),
        },
    };
    match fs::write(dir.join("nested.outcome"), outcome) {
        Ok(()) => 0,
        Err(_) => 1,
    }
}

/// Loads `reenter.c` whose `on_load` loads `nested` (a path, or `None` for the plugin itself)
/// through a host of its own; returns what the nested acquire did. Panics if the outer load
/// fails or does not finish within [`PATIENCE`].
fn load_reentering(test: &str, nested: Option<&Path>) -> String {
    let dir = TestDir::new(test);
    let lib = dir.add("reenter", "libreenter.so");
    let hook: extern "C" fn(*const c_char) -> i32 = reenter;
    fs::write(dir.path().join("reenter.hook"), format!("{:p}", hook as *const ())).unwrap();
    let nested: PathBuf = nested.map_or_else(|| lib.clone(), Path::to_owned);
    fs::write(dir.path().join("nested.path"), nested.as_os_str().as_bytes()).unwrap();
    // SAFETY: the library is this suite's own fixture, whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&lib).build() }.unwrap();
    let (done, outcome) = mpsc::channel();
    // Not scoped: a deadlocked load must not keep the test from failing.
    thread::spawn(move || {
        let loaded = host.acquire().map(|lease| lease.plugins()[0].name().to_owned());
        let _ = done.send(loaded.map_err(|error| error.to_string()));
    });
    let loaded = outcome
        .recv_timeout(PATIENCE)
        .expect("the outer load did not finish: plugin code deadlocked re-entering dylease");
    assert_eq!(loaded.as_deref(), Ok("reenter"));
    fs::read_to_string(dir.path().join("nested.outcome")).expect("on_load ran the nested load")
}

#[test]
fn on_load_acquiring_from_another_host_over_another_file_works() {
    let other = TestDir::new("reentry_other_file");
    let p1 = other.add("p1", "libp1.so");
    let outcome = load_reentering("reentry_other", Some(&p1));
    assert_eq!(outcome, "ok p1");
}

#[test]
fn on_load_acquiring_the_file_being_loaded_fails_within_its_timeout_or_works() {
    let outcome = load_reentering("reentry_same", None);
    assert!(
        outcome == "ok reenter" || outcome.starts_with("error TimedOut"),
        "{outcome}"
    );
}
