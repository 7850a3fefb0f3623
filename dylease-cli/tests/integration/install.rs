//! Installing plugins while hosts load them: by rename, and with `dylease install`. A host
//! sees the old file or the new one, whole, and never fails because a file it checked was
//! replaced meanwhile (an install in a trusted directory is not an attack).

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

use dylease::{Lease, PluginHost};

use crate::cli::{binary, unwrapped};
use crate::support::{TestDir, built_from, fixture, mapped_containing};

/// The versions the installers cycle through.
const VERSIONS: usize = 4;

/// The version a lease's plugin reports (negative if its `on_load` state is gone).
fn version(lease: &Lease) -> i32 {
    // SAFETY: versioned.c registers `version` as `int (*)(void)`; called while `lease` lives.
    unsafe { lease.pass::<extern "C" fn() -> i32>("version").expect("version")() }
}

/// Runs `install(i)` for `installs` rounds while two threads acquire and drop leases of a
/// host over `dir` (each a cold load, or a share of the other's) and a third reloads it;
/// each round waits until a loader finished a load after the previous install. Every load
/// must succeed with the plugin present, of a version that was installed.
fn race_installs(dir: &Path, installs: usize, install: impl Fn(usize) + Sync) {
    // SAFETY: the libraries are this suite's own fixtures, whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(dir).build() }.unwrap();
    let (done, loads) = (AtomicBool::new(false), AtomicUsize::new(0));
    let check = |lease: &Lease, how: &str| {
        assert_eq!(lease.plugins().len(), 1, "a set {how} is missing its plugin");
        let v = version(lease);
        assert!(
            (1..=VERSIONS as i32).contains(&v),
            "{how}: version {v} was never installed"
        );
    };
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                while !done.load(SeqCst) {
                    let lease = host.acquire().unwrap_or_else(|e| panic!("an acquire failed: {e}"));
                    check(&lease, "acquired");
                    drop(lease);
                    loads.fetch_add(1, SeqCst);
                }
            });
        }
        scope.spawn(|| {
            while !done.load(SeqCst) {
                let lease = host.reload().unwrap_or_else(|e| panic!("a reload failed: {e}"));
                check(&lease, "reloaded");
            }
        });
        let _stop = StopOnDrop(&done);
        for i in 0..installs {
            let before = loads.load(SeqCst);
            install(i % VERSIONS + 1);
            let deadline = Instant::now() + Duration::from_secs(20);
            while loads.load(SeqCst) == before {
                assert!(Instant::now() < deadline, "no load finished within 20 s of install {i}");
                std::thread::yield_now();
            }
        }
    });
    drop(host);
    assert!(
        !mapped_containing(&dir.display().to_string()),
        "a plugin is still mapped after every lease and host is gone"
    );
}

/// Sets the flag when dropped, so that the loaders stop also when the installer panics.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, SeqCst);
    }
}

#[test]
fn loaders_never_fail_and_never_miss_a_plugin_while_new_versions_are_renamed_in() {
    let plugins = TestDir::new("install_race_rename");
    let staging = TestDir::new("install_race_rename_staging");
    let built: Vec<PathBuf> = (1..=VERSIONS)
        .map(|v| staging.add(&format!("versioned_{v}"), &format!("v{v}.so")))
        .collect();
    let target = plugins.path().join("libversioned.so");
    fs::copy(&built[0], &target).unwrap();
    race_installs(plugins.path(), 200, |v| {
        let partial = plugins.path().join(".libversioned.so.partial");
        fs::copy(&built[v - 1], &partial).unwrap();
        fs::rename(&partial, &target).unwrap();
    });
}

