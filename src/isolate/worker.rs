//! The worker process of an isolated set: what runs in the process the zygote forked
//! (`sys::fork_worker`) or `sys::spawn` started (from the early hook, `sys`), which ends
//! when [`run`] returns: the program's `main` never runs here.
//!
//! The main thread answers the host's frames in order: the handshake; for each plugin, a
//! `Depend` per library it needs (held: the file's descriptor and its directory's, or the
//! sealed copy a host that requires signatures verified) and a `Map` (the host sends those of
//! every plugin before it reads the answers; after one fails, the next are answered
//! `Skipped`, not done, until the host's `Resume`), mapped from the descriptor that came with
//! the frame by the usual path (the registry, the held libraries first, dependencies before
//! dependents, the instance's `on_load`, `register_passes`: `load::pipeline::map_received`).
//! No path is opened: a file whose `$ORIGIN` matters (every such library, and a plugin whose
//! run path uses it) is given to the loader as `/proc/self/fd/D/<name>`, D the directory
//! descriptor the host sent, as the host itself names it; a sealed copy as
//! `/proc/self/fd/N`; glibc then answers the plugin's needed names with the libraries mapped
//! before it, by their sonames. Then `Call`s, each run on one of [`THREADS`] threads, so that
//! one long pass does not hold up unrelated calls (the first thread starts right after the
//! handshake, while the host prepares the first plugin, so that its start does not delay the
//! first call); and last `Unload` (or the host's end of
//! the channel closing): the plugins' unload code in reverse load order, then exit status 0.
//! The host is the parent that checked every file this process maps: a frame from it that
//! does not decode ends the worker (status 3), which the host reports.

use std::collections::VecDeque;
use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::error::Error;
use crate::isolate::frame::{
    self, Call, DependRequest, Kind, MAX_FRAME, MAX_MESSAGE, MAX_PAYLOAD, MapRequest, Mapped, Reply, SharedCall,
    SharedReply,
};
use crate::isolate::remote::failure_of;
use crate::isolate::sys::{self, Channel};
use crate::load::LoadedPlugins;
use crate::load::pipeline::Received;
use crate::sync::{Arc, Condvar, Mutex};
use crate::trust::candidate::Dependency;
use dylease_plugin::abi::DYLEASE_MESSAGE_INTERFACE;

use crate::isolate::frame::THREADS;

/// How long the worker waits for the host's greeting: the host sends it right after the
/// spawn.
const HANDSHAKE: std::time::Duration = std::time::Duration::from_secs(30);

/// Runs the worker on `channel`; returns its exit status.
pub(crate) fn run(channel: Channel) -> i32 {
    let channel = Arc::new(channel);
    let mut buffer = vec![0u8; MAX_FRAME + 1];
    if handshake(&channel, &mut buffer).is_err() {
        return 2;
    }
    let mut plugins = LoadedPlugins::new();
    let mut calls: Option<Calls> = None;
    // The first call thread starts now, while the host prepares the first plugin, rather
    // than on the first call: its start is then off the path of the set's first call.
    let mut ready = Some(Calls::start(channel.clone()));
    // The libraries of the `Depend` frames since the last `Map`.
    let mut held: Vec<Held> = Vec::new();
    // Whether a `Depend` or `Map` failed since the last `Resume`: the host sends the next ones
    // before it sees the answers, and none may run before it has seen the failure.
    let mut skipping = false;
    loop {
        let received = match channel.recv(&mut buffer) {
            Ok(received) => received,
            Err(_) => break,
        };
        // The host's end closed: it is gone, or dropped the set without a word.
        if received.len == 0 {
            break;
        }
        if received.truncated {
            return 3;
        }
        let Ok(frame) = frame::decode(&buffer[..received.len]) else {
            return 3;
        };
        let answer = match frame.kind {
            // Plugins are mapped before the first call; the set is fixed from then on.
            Kind::Depend | Kind::Map if calls.is_none() && skipping => {
                if frame.kind == Kind::Map {
                    held.clear();
                }
                (Kind::Skipped, Vec::new())
            }
            Kind::Depend if calls.is_none() => hold(frame.payload, received.fds, &mut held),
            Kind::Map if calls.is_none() => map(frame.payload, received.fds, std::mem::take(&mut held), &mut plugins),
            Kind::Resume if calls.is_none() => {
                (skipping, held) = (false, Vec::new());
                continue;
            }
            Kind::Call | Kind::CallShared => {
                let calls = calls.get_or_insert_with(|| {
                    let loaded = std::mem::replace(&mut plugins, LoadedPlugins::new()).finished();
                    let calls = ready.take().unwrap_or_else(|| Calls::start(channel.clone()));
                    calls.serve(Arc::new(loaded));
                    calls
                });
                calls.submit(Job {
                    id: frame.id,
                    kind: frame.kind,
                    payload: frame.payload.to_vec(),
                    fds: received.fds,
                });
                continue;
            }
            Kind::Unload => break,
            _ => return 3,
        };
        skipping |= answer.0 == Kind::MapFailed;
        let Ok(reply) = frame::encode(answer.0, frame.id, &answer.1) else {
            return 3;
        };
        if channel.send(&reply, &[]).is_err() {
            break;
        }
    }
    // The calls finish first; the plugins unload once nothing can call them (the last `Arc`
    // of the set unloads it: unload code in reverse load order, then the libraries closed).
    if let Some(calls) = calls.or(ready) {
        calls.stop();
    }
    drop(plugins);
    0
}

