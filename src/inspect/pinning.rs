//! Whether the platform will keep a library mapped after its last `dlclose` ("pinned"), and
//! why: predicted from the file before it is loaded, and compared with what happened after
//! each unload.
//!
//! glibc never unloads a library that has `DF_1_NODELETE` in `DT_FLAGS_1` (`-z nodelete`), or
//! that defines an `STB_GNU_UNIQUE` symbol: g++ gives one to every function-local static of an
//! inline function or template (every "Meyers singleton"), so a six-line C++ plugin holding a
//! `std::string` there is pinned. A library that registered a thread-local destructor (a C++
//! `thread_local`, or a Rust `thread_local!` with `Drop` that was used) stays mapped while a
//! thread that used it lives. And a library whose other exported symbols another,
//! never-unloaded object bound to stays for that object. These show in the dynamic section and
//! the symbols it points to, read (by `dylease_elf`) from the file the trust and ELF checks
//! looked at, as the loader reads them; the fix for the g++ causes is the linker version script
//! `include/dylease.map`, which keeps only `dylease_plugin_v1` global.
//!
//! A thread-local destructor is predicted from a strong import of `__cxa_thread_atexit` (or
//! glibc's `__cxa_thread_atexit_impl`), which is what g++ makes of a `thread_local` with a
//! destructor. Rust's standard library imports glibc's hook weakly in every library it is
//! linked into, and registers a destructor through it only when a thread-local with `Drop` is
//! used at run time: that import predicts nothing (it would warn about every Rust plugin), and
//! a Rust plugin that does stay mapped for it is reported by the comparison after its unload.
//!
//! A pinned library is warned about once per plugin file and counted once per mapping, not
//! once per unload: it stays mapped, and every later unload would say the same.

use std::collections::HashSet;
use std::fmt;

use crate::error::Origin;
use crate::sync::Mutex;
use dylease_plugin::abi::DYLEASE_ENTRY_SYMBOL;

/// One reason the platform may keep a plugin's library mapped after its last lease; see
/// [`Pinning`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum PinCause {
    /// The library is linked with `-z nodelete` (`DF_1_NODELETE` in `DT_FLAGS_1`): the loader
    /// never unloads it.
    NoDelete,
    /// The library exports `STB_GNU_UNIQUE` symbols, which glibc never unloads: g++ makes one of
    /// every function-local static in an inline function or a template.
    GnuUnique {
        /// How many.
        count: usize,
        /// One of them, as its (mangled) symbol name.
        example: String,
    },
    /// The library registers thread-local destructors: it imports `__cxa_thread_atexit` or
    /// `__cxa_thread_atexit_impl` as a strong symbol (a C++ `thread_local` whose type has a
    /// destructor, or a C call of the glibc function). The weak import that Rust's standard
    /// library makes in every library is not this cause: a Rust `thread_local!` with `Drop`
    /// registers its destructor only when used, which the file does not show. It stays mapped if a thread that used such a thread-local is still alive when
    /// its last lease drops. A thread's thread-local destructors run after its closure
    /// returned: `JoinHandle::join` waits for them, the end of `std::thread::scope` does not.
    ThreadLocalDestructors,
    /// The library exports definitions besides its entry point; another library that the
    /// process never unloads (libstdc++ binding to template code, say) may bind to them and so
    /// keep it mapped.
    Exports {
        /// How many.
        count: usize,
        /// One of them, as its (mangled) symbol name.
        example: String,
    },
}

impl PinCause {
    /// Whether this cause keeps the library mapped after every unload (`NoDelete`,
    /// `GnuUnique`), rather than only under some conditions.
    pub fn always_pins(&self) -> bool {
        matches!(self, PinCause::NoDelete | PinCause::GnuUnique { .. })
    }

