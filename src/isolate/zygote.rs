//! The zygote: the process that forks an isolated host's workers.
//!
//! A worker of the host's own program (no `worker_command`) is not started by `exec` of
//! that program: the program's load and dynamic linking, and its libraries' constructors,
//! took most of an isolated set's cold cycle (about 1.1 ms of 2.8 ms for a small program,
//! and grow with the program). The first such worker of a host process starts a zygote
//! instead, the same program in the zygote's role (`sys::spawn` with `Role::Zygote`, from
//! the process's spawning thread), which then forks every worker on request: a fork of a
//! process that ran nothing but the C runtime's start and the early hook. It forks one
//! worker ahead (a `sys::Spare`, which waits for its channel) whenever it has none and no
//! request waits, so that a start is a hand-over of the channel, the fork off its path. So
//! the zygote is
//! the host program as it was executed then: the host's credentials, current directory and
//! environment of that moment (less its `LD_*` variables unless passed through, one zygote
//! per choice), its limits, cgroup and standard streams; a worker gets the same, and its own
//! channel, closing everything else. A host whose credentials, directory or environment
//! changed since gets a new zygote for its next worker (`Context`).
//!
//! A forked worker is the zygote's child, not the host's: the host reaps it through the
//! zygote (a `Reap` request, answered with its status, asked only once its process
//! descriptor says it ended) and signals it through its process descriptor. The zygote
//! runs one thread and serves one request at a time; it dies with the host's spawning
//! thread, and its workers die with it (`PR_SET_PDEATHSIG` both). A host process that
//! `fork`s gets a zygote of its own for the child's workers (the parent's is not the
//! child's to share).
//!
//! The zygote runs no plugin code (a worker maps its plugins after the fork, and holds no
//! descriptor of the zygote's channel): its answers are the host program's own, not a
//! worker's hostile input. The protocol is this module's own, on a `SOCK_SEQPACKET` pair: a request is 5 or 9 bytes
//! (`F` and a sequence number, with the new worker's channel as the one descriptor; `R`, a
//! sequence number and a process id), an answer 9 (its kind, the request's number, a
//! value). An answer to another number (a late answer to a request whose wait ran out) is
//! skipped; a zygote that does not answer within its bound, or answers what it was not
//! asked, serves no more forks: the next start gets a new zygote.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::isolate::sys::{self, Channel, Process, Role};
use crate::sync::{Arc, Mutex};

/// The least bound of a request to the zygote (a fork, a reap) and of a spawn; a host's
/// longer call deadline is used when it has one.
pub(crate) const LEAST_BOUND: Duration = Duration::from_secs(10);

/// How long the zygote waits for a worker to end when asked to reap it, before it answers
/// that it runs: the host asks as soon as the worker's channel closed, which is just before
/// its exit ends, so the answer usually waits for the exit rather than the host for a second
/// answer. Other requests wait meanwhile; a worker that runs on is waited for by the host
/// (its process descriptor) before it asks again.
const REAP_WAIT: Duration = Duration::from_millis(20);

/// The kinds of request and answer.
const FORK: u8 = b'F';
const REAP: u8 = b'R';
/// Answers of a reap: the worker runs, or ended (with its raw status).
const RUNNING: u8 = b'r';
const ENDED: u8 = b'x';
/// An answer that the request failed (with an `errno`).
const FAILED: u8 = b'E';

/// What a worker would take from the host at its start that a zygote fixed at its own: the
/// host's credentials, its current directory and its environment. A zygote forks workers
/// while the host's are still those it started with; after a change (a server that drops its
/// privileges, a `chdir`, a `setenv`), the next worker comes from a new zygote.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Context {
    credentials: Vec<u32>,
    /// The device and inode of the current directory, if it can be read.
    directory: Option<(u64, u64)>,
    /// A digest of the environment, every variable in order.
    environment: u64,
}

impl Context {
    /// This process's context now.
    fn now() -> Context {
        use std::hash::{Hash, Hasher};
        use std::os::unix::fs::MetadataExt;
        let mut environment = std::collections::hash_map::DefaultHasher::new();
        for variable in std::env::vars_os() {
            variable.hash(&mut environment);
        }
        Context {
            credentials: sys::credentials(),
            directory: std::fs::metadata(".").ok().map(|m| (m.dev(), m.ino())),
            environment: environment.finish(),
        }
    }
}

/// The host's side of one zygote.
struct Zygote {
    channel: Mutex<Channel>,
    process: Process,
    /// The host process that started it: a forked child of that host does not use it.
    host: u32,
    ld_passthrough: bool,
    /// The host's context when it started.
    context: Context,
    /// Set when it failed a request: it forks no more workers (it still reaps its own).
    retired: AtomicBool,
    next: AtomicU32,
}

