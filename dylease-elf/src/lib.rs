//! The ELF side of dylease: what a host learns from a shared library's file before the
//! loader maps it, by reading bytes only (no code of the library runs; this crate has no
//! `unsafe`).
//!
//! - [`Elf::check`]: the header check (magic bytes, class, byte order, type, machine, every
//!   loadable segment inside the file) and the structural check of what the loader
//!   dereferences while it maps and links the file (program headers, the dynamic section and
//!   the tables it points to). A file glibc would crash on inside `dlopen` (a truncated
//!   library, a corrupt table) is refused with a [`Refusal`] that says why.
//! - [`Elf::linkage`]: what the library makes the loader look up ([`Linkage`]: DT_NEEDED,
//!   the run paths, DT_SONAME, filtees and audit libraries), checking only what that takes.
//! - [`Elf::pins`]: what makes glibc keep the library mapped after its last `dlclose`
//!   ([`Pins`]: DF_1_NODELETE, GNU unique symbols), read as the loader reads them, through the
//!   dynamic section.
//! - [`Elf::manifest`]: what a plugin declares about itself (its [`Manifest`]: plugin ABI
//!   version, name, version, passes), from its `dylease` ELF notes; the [`manifest`] module
//!   defines their format.
//!
//! One [`Elf`] reads the file once for all of them: it keeps what it read. The file is read
//! from a [`ReadAt`] source (a `std::fs::File`, or bytes in memory), by position, so that a
//! host reads the very descriptor it then has the loader map.
//!
//! ```
//! # fn main() -> std::io::Result<()> {
//! # #[cfg(all(target_os = "linux", target_env = "gnu"))] {
//! // The C library of this process, say.
//! # let maps = std::fs::read_to_string("/proc/self/maps")?;
//! # let path = maps.lines().filter_map(|l| l.split_whitespace().nth(5))
//! #     .find(|p| p.contains("/libc.so")).unwrap().to_owned();
//! let file = std::fs::File::open(&path)?;
//! let len = file.metadata()?.len();
//! let elf = dylease_elf::Elf::new(file, len);
//! let linkage = elf.check().map_err(std::io::Error::other)?;
//! assert!(linkage.soname.is_some());
//! // What would keep it mapped after its last `dlclose`.
//! let pins = elf.pins(&[]).map_err(std::io::Error::other)?;
//! println!("{pins:?}");
//! # }
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod consts;
mod fingerprint;
mod header;
mod layout;
pub mod manifest;
mod source;
#[cfg(all(test, target_os = "linux", target_arch = "x86_64"))]
mod testing;

use std::fmt;

pub use source::{Elf, ReadAt};

impl<S: ReadAt> Elf<S> {
    /// Checks that the file could be an ELF shared library for this process and that the
    /// loader can map and link it without crashing: the header check, then the structural
    /// check of the program headers and the dynamic section. Returns what the library makes
    /// the loader look up.
    ///
    /// A file that cannot be read is refused with the reason ("cannot read it: …") by the
    /// structural check.
    pub fn check(&self) -> Result<Linkage, Refusal> {
        header::check(self).map_err(Refusal)?;
        layout::check(self).map_err(Refusal)
    }

    /// What the library makes the loader look up, after the header check and as much of the
    /// structural check as that takes (the segments, the dynamic section and its strings):
    /// for a reader of dependencies, which [`Elf::check`] then checks in full.
    pub fn linkage(&self) -> Result<Linkage, Refusal> {
        header::check(self).map_err(Refusal)?;
        layout::linkage(self).map_err(Refusal)
    }

    /// What makes glibc keep the library mapped after its last `dlclose`, read from a file
    /// that passed [`Elf::check`]: DF_1_NODELETE in DT_FLAGS_1, and the symbols of DT_SYMTAB,
    /// as many as its hash table (DT_GNU_HASH, else DT_HASH) indexes, the loader's view of
    /// them. The section headers are not read: the loader never reads them, and a file may
    /// lack them. Defined symbols named in `exempt` (a plugin's entry point, say) are not
    /// counted in [`Pins::exports`].
    pub fn pins(&self, exempt: &[&str]) -> Result<Pins, Refusal> {
        layout::pins(self, exempt).map_err(Refusal)
    }

