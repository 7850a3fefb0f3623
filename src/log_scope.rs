//! The log scope room: the name of the host on whose behalf this thread is loading or
//! unloading plugins, so that every log line about it says which host it is about (two hosts
//! over one directory otherwise log identical lines), and the warnings said once. It may call
//! `sync`, nothing else of the crate. The host room sets the name around its loads and
//! unloads; the rooms below it only read it.

use std::cell::RefCell;

crate::sync::thread_locals! {
    /// The innermost host's name, if this thread is inside a host's load or unload.
    static HOST: RefCell<Option<String>> = RefCell::new(None);
}

/// Runs `f` with `name` as this thread's host name, restoring the outer one after (a plugin's
/// code may load another host's plugins).
pub(crate) fn with_host<R>(name: &str, f: impl FnOnce() -> R) -> R {
    /// Puts the outer name back however `f` ends.
    struct Restore(Option<String>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            let _ = HOST.try_with(|host| *host.borrow_mut() = outer);
        }
    }
    let outer = HOST
        .try_with(|host| host.borrow_mut().replace(name.to_owned()))
        .ok()
        .flatten();
    let _restore = Restore(outer);
    f()
}

/// What a log line begins with: `[name] ` inside a host's load or unload, else nothing (and
/// nothing on a thread whose thread-locals are being destroyed).
pub(crate) fn prefix() -> String {
    HOST.try_with(|host| host.borrow().as_ref().map(|name| format!("[{name}] ")))
        .ok()
        .flatten()
        .unwrap_or_default()
}

crate::sync::lazy_static! {
    /// The warnings logged so far, by their text (which begins with the host's name): each is
    /// logged at `warn` once, and again only at `debug`. Bounded: past [`MAX_REMEMBERED`]
    /// distinct warnings, new ones are all logged at `warn`.
    static WARNED: crate::sync::Mutex<std::collections::HashSet<String>> =
        crate::sync::Mutex::new(std::collections::HashSet::new());
}

/// How many distinct warnings [`warn_once`] remembers.
const MAX_REMEMBERED: usize = 4096;

/// Logs `message` at `warn` the first time this process sees it, at `debug` after that: a
/// problem that every load meets again (a plugin skipped under `LoadPolicy::SkipFailed` in a
/// host that loads a thousand times) is said once.
pub(crate) fn warn_once(message: &str) {
    let first = {
        let mut warned = WARNED.lock();
        warned.len() >= MAX_REMEMBERED || warned.insert(message.to_owned())
    };
    if first {
        log::warn!("{message}");
    } else {
        log::debug!("{message} (again)");
    }
}

/// `n` and the noun in the right number, for log messages: "1 pass", "2 passes".
pub(crate) fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}
