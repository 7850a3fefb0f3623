//! Isolated sets (`HostBuilder::isolated`): a set's library plugins run in a worker process,
//! a re-execution of this very test binary. Message passes answer through it; a plugin that
//! crashes, aborts, exits or hangs fails its set and never the host; what the platform would
//! pin in-process never enters the host and leaves with the worker, which is reaped after its
//! plugins' unload code ran; the worker holds no descriptor of the host's.

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use dylease::{Error, LoadPolicy, LookupFailure, Origin, PinCause, PluginHost, WorkerCause};

use crate::rust_plugin::built_rust_plugins;
use crate::support::{TestDir, await_that, beside, mapped};

/// An isolated host over the one plugin file `file`.
fn isolated(file: &Path, deadline: Duration) -> PluginHost {
    // SAFETY: the test's own fixture.
    unsafe { PluginHost::builder().file(file) }
        .isolated()
        .call_deadline(deadline)
        .build()
        .unwrap()
}

/// An ordinary host over the one plugin file `file`.
fn ordinary(file: &Path) -> PluginHost {
    // SAFETY: the test's own fixture.
    unsafe { PluginHost::builder().file(file) }.build().unwrap()
}

/// The text of `/proc/<pid>/maps`, lossily.
fn maps_of(pid: u32) -> String {
    String::from_utf8_lossy(&std::fs::read(format!("/proc/{pid}/maps")).unwrap()).into_owned()
}

/// Asserts the process `pid` is gone and was reaped: no `/proc/<pid>` (a zombie keeps it),
/// and no child of that id left to wait for.
#[track_caller]
fn assert_reaped(pid: u32) {
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "worker {pid} is still there (a zombie, or alive)"
    );
    let mut status = 0;
    // SAFETY: `waitpid` with `WNOHANG` on a process id; it writes only `status`.
    let waited = unsafe { libc::waitpid(pid as libc::pid_t, &mut status, libc::WNOHANG) };
    assert_eq!(waited, -1, "worker {pid} was still a child to wait for");
    assert_eq!(std::io::Error::last_os_error().raw_os_error(), Some(libc::ECHILD));
}

/// `lease.call(pass, input)` on a thread of its own, waited for at most 20 s: a call that
/// never returns fails the test instead of hanging it.
fn call_bounded(lease: &dylease::Lease, pass: &'static str, input: &'static [u8]) -> Result<Vec<u8>, Error> {
    let (done, result) = mpsc::channel();
    let lease = lease.clone();
    std::thread::spawn(move || {
        let answer = lease.call(pass, input);
        // Before the answer: the caller's drop of its lease may be meant as the last.
        drop(lease);
        done.send(answer)
    });
    result
        .recv_timeout(Duration::from_secs(20))
        .expect("the call returned within 20 s")
}

/// The worker cause of `error`, which must be a `WorkerFailed` about plugin file `file` and
/// pass `pass` (`None`: its load).
#[track_caller]
fn worker_failure(error: Error, file: &Path, pass: Option<&str>) -> WorkerCause {
    match error {
        Error::WorkerFailed {
            plugin,
            pass: failed,
            cause,
            ..
        } => {
            assert_eq!(plugin, Origin::File(file.to_owned()));
            assert_eq!(failed.as_deref(), pass);
            *cause
        }
        other => panic!("expected WorkerFailed, got {other:?}: {other}"),
    }
}

/// The hooks the plugin at `file` logged so far, in order, in whatever process ran them
/// (`<file>.log`, see `tests/plugins/events.h`): empty before any.
fn events(file: &Path) -> Vec<String> {
    let log = beside(file, ".log");
    match std::fs::read_to_string(&log) {
        Ok(text) => text.lines().map(str::to_owned).collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => panic!("cannot read {}: {e}", log.display()),
    }
}

#[test]
fn a_message_pass_answers_in_an_isolated_set_and_in_an_ordinary_one() {
    let dir = TestDir::new("isolated-answers");
    let file = dir.add("isolated", "libisolated.so");

    let host = isolated(&file, Duration::from_secs(30));
    let lease = host.acquire().unwrap();
    let worker = lease
        .worker_pid()
        .expect("an isolated set with a library plugin has a worker");
    assert_ne!(worker, std::process::id());
    assert_eq!(lease.call("reverse", b"abc").unwrap(), b"cba");
    assert_eq!(lease.call("reverse", b"").unwrap(), b"");
    // The pass ran in the worker.
    assert_eq!(lease.call("pid", b"").unwrap(), worker.to_string().as_bytes());
    assert!(matches!(
        lease.call("fail", b"x"),
        Err(Error::PassFailed { status: 7, ref pass, .. }) if pass == "fail"
    ));
    // A failed pass leaves the set working.
    assert_eq!(lease.call("reverse", b"xy").unwrap(), b"yx");
    // More output than a frame carries comes back through a shared region.
    assert_eq!(lease.call("flood", b"").unwrap(), vec![0; 70 * 1024]);
    // An input above the most a call carries is refused before anything is copied (the
    // vector's zeroed pages are never touched).
    let too_large = lease.call("echo", &vec![0; 256 * 1024 * 1024 + 1]).unwrap_err();
    assert!(matches!(too_large, Error::CallRefused { .. }), "{too_large:?}");
    assert!(
        too_large.to_string().contains("more than an isolated call carries"),
        "{too_large}"
    );
    assert!(!mapped(&file), "the plugin is mapped in the host");
    assert!(maps_of(worker).contains(&*file.to_string_lossy()));
    // Many threads at once, each with its own input.
    std::thread::scope(|scope| {
        for n in 0..8 {
            let lease = &lease;
            scope.spawn(move || {
                for i in 0..20 {
                    let input = format!("{n}-{i}");
                    let expected: Vec<u8> = input.bytes().rev().collect();
                    assert_eq!(lease.call("reverse", input.as_bytes()).unwrap(), expected);
                }
            });
        }
    });
    drop(lease);
    assert!(!host.is_loaded());
    assert_reaped(worker);

    let host = ordinary(&file);
    let lease = host.acquire().unwrap();
    assert_eq!(lease.worker_pid(), None);
    assert_eq!(lease.call("reverse", b"abc").unwrap(), b"cba");
    assert_eq!(
        lease.call("pid", b"").unwrap(),
        std::process::id().to_string().as_bytes()
    );
    assert!(matches!(
        lease.call("fail", b""),
        Err(Error::PassFailed { status: 7, .. })
    ));
    let missing = lease.call("nothing", b"").unwrap_err();
    assert!(matches!(missing, Error::PassLookup { .. }), "{missing:?}");
    let pointer = lease.call("double", b"").unwrap_err();
    assert!(
        matches!(&pointer, Error::PassLookup { cause, .. } if matches!(**cause, LookupFailure::Untyped { .. })),
        "{pointer:?}"
    );
}

#[test]
fn a_pointer_pass_is_refused_in_an_isolated_set_with_the_reason() {
    let dir = TestDir::new("isolated-pointer");
    let file = dir.add("isolated", "libisolated.so");
    let host = isolated(&file, Duration::from_secs(30));
    let lease = host.acquire().unwrap();
    // SAFETY: "double" is registered as `int (*)(int)`; the refusal is expected, nothing runs.
    let refused = unsafe { lease.pass::<extern "C" fn(i32) -> i32>("double") }.unwrap_err();
    let Error::PassLookup { cause, .. } = &refused else {
        panic!("expected PassLookup, got {refused:?}")
    };
    assert_eq!(
        **cause,
        LookupFailure::Isolated {
            plugin: Origin::File(file.clone())
        }
    );
    let message = refused.to_string();
    assert!(message.contains("cannot cross the process boundary"), "{message}");
    assert!(message.contains("DYLEASE_MESSAGE_PASS"), "{message}");
    // A message pass is refused the same way by the typed lookup: only `call` reaches it.
    let typed = lease.get::<dylease::MessagePass>("reverse").unwrap_err();
    assert!(
        typed.to_string().contains("cannot cross the process boundary"),
        "{typed}"
    );
    assert!(lease.passes_of::<dylease::MessagePass>().is_err());

    // The same file in an ordinary set: the pointer pass works.
    let host = ordinary(&file);
    let lease = host.acquire().unwrap();
    // SAFETY: "double" is registered as `int (*)(int)`.
    let double = unsafe { lease.pass::<extern "C" fn(i32) -> i32>("double") }.unwrap();
    assert_eq!(double(21), 42);
}

