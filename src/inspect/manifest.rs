//! What a plugin declares about itself in its file — its name and version, its passes and,
//! for a library, the plugin ABI version it was built for — read without running any of its
//! code: a library's manifest notes (`dylease_elf::manifest`), a Python plugin's syntax tree.
//! The host gates the ABI on it before the library is mapped, and compares it with what the
//! plugin registers (`load::pipeline`).

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::path::Path;

pub use dylease_elf::DeclaredPass;

use crate::error::{Error, Origin};
use dylease_plugin::abi::{DYLEASE_ABI_VERSION, DYLEASE_OLDEST_ABI_VERSION};

/// A plugin's manifest: what its file declares, read without running any of its code.
///
/// A library's manifest is written at compile time by the C/C++ header's macros and by
/// [`export_plugin!`](crate::export_plugin) (see [`docs::writing_plugins`]); a Python
/// plugin's is read from its syntax tree (its module-level `dylease.plugin(...)` and
/// `@dylease.typed_pass(...)` decorators). See [`PluginHost::catalog`](crate::PluginHost::catalog).
///
/// [`docs::writing_plugins`]: crate::docs::writing_plugins
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    pub(crate) abi_version: Option<u32>,
    pub(crate) name: String,
    pub(crate) version: String,
    pub(crate) complete: bool,
    pub(crate) passes: Vec<DeclaredPass>,
}

impl Manifest {
    /// The plugin ABI version a library plugin was built for; `None` for a Python plugin.
    pub fn abi_version(&self) -> Option<u32> {
        self.abi_version
    }

    /// The plugin's name, as its descriptor (or `dylease.plugin(...)`) gives it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The plugin's version; empty if it gives none.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// Whether [`passes`](Manifest::passes) lists every pass the plugin registers. A host
    /// that loads the plugin checks it: a difference fails the load.
    pub fn is_complete(&self) -> bool {
        self.complete
    }

    /// The passes it declares, in the order of the file.
    pub fn passes(&self) -> &[DeclaredPass] {
        &self.passes
    }

    /// Refuses a library plugin whose manifest declares a plugin ABI version this host does
    /// not speak, naming the file `path` and both versions: before the file is mapped.
    pub(crate) fn gate(&self, path: &Path) -> Result<(), Error> {
        match self.abi_version {
            Some(found) if !(DYLEASE_OLDEST_ABI_VERSION..=DYLEASE_ABI_VERSION).contains(&found) => {
                Err(Error::AbiMismatch {
                    path: path.to_owned(),
                    found,
                    expected: DYLEASE_ABI_VERSION,
                    declared: true,
                })
            }
            _ => Ok(()),
        }
    }

