//! A plugin's manifest: what a plugin is (its plugin ABI version, name, version and passes),
//! written into its file as ELF notes, so that a host learns it without running any of the
//! plugin's code. [`crate::Elf::manifest`] reads it into a [`crate::Manifest`].
//!
//! # The format, version 1
//!
//! The manifest is made of ELF notes of owner `"dylease"` (note name `"dylease\0"`,
//! `n_namesz` 8) in `PT_NOTE` segments. They are read through the program headers, as the
//! loader reads the file: `strip --strip-all` keeps them, and a file without section
//! headers still has them. Linkers put every `SHT_NOTE` section into a `PT_NOTE` segment
//! (the GNU toolchain makes a section named `.note.*` of type `SHT_NOTE`); a link step that
//! drops `.note*` sections leaves no manifest.
//!
//! Each note is the usual note header (`n_namesz`, `n_descsz`, `n_type`, each a `u32`),
//! the name, then the descriptor, the name and the descriptor each padded to the segment's
//! alignment (`p_align`: 8 when it is 8, else 4; a linker puts notes of different alignment
//! into different segments). Every field is in the file's byte order. Two note types:
//!
//! | `n_type` | record | descriptor, in order |
//! |---|---|---|
//! | [`NT_PLUGIN`] (1) | plugin record | `u32` format version ([`FORMAT_VERSION`]), `u32` plugin ABI version, `u32` flags, name string, version string |
//! | [`NT_PASS`] (2) | pass record | `u32` flags, name string, interface string |
//!
//! A *string* is a `u32` length followed by that many bytes, padded with zeros to a
//! multiple of 4. The length counts the terminating NUL: a C compiler writes a string
//! literal `s` as `uint32_t len = sizeof(s); char bytes[(sizeof(s) + 3) & ~3]`. The bytes
//! before that NUL are the UTF-8 text, without a NUL of their own. A length of 0 is the empty
//! string too. An empty interface means an untyped pass. Bytes past the last field of a
//! descriptor are ignored (a C struct may pad them).
//!
//! Plugin record flags: bit 0 ([`FLAG_COMPLETE`]): the pass records list every pass the
//! plugin registers. Without it, the plugin may register other passes too (by hand, say).
//! Pass record flags: none are defined yet (0). Other bits are reserved, written as 0 and
//! ignored by this reader.
//!
//! Several notes may appear, from several translation units; the reader merges them, in the
//! order of the file: plugin records must all agree (a header included twice writes the same
//! record twice), pass names must be unique, and pass records need a plugin record. Notes of
//! other owners, and dylease notes of other types, are skipped. A file whose plugin record
//! has a format version other than 1 is refused: its layout is unknown.
//!
//! # What is refused, and the caps
//!
//! The reader refuses a file whose dylease notes are corrupt: a dylease note that runs past
//! its segment's end (or a note that could be one: its `n_namesz` is 8 and the bytes of its
//! name that the segment holds begin as `"dylease\0"` does), a string length past its
//! descriptor, a string that is not UTF-8 or lacks its NUL, two plugin records that disagree,
//! a pass declared twice, pass records without a plugin record. A damaged note of another
//! owner is no reason to refuse a file (the loader ignores notes): it ends the walk of its
//! segment, and a dylease note after it in that segment is not seen.
//!
//! Each segment is read, walked and dropped before the next; a segment that several program
//! headers list (the same offset and size) is walked once, and empty ones not at all. So
//! that a crafted file costs bounded time and memory, a file is refused whose distinct
//! `PT_NOTE` segments number more than [`MAX_NOTE_SEGMENTS`] (1024) or hold more than
//! [`MAX_NOTE_BYTES`] (1 MiB) together, before reading the segment past the cap. That also
//! bounds the pass records: at most 32,768 (each pass note takes at least 32 bytes).

use std::collections::HashSet;

use crate::consts::PT_NOTE;
use crate::source::{Bytes, Form};
use crate::{DeclaredPass, Manifest};

/// The note name (owner) of every manifest note, with its terminating NUL.
pub const NOTE_NAME: &[u8; 8] = b"dylease\0";
/// `n_type` of a plugin record.
pub const NT_PLUGIN: u32 = 1;
/// `n_type` of a pass record.
pub const NT_PASS: u32 = 2;
/// The format version this reader reads.
pub const FORMAT_VERSION: u32 = 1;
/// Plugin record flag: the pass records list every pass the plugin registers.
pub const FLAG_COMPLETE: u32 = 1;
/// The most bytes of `PT_NOTE` segments the reader walks (each segment counted once, however
/// many program headers list it): a file whose segments hold more is refused.
pub const MAX_NOTE_BYTES: u64 = 1 << 20;
/// The most `PT_NOTE` segments (distinct, not empty) the reader walks: a file whose program
/// headers list more is refused.
pub const MAX_NOTE_SEGMENTS: usize = 1024;