#[test]
fn loaders_never_fail_and_never_miss_a_plugin_while_dylease_install_runs() {
    let plugins = TestDir::new("install_race_cli");
    let staging = TestDir::new("install_race_cli_staging");
    let built: Vec<PathBuf> = (1..=VERSIONS)
        .map(|v| {
            let dir = staging.sub(&format!("v{v}"));
            let file = Path::new(&dir).join("libversioned.so");
            fs::copy(fixture(&format!("versioned_{v}")), &file).unwrap();
            file
        })
        .collect();
    fs::copy(&built[0], plugins.path().join("libversioned.so")).unwrap();
    fs::set_permissions(
        plugins.path().join("libversioned.so"),
        fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    race_installs(plugins.path(), 24, |v| {
        let out = Command::new(binary())
            .arg("install")
            .arg(&built[v - 1])
            .arg(plugins.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    });
}

#[test]
fn dylease_install_renames_a_checked_copy_into_place_and_leaves_nothing_else() {
    let plugins = TestDir::new("install_cli_ok");
    let old = plugins.add("versioned_1", "libversioned.so");
    let old_inode = fs::metadata(&old).unwrap().ino();
    let staging = TestDir::new("install_cli_ok_staging");
    let new = staging.add("versioned_2", "libversioned.so");
    let out = Command::new(binary())
        .arg("install")
        .arg(&new)
        .arg(plugins.path())
        .output()
        .unwrap();
    let stdout = unwrapped(&String::from_utf8_lossy(&out.stdout));
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.contains(&format!("installed `{}` as `{}`", new.display(), old.display()))
            && stdout.contains("plugin `versioned`"),
        "{stdout}"
    );
    let installed = fs::metadata(&old).unwrap();
    assert_ne!(installed.ino(), old_inode, "installed in place, not by rename");
    assert_eq!(installed.mode() & 0o7777, 0o755);
    assert_eq!(fs::read(&old).unwrap(), fs::read(&new).unwrap());
    let entries: Vec<_> = fs::read_dir(plugins.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries, ["libversioned.so"], "something else was left in the directory");
}

#[test]
fn dylease_install_refuses_a_file_that_would_not_load_and_changes_nothing() {
    let plugins = TestDir::new("install_cli_refused");
    let old = plugins.add("versioned_1", "libversioned.so");
    let old_inode = fs::metadata(&old).unwrap().ino();
    let staging = TestDir::new("install_cli_refused_staging");
    let broken = staging.path().join("libversioned.so");
    fs::write(&broken, b"not a library").unwrap();
    let out = Command::new(binary())
        .arg("install")
        .arg(&broken)
        .arg(plugins.path())
        .output()
        .unwrap();
    let stdout = unwrapped(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.contains(&format!("not installed: `{}` would not load", broken.display()))
            && stdout.contains("not an ELF shared library"),
        "{stdout}"
    );
    assert_eq!(
        fs::metadata(&old).unwrap().ino(),
        old_inode,
        "the installed plugin was replaced"
    );
    let entries: Vec<_> = fs::read_dir(plugins.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(entries, ["libversioned.so"], "the temporary file was left behind");
}

/// Runs `dylease install FILE DIR` without core dumps (a crash the test makes on purpose
/// leaves no core file behind), killing it if it runs for more than 60 s.
fn install_bounded(file: &Path, dir: &Path) -> std::process::Output {
    let mut child = Command::new("sh")
        .args(["-c", "ulimit -c 0; exec \"$0\" \"$@\""])
        .arg(binary())
        .arg("install")
        .arg(file)
        .arg(dir)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() >= deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("`dylease install {}` ran for more than 60 s", file.display());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

/// A plugin whose constructor ends the process that loads it (`abort()`, or `_exit(127)` as
/// glibc's loader does when it gives up on a file) ends only the process that checks it: the
/// installer survives, says which file ended the check and how, removes its temporary copy and
/// leaves the installed file as it was. Checked in the installer's own process, the crash
/// would end the installer before it removed the copy or said anything.
#[test]
fn dylease_install_survives_a_plugin_that_ends_the_checking_process_and_changes_nothing() {
    for (variant, args, how) in [
        ("abort", &[][..], "was killed by signal 6 (SIGABRT)"),
        ("exit127", &["-DEXIT_STATUS=127"][..], "exited with status 127"),
    ] {
        let plugins = TestDir::new(&format!("install_cli_crash_{variant}"));
        let old = plugins.add("versioned_1", "libx.so");
        let (old_inode, old_bytes) = (fs::metadata(&old).unwrap().ino(), fs::read(&old).unwrap());
        let staging = TestDir::new(&format!("install_cli_crash_{variant}_staging"));
        let dying = staging.path().join("libx.so");
        fs::copy(
            built_from("dies_on_load.c", &format!("dies_on_load_{variant}"), args),
            &dying,
        )
        .unwrap();
        let out = install_bounded(&dying, plugins.path());
        let stdout = unwrapped(&String::from_utf8_lossy(&out.stdout));
        let all = format!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(1), "{variant}: {all}");
        assert!(
            stdout.contains(&format!(
                "not installed: the process that checked `{}` {how} before it gave a verdict, so `{}` was left as it was",
                dying.display(),
                old.display()
            )),
            "{variant}: {all}"
        );
        let now = fs::metadata(&old).unwrap();
        assert_eq!(now.ino(), old_inode, "{variant}: the installed plugin was replaced");
        assert_eq!(
            fs::read(&old).unwrap(),
            old_bytes,
            "{variant}: the installed plugin changed"
        );
        let entries: Vec<_> = fs::read_dir(plugins.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(entries, ["libx.so"], "{variant}: the temporary file was left behind");
    }
}

/// The entries of `dir`, sorted.
fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// Runs `dylease install FILE DIR`.
fn install(file: &Path, dir: &Path) -> (Option<i32>, String) {
    let out = Command::new(binary())
        .arg("install")
        .arg(file)
        .arg(dir)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        unwrapped(&String::from_utf8_lossy(&out.stdout)),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), said)
}

/// Two copies of one plugin under different file names declare the same passes: the second
/// is not installed (a host given the directory would fail to load), the error names both
/// files and the passes, and the directory is left as it was (no temporary copy). Installing
/// the first's file name again replaces it: an upgrade is no collision. A plugin of the
/// directory without a manifest is warned about.
#[test]
fn dylease_install_refuses_a_plugin_whose_declared_pass_another_plugin_of_the_directory_declares() {
    let plugins = TestDir::new("install_cli_collision");
    let staging = TestDir::new("install_cli_collision_staging");
    let a = staging.add("macros_c_plain", "liba.so");
    let b = staging.add("macros_c_plain", "libb.so");
    plugins.add("by_hand", "libz_unknown.so");

    let (status, said) = install(&a, plugins.path());
    assert_eq!(status, Some(0), "{said}");
    assert!(
        said.contains("manifest: plugin `macros` 1.2.3 (ABI version 2); declares 4 passes (complete manifest)")
            && said.contains(&format!(
                "warning: cannot tell whether `{}` declares the same passes: it has no manifest",
                plugins.path().join("libz_unknown.so").display()
            )),
        "{said}"
    );
    let installed = plugins.path().join("liba.so");
    let inode = fs::metadata(&installed).unwrap().ino();

    let (status, said) = install(&b, plugins.path());
    assert_eq!(status, Some(1), "{said}");
    // The passes in the order of the file's notes, which the compiler chooses.
    assert!(
        said.contains(&format!(
            "not installed: `{}` (plugin `macros`) declares passes `",
            b.display()
        )) && said.contains(&format!(
            "`, which `{}` (plugin `macros`), already in `{}`, declares too",
            installed.display(),
            plugins.path().display()
        )) && ["`pass`", "`pass_with_data`", "`typed_pass`", "`typed_pass_with_data`"]
            .iter()
            .all(|pass| said.contains(pass)),
        "{said}"
    );
    assert_eq!(
        entries(plugins.path()),
        ["liba.so", "libz_unknown.so"],
        "the directory changed: {said}"
    );
    assert_eq!(fs::metadata(&installed).unwrap().ino(), inode, "{said}");

    // The same file name again: it replaces itself.
    let (status, said) = install(&a, plugins.path());
    assert_eq!(status, Some(0), "an upgrade collided with the file it replaces: {said}");
    assert_ne!(fs::metadata(&installed).unwrap().ino(), inode, "{said}");
    assert_eq!(entries(plugins.path()), ["liba.so", "libz_unknown.so"], "{said}");
}

/// Installing the plain build of the C++ example plugin (no version script) prints its
/// manifest and the warning that it will stay mapped after its unload, with the fix.
#[test]
fn dylease_install_prints_the_manifest_and_the_pin_warning_of_a_cpp_plugin_without_the_version_script() {
    let plugins = TestDir::new("install_cli_cpp");
    let staging = TestDir::new("install_cli_cpp_staging");
    let plain = staging.add("layout_plain", "liblayout.so");
    let (status, said) = install(&plain, plugins.path());
    assert_eq!(status, Some(0), "a warning does not refuse: {said}");
    assert!(
        said.contains("manifest: plugin `layout` 0.4.0 (ABI version 2); declares 3 passes (complete manifest)")
            && said.contains("warning: it will stay mapped after its unload")
            && said.contains("it exports 2 GNU unique symbols")
            && said.contains("fix: link the plugin with dylease's version script"),
        "{said}"
    );
    assert_eq!(entries(plugins.path()), ["liblayout.so"], "{said}");
}

/// A new plugin without a manifest is compared by the passes its check saw it register: one
/// that registers passes another plugin of the directory declares is not installed.
#[test]
fn dylease_install_refuses_a_plugin_without_a_manifest_registering_a_pass_another_declares() {
    let plugins = TestDir::new("install_cli_collision_registered");
    let staging = TestDir::new("install_cli_collision_registered_staging");
    // Declares `seven`, `registrations` (and `ghost`) in a complete manifest.
    plugins.add("by_hand_ghost_manifest", "liba.so");
    let new = staging.add("by_hand", "libb.so");
    let (status, said) = install(&new, plugins.path());
    assert_eq!(status, Some(1), "{said}");
    assert!(
        said.contains(&format!("not installed: `{}` registers passes `", new.display()))
            && said.contains("`seven`")
            && said.contains("`registrations`")
            && said.contains(&format!(
                "which `{}` (plugin `by-hand`), already in `{}`, declares too",
                plugins.path().join("liba.so").display(),
                plugins.path().display()
            )),
        "{said}"
    );
    assert_eq!(entries(plugins.path()), ["liba.so"], "the directory changed: {said}");
}

/// A plugin of the directory whose manifest is incomplete (DYLEASE_MANIFEST: it declares no
/// pass) may register any pass: installing one that registers the same passes is warned
/// about, as for a plugin without a manifest, not passed over in silence (`dylease check DIR`
/// then fails on `seven` registered twice).
#[test]
fn dylease_install_warns_about_a_plugin_of_the_directory_with_an_incomplete_manifest() {
    let plugins = TestDir::new("install_cli_incomplete");
    let staging = TestDir::new("install_cli_incomplete_staging");
    plugins.add("by_hand_manifest", "liba.so");
    let new = staging.add("by_hand", "libb.so");
    let (status, said) = install(&new, plugins.path());
    assert_eq!(status, Some(0), "{said}");
    assert!(
        said.contains(&format!(
            "warning: cannot tell whether `{}` registers the same passes: its manifest is incomplete",
            plugins.path().join("liba.so").display()
        )),
        "{said}"
    );
}

/// A file that would not load is reported against the file the user named, never against
/// the installer's temporary copy (a hidden name in DIR, gone by the time it is read): every
/// line of the report, the status line, the problem and the fix.
#[test]
fn dylease_install_reports_the_problems_of_a_refused_file_against_the_users_file() {
    let plugins = TestDir::new("install_cli_refused_names");
    let staging = TestDir::new("install_cli_refused_names_staging");
    let liar = staging.path().join("libliar.so");
    fs::write(&liar, b"not a library").unwrap();
    let ghost = staging.add("by_hand_ghost_manifest", "libghost.so");
    for (file, problem) in [
        (&liar, "it is not an ELF shared library"),
        (&ghost, "did not register the declared pass `ghost`"),
    ] {
        let (status, said) = install(file, plugins.path());
        assert_eq!(status, Some(1), "{said}");
        let shown = file.display().to_string();
        assert!(
            said.contains(&format!("\nFAIL  {shown}\n")) && said.contains(problem),
            "{said}"
        );
        let problem_line = said
            .lines()
            .find(|line| line.trim_start().starts_with("problem: "))
            .unwrap_or_else(|| panic!("no problem line: {said}"));
        assert!(problem_line.contains(&format!("`{shown}`")), "{said}");
        assert!(
            !said.contains(".dylease-install-"),
            "the report names the temporary copy: {said}"
        );
        assert_eq!(entries(plugins.path()), Vec::<String>::new(), "{said}");
    }
}

/// The latch plugin (`dylease-cli/tests/c_plugins/latch.c`) of version 1.0.0, built once
/// per test process.
fn latch_plugin() -> &'static Path {
    static BUILT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| latch_plugin_of("1.0.0"))
}

