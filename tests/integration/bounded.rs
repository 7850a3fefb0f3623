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
