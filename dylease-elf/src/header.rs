//! A look at a library's ELF headers before the loader sees the file.
//!
//! Two bad inputs need it. A truncated library whose headers are intact is mapped by glibc
//! beyond the end of the file, and the first touch of a missing page kills the process with
//! `SIGBUS` inside `dlopen`: no error to report, no host left. And glibc reports a library
//! built for another architecture as "cannot open shared object file: No such file or
//! directory", which sends its user looking for a file that is right there. Both show in the
//! headers. Reading bytes runs no plugin code; this module is safe code only.

use crate::consts::{EHDR_LEN_32, EHDR_LEN_64, PT_LOAD};
use crate::source::{Elf, Form, ReadAt};

/// Checks that the file could be an ELF shared library for this process: the magic bytes, the
/// class, byte order, type and machine, and that every loadable segment lies inside the file,
/// wherever the program header table is. `Err` says what is wrong, as a phrase ("the file is
/// truncated: …"). A file that cannot be read passes: the checks that follow, or the loader,
/// report that.
pub(crate) fn check<S: ReadAt>(file: &Elf<S>) -> Result<(), String> {
    let len = file.file_len();
    // One read covers the ELF header and the program header table of every library a linker
    // writes (the table follows the header).
    let mut first = vec![0; FIRST_READ.min(usize::try_from(len).unwrap_or(FIRST_READ))];
    let Ok(got) = file.read_exactly(&mut first, 0) else {
        return Ok(());
    };
    first.truncate(got);
    let table = header(&first[..first.len().min(EHDR_LEN_64)], len)?;
    if table.end <= first.len() as u64 {
        return segments(&first, &table, len);
    }
    // Elsewhere in the file: read exactly the table, at most 65535 entries of 65535 bytes
    // as the header's 16-bit fields allow, and only after `header` saw it inside the file.
    let size = usize::from(table.phentsize) * usize::from(table.phnum);
    let mut bytes = vec![0; size];
    let Ok(got) = file.read_exactly(&mut bytes, table.phoff) else {
        return Ok(());
    };
    if got < size {
        // The file shrank since its length was taken.
        return Err(truncated(table.phoff + got as u64, table.end));
    }
    // `segments` reads entries at their offsets in the file: shift the table to offset 0.
    let moved = Table { phoff: 0, ..table };
    segments(&bytes, &moved, len)
}

/// How much of a library the first read takes: a page, which holds the headers of ordinary
/// libraries.
pub(crate) const FIRST_READ: usize = 4096;

/// Where a sound ELF header says its program header table is, and how to read it.
#[derive(Debug)]
struct Table {
    form: Form,
    /// Where the program header table starts in the bytes [`segments`] is given.
    phoff: u64,
    phentsize: u16,
    phnum: u16,
    /// The end of the program header table in the file: inside it, and past the ELF header.
    end: u64,
}

/// The form (class and byte order) the identification bytes at the start of `head` (the
/// file's first bytes; `len`: the file's length) name: `Err` if they are not an ELF file's.
/// Any class and byte order: what reads the file without running it (its manifest) reads a
/// file built for another machine too.
pub(crate) fn identify(head: &[u8], len: u64) -> Result<Form, String> {
    if head.len() < 4 || head[..4] != *b"\x7fELF" {
        return Err("it is not an ELF shared library (it does not begin with the ELF magic bytes)".into());
    }
    let wide = match head.get(4) {
        Some(1) => false,
        Some(2) => true,
        Some(other) => return Err(format!("its ELF class byte is invalid ({other})")),
        None => return Err(truncated(len, 5)),
    };
    let big_endian = match head.get(5) {
        Some(1) => false,
        Some(2) => true,
        Some(other) => return Err(format!("its ELF byte-order byte is invalid ({other})")),
        None => return Err(truncated(len, 6)),
    };
    Ok(Form { wide, big_endian })
}

/// [`identify`] of the file's first bytes. A file that cannot be read passes, as it does
/// [`check`]: the reading that follows reports that.
pub(crate) fn identified<S: ReadAt>(file: &Elf<S>) -> Result<(), String> {
    let mut head = [0; EHDR_LEN_64];
    let want = head.len().min(usize::try_from(file.file_len()).unwrap_or(EHDR_LEN_64));
    let Ok(got) = file.read_exactly(&mut head[..want], 0) else {
        return Ok(());
    };
    identify(&head[..got], file.file_len()).map(drop)
}

