//! Where functions start, from the unwind tables (PT_GNU_EH_FRAME and the `.eh_frame` records
//! it indexes): the loader calls DT_INIT, DT_FINI and the init and fini arrays' entries, and
//! an address that the tables place *inside* a function (not at its start) would start
//! running code mid-instruction. Only the tables' common form is read (a sorted table of
//! `datarel | sdata4` entries, FDEs in `.eh_frame` of a loaded segment); in any other form,
//! or without tables, nothing is known and nothing is refused on their account.

use std::collections::HashMap;

use super::{Image, Segment};
use crate::source::{Bytes, Form};

const DW_EH_PE_OMIT: u8 = 0xff;
const DW_EH_PE_PCREL: u8 = 0x10;
const DW_EH_PE_DATAREL: u8 = 0x30;
/// A sorted table of `(initial location, FDE address)` pairs relative to the header.
const TABLE_ENCODING: u8 = DW_EH_PE_DATAREL | 0x0b;

/// Most FDEs read: far more than a real library has.
const MAX_FUNCTIONS: u64 = 1 << 20;

/// The functions the unwind tables describe, as `(start, end)` address ranges sorted by
/// start; `None` when there are no tables or they are in a form not read here.
pub(super) fn function_ranges(
    file: &dyn Bytes,
    image: &Image,
    header: &Segment,
    form: Form,
) -> Option<Vec<(u64, u64)>> {
    let hdr = image.read(file, header.vaddr, header.filesz, String::new).ok()?;
    if hdr.len() < 4 || hdr[0] != 1 || hdr[3] != TABLE_ENCODING {
        return None;
    }
    let (pointer_encoding, count_encoding) = (hdr[1], hdr[2]);
    let mut at = 4;
    let eh_frame = Reader::new(&hdr, header.vaddr, form).pointer(&mut at, pointer_encoding)?;
    let count = Reader::new(&hdr, header.vaddr, form).pointer(&mut at, count_encoding)?;
    if count > MAX_FUNCTIONS || (hdr.len() - at) as u64 / 8 < count {
        return None;
    }
    let load = image.backing(eh_frame, 1)?;
    let size = (load.vaddr + load.filesz - eh_frame).min(64 << 20);
    let frames = image.read(file, eh_frame, size, String::new).ok()?;
    let frames = Reader::new(&frames, eh_frame, form);
    let mut cies: HashMap<usize, u8> = HashMap::new();
    let mut ranges = Vec::with_capacity(count as usize);
    for entry in 0..count as usize {
        let entry = at + entry * 8;
        let start = header
            .vaddr
            .wrapping_add(i64::from(form.u32(&hdr, entry) as i32) as u64);
        let fde = header
            .vaddr
            .wrapping_add(i64::from(form.u32(&hdr, entry + 4) as i32) as u64);
        let fde = usize::try_from(fde.checked_sub(eh_frame)?).ok()?;
        let length = form.u32(frames.bytes, fde);
        if length == 0 || length == u32::MAX || fde + 8 > frames.bytes.len() {
            return None;
        }
        let cie = (fde + 4).checked_sub(form.u32(frames.bytes, fde + 4) as usize)?;
        let encoding = match cies.get(&cie) {
            Some(&encoding) => encoding,
            None => {
                let encoding = frames.cie_encoding(cie)?;
                cies.insert(cie, encoding);
                encoding
            }
        };
        let mut at = fde + 8;
        let begin = frames.pointer(&mut at, encoding)?;
        let range = frames.pointer(&mut at, encoding & 0x0f)?;
        if begin != start {
            return None;
        }
        ranges.push((begin, begin.checked_add(range)?));
    }
    ranges.sort_unstable();
    Some(ranges)
}

/// The start of the function the tables place `address` inside of, when that is not
/// `address` itself.
pub(super) fn inside(ranges: &[(u64, u64)], address: u64) -> Option<u64> {
    let index = ranges.partition_point(|&(start, _)| start <= address).checked_sub(1)?;
    let (start, end) = ranges[index];
    (start < address && address < end).then_some(start)
}

