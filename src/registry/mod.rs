//! The registry room: process-wide instances of plugin libraries. This module is the registry;
//! `opener` opens a library for it and calls into the plugin (`on_load`, `on_unload`);
//! `teardown` ends a set's use of its instances. It may call `registrar`, `trust` (the
//! [`Identity`] of a candidate), `inspect`, `log_scope`, `sys` and `sync`, never `load`,
//! `host` or `python`.
//!
//! The process-wide library registry: one instance of each loaded library, shared by every
//! host and generation that uses it.
//!
//! A [`LibraryInstance`] is one loaded mapping of one library file. Sets hold it by `Arc`; the
//! registry keeps only a `Weak` to each live instance, keyed by the loader's handle (on glibc
//! `dlopen` returns the `link_map`, so two opens that the platform resolves to one mapping are
//! one instance, whatever path or host they came from), and finds instances by the checked
//! file's (dev, ino) too. The instance's drop runs the plugin's `on_unload`, closes the handle,
//! and keeps the file busy until the closed library is settled, so that a waiting opener
//! waits for the unload to end.
//!
//! The protocol (open, share, wait, unload) and the invariants it keeps (I1, I4, I5, I7, I9)
//! are written once in `docs::internals` ("The registry protocol"); the arguments below cite
//! them by number, as "I1 (docs::internals)". The protocol is generic over an [`Opener`], so
//! that the loom tests below can replace `dlopen` with a model of the platform loader, and so
//! that the `python` feature's instances (one execution of a Python plugin's module) follow
//! the same rules with an opener of their own (`python::instance`).

// `Identity` is `Copy` on Unix and a path elsewhere: one spelling for both.
#![allow(clippy::clone_on_copy)]

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::error::{Error, Waited, time_left};
use crate::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use crate::trust::candidate::Identity;

pub(crate) mod opener;
pub(crate) mod teardown;

/// One plugin file as the registry sees it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FileRef<'a> {
    /// The path as discovered: what errors name.
    pub(crate) shown: &'a Path,
    /// The absolute path the file was found at (symlinks resolved under `Strict`).
    pub(crate) resolved: &'a Path,
    /// The checked file's identity ((dev, ino) on Unix): the registry's key.
    pub(crate) identity: &'a Identity,
    /// The open file the trust and ELF checks looked at: what the loader maps.
    pub(crate) source: Option<&'a std::fs::File>,
    /// Whether the library's run paths use `$ORIGIN` (see `sys::library::Checked`).
    pub(crate) origin: bool,
    /// Its loadable segments as the ELF check read them (see `sys::library::Checked`).
    pub(crate) loads: &'a [std::ops::Range<u64>],
    /// Whether the host's trust check is on.
    pub(crate) strict: bool,
    /// The libraries to map before it, dependencies first, opened and checked by the trust
    /// check (`trust::candidate::Dependency`): empty unless it is on.
    pub(crate) dependencies: &'a [crate::trust::candidate::Dependency],
    /// Until when the open may wait for other threads' opens and unloads (of its
    /// dependencies: the registry bounds its own waits with the same deadline).
    pub(crate) deadline: Option<Instant>,
}

/// What the registry needs of a platform loader.
pub(crate) trait Opener: Send + Sync + Sized + 'static {
    /// An open handle; dropping it closes it.
    type Library: Send + Sync;
    /// What starting an instance found out about the plugin (its checked descriptor).
    type Plugin: Send + Sync;
    /// What finishing an instance leaves until it is settled (a closed library whose
    /// mapping is still to be looked for).
    type Closing;
    /// What settling it tells the caller (whether the platform kept the library).
    type Closed;

    /// Opens the library `file` checked (its descriptor, not its path: see I9), running its
    /// constructors if the platform maps it now.
    fn open(&self, file: FileRef<'_>) -> Result<Self::Library, Error>;
    /// The loader's identity of the mapping `library` refers to.
    fn handle(library: &Self::Library) -> usize;
    /// The first use of a new instance: checks the plugin and runs its `on_load`. On `Err`
    /// nothing of the plugin has to be undone, and the library is closed.
    fn start(&self, library: &mut Self::Library, file: FileRef<'_>) -> Result<Self::Plugin, Error>;
    /// The last use of an instance: runs `on_unload` if `registered` (a set's registration
    /// succeeded on it, or its `on_load` did), then closes the library.
    fn finish(&self, plugin: Self::Plugin, library: Self::Library, registered: bool) -> Self::Closing;
    /// After every instance released with it finished: whether the platform kept it.
    fn settle(&self, closing: Self::Closing) -> Self::Closed;
}

/// The registry of the library instances that one [`Opener`] loaded.
pub(crate) struct Registry<O: Opener> {
    opener: O,
    /// The process that made it: a `fork()`ed child never waits on its copied lock (the
    /// callers ask [`Registry::not_forked`] before [`Registry::instance`]).
    pid: u32,
    state: Mutex<State<O>>,
    /// Signalled when a file stops being busy.
    changed: Condvar,
}

impl<O: Opener> fmt::Debug for Registry<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry").finish_non_exhaustive()
    }
}

