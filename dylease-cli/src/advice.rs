//! What to do about each kind of load failure: the part of the report that answers
//! "why is my pass not running, and how do I fix it?".

use std::path::Path;

use dylease::{Error, OpenCause, Origin};

/// A failure's cause, as a stable word for scripts, and the suggested fix, as a sentence.
#[derive(Debug)]
pub(crate) struct Advice {
    pub(crate) cause: &'static str,
    pub(crate) fix: String,
}

fn advice(cause: &'static str, fix: impl Into<String>) -> Advice {
    Advice { cause, fix: fix.into() }
}

/// The advice for a Python plugin (`path`, as a shell word) given to `inspect` without
/// `--python`: read as a library it is "not an ELF shared library", which says nothing
/// useful.
pub(crate) fn python_without_flag(path: &str) -> Advice {
    advice(
        "python",
        format!(
            "`--python` reads Python plugins, as `dylease check --python` checks them: run `dylease inspect \
             --python {path}` (with a dylease built with the `python` feature)"
        ),
    )
}

pub(crate) fn for_error(error: &Error) -> Advice {
    match error {
        // dylease's own ELF check refused the file: no loader saw it, so the loader's usual
        // suspects (dependencies, symbols, `ldd`) are beside the point.
        Error::Open {
            cause: OpenCause::Headers,
            ..
        } => advice(
            "headers",
            "dylease read the file's ELF headers before any loader saw it, and they show it is not a \
             complete shared library for this machine (the problem above says what is wrong): build plugins \
             with `-shared -fPIC` (C, C++) or `crate-type = [\"cdylib\"]` (Rust) for this architecture, copy a \
             cut-short file again (by rename: `dylease install`, or `cp` to a temporary name then `mv`), or move \
             the file out of the plugin directory",
        ),
        // dylease's own reading of the manifest refused the file: no loader saw it either.
        Error::Open {
            cause: OpenCause::Manifest,
            reason,
            ..
        } => advice("manifest", manifest_fix(reason)),
        Error::Open { reason, .. } => advice("open", open_fix(reason)),
        Error::MissingEntry { .. } => advice(
            "missing-entry",
            "a plugin exports `dylease_plugin_v1`: put DYLEASE_PLUGIN(\"name\", \"version\") from dylease.h in \
             one C or C++ source file of it, or use `dylease::export_plugin!` in a Rust cdylib (a hand-written \
             entry point must be `extern \"C\"` and visible: DYLEASE_EXPORT). If this file is not a plugin, \
             move it out of the plugin directory: a host loads every library file in it",
        ),
        Error::AbiMismatch {
            found,
            expected,
            declared,
            ..
        } => advice("abi-mismatch", abi_fix(*found, *expected, *declared)),
        // A Python plugin whose source cannot be parsed, found while reading its manifest
        // (`Staged::manifest`): a fault of its code, not of a descriptor.
        Error::InvalidPlugin {
            plugin: Origin::File(path),
            reason,
            ..
        } if is_python(path) && reason.starts_with(PYTHON_MANIFEST_UNREADABLE) => {
            advice("invalid-plugin", python_manifest_fix(reason))
        }
        Error::InvalidPlugin { .. } => advice(
            "invalid-plugin",
            "fill the descriptor: a non-empty UTF-8 name and a register_passes function; \
             DYLEASE_PLUGIN(\"name\", \"version\") does both",
        ),
        Error::InvalidPass { pass, .. } => advice(
            "invalid-pass",
            format!(
                "register every pass under a non-empty UTF-8 name, with a non-NULL function, once per \
                 plugin: look at the DYLEASE_PASS or add_pass call for {pass:?}"
            ),
        ),
        Error::RegisterFailed {
            plugin: Origin::File(path),
            reason,
            ..
        } if is_python(path) => advice("register-failed", python_fix(reason)),
        Error::RegisterFailed { reason, .. } => advice("register-failed", register_fix(reason)),
        Error::DuplicatePass { first, second, .. } if first == second => advice("duplicate-pass", ONE_UNIT),
        Error::ManifestMismatch {
            plugin: Origin::File(path),
            ..
        } if is_python(path) => advice(
            "manifest-mismatch",
            "the passes the plugin registered differ from those its source declares (read from its syntax \
             tree without running it; the problem above names each difference): a declared pass in a module \
             the plugin never imports is never registered, so import that module from the plugin, or remove \
             the pass; the name and version given to `dylease.plugin` must be plain string literals",
        ),
        Error::ManifestMismatch { .. } => advice(
            "manifest-mismatch",
            "the plugin registered other passes, or gave another name or version, than its manifest declares \
             (the problem above names each difference); a complete manifest is a promise that it registers \
             exactly the declared passes: a C or C++ plugin registers exactly the passes of its DYLEASE_PASS \
             and DYLEASE_TYPED_PASS macros, with the name and version of its DYLEASE_PLUGIN; a Rust plugin \
             exactly the passes listed in `export_plugin!`. A plugin that registers passes by hand declares \
             an incomplete manifest instead: DYLEASE_MANIFEST(name, version) with a hand-filled descriptor \
             (not DYLEASE_PLUGIN), or the register-closure form of `export_plugin!`",
        ),
        Error::DuplicatePass { .. } => advice(
            "duplicate-pass",
            "all plugins of a host share one namespace of pass names: rename the pass in one of the two \
             plugins, or take one of the two files out of the plugin directory",
        ),
        // A run path or needed library that leads where another user can write: never advise
        // pointing the run path there.
        Error::Untrusted { reason, .. } if reason.contains("run path (DT_") || reason.contains("needed library `") => {
            advice(
                "untrusted",
                "the plugin's run path or a library it needs leads to a directory another user can write or \
                 create (the problem above names it): rebuild the plugin without that entry (a stale build-tree \
                 path is the usual culprit), keep the libraries it needs beside it or below it and link with a \
                 run path relative to `$ORIGIN` (-Wl,-rpath,'$ORIGIN' or '$ORIGIN/lib'), or put them in a \
                 directory only you or root can write; or build the host with TrustPolicy::Permissive if every \
                 user who can write there is trusted",
            )
        }
        // The error's own message already says which file or directory, its owner or mode, and
        // the command that fixes it.
        Error::Untrusted { .. } => advice(
            "untrusted",
            "hosts refuse, before running any of its code, a plugin that another user could have \
             replaced: make the file and its directory owned by you or root and not writable by group \
             or others (the problem above names which one), or build the host with \
             TrustPolicy::Permissive if that is intended (and check with `--trust permissive`)",
        ),
        Error::Io { path, context, .. } => advice("io", io_fix(path, context)),
        Error::Signature { .. } => advice(
            "signature",
            "the host requires signed plugins, and the problem names the file refused, the key its signature \
             names and what to do: have its publisher sign it (`dylease sign FILE --key KEYFILE`, after `strip`), \
             install the release that verifies, or trust the key that signed it (`--keyring PUBFILE`); `dylease \
             verify FILE --keyring PUBFILE` shows the verdict",
        ),
        Error::Reentrant => advice(
            "reentrant",
            "a plugin's constructor, register or unload function called acquire() on the host that is \
             loading it; plugin code must not acquire its own host",
        ),
        _ => advice("other", "the message above names the cause"),
    }
}

