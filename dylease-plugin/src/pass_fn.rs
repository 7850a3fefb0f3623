//! The pass types: the function-pointer types that can be registered as passes
//! ([`PassFn`], [`UnsafePassFn`]), and [`Interface`], a pass signature named by an id that
//! hosts and plugins agree on.
// `unsafe` here: `Interface` is an `unsafe trait` (its implementer vouches for the
// signature), and `UnsafePassFn` casts function pointers to and from the ABI's untyped one.
#![allow(unsafe_code)]

use crate::abi::dylease_fn;
#[cfg(doc)]
use crate::abi::{DYLEASE_MESSAGE_INTERFACE, dylease_message_fn, dylease_out};

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

/// A function-pointer type that can travel through the plugin ABI as a pass.
///
/// The plugin ABI stores every pass as an untyped [`dylease_fn`]; this trait converts a
/// typed function pointer to and from that form. It is implemented for `fn`, `unsafe fn`,
/// `extern "C" fn` and `unsafe extern "C" fn` pointers returning a `'static` type, with
///
/// - up to six arguments of `'static` types (`*mut Graph`, `i32`, `&'static str`), and
/// - up to three arguments where each may also be a reference with a lifetime of its own,
///   `&T` or `&mut T` of a `'static` `T`: the signatures written with elided lifetimes, such
///   as `unsafe extern "C" fn(&mut Graph, *mut c_void) -> i32`, which mean the higher-ranked
///   `for<'a> unsafe extern "C" fn(&'a mut Graph, *mut c_void) -> i32`.
///
/// Not covered, because each is its own type and the combinations multiply: references in
/// a fourth or later argument, one lifetime shared by two arguments
/// (`for<'a> fn(&'a A, &'a B)`), references to non-`'static` types (`&mut Graph<'_>`) and
/// references in the return type. The orphan rule keeps you from implementing this trait
/// for a function-pointer type in your own crate; use raw pointers (`*mut Graph`) for such
/// a signature, which is what a C plugin passes anyway.
///
/// (Each reference form is a distinct type from the plain `fn(A1)` form: rustc's
/// `coherence_leak_check` lint, allowed here, warns that telling them apart may change in a
/// future release, rust-lang/rust#56105.)
///
/// # Safety
///
/// Implementors must be function-pointer types (the size of a code pointer, no drop glue),
/// and `from_raw(into_raw(f))` must return `f`.
///
/// # Example
///
/// ```
/// use dylease_plugin::PassFn;
///
/// extern "C" fn double(x: i32) -> i32 { x * 2 }
///
/// let f: extern "C" fn(i32) -> i32 = double;
/// let raw = f.into_raw();
/// // SAFETY: `raw` came from a pointer of exactly this type.
/// let back = unsafe { <extern "C" fn(i32) -> i32 as PassFn>::from_raw(raw) };
/// assert_eq!(back(21), 42);
/// ```
///
/// Signatures with references work for both typed and untyped passes:
///
/// ```
/// use dylease_plugin::Registrar;
/// use std::ffi::c_void;
///
/// pub struct Graph { nodes: u32 }
/// pub struct GraphPass;
/// // SAFETY: every pass registered under "demo.graph_pass/2" has this signature.
/// unsafe impl dylease_plugin::Interface for GraphPass {
///     const ID: &'static str = "demo.graph_pass/2";
///     type Fn = unsafe extern "C" fn(&mut Graph, *mut c_void) -> i32;
/// }
/// unsafe extern "C" fn halve(graph: &mut Graph, _: *mut c_void) -> i32 {
///     graph.nodes /= 2;
///     0
/// }
///
/// let host = dylease::PluginHost::builder()
///     .static_plugin("graph", |reg| {
///         reg.add_typed_pass::<GraphPass>("halve", halve, std::ptr::null_mut())?;
///         reg.add_pass("untyped_halve", halve as unsafe extern "C" fn(&mut Graph, *mut c_void) -> i32, std::ptr::null_mut())
///     })
///     .build()?;
/// let lease = host.acquire()?;
/// let mut graph = Graph { nodes: 8 };
/// let pass = lease.get::<GraphPass>("halve")?;
/// // SAFETY: `halve` only needs a valid graph.
/// assert_eq!(unsafe { pass(&mut graph, std::ptr::null_mut()) }, 0);
/// // SAFETY: registered with exactly this signature.
/// let untyped = unsafe {
///     lease.pass::<unsafe extern "C" fn(&mut Graph, *mut c_void) -> i32>("untyped_halve")
/// }
/// .unwrap();
/// // SAFETY: as above.
/// unsafe { untyped(&mut graph, std::ptr::null_mut()) };
/// assert_eq!(graph.nodes, 2);
/// # Ok::<(), dylease::Error>(())
/// ```
pub unsafe trait PassFn: Copy + Send + Sync + 'static {
    /// Erases the signature.
    fn into_raw(self) -> dylease_fn;

    /// Restores the signature.
    ///
    /// # Safety
    ///
    /// `raw` must have been produced from a function whose real signature and calling
    /// convention are `Self`'s. Calling a function through a mismatched type is undefined
    /// behaviour.
    unsafe fn from_raw(raw: dylease_fn) -> Self;
}

