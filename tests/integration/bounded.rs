//! A bound on a test's waits: a deadlock or a lost wake-up fails the test instead of hanging
//! the suite.

use std::time::Duration;

/// How long a test body that waits for other threads may take: far beyond its time on a
/// loaded machine; this is no speed assertion.
pub(crate) const LIMIT: Duration = Duration::from_secs(300);

/// Runs `body` on a thread of its own and waits for it at most `limit`: a test whose body
/// deadlocks or loops fails (naming `what`) instead of hanging the suite. The thread is left
/// behind then; the test binary's exit ends it.
#[track_caller]
pub(crate) fn bounded<R: Send + 'static>(what: &str, limit: Duration, body: impl FnOnce() -> R + Send + 'static) -> R {
    let (done, outcome) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(body));
        let _ = done.send(result);
    });
    match outcome.recv_timeout(limit) {
        Ok(Ok(value)) => value,
        Ok(Err(panic)) => std::panic::resume_unwind(panic),
        Err(_) => panic!("{what} did not finish within {limit:?}: a deadlock or a lost wake-up"),
    }
}

/// Runs the test `name` (its full path, `module::test`) of this binary alone in a child
/// process, which `configure` sets up (its environment, directory, user; the test finds its
/// child's part by a variable it sets), waits for it with a bound, and asserts that it ran
/// and passed, showing its output otherwise. `--include-ignored` lets a test that needs root
/// run itself.
pub(crate) fn run_in_child(name: &str, configure: impl FnOnce(&mut std::process::Command)) {
    run_copy_in_child(&std::env::current_exe().unwrap(), name, configure);
}

/// For a test whose body must run alone in a process of its own (it kills or changes what is
/// the whole process's): in the suite's process, runs the test `name` in a child
/// ([`run_in_child`]) with the variable `var` set, and returns `false` (the test is done: the
/// child passed it); in that child, returns `true` (the body runs).
pub(crate) fn in_a_process_of_its_own(name: &str, var: &str) -> bool {
    if std::env::var_os(var).is_some() {
        return true;
    }
    run_in_child(name, |child| {
        child.env(var, "1");
    });
    false
}

/// As [`run_in_child`], with `program`, a copy of this test binary (one made set-user-ID, say).
/// A child that does not finish within 120 s is killed, and the test fails.
pub(crate) fn run_copy_in_child(
    program: &std::path::Path,
    name: &str,
    configure: impl FnOnce(&mut std::process::Command),
) {
    let mut command = std::process::Command::new(program);
    command
        .args(["--exact", name, "--include-ignored"])
        .args(["--test-threads", "1", "--nocapture"]);
    configure(&mut command);
    command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let child = command.spawn().unwrap();
    let pid = child.id() as libc::pid_t;
    let (done, finished) = std::sync::mpsc::channel();
    std::thread::spawn(move || done.send(child.wait_with_output()));
    let limit = Duration::from_secs(120);
    let output = match finished.recv_timeout(limit) {
        Ok(output) => output.unwrap(),
        Err(_) => {
            // SAFETY: `kill` touches no memory of this process. `pid` is this test's child: its
            // waiter sends as soon as it has reaped it, and nothing was sent (only in the
            // instant between the two could the number already be free).
            unsafe { libc::kill(pid, libc::SIGKILL) };
            panic!("the child running {name} did not finish within {limit:?}: killed");
        }
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "the child running {name} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

/// The user and group the root-only tests run their children as (`nobody` on most systems).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) const OTHER_USER: u32 = 65534;

/// Makes `child` run as [`OTHER_USER`], once it is checked that this user can reach the
/// child's program (this test binary, or a copy of it) and `needs`, the fixtures the child
/// opens: every directory on the way must let that user through. A checkout below a
/// directory others cannot enter (a clone under a `mkdtemp` directory, mode 0700) would
/// otherwise fail in the child with a bare "Permission denied", or with a child that cannot
/// start; this fails first, naming the directory and the fix.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) fn as_other_user(child: &mut std::process::Command, needs: &[&std::path::Path]) {
    let program = std::path::PathBuf::from(child.get_program());
    for path in std::iter::once(program.as_path()).chain(needs.iter().copied()) {
        if let Err(problem) = reachable_by_other_user(path) {
            panic!("{problem}");
        }
    }
    std::os::unix::process::CommandExt::uid(child, OTHER_USER);
    std::os::unix::process::CommandExt::gid(child, OTHER_USER);
}

/// `Err` naming the deepest directory on the way to `path` that [`OTHER_USER`] may not
/// traverse (no search permission for it by owner, group or others, as the kernel picks which
/// applies; access control lists are not read), with the fix.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn reachable_by_other_user(path: &std::path::Path) -> Result<(), String> {
    use std::os::unix::fs::MetadataExt;
    // The kernel resolves symlinks on the way: judge the directories it really traverses.
    let resolved = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_owned());
    for dir in resolved.ancestors().skip(1) {
        let meta = std::fs::metadata(dir).map_err(|e| format!("cannot read `{}`: {e}", dir.display()))?;
        let search = match (meta.uid(), meta.gid()) {
            (OTHER_USER, _) => 0o100,
            (_, OTHER_USER) => 0o010,
            _ => 0o001,
        };
        if meta.mode() & search == 0 {
            return Err(format!(
                "this root-only test runs a child process as uid {OTHER_USER}, which cannot reach `{}`: \
                 the directory `{}` (mode {:04o}, owner uid {}) does not let other users through; \
                 fix: `chmod o+x {}`, or clone the repository under a directory others can traverse",
                path.display(),
                dir.display(),
                meta.mode() & 0o7777,
                meta.uid(),
                dir.display(),
            ));
        }
    }
    Ok(())
}

/// A directory the other user cannot traverse is named, with the fix, before any child runs
/// as that user; opened to others (mode 0711), the same fixture passes whenever its test
/// directory's does.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[test]
fn a_directory_the_other_user_cannot_traverse_is_named_with_its_fix() {
    use std::os::unix::fs::PermissionsExt;
    let dir = crate::support::TestDir::new("bounded_untraversable");
    let closed = dir.sub("closed");
    let inner = dir.sub("closed/inner");
    let fixture = inner.join("libx.so");
    std::fs::write(&fixture, "").unwrap();
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
    let problem = reachable_by_other_user(&fixture).expect_err("a mode-0700 directory on the way passed");
    for part in [
        format!("`{}`", fixture.display()),
        format!("`{}` (mode 0700", closed.display()),
        format!("chmod o+x {}", closed.display()),
        "or clone the repository under a directory others can traverse".to_owned(),
    ] {
        assert!(problem.contains(&part), "{part:?} is missing from: {problem}");
    }
    std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o711)).unwrap();
    assert_eq!(
        reachable_by_other_user(&fixture).is_ok(),
        reachable_by_other_user(&dir.path().join("libx.so")).is_ok(),
        "{:?}",
        reachable_by_other_user(&fixture)
    );
}
