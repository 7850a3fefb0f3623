//! The text reports are wrapped to the terminal's width, or to 100 columns when standard
//! output is not a terminal: at spaces only, never inside a `quoted` path or identifier,
//! each continuation indented four columns deeper than its line.

use std::fs;
use std::io::Read as _;
use std::os::fd::{FromRawFd as _, OwnedFd};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::cli::{add, binary, dylease, unwrapped};
use crate::support::TestDir;

/// Whether every line of `text` fits `width` columns, but for lines that are one unbreakable
/// piece: a line may run over only when it has no space outside its indentation and quotes.
fn fits(text: &str, width: usize) -> Result<(), String> {
    for line in text.lines() {
        if line.chars().count() <= width {
            continue;
        }
        let mut quoted = false;
        let breakable = line.trim_start().chars().any(|c| {
            if c == '`' {
                quoted = !quoted;
            }
            c == ' ' && !quoted
        });
        if breakable {
            return Err(format!("a line of {} columns: {line:?}", line.chars().count()));
        }
    }
    Ok(())
}

/// Every `quoted` span of `text` is on one line: a line never ends inside one.
fn quotes_unbroken(text: &str) -> Result<(), String> {
    match text.lines().find(|line| line.matches('`').count() % 2 == 1) {
        Some(line) => Err(format!("a quoted span is broken across lines: {line:?}")),
        None => Ok(()),
    }
}

/// A collision and a manifest mismatch, whose messages are many hundreds of characters:
/// wrapped to 100 columns without breaking a quoted name, and unwrapped back to the one
/// long line they were.
#[test]
fn long_messages_are_wrapped_at_spaces_to_100_columns_when_output_is_not_a_terminal() {
    let dir = TestDir::new("cli_wrap_pipe");
    let plugins = dir.sub("plugins");
    add(&dir, "macros_c_plain", "liba.so");
    add(&dir, "macros_c_plain", "libb.so");
    let first = dylease(dir.path(), &["install", "liba.so", "plugins"]);
    assert_eq!(first.status, 0, "{first:?}");
    let collision = dylease(dir.path(), &["install", "libb.so", "plugins"]);
    assert_eq!(collision.status, 1, "{collision:?}");
    add(&dir, "by_hand_ghost_manifest", "libghost.so");
    let mismatch = dylease(dir.path(), &["check", "libghost.so"]);
    assert_eq!(mismatch.status, 1, "{mismatch:?}");
    for run in [&collision, &mismatch] {
        fits(&run.printed, 100).unwrap_or_else(|e| panic!("{e}\n{}", run.printed));
        quotes_unbroken(&run.printed).unwrap_or_else(|e| panic!("{e}\n{}", run.printed));
        assert_ne!(run.printed, run.stdout, "nothing was wrapped");
    }
    let collision_line = &collision.stdout;
    assert!(
        collision_line.contains(
            "`, which `plugins/liba.so` (plugin `macros`), already in `plugins`, declares too: all the plugins of \
             a host share one namespace of pass names, so a host given `plugins` would fail to load"
        ),
        "{collision_line}"
    );
    let mismatch_line = &mismatch.stdout;
    assert!(
        mismatch_line.contains(
            "        fix: the plugin registered other passes, or gave another name or version, than its manifest \
             declares (the problem above names each difference); a complete manifest is a promise"
        ),
        "{mismatch_line}"
    );
    assert!(fs::read_dir(&plugins).unwrap().count() == 1);
}

/// Runs `dylease ARGS` in `dir` with its standard output a terminal `columns` wide (a
/// pseudo-terminal); what it printed, read within 60 s.
fn on_a_terminal(dir: &Path, args: &[&str], columns: u16) -> String {
    let (mut master, mut slave) = (-1, -1);
    let size = libc::winsize {
        ws_row: 50,
        ws_col: columns,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: two out-pointers to descriptors, no name buffer, no termios, a valid size.
    let opened = unsafe { libc::openpty(&mut master, &mut slave, std::ptr::null_mut(), std::ptr::null(), &size) };
    assert_eq!(opened, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: openpty returned these two descriptors, owned by nothing else.
    let (master, slave) = unsafe { (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave)) };
    let mut child = Command::new(binary())
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::from(slave))
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let (sent, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut master = fs::File::from(master);
        let mut out = Vec::new();
        // Reading the master fails with EIO once the child closed the terminal.
        let mut buffer = [0; 4096];
        while let Ok(n @ 1..) = master.read(&mut buffer) {
            out.extend_from_slice(&buffer[..n]);
        }
        let _ = sent.send(out);
    });
    let out = received.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| {
        let _ = child.kill();
        panic!("`dylease {args:?}` printed for more than 60 s")
    });
    child.wait().unwrap();
    // The terminal turns each line feed into a carriage return and a line feed.
    String::from_utf8(out).unwrap().replace("\r\n", "\n")
}

/// On a terminal the reports take its width.
#[test]
fn the_reports_take_the_terminals_width() {
    let dir = TestDir::new("cli_wrap_terminal");
    add(&dir, "by_hand_ghost_manifest", "libghost.so");
    let narrow = on_a_terminal(dir.path(), &["check", "libghost.so"], 60);
    fits(&narrow, 60).unwrap_or_else(|e| panic!("{e}\n{narrow}"));
    quotes_unbroken(&narrow).unwrap_or_else(|e| panic!("{e}\n{narrow}"));
    assert!(
        narrow.lines().any(|line| line.chars().count() > 50),
        "nothing near 60 columns: {narrow}"
    );
    let wide = on_a_terminal(dir.path(), &["check", "libghost.so"], 200);
    fits(&wide, 200).unwrap_or_else(|e| panic!("{e}\n{wide}"));
    assert!(
        wide.lines().any(|line| line.chars().count() > 150),
        "a 200-column terminal got narrower lines: {wide}"
    );
    assert_eq!(unwrapped(&narrow), unwrapped(&wide));
}
