//! The structural check of a library's program headers and dynamic section: what the loader
//! dereferences while it maps and links the file, before any of the library's code runs.
//!
//! glibc trusts these fields. A PT_DYNAMIC whose address lies outside every loadable segment
//! makes it read unmapped memory (`SIGBUS` in `elf_get_dynamic_info`); a DT_STRTAB pointing
//! outside the image, a hash table whose counts run past its segment, a relocation that
//! writes outside the mapping, a DT_RELACOUNT that covers other relocation types (an
//! assertion that ends the process): each kills the process inside `dlopen`, with no error to
//! report. This module reads the same fields from the file and refuses, with the cause, a
//! library whose
//!
//! - loadable segments (PT_LOAD) are missing, overlap or are out of address order, map the
//!   same file bytes twice, are unreadable, are aligned to something other than a power of
//!   two, have `p_offset` and `p_vaddr` not congruent modulo `p_align`, have more bytes in
//!   the file than in memory (or, executable, fewer), or reach past the file's end;
//! - PT_DYNAMIC is missing, or not inside the file-backed part of one PT_LOAD, or its
//!   entries are not terminated by DT_NULL within it;
//! - PT_TLS, PT_PHDR, PT_NOTE, PT_GNU_PROPERTY or PT_GNU_EH_FRAME lies outside the loaded
//!   image (the loader or the unwinder reads them) or at a file offset other than the one its
//!   loadable segment maps there, or PT_TLS is missing while the library defines
//!   thread-local data, lies outside a writable segment, or asks for more than 1 GiB per
//!   thread;
//! - PT_GNU_RELRO's pages (its start and end each rounded down to a page, as glibc
//!   protects them) are not all pages of loadable segments, or include an executable
//!   segment's;
//! - tables the loader reads (DT_STRTAB, DT_SYMTAB, DT_HASH, DT_GNU_HASH, DT_RELA, DT_REL,
//!   DT_RELR, DT_JMPREL, DT_INIT_ARRAY, DT_FINI_ARRAY, DT_PREINIT_ARRAY, DT_VERSYM,
//!   DT_VERDEF, DT_VERNEED) are misaligned, lack their size entry (or the size lacks its
//!   table), have an entry size other than this platform's, or do not lie, with their sizes,
//!   inside loaded file-backed ranges; DT_INIT and DT_FINI point outside executable segments;
//! - strings (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH, symbol and version names) start
//!   outside DT_STRTAB or are not terminated within it;
//! - the version tables (DT_VERDEF, DT_VERNEED) are not chains of version-1 records whose
//!   records and names glibc reaches by their next offsets (`vd_next`, `vda_next`, `vn_next`,
//!   `vna_next`) inside the loaded image, or their counts (DT_VERDEFNUM, DT_VERNEEDNUM,
//!   `vd_cnt`, `vn_cnt`), which readers other than glibc go by, disagree with those chains;
//!   or a needed version's library (`vn_file`) is not one glibc's version check will find;
//! - hash chains, symbol addresses (functions in executable segments), symbol version
//!   indices, version records, relocation targets (in writable segments) and symbol indices,
//!   DT_RELACOUNT, and the slots of the init and fini arrays (each relocated, to code) reach
//!   outside their tables or the image; DT_INIT, DT_FINI or an init or fini array entry
//!   points inside a function rather than at its start, by the unwind tables
//!   (PT_GNU_EH_FRAME), when the library has them.
//!
//! glibc (2.36, `_dl_check_map_versions` in `elf/dl-version.c`) looks each `vn_file` up
//! among the objects loaded in the library's namespace and then among the library's own
//! search list (itself, its filtees and its dependencies, transitively), matching the names
//! each object was opened by; finding none, it fails an assertion (`needed != NULL`) and ends
//! the process. The names certain to be there when the library loads are its DT_NEEDED
//! strings and its DT_FILTER filtees' (a filter whose filtee is missing fails to load), so the
//! check accepts exactly those. It refuses the names glibc finds only by the state of the
//! process: an object some other library loaded, a dependency's dependency, a DT_AUXILIARY
//! filtee (optional: when it is missing, glibc asserts), or the library's own DT_SONAME (not
//! a name glibc matches an object opened by its path against). No linker writes those.
//!
//! Not checked, because only being the loader (or running the code) would check them: which
//! relocations there are and the values they compute beyond the above, symbol resolution,
//! and code — a DT_INIT moved into code the unwind tables do not describe, a relocation table
//! shortened to fewer valid entries, a symbol table moved onto other well-formed data, a
//! loadable segment removed together with every header that would show it is missing. A file
//! sound in every field above can still crash in its constructors. Reading bytes runs no
//! plugin code; this module is safe code only.

mod unwind;

use std::borrow::Cow;

use crate::consts::*;
use crate::source::{Bytes, Form};
use crate::{Linkage, Pins, Symbols};

/// This platform's relative relocation type (base + addend), where it is known here.
const RELATIVE: Option<u32> = if cfg!(any(target_arch = "x86_64", target_arch = "x86")) {
    Some(8)
} else if cfg!(target_arch = "aarch64") {
    Some(1027)
} else if cfg!(target_arch = "arm") {
    Some(23)
} else if cfg!(any(target_arch = "riscv64", target_arch = "loongarch64")) {
    Some(3)
} else {
    None
};

/// This platform's dynamic thread-local storage relocation types, where they are known here.
const TLS_RELOCATIONS: &[u32] = if cfg!(target_arch = "x86_64") {
    &[16, 17, 18, 36]
} else if cfg!(target_arch = "x86") {
    &[14, 35, 36, 37, 41]
} else if cfg!(target_arch = "aarch64") {
    &[1028, 1029, 1030, 1031]
} else if cfg!(target_arch = "arm") {
    &[13, 17, 18, 19]
} else if cfg!(target_arch = "riscv64") {
    &[6, 7, 8, 9, 10, 11, 12]
} else {
    &[]
};

/// Whether this platform's relocations carry addends (RELA) rather than not (REL): glibc
/// handles only its platform's kind in DT_PLTREL.
const RELA_PLATFORM: bool = !cfg!(any(target_arch = "x86", target_arch = "arm"));

/// Most symbols, relocations and version records the check walks: far more than any real
/// library has, so that a corrupt count cannot make the check itself slow.
const MAX_ENTRIES: u64 = 1 << 24;

/// What the linker defines in every library, which no other object binds to.
const LINKER_NAMES: [&str; 5] = ["_init", "_fini", "_edata", "_end", "__bss_start"];

/// The imports that register a thread-local destructor (glibc's, and libstdc++'s wrapper).
/// Only a strong (`STB_GLOBAL`) import of one predicts a registration: g++ makes one for a
/// `thread_local` with a destructor. Rust's standard library imports glibc's weakly in every
/// library it is linked into, and calls it only when a thread-local with `Drop` is used.
const THREAD_ATEXIT: [&str; 2] = ["__cxa_thread_atexit_impl", "__cxa_thread_atexit"];

/// Most thread-local storage one library may ask for, per thread: the loader aborts the
/// process when it cannot allocate a block.
const MAX_THREAD_LOCAL: u64 = 1 << 30;

