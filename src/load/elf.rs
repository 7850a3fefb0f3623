//! A look at a library's ELF headers before the loader sees the file.
//!
//! Two bad inputs need it. A truncated library whose headers are intact is mapped by glibc
//! beyond the end of the file, and the first touch of a missing page kills the process with
//! `SIGBUS` inside `dlopen`: no error to report, no host left. And glibc reports a library
//! built for another architecture as "cannot open shared object file: No such file or
//! directory", which sends its user looking for a file that is right there. Both show in the
//! headers. Reading bytes runs no plugin code; this module is safe code only.

use std::fs::File;

/// Checks that `file` (of `len` bytes) could be an ELF shared library for this process: the
/// magic bytes, the class, byte order, type and machine, and that every loadable segment lies
/// inside the file, wherever the program header table is. `Err` says what is wrong, as a
/// phrase ("the file is truncated: …").
///
/// Only on platforms whose libraries are ELF files; elsewhere, and when the file cannot be
/// read (the loader then reports that in its own words), it passes.
pub(crate) fn check(file: &File, len: u64) -> Result<(), String> {
    if !cfg!(all(unix, not(target_vendor = "apple"))) {
        return Ok(());
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        check_with(|buffer, offset| file.read_at(buffer, offset), len)
    }
    #[cfg(not(unix))]
    {
        let _ = (file, len);
        Ok(())
    }
}

