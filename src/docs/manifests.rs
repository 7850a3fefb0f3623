//! Plugin manifests and [`PluginHost::catalog`](crate::PluginHost::catalog): what a plugin is,
//! read from its file without running any of its code.
//!
//! A plugin's file says what the plugin is — its plugin ABI version, name, version and every
//! pass it declares with its interface — in a *manifest* that a host reads without running
//! any of the plugin's code, as Qt's `QPluginLoader::metaData()` reads a plugin's
//! `.qtmetadata` section without loading it. The manifest is written at compile time, never
//! by running code.
//!
//! # Who writes it
//!
//! - **C and C++**: the header's macros. `DYLEASE_PLUGIN*` writes the plugin record (the ABI
//!   version, name and version) and each `DYLEASE_PASS` / `DYLEASE_TYPED_PASS` a pass record
//!   (name, interface), as ELF notes of owner `dylease` in a section `.note.dylease`, which
//!   the linker puts into a `PT_NOTE` segment; the pass list is **complete**. A plugin that
//!   fills its descriptor by hand writes `DYLEASE_MANIFEST(name, version)`: an incomplete
//!   list.
//! - **Rust**: [`export_plugin!`](crate::export_plugin) with its passes declared in the macro
//!   call (`passes: [...]`) writes a complete manifest as constant data, the same notes; the
//!   `register:` closure form writes an incomplete one, naming no pass: the closure may
//!   register anything ([`writing_plugins`](super::writing_plugins#in-rust)).
//! - **Python**: read from the module's syntax tree (`ast`, nothing executed): the
//!   module-level `dylease.plugin(...)` and `@dylease.typed_pass(...)` decorators, under the
//!   names the module imports them as; anything the reader cannot see statically makes the
//!   list incomplete ([`python`](super::python) has the rules).
//!
//! Only a complete manifest lets an [on-demand](super::on_demand) set hold the plugin
//! unmapped, since only then does the file say every pass the plugin will register.
//!
//! `strip --strip-all` keeps the notes, and a file whose section headers are gone still has
//! them (they are read through the program headers, as the loader reads the file); a link step
//! that drops `.note*` sections (a linker script, `objcopy --remove-section`) leaves no
//! manifest. `readelf -n plugin.so` shows the notes. Reading the file,
//! [`dylease_elf::Elf::manifest`] returns the merged [`dylease_elf::Manifest`]; the format is
//! defined in [`dylease_elf::manifest`].
//!
//! # What a host does with it
//!
//! - **Before mapping the file** it reads the manifest from the descriptor its checks already
//!   read (no open and no read of its own: `dylease-elf`'s test
//!   `the_manifest_costs_no_read_of_its_own_after_the_checks`; its cost in the cold cycle is
//!   in `benches/compare.rs`, group `manifest`). A plugin ABI version it does not speak is
//!   refused there ([`Error::AbiMismatch`](crate::Error::AbiMismatch) with `declared: true`),
//!   as is a corrupt manifest or one of an unknown format version
//!   ([`Error::Open`](crate::Error::Open) with [`OpenCause::Manifest`](crate::OpenCause::Manifest)),
//!   naming the file, both versions and the fix: *none of the plugin's code runs*, not even
//!   its constructors. A plugin without a manifest loads as before: it is judged by its
//!   descriptor, which the loader maps first, so its constructors (and its dependencies') have
//!   run by the time its descriptor's ABI version can be refused.
//! - **After `register_passes`** the descriptor's name and version must be the manifest's,
//!   and a complete manifest's passes exactly the registered ones (name and interface); a
//!   difference fails the load ([`Error::ManifestMismatch`](crate::Error::ManifestMismatch)
//!   names each difference).
//! - **[`PluginHost::catalog()`](crate::PluginHost::catalog)** lists every plugin the host
//!   would load — manifest, trust and ELF verdicts, ABI gate, pin prediction — without
//!   running plugin code or taking a lease ([below](#the-catalog)).
//! - **`dylease inspect FILE|DIR [--json]`** prints the same for an operator vetting a plugin
//!   they were sent, without running it (`dylease check` loads, and so runs, what it checks);
//!   **`dylease install`** prints the manifest and pin prediction of what it installs and
//!   refuses a plugin whose declared passes collide with another plugin of the target
//!   directory ([`cli`](super::cli)).
//!
//! # The catalog
//!
//! Each [`CatalogEntry`](crate::CatalogEntry) has a [`refusal()`](crate::CatalogEntry::refusal)
//! and a [`manifest()`](crate::CatalogEntry::manifest), and both must be read: an entry
//! without a manifest may be a plugin built without one, or a file (or directory) refused
//! before its manifest could be read. In particular, **`catalog()` of a directory that does
//! not exist returns `Ok`, with one entry: the directory, refused** (an
//! [`Error::Io`](crate::Error::Io) naming it). Printing only the manifest would show it as
//! "no manifest". `catalog()` itself fails only where a load would fail before judging any
//! plugin ([`Error::Config`](crate::Error::Config): an unusable environment variable source).
//!
//! ```
//! // SAFETY: catalog runs none of the plugins' code (a later `acquire` would); this
//! // directory holds our own plugins.
//! let host = unsafe { dylease::PluginHost::builder().dir("/nonexistent/compiler/passes") }.build()?;
//! let catalog = host.catalog()?; // Ok: the missing directory is an entry, refused
//! for plugin in &catalog {
//!     match (plugin.refusal(), plugin.manifest()) {
//!         (Some(refusal), _) => println!("{}: refused: {refusal}", plugin.origin()),
//!         (None, Some(m)) => println!("{} {}: {} passes", m.name(), m.version(), m.passes().len()),
//!         (None, None) => println!("{}: no manifest (load it, or `dylease check` it, to know more)", plugin.origin()),
//!     }
//! }
//! assert_eq!(catalog.len(), 1);
//! assert!(matches!(catalog[0].refusal(), Some(dylease::Error::Io { .. })));
//! assert!(catalog[0].manifest().is_none());
//! # Ok::<(), dylease::Error>(())
//! ```
//!
//! # Versions
//!
//! The manifest's format has its own version (1); the plugin ABI version changes only when
//! the descriptor does, so a host of ABI 2 loads a newer plugin of ABI 2 that carries a
//! manifest. The format version changes only for a layout an older reader would misread: the
//! reader ignores flag bits it does not know, bytes past the last field of a record, and notes
//! of other types, so fields are added without a new version. A host refuses a manifest of a
//! format version it does not read (naming both versions), as it refuses an ABI version it
//! does not speak.