/// The latch plugin of `version`, built on every call.
fn latch_plugin_of(version: &str) -> PathBuf {
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("fixtures/liblatch_cli_{version}.so"));
    fs::create_dir_all(out.parent().unwrap()).unwrap();
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c_plugins/latch.c");
    let define = format!("-DLATCH_VERSION=\"{version}\"");
    crate::support::compile_plugin(&[&source], &out, &[&define]).unwrap_or_else(|e| panic!("{e}"))
}

/// An install killed with SIGKILL while its check holds the plugin's constructor on a latch.
struct KilledInstall {
    plugins: TestDir,
    staging: TestDir,
    /// The test's end of the latch: the check process is held while it is open.
    latch: fs::File,
    /// What the plugin directory held when the installer was killed.
    left: Vec<String>,
}

/// Starts `dylease install liblatch.so DIR`, waits (at most 60 s) until its check process is
/// held in the plugin's constructor, then kills the installer with SIGKILL and reaps it.
fn install_killed_during_its_check(test: &str) -> KilledInstall {
    let plugins = TestDir::new(test);
    let staging = TestDir::new(&format!("{test}_staging"));
    let plugin = staging.path().join("liblatch.so");
    fs::copy(latch_plugin(), &plugin).unwrap();
    fs::set_permissions(&plugin, fs::Permissions::from_mode(0o755)).unwrap();
    let fifo = staging.path().join("latch");
    let fifo_c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
    // SAFETY: a NUL-terminated path that outlives the call.
    assert_eq!(unsafe { libc::mkfifo(fifo_c.as_ptr(), 0o600) }, 0, "mkfifo");
    let mut installer = Command::new(binary())
        .arg("install")
        .arg(&plugin)
        .arg(plugins.path())
        .env("DYLEASE_TEST_LATCH", &fifo)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Opening the FIFO for writing returns once the constructor has opened it for reading.
    let (opened, latch) = std::sync::mpsc::channel();
    let opener = fifo.clone();
    std::thread::spawn(move || {
        let _ = opened.send(fs::OpenOptions::new().write(true).open(opener));
    });
    let latch = match latch.recv_timeout(Duration::from_secs(60)) {
        Ok(latch) => latch.unwrap(),
        Err(_) => {
            let _ = installer.kill();
            let _ = installer.wait();
            // Releases the opener thread.
            let _ = fs::File::open(&fifo);
            panic!("the check never reached the plugin's constructor within 60 s");
        }
    };
    let left = entries(plugins.path());
    installer.kill().unwrap();
    installer.wait().unwrap();
    KilledInstall {
        plugins,
        staging,
        latch,
        left,
    }
}

