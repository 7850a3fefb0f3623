//! Plugins compiled into the host: a [`StaticPlugin`] is a name and a register function,
//! which registers into a [`StaticRegistrar`] the way a library's `register_passes` does.

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::error::{Error, Origin, panic_text};
use crate::inspect::pinning::Pinning;
use crate::load::pipeline::Registered;
use crate::registrar::{Finished, StaticRegistrar};
use crate::registry::teardown::{Teardown, teardown_all};
use dylease_plugin::RegisterError;

/// A static plugin's register function.
pub(crate) type RegisterFn = Box<dyn Fn(&mut StaticRegistrar) -> Result<(), RegisterError> + Send + Sync>;

/// A plugin compiled into the host.
pub(crate) struct StaticPlugin {
    pub(crate) name: String,
    pub(crate) register: RegisterFn,
}

impl std::fmt::Debug for StaticPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StaticPlugin")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl StaticPlugin {
    /// Runs the register function, catching a panic.
    pub(crate) fn register(&self) -> Result<Registered, Error> {
        let origin = Origin::Static(self.name.clone());
        let mut registrar = StaticRegistrar::new(origin.clone());
        let outcome = catch_unwind(AssertUnwindSafe(|| (self.register)(&mut registrar)));
        let Finished { passes, hooks, .. } = registrar.finish();
        let teardown = Teardown::with_hooks(origin.clone(), hooks);
        let result = match outcome {
            Ok(Ok(())) => passes,
            // A refusal of the registrar's fails the load as the registrar recorded it (naming
            // the plugin), whether the function returned it, ignored it or failed otherwise.
            Ok(Err(_)) if passes.is_err() => passes,
            Ok(Err(error)) => Err(Error::RegisterFailed {
                plugin: origin.clone(),
                reason: error.to_string(),
                source: Some(Box::new(Error::from(error))),
            }),
            Err(panic) => Err(Error::Panicked {
                plugin: origin.clone(),
                message: panic_text(&*panic).to_owned(),
            }),
        };
        match result {
            Ok(passes) => Ok(Registered {
                origin,
                name: self.name.clone(),
                version: String::new(),
                passes,
                teardown,
                pinning: Pinning::default(),
            }),
            Err(error) => {
                // Hooks registered before the failure own state the plugin set up: run them.
                teardown_all(vec![teardown]);
                Err(error)
            }
        }
    }
}
