//! `dylease inspect FILE_OR_DIR...`: what a host given these files and directories would load,
//! judged from the files alone (`PluginHost::catalog`): each plugin's manifest, the refusal a
//! load would make before running any of its code (trust, ELF, manifest, ABI), and the
//! prediction of whether it stays mapped after its unload. No plugin code runs: no library is
//! mapped, no Python module executed, no lease taken. What only running the plugin can tell
//! (the passes of a plugin without a manifest, its constructors, `on_load`, `register_passes`)
//! is `dylease check`'s.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use dylease::sign::{KeyId, Keyring, Release};
use dylease::{CatalogEntry, HostBuilder, Manifest, PinCause, Pinning, PluginHost};

use crate::advice;
use crate::check::{self, Problem};
use crate::names;
use crate::python;
use crate::report::{self, Json, bytes_json, path_json, problem_json};
use crate::sign;

/// One argument, inspected.
#[derive(Debug)]
pub(crate) struct Source {
    /// The argument, as given.
    pub(crate) path: PathBuf,
    /// Its plugins in load order, or why the argument itself cannot be read (a directory
    /// that cannot be listed, a file that cannot be read or is missing: discovery makes that
    /// a refused entry of the catalog, which `argument_problem` takes out), or why the host
    /// could not judge any (its configuration).
    pub(crate) outcome: Result<Vec<Entry>, Problem>,
    /// Passes that two of its plugins declare: a host given it would fail to load (or leave
    /// out the second's pass, under `LoadPolicy::SkipFailed`).
    pub(crate) warnings: Vec<String>,
}

impl Source {
    /// Nothing refused.
    pub(crate) fn ok(&self) -> bool {
        self.outcome
            .as_ref()
            .is_ok_and(|entries| entries.iter().all(|entry| entry.refusal.is_none()))
    }
}

/// One plugin, as the catalog describes it.
#[derive(Debug)]
pub(crate) struct Entry {
    pub(crate) catalog: CatalogEntry,
    /// The catalog's refusal, with the advice `check` gives for it.
    pub(crate) refusal: Option<Problem>,
    /// Who signed it: verified by the catalog (with `--keyring`), else as its signature
    /// claims; `Ok(None)` when it carries none, `Err` when its signature cannot be read.
    pub(crate) signer: Result<Option<Signer>, String>,
}

/// A plugin's signer: the key and the release, and whether a keyring verified them.
#[derive(Debug)]
pub(crate) struct Signer {
    pub(crate) key: KeyId,
    pub(crate) release: Release,
    pub(crate) verified: bool,
}

impl Entry {
    fn new(catalog: CatalogEntry) -> Entry {
        let refusal = catalog.refusal().map(check::problem);
        let signer = match (catalog.signature(), catalog.origin().path()) {
            (Some(verified), _) => Ok(Some(Signer {
                key: verified.key,
                release: verified.release.clone(),
                verified: true,
            })),
            (None, Some(path)) => sign::claim(path).map(|claim| {
                claim.map(|claim| Signer {
                    key: claim.key,
                    release: claim.release,
                    verified: false,
                })
            }),
            (None, None) => Ok(None),
        };
        Entry {
            catalog,
            refusal,
            signer,
        }
    }

    fn path(&self) -> Option<&Path> {
        self.catalog.origin().path()
    }
}

/// The catalog of each argument, with the discovery of `check` (a `.py` file or package with
/// `--python` as `python_file`, a directory as `dir` and, with `--python`, `python_dir`, any
/// other path as `file`) and its trust policy. Runs none of the plugins' code.
pub(crate) fn run(paths: &[PathBuf], options: check::Options, keyring: Option<&Keyring>) -> Vec<Source> {
    paths
        .iter()
        .map(|path| {
            let outcome: Result<Vec<Entry>, Problem> = if !options.python && python::is_plugin(path) {
                Err(python_without_flag(path))
            } else {
                let builder = sources(options, path);
                let builder = match keyring {
                    Some(keyring) => builder.require_signed(keyring.clone()),
                    None => builder,
                };
                catalog(builder, options)
                    .map(|entries| entries.into_iter().map(Entry::new).collect())
                    .and_then(|entries| argument_problem(path, entries))
            };
            let warnings = outcome
                .as_deref()
                .map_or_else(|_| Vec::new(), |entries| clashes(path, entries));
            Source {
                path: path.clone(),
                outcome,
                warnings,
            }
        })
        .collect()
}

