//! Attacks on `dylease install`: a source that would block its open, and another user's
//! files planted under the temporary names it uses.

use std::fs::{self, Permissions};
use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use crate::support::{TestDir, copy_in, fixture};

/// Runs `dylease` with `args`, killing it after `secs`: `None` if it had to be killed.
fn dylease_bounded(args: &[&std::ffi::OsStr], secs: u64) -> Option<std::process::Output> {
    let mut child = std::process::Command::new(crate::cli::binary())
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            return Some(child.wait_with_output().unwrap());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    None
}

/// `dylease install FIFO DIR` must not hang: the source is opened with a blocking `open`.
#[test]
fn install_of_a_fifo_returns() {
    let dir = TestDir::new("attack_install_fifo");
    let src = TestDir::new("attack_install_fifo_src");
    let fifo = src.path().join("libf.so");
    let c = std::ffi::CString::new(fifo.display().to_string()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    let out = dylease_bounded(&["install".as_ref(), fifo.as_os_str(), dir.path().as_os_str()], 5);
    assert!(out.is_some(), "`dylease install` of a FIFO hung (killed after 5 s)");
}

/// In a sticky, world-writable DIR (which the trust check accepts, like /tmp), another user
/// pre-creates the predictable temporary names `.NAME.dylease-install-PID`. The install must
/// still work, and must not delete files it did not create.
#[test]
fn install_survives_and_spares_another_users_precreated_temporary() {
    let dir = TestDir::new("attack_install_sticky");
    fs::set_permissions(dir.path(), Permissions::from_mode(0o1777)).unwrap();
    let src = TestDir::new("attack_install_sticky_src");
    let file = copy_in(src.path(), &fixture("p1"), "libx.so", 0o755);
    let last: u32 = fs::read_to_string("/proc/sys/kernel/ns_last_pid")
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let mut planted = Vec::new();
    for pid in last + 1..last + 400 {
        let p = dir.path().join(format!(".libx.so.dylease-install-{pid}"));
        fs::write(&p, "theirs").unwrap();
        std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
        planted.push(p);
    }
    let out =
        dylease_bounded(&["install".as_ref(), file.as_os_str(), dir.path().as_os_str()], 30).expect("install hung");
    let text = crate::cli::unwrapped(&String::from_utf8_lossy(&out.stdout)) + &String::from_utf8_lossy(&out.stderr);
    let gone: Vec<_> = planted.iter().filter(|p| !p.exists()).collect();
    eprintln!("{text}\nplanted files removed: {gone:?}");
    assert!(gone.is_empty(), "install removed another user's file {gone:?}: {text}");
    assert!(
        out.status.success(),
        "another user's planted name made the install fail: {text}"
    );
}
