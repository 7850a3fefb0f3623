//! What the header check, the manifest and the linkage are read from, fed to a hasher: for a
//! caller that keeps those readings of a file and must tell, by reading a few KB of it again,
//! whether they still describe it (see [`crate::Elf::fingerprint`]).

use std::borrow::Cow;
use std::hash::Hasher;
use std::io;

use crate::consts::*;
use crate::header::{self, FIRST_READ};
use crate::manifest::{MAX_NOTE_BYTES, MAX_NOTE_SEGMENTS};
use crate::source::{Elf, Form, ReadAt};

/// The largest dynamic section fingerprinted (real ones hold a few hundred bytes).
const MAX_DYNAMIC: u64 = 1 << 20;

/// The largest string table read whole: one the parse of the linkage then finds among the
/// blocks the reader kept (`source::KEPT_BLOCK`); a larger one has only the strings the
/// linkage names read.
const WHOLE_STRINGS: u64 = 256 << 10;

/// The longest string of the linkage (a needed name or a run path) fingerprinted.
const MAX_STRING: u64 = 1 << 20;

/// The dynamic tags whose strings the linkage holds.
const STRING_TAGS: [u64; 8] = [
    DT_NEEDED,
    DT_SONAME,
    DT_RPATH,
    DT_RUNPATH,
    DT_AUXILIARY,
    DT_FILTER,
    DT_AUDIT,
    DT_DEPAUDIT,
];

/// Feeds `state` with the file's length, its ELF header and program header table, the bytes
/// of its `PT_NOTE` segments (as the manifest reader walks them), its dynamic section (where
/// the loader reads it: the last `PT_DYNAMIC`, through the loadable segment holding its
/// address) up to `DT_NULL`, and the string of every dynamic entry the linkage reads
/// (DT_NEEDED, DT_SONAME, DT_RPATH, DT_RUNPATH, DT_AUXILIARY, DT_FILTER, DT_AUDIT,
/// DT_DEPAUDIT), found through DT_STRTAB and DT_STRSZ. What lies outside the file, or cannot
/// be located, is fed as a marker. `Err` if the file cannot be read, or is larger in these
/// parts than the readers walk (more note bytes or segments than the manifest reader reads, a
/// dynamic section of more than 1 MiB, a string of more than 1 MiB): a caller then has no
/// fingerprint of it.
pub(crate) fn fingerprint<S: ReadAt>(file: &Elf<S>, state: &mut dyn Hasher) -> io::Result<()> {
    let len = file.file_len();
    state.write_u64(len);
    // The first page, as the header check reads it (the whole file if it is small, which the
    // reader then holds): the reader keeps it, and the checks that follow find the headers
    // there.
    let first_len = FIRST_READ.min(usize::try_from(len).unwrap_or(FIRST_READ));
    let first: Cow<'_, [u8]> = match file.whole() {
        Some(whole) => Cow::Borrowed(&whole[..first_len]),
        None => {
            let mut first = vec![0; first_len];
            let got = file.read_exactly(&mut first, 0)?;
            first.truncate(got);
            Cow::Owned(first)
        }
    };
    let Ok(form) = header::identify(&first, len) else {
        // Not an ELF file: what the header check judged is its first bytes.
        state.write(&first);
        return Ok(());
    };
    let head_len = if form.wide { EHDR_LEN_64 } else { EHDR_LEN_32 };
    let Some(head) = first.get(..head_len) else {
        state.write(&first);
        return Ok(());
    };
    state.write(head);
    let (phoff, phentsize, phnum) = form.program_headers(head);
    if phentsize != if form.wide { 56 } else { 32 } {
        // Every reader refuses it for that.
        state.write_u8(0);
        return Ok(());
    }
    let size = u64::from(phentsize) * u64::from(phnum);
    let Some(table) = read(file, &first, phoff, size)? else {
        state.write_u8(1);
        return Ok(());
    };
    state.write(&table);
    let segments: Vec<Segment> = table
        .chunks_exact(usize::from(phentsize))
        .map(|entry| Segment::read(entry, form))
        .collect();
    notes(file, &first, &segments, state)?;
    dynamic(file, &first, form, &segments, state)
}

