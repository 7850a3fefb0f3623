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
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use crate::error::{Error, OpenCause, Origin, WorkerCause};
use crate::isolate::config::{Isolation, Load};
use crate::isolate::frame::{
    self, Call, DependRequest, Kind, MAX_FRAME, MAX_MESSAGE, MAX_PAYLOAD, MapFailure, MapRequest, Mapped, Reply,
    SharedCall, SharedReply,
};
use crate::isolate::sys::{self, Channel};
use crate::isolate::table::{Outcome, Table};
use crate::isolate::zygote;
use crate::load::pipeline::Prepared;
use crate::load::{Isolate, Isolated, LoadedPlugins};
use crate::registrar::MAX_NAME_LEN;
use crate::registry::teardown::Teardown;
use crate::sync::{Arc, AtomicU64, Mutex, Ordering};
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
    /// The input regions of calls that are done, each with its output region, for the next
    /// large inputs (at most [`POOLED_REGIONS`], each of at most [`POOLED_CAPACITY`] bytes).
    regions: Mutex<Vec<Pooled>>,
    /// The number of the next region made for the pool (`SharedCall::region` and
    /// `SharedCall::output`).
    next_region: AtomicU64,
}

/// The most input regions a worker keeps for reuse: as many as calls its worker runs at once.
const POOLED_REGIONS: usize = crate::isolate::frame::THREADS;

/// The largest input region kept for reuse; a larger input travels in a region of its own,
/// freed after its call.
const POOLED_CAPACITY: usize = 4 << 20;

/// An input region to reuse, and its number for the worker; and the output region that
/// travels with it (of the same capacity), and its number, unless none could be made.
#[derive(Debug)]
struct Pooled {
    number: u64,
    region: sys::InputRegion,
    output: Option<(u64, sys::OutputRegion)>,
}

/// The region of one call's input.
enum Input {
    /// A reused region (its capacity may exceed the input): back to the pool once answered.
    Pooled(Pooled),
    /// A region of its own, holding exactly the input, its bytes sealed.
    Once(std::fs::File),
}

/// What the callers and the reader thread share: the table of requests in flight, waiting
/// for answers of the kinds their [`Expect`] accepts (the frame's kind and payload, and the
/// descriptor that came with it: a `ReplyShared`'s region); the worker's end is its status
/// if it was reaped. And the worker's process.
#[derive(Debug)]
struct Shared {
    table: Table<Expect, Answer, Option<ExitStatus>>,
    child: sys::Process,
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
            (Expect::Depend, Kind::Held | Kind::MapFailed | Kind::Skipped)
                | (Expect::Map, Kind::Mapped | Kind::MapFailed | Kind::Skipped)
                | (Expect::Call, Kind::Reply | Kind::ReplyShared | Kind::CallFailed)
        )
    }
}

/// Runs `job` on the process's one spawning thread, started on first use and never ended:
/// a process it spawns gets `SIGKILL` when the thread that spawned it ends
/// (`PR_SET_PDEATHSIG` is per thread), and its host's threads come and go. A child `fork`ed
/// from the host has none of its parent's threads: it starts a spawning thread of its own.
/// Waits at most `bound` for the job to be done.
fn on_spawning_thread<T: Send + 'static>(
    bound: Duration,
    job: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<T> {
    type Job = Box<dyn FnOnce() + Send>;
    /// The process that started the thread, and the queue of its jobs.
    static SPAWNER: std::sync::Mutex<Option<(u32, Option<std::sync::mpsc::Sender<Job>>)>> = std::sync::Mutex::new(None);
    let (answer, answered) = std::sync::mpsc::channel();
    let job: Job = Box::new(move || drop(answer.send(job())));
    let sent = {
        let mut spawner = SPAWNER.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let process = std::process::id();
        if !matches!(&*spawner, Some((started_by, _)) if *started_by == process) {
            let (jobs, queue) = std::sync::mpsc::channel::<Job>();
            let started = std::thread::Builder::new()
                .name("dylease-spawner".into())
                .spawn(move || queue.into_iter().for_each(|job| job()));
            *spawner = Some((process, started.ok().map(|_| jobs)));
        }
        spawner
            .as_ref()
            .and_then(|(_, jobs)| jobs.as_ref())
            .map(|jobs| jobs.send(job))
    };
    match sent {
        Some(Ok(())) => answered.recv_timeout(bound).map_err(|e| match e {
            std::sync::mpsc::RecvTimeoutError::Timeout => std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("the spawning thread did not answer within {bound:?}"),
            ),
            std::sync::mpsc::RecvTimeoutError::Disconnected => std::io::Error::other("the spawning thread ended"),
        }),
        _ => Err(std::io::Error::other("the spawning thread could not be started")),
    }
}