/// Checks the program headers and the dynamic section of a file that passed the header check
/// ([`crate::header`]: a class and byte order this process has, the program header table
/// inside the file). Returns what the library will make the loader look up. `Err` says what
/// is wrong, as a phrase.
pub(crate) fn check(file: &dyn Bytes) -> Result<Linkage, String> {
    let headers = Headers::read(file)?;
    headers.linker(file, true).check()
}

/// What the library will make the loader look up, checking only what that takes (the
/// segments, the dynamic section and its strings): the trust check's reading of a plugin's
/// dependencies, which [`check`] then checks in full before `dlopen`.
pub(crate) fn linkage(file: &dyn Bytes) -> Result<Linkage, String> {
    let headers = Headers::read(file)?;
    headers.linker(file, false).check()
}

/// The facts that make glibc keep the library mapped after its last `dlclose`, read as the
/// loader reads them: DT_FLAGS_1 of the dynamic section, and the symbols DT_SYMTAB holds, as
/// many as the hash table (DT_GNU_HASH, else DT_HASH) says there are (linkers place the
/// undefined symbols, which the hash table does not index, before the hashed ones). The
/// section headers, which the loader never reads and a file may lack, are not read. Defined
/// symbols named in `exempt` are not counted as exports.
pub(crate) fn pins(file: &dyn Bytes, exempt: &[&str]) -> Result<Pins, String> {
    let headers = Headers::read(file)?;
    headers.linker(file, false).pins(exempt)
}

/// The program headers of a file, read and checked: its form, every header, the loadable
/// segments (the image) and the dynamic section's entries.
///
/// Every reading of the file starts here. A further reading of a kind of segment (the notes
/// of PT_NOTE, say) walks [`Headers::segments`] for its type and reads each one's bytes with
/// [`Image::read`], where the loader maps them, as the dynamic section is read.
struct Headers {
    form: Form,
    segments: Vec<Segment>,
    image: Image,
    entries: Vec<(u64, u64)>,
}

impl Headers {
    fn read(file: &dyn Bytes) -> Result<Headers, String> {
        let len = file.len();
        let ident = file.bytes(0, EHDR_LEN_32 as u64)?;
        let form = Form::of(&ident);
        let head = file.bytes(0, if form.wide { EHDR_LEN_64 } else { EHDR_LEN_32 } as u64)?;
        let (phoff, phentsize, phnum) = form.program_headers(&head);
        let expected = if form.wide { 56 } else { 32 };
        if phentsize != expected {
            return Err(format!(
                "its program headers are {phentsize} bytes each, not {expected}: the headers are corrupt"
            ));
        }
        let table = file.bytes(phoff, u64::from(phentsize) * u64::from(phnum))?;
        let segments: Vec<Segment> = table
            .chunks_exact(usize::from(phentsize))
            .map(|entry| Segment::read(entry, form))
            .collect();
        let image = Image::new(&segments, len)?;
        for segment in &segments {
            image.other_segment(segment)?;
        }
        let dynamic = segments
            .iter()
            .rfind(|s| s.kind == PT_DYNAMIC)
            .ok_or("it has no dynamic section (PT_DYNAMIC): it is not a linked shared library")?;
        let entries = image.dynamic(file, dynamic, form)?;
        Ok(Headers {
            form,
            segments,
            image,
            entries,
        })
    }

    /// The dynamic section's checks over these headers: everything (`whole`), or only what
    /// the linkage and the pin facts take.
    fn linker<'a>(&'a self, file: &'a dyn Bytes, whole: bool) -> Linker<'a> {
        let functions = self
            .segments
            .iter()
            .find(|s| s.kind == PT_GNU_EH_FRAME && whole)
            .and_then(|header| unwind::function_ranges(file, &self.image, header, self.form))
            .unwrap_or_default();
        Linker {
            file,
            image: &self.image,
            entries: &self.entries,
            form: self.form,
            thread_local: self.segments.iter().any(|s| s.kind == PT_TLS),
            functions,
            whole,
        }
    }
}

/// One program header.
#[derive(Debug, Clone, Copy)]
struct Segment {
    kind: u32,
    flags: u32,
    offset: u64,
    vaddr: u64,
    filesz: u64,
    memsz: u64,
    align: u64,
}

impl Segment {
    fn read(entry: &[u8], form: Form) -> Segment {
        if form.wide {
            Segment {
                kind: form.u32(entry, 0),
                flags: form.u32(entry, 4),
                offset: form.u64(entry, 8),
                vaddr: form.u64(entry, 16),
                filesz: form.u64(entry, 32),
                memsz: form.u64(entry, 40),
                align: form.u64(entry, 48),
            }
        } else {
            Segment {
                kind: form.u32(entry, 0),
                offset: form.u32(entry, 4).into(),
                vaddr: form.u32(entry, 8).into(),
                filesz: form.u32(entry, 16).into(),
                memsz: form.u32(entry, 20).into(),
                flags: form.u32(entry, 24),
                align: form.u32(entry, 28).into(),
            }
        }
    }

    fn name(&self) -> &'static str {
        match self.kind {
            PT_LOAD => "PT_LOAD",
            PT_DYNAMIC => "PT_DYNAMIC",
            PT_NOTE => "PT_NOTE",
            PT_PHDR => "PT_PHDR",
            PT_TLS => "PT_TLS",
            PT_GNU_EH_FRAME => "PT_GNU_EH_FRAME",
            PT_GNU_RELRO => "PT_GNU_RELRO",
            PT_GNU_PROPERTY => "PT_GNU_PROPERTY",
            _ => "segment",
        }
    }
}

/// The loadable segments, checked: where each address lands in the file and in memory.
struct Image {
    loads: Vec<Segment>,
}

impl Image {
    fn new(headers: &[Segment], len: u64) -> Result<Image, String> {
        let loads: Vec<Segment> = headers.iter().filter(|s| s.kind == PT_LOAD).copied().collect();
        if loads.is_empty() {
            return Err("it has no loadable segment (PT_LOAD): there is nothing to map".into());
        }
        let mut previous: Option<&Segment> = None;
        for (n, load) in loads.iter().enumerate() {
            // Named only when refused: no formatting on the success path.
            let which = || format!("its loadable segment {n} (PT_LOAD at address {:#x})", load.vaddr);
            alignment(load, which)?;
            if load.align > 1 && load.offset % load.align != load.vaddr % load.align {
                let which = which();
                return Err(format!(
                    "{which} has file offset {:#x} and address {:#x}, which differ modulo its alignment {:#x}",
                    load.offset, load.vaddr, load.align
                ));
            }
            if load.filesz > load.memsz {
                let which = which();
                return Err(format!(
                    "{which} has more bytes in the file ({}) than in memory ({})",
                    load.filesz, load.memsz
                ));
            }
            if load.offset.checked_add(load.filesz).is_none_or(|end| end > len) {
                let which = which();
                return Err(format!(
                    "the file is truncated: it has {len} bytes, but {which} reaches byte {}",
                    u128::from(load.offset) + u128::from(load.filesz)
                ));
            }
            if load.vaddr.checked_add(load.memsz).is_none() {
                let which = which();
                return Err(format!("{which} runs past the end of the address space"));
            }
            if load.flags & PF_X != 0 && load.filesz != load.memsz {
                let which = which();
                return Err(format!(
                    "{which} is executable but has {} bytes in the file and {} in memory: code is never \
                     zero-filled",
                    load.filesz, load.memsz
                ));
            }
            if load.flags & PF_R == 0 {
                let which = which();
                return Err(format!(
                    "{which} is not readable (flags {:#x}): the loader and the code read every loadable segment",
                    load.flags
                ));
            }
            if let Some(previous) = previous {
                if load.vaddr < previous.vaddr + previous.memsz {
                    let which = which();
                    return Err(format!(
                        "{which} starts below the end of the one before it ({:#x}): loadable segments are in \
                         address order and do not overlap",
                        previous.vaddr + previous.memsz
                    ));
                }
                if load.filesz > 0 && previous.filesz > 0 && load.offset < previous.offset + previous.filesz {
                    let which = which();
                    return Err(format!(
                        "{which} maps file bytes from {:#x}, which the one before it maps too (up to {:#x}): \
                         loadable segments map distinct parts of the file, in order",
                        load.offset,
                        previous.offset + previous.filesz
                    ));
                }
            }
            previous = Some(load);
        }
        Ok(Image { loads })
    }