/// The problem of a Python plugin argument (a `.py` file or a package) without `--python`:
/// a host reading it as a library file or directory would refuse it as no ELF library, or
/// find nothing in it, which says nothing useful.
fn python_without_flag(path: &Path) -> Problem {
    let shown = names::escape(path);
    Problem {
        file: Some(path.to_owned()),
        message: format!("`{shown}` is a Python plugin, which `inspect` reads only with `--python`"),
        advice: advice::python_without_flag(&names::shell_word(path)),
    }
}

/// `entries`, or, when one of them is the argument `path` itself refused because it cannot be
/// read (`Error::Io`: a missing file, a directory that cannot be listed), that refusal as the
/// argument's problem: it is no plugin, and a host given `path` judges none.
fn argument_problem(path: &Path, entries: Vec<Entry>) -> Result<Vec<Entry>, Problem> {
    let unreadable = |entry: &Entry| {
        entry.path() == Some(path) && matches!(entry.catalog.refusal(), Some(dylease::Error::Io { .. }))
    };
    match entries.iter().position(unreadable) {
        Some(at) => Err(entries
            .into_iter()
            .nth(at)
            .and_then(|entry| entry.refusal)
            .expect("a refused entry")),
        None => Ok(entries),
    }
}

/// Each pair of plugins of `entries` (those a host would not refuse) that declare the same
/// passes, as a warning: all the plugins of a host share one namespace of pass names. Only
/// declared passes are compared: what a plugin without a manifest, or with an incomplete
/// one, registers beyond them only loading it tells (`details` says so under it).
fn clashes(path: &Path, entries: &[Entry]) -> Vec<String> {
    let mut first: Vec<(&str, &Path)> = Vec::new();
    // Each pair of plugins with the passes they both declare, in the order found.
    let mut pairs: Vec<((&Path, &Path), Vec<&str>)> = Vec::new();
    for entry in entries.iter().filter(|entry| entry.refusal.is_none()) {
        let (Some(manifest), Some(file)) = (entry.catalog.manifest(), entry.path()) else {
            continue;
        };
        for pass in manifest.passes() {
            match first.iter().find(|(name, _)| *name == pass.name) {
                Some(&(_, other)) => match pairs.iter_mut().find(|(pair, _)| *pair == (other, file)) {
                    Some((_, passes)) => passes.push(&pass.name),
                    None => pairs.push(((other, file), vec![&pass.name])),
                },
                None => first.push((&pass.name, file)),
            }
        }
    }
    pairs
        .into_iter()
        .map(|((other, file), passes)| {
            format!(
                "`{}` and `{}` both declare {} {}: {}; rename the pass in one of them",
                names::escape(other),
                names::escape(file),
                if passes.len() == 1 { "pass" } else { "passes" },
                passes
                    .iter()
                    .map(|pass| format!("`{pass}`"))
                    .collect::<Vec<_>>()
                    .join(", "),
                shared_pass(path)
            )
        })
        .collect()
}

/// What a host given `path` does when two of its plugins register the same pass, as a phrase.
pub(crate) fn shared_pass(path: &Path) -> String {
    format!(
        "all the plugins of a host share one namespace of pass names, so a host given `{}` would fail to load \
         (with LoadPolicy::Strict, the default, none of its plugins load), or, with LoadPolicy::SkipFailed, \
         keep the plugin loaded first's registration of each shared pass and leave the other's out",
        names::escape(path)
    )
}