/// What the registry knows, under its lock.
struct State<O: Opener> {
    /// Live (or dying) instances by the loader's handle.
    by_handle: HashMap<usize, Weak<LibraryInstance<O>>>,
    /// The handle of the instance of each file (by identity).
    by_identity: HashMap<Identity, usize>,
    /// Files being opened or unloading, by identity (I1), with the number of marks each has.
    busy: HashMap<Identity, usize>,
    /// Threads waiting on `changed`.
    waiters: usize,
}

impl<O: Opener> State<O> {
    fn is_busy(&self, file: FileRef<'_>) -> bool {
        self.busy.contains_key(file.identity)
    }

    fn mark(&mut self, identity: &Identity) {
        *self.busy.entry(identity.clone()).or_default() += 1;
    }

    fn unmark(&mut self, identity: &Identity) {
        if let Some(n) = self.busy.get_mut(identity) {
            *n -= 1;
            if *n == 0 {
                self.busy.remove(identity);
            }
        }
    }
}

/// One loaded mapping of one library file, shared by every set that uses it.
pub(crate) struct LibraryInstance<O: Opener> {
    registry: Arc<Registry<O>>,
    handle: usize,
    resolved: PathBuf,
    identity: Identity,
    /// Taken by the instance's finish.
    parts: Option<(O::Library, O::Plugin)>,
    /// Whether a registration (or `on_load`) succeeded on it: then `on_unload` is due.
    registered: crate::sync::AtomicBool,
}

impl<O: Opener> fmt::Debug for LibraryInstance<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LibraryInstance")
            .field("path", &self.resolved)
            .finish_non_exhaustive()
    }
}

impl<O: Opener> LibraryInstance<O> {
    /// The open library of this instance.
    pub(crate) fn library(&self) -> &O::Library {
        &self
            .parts
            .as_ref()
            .expect("an instance is finished only by its last owner")
            .0
    }

    /// The checked plugin (descriptor) of this instance.
    pub(crate) fn plugin(&self) -> &O::Plugin {
        &self
            .parts
            .as_ref()
            .expect("an instance is finished only by its last owner")
            .1
    }

    /// The checked file's identity: what the instance is known by.
    pub(crate) fn identity(&self) -> &Identity {
        &self.identity
    }

    /// Records that a set's registration succeeded on this instance: its `on_unload` is due.
    pub(crate) fn registered(&self) {
        self.registered.store(true, crate::sync::Ordering::Relaxed);
    }

    /// Ends the instance if `this` is its last owner, returning what finishing left, with
    /// the file still marked busy until that is settled; `None` if another set still uses it.
    pub(crate) fn release(this: Arc<Self>) -> Option<Released<O>> {
        Arc::into_inner(this).and_then(|mut instance| instance.finish())
    }

    /// Forgets the instance, marks its file busy and finishes it outside the lock; the file
    /// is unmarked, waking the openers waiting for it (I1, I7), once the result is settled.
    fn finish(&mut self) -> Option<Released<O>> {
        let (library, plugin) = self.parts.take()?;
        let registry = Arc::clone(&self.registry);
        {
            let mut state = registry.state.lock();
            // The entries are this instance's unless a newer instance took the handle, which
            // cannot happen before this one closed it; but check, to forget only our own.
            if state
                .by_handle
                .get(&self.handle)
                .is_some_and(|weak| weak.strong_count() == 0)
            {
                state.by_handle.remove(&self.handle);
            }
            if state.by_identity.get(&self.identity) == Some(&self.handle) {
                state.by_identity.remove(&self.identity);
            }
            state.mark(&self.identity);
        }
        let unmark = Unmark {
            registry,
            identity: self.identity.clone(),
        };
        let registered = self.registered.load(crate::sync::Ordering::Relaxed);
        let closing = unmark.registry.opener.finish(plugin, library, registered);
        Some(Released {
            closing: Some(closing),
            unmark,
        })
    }
}