    /// The lowest address of the image.
    fn start(&self) -> u64 {
        self.loads[0].vaddr
    }

    /// The end of the image's highest segment.
    fn end(&self) -> u64 {
        self.loads.iter().map(|l| l.vaddr + l.memsz).max().unwrap_or(0)
    }

    /// The segment whose file-backed part holds `[vaddr, vaddr + size)`.
    fn backing(&self, vaddr: u64, size: u64) -> Option<&Segment> {
        let end = vaddr.checked_add(size)?;
        self.loads
            .iter()
            .find(|l| l.vaddr <= vaddr && end <= l.vaddr + l.filesz)
    }

    /// The segment whose memory holds `[vaddr, vaddr + size)`.
    fn mapping(&self, vaddr: u64, size: u64) -> Option<&Segment> {
        let end = vaddr.checked_add(size)?;
        self.loads.iter().find(|l| l.vaddr <= vaddr && end <= l.vaddr + l.memsz)
    }

    /// `[vaddr, vaddr + size)` from the file, where the loader maps it.
    fn read<'f>(
        &self,
        file: &'f dyn Bytes,
        vaddr: u64,
        size: u64,
        what: impl FnOnce() -> String,
    ) -> Result<Cow<'f, [u8]>, String> {
        let load = self.backing(vaddr, size).ok_or_else(|| outside(&what(), vaddr, size))?;
        file.bytes(load.offset + (vaddr - load.vaddr), size)
    }

    /// The checks of a program header other than PT_LOAD.
    fn other_segment(&self, segment: &Segment) -> Result<(), String> {
        let which = || format!("its {} segment (at address {:#x})", segment.name(), segment.vaddr);
        match segment.kind {
            PT_TLS => {
                alignment(segment, which)?;
                if segment.align == 0 {
                    return Err(format!("{} has alignment 0", which()));
                }
                if segment.filesz > segment.memsz {
                    return Err(format!("{} has more bytes in the file than in memory", which()));
                }
                if segment.memsz > MAX_THREAD_LOCAL {
                    return Err(format!(
                        "{} asks for {} bytes of thread-local storage per thread, more than {MAX_THREAD_LOCAL}",
                        which(),
                        segment.memsz
                    ));
                }
                self.file_backed(segment, which)
            }
            PT_DYNAMIC | PT_PHDR | PT_NOTE | PT_GNU_PROPERTY | PT_GNU_EH_FRAME => self.file_backed(segment, which),
            PT_GNU_RELRO => self.relro(segment, which),
            _ => Ok(()),
        }
    }

    /// The pages glibc makes read-only once it has relocated the library
    /// (`_dl_protect_relro`): PT_GNU_RELRO's start and end each rounded down to a page. It
    /// fails `dlopen` when one of them is not mapped, and a page of code made read-only would
    /// stop the library's code with `SIGSEGV` once it runs, so each of them must be a page of
    /// a loadable segment (between its start rounded down and its end rounded up, as the
    /// loader maps it) and of no executable one. Linkers may end the range past its segment's
    /// memory, in that segment's last page or the next segment's (LLD does).
    fn relro(&self, segment: &Segment, which: impl Fn() -> String) -> Result<(), String> {
        let end = segment
            .vaddr
            .checked_add(segment.memsz)
            .ok_or_else(|| format!("{} runs past the end of the address space", which()))?;
        let (start, end) = (page_down(segment.vaddr), page_down(end));
        let pages = |load: &Segment| page_down(load.vaddr)..page_up(load.vaddr + load.memsz);
        let mut at = start;
        while at < end {
            let Some(load) = self.loads.iter().find(|load| pages(load).contains(&at)) else {
                return Err(format!(
                    "{} ({} bytes) covers the page at {at:#x}, which no loadable segment maps: the loader \
                     would fail to make it read-only",
                    which(),
                    segment.memsz
                ));
            };
            at = pages(load).end;
        }
        if let Some(code) = self
            .loads
            .iter()
            .find(|load| load.flags & PF_X != 0 && pages(load).start < end && start < pages(load).end)
        {
            return Err(format!(
                "{} ({} bytes) covers pages of the executable loadable segment at {:#x}: the loader would make \
                 its code read-only and not executable",
                which(),
                segment.memsz,
                code.vaddr
            ));
        }
        Ok(())
    }

    fn file_backed(&self, segment: &Segment, which: impl Fn() -> String) -> Result<(), String> {
        if segment.filesz == 0 && segment.kind != PT_DYNAMIC {
            return Ok(());
        }
        let Some(load) = self.backing(segment.vaddr, segment.filesz) else {
            return Err(format!(
                "{} ({} bytes) is not inside the file-backed part of a loadable segment, where the loader \
                 reads it",
                which(),
                segment.filesz
            ));
        };
        // Where the loadable segment maps it is where the file has it.
        let mapped_from = load.offset + (segment.vaddr - load.vaddr);
        if segment.offset != mapped_from {
            return Err(format!(
                "{} says it is at file offset {:#x}, but the loadable segment holding its address maps \
                 file offset {mapped_from:#x} there",
                which(),
                segment.offset
            ));
        }
        if segment.kind == PT_TLS && load.flags & PF_W == 0 {
            return Err(format!("{} is not inside a writable loadable segment", which()));
        }
        Ok(())
    }

    /// The dynamic section's entries up to DT_NULL, which must be within it.
    fn dynamic(&self, file: &dyn Bytes, dynamic: &Segment, form: Form) -> Result<Vec<(u64, u64)>, String> {
        let entry = 2 * form.word_size();
        if !dynamic.vaddr.is_multiple_of(entry / 2) {
            return Err(format!(
                "its dynamic section (PT_DYNAMIC) is at address {:#x}, which is not aligned",
                dynamic.vaddr
            ));
        }
        let bytes = self.read(file, dynamic.vaddr, dynamic.filesz, || {
            "its dynamic section (PT_DYNAMIC)".into()
        })?;
        let mut entries = Vec::with_capacity(bytes.len() / entry as usize);
        for raw in bytes.chunks_exact(entry as usize) {
            let (tag, value) = (form.word(raw, 0), form.word(raw, entry as usize / 2));
            if tag == DT_NULL {
                return Ok(entries);
            }
            entries.push((tag, value));
        }
        Err(format!(
            "its dynamic section (PT_DYNAMIC, {} bytes) does not end with a DT_NULL entry",
            dynamic.filesz
        ))
    }
}

