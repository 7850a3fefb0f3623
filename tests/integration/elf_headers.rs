//! The ELF check looks at what the loader will map wherever the program header table is: a
//! truncated library is refused (not left to kill the process with `SIGBUS` inside
//! `dlopen`) with its table right after the ELF header, at 512 KiB, or at 2 MiB. And it
//! takes PT_GNU_RELRO as glibc does: by the pages it protects.

use std::fs;

use dylease::{Error, PluginHost};

use crate::support::{TestDir, assert_unloaded, fixture};

const PT_LOAD: u32 = 1;
const PT_GNU_RELRO: u32 = 0x6474_e552;
const PF_X: u32 = 1;
const PF_W: u32 = 2;
/// The 64-bit ELF header fields the crafting touches.
const E_PHOFF: usize = 32;
const E_PHENTSIZE: usize = 54;
const E_PHNUM: usize = 56;
/// Fields of a 64-bit program header.
const P_FLAGS: usize = 4;
const P_OFFSET: usize = 8;
const P_VADDR: usize = 16;
const P_FILESZ: usize = 32;
const P_MEMSZ: usize = 40;

/// The little-endian field of `width` bytes at `at` (the fixtures are x86-64 libraries): the
/// test's own reading of the layout it edits, independent of the crate's reader.
fn get(bytes: &[u8], at: usize, width: usize) -> u64 {
    let mut value = [0; 8];
    value[..width].copy_from_slice(&bytes[at..at + width]);
    u64::from_le_bytes(value)
}

