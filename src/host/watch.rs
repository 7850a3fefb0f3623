//! Watching a host's sources (feature `watch`): the watcher behind
//! [`HostBuilder::watch`](crate::HostBuilder::watch), which calls back after a plugin
//! directory or file changed.
//!
//! notify's thread turns file-system events into messages on a channel, keeping only those
//! that concern a plugin source. The watcher thread (`dylease-watch`) waits for `debounce`
//! of quiet after the last of them, then calls the reload it was given (the host's, which
//! holds the host only weakly and says when the host is gone, in `plugin_host`). Dropping the
//! [`Watch`] stops the thread and waits at most [`STOP_WAIT`] for a reload in progress, then
//! lets it finish on its own and says so. This module knows sources and paths, not hosts.
//!
//! A watched path that goes through symlinks (`plugins -> releases/v7`, the usual deploy
//! layout) is watched where it leads now, and each symlink on the way is watched in its own
//! directory: swapping a link reloads what the path names then, and moves the watches there.
//!
//! A half-written file is never loaded: the debounce waits for the writer to pause, and a
//! library that is still incomplete then fails the load's ELF check ("the file is
//! truncated"), so the reload fails and the current generation stays current (I5).
//!
//! The watcher is I/O around `reload()`, whose protocol the loom models cover; it is not
//! modelled itself, and uses std's channel and thread directly.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::io;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::{self, JoinHandle};
use std::time::Duration;

/// How long dropping a watched host waits for a reload in progress on the watcher thread.
pub(crate) const STOP_WAIT: Duration = Duration::from_secs(2);

use notify::{Event, EventKind, RecursiveMode, Watcher};

use crate::error::Error;
use crate::load::Source;
use crate::trust::discover::{env_dirs, is_library_name};

/// A host's watcher: notify's watcher, and the thread that reloads. Dropping it stops both.
pub(crate) struct Watch {
    stop: Sender<Message>,
    thread: Option<JoinHandle<()>>,
    /// Disconnected when the watcher thread ends (in a mutex: a host is `Sync`).
    ended: std::sync::Mutex<Receiver<()>>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.stop.send(Message::Stop);
        let Some(thread) = self.thread.take() else { return };
        // A host dropped by the watcher thread itself (from plugin code it reloaded)
        // cannot wait for that thread: it ends once the reload returns.
        if thread.thread().id() == thread::current().id() {
            return;
        }
        let ended = self.ended.get_mut().unwrap_or_else(std::sync::PoisonError::into_inner);
        match ended.recv_timeout(STOP_WAIT) {
            Err(RecvTimeoutError::Timeout) => log::warn!(
                "dropping a watched plugin host: its watcher's reload did not finish within {STOP_WAIT:?}; it \
                 finishes on the `dylease-watch` thread, and the drop goes on"
            ),
            Ok(()) | Err(RecvTimeoutError::Disconnected) => {
                let _ = thread.join();
            }
        }
    }
}

/// What notify's thread tells the watcher thread.
enum Message {
    /// A change of this path, which concerns a plugin source.
    Changed(PathBuf),
    /// A symlink on the way to a watched path changed: reload, and watch where it leads now.
    Relinked(PathBuf),
    /// The host is being dropped.
    Stop,
}

/// Which entries of one watched directory concern the host.
#[derive(Debug, Default)]
struct Interest {
    /// Every library (a [`Source::Dir`] or a directory listed by a [`Source::Env`]).
    libraries: bool,
    /// These names (the [`Source::File`]s in the directory).
    names: BTreeSet<OsString>,
    /// These symlinks, on the way to a watched path.
    links: BTreeSet<OsString>,
}

/// The notify watcher and the paths it watches: the watcher thread moves the watches when a
/// symlink on the way to one changes (a watch stays on the inode it was added for).
struct Watches {
    watcher: notify::RecommendedWatcher,
    dirs: Vec<PathBuf>,
}