/// Checks the ELF header (`head`: the file's first bytes, at most 64 of them; `len`: the
/// file's length). `Ok(table)`: sound so far, and the program header table lies inside the
/// file.
fn header(head: &[u8], len: u64) -> Result<Table, String> {
    let Form { wide, big_endian } = identify(head, len)?;
    if wide != Form::NATIVE.wide {
        let (bits, this_bits) = if wide { (64, 32) } else { (32, 64) };
        return Err(format!(
            "it is a {bits}-bit ELF file, but this process is {this_bits}-bit"
        ));
    }
    if big_endian != Form::NATIVE.big_endian {
        return Err(byte_order(head, Form { wide, big_endian }));
    }
    let header_len = if wide { EHDR_LEN_64 } else { EHDR_LEN_32 };
    if head.len() < header_len {
        return Err(truncated(len, header_len as u64));
    }
    let form = Form { wide, big_endian };
    match form.u16(head, 16) {
        3 => {}
        1 => return Err("it is an object file, not a shared library; link it with `-shared`".into()),
        2 => return Err("it is an executable, not a shared library; link it with `-shared`".into()),
        other => return Err(format!("its ELF type is {other}, not a shared library (3)")),
    }
    let machine = form.u16(head, 18);
    if let Some(this) = THIS_MACHINE
        && machine != this
    {
        return Err(format!(
            "it is built for {} (ELF machine {machine}), but this process runs on {} (ELF machine {this})",
            machine_name(machine, wide),
            machine_name(this, Form::NATIVE.wide),
        ));
    }
    let (phoff, phentsize, phnum) = form.program_headers(head);
    if phnum == 0 || phentsize == 0 {
        return Err("it has no program headers, so there is nothing to load: it is not a linked shared library".into());
    }
    let end = phoff.saturating_add(u64::from(phentsize) * u64::from(phnum));
    if end > len {
        return Err(truncated(len, end));
    }
    if phoff < header_len as u64 {
        return Err(format!(
            "its program header table starts at byte {phoff}, inside the ELF header: the headers are corrupt"
        ));
    }
    Ok(Table {
        form,
        phoff,
        phentsize,
        phnum,
        end,
    })
}

/// Checks that every loadable segment lies inside the file. `bytes` holds the program header
/// table at `table.phoff` (the file's first bytes, or the table alone).
fn segments(bytes: &[u8], table: &Table, len: u64) -> Result<(), String> {
    let (phoff, phentsize, phnum) = (table.phoff, table.phentsize, table.phnum);
    let table_end = phoff.saturating_add(u64::from(phentsize) * u64::from(phnum));
    if (bytes.len() as u64) < table_end {
        // The file shrank since its header was read.
        return Err(truncated(bytes.len() as u64, table.end));
    }
    let form = table.form;
    let mut needed = 0u64;
    for i in 0..u64::from(phnum) {
        let entry = phoff + i * u64::from(phentsize);
        let Ok(entry) = usize::try_from(entry) else { break };
        let (kind, offset, size) = if form.wide {
            (
                form.u32(bytes, entry),
                form.u64(bytes, entry + 8),
                form.u64(bytes, entry + 32),
            )
        } else {
            (
                form.u32(bytes, entry),
                form.u32(bytes, entry + 4).into(),
                form.u32(bytes, entry + 16).into(),
            )
        };
        if kind == PT_LOAD {
            needed = needed.max(offset.saturating_add(size));
        }
    }
    if needed > len {
        Err(truncated(len, needed))
    } else {
        Ok(())
    }
}

fn truncated(len: u64, needed: u64) -> String {
    format!("the file is truncated: it has {len} bytes, but its ELF headers describe at least {needed}")
}

