//! The host's side of an isolated set: the [`Worker`] (its process, its channel, the one
//! reader thread that hands each answer to the caller waiting for it), the plugins it holds
//! ([`Remote`]), and the load of them ([`Isolating`]).
//!
//! Every byte from the worker is hostile input. A message that does not decode as a frame, a
//! frame of a kind the host does not expect from a worker, an answer to a request the host
//! never made (or already has the answer to), a descriptor: the worker is killed and the set
//! failed ([`WorkerCause::Protocol`]). Its death by a signal or an exit fails every request
//! in flight and every later one with that status; a request past the call deadline kills it
//! ([`WorkerCause::Deadline`]). No wait on the worker is unbounded: each request waits at most
//! the deadline, the unload waits the deadline and then kills, and a reap after the channel
//! closed waits a few seconds, kills, and gives up after a few more (logged).

use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

use crate::error::{Error, OpenCause, Origin, WorkerCause};
use crate::isolate::config::{Isolation, Load};
use crate::isolate::frame::{
    self, Call, DependRequest, Kind, MAX_FRAME, MAX_MESSAGE, MAX_PAYLOAD, MapFailure, MapRequest, Mapped, Reply,
    SharedCall, SharedReply,
};
use crate::isolate::sys::{self, Channel};
use crate::isolate::table::{Outcome, Table};
use crate::load::{Isolate, Isolated, LoadedPlugins};
use crate::registrar::MAX_NAME_LEN;
use crate::registry::teardown::Teardown;
use crate::sync::{Arc, Mutex};
use crate::trust::candidate::Candidate;
use crate::trust::{Checks, TrustPolicy};

/// An answer: its frame's kind, its payload and the descriptor that came with it.
type Answer = (Kind, Vec<u8>, Option<OwnedFd>);

/// The `len` bytes of the worker's region `fd` (a `ReplyShared`'s output), read once: `Err`
/// with what is wrong with it (no region, a length above [`MAX_MESSAGE`], a size other than
/// `len`, no seal against a change of size, a short read).
fn read_region(fd: Option<OwnedFd>, len: u64) -> Result<Vec<u8>, String> {
    use std::os::unix::fs::FileExt;
    let region = std::fs::File::from(fd.ok_or("it sent a shared reply without its region")?);
    let len = usize::try_from(len)
        .ok()
        .filter(|&len| len <= MAX_MESSAGE)
        .ok_or_else(|| format!("it announced {len} bytes of output, more than {MAX_MESSAGE}"))?;
    let seals = sys::seals(&region).map_err(|e| format!("its output region has no seals: {e}"))?;
    let size = region.metadata().map(|m| m.len()).map_err(|e| e.to_string())?;
    if seals & sys::SIZE_SEALS != sys::SIZE_SEALS || size != len as u64 {
        return Err(format!(
            "its output region of {size} bytes, announced as {len}, is not sealed against a change of size"
        ));
    }
    let mut output = vec![0; len];
    region
        .read_exact_at(&mut output, 0)
        .map_err(|e| format!("its output region could not be read: {e}"))?;
    Ok(output)
}

/// How long a reap waits for a worker whose channel closed, before it kills it; and again
/// after the kill, before it gives up.
const REAP: Duration = Duration::from_secs(5);

/// A worker process and its channel.
#[derive(Debug)]
pub(crate) struct Worker {
    channel: Arc<Channel>,
    shared: Arc<Shared>,
    pid: u32,
    deadline: Duration,
    reader: Mutex<Option<std::thread::JoinHandle<()>>>,
}

/// What the callers and the reader thread share: the table of requests in flight, waiting
/// for answers of the kinds their [`Expect`] accepts (the frame's kind and payload, and the
/// descriptor that came with it: a `ReplyShared`'s region); the worker's end is its status
/// if it was reaped. And the worker's process.
#[derive(Debug)]
struct Shared {
    table: Table<Expect, Answer, Option<ExitStatus>>,
    child: Mutex<Child>,
}

/// What a request expects back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Depend,
    Map,
    Call,
}