/// Bytes loaded at `base`, read as DWARF exception-handling data.
struct Reader<'a> {
    bytes: &'a [u8],
    base: u64,
    form: Form,
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8], base: u64, form: Form) -> Reader<'a> {
        Reader { bytes, base, form }
    }

    fn byte(&self, at: &mut usize) -> Option<u8> {
        let byte = *self.bytes.get(*at)?;
        *at += 1;
        Some(byte)
    }

    fn leb128(&self, at: &mut usize, signed: bool) -> Option<u64> {
        let (mut value, mut shift) = (0u64, 0u32);
        loop {
            let byte = self.byte(at)?;
            if shift < 64 {
                value |= u64::from(byte & 0x7f) << shift;
            }
            shift += 7;
            if byte & 0x80 == 0 {
                if signed && shift < 64 && byte & 0x40 != 0 {
                    value |= u64::MAX << shift;
                }
                return Some(value);
            }
            if shift > 70 {
                return None;
            }
        }
    }

    /// The `N` bytes at `at` (moving past them), or `None` past the end.
    fn fixed<const N: usize>(&self, at: &mut usize) -> Option<&'a [u8]> {
        let bytes = self.bytes.get(*at..at.checked_add(N)?)?;
        *at += N;
        Some(bytes)
    }

    /// A pointer in `encoding` (`DW_EH_PE_*`): absolute, relative to its own address, or to
    /// the start of these bytes.
    fn pointer(&self, at: &mut usize, encoding: u8) -> Option<u64> {
        if encoding == DW_EH_PE_OMIT {
            return None;
        }
        let field = self.base.wrapping_add(*at as u64);
        let value = match encoding & 0x0f {
            0x00 if self.form.wide => self.form.u64(self.fixed::<8>(at)?, 0),
            0x00 => self.form.u32(self.fixed::<4>(at)?, 0).into(),
            0x01 => self.leb128(at, false)?,
            0x02 => self.form.u16(self.fixed::<2>(at)?, 0).into(),
            0x03 => self.form.u32(self.fixed::<4>(at)?, 0).into(),
            0x04 | 0x0c => self.form.u64(self.fixed::<8>(at)?, 0),
            0x09 => self.leb128(at, true)?,
            0x0a => i64::from(self.form.u16(self.fixed::<2>(at)?, 0) as i16) as u64,
            0x0b => i64::from(self.form.u32(self.fixed::<4>(at)?, 0) as i32) as u64,
            _ => return None,
        };
        match encoding & 0x70 {
            0x00 => Some(value),
            DW_EH_PE_PCREL => Some(field.wrapping_add(value)),
            DW_EH_PE_DATAREL => Some(self.base.wrapping_add(value)),
            _ => None,
        }
    }

    /// The FDE pointer encoding a CIE at `at` gives (its augmentation's `R`; absolute
    /// without one).
    fn cie_encoding(&self, mut at: usize) -> Option<u8> {
        let length = self.form.u32(self.bytes, at);
        if length == 0 || length == u32::MAX || self.form.u32(self.bytes, at + 4) != 0 {
            return None;
        }
        at += 8;
        let version = self.byte(&mut at)?;
        let end = at + self.bytes.get(at..)?.iter().position(|&b| b == 0)?;
        let augmentation = self.bytes[at..end].to_vec();
        at = end + 1;
        if augmentation.first() != Some(&b'z') {
            return augmentation.is_empty().then_some(0x00);
        }
        self.leb128(&mut at, false)?;
        self.leb128(&mut at, true)?;
        if version == 1 {
            self.byte(&mut at)?;
        } else {
            self.leb128(&mut at, false)?;
        }
        self.leb128(&mut at, false)?;
        for letter in &augmentation[1..] {
            match letter {
                b'R' => return self.byte(&mut at),
                b'P' => {
                    let encoding = self.byte(&mut at)?;
                    self.pointer(&mut at, encoding & 0x0f)?;
                }
                b'L' => {
                    self.byte(&mut at)?;
                }
                b'S' | b'B' | b'G' => {}
                _ => return None,
            }
        }
        Some(0x00)
    }
}