/// The refusal of a file of the other byte order (`form`, its first bytes `head`), naming its
/// machine and this process's: a plugin cross-built for s390x or ppc64 on a little-endian
/// host, say.
fn byte_order(head: &[u8], form: Form) -> String {
    let order = |big_endian: bool| if big_endian { "big" } else { "little" };
    // e_machine, in the file's byte order: the file's first 20 bytes hold it.
    let machine = (head.len() >= 20).then(|| form.u16(head, 18));
    let it = match machine {
        Some(machine) => format!(" ({}, ELF machine {machine})", machine_name(machine, form.wide)),
        None => String::new(),
    };
    let this = match THIS_MACHINE {
        Some(this) => format!(" ({}, ELF machine {this})", machine_name(this, Form::NATIVE.wide)),
        None => String::new(),
    };
    format!(
        "it is built for a {}-endian machine{it}, but this process runs on a {}-endian one{this}",
        order(form.big_endian),
        order(Form::NATIVE.big_endian)
    )
}

/// The ELF machine number of this process's architecture, where it is known.
const THIS_MACHINE: Option<u16> = if cfg!(target_arch = "x86_64") {
    Some(62)
} else if cfg!(target_arch = "aarch64") {
    Some(183)
} else if cfg!(target_arch = "x86") {
    Some(3)
} else if cfg!(target_arch = "arm") {
    Some(40)
} else if cfg!(any(target_arch = "riscv64", target_arch = "riscv32")) {
    Some(243)
} else if cfg!(target_arch = "powerpc64") {
    Some(21)
} else if cfg!(target_arch = "s390x") {
    Some(22)
} else if cfg!(target_arch = "loongarch64") {
    Some(258)
} else {
    None
};