/// Reads the manifest from the `PT_NOTE` segments of a file whose identification bytes passed
/// (`header::identify`: any machine, class and byte order), one segment at a time, every field
/// in the file's byte order. `Err` says what is wrong, as a phrase.
pub(crate) fn read(file: &dyn Bytes) -> Result<Option<Manifest>, String> {
    let len = file.len();
    let ident = file.bytes(0, crate::consts::EHDR_LEN_32 as u64)?;
    let form = Form::of(&ident);
    let head_len = if form.wide {
        crate::consts::EHDR_LEN_64
    } else {
        crate::consts::EHDR_LEN_32
    };
    let head = file.bytes(0, head_len as u64)?;
    let (phoff, phentsize, phnum) = form.program_headers(&head);
    let expected = if form.wide { 56 } else { 32 };
    if phentsize != expected {
        return Err(format!(
            "its program headers are {phentsize} bytes each, not {expected}: the headers are corrupt"
        ));
    }
    let table = file.bytes(phoff, u64::from(phentsize) * u64::from(phnum))?;
    let mut merged = Merged {
        form,
        plugin: None,
        passes: Vec::new(),
        names: HashSet::new(),
    };
    // The segments walked, by offset and size, and the bytes they hold.
    let mut walked = HashSet::new();
    let mut total = 0u64;
    for entry in table.chunks_exact(usize::from(phentsize)) {
        if form.u32(entry, 0) != PT_NOTE {
            continue;
        }
        let (offset, size, align) = if form.wide {
            (form.u64(entry, 8), form.u64(entry, 32), form.u64(entry, 48))
        } else {
            (
                u64::from(form.u32(entry, 4)),
                u64::from(form.u32(entry, 16)),
                u64::from(form.u32(entry, 28)),
            )
        };
        // Only the segments inside the file: the loader maps no others. An empty one holds
        // no note, and one walked already holds none it has not given.
        if offset.checked_add(size).is_none_or(|end| end > len) || size == 0 || !walked.insert((offset, size)) {
            continue;
        }
        let search = "more than this reader reads in search of a dylease manifest";
        if walked.len() > MAX_NOTE_SEGMENTS {
            return Err(format!(
                "its program headers list more than {MAX_NOTE_SEGMENTS} PT_NOTE segments, {search}"
            ));
        }
        total += size;
        if total > MAX_NOTE_BYTES {
            return Err(format!(
                "its PT_NOTE segments hold more than {MAX_NOTE_BYTES} bytes, {search}"
            ));
        }
        let align = if align == 8 { 8 } else { 4 };
        merged.segment(offset, align, &file.bytes(offset, size)?)?;
    }
    merged.finish()
}

/// The manifest records read so far.
struct Merged {
    form: Form,
    plugin: Option<Plugin>,
    passes: Vec<DeclaredPass>,
    /// The names of [`Merged::passes`].
    names: HashSet<String>,
}