impl Expect {
    fn accepts(self, kind: Kind) -> bool {
        matches!(
            (self, kind),
            (Expect::Depend, Kind::Held | Kind::MapFailed)
                | (Expect::Map, Kind::Mapped | Kind::MapFailed)
                | (Expect::Call, Kind::Reply | Kind::ReplyShared | Kind::CallFailed)
        )
    }
}

/// Runs `job` on the process's one spawning thread, started on first use and never ended:
/// a worker gets `SIGKILL` when the thread that spawned it ends (`PR_SET_PDEATHSIG` is per
/// thread), and its host's threads come and go.
fn on_spawning_thread<T: Send + 'static>(job: impl FnOnce() -> T + Send + 'static) -> std::io::Result<T> {
    type Job = Box<dyn FnOnce() + Send>;
    static SPAWNER: std::sync::OnceLock<std::sync::Mutex<Option<std::sync::mpsc::Sender<Job>>>> =
        std::sync::OnceLock::new();
    let spawner = SPAWNER.get_or_init(|| {
        let (jobs, queue) = std::sync::mpsc::channel::<Job>();
        let started = std::thread::Builder::new()
            .name("dylease-spawner".into())
            .spawn(move || queue.into_iter().for_each(|job| job()));
        std::sync::Mutex::new(started.ok().map(|_| jobs))
    });
    let (answer, answered) = std::sync::mpsc::channel();
    let sent = spawner
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .as_ref()
        .map(|jobs| jobs.send(Box::new(move || drop(answer.send(job())))));
    match sent {
        Some(Ok(())) => answered
            .recv()
            .map_err(|_| std::io::Error::other("the spawning thread ended")),
        _ => Err(std::io::Error::other("the spawning thread could not be started")),
    }
}

impl Worker {
    /// Starts a worker for `isolation` and greets it; `Err` with why it could not.
    pub(crate) fn start(isolation: &Isolation) -> Result<Arc<Worker>, WorkerCause> {
        let start_failed = |what: &str, e: std::io::Error| WorkerCause::Start(format!("{what}: {e}"));
        let (channel, theirs) = Channel::pair().map_err(|e| start_failed("cannot make its channel", e))?;
        let program = isolation.program().to_owned();
        let passthrough = isolation.ld_passthrough;
        let shown = program.display().to_string();
        let child = on_spawning_thread(move || sys::spawn(&program, theirs, passthrough))
            .and_then(|spawned| spawned)
            .map_err(|e| start_failed(&format!("cannot run `{shown}`"), e))?;
        let pid = child.id();
        let shared = Arc::new(Shared {
            table: Table::new(),
            child: Mutex::new(child),
        });
        let channel = Arc::new(channel);
        let worker = Worker {
            channel,
            shared,
            pid,
            deadline: isolation.deadline,
            reader: Mutex::new(None),
        };
        if let Err(cause) = worker.greet() {
            worker.shared.kill();
            let status = worker.shared.reap();
            return Err(match status.map(WorkerCause::of) {
                // It ended without greeting: most likely a program without the worker hook.
                Some(exit @ (WorkerCause::Exit(_) | WorkerCause::Signal(_))) => WorkerCause::Start(format!(
                    "`{}` ended before it greeted the host ({exit}): it must be a program that links dylease \
                     (its worker hook), as the host's own executable does; {cause}",
                    isolation.program().display()
                )),
                _ => cause,
            });
        }
        let reader = {
            let (shared, channel) = (worker.shared.clone(), worker.channel.clone());
            std::thread::Builder::new()
                .name(format!("dylease-worker-{pid}"))
                .spawn(move || shared.read(&channel))
        };
        match reader {
            Ok(reader) => *worker.reader.lock() = Some(reader),
            Err(e) => {
                worker.shared.kill();
                worker.shared.reap();
                return Err(start_failed("cannot start its reader thread", e));
            }
        }
        Ok(Arc::new(worker))
    }