/// A [`PassFn`] that is an `unsafe fn` or `unsafe extern "C" fn` pointer: what an
/// [`Interface`](crate::Interface) names as its signature.
///
/// A pass borrowed from a lease derefs to its function pointer, and a function pointer is
/// `Copy`: a copy taken out with `*pass` is no longer tied to the lease, and calling it after
/// the last lease dropped would call into an unloaded library. With an `unsafe` pointer type
/// that call needs an `unsafe` block, whose reason is that a lease of the set is alive; with a
/// safe `fn` type, safe code could make it, which a safe lookup
/// (the host's `Lease::get`) must not allow. Sealed: implemented for exactly the
/// `unsafe` pointer types [`PassFn`] is.
///
/// ```compile_fail,E0277
/// pub struct IntOp;
/// // A safe `fn` type is refused as an interface's signature:
/// unsafe impl dylease_plugin::Interface for IntOp {
///     const ID: &'static str = "math.int_op/1";
///     type Fn = extern "C" fn(i32) -> i32;
/// }
/// ```
///
/// The same with `unsafe extern "C" fn(i32) -> i32` compiles:
///
/// ```
/// pub struct IntOp;
/// unsafe impl dylease_plugin::Interface for IntOp {
///     const ID: &'static str = "math.int_op/1";
///     type Fn = unsafe extern "C" fn(i32) -> i32;
/// }
/// ```
pub trait UnsafePassFn: PassFn + sealed::Sealed {}

mod sealed {
    /// Keeps [`UnsafePassFn`](super::UnsafePassFn) to the pointer types this module lists.
    pub trait Sealed {}
}

macro_rules! impl_pass_fn {
    ($($arg:ident),*) => {
        impl_pass_fn!(@one fn($($arg),*) -> R; $($arg),*);
        impl_pass_fn!(@one unsafe fn($($arg),*) -> R; $($arg),*);
        impl_pass_fn!(@one extern "C" fn($($arg),*) -> R; $($arg),*);
        impl_pass_fn!(@one unsafe extern "C" fn($($arg),*) -> R; $($arg),*);
        impl_pass_fn!(@unsafe unsafe fn($($arg),*) -> R; $($arg),*);
        impl_pass_fn!(@unsafe unsafe extern "C" fn($($arg),*) -> R; $($arg),*);
    };
    (@unsafe $ty:ty; $($arg:ident),*) => {
        #[allow(coherence_leak_check)]
        impl<R: 'static, $($arg: 'static),*> sealed::Sealed for $ty {}
        #[allow(coherence_leak_check)]
        impl<R: 'static, $($arg: 'static),*> UnsafePassFn for $ty {}
    };
    (@one $ty:ty; $($arg:ident),*) => {
        // SAFETY: every type named here is a plain function pointer: the size of a code
        // pointer, `Copy`, without drop glue, and a transmute round trip returns it intact.
        // `coherence_leak_check`: `fn(A1)` (for any `A1: 'static`) and the higher-ranked
        // `for<'a> fn(&'a A1)` are different types that rustc tells apart by its leak check;
        // the lint warns that this may change (rust-lang/rust#56105). See the module docs.
        #[allow(coherence_leak_check)]
        unsafe impl<R: 'static, $($arg: 'static),*> PassFn for $ty {
            #[inline]
            fn into_raw(self) -> dylease_fn {
                // SAFETY: both types are function pointers of the same size; the value is
                // only stored and later transmuted back by `from_raw`, never called as
                // `dylease_fn`.
                unsafe { core::mem::transmute::<$ty, dylease_fn>(self) }
            }

            #[inline]
            unsafe fn from_raw(raw: dylease_fn) -> Self {
                // SAFETY: the caller guarantees `raw` came from a function of type `Self`.
                unsafe { core::mem::transmute::<dylease_fn, $ty>(raw) }
            }
        }
    };
}