#[test]
fn a_segfaulting_pass_fails_its_set_and_the_next_acquire_gets_a_fresh_worker() {
    let dir = TestDir::new("isolated-segv");
    let file = dir.add("isolated", "libisolated.so");
    let host = isolated(&file, Duration::from_secs(30));
    let lease = host.acquire().unwrap();
    let first = lease.worker_pid().unwrap();

    let error = call_bounded(&lease, "crash", b"").unwrap_err();
    let message = error.to_string();
    assert_eq!(
        worker_failure(error, &file, Some("crash")),
        WorkerCause::Signal(libc::SIGSEGV)
    );
    for needed in ["SIGSEGV", "`crash`", &*file.to_string_lossy(), "next acquire()"] {
        assert!(message.contains(needed), "{needed:?} missing from: {message}");
    }
    // The set is failed for good: every later call too, with the same cause.
    let later = lease.call("reverse", b"ab").unwrap_err();
    assert_eq!(
        worker_failure(later, &file, Some("reverse")),
        WorkerCause::Signal(libc::SIGSEGV)
    );
    // While a lease of the failed set lives, acquire() shares it.
    assert_eq!(host.acquire().unwrap().worker_pid(), Some(first));
    drop(lease);
    assert!(!host.is_loaded());
    assert_reaped(first);

    let lease = host.acquire().unwrap();
    let second = lease.worker_pid().unwrap();
    assert_ne!(first, second);
    assert_eq!(lease.call("reverse", b"ab").unwrap(), b"ba");
    assert_eq!(lease.generation(), 2);
}

#[test]
fn an_aborting_constructor_fails_the_acquire_naming_the_plugin() {
    let dir = TestDir::new("isolated-abort");
    let file = dir.add("isolated_abort_constructor", "libisolated.so");
    let host = isolated(&file, Duration::from_secs(30));
    for _ in 0..2 {
        let error = host.acquire().unwrap_err();
        let message = error.to_string();
        assert_eq!(worker_failure(error, &file, None), WorkerCause::Signal(libc::SIGABRT));
        assert!(
            message.contains("SIGABRT") && message.contains("while the plugin loaded"),
            "{message}"
        );
        assert!(!host.is_loaded());
        assert_eq!(host.stats().loads, 0);
    }
}

#[test]
fn exit_in_on_load_fails_the_acquire_with_the_status() {
    let dir = TestDir::new("isolated-exit");
    let file = dir.add("isolated_exit_on_load", "libisolated.so");
    let host = isolated(&file, Duration::from_secs(30));
    let error = host.acquire().unwrap_err();
    let message = error.to_string();
    assert_eq!(worker_failure(error, &file, None), WorkerCause::Exit(3));
    assert!(message.contains("exited with status 3"), "{message}");
    assert!(!host.is_loaded());
}

#[test]
fn a_pass_past_the_deadline_kills_the_worker() {
    let dir = TestDir::new("isolated-deadline");
    let file = dir.add("isolated", "libisolated.so");
    let deadline = Duration::from_millis(300);
    let host = isolated(&file, deadline);
    let lease = host.acquire().unwrap();
    let worker = lease.worker_pid().unwrap();
    let error = call_bounded(&lease, "spin", b"").unwrap_err();
    let message = error.to_string();
    assert_eq!(
        worker_failure(error, &file, Some("spin")),
        WorkerCause::Deadline {
            pass: "spin".into(),
            after: deadline
        }
    );
    assert!(
        message.contains("call deadline") && message.contains("call_deadline"),
        "{message}"
    );
    let later = lease.call("reverse", b"a").unwrap_err();
    assert!(matches!(later, Error::WorkerFailed { .. }), "{later:?}");
    drop(lease);
    assert_reaped(worker);
    let lease = host.acquire().unwrap();
    assert_ne!(lease.worker_pid(), Some(worker));
    assert_eq!(lease.call("reverse", b"ab").unwrap(), b"ba");
}

#[test]
fn a_worker_killed_from_outside_mid_call_fails_the_call() {
    let dir = TestDir::new("isolated-killed");
    let file = dir.add("isolated", "libisolated.so");
    let host = isolated(&file, Duration::from_secs(60));
    let lease = host.acquire().unwrap();
    let worker = lease.worker_pid().unwrap();
    let started: PathBuf = dir.path().join("started");
    let call = {
        let (lease, started) = (lease.clone(), started.clone());
        std::thread::spawn(move || lease.call("mark", started.as_os_str().as_encoded_bytes()))
    };
    await_that("the pass runs in the worker", || started.exists());
    // Meanwhile another call is answered, by another of the worker's threads.
    assert_eq!(call_bounded(&lease, "reverse", b"ab").unwrap(), b"ba");
    // SAFETY: `kill` of the worker's process id, which is alive and not yet reaped (its set
    // holds it), so the id is not another process's.
    assert_eq!(unsafe { libc::kill(worker as libc::pid_t, libc::SIGKILL) }, 0);
    await_that("the call returns", || call.is_finished());
    let error = call.join().unwrap().unwrap_err();
    assert_eq!(
        worker_failure(error, &file, Some("mark")),
        WorkerCause::Signal(libc::SIGKILL)
    );
    drop(lease);
    assert_reaped(worker);
    assert_eq!(host.acquire().unwrap().call("reverse", b"ok").unwrap(), b"ko");
}

#[test]
fn pinned_plugins_never_enter_the_host_and_leave_with_their_worker() {
    for (fixture, pass, expected) in [
        ("isolated_nodelete", "reverse", &b"cba"[..]),
        ("isolated_unique", "greet", &b"hello from a unique symbol"[..]),
    ] {
        let dir = TestDir::new("isolated-pinned");
        let file = dir.add(fixture, "libpinned.so");
        let host = isolated(&file, Duration::from_secs(30));
        let lease = host.acquire().unwrap();
        // The file is one the platform would keep mapped in-process.
        let causes = lease.plugins()[0].pinning().causes();
        assert!(
            causes
                .iter()
                .any(|cause| matches!(cause, PinCause::NoDelete | PinCause::GnuUnique { .. })),
            "{fixture}: {causes:?}"
        );
        let worker = lease.worker_pid().unwrap();
        assert_eq!(lease.call(pass, b"abc").unwrap(), expected, "{fixture}");
        assert!(maps_of(worker).contains(&*file.to_string_lossy()), "{fixture}");
        assert!(!mapped(&file), "{fixture} is mapped in the host");
        drop(lease);
        assert!(!host.is_loaded());
        assert_eq!(host.stats().pinned_libraries, 0);
        assert_reaped(worker);
        assert!(!mapped(&file), "{fixture} is mapped in the host");
    }
}

#[test]
fn the_worker_holds_only_its_standard_streams_its_channel_and_its_plugins() {
    let dir = TestDir::new("isolated-fds");
    let files = [
        dir.add("isolated", "libone.so"),
        dir.add("isolated_unique", "libtwo.so"),
    ];
    // A descriptor of the host's that is not close-on-exec: a worker must not inherit it.
    let held = std::fs::File::open(&files[0]).unwrap();
    // SAFETY: `dup` of an open descriptor; the copy (without close-on-exec) is closed below.
    let inheritable = unsafe { libc::dup(std::os::fd::AsRawFd::as_raw_fd(&held)) };
    assert!(inheritable > 2);
    // SAFETY: the test's own fixtures.
    let host = unsafe { PluginHost::builder().file(&files[0]).file(&files[1]) }
        .isolated()
        .build()
        .unwrap();
    let lease = host.acquire().unwrap();
    let worker = lease.worker_pid().unwrap();
    let (mut sockets, mut plugins) = (0, Vec::new());
    for entry in std::fs::read_dir(format!("/proc/{worker}/fd")).unwrap() {
        let entry = entry.unwrap();
        let fd: i32 = entry.file_name().to_str().unwrap().parse().unwrap();
        if fd <= 2 {
            continue;
        }
        let target = std::fs::read_link(entry.path()).unwrap();
        if target.to_string_lossy().starts_with("socket:") {
            sockets += 1;
        } else {
            assert!(
                files.contains(&target),
                "the worker holds descriptor {fd}: {}",
                target.display()
            );
            plugins.push(target);
        }
    }
    assert_eq!(sockets, 1, "the worker holds one socket, its channel");
    plugins.sort();
    plugins.dedup();
    assert_eq!(plugins.len(), 2, "the worker holds its plugins' descriptors");
    // It can gain no privilege by `exec` (a set-user-id program), nor could at its own.
    let status = std::fs::read_to_string(format!("/proc/{worker}/status")).unwrap();
    assert!(status.lines().any(|line| line == "NoNewPrivs:\t1"), "{status}");
    // None of the host's `LD_*` variables reach the worker (cargo gives the tests some).
    let environ = std::fs::read(format!("/proc/{worker}/environ")).unwrap();
    assert!(std::env::vars_os().any(|(key, _)| key.as_encoded_bytes().starts_with(b"LD_")));
    for variable in environ.split(|&b| b == 0) {
        assert!(!variable.starts_with(b"LD_"), "{}", String::from_utf8_lossy(variable));
    }
    drop(lease);
    assert_reaped(worker);
    // SAFETY: closes the copy made above, which nothing else uses.
    unsafe { libc::close(inheritable) };
}

