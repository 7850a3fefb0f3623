//! The registrar room: the registration side of the plugin ABI, what a plugin's registration
//! fills in (the pass table, `table`; the C host API, `c_api`; a Python pass's callable,
//! `python`). It may call `sync` and `sys::library` (the `HostApi` it implements, the
//! bounded C string reader), and the shared `error` and `dylease_plugin`, nothing else of the
//! crate.
//!
//! Registration: the [`StaticRegistrar`] that static plugins fill in directly. Its state, and the
//! checks every pass goes through, are in [`table`], which the C host API (`add_pass`,
//! `add_typed_pass`, `report`; in [`c_api`]) fills in for library plugins.

use core::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;

use crate::error::{Error, Origin};
use crate::sys::library::HostApi;
use dylease_plugin::{PassFn, RegisterError, Registrar};

// The registration side of the plugin ABI, fenced here: the C callbacks and the C strings
// they read, the host API a plugin's `register_passes` is handed, the pass's opaque
// `user_data` (`Send` and `Sync` by the ABI's contract) and a pass's function typed again.
#[allow(unsafe_code)]
mod c_api;
#[forbid(unsafe_code)]
#[cfg(feature = "python")]
pub(crate) mod python;
#[forbid(unsafe_code)]
mod table;

use table::Table;
pub(crate) use table::{Collected, Finished, MAX_NAME_LEN, PassFunc, TOO_LONG, UnloadHook, UserData};

/// The [`Registrar`] a host hands a static plugin's register function
/// ([`HostBuilder::static_plugin`](crate::HostBuilder::static_plugin)): it collects the
/// plugin's passes while it registers, and its [`on_unload`](StaticRegistrar::on_unload)
/// hooks.
///
/// # Example
///
/// ```
/// use dylease::Registrar;
///
/// pub struct FusionPass;
/// // SAFETY: every pass registered under "ge.fusion_pass/1" is an `fn(u32) -> u32`.
/// unsafe impl dylease::Interface for FusionPass {
///     const ID: &'static str = "ge.fusion_pass/1";
///     type Fn = unsafe fn(u32) -> u32;
/// }
/// fn fuse(nodes: u32) -> u32 { nodes / 2 }
///
/// let host = dylease::PluginHost::builder()
///     .static_plugin("fusion", |reg| {
///         reg.add_typed_pass::<FusionPass>("fuse", fuse, std::ptr::null_mut())?;
///         reg.add_pass_with_interface("halve", "ge.fusion_pass/1", fuse as fn(u32) -> u32, std::ptr::null_mut())
///     })
///     .build()?;
/// let lease = host.acquire()?;
/// let fuse = lease.get::<FusionPass>("fuse")?;
/// // SAFETY: `lease` is alive while the pass runs; it takes any `u32`.
/// assert_eq!(unsafe { fuse(10) }, 5);
/// assert_eq!(lease.passes()[1].interface(), Some("ge.fusion_pass/1"));
/// # Ok::<(), dylease::Error>(())
/// ```
///
/// A typed pass of another signature is refused at compile time:
///
/// ```compile_fail,E0308
/// # use dylease::{RegisterError, Registrar};
/// # pub struct FusionPass;
/// # unsafe impl dylease::Interface for FusionPass {
/// #     const ID: &'static str = "ge.fusion_pass/1";
/// #     type Fn = unsafe fn(u32) -> u32;
/// # }
/// fn fuse(nodes: i64) -> i64 { nodes / 2 }
/// fn register(reg: &mut dylease::StaticRegistrar) -> Result<(), RegisterError> {
///     reg.add_typed_pass::<FusionPass>("fuse", fuse, std::ptr::null_mut())
/// }
/// ```
///
/// while its twin, with the interface's signature, compiles:
///
/// ```
/// # use dylease::{RegisterError, Registrar};
/// # pub struct FusionPass;
/// # unsafe impl dylease::Interface for FusionPass {
/// #     const ID: &'static str = "ge.fusion_pass/1";
/// #     type Fn = unsafe fn(u32) -> u32;
/// # }
/// fn fuse(nodes: u32) -> u32 { nodes / 2 }
/// fn register(reg: &mut dylease::StaticRegistrar) -> Result<(), RegisterError> {
///     reg.add_typed_pass::<FusionPass>("fuse", fuse, std::ptr::null_mut())
/// }
/// ```
///
/// It is neither `Send` nor `Sync`: registration happens on the loading thread, during the
/// load, and nowhere else.
///
/// ```compile_fail,E0277
/// fn register(reg: &mut dylease::StaticRegistrar) {
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
/// fn register(reg: &mut dylease::StaticRegistrar) {
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
/// fn check(reg: &mut dylease::StaticRegistrar) {
///     needs_send(reg);
/// }
/// ```
///
/// ```
/// fn needs_any<T>(_: T) {}
/// fn check(reg: &mut dylease::StaticRegistrar) {
///     needs_any(reg);
/// }
/// ```
pub struct StaticRegistrar {
    table: Table,
    _not_send: PhantomData<*mut ()>,
}

