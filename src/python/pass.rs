//! Typed Python passes: [`PyInterface`], [`PyPass`], and the [`Lease`] lookups that hand
//! them out.

use std::fmt;
use std::marker::PhantomData;

use pyo3::call::PyCallArgs;
use pyo3::conversion::FromPyObjectOwned;
use pyo3::prelude::*;

use crate::error::{Error, LookupFailure};
use crate::host::Lease;
use crate::load::PassInfo;
use crate::load::python::interpreter::{attach, describe};

/// A pass signature that a host and its Python plugins agree on, named by a versioned id: the
/// Python side of [`Interface`](crate::Interface).
///
/// Safe to implement: a call converts `Args` into Python and the return value back into
/// `Output`, and a conversion that fails is an [`Error`], not undefined behaviour.
///
/// # Example
///
/// ```
/// pub struct FusionPass;
/// impl dylease::PyInterface for FusionPass {
///     const ID: &'static str = "ge.fusion_pass/1";
///     type Args = (String,); // the graph, say, as text
///     type Output = bool; // whether the pass changed it
/// }
/// ```
pub trait PyInterface {
    /// The interface's id, as Python plugins give it to `dylease.typed_pass` and
    /// `reg.add_typed_pass`, such as `ge.fusion_pass/1`.
    const ID: &'static str;
    /// The arguments: a tuple of values that convert into Python objects.
    type Args: for<'py> PyCallArgs<'py>;
    /// What the pass returns, extracted from the Python return value.
    type Output: for<'py> FromPyObjectOwned<'py>;
}

/// A Python pass borrowed from a [`Lease`]: its plugin's instance stays loaded while it is in
/// use. Calls take the GIL; a `PyPass` may be used from any thread that holds the lease.
pub struct PyPass<'lease, I> {
    index: usize,
    lease: &'lease Lease,
    _interface: PhantomData<fn() -> I>,
}

impl<I> fmt::Debug for PyPass<'_, I> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PyPass")
            .field("name", &self.info().name())
            .field("plugin", &self.info().plugin())
            .finish()
    }
}

impl<'lease, I> PyPass<'lease, I> {
    /// The pass's name, interface and plugin.
    pub fn info(&self) -> &'lease PassInfo {
        &self.lease.passes()[self.index]
    }

    /// The name the pass was registered under.
    pub fn name(&self) -> &'lease str {
        self.info().name()
    }
}

impl<I: PyInterface> PyPass<'_, I> {
    /// Calls the pass with `args`, attached to the interpreter (the GIL is taken for the call
    /// and released after it).
    ///
    /// # Errors
    ///
    /// [`Error::Custom`] naming the pass and its plugin file if the pass raised (with the
    /// exception's type, message, and the file and line of the raise) or returned a value
    /// that does not convert to `I::Output`.
    pub fn call(&self, args: I::Args) -> Result<I::Output, Error> {
        let info = self.info();
        let plugin = self.lease.plugins()[info.plugin_index()].origin();
        let failed = |what: String| Error::Custom(format!("Python pass `{}` of {plugin} {what}", info.name()).into());
        let callable = info
            .callable()
            .and_then(|callable| callable.python.as_ref())
            .expect("a PyPass is made only for a Python pass, whose plugin is loaded with its set");
        attach(|py| {
            let func = callable
                .get(py)
                .ok_or_else(|| failed("was called after its plugin unloaded".into()))?;
            let result = func
                .bind(py)
                .call1(args)
                .map_err(|error| failed(format!("raised {}", describe(py, &error))))?;
            result.extract::<I::Output>().map_err(|error| {
                let error: PyErr = error.into();
                let type_name = result
                    .get_type()
                    .name()
                    .map_or_else(|_| "?".to_owned(), |name| name.to_string());
                failed(format!(
                    "returned a `{type_name}`, which is not the output of interface `{}`: {}",
                    I::ID,
                    describe(py, &error)
                ))
            })
        })
    }
}

impl Lease {
    /// The Python pass registered under `name` as an implementation of interface `I`,
    /// borrowing this lease: its plugin stays loaded while the pass is in use.
    ///
    /// # Errors
    ///
    /// [`Error::PassLookup`], as for [`Lease::get`]: [`LookupFailure::Missing`] if no plugin
    /// registered `name`, [`LookupFailure::OtherInterface`] (naming both ids) if it was
    /// registered under another interface, [`LookupFailure::OtherKind`] if it is a native pass
    /// of an interface, [`LookupFailure::Untyped`] if it is a native pass registered without
    /// one.
    ///
    /// # Example
    ///
    /// ```no_run
    /// pub struct FusionPass;
    /// impl dylease::PyInterface for FusionPass {
    ///     const ID: &'static str = "ge.fusion_pass/1";
    ///     type Args = (String,);
    ///     type Output = bool;
    /// }
    ///
    /// // SAFETY: /opt/app/py-passes holds this application's own Python plugins.
    /// let host = unsafe { dylease::PluginHost::builder().python_dir("/opt/app/py-passes") }.build()?;
    /// let lease = host.acquire()?;
    /// let changed = lease.get_py::<FusionPass>("fuse_add")?.call(("graph".to_owned(),))?;
    /// # Ok::<(), dylease::Error>(())
    /// ```
    pub fn get_py<I: PyInterface>(&self, name: &str) -> Result<PyPass<'_, I>, Error> {
        let failure = |cause| Error::PassLookup {
            pass: name.to_owned(),
            expected: I::ID,
            cause: Box::new(cause),
        };
        let index = self
            .pass_position(name)
            .ok_or_else(|| failure(LookupFailure::Missing))?;
        let info = &self.passes()[index];
        let plugin = self.plugins()[info.plugin_index()].origin().clone();
        match (info.interface(), info.is_python()) {
            (Some(registered), true) if registered == I::ID => Ok(PyPass {
                index,
                lease: self,
                _interface: PhantomData,
            }),
            (Some(registered), true) => Err(failure(LookupFailure::OtherInterface {
                registered: registered.to_owned(),
                plugin,
            })),
            (Some(registered), false) => Err(failure(LookupFailure::OtherKind {
                registered: registered.to_owned(),
                python: false,
                plugin,
            })),
            (None, _) => Err(failure(LookupFailure::Untyped { plugin })),
        }
    }

    /// Every Python pass registered under interface `I`, in the order of
    /// [`Lease::passes_of`]: plugins in load order, then pass names in byte order.
    /// Python plugins load at `acquire()` in every host, on-demand ones
    /// ([`HostBuilder::on_demand`](crate::HostBuilder::on_demand)) included, so unlike
    /// `passes_of` this maps nothing and cannot fail.
    pub fn py_passes_of<I: PyInterface>(&self) -> impl ExactSizeIterator<Item = PyPass<'_, I>> + '_ {
        self.passes_of_interface(&crate::registrar::python::index_key(I::ID, true))
            .iter()
            .map(move |&index| PyPass {
                index,
                lease: self,
                _interface: PhantomData,
            })
    }
}
