//! Registering a Python plugin for a set: its sources read, its instance run (or shared,
//! through the registry), its passes collected and compared with its manifest.

use std::time::Instant;

use pyo3::prelude::*;

use crate::error::{Error, Origin};
use crate::inspect::pinning::Pinning;
use crate::load::pipeline::Registered;
use crate::load::python::discover::PyCandidate;
use crate::load::python::instance;
use crate::load::python::interpreter::{attach, helpers, plugin_failed};
use crate::registrar::python::PyCallable;
use crate::registrar::{Collected, MAX_NAME_LEN, PassFunc, UserData};
use crate::registry::FileRef;
use crate::registry::teardown::Teardown;
use crate::trust::{Checks, TrustPolicy};

impl PyCandidate {
    /// Reads the sources from the checked files, runs (or shares) the instance, and calls
    /// its registration for this set. A manifest read from those sources must match what it
    /// registered ([`Manifest::compare`]); a file that does not parse leaves it without one,
    /// and its execution then reports the syntax error.
    pub(crate) fn register(
        mut self,
        checks: &mut Checks,
        trust: TrustPolicy,
        deadline: Option<Instant>,
    ) -> Result<Registered, Error> {
        let origin = Origin::File(self.path.clone());
        let staged = self.read(checks, trust)?;
        let manifest = staged.manifest(&origin).unwrap_or_else(|error| {
            log::debug!("{error}; loading it without a manifest");
            None
        });
        // The sources read are the sources run: verified here, before any of them runs.
        if let Some(signatures) = &checks.signatures {
            self.verify_sources(signatures, &staged, manifest.as_ref())?;
        }
        let key = instance::key(&self.identity, &staged);
        let file = FileRef {
            shown: &self.path,
            resolved: &self.path,
            identity: &key,
            source: None,
            origin: false,
            loads: &[],
            strict: false,
            dependencies: &[],
            deadline,
        };
        let instance = instance::instance(file, staged, deadline)?;
        let (name, version, passes) = attach(|py| {
            let (module, api) = instance.plugin().objects(py);
            let helpers = helpers(py);
            let failed = |error: PyErr| plugin_failed(&origin, "register_passes", py, &error);
            let (name, version) = helpers
                .getattr("identity")
                .and_then(|identity| identity.call1((&module, &api)))
                .and_then(|pair| pair.extract::<(String, String)>())
                .map_err(failed)?;
            let passes = helpers
                .getattr("register")
                .and_then(|register| register.call1((&module, &api)))
                .and_then(|passes| passes.extract::<Vec<(String, String, Py<PyAny>)>>())
                .map_err(|error| plugin_failed(&origin, "registering its passes", py, &error))?;
            Ok::<_, Error>((name, version, passes))
        })?;
        let mut collected: Vec<Collected> = Vec::with_capacity(passes.len());
        for (pass, interface, func) in passes {
            let invalid = |reason: &str| Error::InvalidPass {
                plugin: origin.clone(),
                pass: pass.clone(),
                reason: reason.to_owned(),
            };
            if pass.is_empty() || pass.len() > MAX_NAME_LEN {
                return Err(invalid("a pass name has 1 to 256 bytes"));
            }
            if interface.is_empty() || interface.len() > MAX_NAME_LEN {
                return Err(invalid("an interface has 1 to 256 bytes"));
            }
            if collected.iter().any(|earlier| *earlier.name == *pass) {
                return Err(Error::DuplicatePass {
                    pass,
                    first: origin.clone(),
                    second: origin.clone(),
                });
            }
            collected.push(Collected {
                name: pass.into(),
                func: PassFunc::python(interface.into()),
                user_data: UserData(std::ptr::null_mut()),
                python: Some(PyCallable::new(func)),
            });
        }
        if name.is_empty() || name.len() > MAX_NAME_LEN {
            return Err(Error::InvalidPlugin {
                plugin: origin,
                reason: "its name (dylease.plugin) must have 1 to 256 bytes".into(),
            });
        }
        if let Some(manifest) = &manifest {
            let registered = collected.iter().map(|pass| (&*pass.name, pass.func.interface()));
            manifest.compare(&origin, (None, &name, &version), registered)?;
        }
        instance.registered();
        let callables: Vec<PyCallable> = collected.iter().filter_map(|pass| pass.python.clone()).collect();
        let unload = move || {
            // The set's references to the passes go first, then (if this set was the last
            // one using it) the instance: `on_unload`, its modules, the check that they went.
            attach(|_| callables.iter().for_each(PyCallable::clear));
            if let Some(released) = crate::registry::LibraryInstance::release(instance) {
                released.settle();
            }
        };
        Ok(Registered {
            origin: origin.clone(),
            name,
            version,
            passes: collected,
            teardown: Teardown::with_hooks(origin, vec![Box::new(unload)]),
            pinning: Pinning::default(),
        })
    }
}
