//! Linux, holding a file's bytes still between their digest and their mapping (signed plugins,
//! `provenance`): a read lease on the checked descriptor (`fcntl(F_SETLEASE, F_RDLCK)`), and
//! a sealed copy in memory (`memfd_create`, `F_ADD_SEALS`) where no lease can be taken. Safe
//! code over `sys::raw`'s calls.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, Seek as _, SeekFrom};
use std::os::fd::AsFd as _;

use crate::sys::raw;

/// The signal the kernel sends this process when a writer's open breaks one of its leases.
/// `SIGIO`, the default, ends a process that has no handler for it; `SIGURG`'s default action
/// is to ignore it, and the writer's open blocks until the lease is released all the same.
const LEASE_BREAK_SIGNAL: libc::c_int = libc::SIGURG;

/// Takes a read lease on `file`, a descriptor opened read-only: while it is held, an open of
/// the file for writing (or a truncation) by anyone blocks in the kernel until it is released
/// (at most `/proc/sys/fs/lease-break-time` seconds, after which the kernel breaks it).
///
/// Errors as `fcntl(2)` gives them: `EAGAIN` (or `EBUSY`) when an open file description has
/// the file open for writing (or a writable shared mapping of it exists); `EACCES` when this
/// process neither owns the file nor holds `CAP_LEASE`; `EINVAL` where the file system does
/// not support leases (NFS, FUSE, `/proc`) or leases are disabled
/// (`/proc/sys/fs/leases-enable`).
pub(crate) fn take_read_lease(file: &File) -> io::Result<()> {
    raw::set_lease_signal(file.as_fd(), LEASE_BREAK_SIGNAL)?;
    raw::set_lease(file.as_fd(), libc::F_RDLCK)
}

/// Releases the lease [`take_read_lease`] took on `file`: a writer blocked on it goes on.
pub(crate) fn release_lease(file: &File) -> io::Result<()> {
    raw::set_lease(file.as_fd(), libc::F_UNLCK)
}

/// Whether `error` is the refusal of a lease because the file is open for writing (or mapped
/// writable and shared) somewhere.
pub(crate) fn open_for_writing(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EAGAIN | libc::EBUSY))
}

/// Whether `error` is the refusal of a lease to a process that neither owns the file nor
/// holds `CAP_LEASE`.
pub(crate) fn not_lease_owner(error: &io::Error) -> bool {
    matches!(error.raw_os_error(), Some(libc::EACCES | libc::EPERM))
}

/// A copy of every byte of `file` in a new anonymous file in memory (`memfd_create`, named
/// `name` in `/proc/PID/maps` and `/proc/PID/fd` as `/memfd:NAME (deleted)`), sealed so that
/// no one, this process included, can change it again: no write, no growth, no shrinking, no
/// further seals. The copy is positioned at its start.
pub(crate) fn sealed_copy(file: &File, name: &str) -> io::Result<File> {
    let name = CString::new(name.replace('\0', "?")).expect("NUL bytes were replaced");
    let mut copy = File::from(raw::memfd_sealable(&name)?);
    let mut source = file.try_clone()?;
    source.seek(SeekFrom::Start(0))?;
    io::copy(&mut source, &mut copy)?;
    let seals = libc::F_SEAL_SEAL | libc::F_SEAL_SHRINK | libc::F_SEAL_GROW | libc::F_SEAL_WRITE;
    raw::add_seals(copy.as_fd(), seals)?;
    copy.seek(SeekFrom::Start(0))?;
    Ok(copy)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use std::io::{Read as _, Write as _};
    use std::os::fd::AsRawFd as _;

    use super::*;

    #[test]
    fn a_sealed_copy_holds_the_bytes_and_refuses_every_change() {
        let dir = crate::test_dir::TestDir::new("sealed-copy");
        let path = dir.join("lib.so");
        std::fs::write(&path, b"the bytes that were verified").unwrap();
        let copy = sealed_copy(&File::open(&path).unwrap(), "dylease:lib.so").unwrap();
        let mut read = String::new();
        (&copy).read_to_string(&mut read).unwrap();
        assert_eq!(read, "the bytes that were verified");
        // Reopened for writing through its name, as another process could: no write lands.
        let name = format!("/proc/self/fd/{}", copy.as_raw_fd());
        let mut writer = std::fs::OpenOptions::new().write(true).open(&name).unwrap();
        assert!(writer.write_all(b"X").is_err(), "a sealed copy took a write");
        assert!(writer.set_len(1).is_err(), "a sealed copy was truncated");
        let seals = crate::sys::raw::testing::seals(&copy);
        assert_eq!(seals & libc::F_SEAL_SEAL, libc::F_SEAL_SEAL);
    }

    #[test]
    fn a_lease_blocks_a_writer_until_it_is_released_and_a_writer_prevents_one() {
        let dir = crate::test_dir::TestDir::new("read-lease");
        let path = dir.join("lib.so");
        std::fs::write(&path, b"held").unwrap();
        let file = File::open(&path).unwrap();
        take_read_lease(&file).unwrap();
        let (opened, was_opened) = std::sync::mpsc::channel();
        let writer_path = path.clone();
        let writer = std::thread::spawn(move || {
            let file = std::fs::OpenOptions::new().write(true).open(&writer_path);
            let _ = opened.send(());
            file.map(drop)
        });
        // The writer's open blocks while the lease is held: the kernel marks the lease as
        // breaking (`/proc/locks`), which it does only for an open it holds back.
        let ino = std::os::unix::fs::MetadataExt::ino(&file.metadata().unwrap());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while !std::fs::read_to_string("/proc/locks")
            .unwrap()
            .lines()
            .any(|line| line.contains("BREAKING") && line.contains(&format!(":{ino} ")))
        {
            assert!(std::time::Instant::now() < deadline, "the writer's open never blocked");
            assert!(
                was_opened.try_recv().is_err(),
                "the writer opened the file past the lease"
            );
            std::thread::yield_now();
        }
        assert!(
            was_opened.try_recv().is_err(),
            "the writer opened the file past the lease"
        );
        release_lease(&file).unwrap();
        was_opened
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the writer stayed blocked after the release");
        writer.join().unwrap().unwrap();
        // A descriptor open for writing prevents a lease.
        let _writing = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        let error = take_read_lease(&File::open(&path).unwrap()).unwrap_err();
        assert!(open_for_writing(&error), "{error}");
    }
}