impl<O: Opener> Drop for LibraryInstance<O> {
    /// An instance dropped other than through [`LibraryInstance::release`] (a panic unwound
    /// through its owner) still finishes.
    fn drop(&mut self) {
        if let Some(released) = self.finish() {
            released.settle();
        }
    }
}

/// A finished instance whose file stays busy until [`Released::settle`] (or its drop): a
/// teardown closes every instance it released, then settles each, so that a library another
/// one depended on is looked for after both closed, and before anything maps the file again.
pub(crate) struct Released<O: Opener> {
    closing: Option<O::Closing>,
    unmark: Unmark<O>,
}

impl<O: Opener> fmt::Debug for Released<O> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Released").finish_non_exhaustive()
    }
}

impl<O: Opener> Released<O> {
    /// Settles the closed instance (see [`Opener::settle`]), then unmarks its file.
    pub(crate) fn settle(mut self) -> Option<O::Closed> {
        let closing = self.closing.take()?;
        Some(self.unmark.registry.opener.settle(closing))
    }
}

impl<O: Opener> Drop for Released<O> {
    fn drop(&mut self) {
        if let Some(closing) = self.closing.take() {
            self.unmark.registry.opener.settle(closing);
        }
    }
}

/// Removes a file's busy mark and wakes the waiters, however the step that set it ends.
struct Unmark<O: Opener> {
    registry: Arc<Registry<O>>,
    identity: Identity,
}

impl<O: Opener> Drop for Unmark<O> {
    fn drop(&mut self) {
        let mut state = self.registry.state.lock();
        state.unmark(&self.identity);
        // std's condition variable makes a system call even when nobody waits: wake only
        // when someone does.
        let waiting = state.waiters > 0;
        drop(state);
        if waiting {
            self.registry.changed.notify_all();
        }
    }
}

/// What steps 1 and 2 of the protocol leave the caller: a live instance to share, or the file
/// marked busy for it to open (step 3).
enum Claim<O: Opener> {
    Live(Arc<LibraryInstance<O>>),
    Marked(Unmark<O>),
}

/// What step 2 or 3 of the protocol found for a handle or identity.
enum Found<O: Opener> {
    Live(Arc<LibraryInstance<O>>),
    Dying,
    Absent,
}

impl<O: Opener> Registry<O> {
    pub(crate) fn new(opener: O) -> Self {
        Registry {
            opener,
            pid: std::process::id(),
            state: Mutex::new(State {
                by_handle: HashMap::new(),
                by_identity: HashMap::new(),
                busy: HashMap::new(),
                waiters: 0,
            }),
            changed: Condvar::new(),
        }
    }

    /// `Err(Error::Forked)` in a `fork()`ed child of the process that made this registry: the
    /// threads that marked files busy there are not in the child, and a wait for them would
    /// never end. Asked before looking for instances: once per load for library plugins
    /// (`load::pipeline`, whose dependencies' registry is only reached from there), and for
    /// each Python plugin (`load::python::instance`); [`Registry::instance`] does not ask.
    pub(crate) fn not_forked(&self) -> Result<(), Error> {
        if std::process::id() != self.pid {
            return Err(Error::Forked { parent: self.pid });
        }
        Ok(())
    }

    /// The instance of `file`, sharing a live one or opening and starting a new one.
    /// `deadline` bounds the waits for other threads' opens and unloads of the same file.
    ///
    /// The registry protocol (docs::internals): steps 1 and 2 in [`Registry::find_or_mark`],
    /// step 3 in [`Registry::open_marked`], again from step 1 when the loader hands back a
    /// mapping that is being unloaded.
    pub(crate) fn instance(
        this: &Arc<Self>,
        file: FileRef<'_>,
        deadline: Option<Instant>,
    ) -> Result<Arc<LibraryInstance<O>>, Error> {
        loop {
            let unmark = match Registry::find_or_mark(this, file, deadline)? {
                Claim::Live(instance) => return Ok(instance),
                Claim::Marked(unmark) => unmark,
            };
            if let Some(instance) = Registry::open_marked(this, file, unmark)? {
                return Ok(instance);
            }
        }
    }

