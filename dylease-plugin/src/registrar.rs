//! [`Registrar`]: what a plugin's register function registers its passes into, whichever
//! host runs it; and [`RegisterError`], how registration fails.

use std::ffi::c_void;
use std::fmt;

use crate::{Interface, PassFn};

/// What a plugin's register function registers its passes into: the one registration
/// surface of dylease.
///
/// Two types implement it, one per role: `dylease::StaticRegistrar`, which a host hands a
/// plugin compiled into it (`HostBuilder::static_plugin`), and [`LibraryRegistrar`], which
/// [`export_plugin!`](crate::export_plugin) hands a Rust library plugin. A register function
/// generic over the trait is written once and serves both. A type of your own may implement
/// it too (a registrar that records what a register function registers, in a unit test of
/// that function); a method added to the trait later comes with a default.
///
/// # Example
///
/// ```
/// use dylease_plugin::{RegisterError, Registrar};
///
/// extern "C" fn double(x: i32) -> i32 { x * 2 }
///
/// /// The plugin's one register function: compiled into a host as a static plugin, or built
/// /// into a `cdylib` with `export_plugin!`.
/// fn register(reg: &mut impl Registrar) -> Result<(), RegisterError> {
///     reg.add_pass("double", double as extern "C" fn(i32) -> i32, std::ptr::null_mut())
/// }
///
/// dylease_plugin::export_plugin! {
///     name: "math",
///     version: "1.0.0",
///     register: |reg| register(reg),
/// }
/// # fn main() {}
/// ```
///
/// [`LibraryRegistrar`]: crate::LibraryRegistrar
pub trait Registrar {
    /// Registers `func` under `name`; `user_data` is handed back to the pass's callers
    /// untouched (`Pass::user_data` on the host's side). It must stay valid, and usable from
    /// any thread, until the plugin is unloaded; pass `std::ptr::null_mut()` when there is
    /// none.
    ///
    /// Prefer `extern "C" fn` passes in library plugins: the host may be built by another
    /// compiler version, and only the C calling convention is stable across that boundary.
    ///
    /// # Errors
    ///
    /// [`RegisterError::Refused`] for a name the host refuses (empty, or longer than 256
    /// bytes; a library plugin's name also must not hold a NUL byte, which the C ABI cannot
    /// carry), and [`RegisterError::Duplicate`] for a name this plugin already registered (a
    /// library plugin's host may report that as `Refused`). A refusal fails the
    /// plugin's load even if the register function ignores it.
    fn add_pass<F: PassFn>(&mut self, name: &str, func: F, user_data: *mut c_void) -> Result<(), RegisterError>;

    /// Registers `func` under `name` as an implementation of interface `I`: the pass is
    /// recorded under `I::ID`, and is what the host's `Lease::get::<I>` and
    /// `Lease::passes_of::<I>` hand out. `func` must be an `I::Fn`, which the compiler checks;
    /// a closure or fn item coerces to it.
    ///
    /// # Errors
    ///
    /// As for [`add_pass_with_interface`](Registrar::add_pass_with_interface).
    fn add_typed_pass<I: Interface>(
        &mut self,
        name: &str,
        func: I::Fn,
        user_data: *mut c_void,
    ) -> Result<(), RegisterError> {
        self.add_pass_with_interface(name, I::ID, func, user_data)
    }

    /// Registers `func` under `name` as an implementation of `interface`, given as a string:
    /// the unchecked form of [`add_typed_pass`](Registrar::add_typed_pass), for an interface
    /// that has no Rust type (UTF-8, 1 to 256 bytes, by convention `domain.name/MAJOR`, such
    /// as `ge.fusion_pass/1`).
    ///
    /// # Errors
    ///
    /// As for [`add_pass`](Registrar::add_pass), and [`RegisterError::Refused`] for an
    /// interface the host refuses (empty, too long, with a NUL byte, or a host of ABI version
    /// 1, which has no typed passes).
    fn add_pass_with_interface<F: PassFn>(
        &mut self,
        name: &str,
        interface: &str,
        func: F,
        user_data: *mut c_void,
    ) -> Result<(), RegisterError>;
}

/// Why a registration, or a plugin's own register or load function, failed.
///
/// The registrars return the first two variants; a plugin returns its own error with
/// [`RegisterError::custom`]. A host shows the message in its load error.
#[derive(Debug)]
#[non_exhaustive]
pub enum RegisterError {
    /// The host refused the pass: its name or interface is empty, too long or holds a NUL
    /// byte, or the host has no typed passes.
    Refused {
        /// The pass name as given.
        pass: String,
        /// Why it was refused.
        reason: String,
    },
    /// The plugin already registered a pass under this name.
    Duplicate {
        /// The pass name.
        pass: String,
    },
    /// The plugin's own error.
    Custom(Box<dyn std::error::Error + Send + Sync + 'static>),
}

impl RegisterError {
    /// An error of the plugin's own, for its register or load function to return.
    ///
    /// # Example
    ///
    /// ```
    /// use dylease_plugin::RegisterError;
    ///
    /// let error = RegisterError::custom("no NPU device found");
    /// assert_eq!(error.to_string(), "no NPU device found");
    /// ```
    pub fn custom(error: impl Into<Box<dyn std::error::Error + Send + Sync + 'static>>) -> Self {
        RegisterError::Custom(error.into())
    }
}

impl fmt::Display for RegisterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RegisterError::Refused { pass, reason } => write!(f, "pass `{pass}` was refused: {reason}"),
            RegisterError::Duplicate { pass } => write!(f, "pass `{pass}` is already registered by this plugin"),
            RegisterError::Custom(error) => error.fmt(f),
        }
    }
}

impl std::error::Error for RegisterError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RegisterError::Custom(error) => error.source(),
            _ => None,
        }
    }
}
