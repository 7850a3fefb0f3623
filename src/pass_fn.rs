//! Function-pointer types that can be registered as passes.

use crate::abi::dylease_fn;

/// A function-pointer type that can travel through the plugin ABI as a pass.
///
/// The plugin ABI stores every pass as an untyped [`dylease_fn`]; this trait converts a
/// typed function pointer to and from that form. It is implemented for `fn`, `unsafe fn`,
/// `extern "C" fn` and `unsafe extern "C" fn` pointers with up to six arguments whose types
/// are `'static`.
///
/// # Safety
///
/// Implementors must be function-pointer types (the size of a code pointer, no drop glue),
/// and `from_raw(into_raw(f))` must return `f`. Implement it yourself only for a signature the
/// blanket implementations cannot name, such as a higher-ranked `for<'a> fn(&'a Graph)`.
///
/// # Example
///
/// ```
/// use dylease::PassFn;
///
/// extern "C" fn double(x: i32) -> i32 { x * 2 }
///
/// let f: extern "C" fn(i32) -> i32 = double;
/// let raw = f.into_raw();
/// // SAFETY: `raw` came from a pointer of exactly this type.
/// let back = unsafe { <extern "C" fn(i32) -> i32 as PassFn>::from_raw(raw) };
/// assert_eq!(back(21), 42);
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

macro_rules! impl_pass_fn {
    ($($arg:ident),*) => {
        impl_pass_fn!(@one fn($($arg),*) -> R; $($arg),*);
        impl_pass_fn!(@one unsafe fn($($arg),*) -> R; $($arg),*);
        impl_pass_fn!(@one extern "C" fn($($arg),*) -> R; $($arg),*);
        impl_pass_fn!(@one unsafe extern "C" fn($($arg),*) -> R; $($arg),*);
    };
    (@one $ty:ty; $($arg:ident),*) => {
        // SAFETY: every type named here is a plain function pointer: the size of a code
        // pointer, `Copy`, without drop glue, and a transmute round trip returns it intact.
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

impl_pass_fn!();
impl_pass_fn!(A1);
impl_pass_fn!(A1, A2);
impl_pass_fn!(A1, A2, A3);
impl_pass_fn!(A1, A2, A3, A4);
impl_pass_fn!(A1, A2, A3, A4, A5);
impl_pass_fn!(A1, A2, A3, A4, A5, A6);
