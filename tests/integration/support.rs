//! Fixtures: C plugins compiled once per test process, copied into a directory of each
//! test's own, and the checks that prove a library really left the address space. The CLI's
//! tests (`dylease-cli/tests/integration`) use this file too, by path.

use std::collections::HashMap;
use std::fs::{self, Permissions};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

#[path = "../support/cc.rs"]
mod cc;
#[path = "../support/loader.rs"]
mod loader;
pub(crate) use cc::{compile_plugin, crate_root};
pub(crate) use loader::loader_has;

/// The C test plugins, by fixture name: sources and extra compiler arguments.
fn recipe(name: &str) -> (Vec<&'static str>, Vec<String>) {
    let numbered = |n: &str| {
        (
            vec!["numbered.c"],
            vec![format!("-DPLUGIN_NAME=\"{n}\""), format!("-DPASS_NAME=\"{n}_pass\"")],
        )
    };
    let events = |sources: &[&'static str], args: &[&str]| {
        let mut all: Vec<String> = vec!["-Wl,--no-as-needed".into(), "-ldl".into()];
        all.extend(args.iter().map(|a| (*a).to_owned()));
        (sources.to_vec(), all)
    };
    match name {
        "arith" => (vec!["arith.c"], vec![]),
        "churn" => (vec!["churn.c"], vec![]),
        "ctor" => (vec!["ctor.c"], vec![]),
        "ctor_nodelete" => (vec!["ctor.c"], vec!["-Wl,-z,nodelete".into()]),
        "noentry" => (vec!["noentry.c"], vec![]),
        "by_hand" => (vec!["by_hand.c"], vec![]),
        "by_hand_manifest" => (vec!["by_hand.c"], vec!["-DMANIFEST".into()]),
        "by_hand_abi0" => (vec!["by_hand.c"], vec!["-DABI=0".into()]),
        "by_hand_abi1" => (vec!["by_hand.c"], vec!["-DABI=1".into()]),
        "by_hand_abi3" => (vec!["by_hand.c"], vec!["-DABI=3".into()]),
        "by_hand_huge_name" => (vec!["by_hand.c"], vec!["-DHUGE".into(), "-DNAME=huge_name".into()]),
        "by_hand_null_pass_name" => (vec!["by_hand.c"], vec!["-DEXTRA_PASS_NAME=0".into()]),
        "by_hand_empty_pass_name" => (vec!["by_hand.c"], vec!["-DEXTRA_PASS_NAME=\"\"".into()]),
        "by_hand_bad_utf8_pass_name" => (vec!["by_hand.c"], vec!["-DEXTRA_PASS_NAME=\"bad\\xff\"".into()]),
        "by_hand_huge_pass_name" => (
            vec!["by_hand.c"],
            vec!["-DHUGE".into(), "-DEXTRA_PASS_NAME=huge_name".into()],
        ),
        "by_hand_same_pass_twice" => (vec!["by_hand.c"], vec!["-DEXTRA_PASS_NAME=\"seven\"".into()]),
        // dladdr lives in libdl before glibc 2.34; the library comes before the source here,
        // so it must not be dropped as unneeded.
        "by_hand_marker" => (
            vec!["by_hand.c"],
            vec!["-DMARK_CONSTRUCTOR".into(), "-Wl,--no-as-needed".into(), "-ldl".into()],
        ),
        "by_hand_marker_manifest" => (
            vec!["by_hand.c"],
            ["-DMARK_CONSTRUCTOR", "-DMANIFEST", "-Wl,--no-as-needed", "-ldl"]
                .map(String::from)
                .into(),
        ),
        // Signed loads (signed.rs): the constructor writes a string the test rewrites in place.
        "by_hand_marker_text" => (
            vec!["by_hand.c"],
            [
                "-DMARK_CONSTRUCTOR",
                "-DMANIFEST",
                "-DMARK_TEXT=\"verified-bytes!!\"",
                "-Wl,--no-as-needed",
                "-ldl",
            ]
            .map(String::from)
            .into(),
        ),
        // A manifest and `-z nodelete`: the catalog's pin prediction of a file whose
        // manifest it refuses.
        "by_hand_marker_manifest_nodelete" => (
            vec!["by_hand.c"],
            [
                "-DMARK_CONSTRUCTOR",
                "-DMANIFEST",
                "-Wl,-z,nodelete",
                "-Wl,--no-as-needed",
                "-ldl",
            ]
            .map(String::from)
            .into(),
        ),
        "by_hand_marker_future_abi" => (
            vec!["by_hand.c"],
            [
                "-DMARK_CONSTRUCTOR",
                "-DMANIFEST",
                "-DFUTURE_ABI=3u",
                "-Wl,--no-as-needed",
                "-ldl",
            ]
            .map(String::from)
            .into(),
        ),
        "by_hand_ghost_manifest" => (vec!["by_hand.c"], vec!["-DGHOST_MANIFEST".into()]),
        "by_hand_retyped_manifest" => (vec!["by_hand.c"], vec!["-DRETYPED_MANIFEST".into()]),
        // dladdr, as for by_hand_marker.
        "swap_on_load" => (vec!["swap_on_load.c"], vec!["-Wl,--no-as-needed".into(), "-ldl".into()]),
        "truncate_on_load" => (
            vec!["truncate_on_load.c"],
            vec!["-Wl,--no-as-needed".into(), "-ldl".into()],
        ),
        // dladdr, as for by_hand_marker.
        "reenter" => (vec!["reenter.c"], vec!["-Wl,--no-as-needed".into(), "-ldl".into()]),
        // dladdr, as for by_hand_marker.
        "mount_on_load" => (
            vec!["mount_on_load.c"],
            vec!["-Wl,--no-as-needed".into(), "-ldl".into()],
        ),
        // dladdr, as for by_hand_marker.
        "by_hand_null_descriptor" => (vec!["by_hand.c"], vec!["-DNULL_DESCRIPTOR".into()]),
        "by_hand_null_name" => (vec!["by_hand.c"], vec!["-DNAME=0".into()]),
        "by_hand_empty_name" => (vec!["by_hand.c"], vec!["-DNAME=\"\"".into()]),
        "by_hand_bad_utf8_name" => (vec!["by_hand.c"], vec!["-DNAME=\"bad\\xff\"".into()]),
        "by_hand_null_register" => (vec!["by_hand.c"], vec!["-DNULL_REGISTER".into()]),
        "by_hand_register_fails" => (vec!["by_hand.c"], vec!["-DREGISTER_RESULT=-7".into()]),
        "by_hand_null_function" => (vec!["by_hand.c"], vec!["-DNULL_FUNCTION".into()]),
        "by_hand_unresolved" => (vec!["by_hand.c"], vec!["-DUNRESOLVED".into()]),
        "by_hand_stale" => (vec!["by_hand.c"], vec!["-DSTALE".into()]),
        // ABI version 2 and its compatibility with version 1. These log their hooks through
        // events.h, which needs dladdr (see by_hand_marker).
        "typed" => events(&["typed.c"], &[]),
        "typed_empty_interface" => events(&["typed.c"], &["-DBAD_INTERFACE=\"\""]),
        "typed_bad_utf8_interface" => events(&["typed.c"], &["-DBAD_INTERFACE=\"bad\\xff\""]),
        "typed_long_interface" => events(&["typed.c"], &["-DLONG_INTERFACE", "-DBAD_INTERFACE=long_interface"]),
        "hooks" => events(&["hooks.c"], &[]),
        "slow_unload" => events(&["slow_unload.c"], &[]),
        "slow_unload_2" => events(&["slow_unload.c"], &["-DVERSION=2"]),
        "hooks_abi1" => events(&["hooks.c"], &["-DABI=1"]),
        "hooks_on_load_fails" => events(&["hooks.c"], &["-DON_LOAD_RESULT=-3"]),
        "hooks_register_fails" => events(&["hooks.c"], &["-DREGISTER_RESULT=-1"]),
        "hooks_register_fails_reported" => events(
            &["hooks.c"],
            &[
                "-DREGISTER_RESULT=-1",
                "-DREPORT=\"no NPU device found\"",
                "-DSECOND_REPORT=\"a later word\"",
            ],
        ),
        "hooks_register_fails_huge_report" => events(&["hooks.c"], &["-DREGISTER_RESULT=-1", "-DHUGE_REPORT"]),
        "hooks_register_fails_bad_utf8_report" => {
            events(&["hooks.c"], &["-DREGISTER_RESULT=-1", "-DREPORT=\"no dev\\xffice\""])
        }
        "hooks_no_on_load_register_fails" => events(&["hooks.c"], &["-DNO_ON_LOAD", "-DREGISTER_RESULT=-1"]),
        "hooks_reported_success" => events(&["hooks.c"], &["-DREPORT=\"all good\""]),
        "hooks_null_interface" => events(&["hooks.c"], &["-DNULL_INTERFACE"]),
        "v1_plugin" => events(&["v1_plugin.c"], &[]),
        // Every macro of the header, under the strictest flags it promises to pass.
        n if n.starts_with("macros_") => {
            let (lang, variant) = n["macros_".len()..].split_once('_').expect("macros_<lang>_<variant>");
            let (source, mut args) = match lang {
                "c" => ("macros.c", vec!["-std=c99".to_owned()]),
                "cpp" => (
                    "macros.cpp",
                    vec![
                        "-std=c++11".into(),
                        "-Wold-style-cast".into(),
                        "-Wzero-as-null-pointer-constant".into(),
                    ],
                ),
                other => panic!("no language {other}"),
            };
            args.extend(["-Wpedantic".into(), "-Wextra".into()]);
            match variant {
                "plain" => args.push("-DPLAIN".into()),
                "unload" => args.push("-DUNLOAD".into()),
                "hooks" => {}
                "failing" => args.push("-DFAILING".into()),
                other => panic!("no macros variant {other}"),
            }
            (vec![source], args)
        }
        "typed_ab" => (vec!["typed_a.c", "typed_b.c"], vec![]),
        "typed_ba" => (vec!["typed_b.c", "typed_a.c"], vec![]),
        "duplicate" => (vec!["duplicate.c"], vec![]),
        "noisy" => (vec!["noisy.c"], vec![]),
        "cpp_multi" => (vec!["multi_a.cpp", "multi_b.cpp"], vec![]),
        // The C++ example plugin (a singleton holding a std::string, a thread_local, an
        // exception), built with the recipe (hidden visibility and the version script
        // include/dylease.map), and plainly.
        "layout_recipe" | "layout_plain" => {
            let root = crate_root();
            let mut args = vec![format!("-I{}", root.join("examples/plugins").display())];
            if name == "layout_recipe" {
                args.push("-fvisibility=hidden".into());
                args.push(format!(
                    "-Wl,--version-script={}",
                    root.join("include/dylease.map").display()
                ));
            }
            (
                vec![
                    "../../examples/plugins/layout.cpp",
                    "../../examples/plugins/layout_transpose.cpp",
                ],
                args,
            )
        }
        "stateful" => (vec!["stateful.c"], vec![]),
        // Isolated sets (isolated.rs).
        "isolated" => (vec!["isolated.c"], vec![]),
        "isolated_abort_constructor" => (vec!["isolated.c"], vec!["-DABORT_IN_CONSTRUCTOR".into()]),
        "isolated_exit_on_load" => (vec!["isolated.c"], vec!["-DEXIT_IN_ON_LOAD".into()]),
        "isolated_exit_on_unload" => (vec!["isolated.c"], vec!["-DEXIT_IN_ON_UNLOAD".into()]),
        // Its run path uses `$ORIGIN`: the loader is given it by name in its directory.
        "isolated_origin" => (
            vec!["isolated.c"],
            vec!["-Wl,-rpath,$ORIGIN".into(), "-Wl,--enable-new-dtags".into()],
        ),
        "isolated_nodelete" => (vec!["isolated.c"], vec!["-Wl,-z,nodelete".into()]),
        "isolated_unique" => (vec!["isolated_unique.cpp"], vec![]),
        "on_load_state_nodelete" => (vec!["on_load_state.c"], vec!["-Wl,-z,nodelete".into()]),
        // A plugin that other libraries link against by its soname, found next to them.
        "stateful_core" => (vec!["stateful.c"], vec!["-Wl,-soname,libcore.so".into()]),
        // No entry point of its own, but it links (DT_NEEDED) against `libcore.so` from its
        // own directory: `dlsym` finds the dependency's entry point through it.
        "links_core" => (
            vec!["noentry.c"],
            vec![
                "-Wl,--no-as-needed".into(),
                // Built first by `fixture`, which holds its lock while it reads this recipe.
                Path::new(env!("CARGO_TARGET_TMPDIR"))
                    .join("fixtures/libstateful_core.so")
                    .display()
                    .to_string(),
                "-Wl,-rpath,$ORIGIN".into(),
            ],
        ),
        // On-demand sets (on_demand.rs): `demand_<name>[_<variant>]`, plugin `<name>` with
        // pass `<name>_pass` (and typed `<name>_pass_z`, `<name>_pass_a`).
        n if n.starts_with("demand_") => {
            let rest = &n["demand_".len()..];
            let (plugin, variant) = rest.split_once('_').unwrap_or((rest, ""));
            let mut args = vec![
                format!("-DPLUGIN_NAME=\"{plugin}\""),
                format!("-DPASS_NAME=\"{plugin}_pass\""),
            ];
            match variant {
                "" => {}
                "fails" => args.push("-DON_LOAD_RESULT=-3".into()),
                "slow" => args.push("-DSLOW_ON_LOAD".into()),
                "reenter" => args.push("-DREENTER".into()),
                "two" => args.push("-DOFFSET=2".into()),
                other => panic!("no demand variant {other}"),
            }
            let (sources, mut all) = events(&["demand.c"], &[]);
            all.extend(args);
            (sources, all)
        }
        n if n.starts_with("versioned_") => (vec!["versioned.c"], vec![format!("-DVERSION={}", &n[10..])]),
        n if n.starts_with('p') => numbered(n),
        other => panic!("no test plugin called {other}"),
    }
}