/// A stand-in worker (`worker_command`) that breaks the protocol as its program's name says.
/// In the handshake: no answer at all, a welcome that brings a descriptor, or a `Mapped`
/// frame in its place. Or it greets the host as a worker does, then answers the first
/// plugin's load with a frame for a request the host never made, `Skipped` (which only
/// follows a failure), bytes that are no frame, a `Reply` (the answer to a call), or a
/// `Mapped` frame that brings two descriptors.
const HOSTILE_WORKER: &str = r#"#!/usr/bin/env python3
import os, socket, struct, sys
channel = socket.socket(fileno=int(os.environ["DYLEASE_WORKER_CHANNEL"]))
mode = sys.argv[0].rsplit("/", 1)[-1]
hello = channel.recv(70000)
kind, length, ident, version = struct.unpack("<IIQI", hello[:20])
welcome = struct.pack("<IIQII", 101, 8, ident, version, os.getpid())
if mode == "silent":
    channel.recv(70000)
    sys.exit(0)
elif mode == "welcome-with-fd":
    socket.send_fds(channel, [welcome], [0])
    channel.recv(70000)
    sys.exit(0)
elif mode == "mapped-for-welcome":
    channel.send(struct.pack("<IIQII", 102, 8, ident, version, os.getpid()))
    channel.recv(70000)
    sys.exit(0)
channel.send(welcome)
request, _, _, _ = channel.recvmsg(70000, 256)
kind, length, ident = struct.unpack("<IIQ", request[:16])
if mode == "unknown-id":
    channel.send(struct.pack("<IIQ", 102, 0, ident + 1000))
elif mode == "skipped":
    channel.send(struct.pack("<IIQ", 108, 0, ident))
elif mode == "reply-for-map":
    channel.send(struct.pack("<IIQ", 104, 0, ident))
elif mode == "two-fds":
    socket.send_fds(channel, [struct.pack("<IIQ", 102, 0, ident)], [0, 1])
else:
    channel.send(b"\x01\x02\x03")
channel.recv(70000)
"#;