impl Merged {
    /// Merges the dylease notes of the segment at `offset`.
    fn segment(&mut self, offset: u64, align: usize, bytes: &[u8]) -> Result<(), String> {
        let form = self.form;
        let place = |at: usize| format!("the dylease note at byte {}", offset + at as u64);
        for note in Notes::new(form, bytes, align) {
            let (kind, at, desc) = note.map_err(|(at, what)| {
                corrupt(
                    &place(at),
                    &format!(
                        "{what} run past the end of its PT_NOTE segment (at byte {offset}, {} bytes)",
                        bytes.len()
                    ),
                )
            })?;
            match kind {
                NT_PLUGIN => {
                    // An unknown format is not corruption: say which version it is.
                    let format = form.u32(desc, 0);
                    if desc.len() >= 4 && format != FORMAT_VERSION {
                        return Err(format!(
                            "its dylease manifest ({}) has format version {format}, but this reader knows only version {FORMAT_VERSION}: read it with a newer dylease, or build the plugin with this one's headers",
                            place(at)
                        ));
                    }
                    let record = Plugin::parse(form, desc).map_err(|e| corrupt(&place(at), &e))?;
                    match &self.plugin {
                        None => self.plugin = Some(record),
                        Some(first) if *first == record => {}
                        Some(first) => {
                            return Err(format!(
                                "its dylease manifest has two plugin records that disagree: {} and, at {}, {}",
                                first.describe(),
                                place(at),
                                record.describe()
                            ));
                        }
                    }
                }
                NT_PASS => {
                    let pass = parse_pass(form, desc).map_err(|e| corrupt(&place(at), &e))?;
                    if !self.names.insert(pass.name.clone()) {
                        return Err(format!("its dylease manifest declares the pass `{}` twice", pass.name));
                    }
                    self.passes.push(pass);
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<Option<Manifest>, String> {
        let passes = self.passes;
        match self.plugin {
            Some(plugin) => Ok(Some(Manifest {
                format: plugin.format,
                abi_version: plugin.abi_version,
                name: plugin.name,
                version: plugin.version,
                complete: plugin.flags & FLAG_COMPLETE != 0,
                passes,
            })),
            None if passes.is_empty() => Ok(None),
            None => Err(format!(
                "its dylease manifest declares {} pass(es) (the first `{}`) but has no plugin record",
                passes.len(),
                passes[0].name
            )),
        }
    }
}

fn corrupt(place: &str, what: &str) -> String {
    format!("its dylease manifest is corrupt: {place} {what}")
}

/// A dylease note: its type, its offset in its segment and its descriptor.
type Note<'b> = (u32, usize, &'b [u8]);

/// The dylease notes of one segment: each one's type, offset in the segment and descriptor.
/// A note that runs past the segment's end ends the walk: with `Err` (its offset, and what
/// runs past: completes "… run past the end of its PT_NOTE segment") if it is or could be a dylease
/// note, else quietly, as the loader ignores notes.
struct Notes<'b> {
    form: Form,
    bytes: &'b [u8],
    align: usize,
    at: usize,
    ended: bool,
}

impl<'b> Notes<'b> {
    fn new(form: Form, bytes: &'b [u8], align: usize) -> Notes<'b> {
        Notes {
            form,
            bytes,
            align,
            at: 0,
            ended: false,
        }
    }

    /// Whether the note at `at` could be a dylease note, as far as its bytes in the segment
    /// go: its `n_namesz` is 8 and the bytes of its name there begin as [`NOTE_NAME`] does.
    fn could_be_dylease(&self, at: usize) -> bool {
        let rest = &self.bytes[at..];
        let name = rest.get(12..).unwrap_or_default();
        let name = &name[..name.len().min(NOTE_NAME.len())];
        rest.len() >= 4 && self.form.u32(rest, 0) == 8 && name == &NOTE_NAME[..name.len()]
    }

    /// The next note: `Ok(Some)` if it is a dylease note, `Ok(None)` if not, `Err` if it runs
    /// past the segment's end: with what runs past, or `None` if it is not a dylease note.
    fn next_note(&mut self) -> Result<Option<Note<'b>>, Option<String>> {
        let at = self.at;
        let ours = || self.could_be_dylease(at);
        let Some(header) = self.bytes.get(at..).filter(|rest| rest.len() >= 12) else {
            return Err(ours().then(|| "is truncated: its header would".to_owned()));
        };
        let (namesz, descsz, kind) = (
            self.form.u32(header, 0) as usize,
            self.form.u32(header, 4) as usize,
            self.form.u32(header, 8),
        );
        let name_at = at + 12;
        let desc_at = name_at.checked_add(namesz).map(|end| round_up(end, self.align));
        let Some(end) = desc_at
            .and_then(|desc| desc.checked_add(descsz))
            .filter(|&end| end <= self.bytes.len())
        else {
            return Err(ours()
                .then(|| format!("is truncated: its name ({namesz} bytes) and descriptor ({descsz} bytes) would")));
        };
        let desc_at = end - descsz;
        self.at = round_up(end, self.align).min(self.bytes.len());
        if self.bytes[name_at..name_at + namesz] != NOTE_NAME[..] {
            return Ok(None);
        }
        Ok(Some((kind, at, &self.bytes[desc_at..end])))
    }
}

impl<'b> Iterator for Notes<'b> {
    type Item = Result<Note<'b>, (usize, String)>;

    fn next(&mut self) -> Option<Self::Item> {
        while !self.ended && self.at < self.bytes.len() {
            let at = self.at;
            let next = self.next_note();
            // Each note read moves the cursor past its 12-byte header at least, whatever the
            // bytes: a walk that stood still would loop on the CPU for ever.
            debug_assert!(next.is_err() || self.at > at, "the note walk stood still at {at}");
            match next {
                Ok(Some(note)) => return Some(Ok(note)),
                Ok(None) => {}
                Err(ours) => {
                    self.ended = true;
                    return ours.map(|what| Err((self.at, what)));
                }
            }
        }
        None
    }
}

fn round_up(value: usize, align: usize) -> usize {
    value.div_ceil(align).saturating_mul(align)
}

/// A descriptor, read field by field.
struct Fields<'b> {
    form: Form,
    bytes: &'b [u8],
    at: usize,
}

impl Fields<'_> {
    fn u32(&mut self, what: &str) -> Result<u32, String> {
        if self.bytes.len().saturating_sub(self.at) < 4 {
            return Err(format!(
                "is truncated: its {what} would be at byte {} of a {}-byte descriptor",
                self.at,
                self.bytes.len()
            ));
        }
        let value = self.form.u32(self.bytes, self.at);
        self.at += 4;
        Ok(value)
    }

    fn string(&mut self, what: &str) -> Result<String, String> {
        let len = self.u32(&format!("{what}'s length"))? as usize;
        let a = if what.starts_with(['a', 'e', 'i', 'o', 'u']) {
            "an"
        } else {
            "a"
        };
        let padded = round_up(len, 4);
        if padded > self.bytes.len() - self.at {
            return Err(format!(
                "has {a} {what} of {len} bytes, more than the {} left in its descriptor",
                self.bytes.len() - self.at
            ));
        }
        let raw = &self.bytes[self.at..self.at + len];
        self.at += padded;
        let text = match raw.split_last() {
            None => &[][..],
            Some((0, text)) => text,
            Some(_) => return Err(format!("has {a} {what} that does not end with a NUL within its length")),
        };
        if text.contains(&0) {
            return Err(format!("has {a} {what} with a NUL inside it"));
        }
        String::from_utf8(text.to_vec()).map_err(|_| format!("has {a} {what} that is not UTF-8"))
    }
}

/// A plugin record.
#[derive(Debug, PartialEq, Eq)]
struct Plugin {
    format: u32,
    abi_version: u32,
    flags: u32,
    name: String,
    version: String,
}