/// The `PT_NOTE` segments inside the file, each distinct one once, as
/// `manifest::read` walks them and within its caps.
fn notes<S: ReadAt>(file: &Elf<S>, first: &[u8], segments: &[Segment], state: &mut dyn Hasher) -> io::Result<()> {
    // Few: a library has two or three. (More than the cap end the walk.)
    let mut walked = Vec::new();
    let mut total = 0;
    for note in segments.iter().filter(|s| s.kind == PT_NOTE) {
        let inside = note
            .offset
            .checked_add(note.filesz)
            .is_some_and(|end| end <= file.file_len());
        if !inside || note.filesz == 0 || walked.contains(&(note.offset, note.filesz)) {
            continue;
        }
        walked.push((note.offset, note.filesz));
        total += note.filesz;
        if walked.len() > MAX_NOTE_SEGMENTS || total > MAX_NOTE_BYTES {
            return Err(io::Error::other("more note segments than the manifest reader reads"));
        }
        match read(file, first, note.offset, note.filesz)? {
            Some(bytes) => state.write(&bytes),
            None => state.write_u8(2),
        }
    }
    Ok(())
}

/// The dynamic section up to `DT_NULL` and the linkage's strings.
fn dynamic<S: ReadAt>(
    file: &Elf<S>,
    first: &[u8],
    form: Form,
    segments: &[Segment],
    state: &mut dyn Hasher,
) -> io::Result<()> {
    // Where the loader reads `[vaddr, vaddr + size)`: the file-backed part of a loadable
    // segment holding all of it.
    let offset_of = |vaddr: u64, size: u64| {
        let end = vaddr.checked_add(size)?;
        let load = segments.iter().find(|l| {
            l.kind == PT_LOAD && l.vaddr <= vaddr && l.vaddr.checked_add(l.filesz).is_some_and(|e| end <= e)
        })?;
        load.offset.checked_add(vaddr - load.vaddr)
    };
    let Some(dynamic) = segments.iter().rfind(|s| s.kind == PT_DYNAMIC) else {
        state.write_u8(3);
        return Ok(());
    };
    if dynamic.filesz > MAX_DYNAMIC {
        return Err(io::Error::other("a dynamic section larger than the readers walk"));
    }
    let bytes = match offset_of(dynamic.vaddr, dynamic.filesz) {
        Some(offset) => read(file, first, offset, dynamic.filesz)?,
        None => None,
    };
    let Some(bytes) = bytes else {
        state.write_u8(4);
        return Ok(());
    };
    // One walk of the entries up to DT_NULL: the last DT_STRTAB and DT_STRSZ (the loader
    // keeps the last), and the values of the entries whose strings the linkage holds.
    let size = 2 * form.word_size() as usize;
    let (mut strtab, mut strsz, mut strings) = (None, None, Vec::new());
    let mut end = 0;
    for raw in bytes.chunks_exact(size) {
        end += size;
        let (tag, value) = (form.word(raw, 0), form.word(raw, size / 2));
        match tag {
            DT_NULL => break,
            DT_STRTAB => strtab = Some(value),
            DT_STRSZ => strsz = Some(value),
            _ if STRING_TAGS.contains(&tag) => strings.push(value),
            _ => {}
        }
    }
    state.write(&bytes[..end]);
    let (Some(strtab), Some(strsz)) = (strtab, strsz) else {
        state.write_u8(5);
        return Ok(());
    };
    let Some(strings_at) = offset_of(strtab, strsz) else {
        state.write_u8(6);
        return Ok(());
    };
    let whole = if strsz <= WHOLE_STRINGS {
        read(file, first, strings_at, strsz)?
    } else {
        None
    };
    for value in strings {
        if value >= strsz {
            state.write_u8(7);
            continue;
        }
        let string = match &whole {
            Some(strings) => Some(Cow::Borrowed(&strings[value as usize..])),
            None => {
                let size = (strsz - value).min(MAX_STRING);
                read(file, first, strings_at + value, size)?
            }
        };
        let Some(string) = string else {
            state.write_u8(8);
            continue;
        };
        match string.iter().position(|&b| b == 0) {
            Some(end) => state.write(&string[..=end]),
            None if (string.len() as u64) < MAX_STRING => state.write(&string),
            None => return Err(io::Error::other("a string longer than the readers walk")),
        }
    }
    Ok(())
}

