//! Interfaces: a pass signature named by an id that hosts and plugins agree on.
// `unsafe` here: `Interface` is an `unsafe trait`: its implementer vouches for the signature.
#![allow(unsafe_code)]

use crate::pass_fn::UnsafePassFn;

/// A pass signature with a name: the agreement between a host and its plugins that every
/// pass registered under [`ID`](Interface::ID) has the signature [`Fn`](Interface::Fn).
///
/// Implement it once per interface, on a marker type, and the lookup is safe:
/// the host's `Lease::get` hands out a pass only if the plugin registered it under
/// this interface's id, and fails with `Error::PassLookup`
/// otherwise. The `unsafe` of a cast moves from every lookup to the one place where the
/// interface is declared.
///
/// # Safety
///
/// The implementer promises that every pass any plugin registers under `ID` has exactly the
/// signature and calling convention `Fn`. dylease checks the id, not the signature (a C
/// plugin's function has no Rust type to check), so a wrong `Fn`, or a plugin that registers
/// a function of another signature under `ID`, is undefined behaviour at the call. Give a new
/// signature a new id (by convention `domain.name/MAJOR`, with the major version bumped on
/// every change of signature). Rust plugins registering through
/// [`Registrar::add_typed_pass`](crate::Registrar::add_typed_pass) are checked at
/// compile time; C plugins (`DYLEASE_TYPED_PASS`) are not.
///
/// # Example
///
/// ```
/// use dylease_plugin::Registrar;
/// pub struct IntOp;
/// // SAFETY: every pass registered under "math.int_op/1" is an `extern "C" fn(i32) -> i32`.
/// unsafe impl dylease_plugin::Interface for IntOp {
///     const ID: &'static str = "math.int_op/1";
///     type Fn = unsafe extern "C" fn(i32) -> i32;
/// }
///
/// extern "C" fn double(x: i32) -> i32 { x * 2 }
///
/// let host = dylease::PluginHost::builder()
///     .static_plugin("math", |reg| {
///         reg.add_typed_pass::<IntOp>("double", double, std::ptr::null_mut())
///     })
///     .build()?;
/// let lease = host.acquire()?;
/// let pass = lease.get::<IntOp>("double")?; // safe: the interface's id is checked
/// // SAFETY: `lease` is alive, so the pass's library is loaded; `double` takes any `i32`.
/// assert_eq!(unsafe { pass(21) }, 42);
/// # Ok::<(), dylease::Error>(())
/// ```
pub unsafe trait Interface {
    /// The interface id the passes are registered under, such as `ge.fusion_pass/1`.
    const ID: &'static str;
    /// The signature of every pass registered under [`ID`](Interface::ID): an `unsafe fn`
    /// or `unsafe extern "C" fn` pointer type (see [`UnsafePassFn`] for why).
    type Fn: UnsafePassFn;
}
