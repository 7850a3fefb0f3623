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
pub(crate) fn run_copy_in_child(
    program: &std::path::Path,
    name: &str,
    configure: impl FnOnce(&mut std::process::Command),
) {
    let mut child = std::process::Command::new(program);
    child
        .args(["--exact", name, "--include-ignored"])
        .args(["--test-threads", "1", "--nocapture"]);
    configure(&mut child);
    let output = bounded("the child process", std::time::Duration::from_secs(120), move || {
        child.output().unwrap()
    });
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "the child running {name} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
}
