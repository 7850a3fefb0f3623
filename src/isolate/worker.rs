//! The worker process of an isolated set: what runs in the process `sys::spawn` started,
//! from the early hook (`sys`), which ends the process when [`run`] returns: the program's
//! `main` never runs here.
//!
//! The main thread answers the host's frames in order: the handshake; one `Map` per plugin,
//! mapped from the descriptor that came with the frame by the usual path (the registry, the
//! instance's `on_load`, `register_passes`: `load::pipeline::map_received`), never by a path;
//! then `Call`s, each run on one of [`THREADS`] threads, so that one long pass does not hold
//! up unrelated calls; and last `Unload` (or the host's end of the channel closing): the
//! plugins' unload code in reverse load order, then exit status 0. The host is the parent
//! that checked every file this process maps: a frame from it that does not decode ends the
//! worker (status 3), which the host reports.

use std::collections::VecDeque;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;

use crate::error::Error;
use crate::isolate::frame::{self, Call, Kind, MAX_FRAME, MAX_PAYLOAD, MapRequest, Mapped, Reply};
use crate::isolate::remote::failure_of;
use crate::isolate::sys::{self, Channel};
use crate::load::LoadedPlugins;
use crate::sync::{Arc, Condvar, Mutex};
use dylease_plugin::abi::DYLEASE_MESSAGE_INTERFACE;

/// The threads that run calls: a pass that runs long keeps one of them, the others serve
/// other calls meanwhile.
pub(crate) const THREADS: usize = 4;

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
            Kind::Map if calls.is_none() => map(frame.payload, received.fds, &mut plugins),
            Kind::Call => {
                let calls = calls.get_or_insert_with(|| {
                    let loaded = std::mem::replace(&mut plugins, LoadedPlugins::new()).finished();
                    Calls::start(Arc::new(loaded), channel.clone())
                });
                calls.submit(frame.id, frame.payload.to_vec());
                continue;
            }
            Kind::Unload => break,
            _ => return 3,
        };
        let Ok(reply) = frame::encode(answer.0, frame.id, &answer.1) else {
            return 3;
        };
        if channel.send(&reply, None).is_err() {
            break;
        }
    }
    // The calls finish first; the plugins unload once nothing can call them (the last `Arc`
    // of the set unloads it: unload code in reverse load order, then the libraries closed).
    if let Some(calls) = calls {
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
    channel.send(&welcome, None).map_err(drop)?;
    // From now on a wait for the host is as long as the host's life (it closes the channel,
    // or its death kills this process).
    channel.set_timeouts(None, None).map_err(drop)
}

/// Maps the plugin of a `Map` request from the one descriptor that came with it.
fn map(payload: &[u8], fds: Vec<OwnedFd>, plugins: &mut LoadedPlugins) -> (Kind, Vec<u8>) {
    let refused = |reason: String| {
        let failure = failure_of(&Error::Config { reason });
        (Kind::MapFailed, failure.encode())
    };
    let request = match MapRequest::decode(payload) {
        Ok(request) => request,
        Err(reason) => return refused(format!("the worker could not read the host's request: {reason}")),
    };
    let Ok::<[OwnedFd; 1], _>([fd]) = fds.try_into() else {
        return refused("the host's request came without exactly one descriptor".to_owned());
    };
    let file = File::from(fd);
    let received = file.metadata().map(|m| (m.dev(), m.ino()));
    if received.as_ref().ok() != Some(&(request.dev, request.ino)) {
        return refused(format!(
            "the descriptor received for `{}` is not the file the host checked",
            request.shown.display()
        ));
    }
    let identity = crate::sys::checked_identity(crate::sys::FileId {
        dev: request.dev,
        ino: request.ino,
    });
    let mapped = crate::load::pipeline::map_received(
        (&request.shown, &request.resolved),
        &file,
        &identity,
        &request.loads,
        request.strict,
    );
    // The loader keeps its own copy of the descriptor while the library is mapped.
    drop(file);
    match mapped {
        Ok(registered) => {
            let mapped = Mapped {
                name: registered.name.clone(),
                version: registered.version.clone(),
                passes: registered
                    .passes
                    .iter()
                    .map(|pass| (pass.name.to_string(), pass.interface.as_deref().map(str::to_owned)))
                    .collect(),
            };
            // A name registered by an earlier plugin is left out here as the host leaves it
            // out (the first registration wins in both).
            drop(plugins.add(registered));
            (Kind::Mapped, mapped.encode())
        }
        Err(error) => (Kind::MapFailed, failure_of(&error).encode()),
    }
}

