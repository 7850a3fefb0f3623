//! One library instance per process: hosts built by independent components over the same
//! plugins share each library's instance, so one host's last lease never unloads what another
//! host still uses (the bug this crate exists to kill, across hosts).

use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use dylease::{Error, Lease, LoadPolicy, PluginHost};

use crate::support::{TestDir, assert_loaded, assert_unloaded};

/// The test-owned counters of `tests/plugins/stateful.c` (same layout).
#[repr(C)]
#[derive(Default)]
struct Counters {
    setups: AtomicI32,
    teardowns: AtomicI32,
    torn_reads: AtomicI32,
}

impl Counters {
    fn get(&self) -> (i32, i32, i32) {
        (
            self.setups.load(Ordering::SeqCst),
            self.teardowns.load(Ordering::SeqCst),
            self.torn_reads.load(Ordering::SeqCst),
        )
    }
}

/// Tells the plugin where to count, through the lease's `attach` pass.
fn attach(lease: &Lease, counters: &Counters) {
    // SAFETY: stateful.c registers `attach` as `void (*)(stateful_counters *)`, and `Counters`
    // has its layout; the counters outlive every mapping of the plugin in these tests.
    let attach = unsafe { lease.pass::<extern "C" fn(*const Counters)>("attach") }.expect("attach");
    attach(counters);
}

/// What the plugin's pass reads from its state: 42 while the state is alive.
fn read_state(lease: &Lease) -> i32 {
    // SAFETY: stateful.c registers `read_state` as `int (*)(void)`.
    let read = unsafe { lease.pass::<extern "C" fn() -> i32>("read_state") }.expect("read_state");
    read()
}

fn host(dir: &TestDir) -> PluginHost {
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    unsafe { PluginHost::builder().dir(dir.path()).build() }.unwrap()
}

#[derive(Clone, Copy, Debug)]
enum Leaves {
    SessionFirst,
    SingleOpFirst,
}

/// A graph session and a single-op compiler, each with a host of its own over one directory.
fn two_hosts_share_one_instance(leaves: Leaves) {
    let dir = TestDir::new("sharing");
    let lib = dir.add("stateful", "libstateful.so");
    let counters = Box::new(Counters::default());
    let (session_host, single_op_host) = (host(&dir), host(&dir));

    let session = session_host.acquire().unwrap();
    attach(&session, &counters);
    assert_eq!(read_state(&session), 42);
    for cycle in 0..20 {
        let single_op = single_op_host.acquire().unwrap();
        assert_eq!(
            read_state(&single_op),
            42,
            "cycle {cycle}: the single-op host sees fresh state"
        );
        assert_eq!(
            single_op.generation(),
            cycle + 1,
            "each cycle is a new set of its own host"
        );
        drop(single_op);
        assert!(!single_op_host.is_loaded());
        // The single-op host's set is gone, but the library instance is the session's too.
        assert_eq!(
            counters.get(),
            (1, 0, 0),
            "cycle {cycle}: on_unload ran under the session"
        );
        assert_eq!(
            read_state(&session),
            42,
            "cycle {cycle}: the session's pass lost its state"
        );
        assert_loaded(&lib);
    }
    let single_op = single_op_host.acquire().unwrap();
    let (first, second) = match leaves {
        Leaves::SessionFirst => (session, single_op),
        Leaves::SingleOpFirst => (single_op, session),
    };
    drop(first);
    assert_eq!(read_state(&second), 42, "the remaining host lost its state");
    assert_eq!(counters.get(), (1, 0, 0));
    assert_loaded(&lib);
    drop(second);
    // One instance: one set-up, one on_unload after both hosts' last leases, then unmapped.
    assert_eq!(counters.get(), (1, 1, 0));
    assert_unloaded(&lib);
}

#[test]
fn a_single_op_host_never_unloads_what_the_session_host_uses_session_leaves_first() {
    crate::bounded::bounded(
        "a_single_op_host_never_unloads_what_the_session_host_uses_session_leaves_first",
        crate::bounded::LIMIT,
        a_single_op_host_never_unloads_what_the_session_host_uses_session_leaves_first_body,
    );
}

fn a_single_op_host_never_unloads_what_the_session_host_uses_session_leaves_first_body() {
    two_hosts_share_one_instance(Leaves::SessionFirst);
}

#[test]
fn a_single_op_host_never_unloads_what_the_session_host_uses_single_op_leaves_first() {
    crate::bounded::bounded(
        "a_single_op_host_never_unloads_what_the_session_host_uses_single_op_leaves_first",
        crate::bounded::LIMIT,
        a_single_op_host_never_unloads_what_the_session_host_uses_single_op_leaves_first_body,
    );
}

fn a_single_op_host_never_unloads_what_the_session_host_uses_single_op_leaves_first_body() {
    two_hosts_share_one_instance(Leaves::SingleOpFirst);
}

#[test]
fn four_threads_churning_two_hosts_never_see_torn_down_state() {
    crate::bounded::bounded(
        "four_threads_churning_two_hosts_never_see_torn_down_state",
        crate::bounded::LIMIT,
        four_threads_churning_two_hosts_never_see_torn_down_state_body,
    );
}

fn four_threads_churning_two_hosts_never_see_torn_down_state_body() {
    let dir = TestDir::new("sharing-churn");
    let lib = dir.add("stateful", "libstateful.so");
    let counters = Arc::new(Counters::default());
    let hosts = Arc::new([host(&dir), host(&dir)]);
    let threads = 4;
    let start = Arc::new(Barrier::new(threads));
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (hosts, start, counters) = (hosts.clone(), start.clone(), counters.clone());
            thread::spawn(move || {
                start.wait();
                for round in 0..2000 {
                    let lease = hosts[(t + round) % 2].acquire().unwrap();
                    attach(&lease, &counters);
                    assert_eq!(read_state(&lease), 42, "thread {t} round {round}: torn-down state");
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
    let (setups, teardowns, torn_reads) = counters.get();
    assert_eq!(torn_reads, 0, "a pass ran on torn-down state");
    assert!(setups >= 1, "the plugin never set up");
    assert_eq!(setups, teardowns, "every set-up is torn down exactly once");
    assert!(!hosts[0].is_loaded() && !hosts[1].is_loaded());
    assert_unloaded(&lib);
}

#[test]
fn a_library_that_links_against_a_plugin_is_not_taken_for_it() {
    let dir = TestDir::new("dt-needed");
    let core = dir.add("stateful_core", "libcore.so");
    let ext = dir.add("links_core", "libext.so");
    let error = host(&dir).acquire().unwrap_err();
    assert!(
        matches!(&error, Error::MissingEntry { path, .. } if path == &ext),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("libext.so") && message.contains("libcore.so"),
        "{message}"
    );
    assert_unloaded(&ext);
    assert_unloaded(&core);

    let counters = Box::new(Counters::default());
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe {
        PluginHost::builder()
            .dir(dir.path())
            .policy(LoadPolicy::SkipFailed)
            .build()
    }
    .unwrap();
    let lease = host.acquire().unwrap();
    attach(&lease, &counters);
    assert_eq!(lease.plugins().len(), 1, "only the real plugin loads");
    assert_eq!(lease.failures().len(), 1);
    assert_eq!(lease.failures()[0].origin().path(), Some(ext.as_path()));
    assert_eq!(read_state(&lease), 42);
    drop(lease);
    // Registered once, unloaded once: not a second time through the library that links it.
    assert_eq!(counters.get(), (1, 1, 0));
    assert_unloaded(&ext);
    assert_unloaded(&core);
}
