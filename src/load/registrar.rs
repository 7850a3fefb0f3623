//! Registration: the [`Registrar`] that static plugins fill in directly and that the C
//! host API (`add_pass`, `add_typed_pass`, `report`) fills in for library plugins.
// `unsafe` here: the C callbacks `add_pass`, `add_typed_pass` and `report`, and reading C strings.
#![allow(unsafe_code)]

use core::ffi::{c_char, c_void};
use std::cell::Cell;
use std::collections::HashSet;
use std::fmt;
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::abi::{dylease_fn, dylease_host_api, dylease_host_api_abi1, dylease_registrar};
use crate::error::{Error, Origin};
use crate::pass_fn::PassFn;

/// An opaque pointer a plugin attaches to a pass, handed back by
/// [`Pass::user_data`](crate::Pass::user_data).
///
/// The plugin ABI requires it to stay valid, and usable from any thread, until the plugin
/// is unloaded; dylease itself never dereferences it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct UserData(pub(crate) *mut c_void);

// SAFETY: dylease only stores and returns the pointer; whoever dereferences it does so in
// `unsafe` code under the plugin ABI's contract that it is usable from any thread.
unsafe impl Send for UserData {}
// SAFETY: as above: shared access only copies the pointer value.
unsafe impl Sync for UserData {}

/// One pass collected during registration.
#[derive(Debug)]
pub(crate) struct Collected {
    pub(crate) name: Box<str>,
    /// The pass signature it implements; `None` for an untyped pass.
    pub(crate) interface: Option<Box<str>>,
    pub(crate) func: dylease_fn,
    pub(crate) user_data: UserData,
    /// A Python pass's callable (then `func` is a placeholder).
    #[cfg(feature = "python")]
    pub(crate) python: Option<crate::python::PyCallable>,
}

pub(crate) type UnloadHook = Box<dyn FnOnce() + Send + 'static>;

/// The longest plugin, version or pass name the host accepts, in bytes. Names appear in
/// errors and logs; a plugin that sends a megabyte is broken, not descriptive.
pub(crate) const MAX_NAME_LEN: usize = 256;

/// What is wrong with a name longer than [`MAX_NAME_LEN`], as a phrase after "its name".
pub(crate) const TOO_LONG: &str = "is longer than 256 bytes";

/// The same, for a refused pass.
const NAME_TOO_LONG: &str = "the name is longer than 256 bytes";

/// The same, for a refused interface.
const INTERFACE_TOO_LONG: &str = "the interface is longer than 256 bytes";

/// How much of a message given to `report` the host keeps, in bytes.
pub(crate) const MAX_REPORT_LEN: usize = 1024;