    /// The plugin's manifest, read from its `dylease` notes in the `PT_NOTE` segments that
    /// lie inside the file (see [`manifest`] for the format): `Ok(None)` when it has no
    /// dylease note. The section headers are not read, and no byte outside the note segments
    /// (and the headers that locate them) is.
    ///
    /// A file built for another machine has its manifest read too: only its identification
    /// bytes are checked (the ELF magic, a valid class and byte order), not the machine, and
    /// every field is read in the file's byte order (`EI_DATA`), so that the manifest of a
    /// plugin cross-built for a big-endian machine (s390x, ppc64) can be shown beside
    /// [`Elf::check`]'s refusal of it.
    ///
    /// Refused with the cause: a dylease note truncated by its segment's end, a string
    /// length past its record, a name that is not UTF-8, two plugin records that disagree, a
    /// pass declared twice, a plugin record of a format version other than
    /// [`manifest::FORMAT_VERSION`], pass records without a plugin record; more `PT_NOTE`
    /// segments, or note bytes, than the caps ([`manifest::MAX_NOTE_SEGMENTS`],
    /// [`manifest::MAX_NOTE_BYTES`]). A damaged note of another owner is not refused. Each
    /// segment is read once, however many program headers list it.
    pub fn manifest(&self) -> Result<Option<Manifest>, Refusal> {
        header::identified(self).map_err(Refusal)?;
        manifest::read(self).map_err(Refusal)
    }

    /// Feeds `state` with what the header check, [`Elf::manifest`] and [`Elf::linkage`] read
    /// of the file, and nothing else: its length, its ELF header and program header table,
    /// the bytes of its `PT_NOTE` segments, its dynamic section up to `DT_NULL` (where the
    /// loader reads it) and the strings of the dynamic entries the [`Linkage`] holds. A
    /// caller that keeps those readings of a file (a cache keyed by the file's status, say)
    /// reads a few KB of it again at a later opening, fingerprints them, and parses the file
    /// again if the fingerprint differs: its bytes changed without its status showing it (a
    /// write through a shared mapping).
    ///
    /// Not fed: the tables only the structural check and [`Elf::pins`] read (symbols, hash
    /// tables, relocations, version records, unwind tables) and the code. The bytes read are
    /// kept by this `Elf`, so that the readings made of it afterwards read the same bytes.
    ///
    /// `Err` if the file cannot be read, or holds in these parts more than the readers walk
    /// (note segments past [`manifest::MAX_NOTE_BYTES`] or [`manifest::MAX_NOTE_SEGMENTS`], a
    /// dynamic section or a linkage string of more than 1 MiB): there is no fingerprint to
    /// compare then.
    pub fn fingerprint(&self, state: &mut impl std::hash::Hasher) -> std::io::Result<()> {
        // One walk for every hasher, which it calls rather than inlines.
        fingerprint::fingerprint(self, state as &mut dyn std::hash::Hasher)
    }
}

/// Why a file was refused: a phrase about the file that completes "cannot load `…`: ", such
/// as "the file is truncated: it has 4096 bytes, but its ELF headers describe at least
/// 16384".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(String);

impl Refusal {
    /// The reason, as a phrase.
    pub fn reason(&self) -> &str {
        &self.0
    }

