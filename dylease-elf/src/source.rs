//! Where the checks get a file's bytes: [`ReadAt`] (a positioned read, `pread`), an [`Elf`]
//! that keeps what it read, and [`Form`], the one reader of multi-byte fields.

use std::borrow::Cow;
use std::cell::{OnceCell, RefCell};
use std::fs::File;

/// A source of a file's bytes that reads at an offset without moving any position, as `pread`
/// does: a [`File`] (on Unix and Windows) or the bytes themselves (`&[u8]`).
pub trait ReadAt {
    /// Reads into `buffer` from `offset` on; returns how many bytes it read (0 at the end).
    fn read_at(&self, buffer: &mut [u8], offset: u64) -> std::io::Result<usize>;
}

impl ReadAt for File {
    #[cfg(unix)]
    fn read_at(&self, buffer: &mut [u8], offset: u64) -> std::io::Result<usize> {
        std::os::unix::fs::FileExt::read_at(self, buffer, offset)
    }

    #[cfg(windows)]
    fn read_at(&self, buffer: &mut [u8], offset: u64) -> std::io::Result<usize> {
        std::os::windows::fs::FileExt::seek_read(self, buffer, offset)
    }

    #[cfg(not(any(unix, windows)))]
    fn read_at(&self, _: &mut [u8], _: u64) -> std::io::Result<usize> {
        Err(std::io::ErrorKind::Unsupported.into())
    }
}

impl ReadAt for [u8] {
    fn read_at(&self, buffer: &mut [u8], offset: u64) -> std::io::Result<usize> {
        let start = usize::try_from(offset).unwrap_or(usize::MAX).min(self.len());
        let n = buffer.len().min(self.len() - start);
        buffer[..n].copy_from_slice(&self[start..start + n]);
        Ok(n)
    }
}

impl<T: ReadAt + ?Sized> ReadAt for &T {
    fn read_at(&self, buffer: &mut [u8], offset: u64) -> std::io::Result<usize> {
        (**self).read_at(buffer, offset)
    }
}

