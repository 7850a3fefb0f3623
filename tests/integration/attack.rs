//! Attacks on the claim "the file that runs is the file that was checked" (I9). Each test
//! asserts the security property, so it FAILS while the attack succeeds.

use std::fs::{self, Permissions};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use dylease::PluginHost;

use crate::support::{TestDir, await_that, beside, compile_plugin, copy_in, fixture};

/// A fixture of this module's own: `sources` (under tests/plugins, or absolute) compiled with
/// `args` into `lib<name>.so`, once per process.
fn own_fixture(name: &str, sources: &[&str], args: &[&str]) -> PathBuf {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _guard = LOCK.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("attack-fixtures");
    fs::create_dir_all(&out_dir).unwrap();
    let out = out_dir.join(format!("lib{name}.so"));
    if out.exists() {
        return out;
    }
    let plugins = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plugins");
    let sources: Vec<PathBuf> = sources.iter().map(|s| plugins.join(s)).collect();
    let sources: Vec<&Path> = sources.iter().map(PathBuf::as_path).collect();
    compile_plugin(&sources, &out, args).unwrap_or_else(|e| panic!("{e}"))
}

/// `slow_unload` with a run path that uses `$ORIGIN`: dylease hands the loader
/// `/proc/self/fd/D/<name>` for it (the directory mode), not the checked descriptor.
fn slow_unload_origin() -> PathBuf {
    own_fixture(
        "slow_unload_origin",
        &["slow_unload.c"],
        &["-Wl,--no-as-needed", "-ldl", "-Wl,-rpath,$ORIGIN"],
    )
}

fn host(dir: &Path) -> PluginHost {
    // SAFETY: the libraries are this suite's own fixtures, whose initialisation code is sound.
    unsafe { PluginHost::builder().dir(dir).build() }.unwrap()
}

/// How many of this process's descriptors are open on the inode `ino`.
fn descriptors_on_inode(ino: u64) -> usize {
    fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|fd| fs::metadata(fd.path()).is_ok_and(|m| std::os::unix::fs::MetadataExt::ino(&m) == ino))
        .count()
}

fn ino(path: &Path) -> u64 {
    std::os::unix::fs::MetadataExt::ino(&fs::metadata(path).unwrap())
}

/// The deterministic race of a load waiting on a slow unload, against the `$ORIGIN`
/// directory mode: host B checked `libx.so` and waits for host A's slow unload of it;
/// meanwhile a file that fails the check (mode 0666) is renamed over `libx.so`. B's loader is given
/// `/proc/self/fd/D/libx.so`, a *path*, so it maps the renamed-in file and runs its
/// constructor; the comparison with the checked file comes after, when the code has run.
#[test]
fn origin_mode_a_file_renamed_in_during_the_wait_runs_no_code() {
    let plugins = TestDir::new("attack_origin_wait_rename");
    let lib = copy_in(plugins.path(), &slow_unload_origin(), "libx.so", 0o755);
    let checked_ino = ino(&lib);
    let (a, b) = (host(plugins.path()), host(plugins.path()));
    let lease = a.acquire().unwrap();
    let outcome = std::thread::scope(|scope| {
        let unloading = scope.spawn(move || drop(lease));
        // In the directory mode the loader's name for A is `/proc/self/fd/D/libx.so`, which is
        // where on_unload's side channel goes: the directory itself.
        await_that("A's on_unload started", || beside(&lib, ".unloading").exists());
        let waiting = scope.spawn(|| b.acquire());
        await_that("B opened the checked file", || descriptors_on_inode(checked_ino) >= 2);
        let theirs = copy_in(plugins.path(), &fixture("by_hand_marker"), ".theirs.partial", 0o666);
        fs::rename(&theirs, &lib).unwrap();
        fs::write(beside(&lib, ".go"), "").unwrap();
        unloading.join().unwrap();
        waiting
            .join()
            .unwrap()
            .map(|lease| lease.plugins()[0].name().to_owned())
    });
    eprintln!("B's load: {outcome:?}");
    assert!(
        !beside(&lib, ".ran").exists(),
        "the renamed-in file (mode 0666, which the trust check refuses) ran its constructor \
         inside B's dlopen; B's load then said {outcome:?}"
    );
}