impl Plugin {
    fn parse(form: Form, desc: &[u8]) -> Result<Plugin, String> {
        let mut fields = Fields {
            form,
            bytes: desc,
            at: 0,
        };
        Ok(Plugin {
            format: fields.u32("format version")?,
            abi_version: fields.u32("ABI version")?,
            flags: fields.u32("flags")?,
            name: fields.string("plugin name")?,
            version: fields.string("plugin version")?,
        })
    }

    fn describe(&self) -> String {
        format!(
            "`{}` {} (ABI version {}, flags {:#x})",
            self.name, self.version, self.abi_version, self.flags
        )
    }
}

fn parse_pass(form: Form, desc: &[u8]) -> Result<DeclaredPass, String> {
    let mut fields = Fields {
        form,
        bytes: desc,
        at: 0,
    };
    let _flags = fields.u32("flags")?;
    let name = fields.string("pass name")?;
    let interface = fields.string("interface")?;
    Ok(DeclaredPass {
        name,
        interface: (!interface.is_empty()).then_some(interface),
    })
}

/// Files with manifest notes, built byte by byte (64-bit, little-endian, x86_64; and, in
/// [`build::big`], big-endian s390x), for the tests.
#[cfg(test)]
pub(crate) mod build {
    use super::*;

    /// The byte order of the fields written: little-endian (`false`) or big-endian.
    type BigEndian = bool;

    fn u16_in(big: BigEndian, value: u16) -> [u8; 2] {
        if big { value.to_be_bytes() } else { value.to_le_bytes() }
    }

    fn u32_in(big: BigEndian, value: u32) -> [u8; 4] {
        if big { value.to_be_bytes() } else { value.to_le_bytes() }
    }

    fn u64_in(big: BigEndian, value: u64) -> [u8; 8] {
        if big { value.to_be_bytes() } else { value.to_le_bytes() }
    }

    /// A string field: its length (with the NUL) and its bytes, padded to 4.
    fn string_in(big: BigEndian, text: &str) -> Vec<u8> {
        let mut bytes = u32_in(big, (text.len() + 1) as u32).to_vec();
        bytes.extend_from_slice(text.as_bytes());
        bytes.push(0);
        bytes.resize(4 + round_up(text.len() + 1, 4), 0);
        bytes
    }

    pub(crate) fn plugin(format: u32, flags: u32, name: &str, version: &str) -> Vec<u8> {
        plugin_in(false, format, flags, name, version)
    }

    fn plugin_in(big: BigEndian, format: u32, flags: u32, name: &str, version: &str) -> Vec<u8> {
        let mut desc = [format, 2, flags]
            .iter()
            .flat_map(|&v| u32_in(big, v))
            .collect::<Vec<u8>>();
        desc.extend(string_in(big, name));
        desc.extend(string_in(big, version));
        desc
    }

    pub(crate) fn pass(name: &str, interface: &str) -> Vec<u8> {
        pass_in(false, name, interface)
    }

    fn pass_in(big: BigEndian, name: &str, interface: &str) -> Vec<u8> {
        let mut desc = u32_in(big, 0).to_vec();
        desc.extend(string_in(big, name));
        desc.extend(string_in(big, interface));
        desc
    }

    /// One note of `owner`, padded to `align`.
    pub(crate) fn note(owner: &[u8], kind: u32, desc: &[u8], align: usize) -> Vec<u8> {
        note_in(false, owner, kind, desc, align)
    }

    fn note_in(big: BigEndian, owner: &[u8], kind: u32, desc: &[u8], align: usize) -> Vec<u8> {
        let mut bytes = Vec::new();
        for field in [owner.len() as u32, desc.len() as u32, kind] {
            bytes.extend_from_slice(&u32_in(big, field));
        }
        bytes.extend_from_slice(owner);
        bytes.resize(round_up(bytes.len(), align), 0);
        bytes.extend_from_slice(desc);
        bytes.resize(round_up(bytes.len(), align), 0);
        bytes
    }

    pub(crate) fn dylease(kind: u32, desc: &[u8], align: usize) -> Vec<u8> {
        note(NOTE_NAME, kind, desc, align)
    }

    /// A shared-object header and one PT_NOTE program header per segment (its alignment, its
    /// bytes), the segments following the table.
    pub(crate) fn file(segments: &[(u64, Vec<u8>)]) -> Vec<u8> {
        file_in(false, 62, segments)
    }

    /// As [`file`], in the byte order `big`, for ELF machine `machine`.
    fn file_in(big: BigEndian, machine: u16, segments: &[(u64, Vec<u8>)]) -> Vec<u8> {
        let mut bytes = vec![0u8; 64];
        bytes[..6].copy_from_slice(b"\x7fELF\x02\x01");
        bytes[5] = if big { 2 } else { 1 };
        bytes[6] = 1;
        bytes[16..18].copy_from_slice(&u16_in(big, 3));
        bytes[18..20].copy_from_slice(&u16_in(big, machine));
        bytes[32..40].copy_from_slice(&u64_in(big, 64));
        bytes[52..54].copy_from_slice(&u16_in(big, 64));
        bytes[54..56].copy_from_slice(&u16_in(big, 56));
        bytes[56..58].copy_from_slice(&u16_in(big, segments.len() as u16));
        let mut offset = round_up(64 + 56 * segments.len(), 8) as u64;
        for (align, data) in segments {
            let mut entry = [0u8; 56];
            entry[..4].copy_from_slice(&u32_in(big, PT_NOTE));
            entry[4..8].copy_from_slice(&u32_in(big, 4));
            entry[8..16].copy_from_slice(&u64_in(big, offset));
            entry[16..24].copy_from_slice(&u64_in(big, offset));
            entry[24..32].copy_from_slice(&u64_in(big, offset));
            entry[32..40].copy_from_slice(&u64_in(big, data.len() as u64));
            entry[40..48].copy_from_slice(&u64_in(big, data.len() as u64));
            entry[48..56].copy_from_slice(&u64_in(big, *align));
            bytes.extend_from_slice(&entry);
            offset += round_up(data.len(), 8) as u64;
        }
        for (_, data) in segments {
            bytes.resize(round_up(bytes.len(), 8), 0);
            bytes.extend_from_slice(data);
        }
        bytes
    }