/// The bytes of a NUL-terminated string, reading at most `max + 1` of them: `None` if the
/// string is longer than `max` bytes. Never reads past the terminating NUL, so an absurdly
/// long string costs no more than a short one.
///
/// # Safety
///
/// `ptr` points to a NUL-terminated string that stays valid for `'a`.
pub(crate) unsafe fn bounded_c_str<'a>(ptr: *const c_char, max: usize) -> Option<&'a [u8]> {
    let mut len = 0;
    // SAFETY: the string is NUL-terminated and the loop stops at its NUL, so every byte read
    // is part of it.
    while unsafe { *ptr.add(len) } != 0 {
        if len == max {
            return None;
        }
        len += 1;
    }
    // SAFETY: the `len` bytes before the NUL are part of the string, valid for `'a`.
    Some(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

/// The start of a name too long to show whole, lossily decoded, for errors.
fn shortened(bytes: &[u8]) -> String {
    let mut start = String::from_utf8_lossy(&bytes[..bytes.len().min(32)]).into_owned();
    start.push('…');
    start
}

/// Collects the passes of one plugin while it registers.
///
/// A static plugin's register function receives `&mut Registrar`. It is neither `Send` nor
/// `Sync`: registration happens on the loading thread, during the load, and nowhere else.
///
/// ```compile_fail,E0277
/// fn register(reg: &mut dylease::Registrar) {
///     std::thread::scope(|s| {
///         s.spawn(|| {
///             let _ = reg.plugin(); // error: a registrar cannot leave the loading thread
///         });
///     });
/// }
/// ```
///
/// Its twin, the same code using the registrar on the loading thread, compiles: the failure
/// above is about the thread and nothing else.
///
/// ```
/// fn register(reg: &mut dylease::Registrar) {
///     std::thread::scope(|s| {
///         s.spawn(|| {});
///         let _ = reg.plugin();
///     });
/// }
/// ```
///
/// Nor can it be sent, even as `&mut` (this pair isolates `Send`):
///
/// ```compile_fail,E0277
/// fn needs_send<T: Send>(_: T) {}
/// fn check(reg: &mut dylease::Registrar) {
///     needs_send(reg);
/// }
/// ```
///
/// ```
/// fn needs_any<T>(_: T) {}
/// fn check(reg: &mut dylease::Registrar) {
///     needs_any(reg);
/// }
/// ```
pub struct Registrar {
    plugin: Origin,
    passes: Vec<Collected>,
    names: HashSet<Box<str>>,
    hooks: Vec<UnloadHook>,
    /// The first pass the host refused, kept so that a plugin that ignores `add_pass`'s
    /// return code still fails.
    refused: Option<Refusal>,
    /// The first message the plugin gave `report`: why its registration fails.
    report: Option<String>,
    _not_send: PhantomData<*mut ()>,
}

impl fmt::Debug for Registrar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registrar")
            .field("plugin", &self.plugin)
            .field("passes", &self.passes.len())
            .field("unload_hooks", &self.hooks.len())
            .finish()
    }
}

impl Registrar {
    pub(crate) fn new(plugin: Origin) -> Self {
        Registrar {
            plugin,
            passes: Vec::new(),
            names: HashSet::new(),
            hooks: Vec::new(),
            refused: None,
            report: None,
            _not_send: PhantomData,
        }
    }

    /// Registers a pass under `name`.
    ///
    /// `user_data` is handed back by [`Pass::user_data`](crate::Pass::user_data); pass
    /// `std::ptr::null_mut()` when there is none.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPass`] for an empty name or one longer than 256 bytes, and
    /// [`Error::DuplicatePass`] for a name this plugin already registered. The refusal also
    /// fails the plugin's load even if the register function ignores it.
    ///
    /// # Example
    ///
    /// ```
    /// fn double(x: i32) -> i32 { x * 2 }
    ///
    /// let host = dylease::PluginHost::builder()
    ///     .static_plugin("math", |reg: &mut dylease::Registrar| {
    ///         reg.add_pass("double", double as fn(i32) -> i32, std::ptr::null_mut())
    ///     })
    ///     .build()?;
    /// let lease = host.acquire()?;
    /// // SAFETY: "double" was registered as `fn(i32) -> i32`.
    /// let double = unsafe { lease.pass::<fn(i32) -> i32>("double") }.expect("registered");
    /// assert_eq!(double(21), 42);
    /// # Ok::<(), dylease::Error>(())
    /// ```
    pub fn add_pass<F: PassFn>(&mut self, name: &str, func: F, user_data: *mut c_void) -> Result<(), Error> {
        self.add_raw(Ok(name), None, Some(func.into_raw()), UserData(user_data))
    }

