//! File names as the reports print them: reversibly, whatever bytes they hold. A Unix file
//! name is bytes, not necessarily UTF-8; printing it lossily would turn `lib\xffx.so` and
//! `lib\xfex.so` into the same `lib\u{FFFD}x.so`.
//!
//! The escaped form keeps UTF-8 text as it is, except: a byte that is not part of valid UTF-8
//! and a control character (below 0x20, and 0x7f) become `\xNN` (two lowercase hex digits),
//! and a backslash becomes `\\`. [`unescape`] (the tests') reverses it.

use std::ffi::OsStr;
use std::fmt::Write as _;
use std::path::Path;

/// The bytes of `path` (on Unix, exactly the file name's).
pub(crate) fn bytes(path: &Path) -> &[u8] {
    path.as_os_str().as_encoded_bytes()
}

/// Whether `path` prints as itself (valid UTF-8).
pub(crate) fn is_text(path: &Path) -> bool {
    path.to_str().is_some()
}

/// `path` escaped (see the module's documentation).
pub(crate) fn escape(path: &Path) -> String {
    escape_os(path.as_os_str())
}

/// [`escape`] of any OS string.
pub(crate) fn escape_os(name: &OsStr) -> String {
    let mut out = String::new();
    for chunk in name.as_encoded_bytes().utf8_chunks() {
        for c in chunk.valid().chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                c if c.is_ascii_control() => {
                    let _ = write!(out, "\\x{:02x}", u32::from(c));
                }
                c => out.push(c),
            }
        }
        for byte in chunk.invalid() {
            let _ = write!(out, "\\x{byte:02x}");
        }
    }
    out
}

/// `message` (an error's text, which names files lossily) with each file name of `paths` that
/// is not plain text given in its escaped form, so that no replacement character is left of
/// it: component by component, as the message may name the file by another path.
pub(crate) fn in_message(message: &str, paths: &[&Path]) -> String {
    let mut message = message.to_owned();
    for path in paths {
        for component in path.components() {
            let name = component.as_os_str();
            if name.to_str().is_none() {
                message = message.replace(&*name.to_string_lossy(), &escape_os(name));
            }
        }
    }
    message
}

/// `path` as one word of a POSIX shell command line, for the commands the messages suggest:
/// as it is when it holds only characters no shell treats specially, else quoted: in
/// single quotes when it is text without control characters or backslashes, else in
/// bash's `$'...'`, whose escapes (`\\`, `\xNN`) are exactly [`escape`]'s.
pub(crate) fn shell_word(path: &Path) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./+=:,@%".contains(c);
    match path.to_str() {
        Some(text) if !text.is_empty() && text.chars().all(plain) => text.to_owned(),
        Some(text) if !text.chars().any(|c| c == '\\' || c.is_control()) => {
            format!("'{}'", text.replace('\'', "'\\''"))
        }
        _ => format!("$'{}'", escape(path).replace('\'', "\\'")),
    }
}

/// The inverse of [`escape`].
#[cfg(test)]
pub(crate) fn unescape(text: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut bytes = text.bytes();
    while let Some(b) = bytes.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        match bytes.next() {
            Some(b'\\') => out.push(b'\\'),
            Some(b'x') => {
                let hex: Vec<u8> = bytes.by_ref().take(2).collect();
                let hex = std::str::from_utf8(&hex).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
            }
            other => panic!("not an escape: {other:?}"),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::os::unix::ffi::OsStrExt as _;

    use super::*;

    /// Each suggested command names the path a shell reads back: run through `sh -c 'printf
    /// %s WORD'` (and bash for `$'...'`), every word prints the path's exact bytes.
    #[test]
    fn a_path_as_a_shell_word_reads_back_as_its_bytes() {
        let paths: [&[u8]; 7] = [
            b"plugins/lib.so",
            b"no such/dir",
            b"it's here",
            b"back\\slash",
            b"lib\xffx.so",
            b"new\nline's",
            b"$HOME`x`*",
        ];
        for path in paths {
            let path = Path::new(OsStr::from_bytes(path));
            let word = shell_word(path);
            let printed = std::process::Command::new("bash")
                .arg("-c")
                .arg(format!("printf %s {word}"))
                .output()
                .unwrap();
            assert_eq!(printed.stdout, bytes(path), "{word}");
        }
        assert_eq!(shell_word(Path::new("plugins/lib.so")), "plugins/lib.so");
        assert_eq!(shell_word(Path::new("no such/dir")), "'no such/dir'");
    }

    #[test]
    fn names_that_are_not_utf8_differ_and_reverse_to_their_bytes() {
        let names: [&[u8]; 5] = [
            b"lib\xffx.so",
            b"lib\xfex.so",
            b"a\\xff.so",
            b"tab\there\n",
            "é€.so".as_bytes(),
        ];
        let escaped: Vec<String> = names.iter().map(|n| escape(Path::new(OsStr::from_bytes(n)))).collect();
        assert_eq!(escaped[0], "lib\\xffx.so");
        assert_eq!(escaped[1], "lib\\xfex.so");
        assert_eq!(
            escaped[2], "a\\\\xff.so",
            "a backslash is escaped, so `\\xff` typed in a name stays text"
        );
        assert_eq!(escaped[3], "tab\\x09here\\x0a");
        assert_eq!(escaped[4], "é€.so");
        for (name, escaped) in names.iter().zip(&escaped) {
            assert!(!escaped.contains('\u{FFFD}'));
            assert_eq!(&unescape(escaped), name);
        }
    }
}