impl fmt::Debug for StaticRegistrar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (passes, hooks) = self.table.counts();
        f.debug_struct("StaticRegistrar")
            .field("plugin", self.table.plugin())
            .field("passes", &passes)
            .field("unload_hooks", &hooks)
            .finish()
    }
}

impl StaticRegistrar {
    pub(crate) fn new(plugin: Origin) -> Self {
        StaticRegistrar {
            table: Table::new(plugin),
            _not_send: PhantomData,
        }
    }

    /// Runs `hook` when the generation this registration belongs to unloads: the static
    /// plugin's counterpart of the C `on_unload`. Hooks run after the set's last lease is
    /// dropped, plugins in reverse load order and each plugin's hooks in reverse order of
    /// registration. If a later plugin makes the load fail, the hooks registered so far run
    /// before [`acquire`](crate::PluginHost::acquire) returns the error.
    pub fn on_unload(&mut self, hook: impl FnOnce() + Send + 'static) {
        self.table.add_hook(Box::new(hook));
    }

    /// The plugin being registered.
    pub fn plugin(&self) -> &Origin {
        self.table.plugin()
    }

    /// Ends registration: see [`Table::finish`].
    pub(crate) fn finish(self) -> Finished {
        self.table.finish()
    }

    /// This registration as a library plugin's `register_passes` is handed it: the C host
    /// API of `c_api`.
    pub(crate) fn host_api(&mut self) -> &mut impl HostApi {
        &mut self.table
    }
}

/// A refusal of the table, as the register function sees it. The table keeps the host's own
/// error (naming the plugin), which fails the load whatever the function does with this one.
fn seen_by_plugin(error: &Error) -> RegisterError {
    match error {
        Error::DuplicatePass { pass, .. } => RegisterError::Duplicate { pass: pass.clone() },
        Error::InvalidPass { pass, reason, .. } => RegisterError::Refused {
            pass: pass.clone(),
            reason: reason.clone(),
        },
        other => RegisterError::custom(other.to_string()),
    }
}

impl Registrar for StaticRegistrar {
    /// Registers a pass under `name`; see [`Registrar::add_pass`].
    ///
    /// # Errors
    ///
    /// [`RegisterError::Refused`] for an empty name or one longer than 256 bytes, and
    /// [`RegisterError::Duplicate`] for a name this plugin already registered. The load then
    /// fails with [`Error::InvalidPass`] or [`Error::DuplicatePass`], naming the plugin, even
    /// if the register function ignores the refusal.
    fn add_pass<F: PassFn>(&mut self, name: &str, func: F, user_data: *mut c_void) -> Result<(), RegisterError> {
        self.table
            .add_raw(Ok(name), None, Some(func.into_raw()), UserData(user_data))
            .map_err(|e| seen_by_plugin(&e))
    }

    /// Registers a pass under `name` as an implementation of `interface`; see
    /// [`Registrar::add_pass_with_interface`].
    ///
    /// # Errors
    ///
    /// As for [`add_pass`](StaticRegistrar::add_pass), and [`RegisterError::Refused`] for an
    /// empty interface or one longer than 256 bytes.
    fn add_pass_with_interface<F: PassFn>(
        &mut self,
        name: &str,
        interface: &str,
        func: F,
        user_data: *mut c_void,
    ) -> Result<(), RegisterError> {
        self.table
            .add_raw(
                Ok(name),
                Some(Ok(interface)),
                Some(func.into_raw()),
                UserData(user_data),
            )
            .map_err(|e| seen_by_plugin(&e))
    }
}