/// Descriptors per load/unload cycle: a normal plugin, a `$ORIGIN` one, and a pinned one
/// (`-z nodelete`). Each cycle is an acquire and drop of the same file; what is counted is
/// the descriptors open on that file (other tests run in this process meanwhile).
#[test]
fn load_unload_cycles_leak_no_descriptors() {
    for (what, lib, held) in [
        ("normal", fixture("by_hand"), 0),
        ("origin", slow_unload_origin(), 0),
        // A pinned library keeps the one descriptor its loader name stands for.
        ("pinned", fixture("ctor_nodelete"), 1),
    ] {
        let plugins = TestDir::new(&format!("attack_fd_{what}"));
        let file = copy_in(plugins.path(), &lib, "libx.so", 0o755);
        fs::write(beside(&file, ".go"), "").unwrap();
        let host = host(plugins.path());
        for _ in 0..100 {
            drop(host.acquire().unwrap());
        }
        assert_eq!(
            descriptors_on_inode(ino(&file)),
            held,
            "{what}: descriptors on the plugin file after 100 load/unload cycles"
        );
    }
}

/// The descriptors of this process open on `path` (by the link `/proc/self/fd/N` shows).
fn descriptors_naming(path: &Path) -> Vec<i32> {
    fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter(|fd| fs::read_link(fd.path()).is_ok_and(|target| target == path))
        .filter_map(|fd| fd.file_name().to_str()?.parse().ok())
        .collect()
}

/// Whether descriptor `fd` is open on the inode `ino`.
fn fd_on_inode(fd: i32, ino: u64) -> bool {
    fs::metadata(format!("/proc/self/fd/{fd}")).is_ok_and(|m| std::os::unix::fs::MetadataExt::ino(&m) == ino)
}

/// Identity aliasing through the settle check's own `RTLD_NOLOAD`. A set of two plugins,
/// `liba_slow.so` (slow `on_unload`) and `libcore.so` (A), is torn down: A is closed first
/// (unmapped), and stays unsettled while the slow one unloads. Meanwhile another host loads Q,
/// a plugin that links against A's file by its run path: the loader maps A again (A'), by
/// path. A's settle then asks `dlopen("/proc/self/fd/N_A", RTLD_NOLOAD)`: glibc finds A' by
/// device and inode and *adds that name to A'*, returns A''s handle, which is not the closed
/// one, so the descriptor N_A is closed: A' now carries a dangling name. The next plugin file
/// whose checked descriptor gets number N_A is handed A' by name, without the loader looking
/// at the file: another file's code under its identity.
#[test]
fn a_descriptor_the_settle_check_named_is_never_closed_under_a_live_mapping() {
    let dir1 = TestDir::new("attack_alias_a");
    copy_in(dir1.path(), &fixture("slow_unload"), "liba_slow.so", 0o755);
    let core = copy_in(dir1.path(), &fixture("stateful_core"), "libcore.so", 0o755);
    let core_ino = ino(&core);
    let dir2 = TestDir::new("attack_alias_q");
    let q = dir2.path().join("libq.so");
    let link = core.display().to_string();
    let rpath = format!("-Wl,-rpath,{}", dir1.path().display());
    let by_hand = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plugins/by_hand.c");
    compile_plugin(&[&by_hand], &q, &["-Wl,--no-as-needed", &link, &rpath]).unwrap();
    fs::set_permissions(&q, Permissions::from_mode(0o755)).unwrap();

    let h1 = host(dir1.path());
    let lease = h1.acquire().unwrap();
    let names: Vec<String> = lease.plugins().iter().map(|p| p.name().to_owned()).collect();
    let core_name = names[1].clone();
    let n_a = descriptors_naming(&core);
    assert_eq!(n_a.len(), 1, "A's loader name: one descriptor on libcore.so, {n_a:?}");
    let n_a = n_a[0];
    let slow = dir1.path().join("liba_slow.so");
    let h2 = host(dir2.path());
    let q_lease = std::thread::scope(|scope| {
        let unloading = scope.spawn(move || drop(lease));
        await_that("the slow plugin's on_unload started", || {
            beside(&slow, ".unloading").exists()
        });
        // A is closed (and unmapped) but not settled: Q maps A's file again, by path.
        let q_lease = h2.acquire().unwrap();
        fs::write(beside(&slow, ".go"), "").unwrap();
        unloading.join().unwrap();
        q_lease
    });
    eprintln!(
        "A's descriptor {n_a} still open on A after the settle: {}",
        fd_on_inode(n_a, core_ino)
    );
    if fd_on_inode(n_a, core_ino) {
        // The settle saw A' at the closed mapping's address and kept the descriptor: safe.
        return;
    }
    // N_A is closed while A' (Q's dependency) carries its name. Land a new plugin file's
    // checked descriptor on N_A: fill every lower free number but `k`, for k = 0, 1, ...
    let mut seen = Vec::new();
    for k in 0..24 {
        let dir3 = TestDir::new("attack_alias_c");
        copy_in(dir3.path(), &fixture("p1"), "libp1.so", 0o755);
        let h3 = host(dir3.path());
        let mut dummies = Vec::new();
        loop {
            let f = fs::File::open("/dev/null").unwrap();
            if std::os::fd::AsRawFd::as_raw_fd(&f) >= n_a {
                break;
            }
            dummies.push(f);
        }
        for _ in 0..k.min(dummies.len()) {
            dummies.pop();
        }
        let got = h3.acquire().map(|l| l.plugins()[0].name().to_owned());
        drop(dummies);
        seen.push(format!("k={k}: {got:?}"));
        assert!(
            matches!(&got, Ok(name) if name == "p1"),
            "a host over a directory holding only libp1.so was handed another file's plugin \
             (`{core_name}` is A's name): {seen:#?}"
        );
    }
    drop(q_lease);
}

