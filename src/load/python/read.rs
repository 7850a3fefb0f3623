//! Reading a Python plugin's sources from the descriptors the trust check looked at (a
//! package's through its directory's one descriptor, listed, checked and read again whole if
//! the package was swapped meanwhile), and the manifest read from them without running any of
//! it.

use std::fs;
use std::io::{self, Read};

use pyo3::prelude::*;

use crate::error::{Error, Origin};
use crate::inspect::manifest::{DeclaredPass, Manifest};
use crate::load::python::discover::{PyCandidate, plugin};
#[cfg(unix)]
use crate::load::python::discover::{PyFile, changed};
use crate::load::python::instance::Staged;
use crate::load::python::interpreter::{attach, helpers};
#[cfg(unix)]
use crate::sys::walk::{Kind, Tree};
use crate::trust::{Checks, REPLACEMENTS, TrustPolicy, open_checked};

/// A package's file, opened through the package directory's descriptor (each directory on
/// the way opened relative to the one before, no symlink followed): it must be the file
/// listed, and checked (same device and inode), or it changed since.
#[cfg(unix)]
fn open_in(tree: &Tree, file: &PyFile) -> io::Result<fs::File> {
    let Some((name, dirs)) = file.at.split_last() else {
        return Err(changed(&file.candidate.path));
    };
    let mut below: Option<Tree> = None;
    for dir in dirs {
        let (next, _) = below.as_ref().unwrap_or(tree).dir(dir)?;
        below = Some(next);
    }
    let (opened, stat) = below.as_ref().unwrap_or(tree).file(name)?;
    let listed = file.candidate.checked.unwrap_or(file.candidate.identity);
    if stat.kind() != Kind::File || stat.id() != listed {
        return Err(changed(&file.candidate.path));
    }
    Ok(opened)
}

/// Whether an error opening a package's file means that the package changed since it was
/// listed: the file or a directory on its way is gone, or is a symlink or no directory now.
#[cfg(unix)]
fn is_change(error: &io::Error) -> bool {
    error.kind() == io::ErrorKind::NotFound
        || matches!(error.raw_os_error(), Some(libc::ELOOP | libc::ENOTDIR | libc::ENOENT))
}

/// `(module name suffix, path shown, source)` of every Python file of a plugin.
type Sources = Vec<(String, String, String)>;

impl PyCandidate {
    /// Reads the sources of every `.py` file; `Ok(Err(_))` if a package's file was replaced
    /// or removed since the package was listed (the package must then be read again, whole).
    fn sources(&mut self, checks: &mut Checks, trust: TrustPolicy) -> Result<io::Result<Sources>, Error> {
        let mut sources = Vec::new();
        for file in &mut self.files {
            let Some(module) = &file.module else { continue };
            #[cfg(unix)]
            let opened = match &self.tree {
                Some(tree) => match open_in(tree, file) {
                    Ok(opened) => opened,
                    Err(error) if is_change(&error) => return Ok(Err(error)),
                    Err(source) => {
                        return Err(Error::Io {
                            path: file.candidate.path.clone(),
                            context: "cannot open Python source",
                            source,
                        });
                    }
                },
                None => open_checked(&mut file.candidate, checks, trust)?.0.elf.into_source(),
            };
            // The descriptor the trust check's identity was compared with: the bytes compiled
            // are the file checked, and no `__pycache__` is read or written.
            #[cfg(not(unix))]
            let opened = open_checked(&mut file.candidate, checks, trust)?.0.file;
            let mut source = String::new();
            (&opened).read_to_string(&mut source).map_err(|source| Error::Io {
                path: file.candidate.path.clone(),
                context: "cannot read Python source (it must be UTF-8)",
                source,
            })?;
            sources.push((module.clone(), file.candidate.path.display().to_string(), source));
        }
        Ok(Ok(sources))
    }

