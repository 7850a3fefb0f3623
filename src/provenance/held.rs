//! What a signed plugin's load holds until the loader mapped it ([`Provenance`]).

use std::fs::File;

use dylease_sign::Verified;

use crate::provenance::hold::Held;

/// What a signed plugin's load holds until the loader mapped it: its file and each library
/// it needs, verified and held still ([`Held`]). Empty where the host does not require
/// signatures.
///
/// Boxed behind a trait object, and empty without signatures: a load without them carries
/// one pointer, and its teardown (the leases' release) is reached through the vtable that
/// only [`Provenance::holding`] makes, so a program that never requires signatures links none
/// of it.
#[derive(Debug, Default)]
pub(crate) struct Provenance(Option<Box<dyn Holding>>);

/// What [`Provenance`] reads of what it holds.
trait Holding: std::fmt::Debug + Send + Sync {
    /// The plugin's own file, held.
    fn plugin(&self) -> &Held;
}

#[derive(Debug)]
struct Holds {
    plugin: Held,
    /// Held for as long as the plugin's (the dependencies are mapped first, by the same call).
    #[allow(dead_code, reason = "held for its drop, which releases the leases")]
    dependencies: Vec<Held>,
}

impl Holding for Holds {
    fn plugin(&self) -> &Held {
        &self.plugin
    }
}

impl Provenance {
    /// What holds `plugin` and the libraries it needs (`dependencies`) until the mapping.
    pub(crate) fn holding(plugin: Held, dependencies: Vec<Held>) -> Provenance {
        Provenance(Some(Box::new(Holds { plugin, dependencies })))
    }

    /// The descriptor the loader must map for the plugin: its sealed copy where it has one,
    /// else the checked descriptor `checked`.
    pub(crate) fn source<'a>(&'a self, checked: &'a File) -> &'a File {
        self.0
            .as_ref()
            .and_then(|holds| holds.plugin().sealed())
            .unwrap_or(checked)
    }

    /// Whether the loader maps a sealed copy of the plugin: it is then given the copy's
    /// descriptor, never its directory's name for it (`$ORIGIN` is no directory of the
    /// plugin's then).
    pub(crate) fn sealed(&self) -> bool {
        self.0.as_ref().is_some_and(|holds| holds.plugin().sealed().is_some())
    }

    /// What the verification of the plugin's own file found.
    pub(crate) fn signature(&self) -> Option<&Verified> {
        self.0.as_ref().map(|holds| holds.plugin().verified())
    }
}