/// A builder given `path` as `check` gives it to its hosts.
fn sources(options: check::Options, path: &Path) -> HostBuilder {
    // The host is only asked for its catalog, which maps no library and executes no Python
    // module; it never acquires a lease, so none of the plugins' code runs.
    check::add_path(PluginHost::builder().name("dylease-inspect"), options.python, path)
}

/// The catalog of the host `builder` configures, under `options.trust`. `Err` only when the
/// host cannot be built or its sources cannot be planned at all (a path variable naming a
/// relative directory): a source directory that cannot be listed, or a file that cannot be
/// read, is an entry of the catalog refused with `Error::Io`.
pub(crate) fn catalog(builder: HostBuilder, options: check::Options) -> Result<Vec<CatalogEntry>, Problem> {
    builder
        .trust(options.trust)
        .build()
        .and_then(|host| host.catalog())
        .map_err(|error| check::problem(&error))
}

const DETAIL: &str = "        ";

/// The text report: a line per plugin, then its details, then a closing line.
pub(crate) fn human(sources: &[Source]) -> String {
    let mut out = String::new();
    let (mut plugins, mut refused, mut unreadable, mut python) = (0, 0, 0, 0);
    for source in sources {
        let shown = names::escape(&source.path);
        match &source.outcome {
            Err(problem) => {
                if problem.advice.cause == "python" {
                    python += 1;
                } else {
                    unreadable += 1;
                }
                let _ = writeln!(out, "FAIL  {shown}");
                let _ = writeln!(out, "{DETAIL}problem: {}", message(&source.path, problem));
                let _ = writeln!(out, "{DETAIL}fix: {}", problem.advice.fix);
            }
            Ok(entries) if entries.is_empty() => {
                let _ = writeln!(
                    out,
                    "ok    {shown}\n{DETAIL}note: no plugin here: a host given it loads nothing (only regular \
                     files named `*{}` directly in a directory are loaded)",
                    std::env::consts::DLL_SUFFIX
                );
            }
            Ok(entries) => {
                for entry in entries {
                    plugins += 1;
                    let status = if entry.refusal.is_some() { "FAIL" } else { "ok  " };
                    let path = entry
                        .path()
                        .map_or_else(|| entry.catalog.origin().to_string(), names::escape);
                    let _ = writeln!(out, "{status}  {path}");
                    for line in details(entry) {
                        let _ = writeln!(out, "{DETAIL}{line}");
                    }
                    if entry.refusal.is_some() {
                        refused += 1;
                    }
                }
            }
        }
        for warning in &source.warnings {
            let _ = writeln!(out, "warning: {warning}");
        }
    }
    let plugins = match plugins {
        1 => "1 plugin".to_owned(),
        n => format!("{n} plugins"),
    };
    let unreadable = match (unreadable, refused) {
        (0, _) => String::new(),
        (1, 0) => " 1 argument cannot be read (FAIL above).".to_owned(),
        (1, _) => " 1 argument cannot be read.".to_owned(),
        (n, 0) => format!(" {n} arguments cannot be read (FAIL above)."),
        (n, _) => format!(" {n} arguments cannot be read."),
    };
    let unreadable = match python {
        0 => unreadable,
        1 => format!("{unreadable} 1 Python plugin not read without `--python`."),
        n => format!("{unreadable} {n} Python plugins not read without `--python`."),
    };
    if refused == 0 {
        let _ = writeln!(
            out,
            "\n{plugins}, none refused.{unreadable} No plugin code was run: what the plugins do when they load is \
             `dylease check`'s to find out."
        );
    } else {
        let _ = writeln!(
            out,
            "\n{plugins}; {refused} refused (FAIL above): a host would not load {}.{unreadable} No plugin code was \
             run.",
            if refused == 1 { "it" } else { "them" }
        );
    }
    out
}

