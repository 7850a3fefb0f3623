//! A logger for the tests: it keeps every `log` record of the process, so a test can look for
//! the records about its own files or plugins (tests run in parallel; each names something of
//! its own).

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
        RECORDS
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((record.level(), line));
    }

    fn flush(&self) {}
}

/// Installs the capturing logger (once per process; later calls do nothing).
pub fn install() {
    static LOGGER: Capture = Capture;
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(LevelFilter::Trace);
    }
}

/// The messages logged so far at `level` that contain `needle`.
pub fn records(level: Level, needle: &str) -> Vec<String> {
    RECORDS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .filter(|(l, line)| *l == level && line.contains(needle))
        .map(|(_, line)| line.clone())
        .collect()
}
