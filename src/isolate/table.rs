//! The set's side of the worker protocol: the table of requests in flight that the callers
//! and the reader thread share, and the end of the worker. Nothing here touches a process or
//! a socket (`remote` does, through the closures it passes): under `--cfg loom` its models
//! (below, run by `loom-tests/run.sh`) drive this very code with a model of the worker.
//!
//! The protocol:
//!
//! - A caller opens a request (an id and what it waits for), sends it, and waits until it is
//!   answered, the worker has failed, or the deadline passes (then it records the failure
//!   itself and its caller kills the worker). A request opened after the failure is refused
//!   at once. A load opens several before it waits for the first (`open`, then `wait` for
//!   each in turn); a call opens one and waits (`request`).
//! - The reader thread hands each answer to its request, or refuses one that answers no
//!   request in flight; it records the worker's failure (a hostile message, its death) and,
//!   last, its end, once.
//! - The unload (the set's last lease) marks the worker as unloading (its exit is then no
//!   failure), asks it to exit unless it failed, and waits for its end.
//!
//! Every change a waiter waits for (an answer, a failure, the end) is made under the lock and
//! followed by a notification: no wait depends on its deadline to return.

use std::collections::HashMap;
use std::time::Instant;

use crate::error::WorkerCause;
use crate::sync::{AtomicU64, Condvar, Mutex, MutexGuard, Ordering};

/// The requests in flight of one worker, and its fate: `W` is what a request waits for, `A`
/// an answer, `E` how the worker ended.
#[derive(Debug)]
pub(crate) struct Table<W, A, E> {
    state: Mutex<State<W, A, E>>,
    changed: Condvar,
    next_id: AtomicU64,
}

#[derive(Debug)]
struct State<W, A, E> {
    /// The requests in flight, by id.
    pending: HashMap<u64, Slot<W, A>>,
    /// Why the worker failed, once it did: for good.
    failed: Option<WorkerCause>,
    /// Whether the set asked it to unload (its exit is then expected).
    unloading: bool,
    /// Set by the reader thread when it ends: how the worker ended.
    ended: Option<E>,
}

/// One request in flight.
#[derive(Debug)]
enum Slot<W, A> {
    /// Waiting for an answer it accepts.
    Waiting(W),
    Answered(A),
}

/// How a request ended.
#[derive(Debug)]
pub(crate) enum Outcome<A> {
    /// Its answer.
    Answered(A),
    /// The worker failed, before or while it was in flight.
    Failed(WorkerCause),
    /// Its deadline passed: the worker is failed with this cause and is to be killed.
    Expired(WorkerCause),
}

impl<W, A, E: Clone> Table<W, A, E> {
    pub(crate) fn new() -> Self {
        Table {
            state: Mutex::new(State {
                pending: HashMap::new(),
                failed: None,
                unloading: false,
                ended: None,
            }),
            changed: Condvar::new(),
            next_id: AtomicU64::new(1),
        }
    }

    /// Records `cause` as the worker's failure unless it already failed, and wakes every
    /// waiter; returns the cause recorded.
    pub(crate) fn fail(&self, cause: WorkerCause) -> WorkerCause {
        let recorded = Self::fail_locked(&mut self.state.lock(), cause);
        self.changed.notify_all();
        recorded
    }

    fn fail_locked(state: &mut MutexGuard<'_, State<W, A, E>>, cause: WorkerCause) -> WorkerCause {
        state.failed.get_or_insert(cause).clone()
    }

    /// Opens a request waiting for `waiting`, sends it with `send` (given its id; an `Err`
    /// there, a request that cannot be encoded, closes it), and waits for its answer, at most
    /// until `deadline`. At the deadline the worker is failed with `expired()`, and the
    /// caller is to kill it.
    pub(crate) fn request(
        &self,
        waiting: W,
        send: impl FnOnce(u64) -> Result<(), WorkerCause>,
        deadline: Option<Instant>,
        expired: impl FnOnce() -> WorkerCause,
    ) -> Outcome<A> {
        match self.open(waiting, send) {
            Ok(id) => self.wait(id, deadline, expired),
            Err(cause) => Outcome::Failed(cause),
        }
    }