    /// How a plugin author removes this cause, as a sentence.
    pub fn fix(&self) -> &'static str {
        match self {
            PinCause::NoDelete => "link the plugin without `-z nodelete`",
            PinCause::GnuUnique { .. } | PinCause::Exports { .. } => {
                "link the plugin with dylease's version script, which keeps only `dylease_plugin_v1` \
                 global (`-Wl,--version-script=dylease.map`; `dylease header --version-script` prints it, \
                 and the CMake function `dylease_add_plugin` sets it)"
            }
            PinCause::ThreadLocalDestructors => {
                "let the threads that used the plugin's thread-locals end before its last lease drops, \
                 or give those thread-locals types without destructors"
            }
        }
    }
}

impl fmt::Display for PinCause {
    /// The cause as a phrase: "it exports 2 GNU unique symbols, e.g. `…`: glibc never unloads
    /// such a library".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PinCause::NoDelete => {
                f.write_str("it is linked with `-z nodelete` (DF_1_NODELETE): the loader never unloads such a library")
            }
            PinCause::GnuUnique { count, example } => write!(
                f,
                "it exports {} GNU unique {}, e.g. `{example}` (g++ makes one of each function-local static \
                 in an inline function or template): glibc never unloads such a library",
                count,
                if *count == 1 { "symbol" } else { "symbols" },
            ),
            PinCause::ThreadLocalDestructors => write!(
                f,
                "it registers thread-local destructors (it imports `__cxa_thread_atexit`): it stays mapped \
                 while a thread that used such a thread-local is alive"
            ),
            PinCause::Exports { count, example } => write!(
                f,
                "it exports {} besides `{DYLEASE_ENTRY_SYMBOL}`, e.g. `{example}`: a library the process \
                 never unloads may bind to them and keep it mapped",
                crate::log_scope::count(*count, "other symbol", "other symbols"),
            ),
        }
    }
}

/// What dylease predicts, from a plugin library's file before loading it, about whether the
/// platform will keep it mapped after its last lease: see [`PluginInfo::pinning`].
///
/// Read from the file's dynamic section and the dynamic symbols it points to, as the loader
/// reads them (ELF files only; elsewhere, and for static plugins, there are no causes). After each unload the host compares the prediction
/// with what the loader did, and a library that stayed mapped is logged once, with its causes
/// and their fixes, and counted once in [`Stats::pinned_libraries`](crate::Stats::pinned_libraries).
///
/// [`PluginInfo::pinning`]: crate::PluginInfo::pinning
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Pinning {
    causes: Vec<PinCause>,
}

impl Pinning {
    /// Whether the library is expected to stay mapped after every unload: one of its causes
    /// [always pins](PinCause::always_pins).
    pub fn expected(&self) -> bool {
        self.causes.iter().any(PinCause::always_pins)
    }

    /// Every cause found, those that always pin first; empty for a library expected to unload.
    pub fn causes(&self) -> &[PinCause] {
        &self.causes
    }

    /// The causes as one phrase, `None` without any.
    fn describe(&self, only_certain: bool) -> Option<String> {
        let phrases: Vec<String> = self
            .causes
            .iter()
            .filter(|cause| !only_certain || cause.always_pins())
            .map(|cause| format!("{cause}; fix: {}", cause.fix()))
            .collect();
        (!phrases.is_empty()).then(|| phrases.join("; and "))
    }

    /// Reads the prediction from `elf`, a library that passed the ELF check (`Opened::pinning`
    /// asks once per file status: `inspect::parse_cache`), as the loader sees it: through its
    /// dynamic section (`dylease_elf::Elf::pins`), not its section headers, which the loader
    /// never reads and a file may lack. A file whose facts cannot be read has no causes: the
    /// prediction is only advice, and the loader judges the file.
    pub(crate) fn predict(elf: &dylease_elf::Elf<std::fs::File>) -> Pinning {
        if !cfg!(all(unix, not(target_vendor = "apple"))) {
            return Pinning::default();
        }
        elf.pins(&[DYLEASE_ENTRY_SYMBOL])
            .map(Pinning::from_facts)
            .unwrap_or_default()
    }