/// Waits (bounded) for the host's `Hello`, checks it, and answers `Welcome` with this
/// process's id.
fn handshake(channel: &Channel, buffer: &mut [u8]) -> Result<(), ()> {
    channel.set_timeouts(Some(HANDSHAKE), Some(HANDSHAKE)).map_err(drop)?;
    let received = channel.recv(buffer).map_err(drop)?;
    let frame = frame::decode(buffer.get(..received.len).ok_or(())?).map_err(drop)?;
    let (protocol, _host) = frame::read_greeting(frame.payload).map_err(drop)?;
    if frame.kind != Kind::Hello || protocol != frame::PROTOCOL || !received.fds.is_empty() {
        return Err(());
    }
    let welcome = frame::encode(Kind::Welcome, frame.id, &frame::greeting(std::process::id())).map_err(drop)?;
    channel.send(&welcome, &[]).map_err(drop)?;
    // From now on a wait for the host is as long as the host's life (it closes the channel,
    // or its death kills this process).
    channel.set_timeouts(None, None).map_err(drop)
}

/// A library of a `Depend` request, held for the next `Map`: the checked file the host sent,
/// named for the loader in the directory the host sent with it (a sealed copy is given to
/// the loader as itself).
struct Held {
    dependency: Dependency,
    /// The directory it is named in (`/proc/self/fd/D/<name>`): open until it is mapped.
    directory: Option<OwnedFd>,
    /// That name, and the path the host found it at, for messages.
    names: (PathBuf, PathBuf),
}

/// Why the worker refused a request: `MapFailed`, with `reason`.
fn refused(reason: String) -> (Kind, Vec<u8>) {
    let failure = failure_of(&Error::Config { reason });
    (Kind::MapFailed, failure.encode())
}

/// Checks that `file` is the file of identity (`dev`, `ino`) the host checked as `shown`, or,
/// when `sealed`, a copy of it whose bytes and size can change no more (the host verified
/// that copy's bytes: `HostBuilder::require_signed`).
fn same_file(file: &File, (dev, ino): (u64, u64), sealed: bool, shown: &Path) -> Result<(), String> {
    if sealed {
        let needed = libc::F_SEAL_WRITE | sys::SIZE_SEALS;
        return match sys::seals(file) {
            Ok(seals) if seals & needed == needed => Ok(()),
            _ => Err(format!(
                "the descriptor received for `{}` is not a sealed copy of it",
                shown.display()
            )),
        };
    }
    let received = file.metadata().map(|m| (m.dev(), m.ino()));
    match received {
        Ok(identity) if identity == (dev, ino) => Ok(()),
        _ => Err(format!(
            "the descriptor received for `{}` is not the file the host checked",
            shown.display()
        )),
    }
}