/// The advice for a pass registered twice by one plugin, and for a pass its manifest
/// declares twice: both are what a DYLEASE_PASS in a header included by two source files
/// makes.
const ONE_UNIT: &str = "expand each DYLEASE_PASS in exactly one translation unit: one in a header included by two \
                        source files declares and registers the pass twice; move it into one .c or .cpp file";

/// dylease's own reading of the plugin's manifest (`OpenCause::Manifest`), by what it found:
/// a pass declared twice, a format version it does not read, plugin records that disagree, or
/// corruption.
fn manifest_fix(reason: &str) -> String {
    let before = "dylease read the plugin's manifest (its `.note.dylease` notes) before any loader saw the file, \
                  so none of its code ran";
    if reason.contains("its dylease manifest declares the pass `") && reason.ends_with("` twice") {
        format!("{before}; it declares a pass twice: {ONE_UNIT}")
    } else if reason.contains("has format version ") {
        format!(
            "{before}, but it is written in a manifest format version this dylease does not read (the problem \
             above says which): update the host's dylease (and this tool) to one that reads it, or rebuild \
             the plugin with the header (`dylease header`) or the dylease-plugin crate of this dylease"
        )
    } else if reason.contains("two plugin records that disagree") {
        format!(
            "{before}; its object files declare two different plugins: put DYLEASE_PLUGIN (or DYLEASE_MANIFEST) \
             in exactly one source file of the plugin, and link only that plugin's objects into it"
        )
    } else if reason.contains("but has no plugin record") {
        format!(
            "{before}; it declares passes but no plugin: a plugin with DYLEASE_PASS macros also needs \
             DYLEASE_PLUGIN(\"name\", \"version\") in one of its source files"
        )
    } else {
        format!(
            "{before}, and it is corrupt (the problem above says where): rebuild the plugin with the header \
             (`dylease header`) or the dylease-plugin crate of this dylease, and check that its link step \
             keeps the `.note.dylease` section as the compiler wrote it (a linker script or an `objcopy` step \
             that rewrites notes corrupts it)"
        )
    }
}