    /// Opens a request waiting for `waiting` and sends it with `send` (given its id): `Ok`
    /// with the id, whose answer [`wait`](Table::wait) returns; `Err` if the worker had
    /// failed, or `send` did (the request is then closed). Several requests may be open at
    /// once, and their answers waited for later, each once.
    pub(crate) fn open(
        &self,
        waiting: W,
        send: impl FnOnce(u64) -> Result<(), WorkerCause>,
    ) -> Result<u64, WorkerCause> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        {
            let mut state = self.state.lock();
            if let Some(cause) = &state.failed {
                return Err(cause.clone());
            }
            state.pending.insert(id, Slot::Waiting(waiting));
        }
        if let Err(cause) = send(id) {
            self.state.lock().pending.remove(&id);
            return Err(cause);
        }
        Ok(id)
    }

    /// Waits for the answer of the open request `id`, at most until `deadline`, and closes
    /// it. At the deadline the worker is failed with `expired()`, and the caller is to kill
    /// it.
    pub(crate) fn wait(&self, id: u64, deadline: Option<Instant>, expired: impl FnOnce() -> WorkerCause) -> Outcome<A> {
        let mut state = self.state.lock();
        loop {
            if let Some(Slot::Answered(_)) = state.pending.get(&id) {
                let Some(Slot::Answered(answer)) = state.pending.remove(&id) else {
                    unreachable!("just looked at")
                };
                return Outcome::Answered(answer);
            }
            if let Some(cause) = &state.failed {
                let cause = cause.clone();
                state.pending.remove(&id);
                return Outcome::Failed(cause);
            }
            let left = deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()));
            if left.is_some_and(|left| left.is_zero()) {
                state.pending.remove(&id);
                let cause = Self::fail_locked(&mut state, expired());
                drop(state);
                self.changed.notify_all();
                return Outcome::Expired(cause);
            }
            state = match left {
                Some(left) => self.changed.wait_timeout(state, left),
                None => self.changed.wait(state),
            };
        }
    }

    /// Hands an answer to request `id` (`frame` names it in errors): `accept` checks it
    /// against what the request waits for and makes the answer. `Err` with why it answers no
    /// request (none in flight with that id, one answered already, or `accept`'s refusal).
    pub(crate) fn answer(
        &self,
        id: u64,
        frame: &str,
        accept: impl FnOnce(&W) -> Result<A, String>,
    ) -> Result<(), String> {
        let mut state = self.state.lock();
        match state.pending.get_mut(&id) {
            Some(slot) => match slot {
                Slot::Waiting(waiting) => *slot = Slot::Answered(accept(waiting)?),
                Slot::Answered(_) => return Err(format!("it answered request {id} twice")),
            },
            None => return Err(format!("it sent {frame} for request {id}, which is not in flight")),
        }
        drop(state);
        self.changed.notify_all();
        Ok(())
    }

    /// Records the worker's end, once (the reader thread's last step): `ended` says how it
    /// ended. Unless the set was unloading it and it had not failed, that is a failure:
    /// `cause(&ended)`. Wakes every waiter.
    pub(crate) fn end(&self, ended: E, cause: impl FnOnce(&E) -> WorkerCause) {
        let mut state = self.state.lock();
        debug_assert!(state.ended.is_none(), "a worker ends once");
        if !state.unloading || state.failed.is_some() {
            Self::fail_locked(&mut state, cause(&ended));
        }
        state.ended = Some(ended);
        drop(state);
        self.changed.notify_all();
    }

    /// The unload: marks the worker as unloading, asks it to exit with `ask` unless it
    /// failed, and waits for its end at most until `deadline`. Returns whether it had failed
    /// before, and its end if it came.
    pub(crate) fn unload(&self, ask: impl FnOnce(), deadline: Option<Instant>) -> (Option<WorkerCause>, Option<E>) {
        let failed = {
            let mut state = self.state.lock();
            state.unloading = true;
            state.failed.clone()
        };
        if failed.is_none() {
            ask();
        }
        (failed, self.wait_ended(deadline))
    }

    /// Waits until the worker's end is recorded, at most until `deadline`: `Some` with it.
    pub(crate) fn wait_ended(&self, deadline: Option<Instant>) -> Option<E> {
        let mut state = self.state.lock();
        loop {
            if let Some(ended) = &state.ended {
                return Some(ended.clone());
            }
            let left = deadline.map(|deadline| deadline.saturating_duration_since(Instant::now()));
            if left.is_some_and(|left| left.is_zero()) {
                return None;
            }
            state = match left {
                Some(left) => self.changed.wait_timeout(state, left),
                None => self.changed.wait(state),
            };
        }
    }
}