    /// The reason, as an owned phrase.
    pub fn into_reason(self) -> String {
        self.0
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refusal {}

/// What the loader will look up for a library: the dynamic section's strings that make it
/// open files (DT_NEEDED, DT_AUXILIARY, DT_FILTER, DT_AUDIT, DT_DEPAUDIT), where it searches
/// (DT_RUNPATH, DT_RPATH) and the name other objects need it by (DT_SONAME), as bytes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Linkage {
    /// The libraries it needs, in order (names, or paths when they hold a `/`).
    pub needed: Vec<Vec<u8>>,
    /// DT_RUNPATH, if present (a `:`-separated list).
    pub runpath: Option<Vec<u8>>,
    /// DT_RPATH, if present (glibc ignores it when DT_RUNPATH is present).
    pub rpath: Option<Vec<u8>>,
    /// DT_SONAME, if present: the name glibc matches a needed name against before it
    /// searches any directory.
    pub soname: Option<Vec<u8>>,
    /// The filtees it names (DT_AUXILIARY, then DT_FILTER, each in order), with the tag that
    /// names each: glibc maps them, constructors included, as it maps needed libraries.
    pub filtees: Vec<(&'static str, Vec<u8>)>,
    /// Tags that make the loader open a file other than a dependency
    /// (DT_AUDIT, DT_DEPAUDIT), with their strings.
    pub audit: Vec<(&'static str, Vec<u8>)>,
    /// Where its loadable segments (PT_LOAD) lie, relative to its load address: the only
    /// addresses of the mapping that are its own.
    pub loads: Vec<std::ops::Range<u64>>,
}

impl Linkage {
    /// Whether the run paths or needed names use `$ORIGIN` (the directory the loader opened
    /// the library from), which a host that maps the library from a descriptor must
    /// keep meaning the library's directory.
    pub fn names_origin(&self) -> bool {
        let origin = |string: &[u8]| {
            [&b"$ORIGIN"[..], b"${ORIGIN}"]
                .iter()
                .any(|token| string.windows(token.len()).any(|w| w == *token))
        };
        self.needed
            .iter()
            .map(Vec::as_slice)
            .chain(self.runpath.as_deref())
            .chain(self.rpath.as_deref())
            .any(origin)
    }
}

/// A plugin's manifest, merged from its manifest notes: see [`manifest`] for the format.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Manifest {
    /// The format version of its plugin records ([`manifest::FORMAT_VERSION`]).
    pub format: u32,
    /// The plugin ABI version it was built for.
    pub abi_version: u32,
    /// The plugin's name.
    pub name: String,
    /// The plugin's version.
    pub version: String,
    /// Whether [`Manifest::passes`] lists every pass the plugin registers ([`manifest::FLAG_COMPLETE`]);
    /// if not, it may register others.
    pub complete: bool,
    /// The passes its pass records declare, in the order of the file.
    pub passes: Vec<DeclaredPass>,
}

/// A pass a manifest declares.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DeclaredPass {
    /// The pass's name.
    pub name: String,
    /// The interface it is typed with, or `None` for an untyped pass.
    pub interface: Option<String>,
}

impl DeclaredPass {
    /// A declared pass of this name and interface.
    pub fn new(name: impl Into<String>, interface: Option<String>) -> DeclaredPass {
        DeclaredPass {
            name: name.into(),
            interface,
        }
    }
}

/// What makes glibc keep a library mapped after its last `dlclose`, as its file shows: see
/// [`Elf::pins`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Pins {
    /// DF_1_NODELETE is set in DT_FLAGS_1 (`-z nodelete`): the loader never unloads it.
    pub no_delete: bool,
    /// Its `STB_GNU_UNIQUE` symbols, which glibc never unloads (g++ makes one of every
    /// function-local static of an inline function or template).
    pub gnu_unique: Option<Symbols>,
    /// It imports `__cxa_thread_atexit_impl` or `__cxa_thread_atexit` as a strong (global)
    /// symbol: it registers thread-local destructors (a C++ `thread_local` with a destructor,
    /// or a C call of the glibc function), and stays mapped while a thread that used them
    /// lives. A weak import alone is not counted: Rust's standard library makes one in every
    /// library it is linked into, and registers a destructor through it only when a
    /// thread-local with `Drop` is used, which the file does not show.
    pub thread_local_destructors: bool,
    /// Its other exported definitions (global or weak, default or protected visibility),
    /// besides those the linker defines in every library and those exempted: another object
    /// that is never unloaded may bind to them and keep it mapped.
    pub exports: Option<Symbols>,
}

/// Some symbols of a library: how many, and the first one's name.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Symbols {
    /// How many.
    pub count: usize,
    /// The first one, by its (mangled) name.
    pub example: String,
}

#[cfg(test)]
mod refusals {
    use super::*;

    /// Bytes that are no shared library give a refusal from every reading, never a panic
    /// (the pin facts too, which a host reads only after the check passed).
    #[test]
    fn what_is_not_a_library_is_refused_by_every_reading() {
        let mut bare = [0u8; 64];
        bare[..6].copy_from_slice(b"\x7fELF\x02\x01");
        // A section header table far past the end of the file, which nothing reads.
        bare[40..48].copy_from_slice(&u64::MAX.to_le_bytes());
        for bytes in [&b"hello"[..], &bare[..], &[]] {
            let elf = Elf::new(bytes, bytes.len() as u64);
            assert!(elf.check().is_err(), "{bytes:?}");
            assert!(elf.linkage().is_err(), "{bytes:?}");
            assert!(elf.pins(&[]).is_err(), "{bytes:?}");
        }
    }
}

#[cfg(all(test, target_os = "linux", target_arch = "x86_64"))]
mod tests {
    use super::*;
    use crate::testing::{Counted, Scratch, compile};

    fn pins(bytes: &[u8], exempt: &[&str]) -> Pins {
        let elf = Elf::new(bytes, bytes.len() as u64);
        elf.check().unwrap();
        elf.pins(exempt).unwrap()
    }

