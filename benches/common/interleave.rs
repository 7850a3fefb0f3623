//! The interleaved harness beside criterion: the arms of a comparison (dylease and its
//! baselines) alternate in rounds inside one process, so that whatever else the machine does
//! weighs on every arm alike, and each claim is a ratio taken within a round.
//!
//! A round times every arm once, `iters` iterations each, in an order rotated by one arm per
//! round (so no arm always runs first, or always after the same neighbour). One untimed round
//! warms caches first. A two-thread arm ([`two_threads`]) counts in a round only if both threads
//! really ran at once: each thread's own CPU time (`CLOCK_THREAD_CPUTIME_ID`) must be at least
//! [`OVERLAP`] of the round's wall time, from the first thread's start to the last one's end,
//! both having started from one barrier. Otherwise the arm's sample is missing from that round,
//! and every ratio that needs it drops the round and counts it.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The share of a two-thread round's wall time each thread must have spent on a CPU for the
/// round to count as overlapping.
pub(crate) const OVERLAP: f64 = 0.9;

/// One side of a comparison.
pub(crate) struct Arm<'a> {
    name: String,
    iters: u64,
    /// Runs `iters` iterations and returns their time, or `None` if the round cannot count.
    run: Box<dyn FnMut(u64) -> Option<Duration> + 'a>,
}

impl<'a> Arm<'a> {
    /// An arm timed by `run` itself (which gets the iteration count): for arms whose
    /// iterations have untimed parts, or that run on several threads.
    pub(crate) fn new(name: impl Into<String>, iters: u64, run: impl FnMut(u64) -> Option<Duration> + 'a) -> Self {
        Arm {
            name: name.into(),
            iters: iters.max(1),
            run: Box::new(run),
        }
    }

    /// An arm that runs `op` `iters` times on this thread, timed as one span.
    pub(crate) fn looped(name: impl Into<String>, iters: u64, mut op: impl FnMut() + 'a) -> Self {
        Arm::new(name, iters, move |iters| {
            let start = Instant::now();
            for _ in 0..iters {
                op();
            }
            Some(start.elapsed())
        })
    }
}

/// The per-round times of a comparison's arms: nanoseconds per iteration, `None` where the
/// arm's round did not count.
#[derive(Debug)]
pub(crate) struct Rounds {
    names: Vec<String>,
    ns: Vec<Vec<Option<f64>>>,
}

/// What a quantity measured per round came to over the rounds that counted.
#[derive(Debug)]
pub(crate) struct Summary {
    pub(crate) kept: usize,
    pub(crate) dropped: usize,
    /// The kept rounds' values, sorted.
    pub(crate) values: Vec<f64>,
}

impl Summary {
    /// The summary of values measured once per round, none dropped.
    pub(crate) fn of(mut values: Vec<f64>) -> Summary {
        values.sort_by(f64::total_cmp);
        Summary {
            kept: values.len(),
            dropped: 0,
            values,
        }
    }

    pub(crate) fn min(&self) -> Option<f64> {
        self.values.first().copied()
    }

    pub(crate) fn max(&self) -> Option<f64> {
        self.values.last().copied()
    }

    pub(crate) fn median(&self) -> Option<f64> {
        median_of_sorted(&self.values)
    }
}

fn median_of_sorted(values: &[f64]) -> Option<f64> {
    let n = values.len();
    match n {
        0 => None,
        _ if n % 2 == 1 => Some(values[n / 2]),
        _ => Some((values[n / 2 - 1] + values[n / 2]) / 2.0),
    }
}

/// Runs `rounds` rounds of `arms` (after one untimed warm-up round), rotating the order.
pub(crate) fn run(rounds: usize, arms: &mut [Arm<'_>]) -> Rounds {
    for arm in arms.iter_mut() {
        let _ = (arm.run)(arm.iters);
    }
    let mut ns = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let mut row = vec![None; arms.len()];
        for k in 0..arms.len() {
            let i = (round + k) % arms.len();
            let arm = &mut arms[i];
            row[i] = (arm.run)(arm.iters).map(|time| time.as_nanos() as f64 / arm.iters as f64);
        }
        ns.push(row);
    }
    Rounds {
        names: arms.iter().map(|arm| arm.name.clone()).collect(),
        ns,
    }
}