    /// Compares what the plugin says of itself once loaded — its descriptor's ABI version
    /// (`None` for a Python plugin), `name` and `version`, and the `registered` passes (name,
    /// interface) — with this manifest: the ABI version, name and version must be the
    /// declared ones, and a pass the manifest declares must be registered under the declared
    /// interface if it is registered at all; if the manifest is complete, the passes must be
    /// exactly the declared ones. The error names each difference. A plugin that registered
    /// exactly the declared passes, in the declared order (what one list of passes in its
    /// source gives both), is passed without allocating.
    pub(crate) fn compare<'a>(
        &self,
        plugin: &Origin,
        (abi_version, name, version): (Option<u32>, &str, &str),
        registered: impl Iterator<Item = (&'a str, Option<&'a str>)> + Clone,
    ) -> Result<(), Error> {
        let same_abi = abi_version
            .zip(self.abi_version)
            .is_none_or(|(found, declared)| found == declared);
        let mut declared = self.passes.iter();
        let exactly_declared = registered.clone().all(|(name, interface)| {
            declared
                .next()
                .is_some_and(|p| p.name == name && p.interface.as_deref() == interface)
        }) && declared.next().is_none();
        if same_abi && name == self.name && version == self.version && exactly_declared {
            return Ok(());
        }
        let mut differences = Vec::new();
        if let (Some(found), Some(declared)) = (abi_version, self.abi_version)
            && found != declared
        {
            differences.push(format!(
                "its descriptor says ABI version {found}, its manifest {declared}"
            ));
        }
        if name != self.name {
            differences.push(format!("it names itself `{name}`, its manifest `{}`", self.name));
        }
        if version != self.version {
            differences.push(format!("it gives version `{version}`, its manifest `{}`", self.version));
        }
        let registered: Vec<(&str, Option<&str>)> = registered.collect();
        let by_name: HashMap<&str, Option<&str>> = registered.iter().copied().collect();
        for declared in &self.passes {
            match by_name.get(declared.name.as_str()) {
                None if self.complete => {
                    differences.push(format!("it did not register the declared pass {}", Shown(declared)));
                }
                Some(&interface) if interface != declared.interface.as_deref() => differences.push(format!(
                    "it registered pass `{}` {}, but its manifest declares it {}",
                    declared.name,
                    typed(interface),
                    typed(declared.interface.as_deref())
                )),
                _ => {}
            }
        }
        if self.complete {
            let declared: HashSet<&str> = self.passes.iter().map(|p| p.name.as_str()).collect();
            for (name, interface) in registered {
                if !declared.contains(name) {
                    differences.push(format!(
                        "it registered pass `{name}` {}, which its complete manifest does not declare",
                        typed(interface)
                    ));
                }
            }
        }
        if differences.is_empty() {
            return Ok(());
        }
        Err(Error::ManifestMismatch {
            plugin: plugin.clone(),
            reason: differences.join("; "),
        })
    }
}

impl From<dylease_elf::Manifest> for Manifest {
    fn from(manifest: dylease_elf::Manifest) -> Manifest {
        Manifest {
            abi_version: Some(manifest.abi_version),
            name: manifest.name,
            version: manifest.version,
            complete: manifest.complete,
            passes: manifest.passes,
        }
    }
}

/// A declared pass as a message shows it: "`name` (interface `i`)" or "`name` (untyped)".
struct Shown<'a>(&'a DeclaredPass);

