//! The registration side of the plugin ABI, where it is raw: the callbacks `add_pass`,
//! `add_typed_pass` and `report` a library plugin's `register_passes` calls, the table that
//! hands them over (the [`HostApi`] a library calls `register_passes` with), the pass's
//! opaque `user_data`, and a pass's function typed again ([`PassFunc`]).

use core::ffi::{c_char, c_void};
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::registrar::table::{
    INTERFACE_TOO_LONG, MAX_NAME_LEN, MAX_REPORT_LEN, NAME_TOO_LONG, PassFunc, Refusal, Table, UserData, shortened,
};
use crate::sys::library::{HostApi, bounded_c_str};
use dylease_plugin::abi::{dylease_fn, dylease_host_api, dylease_host_api_abi1, dylease_registrar};
use dylease_plugin::{Interface, PassFn};

// SAFETY: dylease only stores and returns the pointer; whoever dereferences it does so in
// `unsafe` code under the plugin ABI's contract that it is usable from any thread.
unsafe impl Send for UserData {}
// SAFETY: as above: shared access only copies the pointer value.
unsafe impl Sync for UserData {}

// The way back from a pass's untyped function to its type. `PassFunc` is made in `table`,
// where a registration is recorded; its fields are the registrar room's alone.
impl PassFunc {
    /// The function as `I::Fn`, if it is a native pass registered under `I::ID`.
    #[inline]
    pub(crate) fn typed<I: Interface>(&self) -> Option<I::Fn> {
        if !self.native || self.interface.as_deref() != Some(I::ID) {
            return None;
        }
        // SAFETY: the pass was registered under `I::ID` (a `PassFunc` is made only where its
        // registration is recorded, `table`, with the interface it was registered under), and
        // `I`'s implementer guarantees (`Interface`'s contract) that every pass registered
        // under that id has the signature `I::Fn`. A Python pass (`native` false) is never
        // typed: its function is a placeholder.
        Some(unsafe { I::Fn::from_raw(self.func) })
    }

    /// The function as `F`.
    ///
    /// # Safety
    ///
    /// `F` is the signature the pass was registered with.
    #[inline]
    pub(crate) unsafe fn untyped<F: PassFn>(&self) -> F {
        // SAFETY: the caller's contract.
        unsafe { F::from_raw(self.func) }
    }
}

/// The host API table handed to the C `register_passes` of a plugin built for ABI
/// `version` (1 or 2): a table that says the plugin's own version, because a version-1
/// plugin refuses any other. Version 1's table is a prefix of version 2's, and
/// `register_passes` reads only as much of it as its `abi_version` says exists.
fn host_api(version: u32) -> *const dylease_host_api {
    static HOST_API_ABI1: dylease_host_api_abi1 = dylease_host_api_abi1 {
        abi_version: 1,
        add_pass: c_add_pass,
    };
    static HOST_API: dylease_host_api = dylease_host_api {
        abi_version: 2,
        add_pass: c_add_pass,
        add_typed_pass: c_add_typed_pass,
        report: c_report,
    };
    if version == 1 {
        (&raw const HOST_API_ABI1).cast()
    } else {
        &raw const HOST_API
    }
}

// SAFETY: for each version this host speaks (1 and 2), `host_api` returns that version's
// static table, of its layout and valid for the whole program; `with_raw` calls `call` once,
// on this thread, with the registrar pointer the table's functions accept during that call
// only (`active`).
unsafe impl HostApi for Table {
    fn with_call(
        &mut self,
        version: u32,
        call: &mut dyn FnMut(*const dylease_host_api, *mut dylease_registrar) -> i32,
    ) -> i32 {
        let api = host_api(version);
        with_raw(self, |raw| call(api, raw))
    }
}