/// The zygotes of this process that serve: at most one per `ld_passthrough` choice. (A
/// retired one lives on as long as a worker of it does: each worker's `Process` holds it.)
static ZYGOTES: std::sync::Mutex<Vec<Arc<Zygote>>> = std::sync::Mutex::new(Vec::new());

/// Starts a worker of the host's own program on `theirs`, its end of its channel, by this
/// process's zygote for `ld_passthrough` (started first, by `spawn`, if there is none that
/// serves): the worker's process. `bound` bounds each request.
pub(crate) fn fork(
    theirs: OwnedFd,
    ld_passthrough: bool,
    bound: Duration,
    spawn: impl Fn(&Path, OwnedFd, bool, Role) -> io::Result<Process>,
) -> io::Result<Process> {
    let zygote = serving(ld_passthrough, &spawn)?;
    match zygote.fork(&theirs, bound) {
        Ok(process) => Ok(process),
        Err(e) => {
            // Once more: by a new zygote if this one was retired (it did not answer, or not
            // as asked), else by the same (its fork failed).
            log::debug!(
                "the zygote {} failed a fork ({e}): starting another",
                zygote.process.id()
            );
            serving(ld_passthrough, &spawn)?.fork(&theirs, bound)
        }
    }
}

/// This process's serving zygote for `ld_passthrough`, started if there is none.
fn serving(
    ld_passthrough: bool,
    spawn: &impl Fn(&Path, OwnedFd, bool, Role) -> io::Result<Process>,
) -> io::Result<Arc<Zygote>> {
    let host = std::process::id();
    let context = Context::now();
    let mut zygotes = ZYGOTES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    // Those another process started (this is a forked child of it) are not this one's,
    // retired ones serve no more, and those started in another context than the host's now
    // would give a worker what the host no longer has.
    zygotes
        .retain(|zygote| zygote.host == host && !zygote.retired.load(Ordering::Acquire) && zygote.context == context);
    if let Some(zygote) = zygotes.iter().find(|zygote| zygote.ld_passthrough == ld_passthrough) {
        return Ok(zygote.clone());
    }
    let (channel, theirs) = Channel::pair()?;
    let process = spawn(Path::new("/proc/self/exe"), theirs, ld_passthrough, Role::Zygote)?;
    let zygote = Arc::new(Zygote {
        channel: Mutex::new(channel),
        process,
        host,
        ld_passthrough,
        context,
        retired: AtomicBool::new(false),
        next: AtomicU32::new(1),
    });
    zygotes.push(zygote.clone());
    Ok(zygote)
}

impl Zygote {
    /// Asks for a worker on `theirs`: its process.
    fn fork(self: &Arc<Self>, theirs: &OwnedFd, bound: Duration) -> io::Result<Process> {
        let (kind, value) = self.request(FORK, &[], &[theirs.as_fd()], bound)?;
        match kind {
            FORK if value > 0 => {
                // The worker's process keeps its zygote: a zygote ends (and its workers with it)
                // only once no worker of it is left to reap.
                let zygote = self.clone();
                let reaper: sys::Reaper = std::sync::Arc::new(move |pid| zygote.reap(pid));
                Process::forked(value as u32, reaper)
            }
            FAILED => Err(io::Error::from_raw_os_error(value)),
            _ => Err(self.retire(format!("it answered a fork with {kind:?} {value}"))),
        }
    }

    /// Reaps its worker `pid`, which has ended. A zygote that ended first took its workers
    /// with it (`PR_SET_PDEATHSIG`): the worker is reported killed by `SIGKILL`, as its death
    /// signal kills it (its own status, had it ended before, is lost with the zygote).
    fn reap(&self, pid: u32) -> io::Result<Option<ExitStatus>> {
        let answer = self.request(REAP, &pid.to_le_bytes(), &[], LEAST_BOUND);
        if let Err(e) = &answer
            && matches!(self.process.try_wait(), Ok(Some(_)))
        {
            log::debug!("the zygote of worker {pid} ended before it ({e}): the worker was killed with it");
            return Ok(Some(ExitStatus::from_raw(libc::SIGKILL)));
        }
        match answer? {
            (RUNNING, _) => Ok(None),
            (ENDED, raw) => Ok(Some(ExitStatus::from_raw(raw))),
            (FAILED, errno) => Err(io::Error::from_raw_os_error(errno)),
            (kind, value) => Err(self.retire(format!("it answered a reap with {kind:?} {value}"))),
        }
    }