#[test]
fn a_worker_that_breaks_the_protocol_is_killed_and_the_acquire_fails() {
    let dir = TestDir::new("isolated-hostile");
    let file = dir.add("isolated", "libisolated.so");
    for (name, said) in [
        ("silent", "no answer within the call deadline of 2s"),
        ("welcome-with-fd", "the answer was oversized or carried descriptors"),
        ("mapped-for-welcome", "the answer was a Mapped frame, not a welcome"),
        ("unknown-id", "which is not in flight"),
        ("garbage", "shorter than a frame header"),
        ("skipped", "Skipped frame, though no load failed"),
        ("reply-for-map", "(Map) with a Reply frame"),
        ("two-fds", "it sent a descriptor with a Mapped frame"),
    ] {
        let program = dir.path().join(name);
        std::fs::write(&program, HOSTILE_WORKER).unwrap();
        std::fs::set_permissions(&program, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        // The silent worker is waited for until the deadline: a short one.
        let deadline = Duration::from_secs(if name == "silent" { 2 } else { 20 });
        // SAFETY: the test's own fixture.
        let host = unsafe { PluginHost::builder().file(&file) }
            .isolated()
            .worker_command(&program)
            .call_deadline(deadline)
            .build()
            .unwrap();
        let error = host.acquire().unwrap_err();
        // A worker that fails its handshake never started, as far as the host knows: the
        // cause is its start's, which says what broke the protocol.
        let handshake = ["silent", "welcome-with-fd", "mapped-for-welcome"].contains(&name);
        match (handshake, worker_failure(error, &file, None)) {
            (false, WorkerCause::Protocol(what)) => assert!(what.contains(said), "{name}: {what}"),
            (true, WorkerCause::Start(what)) => {
                assert!(
                    what.contains(&format!("the host killed it: in the handshake, {said}")),
                    "{name}: {what}"
                )
            }
            (_, other) => panic!("{name}: expected a protocol failure, got {other:?}"),
        }
        assert!(!host.is_loaded());
    }
}

#[test]
fn a_worker_command_without_the_hook_fails_the_acquire_saying_so() {
    let dir = TestDir::new("isolated-foreign");
    let file = dir.add("isolated", "libisolated.so");
    // SAFETY: the test's own fixture.
    let host = unsafe { PluginHost::builder().file(&file) }
        .isolated()
        .worker_command("/bin/true")
        .build()
        .unwrap();
    let error = host.acquire().unwrap_err();
    let message = error.to_string();
    match worker_failure(error, &file, None) {
        WorkerCause::Start(why) => assert!(why.contains("links dylease"), "{why}"),
        other => panic!("expected a start failure, got {other:?}"),
    }
    assert!(message.contains("/bin/true"), "{message}");
}

#[test]
fn a_rust_plugins_message_passes_answer_in_an_ordinary_set_and_in_an_isolated_one() {
    let dir = TestDir::new("isolated-rust");
    let file = dir.path().join("libmessages.so");
    std::fs::copy(built_rust_plugins().join("examples/libmessages.so"), &file).unwrap();
    let pid_of = |lease: &dylease::Lease| String::from_utf8(lease.call("pid", b"").unwrap()).unwrap();

    let host = ordinary(&file);
    let lease = host.acquire().unwrap();
    assert_eq!(lease.plugins()[0].name(), "messages");
    assert_eq!(lease.call("reverse", b"abc").unwrap(), b"cba");
    assert_eq!(pid_of(&lease), std::process::id().to_string());
    assert_eq!(lease.call("odd", b"ab").unwrap(), b"ab");
    assert!(matches!(
        lease.call("odd", b"abc"),
        Err(Error::PassFailed { status: 3, ref pass, .. }) if pass == "odd"
    ));
    drop(lease);

    let host = isolated(&file, Duration::from_secs(30));
    let lease = host.acquire().unwrap();
    let worker = lease.worker_pid().unwrap();
    assert_eq!(lease.call("reverse", b"abc").unwrap(), b"cba");
    assert_eq!(pid_of(&lease), worker.to_string());
    assert_eq!(lease.call("odd", b"").unwrap(), b"");
    assert!(matches!(
        lease.call("odd", b"a"),
        Err(Error::PassFailed { status: 3, .. })
    ));
    assert!(!mapped(&file), "the Rust plugin is mapped in the host");
    assert!(maps_of(worker).contains(&*file.to_string_lossy()));
    // A panic cannot unwind out of an `extern "C"` pass: it aborts the process it runs in,
    // here the worker.
    let error = call_bounded(&lease, "panic", b"").unwrap_err();
    assert_eq!(
        worker_failure(error, &file, Some("panic")),
        WorkerCause::Signal(libc::SIGABRT)
    );
    drop(lease);
    assert_reaped(worker);
    assert_eq!(host.acquire().unwrap().call("reverse", b"xy").unwrap(), b"yx");
}

#[test]
fn a_reload_starts_a_new_worker_while_the_old_one_drains_and_is_reaped_after_its_last_lease() {
    let dir = TestDir::new("isolated-reload");
    let file = dir.add("isolated", "libisolated.so");
    let host = isolated(&file, Duration::from_secs(30));
    let old = host.acquire().unwrap();
    let first = old.worker_pid().unwrap();
    let new = host.reload().unwrap();
    let second = new.worker_pid().unwrap();
    assert_ne!(first, second, "each generation has a worker of its own");
    assert_eq!((old.generation(), new.generation()), (1, 2));
    // Both generations serve, each from its own worker.
    assert_eq!(old.call("pid", b"").unwrap(), first.to_string().as_bytes());
    assert_eq!(new.call("pid", b"").unwrap(), second.to_string().as_bytes());
    assert!(Path::new(&format!("/proc/{first}")).exists(), "the old worker drains");
    assert_eq!(host.acquire().unwrap().worker_pid(), Some(second));
    let stats = host.stats();
    assert_eq!((stats.loads, stats.unloads), (2, 0));

    drop(old);
    assert_reaped(first);
    assert_eq!(host.stats().unloads, 1);
    assert_eq!(new.call("reverse", b"ab").unwrap(), b"ba");
    assert_eq!(host.acquire().unwrap().worker_pid(), Some(second));
    assert!(maps_of(second).contains(&*file.to_string_lossy()));
    drop(new);
    assert_reaped(second);
    assert!(!host.is_loaded());
}

#[test]
fn a_mebibyte_goes_through_a_shared_region_each_way_and_the_set_goes_on() {
    let dir = TestDir::new("isolated-large");
    let file = dir.add("isolated", "libisolated.so");
    let host = isolated(&file, Duration::from_secs(30));
    let lease = host.acquire().unwrap();
    let worker = lease.worker_pid().unwrap();
    let input: Vec<u8> = (0..1 << 20)
        .map(|i: u32| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    // Each time other bytes, through the same region (the host reuses it, the worker keeps
    // its mapping): each answer is its own input.
    for round in 0..3u8 {
        let input: Vec<u8> = input.iter().map(|b| b ^ round).collect();
        assert_eq!(lease.call("echo", &input).unwrap(), input);
    }
    // A shorter output through the same output region, which still holds the mebibyte
    // before it: the answer is the new output alone, none of the earlier bytes after it.
    let shorter: Vec<u8> = (0..100_000u32).map(|i| (i % 253) as u8 ^ 0x5a).collect();
    let answer = lease.call("echo", &shorter).unwrap();
    assert!(
        answer == shorter,
        "the answer of {} bytes is not the {} bytes sent",
        answer.len(),
        shorter.len()
    );
    // A large input, a small output; then small calls as before.
    let error = lease.call("reverse", &input).unwrap_err();
    assert!(matches!(error, Error::PassFailed { status: 2, .. }), "{error:?}");
    assert_eq!(lease.call("reverse", b"abc").unwrap(), b"cba");
    // No region is left open in the worker; the host keeps the two its calls took turns
    // with (one for their inputs, one for their outputs), for the next large input, until
    // the set unloads.
    let regions = |pid: u32| {
        std::fs::read_dir(format!("/proc/{pid}/fd"))
            .unwrap()
            .filter_map(|entry| std::fs::read_link(entry.unwrap().path()).ok())
            .filter(|target| target.to_string_lossy().contains("dylease-message"))
            .count()
    };
    // A call thread closes its output region just after its reply is sent: soon after the
    // host has it.
    await_that("the worker holds no message region", || regions(worker) == 0);
    assert_eq!(regions(std::process::id()), 2, "the host holds other than two regions");
    drop(lease);
    assert_reaped(worker);
    assert_eq!(
        regions(std::process::id()),
        0,
        "the host holds a region after the unload"
    );
}

/// A stand-in worker (`worker_command`) that greets the host, maps nothing but says it
/// registered the message pass `echo`, and answers its first call with a shared reply whose
/// region lies about its size as `ANSWER` (its program's name) says; or, as `regionless` and
/// `beyond`, with no region, the output said to be in the region the call brought: a small
/// call brought none, and a mebibyte's output region holds fewer bytes than announced.
const LYING_WORKER: &str = r#"#!/usr/bin/env python3
import fcntl, os, socket, struct, sys
channel = socket.socket(fileno=int(os.environ["DYLEASE_WORKER_CHANNEL"]))
def text(s):
    return struct.pack("<I", len(s)) + s
hello = channel.recv(70000)
kind, length, ident, version = struct.unpack("<IIQI", hello[:16 + 4])
channel.send(struct.pack("<IIQII", 101, 8, ident, version, os.getpid()))
request, _, _, _ = channel.recvmsg(70000, 256)
kind, length, ident = struct.unpack("<IIQ", request[:16])
mapped = text(b"liar") + text(b"1") + struct.pack("<I", 1) + text(b"echo") + struct.pack("<I", 1) + text(b"dylease.message/1")
channel.send(struct.pack("<IIQ", 102, len(mapped), ident) + mapped)
call, _, _, _ = channel.recvmsg(70000, 256)
kind, length, ident = struct.unpack("<IIQ", call[:16])
mode = sys.argv[0].rsplit("/", 1)[-1]
if mode in ("regionless", "beyond"):
    reply = struct.pack("<iQ", 0, {"regionless": 10, "beyond": (1 << 20) + 1}[mode])
    channel.send(struct.pack("<IIQ", 107, len(reply), ident) + reply)
    channel.recv(70000)
    sys.exit(0)
region = os.memfd_create("dylease-message", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
os.write(region, b"0123456789")
mode = sys.argv[0].rsplit("/", 1)[-1]
if mode == "sealed-short":
    fcntl.fcntl(region, 1033, 2 | 4)
announced = {"unsealed": 10, "sealed-short": 100, "huge": 1 << 40}[mode]
reply = struct.pack("<iQ", 0, announced)
socket.send_fds(channel, [struct.pack("<IIQ", 107, len(reply), ident) + reply], [region])
channel.recv(70000)
"#;

#[test]
fn a_shared_reply_whose_region_lies_about_its_size_kills_the_worker() {
    let dir = TestDir::new("isolated-lying");
    let file = dir.add("by_hand", "libliar.so");
    static MEBIBYTE: [u8; 1 << 20] = [7; 1 << 20];
    for (name, input, said) in [
        ("unsealed", &b"x"[..], "not sealed against a change of size"),
        ("sealed-short", b"x", "announced as 100"),
        ("huge", b"x", "more than"),
        ("regionless", b"x", "without its region"),
        ("beyond", &MEBIBYTE, "1048577 bytes of output in a region of 1048576"),
    ] {
        let program = dir.path().join(name);
        std::fs::write(&program, LYING_WORKER).unwrap();
        std::fs::set_permissions(&program, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        // SAFETY: the test's own fixture, which the stand-in worker never maps.
        let host = unsafe { PluginHost::builder().file(&file) }
            .isolated()
            .worker_command(&program)
            .call_deadline(Duration::from_secs(20))
            .build()
            .unwrap();
        let lease = host.acquire().unwrap_or_else(|e| panic!("{name}: {e}"));
        let error = call_bounded(&lease, "echo", input).unwrap_err();
        match worker_failure(error, &file, Some("echo")) {
            WorkerCause::Protocol(what) => assert!(what.contains(said), "{name}: {what}"),
            other => panic!("{name}: expected a protocol failure, got {other:?}"),
        }
        drop(lease);
        assert!(!host.is_loaded());
    }
}

#[test]
fn concurrent_large_calls_each_get_their_own_answer() {
    let dir = TestDir::new("isolated-concurrent-large");
    let file = dir.add("isolated", "libisolated.so");
    let host = isolated(&file, Duration::from_secs(30));
    let lease = host.acquire().unwrap();
    let worker = lease.worker_pid().unwrap();
    const CALLERS: usize = 4;
    let start = std::sync::Arc::new(std::sync::Barrier::new(CALLERS));
    let callers: Vec<_> = (0..CALLERS)
        .map(|caller| {
            let (lease, start) = (lease.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                // Each caller's inputs differ from every other's, in every byte, and in
                // length: an answer written to or read from another call's region shows.
                for round in 0..8usize {
                    let len = (1 << 19) + caller * 4099 + round * 7;
                    let input: Vec<u8> = (0..len).map(|i| (i * 31 + caller * 64 + round) as u8).collect();
                    let output = lease.call("echo", &input).unwrap();
                    assert!(output == input, "caller {caller}, round {round}: another answer");
                }
            })
        })
        .collect();
    for caller in callers {
        caller.join().unwrap();
    }
    assert_eq!(lease.worker_pid(), Some(worker), "the worker was replaced");
    drop(lease);
    assert_reaped(worker);
}

/// A stand-in worker (`worker_command`) that greets the host and says it registered the
/// message pass `echo`; answers its first call (a shared one) with `one` and, once it has so
/// handed the region back, tries every way to write to it: `write` on the descriptor
/// received, `ftruncate`, a writable shared mapping, and `write` through a reopening of
/// `/proc/self/fd/N`. It answers the second call with what each attempt did, whether the
/// region came back, and the first 8 bytes it reads of the second call's input.
const WRITING_WORKER: &str = r#"#!/usr/bin/env python3
import mmap, os, socket, struct
channel = socket.socket(fileno=int(os.environ["DYLEASE_WORKER_CHANNEL"]))
def text(s):
    return struct.pack("<I", len(s)) + s
hello = channel.recv(70000)
kind, length, ident, version = struct.unpack("<IIQI", hello[:16 + 4])
channel.send(struct.pack("<IIQII", 101, 8, ident, version, os.getpid()))
request, _, _, _ = channel.recvmsg(70000, 256)
kind, length, ident = struct.unpack("<IIQ", request[:16])
mapped = text(b"writer") + text(b"1") + struct.pack("<I", 1) + text(b"echo") + struct.pack("<I", 1) + text(b"dylease.message/1")
channel.send(struct.pack("<IIQ", 102, len(mapped), ident) + mapped)
def reply(ident, output):
    payload = struct.pack("<i", 0) + output
    channel.send(struct.pack("<IIQ", 104, len(payload), ident) + payload)
def attempt(action):
    try:
        action()
        return b"wrote"
    except OSError:
        return b"denied"
def reopened_write(fd):
    again = os.open("/proc/self/fd/%d" % fd, os.O_RDWR)
    os.pwrite(again, b"worker", 0)
call, fds, _, _ = socket.recv_fds(channel, 70000, 4)
first = fds[0]
reply(struct.unpack("<IIQ", call[:16])[2], b"one")
report = [
    b"write=" + attempt(lambda: os.pwrite(first, b"worker", 0)),
    b"truncate=" + attempt(lambda: os.ftruncate(first, 0)),
    b"mmap=" + attempt(lambda: mmap.mmap(first, 4096, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)),
    b"reopen=" + attempt(lambda: reopened_write(first)),
]
call, fds, _, _ = socket.recv_fds(channel, 70000, 4)
same = os.fstat(fds[0]).st_ino == os.fstat(first).st_ino
report.append(b"same=" + (b"yes" if same else b"no"))
report.append(b"head=" + os.pread(fds[0], 8, 0).hex().encode())
reply(struct.unpack("<IIQ", call[:16])[2], b" ".join(report))
channel.recv(70000)
"#;

#[test]
fn a_reused_input_region_can_be_written_by_the_host_alone() {
    let dir = TestDir::new("isolated-writing");
    let file = dir.add("by_hand", "libwriter.so");
    let program = dir.path().join("writer");
    std::fs::write(&program, WRITING_WORKER).unwrap();
    std::fs::set_permissions(&program, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // SAFETY: the test's own fixture, which the stand-in worker never maps.
    let host = unsafe { PluginHost::builder().file(&file) }
        .isolated()
        .worker_command(&program)
        .call_deadline(Duration::from_secs(20))
        .build()
        .unwrap();
    let lease = host.acquire().unwrap();
    let first = vec![1u8; 1 << 20];
    let second: Vec<u8> = (0..1u32 << 20).map(|i| (i % 251) as u8).collect();
    assert_eq!(lease.call("echo", &first).unwrap(), b"one");
    let report = String::from_utf8(lease.call("echo", &second).unwrap()).unwrap();
    let head: String = second[..8].iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        report,
        format!("write=denied truncate=denied mmap=denied reopen=denied same=yes head={head}"),
        "the worker wrote to a region the host reuses, or did not get it back"
    );
    drop(lease);
    assert!(!host.is_loaded());
}

#[test]
fn no_plugin_after_a_failed_one_runs_under_strict_and_the_others_load_under_skip_failed() {
    let dir = TestDir::new("isolated-order");
    let files = [
        dir.add("hooks_on_load_fails", "liba.so"),
        dir.add("by_hand_marker", "libb.so"),
        dir.add("isolated", "libc.so"),
    ];
    // What the second plugin's constructor creates, in whatever process maps it.
    let ran = PathBuf::from(format!("{}.ran", files[1].display()));
    let host = |policy| {
        // SAFETY: the test's own fixtures.
        unsafe { PluginHost::builder().file(&files[0]).file(&files[1]).file(&files[2]) }
            .isolated()
            .policy(policy)
            .build()
            .unwrap()
    };
    // The host sends every plugin before it reads the first answer; the worker must not map
    // those after the one that failed.
    let error = host(LoadPolicy::Strict).acquire().unwrap_err();
    assert!(matches!(error, Error::OnLoadFailed { code: -3, .. }), "{error:?}");
    assert!(!ran.exists(), "a plugin sent after the failed one was mapped");
    // Skipping the failed one, the others are sent again and load, in order.
    let host = host(LoadPolicy::SkipFailed);
    let lease = host.acquire().unwrap();
    assert!(ran.exists());
    let origins: Vec<_> = lease.plugins().iter().map(|plugin| plugin.origin().clone()).collect();
    assert_eq!(
        origins,
        [Origin::File(files[1].clone()), Origin::File(files[2].clone())]
    );
    assert_eq!(lease.call("echo", b"x").unwrap(), b"x");
    let failures: Vec<_> = lease
        .failures()
        .iter()
        .map(|f| (f.origin().clone(), f.error()))
        .collect();
    assert!(
        matches!(&failures[..], [(Origin::File(path), Error::OnLoadFailed { code: -3, .. })] if path == &files[0]),
        "{failures:?}"
    );
}

#[test]
fn a_plugins_on_unload_runs_once_in_the_worker_when_the_last_lease_drops() {
    let dir = TestDir::new("isolated-on-unload");
    let file = dir.add("hooks", "libhooks.so");
    let host = isolated(&file, Duration::from_secs(30));
    let lease = host.acquire().unwrap();
    let worker = lease
        .worker_pid()
        .expect("an isolated set with a library plugin has a worker");
    // Its hooks ran in the worker: the plugin was never mapped here.
    assert!(!mapped(&file), "the plugin is mapped in the host");
    assert!(maps_of(worker).contains(&*file.to_string_lossy()));
    assert_eq!(events(&file), ["on_load", "register"]);
    let other = lease.clone();
    drop(lease);
    assert_eq!(
        events(&file),
        ["on_load", "register"],
        "unloaded while a lease was left"
    );
    // The last lease: the worker is asked to unload its plugins and exit, and the drop
    // returns once it was reaped (an unload that never ends is killed at the call deadline,
    // so this is bounded).
    drop(other);
    assert!(!host.is_loaded());
    assert_eq!(events(&file), ["on_load", "register", "on_unload"]);
    assert_reaped(worker);
}

#[test]
fn a_plugin_that_fails_its_load_in_the_worker_fails_as_it_does_in_the_process() {
    let dir = TestDir::new("isolated-same-failures");
    for fixture in [
        "noentry",
        "by_hand_abi3",
        "by_hand_empty_name",
        "by_hand_empty_pass_name",
        "by_hand_register_fails",
        "by_hand_unresolved",
        "by_hand_same_pass_twice",
    ] {
        let file = dir.add(fixture, &format!("lib{fixture}.so"));
        let in_process = ordinary(&file).acquire().unwrap_err();
        let in_worker = isolated(&file, Duration::from_secs(20)).acquire().unwrap_err();
        assert_eq!(
            std::mem::discriminant(&in_worker),
            std::mem::discriminant(&in_process),
            "{fixture}: {in_worker:?} in the worker, {in_process:?} in the process"
        );
        assert_eq!(in_worker.to_string(), in_process.to_string(), "{fixture}");
    }
}

/// The parent process id of the live process `pid` (`/proc/<pid>/stat`'s fourth field).
fn parent_of(pid: u32) -> u32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The name, in parentheses, may hold spaces: the fields after it are counted from its end.
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    after_name.split(' ').nth(1).unwrap().parse().unwrap()
}

/// Whether the process `pid` is dead: gone, or a zombie (of the process that adopted it when
/// its zygote died, init, whose to reap it is then).
fn is_dead(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.is_empty() || stat[stat.rfind(')').unwrap() + 2..].starts_with('Z')
}

#[test]
fn workers_are_forked_by_a_zygote_whose_death_fails_its_sets_and_not_the_next() {
    // In a child process of its own: the zygote is the test binary's, and its death takes
    // the workers of every test running beside this one.
    if !crate::bounded::in_a_process_of_its_own(
        "isolated::workers_are_forked_by_a_zygote_whose_death_fails_its_sets_and_not_the_next",
        "DYLEASE_TEST_ZYGOTE_KILLED",
    ) {
        return;
    }
    let dir = TestDir::new("isolated-zygote");
    let file = dir.add("isolated", "libisolated.so");
    let host = isolated(&file, Duration::from_secs(30));
    let lease = host.acquire().unwrap();
    let worker = lease.worker_pid().unwrap();
    let zygote = parent_of(worker);
    assert_ne!(
        zygote,
        std::process::id(),
        "the worker was forked by a zygote, not by the host"
    );
    assert_eq!(parent_of(zygote), std::process::id(), "the zygote is the host's child");
    // A second set's worker comes from the same zygote.
    let other_dir = TestDir::new("isolated-zygote-other");
    let other_file = other_dir.add("isolated", "libisolated.so");
    let other = isolated(&other_file, Duration::from_secs(30));
    let other_lease = other.acquire().unwrap();
    let other_worker = other_lease.worker_pid().unwrap();
    assert_eq!(parent_of(other_worker), zygote);
    drop(other_lease);
    assert_reaped(other_worker);

    // The zygote killed from outside takes its workers with it: their sets fail naming the
    // signal, the host goes on, and the next acquire gets a worker of a new zygote.
    // SAFETY: `kill` of the zygote, alive (its worker is) and the host's child not yet reaped.
    assert_eq!(unsafe { libc::kill(zygote as libc::pid_t, libc::SIGKILL) }, 0);
    await_that("the worker dies with its zygote", || is_dead(worker));
    let error = call_bounded(&lease, "reverse", b"ab").unwrap_err();
    assert_eq!(
        worker_failure(error, &file, Some("reverse")),
        WorkerCause::Signal(libc::SIGKILL)
    );
    drop(lease);
    let lease = host.acquire().unwrap();
    assert_eq!(call_bounded(&lease, "reverse", b"ok").unwrap(), b"ko");
    let new_zygote = parent_of(lease.worker_pid().unwrap());
    assert_ne!(new_zygote, zygote);
    assert_eq!(parent_of(new_zygote), std::process::id());
    // The dead zygote was reaped once its last worker was: no zombie of it is left.
    assert_reaped(zygote);
}

#[test]
fn a_child_forked_from_a_host_with_workers_gets_workers_of_its_own() {
    // In a child process of its own, with one test thread: a `fork` of the whole suite could
    // copy a lock another test's thread held.
    if !crate::bounded::in_a_process_of_its_own(
        "isolated::a_child_forked_from_a_host_with_workers_gets_workers_of_its_own",
        "DYLEASE_TEST_FORKED_HOST",
    ) {
        return;
    }
    let dir = TestDir::new("isolated-forked-host");
    let file = dir.add("isolated", "libisolated.so");
    let host = isolated(&file, Duration::from_secs(30));
    let lease = host.acquire().unwrap();
    let worker = lease.worker_pid().unwrap();
    assert_eq!(lease.call("reverse", b"ab").unwrap(), b"ba");
    // SAFETY: the child below only runs dylease's isolated acquire and a call, then `_exit`s;
    // this process's other threads (the host's reader, spawning and keeper threads) hold no
    // lock while they wait.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork: {}", std::io::Error::last_os_error());
    if child == 0 {
        let worked = std::panic::catch_unwind(|| {
            let host = isolated(&file, Duration::from_secs(30));
            let lease = host.acquire().unwrap();
            let own = lease.worker_pid().unwrap();
            assert_ne!(own, worker);
            // SAFETY: `getpid` has no preconditions.
            let me = unsafe { libc::getpid() } as u32;
            assert_eq!(parent_of(parent_of(own)), me, "its worker's zygote is the child's own");
            assert_eq!(lease.call("pid", b"").unwrap(), own.to_string().as_bytes());
        });
        // SAFETY: `_exit` ends the forked child without running the parent's exit handlers.
        unsafe { libc::_exit(if worked.is_ok() { 0 } else { 1 }) };
    }
    let status = std::cell::Cell::new(0);
    let ended = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        await_that("the forked host ends", || {
            let mut raw = 0;
            // SAFETY: `waitpid` of this process's child with `WNOHANG`; `raw` is writable.
            let reaped = unsafe { libc::waitpid(child, &mut raw, libc::WNOHANG) } == child;
            status.set(raw);
            reaped
        })
    }));
    if ended.is_err() {
        // SAFETY: `kill` of this process's child, not reaped (the wait above never saw it end).
        unsafe { libc::kill(child, libc::SIGKILL) };
        panic!("the forked host did not finish its isolated acquire and call within the bound");
    }
    assert!(
        libc::WIFEXITED(status.get()) && libc::WEXITSTATUS(status.get()) == 0,
        "the forked host failed (status {:#x})",
        status.get()
    );
    // The parent's set goes on.
    assert_eq!(lease.call("reverse", b"cd").unwrap(), b"dc");
}