/// The architecture ELF machine `machine` names, in a file of class `wide` (64-bit) where
/// the class tells two apart (s390 and s390x).
fn machine_name(machine: u16, wide: bool) -> String {
    match machine {
        22 if wide => "s390x".into(),
        3 => "x86".into(),
        8 => "MIPS".into(),
        20 => "PowerPC".into(),
        21 => "PowerPC64".into(),
        22 => "s390".into(),
        40 => "ARM".into(),
        62 => "x86_64".into(),
        183 => "AArch64".into(),
        243 => "RISC-V".into(),
        258 => "LoongArch".into(),
        other => format!("machine type {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check, on a file's whole contents.
    pub(super) fn check_bytes(bytes: &[u8]) -> Result<(), String> {
        check(&Elf::new(bytes, bytes.len() as u64))
    }

    /// A minimal 64-bit little-endian shared-object header with one PT_LOAD segment of
    /// `segment` bytes at offset 0.
    fn header_bytes(machine: u16, segment: u64) -> Vec<u8> {
        let mut bytes = vec![0u8; 64 + 56];
        bytes[..4].copy_from_slice(b"\x7fELF");
        bytes[4] = 2;
        bytes[5] = 1;
        bytes[16..18].copy_from_slice(&3u16.to_le_bytes());
        bytes[18..20].copy_from_slice(&machine.to_le_bytes());
        bytes[32..40].copy_from_slice(&64u64.to_le_bytes());
        bytes[54..56].copy_from_slice(&56u16.to_le_bytes());
        bytes[56..58].copy_from_slice(&1u16.to_le_bytes());
        bytes[64..68].copy_from_slice(&PT_LOAD.to_le_bytes());
        bytes[64 + 32..64 + 40].copy_from_slice(&segment.to_le_bytes());
        bytes
    }

    #[test]
    #[cfg(all(target_arch = "x86_64", target_endian = "little"))]
    fn headers_show_the_cause() {
        assert_eq!(check_bytes(&header_bytes(62, 120)), Ok(()), "a sound header");
        assert!(check_bytes(b"hello").unwrap_err().contains("not an ELF shared library"));
        assert_eq!(
            check_bytes(&header_bytes(183, 120)).unwrap_err(),
            "it is built for AArch64 (ELF machine 183), but this process runs on x86_64 (ELF machine 62)"
        );
        assert_eq!(
            check_bytes(&header_bytes(62, 4096)).unwrap_err(),
            "the file is truncated: it has 120 bytes, but its ELF headers describe at least 4096"
        );
        assert!(
            check_bytes(&header_bytes(62, 120)[..40])
                .unwrap_err()
                .contains("truncated: it has 40 bytes")
        );
        assert!(
            check_bytes(&header_bytes(62, 120)[..100])
                .unwrap_err()
                .contains("describe at least 120")
        );
        let mut thirty_two = header_bytes(62, 120);
        thirty_two[4] = 1;
        assert_eq!(
            check_bytes(&thirty_two).unwrap_err(),
            "it is a 32-bit ELF file, but this process is 64-bit"
        );
        let mut object = header_bytes(62, 120);
        object[16] = 1;
        assert!(check_bytes(&object).unwrap_err().contains("link it with `-shared`"));
        // A bare header without a program header table: refused, not a panic.
        let mut bare = header_bytes(62, 120)[..64].to_vec();
        bare[32..40].fill(0);
        bare[54..58].fill(0);
        assert!(check_bytes(&bare).unwrap_err().contains("no program headers"));
        let mut inside = header_bytes(62, 120);
        inside[32..40].copy_from_slice(&0u64.to_le_bytes());
        assert!(check_bytes(&inside).unwrap_err().contains("inside the ELF header"));
    }

    #[test]
    fn a_file_that_shrank_after_its_header_was_read_is_truncated_not_a_panic() {
        let bytes = header_bytes(THIS_MACHINE.unwrap_or(62), 120);
        let table = Table {
            form: Form {
                wide: true,
                big_endian: false,
            },
            phoff: 64,
            phentsize: 56,
            phnum: 1,
            end: 120,
        };
        assert!(segments(&bytes[..10], &table, 120).unwrap_err().contains("truncated"));
    }
}

/// Random mutations and truncations of real plugin libraries (the C test plugins, compiled
/// here): the check never panics, and each refusal is a phrase that completes "cannot load
/// plugin file `…`: " (the host names the file). Mutated files are never
/// opened with `dlopen`: one that passes the header check may still crash the loader.
#[cfg(all(test, target_os = "linux", target_arch = "x86_64"))]
mod mutations {
    use super::tests::check_bytes;
    use super::*;
    use crate::testing::{Scratch, compile};

    /// The form of the libraries compiled here.
    const LITTLE: Form = Form {
        wide: true,
        big_endian: false,
    };

    /// A seeded xorshift64* generator: the same cases on every run.
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

    /// The end of the last loadable segment of a sound 64-bit little-endian library.
    fn loaded_end(bytes: &[u8]) -> u64 {
        let read = LITTLE;
        let (phoff, phentsize, phnum) = read.program_headers(bytes);
        (0..u64::from(phnum))
            .map(|i| (phoff + i * u64::from(phentsize)) as usize)
            .filter(|&entry| read.u32(bytes, entry) == PT_LOAD)
            .map(|entry| read.u64(bytes, entry + 8) + read.u64(bytes, entry + 32))
            .max()
            .unwrap()
    }

    /// `library` with its program header table copied to `at` (past its end) and its last
    /// loadable segment claiming 64 KiB more than the file then has: a truncated library
    /// whose headers are far from the ELF header.
    fn far_and_truncated(library: &[u8], at: usize) -> Vec<u8> {
        let read = LITTLE;
        let (phoff, phentsize, phnum) = read.program_headers(library);
        let (phoff, phentsize) = (phoff as usize, usize::from(phentsize));
        let mut bytes = library.to_vec();
        bytes.resize(at, 0);
        bytes.extend_from_slice(&library[phoff..phoff + phentsize * usize::from(phnum)]);
        bytes[32..40].copy_from_slice(&(at as u64).to_le_bytes());
        let last = (0..usize::from(phnum))
            .map(|i| at + i * phentsize)
            .rfind(|&entry| read.u32(library, phoff + entry - at) == PT_LOAD)
            .unwrap();
        let offset = read.u64(library, phoff + last - at + 8);
        let claimed = (bytes.len() as u64 + 65536 - offset).to_le_bytes();
        bytes[last + 32..last + 40].copy_from_slice(&claimed);
        bytes[last + 40..last + 48].copy_from_slice(&claimed);
        bytes
    }

    /// Where a mutation writes: mostly the ELF header and the program header table, which
    /// the check reads, sometimes anywhere.
    fn spot(rng: &mut Rng, bytes: &[u8]) -> usize {
        let read = LITTLE;
        let (phoff, phentsize, phnum) = read.program_headers(bytes);
        let table = usize::from(phentsize) * usize::from(phnum);
        match rng.below(3) {
            0 => rng.below(EHDR_LEN_64),
            1 if table > 0 => (phoff as usize).saturating_add(rng.below(table)),
            _ => rng.below(bytes.len()),
        }
    }

    /// A value worth writing into a header field: small, extreme, or near the file's length.
    fn value(rng: &mut Rng, len: usize) -> u64 {
        let len = len as u64;
        [
            0,
            1,
            0xffff,
            u64::MAX,
            u64::MAX / 2,
            len,
            len - 1,
            len + 1,
            1 << 20,
            2 << 20,
            rng.next(),
        ][rng.below(11)]
    }

    fn mutate(rng: &mut Rng, original: &[u8]) -> (Vec<u8>, String) {
        let mut bytes = original.to_vec();
        let mut what = Vec::new();
        for _ in 0..1 + rng.below(3) {
            if bytes.is_empty() {
                break;
            }
            match rng.below(4) {
                0 => {
                    let at = spot(rng, &bytes).min(bytes.len() - 1);
                    bytes[at] ^= 1 << rng.below(8);
                    what.push(format!("flip a bit at {at}"));
                }
                1 => {
                    let at = spot(rng, &bytes).min(bytes.len() - 1);
                    bytes[at] = rng.next() as u8;
                    what.push(format!("set byte {at}"));
                }
                2 => {
                    // A 2-, 4- or 8-byte field, where header fields are.
                    let width = [2, 4, 8][rng.below(3)];
                    let at = spot(rng, &bytes) & !(width - 1);
                    let field = value(rng, bytes.len()).to_le_bytes();
                    if let Some(target) = bytes.get_mut(at..at + width) {
                        target.copy_from_slice(&field[..width]);
                        what.push(format!("write {width} bytes at {at}"));
                    }
                }
                _ => {
                    let len = rng.below(bytes.len() + 1);
                    bytes.truncate(len);
                    what.push(format!("truncate to {len}"));
                }
            }
        }
        (bytes, what.join(", "))
    }

    /// Random mutations of files with manifest notes, mostly inside the notes: reading the
    /// manifest gives a manifest, none, or a refusal that is a phrase, never a panic.
    #[test]
    fn mutated_manifests_never_panic_and_each_refusal_is_a_phrase() {
        use crate::manifest::{FLAG_COMPLETE, NT_PASS, NT_PLUGIN, build};
        let mut several = build::dylease(NT_PASS, &build::pass("first", "iface.v1"), 4);
        several.extend(build::note(b"GNU\0", 3, &[7; 20], 4));
        several.extend(build::dylease(
            NT_PLUGIN,
            &build::plugin(1, FLAG_COMPLETE, "p", "0.1"),
            4,
        ));
        let eight = build::dylease(NT_PASS, &build::pass("second", ""), 8);
        // Many program headers for one run of notes: repeated, overlapping (starting at each
        // note, or between notes), empty, of either alignment; the pass record in a segment
        // of its own (in two, it would be declared twice).
        let mut notes = build::dylease(NT_PLUGIN, &build::plugin(1, 0, "p", "0.1"), 4);
        let second = notes.len() as u64;
        notes.extend(build::note(b"GNU\0", 3, &[7; 20], 4));
        let (shared, pass) = (notes.len() as u64, build::dylease(NT_PASS, &build::pass("x", ""), 4));
        notes.extend(&pass);
        let mut entries = vec![(0, shared, 4); 24];
        entries.extend((0..shared / 4).map(|i| (4 * i, shared - 4 * i, 4)));
        entries.extend([(0, shared, 8), (second, shared - second, 8)]);
        entries.extend([(0, 0, 4), (shared, 0, 4), (shared, pass.len() as u64, 4)]);
        entries.extend(vec![(shared, pass.len() as u64, 4); 8]);
        let many = build::raw(&entries, &notes);
        // A truncated foreign note ending a segment of dylease notes, and alone.
        let gnu = build::note(b"GNU\0", 3, &[7; 20], 4);
        let mut cut = build::dylease(NT_PLUGIN, &build::plugin(1, 0, "p", "0.1"), 4);
        cut.extend_from_slice(&gnu[..15]);
        let cut = build::file(&[(4, cut), (4, gnu[..7].to_vec())]);
        let originals = [build::sound(), build::file(&[(4, several), (8, eight)]), many, cut];
        for (n, original) in originals.iter().enumerate() {
            let file = Elf::new(&original[..], original.len() as u64);
            assert!(file.manifest().unwrap().is_some(), "original {n}");
        }
        let mut rng = Rng(0x5eed_d11e_a5e0_0002);
        let (mut refused, mut read) = (0, 0);
        for case in 0..2048 {
            let original = &originals[case % originals.len()];
            let mut bytes = original.clone();
            let mut what = Vec::new();
            for _ in 0..1 + rng.below(3) {
                // Past the ELF header: the program headers and the notes.
                let at = EHDR_LEN_64 + rng.below(bytes.len().saturating_sub(EHDR_LEN_64));
                match rng.below(4) {
                    0 if at < bytes.len() => {
                        bytes[at] ^= 1 << rng.below(8);
                        what.push(format!("flip a bit at {at}"));
                    }
                    1 => {
                        let at = at & !3;
                        let field = (value(&mut rng, bytes.len()) as u32).to_le_bytes();
                        if let Some(target) = bytes.get_mut(at..at + 4) {
                            target.copy_from_slice(&field);
                            what.push(format!("write 4 bytes at {at}"));
                        }
                    }
                    2 => {
                        let at = at & !7;
                        let field = value(&mut rng, bytes.len()).to_le_bytes();
                        if let Some(target) = bytes.get_mut(at..at + 8) {
                            target.copy_from_slice(&field);
                            what.push(format!("write 8 bytes at {at}"));
                        }
                    }
                    _ => {
                        bytes.truncate(at);
                        what.push(format!("truncate to {at}"));
                    }
                }
            }
            let file = Elf::new(&bytes[..], bytes.len() as u64);
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| file.manifest()));
            match outcome.unwrap_or_else(|_| panic!("case {case} ({what:?}) panicked")) {
                Ok(_) => read += 1,
                Err(refusal) => {
                    refused += 1;
                    let reason = refusal.reason();
                    assert!(
                        reason.starts_with(|c: char| c.is_ascii_lowercase()) && !reason.ends_with(['.', '\n']),
                        "case {case} ({what:?}): {reason:?}"
                    );
                }
            }
        }
        assert!(refused > 200 && read > 200, "{refused} refused, {read} read");
    }

    #[test]
    fn mutated_and_truncated_libraries_never_panic_and_each_refusal_is_a_phrase() {
        let scratch = Scratch::new("mutations");
        let originals = [
            compile(&scratch.0, &["tests/plugins/by_hand.c"], &[]),
            compile(&scratch.0, &["tests/plugins/ctor.c"], &["-Wl,-z,nodelete"]),
        ];
        let path = scratch.0.join("libmutated.so");
        let mut rng = Rng(0x5eed_d11e_a5e0_0001);
        let (mut refused, mut passed) = (0, 0);
        for case in 0..256 {
            let original = &originals[case % originals.len()];
            let (bytes, what) = mutate(&mut rng, original);
            std::fs::write(&path, &bytes).unwrap();
            let file = std::fs::File::open(&path).unwrap();
            let file = Elf::new(file, bytes.len() as u64);
            let check = std::panic::AssertUnwindSafe(|| file.check());
            let outcome = std::panic::catch_unwind(check);
            let outcome = outcome.unwrap_or_else(|_| panic!("case {case} ({what}) panicked"));
            let manifest = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| file.manifest()));
            let manifest = manifest.unwrap_or_else(|_| panic!("case {case} ({what}): reading the manifest panicked"));
            if let Err(refusal) = manifest {
                assert!(!refusal.reason().is_empty(), "case {case} ({what})");
            }
            match outcome {
                Ok(_) => passed += 1,
                Err(refusal) => {
                    refused += 1;
                    let reason = refusal.reason();
                    assert!(
                        reason.starts_with(|c: char| c.is_ascii_lowercase()) && !reason.ends_with(['.', '\n']),
                        "case {case} ({what}): {reason:?}"
                    );
                }
            }
        }
        // Both outcomes occur, or the generator tests less than it claims.
        assert!(refused > 25 && passed > 25, "{refused} refused, {passed} passed");

        // Truncations alone: refused exactly when they cut into a loadable segment, wherever
        // the program headers are.
        let mut variants = originals.to_vec();
        for original in &originals {
            let at = original.len() + rng.below(3 << 20);
            variants.push(far_and_truncated(original, at));
        }
        for (n, original) in variants.iter().enumerate() {
            let end = loaded_end(original);
            // Random lengths, and the whole file.
            for round in 0..33 {
                let len = if round == 0 {
                    original.len()
                } else {
                    rng.below(original.len() + 1)
                };
                let outcome = check_bytes(&original[..len]);
                assert_eq!(
                    outcome.is_err(),
                    (len as u64) < end,
                    "library {n} truncated to {len}: {outcome:?}"
                );
            }
        }
    }
}