/// `size` bytes at `offset`: from the first page read, or read (and kept by the reader, where
/// the checks that follow find them); `None` if they are not all in the file.
fn read<'a, S: ReadAt>(file: &'a Elf<S>, first: &'a [u8], offset: u64, size: u64) -> io::Result<Option<Cow<'a, [u8]>>> {
    let Some(end) = offset.checked_add(size).filter(|&end| end <= file.file_len()) else {
        return Ok(None);
    };
    let range = usize::try_from(offset)
        .ok()
        .zip(usize::try_from(end).ok())
        .map(|(from, to)| from..to);
    if let Some(held) = range.clone().and_then(|range| first.get(range)) {
        return Ok(Some(Cow::Borrowed(held)));
    }
    if let Some(held) = range.and_then(|range| file.whole()?.get(range)) {
        return Ok(Some(Cow::Borrowed(held)));
    }
    let mut buffer = vec![0; usize::try_from(size).map_err(io::Error::other)?];
    let got = file.read_exactly(&mut buffer, offset)?;
    // A file that shrank since its length was taken.
    Ok((got == buffer.len()).then_some(Cow::Owned(buffer)))
}

/// The fields of a program header that locate a segment.
struct Segment {
    kind: u32,
    offset: u64,
    vaddr: u64,
    filesz: u64,
}

impl Segment {
    fn read(entry: &[u8], form: Form) -> Segment {
        if form.wide {
            Segment {
                kind: form.u32(entry, 0),
                offset: form.u64(entry, 8),
                vaddr: form.u64(entry, 16),
                filesz: form.u64(entry, 32),
            }
        } else {
            Segment {
                kind: form.u32(entry, 0),
                offset: form.u32(entry, 4).into(),
                vaddr: form.u32(entry, 8).into(),
                filesz: form.u32(entry, 16).into(),
            }
        }
    }
}

#[cfg(all(test, target_os = "linux", target_arch = "x86_64"))]
mod tests {
    use std::hash::{DefaultHasher, Hasher};

    use crate::Elf;
    use crate::consts::*;
    use crate::manifest::build::raw;
    use crate::manifest::{MAX_NOTE_BYTES, MAX_NOTE_SEGMENTS};
    use crate::testing::{Counted, Scratch, compile};

    fn of(bytes: &[u8]) -> u64 {
        try_of(bytes).unwrap()
    }

    /// The fingerprint of `bytes`, read through a source that is not a slice (so that a file
    /// larger than 64 KiB is read in parts, not whole), or why there is none.
    fn try_of(bytes: &[u8]) -> std::io::Result<u64> {
        let file = Counted {
            bytes: bytes.to_vec(),
            reads: Default::default(),
        };
        let mut state = DefaultHasher::new();
        Elf::new(&file, bytes.len() as u64).fingerprint(&mut state)?;
        Ok(state.finish())
    }

    /// Where `needle` is in `bytes` (once).
    fn find(bytes: &[u8], needle: &[u8]) -> usize {
        let at = bytes.windows(needle.len()).position(|w| w == needle).unwrap();
        assert!(bytes[at + 1..].windows(needle.len()).all(|w| w != needle), "twice");
        at
    }

    /// The offset of the dynamic entry tagged `tag` of a 64-bit little-endian library.
    fn dynamic_entry(bytes: &[u8], tag: u64) -> usize {
        let u64_at = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
        let (phoff, phnum) = (u64_at(32) as usize, u16::from_le_bytes([bytes[56], bytes[57]]) as usize);
        let dynamic = (0..phnum)
            .map(|i| phoff + 56 * i)
            .find(|&entry| u32::from_le_bytes(bytes[entry..entry + 4].try_into().unwrap()) == 2)
            .map(|entry| u64_at(entry + 8) as usize)
            .unwrap();
        (0..).map(|i| dynamic + 16 * i).find(|&at| u64_at(at) == tag).unwrap()
    }

    /// The file offset of the executable loadable segment of a 64-bit little-endian library.
    fn executable_segment(bytes: &[u8]) -> usize {
        let (phoff, phnum) = (
            u64::from_le_bytes(bytes[32..40].try_into().unwrap()) as usize,
            u16::from_le_bytes([bytes[56], bytes[57]]) as usize,
        );
        let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
        (0..phnum)
            .map(|i| phoff + 56 * i)
            .find(|&entry| u32_at(entry) == 1 && u32_at(entry + 4) & 1 != 0)
            .map(|entry| u64::from_le_bytes(bytes[entry + 8..entry + 16].try_into().unwrap()) as usize)
            .unwrap()
    }