    /// The handshake, bounded by the call deadline: `Hello`, answered by `Welcome` naming the
    /// protocol this host speaks and the worker's own process id.
    fn greet(&self) -> Result<(), WorkerCause> {
        let protocol = |reason: String| WorkerCause::Protocol(format!("in the handshake, {reason}"));
        let hello =
            frame::encode(Kind::Hello, 0, &frame::greeting(std::process::id())).map_err(|_| protocol("".into()))?;
        self.channel
            .set_timeouts(Some(self.deadline), Some(self.deadline))
            .map_err(|e| protocol(format!("the channel refused its bounds: {e}")))?;
        self.channel
            .send(&hello, &[])
            .map_err(|e| protocol(format!("the greeting could not be sent: {e}")))?;
        let mut buffer = vec![0; MAX_FRAME + 1];
        let received = self.channel.recv(&mut buffer).map_err(|e| match e.kind() {
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
                protocol(format!("no answer within the call deadline of {:?}", self.deadline))
            }
            _ => protocol(format!("reading the answer failed: {e}")),
        })?;
        if received.len == 0 {
            return Err(protocol("the worker closed its channel".into()));
        }
        if received.truncated || !received.fds.is_empty() {
            return Err(protocol("the answer was oversized or carried descriptors".into()));
        }
        let frame = frame::decode(&buffer[..received.len]).map_err(protocol)?;
        let (version, pid) = frame::read_greeting(frame.payload).map_err(protocol)?;
        if frame.kind != Kind::Welcome || frame.id != 0 {
            return Err(protocol(format!(
                "the answer was a {:?} frame, not a welcome",
                frame.kind
            )));
        }
        if version != frame::PROTOCOL {
            return Err(protocol(format!(
                "the worker speaks protocol {version}, this host {}: the worker program is another build of \
                 dylease",
                frame::PROTOCOL
            )));
        }
        if pid != self.pid {
            return Err(protocol(format!(
                "the worker says it is process {pid}, not {}",
                self.pid
            )));
        }
        // Receives wait for as long as the worker lives (its end closes when it ends); each
        // send is bounded, so a worker that stops reading cannot hold a caller for ever.
        self.channel
            .set_timeouts(None, Some(self.deadline))
            .map_err(|e| protocol(format!("the channel refused its bounds: {e}")))
    }

    /// The worker's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Sends a request and waits, at most the call deadline, for its answer. `what` names the
    /// request for a deadline's error (a pass's name).
    fn request(
        &self,
        (kind, payload): (Kind, &[u8]),
        fds: &[std::os::fd::BorrowedFd<'_>],
        expect: Expect,
        what: &str,
    ) -> Result<Answer, WorkerCause> {
        let deadline = Instant::now().checked_add(self.deadline);
        // A failed send (a worker that died, or stopped reading past the deadline) is seen
        // in the wait: the reader thread records the worker's end, or the deadline passes.
        let send = |id| {
            let frame = frame::encode(kind, id, payload)
                .map_err(|len| WorkerCause::Protocol(format!("a request of {len} bytes, more than a frame carries")))?;
            if let Err(e) = self.channel.send(&frame, fds) {
                log::debug!("the request to worker {} could not be sent: {e}", self.pid);
            }
            Ok(())
        };
        let expired = || WorkerCause::Deadline {
            pass: what.to_owned(),
            after: self.deadline,
        };
        match self.shared.table.request(expect, send, deadline, expired) {
            Outcome::Answered(answer) => Ok(answer),
            Outcome::Failed(cause) => Err(cause),
            Outcome::Expired(cause) => {
                self.shared.kill();
                Err(cause)
            }
        }
    }

    /// Calls the message pass `pass` (of plugin `plugin`) with `input`: in the frame, or, when
    /// it does not fit one, in a sealed shared region beside it (at most [`MAX_MESSAGE`]
    /// bytes); the output comes back the same way.
    pub(crate) fn call(&self, plugin: &Origin, pass: &str, input: &[u8]) -> Result<Vec<u8>, Error> {
        let refused = |reason: String| Error::CallRefused {
            plugin: plugin.clone(),
            pass: pass.to_owned(),
            reason,
        };
        let failed = |cause| Error::WorkerFailed {
            plugin: plugin.clone(),
            pass: Some(pass.to_owned()),
            cause: Box::new(cause),
        };
        let inline = Call { pass, input }.encode();
        let (kind, answer, fd) = if inline.len() <= MAX_PAYLOAD {
            self.request((Kind::Call, &inline), &[], Expect::Call, pass)
        } else {
            if input.len() > MAX_MESSAGE {
                return Err(refused(format!(
                    "its input of {} bytes is more than an isolated call carries ({MAX_MESSAGE} bytes); split the \
                     input, or call the pass in an ordinary set",
                    input.len()
                )));
            }
            let region = sys::sealed_region(input)
                .map_err(|e| refused(format!("its input could not be put in a shared region: {e}")))?;
            let request = SharedCall {
                pass,
                len: input.len() as u64,
            };
            self.request(
                (Kind::CallShared, &request.encode()),
                &[region.as_fd()],
                Expect::Call,
                pass,
            )
        }
        .map_err(failed)?;
        let (status, output) = match kind {
            Kind::CallFailed => {
                let reason = String::from_utf8_lossy(&answer).into_owned();
                return Err(refused(format!("the worker refused the call: {reason}")));
            }
            Kind::ReplyShared => {
                let read =
                    SharedReply::decode(&answer).and_then(|reply| Ok((reply.status, read_region(fd, reply.len)?)));
                read.map_err(|reason| failed(self.hostile(reason)))?
            }
            _ => {
                let reply = Reply::decode(&answer).map_err(|reason| failed(self.hostile(reason)))?;
                (reply.status, reply.output.to_vec())
            }
        };
        match status {
            0 => Ok(output),
            status => Err(Error::PassFailed {
                plugin: plugin.clone(),
                pass: pass.to_owned(),
                status,
            }),
        }
    }

    /// Fails the worker for a hostile answer `reason` and kills it; returns the cause.
    fn hostile(&self, reason: String) -> WorkerCause {
        let cause = self.shared.table.fail(WorkerCause::Protocol(reason));
        self.shared.kill();
        cause
    }

    /// Asks the worker to run its plugins' unload code and exit, and reaps it: waits for it at
    /// most the call deadline, then kills it. Logs an unload that did not end in a clean exit.
    pub(crate) fn unload(&self) {
        let ask = || {
            let unload = frame::encode(Kind::Unload, 0, &[]).expect("an empty payload fits");
            let _ = self.channel.send(&unload, &[]);
        };
        let (failed, mut ended) = self.shared.table.unload(ask, Instant::now().checked_add(self.deadline));
        if ended.is_none() {
            log::warn!(
                "{}the worker process {} of an isolated set did not exit within the call deadline of {:?} after \
                 its unload was asked: killed",
                crate::log_scope::prefix(),
                self.pid,
                self.deadline
            );
            self.shared.kill();
            // A worker whose channel another process still holds does not end the reader's
            // wait by dying: the host's end is shut, which does.
            self.channel.shutdown();
            ended = self
                .shared
                .table
                .wait_ended(Instant::now().checked_add(2 * REAP + Duration::from_secs(1)));
        }
        match ended {
            Some(status) => {
                if let Some(reader) = self.reader.lock().take() {
                    let _ = reader.join();
                }
                match (failed, status) {
                    (None, Some(status)) if !status.success() => log::warn!(
                        "{}the worker process {} of an isolated set {} while its plugins unloaded (an \
                         `on_unload` hook failed); nothing of it is left",
                        crate::log_scope::prefix(),
                        self.pid,
                        WorkerCause::of(status)
                    ),
                    _ => {}
                }
            }
            None => log::error!(
                "{}the worker process {} of an isolated set could not be reaped: it is left to the system",
                crate::log_scope::prefix(),
                self.pid
            ),
        }
    }
}