/// `directory` (a descriptor received from the host) and `name` as the loader's name of the
/// file in it: `/proc/self/fd/D/<name>`, whose `$ORIGIN` is that directory. `Err` if it is no
/// directory or `name` names none.
fn named_in(directory: &OwnedFd, name: &Path) -> Result<PathBuf, String> {
    let is_directory = File::from(directory.try_clone().map_err(|e| e.to_string())?)
        .metadata()
        .is_ok_and(|m| m.is_dir());
    let Some(file_name) = name.file_name().filter(|_| is_directory) else {
        return Err(format!(
            "the directory received for `{}` is not one, or the path names no file",
            name.display()
        ));
    };
    Ok(Path::new(&format!("/proc/self/fd/{}", directory.as_raw_fd())).join(file_name))
}

/// Holds the library of a `Depend` request, from the descriptors that came with it (the
/// file's and its directory's; a sealed copy's alone), for the next `Map`.
fn hold(payload: &[u8], fds: Vec<OwnedFd>, held: &mut Vec<Held>) -> (Kind, Vec<u8>) {
    let request = match DependRequest::decode(payload) {
        Ok(request) => request,
        Err(reason) => return refused(format!("the worker could not read the host's request: {reason}")),
    };
    let expected = 2 - usize::from(request.sealed);
    if fds.len() != expected {
        return refused(format!(
            "the host's request came with {} descriptors, not {expected}",
            fds.len()
        ));
    }
    let mut fds = fds.into_iter();
    let file = File::from(fds.next().expect("counted"));
    let directory = fds.next();
    if let Err(reason) = same_file(&file, (request.dev, request.ino), request.sealed, &request.found) {
        return refused(reason);
    }
    let found = match &directory {
        Some(directory) => match named_in(directory, &request.found) {
            Ok(found) => found,
            Err(reason) => return refused(reason),
        },
        None => request.found.clone(),
    };
    held.push(Held {
        dependency: Dependency {
            found: found.clone(),
            file,
            identity: crate::sys::FileId {
                dev: request.dev,
                ino: request.ino,
            },
            loads: request.loads,
            sealed: request.sealed,
        },
        directory,
        names: (found, request.found),
    });
    (Kind::Held, Vec::new())
}

/// Maps the plugin of a `Map` request from the descriptor that came with it (and its
/// directory's, when it uses `$ORIGIN`), after the libraries `held` it needs.
fn map(payload: &[u8], fds: Vec<OwnedFd>, mut held: Vec<Held>, plugins: &mut LoadedPlugins) -> (Kind, Vec<u8>) {
    let request = match MapRequest::decode(payload) {
        Ok(request) => request,
        Err(reason) => return refused(format!("the worker could not read the host's request: {reason}")),
    };
    // Those of an earlier plugin whose load failed are not this one's.
    let Some(first) = held.len().checked_sub(request.dependencies as usize) else {
        return refused(format!(
            "the host's request names {} libraries, {} were sent",
            request.dependencies,
            held.len()
        ));
    };
    let held = held.split_off(first);
    if request.origin && request.sealed {
        return refused(format!(
            "the host's request names a directory for `{}`, a sealed copy, which is in none",
            request.shown.display()
        ));
    }
    let expected = 1 + usize::from(request.origin);
    if fds.len() != expected {
        return refused(format!(
            "the host's request came with {} descriptors, not {expected}",
            fds.len()
        ));
    }
    let mut fds = fds.into_iter();
    let file = File::from(fds.next().expect("counted"));
    let directory = fds.next();
    if let Err(reason) = same_file(&file, (request.dev, request.ino), request.sealed, &request.shown) {
        return refused(reason);
    }
    let resolved = match &directory {
        Some(directory) => match named_in(directory, &request.resolved) {
            Ok(named) => named,
            Err(reason) => return refused(reason),
        },
        None => request.resolved.clone(),
    };
    let identity = crate::sys::checked_identity(crate::sys::FileId {
        dev: request.dev,
        ino: request.ino,
    });
    // The loader's names in received directories mean nothing to the host: the paths it
    // found the files at do.
    let mut names: Vec<(PathBuf, PathBuf)> = Vec::with_capacity(held.len() + 1);
    if directory.is_some() {
        names.push((resolved.clone(), request.resolved.clone()));
    }
    let mut dependencies = Vec::with_capacity(held.len());
    let mut directories = Vec::with_capacity(held.len());
    for Held {
        dependency,
        directory,
        names: named,
    } in held
    {
        dependencies.push(dependency);
        directories.push(directory);
        names.push(named);
    }
    let mapped = crate::load::pipeline::map_received(Received {
        shown: &request.shown,
        resolved: &resolved,
        file: &file,
        identity: &identity,
        origin: request.origin,
        loads: &request.loads,
        strict: request.strict,
        dependencies: &dependencies,
    });
    // The loader keeps its own copies of the descriptors (the files' and their directories')
    // while the libraries are mapped.
    drop((file, directory, dependencies, directories));
    match mapped {
        Ok(registered) => {
            let mapped = Mapped {
                name: registered.name.clone(),
                version: registered.version.clone(),
                passes: registered
                    .passes
                    .iter()
                    .map(|pass| (pass.name.to_string(), pass.func.interface().map(str::to_owned)))
                    .collect(),
            };
            // A name registered by an earlier plugin is left out here as the host leaves it
            // out (the first registration wins in both).
            drop(plugins.add(registered));
            (Kind::Mapped, mapped.encode())
        }
        Err(error) => {
            let mut failure = failure_of(&error);
            for (given, found) in &names {
                failure.reason = failure
                    .reason
                    .replace(&*given.to_string_lossy(), &found.to_string_lossy());
            }
            (Kind::MapFailed, failure.encode())
        }
    }
}