/// The lines under a plugin: its manifest (or that it has none), its refusal and fix, its
/// pin prediction.
pub(crate) fn details(entry: &Entry) -> Vec<String> {
    let mut lines = Vec::new();
    match entry.catalog.manifest() {
        Some(manifest) => {
            lines.push(format!("manifest: {}", describe(manifest)));
            if let (false, None, Some(path)) = (manifest.is_complete(), &entry.refusal, entry.path()) {
                lines.push(format!(
                    "which other passes it registers is known only by loading it, which runs its code (`dylease \
                     check {}{}`): only those it declares are compared with other plugins'",
                    if python::is_plugin(path) { "--python " } else { "" },
                    names::escape(path)
                ));
            }
        }
        None if entry.refusal.is_none() => lines.push(match entry.path() {
            Some(path) => format!(
                "no manifest: which passes it registers is known only by loading it, which runs its code \
                 (`dylease check {}{}`)",
                if python::is_plugin(path) { "--python " } else { "" },
                names::escape(path)
            ),
            None => "no manifest".to_owned(),
        }),
        None => {}
    }
    if let Some(line) = signer_line(entry) {
        lines.push(line);
    }
    if let Some(problem) = &entry.refusal {
        let paths: Vec<&Path> = entry.path().into_iter().chain(problem.file.as_deref()).collect();
        lines.push(format!("problem: {}", names::in_message(&problem.message, &paths)));
        lines.push(format!("fix: {}", problem.advice.fix));
    }
    lines.extend(pin_lines(entry.catalog.pinning()));
    lines
}

/// The line naming a plugin file's signer (none for a static plugin).
fn signer_line(entry: &Entry) -> Option<String> {
    entry.path()?;
    Some(match &entry.signer {
        Ok(Some(signer)) if signer.verified => {
            format!("signature: {} (verified)", sign::describe(signer.key, &signer.release))
        }
        Ok(Some(signer)) if matches!(entry.catalog.refusal(), Some(dylease::Error::Signature { .. })) => format!(
            "signature: {} (claimed; the keyring refused it: see the problem)",
            sign::describe(signer.key, &signer.release)
        ),
        Ok(Some(signer)) => format!(
            "signature: {} (claimed, not verified: `--keyring PUBFILE` verifies it)",
            sign::describe(signer.key, &signer.release)
        ),
        Ok(None) => "signature: unsigned (`dylease sign` signs it)".to_owned(),
        Err(problem) => format!("signature: unreadable: {problem}"),
    })
}

