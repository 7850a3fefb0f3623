//! A plugin file found by discovery, and what identifies it: the value the trust check, the
//! pipeline and the registry pass between them.

use std::cell::RefCell;
use std::fs::{File, Metadata};
use std::path::PathBuf;

/// A library file found by discovery, not yet opened.
#[derive(Debug)]
pub(crate) struct Candidate {
    /// The path as discovered (what errors and `PluginInfo::path` show).
    pub(crate) path: PathBuf,
    /// The path with symlinks resolved (what is opened).
    pub(crate) resolved: PathBuf,
    /// What makes it the same file as another ((dev, ino) on Unix).
    pub(crate) identity: Identity,
    /// The file the trust check passed at `resolved`, if it ran: what is opened must be it.
    pub(crate) checked: Option<FileId>,
    /// The file's status as discovery read it, where its directory entry is no symlink: the
    /// trust check judges the file by it instead of reading it again, once (the open then
    /// holds the file to this identity, as to any the check passed).
    pub(crate) discovered: Option<Status>,
}

pub(crate) use crate::load::sys::{FileId, Identity, Status};

/// A plugin file opened for its checks: the descriptor they read (and the loader maps), its
/// status as read from that descriptor, and the parts of it the checks read so far. The
/// blocks are kept only as long as this descriptor: a file opened again is read again.
#[derive(Debug)]
pub(crate) struct Opened {
    pub(crate) file: File,
    pub(crate) metadata: Metadata,
    /// Blocks read, by offset: the ELF check, the dependency walk and the pinning prediction
    /// read the same headers and tables, from the disk once.
    read: RefCell<Read>,
}

/// The blocks of a file read so far, and their total size.
#[derive(Debug, Default)]
struct Read {
    blocks: Vec<(u64, Vec<u8>)>,
    bytes: usize,
}

/// The most one file's kept blocks hold, and the largest block kept: headers and the
/// tables the loader reads, not a whole large library.
const KEPT_BYTES: usize = 1 << 20;
const KEPT_BLOCK: usize = 256 << 10;

impl Opened {
    pub(crate) fn new(file: File, metadata: Metadata) -> Opened {
        Opened {
            file,
            metadata,
            read: RefCell::default(),
        }
    }

    /// Reads from `offset` on without moving the file's position, as `pread` does, from the
    /// blocks read before when one holds all of `buffer`.
    pub(crate) fn read_at(&self, buffer: &mut [u8], offset: u64) -> std::io::Result<usize> {
        let mut read = self.read.borrow_mut();
        let end = offset.saturating_add(buffer.len() as u64);
        let held = read
            .blocks
            .iter()
            .find(|(start, bytes)| *start <= offset && end <= start + bytes.len() as u64);
        if let Some((start, bytes)) = held {
            let from = (offset - start) as usize;
            buffer.copy_from_slice(&bytes[from..from + buffer.len()]);
            return Ok(buffer.len());
        }
        let got = crate::load::elf::read_at(&self.file, buffer, offset)?;
        if got <= KEPT_BLOCK && read.bytes + got <= KEPT_BYTES {
            read.bytes += got;
            read.blocks.push((offset, buffer[..got].to_vec()));
        }
        Ok(got)
    }
}

#[cfg(all(test, unix, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_read_served_from_kept_blocks_gives_the_files_bytes() {
        let path = std::env::temp_dir().join(format!("dylease-opened-{}", std::process::id()));
        let bytes: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let file = File::open(&path).unwrap();
        let metadata = file.metadata().unwrap();
        let opened = Opened::new(file, metadata);
        // Read from the file, then from the kept block (inside it, at its end), then across
        // its end (from the file again), then past the file's end.
        for (offset, len) in [(100, 4000), (164, 64), (3000, 1100), (4000, 200), (9990, 20)] {
            let mut buffer = vec![0; len];
            let got = opened.read_at(&mut buffer, offset).unwrap();
            let end = (offset as usize + len).min(bytes.len());
            assert_eq!(&buffer[..got], &bytes[offset as usize..end], "{len} bytes at {offset}");
        }
        std::fs::remove_file(&path).unwrap();
    }
}