    /// Reads the sources from the checked files (every file, again, if a package's directory
    /// was swapped meanwhile): what the manifest is read from and what the instance runs.
    pub(super) fn read(&mut self, checks: &mut Checks, trust: TrustPolicy) -> Result<Staged, Error> {
        let mut replaced = 0;
        let sources = loop {
            match self.sources(checks, trust)? {
                Ok(sources) => break sources,
                // A package replaced after it was listed (an install that swaps its
                // directory): listed, checked and read again, whole, never mixed.
                Err(changed) if replaced < REPLACEMENTS => {
                    replaced += 1;
                    log::debug!("{}: {changed}; reading the package again", self.path.display());
                    *self = plugin(&self.path).map_err(|(_, error)| error)?;
                    // Checked afresh: `checks` remembers the directories it passed by path,
                    // and the package's path names another directory now.
                    self.check(&mut Checks::default(), trust)?;
                }
                Err(changed) => {
                    return Err(Error::Io {
                        path: self.path.clone(),
                        context: "the Python package kept changing while it was read; try again once its \
                                  installation is done",
                        source: changed,
                    });
                }
            }
        };
        let stem = self.path.file_stem().unwrap_or(self.path.as_os_str());
        Ok(Staged {
            default_name: stem.to_string_lossy().into_owned(),
            files: sources,
            package: self.package,
        })
    }

    /// The plugin's manifest, read from its sources' syntax trees without running any of its
    /// code (see [`Staged::manifest`]); `None` if its name or version cannot be read. The
    /// sources are read from the checked files as [`register`](PyCandidate::register) reads
    /// them: call [`check`](PyCandidate::check) first. A file that does not parse is an
    /// [`Error::InvalidPlugin`] naming the file and line. (The catalog reads it with the
    /// signature: `manifest_and_signature`.)
    #[cfg(test)]
    pub(crate) fn manifest(&mut self, checks: &mut Checks, trust: TrustPolicy) -> Result<Option<Manifest>, Error> {
        let origin = Origin::File(self.path.clone());
        self.read(checks, trust)?.manifest(&origin)
    }
}

impl Staged {
    /// The manifest of the plugin these are the sources of (`origin`), read by `ast` in the
    /// interpreter (`bootstrap.py`'s `manifest`) without running any of it: `None` if its name
    /// or version cannot be read statically. A file that does not parse is an
    /// [`Error::InvalidPlugin`] naming the file and the line. Why an incomplete one is
    /// incomplete is logged at `debug`.
    pub(crate) fn manifest(&self, origin: &Origin) -> Result<Option<Manifest>, Error> {
        let read = self.declared(origin)?;
        if let Some((_, incomplete)) = &read
            && !incomplete.is_empty()
        {
            log::debug!(
                "{}the manifest of {origin} is incomplete (it may register passes it does not declare): {}",
                crate::log_scope::prefix(),
                incomplete.join("; ")
            );
        }
        Ok(read.map(|(manifest, _)| manifest))
    }