/// The smallest page the loader maps: 4 KiB, which every page size Linux runs with is a
/// multiple of (a larger page only makes the loadable segments' pages cover more).
const PAGE: u64 = 4096;

/// `address` rounded down to a page.
fn page_down(address: u64) -> u64 {
    address & !(PAGE - 1)
}

/// `address` rounded up to a page (the last page, at the end of the address space).
fn page_up(address: u64) -> u64 {
    address.checked_next_multiple_of(PAGE).unwrap_or(page_down(address))
}

fn alignment(segment: &Segment, which: impl FnOnce() -> String) -> Result<(), String> {
    if segment.align > 1 && !segment.align.is_power_of_two() {
        return Err(format!(
            "{} has alignment {:#x}, which is not a power of two",
            which(),
            segment.align
        ));
    }
    Ok(())
}

fn outside(what: &str, vaddr: u64, size: u64) -> String {
    format!(
        "{what} (address {vaddr:#x}, {size} bytes) is not inside the file-backed part of a loadable \
         segment: the loader would read it from unmapped or unrelated memory"
    )
}

/// Refuses a version record of a version other than 1, the only one there is.
fn record_version(which: impl FnOnce() -> String, version: u16) -> Result<(), String> {
    if version != 1 {
        return Err(format!(
            "{} has version {version}, but the only one defined is 1",
            which()
        ));
    }
    Ok(())
}

/// Refuses a count (`field` of `which`) that differs from the number of `what` its chain has.
fn agree(which: impl FnOnce() -> String, field: &str, count: u64, what: &str, walked: u64) -> Result<(), String> {
    if count != walked {
        return Err(format!(
            "{}'s {field} says {count}, but its chain has {walked} {what}: the version tables are corrupt",
            which()
        ));
    }
    Ok(())
}

fn tag_name(tag: u64) -> &'static str {
    match tag {
        DT_PLTRELSZ => "DT_PLTRELSZ",
        DT_HASH => "DT_HASH",
        DT_STRTAB => "DT_STRTAB",
        DT_SYMTAB => "DT_SYMTAB",
        DT_RELA => "DT_RELA",
        DT_RELASZ => "DT_RELASZ",
        DT_RELAENT => "DT_RELAENT",
        DT_STRSZ => "DT_STRSZ",
        DT_SYMENT => "DT_SYMENT",
        DT_INIT => "DT_INIT",
        DT_FINI => "DT_FINI",
        DT_REL => "DT_REL",
        DT_RELSZ => "DT_RELSZ",
        DT_RELENT => "DT_RELENT",
        DT_PLTREL => "DT_PLTREL",
        DT_JMPREL => "DT_JMPREL",
        DT_INIT_ARRAY => "DT_INIT_ARRAY",
        DT_FINI_ARRAY => "DT_FINI_ARRAY",
        DT_INIT_ARRAYSZ => "DT_INIT_ARRAYSZ",
        DT_FINI_ARRAYSZ => "DT_FINI_ARRAYSZ",
        DT_PREINIT_ARRAY => "DT_PREINIT_ARRAY",
        DT_PREINIT_ARRAYSZ => "DT_PREINIT_ARRAYSZ",
        DT_RELRSZ => "DT_RELRSZ",
        DT_RELR => "DT_RELR",
        DT_RELRENT => "DT_RELRENT",
        DT_GNU_HASH => "DT_GNU_HASH",
        DT_VERSYM => "DT_VERSYM",
        DT_VERDEF => "DT_VERDEF",
        DT_VERNEED => "DT_VERNEED",
        DT_VERDEFNUM => "DT_VERDEFNUM",
        DT_VERNEEDNUM => "DT_VERNEEDNUM",
        DT_RELACOUNT => "DT_RELACOUNT",
        DT_RELCOUNT => "DT_RELCOUNT",
        _ => "entry",
    }
}

/// The dynamic section's checks, over the image.
struct Linker<'a> {
    file: &'a dyn Bytes,
    image: &'a Image,
    entries: &'a [(u64, u64)],
    form: Form,
    /// Whether the library has a PT_TLS segment.
    thread_local: bool,
    /// The functions the unwind tables describe, `(start, end)`, sorted (none without them).
    functions: Vec<(u64, u64)>,
    /// Everything, or only what the linkage takes.
    whole: bool,
}

/// What one relocation does: its type, symbol index, and addend (`None`: in place, as REL
/// and RELR keep it).
#[derive(Debug, Clone, Copy)]
struct Relocation {
    kind: u32,
    symbol: u64,
    addend: Option<u64>,
}

impl<'a> Linker<'a> {
    /// The value of the last entry with `tag` (glibc keeps the last).
    fn get(&self, tag: u64) -> Option<u64> {
        self.entries.iter().rev().find(|(t, _)| *t == tag).map(|&(_, v)| v)
    }

    /// The value of `tag`, which `because` needs.
    fn require(&self, tag: u64, because: u64) -> Result<u64, String> {
        self.get(tag).ok_or_else(|| {
            format!(
                "its dynamic section has {} but no {}, which the loader reads with it",
                tag_name(because),
                tag_name(tag)
            )
        })
    }