impl Shared {
    /// Sends the worker `SIGKILL` (nothing if it was reaped: std's `Child` knows).
    fn kill(&self) {
        let _ = self.child.lock().kill();
    }

    /// Reaps the worker, bounded: waits [`REAP`] for it to exit, kills it, waits [`REAP`]
    /// again; `None` if it could not be reaped (logged by the caller).
    fn reap(&self) -> Option<ExitStatus> {
        let started = Instant::now();
        let mut killed = false;
        // A worker whose channel closed is usually exiting: its status comes within microseconds.
        let mut pause = Duration::from_micros(20);
        loop {
            match self.child.lock().try_wait() {
                Ok(Some(status)) => return Some(status),
                Ok(None) => {}
                Err(_) => return None,
            }
            let waited = started.elapsed();
            if !killed && waited >= REAP {
                self.kill();
                killed = true;
            }
            if waited >= 2 * REAP {
                return None;
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }

    /// The reader thread: hands each answer to its request, until the worker's channel
    /// closes (the worker ended) or the worker sends something hostile (then it is killed).
    /// Then reaps the worker and records how it ended.
    fn read(&self, channel: &Channel) {
        let mut buffer = vec![0u8; MAX_FRAME + 1];
        let hostile = loop {
            let received = match channel.recv(&mut buffer) {
                Ok(received) => received,
                Err(e) => {
                    log::debug!("reading an isolated set's channel failed: {e}");
                    break None;
                }
            };
            if received.len == 0 {
                break None;
            }
            if received.truncated {
                break Some(format!("it sent a message larger than {MAX_FRAME} bytes"));
            }
            let answered = frame::decode(&buffer[..received.len]).and_then(|frame| self.answer(frame, received.fds));
            if let Err(reason) = answered {
                break Some(reason);
            }
        };
        if let Some(reason) = hostile {
            self.table.fail(WorkerCause::Protocol(reason));
            self.kill();
        }
        let status = self.reap();
        self.table.end(status, |status| match status {
            Some(status) => WorkerCause::of(*status),
            None => WorkerCause::Protocol("it closed its channel and could not be reaped".to_owned()),
        });
    }

    /// Hands `frame`, and the descriptors that came with it, to the request it answers: `Err`
    /// with why it answers none, or why it came with descriptors (only a `ReplyShared` brings
    /// one, its region).
    fn answer(&self, frame: frame::Frame<'_>, fds: Vec<OwnedFd>) -> Result<(), String> {
        let fd = match (frame.kind, <[OwnedFd; 1]>::try_from(fds)) {
            (Kind::ReplyShared, Ok([fd])) => Some(fd),
            (Kind::ReplyShared, Err(_)) => return Err("it sent a shared reply without exactly one region".to_owned()),
            (_, Err(fds)) if fds.is_empty() => None,
            (kind, _) => return Err(format!("it sent a descriptor with a {kind:?} frame")),
        };
        let accept = |expect: &Expect| match expect.accepts(frame.kind) {
            true => Ok((frame.kind, frame.payload.to_vec(), fd)),
            false => Err(format!(
                "it answered request {} ({expect:?}) with a {:?} frame",
                frame.id, frame.kind
            )),
        };
        self.table
            .answer(frame.id, &format!("a {:?} frame", frame.kind), accept)
    }
}

impl WorkerCause {
    /// How a reaped worker ended.
    fn of(status: ExitStatus) -> WorkerCause {
        match (status.signal(), status.code()) {
            (Some(signal), _) => WorkerCause::Signal(signal),
            (None, Some(code)) => WorkerCause::Exit(code),
            (None, None) => WorkerCause::Protocol(format!("it ended with status {status}")),
        }
    }
}

/// The plugins of a set that its worker holds.
#[derive(Debug)]
pub(crate) struct Remote {
    worker: Arc<Worker>,
    /// Their indices in the set's plugin list.
    hosted: Vec<usize>,
}

impl Isolated for Remote {
    fn hosts(&self, plugin: usize) -> bool {
        self.hosted.contains(&plugin)
    }

    fn pid(&self) -> u32 {
        self.worker.pid
    }

    fn call(&self, plugin: &Origin, pass: &str, input: &[u8]) -> Result<Vec<u8>, Error> {
        self.worker.call(plugin, pass, input)
    }
}

/// One load of an isolated host's plugin files: its worker, started at the first file.
#[derive(Debug)]
pub(crate) struct Isolating<'a> {
    isolation: &'a Isolation,
    worker: Option<Arc<Worker>>,
    hosted: Vec<usize>,
}

impl<'a> Isolating<'a> {
    fn new(isolation: &'a Isolation) -> Self {
        Isolating {
            isolation,
            worker: None,
            hosted: Vec::new(),
        }
    }

