//! [`PassRegistrar`]: the role both registrars play, so that one register function serves a
//! static plugin and a Rust library plugin.

use std::ffi::c_void;

use crate::{Error, Interface, PassFn, PluginRegistrar};

/// What a plugin's register function registers its passes into. Both registrars implement
/// it: [`Registrar`](crate::Registrar), which a host hands a static plugin, and
/// [`PluginRegistrar`], which [`export_plugin!`](crate::export_plugin) hands a Rust library
/// plugin. A register function generic over it is written once and serves both uses.
///
/// The methods are the registrars' own, with the same names, arguments and errors (see
/// [`Registrar::add_pass`](crate::Registrar::add_pass)); the registrars keep their other
/// methods (a static plugin's `on_unload`, a library plugin's `report`).
///
/// # Example
///
/// ```
/// use dylease::{Error, PassRegistrar};
///
/// extern "C" fn double(x: i32) -> i32 { x * 2 }
///
/// /// The plugin's one register function.
/// fn register(reg: &mut impl PassRegistrar) -> Result<(), Error> {
///     reg.add_pass("double", double as extern "C" fn(i32) -> i32, std::ptr::null_mut())
/// }
///
/// # fn run() -> Result<(), dylease::Error> {
/// // Compiled into the host, as a static plugin:
/// let host = dylease::PluginHost::builder()
///     .static_plugin("math", |reg: &mut dylease::Registrar| register(reg))
///     .build()?;
/// assert_eq!(host.acquire()?.passes()[0].name(), "double");
/// # Ok::<(), dylease::Error>(())
/// # }
/// # mod library {
/// # use super::register;
/// // Built as a library plugin (a `cdylib` crate), the same function:
/// dylease::export_plugin! {
///     name: "math",
///     version: "1.0.0",
///     register: |reg| register(reg),
/// }
/// # }
/// # fn main() -> Result<(), dylease::Error> { run() }
/// ```
pub trait PassRegistrar {
    /// Registers `func` under `name`; `user_data` is handed back to the pass untouched.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidPass`] for a name the registrar refuses (empty, too long, with a NUL
    /// byte); a name this plugin already registered is [`Error::DuplicatePass`] for a static
    /// plugin, and `InvalidPass` for a library plugin.
    fn add_pass<F: PassFn>(&mut self, name: &str, func: F, user_data: *mut c_void) -> Result<(), Error>;

    /// Registers `func` under `name` as an implementation of interface `I` (recorded under
    /// `I::ID`); `func` must be an `I::Fn`, which the compiler checks.
    ///
    /// # Errors
    ///
    /// As for [`add_pass_with_interface`](PassRegistrar::add_pass_with_interface).
    fn add_typed_pass<I: Interface>(&mut self, name: &str, func: I::Fn, user_data: *mut c_void) -> Result<(), Error>;

    /// Registers `func` under `name` as an implementation of `interface`, given as a string
    /// (the unchecked form of [`add_typed_pass`](PassRegistrar::add_typed_pass)).
    ///
    /// # Errors
    ///
    /// As for [`add_pass`](PassRegistrar::add_pass), and [`Error::InvalidPass`] for an
    /// interface the host refuses (empty, too long, or a host of ABI version 1).
    fn add_pass_with_interface<F: PassFn>(
        &mut self,
        name: &str,
        interface: &str,
        func: F,
        user_data: *mut c_void,
    ) -> Result<(), Error>;
}

impl PassRegistrar for PluginRegistrar<'_> {
    fn add_pass<F: PassFn>(&mut self, name: &str, func: F, user_data: *mut c_void) -> Result<(), Error> {
        PluginRegistrar::add_pass(self, name, func, user_data)
    }

    fn add_typed_pass<I: Interface>(&mut self, name: &str, func: I::Fn, user_data: *mut c_void) -> Result<(), Error> {
        PluginRegistrar::add_typed_pass::<I>(self, name, func, user_data)
    }

    fn add_pass_with_interface<F: PassFn>(
        &mut self,
        name: &str,
        interface: &str,
        func: F,
        user_data: *mut c_void,
    ) -> Result<(), Error> {
        PluginRegistrar::add_pass_with_interface(self, name, interface, func, user_data)
    }
}

#[cfg(feature = "host")]
impl PassRegistrar for crate::Registrar {
    fn add_pass<F: PassFn>(&mut self, name: &str, func: F, user_data: *mut c_void) -> Result<(), Error> {
        crate::Registrar::add_pass(self, name, func, user_data)
    }

    fn add_typed_pass<I: Interface>(&mut self, name: &str, func: I::Fn, user_data: *mut c_void) -> Result<(), Error> {
        crate::Registrar::add_typed_pass::<I>(self, name, func, user_data)
    }

    fn add_pass_with_interface<F: PassFn>(
        &mut self,
        name: &str,
        interface: &str,
        func: F,
        user_data: *mut c_void,
    ) -> Result<(), Error> {
        crate::Registrar::add_pass_with_interface(self, name, interface, func, user_data)
    }
}
