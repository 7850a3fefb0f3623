//! Leases: the RAII handles that keep a plugin set loaded, and the passes reached through
//! them.

use core::ffi::c_void;
use std::fmt;
use std::ops::Deref;

use crate::host::PluginSet;
use crate::load::PassInfo;
use crate::pass_fn::PassFn;
use crate::sync::{Arc, Weak};

/// A share in a loaded [`PluginSet`]: while any lease of a set exists, its plugins stay
/// loaded; when the last one is dropped, the set unloads before that drop returns.
///
/// A lease is one pointer wide, `Clone` costs one atomic increment, and it is `Send + Sync`,
/// so it can be stored in long-lived structs (as the RAII guard of a session) and handed to
/// other threads. It derefs to the [`PluginSet`].
///
/// # Example
///
/// ```
/// let host = dylease::PluginHost::builder()
///     .static_plugin("builtin", |_reg: &mut dylease::Registrar| Ok(()))
///     .build()?;
/// let session = host.acquire()?;            // loads generation 1
/// let compile = host.acquire()?;            // shares it
/// assert!(dylease::Lease::ptr_eq(&session, &compile));
/// drop(compile);                            // the session keeps it loaded
/// assert!(host.is_loaded());
/// drop(session);                            // the last lease: unloads now
/// assert!(!host.is_loaded());
/// # Ok::<(), dylease::Error>(())
/// ```
#[derive(Clone)]
pub struct Lease(pub(crate) Arc<PluginSet>);

impl Deref for Lease {
    type Target = PluginSet;

    #[inline]
    fn deref(&self) -> &PluginSet {
        &self.0
    }
}

// A panic cannot leave a lease (or the set it shares) half-updated where the code that
// catches it could see it: the set is immutable after load and the lease count is changed only
// by single atomic operations. So leases may cross `catch_unwind`, as `Arc`s of plain data do.
impl std::panic::UnwindSafe for Lease {}
impl std::panic::RefUnwindSafe for Lease {}
impl std::panic::UnwindSafe for WeakLease {}
impl std::panic::RefUnwindSafe for WeakLease {}

impl fmt::Debug for Lease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Lease").field(&*self.0).finish()
    }
}

impl Lease {
    /// A weak lease: it observes the set without keeping it loaded.
    pub fn downgrade(&self) -> WeakLease {
        WeakLease(Arc::downgrade(&self.0))
    }

    /// Whether two leases share one set.
    pub fn ptr_eq(a: &Lease, b: &Lease) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }

    /// The pass registered under `name`, typed as `F`, borrowing this lease: it cannot
    /// outlive the lease, so its library stays loaded while it is in use.
    ///
    /// Returns `None` if no plugin of this set registered `name`. The lookup is one hash
    /// lookup and allocates nothing.
    ///
    /// # Safety
    ///
    /// - `F` must be the exact signature and calling convention the plugin registered the
    ///   pass with; calling through a mismatched type is undefined behaviour.
    /// - The function pointer must not be used after this lease is dropped. The borrow keeps
    ///   the `Pass` itself from outliving the lease, but `F` is `Copy`: a copy taken out with
    ///   `*pass` is not tied to the lease. Keep such copies inside the borrow, or use
    ///   [`Lease::owned_pass`], which carries a lease with it.
    /// - A running pass must not cause the last lease of its own set to be dropped (for
    ///   example through `user_data`): the call would return into an unloaded library.
    ///
    /// # Example
    ///
    /// ```
    /// extern "C" fn double(x: i32) -> i32 { x * 2 }
    ///
    /// let host = dylease::PluginHost::builder()
    ///     .static_plugin("math", |reg: &mut dylease::Registrar| {
    ///         reg.add_pass("double", double as extern "C" fn(i32) -> i32, std::ptr::null_mut())
    ///     })
    ///     .build()?;
    /// let lease = host.acquire()?;
    /// // SAFETY: "double" was registered as `extern "C" fn(i32) -> i32`, and the pointer is
    /// // used only while `lease` lives.
    /// let pass = unsafe { lease.pass::<extern "C" fn(i32) -> i32>("double") }.unwrap();
    /// assert_eq!(pass(21), 42);
    /// # Ok::<(), dylease::Error>(())
    /// ```
    ///
    /// A pass cannot outlive its lease:
    ///
    /// ```compile_fail,E0505
    /// # let host = dylease::PluginHost::builder().build()?;
    /// let lease = host.acquire()?;
    /// // SAFETY: not called.
    /// let pass = unsafe { lease.pass::<extern "C" fn()>("any") };
    /// drop(lease); // error: `lease` is still borrowed by `pass`
    /// drop(pass);
    /// # Ok::<(), dylease::Error>(())
    /// ```
    ///
    /// while the same code with the drops in the other order compiles:
    ///
    /// ```
    /// # let host = dylease::PluginHost::builder().build()?;
    /// let lease = host.acquire()?;
    /// // SAFETY: not called.
    /// let pass = unsafe { lease.pass::<extern "C" fn()>("any") };
    /// drop(pass);
    /// drop(lease);
    /// # Ok::<(), dylease::Error>(())
    /// ```
    pub unsafe fn pass<F: PassFn>(&self, name: &str) -> Option<Pass<'_, F>> {
        let index = self.pass_position(name)?;
        // SAFETY: the caller guarantees `F` is the signature the pass was registered with.
        let func = unsafe { F::from_raw(self.passes()[index].func) };
        Some(Pass {
            func,
            index,
            lease: self,
        })
    }

    /// The pass registered under `name`, typed as `F`, carrying a clone of this lease so it
    /// can be stored in structs and sent to other threads.
    ///
    /// # Safety
    ///
    /// `F` must be the exact signature and calling convention the plugin registered the pass
    /// with. As with [`Lease::pass`], a copy of the function pointer taken out with `*owned`
    /// must not be used after the `OwnedPass` (and every other lease of the set) is dropped.
    pub unsafe fn owned_pass<F: PassFn>(&self, name: &str) -> Option<OwnedPass<F>> {
        // SAFETY: the caller's contract is this function's.
        unsafe { self.pass::<F>(name) }.map(|pass| pass.to_owned_pass())
    }
}

