//! Lowercase hexadecimal, the spelling of every key, key id, digest and signature in this
//! crate's text (key files, indexes, messages).

use std::fmt::Write as _;

/// `bytes` as lowercase hexadecimal, two digits a byte.
pub(crate) fn encode(bytes: &[u8]) -> String {
    let mut text = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        // Writing to a `String` cannot fail.
        let _ = write!(text, "{byte:02x}");
    }
    text
}

/// The `N` bytes that `text` spells in lowercase hexadecimal, or `None` when it is not
/// exactly `2 * N` lowercase hexadecimal digits (no sign, no prefix, no upper case: one
/// spelling per value).
pub(crate) fn decode<const N: usize>(text: &str) -> Option<[u8; N]> {
    let text = text.as_bytes();
    if text.len() != 2 * N {
        return None;
    }
    let mut bytes = [0; N];
    for (byte, pair) in bytes.iter_mut().zip(text.chunks_exact(2)) {
        *byte = (digit(pair[0])? << 4) | digit(pair[1])?;
    }
    Some(bytes)
}

fn digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_byte_round_trips_and_only_the_canonical_spelling_decodes() {
        let all: Vec<u8> = (0..=255).collect();
        let text = encode(&all);
        assert_eq!(&text[..8], "00010203");
        assert_eq!(decode::<256>(&text).map(|b| b.to_vec()), Some(all));
        assert_eq!(decode::<1>("ff"), Some([0xff]));
        for bad in ["FF", "+f", "f", "fff", "0x", "g0", " f"] {
            assert_eq!(decode::<1>(bad), None, "{bad:?}");
        }
    }
}