/// The value of `name` in the environment of the live process `pid`, if it has it.
fn environment_of(pid: u32, name: &str) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    environ.split(|&b| b == 0).find_map(|variable| {
        let variable = String::from_utf8_lossy(variable);
        variable
            .strip_prefix(name)
            .and_then(|rest| rest.strip_prefix('='))
            .map(str::to_owned)
    })
}

#[test]
fn a_worker_started_after_the_host_changed_its_environment_or_directory_has_the_new_ones() {
    // In a child process of its own: the environment and the current directory are the
    // process's.
    if !crate::bounded::in_a_process_of_its_own(
        "isolated::a_worker_started_after_the_host_changed_its_environment_or_directory_has_the_new_ones",
        "DYLEASE_TEST_ZYGOTE_CONTEXT",
    ) {
        return;
    }
    let dir = TestDir::new("isolated-zygote-context");
    let file = dir.add("isolated", "libisolated.so");
    let first = isolated(&file, Duration::from_secs(30));
    let lease = first.acquire().unwrap();
    let (worker, zygote) = (lease.worker_pid().unwrap(), parent_of(lease.worker_pid().unwrap()));
    assert_eq!(environment_of(worker, "DYLEASE_TEST_MARK"), None);

    // SAFETY: this child process runs one test; the host's threads read the environment only
    // when they start a zygote, which none does now.
    unsafe { std::env::set_var("DYLEASE_TEST_MARK", "after") };
    let other_dir = TestDir::new("isolated-zygote-context-env");
    let other_file = other_dir.add("isolated", "libisolated.so");
    let after_env = isolated(&other_file, Duration::from_secs(30)).acquire().unwrap();
    let worker_after_env = after_env.worker_pid().unwrap();
    assert_ne!(
        parent_of(worker_after_env),
        zygote,
        "a new zygote for the new environment"
    );
    assert_eq!(
        environment_of(worker_after_env, "DYLEASE_TEST_MARK").as_deref(),
        Some("after")
    );

    let elsewhere = TestDir::new("isolated-zygote-context-cwd");
    std::env::set_current_dir(elsewhere.path()).unwrap();
    let third_dir = TestDir::new("isolated-zygote-context-dir");
    let third_file = third_dir.add("isolated", "libisolated.so");
    let after_cd = isolated(&third_file, Duration::from_secs(30)).acquire().unwrap();
    let worker_after_cd = after_cd.worker_pid().unwrap();
    assert_ne!(parent_of(worker_after_cd), parent_of(worker_after_env));
    assert_eq!(
        std::fs::read_link(format!("/proc/{worker_after_cd}/cwd")).unwrap(),
        elsewhere.path().canonicalize().unwrap()
    );
    // The first set's worker, of the first zygote, goes on.
    assert_eq!(lease.call("reverse", b"ab").unwrap(), b"ba");
    // Once it is gone, so is the zygote that serves no more: ended and reaped.
    drop(lease);
    drop(first);
    assert_reaped(worker);
    assert_reaped(zygote);
}