    fn load_one(
        &mut self,
        candidate: &mut Candidate,
        checks: &mut Checks,
        trust: TrustPolicy,
        set: &mut LoadedPlugins,
    ) -> Result<Vec<Error>, Error> {
        let origin = Origin::File(candidate.path.clone());
        let prepared = candidate.prepare(checks, trust)?;
        let failed = |cause| Error::WorkerFailed {
            plugin: origin.clone(),
            pass: None,
            cause: Box::new(cause),
        };
        let worker = match &self.worker {
            Some(worker) => worker.clone(),
            None => {
                let worker = Worker::start(self.isolation).map_err(failed)?;
                log::debug!(
                    "{}started worker process {} for an isolated set",
                    crate::log_scope::prefix(),
                    worker.pid()
                );
                self.worker.insert(worker).clone()
            }
        };
        // A sealed copy is in no directory: the worker gives the loader its descriptor itself.
        let sealed = prepared.provenance.sealed();
        let origin_dir = prepared.linkage.names_origin() && !sealed;
        let directory = match origin_dir {
            true => Some(directory_of(&candidate.resolved, &candidate.path)?),
            false => None,
        };
        // The libraries it needs, dependencies first, each with its directory: the worker maps
        // them before the plugin, as the host would.
        // (A dependency's `file` is its sealed copy where it has one, and comes alone.)
        for dependency in &prepared.dependencies {
            let directory = match dependency.sealed {
                false => Some(directory_of(&dependency.found, &candidate.path)?),
                true => None,
            };
            let request = DependRequest {
                found: dependency.found.clone(),
                dev: dependency.identity.dev,
                ino: dependency.identity.ino,
                sealed: dependency.sealed,
                loads: dependency.loads.clone(),
            };
            let fds: Vec<_> = std::iter::once(dependency.file.as_fd())
                .chain(directory.as_ref().map(AsFd::as_fd))
                .collect();
            let (kind, answer, _) = worker
                .request((Kind::Depend, &request.encode()), &fds, Expect::Depend, "")
                .map_err(load_deadline)
                .map_err(failed)?;
            if kind == Kind::MapFailed {
                let failure = MapFailure::decode(&answer).map_err(|reason| failed(worker.hostile(reason)))?;
                return Err(error_of(failure, &candidate.path));
            }
        }
        let metadata = &prepared.checked.metadata;
        let request = MapRequest {
            shown: candidate.path.clone(),
            resolved: candidate.resolved.clone(),
            dev: metadata.dev(),
            ino: metadata.ino(),
            strict: trust == TrustPolicy::Strict,
            origin: origin_dir,
            sealed,
            dependencies: prepared.dependencies.len() as u32,
            loads: prepared.linkage.loads.clone(),
        };
        // The worker maps the bytes a host that requires signatures verified: the checked
        // descriptor (its read lease, like each dependency's, is held by `prepared.provenance`
        // until the worker answers), or the sealed copy made of it.
        let file = prepared.provenance.source(prepared.checked.file()).as_fd();
        let fds: Vec<_> = std::iter::once(file)
            .chain(directory.as_ref().map(AsFd::as_fd))
            .collect();
        let (kind, answer, _) = worker
            .request((Kind::Map, &request.encode()), &fds, Expect::Map, "")
            .map_err(load_deadline)
            .map_err(failed)?;
        if kind == Kind::MapFailed {
            let failure = MapFailure::decode(&answer).map_err(|reason| failed(worker.hostile(reason)))?;
            return Err(error_of(failure, &candidate.path));
        }
        let mapped = Mapped::decode(&answer)
            .and_then(checked_names)
            .map_err(|reason| failed(worker.hostile(reason)))?;
        if let Some(manifest) = &prepared.manifest {
            let registered = mapped.passes.iter().map(|(n, i)| (n.as_str(), i.as_deref()));
            manifest.compare(&origin, (None, &mapped.name, &mapped.version), registered)?;
        }
        let at = set.plugins().len();
        let duplicates = set.add_remote(origin, (mapped.name, mapped.version), mapped.passes, prepared.pinning);
        self.hosted.push(at);
        Ok(duplicates)
    }