    /// The plugin's ABI version in its manifest, the tag or the string of a dynamic entry, and
    /// its ELF machine each change the fingerprint; a byte of its code does not (the
    /// fingerprint covers what the manifest, the linkage and the header check read, no
    /// more).
    #[test]
    fn what_the_manifest_and_the_linkage_read_is_fingerprinted_and_nothing_else() {
        let scratch = Scratch::new("fingerprint");
        let original = compile(
            &scratch.0,
            &["tests/plugins/macros.c"],
            &["-std=c99", "-DPLAIN", "-Wl,-soname,libfingerprinted.so"],
        );
        let base = of(&original);
        assert_eq!(of(&original.clone()), base);
        let changed = |change: &dyn Fn(&mut Vec<u8>)| {
            let mut bytes = original.clone();
            change(&mut bytes);
            assert_ne!(bytes, original);
            of(&bytes)
        };
        // The plugin record: format 1, ABI version 2, after the owner's name.
        let abi = find(&original, b"dylease\0\x01\0\0\0\x02\0\0\0") + 12;
        assert_ne!(changed(&|b| b[abi] = 99), base, "the manifest's ABI version");
        let soname = dynamic_entry(&original, 14);
        assert_ne!(changed(&|b| b[soname] = 1), base, "DT_SONAME made DT_NEEDED");
        let name = find(&original, b"libfingerprinted.so\0");
        assert_ne!(changed(&|b| b[name + 3] = b'F'), base, "the string of a dynamic entry");
        assert_ne!(changed(&|b| b[18] = 8), base, "the ELF machine");
        let code = executable_segment(&original);
        assert_eq!(changed(&|b| b[code] ^= 0xff), base, "a byte of code");
    }

    /// The manifest and the linkage read after the fingerprint, of a library too large to be
    /// read whole, read nothing more: they parse the very bytes the fingerprint was made of.
    /// A rewrite between the two reads cannot make a fingerprint of bytes other than those
    /// parsed.
    #[test]
    fn the_readings_after_the_fingerprint_parse_the_bytes_it_was_made_of() {
        let scratch = Scratch::new("fingerprint-reads");
        let args = [
            "-std=c99",
            "-DPLAIN",
            "-Wl,-z,separate-code",
            "-Wl,-z,max-page-size=65536",
        ];
        let bytes = compile(&scratch.0, &["tests/plugins/macros.c"], &args);
        assert!(bytes.len() > 64 << 10, "{} bytes: read whole", bytes.len());
        assert_no_reads_after_the_fingerprint(bytes, |elf| {
            assert!(elf.manifest().unwrap().is_some());
            elf.linkage().unwrap();
        });
    }

    /// Fingerprints the library `bytes`, then asserts that `then`'s readings of it read
    /// nothing more than the fingerprint did.
    #[track_caller]
    fn assert_no_reads_after_the_fingerprint(bytes: Vec<u8>, then: impl FnOnce(&Elf<&Counted>)) {
        let len = bytes.len() as u64;
        let file = Counted {
            bytes,
            reads: Default::default(),
        };
        let elf = Elf::new(&file, len);
        elf.fingerprint(&mut DefaultHasher::new()).unwrap();
        let before = file.reads.get();
        assert!(before > 0, "no read counted");
        then(&elf);
        assert_eq!(file.reads.get(), before, "more reads");
    }