#[test]
#[ignore = "needs root"]
fn a_worker_started_after_the_host_dropped_a_group_runs_without_it() {
    // In a child process of its own: credentials are the process's.
    if !crate::bounded::in_a_process_of_its_own(
        "isolated::a_worker_started_after_the_host_dropped_a_group_runs_without_it",
        "DYLEASE_TEST_ZYGOTE_CREDENTIALS",
    ) {
        return;
    }
    /// The effective group id of the live process `pid` (`/proc/<pid>/status`).
    fn effective_gid(pid: u32) -> u32 {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let line = status.lines().find(|line| line.starts_with("Gid:")).unwrap();
        line.split_whitespace().nth(2).unwrap().parse().unwrap()
    }
    let dir = TestDir::new("isolated-zygote-credentials");
    let file = dir.add("isolated", "libisolated.so");
    let lease = isolated(&file, Duration::from_secs(30)).acquire().unwrap();
    let worker = lease.worker_pid().unwrap();
    assert_eq!(effective_gid(worker), 0);
    // A server that started its plugins as root, then took another effective group.
    let other = crate::bounded::OTHER_USER;
    // SAFETY: `setresgid` takes plain ids (-1: unchanged); glibc applies it to every thread.
    assert_eq!(unsafe { libc::setresgid(u32::MAX, other, u32::MAX) }, 0);
    let other_dir = TestDir::new("isolated-zygote-credentials-after");
    let other_file = other_dir.add("isolated", "libisolated.so");
    let after = isolated(&other_file, Duration::from_secs(30)).acquire().unwrap();
    let worker_after = after.worker_pid().unwrap();
    assert_ne!(
        parent_of(worker_after),
        parent_of(worker),
        "a new zygote for the new group"
    );
    assert_eq!(effective_gid(worker_after), other);
    assert_eq!(after.call("reverse", b"ab").unwrap(), b"ba");
}

/// A stand-in worker (`worker_command`) that greets the host, writes its process id to
/// `<program>.pid`, and then does as its program's name says. With the first plugin's load:
/// `refuses-load` answers `MapFailed` (and exits at the host's `Unload`, or when the host
/// closes the channel); the name modes say they registered plugin `rogue` version `1` with
/// the message pass `echo`, but with an empty plugin name, one of 257 bytes, a version of
/// 257 bytes (or of 256, `version-at-bound`, which a registration accepts), an empty pass
/// name, or an interface name of 257 bytes. With the calls: `refuses-call` answers the first
/// with `CallFailed` and the next as a pass that answers `after`; `holds-calls` waits for
/// five calls (one more than a worker runs at once) before it answers any, twice, and
/// answers each call of the second five with how many of their input regions it saw among
/// the first five's; `closes-then-exits` closes its channel at the first call, says so in
/// `<program>.closed`, and exits with status 3 once `<program>.go` exists;
/// `closes-and-lingers` closes its channel at the first call and stays (until killed).
/// Every wait of its own is bounded (60 s).
const ROGUE_WORKER: &str = r#"#!/usr/bin/env python3
import os, socket, struct, sys, time
channel = socket.socket(fileno=int(os.environ["DYLEASE_WORKER_CHANNEL"]))
channel.settimeout(60)
program = sys.argv[0]
mode = program.rsplit("/", 1)[-1]
def text(s):
    return struct.pack("<I", len(s)) + s