    /// Registers `func` under `name` as an implementation of interface `I`: the pass is
    /// recorded under `I::ID` ([`PassInfo::interface`](crate::PassInfo::interface)) and is
    /// what [`Lease::get::<I>`](crate::Lease::get) and
    /// [`Lease::passes_of::<I>`](crate::Lease::passes_of) hand out. `func` must be an `I::Fn`,
    /// which the compiler checks; a closure or fn item coerces to it.
    ///
    /// # Errors
    ///
    /// As for [`add_pass_with_interface`](Registrar::add_pass_with_interface).
    ///
    /// # Example
    ///
    /// ```
    /// pub struct FusionPass;
    /// // SAFETY: every pass registered under "ge.fusion_pass/1" is an `fn(u32) -> u32`.
    /// unsafe impl dylease::Interface for FusionPass {
    ///     const ID: &'static str = "ge.fusion_pass/1";
    ///     type Fn = unsafe fn(u32) -> u32;
    /// }
    /// fn fuse(nodes: u32) -> u32 { nodes / 2 }
    ///
    /// let host = dylease::PluginHost::builder()
    ///     .static_plugin("fusion", |reg: &mut dylease::Registrar| {
    ///         reg.add_typed_pass::<FusionPass>("fuse", fuse, std::ptr::null_mut())
    ///     })
    ///     .build()?;
    /// let lease = host.acquire()?;
    /// let fuse = lease.get::<FusionPass>("fuse")?;
    /// // SAFETY: `lease` is alive while the pass runs; it takes any `u32`.
    /// assert_eq!(unsafe { fuse(10) }, 5);
    /// # Ok::<(), dylease::Error>(())
    /// ```
    ///
    /// A function of another type is refused at compile time:
    ///
    /// ```compile_fail,E0308
    /// # pub struct FusionPass;
    /// # unsafe impl dylease::Interface for FusionPass {
    /// #     const ID: &'static str = "ge.fusion_pass/1";
    /// #     type Fn = unsafe fn(u32) -> u32;
    /// # }
    /// fn fuse(nodes: i64) -> i64 { nodes / 2 }
    /// fn register(reg: &mut dylease::Registrar) -> Result<(), dylease::Error> {
    ///     reg.add_typed_pass::<FusionPass>("fuse", fuse, std::ptr::null_mut())
    /// }
    /// ```
    ///
    /// while its twin, with the interface's signature, compiles:
    ///
    /// ```
    /// # pub struct FusionPass;
    /// # unsafe impl dylease::Interface for FusionPass {
    /// #     const ID: &'static str = "ge.fusion_pass/1";
    /// #     type Fn = unsafe fn(u32) -> u32;
    /// # }
    /// fn fuse(nodes: u32) -> u32 { nodes / 2 }
    /// fn register(reg: &mut dylease::Registrar) -> Result<(), dylease::Error> {
    ///     reg.add_typed_pass::<FusionPass>("fuse", fuse, std::ptr::null_mut())
    /// }
    /// ```
    pub fn add_typed_pass<I: crate::Interface>(
        &mut self,
        name: &str,
        func: I::Fn,
        user_data: *mut c_void,
    ) -> Result<(), Error> {
        self.add_pass_with_interface(name, I::ID, func, user_data)
    }

    /// Registers a pass under `name` as an implementation of `interface`, given as a string:
    /// a pass signature the host and its plugins agree on, named in the style of Qt's
    /// interface ids (UTF-8, 1 to 256 bytes, by convention `domain.name/MAJOR`, such as
    /// `ge.fusion_pass/1`). The interface is what
    /// [`PassInfo::interface`](crate::PassInfo::interface) returns; the C counterpart is
    /// `add_typed_pass` (ABI version 2).
    ///
    /// This is the unchecked form of [`add_typed_pass`](Registrar::add_typed_pass), for an
    /// interface the plugin has no [`Interface`](crate::Interface) type for: dylease does not
    /// check that `func` has the signature `interface` names, and a host that looks the pass
    /// up with [`Lease::get`](crate::Lease::get) trusts that it does.
    ///
    /// # Errors
    ///
    /// As for [`add_pass`](Registrar::add_pass), and [`Error::InvalidPass`] for an empty
    /// interface or one longer than 256 bytes.
    ///
    /// # Example
    ///
    /// ```
    /// fn fuse(nodes: u32) -> u32 { nodes / 2 }
    ///
    /// let host = dylease::PluginHost::builder()
    ///     .static_plugin("fusion", |reg: &mut dylease::Registrar| {
    ///         reg.add_pass_with_interface("fuse", "ge.fusion_pass/1", fuse as fn(u32) -> u32, std::ptr::null_mut())
    ///     })
    ///     .build()?;
    /// let lease = host.acquire()?;
    /// assert_eq!(lease.passes()[0].interface(), Some("ge.fusion_pass/1"));
    /// # Ok::<(), dylease::Error>(())
    /// ```
    pub fn add_pass_with_interface<F: PassFn>(
        &mut self,
        name: &str,
        interface: &str,
        func: F,
        user_data: *mut c_void,
    ) -> Result<(), Error> {
        self.add_raw(
            Ok(name),
            Some(Ok(interface)),
            Some(func.into_raw()),
            UserData(user_data),
        )
    }