    /// The causes the file's facts show, those that always pin first.
    fn from_facts(pins: dylease_elf::Pins) -> Pinning {
        let mut causes = Vec::new();
        if pins.no_delete {
            causes.push(PinCause::NoDelete);
        }
        if let Some(unique) = pins.gnu_unique {
            causes.push(PinCause::GnuUnique {
                count: unique.count,
                example: unique.example,
            });
        }
        if pins.thread_local_destructors {
            causes.push(PinCause::ThreadLocalDestructors);
        }
        if let Some(exports) = pins.exports {
            causes.push(PinCause::Exports {
                count: exports.count,
                example: exports.example,
            });
        }
        Pinning { causes }
    }
}

crate::sync::lazy_static! {
    /// What was reported pinned so far: the kept mappings, by their file's identity (each is
    /// counted once: a later load of a kept file shares its mapping, and the file's inode
    /// cannot be reused while it is mapped), and the plugin files, as discovered (each is
    /// warned about once, however many mappings of it reloads of changed files leave behind).
    static REPORTED: Mutex<Reported> = Mutex::new(Reported::default());
}

#[derive(Default)]
struct Reported {
    mappings: HashSet<crate::sys::Identity>,
    files: HashSet<String>,
}

/// Compares the prediction for a library instance that was just closed with what the loader
/// did: `still_loaded` is whether the loader still maps the library of the file `mapping`
/// (`None` where it cannot tell). A mapping that stayed is counted the first time it is seen
/// (the return value: whether to count it), and its plugin file is logged as a warning once,
/// with the causes the file shows and their fixes; later mappings under the same plugin path
/// (new versions of a changed file, each kept in turn) are logged at `debug`. A library that
/// really unloaded is forgotten, so that a later mapping of it that stays is reported again.
pub(crate) fn after_unload(
    origin: &Origin,
    predicted: &Pinning,
    mapping: &crate::sys::Identity,
    still_loaded: Option<bool>,
) -> bool {
    match still_loaded {
        None => false,
        Some(false) => {
            if predicted.expected() {
                log::debug!(
                    "{}{origin} unloaded, although it was expected to stay mapped",
                    crate::log_scope::prefix()
                );
            }
            let mut reported = REPORTED.lock();
            reported.mappings.remove(mapping);
            // (Named only if some file was reported: most processes never pin one.)
            if !reported.files.is_empty() {
                reported.files.remove(&origin.to_string());
            }
            false
        }
        Some(true) => {
            let file = origin.to_string();
            let prefix = crate::log_scope::prefix();
            let (counted, warned) = {
                let mut reported = REPORTED.lock();
                // `Identity` is `Copy` on Unix and a path elsewhere: one spelling for both.
                #[allow(clippy::clone_on_copy)]
                let counted = reported.mappings.insert(mapping.clone());
                (counted, counted && reported.files.insert(file))
            };
            if !counted {
                return false;
            }
            if !warned {
                log::debug!("{prefix}{origin} left another mapping behind after its unload (pinned)");
                return true;
            }
            let why = match predicted.describe(true).or_else(|| predicted.describe(false)) {
                Some(causes) => format!("as its file predicted: {causes}"),
                None => "it stayed mapped for a reason its file did not show (a Rust thread-local with a \
                         destructor, still alive in a thread, is one; another user of the same file in \
                         this process, such as a `dlopen` of it outside dylease or `RTLD_NODELETE`, is \
                         another)"
                    .to_owned(),
            };
            log::warn!(
                "{prefix}{origin} is still loaded after its unload: the platform pinned it, {why}. Its statics \
                 keep their values and every reload of a changed file adds a mapping, so keep plugin state \
                 in `on_load` and `on_unload` (reported once per file)"
            );
            true
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn causes_read_as_sentences_with_their_fix() {
        let unique = PinCause::GnuUnique {
            count: 2,
            example: "_ZZN8Registry3getEvE1r".into(),
        };
        assert!(unique.always_pins());
        assert!(
            unique
                .to_string()
                .starts_with("it exports 2 GNU unique symbols, e.g. `_ZZN8Registry3getEvE1r`")
        );
        assert!(unique.fix().contains("version script"));
        assert!(!PinCause::ThreadLocalDestructors.always_pins());
        let pinning = Pinning {
            causes: vec![PinCause::ThreadLocalDestructors],
        };
        assert!(!pinning.expected());
    }

    /// The `log` records of this test binary, as (level, message), from the first call of
    /// [`logged`] on.
    static LOGGED: std::sync::Mutex<Vec<(log::Level, String)>> = std::sync::Mutex::new(Vec::new());

    struct Capture;

    impl log::Log for Capture {
        fn enabled(&self, _metadata: &log::Metadata<'_>) -> bool {
            true
        }

        fn log(&self, record: &log::Record<'_>) {
            let mut logged = LOGGED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            logged.push((record.level(), record.args().to_string()));
        }

        fn flush(&self) {}
    }

    /// The messages logged at `level` so far that contain `needle`, installing the capturing
    /// logger on first use (no other unit test of the library sets one).
    fn logged(level: log::Level, needle: &str) -> usize {
        static INSTALLED: std::sync::Once = std::sync::Once::new();
        INSTALLED.call_once(|| {
            log::set_logger(&Capture).expect("no other logger is set in the library's unit tests");
            log::set_max_level(log::LevelFilter::Trace);
        });
        let logged = LOGGED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        logged
            .iter()
            .filter(|(at, message)| *at == level && message.contains(needle))
            .count()
    }

    /// A library that stayed mapped although its file predicted nothing (a Rust plugin whose
    /// thread-local with `Drop` is still alive in a thread, say: the standard library's weak
    /// import of the hook predicts nothing) is warned about with that reason among the
    /// possible ones, not as "as its file predicted".
    #[test]
    fn a_pin_no_cause_predicted_is_warned_about_with_the_reasons_the_file_cannot_show() {
        let path = "/pinning-unit-test/libunpredicted.so";
        let origin = Origin::File(path.into());
        let mapping = crate::sys::FileId {
            dev: u64::MAX - 18,
            ino: 18,
        };
        let warned = || {
            logged(
                log::Level::Warn,
                &format!(
                    "{path}` is still loaded after its unload: the platform pinned it, it stayed mapped for \
                     a reason its file did not show (a Rust thread-local with a destructor, still alive in a \
                     thread, is one; another user of the same file in this process, such as a `dlopen` of \
                     it outside dylease or `RTLD_NODELETE`, is another)."
                ),
            )
        };
        let before = warned();
        assert!(after_unload(&origin, &Pinning::default(), &mapping, Some(true)));
        assert_eq!(warned(), before + 1);
        after_unload(&origin, &Pinning::default(), &mapping, Some(false));
    }

    /// A pinned library that a later unload really unmapped is forgotten: when a later
    /// mapping of the same file stays mapped again, it is counted again and its file warned
    /// about again (at `warn`, not `debug`): `after_unload`'s `Some(false)` arm removes both
    /// the mapping (so it is counted again) and the file (so it is warned about again).
    #[test]
    fn a_pinned_file_that_really_unloaded_is_forgotten_and_warned_about_again() {
        let path = "/pinning-unit-test/libforgotten.so";
        let origin = Origin::File(path.into());
        // An identity no real file of the other tests has.
        let mapping = crate::sys::FileId {
            dev: u64::MAX - 17,
            ino: 17,
        };
        let predicted = Pinning {
            causes: vec![PinCause::NoDelete],
        };
        let warned = || logged(log::Level::Warn, path);
        let before = warned();

        assert!(
            after_unload(&origin, &predicted, &mapping, Some(true)),
            "a first pin is counted"
        );
        assert_eq!(warned(), before + 1, "a first pin is warned about");
        assert!(
            !after_unload(&origin, &predicted, &mapping, Some(true)),
            "the same kept mapping is counted once"
        );
        assert_eq!(warned(), before + 1, "the same kept mapping is warned about once");

        assert!(!after_unload(&origin, &predicted, &mapping, Some(false)));
        assert!(
            after_unload(&origin, &predicted, &mapping, Some(true)),
            "a mapping kept after the file really unloaded is not counted again"
        );
        assert_eq!(
            warned(),
            before + 2,
            "a file kept after it really unloaded is not warned about again"
        );
    }
}