def send(kind, ident, payload=b""):
    channel.send(struct.pack("<IIQ", kind, len(payload), ident) + payload)
def receive():
    message, fds, _, _ = socket.recv_fds(channel, 70000, 4)
    kind, length, ident = struct.unpack("<IIQ", message[:16])
    return kind, ident, fds
hello = channel.recv(70000)
kind, length, ident, version = struct.unpack("<IIQI", hello[:20])
channel.send(struct.pack("<IIQII", 101, 8, ident, version, os.getpid()))
with open(program + ".pid", "w") as f:
    f.write(str(os.getpid()))
_, ident, _ = receive()
if mode == "refuses-load":
    send(103, ident, struct.pack("<Ii", 0, 0) + text(b"refused by the stand-in") + text(b""))
    channel.recv(70000)
    sys.exit(0)
name, version, passes = b"rogue", b"1", [(b"echo", b"dylease.message/1")]
if mode == "empty-name":
    name = b""
elif mode == "long-name":
    name = b"n" * 257
elif mode == "long-version":
    version = b"v" * 257
elif mode == "version-at-bound":
    version = b"v" * 256
elif mode == "empty-pass":
    passes = [(b"", b"dylease.message/1")]
elif mode == "long-interface":
    passes = [(b"echo", b"i" * 257)]
mapped = text(name) + text(version) + struct.pack("<I", len(passes))
for pass_name, interface in passes:
    mapped += text(pass_name) + struct.pack("<I", 1) + text(interface)
send(102, ident, mapped)
if mode == "refuses-call":
    _, ident, _ = receive()
    send(105, ident, b"no such luck")
    _, ident, _ = receive()
    send(104, ident, struct.pack("<i", 0) + b"after")
elif mode == "holds-calls":
    seen = set()
    for burst in range(2):
        calls = [receive() for _ in range(5)]
        regions = [os.fstat(fds[0]).st_ino for _, _, fds in calls]
        known = sum(region in seen for region in regions)
        seen.update(regions)
        for _, ident, _ in calls:
            send(104, ident, struct.pack("<i", 0) + str(known).encode())
elif mode == "closes-then-exits":
    receive()
    channel.close()
    open(program + ".closed", "w").close()
    for _ in range(60000):
        if os.path.exists(program + ".go"):
            sys.exit(3)
        time.sleep(0.001)
    sys.exit(0)
elif mode == "closes-and-lingers":
    receive()
    channel.close()
    time.sleep(60)
    sys.exit(0)
channel.recv(70000)
"#;

/// `ROGUE_WORKER` as the program `name` in `dir`.
fn rogue_worker(dir: &TestDir, name: &str) -> PathBuf {
    let program = dir.path().join(name);
    std::fs::write(&program, ROGUE_WORKER).unwrap();
    std::fs::set_permissions(&program, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    program
}

/// An isolated host over `file` whose worker is the stand-in `program`.
fn with_worker(file: &Path, program: &Path) -> PluginHost {
    // SAFETY: the test's own fixture, which the stand-in worker never maps.
    unsafe { PluginHost::builder().file(file) }
        .isolated()
        .worker_command(program)
        .call_deadline(Duration::from_secs(20))
        .build()
        .unwrap()
}

#[test]
fn a_worker_that_reports_a_name_no_registration_accepts_is_killed_and_one_at_the_bounds_loads() {
    let dir = TestDir::new("isolated-rogue-names");
    let file = dir.add("by_hand", "librogue.so");
    for name in [
        "empty-name",
        "long-name",
        "long-version",
        "empty-pass",
        "long-interface",
    ] {
        let host = with_worker(&file, &rogue_worker(&dir, name));
        let error = host.acquire().unwrap_err();
        match worker_failure(error, &file, None) {
            WorkerCause::Protocol(what) => {
                assert!(what.contains("a name no registration accepts"), "{name}: {what}")
            }
            other => panic!("{name}: expected a protocol failure, got {other:?}"),
        }
    }
    // A version of exactly the most a registration takes is accepted.
    let host = with_worker(&file, &rogue_worker(&dir, "version-at-bound"));
    let lease = host.acquire().unwrap();
    assert_eq!(lease.plugins()[0].name(), "rogue");
    assert_eq!(lease.plugins()[0].version(), "v".repeat(256));
}

#[test]
fn a_call_the_worker_refuses_fails_with_its_reason_and_the_set_goes_on() {
    let dir = TestDir::new("isolated-rogue-refusal");
    let file = dir.add("by_hand", "librogue.so");
    let host = with_worker(&file, &rogue_worker(&dir, "refuses-call"));
    let lease = host.acquire().unwrap();
    match call_bounded(&lease, "echo", b"x").unwrap_err() {
        Error::CallRefused { pass, reason, .. } => {
            assert_eq!(pass, "echo");
            assert_eq!(reason, "the worker refused the call: no such luck");
        }
        other => panic!("expected CallRefused, got {other:?}"),
    }
    assert_eq!(call_bounded(&lease, "echo", b"y").unwrap(), b"after");
}

#[test]
fn a_worker_keeps_at_most_one_input_region_per_worker_thread_for_reuse() {
    const CALLS: usize = 5;
    let dir = TestDir::new("isolated-rogue-regions");
    let file = dir.add("by_hand", "librogue.so");
    let host = with_worker(&file, &rogue_worker(&dir, "holds-calls"));
    let lease = host.acquire().unwrap();
    // Five large calls at once (the stand-in answers none before it has all five), twice:
    // after the first five, the host keeps four of their regions, so the second five reuse
    // four and make one.
    let burst = || {
        let callers: Vec<_> = (0..CALLS)
            .map(|_| {
                let lease = lease.clone();
                std::thread::spawn(move || lease.call("echo", &[7; 100_000]))
            })
            .collect();
        let (done, answers) = mpsc::channel();
        std::thread::spawn(move || {
            let answers: Vec<_> = callers.into_iter().map(|caller| caller.join().unwrap()).collect();
            done.send(answers)
        });
        answers
            .recv_timeout(Duration::from_secs(20))
            .expect("the calls returned within 20 s")
    };
    for answer in burst() {
        assert_eq!(answer.unwrap(), b"0");
    }
    for answer in burst() {
        assert_eq!(
            answer.unwrap(),
            b"4",
            "other than four regions (one per worker thread) were reused"
        );
    }
}

#[test]
fn a_failed_isolated_load_unloads_and_reaps_its_worker() {
    let dir = TestDir::new("isolated-rogue-refused-load");
    let file = dir.add("by_hand", "librogue.so");
    let program = rogue_worker(&dir, "refuses-load");
    let error = with_worker(&file, &program).acquire().unwrap_err();
    assert!(error.to_string().contains("refused by the stand-in"), "{error}");
    // The load failed before its worker joined a set: the acquire's return waited for its
    // unload and reap.
    let pid: u32 = std::fs::read_to_string(beside(&program, ".pid"))
        .unwrap()
        .parse()
        .unwrap();
    assert_reaped(pid);
}

#[test]
fn a_worker_that_closes_its_channel_is_reaped_with_its_exit_or_killed_if_it_stays() {
    let dir = TestDir::new("isolated-rogue-closes");
    let file = dir.add("by_hand", "librogue.so");
    // It exits on its own within the reap's wait: its status is its own.
    let program = rogue_worker(&dir, "closes-then-exits");
    let host = with_worker(&file, &program);
    let lease = host.acquire().unwrap();
    let call = {
        let lease = lease.clone();
        std::thread::spawn(move || call_bounded(&lease, "echo", b"x"))
    };
    await_that("the worker closed its channel", || beside(&program, ".closed").exists());
    std::fs::write(beside(&program, ".go"), "").unwrap();
    let error = call.join().unwrap().unwrap_err();
    assert_eq!(worker_failure(error, &file, Some("echo")), WorkerCause::Exit(3));
    drop(lease);
    // It stays: killed once the reap's wait is over, and reaped.
    let program = rogue_worker(&dir, "closes-and-lingers");
    let host = with_worker(&file, &program);
    let lease = host.acquire().unwrap();
    let error = call_bounded(&lease, "echo", b"x").unwrap_err();
    assert_eq!(
        worker_failure(error, &file, Some("echo")),
        WorkerCause::Signal(libc::SIGKILL)
    );
    let pid: u32 = std::fs::read_to_string(beside(&program, ".pid"))
        .unwrap()
        .parse()
        .unwrap();
    drop(lease);
    assert_reaped(pid);
}

#[test]
fn a_worker_that_exits_non_zero_at_its_unload_is_logged_and_a_clean_one_is_not() {
    crate::logger::install();
    let dir = TestDir::new("isolated-unload-status");
    for (fixture, warned) in [
        ("isolated", None),
        ("isolated_exit_on_unload", Some("it exited with status 5")),
    ] {
        let file = dir.add(fixture, &format!("lib{fixture}.so"));
        let host = isolated(&file, Duration::from_secs(20));
        let lease = host.acquire().unwrap();
        let worker = lease.worker_pid().unwrap();
        // The log names the worker by its process id.
        let started = crate::logger::records(log::Level::Debug, &format!("started worker process {worker} for"));
        assert_eq!(started.len(), 1, "{fixture}: {started:?}");
        drop(lease);
        assert_reaped(worker);
        let warnings = crate::logger::records(
            log::Level::Warn,
            &format!("the worker process {worker} of an isolated set"),
        );
        match warned {
            None => assert!(warnings.is_empty(), "{fixture}: {warnings:?}"),
            Some(status) => assert!(
                matches!(&warnings[..], [warning] if warning.contains(status) && warning.contains("on_unload")),
                "{fixture}: {warnings:?}"
            ),
        }
    }
}

/// Answers its input in upper case.
unsafe extern "C" fn upper(
    input: *const u8,
    len: usize,
    out: *mut dylease::abi::dylease_out,
    _: *mut std::ffi::c_void,
) -> i32 {
    let input = match len {
        0 => &[][..],
        // SAFETY: the host hands `len` readable bytes at `input`.
        _ => unsafe { std::slice::from_raw_parts(input, len) },
    };
    // SAFETY: `out` is this call's output.
    if unsafe { dylease::abi::dylease_out::append(out, &input.to_ascii_uppercase()) } {
        0
    } else {
        1
    }
}

#[test]
fn a_static_plugins_message_pass_answers_in_the_host_beside_an_isolated_one() {
    use dylease::Registrar;
    let dir = TestDir::new("isolated-static");
    let file = dir.add("isolated", "libisolated.so");
    // SAFETY: the test's own fixture.
    let host = unsafe { PluginHost::builder().file(&file) }
        .static_plugin("text", |reg| {
            reg.add_typed_pass::<dylease::MessagePass>("upper", upper, std::ptr::null_mut())
        })
        .isolated()
        .call_deadline(Duration::from_secs(20))
        .build()
        .unwrap();
    let lease = host.acquire().unwrap();
    let worker = lease.worker_pid().unwrap();
    // The worker has no pass `upper`: it answers here.
    assert_eq!(call_bounded(&lease, "upper", b"shout").unwrap(), b"SHOUT");
    assert_eq!(call_bounded(&lease, "pid", b"").unwrap(), worker.to_string().as_bytes());
}

#[test]
fn an_input_of_exactly_the_most_a_call_carries_goes_through_and_one_byte_more_is_refused() {
    // `MAX_MESSAGE`, the most an isolated call carries.
    const MOST: usize = 256 << 20;
    let dir = TestDir::new("isolated-most");
    let file = dir.add("isolated", "libisolated.so");
    let host = isolated(&file, Duration::from_secs(60));
    let lease = host.acquire().unwrap();
    let mut input = vec![0u8; MOST];
    assert_eq!(lease.call("size", &input).unwrap(), MOST.to_string().as_bytes());
    input.push(0);
    match lease.call("size", &input).unwrap_err() {
        Error::CallRefused { reason, .. } => assert!(reason.contains("more than an isolated call carries"), "{reason}"),
        other => panic!("expected CallRefused, got {other:?}"),
    }
}

/// An isolated host over `file` (a plugin whose run path uses `$ORIGIN`) under `trust`.
fn isolated_trusting(file: &Path, trust: dylease::TrustPolicy) -> PluginHost {
    // SAFETY: the test's own fixture.
    unsafe { PluginHost::builder().file(file) }
        .trust(trust)
        .isolated()
        .call_deadline(Duration::from_secs(20))
        .build()
        .unwrap()
}

#[test]
fn an_origin_plugin_in_a_sticky_directory_is_refused_under_strict_and_loads_in_its_worker_under_permissive() {
    let dir = TestDir::new("isolated-origin-sticky");
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o1777)).unwrap();
    let file = dir.add("isolated_origin", "libisolated.so");
    // Others can create names where its loader finds it: the host's check refuses it under
    // Strict; under Permissive the worker, told the policy, maps it there as the process would.
    let error = isolated_trusting(&file, dylease::TrustPolicy::Strict)
        .acquire()
        .unwrap_err();
    assert!(error.to_string().contains("(mode 1777, sticky)"), "{error}");
    let host = isolated_trusting(&file, dylease::TrustPolicy::Permissive);
    let lease = host.acquire().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(call_bounded(&lease, "reverse", b"ab").unwrap(), b"ba");
}

