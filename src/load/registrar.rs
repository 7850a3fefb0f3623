//! Registration: the [`Registrar`] that static plugins fill in directly. Its state, and the
//! checks every pass goes through, are in [`table`], which the C host API (`add_pass`,
//! `add_typed_pass`, `report`; in [`c_api`]) fills in for library plugins.

use core::ffi::c_void;
use std::fmt;
use std::marker::PhantomData;

use crate::abi::{dylease_host_api, dylease_registrar};
use crate::error::{Error, Origin};
use crate::pass_fn::PassFn;

mod c_api;
mod table;

pub(crate) use c_api::bounded_c_str;
use table::Table;
pub(crate) use table::{Collected, Finished, MAX_NAME_LEN, TOO_LONG, UnloadHook, UserData};

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
    table: Table,
    _not_send: PhantomData<*mut ()>,
}

impl fmt::Debug for Registrar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (passes, hooks) = self.table.counts();
        f.debug_struct("Registrar")
            .field("plugin", self.table.plugin())
            .field("passes", &passes)
            .field("unload_hooks", &hooks)
            .finish()
    }
}

impl Registrar {
    pub(crate) fn new(plugin: Origin) -> Self {
        Registrar {
            table: Table::new(plugin),
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
        self.table
            .add_raw(Ok(name), None, Some(func.into_raw()), UserData(user_data))
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
        self.table.add_raw(
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

    /// The host API table for a plugin built for ABI `version`: see [`c_api::host_api`].
    pub(crate) fn host_api(version: u32) -> *const dylease_host_api {
        c_api::host_api(version)
    }

    /// Runs `register` with this registration as the opaque pointer of the C ABI: see
    /// [`c_api::with_raw`].
    pub(crate) fn with_raw<R>(&mut self, register: impl FnOnce(*mut dylease_registrar) -> R) -> R {
        c_api::with_raw(&mut self.table, register)
    }
}