// Up to three arguments, every argument may also be a reference (`&T` or `&mut T`, each with a
// lifetime of its own, bound by the pointer type: the higher-ranked `for<'a> fn(&'a mut T)`
// that `fn(&mut T)` means). Every combination is its own type, so each gets its own impl.
macro_rules! impl_pass_fn_refs {
    ($(($arg:ident $lt:lifetime))*) => {
        impl_pass_fn_refs!(@go [] [] [] $(($arg $lt))*);
    };
    (@go [$($l:lifetime,)*] [$($ty:ty,)*] [$($gen:ident,)*]) => {
        impl_pass_fn_refs!(@one for<$($l,)*> fn($($ty,)*) -> R; $($gen,)*);
        impl_pass_fn_refs!(@one for<$($l,)*> unsafe fn($($ty,)*) -> R; $($gen,)*);
        impl_pass_fn_refs!(@one for<$($l,)*> extern "C" fn($($ty,)*) -> R; $($gen,)*);
        impl_pass_fn_refs!(@one for<$($l,)*> unsafe extern "C" fn($($ty,)*) -> R; $($gen,)*);
        impl_pass_fn!(@unsafe for<$($l,)*> unsafe fn($($ty,)*) -> R; $($gen),*);
        impl_pass_fn!(@unsafe for<$($l,)*> unsafe extern "C" fn($($ty,)*) -> R; $($gen),*);
    };
    (@go [$($l:lifetime,)*] [$($ty:ty,)*] [$($gen:ident,)*] ($a:ident $al:lifetime) $($rest:tt)*) => {
        impl_pass_fn_refs!(@go [$($l,)*] [$($ty,)* $a,] [$($gen,)* $a,] $($rest)*);
        impl_pass_fn_refs!(@go [$($l,)* $al,] [$($ty,)* &$al $a,] [$($gen,)* $a,] $($rest)*);
        impl_pass_fn_refs!(@go [$($l,)* $al,] [$($ty,)* &$al mut $a,] [$($gen,)* $a,] $($rest)*);
    };
    (@one $ty:ty; $($gen:ident,)*) => {
        impl_pass_fn!(@one $ty; $($gen),*);
    };
}

impl_pass_fn_refs!();
impl_pass_fn_refs!((A1 'a));
impl_pass_fn_refs!((A1 'a) (A2 'b));
impl_pass_fn_refs!((A1 'a) (A2 'b) (A3 'c));
impl_pass_fn!(A1, A2, A3, A4);
impl_pass_fn!(A1, A2, A3, A4, A5);
impl_pass_fn!(A1, A2, A3, A4, A5, A6);

/// The message pass interface, `dylease.message/1` ([`DYLEASE_MESSAGE_INTERFACE`]): bytes
/// in, bytes out, with the C signature
/// `int32_t pass(const uint8_t *in, size_t in_len, dylease_out *out, void *user_data)`
/// ([`dylease_message_fn`]).
///
/// A message pass is the one kind of pass a host can call in a plugin that runs in another
/// process (the host's isolated sets, `HostBuilder::isolated`): a function pointer cannot
/// cross a process boundary, bytes can. The same plugin file serves an ordinary set, where
/// the host calls the pass directly, and an isolated one, where its worker process does; the
/// host's `Lease::call(name, input)` does either and returns the output. A pass appends its
/// output with [`dylease_out::append`] and returns 0, or a non-zero status of its own, which
/// fails the call with that status. In C, `DYLEASE_MESSAGE_PASS(name, fn)` registers one.
///
/// # Example
///
/// A plugin with one message pass, registered with `export_plugin!`'s usual `typed` form:
///
/// ```
/// use std::ffi::c_void;
/// use dylease_plugin::MessagePass;
/// use dylease_plugin::abi::dylease_out;
///
/// /// Answers its input reversed.
/// unsafe extern "C" fn reverse(input: *const u8, len: usize, out: *mut dylease_out, _: *mut c_void) -> i32 {
///     let input = match len {
///         0 => &[][..],
///         // SAFETY: the host hands `len` readable bytes at `input`.
///         _ => unsafe { std::slice::from_raw_parts(input, len) },
///     };
///     let reversed: Vec<u8> = input.iter().rev().copied().collect();
///     // SAFETY: `out` is this call's output.
///     if unsafe { dylease_out::append(out, &reversed) } { 0 } else { 1 }
/// }
///
/// dylease_plugin::export_plugin! {
///     name: "text",
///     version: "1.0.0",
///     passes: [
///         typed MessagePass: "reverse" => reverse,
///     ],
/// }
/// # fn main() {}
/// ```
#[derive(Debug)]
pub struct MessagePass;

// SAFETY: `dylease.message/1` names exactly this signature, in the C header
// (`DYLEASE_MESSAGE_PASS` checks it) and in this crate.
unsafe impl Interface for MessagePass {
    const ID: &'static str = crate::abi::DYLEASE_MESSAGE_INTERFACE;
    type Fn = crate::abi::dylease_message_fn;
}