    /// A 64-bit little-endian library built byte by byte: one loadable segment mapping the
    /// whole file at address 0 (so addresses are offsets), a dynamic section holding
    /// DT_STRTAB and DT_STRSZ, then `entries`, then DT_NULL, padded with zeros to
    /// `dynamic_size` bytes when that is larger; then `strings` as the string table, whose
    /// DT_STRSZ is its length.
    fn linked(entries: &[(u64, u64)], dynamic_size: usize, strings: &[u8]) -> Vec<u8> {
        let mut bytes = raw(&[], &[]);
        bytes[56..58].copy_from_slice(&2u16.to_le_bytes());
        let table = bytes.len();
        let dynamic_at = table + 2 * 56;
        let count = entries.len() + 3;
        let dynamic_len = (16 * count).max(dynamic_size);
        let strings_at = dynamic_at + dynamic_len;
        let len = strings_at + strings.len();
        let header = |kind: u32, offset: usize, size: usize| {
            let mut entry = [0u8; 56];
            entry[..4].copy_from_slice(&kind.to_le_bytes());
            entry[4..8].copy_from_slice(&(PF_R | PF_W).to_le_bytes());
            for at in [8, 16, 24] {
                entry[at..at + 8].copy_from_slice(&(offset as u64).to_le_bytes());
            }
            entry[32..40].copy_from_slice(&(size as u64).to_le_bytes());
            entry[40..48].copy_from_slice(&(size as u64).to_le_bytes());
            entry[48..56].copy_from_slice(&8u64.to_le_bytes());
            entry
        };
        bytes.extend_from_slice(&header(PT_LOAD, 0, len));
        bytes.extend_from_slice(&header(PT_DYNAMIC, dynamic_at, dynamic_len));
        let all = [(DT_STRTAB, strings_at as u64), (DT_STRSZ, strings.len() as u64)]
            .into_iter()
            .chain(entries.iter().copied())
            .chain([(DT_NULL, 0)]);
        for (tag, value) in all {
            bytes.extend_from_slice(&tag.to_le_bytes());
            bytes.extend_from_slice(&value.to_le_bytes());
        }
        bytes.resize(strings_at, 0);
        bytes.extend_from_slice(strings);
        bytes
    }

    /// `bytes` with the byte at `at` changed.
    fn changed(bytes: &[u8], at: usize) -> Vec<u8> {
        let mut bytes = bytes.to_vec();
        bytes[at] ^= 0x20;
        bytes
    }

    /// The fingerprint walks the `PT_NOTE` segments as the manifest reader does and within
    /// its caps: a file the reader refuses for too many note segments or note bytes has no
    /// fingerprint, one at the caps has one, and segments outside the file, empty ones and
    /// repeated ones are not counted. Caught: the caps not applied, applied one too early,
    /// the bytes not added up, and those segments counted.
    #[test]
    fn note_segments_are_walked_within_the_manifest_readers_caps() {
        // Overlapping segments of 300 KiB (four make more than the bytes cap).
        let zeros = vec![0u8; 300 << 10];
        let size = zeros.len() as u64;
        let entries: Vec<_> = (0..8).map(|i| (4 * i, size - 4 * i, 4)).collect();
        assert!(try_of(&raw(&entries, &zeros)).is_err(), "more note bytes than the cap");
        let entries: Vec<_> = (0..4).map(|i| (i, MAX_NOTE_BYTES / 4, 4)).collect();
        try_of(&raw(&entries, &vec![0; 1 << 20])).expect("as many note bytes as the cap");
        // Small segments: as many as the cap, then one more.
        let small = |count: u64| {
            let entries: Vec<_> = (0..count).map(|i| (4 * i, 12, 4)).collect();
            raw(&entries, &vec![0; 4 * entries.len() + 12])
        };
        try_of(&small(MAX_NOTE_SEGMENTS as u64)).expect("as many note segments as the cap");
        assert!(
            try_of(&small(MAX_NOTE_SEGMENTS as u64 + 1)).is_err(),
            "one segment more"
        );
        // Empty segments, repeated ones and ones past the file's end are not counted.
        let mut entries: Vec<_> = (0..4000).map(|i| (4 * i, 0, 4)).collect();
        entries.extend(vec![(0, 12, 4); 4000]);
        entries.extend((0..4000).map(|i| (1 << 30, 12 + i, 4)));
        try_of(&raw(&entries, &vec![0; 16_000])).expect("segments not counted");
    }