/// [`check`] over any positioned reader (`read_at(buffer, offset)`, like `pread`).
fn check_with(read_at: impl Fn(&mut [u8], u64) -> std::io::Result<usize>, len: u64) -> Result<(), String> {
    // One read covers the ELF header and the program header table of every library a linker
    // writes (the table follows the header).
    let mut first = vec![0; FIRST_READ.min(usize::try_from(len).unwrap_or(FIRST_READ))];
    let Ok(got) = read_exactly(&read_at, &mut first, 0) else {
        return Ok(());
    };
    first.truncate(got);
    let Some(table) = header(&first[..first.len().min(EHDR_LEN_64)], len)? else {
        return Ok(());
    };
    if table.end <= first.len() as u64 {
        return segments(&first, &table, len);
    }
    // Elsewhere in the file: read exactly the table, at most 65535 entries of 65535 bytes
    // as the header's 16-bit fields allow, and only after `header` saw it inside the file.
    let size = usize::from(table.phentsize) * usize::from(table.phnum);
    let mut bytes = vec![0; size];
    let Ok(got) = read_exactly(&read_at, &mut bytes, table.phoff) else {
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

/// Fills `buffer` from `offset` on, stopping early only at the end of the file; returns how
/// many bytes it read.
fn read_exactly(
    read_at: &impl Fn(&mut [u8], u64) -> std::io::Result<usize>,
    buffer: &mut [u8],
    offset: u64,
) -> std::io::Result<usize> {
    let mut done = 0;
    while done < buffer.len() {
        match read_at(&mut buffer[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// How much of a library the first read takes: a page, which holds the headers of ordinary
/// libraries.
const FIRST_READ: usize = 4096;

const EHDR_LEN_32: usize = 52;
const EHDR_LEN_64: usize = 64;
const PT_LOAD: u32 = 1;

/// Where a sound ELF header says its program header table is, and how to read it.
#[derive(Debug)]
struct Table {
    wide: bool,
    big_endian: bool,
    /// Where the program header table starts in the bytes [`segments`] is given.
    phoff: u64,
    phentsize: u16,
    phnum: u16,
    /// The end of the program header table in the file: inside it, and past the ELF header.
    end: u64,
}

/// Checks the ELF header (`head`: the file's first bytes, at most 64 of them; `len`: the
/// file's length). `Ok(Some(table))`: sound so far, and the program header table lies inside
/// the file.
fn header(head: &[u8], len: u64) -> Result<Option<Table>, String> {
    if head.len() < 4 || head[..4] != *b"\x7fELF" {
        return Err("it is not an ELF shared library (it does not begin with the ELF magic bytes)".into());
    }
    let wide = match head.get(4) {
        Some(1) => false,
        Some(2) => true,
        Some(other) => return Err(format!("its ELF class byte is invalid ({other})")),
        None => return Err(truncated(len, 5)),
    };
    if wide != cfg!(target_pointer_width = "64") {
        let (bits, this_bits) = if wide { (64, 32) } else { (32, 64) };
        return Err(format!(
            "it is a {bits}-bit ELF file, but this process is {this_bits}-bit"
        ));
    }
    let big_endian = match head.get(5) {
        Some(1) => false,
        Some(2) => true,
        Some(other) => return Err(format!("its ELF byte-order byte is invalid ({other})")),
        None => return Err(truncated(len, 6)),
    };
    if big_endian != cfg!(target_endian = "big") {
        let (it, this) = if big_endian {
            ("big", "little")
        } else {
            ("little", "big")
        };
        return Err(format!(
            "it is a {it}-endian ELF file, but this process is {this}-endian"
        ));
    }
    let header_len = if wide { EHDR_LEN_64 } else { EHDR_LEN_32 };
    if head.len() < header_len {
        return Err(truncated(len, header_len as u64));
    }
    let read = Reader {
        bytes: head,
        wide,
        big_endian,
    };
    match read.u16(16) {
        3 => {}
        1 => return Err("it is an object file, not a shared library; link it with `-shared`".into()),
        2 => return Err("it is an executable, not a shared library; link it with `-shared`".into()),
        other => return Err(format!("its ELF type is {other}, not a shared library (3)")),
    }
    let machine = read.u16(18);
    if let Some(this) = THIS_MACHINE
        && machine != this
    {
        return Err(format!(
            "it is built for {} (ELF machine {machine}), but this process runs on {} (ELF machine {this})",
            machine_name(machine),
            machine_name(this),
        ));
    }
    let (phoff, phentsize, phnum) = read.table();
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
    Ok(Some(Table {
        wide,
        big_endian,
        phoff,
        phentsize,
        phnum,
        end,
    }))
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
    let wide = table.wide;
    let read = Reader {
        bytes,
        wide,
        big_endian: table.big_endian,
    };
    let mut needed = 0u64;
    for i in 0..u64::from(phnum) {
        let entry = phoff + i * u64::from(phentsize);
        let Ok(entry) = usize::try_from(entry) else { break };
        let (kind, offset, size) = if wide {
            (read.u32(entry), read.u64(entry + 8), read.u64(entry + 32))
        } else {
            (read.u32(entry), read.u32(entry + 4).into(), read.u32(entry + 16).into())
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

/// Reads header fields in the file's byte order. A field the bytes are too short for reads as
/// zero (callers check lengths first).
struct Reader<'a> {
    bytes: &'a [u8],
    wide: bool,
    big_endian: bool,
}

impl Reader<'_> {
    fn field<const N: usize>(&self, at: usize) -> [u8; N] {
        let mut field = [0; N];
        if let Some(bytes) = self.bytes.get(at..at.saturating_add(N)) {
            field.copy_from_slice(bytes);
        }
        if self.big_endian {
            field.reverse();
        }
        field
    }

    fn u16(&self, at: usize) -> u16 {
        u16::from_le_bytes(self.field(at))
    }

    fn u32(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.field(at))
    }

    fn u64(&self, at: usize) -> u64 {
        u64::from_le_bytes(self.field(at))
    }

    /// The program header table: offset, entry size, number of entries.
    fn table(&self) -> (u64, u16, u16) {
        if self.wide {
            (self.u64(32), self.u16(54), self.u16(56))
        } else {
            (self.u32(28).into(), self.u16(42), self.u16(44))
        }
    }
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

fn machine_name(machine: u16) -> String {
    match machine {
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
    fn check_bytes(bytes: &[u8]) -> Result<(), String> {
        check_with(
            |buffer, offset| slice_read_at(bytes, buffer, offset),
            bytes.len() as u64,
        )
    }

    /// `pread` on a byte slice.
    fn slice_read_at(bytes: &[u8], buffer: &mut [u8], offset: u64) -> std::io::Result<usize> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(bytes.len());
        let n = buffer.len().min(bytes.len() - start);
        buffer[..n].copy_from_slice(&bytes[start..start + n]);
        Ok(n)
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
            wide: true,
            big_endian: false,
            phoff: 64,
            phentsize: 56,
            phnum: 1,
            end: 120,
        };
        assert!(segments(&bytes[..10], &table, 120).unwrap_err().contains("truncated"));
    }
}