/// The threads that run calls, fed through a queue.
struct Calls {
    queue: Arc<Queue>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

/// A call: its request's id and its payload.
type Job = (u64, Vec<u8>);

/// The calls not yet taken by a thread; `None` once the worker unloads.
#[derive(Default)]
struct Queue {
    jobs: Mutex<Option<VecDeque<Job>>>,
    changed: Condvar,
}

impl Queue {
    /// The next call, waiting for one; `None` once the queue is closed and empty.
    fn take(&self) -> Option<Job> {
        let mut jobs = self.jobs.lock();
        loop {
            match jobs.as_mut() {
                None => return None,
                Some(queued) => {
                    if let Some(job) = queued.pop_front() {
                        return Some(job);
                    }
                }
            }
            jobs = self.changed.wait(jobs);
        }
    }
}

impl Calls {
    fn start(plugins: Arc<LoadedPlugins>, channel: Arc<Channel>) -> Calls {
        let queue = Arc::new(Queue {
            jobs: Mutex::new(Some(VecDeque::new())),
            changed: Condvar::new(),
        });
        let threads = (0..THREADS)
            .filter_map(|n| {
                let (plugins, channel, queue) = (plugins.clone(), channel.clone(), queue.clone());
                std::thread::Builder::new()
                    .name(format!("dylease-call-{n}"))
                    .spawn(move || {
                        while let Some((id, payload)) = queue.take() {
                            let (kind, answer) = call(&plugins, &payload);
                            if let Ok(reply) = frame::encode(kind, id, &answer) {
                                // A host that is gone reads nothing: the loop ends with the queue.
                                let _ = channel.send(&reply, None);
                            }
                        }
                    })
                    .ok()
            })
            .collect();
        Calls { queue, threads }
    }

    fn submit(&self, id: u64, payload: Vec<u8>) {
        if let Some(jobs) = self.queue.jobs.lock().as_mut() {
            jobs.push_back((id, payload));
        }
        self.queue.changed.notify_all();
    }

    /// Lets the threads finish the calls they run, and ends them (calls still queued are
    /// dropped: their callers' set is unloading).
    fn stop(mut self) {
        *self.queue.jobs.lock() = None;
        self.queue.changed.notify_all();
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Runs one call: `Reply` with the pass's status and output, or `CallFailed` with why the
/// call could not be made.
fn call(plugins: &LoadedPlugins, payload: &[u8]) -> (Kind, Vec<u8>) {
    let failed = |reason: String| (Kind::CallFailed, reason.into_bytes());
    let request = match Call::decode(payload) {
        Ok(request) => request,
        Err(reason) => return failed(format!("the worker could not read the call: {reason}")),
    };
    let Some(index) = plugins.pass_position(request.pass) else {
        return failed(format!("the worker has no pass `{}`", request.pass));
    };
    let info = &plugins.passes()[index];
    if info.interface() != Some(DYLEASE_MESSAGE_INTERFACE) {
        return failed(format!("pass `{}` is not a message pass", request.pass));
    }
    // Room for the status in front of the output.
    let Some(called) = sys::call_message_pass(info, request.input, MAX_PAYLOAD - 4) else {
        return failed(format!("pass `{}` is not callable in the worker", request.pass));
    };
    if called.overflowed {
        return failed(format!(
            "pass `{}` wrote more than {} bytes of output, the most one reply carries",
            request.pass,
            MAX_PAYLOAD - 4
        ));
    }
    let reply = Reply {
        status: called.status,
        output: &called.output,
    };
    (Kind::Reply, reply.encode())
}