    /// Runs `hook` when the generation this registration belongs to unloads: the static
    /// plugin's counterpart of the C `on_unload`. Hooks run after the set's last lease is
    /// dropped, plugins in reverse load order and each plugin's hooks in reverse order of
    /// registration. If a later plugin makes the load fail, the hooks registered so far run
    /// before [`acquire`](crate::PluginHost::acquire) returns the error.
    pub fn on_unload(&mut self, hook: impl FnOnce() + Send + 'static) {
        self.hooks.push(Box::new(hook));
    }

    /// The plugin being registered.
    pub fn plugin(&self) -> &Origin {
        &self.plugin
    }

    /// The common path of both registration routes. `name` and `interface` are `Err` with
    /// the raw bytes when they are not UTF-8; `interface` is `None` for an untyped pass.
    fn add_raw(
        &mut self,
        name: Result<&str, &[u8]>,
        interface: Option<Result<&str, &[u8]>>,
        func: Option<dylease_fn>,
        user_data: UserData,
    ) -> Result<(), Error> {
        if let (Ok(name), Some(interface)) = (name, interface) {
            let reason = match interface {
                Err(_) => Some("the interface is not valid UTF-8"),
                Ok("") => Some("the interface is empty"),
                Ok(interface) if interface.len() > MAX_NAME_LEN => Some(INTERFACE_TOO_LONG),
                Ok(_) => None,
            };
            // A bad name is reported first (below); a good name with a bad interface here.
            if let Some(reason) = reason.filter(|_| !name.is_empty() && name.len() <= MAX_NAME_LEN) {
                return Err(self.refuse(Refusal::Invalid(name.to_owned(), reason)));
            }
        }
        let interface = interface.and_then(Result::ok);
        let refusal = match (name, func) {
            (Err(bytes), _) => Refusal::Invalid(
                String::from_utf8_lossy(bytes).into_owned(),
                "the name is not valid UTF-8",
            ),
            (Ok(""), _) => Refusal::Invalid(String::new(), "the name is empty"),
            (Ok(name), _) if name.len() > MAX_NAME_LEN => Refusal::Invalid(shortened(name.as_bytes()), NAME_TOO_LONG),
            (Ok(name), None) => Refusal::Invalid(name.to_owned(), "the function pointer is NULL"),
            (Ok(name), Some(_)) if self.names.contains(name) => Refusal::Duplicate(name.to_owned()),
            (Ok(name), Some(func)) => {
                self.names.insert(name.into());
                self.passes.push(Collected {
                    name: name.into(),
                    interface: interface.map(Into::into),
                    func,
                    user_data,
                    #[cfg(feature = "python")]
                    python: None,
                });
                return Ok(());
            }
        };
        Err(self.refuse(refusal))
    }

    /// Records a refusal (the first one is what the load fails with) and returns its error.
    fn refuse(&mut self, refusal: Refusal) -> Error {
        let error = refusal.to_error(&self.plugin);
        self.refused.get_or_insert(refusal);
        error
    }

    /// Ends registration: the passes and unload hooks, or the first refusal (which the plugin
    /// may have ignored), and the message the plugin gave `report`, if any. On refusal the
    /// hooks are handed back so they can still run.
    pub(crate) fn finish(self) -> Finished {
        let passes = match &self.refused {
            None => Ok(self.passes),
            Some(refusal) => Err(refusal.to_error(&self.plugin)),
        };
        Finished {
            passes,
            hooks: self.hooks,
            report: self.report,
        }
    }