    /// Steps 1 and 2 of the registry protocol, and the mark of step 3, under the lock: a live
    /// instance of `file`, or `file` marked busy by this caller, which opens it.
    fn find_or_mark(this: &Arc<Self>, file: FileRef<'_>, deadline: Option<Instant>) -> Result<Claim<O>, Error> {
        let mut state = this.state.lock();
        loop {
            if !state.is_busy(file) {
                let found = match state.by_identity.get(file.identity) {
                    Some(handle) => Registry::find(&state, *handle),
                    None => Found::Absent,
                };
                match found {
                    Found::Live(instance) => {
                        drop(state);
                        return Ok(Claim::Live(instance));
                    }
                    Found::Absent => break,
                    Found::Dying => {}
                }
            }
            state = this.wait(state, file, deadline)?;
        }
        state.mark(file.identity);
        drop(state);
        Ok(Claim::Marked(Unmark {
            registry: Arc::clone(this),
            identity: file.identity.clone(),
        }))
    }

    /// Step 3 of the registry protocol for a file this caller marked busy (`unmark` removes
    /// the mark on every exit): opens it, then shares the live instance the loader resolved it
    /// to, or starts and publishes a new one. `None`: the mapping is being unloaded under
    /// another name; start again at step 1 (I1).
    fn open_marked(
        this: &Arc<Self>,
        file: FileRef<'_>,
        unmark: Unmark<O>,
    ) -> Result<Option<Arc<LibraryInstance<O>>>, Error> {
        // Declared after `unmark`, so dropped (closed) before it on every exit (I1, I5).
        let mut library = this.opener.open(file)?;
        let handle = O::handle(&library);
        let found = {
            let state = this.state.lock();
            Registry::find(&state, handle)
        };
        match found {
            Found::Live(instance) if instance.identity == *file.identity => {
                // The loader resolved this file to a mapping a live instance has: share
                // it; the extra handle only drops the loader's count.
                drop(library);
                drop(unmark);
                return Ok(Some(instance));
            }
            Found::Live(instance) => {
                // The loader handed back another file's mapping: never share it (I9).
                drop(library);
                drop(unmark);
                return Err(Error::Open {
                    path: file.shown.to_owned(),
                    reason: format!(
                        "the loader returned the mapping of another file (`{}`) for it",
                        instance.resolved.display()
                    ),
                    cause: crate::error::OpenCause::Loader,
                });
            }
            Found::Dying => {
                // The mapping is being unloaded under another name: let go and wait (I1).
                drop(library);
                drop(unmark);
                return Ok(None);
            }
            Found::Absent => {}
        }
        // Plugin code (`on_load`) runs outside the lock (I4); the file stays busy, so
        // other openers of it wait for this one.
        let plugin = this.opener.start(&mut library, file)?;
        let instance = Arc::new(LibraryInstance {
            registry: Arc::clone(this),
            handle,
            resolved: file.resolved.to_owned(),
            identity: file.identity.clone(),
            parts: Some((library, plugin)),
            registered: crate::sync::AtomicBool::new(false),
        });
        let mut state = this.state.lock();
        state.by_handle.insert(handle, Arc::downgrade(&instance));
        state.by_identity.insert(file.identity.clone(), handle);
        drop(state);
        drop(unmark);
        Ok(Some(instance))
    }

    /// The instance registered under `handle`, if any, and whether it is still alive.
    fn find(state: &State<O>, handle: usize) -> Found<O> {
        // A strong reference made here must leave the lock's scope before it can be dropped
        // (its drop may be the last, which takes the lock): every caller releases the lock
        // before it returns or drops the instance.
        match state.by_handle.get(&handle).map(Weak::upgrade) {
            None => Found::Absent,
            Some(Some(instance)) => Found::Live(instance),
            Some(None) => Found::Dying,
        }
    }

    /// Waits for a file to stop being busy, until `deadline` if there is one.
    fn wait<'a>(
        &'a self,
        mut state: MutexGuard<'a, State<O>>,
        file: FileRef<'_>,
        deadline: Option<Instant>,
    ) -> Result<MutexGuard<'a, State<O>>, Error> {
        let left = time_left(deadline, || Waited::File(file.shown.to_owned()))?;
        state.waiters += 1;
        let wait = || match left {
            None => self.changed.wait(state),
            Some(left) => self.changed.wait_timeout(state, left),
        };
        // The thread waited for may need the GIL (a Python instance's teardown); and a thread
        // that holds it may be waiting for this lock: it is not held while the GIL is waited for.
        let mut state = crate::sys::wait_detached(wait, || self.state.lock());
        state.waiters -= 1;
        Ok(state)
    }
}

