//! The manifest the header's macros write: read from the file with
//! `dylease_elf::Elf::manifest`, it names the passes the plugin then registers when a host
//! loads it, and stays readable once the file is stripped or has lost its section headers.

use std::path::Path;
use std::process::Command;

use dylease::PluginHost;
use dylease_elf::{Elf, Manifest};

use crate::rust_plugin::{build, built_rust_plugins};
use crate::support::{TestDir, fixture};

/// The manifest of the library at `path`, which must have one.
fn manifest_of(path: &Path) -> Manifest {
    let bytes = std::fs::read(path).unwrap();
    Elf::new(&bytes[..], bytes.len() as u64)
        .manifest()
        .unwrap_or_else(|refusal| panic!("{}: {refusal}", path.display()))
        .unwrap_or_else(|| panic!("{}: no manifest", path.display()))
}

/// A manifest's passes, as (name, interface), sorted by name.
fn declared(manifest: &Manifest) -> Vec<(String, Option<String>)> {
    let mut passes: Vec<_> = manifest
        .passes
        .iter()
        .map(|p| (p.name.clone(), p.interface.clone()))
        .collect();
    passes.sort();
    passes
}

/// Loads the fixture `name` (a copy of it) and returns its name, version and registered
/// passes, as (name, interface), sorted by name.
fn registered(name: &str) -> (String, String, Vec<(String, Option<String>)>) {
    registered_from(&fixture(name), name)
}

/// Loads a copy of the library at `path` (in a directory named after `name`) and returns its
/// name, version and registered passes, as (name, interface), sorted by name.
fn registered_from(path: &Path, name: &str) -> (String, String, Vec<(String, Option<String>)>) {
    let dir = TestDir::new(&format!("manifest-{name}"));
    let lib = dir.path().join(format!("lib{name}.so"));
    std::fs::copy(path, &lib).unwrap();
    // SAFETY: the libraries are this suite's own fixtures, whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&lib).build() }.unwrap();
    let lease = host.acquire().unwrap();
    let plugin = &lease.plugins()[0];
    let mut passes: Vec<_> = lease
        .passes()
        .iter()
        .map(|p| (p.name().to_owned(), p.interface().map(str::to_owned)))
        .collect();
    passes.sort();
    (plugin.name().to_owned(), plugin.version().to_owned(), passes)
}

/// The manifest of `path` once stripped with `strip --strip-all`, and once its section
/// header table is gone (e_shoff, e_shnum and e_shstrndx zeroed).
fn stripped_and_headless(dir: &TestDir, path: &Path) -> [Manifest; 2] {
    let stripped = dir.path().join("stripped.so");
    let status = Command::new("strip")
        .arg("--strip-all")
        .arg(path)
        .arg("-o")
        .arg(&stripped)
        .status()
        .expect("cannot run strip");
    assert!(status.success());
    let mut bytes = std::fs::read(path).unwrap();
    // A 64-bit ELF header: e_shoff at 40, e_shnum at 60, e_shstrndx at 62.
    assert_eq!(bytes[4], 2, "a 64-bit library");
    bytes[40..48].fill(0);
    bytes[60..64].fill(0);
    let headless = dir.path().join("headless.so");
    std::fs::write(&headless, &bytes).unwrap();
    [manifest_of(&stripped), manifest_of(&headless)]
}

/// Every plugin built with the macros carries a complete manifest naming the passes it
/// registers, with their interfaces; stripping the file or dropping its section headers
/// leaves the manifest as it was.
#[test]
fn the_macros_manifest_names_the_passes_the_plugin_registers() {
    let mut names: Vec<String> = ["c", "cpp"]
        .iter()
        .flat_map(|lang| ["plain", "unload", "hooks"].map(|variant| format!("macros_{lang}_{variant}")))
        .collect();
    names.extend(["typed".into(), "arith".into(), "typed_ab".into()]);
    for name in &names {
        let path = fixture(name);
        let manifest = manifest_of(&path);
        let (plugin, version, passes) = registered(name);
        assert_eq!(
            (manifest.format, manifest.abi_version),
            (1, 2),
            "{name}: format and ABI version"
        );
        assert_eq!((&manifest.name, &manifest.version), (&plugin, &version), "{name}");
        assert!(manifest.complete, "{name}: the macros declare every pass");
        assert!(!passes.is_empty(), "{name}");
        assert_eq!(declared(&manifest), passes, "{name}");

        let dir = TestDir::new(&format!("manifest-strip-{name}"));
        for (how, other) in ["stripped", "headless"].iter().zip(stripped_and_headless(&dir, &path)) {
            assert_eq!(other, manifest, "{name} {how}");
        }
    }
}

/// A plugin that registers its passes by hand and writes its plugin record with
/// DYLEASE_MANIFEST: a manifest that says its pass list is not complete, and lists none.
#[test]
fn a_plugin_registering_by_hand_has_an_incomplete_manifest() {
    let manifest = manifest_of(&fixture("by_hand_manifest"));
    let (plugin, version, passes) = registered("by_hand_manifest");
    assert_eq!((&manifest.name, &manifest.version), (&plugin, &version));
    assert!(!manifest.complete);
    assert!(manifest.passes.is_empty());
    assert!(!passes.is_empty(), "it registers passes the manifest does not list");
    // Without the macro: no manifest at all.
    let bytes = std::fs::read(fixture("by_hand")).unwrap();
    assert_eq!(Elf::new(&bytes[..], bytes.len() as u64).manifest(), Ok(None));
}

/// The Rust plugin that declares its passes in `export_plugin!` (`examples/plugins/folding.rs`)
/// carries a complete manifest naming the passes it registers, with their interfaces, its
/// name, version and ABI version; stripping the file or dropping its section headers leaves
/// the manifest as it was.
#[test]
fn a_rust_plugin_declaring_its_passes_has_a_complete_manifest() {
    let path = built_rust_plugins().join(build::library_name());
    let manifest = manifest_of(&path);
    let (plugin, version, passes) = registered_from(&path, "folding");
    assert_eq!((manifest.format, manifest.abi_version), (1, 2));
    assert_eq!(
        (manifest.name.as_str(), manifest.version.as_str()),
        ("folding", "0.1.0")
    );
    assert_eq!((&manifest.name, &manifest.version), (&plugin, &version));
    assert!(manifest.complete, "the declared form lists every pass");
    assert_eq!(
        passes,
        [("fold_constants".to_owned(), Some("demo.graph_pass/1".to_owned()))]
    );
    assert_eq!(declared(&manifest), passes);

    let dir = TestDir::new("manifest-strip-folding");
    for (how, other) in ["stripped", "headless"].iter().zip(stripped_and_headless(&dir, &path)) {
        assert_eq!(other, manifest, "{how}");
    }
}

/// The Rust plugins written in `export_plugin!`'s closure form (`no_device.rs`,
/// `panicking.rs`) carry a manifest that names them but lists no pass and is not complete:
/// their `register` may register anything.
#[test]
fn a_rust_plugin_registering_in_a_closure_has_an_incomplete_manifest() {
    for (file, name) in [("no_device", "npu"), ("panicking", "fragile")] {
        let path = built_rust_plugins().join(format!("examples/lib{file}.so"));
        let manifest = manifest_of(&path);
        assert_eq!((manifest.format, manifest.abi_version), (1, 2), "{file}");
        assert_eq!(
            (manifest.name.as_str(), manifest.version.as_str()),
            (name, "0.1.0"),
            "{file}"
        );
        assert!(!manifest.complete, "{file}");
        assert!(manifest.passes.is_empty(), "{file}");
    }
}