    /// The host API table handed to the C `register_passes` of a plugin built for ABI
    /// `version` (1 or 2): a table that says the plugin's own version, because a version-1
    /// plugin refuses any other. Version 1's table is a prefix of version 2's, and
    /// `register_passes` reads only as much of it as its `abi_version` says exists.
    pub(crate) fn host_api(version: u32) -> *const dylease_host_api {
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

    /// Runs `register` with this registrar as the opaque pointer of the C ABI. Only during
    /// this call, and only on this thread, does `add_pass` accept that pointer.
    pub(crate) fn with_raw<R>(&mut self, register: impl FnOnce(*mut dylease_registrar) -> R) -> R {
        struct Deactivate(*mut dylease_registrar);
        impl Drop for Deactivate {
            fn drop(&mut self) {
                ACTIVE.with(|active| active.set(self.0));
            }
        }
        let raw: *mut dylease_registrar = (self as *mut Registrar).cast();
        let _restore = Deactivate(ACTIVE.with(|active| active.replace(raw)));
        register(raw)
    }
}

crate::sync::thread_locals! {
    /// The registrar whose `register_passes` call is running on this thread, if any.
    static ACTIVE: Cell<*mut dylease_registrar> = const std::ptr::null_mut();
}

/// What registration produced; see [`Registrar::finish`].
pub(crate) struct Finished {
    /// The passes, or the first refusal.
    pub(crate) passes: Result<Vec<Collected>, Error>,
    /// A static plugin's unload hooks.
    pub(crate) hooks: Vec<UnloadHook>,
    /// The first message the plugin gave `report`.
    pub(crate) report: Option<String>,
}

/// The registrar of the `register_passes` call in progress on this thread, if `reg` is it.
/// A plugin that kept the pointer past its `register_passes`, or calls from another thread,
/// gets `None` instead of writing into a registrar that is gone.
///
/// # Safety
///
/// The returned reference must not outlive the host API call it is taken in.
unsafe fn active<'a>(reg: *mut dylease_registrar) -> Option<&'a mut Registrar> {
    if reg.is_null() || ACTIVE.with(Cell::get) != reg {
        return None;
    }
    // SAFETY: `reg` is the registrar `Registrar::with_raw` is running `register_passes` with
    // on this thread; that call holds the only reference to it meanwhile, and the caller
    // drops this one before returning to the plugin.
    Some(unsafe { &mut *reg.cast::<Registrar>() })
}

/// A pass name or interface from C: its bytes (UTF-8 is checked by [`Registrar::add_raw`]),
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
    if message.is_null() || registrar.report.is_some() {
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
        registrar.report = Some(text);
    }));
}

/// Why the host refused a pass.
#[derive(Debug)]
enum Refusal {
    /// The pass name (lossily decoded) and the reason.
    Invalid(String, &'static str),
    /// A name this plugin registered already.
    Duplicate(String),
}

impl Refusal {
    fn to_error(&self, plugin: &Origin) -> Error {
        match self {
            Refusal::Invalid(pass, reason) => Error::InvalidPass {
                plugin: plugin.clone(),
                pass: pass.clone(),
                reason: (*reason).to_owned(),
            },
            Refusal::Duplicate(pass) => Error::DuplicatePass {
                pass: pass.clone(),
                first: plugin.clone(),
                second: plugin.clone(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_length_limit_and_its_messages_agree() {
        let limit = MAX_NAME_LEN.to_string();
        assert!(TOO_LONG.contains(&limit) && NAME_TOO_LONG.ends_with(TOO_LONG));
    }

    #[test]
    fn bounded_reads_stop_at_the_limit() {
        let exact = format!("{}\0", "a".repeat(MAX_NAME_LEN));
        let over = format!("{}\0", "a".repeat(MAX_NAME_LEN + 1));
        // SAFETY: both strings are NUL-terminated and live across the calls.
        unsafe {
            assert_eq!(
                bounded_c_str(exact.as_ptr().cast(), MAX_NAME_LEN).map(<[u8]>::len),
                Some(MAX_NAME_LEN)
            );
            assert_eq!(bounded_c_str(over.as_ptr().cast(), MAX_NAME_LEN), None);
            assert_eq!(bounded_c_str(c"".as_ptr(), MAX_NAME_LEN), Some(&b""[..]));
        }
    }
}