/// Loom models of the registry: two hosts (threads) share one library file through a model of
/// the platform loader, which keeps a reference count per mapping, runs "constructors" only on
/// a fresh mapping, and checks what the plugin's state sees (run by `loom-tests/run.sh`).
#[cfg(all(test, loom))]
mod loom_models {
    use super::*;
    use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    /// The loader's view of one file, and the plugin's state in its mapping.
    #[derive(Default)]
    struct Mapping {
        /// Open handles; the file is unmapped at zero.
        refs: usize,
        /// Fresh mappings made so far.
        mappings: usize,
        /// The plugin state `on_load` made and `on_unload` frees, in the current mapping.
        state: bool,
        /// An instance of the file is between its `on_unload` and its close.
        unloading: bool,
    }

    #[derive(Default)]
    struct Loader {
        mapping: loom::sync::Mutex<Mapping>,
        on_loads: AtomicUsize,
        on_unloads: AtomicUsize,
    }

    struct Handle(Arc<Loader>);

    impl Drop for Handle {
        fn drop(&mut self) {
            let mut mapping = self.0.mapping.lock().unwrap();
            mapping.refs -= 1;
            if mapping.refs == 0 {
                mapping.state = false; // unmapped: its statics are gone
            }
        }
    }

    struct ModelOpener(Arc<Loader>);

    impl Opener for ModelOpener {
        type Library = Handle;
        type Plugin = ();
        type Closing = ();
        type Closed = ();

        fn settle(&self, (): ()) {}

        fn open(&self, _file: FileRef<'_>) -> Result<Handle, Error> {
            let mut mapping = self.0.mapping.lock().unwrap();
            // I1: never opened while an instance of it is unloading.
            assert!(
                !mapping.unloading,
                "I1: the file was opened while an instance of it unloaded"
            );
            if mapping.refs == 0 {
                mapping.mappings += 1;
            }
            mapping.refs += 1;
            Ok(Handle(Arc::clone(&self.0)))
        }

        fn handle(_library: &Handle) -> usize {
            // One file: the loader hands out the same handle for every mapping of it, as glibc
            // may reuse a `link_map`'s address.
            1
        }

        fn start(&self, _library: &mut Handle, _file: FileRef<'_>) -> Result<(), Error> {
            let mut mapping = self.0.mapping.lock().unwrap();
            // I7: one on_load per instance: never over the live state of another instance.
            assert!(!mapping.state, "I7: on_load ran on a mapping whose state is alive");
            mapping.state = true;
            self.0.on_loads.fetch_add(1, SeqCst);
            Ok(())
        }

        fn finish(&self, _plugin: (), library: Handle, registered: bool) {
            assert!(registered, "the model's sets always register");
            {
                let mut mapping = self.0.mapping.lock().unwrap();
                assert!(mapping.state, "I7: on_unload ran twice, or without on_load");
                mapping.unloading = true;
                mapping.state = false;
            }
            self.0.on_unloads.fetch_add(1, SeqCst);
            let mut mapping = self.0.mapping.lock().unwrap();
            mapping.unloading = false;
            drop(mapping);
            drop(library);
        }
    }

    /// The one file of the models.
    const IDENTITY: Identity = crate::sys::FileId { dev: 1, ino: 1 };