    /// The manifest, as [`manifest`](Staged::manifest) reads it, with what makes it
    /// incomplete: each thing the reader saw that could register a pass it cannot see, with its
    /// file and line (none: it is complete).
    fn declared(&self, origin: &Origin) -> Result<Option<(Manifest, Vec<String>)>, Error> {
        type Read = Option<(String, String, Vec<String>, Vec<(String, String)>)>;
        let read = attach(|py| {
            helpers(py)
                .getattr("manifest")
                .and_then(|manifest| manifest.call1((&self.default_name, self.files.clone(), self.package)))
                .and_then(|read| read.extract::<Read>())
                .map_err(|error| Error::InvalidPlugin {
                    plugin: origin.clone(),
                    reason: format!(
                        "its manifest cannot be read: {}",
                        crate::load::python::interpreter::describe(py, &error)
                    ),
                })
        })?;
        Ok(read.map(|(name, version, incomplete, passes)| {
            let manifest = Manifest {
                abi_version: None,
                name,
                version,
                complete: incomplete.is_empty(),
                passes: passes
                    .into_iter()
                    .map(|(name, interface)| DeclaredPass::new(name, Some(interface)))
                    .collect(),
            };
            (manifest, incomplete)
        }))
    }
}
#[cfg(all(test, unix))]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;
    use crate::registry::teardown::teardown_all;

    /// A fresh directory of this test's own (0755), with `files` (path below it, source) in it.
    fn plugin_dir(test: &str, files: &[(&str, &str)]) -> crate::test_dir::TestDir {
        use std::os::unix::fs::PermissionsExt;
        let dir = crate::test_dir::TestDir::new(&format!("py-manifest-{test}"));
        for (name, source) in files {
            let path = dir.join(name);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, source).unwrap();
        }
        for entry in walk(&dir) {
            let mode = if entry.is_dir() { 0o755 } else { 0o644 };
            fs::set_permissions(&entry, fs::Permissions::from_mode(mode)).unwrap();
        }
        dir
    }

    fn walk(dir: &Path) -> Vec<PathBuf> {
        let mut all = vec![dir.to_owned()];
        for entry in fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                all.extend(walk(&path));
            } else {
                all.push(path);
            }
        }
        all
    }

    fn candidate(path: &Path) -> PyCandidate {
        let mut candidate = plugin(path).map_err(|(_, error)| error).unwrap();
        candidate
            .check(&mut Checks::default(), TrustPolicy::Permissive)
            .unwrap();
        candidate
    }

    fn manifest_of(path: &Path) -> Result<Option<Manifest>, Error> {
        candidate(path).manifest(&mut Checks::default(), TrustPolicy::Permissive)
    }

    /// The (name, version, passes) the plugin registers when it is loaded.
    fn registered(path: &Path) -> (String, String, Vec<DeclaredPass>) {
        let registered = candidate(path)
            .register(&mut Checks::default(), TrustPolicy::Permissive, None)
            .unwrap();
        let passes = registered
            .passes
            .iter()
            .map(|pass| DeclaredPass::new(&*pass.name, pass.func.interface().map(str::to_owned)))
            .collect();
        let (name, version) = (registered.name.clone(), registered.version.clone());
        teardown_all(vec![registered.teardown]);
        (name, version, passes)
    }

    /// The manifest is complete and lists exactly what the plugin registers.
    fn assert_matches(path: &Path) -> Manifest {
        let manifest = manifest_of(path).unwrap().expect("a manifest");
        assert!(manifest.is_complete(), "{manifest:?}");
        let (name, version, mut passes) = registered(path);
        passes.sort_by(|a, b| a.name.cmp(&b.name));
        let mut declared = manifest.passes().to_vec();
        declared.sort_by(|a, b| a.name.cmp(&b.name));
        assert_eq!(
            (manifest.name(), manifest.version(), declared),
            (&*name, &*version, passes)
        );
        assert_eq!(manifest.abi_version(), None);
        manifest
    }

    fn pass(name: &str, interface: &str) -> DeclaredPass {
        DeclaredPass::new(name, Some(interface.to_owned()))
    }

    #[test]
    fn the_example_plugins_manifest_is_what_it_registers() {
        let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/plugins/simplify.py");
        let source = fs::read_to_string(example).unwrap();
        let dir = plugin_dir("example", &[("simplify.py", &source)]);
        let manifest = assert_matches(&dir.join("simplify.py"));
        assert_eq!(
            (manifest.name(), manifest.version(), manifest.passes()),
            (
                "simplify",
                "1.0",
                &[pass("simplify_identity", "demo.graph_py_pass/1")][..]
            )
        );
    }

    #[test]
    fn aliased_imports_and_a_packages_submodule_are_read() {
        let dir = plugin_dir(
            "aliases",
            &[
                (
                    "aliased.py",
                    "import dylease as d\nd.plugin(name='aliased', version='2')\n\n\
                     @d.typed_pass('one', interface='i/1')\ndef one(x):\n    return x\n",
                ),
                (
                    "from_import.py",
                    "from dylease import typed_pass as tp, plugin\n\n\
                     @tp('two', 'i/1')\ndef two(x):\n    return x\n",
                ),
                (
                    "pkg/__init__.py",
                    "import dylease\nfrom . import sub\ndylease.plugin('pkg', '3')\n\n\
                     @dylease.typed_pass('top', 'i/1')\ndef top(x):\n    return x\n",
                ),
                (
                    "pkg/sub.py",
                    "from dylease import typed_pass\n\n@typed_pass('below', 'i/2')\ndef below(x):\n    return x\n",
                ),
            ],
        );
        let aliased = assert_matches(&dir.join("aliased.py"));
        assert_eq!((aliased.name(), aliased.version()), ("aliased", "2"));
        let from_import = assert_matches(&dir.join("from_import.py"));
        assert_eq!(
            (from_import.name(), from_import.passes()),
            ("from_import", &[pass("two", "i/1")][..])
        );
        // The API as another module of the package holds it.
        fs::create_dir(dir.join("relayed")).unwrap();
        fs::write(dir.join("relayed/api.py"), "from dylease import typed_pass as tp\n").unwrap();
        fs::write(
            dir.join("relayed/__init__.py"),
            "from .api import tp\n\n@tp('relayed', 'i/3')\ndef relayed(x):\n    return x\n",
        )
        .unwrap();
        let relayed = assert_matches(&dir.join("relayed"));
        assert_eq!(relayed.passes(), &[pass("relayed", "i/3")]);
        let package = assert_matches(&dir.join("pkg"));
        assert_eq!(
            (package.name(), package.passes()),
            ("pkg", &[pass("top", "i/1"), pass("below", "i/2")][..])
        );
    }

    #[test]
    fn what_the_reader_cannot_see_makes_the_manifest_incomplete() {
        let decorated = "import dylease\n\n@dylease.typed_pass('seen', 'i/1')\ndef seen(x):\n    return x\n";
        let dir = plugin_dir(
            "incomplete",
            &[
                (
                    "register_passes.py",
                    &format!("{decorated}\ndef register_passes(reg):\n    reg.add_typed_pass('other', 'i/1', seen)\n"),
                ),
                (
                    "conditional.py",
                    &format!(
                        "{decorated}\nif True:\n    @dylease.typed_pass('hidden', 'i/1')\n    def hidden(x):\n        return x\n"
                    ),
                ),
                (
                    "computed.py",
                    &format!("{decorated}\n@dylease.typed_pass('a' + 'b', 'i/1')\ndef ab(x):\n    return x\n"),
                ),
                (
                    "called.py",
                    &format!("{decorated}\ndef plain(x):\n    return x\n\ndylease.typed_pass('plain', 'i/1')(plain)\n"),
                ),
                (
                    "module_getattr.py",
                    &format!("{decorated}\ndef __getattr__(name):\n    raise AttributeError(name)\n"),
                ),
                (
                    "conditional_import/__init__.py",
                    "try:\n    from . import sub\nexcept ImportError:\n    pass\n",
                ),
                ("conditional_import/sub.py", decorated),
            ],
        );
        for plugin in [
            "register_passes.py",
            "conditional.py",
            "computed.py",
            "called.py",
            "module_getattr.py",
            "conditional_import",
        ] {
            let path = dir.join(plugin);
            let manifest = manifest_of(&path).unwrap().expect("a manifest");
            assert!(!manifest.is_complete(), "{plugin}: {manifest:?}");
            assert_eq!(manifest.passes(), &[pass("seen", "i/1")], "{plugin}");
            // It loads: an incomplete manifest allows passes it does not list.
            let (_, _, passes) = registered(&path);
            assert!(
                passes.contains(&pass("seen", "i/1")) || plugin == "register_passes.py",
                "{plugin}"
            );
        }
    }

    /// The plugin file of a trick: it declares pass `one` and, through `trick`, registers
    /// pass `two` too at run time.
    fn tricky(trick: &str) -> String {
        format!(
            "import dylease\nimport sys\ndylease.plugin('tricky', '1')\n\n\
             @dylease.typed_pass('one', 'i/1')\ndef one(x):\n    return x\n\n\
             def two(x):\n    return x\n\n{trick}\n"
        )
    }

    /// The ways a plugin reaches, at run time, what the reader cannot follow (a namespace
    /// through a frame or `globals()`, an attribute or a module by a computed name, the host's
    /// own record of its passes), each with what the reader names as the reason.
    const TRICKS: [(&str, &str, &str); 12] = [
        (
            "getframe",
            "getattr(sys._getframe(0).f_globals['dyl' + 'ease'], 'typed' + '_pass')('two', 'i/1')(two)",
            "`_getframe` reaches a namespace",
        ),
        (
            "currentframe",
            "import inspect\ngetattr(inspect.currentframe().f_globals['dyl' + 'ease'], 'typed' + '_pass')('two', 'i/1')(two)",
            "`currentframe` reaches a namespace",
        ),
        (
            "globals",
            "getattr(globals()['dyl' + 'ease'], 'typed' + '_pass')('two', 'i/1')(two)",
            "`globals` reaches a namespace",
        ),
        (
            "vars",
            "getattr(vars()['dyl' + 'ease'], 'typed' + '_pass')('two', 'i/1')(two)",
            "`vars` reaches a namespace",
        ),
        (
            "locals",
            "getattr(locals()['dyl' + 'ease'], 'typed' + '_pass')('two', 'i/1')(two)",
            "`locals` reaches a namespace",
        ),
        (
            "module_dict",
            "getattr(sys.modules[__name__].__dict__['dyl' + 'ease'], 'typed' + '_pass')('two', 'i/1')(two)",
            "`__dict__` reaches a namespace",
        ),
        (
            "function_globals",
            "getattr(two.__globals__['dyl' + 'ease'], 'typed' + '_pass')('two', 'i/1')(two)",
            "`__globals__` reaches a namespace",
        ),
        (
            "computed_getattr",
            "getattr(getattr(sys.modules[__name__], 'dyl' + 'ease'), 'typed' + '_pass')('two', 'i/1')(two)",
            "`getattr` looks an attribute up by a name that is not a string literal",
        ),
        (
            "computed_setattr",
            "setattr(sys.modules[__name__], 'register' + '_passes', \
             lambda reg: [reg.add_typed_pass(n, 'i/1', f) for n, f in (('one', one), ('two', two))])",
            "`setattr` looks an attribute up by a name that is not a string literal",
        ),
        (
            "dunder_import",
            "getattr(__import__('dyl' + 'ease'), 'typed' + '_pass')('two', 'i/1')(two)",
            "`__import__` imports a module",
        ),
        (
            "host_state",
            "import gc\nnext(o for o in gc.get_objects() if getattr(o, '_dylease_state', {}).get('name') == 'tricky')\
             ._dylease_state['passes'].append(('two', 'i/1', two))",
            "`_dylease_state` touches the host's own record of the plugin's passes",
        ),
        (
            "collector",
            "import gc\nnext(o for o in gc.get_objects() if isinstance(o, dict) and o.get('name') == 'tricky')\
             ['passes'].append(('two', 'i/1', two))",
            "`get_objects` reaches a namespace",
        ),
    ];

    /// Each trick registers a pass the plugin's source does not show: its manifest is
    /// incomplete (so the load allows the pass), naming the trick and its line.
    #[test]
    fn a_pass_added_at_run_time_through_what_the_reader_cannot_follow_makes_the_manifest_incomplete() {
        let sources: Vec<(String, String)> = TRICKS
            .iter()
            .map(|(name, trick, _)| (format!("{name}.py"), tricky(trick)))
            .collect();
        let files: Vec<(&str, &str)> = sources.iter().map(|(f, s)| (f.as_str(), s.as_str())).collect();
        let dir = plugin_dir("run-time", &files);
        for (name, trick, reason) in TRICKS {
            let path = dir.join(format!("{name}.py"));
            // `tricky` puts the trick on line 12: the lookup is on its last line.
            let at = format!("{name}.py, line {})", 12 + trick.matches('\n').count());
            let manifest = manifest_of(&path).unwrap().expect("a manifest");
            assert!(!manifest.is_complete(), "{name}: {manifest:?}");
            assert_eq!(
                (manifest.name(), manifest.passes()),
                ("tricky", &[pass("one", "i/1")][..]),
                "{name}"
            );
            let staged = candidate(&path)
                .read(&mut Checks::default(), TrustPolicy::Permissive)
                .unwrap();
            let (_, why) = staged.declared(&Origin::File(path.clone())).unwrap().unwrap();
            assert!(
                why.iter().any(|why| why.contains(reason) && why.ends_with(&at)),
                "{name}: {why:?}"
            );
            // The trick works: the plugin registers the pass its source does not declare.
            let (_, _, mut passes) = registered(&path);
            passes.sort_by(|a, b| a.name.cmp(&b.name));
            assert_eq!(passes, [pass("one", "i/1"), pass("two", "i/1")], "{name}");
        }
    }

    /// What reads like the tricks but is followed keeps the manifest complete: a lookup by a
    /// literal name, the plain words as strings, an attribute named `_state` of the plugin's
    /// own.
    #[test]
    fn lookups_by_literal_names_and_the_plugins_own_state_keep_the_manifest_complete() {
        let honest = tricky(
            "import operator\nVERSION = getattr(sys, 'version_info')\nREAL = operator.attrgetter('real')\n\
             WORDS = ['globals', 'vars', 'getattr']\n\n\
             class Counter:\n    def __init__(self):\n        self._state = {}\n        setattr(self, 'count', 0)\n",
        );
        let dir = plugin_dir("honest", &[("honest.py", &honest)]);
        let path = dir.join("honest.py");
        let staged = candidate(&path)
            .read(&mut Checks::default(), TrustPolicy::Permissive)
            .unwrap();
        let (_, why) = staged.declared(&Origin::File(path.clone())).unwrap().unwrap();
        assert_eq!(why, Vec::<String>::new());
        assert_matches(&path);
    }

    #[test]
    fn a_name_that_cannot_be_read_leaves_no_manifest() {
        let dir = plugin_dir(
            "unnamed",
            &[
                ("computed.py", "import dylease\ndylease.plugin('a' + 'b')\n"),
                ("conditional.py", "import dylease\nif True:\n    dylease.plugin('a')\n"),
                ("passed_on.py", "import dylease\nimport json\njson.dumps(dylease)\n"),
                ("executes.py", "exec('x = 1')\n"),
            ],
        );
        for plugin in ["computed.py", "conditional.py", "passed_on.py", "executes.py"] {
            assert_eq!(manifest_of(&dir.join(plugin)).unwrap(), None, "{plugin}");
        }
    }

    #[test]
    fn reading_the_manifest_runs_none_of_the_plugins_code() {
        let marker_dir = crate::test_dir::TestDir::new("py-manifest-marker-written");
        let marker = marker_dir.join("marker");
        let source = format!(
            "import dylease\nopen({:?}, 'w').close()\n\n@dylease.typed_pass('p', 'i/1')\ndef p(x):\n    return x\n",
            marker.display().to_string()
        );
        let dir = plugin_dir("marker", &[("marker.py", &source)]);
        let path = dir.join("marker.py");
        let manifest = manifest_of(&path).unwrap().expect("a manifest");
        assert_eq!(manifest.passes(), &[pass("p", "i/1")]);
        assert!(!marker.exists(), "reading the manifest ran the plugin's code");
        // The positive control: loading it runs that line.
        registered(&path);
        assert!(marker.exists());
    }

    /// Deeply nested source under a recursion limit an application raised is an error (or
    /// no manifest), never a crash of the process: the reader bounds the limit while it
    /// parses, and restores it (without the bound, the parser overflows the C stack).
    #[test]
    fn deeply_nested_source_under_a_raised_recursion_limit_is_no_crash() {
        let source = format!("x = a{}\n", ".b".repeat(1_000_000));
        let dir = plugin_dir("nested", &[("nested.py", &source)]);
        let path = dir.join("nested.py");
        let limit = |set: Option<u32>| {
            attach(|py| {
                let sys = py.import("sys").unwrap();
                if let Some(n) = set {
                    sys.call_method1("setrecursionlimit", (n,)).unwrap();
                }
                sys.call_method0("getrecursionlimit").unwrap().extract::<u32>().unwrap()
            })
        };
        let old = limit(None);
        limit(Some(10_000_000));
        let result = manifest_of(&path);
        let after = limit(None);
        limit(Some(old));
        assert_eq!(after, 10_000_000, "the reader did not restore the recursion limit");
        match result {
            Ok(None) | Err(_) => {}
            Ok(Some(manifest)) => assert!(manifest.passes().is_empty()),
        }
    }

    #[test]
    fn a_syntax_error_is_an_error_naming_file_and_line() {
        let dir = plugin_dir("syntax", &[("syntax.py", "x = 1\ndef broken(:\n")]);
        let path = dir.join("syntax.py");
        let error = manifest_of(&path).unwrap_err().to_string();
        assert!(error.contains("SyntaxError") && error.contains("line 2"), "{error}");
        assert!(error.contains(&path.display().to_string()), "{error}");
    }
}