    /// The same builders for a big-endian file of a 64-bit s390 (s390x, ELF machine 22), as
    /// a plugin cross-built for it has.
    pub(crate) mod big {
        use super::*;

        pub(crate) fn plugin(format: u32, flags: u32, name: &str, version: &str) -> Vec<u8> {
            plugin_in(true, format, flags, name, version)
        }

        pub(crate) fn pass(name: &str, interface: &str) -> Vec<u8> {
            pass_in(true, name, interface)
        }

        pub(crate) fn dylease(kind: u32, desc: &[u8], align: usize) -> Vec<u8> {
            note_in(true, NOTE_NAME, kind, desc, align)
        }

        pub(crate) fn note(owner: &[u8], kind: u32, desc: &[u8], align: usize) -> Vec<u8> {
            note_in(true, owner, kind, desc, align)
        }

        pub(crate) fn file(segments: &[(u64, Vec<u8>)]) -> Vec<u8> {
            file_in(true, 22, segments)
        }
    }

    /// A shared-object header and one PT_NOTE program header per entry (its offset in
    /// `data`, its size, its alignment), then `data`, which follows the table: for segments
    /// that overlap or repeat.
    pub(crate) fn raw(entries: &[(u64, u64, u64)], data: &[u8]) -> Vec<u8> {
        let mut bytes = file(&[]);
        bytes[56..58].copy_from_slice(&(entries.len() as u16).to_le_bytes());
        let base = round_up(64 + 56 * entries.len(), 8) as u64;
        for &(offset, size, align) in entries {
            let mut entry = [0u8; 56];
            entry[..4].copy_from_slice(&PT_NOTE.to_le_bytes());
            entry[4..8].copy_from_slice(&4u32.to_le_bytes());
            for at in [8, 16, 24] {
                entry[at..at + 8].copy_from_slice(&(base + offset).to_le_bytes());
            }
            entry[32..40].copy_from_slice(&size.to_le_bytes());
            entry[40..48].copy_from_slice(&size.to_le_bytes());
            entry[48..56].copy_from_slice(&align.to_le_bytes());
            bytes.extend_from_slice(&entry);
        }
        bytes.resize(base as usize, 0);
        bytes.extend_from_slice(data);
        bytes
    }

    /// A file with one plugin record (complete) and passes `a` (untyped) and `b` (typed
    /// `num.v1`), in one 4-aligned segment.
    pub(crate) fn sound() -> Vec<u8> {
        let mut notes = dylease(NT_PLUGIN, &plugin(1, FLAG_COMPLETE, "math", "1.0.0"), 4);
        notes.extend(dylease(NT_PASS, &pass("a", ""), 4));
        notes.extend(dylease(NT_PASS, &pass("b", "num.v1"), 4));
        file(&[(4, notes)])
    }
}

#[cfg(all(test, target_os = "linux", target_arch = "x86_64"))]
mod tests {
    use super::build::*;
    use super::*;
    use crate::{Elf, ReadAt};

    fn manifest(bytes: &[u8]) -> Result<Option<Manifest>, String> {
        Elf::new(bytes, bytes.len() as u64)
            .manifest()
            .map_err(|r| r.into_reason())
    }

    fn refusal(bytes: &[u8]) -> String {
        manifest(bytes).unwrap_err()
    }

    fn math(complete: bool, passes: Vec<DeclaredPass>) -> Manifest {
        Manifest {
            format: 1,
            abi_version: 2,
            name: "math".into(),
            version: "1.0.0".into(),
            complete,
            passes,
        }
    }

    #[test]
    fn one_note_segment_gives_the_merged_manifest() {
        assert_eq!(
            manifest(&sound()).unwrap(),
            Some(math(
                true,
                vec![
                    DeclaredPass::new("a", None),
                    DeclaredPass::new("b", Some("num.v1".into()))
                ]
            ))
        );
    }

