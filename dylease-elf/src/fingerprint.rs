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
pub(crate) fn fingerprint<S: ReadAt>(file: &Elf<S>, state: &mut impl Hasher) -> io::Result<()> {
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
fn notes<S: ReadAt>(file: &Elf<S>, first: &[u8], segments: &[Segment], state: &mut impl Hasher) -> io::Result<()> {
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
    state: &mut impl Hasher,
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

    use crate::testing::{Scratch, compile};
    use crate::{Elf, ReadAt};

    fn of(bytes: &[u8]) -> u64 {
        let mut state = DefaultHasher::new();
        Elf::new(bytes, bytes.len() as u64).fingerprint(&mut state).unwrap();
        state.finish()
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
    /// more). Caught: a part left out of the fingerprint.
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

    /// A file counting the reads made of it.
    struct Counted {
        bytes: Vec<u8>,
        reads: std::cell::Cell<usize>,
    }

    impl ReadAt for Counted {
        fn read_at(&self, buffer: &mut [u8], offset: u64) -> std::io::Result<usize> {
            self.reads.set(self.reads.get() + 1);
            self.bytes.as_slice().read_at(buffer, offset)
        }
    }

    /// The manifest and the linkage read after the fingerprint, of a library too large to be
    /// read whole, read nothing more: they parse the very bytes the fingerprint was made of.
    /// Caught: the fingerprint reading other ranges than the readings (a rewrite between the
    /// two reads would then make a fingerprint of bytes other than those parsed).
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
        let len = bytes.len() as u64;
        let file = Counted {
            bytes,
            reads: Default::default(),
        };
        let elf = Elf::new(&file, len);
        elf.fingerprint(&mut DefaultHasher::new()).unwrap();
        let before = file.reads.get();
        assert!(elf.manifest().unwrap().is_some());
        elf.linkage().unwrap();
        assert_eq!(file.reads.get(), before, "more reads");
    }
}