/// The path of the compiled fixture `name`, building it on first use in this process.
pub(crate) fn fixture(name: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    if name == "links_core" {
        // Its recipe links against another fixture: build that one first, outside the lock.
        fixture("stateful_core");
    }
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(path) = built.get(name) {
        return path.clone();
    }
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixtures");
    fs::create_dir_all(&out_dir).unwrap();
    let (sources, args) = recipe(name);
    let plugins = crate_root().join("tests/plugins");
    let sources: Vec<PathBuf> = sources.iter().map(|s| plugins.join(s)).collect();
    let sources: Vec<&Path> = sources.iter().map(PathBuf::as_path).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = out_dir.join(format!("lib{name}.so"));
    let path = cc::compile_plugin(&sources, &out, &args).unwrap_or_else(|e| panic!("{e}"));
    built.insert(name.to_owned(), path.clone());
    path
}

/// A directory of one test's own, so its library copies have paths (and inodes) no other
/// test loads: glibc would otherwise hand back another test's mapping.
///
/// The directory and the copies get mode 0755 whatever the umask, so that they pass the
/// host's default trust check (nothing writable by group or others).
pub(crate) struct TestDir(PathBuf);

impl TestDir {
    pub(crate) fn new(test: &str) -> TestDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("t")
            .join(format!("{test}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap();
        fs::set_permissions(&path, Permissions::from_mode(0o755)).unwrap();
        TestDir(path.canonicalize().unwrap())
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }

    /// Copies fixture `name` into this directory as `file`.
    pub(crate) fn add(&self, name: &str, file: &str) -> PathBuf {
        let to = self.0.join(file);
        fs::copy(fixture(name), &to).unwrap();
        fs::set_permissions(&to, Permissions::from_mode(0o755)).unwrap();
        until_no_writer(&to);
        to
    }

    /// A subdirectory.
    #[allow(dead_code)]
    pub(crate) fn sub(&self, name: &str) -> PathBuf {
        let to = self.0.join(name);
        fs::create_dir_all(&to).unwrap();
        fs::set_permissions(&to, Permissions::from_mode(0o755)).unwrap();
        to
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Whether `path` is mapped into this process, from `/proc/self/maps`: the kernel's view,
/// which no loader bookkeeping can fake. Compares bytes, so that file names which are not
/// UTF-8 work too.
pub(crate) fn mapped(path: &Path) -> bool {
    let path = path.canonicalize().unwrap();
    let path = path.as_os_str().as_bytes();
    let maps = fs::read("/proc/self/maps").unwrap();
    maps.split(|&b| b == b'\n')
        .any(|line| line.ends_with(path) && line[..line.len() - path.len()].ends_with(b" "))
}

/// Asserts `path` is fully gone: unmapped and unknown to the loader.
#[track_caller]
pub(crate) fn assert_unloaded(path: &Path) {
    assert!(!mapped(path), "{} is still mapped", path.display());
    assert!(!loader_has(path), "the loader still has {}", path.display());
}

/// Asserts `path` is mapped and known to the loader.
#[track_caller]
pub(crate) fn assert_loaded(path: &Path) {
    assert!(mapped(path), "{} is not mapped", path.display());
    assert!(loader_has(path), "the loader does not have {}", path.display());
}

/// Runs `f` on a thread of its own whose file access is subject to permission bits even when
/// the process runs as root: the thread drops `CAP_DAC_OVERRIDE` and `CAP_DAC_READ_SEARCH`
/// from its effective capabilities. Returns `Err` with the reason when this thread cannot be
/// made subject to them.
pub(crate) fn with_permission_checks<R: Send>(f: impl FnOnce() -> R + Send) -> Result<R, String> {
    const CAP_DAC_OVERRIDE: u32 = 1;
    const CAP_DAC_READ_SEARCH: u32 = 2;
    without_capabilities(&[CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH], f)
}

/// Runs `f` on a thread of its own without the capabilities `dropped` (their numbers, as
/// `<linux/capability.h>` gives them) in its effective set: Linux capabilities are per thread,
/// and the raw `capset` system call changes only the calling thread. Returns `Err` with the
/// reason when they cannot be dropped.
pub(crate) fn without_capabilities<R: Send>(dropped: &[u32], f: impl FnOnce() -> R + Send) -> Result<R, String> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy, Default)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
    let mask = dropped.iter().fold(0u32, |mask, &cap| mask | 1 << cap);
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let mut header = Header {
                    version: LINUX_CAPABILITY_VERSION_3,
                    pid: 0,
                };
                let mut data = [Data::default(); 2];
                // SAFETY: `header` and `data` have the kernel's layout for version 3 (two data
                // structs); pid 0 is the calling thread.
                if unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) } != 0 {
                    return Err(format!("capget failed: {}", std::io::Error::last_os_error()));
                }
                data[0].effective &= !mask;
                // SAFETY: as above; dropping effective capabilities needs no privilege and
                // affects only this thread, which ends with `f`.
                if unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) } != 0 {
                    return Err(format!("capset failed: {}", std::io::Error::last_os_error()));
                }
                Ok(f())
            })
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// Whether any file whose path contains `needle` is mapped into this process.
pub(crate) fn mapped_containing(needle: &str) -> bool {
    maps_text().lines().any(|line| line.contains(needle))
}