    fn model_file(identity: &Identity) -> FileRef<'_> {
        FileRef {
            shown: Path::new("libmodel.so"),
            resolved: Path::new("/model/libmodel.so"),
            identity,
            source: None,
            origin: false,
            loads: &[],
            strict: false,
            dependencies: &[],
            deadline: None,
        }
    }

    /// One host's set using the file: open (or share) the instance, use its state, release.
    fn use_once(registry: &Arc<Registry<ModelOpener>>, loader: &Loader) {
        let instance = Registry::instance(registry, model_file(&IDENTITY), None).unwrap();
        instance.registered();
        // I2 for instances: a set never uses an instance whose state is torn down.
        assert!(
            loader.mapping.lock().unwrap().state,
            "I2: a set got a torn-down instance"
        );
        LibraryInstance::release(instance);
    }

    fn check(name: &str, model: impl Fn() + Send + Sync + 'static) {
        let mut builder = loom::model::Builder::new();
        if builder.preemption_bound.is_none() {
            builder.preemption_bound = Some(3);
        }
        let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = runs.clone();
        builder.check(move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            model();
        });
        println!(
            "loom model {name}: {} interleavings",
            runs.load(std::sync::atomic::Ordering::Relaxed)
        );
    }

    /// The loader's view of two files that one path names in turn: file 1, then file 2
    /// renamed over it between another host's check and its map (I9). The loader maps what
    /// it is given: the checked descriptor's file.
    #[derive(Default)]
    struct Renamed {
        /// Which file the path names now.
        at_path: AtomicUsize,
        /// Open handles per file (index 1 and 2).
        refs: loom::sync::Mutex<[usize; 3]>,
    }

    struct Mapped(Arc<Renamed>, usize);

    impl Drop for Mapped {
        fn drop(&mut self) {
            self.0.refs.lock().unwrap()[self.1] -= 1;
        }
    }

    struct RenamedOpener(Arc<Renamed>);

    impl Opener for RenamedOpener {
        type Library = Mapped;
        /// The file the instance's mapping is of.
        type Plugin = usize;
        type Closing = ();
        type Closed = ();

        fn settle(&self, (): ()) {}

        fn open(&self, file: FileRef<'_>) -> Result<Mapped, Error> {
            let mapped = usize::try_from(file.identity.ino).unwrap();
            self.0.refs.lock().unwrap()[mapped] += 1;
            Ok(Mapped(Arc::clone(&self.0), mapped))
        }

        fn handle(library: &Mapped) -> usize {
            // One mapping per file, as the loader matches a file by device and inode.
            library.1
        }

        fn start(&self, library: &mut Mapped, _file: FileRef<'_>) -> Result<usize, Error> {
            Ok(library.1)
        }

        fn finish(&self, _plugin: usize, library: Mapped, _registered: bool) {
            drop(library);
        }
    }

    /// One host's load of the file it checked as `file`: the instance must be that file's.
    fn use_checked(registry: &Arc<Registry<RenamedOpener>>, file: u64) {
        let identity = crate::sys::FileId { dev: 1, ino: file };
        let instance = Registry::instance(registry, model_file(&identity), None)
            .unwrap_or_else(|e| panic!("I9: the load of file {file} failed: {e}"));
        assert_eq!(
            *instance.plugin(),
            file as usize,
            "I9: the instance of file {file} maps another file"
        );
        LibraryInstance::release(instance);
    }

    #[test]
    fn registry_a_file_renamed_over_between_check_and_map_is_never_taken_for_another_i9() {
        check("registry: a rename between check and map (I9)", || {
            let files = Arc::new(Renamed::default());
            files.at_path.store(1, SeqCst);
            let registry = Arc::new(Registry::new(RenamedOpener(Arc::clone(&files))));
            let installer = {
                let (registry, files) = (Arc::clone(&registry), Arc::clone(&files));
                loom::thread::spawn(move || {
                    // The rename, then a host that checks what is there now.
                    files.at_path.store(2, SeqCst);
                    use_checked(&registry, 2);
                })
            };
            // This host checked file 1 before the rename.
            use_checked(&registry, 1);
            installer.join().unwrap();
            assert_eq!(*files.refs.lock().unwrap(), [0, 0, 0], "I3: a handle was left open");
        });
    }

    #[test]
    fn registry_two_hosts_share_one_instance_i1_i7() {
        check("registry: two hosts, one file (I1, I7)", || {
            let loader = Arc::new(Loader::default());
            let registry = Arc::new(Registry::new(ModelOpener(Arc::clone(&loader))));
            let other = {
                let (registry, loader) = (Arc::clone(&registry), Arc::clone(&loader));
                loom::thread::spawn(move || use_once(&registry, &loader))
            };
            use_once(&registry, &loader);
            other.join().unwrap();
            let mapping = loader.mapping.lock().unwrap();
            assert_eq!(mapping.refs, 0, "I3: a handle was left open");
            let (loads, unloads) = (loader.on_loads.load(SeqCst), loader.on_unloads.load(SeqCst));
            assert_eq!(loads, unloads, "I7: on_load and on_unload do not pair up");
            assert!((1..=2).contains(&loads));
        });
    }

    #[test]
    fn registry_last_release_races_another_hosts_open_i1_i7() {
        check("registry: last release vs the other host's open (I1, I7)", || {
            let loader = Arc::new(Loader::default());
            let registry = Arc::new(Registry::new(ModelOpener(Arc::clone(&loader))));
            let held = Registry::instance(&registry, model_file(&IDENTITY), None).unwrap();
            held.registered();
            let other = {
                let (registry, loader) = (Arc::clone(&registry), Arc::clone(&loader));
                loom::thread::spawn(move || use_once(&registry, &loader))
            };
            LibraryInstance::release(held);
            other.join().unwrap();
            assert_eq!(loader.mapping.lock().unwrap().refs, 0, "I3: a handle was left open");
            assert_eq!(loader.on_loads.load(SeqCst), loader.on_unloads.load(SeqCst), "I7");
        });
    }

    #[test]
    fn registry_a_held_instance_is_shared_not_reopened() {
        check("registry: one host holds, the other cycles (I7)", || {
            let loader = Arc::new(Loader::default());
            let registry = Arc::new(Registry::new(ModelOpener(Arc::clone(&loader))));
            let held = Registry::instance(&registry, model_file(&IDENTITY), None).unwrap();
            held.registered();
            let other = {
                let (registry, loader) = (Arc::clone(&registry), Arc::clone(&loader));
                loom::thread::spawn(move || {
                    use_once(&registry, &loader);
                    use_once(&registry, &loader);
                })
            };
            other.join().unwrap();
            // The other host's sets came and went: the instance this host holds is untouched.
            assert_eq!(loader.on_unloads.load(SeqCst), 0, "on_unload ran under a holder");
            assert!(loader.mapping.lock().unwrap().state);
            LibraryInstance::release(held);
            assert_eq!(loader.on_loads.load(SeqCst), 1);
            assert_eq!(loader.on_unloads.load(SeqCst), 1);
        });
    }
}