/// Whether every reader of the FIFO whose writing end is `latch` is gone, waiting at most
/// `within` (`poll` reports POLLERR on a pipe's writing end once no reader is left).
fn readers_gone(latch: &fs::File, within: Duration) -> bool {
    use std::os::fd::AsRawFd as _;
    let mut fd = libc::pollfd {
        fd: latch.as_raw_fd(),
        events: 0,
        revents: 0,
    };
    let timeout = i32::try_from(within.as_millis()).unwrap();
    // SAFETY: one valid `pollfd`, for the duration of the call.
    let ready = unsafe { libc::poll(&raw mut fd, 1, timeout) };
    ready == 1 && fd.revents & libc::POLLERR != 0
}

/// The process that checks a plugin for `dylease install` ends when the installer is
/// killed: an orphaned check would go on running the plugin's code for nobody.
#[test]
fn the_check_process_of_a_killed_installer_does_not_outlive_it() {
    let killed = install_killed_during_its_check("install_killed_check");
    assert!(
        readers_gone(&killed.latch, Duration::from_secs(20)),
        "the check process still runs 20 s after its installer was killed"
    );
    drop(killed.staging);
}

/// An installer killed (SIGKILL) in the middle of its install leaves its temporary copy,
/// which no code of its own can remove; the next install into the directory removes it (the
/// installer's process id, in the name, is no process any more), and installs.
#[test]
fn the_next_install_removes_the_temporary_copy_of_a_killed_installer() {
    let killed = install_killed_during_its_check("install_killed_leftover");
    let plugins = killed.plugins.path().to_owned();
    drop(killed.latch);
    let (status, said) = install(&killed.staging.path().join("liblatch.so"), &plugins);
    assert_eq!(status, Some(0), "{said}");
    assert_eq!(
        entries(&plugins),
        ["liblatch.so"],
        "left by the killed installer: {:?}; said: {said}",
        killed.left
    );
}