/// Models of the protocol (`loom-tests/run.sh`): calls in flight, the worker's death and the
/// set's last lease in every order. The worker and its reader thread are one model thread
/// that takes the set's requests from a queue and answers them through the table, or dies;
/// the set is an `Arc` whose drop, wherever the last lease is, runs the unload. Each model
/// checks that every call returns (a wait nobody wakes is a deadlock loom reports), that a
/// call answers or fails with the worker's cause, and that the worker ends once, with the
/// unload seeing its end. With `scripts/planted/isolate.patch` applied (an end that wakes
/// nobody) the models must fail.
#[cfg(all(test, loom))]
mod loom_models {
    use std::collections::VecDeque;

    use loom::sync::atomic::{AtomicUsize, Ordering::SeqCst};

    use super::{Outcome, Table};
    use crate::error::WorkerCause;
    use crate::sync::{Arc, Condvar, Mutex};

    /// What the set sends the worker.
    enum Message {
        Call(u64),
        Unload,
    }

    /// The channel between the set and the worker, and the table: what both sides hold.
    #[derive(Default)]
    struct Shared {
        table: Table<(), u64, i32>,
        queue: Mutex<VecDeque<Message>>,
        changed: Condvar,
        /// How many times the worker's end was recorded, and the set unloaded.
        ends: AtomicUsize,
        unloads: AtomicUsize,
    }

    impl<W, A, E: Clone> Default for Table<W, A, E> {
        fn default() -> Self {
            Table::new()
        }
    }

    impl Shared {
        fn send(&self, message: Message) {
            self.queue.lock().push_back(message);
            self.changed.notify_all();
        }

        fn recv(&self) -> Message {
            let mut queue = self.queue.lock();
            loop {
                if let Some(message) = queue.pop_front() {
                    return message;
                }
                queue = self.changed.wait(queue);
            }
        }
    }

    /// A set: its leases are `Arc<Set>`s, and the drop of the last one unloads the worker.
    struct Set(Arc<Shared>);

    impl Set {
        fn call(&self) -> Result<u64, WorkerCause> {
            let send = |id| {
                self.0.send(Message::Call(id));
                Ok(())
            };
            match self.0.table.request((), send, None, || unreachable!("no deadline")) {
                Outcome::Answered(answer) => Ok(answer),
                Outcome::Failed(cause) | Outcome::Expired(cause) => Err(cause),
            }
        }
    }

    impl Drop for Set {
        fn drop(&mut self) {
            self.0.unloads.fetch_add(1, SeqCst);
            let (_, ended) = self.0.table.unload(|| self.0.send(Message::Unload), None);
            assert!(ended.is_some(), "isolated: the unload returned before the worker ended");
        }
    }

    /// How the model worker behaves.
    #[derive(Clone, Copy)]
    enum Fate {
        /// Answers every call (its id times 10) and exits when asked.
        Lives,
        /// Dies (signal 11) on the first call it receives, as a segfaulting pass would.
        CrashesInACall,
        /// Dies (signal 9) before it reads anything, as when killed from outside.
        Killed,
    }