/// The registry's refusals, with a stand-in for the platform loader.
#[cfg(all(test, not(loom), unix))]
mod tests {
    use super::*;
    use crate::sys::FileId;
    use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    /// What the stand-in loader did, for the tests to look at.
    #[derive(Default)]
    struct Calls {
        /// Handles opened and not yet closed.
        open: AtomicUsize,
        /// Instances started (`on_load`) and finished (`on_unload`), and closes settled.
        started: AtomicUsize,
        finished: AtomicUsize,
        settled: AtomicUsize,
    }

    /// A handle of the stand-in loader; dropping it closes it.
    struct Handle(std::sync::Arc<Calls>);

    impl Drop for Handle {
        fn drop(&mut self) {
            self.0.open.fetch_sub(1, SeqCst);
        }
    }

    /// A loader that resolves every file to one mapping, handle 7, as glibc hands back the
    /// `link_map` it already has for a library it takes to be the same (a file it matched
    /// by its soname, or by device and inode after the checked file was replaced).
    struct OneMapping(std::sync::Arc<Calls>);

    impl Opener for OneMapping {
        type Library = Handle;
        /// The identity the instance was started for.
        type Plugin = u64;
        type Closing = ();
        type Closed = ();

        fn open(&self, _file: FileRef<'_>) -> Result<Handle, Error> {
            self.0.open.fetch_add(1, SeqCst);
            Ok(Handle(std::sync::Arc::clone(&self.0)))
        }

        fn handle(_library: &Handle) -> usize {
            7
        }

        fn start(&self, _library: &mut Handle, file: FileRef<'_>) -> Result<u64, Error> {
            self.0.started.fetch_add(1, SeqCst);
            Ok(file.identity.ino)
        }

        fn finish(&self, _plugin: u64, library: Handle, _registered: bool) {
            self.0.finished.fetch_add(1, SeqCst);
            drop(library);
        }

        fn settle(&self, (): ()) {
            self.0.settled.fetch_add(1, SeqCst);
        }
    }

    fn file<'a>(shown: &'a Path, identity: &'a Identity) -> FileRef<'a> {
        FileRef {
            shown,
            resolved: shown,
            identity,
            source: None,
            origin: false,
            loads: &[],
            strict: false,
            dependencies: &[],
            deadline: None,
        }
    }