    /// Hands the worker to `set`, which unloads it with its other plugins; nothing if no
    /// plugin file was loaded.
    fn hand_over(mut self, set: &mut LoadedPlugins) {
        if let Some(worker) = self.worker.take() {
            let remote = Box::new(Remote {
                worker: worker.clone(),
                hosted: std::mem::take(&mut self.hosted),
            });
            let origin = Origin::Named(format!("isolated worker (process {})", worker.pid()));
            set.isolate(
                remote,
                Teardown::with_hooks(origin, vec![Box::new(move || worker.unload())]),
            );
        }
    }
}

/// The deadline of a load is its plugin's, not a pass's: a [`WorkerCause::Deadline`] of a
/// `Depend` or `Map` request names no pass.
fn load_deadline(cause: WorkerCause) -> WorkerCause {
    match cause {
        WorkerCause::Deadline { after, .. } => WorkerCause::Deadline {
            pass: String::new(),
            after,
        },
        cause => cause,
    }
}

/// The directory of `file` (a checked library of plugin `plugin`), opened as the loader's
/// layer opens it to name the file in it (`O_PATH`, symlinks in its path followed), for the
/// worker: the loader there is given the file by its name in that directory, so that its
/// `$ORIGIN` is the directory, and the worker opens no path of its own.
fn directory_of(file: &Path, plugin: &Path) -> Result<std::fs::File, Error> {
    use std::os::unix::fs::OpenOptionsExt;
    let failed = |reason: String| Error::Open {
        path: plugin.to_owned(),
        reason,
        cause: OpenCause::Isolation,
    };
    let directory = file
        .parent()
        .filter(|parent| !parent.as_os_str().is_empty())
        .ok_or_else(|| failed(format!("`{}` names no directory", file.display())))?;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(directory)
        .map_err(|e| {
            failed(format!(
                "cannot open `{}`, the directory of `{}`, for its worker process: {e}",
                directory.display(),
                file.display()
            ))
        })
}

/// Starts one load of an isolated set (the `Begin` of `HostBuilder::isolated`).
pub(crate) fn begin(isolation: &Isolation) -> Box<dyn Load + '_> {
    Box::new(Isolating::new(isolation))
}