/// A manifest as a phrase: "plugin `x` 1.2 (ABI version 2); declares 2 passes (complete
/// manifest): a (untyped), b (interface `i/1`)". What the manifest claims, read from the
/// file: a complete manifest claims to list every pass the plugin registers, which only
/// loading it (`dylease check`) can confirm.
pub(crate) fn describe(manifest: &Manifest) -> String {
    let version = match manifest.version() {
        "" => "(no version)",
        version => version,
    };
    let abi = manifest
        .abi_version()
        .map_or_else(String::new, |abi| format!(" (ABI version {abi})"));
    let completeness = if manifest.is_complete() {
        "complete manifest"
    } else {
        "incomplete manifest: it may register others"
    };
    let passes = manifest.passes();
    let list = if passes.is_empty() {
        format!("declares no passes ({completeness})")
    } else {
        format!(
            "declares {} ({completeness}): {}",
            match passes.len() {
                1 => "1 pass".to_owned(),
                n => format!("{n} passes"),
            },
            passes
                .iter()
                .map(|pass| match &pass.interface {
                    Some(interface) => format!("{} (interface `{interface}`)", pass.name),
                    None => format!("{} (untyped)", pass.name),
                })
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    format!("plugin `{}` {version}{abi}; {list}", manifest.name())
}

/// The pin prediction as report lines: a warning per cause that always pins, a note per cause
/// that may, each with its fix.
pub(crate) fn pin_lines(pinning: &Pinning) -> Vec<String> {
    pinning
        .causes()
        .iter()
        .map(|cause| {
            if cause.always_pins() {
                format!(
                    "warning: it will stay mapped after its unload, so its constructors run once per process, not \
                     once per load (state they set up and `on_unload` frees is gone after a reload): {cause}; \
                     fix: {}",
                    cause.fix()
                )
            } else {
                format!(
                    "note: it may stay mapped after its unload: {cause}; fix: {}",
                    cause.fix()
                )
            }
        })
        .collect()
}

/// The message of `problem` about the argument `path`, file names escaped.
fn message(path: &Path, problem: &Problem) -> String {
    let paths: Vec<&Path> = std::iter::once(path).chain(problem.file.as_deref()).collect();
    names::in_message(&problem.message, &paths)
}

/// A stable word for a pin cause.
fn cause_word(cause: &PinCause) -> &'static str {
    match cause {
        PinCause::NoDelete => "nodelete",
        PinCause::GnuUnique { .. } => "gnu-unique",
        PinCause::ThreadLocalDestructors => "thread-local-destructors",
        PinCause::Exports { .. } => "exports",
        _ => "other",
    }
}

/// The JSON document (schema in `dylease inspect --help`).
pub(crate) fn json(sources: &[Source]) -> String {
    report::document(
        sources.iter().all(Source::ok),
        "sources",
        sources.iter().map(source_json).collect(),
    )
}

fn source_json(source: &Source) -> Json {
    let (plugins, problem) = match &source.outcome {
        Ok(entries) => (entries.iter().map(entry_json).collect(), Json::Null),
        Err(problem) => (Vec::new(), problem_json(problem, &message(&source.path, problem))),
    };
    Json::Object(vec![
        ("path", path_json(Some(&source.path))),
        ("path_bytes", bytes_json(Some(&source.path))),
        ("ok", Json::Bool(source.ok())),
        ("problem", problem),
        ("plugins", Json::Array(plugins)),
        (
            "warnings",
            Json::Array(source.warnings.iter().map(|w| Json::str(w)).collect()),
        ),
    ])
}

fn entry_json(entry: &Entry) -> Json {
    let manifest = entry.catalog.manifest().map_or(Json::Null, |manifest| {
        Json::Object(vec![
            ("name", Json::str(manifest.name())),
            ("version", Json::str(manifest.version())),
            (
                "abi_version",
                manifest.abi_version().map_or(Json::Null, |abi| Json::Int(abi.into())),
            ),
            ("complete", Json::Bool(manifest.is_complete())),
            (
                "passes",
                report::passes_json(
                    manifest
                        .passes()
                        .iter()
                        .map(|pass| (&*pass.name, pass.interface.as_deref())),
                ),
            ),
        ])
    });
    let problem = entry.refusal.as_ref().map_or(Json::Null, |problem| {
        let paths: Vec<&Path> = entry.path().into_iter().chain(problem.file.as_deref()).collect();
        problem_json(problem, &names::in_message(&problem.message, &paths))
    });
    let pinning = entry.catalog.pinning();
    let signature = match &entry.signer {
        Ok(Some(signer)) => Json::Object(vec![
            ("key", Json::Str(signer.key.to_string())),
            ("name", Json::str(&signer.release.name)),
            ("version", Json::str(&signer.release.version)),
            ("serial", Json::Int(signer.release.serial)),
            ("verified", Json::Bool(signer.verified)),
        ]),
        Ok(None) | Err(_) => Json::Null,
    };
    Json::Object(vec![
        ("path", path_json(entry.path())),
        ("path_bytes", bytes_json(entry.path())),
        ("ok", Json::Bool(entry.refusal.is_none())),
        ("manifest", manifest),
        ("signature", signature),
        ("problem", problem),
        (
            "pinning",
            Json::Object(vec![
                ("expected", Json::Bool(pinning.expected())),
                (
                    "causes",
                    Json::Array(
                        pinning
                            .causes()
                            .iter()
                            .map(|cause| {
                                Json::Object(vec![
                                    ("cause", Json::str(cause_word(cause))),
                                    ("always", Json::Bool(cause.always_pins())),
                                    ("message", Json::Str(cause.to_string())),
                                    ("fix", Json::str(cause.fix())),
                                ])
                            })
                            .collect(),
                    ),
                ),
            ]),
        ),
    ])
}
