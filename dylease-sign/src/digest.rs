//! The streamed SHA-256 digest of what a reader gives, in bounded memory.

use std::io::{self, Read};

use sha2::{Digest as _, Sha256};

/// The size of each read. `io::copy` into the hasher would read 8 KiB at a time: eight times
/// the system calls of these reads for the same bytes.
const CHUNK: usize = 64 * 1024;

/// The SHA-256 digest of the next `limit` bytes of `reader` (all of them up to its end when
/// `limit` is `None`), and how many bytes that was (fewer than `limit` when the reader ended
/// first).
pub(crate) fn sha256<R: Read + ?Sized>(reader: &mut R, limit: Option<u64>) -> io::Result<([u8; 32], u64)> {
    let mut hasher = Sha256::new();
    // No larger than what is to be read: a small library's digest zeroes no 64 KiB.
    let size = limit.map_or(CHUNK, |limit| {
        usize::try_from(limit).map_or(CHUNK, |limit| limit.clamp(1, CHUNK))
    });
    let mut buffer = vec![0; size];
    let mut read = 0u64;
    loop {
        let want = match limit {
            Some(limit) => usize::try_from(limit - read).map_or(size, |left| left.min(size)),
            None => size,
        };
        if want == 0 {
            break;
        }
        let n = match reader.read(&mut buffer[..want]) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        hasher.update(&buffer[..n]);
        read += n as u64;
    }
    Ok((hasher.finalize().into(), read))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_streamed_digest_is_sha256_of_the_bytes_read() {
        let bytes: Vec<u8> = (0..3 * CHUNK + 17).map(|i| (i * 7) as u8).collect();
        let whole: [u8; 32] = Sha256::digest(&bytes).into();
        assert_eq!(sha256(&mut &bytes[..], None).unwrap(), (whole, bytes.len() as u64));
        let prefix: [u8; 32] = Sha256::digest(&bytes[..CHUNK + 5]).into();
        assert_eq!(
            sha256(&mut &bytes[..], Some(CHUNK as u64 + 5)).unwrap(),
            (prefix, CHUNK as u64 + 5)
        );
        // A reader that ends first says how much it gave.
        assert_eq!(sha256(&mut &bytes[..10], Some(100)).unwrap().1, 10);
    }

    /// A reader answering each read from a script: bytes, or a failure.
    struct Scripted(std::collections::VecDeque<Result<&'static [u8], io::ErrorKind>>);

    impl Read for Scripted {
        fn read(&mut self, buffer: &mut [u8]) -> io::Result<usize> {
            match self.0.pop_front() {
                None => Ok(0),
                Some(Ok(bytes)) => {
                    buffer[..bytes.len()].copy_from_slice(bytes);
                    Ok(bytes.len())
                }
                Some(Err(kind)) => Err(kind.into()),
            }
        }
    }

    /// A read interrupted by a signal is made again; any other failure of the reader is the
    /// digest's, even when the reader would give bytes after it.
    #[test]
    fn an_interrupted_read_is_made_again_and_another_failure_is_returned() {
        let abc: [u8; 32] = Sha256::digest(b"abc").into();
        let mut interrupted = Scripted([Err(io::ErrorKind::Interrupted), Ok(&b"abc"[..])].into());
        assert_eq!(sha256(&mut interrupted, None).unwrap(), (abc, 3));
        let mut failing = Scripted([Err(io::ErrorKind::PermissionDenied), Ok(&b"abc"[..])].into());
        let error = sha256(&mut failing, None).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::PermissionDenied);
    }
}