impl Watches {
    /// Watches every path again, where it leads now.
    fn rewatch(&mut self) {
        for dir in &self.dirs {
            let _ = self.watcher.unwatch(dir);
            if let Err(error) = self.watcher.watch(dir, RecursiveMode::NonRecursive) {
                log::warn!("cannot watch plugin directory `{}` any more: {error}", dir.display());
            }
        }
    }
}

/// The symlinks on the way to each of `dirs` (absolute), as (the directory holding the link,
/// its name): the prefixes of each path that are symlinks now.
fn links(dirs: &[PathBuf]) -> Vec<(PathBuf, OsString)> {
    let mut links = Vec::new();
    for dir in dirs {
        let mut prefix = PathBuf::new();
        for component in dir.components() {
            prefix.push(component);
            let is_link = std::fs::symlink_metadata(&prefix).is_ok_and(|m| m.file_type().is_symlink());
            if let (true, Some(parent), Some(name)) = (is_link, prefix.parent(), prefix.file_name()) {
                links.push((parent.to_owned(), name.to_owned()));
            }
        }
    }
    links.sort();
    links.dedup();
    links
}

/// Starts watching `sources` (of the host named `host`, for log lines): after each change
/// and `debounce` of quiet, the watcher thread calls `reload` with the path that changed last;
/// it ends when `reload` breaks (the host is gone) or the [`Watch`] is dropped. `None` if no
/// source is a directory or a file.
pub(crate) fn start(
    sources: &[Source],
    host: &str,
    debounce: Duration,
    mut reload: impl FnMut(&Path) -> ControlFlow<()> + Send + 'static,
) -> Result<Option<Watch>, Error> {
    let mut interests = interests(sources)?;
    let dirs: Vec<PathBuf> = interests.keys().cloned().collect();
    let links = links(&dirs);
    for (dir, name) in &links {
        interests.entry(dir.clone()).or_default().links.insert(name.clone());
    }
    let Some(first) = dirs.first().cloned() else {
        log::debug!("nothing to watch: the host has no plugin directory or file");
        return Ok(None);
    };
    let (sender, receiver) = mpsc::channel();
    let events = sender.clone();
    let name = host.to_owned();
    let on_event = move |event: notify::Result<Event>| match event {
        Ok(event) => {
            if let Some(message) = concerns(&interests, &event, &name) {
                let _ = events.send(message);
            }
        }
        Err(error) => log::warn!("[{name}] watching plugin sources: {error}"),
    };
    let cannot = |path: &Path, context, source| Error::Io {
        path: path.to_owned(),
        context,
        source,
    };
    let mut watcher = notify::recommended_watcher(on_event)
        .map_err(|error| cannot(&first, "cannot start watching plugin directory", into_io(error)))?;
    let mut link_dirs: Vec<PathBuf> = links.into_iter().map(|(dir, _)| dir).collect();
    link_dirs.dedup();
    for dir in dirs.iter().chain(&link_dirs) {
        watcher
            .watch(dir, RecursiveMode::NonRecursive)
            .map_err(|error| cannot(dir, "cannot watch plugin directory", into_io(error)))?;
    }
    log::debug!("watching {dirs:?} for plugin changes, {debounce:?} of quiet before a reload");
    let watches = Watches { watcher, dirs };
    let (ended_sender, ended) = mpsc::channel::<()>();
    let thread = thread::Builder::new()
        .name("dylease-watch".to_owned())
        .spawn(move || {
            let _ended = ended_sender;
            run(&receiver, debounce, &mut reload, watches);
        })
        .map_err(|source| cannot(&first, "cannot start the thread that watches plugin directory", source))?;
    Ok(Some(Watch {
        stop: sender,
        thread: Some(thread),
        ended: std::sync::Mutex::new(ended),
    }))
}

