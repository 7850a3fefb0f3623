//! Leases: the RAII handles that keep a plugin set loaded, and the passes reached through
//! them.
// `unsafe` here: `Lease::pass`, a public `unsafe fn`, types an untyped pass on its caller's
// word. A typed pass is typed again by the pass table's safe `PassFunc::typed`.
#![allow(unsafe_code)]

use core::ffi::c_void;
use std::fmt;
use std::ops::Deref;

use crate::error::{Error, LookupFailure};
use crate::host::set::PluginSet;
use crate::load::{Callable, PassInfo};
use crate::sync::{Arc, Weak};
use dylease_plugin::Interface;
use dylease_plugin::PassFn;

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
///     .static_plugin("builtin", |_reg| Ok(()))
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
// catches it could see it: the set's lists are fixed at load, an on-demand plugin's mapping
// publishes its passes' callables once each and then its state (a panic in between leaves the
// state `Unmapped` and the callables it set valid), and the lease count is changed only by
// single atomic operations. So leases may cross `catch_unwind`, as `Arc`s of plain data do.
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

    /// The pass registered under `name` as an implementation of interface `I`, borrowing this
    /// lease: it cannot outlive the lease, so its library stays loaded while it is in use.
    ///
    /// Safe: the pass is handed out only if its plugin registered it under `I::ID`
    /// (`DYLEASE_TYPED_PASS` in C, [`Registrar::add_typed_pass`](crate::Registrar::add_typed_pass)
    /// in Rust), and [`Interface`]'s implementer promised that every such pass has the
    /// signature `I::Fn`. One hash lookup and one string comparison; no allocation unless it
    /// fails.
    ///
    /// A copy of the function pointer taken out with `*pass` is not tied to the lease; call
    /// through the `Pass` (or an [`OwnedPass`] from [`Pass::to_owned_pass`]) rather than storing
    /// such a copy. And a running pass must not cause the last lease of its own set to be
    /// dropped (for example through `user_data`).
    ///
    /// # Errors
    ///
    /// [`Error::PassLookup`], whose `cause` tells the failures apart:
    /// [`LookupFailure::Missing`] if no plugin registered `name`, [`LookupFailure::Untyped`] if
    /// it was registered without an interface, [`LookupFailure::OtherInterface`] (naming both
    /// interfaces) if it was registered under another one, and [`LookupFailure::OtherKind`] if
    /// it is a Python pass (the `python` feature). In an on-demand set these are decided from
    /// the manifest, without mapping the plugin.
    ///
    /// In an on-demand set ([`HostBuilder::on_demand`](crate::HostBuilder::on_demand)), the
    /// first call for a pass of a plugin not mapped yet maps it (and runs its `on_load`):
    /// [`Error::MapFailed`] if that fails (now and on every later call),
    /// [`Error::TimedOut`] if another thread's mapping of it outlasts the host's
    /// [`map_timeout`](crate::HostBuilder::map_timeout), [`Error::Reentrant`] if called from
    /// that plugin's own `on_load` or `register_passes`.
    ///
    /// # Example
    ///
    /// ```
    /// use dylease::Registrar;
    ///
    /// pub struct IntOp;
    /// // SAFETY: every pass registered under "math.int_op/1" is an `extern "C" fn(i32) -> i32`.
    /// unsafe impl dylease::Interface for IntOp {
    ///     const ID: &'static str = "math.int_op/1";
    ///     type Fn = unsafe extern "C" fn(i32) -> i32;
    /// }
    /// extern "C" fn double(x: i32) -> i32 { x * 2 }
    ///
    /// let host = dylease::PluginHost::builder()
    ///     .static_plugin("math", |reg| {
    ///         reg.add_typed_pass::<IntOp>("double", double, std::ptr::null_mut())
    ///     })
    ///     .build()?;
    /// let lease = host.acquire()?;
    /// let pass = lease.get::<IntOp>("double")?; // safe: the interface id is checked
    /// // SAFETY: `lease` is alive, so the pass's library is loaded; `double` takes any `i32`.
    /// assert_eq!(unsafe { pass(21) }, 42);
    /// assert_eq!(pass.info().interface(), Some("math.int_op/1"));
    /// # Ok::<(), dylease::Error>(())
    /// ```
    ///
    /// A pass from `get` cannot outlive its lease:
    ///
    /// ```compile_fail,E0505
    /// # pub struct IntOp;
    /// # unsafe impl dylease::Interface for IntOp {
    /// #     const ID: &'static str = "math.int_op/1";
    /// #     type Fn = unsafe extern "C" fn(i32) -> i32;
    /// # }
    /// # let host = dylease::PluginHost::builder().build()?;
    /// let lease = host.acquire()?;
    /// let pass = lease.get::<IntOp>("double");
    /// drop(lease); // error: `lease` is still borrowed by `pass`
    /// drop(pass);
    /// # Ok::<(), dylease::Error>(())
    /// ```
    ///
    /// while the same code with the drops in the other order compiles:
    ///
    /// ```
    /// # pub struct IntOp;
    /// # unsafe impl dylease::Interface for IntOp {
    /// #     const ID: &'static str = "math.int_op/1";
    /// #     type Fn = unsafe extern "C" fn(i32) -> i32;
    /// # }
    /// # let host = dylease::PluginHost::builder().build()?;
    /// let lease = host.acquire()?;
    /// let pass = lease.get::<IntOp>("double");
    /// drop(pass);
    /// drop(lease);
    /// # Ok::<(), dylease::Error>(())
    /// ```
    pub fn get<I: Interface>(&self, name: &str) -> Result<Pass<'_, I::Fn>, Error> {
        let failure = |cause| Error::PassLookup {
            pass: name.to_owned(),
            expected: I::ID,
            cause: Box::new(cause),
        };
        let index = self
            .pass_position(name)
            .ok_or_else(|| failure(LookupFailure::Missing))?;
        let info = &self.passes()[index];
        // A Python pass has no native signature (`Lease::get_py` calls it).
        if let (Some(registered), true) = (info.interface(), is_python(info)) {
            return Err(failure(LookupFailure::OtherKind {
                registered: registered.to_owned(),
                python: true,
                plugin: self.plugins()[info.plugin_index()].origin().clone(),
            }));
        }
        match info.interface() {
            Some(registered) if registered == I::ID => self.typed_pass::<I>(index),
            Some(registered) => Err(failure(LookupFailure::OtherInterface {
                registered: registered.to_owned(),
                plugin: self.plugins()[info.plugin_index()].origin().clone(),
            })),
            None => Err(failure(LookupFailure::Untyped {
                plugin: self.plugins()[info.plugin_index()].origin().clone(),
            })),
        }
    }

    /// Every pass registered under interface `I`, in an order that depends neither on link
    /// order nor on hash order: plugins in load order (the order
    /// [`PluginSet::plugins`](crate::PluginSet::plugins) lists them), then, within a plugin,
    /// pass names in byte order (`str`'s `Ord`). The order is computed once at load;
    /// iterating allocates nothing.
    ///
    /// # Errors
    ///
    /// In an on-demand set ([`HostBuilder::on_demand`](crate::HostBuilder::on_demand)), every
    /// plugin providing `I` that is not mapped yet is mapped first, in load order; the first
    /// failure is returned, as [`Lease::get`] returns it (the plugins mapped before it stay
    /// mapped). Otherwise it does not fail.
    ///
    /// # Example
    ///
    /// ```
    /// use dylease::Registrar;
    ///
    /// pub struct IntOp;
    /// // SAFETY: every pass registered under "math.int_op/1" is an `fn(i32) -> i32`.
    /// unsafe impl dylease::Interface for IntOp {
    ///     const ID: &'static str = "math.int_op/1";
    ///     type Fn = unsafe fn(i32) -> i32;
    /// }
    ///
    /// let host = dylease::PluginHost::builder()
    ///     .static_plugin("math", |reg| {
    ///         reg.add_typed_pass::<IntOp>("triple", |x| x * 3, std::ptr::null_mut())?;
    ///         reg.add_typed_pass::<IntOp>("double", |x| x * 2, std::ptr::null_mut())
    ///     })
    ///     .build()?;
    /// let lease = host.acquire()?;
    /// // SAFETY: `lease` is alive while the passes run; they take any `i32`.
    /// let results: Vec<(&str, i32)> =
    ///     lease.passes_of::<IntOp>()?.map(|p| (p.name(), unsafe { p(7) })).collect();
    /// assert_eq!(results, [("double", 14), ("triple", 21)]);
    /// # Ok::<(), dylease::Error>(())
    /// ```
    pub fn passes_of<I: Interface>(&self) -> Result<impl ExactSizeIterator<Item = Pass<'_, I::Fn>> + '_, Error> {
        let positions = self.passes_of_interface(I::ID);
        // Plugins in load order: the positions are sorted by plugin.
        for &index in positions {
            self.callable(index)?;
        }
        Ok(positions.iter().map(move |&index| {
            let callable = self.passes()[index]
                .callable()
                .expect("every provider was mapped above, and a mapping is never undone while a lease lives");
            let func = callable
                .func
                .typed::<I>()
                .expect("the passes of an interface were registered under it");
            Pass {
                func,
                index,
                lease: self,
            }
        }))
    }

    /// The pass at `index`, which was registered (or declared) under `I::ID`, its plugin
    /// mapped if it was not.
    fn typed_pass<I: Interface>(&self, index: usize) -> Result<Pass<'_, I::Fn>, Error> {
        let callable = self.callable(index)?;
        let func = callable
            .func
            .typed::<I>()
            .expect("the pass was found under its registered interface");
        Ok(Pass {
            func,
            index,
            lease: self,
        })
    }

    /// What calls the pass at `index`, its plugin mapped first if it is an on-demand plugin
    /// not mapped yet (one atomic load if it is mapped). A pass of a plugin that runs in an
    /// isolated set's worker has none in this process: refused with the reason.
    pub(crate) fn callable(&self, index: usize) -> Result<&Callable, Error> {
        let info = &self.passes()[index];
        if let Some(callable) = info.callable() {
            return Ok(callable);
        }
        if let Some(remote) = self.isolated()
            && remote.hosts(info.plugin_index())
        {
            return Err(Error::PassLookup {
                pass: info.name().to_owned(),
                expected: "",
                cause: Box::new(LookupFailure::Isolated {
                    plugin: self.plugins()[info.plugin_index()].origin().clone(),
                }),
            });
        }
        self.ensure_mapped(info.plugin_index())?;
        // Its registration was compared with its complete manifest, whose passes the set
        // lists: a declared pass it did not register failed the mapping.
        info.callable().ok_or_else(|| Error::ManifestMismatch {
            plugin: self.plugins()[info.plugin_index()].origin().clone(),
            reason: format!("it did not register the declared pass `{}`", info.name()),
        })
    }

    /// The pass registered under `name`, typed as `F`, borrowing this lease: it cannot
    /// outlive the lease, so its library stays loaded while it is in use.
    ///
    /// The lookup is one hash lookup and allocates nothing.
    ///
    /// # Errors
    ///
    /// [`Error::PassLookup`] with [`LookupFailure::Missing`] if no plugin of this set
    /// registered `name` (its `expected` interface is empty: this lookup asks for none). In an
    /// on-demand set ([`HostBuilder::on_demand`](crate::HostBuilder::on_demand)), the first
    /// call for a pass of a plugin not mapped yet maps it, and fails as [`Lease::get`] does
    /// if that fails.
    ///
    /// This is the lookup for untyped passes (`DYLEASE_PASS`, every pass of an ABI version 1
    /// plugin). For a pass registered under an interface, the safe [`Lease::get`] checks the
    /// interface instead of trusting the caller.
    ///
    /// # Safety
    ///
    /// - `F` must be the exact signature and calling convention the plugin registered the
    ///   pass with; calling through a mismatched type is undefined behaviour.
    /// - The function pointer must not be used after this lease is dropped. The borrow keeps
    ///   the `Pass` itself from outliving the lease, but `F` is `Copy`: a copy taken out with
    ///   `*pass` is not tied to the lease. Keep such copies inside the borrow, or use
    ///   [`Pass::to_owned_pass`], whose `OwnedPass` carries a lease with it.
    /// - A running pass must not cause the last lease of its own set to be dropped (for
    ///   example through `user_data`): the call would return into an unloaded library.
    ///
    /// # Example
    ///
    /// ```
    /// use dylease::Registrar;
    ///
    /// extern "C" fn double(x: i32) -> i32 { x * 2 }
    ///
    /// let host = dylease::PluginHost::builder()
    ///     .static_plugin("math", |reg| {
    ///         reg.add_pass("double", double as extern "C" fn(i32) -> i32, std::ptr::null_mut())
    ///     })
    ///     .build()?;
    /// let lease = host.acquire()?;
    /// // SAFETY: "double" was registered as `extern "C" fn(i32) -> i32`, and the pointer is
    /// // used only while `lease` lives.
    /// let pass = unsafe { lease.pass::<extern "C" fn(i32) -> i32>("double") }?;
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
    pub unsafe fn pass<F: PassFn>(&self, name: &str) -> Result<Pass<'_, F>, Error> {
        let index = self.pass_position(name).ok_or_else(|| Error::PassLookup {
            pass: name.to_owned(),
            expected: "",
            cause: Box::new(LookupFailure::Missing),
        })?;
        let callable = self.callable(index)?;
        // SAFETY: the caller guarantees `F` is the signature the pass was registered with.
        let func = unsafe { callable.func.untyped::<F>() };
        Ok(Pass {
            func,
            index,
            lease: self,
        })
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
        entry(self.lease, self.index)
    }

    /// The name the pass was registered under.
    pub fn name(&self) -> &'lease str {
        self.info().name()
    }

    /// The pointer the plugin attached to the pass (NULL if none).
    pub fn user_data(&self) -> *mut c_void {
        user_data(self.info())
    }
}