impl Worker {
    /// Starts a worker for `isolation` and greets it; `Err` with why it could not.
    pub(crate) fn start(isolation: &Isolation) -> Result<Arc<Worker>, WorkerCause> {
        let start_failed = |what: &str, e: std::io::Error| WorkerCause::Start(format!("{what}: {e}"));
        let (channel, theirs) = Channel::pair().map_err(|e| start_failed("cannot make its channel", e))?;
        Worker::hello(&channel, isolation.deadline)?;
        let passthrough = isolation.ld_passthrough;
        // The start is bounded by the call deadline, but never below a few seconds: a busy
        // machine may keep a spawn waiting longer than a short deadline.
        let bound = isolation.deadline.max(zygote::LEAST_BOUND);
        // A worker of the host's own program is forked by its zygote; the operator's program
        // is run for each worker.
        let spawn = move |program: &Path, theirs, passthrough, role| {
            let program = program.to_owned();
            on_spawning_thread(bound, move || sys::spawn(&program, theirs, passthrough, role))
                .and_then(|spawned| spawned)
        };
        let child = match &isolation.command {
            None => zygote::fork(theirs, passthrough, bound, spawn),
            Some(program) => spawn(program, theirs, passthrough, sys::Role::Worker),
        }
        .map_err(|e| start_failed(&format!("cannot run `{}`", isolation.program().display()), e))?;
        let pid = child.id();
        let shared = Arc::new(Shared {
            table: Table::new(),
            child,
        });
        let channel = Arc::new(channel);
        let worker = Worker {
            channel,
            shared,
            pid,
            deadline: isolation.deadline,
            reader: Mutex::new(None),
            regions: Mutex::new(Vec::new()),
            next_region: AtomicU64::new(1),
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

    /// The handshake's first half, sent on `channel` before the worker starts (so that it
    /// finds the greeting waiting): `Hello`, naming the protocol this host speaks; and the
    /// channel's bounds for the handshake, `deadline` each way.
    fn hello(channel: &Channel, deadline: Duration) -> Result<(), WorkerCause> {
        let protocol = |reason: String| WorkerCause::Protocol(format!("in the handshake, {reason}"));
        let hello =
            frame::encode(Kind::Hello, 0, &frame::greeting(std::process::id())).map_err(|_| protocol("".into()))?;
        channel
            .set_timeouts(Some(deadline), Some(deadline))
            .map_err(|e| protocol(format!("the channel refused its bounds: {e}")))?;
        channel
            .send(&hello, &[])
            .map_err(|e| protocol(format!("the greeting could not be sent: {e}")))
    }

    /// The handshake's second half, bounded by the call deadline: the worker's `Welcome`,
    /// naming the protocol it speaks and its own process id.
    fn greet(&self) -> Result<(), WorkerCause> {
        let protocol = |reason: String| WorkerCause::Protocol(format!("in the handshake, {reason}"));
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

    /// Sends a request without waiting for its answer: its id, for [`wait`](Worker::wait).
    fn open(
        &self,
        (kind, payload): (Kind, &[u8]),
        fds: &[std::os::fd::BorrowedFd<'_>],
        expect: Expect,
    ) -> Result<u64, WorkerCause> {
        let frame = |id| {
            frame::encode(kind, id, payload)
                .map_err(|len| WorkerCause::Protocol(format!("a request of {len} bytes, more than a frame carries")))
        };
        // A failed send (a worker that died, or stopped reading past the deadline) is seen
        // in the wait, as in `request`.
        self.shared.table.open(expect, |id| {
            if let Err(e) = self.channel.send(&frame(id)?, fds) {
                log::debug!("the request to worker {} could not be sent: {e}", self.pid);
            }
            Ok(())
        })
    }

    /// Waits, at most the call deadline from now, for the answer of the request `id` that
    /// [`open`](Worker::open) sent. `what` names the request for a deadline's error.
    fn wait(&self, id: u64, what: &str) -> Result<Answer, WorkerCause> {
        let expired = || WorkerCause::Deadline {
            pass: what.to_owned(),
            after: self.deadline,
        };
        match self
            .shared
            .table
            .wait(id, Instant::now().checked_add(self.deadline), expired)
        {
            Outcome::Answered(answer) => Ok(answer),
            Outcome::Failed(cause) => Err(cause),
            Outcome::Expired(cause) => {
                self.shared.kill();
                Err(cause)
            }
        }
    }

    /// Sends a frame of `kind` with no payload that the worker does not answer (`Resume`).
    fn tell(&self, kind: Kind) -> Result<(), WorkerCause> {
        let frame = frame::encode(kind, 0, &[]).map_err(|_| WorkerCause::Protocol("an empty frame".to_owned()))?;
        if let Err(e) = self.channel.send(&frame, &[]) {
            log::debug!("a {kind:?} to worker {} could not be sent: {e}", self.pid);
        }
        Ok(())
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
        // The pooled regions of an answered call, back to the pool once its output is read.
        let mut answered = None;
        let (kind, answer, fd) = if Call::encoded_len(pass, input) <= MAX_PAYLOAD {
            self.request((Kind::Call, &Call { pass, input }.encode()), &[], Expect::Call, pass)
        } else {
            if input.len() > MAX_MESSAGE {
                return Err(refused(format!(
                    "its input of {} bytes is more than an isolated call carries ({MAX_MESSAGE} bytes); split the \
                     input, or call the pass in an ordinary set",
                    input.len()
                )));
            }
            let region = self
                .input_region(input)
                .map_err(|e| refused(format!("its input could not be put in a shared region: {e}")))?;
            let (fd, number, output) = match &region {
                Input::Pooled(pooled) => (pooled.region.file().as_fd(), pooled.number, pooled.output.as_ref()),
                Input::Once(file) => (file.as_fd(), 0, None),
            };
            let request = SharedCall {
                pass,
                len: input.len() as u64,
                region: number,
                output: output.map_or(0, |(number, _)| *number),
            };
            let fds: &[_] = match output {
                Some((_, output)) => &[fd, output.file().as_fd()],
                None => &[fd],
            };
            let answer = self.request((Kind::CallShared, &request.encode()), fds, Expect::Call, pass);
            // The worker reads a region only until it answers, and writes its output region
            // only before: an answered call's regions can take the next call once its
            // output is read. One whose call failed may still be used, and is dropped.
            if let (Ok(_), Input::Pooled(pooled)) = (&answer, region) {
                answered = Some(pooled);
            }
            answer
        }
        .map_err(failed)?;
        let read = match kind {
            Kind::CallFailed => {
                let reason = String::from_utf8_lossy(&answer).into_owned();
                Err(refused(format!("the worker refused the call: {reason}")))
            }
            Kind::ReplyShared => {
                // No region with the reply: the output is in the one the call brought.
                let output = answered.as_ref().and_then(|pooled| pooled.output.as_ref());
                let read = SharedReply::decode(&answer).and_then(|reply| match (fd, output) {
                    (None, Some((_, output))) => Ok((reply.status, output.read(reply.len)?)),
                    (fd, _) => Ok((reply.status, read_region(fd, reply.len)?)),
                });
                read.map_err(|reason| failed(self.hostile(reason)))
            }
            _ => Reply::decode(&answer)
                .map(|reply| (reply.status, reply.output.to_vec()))
                .map_err(|reason| failed(self.hostile(reason))),
        };
        if let Some(pooled) = answered {
            let mut pool = self.regions.lock();
            if pool.len() < POOLED_REGIONS {
                pool.push(pooled);
            }
        }
        let (status, output) = read?;
        match status {
            0 => Ok(output),
            status => Err(Error::PassFailed {
                plugin: plugin.clone(),
                pass: pass.to_owned(),
                status,
            }),
        }
    }

    /// A region holding `input` (more than a frame carries) for the worker: a pooled one that
    /// fits, or a new one for the pool (its capacity `input`'s length rounded up to a power
    /// of two), or, for an input larger than [`POOLED_CAPACITY`] or a kernel that cannot seal
    /// a reused region, a sealed region of its own.
    fn input_region(&self, input: &[u8]) -> std::io::Result<Input> {
        if input.len() <= POOLED_CAPACITY {
            let pooled = {
                let mut pool = self.regions.lock();
                let fitting = pool
                    .iter()
                    .enumerate()
                    .filter(|(_, pooled)| pooled.region.capacity() >= input.len())
                    .min_by_key(|(_, pooled)| pooled.region.capacity())
                    .map(|(at, _)| at);
                fitting.map(|at| pool.swap_remove(at))
            };
            let pooled = pooled.or_else(|| {
                let capacity = input.len().next_power_of_two();
                let made = sys::InputRegion::new(capacity);
                let made = made.inspect_err(|e| log::debug!("an input region to reuse could not be made: {e}"));
                made.ok().map(|region| Pooled {
                    number: self.next_region.fetch_add(1, Ordering::Relaxed),
                    region,
                    // Without one, a large output comes in a region of the worker's per call.
                    output: sys::OutputRegion::new(capacity)
                        .inspect_err(|e| log::debug!("an output region to reuse could not be made: {e}"))
                        .ok()
                        .map(|output| (self.next_region.fetch_add(1, Ordering::Relaxed), output)),
                })
            });
            if let Some(mut pooled) = pooled
                && pooled.region.write(input)
            {
                return Ok(Input::Pooled(pooled));
            }
        }
        sys::sealed_region(input).map(Input::Once)
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
        // No call is made after the unload: the regions kept for them go.
        self.regions.lock().clear();
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
    /// Sends the worker `SIGKILL` (nothing if it was reaped).
    fn kill(&self) {
        self.child.kill();
    }

    /// Reaps the worker, bounded: waits [`REAP`] for it to exit, kills it, waits [`REAP`]
    /// again; `None` if it could not be reaped (logged by the caller).
    fn reap(&self) -> Option<ExitStatus> {
        let started = Instant::now();
        let mut killed = false;
        // A worker whose channel closed is usually exiting: its exit wakes the wait on its
        // process descriptor; without one, its status is looked for after short sleeps.
        let mut pause = Duration::from_micros(20);
        let mut woken = false;
        loop {
            match self.child.try_wait() {
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
            let phase = if killed { 2 * REAP } else { REAP };
            // A wake without an exit to reap (an interrupted wait) sleeps before the next, so
            // that no wait turns into a spin.
            woken = match woken {
                false => self.child.wait_exit(phase.saturating_sub(waited)),
                true => None,
            }
            .unwrap_or_else(|| {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(20));
                false
            });
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
            // None: the output is in the region its call brought (checked by the caller).
            (_, Err(fds)) if fds.is_empty() => None,
            (Kind::ReplyShared, Err(_)) => return Err("it sent a shared reply with more than one region".to_owned()),
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

/// One load of an isolated host's plugin files: its worker, started at the first file, and
/// the files handed over whose outcome the load has not taken yet.
///
/// Every file's requests (its `Depend`s, then its `Map`) are sent as soon as it is handed
/// over and checked, without waiting for the answers of those before it: the worker maps one
/// while the host checks the next, and no round trip is waited for in between. The answers
/// are read in order, as the load takes each outcome. A file the host's checks refuse stops
/// the sending there (none after it is sent before its failure is taken: under a strict
/// policy, none of them would run in-process either); so does a failure in the worker, which
/// then answers every request after the failed one `Skipped`, until the host, having read
/// them all, sends `Resume` and those files again.
#[derive(Debug)]
pub(crate) struct Isolating<'a> {
    isolation: &'a Isolation,
    worker: Option<Arc<Worker>>,
    hosted: Vec<usize>,
    /// The files handed over whose outcome was not taken, first handed over first.
    queue: std::collections::VecDeque<Entry>,
    /// Whether the worker answers `Skipped`: a request of this load failed there, and no
    /// `Resume` was sent since.
    skipping: bool,
}

/// A plugin file of a load, from its handing over to its outcome.
#[derive(Debug)]
enum Entry {
    /// Handed over, not checked yet.
    Waiting(Candidate),
    /// Checked, not sent (or sent and skipped by the worker: to be sent again).
    Prepared(Box<(Candidate, Prepared)>),
    /// Sent: the ids of its requests, to read the answers of.
    Sent(Box<Sent>),
    /// Failed before it was sent.
    Failed(Origin, Error),
}

/// A plugin file whose requests were sent.
#[derive(Debug)]
struct Sent {
    candidate: Candidate,
    prepared: Prepared,
    /// Its `Depend`s, in order, then its `Map`.
    requests: Vec<u64>,
}

impl<'a> Isolating<'a> {
    fn new(isolation: &'a Isolation) -> Self {
        Isolating {
            isolation,
            worker: None,
            hosted: Vec::new(),
            queue: std::collections::VecDeque::new(),
            skipping: false,
        }
    }

    /// Checks and sends the files handed over, first to last, up to the first that fails
    /// (it is left for its outcome to be taken: no file after it is sent before that).
    fn send_ahead(&mut self, checks: &mut Checks, trust: TrustPolicy) {
        for at in 0..self.queue.len() {
            match self.queue.get(at) {
                Some(Entry::Sent(_)) => continue,
                Some(Entry::Failed(..)) | None => return,
                Some(Entry::Waiting(_) | Entry::Prepared(_)) => {}
            }
            let next = match self.queue.remove(at) {
                Some(Entry::Waiting(mut candidate)) => match candidate.prepare(checks, trust) {
                    Ok(prepared) => self.transmit(candidate, prepared, trust),
                    Err(error) => Entry::Failed(Origin::File(candidate.path), error),
                },
                Some(Entry::Prepared(prepared)) => {
                    let (candidate, prepared) = *prepared;
                    self.transmit(candidate, prepared, trust)
                }
                Some(sent_or_failed) => sent_or_failed,
                None => return,
            };
            let failed = matches!(next, Entry::Failed(..));
            self.queue.insert(at, next);
            if failed {
                return;
            }
        }
    }

    /// Sends the requests of the checked file `candidate` (starting the worker at the first
    /// file): `Entry::Sent`, or `Entry::Failed` with why they could not be sent.
    fn transmit(&mut self, candidate: Candidate, prepared: Prepared, trust: TrustPolicy) -> Entry {
        match self.send_requests(&candidate, &prepared, trust) {
            Ok(requests) => Entry::Sent(Box::new(Sent {
                candidate,
                prepared,
                requests,
            })),
            Err(error) => Entry::Failed(Origin::File(candidate.path), error),
        }
    }

    fn send_requests(
        &mut self,
        candidate: &Candidate,
        prepared: &Prepared,
        trust: TrustPolicy,
    ) -> Result<Vec<u64>, Error> {
        let failed = |cause| Error::WorkerFailed {
            plugin: Origin::File(candidate.path.clone()),
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
        if std::mem::take(&mut self.skipping) {
            worker.tell(Kind::Resume).map_err(failed)?;
        }
        // A sealed copy is in no directory: the worker gives the loader its descriptor itself.
        let sealed = prepared.provenance.sealed();
        let origin_dir = prepared.linkage.names_origin() && !sealed;
        let directory = match origin_dir {
            true => Some(directory_of(&candidate.resolved, &candidate.path)?),
            false => None,
        };
        let mut requests = Vec::with_capacity(prepared.dependencies.len() + 1);
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
            let id = worker.open((Kind::Depend, &request.encode()), &fds, Expect::Depend);
            requests.push(id.map_err(failed)?);
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
        let id = worker.open((Kind::Map, &request.encode()), &fds, Expect::Map);
        requests.push(id.map_err(failed)?);
        Ok(requests)
    }

    /// The outcome of the first file handed over whose outcome was not taken (sending it,
    /// and those after it, if a failure stopped the sending before them).
    fn take(&mut self, checks: &mut Checks, trust: TrustPolicy, set: &mut LoadedPlugins) -> Vec<(Origin, Error)> {
        self.send_ahead(checks, trust);
        match self.queue.pop_front() {
            Some(Entry::Sent(sent)) => {
                let origin = Origin::File(sent.candidate.path.clone());
                match self.receive(*sent, set) {
                    Ok(duplicates) => duplicates.into_iter().map(|e| (origin.clone(), e)).collect(),
                    Err(error) => vec![(origin, error)],
                }
            }
            Some(Entry::Failed(origin, error)) => vec![(origin, error)],
            // `send_ahead` leaves the first entry sent or failed; there is one per `send`.
            Some(Entry::Waiting(_) | Entry::Prepared(_)) | None => Vec::new(),
        }
    }

    /// Reads the answers of `sent`'s requests and adds the plugin the worker mapped to `set`;
    /// its duplicate passes are returned. After a failure the worker skips what was sent
    /// after it: those answers are read here too, and those files made ready to be sent
    /// again.
    fn receive(&mut self, sent: Sent, set: &mut LoadedPlugins) -> Result<Vec<Error>, Error> {
        let Sent {
            candidate,
            prepared,
            requests,
        } = sent;
        let origin = Origin::File(candidate.path.clone());
        let failed = |cause| Error::WorkerFailed {
            plugin: origin.clone(),
            pass: None,
            cause: Box::new(cause),
        };
        let worker = self.worker.clone().expect("a file was sent, so its worker started");
        let mut failure = None;
        let mut mapped = None;
        for id in requests {
            let (kind, answer, _) = self.answer(&worker, id).map_err(failed)?;
            match kind {
                Kind::MapFailed if failure.is_none() => {
                    let decoded = MapFailure::decode(&answer).map_err(|reason| failed(worker.hostile(reason)))?;
                    failure = Some(error_of(decoded, &candidate.path));
                }
                Kind::Mapped => mapped = Some(answer),
                _ => {}
            }
        }
        if let Some(error) = failure {
            self.requeue_skipped(&worker);
            return Err(error);
        }
        let Some(answer) = mapped else {
            return Err(failed(
                worker.hostile("it answered a plugin's load with no Mapped".to_owned()),
            ));
        };
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

    /// The answer of request `id`, which must agree with what the worker does after a
    /// failure: after a `MapFailed`, `Skipped` and only that until `Resume`; a worker that
    /// says otherwise is hostile. A `Depend` is answered `Held` or `MapFailed`, a `Map`
    /// `Mapped` or `MapFailed` (the table checks the kinds).
    fn answer(&mut self, worker: &Worker, id: u64) -> Result<Answer, WorkerCause> {
        let answer = worker.wait(id, "").map_err(load_deadline)?;
        let skipped = answer.0 == Kind::Skipped;
        if skipped != self.skipping {
            return Err(worker.hostile(match skipped {
                true => format!("it answered request {id} with a Skipped frame, though no load failed"),
                false => format!(
                    "it answered request {id} with a {:?} frame after a load failed, not Skipped",
                    answer.0
                ),
            }));
        }
        self.skipping |= answer.0 == Kind::MapFailed;
        Ok(answer)
    }

    /// After a failure: reads the answers (all `Skipped`) of every file sent after it, and
    /// makes those files ready to be sent again, after a `Resume`. A file whose answers do
    /// not come (the worker failed meanwhile) fails with the worker's cause.
    fn requeue_skipped(&mut self, worker: &Worker) {
        for at in 0..self.queue.len() {
            let entry = match self.queue.remove(at) {
                Some(Entry::Sent(sent)) => {
                    let Sent {
                        candidate,
                        prepared,
                        requests,
                    } = *sent;
                    match requests
                        .into_iter()
                        .try_for_each(|id| self.answer(worker, id).map(drop))
                    {
                        Ok(()) => Entry::Prepared(Box::new((candidate, prepared))),
                        Err(cause) => {
                            let origin = Origin::File(candidate.path);
                            let error = Error::WorkerFailed {
                                plugin: origin.clone(),
                                pass: None,
                                cause: Box::new(cause),
                            };
                            Entry::Failed(origin, error)
                        }
                    }
                }
                Some(other) => other,
                None => return,
            };
            self.queue.insert(at, entry);
        }
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
    /// Takes `candidate` for the worker: checked (`Candidate::prepare`, the checks a load
    /// makes before it maps a file) and its checked descriptor sent to the worker, which maps
    /// it and registers its passes, as soon as every file before it is sent.
    fn send(&mut self, candidate: Candidate, checks: &mut Checks, trust: TrustPolicy) {
        self.queue.push_back(Entry::Waiting(candidate));
        self.send_ahead(checks, trust);
    }

    /// The outcome of the first file not taken: its passes join `set` without callables (a
    /// lease calls them through the worker). Returns the failures, as the load policy takes
    /// them.
    fn load(&mut self, checks: &mut Checks, trust: TrustPolicy, set: &mut LoadedPlugins) -> Vec<(Origin, Error)> {
        self.take(checks, trust, set)
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