    /// The table at `tag`, of `size` bytes, from the file.
    fn table(&self, tag: u64, vaddr: u64, size: u64) -> Result<Cow<'a, [u8]>, String> {
        if size > MAX_ENTRIES * 24 {
            return Err(format!("its {} table claims {size} bytes", tag_name(tag)));
        }
        let align = match tag {
            DT_STRTAB => 1,
            DT_VERSYM => 2,
            DT_HASH | DT_GNU_HASH | DT_VERDEF | DT_VERNEED => 4,
            _ => self.word(),
        };
        if !vaddr.is_multiple_of(align) {
            return Err(format!(
                "its {} table is at address {vaddr:#x}, which is not aligned to {align} bytes",
                tag_name(tag)
            ));
        }
        self.image
            .read(self.file, vaddr, size, || format!("its {} table", tag_name(tag)))
    }

    fn entry_size(&self, tag: u64, expected: u64) -> Result<(), String> {
        match self.get(tag) {
            Some(size) if size != expected => Err(format!(
                "its {} is {size}, but entries on this platform are {expected} bytes",
                tag_name(tag)
            )),
            _ => Ok(()),
        }
    }

    fn word(&self) -> u64 {
        self.form.word_size()
    }

    /// See [`pins`].
    fn pins(&self, exempt: &[&str]) -> Result<Pins, String> {
        let mut pins = Pins {
            no_delete: self.get(DT_FLAGS_1).is_some_and(|flags| flags & DF_1_NODELETE != 0),
            ..Pins::default()
        };
        let Some(symtab) = self.get(DT_SYMTAB) else {
            return Ok(pins);
        };
        let strtab = self
            .get(DT_STRTAB)
            .ok_or("its dynamic section has no string table (DT_STRTAB)")?;
        let strings = Strings(self.table(DT_STRTAB, strtab, self.require(DT_STRSZ, DT_STRTAB)?)?);
        let size: usize = if self.form.wide { 24 } else { 16 };
        let table = self.table(DT_SYMTAB, symtab, self.symbol_count()? * size as u64)?;
        let tally = |symbols: &mut Option<Symbols>, name: &str| match symbols {
            Some(symbols) => symbols.count += 1,
            None => {
                *symbols = Some(Symbols {
                    count: 1,
                    example: name.to_owned(),
                })
            }
        };
        // Symbol 0 is the null symbol.
        for symbol in table.chunks_exact(size).skip(1) {
            let (name, info, other, section) = if self.form.wide {
                (self.form.u32(symbol, 0), symbol[4], symbol[5], self.form.u16(symbol, 6))
            } else {
                (
                    self.form.u32(symbol, 0),
                    symbol[12],
                    symbol[13],
                    self.form.u16(symbol, 14),
                )
            };
            let (binding, kind, visibility) = (info >> 4, info & 0xf, other & 0x3);
            let name = std::str::from_utf8(strings.get(name.into()).unwrap_or_default()).unwrap_or("");
            if section == SHN_UNDEF {
                pins.thread_local_destructors |= binding == STB_GLOBAL && THREAD_ATEXIT.contains(&name);
            } else if binding == STB_GNU_UNIQUE {
                tally(&mut pins.gnu_unique, name);
            } else if matches!(binding, STB_GLOBAL | STB_WEAK)
                && matches!(visibility, STV_DEFAULT | STV_PROTECTED)
                && !matches!(kind, STT_SECTION | STT_FILE)
                && !name.is_empty()
                && !exempt.contains(&name)
                && !LINKER_NAMES.contains(&name)
            {
                tally(&mut pins.exports, name);
            }
        }
        Ok(pins)
    }

    fn check(&self) -> Result<Linkage, String> {
        self.consistent()?;
        let strtab = self
            .get(DT_STRTAB)
            .ok_or("its dynamic section has no string table (DT_STRTAB)")?;
        let strsz = self.require(DT_STRSZ, DT_STRTAB)?;
        let strings = Strings(self.table(DT_STRTAB, strtab, strsz)?);

        let mut linkage = Linkage {
            loads: self.image.loads.iter().map(|l| l.vaddr..l.vaddr + l.memsz).collect(),
            ..Linkage::default()
        };
        for &(tag, value) in self.entries {
            let name = match tag {
                DT_NEEDED => "DT_NEEDED",
                DT_SONAME => "DT_SONAME",
                DT_RPATH => "DT_RPATH",
                DT_RUNPATH => "DT_RUNPATH",
                DT_AUXILIARY => "DT_AUXILIARY",
                DT_FILTER => "DT_FILTER",
                DT_AUDIT => "DT_AUDIT",
                DT_DEPAUDIT => "DT_DEPAUDIT",
                _ => continue,
            };
            let string = strings.get(value).ok_or_else(|| strings.bad(name, value))?.to_vec();
            match tag {
                DT_NEEDED => linkage.needed.push(string),
                DT_RPATH => linkage.rpath = Some(string),
                DT_RUNPATH => linkage.runpath = Some(string),
                DT_SONAME => linkage.soname = Some(string),
                DT_AUXILIARY | DT_FILTER => linkage.filtees.push((name, string)),
                _ => linkage.audit.push((name, string)),
            }
        }

        if !self.whole {
            return Ok(linkage);
        }
        let sym_size = if self.form.wide { 24 } else { 16 };
        self.entry_size(DT_SYMENT, sym_size)?;
        // The loader reads the symbols the hash table reaches and those relocations name.
        let relocations = self.relocations()?;
        let needed_symbols = relocations
            .values()
            .filter(|r| r.symbol != 0)
            .map(|r| r.symbol + 1)
            .max()
            .unwrap_or(0);
        let symbols = self.symbol_count()?.max(needed_symbols);
        let symtab = self.get(DT_SYMTAB);
        let mut thread_local_symbols = false;
        if let Some(symtab) = symtab {
            let table = self.table(DT_SYMTAB, symtab, symbols.max(1) * sym_size)?;
            thread_local_symbols = self.symbols(&table, &strings)?;
        } else if symbols > 0 {
            return Err(
                "its dynamic section has a hash table or relocations with symbols, but no symbol table \
                        (DT_SYMTAB)"
                    .into(),
            );
        }
        if let Some(versym) = self.get(DT_VERSYM) {
            let table = self.table(DT_VERSYM, versym, symbols.max(1) * 2)?;
            let highest = self.versions(&strings, &linkage)?;
            if let Some(bad) = table
                .chunks_exact(2)
                .map(|v| self.form.u16(v, 0) & 0x7fff)
                .find(|&index| index > highest.max(1))
            {
                return Err(format!(
                    "its symbol version table (DT_VERSYM) names version index {bad}, but it defines and needs \
                     versions only up to {highest}"
                ));
            }
        } else {
            self.versions(&strings, &linkage)?;
        }

        // A thread-local relocation without a symbol is against this library's own block.
        let thread_local_relocations = relocations
            .values()
            .any(|r| r.symbol == 0 && TLS_RELOCATIONS.contains(&r.kind));
        if (thread_local_symbols || thread_local_relocations) && !self.thread_local {
            return Err("it defines thread-local variables but has no thread-local storage segment (PT_TLS)".into());
        }

        for (array, size) in [
            (DT_INIT_ARRAY, DT_INIT_ARRAYSZ),
            (DT_FINI_ARRAY, DT_FINI_ARRAYSZ),
            (DT_PREINIT_ARRAY, DT_PREINIT_ARRAYSZ),
        ] {
            if let Some(vaddr) = self.get(array) {
                let size = self.require(size, array)?;
                if !size.is_multiple_of(self.word()) || !vaddr.is_multiple_of(self.word()) {
                    return Err(format!(
                        "its {} (address {vaddr:#x}, {size} bytes) is not an aligned array of pointers",
                        tag_name(array)
                    ));
                }
                if self.image.backing(vaddr, size).is_none() {
                    return Err(outside(&format!("its {} table", tag_name(array)), vaddr, size));
                }
                self.functions(array, vaddr, size, &relocations)?;
            }
        }
        for function in [DT_INIT, DT_FINI] {
            if let Some(vaddr) = self.get(function) {
                match self.image.backing(vaddr, 1) {
                    Some(load) if load.flags & PF_X != 0 => {}
                    _ => {
                        return Err(format!(
                            "its {} function (address {vaddr:#x}) is not inside an executable loadable segment",
                            tag_name(function)
                        ));
                    }
                }
                self.function_start(|| format!("its {} function", tag_name(function)), vaddr)?;
            }
        }
        Ok(linkage)
    }

    /// How many symbols the hash table says the symbol table has (0 without a hash table).
    fn symbol_count(&self) -> Result<u64, String> {
        if let Some(gnu) = self.get(DT_GNU_HASH) {
            let head = self.table(DT_GNU_HASH, gnu, 16)?;
            let (buckets, offset, bloom, _shift) = (
                u64::from(self.form.u32(&head, 0)),
                u64::from(self.form.u32(&head, 4)),
                u64::from(self.form.u32(&head, 8)),
                self.form.u32(&head, 12),
            );
            if !bloom.is_power_of_two() {
                return Err(format!(
                    "its GNU hash table (DT_GNU_HASH) has {bloom} bloom filter words, not a power of two"
                ));
            }
            if buckets > MAX_ENTRIES || bloom > MAX_ENTRIES {
                return Err(format!("its GNU hash table (DT_GNU_HASH) claims {buckets} buckets"));
            }
            let bucket_start = gnu + 16 + bloom * self.word();
            let table = self.table(DT_GNU_HASH, bucket_start, buckets * 4)?;
            let highest = table
                .chunks_exact(4)
                .map(|b| u64::from(self.form.u32(b, 0)))
                .max()
                .unwrap_or(0);
            if highest < offset {
                return Ok(offset);
            }
            // The chains follow the buckets, one word per symbol from `offset` on; the chain
            // of the highest bucket ends with the last symbol (its low bit set).
            let chains = bucket_start + buckets * 4;
            let mut index = highest;
            loop {
                let at = chains + (index - offset) * 4;
                let word = self.table(DT_GNU_HASH, at, 4)?;
                if self.form.u32(&word, 0) & 1 != 0 {
                    return Ok(index + 1);
                }
                index += 1;
                if index > MAX_ENTRIES {
                    return Err("its GNU hash table (DT_GNU_HASH) has a chain without an end".into());
                }
            }
        }
        if let Some(hash) = self.get(DT_HASH) {
            let head = self.table(DT_HASH, hash, 8)?;
            let (buckets, chains) = (u64::from(self.form.u32(&head, 0)), u64::from(self.form.u32(&head, 4)));
            if buckets > MAX_ENTRIES || chains > MAX_ENTRIES {
                return Err(format!(
                    "its hash table (DT_HASH) claims {buckets} buckets and {chains} symbols"
                ));
            }
            let table = self.table(DT_HASH, hash + 8, (buckets + chains) * 4)?;
            if let Some(bad) = table
                .chunks_exact(4)
                .map(|b| u64::from(self.form.u32(b, 0)))
                .find(|&i| i >= chains)
            {
                return Err(format!(
                    "its hash table (DT_HASH) refers to symbol {bad}, but has only {chains}"
                ));
            }
            return Ok(chains);
        }
        Ok(0)
    }

    /// Every symbol's name is a string, a defined object lies in the image and a defined
    /// function in an executable segment. Returns whether any defined symbol is thread-local.
    fn symbols(&self, table: &[u8], strings: &Strings) -> Result<bool, String> {
        let mut thread_local = false;
        let size = if self.form.wide { 24 } else { 16 };
        for (n, symbol) in table.chunks_exact(size).enumerate() {
            let (name, info, section, value) = if self.form.wide {
                (
                    self.form.u32(symbol, 0),
                    symbol[4],
                    self.form.u16(symbol, 6),
                    self.form.u64(symbol, 8),
                )
            } else {
                (
                    self.form.u32(symbol, 0),
                    symbol[12],
                    self.form.u16(symbol, 14),
                    self.form.u32(symbol, 4).into(),
                )
            };
            if strings.get(name.into()).is_none() {
                return Err(strings.bad(&format!("symbol {n}'s name"), name.into()));
            }
            let kind = info & 0xf;
            let defined = section != SHN_UNDEF && section < SHN_LORESERVE;
            thread_local |= defined && kind == STT_TLS;
            let (place, segment) = match kind {
                STT_FUNC if defined => (
                    self.image.backing(value, 1).filter(|load| load.flags & PF_X != 0),
                    "executable loadable segment",
                ),
                STT_OBJECT if defined => (self.image.mapping(value, 1), "loadable segment"),
                // Other defined symbols (markers such as `_end`) may point one past the image.
                STT_TLS => continue,
                _ if defined => (
                    (self.image.start() <= value && value <= self.image.end()).then_some(&self.image.loads[0]),
                    "loadable segment",
                ),
                _ => continue,
            };
            if place.is_none() {
                return Err(format!(
                    "its symbol {n} ({}) has address {value:#x}, outside every {segment}",
                    String::from_utf8_lossy(strings.get(name.into()).unwrap_or_default()),
                ));
            }
        }
        Ok(thread_local)
    }

    /// Checks the tag pairs the loader reads together: a size or count without its table
    /// means the table's entry was lost, and the loader would act on half the information.
    fn consistent(&self) -> Result<(), String> {
        let pairs = [
            (DT_RELASZ, DT_RELA),
            (DT_RELAENT, DT_RELA),
            (DT_RELACOUNT, DT_RELA),
            (DT_RELSZ, DT_REL),
            (DT_RELENT, DT_REL),
            (DT_RELCOUNT, DT_REL),
            (DT_PLTRELSZ, DT_JMPREL),
            (DT_PLTREL, DT_JMPREL),
            (DT_RELRSZ, DT_RELR),
            (DT_RELRENT, DT_RELR),
            (DT_INIT_ARRAYSZ, DT_INIT_ARRAY),
            (DT_FINI_ARRAYSZ, DT_FINI_ARRAY),
            (DT_PREINIT_ARRAYSZ, DT_PREINIT_ARRAY),
            (DT_VERDEFNUM, DT_VERDEF),
            (DT_VERNEEDNUM, DT_VERNEED),
            (DT_VERDEF, DT_VERSYM),
            (DT_VERNEED, DT_VERSYM),
        ];
        for (with, table) in pairs {
            if self.get(with).is_some() && self.get(table).is_none() {
                return Err(format!(
                    "its dynamic section has {} but no {}: an entry was lost or overwritten",
                    tag_name(with),
                    tag_name(table)
                ));
            }
        }
        Ok(())
    }

    /// The functions of an init or fini array: each slot is relocated (a library loaded
    /// anywhere holds no absolute address), and a relative one points into an executable
    /// segment.
    fn functions(&self, array: u64, vaddr: u64, size: u64, relocations: &Relocations) -> Result<(), String> {
        let Some(relative) = RELATIVE else { return Ok(()) };
        let slots = self.table(array, vaddr, size)?;
        for (n, slot) in slots.chunks_exact(self.word() as usize).enumerate() {
            let at = vaddr + n as u64 * self.word();
            let Some(relocation) = relocations.get(at) else {
                return Err(format!(
                    "its {} slot {n} (address {at:#x}) is not relocated, so the loader would call an absolute \
                     address",
                    tag_name(array)
                ));
            };
            if relocation.kind != relative {
                continue;
            }
            let target = relocation.addend.unwrap_or(self.form.word(slot, 0));
            if self.image.backing(target, 1).is_none_or(|load| load.flags & PF_X == 0) {
                return Err(format!(
                    "its {} slot {n} points to {target:#x}, outside every executable loadable segment",
                    tag_name(array)
                ));
            }
            self.function_start(|| format!("its {} slot {n}", tag_name(array)), target)?;
        }
        Ok(())
    }

    /// Refuses `address` (of `what`, which the loader calls) when the unwind tables place it
    /// inside a function rather than at a function's start.
    fn function_start(&self, what: impl FnOnce() -> String, address: u64) -> Result<(), String> {
        match unwind::inside(&self.functions, address) {
            Some(start) => Err(format!(
                "{} (address {address:#x}) points inside the function that starts at {start:#x}, by its \
                 unwind tables (PT_GNU_EH_FRAME): the loader would start running code mid-function",
                what()
            )),
            None => Ok(()),
        }
    }

    /// Walks DT_VERDEF and DT_VERNEED as glibc's version check does (each chain of records
    /// and of their names to the record whose next offset is 0) and as readers that go by the
    /// counts do (DT_VERDEFNUM, DT_VERNEEDNUM, `vd_cnt`, `vn_cnt`), which must agree; every
    /// needed version's library must be one glibc will find (see the module's doc). Returns
    /// the highest version index they give.
    fn versions(&self, strings: &Strings, linkage: &Linkage) -> Result<u16, String> {
        let mut highest = 0;
        if let Some(start) = self.get(DT_VERDEF) {
            let records = self.chain(DT_VERDEF, start, 20, 16, |at, record, n| {
                let which = || format!("its version definition {n} (DT_VERDEF, address {at:#x})");
                record_version(which, self.form.u16(record, 0))?;
                highest = highest.max(self.form.u16(record, 4) & 0x7fff);
                let names = self.chain(
                    DT_VERDEF,
                    self.step(at, self.form.u32(record, 12))?,
                    8,
                    4,
                    |_, name, _| {
                        let offset = u64::from(self.form.u32(name, 0));
                        strings
                            .get(offset)
                            .ok_or_else(|| strings.bad("a version definition's name", offset))?;
                        Ok(())
                    },
                )?;
                agree(which, "vd_cnt", self.form.u16(record, 6).into(), "names", names)
            })?;
            if let Some(count) = self.get(DT_VERDEFNUM) {
                agree(
                    || "its DT_VERDEFNUM".into(),
                    "value",
                    count,
                    "version definitions",
                    records,
                )?;
            }
        }
        if let Some(start) = self.get(DT_VERNEED) {
            let known: Vec<&[u8]> = linkage
                .needed
                .iter()
                .chain(
                    linkage
                        .filtees
                        .iter()
                        .filter(|(tag, _)| *tag == "DT_FILTER")
                        .map(|(_, name)| name),
                )
                .map(Vec::as_slice)
                .collect();
            let records = self.chain(DT_VERNEED, start, 16, 12, |at, record, n| {
                let which = || format!("its needed version record {n} (DT_VERNEED, address {at:#x})");
                record_version(which, self.form.u16(record, 0))?;
                let file = u64::from(self.form.u32(record, 4));
                let library = strings
                    .get(file)
                    .ok_or_else(|| strings.bad("a needed version's library", file))?;
                if !known.contains(&library) {
                    return Err(format!(
                        "its needed versions (DT_VERNEED) name the library \"{}\", which is not one it needs \
                         (DT_NEEDED) or filters (DT_FILTER): glibc's version check would find no such library \
                         and abort the process",
                        String::from_utf8_lossy(library).escape_debug()
                    ));
                }
                let names = self.chain(
                    DT_VERNEED,
                    self.step(at, self.form.u32(record, 8))?,
                    16,
                    12,
                    |_, entry, _| {
                        highest = highest.max(self.form.u16(entry, 6) & 0x7fff);
                        let name = u64::from(self.form.u32(entry, 8));
                        strings
                            .get(name)
                            .ok_or_else(|| strings.bad("a needed version's name", name))?;
                        Ok(())
                    },
                )?;
                agree(which, "vn_cnt", self.form.u16(record, 2).into(), "versions", names)
            })?;
            if let Some(count) = self.get(DT_VERNEEDNUM) {
                agree(
                    || "its DT_VERNEEDNUM".into(),
                    "value",
                    count,
                    "needed version records",
                    records,
                )?;
            }
        }
        Ok(highest)
    }

    /// Walks a chain of version records of `size` bytes from `start`, each giving the offset
    /// of the next (0: the last) at `next`, calling `each(address, record, index)`; every
    /// record is read from the file, aligned, inside the image. Returns how many there are.
    fn chain(
        &self,
        tag: u64,
        start: u64,
        size: u64,
        next: usize,
        mut each: impl FnMut(u64, &[u8], u64) -> Result<(), String>,
    ) -> Result<u64, String> {
        let mut at = start;
        for n in 0..MAX_ENTRIES {
            let record = self.table(tag, at, size)?;
            each(at, &record, n)?;
            match self.form.u32(&record, next) {
                0 => return Ok(n + 1),
                step => at = self.step(at, step)?,
            }
        }
        Err(format!(
            "its {} chain has more than {MAX_ENTRIES} records",
            tag_name(tag)
        ))
    }

    /// The address `offset` bytes after the version record at `at`.
    fn step(&self, at: u64, offset: u32) -> Result<u64, String> {
        at.checked_add(offset.into())
            .ok_or_else(|| format!("a version record at {at:#x} points {offset} bytes past the address space"))
    }

    /// The relocation tables: sizes, entry sizes, each entry's target, and the count of
    /// leading relative relocations. Returns every relocation by target address.
    fn relocations(&self) -> Result<Relocations, String> {
        let mut all = Vec::new();
        let (rela_size, rel_size) = if self.form.wide { (24, 16) } else { (12, 8) };
        let text_relocations =
            self.get(DT_TEXTREL).is_some() || self.get(DT_FLAGS).is_some_and(|flags| flags & DF_TEXTREL != 0);
        let mut tables = Vec::new();
        if let Some(rela) = self.get(DT_RELA) {
            let size = self.require(DT_RELASZ, DT_RELA)?;
            self.require(DT_RELAENT, DT_RELA)?;
            self.entry_size(DT_RELAENT, rela_size)?;
            tables.push((DT_RELA, rela, size, rela_size));
        }
        if let Some(rel) = self.get(DT_REL) {
            let size = self.require(DT_RELSZ, DT_REL)?;
            self.require(DT_RELENT, DT_REL)?;
            self.entry_size(DT_RELENT, rel_size)?;
            tables.push((DT_REL, rel, size, rel_size));
        }
        if let Some(plt) = self.get(DT_PLTREL) {
            let expected = if RELA_PLATFORM { DT_RELA } else { DT_REL };
            if plt != expected {
                return Err(format!(
                    "its DT_PLTREL is {plt}, but this platform's relocations are {}",
                    tag_name(expected)
                ));
            }
        }
        if let Some(jmprel) = self.get(DT_JMPREL) {
            let size = self.require(DT_PLTRELSZ, DT_JMPREL)?;
            self.require(DT_PLTREL, DT_JMPREL)?;
            let entry = if RELA_PLATFORM { rela_size } else { rel_size };
            tables.push((DT_JMPREL, jmprel, size, entry));
        }
        let writable = |vaddr: u64| {
            self.image
                .mapping(vaddr, self.word())
                .is_some_and(|load| text_relocations || load.flags & PF_W != 0)
        };
        for (tag, vaddr, size, entry) in tables {
            if size == 0 && tag == DT_JMPREL {
                // Linkers write DT_JMPREL only for PLT relocations; without them every call
                // through the PLT jumps to an unrelocated address.
                return Err("its DT_JMPREL table is empty (DT_PLTRELSZ is 0)".into());
            }
            if !size.is_multiple_of(entry) {
                return Err(format!(
                    "its {} table is {size} bytes, not whole entries",
                    tag_name(tag)
                ));
            }
            let table = self.table(tag, vaddr, size)?;
            let relative_count = match tag {
                DT_RELA => self.get(DT_RELACOUNT),
                DT_REL => self.get(DT_RELCOUNT),
                _ => None,
            };
            if let Some(count) = relative_count
                && count > size / entry
            {
                return Err(format!(
                    "its {} is {count}, but {} holds only {} relocations",
                    if tag == DT_RELA { "DT_RELACOUNT" } else { "DT_RELCOUNT" },
                    tag_name(tag),
                    size / entry
                ));
            }
            let with_addend = entry == rela_size;
            for (n, relocation) in table.chunks_exact(entry as usize).enumerate() {
                let (target, symbol, kind) = if self.form.wide {
                    let info = self.form.u64(relocation, 8);
                    (self.form.u64(relocation, 0), info >> 32, info as u32)
                } else {
                    let info = self.form.u32(relocation, 4);
                    (self.form.u32(relocation, 0).into(), u64::from(info >> 8), info & 0xff)
                };
                let addend = with_addend.then(|| self.form.word(relocation, 16));
                if let (Some(count), Some(relative)) = (relative_count, RELATIVE)
                    && (n as u64) < count
                    && kind != relative
                {
                    return Err(format!(
                        "its {} says its first {count} relocations are relative, but relocation {n} is of type {kind}",
                        if tag == DT_RELA { "DT_RELACOUNT" } else { "DT_RELCOUNT" }
                    ));
                }
                if !writable(target) {
                    return Err(format!(
                        "its relocation {n} in {} writes to address {target:#x}, outside every writable loadable \
                         segment",
                        tag_name(tag)
                    ));
                }
                if symbol > MAX_ENTRIES {
                    return Err(format!(
                        "its relocation {n} in {} refers to symbol {symbol}",
                        tag_name(tag)
                    ));
                }
                all.push((target, Relocation { kind, symbol, addend }));
            }
        }
        if let Some(relr) = self.get(DT_RELR) {
            let size = self.require(DT_RELRSZ, DT_RELR)?;
            self.require(DT_RELRENT, DT_RELR)?;
            self.entry_size(DT_RELRENT, self.word())?;
            if !size.is_multiple_of(self.word()) {
                return Err(format!("its DT_RELR table is {size} bytes, not whole entries"));
            }
            let table = self.table(DT_RELR, relr, size)?;
            let mut base = 0u64;
            for word in table.chunks_exact(self.word() as usize) {
                let word = self.form.word(word, 0);
                let targets: Vec<u64> = if word & 1 == 0 {
                    base = word.wrapping_add(self.word());
                    vec![word]
                } else {
                    let bits = self.word() * 8 - 1;
                    let targets = (0..bits)
                        .filter(|i| (word >> (i + 1)) & 1 != 0)
                        .map(|i| base.wrapping_add(i * self.word()))
                        .collect();
                    base = base.wrapping_add(bits * self.word());
                    targets
                };
                for target in targets {
                    if !writable(target) {
                        return Err(format!(
                            "its DT_RELR relocations write to address {target:#x}, outside every writable loadable \
                             segment"
                        ));
                    }
                    if let Some(kind) = RELATIVE {
                        all.push((
                            target,
                            Relocation {
                                kind,
                                symbol: 0,
                                addend: None,
                            },
                        ));
                    }
                }
            }
        }
        Ok(Relocations::new(all))
    }
}

