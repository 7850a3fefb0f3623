//! A Rust plugin with message passes (bytes in, bytes out: `MessagePass`), the kind of pass a
//! host can call in an ordinary set and in an isolated one (`HostBuilder::isolated`), where
//! the plugin runs in a worker process. Built as a library
//! (`cargo build -p dylease-example-rust-plugin --example messages`); the integration tests
//! load it both ways (tests/integration/isolated.rs).
//!
//! - `reverse`: its input reversed.
//! - `pid`: the id of the process the pass runs in, in decimal (the host's own in an ordinary
//!   set, the worker's in an isolated one).
//! - `odd`: fails with status 3 when its input's length is odd, echoes it otherwise.
//! - `panic`: panics. A panic cannot unwind out of an `extern "C"` function: the process
//!   aborts. In an isolated set that process is the worker, and the host reports `SIGABRT`.

use std::ffi::c_void;

use dylease_plugin::MessagePass;
use dylease_plugin::abi::dylease_out;

/// The input of a message pass as a slice.
///
/// # Safety
///
/// `input` points to `len` readable bytes, or `len` is 0, for the lifetime `'a`.
unsafe fn input<'a>(input: *const u8, len: usize) -> &'a [u8] {
    match len {
        0 => &[],
        // SAFETY: the caller's contract.
        _ => unsafe { std::slice::from_raw_parts(input, len) },
    }
}

/// Appends `bytes` to the output `out` of the running call: 0 if the host took them, 1 if not.
///
/// # Safety
///
/// `out` is the output the host handed the running call.
unsafe fn answer(out: *mut dylease_out, bytes: &[u8]) -> i32 {
    // SAFETY: the caller's contract.
    if unsafe { dylease_out::append(out, bytes) } {
        0
    } else {
        1
    }
}

/// `reverse`: its input reversed.
///
/// # Safety
///
/// The message pass contract: `bytes` holds `len` readable bytes, `out` is the call's output.
unsafe extern "C" fn reverse(bytes: *const u8, len: usize, out: *mut dylease_out, _: *mut c_void) -> i32 {
    // SAFETY: the message pass contract.
    let reversed: Vec<u8> = unsafe { input(bytes, len) }.iter().rev().copied().collect();
    // SAFETY: as above.
    unsafe { answer(out, &reversed) }
}

/// `pid`: the id of the process it runs in.
///
/// # Safety
///
/// As for [`reverse`].
unsafe extern "C" fn pid(_: *const u8, _: usize, out: *mut dylease_out, _: *mut c_void) -> i32 {
    // SAFETY: the message pass contract.
    unsafe { answer(out, std::process::id().to_string().as_bytes()) }
}

/// `odd`: status 3 for an input of odd length, its input echoed otherwise.
///
/// # Safety
///
/// As for [`reverse`].
unsafe extern "C" fn odd(bytes: *const u8, len: usize, out: *mut dylease_out, _: *mut c_void) -> i32 {
    if len % 2 == 1 {
        return 3;
    }
    // SAFETY: the message pass contract.
    let echoed = unsafe { input(bytes, len) };
    // SAFETY: as above.
    unsafe { answer(out, echoed) }
}

/// `panic`: panics, which aborts the process it runs in.
///
/// # Safety
///
/// As for [`reverse`].
unsafe extern "C" fn panic(_: *const u8, _: usize, _: *mut dylease_out, _: *mut c_void) -> i32 {
    panic!("the message pass `panic` was called")
}

dylease_plugin::export_plugin! {
    name: "messages",
    version: "0.1.0",
    passes: [
        typed MessagePass: "reverse" => reverse,
        typed MessagePass: "pid" => pid,
        typed MessagePass: "odd" => odd,
        typed MessagePass: "panic" => panic,
    ],
}
