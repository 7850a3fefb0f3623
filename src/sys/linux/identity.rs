//! Linux, file identities: what makes two paths one library to the loader (device and inode),
//! and opening a checked path without following a symlink or waiting on a FIFO.

use std::io;
use std::os::unix::fs::OpenOptionsExt;

use crate::sys::id::FileId;

/// What makes two paths the same library to the platform loader: the device and inode
/// (glibc matches an already-loaded object by them, so a hard link is the same library).
pub(crate) type Identity = FileId;

/// The file `metadata` describes.
pub(crate) fn file_id(metadata: &std::fs::Metadata) -> Option<FileId> {
    use std::os::unix::fs::MetadataExt;
    Some(FileId {
        dev: metadata.dev(),
        ino: metadata.ino(),
    })
}

/// The identity of the file at `path`, whose `metadata` (symlinks followed) is given.
pub(crate) fn identity(_path: &std::path::Path, metadata: &std::fs::Metadata) -> Identity {
    use std::os::unix::fs::MetadataExt;
    FileId {
        dev: metadata.dev(),
        ino: metadata.ino(),
    }
}

/// The identity of a file the trust check passed.
pub(crate) fn checked_identity(id: FileId) -> Identity {
    id
}

/// Whether opening a checked path failed because the file was replaced: removed (an
/// installer that unlinks first) or turned into a symlink or something else.
pub(crate) fn is_replacement(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::ENOENT | libc::ELOOP | libc::ENXIO | libc::EISDIR)
    )
}

/// Opens without following a symlink in the last component, and without blocking on a FIFO.
pub(crate) fn no_follow(options: &mut std::fs::OpenOptions) {
    options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// An open with `no_follow` refuses a symlink in the last component (ELOOP) and does not
    /// wait for a writer on a FIFO. Bounded: an open that waits fails the test.
    #[test]
    fn no_follow_neither_follows_a_symlink_nor_waits_on_a_fifo() {
        let dir = crate::test_dir::TestDir::new("no-follow");
        let (target, link, fifo) = (dir.join("target"), dir.join("link"), dir.join("fifo"));
        std::fs::write(&target, b"a file").unwrap();
        std::os::unix::fs::symlink(&target, &link).unwrap();
        crate::sys::raw::testing::mkfifo(&fifo);
        let open = |path: &std::path::Path| {
            let mut options = std::fs::OpenOptions::new();
            options.read(true);
            no_follow(&mut options);
            options.open(path)
        };
        let followed = open(&link).map(drop);
        assert_eq!(followed.map_err(|e| e.raw_os_error()), Err(Some(libc::ELOOP)));
        let (done, opened) = std::sync::mpsc::channel();
        std::thread::spawn(move || done.send(open(&fifo).map(drop).map_err(|e| e.to_string())));
        let opened = opened.recv_timeout(std::time::Duration::from_secs(20));
        assert_eq!(opened, Ok(Ok(())), "the FIFO's open waited for a writer");
    }
}