/// An ABI version the host does not speak, from the plugin's descriptor or (`declared`) its
/// manifest.
fn abi_fix(found: u32, expected: u32, declared: bool) -> String {
    let newer = if found > expected {
        format!(", or update the host to a dylease that speaks ABI version {found}")
    } else {
        String::new()
    };
    let ran = if declared {
        " (the version was read from its manifest before the library was mapped: none of its code ran)"
    } else {
        ""
    };
    format!(
        "rebuild the plugin against the dylease.h of this host (ABI version {expected}; `dylease header` prints \
         it), or against the dylease-plugin crate of this host's dylease for a Rust plugin{newer}{ran}"
    )
}

/// How the error of a Python plugin whose manifest cannot be read starts (`Staged::manifest`):
/// its source does not parse.
const PYTHON_MANIFEST_UNREADABLE: &str = "its manifest cannot be read: ";

/// A Python plugin's source that its manifest reader cannot parse: a syntax error, at
/// `(at FILE, line N)`, as `python_fix` gives it.
fn python_manifest_fix(reason: &str) -> String {
    if location(reason, " (at ").is_some() {
        python_fix(reason)
    } else {
        "Python cannot parse the plugin's source (the problem above says why), so the host loads none of its \
         passes: fix the source so that it compiles (`python3 -m py_compile FILE`)"
            .to_owned()
    }
}

/// The platform loader's refusal (`OpenCause::Loader`), by what `dlerror` said: the
/// loader's message is all there is to go on.
fn open_fix(reason: &str) -> String {
    if let Some(symbol) = reason.split("undefined symbol: ").nth(1) {
        let symbol = symbol.split_whitespace().next().unwrap_or(symbol);
        format!(
            "the plugin uses `{symbol}`, which nothing it links against defines: link the library that \
             defines it when building the plugin (-l...), or define it. Hosts load with RTLD_NOW, so every \
             symbol must resolve when the plugin loads"
        )
    } else if reason.contains("invalid ELF header") || reason.contains("file too short") {
        "this is not a shared library: build plugins with `-shared -fPIC` (C, C++) or \
         `crate-type = [\"cdylib\"]` (Rust), or move the file out of the plugin directory"
            .to_owned()
    } else if reason.contains("wrong ELF class") || reason.contains("ELF file") {
        "the library was built for another architecture or platform: rebuild it for this machine".to_owned()
    } else if reason.contains("EMFILE") {
        "this process ran out of file descriptors: each loaded plugin keeps one open, so raise the limit \
         (`ulimit -n`, or LimitNOFILE= for a systemd service)"
            .to_owned()
    } else if reason.contains("ENFILE") {
        "the system ran out of open files (every process's together), not this process: close what holds \
         many files open, or raise the system's limit (`sysctl fs.file-max`); `ulimit -n` does not help"
            .to_owned()
    } else if reason.contains("cannot open shared object file") {
        "a library the plugin depends on cannot be found (`ldd` on the plugin shows which): install it \
         where the system finds libraries, or put it beside the plugin (or below it) and build the plugin \
         with a run path relative to `$ORIGIN` (-Wl,-rpath,'$ORIGIN' or '$ORIGIN/lib'); never a run path \
         into a directory other users can write"
            .to_owned()
    } else if reason.contains("Permission denied") {
        "make the file readable by the user that runs the host".to_owned()
    } else {
        "the platform loader refused the file; its message above says why (`ldd` on the plugin lists \
         what it needs)"
            .to_owned()
    }
}