    /// A plugin cross-built for a big-endian machine (s390x) has its manifest read in its
    /// byte order (`EI_DATA`): the same manifest as the little-endian file's, a foreign note
    /// of its own byte order skipped, while the ELF check refuses the file naming both byte
    /// orders and machines: the manifest is read after the identification bytes only, not
    /// after the full header check (which refuses the file).
    #[test]
    fn a_big_endian_files_manifest_is_read_in_its_byte_order() {
        let mut notes = big::dylease(NT_PLUGIN, &big::plugin(1, FLAG_COMPLETE, "math", "1.0.0"), 4);
        notes.extend(big::note(b"GNU\0", 3, &[1, 2, 3, 4, 5, 6, 7, 8], 4));
        notes.extend(big::dylease(NT_PASS, &big::pass("a", ""), 4));
        notes.extend(big::dylease(NT_PASS, &big::pass("b", "num.v1"), 4));
        let bytes = big::file(&[(4, notes)]);
        assert_eq!(manifest(&bytes).unwrap(), manifest(&sound()).unwrap());
        let checked = Elf::new(&bytes[..], bytes.len() as u64).check().unwrap_err();
        assert_eq!(
            checked.reason(),
            "it is built for a big-endian machine (s390x, ELF machine 22), but this process runs on a \
             little-endian one (x86_64, ELF machine 62)"
        );
        // Only the identification bytes are checked before the notes are read.
        let mut not_elf = bytes.clone();
        not_elf[5] = 7;
        assert_eq!(refusal(&not_elf), "its ELF byte-order byte is invalid (7)");
    }

    #[test]
    fn records_from_several_segments_and_alignments_merge_and_other_owners_are_skipped() {
        // Translation units each with their own notes; the plugin record twice, agreeing;
        // a GNU note between them; an 8-aligned segment.
        let mut first = note(b"GNU\0", 3, &[1, 2, 3, 4, 5, 6, 7, 8], 4);
        first.extend(dylease(NT_PASS, &pass("late", "x"), 4));
        first.extend(dylease(NT_PLUGIN, &plugin(1, 0, "math", "1.0.0"), 4));
        let mut second = dylease(NT_PLUGIN, &plugin(1, 0, "math", "1.0.0"), 8);
        second.extend(note(b"odd\0\0", 7, &[9; 5], 8));
        second.extend(dylease(NT_PASS, &pass("eight", ""), 8));
        second.extend(dylease(99, &[1, 2, 3], 8));
        let bytes = file(&[(4, first), (8, second)]);
        assert_eq!(
            manifest(&bytes).unwrap(),
            Some(math(
                false,
                vec![
                    DeclaredPass::new("late", Some("x".into())),
                    DeclaredPass::new("eight", None)
                ]
            ))
        );
    }

