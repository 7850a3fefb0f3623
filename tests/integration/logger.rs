//! A logger for the tests: it keeps every `log` record of the process, so a test can look for
//! the records about its own files or plugins (tests run in parallel; each names something of
//! its own).

use std::cell::RefCell;
use std::sync::{Mutex, PoisonError};

use log::{Level, LevelFilter, Log, Metadata, Record};

static RECORDS: Mutex<Vec<(Level, String)>> = Mutex::new(Vec::new());

struct Capture;

impl Log for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &Record<'_>) {
        let line = format!("{}", record.args());
        // Take the hook out while it runs, so that what it logs does not call it again.
        // `try_with`: a lease dropped by a thread-local destructor logs after `HOOK` is gone.
        if let Some(hook) = HOOK.try_with(|hook| hook.borrow_mut().take()).ok().flatten() {
            let restore = Restore(Some(hook));
            (restore.0.as_ref().unwrap())(&line);
        }
        RECORDS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((record.level(), line));
    }

    fn flush(&self) {}
}

/// A callback on every message logged on one thread.
type Hook = Box<dyn Fn(&str)>;

thread_local! {
    /// What the logger does on this thread besides recording: a logger that calls back into
    /// the library, as real loggers may.
    static HOOK: RefCell<Option<Hook>> = const { RefCell::new(None) };
}

/// Puts a taken hook back, also when it panics.
struct Restore(Option<Hook>);

impl Drop for Restore {
    fn drop(&mut self) {
        let hook = self.0.take();
        let _ = HOOK.try_with(|slot| *slot.borrow_mut() = hook);
    }
}

/// Runs `body` with `hook` called on every message logged on this thread.
pub(crate) fn with_hook<R>(hook: impl Fn(&str) + 'static, body: impl FnOnce() -> R) -> R {
    install();
    HOOK.with(|slot| *slot.borrow_mut() = Some(Box::new(hook)));
    let _clear = Restore(None);
    body()
}

/// Installs the capturing logger (once per process; later calls do nothing).
pub(crate) fn install() {
    static LOGGER: Capture = Capture;
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(LevelFilter::Trace);
    }
}

/// The messages logged so far at `level` that contain `needle`.
pub(crate) fn records(level: Level, needle: &str) -> Vec<String> {
    RECORDS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter(|(l, line)| *l == level && line.contains(needle))
        .map(|(_, line)| line.clone())
        .collect()
}