/// The `user_data` of a pass handed out (so mapped).
fn user_data(info: &PassInfo) -> *mut c_void {
    info.callable()
        .map_or(std::ptr::null_mut(), |callable| callable.user_data.0)
}

/// The table entry a pass of either kind (borrowed or owned) stands for: the one place both
/// read it from.
fn entry(lease: &Lease, index: usize) -> &PassInfo {
    &lease.passes()[index]
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
    /// The pass's name and plugin ([`Pass::info`]).
    pub fn info(&self) -> &PassInfo {
        entry(&self.lease, self.index)
    }

    /// The name the pass was registered under ([`Pass::name`]).
    pub fn name(&self) -> &str {
        self.info().name()
    }

    /// The pointer the plugin attached to the pass, NULL if none ([`Pass::user_data`]).
    pub fn user_data(&self) -> *mut c_void {
        user_data(self.info())
    }

    /// The lease this pass holds.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }
}

impl<F: Copy> OwnedPass<F> {
    /// The same pass, borrowing this one's lease: the inverse of [`Pass::to_owned_pass`], as
    /// `String::as_str` is of `str::to_owned`.
    ///
    /// ```
    /// use dylease::Registrar;
    ///
    /// # pub struct IntOp;
    /// # unsafe impl dylease::Interface for IntOp {
    /// #     const ID: &'static str = "math.int_op/1";
    /// #     type Fn = unsafe fn(i32) -> i32;
    /// # }
    /// fn double(x: i32) -> i32 { x * 2 }
    /// let host = dylease::PluginHost::builder()
    ///     .static_plugin("math", |reg| {
    ///         reg.add_typed_pass::<IntOp>("double", double, std::ptr::null_mut())
    ///     })
    ///     .build()?;
    /// let owned = host.acquire()?.get::<IntOp>("double")?.to_owned_pass();
    /// let pass = owned.as_pass();
    /// assert_eq!(pass.name(), "double");
    /// // SAFETY: `double` has no precondition.
    /// assert_eq!(unsafe { pass(21) }, 42);
    /// # Ok::<(), dylease::Error>(())
    /// ```
    pub fn as_pass(&self) -> Pass<'_, F> {
        Pass {
            func: self.func,
            index: self.index,
            lease: &self.lease,
        }
    }
}

/// Whether `info` is a Python pass (`load::python`), which has no native signature.
fn is_python(info: &PassInfo) -> bool {
    info.is_python()
}