/// The directory mode in a sticky, world-writable plugin directory (which the trust check
/// accepts, "like /tmp"): there "only this user or root can replace the file" is false, since
/// any user may create a name that is free. The plugin needs `$ORIGIN/libdep.so` (a DT_NEEDED
/// path, which the loader would open by name, so no soname can answer it). While host B waits
/// for A's slow unload, the owner removes `libx.so` (an installer that unlinks first), and
/// uid 65534 creates its own `libx.so`: B's loader, given `/proc/self/fd/D/libx.so`, would
/// run it. So such a plugin is not loaded at all under Strict.
#[test]
fn origin_mode_in_a_sticky_directory_never_runs_another_users_file() {
    let plugins = TestDir::new("attack_origin_sticky");
    fs::set_permissions(plugins.path(), Permissions::from_mode(0o1777)).unwrap();
    // The dependency's soname is `$ORIGIN/libdep.so`: the plugin's DT_NEEDED is that path.
    let dep = own_fixture("dep_origin_soname", &["dep.c"], &["-Wl,-soname,$ORIGIN/libdep.so"]);
    copy_in(plugins.path(), &dep, "libdep.so", 0o755);
    let lib_path = own_fixture(
        "slow_unload_needs_origin_dep",
        &["slow_unload.c"],
        &["-Wl,--no-as-needed", "-ldl", &dep.display().to_string()],
    );
    let lib = copy_in(plugins.path(), &lib_path, "libx.so", 0o755);
    // SAFETY: the libraries are this suite's own fixtures, whose initialisation code is sound.
    let file_host = || unsafe { PluginHost::builder().file(&lib).build() }.unwrap();
    // The loader would open the needed path by name in a directory where anyone can create
    // names once the owner frees one: Strict refuses the plugin before any code runs.
    let error = file_host().acquire().unwrap_err();
    assert!(
        matches!(&error, dylease::Error::Untrusted { path, .. } if path == &lib)
            && error.to_string().contains("the needed library `$ORIGIN/libdep.so`")
            && error.to_string().contains("no soname can answer it"),
        "{error}"
    );
    assert!(!beside(&lib, ".log").exists(), "its code ran (its on_load logged)");
}