fn put_u64(bytes: &mut [u8], at: usize, value: u64) {
    bytes[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

/// `library` (a 64-bit little-endian ELF file) with its program header table copied to
/// offset `table_at` (`None`: left where it is), the gap filled with zeros. With `truncate`,
/// the last loadable segment then claims 64 KiB more of the file than there is: a library
/// whose end was cut off, as the loader would see it.
fn crafted(library: &[u8], table_at: Option<usize>, truncate: bool) -> Vec<u8> {
    assert_eq!(&library[..6], b"\x7fELF\x02\x01", "a 64-bit little-endian ELF file");
    let (phoff, size) = (
        get(library, E_PHOFF, 8) as usize,
        (get(library, E_PHENTSIZE, 2) as usize) * (get(library, E_PHNUM, 2) as usize),
    );
    let mut bytes = library.to_vec();
    let phoff = match table_at {
        None => phoff,
        Some(at) => {
            assert!(at >= bytes.len(), "the table goes past the library's end");
            let table = library[phoff..phoff + size].to_vec();
            bytes.resize(at, 0);
            bytes.extend_from_slice(&table);
            put_u64(&mut bytes, E_PHOFF, at as u64);
            at
        }
    };
    if truncate {
        let entry_size = get(library, E_PHENTSIZE, 2) as usize;
        let last_load = (0..(get(library, E_PHNUM, 2) as usize))
            .map(|i| phoff + i * entry_size)
            .rfind(|&entry| u32::from_le_bytes(bytes[entry..entry + 4].try_into().unwrap()) == PT_LOAD)
            .expect("a loadable segment");
        let offset = get(&bytes, last_load + P_OFFSET, 8);
        let claimed = bytes.len() as u64 + 65536 - offset;
        let memsz = get(&bytes, last_load + P_MEMSZ, 8).max(claimed);
        put_u64(&mut bytes, last_load + P_FILESZ, claimed);
        put_u64(&mut bytes, last_load + P_MEMSZ, memsz);
    }
    bytes
}

/// Loads `bytes` as the only plugin file of a host of its own.
fn load(dir: &TestDir, name: &str, bytes: &[u8]) -> (std::path::PathBuf, Result<(), Error>) {
    let path = dir.path().join(name);
    fs::write(&path, bytes).unwrap();
    // SAFETY: the libraries are this suite's own fixtures (or none), whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&path).build() }.unwrap();
    let outcome = host.acquire().map(|lease| assert_eq!(lease.plugins()[0].name(), "p1"));
    (path, outcome)
}

#[test]
#[cfg(all(target_arch = "x86_64", target_endian = "little"))]
fn a_truncated_library_is_refused_wherever_its_program_headers_are() {
    let dir = TestDir::new("elf_far_headers");
    let library = fs::read(fixture("p1")).unwrap();
    for (table_at, label) in [(None, "in place"), (Some(512 << 10), "512k"), (Some(2 << 20), "2m")] {
        // The crafting itself leaves a library the loader takes: only the truncation is wrong.
        let (intact, outcome) = load(
            &dir,
            &format!("libintact_{label}.so"),
            &crafted(&library, table_at, false),
        );
        outcome.unwrap_or_else(|e| panic!("the intact library with its table {label}: {e}"));
        assert_unloaded(&intact);

        let (path, outcome) = load(
            &dir,
            &format!("libtruncated_{label}.so"),
            &crafted(&library, table_at, true),
        );
        let error = outcome.expect_err(label);
        assert!(
            matches!(&error, Error::Open { path: p, .. } if p == &path),
            "{label}: {error:?}"
        );
        let message = error.to_string();
        assert!(
            message.starts_with(&format!(
                "cannot load plugin file `{}`: the file is truncated",
                path.display()
            )),
            "{label}: {message}"
        );
        assert_unloaded(&path);
    }
}

#[test]
#[cfg(all(target_arch = "x86_64", target_endian = "little"))]
fn a_program_header_table_past_the_end_of_the_file_is_refused() {
    let dir = TestDir::new("elf_table_past_end");
    let mut bytes = fs::read(fixture("p1")).unwrap();
    let past = bytes.len() as u64 + (2 << 20);
    put_u64(&mut bytes, E_PHOFF, past);
    let (path, outcome) = load(&dir, "libpast.so", &bytes);
    let error = outcome.unwrap_err();
    assert!(
        error
            .to_string()
            .contains(&format!("`{}`: the file is truncated", path.display())),
        "{error}"
    );
}

/// A page, as the loader maps and protects them on x86_64.
const PAGE: u64 = 4096;

/// The file offsets of a 64-bit library's program headers of type `kind`.
fn program_headers(bytes: &[u8], kind: u32) -> Vec<usize> {
    let (phoff, size) = (get(bytes, E_PHOFF, 8) as usize, (get(bytes, E_PHENTSIZE, 2) as usize));
    (0..(get(bytes, E_PHNUM, 2) as usize))
        .map(|i| phoff + i * size)
        .filter(|&entry| u32::from_le_bytes(bytes[entry..entry + 4].try_into().unwrap()) == kind)
        .collect()
}

fn flags(bytes: &[u8], header: usize) -> u32 {
    u32::from_le_bytes(bytes[header + P_FLAGS..header + P_FLAGS + 4].try_into().unwrap())
}

/// Where a program header's memory starts and ends.
fn memory(bytes: &[u8], header: usize) -> (u64, u64) {
    let start = get(bytes, header + P_VADDR, 8);
    (start, start + get(bytes, header + P_MEMSZ, 8))
}

/// `library` with its PT_GNU_RELRO made to cover `start..end`.
fn with_relro(library: &[u8], start: u64, end: u64) -> Vec<u8> {
    let mut bytes = library.to_vec();
    let relro = program_headers(&bytes, PT_GNU_RELRO)[0];
    let offset_delta = get(&bytes, relro + P_VADDR, 8).wrapping_sub(start);
    let offset = get(&bytes, relro + P_OFFSET, 8).wrapping_sub(offset_delta);
    put_u64(&mut bytes, relro + P_OFFSET, offset);
    put_u64(&mut bytes, relro + P_VADDR, start);
    put_u64(&mut bytes, relro + 24, start);
    put_u64(&mut bytes, relro + P_FILESZ, end - start);
    put_u64(&mut bytes, relro + P_MEMSZ, end - start);
    bytes
}

/// LLD ends PT_GNU_RELRO at a page boundary, past the memory of the writable segment that
/// holds it (orjson's extension module, linked by LLD 14, is laid out so): glibc protects the
/// range's start and end rounded down to pages, which its segment maps, and loads it. So
/// does the check.
#[test]
#[cfg(all(target_arch = "x86_64", target_endian = "little"))]
fn a_library_linked_by_lld_whose_relro_runs_past_its_segment_loads() {
    let dir = TestDir::new("elf_relro_lld");
    let lld = std::process::Command::new("ld.lld").arg("--version").output();
    assert!(
        lld.is_ok_and(|output| output.status.success()),
        "this test links a plugin with LLD: install it (Debian: `apt-get install lld`)"
    );
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plugins/numbered.c");
    let built = dir.path().join("libbuilt_by_lld.so");
    crate::support::compile_plugin(
        &[&source],
        &built,
        &["-fuse-ld=lld", "-DPLUGIN_NAME=\"p1\"", "-DPASS_NAME=\"p1_pass\""],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let library = fs::read(&built).unwrap();
    // The layout this test is about: the range ends past the first writable segment's memory.
    let relro = memory(&library, program_headers(&library, PT_GNU_RELRO)[0]);
    let writable = program_headers(&library, PT_LOAD)
        .into_iter()
        .find(|&load| flags(&library, load) & PF_W != 0)
        .expect("a writable segment");
    assert!(
        relro.1 > memory(&library, writable).1,
        "LLD no longer ends PT_GNU_RELRO ({relro:x?}) past its writable segment's memory ({:x?})",
        memory(&library, writable)
    );
    let (path, outcome) = load(&dir, "liblld.so", &library);
    outcome.unwrap_or_else(|e| panic!("{e}"));
    assert_unloaded(&path);
}

/// A gcc-built plugin whose PT_GNU_RELRO is made to end past its writable segment's memory,
/// in that segment's last page: the pages glibc protects are the same, and it loads.
#[test]
#[cfg(all(target_arch = "x86_64", target_endian = "little"))]
fn a_relro_range_ending_past_its_segment_within_its_pages_loads() {
    let dir = TestDir::new("elf_relro_inside_pages");
    let library = fs::read(fixture("p1")).unwrap();
    let (start, end) = memory(&library, program_headers(&library, PT_GNU_RELRO)[0]);
    let segment_end = program_headers(&library, PT_LOAD)
        .into_iter()
        .map(|load| memory(&library, load))
        .find(|&(from, to)| from <= start && start < to)
        .expect("the segment holding PT_GNU_RELRO")
        .1;
    // The last byte before the page after `end`: the protected pages do not change.
    let past = (end / PAGE + 1) * PAGE - 1;
    assert!(past > segment_end, "the crafted range ends past the segment's memory");
    let (path, outcome) = load(&dir, "librelro_past.so", &with_relro(&library, start, past));
    outcome.unwrap_or_else(|e| panic!("{e}"));
    assert_unloaded(&path);
}

/// A PT_GNU_RELRO whose pages reach a page no segment maps (glibc's `mprotect` fails and so
/// does `dlopen`), or a page of code (made read-only and not executable, it would stop the
/// process once the constructors run): refused, naming the file and the page.
#[test]
#[cfg(all(target_arch = "x86_64", target_endian = "little"))]
fn a_relro_range_reaching_an_unmapped_or_executable_page_is_refused() {
    let dir = TestDir::new("elf_relro_refused");
    let library = fs::read(fixture("p1")).unwrap();
    let (start, _) = memory(&library, program_headers(&library, PT_GNU_RELRO)[0]);
    let image_end = program_headers(&library, PT_LOAD)
        .into_iter()
        .map(|load| memory(&library, load).1)
        .max()
        .unwrap();
    // One page past the image's last page, and a few bytes into the next: that page is
    // protected and unmapped.
    let unmapped = image_end.next_multiple_of(PAGE);
    let (path, outcome) = load(
        &dir,
        "librelro_unmapped.so",
        &with_relro(&library, start, unmapped + PAGE + 16),
    );
    let message = outcome.unwrap_err().to_string();
    assert!(
        message.starts_with(&format!(
            "cannot load plugin file `{}`: its PT_GNU_RELRO segment",
            path.display()
        )) && message.contains(&format!(
            "covers the page at {unmapped:#x}, which no loadable segment maps"
        )),
        "{message}"
    );
    assert_unloaded(&path);

    let code = program_headers(&library, PT_LOAD)
        .into_iter()
        .find(|&load| flags(&library, load) & PF_X != 0)
        .expect("an executable segment");
    let code_start = memory(&library, code).0;
    let (path, outcome) = load(&dir, "librelro_code.so", &with_relro(&library, code_start, start));
    let message = outcome.unwrap_err().to_string();
    assert!(
        message.starts_with(&format!(
            "cannot load plugin file `{}`: its PT_GNU_RELRO segment",
            path.display()
        )) && message.contains(&format!(
            "covers pages of the executable loadable segment at {code_start:#x}"
        )),
        "{message}"
    );
    assert_unloaded(&path);
}