/// The threads that run calls, fed through a queue: started one at a time, when a call comes
/// and no thread is free, up to [`THREADS`].
struct Calls {
    queue: Arc<Queue>,
    threads: Vec<std::thread::JoinHandle<()>>,
    /// The set the calls run in, given once the plugins are mapped (before any call is
    /// queued).
    plugins: Arc<std::sync::OnceLock<Arc<LoadedPlugins>>>,
    channel: Arc<Channel>,
    mappings: Arc<Mappings>,
    outputs: Arc<Outputs>,
}

/// The most mappings of the host's reused input regions the worker keeps: as many as the
/// host keeps regions for it (`remote`'s pool holds one per call thread).
const KEPT_REGIONS: usize = THREADS;

/// The worker's mappings of the host's reused input regions, by the host's number for each
/// (`SharedCall::region`), the most recently used last: a call whose region was mapped
/// before reads it without mapping it again.
#[derive(Default)]
struct Mappings(Mutex<VecDeque<(u64, Arc<sys::Region>)>>);

impl Mappings {
    /// The mapping of region `number` (0: a region of one call, never kept), received as
    /// `fd`, holding at least `len` bytes: the one kept, or a new one, kept unless 0.
    fn of(&self, number: u64, fd: OwnedFd, len: usize) -> std::io::Result<Arc<sys::Region>> {
        if number != 0 {
            let mut kept = self.0.lock();
            if let Some(at) = kept
                .iter()
                .position(|(n, region)| *n == number && region.bytes().len() >= len)
            {
                let entry = kept.remove(at).expect("found");
                let region = entry.1.clone();
                kept.push_back(entry);
                return Ok(region);
            }
        }
        let region = Arc::new(sys::Region::map(&File::from(fd), len)?);
        if number != 0 {
            let mut kept = self.0.lock();
            kept.retain(|(n, _)| *n != number);
            if kept.len() == KEPT_REGIONS {
                kept.pop_front();
            }
            kept.push_back((number, region.clone()));
        }
        Ok(region)
    }
}

/// The worker's writable mappings of the host's reused output regions, by the host's number
/// for each (`SharedCall::output`), the most recently used last; a mapping in use by a call
/// is out of the list until the call gives it back, so that each has one writer.
#[derive(Default)]
struct Outputs(Mutex<VecDeque<(u64, sys::OutputMapping)>>);

impl Outputs {
    /// The mapping of output region `number`, received as `fd`: the one kept, or a new one.
    fn take(&self, number: u64, fd: OwnedFd) -> std::io::Result<sys::OutputMapping> {
        let kept = {
            let mut kept = self.0.lock();
            let at = kept.iter().position(|(n, _)| *n == number);
            at.and_then(|at| kept.remove(at))
        };
        match kept {
            Some((_, mapping)) => Ok(mapping),
            None => sys::OutputMapping::map(&File::from(fd)),
        }
    }

    /// Keeps `mapping` of output region `number` for the calls to come (dropping the least
    /// recently used past [`KEPT_REGIONS`]).
    fn give_back(&self, number: u64, mapping: sys::OutputMapping) {
        let mut kept = self.0.lock();
        kept.retain(|(n, _)| *n != number);
        if kept.len() == KEPT_REGIONS {
            kept.pop_front();
        }
        kept.push_back((number, mapping));
    }
}