/// Messages name the file, never the loader's `/proc/self/fd/N` name (meaningless to a user).
#[test]
fn a_missing_entry_point_is_reported_with_the_files_name() {
    let plugins = TestDir::new("attack_noentry_message");
    copy_in(plugins.path(), &fixture("noentry"), "libnoentry.so", 0o755);
    let error = host(plugins.path()).acquire().unwrap_err().to_string();
    assert!(!error.contains("/proc/self/fd"), "{error}");
}

const SET_USER_ID_CHILD: &str = "DYLEASE_TEST_SET_USER_ID_CHILD";

/// A set-user-ID program run by another user gets its environment from that user, who may set
/// `DYLEASE_PLUGIN_PATH`: as the platform loader ignores `LD_LIBRARY_PATH` there, the default
/// global host ignores the variable (elevated rights, `AT_SECURE`), and no plugin of the
/// directory it names runs. A copy of this test binary made set-user-ID root is run as uid
/// 65534 with the variable naming a directory whose plugin's constructor leaves a marker.
/// Caught: elevated rights never seen (`secure_execution` forced `false`, cargo-mutants): the
/// global host loads the plugin, which runs as root. It needs a file system mounted without
/// `nosuid` (the child checks that it runs with elevated rights) and the checkout's
/// directories traversable by other users, as a clone under `/tmp` is.
#[test]
#[ignore = "needs root"]
fn a_set_user_id_program_ignores_the_plugin_path_its_caller_sets() {
    if std::env::var_os(SET_USER_ID_CHILD).is_some() {
        // The set-user-ID copy is removed at once by the process it started (root's, as its
        // effective user), so that no stray copy outlives a test killed from outside.
        fs::remove_file(std::env::current_exe().unwrap()).unwrap();
        // SAFETY: `getauxval` only reads the auxiliary vector the kernel gave the process.
        let secure = unsafe { libc::getauxval(libc::AT_SECURE) } != 0;
        assert!(
            secure,
            "the copy did not run set-user-ID (a file system mounted nosuid?)"
        );
        let lease = dylease::global().acquire().unwrap();
        // Neither loaded nor tried (a try the trust check refused would hide the bug).
        assert!(lease.plugins().is_empty(), "{:?}", lease.plugins());
        assert!(lease.failures().is_empty(), "{:?}", lease.failures());
        return;
    }
    let dir = TestDir::new("set_user_id_global");
    let plugins = dir.sub("plugins");
    let lib = copy_in(&plugins, &fixture("by_hand_marker"), "libmarker.so", 0o755);
    // Written through a descriptor of a file this test created (nothing another user planted
    // there is followed or reused), root's, and runnable only by root and group 65534.
    let program = dir.path().join("set-user-id-tests");
    {
        use std::os::unix::fs::OpenOptionsExt;
        let mut copy = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o700)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&program)
            .unwrap();
        std::io::copy(
            &mut fs::File::open(std::env::current_exe().unwrap()).unwrap(),
            &mut copy,
        )
        .unwrap();
        std::os::unix::fs::fchown(&copy, Some(0), Some(65534)).unwrap();
        copy.set_permissions(Permissions::from_mode(0o4750)).unwrap();
    }
    crate::bounded::run_copy_in_child(
        &program,
        "attack::a_set_user_id_program_ignores_the_plugin_path_its_caller_sets",
        |child| {
            child
                .env(SET_USER_ID_CHILD, "1")
                .env(dylease::GLOBAL_PATH_VAR, &plugins);
            crate::bounded::as_other_user(child, &[&lib]);
        },
    );
    assert!(!beside(&lib, ".ran").exists(), "the plugin the caller named ran");
    assert!(!program.exists(), "the set-user-ID copy was left");
    // The control: without elevated rights, the same variable loads that plugin.
    // SAFETY: as above.
    let host = unsafe { PluginHost::builder().dir(&plugins).build() }.unwrap();
    assert_eq!(host.acquire().unwrap().plugins().len(), 1);
}