#[cfg(all(test, target_os = "linux"))]
mod system_libraries {
    use std::os::unix::fs::FileExt;

    use super::*;

    /// Whether an ELF file's first 20 bytes say it is a shared object (ET_DYN) of this
    /// process's class, byte order and machine: the files the check is there to pass.
    fn for_this_machine(head: &[u8; 20]) -> bool {
        let class = if cfg!(target_pointer_width = "64") { 2 } else { 1 };
        let form = Form::NATIVE;
        head[..4] == *b"\x7fELF"
            && head[4] == class
            && head[5] == if cfg!(target_endian = "big") { 2 } else { 1 }
            && form.u16(head, 16) == 3
            && THIS_MACHINE.is_none_or(|machine| form.u16(head, 18) == machine)
    }

    /// The directories whose shared libraries the check must pass: the system's library
    /// directories and, when a Python is on the path, its extension modules.
    fn library_directories() -> Vec<std::path::PathBuf> {
        let mut dirs: Vec<std::path::PathBuf> = ["/usr/lib/x86_64-linux-gnu", "/lib", "/usr/lib", "/usr/local/lib"]
            .iter()
            .map(Into::into)
            .collect();
        let python = std::process::Command::new("python3")
            .args([
                "-c",
                "import site, sysconfig; print('\\n'.join(site.getsitepackages() + \
                 [sysconfig.get_path('platlib'), sysconfig.get_path('platstdlib') + '/lib-dynload']))",
            ])
            .output();
        if let Ok(output) = python {
            dirs.extend(String::from_utf8_lossy(&output.stdout).lines().map(Into::into));
        }
        dirs.retain(|dir| dir.is_dir());
        dirs
    }

