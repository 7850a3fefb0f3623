//! The text reports wrapped to the reader's width: the terminal's, or 100 columns when
//! standard output is not a terminal (a file, a pipe). Messages name files and passes, and
//! some run to hundreds of characters on one line.
//!
//! Lines break at a single space only, so that no word is cut; never inside a `quoted` span
//! (paths, pass names, commands), nor inside the subject of a status line (`ok    PATH`,
//! `FAIL  PATH ...`, up to its first `: `), whose path is printed unquoted. A continuation is
//! indented four columns deeper than the line it continues (no line of a report is indented
//! so on its own, so the wrapping can be undone). A piece longer than the width is left
//! whole on a line of its own.

use std::io::{self, IsTerminal as _};
use std::os::fd::AsFd as _;

use crate::sys;

/// The width when standard output is not a terminal, or one whose size is unknown.
const DEFAULT_WIDTH: usize = 100;

/// How much deeper a continuation is indented than the line it continues.
const HANG: usize = 4;

/// The width to wrap standard output's text to.
pub(crate) fn width() -> usize {
    let stdout = io::stdout();
    if !stdout.is_terminal() {
        return DEFAULT_WIDTH;
    }
    sys::terminal_columns(stdout.as_fd()).unwrap_or(DEFAULT_WIDTH)
}

/// `text` with each of its lines wrapped to `width` columns (see the module's
/// documentation).
pub(crate) fn wrap(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / width.max(1) * 8);
    let mut lines = text.split('\n').peekable();
    while let Some(line) = lines.next() {
        wrap_line(line, width, &mut out);
        if lines.peek().is_some() {
            out.push('\n');
        }
    }
    out
}

/// The status words a report's line may begin with, each followed by the line's subject.
const STATUS: [&str; 2] = ["ok    ", "FAIL  "];

/// Appends `line` (no line feed in it) to `out`, wrapped to `width`.
fn wrap_line(line: &str, width: usize, out: &mut String) {
    if line.chars().count() <= width {
        out.push_str(line);
        return;
    }
    let indent = line.len() - line.trim_start_matches(' ').len();
    let (head, body) = line.split_at(indent);
    let pieces = pieces(body);
    let continuation = indent + HANG;
    out.push_str(head);
    let mut column = indent;
    for (i, piece) in pieces.iter().enumerate() {
        let length = piece.chars().count();
        if i > 0 {
            if column + 1 + length > width {
                out.push('\n');
                out.extend(std::iter::repeat_n(' ', continuation));
                column = continuation;
            } else {
                out.push(' ');
                column += 1;
            }
        }
        out.push_str(piece);
        column += length;
    }
}

/// `body` cut at the spaces a line may break at: single spaces outside quoted spans and
/// outside a status line's subject.
fn pieces(body: &str) -> Vec<&str> {
    // Where the first break may be: after a status line's subject.
    let mut unbreakable_until = match STATUS.iter().find(|status| body.starts_with(*status)) {
        Some(_) => body.find(": ").map_or(body.len(), |at| at + 1),
        None => 0,
    };
    let bytes = body.as_bytes();
    let mut pieces = Vec::new();
    let mut start = 0;
    for (at, &byte) in bytes.iter().enumerate() {
        if at < unbreakable_until {
            continue;
        }
        match byte {
            // A backquote opens a span only when another closes it on this line.
            b'`' => {
                if let Some(close) = body[at + 1..].find('`') {
                    unbreakable_until = at + 1 + close + 1;
                }
            }
            b' ' if at > start && bytes[at - 1] != b' ' && bytes.get(at + 1).is_some_and(|&next| next != b' ') => {
                pieces.push(&body[start..at]);
                start = at + 1;
            }
            _ => {}
        }
    }
    pieces.push(&body[start..]);
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_line_is_left_as_it_is() {
        assert_eq!(
            wrap("ok    libx.so\n        plugin `x`\n", 100),
            "ok    libx.so\n        plugin `x`\n"
        );
    }

    #[test]
    fn a_long_line_breaks_at_spaces_with_its_continuations_indented_four_deeper() {
        let line = "        fix: one two three four five six seven";
        assert_eq!(
            wrap(line, 24),
            "        fix: one two\n            three four\n            five six\n            seven"
        );
    }

    #[test]
    fn quoted_spans_and_status_subjects_are_never_broken() {
        let quoted = "note: see `a quoted path with spaces` here";
        let wrapped = wrap(quoted, 12);
        assert!(
            wrapped.lines().any(|line| line.trim() == "`a quoted path with spaces`"),
            "{wrapped}"
        );
        let status = "FAIL  my plugins (directory of 2 plugin files) as a whole: a host given it";
        let wrapped = wrap(status, 20);
        assert!(
            wrapped.starts_with("FAIL  my plugins (directory of 2 plugin files) as a whole:\n"),
            "{wrapped}"
        );
    }

    #[test]
    fn runs_of_spaces_and_unmatched_quotes_are_kept() {
        let line = "warning: it's `odd  spacing` and a ` lone quote, then  two spaces";
        let wrapped = wrap(line, 20);
        assert_eq!(wrapped.replace("\n    ", " "), line, "{wrapped}");
        assert!(wrapped.contains("`odd  spacing`"), "{wrapped}");
    }

    #[test]
    fn a_piece_longer_than_the_width_stays_whole() {
        let line = "problem: `/a/very/long/path/that/does/not/fit` fails";
        assert_eq!(
            wrap(line, 10),
            "problem:\n    `/a/very/long/path/that/does/not/fit`\n    fails"
        );
    }
}
