//! The two renderings of the checks: text for people, one JSON document for scripts.

use std::collections::HashSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::check::{Check, Kind, Plugin, Problem};
use crate::names;

/// Text output, one check at a time, so that it appears as the checks run.
#[derive(Debug, Default)]
pub(crate) struct Human {
    /// Files a reported problem was about: a directory or combined check that fails on one
    /// of them points back instead of repeating the problem.
    failed: HashSet<PathBuf>,
    checks: usize,
    failures: usize,
}

const DETAIL: &str = "        ";

impl Human {
    pub(crate) fn check(&mut self, check: &Check) -> String {
        self.checks += 1;
        let mut out = String::new();
        let status = if check.ok() { "ok  " } else { "FAIL" };
        let _ = write!(out, "{status}  {}", subject(check));
        let warnings = |out: &mut String| {
            for warning in &check.warnings {
                let _ = writeln!(out, "{DETAIL}warning: {warning}");
            }
        };
        match &check.outcome {
            Ok(plugins) => {
                if check.kind == Kind::File {
                    out.push('\n');
                    warnings(&mut out);
                    for plugin in plugins {
                        describe(&mut out, plugin);
                    }
                } else {
                    let passes: usize = plugins.iter().map(|p| p.passes.len()).sum();
                    let _ = writeln!(
                        out,
                        ": loads {}, {}",
                        count(plugins.len(), "plugin"),
                        count(passes, "pass")
                    );
                    if plugins.is_empty() {
                        let _ = writeln!(
                            out,
                            "{DETAIL}note: no plugin library here: a host given it loads nothing \
                             (only regular files named `*{}` directly in a directory are loaded)",
                            std::env::consts::DLL_SUFFIX
                        );
                    }
                }
            }
            Err(problem) => {
                self.failures += 1;
                if check.kind != Kind::File {
                    let what = match check.kind {
                        Kind::Directory => "directory",
                        _ => "configuration",
                    };
                    let _ = write!(
                        out,
                        ": a host given this {what} loads none of its plugins, so none of their passes run"
                    );
                }
                out.push('\n');
                warnings(&mut out);
                match &problem.file {
                    Some(file) if check.kind != Kind::File && self.failed.contains(file) => {
                        let _ = writeln!(
                            out,
                            "{DETAIL}problem: `{}` does not load (above); a load stops at the first plugin that fails",
                            names::escape(file)
                        );
                    }
                    _ => {
                        let _ = writeln!(out, "{DETAIL}problem: {}", message(check, problem));
                        let _ = writeln!(out, "{DETAIL}fix: {}", problem.advice.fix);
                    }
                }
                if let Some(file) = &problem.file {
                    self.failed.insert(file.clone());
                }
            }
        }
        for skipped in &check.skipped {
            let _ = writeln!(
                out,
                "{DETAIL}not loaded: `{}` ({})",
                names::escape(&skipped.path),
                skipped.reason
            );
        }
        out
    }

    /// The closing line.
    pub(crate) fn summary(&self) -> String {
        if self.failures == 0 {
            format!(
                "\n{} passed: a host would load these plugins.\n",
                match self.checks {
                    1 => "The check".to_owned(),
                    n => format!("All {n} checks"),
                }
            )
        } else {
            format!(
                "\n{} of {} failed: a host would not load these plugins. Fix the first problem first.\n",
                self.failures,
                count(self.checks, "check")
            )
        }
    }
}

/// The host's message about `problem`, with the file names it names lossily escaped.
fn message(check: &Check, problem: &Problem) -> String {
    let paths: Vec<&Path> = check.path.iter().chain(&problem.file).map(PathBuf::as_path).collect();
    names::in_message(&problem.message, &paths)
}

fn subject(check: &Check) -> String {
    let path = check.path.as_deref().map(names::escape);
    match (check.kind, path) {
        (Kind::File, Some(path)) => path.to_string(),
        (Kind::Directory, Some(path)) => match check.files {
            Some(files) => format!("{path} (directory of {}) as a whole", count(files, "plugin file")),
            None => format!("{path} (directory)"),
        },
        _ => match check.arguments {
            2 => "both arguments together, as one host".to_owned(),
            n => format!("all {n} arguments together, as one host"),
        },
    }
}