/// A weak lease: observes a set without keeping its plugins loaded.
///
/// It does not deref to the set; [`upgrade`](WeakLease::upgrade) it to use the plugins.
///
/// `WeakLease::default()` observes nothing: its `upgrade` always returns `None`.
#[derive(Clone, Default)]
pub struct WeakLease(Weak<PluginSet>);

impl WeakLease {
    /// A lease of the same set if it is still loaded, `None` once its last lease was dropped
    /// (an unloading set is never handed out, nor a later generation of the same host).
    pub fn upgrade(&self) -> Option<Lease> {
        self.0.upgrade().map(Lease)
    }
}

impl fmt::Debug for WeakLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WeakLease")
    }
}

/// A pass borrowed from a [`Lease`]: derefs to the function pointer `F`.
pub struct Pass<'lease, F> {
    func: F,
    index: usize,
    lease: &'lease Lease,
}

impl<F> Deref for Pass<'_, F> {
    type Target = F;

    #[inline]
    fn deref(&self) -> &F {
        &self.func
    }
}

impl<F> fmt::Debug for Pass<'_, F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pass")
            .field("name", &self.info().name())
            .field("plugin", &self.info().plugin())
            .finish()
    }
}

impl<'lease, F> Pass<'lease, F> {
    /// The pass's name and plugin.
    pub fn info(&self) -> &'lease PassInfo {
        &self.lease.passes()[self.index]
    }

    /// The name the pass was registered under.
    pub fn name(&self) -> &'lease str {
        self.info().name()
    }

    /// The pointer the plugin attached to the pass (NULL if none).
    pub fn user_data(&self) -> *mut c_void {
        self.info().user_data.0
    }
}

impl<F: PassFn> Pass<'_, F> {
    /// The same pass, carrying a clone of the lease instead of borrowing it.
    pub fn to_owned_pass(&self) -> OwnedPass<F> {
        OwnedPass {
            func: self.func,
            index: self.index,
            lease: self.lease.clone(),
        }
    }
}

/// A pass that holds its own lease: it keeps its plugin loaded, can be stored in structs,
/// cloned, and sent to other threads. Derefs to the function pointer `F`.
#[derive(Clone)]
pub struct OwnedPass<F> {
    func: F,
    index: usize,
    lease: Lease,
}

impl<F> Deref for OwnedPass<F> {
    type Target = F;

    #[inline]
    fn deref(&self) -> &F {
        &self.func
    }
}

impl<F> fmt::Debug for OwnedPass<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedPass")
            .field("name", &self.name())
            .field("generation", &self.lease.generation())
            .finish()
    }
}

impl<F> OwnedPass<F> {
    /// The pass's name and plugin.
    pub fn info(&self) -> &PassInfo {
        &self.lease.passes()[self.index]
    }

    /// The name the pass was registered under.
    pub fn name(&self) -> &str {
        self.info().name()
    }

    /// The pointer the plugin attached to the pass (NULL if none).
    pub fn user_data(&self) -> *mut c_void {
        self.info().user_data.0
    }

    /// The lease this pass holds.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }
}