    /// I9: when the loader hands back the mapping of a live instance of another file, the
    /// load of this file fails, naming it, and the other file's instance goes on as it was
    /// (not shared, not finished, its handle still open, still found for its own file): the
    /// guard `if instance.identity == *file.identity` of `open_marked`'s first `Found::Live`
    /// arm.
    #[test]
    fn the_live_instance_of_another_file_is_never_shared_i9() {
        let calls = std::sync::Arc::new(Calls::default());
        let registry = Arc::new(Registry::new(OneMapping(std::sync::Arc::clone(&calls))));
        let (a, b) = (FileId { dev: 1, ino: 1 }, FileId { dev: 1, ino: 2 });
        let (a_path, b_path) = (Path::new("/plugins/liba.so"), Path::new("/plugins/libb.so"));
        let deadline = Some(Instant::now() + std::time::Duration::from_secs(20));
        let first = Registry::instance(&registry, file(a_path, &a), deadline).unwrap();
        first.registered();
        assert_eq!(calls.open.load(SeqCst), 1);

        let refused = Registry::instance(&registry, file(b_path, &b), deadline);
        match &refused {
            Err(error @ Error::Open { path, reason, .. }) => {
                assert_eq!(path, b_path, "{error}");
                assert!(
                    error.to_string().contains("`/plugins/libb.so`") && reason.contains("`/plugins/liba.so`"),
                    "{error}"
                );
            }
            Err(other) => panic!("the wrong error: {other}"),
            Ok(instance) => panic!(
                "file 2 was handed the instance of file {} (started for it)",
                instance.plugin()
            ),
        }
        drop(refused);

        // The other file's instance is untouched: started once, not finished, its handle open.
        assert_eq!(*first.plugin(), 1);
        assert_eq!(calls.started.load(SeqCst), 1);
        assert_eq!(calls.finished.load(SeqCst), 0, "the other file's instance was finished");
        assert_eq!(
            calls.open.load(SeqCst),
            1,
            "a handle was left open, or the other file's closed"
        );
        // Still the instance of its file, and file 2 is not left busy (a second try fails
        // the same way, without waiting).
        let again = Registry::instance(&registry, file(a_path, &a), deadline).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        drop(again);
        assert!(matches!(
            Registry::instance(&registry, file(b_path, &b), deadline),
            Err(Error::Open { .. })
        ));

        let released = LibraryInstance::release(first).expect("the last owner finishes the instance");
        released.settle();
        assert_eq!(calls.finished.load(SeqCst), 1);
        assert_eq!(calls.open.load(SeqCst), 0, "a handle was left open");
    }

    /// An instance dropped without `release` (its owner unwound) still finishes: its handle
    /// is closed, and its file is forgotten, so that the next instance of the file is opened
    /// and started again at once (a file still known would be shared dead, or waited for).
    /// A released instance dropped unsettled settles all the same. And the `Debug` of the
    /// registry, an instance and a released one say what they are.
    #[test]
    fn a_dropped_instance_finishes_and_its_file_is_opened_again_at_once() {
        let calls = std::sync::Arc::new(Calls::default());
        let registry = Arc::new(Registry::new(OneMapping(std::sync::Arc::clone(&calls))));
        let a = FileId { dev: 1, ino: 1 };
        let path = Path::new("/plugins/liba.so");
        let deadline = Some(Instant::now() + std::time::Duration::from_secs(5));
        let first = Registry::instance(&registry, file(path, &a), deadline).unwrap();
        assert_eq!(format!("{registry:?}"), "Registry { .. }");
        assert_eq!(
            format!("{first:?}"),
            "LibraryInstance { path: \"/plugins/liba.so\", .. }"
        );
        drop(first);
        assert_eq!(calls.finished.load(SeqCst), 1, "a dropped instance was not finished");
        assert_eq!(calls.open.load(SeqCst), 0, "a dropped instance's handle was left open");
        assert!(registry.state.lock().by_identity.is_empty(), "its file is still known");
        let again = Registry::instance(&registry, file(path, &a), deadline).expect("the file opens again");
        assert_eq!((calls.open.load(SeqCst), calls.started.load(SeqCst)), (1, 2));
        let released = LibraryInstance::release(again).expect("the last owner finishes the instance");
        assert_eq!(format!("{released:?}"), "Released { .. }");
        // Dropped unsettled (a teardown that unwound), it still settles, once.
        let settled = calls.settled.load(SeqCst);
        drop(released);
        assert_eq!(
            calls.settled.load(SeqCst),
            settled + 1,
            "a released instance dropped unsettled"
        );
        assert_eq!(calls.finished.load(SeqCst), 2);
    }
}