/// The directories to watch, and what in each concerns the host. Each path is made absolute
/// (as notify reports events under the path it was given), without resolving symlinks.
fn interests(sources: &[Source]) -> Result<BTreeMap<PathBuf, Interest>, Error> {
    let absolute = |path: &Path| {
        std::path::absolute(path).map_err(|source| Error::Io {
            path: path.to_owned(),
            context: "cannot watch plugin path",
            source,
        })
    };
    let mut interests: BTreeMap<PathBuf, Interest> = BTreeMap::new();
    for source in sources {
        match source {
            Source::Dir(dir) => interests.entry(absolute(dir)?).or_default().libraries = true,
            Source::File(file) => {
                let file = absolute(file)?;
                if let (Some(dir), Some(name)) = (file.parent(), file.file_name()) {
                    interests
                        .entry(dir.to_owned())
                        .or_default()
                        .names
                        .insert(name.to_owned());
                }
            }
            Source::Env(var) => {
                for dir in env_dirs(var)? {
                    interests.entry(absolute(&dir)?).or_default().libraries = true;
                }
            }
            Source::Static(_) => {}
            // Python sources (the only other kind, with the `python` feature) are not watched.
            #[allow(unreachable_patterns)]
            _ => {}
        }
    }
    Ok(interests)
}

/// What `event` means to the host, if anything: a change of an entry of a watched directory
/// that the host loads (or would load), or of a watched directory itself; or a change of a
/// symlink on the way to one. Opening and closing files (what every load does) are not
/// changes.
fn concerns(interests: &BTreeMap<PathBuf, Interest>, event: &Event, host: &str) -> Option<Message> {
    if event.need_rescan() {
        // The kernel's queue overflowed: events were lost.
        return interests.keys().next().cloned().map(Message::Relinked);
    }
    if matches!(event.kind, EventKind::Access(_)) {
        return None;
    }
    let relinked = event.paths.iter().find(|path| {
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return false;
        };
        interests.get(dir).is_some_and(|interest| interest.links.contains(name))
    });
    if let Some(link) = relinked {
        return Some(Message::Relinked(link.clone()));
    }
    let concerned = |path: &&PathBuf| {
        if interests.contains_key(path.as_path()) {
            if matches!(
                event.kind,
                EventKind::Remove(_) | EventKind::Modify(notify::event::ModifyKind::Name(_))
            ) {
                log::warn!(
                    "[{host}] the watched plugin directory `{}` was removed or moved: changes in it are not watched \
                     any more",
                    path.display()
                );
            }
            return true;
        }
        let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else {
            return false;
        };
        interests
            .get(dir)
            .is_some_and(|interest| interest.names.contains(name) || (interest.libraries && is_library_name(name)))
    };
    event.paths.iter().find(concerned).cloned().map(Message::Changed)
}

/// The watcher thread: after each change, waits for `debounce` of quiet, then reloads.
/// Ends on [`Message::Stop`], or when `reload` breaks.
fn run(
    receiver: &Receiver<Message>,
    debounce: Duration,
    reload: &mut impl FnMut(&Path) -> ControlFlow<()>,
    mut watches: Watches,
) {
    loop {
        let (mut changed, mut relinked) = match receiver.recv() {
            Ok(Message::Changed(path)) => (path, false),
            Ok(Message::Relinked(path)) => (path, true),
            Ok(Message::Stop) | Err(_) => return,
        };
        loop {
            match receiver.recv_timeout(debounce) {
                Ok(Message::Changed(path)) => changed = path,
                Ok(Message::Relinked(path)) => (changed, relinked) = (path, true),
                Ok(Message::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                Err(RecvTimeoutError::Timeout) => break,
            }
        }
        if relinked {
            watches.rewatch();
        }
        if reload(&changed).is_break() {
            return;
        }
    }
}

/// notify's error as the operating system's, where it is one.
fn into_io(error: notify::Error) -> io::Error {
    match error.kind {
        notify::ErrorKind::Io(source) => source,
        notify::ErrorKind::PathNotFound => io::Error::new(io::ErrorKind::NotFound, "no such directory"),
        _ => io::Error::other(error),
    }
}