/// A call: its request's id, kind and payload, and the descriptors that came with it (a
/// `CallShared`'s region).
struct Job {
    id: u64,
    kind: Kind,
    payload: Vec<u8>,
    fds: Vec<OwnedFd>,
}

/// The calls not yet taken by a thread.
#[derive(Default)]
struct Queue {
    jobs: Mutex<Jobs>,
    changed: Condvar,
}

#[derive(Default)]
struct Jobs {
    /// The calls not yet taken; `None` once the worker unloads.
    queued: Option<VecDeque<Job>>,
    /// How many threads wait for a call.
    idle: usize,
}

impl Queue {
    /// The next call, waiting for one; `None` once the queue is closed and empty.
    fn take(&self) -> Option<Job> {
        let mut jobs = self.jobs.lock();
        loop {
            match jobs.queued.as_mut() {
                None => return None,
                Some(queued) => {
                    if let Some(job) = queued.pop_front() {
                        return Some(job);
                    }
                }
            }
            jobs.idle += 1;
            jobs = self.changed.wait(jobs);
            jobs.idle -= 1;
        }
    }
}

impl Calls {
    /// The call threads, one of them started, for the set [`serve`](Calls::serve) gives.
    fn start(channel: Arc<Channel>) -> Calls {
        let queue = Arc::new(Queue {
            jobs: Mutex::new(Jobs {
                queued: Some(VecDeque::new()),
                idle: 0,
            }),
            changed: Condvar::new(),
        });
        let mut calls = Calls {
            queue,
            threads: Vec::with_capacity(THREADS),
            plugins: Arc::new(std::sync::OnceLock::new()),
            channel,
            mappings: Arc::new(Mappings::default()),
            outputs: Arc::new(Outputs::default()),
        };
        calls.add_thread();
        calls
    }

    /// Gives the calls their set, before the first is submitted.
    fn serve(&self, plugins: Arc<LoadedPlugins>) {
        let _ = self.plugins.set(plugins);
    }

    /// Starts one more thread, if it can (a thread that cannot be started leaves the calls
    /// to those that run; with none, the call waits for the unload, which the host's
    /// deadline brings).
    fn add_thread(&mut self) {
        let (plugins, channel, queue) = (self.plugins.clone(), self.channel.clone(), self.queue.clone());
        let (mappings, outputs) = (self.mappings.clone(), self.outputs.clone());
        let started = std::thread::Builder::new()
            .name(format!("dylease-call-{}", self.threads.len()))
            .spawn(move || {
                while let Some(job) = queue.take() {
                    // Given before the first call is queued.
                    let Some(plugins) = plugins.get() else { break };
                    let (kind, answer, region) = call(plugins, (&mappings, &outputs), job.kind, &job.payload, job.fds);
                    let fds: Vec<_> = region.iter().map(AsFd::as_fd).collect();
                    if let Ok(reply) = frame::encode(kind, job.id, &answer) {
                        // A host that is gone reads nothing: the loop ends with the queue.
                        let _ = channel.send(&reply, &fds);
                    }
                }
            });
        if let Ok(thread) = started {
            self.threads.push(thread);
        }
    }

    fn submit(&mut self, job: Job) {
        let busy = {
            let mut jobs = self.queue.jobs.lock();
            let idle = jobs.idle;
            match jobs.queued.as_mut() {
                Some(queued) => {
                    queued.push_back(job);
                    queued.len() > idle
                }
                None => false,
            }
        };
        if busy && self.threads.len() < THREADS {
            self.add_thread();
        }
        self.queue.changed.notify_all();
    }

