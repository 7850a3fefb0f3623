//! Random and mutated inputs, from a fixed seed: the block and index readers never panic, and
//! nothing but the signed bytes themselves verifies.

use std::io::Cursor;
use std::path::Path;

use dylease_sign::{Keyring, Release, sign_index};

use crate::{Random, key, keyring, signed};

/// Bytes that end as a signed file does, more often than random bytes would: a trailer's
/// magic after a length that is often in range, sometimes after a block's head.
fn plausible_file(random: &mut Random) -> Vec<u8> {
    let len = random.below(400);
    let mut bytes = random.bytes(len);
    match random.below(4) {
        0 => {}
        1 => bytes.extend(b"DYLSIG>>\x01\0\0\0"),
        _ => {
            let len = match random.below(3) {
                0 => random.u64(),
                _ => random.below(bytes.len() + 32) as u64,
            };
            bytes.extend(len.to_le_bytes());
            bytes.extend(b"<<DYLSIG");
        }
    }
    bytes
}

/// `original` with one to three random edits: a byte changed, inserted or removed, a range
/// cut or repeated, the end cut off.
fn mutated(original: &[u8], random: &mut Random) -> Vec<u8> {
    let mut bytes = original.to_vec();
    for _ in 0..=random.below(3) {
        let at = random.below(bytes.len() + 1);
        match random.below(6) {
            0 if at < bytes.len() => bytes[at] ^= 1 << random.below(8),
            1 if at < bytes.len() => bytes[at] = random.u64() as u8,
            2 => bytes.insert(at, random.u64() as u8),
            3 if at < bytes.len() => drop(bytes.remove(at)),
            4 => {
                let end = (at + random.below(40)).min(bytes.len());
                let range = bytes[at..end].to_vec();
                bytes.splice(at..at, range);
            }
            _ => bytes.truncate(at),
        }
    }
    bytes
}

fn verify_both_ways(keyring: &Keyring, bytes: &[u8]) -> bool {
    let from_bytes = keyring.verify_bytes(bytes, Path::new("fuzzed.so"), Some("greeter"));
    let from_reader = keyring.verify_file(&mut Cursor::new(bytes), Path::new("fuzzed.so"), Some("greeter"));
    assert_eq!(from_bytes.is_ok(), from_reader.is_ok());
    from_bytes.is_ok()
}

#[test]
fn random_bytes_never_verify_as_a_signed_library_and_never_panic_the_reader() {
    let keyring = keyring(&[&key(1)]);
    let mut random = Random::new(7);
    for case in 0..3000 {
        let bytes = plausible_file(&mut random);
        assert!(!verify_both_ways(&keyring, &bytes), "case {case}: {bytes:?}");
    }
}

#[test]
fn no_mutation_of_a_signed_library_verifies_and_none_panics_the_reader() {
    let key = key(1);
    let keyring = keyring(&[&key]);
    let original = signed(&Random::new(2).bytes(300), &Release::new("greeter", "1.0", 1), &key);
    let mut random = Random::new(8);
    for case in 0..800 {
        let bytes = mutated(&original, &mut random);
        if bytes != original {
            assert!(!verify_both_ways(&keyring, &bytes), "case {case}: {bytes:?}");
        }
    }
}

#[test]
fn no_mutation_of_a_signed_index_verifies_and_none_panics_the_reader() {
    let key = key(1);
    let keyring = keyring(&[&key]);
    let files = [("a.py", b"print(1)\n".as_slice()), ("pkg/b.py", b"x = 2\n")];
    let original = sign_index(files, &Release::new("talker", "0.1", 1), &key).unwrap();
    let mut random = Random::new(9);
    for case in 0..800 {
        // Mutated indexes, and random text made of index lines.
        let bytes = if case % 3 == 0 {
            let lines = [
                "dylease-index 1\n",
                "key 0011223344556677\n",
                "name talker\n",
                "serial 1\n",
                "file \n",
                "signature \n",
            ];
            (0..random.below(8))
                .flat_map(|_| lines[random.below(lines.len())].bytes())
                .collect()
        } else {
            mutated(&original, &mut random)
        };
        if bytes != original {
            let result = keyring.verify_index(bytes.as_slice(), Path::new(".dylease-sig"), None, files);
            assert!(result.is_err(), "case {case}: {:?}", String::from_utf8_lossy(&bytes));
        }
    }
}