impl fmt::Display for Shown<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` {}", self.0.name, typed(self.0.interface.as_deref()))
    }
}

/// "(interface `i`)" or "(untyped)".
fn typed(interface: Option<&str>) -> String {
    match interface {
        Some(interface) => format!("(interface `{interface}`)"),
        None => "(untyped)".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(complete: bool) -> Manifest {
        Manifest {
            abi_version: Some(2),
            name: "p".into(),
            version: "1".into(),
            complete,
            passes: vec![
                DeclaredPass::new("a", None),
                DeclaredPass::new("b", Some("i/1".to_owned())),
            ],
        }
    }

    fn compare(manifest: &Manifest, name: &str, registered: &[(&str, Option<&str>)]) -> Result<(), String> {
        let origin = Origin::Named("p".into());
        manifest
            .compare(&origin, (Some(2), name, "1"), registered.iter().copied())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn a_complete_manifest_must_list_exactly_the_registered_passes() {
        let complete = manifest(true);
        assert_eq!(compare(&complete, "p", &[("b", Some("i/1")), ("a", None)]), Ok(()));
        let missing = compare(&complete, "p", &[("a", None)]).unwrap_err();
        assert!(
            missing.contains("did not register the declared pass `b` (interface `i/1`)"),
            "{missing}"
        );
        let extra = compare(&complete, "p", &[("a", None), ("b", Some("i/1")), ("c", None)]).unwrap_err();
        assert!(
            extra.contains("registered pass `c` (untyped), which its complete"),
            "{extra}"
        );
        let retyped = compare(&complete, "p", &[("a", Some("j/1")), ("b", Some("i/1"))]).unwrap_err();
        assert!(
            retyped.contains("registered pass `a` (interface `j/1`), but its manifest declares it (untyped)"),
            "{retyped}"
        );
    }

    /// The passes registered exactly as declared, in order (the comparison's path without
    /// allocation), pass; the name, version and ABI version are still compared, and a list
    /// that only begins or ends like the declared one is still judged in full.
    #[test]
    fn passes_registered_exactly_as_declared_still_have_the_rest_compared() {
        let complete = manifest(true);
        let exact = [("a", None), ("b", Some("i/1"))];
        assert_eq!(compare(&complete, "p", &exact), Ok(()));
        assert!(
            compare(&complete, "q", &exact)
                .unwrap_err()
                .contains("names itself `q`")
        );
        let origin = Origin::Named("p".into());
        let other_version = complete.compare(&origin, (Some(2), "p", "2"), exact.iter().copied());
        assert!(other_version.unwrap_err().to_string().contains("gives version `2`"));
        let other_abi = complete.compare(&origin, (Some(1), "p", "1"), exact.iter().copied());
        assert!(other_abi.unwrap_err().to_string().contains("ABI version 1"));
        // A Python plugin has no descriptor ABI version: nothing to compare.
        assert!(
            complete
                .compare(&origin, (None, "p", "1"), exact.iter().copied())
                .is_ok()
        );
        let prefix = compare(&complete, "p", &exact[..1]).unwrap_err();
        assert!(prefix.contains("did not register the declared pass `b`"), "{prefix}");
        let longer = compare(&complete, "p", &[exact[0], exact[1], ("c", None)]).unwrap_err();
        assert!(longer.contains("registered pass `c`"), "{longer}");
        let suffix = compare(&complete, "p", &exact[1..]).unwrap_err();
        assert!(suffix.contains("did not register the declared pass `a`"), "{suffix}");
        // As many passes, each differing in name only, or in interface only.
        let renamed = compare(&complete, "p", &[("x", None), ("y", Some("i/1"))]).unwrap_err();
        assert!(renamed.contains("did not register the declared pass `a`"), "{renamed}");
        let retyped = compare(&complete, "p", &[("a", Some("j/1")), ("b", None)]).unwrap_err();
        assert!(retyped.contains("registered pass `a` (interface `j/1`)"), "{retyped}");
    }

    /// A pass declared under an interface but registered untyped is a difference, complete
    /// manifest or not, named with both (declared `i/1`, registered untyped): an untyped
    /// registration does not match a typed declaration by its name alone.
    #[test]
    fn a_pass_declared_typed_but_registered_untyped_is_refused_naming_both() {
        for complete in [true, false] {
            let retyped = compare(&manifest(complete), "p", &[("a", None), ("b", None)]).unwrap_err();
            assert!(
                retyped.contains("registered pass `b` (untyped), but its manifest declares it (interface `i/1`)"),
                "complete {complete}: {retyped}"
            );
        }
    }

    #[test]
    fn an_incomplete_manifest_allows_other_passes_but_not_another_name_abi_or_interface() {
        let incomplete = manifest(false);
        assert_eq!(compare(&incomplete, "p", &[("z", None)]), Ok(()));
        let renamed = compare(&incomplete, "q", &[]).unwrap_err();
        assert!(renamed.contains("it names itself `q`, its manifest `p`"), "{renamed}");
        // A declared pass it does register must have the declared interface.
        let retyped = compare(&incomplete, "p", &[("b", Some("j/1"))]).unwrap_err();
        assert!(retyped.contains("registered pass `b` (interface `j/1`)"), "{retyped}");
        // The descriptor's ABI version must be the manifest's.
        let origin = Origin::Named("p".into());
        let abi = incomplete
            .compare(&origin, (Some(1), "p", "1"), std::iter::empty())
            .unwrap_err();
        assert!(
            abi.to_string()
                .contains("its descriptor says ABI version 1, its manifest 2"),
            "{abi}"
        );
    }
}