/// The text of `/proc/self/maps`, a path that is not UTF-8 (another test's, mapped meanwhile)
/// shown lossily: read as a `String`, the whole read would fail.
#[allow(dead_code)]
pub(crate) fn maps_text() -> String {
    String::from_utf8_lossy(&fs::read("/proc/self/maps").unwrap()).into_owned()
}

/// `renameat2(from, to, RENAME_EXCHANGE)`: swaps two directory entries atomically, as an
/// attacker racing a check would.
pub(crate) fn exchange(from: &Path, to: &Path) -> std::io::Result<()> {
    let from = std::ffi::CString::new(from.as_os_str().as_bytes()).unwrap();
    let to = std::ffi::CString::new(to.as_os_str().as_bytes()).unwrap();
    // SAFETY: both paths are NUL-terminated and outlive the call.
    let done = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            from.as_ptr(),
            libc::AT_FDCWD,
            to.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if done == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// `file` plus `suffix`: the side channels of the test plugins (`<library>.log`, `.ran`,
/// `.unloading`, `.go`).
pub(crate) fn beside(file: &Path, suffix: &str) -> PathBuf {
    PathBuf::from(format!("{}{suffix}", file.display()))
}

/// Waits until `done()`, failing the test after 20 s (a bug fails the test, never hangs it).
#[track_caller]
pub(crate) fn await_that(what: &str, done: impl Fn() -> bool) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !done() {
        assert!(std::time::Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// The toy graph of `examples/plugins/graph.h`, which the example plugins' passes rewrite.
#[repr(C)]
pub(crate) struct Graph {
    pub(crate) nodes: i32,
    pub(crate) rewrites: i32,
}

/// The example plugins' pass interface.
pub(crate) struct GraphPass;
// SAFETY: the example plugins register their passes under this id as `void (*)(demo_graph *)`.
unsafe impl dylease::Interface for GraphPass {
    const ID: &'static str = "demo.graph_pass/1";
    type Fn = unsafe extern "C" fn(*mut Graph);
}

/// The test plugin built from `tests/plugins/<source>` with the compiler arguments `args`,
/// as `lib<name>.so` among the fixtures: for sources that [`fixture`]'s recipes do not list.
/// Built again on every call (the build renames its output into place, so concurrent calls
/// never see half of one). Used by the CLI crate's tests (`install`).
#[allow(dead_code)]
pub(crate) fn built_from(source: &str, name: &str, args: &[&str]) -> PathBuf {
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixtures");
    fs::create_dir_all(&out_dir).unwrap();
    let source = crate_root().join("tests/plugins").join(source);
    cc::compile_plugin(&[&source], &out_dir.join(format!("lib{name}.so")), args).unwrap_or_else(|e| panic!("{e}"))
}

/// Waits (at most 20 s) until no open file description has `path` open for writing. A child
/// that another test's thread forks (a worker's spawn, a compiler's) while this test holds
/// `path` open for writing keeps a copy of that descriptor until its `exec` closes it, and a
/// host that requires signatures refuses a file open for writing anywhere (it cannot hold its
/// bytes still with a read lease). The kernel grants a read lease only when no description has
/// the file open for writing, so this takes one and releases it at once; where leases cannot
/// be taken at all (`EINVAL`, `EACCES`) a host copies the file instead, and this returns.
#[allow(dead_code)]
pub(crate) fn until_no_writer(path: &Path) {
    use std::os::fd::AsRawFd as _;
    let file = fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let fd = file.as_raw_fd();
    /// `F_SETSIG` (`<asm-generic/fcntl.h>`), which the `libc` crate does not declare for every
    /// target.
    const F_SETSIG: libc::c_int = 10;
    // SAFETY: `fcntl(F_SETSIG)` on a descriptor this function owns: a break of the lease below
    // (none is expected: it is released at once) is signalled by `SIGURG`, ignored by default,
    // not `SIGIO`, which would end the process.
    assert_eq!(unsafe { libc::fcntl(fd, F_SETSIG, libc::SIGURG) }, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        // SAFETY: `fcntl(F_SETLEASE)` on a descriptor this function owns, opened read-only.
        if unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_RDLCK) } == 0 {
            // SAFETY: as above; releases the lease just taken.
            assert_eq!(unsafe { libc::fcntl(fd, libc::F_SETLEASE, libc::F_UNLCK) }, 0);
            return;
        }
        let error = std::io::Error::last_os_error();
        if !matches!(error.raw_os_error(), Some(libc::EAGAIN | libc::EBUSY)) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{} stayed open for writing elsewhere",
            path.display()
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Compiles `tests/plugins/<source>` into `out` with `args`, mode 0755, its modification time
/// a minute back (out of the checker's "may still be being written" window).
#[allow(dead_code)]
pub(crate) fn compile_settled(source: &str, out: &Path, args: &[&str]) -> PathBuf {
    let source = crate_root().join("tests/plugins").join(source);
    let path = compile_plugin(&[&source], out, args).unwrap_or_else(|e| panic!("{e}"));
    fs::set_permissions(&path, Permissions::from_mode(0o755)).unwrap();
    let file = fs::File::options().write(true).open(&path).unwrap();
    file.set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(60))
        .unwrap();
    path
}

/// A copy of `from` as `dir/file`, with mode `mode`.
#[allow(dead_code)]
pub(crate) fn copy_in(dir: &Path, from: &Path, file: &str, mode: u32) -> PathBuf {
    let to = dir.join(file);
    fs::copy(from, &to).unwrap();
    fs::set_permissions(&to, Permissions::from_mode(mode)).unwrap();
    to
}

/// A test layout: `open/` (mode 1777, like `/tmp`), `trusted/libdep.so` (the genuine
/// dependency, returning 1), and `plugin/libuses_dep.so` whose run path lists the missing
/// `open/build/lib` first, then `trusted/`.
#[allow(dead_code)]
pub(crate) struct StaleRunPath {
    pub(crate) dir: TestDir,
    pub(crate) open: PathBuf,
    pub(crate) plugin: PathBuf,
}

#[allow(dead_code)]
pub(crate) fn stale_run_path(test: &str) -> StaleRunPath {
    let dir = TestDir::new(test);
    let open = dir.sub("open");
    fs::set_permissions(&open, Permissions::from_mode(0o1777)).unwrap();
    let trusted = dir.sub("trusted");
    compile_settled(
        "dep.c",
        &trusted.join("libdep.so"),
        &["-DDEP_VALUE=1", "-Wl,-soname,libdep.so", "-Wl,--no-as-needed", "-ldl"],
    );
    let run_path = format!("{}:{}", open.join("build/lib").display(), trusted.display());
    let plugin = compile_settled(
        "uses_dep.c",
        &dir.sub("plugin").join("libuses_dep.so"),
        &[
            "-Wl,--no-as-needed",
            "-L",
            &trusted.display().to_string(),
            "-ldep",
            &format!("-Wl,-rpath,{run_path}"),
            "-Wl,--enable-new-dtags",
        ],
    );
    StaleRunPath { dir, open, plugin }
}

/// `lib` without its manifest notes (`objcopy --remove-section .note.dylease`): a plugin as
/// a link step that drops `.note*` sections leaves it.
pub(crate) fn strip_manifest(lib: &Path) {
    let status = std::process::Command::new("objcopy")
        .args(["--remove-section", ".note.dylease"])
        .arg(lib)
        .status()
        .expect("cannot run objcopy");
    assert!(status.success(), "objcopy {}", lib.display());
}