    /// The worker and its reader thread: answers or dies as `fate` says, then records its end.
    fn worker(shared: &Shared, fate: Fate) {
        let ended = loop {
            if let Fate::Killed = fate {
                break 9;
            }
            match shared.recv() {
                Message::Call(_) if matches!(fate, Fate::CrashesInACall) => break 11,
                Message::Call(id) => shared
                    .table
                    .answer(id, "an answer", |()| Ok(id * 10))
                    .expect("in flight"),
                Message::Unload => break 0,
            }
        };
        shared.ends.fetch_add(1, SeqCst);
        let cause = |status: &i32| match *status {
            0 => WorkerCause::Exit(0),
            signal => WorkerCause::Signal(signal),
        };
        shared.table.end(ended, cause);
    }

    /// Runs `scenario` under loom's default bound (or `LOOM_MAX_PREEMPTIONS`), counting
    /// interleavings.
    fn check(name: &str, scenario: impl Fn() + Sync + Send + 'static) {
        let mut builder = loom::model::Builder::new();
        if builder.preemption_bound.is_none() {
            builder.preemption_bound = Some(3);
        }
        let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = runs.clone();
        builder.check(move || {
            counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            scenario();
        });
        println!(
            "loom model {name}: {} interleavings",
            runs.load(std::sync::atomic::Ordering::Relaxed)
        );
    }

    /// A set with a worker of `fate`, and a second lease of it given to a caller thread that
    /// calls once and drops its lease; this thread calls once if `call_here` and drops its
    /// own. Whichever lease goes last unloads. Returns both calls' results once every thread
    /// is done, and checks that the worker ended once and the set unloaded once.
    fn scenario(fate: Fate, call_here: bool) -> (Option<Result<u64, WorkerCause>>, Result<u64, WorkerCause>) {
        let shared = Arc::new(Shared::default());
        let set = std::sync::Arc::new(Set(shared.clone()));
        let worker = {
            let shared = shared.clone();
            loom::thread::spawn(move || worker(&shared, fate))
        };
        let caller = {
            let set = set.clone();
            loom::thread::spawn(move || set.call())
        };
        let mine = call_here.then(|| set.call());
        drop(set);
        let theirs = caller.join().unwrap();
        worker.join().unwrap();
        let (ends, unloads) = (shared.ends.load(SeqCst), shared.unloads.load(SeqCst));
        assert_eq!(
            (ends, unloads),
            (1, 1),
            "isolated: the worker ended {ends} times, unloaded {unloads} times"
        );
        (mine, theirs)
    }

    /// Two calls in flight from two threads, answered, each its own answer; the set's last
    /// drop, wherever it happens, unloads the worker once.
    #[test]
    fn calls_answered_then_the_last_lease_unloads() {
        check("isolated calls_answered_then_the_last_lease_unloads", || {
            let (mine, theirs) = scenario(Fate::Lives, true);
            for result in [mine.expect("called"), theirs] {
                let answer = result.expect("isolated: a live worker answers");
                assert_eq!(answer % 10, 0, "isolated: an answer of another request");
            }
        });
    }

    /// The worker dies on the first call it receives, while the other call is in flight or
    /// not yet sent: both calls return, failed with the worker's signal or answered, at least
    /// one failed; the unload does not ask the failed worker anything and sees its end.
    #[test]
    fn a_death_in_a_call_fails_every_call_in_flight_and_later() {
        check(
            "isolated a_death_in_a_call_fails_every_call_in_flight_and_later",
            || {
                let (mine, theirs) = scenario(Fate::CrashesInACall, true);
                let results = [mine.expect("called"), theirs];
                for result in &results {
                    assert!(
                        matches!(result, Err(WorkerCause::Signal(11))),
                        "isolated: a call answered by a worker that dies on its first call: {result:?}"
                    );
                }
            },
        );
    }

    /// The worker is killed from outside while a call is being made and the last lease is
    /// dropped (by either thread): the call fails with the signal, in every order.
    #[test]
    fn a_death_from_outside_races_a_call_and_the_last_drop() {
        check("isolated a_death_from_outside_races_a_call_and_the_last_drop", || {
            let (_, theirs) = scenario(Fate::Killed, false);
            assert_eq!(
                theirs,
                Err(WorkerCause::Signal(9)),
                "isolated: the call of a killed worker"
            );
        });
    }
}
