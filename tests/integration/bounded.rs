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
