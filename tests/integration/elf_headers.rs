//! The ELF check looks at what the loader will map wherever the program header table is: a
//! truncated library is refused (not left to kill the process with `SIGBUS` inside
//! `dlopen`) with its table right after the ELF header, at 512 KiB, or at 2 MiB.

use std::fs;

use dylease::{Error, PluginHost};

use crate::support::{TestDir, assert_unloaded, fixture};

const PT_LOAD: u32 = 1;
/// The 64-bit ELF header fields the crafting touches.
const E_PHOFF: usize = 32;
const E_PHENTSIZE: usize = 54;
const E_PHNUM: usize = 56;
/// Fields of a 64-bit program header.
const P_OFFSET: usize = 8;
const P_FILESZ: usize = 32;
const P_MEMSZ: usize = 40;

fn u16_at(bytes: &[u8], at: usize) -> usize {
    u16::from_le_bytes(bytes[at..at + 2].try_into().unwrap()).into()
}

fn u64_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap())
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
        u64_at(library, E_PHOFF) as usize,
        u16_at(library, E_PHENTSIZE) * u16_at(library, E_PHNUM),
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
        let entry_size = u16_at(library, E_PHENTSIZE);
        let last_load = (0..u16_at(library, E_PHNUM))
            .map(|i| phoff + i * entry_size)
            .rfind(|&entry| u32::from_le_bytes(bytes[entry..entry + 4].try_into().unwrap()) == PT_LOAD)
            .expect("a loadable segment");
        let offset = u64_at(&bytes, last_load + P_OFFSET);
        let claimed = bytes.len() as u64 + 65536 - offset;
        let memsz = u64_at(&bytes, last_load + P_MEMSZ).max(claimed);
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