/// Every relocation by target address, the last one for each target (as a map filled in
/// table order keeps it): sorted once, looked up by binary search.
struct Relocations(Vec<(u64, Relocation)>);

impl Relocations {
    fn new(mut all: Vec<(u64, Relocation)>) -> Relocations {
        // Latest first among equal targets (the sort is stable), then keep the first of each.
        all.reverse();
        all.sort_by_key(|&(target, _)| target);
        all.dedup_by_key(|&mut (target, _)| target);
        Relocations(all)
    }

    fn get(&self, target: u64) -> Option<&Relocation> {
        let at = self.0.binary_search_by_key(&target, |&(target, _)| target).ok()?;
        Some(&self.0[at].1)
    }

    fn values(&self) -> impl Iterator<Item = &Relocation> {
        self.0.iter().map(|(_, relocation)| relocation)
    }
}

/// The dynamic string table.
struct Strings<'a>(Cow<'a, [u8]>);

impl Strings<'_> {
    /// The NUL-terminated string at `offset`, without its NUL.
    fn get(&self, offset: u64) -> Option<&[u8]> {
        let rest = self.0.get(usize::try_from(offset).ok()?..)?;
        let end = rest.iter().position(|&b| b == 0)?;
        Some(&rest[..end])
    }

    fn bad(&self, what: &str, offset: u64) -> String {
        format!(
            "its {what} (string at offset {offset}) is not a string of its string table (DT_STRTAB, {} bytes)",
            self.0.len()
        )
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    /// A target relocated more than once keeps its last relocation (the one the loader
    /// writes last), wherever the others are in the tables.
    #[test]
    fn the_last_relocation_of_a_target_is_the_one_kept() {
        let relocation = |kind| super::Relocation {
            kind,
            symbol: 0,
            addend: None,
        };
        let relocations = super::Relocations::new(vec![
            (16, relocation(1)),
            (8, relocation(2)),
            (16, relocation(3)),
            (8, relocation(4)),
            (24, relocation(5)),
            (16, relocation(6)),
        ]);
        let kind = |target| relocations.get(target).map(|r| r.kind);
        assert_eq!(
            (kind(8), kind(16), kind(24), kind(0)),
            (Some(4), Some(6), Some(5), None)
        );
        assert_eq!(relocations.values().count(), 3);
    }

    /// Every shared library mapped into this test process (the C library, the loader, the
    /// unwinder…) passes: the check refuses nothing a linker writes.
    #[test]
    fn every_library_this_process_has_mapped_passes() {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let mut libraries: Vec<&str> = maps
            .lines()
            .filter_map(|line| line.split_whitespace().nth(5))
            .filter(|path| path.starts_with('/') && path.contains(".so"))
            .collect();
        libraries.sort_unstable();
        libraries.dedup();
        assert!(!libraries.is_empty(), "no shared library mapped: {maps}");
        for path in libraries {
            let file = std::fs::File::open(path).unwrap();
            let len = file.metadata().unwrap().len();
            let linkage = crate::Elf::new(file, len).check();
            assert!(linkage.is_ok(), "{path}: {linkage:?}");
        }
    }
}