/// `register_passes` returned non-zero, or a static plugin's register function failed.
fn register_fix(reason: &str) -> String {
    let rust = if reason.ends_with("returned -2") {
        " For a Rust plugin, -2 means its register function panicked."
    } else if reason.ends_with("returned -1") {
        " For a Rust plugin, -1 means its register function returned an error."
    } else {
        ""
    };
    format!(
        "the plugin's register_passes reported failure, so the host loads none of its passes: find \
         what makes it return non-zero.{rust}"
    )
}

/// Whether a plugin is a Python one: a `.py` file or a package directory.
fn is_python(path: &Path) -> bool {
    path.extension().is_some_and(|extension| extension == "py") || path.is_dir()
}

/// A Python plugin's code failed (its import, `on_load` or `register_passes`): the problem
/// ends with where, `(at FILE, line N)` for a syntax error and `(raised at FILE, line N)` for
/// an exception.
fn python_fix(reason: &str) -> String {
    if let Some(at) = location(reason, " (raised at ") {
        format!(
            "fix the plugin's Python code at {at}, where the exception above was raised (for an import \
             that fails there: install that module for this interpreter, or correct its name); the host \
             loads none of the plugin's passes until then"
        )
    } else if let Some(at) = location(reason, " (at ") {
        format!(
            "fix the syntax at {at}: Python cannot compile the file there (the problem above says what \
             it found), so the host loads none of the plugin's passes"
        )
    } else {
        "the plugin's register_passes returned False, so the host loads none of its passes: fix what it \
         reported (above)"
            .to_owned()
    }
}

/// `FILE, line N` from a reason that ends with `{marker}FILE, line N)`.
fn location<'a>(reason: &'a str, marker: &str) -> Option<&'a str> {
    let (_, at) = reason.rsplit_once(marker)?;
    let at = at.strip_suffix(')')?;
    at.rsplit_once(", line ")
        .filter(|(_, line)| !line.is_empty() && line.bytes().all(|byte| byte.is_ascii_digit()))
        .map(|_| at)
}

fn io_fix(path: &Path, context: &str) -> String {
    let dangling = path.symlink_metadata().is_ok_and(|m| m.file_type().is_symlink()) && path.metadata().is_err();
    if dangling {
        "this symlink points to nothing: remove the link or restore its target".to_owned()
    } else if context == "cannot read plugin directory" {
        "check that the directory exists and that this user can read it".to_owned()
    } else if path.is_dir() {
        "name a library file here, or give the directory itself as a directory source".to_owned()
    } else if path.exists() {
        "check that this user can read the file, and that it is a regular library file".to_owned()
    } else {
        "check the path: there is no such file".to_owned()
    }
}

/// The warning for a library that stayed mapped after its unload: the causes its file shows
/// (`pinning`, of each plugin of the check) with their fixes, and what staying mapped means.
pub(crate) fn pinned(pinning: &[dylease::Pinning]) -> String {
    // The causes that always pin if there are any; otherwise those that may.
    let all: Vec<&dylease::PinCause> = pinning.iter().flat_map(|p| p.causes()).collect();
    let certain = all.iter().any(|cause| cause.always_pins());
    let causes: Vec<String> = all
        .iter()
        .filter(|cause| !certain || cause.always_pins())
        .map(|cause| format!("{cause}; fix: {}", cause.fix()))
        .collect();
    let why = if causes.is_empty() {
        "its file shows no cause (another user of the same file in this process, or a platform that never \
         unloads, such as musl)"
            .to_owned()
    } else {
        causes.join("; and ")
    };
    format!(
        "the library stays mapped after its unload: {why}. Its constructors will not run again on the next load, \
         so state a constructor set up and `on_unload` freed is gone from then on; move it to `on_load` \
         (DYLEASE_PLUGIN_WITH_HOOKS, or `on_load` in export_plugin!)"
    )
}

#[cfg(test)]
mod tests {
    use super::open_fix;

    /// A process out of descriptors is told to raise its own limit; a system out of them is
    /// told that its own limit would not help, and which limit would.
    #[test]
    fn each_limit_of_open_files_gets_its_own_fix() {
        let process = open_fix(
            "Too many open files (os error 24) (EMFILE: this process has as many files open as `ulimit -n` allows)",
        );
        assert!(process.contains("`ulimit -n`"), "{process}");
        let system =
            open_fix("Too many open files in system (os error 23) (ENFILE: the system's table of open files is full)");
        assert!(
            system.contains("fs.file-max") && system.contains("does not help"),
            "{system}"
        );
    }
}