    /// The regular files under `dir` whose names say they are shared libraries (`.so`, with or
    /// without a version after it), by real path, without following symbolic links.
    fn shared_libraries(dir: &std::path::Path, found: &mut std::collections::BTreeSet<std::path::PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for entry in entries.flatten() {
            let Ok(kind) = entry.file_type() else { continue };
            let path = entry.path();
            if kind.is_dir() {
                shared_libraries(&path, found);
            } else if kind.is_file()
                && entry.file_name().to_string_lossy().contains(".so")
                && let Ok(real) = path.canonicalize()
            {
                found.insert(real);
            }
        }
    }

    /// The check refuses none of this machine's shared libraries (the system's library
    /// directories, Python's extension modules): every 64-bit or 32-bit ELF shared object of
    /// this machine's architecture passes. Each refusal is listed with its reason.
    #[test]
    fn no_shared_library_of_this_machine_is_refused() {
        let mut found = std::collections::BTreeSet::new();
        for dir in library_directories() {
            shared_libraries(&dir, &mut found);
        }
        let (mut checked, mut refused) = (0, Vec::new());
        for path in &found {
            let Ok(file) = std::fs::File::open(path) else { continue };
            let Ok(metadata) = file.metadata() else { continue };
            let mut head = [0u8; 20];
            if file.read_exact_at(&mut head, 0).is_err() || !for_this_machine(&head) {
                continue;
            }
            checked += 1;
            let len = metadata.len();
            if let Err(refusal) = Elf::new(file, len).check() {
                refused.push(format!("{}: {refusal}", path.display()));
            }
        }
        assert!(checked > 0, "no shared library found under {:?}", library_directories());
        assert!(
            refused.is_empty(),
            "{} of {checked} shared libraries refused:\n{}",
            refused.len(),
            refused.join("\n")
        );
    }
}