/// Fills `buffer` from `offset` on, stopping early only at the end of the file; returns how
/// many bytes it read. The one loop over partial reads.
pub(crate) fn read_exactly(
    read_at: impl Fn(&mut [u8], u64) -> std::io::Result<usize>,
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

/// A library file to check: its source, its length (as its status said when it was opened)
/// and the parts of it read so far.
///
/// Every check of one `Elf` reads the file through it: the header check, the structural
/// check, the linkage and the pin facts read the same headers and tables, from the file once.
/// A file of at most 64 KiB is read whole by the first read (its headers and tables lie all
/// over it, and one read is cheaper than one per table); of a larger one, the blocks read are
/// kept (up to 1 MiB, none larger than 256 KiB: headers and the tables the loader reads, not a
/// whole library). The kept bytes live as long as this value: a file opened again is read
/// again.
///
/// ```
/// use dylease_elf::Elf;
///
/// // The bytes in memory here; the host passes the `File` it opened.
/// let bytes: &[u8] = b"#!/bin/sh\n";
/// let elf = Elf::new(bytes, bytes.len() as u64);
/// let refusal = elf.check().unwrap_err();
/// assert_eq!(
///     refusal.reason(),
///     "it is not an ELF shared library (it does not begin with the ELF magic bytes)"
/// );
/// ```
#[derive(Debug)]
pub struct Elf<S> {
    source: S,
    len: u64,
    /// The whole file, as the first read found it, when it has at most [`WHOLE_FILE`] bytes
    /// (empty otherwise).
    whole: OnceCell<Vec<u8>>,
    /// Blocks read, by offset.
    kept: RefCell<Kept>,
}

/// The blocks of a file read so far, and their total size.
#[derive(Debug, Default)]
struct Kept {
    blocks: Vec<(u64, Vec<u8>)>,
    bytes: usize,
}

/// The most one file's kept blocks hold, and the largest block kept.
const KEPT_BYTES: usize = 1 << 20;
const KEPT_BLOCK: usize = 256 << 10;

/// The largest file the first read takes whole.
const WHOLE_FILE: u64 = 64 << 10;

impl<S: ReadAt> Elf<S> {
    /// The file `source` reads, of `len` bytes (its length as read from the descriptor the
    /// loader will map). Reads nothing yet.
    pub fn new(source: S, len: u64) -> Elf<S> {
        Elf {
            source,
            len,
            whole: OnceCell::new(),
            kept: RefCell::default(),
        }
    }

    /// The source the file is read from.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// The source, giving up the bytes kept.
    pub fn into_source(self) -> S {
        self.source
    }

    /// The file's length, as given to [`Elf::new`].
    pub fn file_len(&self) -> u64 {
        self.len
    }

    /// The whole file, when it has at most [`WHOLE_FILE`] bytes and could be read whole (as
    /// long as [`Elf::file_len`] says).
    pub(crate) fn whole(&self) -> Option<&[u8]> {
        let whole = self.read_whole().ok()?;
        (whole.len() as u64 == self.len).then_some(whole)
    }

    /// [`Elf::whole`], read at the first call; empty for a larger file. A file that shrank
    /// since its length was taken gives fewer bytes.
    fn read_whole(&self) -> std::io::Result<&[u8]> {
        if let Some(whole) = self.whole.get() {
            return Ok(whole);
        }
        let mut whole = Vec::new();
        if self.len <= WHOLE_FILE {
            whole = vec![0; self.len as usize];
            let got = read_exactly(|buffer, offset| self.source.read_at(buffer, offset), &mut whole, 0)?;
            whole.truncate(got);
        }
        Ok(self.whole.get_or_init(|| whole))
    }

    /// Reads from `offset` on, as `pread` does, from the whole small file or from the blocks
    /// read before when one holds all of `buffer`; else from the source, keeping the block.
    pub(crate) fn read_at(&self, buffer: &mut [u8], offset: u64) -> std::io::Result<usize> {
        let end = offset.saturating_add(buffer.len() as u64);
        let whole = self.read_whole()?;
        if end <= whole.len() as u64 {
            buffer.copy_from_slice(&whole[offset as usize..end as usize]);
            return Ok(buffer.len());
        }
        // Past the end of a file that shrank, or a larger file.
        let mut kept = self.kept.borrow_mut();
        let held = kept
            .blocks
            .iter()
            .find(|(start, bytes)| *start <= offset && end <= start + bytes.len() as u64);
        if let Some((start, bytes)) = held {
            let from = (offset - start) as usize;
            buffer.copy_from_slice(&bytes[from..from + buffer.len()]);
            return Ok(buffer.len());
        }
        let got = self.source.read_at(buffer, offset)?;
        if got <= KEPT_BLOCK && kept.bytes + got <= KEPT_BYTES {
            kept.bytes += got;
            kept.blocks.push((offset, buffer[..got].to_vec()));
        }
        Ok(got)
    }

    /// Fills `buffer` from `offset` on, stopping early only at the end of the file.
    pub(crate) fn read_exactly(&self, buffer: &mut [u8], offset: u64) -> std::io::Result<usize> {
        read_exactly(|buffer, offset| self.read_at(buffer, offset), buffer, offset)
    }

    /// How many blocks of the file were kept (the whole small file not counted).
    #[cfg(test)]
    pub(crate) fn kept_blocks(&self) -> usize {
        self.kept.borrow().blocks.len()
    }
}

/// The bytes of a file as the checks past the header read them: exactly the range asked
/// for, or why not. (A trait object, so that those checks are not generic over the source.)
pub(crate) trait Bytes {
    /// The file's length.
    fn len(&self) -> u64;

    /// Exactly `size` bytes from `offset`, or why not: borrowed from the whole file in
    /// memory, else read.
    fn bytes(&self, offset: u64, size: u64) -> Result<Cow<'_, [u8]>, String>;
}

impl<S: ReadAt> Bytes for Elf<S> {
    fn len(&self) -> u64 {
        self.len
    }

    fn bytes(&self, offset: u64, size: u64) -> Result<Cow<'_, [u8]>, String> {
        let end = offset.checked_add(size).filter(|&end| end <= self.len).ok_or_else(|| {
            format!(
                "its headers describe bytes {offset}..+{size}, past the file's end ({} bytes)",
                self.len
            )
        })?;
        let size = usize::try_from(size).map_err(|_| format!("it describes a table of {size} bytes"))?;
        if let Some(held) = self
            .whole()
            .and_then(|whole| whole.get(usize::try_from(offset).ok()?..usize::try_from(end).ok()?))
        {
            return Ok(Cow::Borrowed(held));
        }
        let mut buffer = vec![0; size];
        match self.read_exactly(&mut buffer, offset) {
            Ok(done) if done < size => Err(format!(
                "the file is truncated: it ended at byte {} while reading up to byte {end}",
                offset + done as u64
            )),
            Ok(_) => Ok(Cow::Owned(buffer)),
            Err(e) => Err(format!("cannot read it: {e}")),
        }
    }
}

