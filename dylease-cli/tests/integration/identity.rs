//! What `dylease check` says when a host runs out of descriptors (each loaded library keeps
//! one open).

use crate::support::TestDir;

#[test]
fn running_out_of_descriptors_is_named_in_the_error_with_its_fix() {
    // Each loaded library keeps one descriptor open (its name for the loader). `dylease check`
    // of a directory of 20 plugins, under `ulimit -n 24`, runs out: the error says EMFILE and
    // what to do, instead of hiding it in a source.
    use std::os::unix::process::CommandExt;
    let plugins = TestDir::new("identity_emfile");
    for i in 1..=20 {
        plugins.add(&format!("p{i}"), &format!("libp{i:02}.so"));
    }
    let mut command = std::process::Command::new(crate::cli::binary());
    command.arg("check").arg(plugins.path());
    // SAFETY: `setrlimit` is a system call, safe between fork and exec.
    unsafe {
        command.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 24,
                rlim_max: 24,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        })
    };
    let out = command.output().unwrap();
    let text = crate::cli::unwrapped(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("EMFILE") && text.contains("raise the limit"), "{text}");
    assert!(
        !text.contains("/proc/self/fd"),
        "the message names the loader's name, not the file: {text}"
    );
    assert!(text.contains("1 of 21 checks failed"), "each plugin alone fits: {text}");
}