impl Rounds {
    fn column(&self, name: &str) -> usize {
        self.names
            .iter()
            .position(|n| n == name)
            .unwrap_or_else(|| panic!("no arm named {name:?} in {:?}", self.names))
    }

    /// A quantity computed per round from the arms' times (`time(name)`: nanoseconds per
    /// iteration); a round where it is `None` (an arm's round did not count) is dropped.
    pub(crate) fn per_round(&self, quantity: impl Fn(&dyn Fn(&str) -> Option<f64>) -> Option<f64>) -> Summary {
        let mut values = Vec::new();
        for row in &self.ns {
            if let Some(value) = quantity(&|name| row[self.column(name)]) {
                values.push(value);
            }
        }
        values.sort_by(f64::total_cmp);
        Summary {
            kept: values.len(),
            dropped: self.ns.len() - values.len(),
            values,
        }
    }

    /// `arm`'s time over `baseline`'s, per round.
    pub(crate) fn ratio(&self, arm: &str, baseline: &str) -> Summary {
        self.per_round(|time| Some(time(arm)? / time(baseline)?))
    }

    /// The median over the counted rounds of `arm`'s time per iteration, in nanoseconds.
    pub(crate) fn median_ns(&self, arm: &str) -> Option<f64> {
        let column = self.column(arm);
        let mut values: Vec<f64> = self.ns.iter().filter_map(|row| row[column]).collect();
        values.sort_by(f64::total_cmp);
        median_of_sorted(&values)
    }

    /// In how many rounds `arm` did not count (its threads did not overlap).
    pub(crate) fn missing(&self, arm: &str) -> usize {
        let column = self.column(arm);
        self.ns.iter().filter(|row| row[column].is_none()).count()
    }
}

/// This thread's CPU time so far.
fn thread_cpu_time() -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid, writable `timespec`; the clock id is a constant Linux knows.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    assert_eq!(status, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed");
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

/// How long a thread of [`two_threads`] spins waiting for the other one to arrive.
const RENDEZVOUS: Duration = Duration::from_secs(1);

/// Runs `op(state)` `iters` times on each of two threads started from one barrier, and returns
/// the wall time from the first thread's start to the last one's end, or `None` if the
/// threads did not overlap: one of them spent less than [`OVERLAP`] of that span on a CPU.
/// The barrier spins (a thread woken from a sleeping barrier would start late), for at most
/// [`RENDEZVOUS`]; spawning, the barrier and joining are outside the span.
pub(crate) fn two_threads<S: Sync, F: Fn(&S) + Sync>(state: &S, iters: u64, op: &F) -> Option<Duration> {
    let arrived = AtomicUsize::new(0);
    let spans: Vec<(Instant, Instant, Duration)> = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..2)
            .map(|_| {
                scope.spawn(|| {
                    arrived.fetch_add(1, Ordering::AcqRel);
                    let give_up = Instant::now() + RENDEZVOUS;
                    while arrived.load(Ordering::Acquire) < 2 && Instant::now() < give_up {
                        std::hint::spin_loop();
                    }
                    let cpu = thread_cpu_time();
                    let start = Instant::now();
                    for _ in 0..iters {
                        op(state);
                    }
                    let end = Instant::now();
                    (start, end, thread_cpu_time() - cpu)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("a bench thread panicked"))
            .collect()
    });
    let start = spans.iter().map(|span| span.0).min()?;
    let end = spans.iter().map(|span| span.1).max()?;
    let wall = end - start;
    let overlapped = spans
        .iter()
        .all(|span| span.2.as_secs_f64() >= OVERLAP * wall.as_secs_f64());
    overlapped.then_some(wall)
}