    /// The dynamic section is fingerprinted up to its DT_NULL, with the strings of the
    /// entries the linkage reads, each up to its NUL (or the end of the string table) and
    /// no further; what lies after DT_NULL, and a string only another entry's value points
    /// at, is not. Caught: the walk going on past DT_NULL, every entry's value taken for a
    /// string, a string read from the wrong place or of the wrong length (in a string table
    /// read whole, and in one larger than the fingerprint reads whole), and a string
    /// without its NUL refused.
    #[test]
    fn the_linkages_strings_are_fingerprinted_up_to_their_nul_and_nothing_past_dt_null() {
        for table_size in [128, 300 << 10] {
            let mut strings = vec![b'.'; table_size];
            let mut put = |at: usize, text: &[u8]| {
                strings[at..at + text.len()].copy_from_slice(text);
                at
            };
            let needed = put(1, b"libneeded.so\0");
            let other = put(20, b"unrelated\0");
            let after = put(40, b"libafter.so\0");
            let soname = put(table_size * 2 / 3, b"libsoname.so\0");
            // The last string, without its NUL.
            let last = put(table_size - 7, b"liblast");
            let entries = [
                (DT_NEEDED, needed as u64),
                (DT_FLAGS, other as u64),
                (DT_SONAME, soname as u64),
                (DT_RUNPATH, last as u64),
                (DT_NULL, 0),
                (DT_NEEDED, after as u64),
            ];
            let bytes = linked(&entries, 0, &strings);
            let base = of(&bytes);
            assert_eq!(of(&bytes), base);
            let strings_at = bytes.len() - table_size;
            for (name, at) in [("needed", needed), ("soname", soname), ("last", last)] {
                for i in [0, 6] {
                    let at = strings_at + at + i;
                    assert_ne!(of(&changed(&bytes, at)), base, "{table_size}: {name} at {i}");
                }
            }
            // After the NUL of the soname, and the string of DT_FLAGS's value.
            let unseen = [("past a NUL", soname + 13), ("other", other)];
            for (name, at) in unseen {
                assert_eq!(of(&changed(&bytes, strings_at + at)), base, "{table_size}: {name}");
            }
            // The entry after DT_NULL, and its string.
            let dynamic_at = 64 + 2 * 56;
            let after_null = dynamic_at + 16 * 7;
            assert_eq!(of(&changed(&bytes, after_null)), base, "{table_size}: after DT_NULL");
            let after_string = changed(&bytes, strings_at + after);
            assert_eq!(of(&after_string), base, "{table_size}: string after DT_NULL");
        }
    }

    /// A dynamic section of 1 MiB is fingerprinted, one larger is not (no fingerprint); a
    /// string of 1 MiB without a NUL is not either. Caught: the bounds applied one too
    /// early or not at all, and a part of the file read in full taken for a short read.
    #[test]
    fn a_dynamic_section_or_a_string_larger_than_the_readers_walk_has_no_fingerprint() {
        let strings = b"\0libsoname.so\0";
        let at_cap = linked(&[(DT_SONAME, 1)], 1 << 20, strings);
        let base = of(&at_cap);
        let soname = at_cap.len() - strings.len() + 4;
        assert_ne!(
            of(&changed(&at_cap, soname)),
            base,
            "the soname of a 1 MiB dynamic section"
        );
        let beyond = linked(&[(DT_SONAME, 1)], (1 << 20) + 16, strings);
        assert!(try_of(&beyond).is_err(), "a dynamic section of more than 1 MiB");
        let mut long = vec![b'x'; (1 << 20) + 300];
        long[0] = 0;
        assert!(
            try_of(&linked(&[(DT_SONAME, 1)], 0, &long)).is_err(),
            "a string of 1 MiB"
        );
    }

    /// In a library whose string table lies past the first page, the linkage read after the
    /// fingerprint reads nothing more: the fingerprint read the string table whole, as the
    /// linkage reads it. Caught: the table's strings read one by one.
    #[test]
    fn a_string_table_past_the_first_page_is_read_whole_once() {
        let scratch = Scratch::new("fingerprint-strings");
        let source = scratch.0.join("named.c");
        let functions: String = (0..400)
            .map(|i| format!("void dylease_fingerprint_function_number_{i}(void) {{}}\n"))
            .collect();
        std::fs::write(&source, functions).unwrap();
        let args = ["-Wl,-z,separate-code", "-Wl,-z,max-page-size=65536"];
        let bytes = compile(&scratch.0, &[source.to_str().unwrap()], &args);
        assert!(bytes.len() > 64 << 10, "{} bytes: read whole", bytes.len());
        let strtab = u64::from_le_bytes(bytes[dynamic_entry(&bytes, DT_STRTAB) + 8..][..8].try_into().unwrap());
        assert!(strtab > 4096, "the string table at {strtab}, in the first page");
        assert_no_reads_after_the_fingerprint(bytes, |elf| {
            elf.linkage().unwrap();
        });
    }
}
