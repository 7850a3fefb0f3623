//! The ELF checks and the manifest reader on arbitrary bytes: they never panic, never read
//! out of bounds and never loop for long, whatever the headers say. (Whether a file they
//! pass loads without crashing is the property test's question,
//! dylease-cli/tests/integration/corruption.rs: the loader cannot run inside a fuzzer.)
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|bytes: &[u8]| {
    let elf = dylease_elf::Elf::new(bytes, bytes.len() as u64);
    let _ = elf.linkage();
    // Before the check too: a host may read a manifest before, or without, the full check.
    let _ = elf.manifest();
    if elf.check().is_ok() {
        let _ = elf.pins(&[]);
    }
});