/// Runs `register` with `table` as the opaque pointer of the C ABI. Only during this call,
/// and only on this thread, does `add_pass` accept that pointer.
fn with_raw<R>(table: &mut Table, register: impl FnOnce(*mut dylease_registrar) -> R) -> R {
    struct Deactivate(*mut dylease_registrar);
    impl Drop for Deactivate {
        fn drop(&mut self) {
            ACTIVE.with(|active| active.set(self.0));
        }
    }
    let raw: *mut dylease_registrar = (table as *mut Table).cast();
    let _restore = Deactivate(ACTIVE.with(|active| active.replace(raw)));
    register(raw)
}

crate::sync::thread_locals! {
    /// The registrar whose `register_passes` call is running on this thread, if any.
    static ACTIVE: Cell<*mut dylease_registrar> = const std::ptr::null_mut();
}

/// The registrar of the `register_passes` call in progress on this thread, if `reg` is it.
/// A plugin that kept the pointer past its `register_passes`, or calls from another thread,
/// gets `None` instead of writing into a registrar that is gone.
///
/// # Safety
///
/// The returned reference must not outlive the host API call it is taken in.
unsafe fn active<'a>(reg: *mut dylease_registrar) -> Option<&'a mut Table> {
    if reg.is_null() || ACTIVE.with(Cell::get) != reg {
        return None;
    }
    // SAFETY: `reg` is the table `with_raw` is running `register_passes` with
    // on this thread; that call holds the only reference to it meanwhile, and the caller
    // drops this one before returning to the plugin.
    Some(unsafe { &mut *reg.cast::<Table>() })
}

/// A pass name or interface from C: its bytes (UTF-8 is checked by [`Table::add_raw`]),
/// or `Err` with the start to show and whether it was too long (`false`: it was NULL).
///
/// # Safety
///
/// `ptr` is NULL or a NUL-terminated string readable for `'a`.
unsafe fn c_field<'a>(ptr: *const c_char) -> Result<&'a [u8], (String, bool)> {
    if ptr.is_null() {
        return Err((String::new(), false));
    }
    // SAFETY: by the caller's contract, a non-NULL `ptr` is NUL-terminated and readable.
    match unsafe { bounded_c_str(ptr, MAX_NAME_LEN) } {
        Some(bytes) => Ok(bytes),
        None => {
            // SAFETY: the string is longer than `MAX_NAME_LEN` bytes, so its first 32 bytes
            // are part of it.
            let start = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), 32) };
            Err((shortened(start), true))
        }
    }
}

/// `add_pass` as plugins see it through [`dylease_host_api`].
///
/// # Safety
///
/// `reg` must be the registrar pointer of the `register_passes` call in progress on this
/// thread, and `name`, if not NULL, a NUL-terminated string; both are the plugin ABI's
/// contract.
unsafe extern "C" fn c_add_pass(
    reg: *mut dylease_registrar,
    name: *const c_char,
    func: Option<dylease_fn>,
    user_data: *mut c_void,
) -> i32 {
    // SAFETY: the ABI's contract, passed on; `name` is NULL or NUL-terminated.
    unsafe { add_from_c(reg, name, None, func, user_data) }
}

/// `add_typed_pass` (ABI version 2) as plugins see it through [`dylease_host_api`].
///
/// # Safety
///
/// As for [`c_add_pass`], and `interface`, if not NULL, is a NUL-terminated string.
unsafe extern "C" fn c_add_typed_pass(
    reg: *mut dylease_registrar,
    name: *const c_char,
    interface: *const c_char,
    func: Option<dylease_fn>,
    user_data: *mut c_void,
) -> i32 {
    // SAFETY: the ABI's contract, passed on.
    unsafe { add_from_c(reg, name, Some(interface), func, user_data) }
}

