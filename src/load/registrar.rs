//! Registration: the [`Registrar`] that static plugins fill in directly and that the C
//! host API (`add_pass`, `add_typed_pass`, `report`; in [`c_api`]) fills in for library
//! plugins.

use core::ffi::{c_char, c_void};
use std::cell::Cell;
use std::collections::HashSet;
use std::fmt;
use std::marker::PhantomData;
use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::abi::{dylease_fn, dylease_host_api, dylease_host_api_abi1, dylease_registrar};
use crate::error::{Error, Origin};
use crate::pass_fn::PassFn;

mod c_api;

pub(crate) use c_api::{UserData, bounded_c_str};

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
    pub(crate) python: Option<crate::load::python::callable::PyCallable>,
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
}