fn describe(out: &mut String, plugin: &Plugin) {
    let version = match plugin.version.as_str() {
        "" => "(no version)",
        version => version,
    };
    if plugin.passes.is_empty() {
        let _ = writeln!(
            out,
            "{DETAIL}plugin `{}` {version}: registers no passes. Is each DYLEASE_PASS in a source file \
             linked into this library? (From a static archive, link with -Wl,--whole-archive.)",
            plugin.name
        );
    } else {
        let _ = writeln!(
            out,
            "{DETAIL}plugin `{}` {version}: {}: {}",
            plugin.name,
            count(plugin.passes.len(), "pass"),
            plugin
                .passes
                .iter()
                .map(|pass| match &pass.interface {
                    Some(interface) => format!("{} ({interface})", pass.name),
                    None => pass.name.clone(),
                })
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
}

fn count(n: usize, what: &str) -> String {
    match (n, what) {
        (1, _) => format!("1 {what}"),
        (_, "pass") => format!("{n} passes"),
        _ => format!("{n} {what}s"),
    }
}

/// The JSON document (schema in `dylease check --help`).
pub(crate) fn json(checks: &[Check]) -> String {
    document(
        checks.iter().all(Check::ok),
        "checks",
        checks.iter().map(check_json).collect(),
    )
}

/// A command's JSON document: `{"ok": ok, "<key>": [items]}` and a newline.
pub(crate) fn document(ok: bool, key: &'static str, items: Vec<Json>) -> String {
    let document = Json::Object(vec![("ok", Json::Bool(ok)), (key, Json::Array(items))]);
    let mut out = String::new();
    document.write(&mut out, 0);
    out.push('\n');
    out
}

fn check_json(check: &Check) -> Json {
    let (plugins, problem) = match &check.outcome {
        Ok(plugins) => (plugins.iter().map(plugin_json).collect(), Json::Null),
        Err(problem) => (Vec::new(), problem_json(problem, &message(check, problem))),
    };
    let skipped = check
        .skipped
        .iter()
        .map(|s| {
            Json::Object(vec![
                ("path", path_json(Some(&s.path))),
                ("path_bytes", bytes_json(Some(&s.path))),
                ("reason", Json::str(&s.reason)),
            ])
        })
        .collect();
    Json::Object(vec![
        ("kind", Json::str(check.kind.as_str())),
        ("path", path_json(check.path.as_deref())),
        ("path_bytes", bytes_json(check.path.as_deref())),
        ("ok", Json::Bool(check.ok())),
        ("plugins", Json::Array(plugins)),
        ("problem", problem),
        (
            "warnings",
            Json::Array(check.warnings.iter().map(|w| Json::str(w)).collect()),
        ),
        ("skipped", Json::Array(skipped)),
    ])
}

fn plugin_json(plugin: &Plugin) -> Json {
    Json::Object(vec![
        ("name", Json::str(&plugin.name)),
        ("version", Json::str(&plugin.version)),
        ("path", path_json(plugin.path.as_deref())),
        ("path_bytes", bytes_json(plugin.path.as_deref())),
        (
            "passes",
            passes_json(
                plugin
                    .passes
                    .iter()
                    .map(|pass| (&*pass.name, pass.interface.as_deref())),
            ),
        ),
    ])
}

/// A problem as the reports give it, with its `message` (file names escaped).
pub(crate) fn problem_json(problem: &Problem, message: &str) -> Json {
    Json::Object(vec![
        ("cause", Json::str(problem.advice.cause)),
        ("file", path_json(problem.file.as_deref())),
        ("file_bytes", bytes_json(problem.file.as_deref())),
        ("message", Json::str(message)),
        ("fix", Json::str(&problem.advice.fix)),
    ])
}

/// A path as a string: itself when it is UTF-8, else its escaped form (`crate::names`), which
/// [`bytes_json`] then accompanies with the exact bytes.
pub(crate) fn path_json(path: Option<&Path>) -> Json {
    path.map_or(Json::Null, |path| match path.to_str() {
        Some(text) => Json::str(text),
        None => Json::Str(names::escape(path)),
    })
}

/// The bytes of a path that is not UTF-8 (an array of numbers), `null` for one that is (its
/// string is exact) and for none.
pub(crate) fn bytes_json(path: Option<&Path>) -> Json {
    match path {
        Some(path) if !names::is_text(path) => Json::Bytes(names::bytes(path).to_vec()),
        _ => Json::Null,
    }
}

/// Just enough JSON to write the reports: no parsing; numbers only whole.
#[derive(Debug)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    /// A whole number.
    Int(u64),
    Str(String),
    /// An array of numbers 0 to 255, on one line.
    Bytes(Vec<u8>),
    Array(Vec<Json>),
    Object(Vec<(&'static str, Json)>),
}

impl Json {
    pub(crate) fn str(s: &str) -> Json {
        Json::Str(s.to_owned())
    }

    /// Writes the value indented by `depth` levels of two spaces; empty arrays stay on one
    /// line.
    pub(crate) fn write(&self, out: &mut String, depth: usize) {
        let indent = |out: &mut String, depth: usize| out.extend(std::iter::repeat_n("  ", depth));
        match self {
            Json::Null => out.push_str("null"),
            Json::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Json::Int(n) => {
                let _ = write!(out, "{n}");
            }
            Json::Str(s) => write_string(out, s),
            Json::Bytes(bytes) => {
                out.push('[');
                for (i, byte) in bytes.iter().enumerate() {
                    let _ = write!(out, "{}{byte}", if i == 0 { "" } else { ", " });
                }
                out.push(']');
            }
            Json::Array(items) if items.is_empty() => out.push_str("[]"),
            Json::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    out.push_str(if i == 0 { "\n" } else { ",\n" });
                    indent(out, depth + 1);
                    item.write(out, depth + 1);
                }
                out.push('\n');
                indent(out, depth);
                out.push(']');
            }
            Json::Object(fields) => {
                out.push('{');
                for (i, (key, value)) in fields.iter().enumerate() {
                    out.push_str(if i == 0 { "\n" } else { ",\n" });
                    indent(out, depth + 1);
                    write_string(out, key);
                    out.push_str(": ");
                    value.write(out, depth + 1);
                }
                out.push('\n');
                indent(out, depth);
                out.push('}');
            }
        }
    }
}

/// A JSON string literal: quotes, backslashes and control characters escaped.
fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// A list of passes, each `{"name", "interface"}` (`null` when untyped).
pub(crate) fn passes_json<'a>(passes: impl Iterator<Item = (&'a str, Option<&'a str>)>) -> Json {
    Json::Array(
        passes
            .map(|(name, interface)| {
                Json::Object(vec![
                    ("name", Json::str(name)),
                    ("interface", interface.map_or(Json::Null, Json::str)),
                ])
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_escape_quotes_backslashes_and_control_characters() {
        let mut out = String::new();
        write_string(&mut out, "a \"b\" \\c\n\u{1}é");
        assert_eq!(out, r#""a \"b\" \\c\n\u0001é""#);
    }
}
