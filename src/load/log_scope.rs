//! The name of the host on whose behalf this thread is loading or unloading plugins, so that
//! every log line about it says which host it is about (two hosts over one directory otherwise
//! log identical lines). The host layer sets it around its loads and unloads; this layer only
//! reads it.

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
