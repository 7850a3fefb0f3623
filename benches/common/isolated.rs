//! The baselines of isolated sets (`benches/compare.rs`, groups `isolated*`): a raw
//! ping-pong over a `SOCK_SEQPACKET` socket pair with a forked child process, the floor of any
//! call into another process; a bare `posix_spawn` + `waitpid` of a trivial program, the floor
//! of a worker's start and end; and the plugins with message passes the groups call.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

/// A child process that answers every message on its end of a socket pair with the same
/// bytes, until the pair is closed: the raw round trip an isolated call cannot beat.
pub(crate) struct PingPong {
    ours: OwnedFd,
    child: libc::pid_t,
    buffer: Vec<u8>,
}

impl PingPong {
    /// Forks the echoing child.
    pub(crate) fn start() -> PingPong {
        let mut fds = [0; 2];
        // SAFETY: `fds` has room for the two descriptors `socketpair` writes.
        let made = unsafe {
            libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                fds.as_mut_ptr(),
            )
        };
        assert_eq!(made, 0, "socketpair: {}", std::io::Error::last_os_error());
        // SAFETY: the descriptor was just made and is owned by nobody else.
        let ours = unsafe { OwnedFd::from_raw_fd(fds[0]) };
        // SAFETY: as above.
        let theirs = unsafe { OwnedFd::from_raw_fd(fds[1]) };
        // SAFETY: the child only calls `close`, `recv`, `send` and `_exit`, which are
        // async-signal-safe, on memory it owns (its stack buffer): nothing another thread of
        // this process could hold.
        let child = unsafe { libc::fork() };
        assert!(child >= 0, "fork: {}", std::io::Error::last_os_error());
        if child == 0 {
            echo_until_closed(ours, theirs);
        }
        drop(theirs);
        PingPong {
            ours,
            child,
            buffer: vec![0; 256],
        }
    }

    /// One round trip of `message` (at most 256 bytes).
    pub(crate) fn round_trip(&mut self, message: &[u8]) -> usize {
        // SAFETY: `message` is live for the call and as long as it says.
        let sent = unsafe { libc::send(self.ours.as_raw_fd(), message.as_ptr().cast(), message.len(), 0) };
        assert_eq!(sent, message.len() as isize, "the ping was not sent");
        // SAFETY: `buffer` is writable for as long as it says.
        let got = unsafe {
            libc::recv(
                self.ours.as_raw_fd(),
                self.buffer.as_mut_ptr().cast(),
                self.buffer.len(),
                0,
            )
        };
        assert_eq!(got, message.len() as isize, "the pong did not come back");
        got as usize
    }
}

/// The forked child of [`PingPong::start`]: answers each message on `theirs` with the same
/// bytes until the other end closes, then exits. Async-signal-safe calls only.
fn echo_until_closed(ours: OwnedFd, theirs: OwnedFd) -> ! {
    let mut buffer = [0u8; 256];
    // SAFETY: closes the parent's end, which this process owns a copy of; it is never used
    // again (the process exits without dropping `ours`).
    unsafe { libc::close(ours.as_raw_fd()) };
    loop {
        // SAFETY: `buffer` is the child's own, writable for its length.
        let got = unsafe { libc::recv(theirs.as_raw_fd(), buffer.as_mut_ptr().cast(), buffer.len(), 0) };
        if got <= 0 {
            break;
        }
        // SAFETY: `buffer` holds `got` bytes just received.
        let sent = unsafe { libc::send(theirs.as_raw_fd(), buffer.as_ptr().cast(), got as usize, 0) };
        if sent != got {
            break;
        }
    }
    // SAFETY: `_exit` takes any status and does not return.
    unsafe { libc::_exit(0) }
}

impl Drop for PingPong {
    fn drop(&mut self) {
        // SAFETY: shutting an open socket down ends the child's loop.
        unsafe { libc::shutdown(self.ours.as_raw_fd(), libc::SHUT_RDWR) };
        // SAFETY: `child` is this process's child, not yet reaped; no status is written.
        unsafe { libc::waitpid(self.child, std::ptr::null_mut(), 0) };
    }
}

/// A bare `posix_spawn` + `waitpid` of `/bin/true` (no file actions, the process's
/// environment): what starting and reaping any process costs.
pub(crate) fn spawn_and_wait() {
    let program = c"/bin/true";
    let argv = [program.as_ptr().cast_mut(), std::ptr::null_mut()];
    unsafe extern "C" {
        static environ: *const *mut libc::c_char;
    }
    let mut pid = 0;
    // SAFETY: `program` and `argv` are NUL-terminated and live for the call; `environ` is the
    // process's environment, which the bench does not change meanwhile.
    let spawned = unsafe {
        libc::posix_spawn(
            &mut pid,
            program.as_ptr(),
            std::ptr::null(),
            std::ptr::null(),
            argv.as_ptr(),
            environ,
        )
    };
    assert_eq!(spawned, 0, "posix_spawn /bin/true failed: {spawned}");
    let mut status = 0;
    // SAFETY: `pid` is the child just spawned; `status` is writable.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    assert_eq!(waited, pid);
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0);
}

/// `n` distinct plugins built from `tests/plugins/numbered.c`, each with the message pass
/// `m<i>` (which answers its input), in a fresh directory under `base`; returns the directory.
pub(crate) fn message_plugins(base: &Path, n: usize) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = base.join(format!("bench-isolated-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let source = root.join("tests/plugins/numbered.c");
    for i in 0..n {
        let args = [
            format!("-DPLUGIN_NAME=\"m{i}\""),
            format!("-DPASS_NAME=\"m{i}_pointer\""),
            format!("-DMESSAGE_PASS=\"m{i}\""),
        ];
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        crate::cc::compile_plugin(&[&source], &dir.join(format!("libm{i:02}.so")), &args)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    dir
}

/// `tests/plugins/isolated.c` (message passes `echo`, `size`, …) compiled into `dir`.
pub(crate) fn isolated_plugin(dir: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    crate::cc::compile_plugin(
        &[&root.join("tests/plugins/isolated.c")],
        &dir.join("libisolated.so"),
        &[],
    )
    .unwrap_or_else(|e| panic!("{e}"))
}