#[test]
fn an_origin_plugin_in_a_directory_its_user_may_search_but_not_read_loads_in_its_worker() {
    let dir = TestDir::new("isolated-origin-unreadable");
    let file = dir.add("isolated_origin", "libisolated.so");
    // Searchable, not readable: opening it takes `O_PATH`.
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o311)).unwrap();
    let answer = crate::support::with_permission_checks(|| {
        // (Under Strict, the host's check lists the directory, which it cannot.)
        let host = isolated_trusting(&file, dylease::TrustPolicy::Permissive);
        let lease = host.acquire().map_err(|e| e.to_string())?;
        call_bounded(&lease, "reverse", b"ab").map_err(|e| e.to_string())
    })
    .unwrap_or_else(|e| panic!("{e}"));
    std::fs::set_permissions(dir.path(), std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    assert_eq!(answer.unwrap(), b"ba");
}

/// The children of the live process `pid` (every process whose parent it is).
fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&child| {
            std::fs::read_to_string(format!("/proc/{child}/stat"))
                .is_ok_and(|stat| stat[stat.rfind(')').unwrap() + 2..].split(' ').nth(1) == Some(&pid.to_string()))
        })
        .collect()
}

#[test]
fn the_zygote_forks_a_spare_ahead_and_a_spare_killed_from_outside_is_replaced() {
    // In a child process of its own: the zygote is the process's.
    if !crate::bounded::in_a_process_of_its_own(
        "isolated::the_zygote_forks_a_spare_ahead_and_a_spare_killed_from_outside_is_replaced",
        "DYLEASE_TEST_ZYGOTE_SPARE",
    ) {
        return;
    }
    let dir = TestDir::new("isolated-zygote-spare");
    let file = dir.add("isolated", "libisolated.so");
    let host = isolated(&file, Duration::from_secs(30));
    let lease = host.acquire().unwrap();
    let worker = lease.worker_pid().unwrap();
    let zygote = parent_of(worker);
    // Beside the worker, the zygote holds one spare, forked ahead for the next.
    let spare = || -> Vec<u32> {
        children_of(zygote)
            .into_iter()
            .filter(|&child| child != worker)
            .collect()
    };
    await_that("the zygote forks a spare", || spare().len() == 1);
    let first_spare = spare()[0];
    let other_dir = TestDir::new("isolated-zygote-spare-next");
    let other_file = other_dir.add("isolated", "libisolated.so");
    let next = isolated(&other_file, Duration::from_secs(30)).acquire().unwrap();
    assert_eq!(next.worker_pid(), Some(first_spare), "the next worker is the spare");
    assert_eq!(next.call("pid", b"").unwrap(), first_spare.to_string().as_bytes());
    drop(next);
    assert_reaped(first_spare);

    // A spare killed before its turn: the next worker is forked as if there were none, and
    // the dead spare is reaped.
    await_that("the zygote forks another spare", || spare().len() == 1);
    let killed = spare()[0];
    // SAFETY: `kill` of the spare, alive and not reaped (the zygote reaps it only after its
    // turn comes).
    assert_eq!(unsafe { libc::kill(killed as libc::pid_t, libc::SIGKILL) }, 0);
    await_that("the spare dies", || is_dead(killed));
    let third_dir = TestDir::new("isolated-zygote-spare-killed");
    let third_file = third_dir.add("isolated", "libisolated.so");
    let third = isolated(&third_file, Duration::from_secs(30)).acquire().unwrap();
    assert_ne!(third.worker_pid(), Some(killed));
    assert_eq!(third.call("reverse", b"ab").unwrap(), b"ba");
    assert_reaped(killed);
    assert_eq!(lease.call("reverse", b"cd").unwrap(), b"dc");
}