    /// The C++ example plugin built plainly: two GNU unique symbols (its singleton and that
    /// singleton's guard), a thread-local destructor and other exports; and the same facts
    /// once its section header table is gone, which the loader never reads.
    #[test]
    fn pins_are_read_through_the_dynamic_section_not_the_section_headers() {
        let scratch = Scratch::new("pins");
        let plain = compile(
            &scratch.0,
            &["examples/plugins/layout.cpp", "examples/plugins/layout_transpose.cpp"],
            &[],
        );
        let facts = pins(&plain, &["dylease_plugin_v1"]);
        assert!(!facts.no_delete);
        let unique = facts.gnu_unique.as_ref().expect("GNU unique symbols");
        assert_eq!(
            (unique.count, unique.example.as_str()),
            (2, "_ZZN6layout8Registry3getEvE8instance")
        );
        assert!(facts.thread_local_destructors);
        let exports = facts.exports.as_ref().expect("other exports");
        assert_ne!(exports.example, "dylease_plugin_v1", "the exempt name is not counted");

        let mut headless = plain.clone();
        // e_shoff, e_shnum and e_shstrndx.
        headless[40..48].fill(0);
        headless[60..64].fill(0);
        assert_eq!(pins(&headless, &["dylease_plugin_v1"]), facts);

        // The entry point counts as an export unless exempted.
        let counted = pins(&plain, &[]);
        assert_eq!(counted.exports.unwrap().count, exports.count + 1);
    }

    /// The host reads a manifest after the checks, which read the file whole if it is small
    /// and its header blocks otherwise: the notes lie in those blocks (linkers put them after
    /// the program headers), so reading the manifest takes no read of its own, even of a
    /// library too large to be read whole (its segments 64 KiB apart).
    #[test]
    fn the_manifest_costs_no_read_of_its_own_after_the_checks() {
        let scratch = Scratch::new("manifest-reads");
        let spread = [
            "-std=c99",
            "-DPLAIN",
            "-Wl,-z,separate-code",
            "-Wl,-z,max-page-size=65536",
        ];
        for (args, small) in [(&spread[..2], true), (&spread[..], false)] {
            let bytes = compile(&scratch.0, &["tests/plugins/macros.c"], args);
            assert_eq!(bytes.len() <= 64 << 10, small, "{} bytes", bytes.len());
            let len = bytes.len() as u64;
            let file = Counted {
                bytes,
                reads: Default::default(),
            };
            let elf = Elf::new(&file, len);
            elf.check().unwrap();
            elf.linkage().unwrap();
            elf.pins(&[]).unwrap();
            let before = file.reads.get();
            let manifest = elf.manifest().unwrap().expect("the macros write a manifest");
            assert!(!manifest.passes.is_empty());
            let extra = file.reads.get() - before;
            assert_eq!(extra, 0, "more reads of a file of {len} bytes");
        }
    }

    /// A strong import of a thread-local destructor registration (what g++ makes of a
    /// `thread_local` with a destructor, or a C call of glibc's function) predicts one; a weak
    /// import alone (what Rust's standard library makes in every cdylib, used only if a
    /// thread-local with `Drop` is used at run time) does not.
    #[test]
    fn only_a_strong_import_of_the_thread_local_destructor_hook_predicts_one() {
        let scratch = Scratch::new("thread-atexit");
        let library = |name: &str, declaration: &str| {
            let source = scratch.0.join(format!("{name}.c"));
            std::fs::write(
                &source,
                format!(
                    "{declaration}\n\
                     static void drop_it(void *object) {{ (void)object; }}\n\
                     static int key;\n\
                     void register_it(void) {{ if (&{name}) {name}(drop_it, &key, &key); }}\n"
                ),
            )
            .unwrap();
            compile(&scratch.0, &[source.to_str().unwrap()], &[])
        };
        let signature = "(void (*)(void *), void *, void *)";
        for name in ["__cxa_thread_atexit_impl", "__cxa_thread_atexit"] {
            let weak = library(name, &format!("extern int {name}{signature} __attribute__((weak));"));
            assert!(!pins(&weak, &[]).thread_local_destructors, "a weak import of {name}");
            let strong = library(name, &format!("extern int {name}{signature};"));
            assert!(pins(&strong, &[]).thread_local_destructors, "a strong import of {name}");
        }
    }

    #[test]
    fn a_library_linked_with_nodelete_says_so() {
        let scratch = Scratch::new("nodelete");
        let nodelete = compile(&scratch.0, &["tests/plugins/ctor.c"], &["-Wl,-z,nodelete"]);
        assert!(pins(&nodelete, &[]).no_delete);
        let plain = compile(&scratch.0, &["tests/plugins/by_hand.c"], &[]);
        let facts = pins(&plain, &[]);
        assert!(!facts.no_delete && facts.gnu_unique.is_none(), "{facts:?}");
    }
}