impl Load for Isolating<'_> {
    fn isolate(&mut self) -> &mut dyn Isolate {
        self
    }

    fn finish(self: Box<Self>, set: &mut LoadedPlugins) {
        (*self).hand_over(set);
    }
}

impl Isolate for Isolating<'_> {
    /// Loads `candidate` into the worker: the checks a load makes before it maps a file
    /// (`Candidate::prepare`), then the checked descriptor sent to the worker, which maps it
    /// and registers its passes; they join `set` without callables (a lease calls them through
    /// the worker). Returns the failures, as the load policy takes them.
    fn load(
        &mut self,
        mut candidate: Candidate,
        checks: &mut Checks,
        trust: TrustPolicy,
        set: &mut LoadedPlugins,
    ) -> Vec<(Origin, Error)> {
        let origin = Origin::File(candidate.path.clone());
        match self.load_one(&mut candidate, checks, trust, set) {
            Ok(duplicates) => duplicates.into_iter().map(|e| (origin.clone(), e)).collect(),
            Err(error) => vec![(origin, error)],
        }
    }
}

/// A load that failed before its worker was handed to a set: the worker is unloaded here.
impl Drop for Isolating<'_> {
    fn drop(&mut self) {
        if let Some(worker) = self.worker.take() {
            worker.unload();
        }
    }
}