    /// Lets the threads finish the calls they run, and ends them (calls still queued are
    /// dropped: their callers' set is unloading).
    fn stop(mut self) {
        self.queue.jobs.lock().queued = None;
        self.queue.changed.notify_all();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Runs one call (a `Call`, or a `CallShared` whose input is the region of its one
/// descriptor, and whose output region, if the host sent one, is its second): `Reply` with
/// the pass's status and output; when the output does not fit a frame, `ReplyShared` with the
/// status, the output written at the start of the host's output region if it fits there,
/// else in a new sealed region that goes with the reply; or `CallFailed` with why the call
/// could not be made.
fn call(
    plugins: &LoadedPlugins,
    (mappings, outputs): (&Mappings, &Outputs),
    kind: Kind,
    payload: &[u8],
    fds: Vec<OwnedFd>,
) -> (Kind, Vec<u8>, Option<File>) {
    let failed = |reason: String| (Kind::CallFailed, reason.into_bytes(), None);
    let region;
    // The host's output region, and its number.
    let mut output_region = None;
    let request = match kind {
        Kind::CallShared => {
            let shared = match SharedCall::decode(payload) {
                Ok(shared) => shared,
                Err(reason) => return failed(format!("the worker could not read the call: {reason}")),
            };
            let mut fds = fds.into_iter();
            let (Some(fd), output, None) = (fds.next(), fds.next(), fds.next()) else {
                return failed("the call's regions did not come with it".to_owned());
            };
            output_region = output.filter(|_| shared.output != 0).map(|fd| (shared.output, fd));
            let len = match usize::try_from(shared.len) {
                Ok(len) if len <= MAX_MESSAGE => len,
                _ => return failed(format!("the call announced {} bytes of input", shared.len)),
            };
            region = match mappings.of(shared.region, fd, len) {
                Ok(region) => region,
                Err(e) => return failed(format!("the call's region could not be read: {e}")),
            };
            Call {
                pass: shared.pass,
                input: &region.bytes()[..len],
            }
        }
        _ => match Call::decode(payload) {
            Ok(request) => request,
            Err(reason) => return failed(format!("the worker could not read the call: {reason}")),
        },
    };
    let Some(index) = plugins.pass_position(request.pass) else {
        return failed(format!("the worker has no pass `{}`", request.pass));
    };
    let info = &plugins.passes()[index];
    if info.interface() != Some(DYLEASE_MESSAGE_INTERFACE) {
        return failed(format!("pass `{}` is not a message pass", request.pass));
    }
    // The pass writes its output straight into the host's output region while it fits.
    let mut mapping = output_region.and_then(|(number, fd)| {
        let mapped = outputs.take(number, fd);
        // Without it, the output goes as if the host had sent none.
        let mapped = mapped.inspect_err(|e| log::debug!("the host's output region could not be mapped: {e}"));
        mapped.ok().map(|mapping| (number, mapping))
    });
    let region = mapping.as_mut().map_or(&mut [][..], |(_, mapping)| mapping.bytes_mut());
    let called = sys::call_message_pass(info, request.input, MAX_MESSAGE, region);
    let answer = called.map(|called| {
        let in_region = mapping
            .as_mut()
            .map_or(&[][..], |(_, mapping)| &mapping.bytes_mut()[..called.in_region]);
        reply_to(request.pass, called, in_region)
    });
    if let Some((number, mapping)) = mapping {
        outputs.give_back(number, mapping);
    }
    answer.unwrap_or_else(|| failed(format!("pass `{}` is not callable in the worker", request.pass)))
}

/// The answer to a call of `pass` that returned `called`, whose output (when `called` says
/// so) is `in_region`, the start of the host's output region.
fn reply_to(pass: &str, called: sys::Called, in_region: &[u8]) -> (Kind, Vec<u8>, Option<File>) {
    let failed = |reason: String| (Kind::CallFailed, reason.into_bytes(), None);
    if called.overflowed {
        return failed(format!(
            "pass `{pass}` wrote more than {MAX_MESSAGE} bytes of output, the most one reply carries"
        ));
    }
    let output = match called.in_region {
        0 => &called.output[..],
        _ => in_region,
    };
    // Room for the status in front of the output.
    if output.len() <= MAX_PAYLOAD - 4 {
        let reply = Reply {
            status: called.status,
            output,
        };
        return (Kind::Reply, reply.encode(), None);
    }
    let reply = SharedReply {
        status: called.status,
        len: output.len() as u64,
    };
    if called.in_region != 0 {
        // The output is in the host's region already.
        return (Kind::ReplyShared, reply.encode(), None);
    }
    match sys::sealed_region(output) {
        Ok(region) => (Kind::ReplyShared, reply.encode(), Some(region)),
        Err(e) => failed(format!("its output could not be put in a shared region: {e}")),
    }
}