    #[test]
    fn a_file_without_dylease_notes_has_no_manifest() {
        assert_eq!(manifest(&file(&[(4, note(b"GNU\0", 1, &[0; 16], 4))])).unwrap(), None);
        // A note segment past the file's end is not read.
        let mut bytes = sound();
        bytes[64 + 8..64 + 16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(manifest(&bytes).unwrap(), None);
    }

    /// A file in memory counting the bytes read from it.
    struct Counted {
        bytes: Vec<u8>,
        read: std::cell::Cell<u64>,
    }

    impl ReadAt for Counted {
        fn read_at(&self, buffer: &mut [u8], offset: u64) -> std::io::Result<usize> {
            let got = self.bytes.as_slice().read_at(buffer, offset)?;
            self.read.set(self.read.get() + got as u64);
            Ok(got)
        }
    }

    /// The manifest of `bytes` read from a counting source, and how many bytes that read.
    fn counted(bytes: Vec<u8>) -> (Result<Option<Manifest>, String>, u64) {
        let len = bytes.len() as u64;
        let file = Counted {
            bytes,
            read: Default::default(),
        };
        let outcome = Elf::new(&file, len).manifest().map_err(|r| r.into_reason());
        (outcome, file.read.get())
    }

    /// A segment with a plugin record and the pass `a`, then a GNU note of `filler` bytes.
    fn padded_segment(filler: usize) -> Vec<u8> {
        let mut notes = dylease(NT_PLUGIN, &plugin(1, 0, "math", "1.0.0"), 4);
        notes.extend(dylease(NT_PASS, &pass("a", ""), 4));
        notes.extend(note(b"GNU\0", 3, &vec![0x5a; filler], 4));
        notes
    }

    #[test]
    fn a_segment_listed_thousands_of_times_is_read_once() {
        // 300 KiB: larger than a block the file keeps, so that every read of it is counted.
        let segment = padded_segment(300 << 10);
        let size = segment.len() as u64;
        let bytes = raw(&vec![(0, size, 4); 3000], &segment);
        let len = bytes.len() as u64;
        let (outcome, read) = counted(bytes);
        assert_eq!(outcome.unwrap(), Some(math(false, vec![DeclaredPass::new("a", None)])));
        assert!(size <= read && read <= 2 * len, "{read} bytes read of a file of {len}");
        // Without a manifest likewise.
        let gnu = note(b"GNU\0", 3, &vec![0x5a; 300 << 10], 4);
        let bytes = raw(&vec![(0, gnu.len() as u64, 4); 3000], &gnu);
        let len = bytes.len() as u64;
        let (outcome, read) = counted(bytes);
        assert_eq!(outcome.unwrap(), None);
        assert!(read <= 2 * len, "{read} bytes read of a file of {len}");
    }

    #[test]
    fn note_segments_beyond_the_caps_are_refused_before_they_are_read() {
        // Overlapping segments, each starting 4 bytes later: 300 KiB each, four of them
        // more than the cap.
        let zeros = vec![0u8; 300 << 10];
        let size = zeros.len() as u64;
        let entries: Vec<_> = (0..8).map(|i| (4 * i, size - 4 * i, 4)).collect();
        let (outcome, read) = counted(raw(&entries, &zeros));
        assert_eq!(
            outcome.unwrap_err(),
            format!(
                "its PT_NOTE segments hold more than {MAX_NOTE_BYTES} bytes, more than this reader reads in search of a dylease manifest"
            )
        );
        assert!(read <= MAX_NOTE_BYTES + (64 << 10), "{read} bytes read");
        // As many as the cap: read (zeros are empty notes of no owner).
        let entries: Vec<_> = (0..4).map(|i| (i, MAX_NOTE_BYTES / 4, 4)).collect();
        assert_eq!(manifest(&raw(&entries, &vec![0; 1 << 20])).unwrap(), None);
        // Small segments, many of them: as many as the cap (read), then one more.
        let small = |count: usize| {
            let entries: Vec<_> = (0..count as u64).map(|i| (4 * i, 12, 4)).collect();
            raw(&entries, &vec![0; 4 * entries.len() + 12])
        };
        assert_eq!(manifest(&small(MAX_NOTE_SEGMENTS)).unwrap(), None);
        assert_eq!(
            refusal(&small(MAX_NOTE_SEGMENTS + 1)),
            format!(
                "its program headers list more than {MAX_NOTE_SEGMENTS} PT_NOTE segments, more than this reader reads in search of a dylease manifest"
            )
        );
        // Zero-sized segments and repeated ones are not counted.
        let mut entries: Vec<_> = (0..4000).map(|i| (4 * i, 0, 4)).collect();
        entries.extend(vec![(0, 12, 4); 4000]);
        assert_eq!(manifest(&raw(&entries, &vec![0; 16_000])).unwrap(), None);
    }

    #[test]
    fn a_damaged_note_of_another_owner_ends_its_segment_not_the_read() {
        let gnu = note(b"GNU\0", 3, &[0x11; 20], 4);
        let sound = || {
            let mut notes = dylease(NT_PLUGIN, &plugin(1, 0, "math", "1.0.0"), 4);
            notes.extend(dylease(NT_PASS, &pass("a", ""), 4));
            notes
        };
        let only_a = Some(math(false, vec![DeclaredPass::new("a", None)]));
        // A truncated build-id note, alone: no manifest, as the loader sees it.
        for cut in [2, 6, 12, 15, gnu.len() - 1] {
            let bytes = file(&[(4, gnu[..cut].to_vec())]);
            assert_eq!(manifest(&bytes), Ok(None), "cut at {cut}");
            // After the dylease notes, in their segment or in one of its own.
            let mut after = sound();
            after.extend_from_slice(&gnu[..cut]);
            assert_eq!(manifest(&file(&[(4, after)])), Ok(only_a.clone()), "cut at {cut}");
            let bytes = file(&[(4, sound()), (4, gnu[..cut].to_vec())]);
            assert_eq!(manifest(&bytes), Ok(only_a.clone()), "cut at {cut}");
        }
        // A foreign note whose descriptor size runs past the segment ends the walk of that
        // segment: the dylease notes after it are not read.
        let mut huge = gnu.clone();
        huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        huge.extend(sound());
        assert_eq!(manifest(&file(&[(4, huge.clone())])), Ok(None));
        assert_eq!(manifest(&file(&[(4, huge), (4, sound())])), Ok(only_a.clone()));
        // An owner of 8 bytes that is not dylease, truncated.
        let android = note(b"Android\0", 1, &[0; 16], 4);
        assert_eq!(manifest(&file(&[(4, android[..24].to_vec())])), Ok(None));
        // A truncated dylease note, or one that could be (the header says 8 bytes of name
        // and the bytes there begin as "dylease\0"), is refused, saying so.
        let pass_note = dylease(NT_PASS, &pass("b", ""), 4);
        for cut in [4, 10, 12, 15, 20, pass_note.len() - 1] {
            let mut notes = sound();
            notes.extend_from_slice(&pass_note[..cut]);
            let reason = refusal(&file(&[(4, notes)]));
            assert!(
                reason.starts_with("its dylease manifest is corrupt: the dylease note at byte ")
                    && reason.contains("truncated"),
                "cut at {cut}: {reason}"
            );
        }
    }

    #[test]
    fn a_hundred_thousand_pass_records_are_refused_at_once() {
        // Quadratic merging would take minutes.
        let mut notes = dylease(NT_PLUGIN, &plugin(1, 0, "math", "1.0.0"), 4);
        for i in 0..100_000 {
            notes.extend(dylease(NT_PASS, &pass(&i.to_string(), ""), 4));
        }
        assert!(notes.len() as u64 > MAX_NOTE_BYTES);
        let reason = refusal(&file(&[(4, notes)]));
        assert!(reason.contains("hold more than 1048576 bytes"), "{reason}");
    }

    #[test]
    fn as_many_pass_records_as_the_cap_holds_are_read() {
        let mut notes = dylease(NT_PLUGIN, &plugin(1, 0, "math", "1.0.0"), 4);
        let mut passes = Vec::new();
        for i in 0.. {
            let record = dylease(NT_PASS, &pass(&i.to_string(), ""), 4);
            if (notes.len() + record.len()) as u64 > MAX_NOTE_BYTES {
                break;
            }
            notes.extend(record);
            passes.push(DeclaredPass::new(i.to_string(), None));
        }
        assert!(passes.len() > 20_000, "{}", passes.len());
        assert_eq!(manifest(&file(&[(4, notes)])).unwrap(), Some(math(false, passes)));
    }

    /// A string of length 0 is the empty string, even as the descriptor's last field (its
    /// length the last 4 bytes): here an empty interface, so an untyped pass.
    #[test]
    fn a_string_of_length_zero_is_empty_even_as_the_last_field() {
        let mut zero = pass("a", "");
        zero.truncate(4 + 8);
        zero.extend_from_slice(&0u32.to_le_bytes());
        let mut notes = dylease(NT_PLUGIN, &plugin(1, 0, "math", "1.0.0"), 4);
        notes.extend(dylease(NT_PASS, &zero, 4));
        let expected = math(false, vec![DeclaredPass::new("a", None)]);
        assert_eq!(manifest(&file(&[(4, notes)])), Ok(Some(expected)));
    }

    #[test]
    fn each_corruption_is_refused_with_its_cause() {
        let plugin_note = dylease(NT_PLUGIN, &plugin(1, 0, "math", "1.0.0"), 4);
        let one = |extra: Vec<u8>| {
            let mut notes = plugin_note.clone();
            notes.extend(extra);
            file(&[(4, notes)])
        };
        // Truncated: the segment ends inside a note.
        let whole = one(dylease(NT_PASS, &pass("a", ""), 4));
        let mut cut = whole.clone();
        let size = (plugin_note.len() + 10) as u64;
        cut[64 + 32..64 + 40].copy_from_slice(&size.to_le_bytes());
        assert!(refusal(&cut).contains("truncated"), "{}", refusal(&cut));
        let mut cut = whole.clone();
        cut[64 + 32..64 + 40].copy_from_slice(&(plugin_note.len() as u64 + 20).to_le_bytes());
        assert!(
            refusal(&cut).contains("would run past the end of its PT_NOTE segment"),
            "{}",
            refusal(&cut)
        );
        // A string length past its descriptor.
        let mut long = pass("a", "");
        long[4..8].copy_from_slice(&1000u32.to_le_bytes());
        let reason = refusal(&one(dylease(NT_PASS, &long, 4)));
        assert!(
            reason.contains("pass name of 1000 bytes, more than the 12 left in its descriptor"),
            "{reason}"
        );
        // Past it by one byte.
        long[4..8].copy_from_slice(&13u32.to_le_bytes());
        let reason = refusal(&one(dylease(NT_PASS, &long, 4)));
        assert!(
            reason.contains("pass name of 13 bytes, more than the 12 left"),
            "{reason}"
        );
        // A descriptor too short for its fields.
        let reason = refusal(&file(&[(4, dylease(NT_PLUGIN, &[1, 0, 0, 0, 2, 0], 4))]));
        assert!(reason.contains("is truncated: its ABI version"), "{reason}");
        // Not UTF-8, and no NUL at the end.
        let mut bad = pass("ab", "");
        bad[4 + 4] = 0xff;
        let reason = refusal(&one(dylease(NT_PASS, &bad, 4)));
        assert!(reason.contains("pass name that is not UTF-8"), "{reason}");
        let mut unterminated = pass("abc", "");
        unterminated[4 + 4 + 3] = b'd';
        let reason = refusal(&one(dylease(NT_PASS, &unterminated, 4)));
        assert!(reason.contains("does not end with a NUL"), "{reason}");
        // Two plugin records that disagree.
        let reason = refusal(&one(dylease(NT_PLUGIN, &plugin(1, 0, "math", "1.0.1"), 4)));
        assert!(
            reason.contains("two plugin records that disagree: `math` 1.0.0"),
            "{reason}"
        );
        let reason = refusal(&one(dylease(NT_PLUGIN, &plugin(1, FLAG_COMPLETE, "math", "1.0.0"), 4)));
        assert!(reason.contains("disagree"), "{reason}");
        // A pass declared twice.
        let mut twice = dylease(NT_PASS, &pass("a", ""), 4);
        twice.extend(dylease(NT_PASS, &pass("a", "t"), 4));
        assert_eq!(refusal(&one(twice)), "its dylease manifest declares the pass `a` twice");
        // An unknown format version, named.
        let reason = refusal(&file(&[(4, dylease(NT_PLUGIN, &plugin(7, 0, "m", "1"), 4))]));
        assert!(
            reason.starts_with("its dylease manifest (the dylease note at byte ")
                && reason.contains("has format version 7, but this reader knows only version 1: "),
            "{reason}"
        );
        // Pass records without a plugin record.
        let reason = refusal(&file(&[(4, dylease(NT_PASS, &pass("a", ""), 4))]));
        assert!(
            reason.contains("declares 1 pass(es) (the first `a`) but has no plugin record"),
            "{reason}"
        );
        // 8-aligned notes read with 4-byte padding go wrong: the alignment is the segment's.
        let eight = file(&[(8, dylease(NT_PLUGIN, &plugin(1, 0, "ab", "1"), 8))]);
        assert!(manifest(&eight).unwrap().is_some());
        let mut as_four = eight.clone();
        as_four[64 + 48..64 + 56].copy_from_slice(&4u64.to_le_bytes());
        assert_ne!(manifest(&as_four), manifest(&eight));
    }
}