    /// Sends a request of `kind` (its number, then `rest`) with `fds`, and waits at most
    /// `bound` for its answer: the answer's kind and value. Every failure retires the zygote.
    fn request(
        &self,
        kind: u8,
        rest: &[u8],
        fds: &[std::os::fd::BorrowedFd<'_>],
        bound: Duration,
    ) -> io::Result<(u8, i32)> {
        let number = self.next.fetch_add(1, Ordering::Relaxed);
        let message = [&[kind][..], &number.to_le_bytes(), rest].concat();
        let channel = self.channel.lock();
        let started = Instant::now();
        let answer = (|| {
            channel.set_timeouts(Some(bound), Some(bound))?;
            channel.send(&message, fds)?;
            let mut buffer = [0u8; 16];
            loop {
                let left = bound.saturating_sub(started.elapsed());
                if left.is_zero() {
                    return Err(io::Error::new(io::ErrorKind::TimedOut, "no answer within its bound"));
                }
                channel.set_timeouts(Some(left), Some(bound))?;
                let received = channel.recv(&mut buffer)?;
                match (received.len, &buffer[..received.len.min(buffer.len())]) {
                    (0, _) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "it closed its channel")),
                    (9, [kind, n @ .., _, _, _, _]) if received.fds.is_empty() && !received.truncated => {
                        let answered = u32::from_le_bytes([n[0], n[1], n[2], n[3]]);
                        let value = i32::from_le_bytes([buffer[5], buffer[6], buffer[7], buffer[8]]);
                        if answered == number {
                            return Ok((*kind, value));
                        }
                        // A late answer to an earlier request whose wait ran out.
                    }
                    _ => return Err(io::Error::other("it sent a message that is no answer")),
                }
            }
        })();
        answer.map_err(|e| self.retire(format!("{e}")))
    }

    /// Serves no more forks, for `why`: an `Err` saying so.
    fn retire(&self, why: String) -> io::Error {
        if !self.retired.swap(true, Ordering::AcqRel) {
            log::debug!("the zygote {} of isolated workers is retired: {why}", self.process.id());
        }
        io::Error::other(format!("the zygote of isolated workers failed: {why}"))
    }
}

impl Drop for Zygote {
    /// Ends a zygote no worker needs any more (a retired one), and reaps it, bounded. Not in a
    /// forked child of the host that started it: that zygote is not the child's.
    fn drop(&mut self) {
        if self.host != std::process::id() {
            return;
        }
        self.process.kill();
        let _ = self.process.wait_exit(LEAST_BOUND);
        if !matches!(self.process.try_wait(), Ok(Some(_))) {
            log::warn!(
                "the zygote {} of isolated workers could not be reaped",
                self.process.id()
            );
        }
    }
}

/// Starts a worker on `channel`: by `spare` if there is one that takes it, else by a fork.
fn start(channel: OwnedFd, spare: Option<sys::Spare>) -> io::Result<u32> {
    match spare.map(|spare| spare.start(&channel)) {
        Some(Ok(pid)) => Ok(pid),
        _ => sys::fork_worker(channel),
    }
}

/// The zygote process: serves its host's requests on `channel` until the host closes it (or
/// sends what is no request); returns its exit status.
pub(crate) fn serve(channel: Channel) -> i32 {
    let mut buffer = [0u8; 16];
    // The next worker, forked ahead once an answer is sent (off the path of any start).
    let mut spare: Option<sys::Spare> = None;
    loop {
        if spare.is_none() {
            spare = sys::Spare::fork().ok();
        }
        let received = match channel.recv(&mut buffer) {
            Ok(received) => received,
            Err(_) => return 1,
        };
        if received.len == 0 {
            return 0;
        }
        let mut fds = received.fds;
        let (kind, number, value) = match (&buffer[..received.len.min(buffer.len())], fds.len()) {
            ([FORK, n @ ..], 1) if n.len() == 4 => match start(fds.remove(0), spare.take()) {
                Ok(pid) => (FORK, n, pid as i32),
                Err(e) => (FAILED, n, e.raw_os_error().unwrap_or(libc::EIO)),
            },
            ([REAP, n @ .., p0, p1, p2, p3], 0) if n.len() == 4 => {
                match sys::reap_child(u32::from_le_bytes([*p0, *p1, *p2, *p3]), REAP_WAIT) {
                    Ok(None) => (RUNNING, n, 0),
                    Ok(Some(raw)) => (ENDED, n, raw),
                    Err(e) => (FAILED, n, e.raw_os_error().unwrap_or(libc::EIO)),
                }
            }
            _ => return 3,
        };
        let answer = [&[kind][..], number, &value.to_le_bytes()].concat();
        if channel.send(&answer, &[]).is_err() {
            return 1;
        }
    }
}