/// Installing into a directory that does not exist says to create it first, with the
/// command that does (which then works), and creates nothing.
#[test]
fn dylease_install_into_a_missing_directory_says_to_create_it_first() {
    let staging = TestDir::new("install_cli_missing_dir");
    let plugin = staging.add("versioned_1", "libversioned.so");
    let missing = staging.path().join("no such/plugins");
    let (status, said) = install(&plugin, &missing);
    assert_eq!(status, Some(1), "{said}");
    let quoted = format!("'{}'", missing.display());
    let command = format!("mkdir -p -m 755 {quoted}");
    assert!(
        said.contains(&format!(
            "`{}` does not exist: create it first (`{command}`)",
            missing.display()
        )),
        "{said}"
    );
    assert!(!missing.exists(), "{said}");
    let made = Command::new("sh").args(["-c", &command]).status().unwrap();
    assert!(made.success());
    let (status, said) = install(&plugin, &missing);
    assert_eq!(status, Some(0), "{said}");
}

/// The copy is checked under the trust policy the install is given, as the deployment's host
/// would load it: into a directory its group can write, a strict install (the default) is
/// refused and leaves the directory as it was; `--trust permissive`, for a deployment that
/// trusts that group, installs it.
#[test]
fn dylease_install_checks_the_copy_under_the_trust_policy_it_is_given() {
    let staging = TestDir::new("install_cli_trust_staging");
    let plugin = staging.add("versioned_1", "libversioned.so");
    let plugins = TestDir::new("install_cli_trust");
    fs::set_permissions(plugins.path(), fs::Permissions::from_mode(0o775)).unwrap();
    let (status, said) = install(&plugin, plugins.path());
    assert_eq!(status, Some(1), "{said}");
    assert!(
        said.contains("would not load") && said.contains("`--trust permissive`"),
        "{said}"
    );
    assert_eq!(fs::read_dir(plugins.path()).unwrap().count(), 0, "{said}");
    let out = Command::new(binary())
        .args(["install", "--trust", "permissive"])
        .arg(&plugin)
        .arg(plugins.path())
        .output()
        .unwrap();
    let said = unwrapped(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(out.status.code(), Some(0), "{said}");
    // What its check loaded, as the check saw it.
    assert!(
        said.contains(&format!(
            "installed `{}` as `{}` (plugin `versioned`, 2 passes)\n",
            plugin.display(),
            plugins.path().join("libversioned.so").display()
        )),
        "{said}"
    );
    assert!(plugins.path().join("libversioned.so").exists(), "{said}");
}

/// An older version of a plugin installed over a newer one (both versions read from the
/// manifests, without running either) is installed, with a warning that names both; a
/// newer one over an older one, or the same version again, is not warned about.
#[test]
fn dylease_install_warns_when_an_older_version_replaces_a_newer_one() {
    let plugins = TestDir::new("install_cli_downgrade");
    let staging = TestDir::new("install_cli_downgrade_staging");
    let version = |v: &str| {
        let dir = staging.sub(v);
        let file = Path::new(&dir).join("liblatch.so");
        fs::copy(latch_plugin_of(v), &file).unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o755)).unwrap();
        file
    };
    let (old, new) = (version("1.0.0"), version("2.0.0"));
    for (file, warned) in [(&old, false), (&new, false), (&new, false), (&old, true)] {
        let (status, said) = install(file, plugins.path());
        assert_eq!(status, Some(0), "{said}");
        assert_eq!(
            said.contains("warning: version 1.0.0 of plugin `latch` replaces version 2.0.0, a newer one"),
            warned,
            "{said}"
        );
        assert_eq!(said.contains("replaces version"), warned, "{said}");
    }
}
