//! The manifest the header's macros write: read from the file with
//! `dylease_elf::Elf::manifest`, it names the passes the plugin then registers when a host
//! loads it, and stays readable once the file is stripped or has lost its section headers.

use std::path::Path;
use std::process::Command;

use dylease::{Error, LoadPolicy, OpenCause, PluginHost};
use dylease_elf::{Elf, Manifest};

use crate::rust_plugin::{build, built_rust_plugins};
use crate::support::{TestDir, assert_unloaded, beside, fixture, mapped, strip_manifest};

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

/// Whether the constructor of a `by_hand_marker*` copy at `lib` ran (it creates
/// `<lib>.ran`).
fn ran(lib: &std::path::Path) -> bool {
    beside(lib, ".ran").exists()
}

/// A plugin whose manifest declares an ABI version the host does not speak is refused before
/// the file is mapped: its constructor never ran. Without a manifest, the same refusal comes
/// from the descriptor, after the loader ran the constructor (the documented difference).
#[test]
fn a_plugin_declaring_an_abi_the_host_does_not_speak_is_refused_before_any_of_its_code_runs() {
    let dir = TestDir::new("manifest-future-abi");
    let lib = dir.add("by_hand_marker_future_abi", "libfuture.so");
    // SAFETY: the suite's own fixture, whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&lib).build() }.unwrap();
    let error = host.acquire().unwrap_err();
    assert!(
        matches!(
            error,
            Error::AbiMismatch {
                found: 3,
                expected: 2,
                declared: true,
                ..
            }
        ),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains(&lib.display().to_string())
            && message.contains("ABI version 3 (its manifest says so; none of its code ran)")
            && message.contains("versions 1 and 2"),
        "{message}"
    );
    assert!(!ran(&lib), "the plugin's constructor ran");
    assert_unloaded(&lib);

    // Without its manifest: refused by its descriptor, once its constructor ran.
    strip_manifest(&lib);
    let error = host.acquire().unwrap_err();
    assert!(
        matches!(
            error,
            Error::AbiMismatch {
                found: 3,
                declared: false,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        ran(&lib),
        "without a manifest the descriptor is read from the mapped file"
    );
}

/// A manifest of a format version the host does not read is refused, naming the file and
/// both versions, before any of the plugin's code runs.
#[test]
fn a_manifest_of_an_unknown_format_is_refused_before_any_of_its_code_runs() {
    let dir = TestDir::new("manifest-format");
    let lib = dir.add("by_hand_marker_manifest", "libformat.so");
    let mut bytes = std::fs::read(&lib).unwrap();
    // The plugin record: the owner "dylease\0", then its descriptor's first field, the
    // format version (1, little-endian on the platforms the suite runs on).
    let record: Vec<u8> = [&b"dylease\0"[..], &1u32.to_ne_bytes()].concat();
    let at = bytes
        .windows(record.len())
        .position(|w| w == record)
        .expect("a plugin record");
    bytes[at + 8..at + 12].copy_from_slice(&7u32.to_ne_bytes());
    std::fs::write(&lib, &bytes).unwrap();
    // SAFETY: the suite's own fixture, whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&lib).build() }.unwrap();
    let error = host.acquire().unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(
            error,
            Error::Open {
                cause: OpenCause::Manifest,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        message.contains(&lib.display().to_string())
            && message.contains("has format version 7, but this reader knows only version 1"),
        "{message}"
    );
    assert!(!ran(&lib), "the plugin's constructor ran");
}

/// A plugin whose manifest cannot be read (a format version this host does not read) is
/// described by `catalog()` with that refusal and with the pin prediction of its file, which
/// was read: a `-z nodelete` library is expected to stay mapped. None of its code runs.
#[test]
fn the_catalog_describes_a_plugin_whose_manifest_it_refuses_with_its_pin_prediction() {
    let dir = TestDir::new("manifest-catalog-refused");
    let lib = dir.add("by_hand_marker_manifest_nodelete", "libpinned.so");
    let mut bytes = std::fs::read(&lib).unwrap();
    // The plugin record's format version (see the test above) made 7.
    let record: Vec<u8> = [&b"dylease\0"[..], &1u32.to_ne_bytes()].concat();
    let at = bytes
        .windows(record.len())
        .position(|w| w == record)
        .expect("a plugin record");
    bytes[at + 8..at + 12].copy_from_slice(&7u32.to_ne_bytes());
    std::fs::write(&lib, &bytes).unwrap();
    // SAFETY: the catalog maps nothing.
    let host = unsafe { PluginHost::builder().file(&lib).build() }.unwrap();
    let catalog = host.catalog().unwrap();
    assert!(
        matches!(
            catalog[0].refusal(),
            Some(Error::Open {
                cause: OpenCause::Manifest,
                ..
            })
        ),
        "{:?}",
        catalog[0].refusal()
    );
    assert!(catalog[0].manifest().is_none());
    assert!(catalog[0].pinning().expected(), "{:?}", catalog[0].pinning());
    assert!(!ran(&lib) && !mapped(&lib), "the catalog ran or mapped the plugin");
}

/// A complete manifest declaring a pass the plugin never registers fails the load, naming
/// the pass; the plugin is unloaded.
#[test]
fn a_manifest_declaring_a_pass_the_plugin_does_not_register_fails_the_load_naming_it() {
    let dir = TestDir::new("manifest-ghost");
    let lib = dir.add("by_hand_ghost_manifest", "libghost.so");
    // SAFETY: the suite's own fixture, whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&lib).build() }.unwrap();
    let error = host.acquire().unwrap_err();
    assert!(matches!(error, Error::ManifestMismatch { .. }), "{error:?}");
    let message = error.to_string();
    assert!(
        message.contains(&lib.display().to_string())
            && message.contains("it did not register the declared pass `ghost` (untyped)"),
        "{message}"
    );
    assert_unloaded(&lib);
}

/// A complete manifest declaring a pass under an interface (`seven`, `test.int_op/1`) that
/// the plugin registers untyped fails the load, naming the pass, both interfaces and the
/// file; an on-demand set, which lists the pass under the declared interface, refuses its
/// first use, so that the untyped function is never handed out as typed.
#[test]
fn a_pass_declared_typed_but_registered_untyped_fails_the_load_naming_both() {
    let dir = TestDir::new("manifest-retyped");
    let lib = dir.add("by_hand_retyped_manifest", "libretyped.so");
    let difference = "it registered pass `seven` (untyped), but its manifest declares it (interface `test.int_op/1`)";
    // SAFETY: the suite's own fixture, whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&lib).build() }.unwrap();
    let error = host.acquire().unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(&error, Error::ManifestMismatch { .. })
            && message.contains(&lib.display().to_string())
            && message.contains(difference),
        "{error:?}"
    );
    assert_unloaded(&lib);

    // SAFETY: as above.
    let on_demand = unsafe { PluginHost::builder().file(&lib) }.on_demand().build().unwrap();
    let lease = on_demand.acquire().unwrap();
    let error = lease
        .get::<crate::on_demand::IntOp>("seven")
        .map(drop)
        .expect_err("an untyped pass was handed out as `test.int_op/1`");
    let Error::MapFailed { cause, .. } = &error else {
        panic!("{error:?}")
    };
    assert!(
        matches!(&**cause, Error::ManifestMismatch { .. }) && cause.to_string().contains(difference),
        "{cause:?}"
    );
    drop(lease);
    assert_unloaded(&lib);
}

/// `catalog()` describes every plugin of a directory from its file alone: the manifest of
/// one that has one, the trust refusal of a file others can write, the ABI refusal of a
/// later plugin, the pin prediction of a `-z nodelete` library. No constructor ran; loading
/// the same directory then runs them (the markers work).
#[test]
fn the_catalog_describes_every_plugin_without_running_any_of_their_code() {
    let dir = TestDir::new("manifest-catalog");
    let with = dir.add("by_hand_marker_manifest", "liba_with.so");
    let without = dir.add("by_hand_marker", "libb_without.so");
    let future = dir.add("by_hand_marker_future_abi", "libc_future.so");
    let pinned = dir.add("ctor_nodelete", "libd_pinned.so");
    let open = dir.add("by_hand_marker", "libe_open.so");
    std::fs::set_permissions(&open, std::os::unix::fs::PermissionsExt::from_mode(0o757)).unwrap();
    // SAFETY: the suite's own fixtures, whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(dir.path()) }
        .policy(LoadPolicy::SkipFailed)
        .build()
        .unwrap();
    let catalog = host.catalog().unwrap();
    let files: Vec<_> = catalog.iter().map(|e| e.origin().path().unwrap().to_owned()).collect();
    assert_eq!(
        files,
        [&with, &without, &future, &pinned, &open].map(std::path::PathBuf::clone)
    );

    let manifest = catalog[0].manifest().expect("a manifest");
    assert_eq!((manifest.name(), manifest.version()), ("by-hand", "1"));
    assert_eq!((manifest.abi_version(), manifest.is_complete()), (Some(2), false));
    assert!(catalog[0].refusal().is_none() && catalog[1].refusal().is_none());
    assert!(catalog[1].manifest().is_none());
    assert!(
        matches!(
            catalog[2].refusal(),
            Some(Error::AbiMismatch {
                found: 3,
                declared: true,
                ..
            })
        ),
        "{:?}",
        catalog[2].refusal()
    );
    assert_eq!(catalog[2].manifest().and_then(|m| m.abi_version()), Some(3));
    assert!(catalog[3].pinning().expected() && !catalog[0].pinning().expected());
    assert!(
        matches!(catalog[4].refusal(), Some(Error::Untrusted { .. })),
        "{:?}",
        catalog[4].refusal()
    );
    for lib in [&with, &without, &future, &open] {
        assert!(!ran(lib), "{}: its constructor ran", lib.display());
    }
    assert!(!mapped(&pinned), "the catalog mapped a library");
    assert!(!host.is_loaded());

    // Loading runs what the catalog did not (the markers work): the trusted ones ran.
    let lease = host.acquire().unwrap();
    assert!(ran(&with) && ran(&without));
    assert!(!ran(&future) && !ran(&open), "refused before any of their code ran");
    drop(lease);
}

/// A 64-bit big-endian ELF shared object for s390x (ELF machine 22) whose only program header
/// is a PT_NOTE segment holding a complete manifest: plugin `name` `version` of ABI version 2,
/// and `passes` (name, interface). Built byte by byte, as the format of `dylease_elf::manifest`
/// lays it out: what a plugin cross-built for s390x carries, without a cross compiler.
fn big_endian_plugin(name: &str, version: &str, passes: &[(&str, &str)]) -> Vec<u8> {
    let string = |text: &str| {
        let mut bytes = ((text.len() + 1) as u32).to_be_bytes().to_vec();
        bytes.extend_from_slice(text.as_bytes());
        bytes.push(0);
        bytes.resize(4 + (text.len() + 1).next_multiple_of(4), 0);
        bytes
    };
    let note = |kind: u32, desc: Vec<u8>| {
        let mut bytes = [8, desc.len() as u32, kind].map(u32::to_be_bytes).concat();
        bytes.extend_from_slice(b"dylease\0");
        bytes.extend_from_slice(&desc);
        bytes
    };
    let mut plugin = [1u32, 2, 1].map(u32::to_be_bytes).concat();
    plugin.extend(string(name));
    plugin.extend(string(version));
    let mut notes = note(1, plugin);
    for (pass, interface) in passes {
        let mut desc = 0u32.to_be_bytes().to_vec();
        desc.extend(string(pass));
        desc.extend(string(interface));
        notes.extend(note(2, desc));
    }
    let mut bytes = vec![0u8; 64];
    bytes[..7].copy_from_slice(b"\x7fELF\x02\x02\x01");
    bytes[16..18].copy_from_slice(&3u16.to_be_bytes());
    bytes[18..20].copy_from_slice(&22u16.to_be_bytes());
    bytes[20..24].copy_from_slice(&1u32.to_be_bytes());
    bytes[32..40].copy_from_slice(&64u64.to_be_bytes());
    bytes[52..54].copy_from_slice(&64u16.to_be_bytes());
    bytes[54..56].copy_from_slice(&56u16.to_be_bytes());
    bytes[56..58].copy_from_slice(&1u16.to_be_bytes());
    let at = 64 + 56u64;
    let size = notes.len() as u64;
    let header = [
        &4u32.to_be_bytes()[..],
        &4u32.to_be_bytes(),
        &at.to_be_bytes(),
        &at.to_be_bytes(),
        &at.to_be_bytes(),
        &size.to_be_bytes(),
        &size.to_be_bytes(),
        &4u64.to_be_bytes(),
    ]
    .concat();
    bytes.extend(header);
    bytes.extend(notes);
    bytes
}

/// A plugin cross-built for a big-endian machine (s390x) is described by `catalog()`: its
/// manifest, read in the file's byte order, and the reason this host cannot load it, naming
/// both byte orders and the file's machine; a load refuses it for that reason. Caught: the
/// manifest read little-endian whatever the file (it is refused as corrupt), or read only for
/// files the ELF check passes (the catalog shows none).
#[test]
#[cfg(target_endian = "little")]
fn the_catalog_describes_a_plugin_built_for_a_big_endian_machine_and_why_this_host_cannot_load_it() {
    let dir = TestDir::new("manifest-big-endian");
    let lib = dir.path().join("libcross.so");
    let passes = [("fold", "demo.graph_pass/1"), ("plain", "")];
    std::fs::write(&lib, big_endian_plugin("cross", "2.0", &passes)).unwrap();
    std::fs::set_permissions(&lib, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // SAFETY: the catalog maps nothing; the load is refused before the file is mapped.
    let host = unsafe { PluginHost::builder().file(&lib) }.build().unwrap();
    let catalog = host.catalog().unwrap();
    let manifest = catalog[0].manifest().expect("the manifest of a big-endian plugin");
    assert_eq!(
        (
            manifest.name(),
            manifest.version(),
            manifest.abi_version(),
            manifest.is_complete()
        ),
        ("cross", "2.0", Some(2), true)
    );
    let declared: Vec<_> = manifest
        .passes()
        .iter()
        .map(|p| (p.name.as_str(), p.interface.as_deref()))
        .collect();
    assert_eq!(declared, [("fold", Some("demo.graph_pass/1")), ("plain", None)]);
    let why = "it is built for a big-endian machine (s390x, ELF machine 22), but this process runs on a \
               little-endian one";
    let refusal = catalog[0].refusal().expect("a refusal");
    assert!(
        matches!(refusal, Error::Open { path, cause: OpenCause::Headers, .. } if path == &lib)
            && refusal.to_string().contains(why),
        "{refusal:?}"
    );
    let error = host.acquire().map(drop).unwrap_err();
    assert_eq!(error.to_string(), refusal.to_string());
    assert!(!mapped(&lib));
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

/// A seeded xorshift64* generator: the same cases on every run (the generator of the ELF
/// crate's mutation tests, whose mutated manifests are files built in memory, private to that
/// crate's tests).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// The bytes of the dylease notes of a 64-bit little-endian library that the header's macros
/// built: from the first note of owner `dylease` to the end of the last (this test's own
/// reading of the note format).
fn dylease_notes(bytes: &[u8]) -> std::ops::Range<usize> {
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    let owners: Vec<usize> = (12..bytes.len() - 8)
        .filter(|&at| &bytes[at..at + 8] == b"dylease\0" && u32_at(at - 12) == 8)
        .collect();
    let (first, last) = (owners[0], *owners.last().unwrap());
    let end = last + 8 + (u32_at(last - 8) as usize).next_multiple_of(4);
    first - 12..end
}

/// `original` with one to three mutations inside `notes`: a bit flipped, a byte set, or a
/// 4-byte field written with a value worth trying (the ELF crate's mutation test's kinds).
fn mutate_notes(rng: &mut Rng, original: &[u8], notes: &std::ops::Range<usize>) -> (Vec<u8>, String) {
    let mut bytes = original.to_vec();
    let mut what = Vec::new();
    for _ in 0..1 + rng.below(3) {
        let at = notes.start + rng.below(notes.len());
        match rng.below(3) {
            0 => {
                bytes[at] ^= 1 << rng.below(8);
                what.push(format!("flip a bit at {at}"));
            }
            1 => {
                bytes[at] = rng.next() as u8;
                what.push(format!("set byte {at}"));
            }
            _ => {
                let at = (at & !3).max(notes.start).min(notes.end - 4);
                let values = [
                    0,
                    1,
                    2,
                    3,
                    8,
                    99,
                    0xffff,
                    u32::MAX,
                    notes.len() as u32,
                    rng.next() as u32,
                ];
                let value = values[rng.below(values.len())];
                bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
                what.push(format!("write {value:#x} at {at}"));
            }
        }
    }
    (bytes, what.join(", "))
}

/// Whether `error` is a refusal a load makes before running any of the plugin's code (the
/// trust check, the ELF check, the manifest's reading and its ABI gate).
fn before_code(error: &Error) -> bool {
    matches!(
        error,
        Error::Untrusted { .. }
            | Error::Open {
                cause: OpenCause::Headers | OpenCause::Manifest,
                ..
            }
            | Error::AbiMismatch { declared: true, .. }
    )
}

/// Whether the constructor of the `demand.c` plugin at `lib` ran (it logs itself).
fn constructed(lib: &Path) -> bool {
    std::fs::read_to_string(beside(lib, ".log")).is_ok_and(|log| log.lines().any(|l| l == "constructor"))
}

/// Runs `f`, failing the test, naming `case`, if it panics.
fn no_panic<R>(case: &str, f: impl FnOnce() -> R) -> R {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| panic!("{case}: panicked"))
}

/// Mutated manifests of a real plugin (`demand.c`, a complete manifest of a plugin record and
/// three passes), each through `catalog()`, an eager `acquire()` and an on-demand `acquire()`
/// with the first use of a listed pass: never a panic; never a constructor before a refusal
/// (a load refused before its code runs leaves no constructor in the plugin's log, and a load
/// that succeeds or fails later shows it, so the log works); and the catalog's refusal is the
/// eager load's refusal before code, word for word, or neither refuses. Caught: a refusal
/// after the constructor of what the manifest should have refused before it (the ABI gate
/// after the mapping, say), and a catalog that judges otherwise than a load.
#[test]
fn mutated_manifests_never_panic_and_never_run_a_constructor_before_a_refusal() {
    let original = std::fs::read(crate::support::fixture("demand_fuzzed")).unwrap();
    let notes = dylease_notes(&original);
    let dir = TestDir::new("manifest-mutations");
    let (eager_dir, demand_dir) = (dir.sub("eager"), dir.sub("on_demand"));
    let mut rng = Rng(0x5eed_d11e_a5e0_0005);
    let (mut before, mut after, mut loaded) = (0, 0, 0);
    for n in 0..300 {
        let (bytes, what) = mutate_notes(&mut rng, &original, &notes);
        let case = format!("case {n} ({what})");
        let write = |dir: &Path| {
            let lib = dir.join(format!("libfuzzed{n}.so"));
            std::fs::write(&lib, &bytes).unwrap();
            std::fs::set_permissions(&lib, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
            lib
        };
        let (lib, demand) = (write(&eager_dir), write(&demand_dir));

        // SAFETY: mutations of this suite's own fixture, inside its manifest notes only
        // (which the loader does not read): its initialisation code is the fixture's.
        let host = unsafe { PluginHost::builder().file(&lib).build() }.unwrap();
        let catalog = no_panic(&case, || host.catalog()).unwrap();
        assert!(!constructed(&lib), "{case}: the catalog ran the constructor");
        let predicted = catalog[0].refusal().map(ToString::to_string);
        let outcome = no_panic(&case, || host.acquire().map(drop));
        let refused = match &outcome {
            Err(error) if before_code(error) => {
                before += 1;
                assert!(!constructed(&lib), "{case}: the constructor ran before {error}");
                Some(error.to_string())
            }
            Err(error) => {
                after += 1;
                assert!(constructed(&lib), "{case}: {error}, and no constructor logged");
                None
            }
            Ok(()) => {
                loaded += 1;
                assert!(constructed(&lib), "{case}: loaded, and no constructor logged");
                None
            }
        };
        assert_eq!(predicted, refused, "{case}: the catalog and the load disagree");
        drop(host);
        assert_unloaded(&lib);

        // SAFETY: as above.
        let host = unsafe { PluginHost::builder().file(&demand) }
            .on_demand()
            .build()
            .unwrap();
        match no_panic(&case, || host.acquire()) {
            Err(error) => {
                assert!(before_code(&error), "{case}: on demand, {error:?}");
                assert!(!constructed(&demand), "{case}: the constructor ran before {error}");
            }
            Ok(lease) => {
                let mapped = lease.plugins()[0].is_mapped();
                assert_eq!(constructed(&demand), mapped, "{case}: mapped {mapped}");
                let first = lease.passes().first().map(|pass| pass.name().to_owned());
                if let Some(name) = first.filter(|_| !mapped) {
                    let used = no_panic(&case, || {
                        // SAFETY: looked up (which maps the plugin), not called.
                        let pass = unsafe { lease.pass::<unsafe extern "C" fn()>(&name) };
                        pass.map(drop)
                    });
                    match used {
                        Err(Error::MapFailed { cause, .. }) if before_code(&cause) => {
                            assert!(!constructed(&demand), "{case}: the constructor ran before {cause}");
                        }
                        _ => {}
                    }
                }
                drop(lease);
            }
        }
        drop(host);
        assert_unloaded(&demand);
    }
    assert!(
        before > 30 && after + loaded > 30,
        "{before} refused before their code, {after} after, {loaded} loaded: the mutations do not reach both sides"
    );
}