/// The body of [`c_add_pass`] and [`c_add_typed_pass`]; `interface` is `None` for the first.
///
/// # Safety
///
/// As for [`c_add_typed_pass`].
unsafe fn add_from_c(
    reg: *mut dylease_registrar,
    name: *const c_char,
    interface: Option<*const c_char>,
    func: Option<dylease_fn>,
    user_data: *mut c_void,
) -> i32 {
    // SAFETY: the reference lives only for this call.
    let Some(registrar) = (unsafe { active(reg) }) else {
        return -1;
    };
    // SAFETY: by the ABI, `name` is NULL or NUL-terminated and readable for the call.
    let name = match unsafe { c_field(name) } {
        Ok(name) => name,
        Err((shown, too_long)) => {
            let reason = if too_long { NAME_TOO_LONG } else { "the name is NULL" };
            registrar.refuse(Refusal::Invalid(shown, reason));
            return -1;
        }
    };
    let interface = match interface {
        None => None,
        // SAFETY: as for `name`.
        Some(interface) => match unsafe { c_field(interface) } {
            Ok(interface) => Some(interface),
            Err((_, too_long)) => {
                let reason = if too_long {
                    INTERFACE_TOO_LONG
                } else {
                    "the interface is NULL"
                };
                let shown = String::from_utf8_lossy(name).into_owned();
                registrar.refuse(Refusal::Invalid(shown, reason));
                return -1;
            }
        },
    };
    // A panic must not unwind into C; nothing below is expected to panic, but an allocation
    // failure hook or a bug must end here as a refusal rather than as an abort.
    let added = catch_unwind(AssertUnwindSafe(|| {
        registrar.add_raw(utf8(name), interface.map(utf8), func, UserData(user_data))
    }));
    match added {
        Ok(Ok(())) => 0,
        Ok(Err(_)) => -2,
        Err(_) => -3,
    }
}

/// `bytes` as UTF-8, or `Err` with them.
fn utf8(bytes: &[u8]) -> Result<&str, &[u8]> {
    std::str::from_utf8(bytes).map_err(|_| bytes)
}

/// `report` (ABI version 2) as plugins see it through [`dylease_host_api`]: keeps the first
/// message of the registration, at most [`MAX_REPORT_LEN`] bytes of it, lossily decoded. A
/// call outside the registration, or with a NULL message, does nothing.
///
/// # Safety
///
/// As for [`c_add_pass`], and `message`, if not NULL, is a NUL-terminated string.
unsafe extern "C" fn c_report(reg: *mut dylease_registrar, message: *const c_char) {
    // SAFETY: the reference lives only for this call.
    let Some(registrar) = (unsafe { active(reg) }) else {
        return;
    };
    if message.is_null() || registrar.reported() {
        return;
    }
    // SAFETY: by the ABI, a non-NULL `message` is NUL-terminated and readable for the call.
    let (bytes, cut) = match unsafe { bounded_c_str(message, MAX_REPORT_LEN) } {
        Some(bytes) => (bytes, false),
        // SAFETY: the message is longer than `MAX_REPORT_LEN` bytes, so that many are part of it.
        None => (
            unsafe { std::slice::from_raw_parts(message.cast::<u8>(), MAX_REPORT_LEN) },
            true,
        ),
    };
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let mut text = String::from_utf8_lossy(bytes).into_owned();
        if cut {
            text.push('…');
        }
        registrar.report(text);
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounded_reads_stop_at_the_limit() {
        let exact = format!("{}\0", "a".repeat(MAX_NAME_LEN));
        let over = format!("{}\0", "a".repeat(MAX_NAME_LEN + 1));
        // SAFETY: (the three calls) the strings are NUL-terminated and live across the calls.
        let exact_read = unsafe { bounded_c_str(exact.as_ptr().cast(), MAX_NAME_LEN) };
        assert_eq!(exact_read.map(<[u8]>::len), Some(MAX_NAME_LEN));
        // SAFETY: as above.
        assert_eq!(unsafe { bounded_c_str(over.as_ptr().cast(), MAX_NAME_LEN) }, None);
        // SAFETY: as above.
        assert_eq!(unsafe { bounded_c_str(c"".as_ptr(), MAX_NAME_LEN) }, Some(&b""[..]));
    }
}