/// `mapped`, if its names are what a registration accepts (non-empty, at most
/// [`MAX_NAME_LEN`] bytes): the worker's registrar checked them; a worker that says otherwise
/// is hostile.
fn checked_names(mapped: Mapped) -> Result<Mapped, String> {
    let fits = |name: &str| !name.is_empty() && name.len() <= MAX_NAME_LEN;
    let names = mapped
        .passes
        .iter()
        .flat_map(|(name, interface)| [Some(name), interface.as_ref()]);
    if !fits(&mapped.name) || mapped.version.len() > MAX_NAME_LEN || !names.flatten().all(|name| fits(name)) {
        return Err("it reported a name no registration accepts".to_owned());
    }
    Ok(mapped)
}

/// The tags of [`MapFailure`]: which load error the worker met.
mod tag {
    pub(super) const OTHER: u32 = 0;
    pub(super) const ON_LOAD: u32 = 1;
    pub(super) const MISSING_ENTRY: u32 = 2;
    pub(super) const ABI: u32 = 3;
    pub(super) const INVALID_PLUGIN: u32 = 4;
    pub(super) const INVALID_PASS: u32 = 5;
    pub(super) const REGISTER: u32 = 6;
    pub(super) const LOADER: u32 = 7;
    pub(super) const DUPLICATE: u32 = 8;
}

/// What the worker sends for the load error `error` (`isolate::worker`).
pub(crate) fn failure_of(error: &Error) -> MapFailure {
    let (tag, number, reason, pass) = match error {
        Error::OnLoadFailed { code, .. } => (tag::ON_LOAD, *code, String::new(), ""),
        Error::MissingEntry { reason, .. } => (tag::MISSING_ENTRY, 0, reason.clone(), ""),
        Error::AbiMismatch { found, .. } => (tag::ABI, *found as i32, String::new(), ""),
        Error::InvalidPlugin { reason, .. } => (tag::INVALID_PLUGIN, 0, reason.clone(), ""),
        Error::InvalidPass { pass, reason, .. } => (tag::INVALID_PASS, 0, reason.clone(), pass.as_str()),
        Error::RegisterFailed { reason, .. } => (tag::REGISTER, 0, reason.clone(), ""),
        Error::Open {
            reason,
            cause: OpenCause::Loader,
            ..
        } => (tag::LOADER, 0, reason.clone(), ""),
        Error::DuplicatePass { pass, .. } => (tag::DUPLICATE, 0, String::new(), pass.as_str()),
        other => (tag::OTHER, 0, crate::error::WithSources(other).to_string(), ""),
    };
    MapFailure {
        tag,
        number,
        reason,
        pass: pass.to_owned(),
    }
}

/// The load error of plugin file `path` that the worker reported, as an in-process load
/// would have returned it.
fn error_of(failure: MapFailure, path: &Path) -> Error {
    let (path, plugin) = (path.to_owned(), Origin::File(path.to_owned()));
    let MapFailure {
        tag,
        number,
        reason,
        pass,
    } = failure;
    match tag {
        tag::ON_LOAD => Error::OnLoadFailed { path, code: number },
        tag::MISSING_ENTRY => Error::MissingEntry { path, reason },
        tag::ABI => Error::AbiMismatch {
            path,
            found: number as u32,
            expected: dylease_plugin::abi::DYLEASE_ABI_VERSION,
            declared: false,
        },
        tag::INVALID_PLUGIN => Error::InvalidPlugin { plugin, reason },
        tag::INVALID_PASS => Error::InvalidPass { plugin, pass, reason },
        tag::REGISTER => Error::RegisterFailed {
            plugin,
            reason,
            source: None,
        },
        tag::LOADER => Error::Open {
            path,
            reason,
            cause: OpenCause::Loader,
        },
        tag::DUPLICATE => Error::DuplicatePass {
            pass,
            first: plugin.clone(),
            second: plugin,
        },
        _ => Error::Open {
            path,
            reason: format!("its worker process could not load it: {reason}"),
            cause: OpenCause::Isolation,
        },
    }
}
