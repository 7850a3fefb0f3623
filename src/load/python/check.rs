//! The trust check of a Python plugin: every file of it, before any code of any plugin runs
//! (I8), by the same check as a library file's (`trust`).

use crate::error::Error;
use crate::load::python::discover::PyCandidate;
use crate::trust::{Checks, TrustPolicy};

impl PyCandidate {
    /// The trust check of every file, before any code of any plugin runs (I8).
    pub(crate) fn check(&mut self, checks: &mut Checks, trust: TrustPolicy) -> Result<(), Error> {
        for file in &mut self.files {
            checks.check(trust, &mut file.candidate)?;
        }
        Ok(())
    }
}