/// How a file's multi-byte fields are laid out: its class (64-bit or 32-bit, which sets the
/// width of addresses and offsets) and byte order, from its identification bytes. Every field
/// the checks read goes through [`Form::u16`], [`Form::u32`], [`Form::u64`] or
/// [`Form::word`]; a field the bytes are too short for reads as zero (callers check lengths
/// first).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Form {
    /// 64-bit (`ELFCLASS64`), rather than 32-bit.
    pub(crate) wide: bool,
    pub(crate) big_endian: bool,
}

impl Form {
    /// This process's class and byte order: the only ones the header check passes.
    pub(crate) const NATIVE: Form = Form {
        wide: cfg!(target_pointer_width = "64"),
        big_endian: cfg!(target_endian = "big"),
    };

    /// The form the identification bytes `head` (`EI_CLASS`, `EI_DATA`) give; a value other
    /// than 2 ("64-bit", "big-endian") reads as the other.
    pub(crate) fn of(head: &[u8]) -> Form {
        Form {
            wide: head.get(4) == Some(&2),
            big_endian: head.get(5) == Some(&2),
        }
    }

    fn field<const N: usize>(self, bytes: &[u8], at: usize) -> [u8; N] {
        let mut field = [0; N];
        if let Some(bytes) = bytes.get(at..at.saturating_add(N)) {
            field.copy_from_slice(bytes);
        }
        if self.big_endian {
            field.reverse();
        }
        field
    }

    pub(crate) fn u16(self, bytes: &[u8], at: usize) -> u16 {
        u16::from_le_bytes(self.field(bytes, at))
    }

    pub(crate) fn u32(self, bytes: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(self.field(bytes, at))
    }

    pub(crate) fn u64(self, bytes: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(self.field(bytes, at))
    }

    /// An address or offset: 8 bytes in a 64-bit file, 4 in a 32-bit one.
    pub(crate) fn word(self, bytes: &[u8], at: usize) -> u64 {
        if self.wide {
            self.u64(bytes, at)
        } else {
            self.u32(bytes, at).into()
        }
    }

    /// The size of a [`Form::word`].
    pub(crate) fn word_size(self) -> u64 {
        if self.wide { 8 } else { 4 }
    }

    /// Where the ELF header `head` says the program header table is: offset, entry size,
    /// number of entries.
    pub(crate) fn program_headers(self, head: &[u8]) -> (u64, u16, u16) {
        if self.wide {
            (self.u64(head, 32), self.u16(head, 54), self.u16(head, 56))
        } else {
            (self.u32(head, 28).into(), self.u16(head, 42), self.u16(head, 44))
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    #[test]
    fn a_read_served_from_kept_blocks_gives_the_files_bytes() {
        let path = std::env::temp_dir().join(format!("dylease-elf-kept-{}", std::process::id()));
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let file = File::open(&path).unwrap();
        let len = file.metadata().unwrap().len();
        let elf = Elf::new(file, len);
        // Reads inside the file, at scattered offsets and lengths, then one past its end.
        for (offset, len) in [(100, 4000), (164, 64), (3000, 1100), (4000, 200), (9990, 20)] {
            let mut buffer = vec![0; len];
            let got = elf.read_at(&mut buffer, offset).unwrap();
            let end = (offset as usize + len).min(bytes.len());
            assert_eq!(&buffer[..got], &bytes[offset as usize..end], "{len} bytes at {offset}");
        }
        // A file this small is read whole by the first read; only the read past its end
        // went to the file again.
        assert!(elf.whole() == Some(bytes.as_slice()), "the file was not kept whole");
        assert_eq!(elf.kept_blocks(), 1);
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn fields_read_in_the_files_byte_order() {
        let bytes = [1, 2, 3, 4, 5, 6, 7, 8];
        let little = Form {
            wide: true,
            big_endian: false,
        };
        let big = Form {
            wide: false,
            big_endian: true,
        };
        assert_eq!(little.u16(&bytes, 0), 0x0201);
        assert_eq!(big.u16(&bytes, 0), 0x0102);
        assert_eq!(little.word(&bytes, 0), 0x0807_0605_0403_0201);
        assert_eq!(big.word(&bytes, 4), 0x0506_0708);
        // Too short: zero.
        assert_eq!(big.u32(&bytes, 6), 0);
    }
}
