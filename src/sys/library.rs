//! An open plugin library, over the platform loader of this layer (`imp`, `raw`), and the
//! calls into its code. Everything here is `unsafe` by nature: opening a library runs its
//! initialisation routines, closing it runs its termination routines, its entry point,
//! `on_load`, `register_passes` and `on_unload` are foreign functions, and a symbol is only as
//! well-typed as the plugin ABI says it is.
//!
//! The user vouched for that code when naming its source with an `unsafe` builder method
//! (`host::sources`): that is the word [`Library::open`] acts on. Once a [`Library`] exists,
//! its plugin's functions are called only through its safe methods, which hold them while
//! it is open and call each as the plugin ABI says (`on_load` and `on_unload` at most once).

use core::ffi::c_char;
use std::fs::File;
use std::ops::Range;
use std::path::Path;

use super::{Identity, imp, raw};
use ::dylease_plugin::abi::{
    DYLEASE_ABI_VERSION, DYLEASE_ENTRY_SYMBOL, DYLEASE_OLDEST_ABI_VERSION, dylease_host_api, dylease_on_load_fn,
    dylease_on_unload_fn, dylease_plugin, dylease_plugin_abi1, dylease_plugin_v1_fn, dylease_register_fn,
    dylease_registrar,
};

/// The checked file a library is opened from: the descriptor the trust and ELF checks read,
/// and where it was found.
///
/// It stands for a file of a source the user named with an `unsafe` builder method, or a
/// library such a file needs: by naming it, the user vouched for its code, which
/// [`Library::open`] runs.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Checked<'a> {
    /// The descriptor the checks read: what the loader must map.
    pub(crate) file: &'a File,
    /// Its identity, as read from it when it was opened (not read again).
    pub(crate) identity: &'a Identity,
    /// The absolute path the file was found at (symlinks resolved under `Strict`; for
    /// `$ORIGIN`, and messages).
    pub(crate) resolved: &'a Path,
    /// Whether the library's run paths or needed names use `$ORIGIN`.
    pub(crate) origin: bool,
    /// Its loadable segments, relative to its load address, as the ELF check read them from
    /// the descriptor (empty where they were not read).
    pub(crate) loads: &'a [Range<u64>],
    /// Whether the trust check is on (`TrustPolicy::Strict`).
    pub(crate) strict: bool,
    /// Whether `resolved` may name a symlink to the file (a dependency, given to the loader
    /// by the name it was found under: see `registry::opener`); then `origin` must be set.
    pub(crate) follow: bool,
}

/// An open shared library. Dropping it closes the library (`dlclose`).
#[derive(Debug)]
pub(crate) struct Library {
    inner: Option<libloading::Library>,
    /// The loader's handle: what identifies the mapping (on glibc, its `link_map`).
    handle: usize,
    /// The descriptors whose names the loader recorded for the mapping (see `sys`): each
    /// stays open while the mapping lives, for ever if the platform keeps it. Handed to the
    /// [`Closed`] the close returns.
    names: Option<imp::Names>,
    /// Its loadable segments, relative to where the loader mapped it: the addresses that are
    /// its own (see [`Library::entry`]).
    loads: Vec<Range<u64>>,
    /// What the loader was given, and the file it stands for, for messages.
    shown: Shown,
    /// The plugin's own functions, from the descriptor its entry point returned
    /// ([`Library::descriptor`]): code of this library, called only while it is open.
    plugin: Option<PluginFunctions>,
}

/// The functions a plugin's descriptor gives the host. `on_load` and `on_unload` are taken
/// when they run: each runs at most once per library.
#[derive(Debug)]
struct PluginFunctions {
    /// The descriptor's ABI version: which host API table `register_passes` gets.
    abi_version: u32,
    register_passes: Option<dylease_register_fn>,
    on_load: Option<dylease_on_load_fn>,
    on_unload: Option<dylease_on_unload_fn>,
}

/// What the descriptor a plugin's entry point returned says of the plugin
/// ([`Library::descriptor`]); its functions stay with the library.
#[derive(Debug)]
pub(crate) struct Described {
    /// The ABI version it was built for, one this host speaks.
    pub(crate) abi_version: u32,
    pub(crate) name: CText,
    pub(crate) version: CText,
    /// Whether its `register_passes` is set (the ABI requires it).
    pub(crate) registers: bool,
    /// Whether it has an `on_load` (ABI version 2).
    pub(crate) has_on_load: bool,
}

/// A string of a plugin's descriptor, read up to a bound.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum CText {
    Null,
    /// Longer than the bound.
    TooLong,
    Bytes(Vec<u8>),
}

/// Why [`Library::descriptor`] found no descriptor it can read.
#[derive(Debug)]
pub(crate) enum DescriptorFault {
    /// No entry point of the library's own: why, in the loader's words.
    NoEntry(String),
    /// The entry point returned NULL.
    Null,
    /// The descriptor's ABI version, which this host does not speak.
    Abi(u32),
}

/// What a plugin's `register_passes` is called with: a host API table and a registrar.
///
/// # Safety
///
/// [`HostApi::with_call`], given an ABI `version` this host speaks
/// (`DYLEASE_OLDEST_ABI_VERSION..=DYLEASE_ABI_VERSION`), calls `call` once, on this thread,
/// with a pointer to a host API table of that version (a `dylease_host_api` of that version's
/// layout) that stays valid for the whole program, and a registrar pointer that the table's
/// functions accept during the call (and refuse after it or from another thread): the plugin
/// ABI's promise to a plugin's `register_passes`.
pub(crate) unsafe trait HostApi {
    /// Calls `call` with the table and the registrar, returning what it returns.
    fn with_call(
        &mut self,
        version: u32,
        call: &mut dyn FnMut(*const dylease_host_api, *mut dylease_registrar) -> i32,
    ) -> i32;
}

/// Why [`Library::open`] failed.
#[derive(Debug)]
pub(crate) enum OpenFailure {
    /// The file was replaced by another under its name before the loader opened it by that
    /// name (a library mapped through its directory, for `$ORIGIN`): no code of it ran, and
    /// the new file is to be checked before another try.
    Replaced(String),
    /// The trust check refuses how the loader would have to find it: why.
    Untrusted(String),
    /// Anything else, in the loader's words (naming the file).
    Other(String),
}

/// The name the loader was given for a library, and the file it stands for: the loader's
/// messages name the first, users know the second.
#[derive(Debug, Default)]
struct Shown {
    given: String,
    file: std::path::PathBuf,
}

impl Shown {
    /// `message` with the name the loader was given replaced by the file's path.
    fn rewrite(&self, message: &str) -> String {
        if self.given.is_empty() {
            return message.to_owned();
        }
        message.replace(&self.given, &self.file.to_string_lossy())
    }
}

impl Library {
    /// Opens the checked file with `RTLD_NOW | RTLD_LOCAL`: every undefined symbol is
    /// resolved now (a missing one fails here, not at a first call), and the library's
    /// symbols stay out of the global namespace so two plugins cannot clash.
    ///
    /// The loader maps the checked descriptor itself, by one of its names under
    /// `/proc/self/fd` (identity I9, `docs::internals`): the file mapped is the file checked,
    /// whatever was renamed in between. A library whose run path uses `$ORIGIN` is mapped
    /// through its directory's descriptor instead (so that `$ORIGIN` is its directory), and
    /// the mapping is then compared with the checked file: a mismatch closes it and is an
    /// `Err`.
    ///
    /// Opening a library runs its initialisation routines (and closing it later runs its
    /// termination routines): code the user vouched for (see [`Checked`]).
    pub(crate) fn open(checked: Checked<'_>) -> Result<Library, OpenFailure> {
        let failed = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::NotFound => OpenFailure::Replaced(e.to_string()),
            std::io::ErrorKind::PermissionDenied if checked.strict => OpenFailure::Untrusted(e.to_string()),
            _ => OpenFailure::Other(io_message(checked.resolved, &e)),
        };
        let (name, names) = imp::name(
            checked.file,
            checked.identity,
            checked.resolved,
            checked.origin,
            checked.follow,
            checked.strict,
        )
        .map_err(failed)?;
        #[cfg(all(test, target_os = "linux", target_env = "gnu", not(loom)))]
        tests::BETWEEN_NAME_AND_LOADER.with(|hook| hook.take().map(|hook| hook()));
        // SAFETY: the file is one the user vouched for, naming its source with an `unsafe`
        // builder method (see `Checked`): that word covers its initialisation and termination
        // routines. The registry calls this outside its lock, with the host's re-entrancy mark
        // set, so that a nested `acquire()` from that code fails instead of deadlocking.
        let opened = unsafe { raw::open(&name) };
        let shown = Shown {
            given: name.to_string_lossy().into_owned(),
            file: checked.resolved.to_owned(),
        };
        let raw::Opened {
            library: inner,
            handle,
            head,
        } = opened.map_err(|e| {
            let message = shown.rewrite(&loader_message(&e));
            let hint = if message.contains("Too many open files") {
                descriptor_hint(&std::io::Error::from_raw_os_error(imp::EMFILE))
            } else {
                ""
            };
            OpenFailure::Other(format!("{message}{hint}"))
        })?;
        // Held by the library first, so that a panic below still closes and settles it.
        let mut library = Library {
            inner: Some(inner),
            handle,
            names: Some(names),
            loads: checked.loads.to_vec(),
            shown,
            plugin: None,
        };
        let compared = match library.names.as_mut() {
            Some(names) => {
                imp::opened(names, head);
                imp::maps_checked_file(names)
            }
            None => Ok(None),
        };
        let refusal = match compared {
            Ok(Some(false)) => format!(
                "the file at `{}` was replaced while the loader mapped it (its directory's owner renamed \
                 another file in): refused",
                checked.resolved.display()
            ),
            Err(e) => format!(
                "the mapping of `{}` could not be compared with the checked file, as the loader was \
                 given its directory's name: /proc/self/maps: {e}{}: refused",
                checked.resolved.display(),
                descriptor_hint(&e)
            ),
            Ok(_) => return Ok(library),
        };
        let (_, closed) = library.close();
        closed.settle();
        Err(OpenFailure::Other(refusal))
    }

    /// The open library: `inner` is taken only by [`Library::unmap`], which nothing follows.
    fn open_library(&self) -> &libloading::Library {
        self.inner.as_ref().expect("a library is open until it is closed")
    }

    /// The loader's handle of the mapping: equal for two opens the platform resolved to one
    /// mapping, whatever path they named.
    pub(crate) fn handle(&self) -> usize {
        self.handle
    }

    /// Resolves the plugin entry point `dylease_plugin_v1`, which must be the library's own.
    ///
    /// `dlsym` also searches a library's dependencies: a library without an entry point that
    /// links against a plugin would otherwise be taken for that plugin, and the plugin's
    /// registration and unload code would run twice on one mapping. So the symbol's address
    /// must lie in one of this library's own loadable segments (its load address plus each
    /// PT_LOAD range the ELF check read from the checked descriptor): a few comparisons,
    /// however many objects the process has loaded. Only a refusal asks the loader which
    /// object the symbol is in (`dladdr1`, which walks them all), to name it.
    ///
    /// The returned pointer is valid only while `self` is open: [`Library::descriptor`] calls
    /// it at once.
    fn entry(&self) -> Result<dylease_plugin_v1_fn, String> {
        // SAFETY: the plugin ABI defines `dylease_plugin_v1` as a function of type
        // `dylease_plugin_v1_fn`; a library that exports the name with another type breaks
        // the ABI it claims to implement, which is the trust the host places in its plugins.
        let symbol = unsafe {
            self.open_library()
                .get::<dylease_plugin_v1_fn>(DYLEASE_ENTRY_SYMBOL.as_bytes())
        };
        let entry = symbol
            .map(|s| *s)
            .map_err(|e| self.shown.rewrite(&loader_message(&e)))?;
        match self.owner_of(entry as *const core::ffi::c_void) {
            Some(Err(Some(owner))) => Err(format!(
                "the `{DYLEASE_ENTRY_SYMBOL}` the loader found belongs to `{}`, a library it depends on, \
                 not to the file itself",
                file_of(&owner)
            )),
            Some(Err(None)) => Err(format!(
                "the `{DYLEASE_ENTRY_SYMBOL}` the loader found lies outside the file's own segments: it \
                 belongs to a library it depends on, not to the file itself"
            )),
            Some(Ok(())) | None => Ok(entry),
        }
    }

    /// Whether `address` lies in this library: `Some(Ok)` if so, `Some(Err(name))` otherwise,
    /// with the loader's name of the object it lies in where the platform can say it (glibc's
    /// `dladdr1`), `None` where the platform cannot tell at all.
    fn owner_of(&self, address: *const core::ffi::c_void) -> Option<Result<(), Option<std::ffi::CString>>> {
        if imp::lies_in(self.names.as_ref()?, &self.loads, address as usize)? {
            return Some(Ok(()));
        }
        // SAFETY: `address` is a symbol the loader resolved in this open library, so it lies
        // in it or in a library it depends on: loaded while this one is.
        Some(Err(unsafe { raw::object_of(address) }))
    }

    /// Calls the plugin's entry point and reads the descriptor it returns: what it says of
    /// the plugin, and its functions, which this library keeps for [`Library::on_load`],
    /// [`Library::register_passes`] and [`Library::on_unload`]. Strings longer than
    /// `max_text` bytes are [`CText::TooLong`].
    pub(crate) fn descriptor(&mut self, max_text: usize) -> Result<Described, DescriptorFault> {
        let entry = self.entry().map_err(DescriptorFault::NoEntry)?;
        // SAFETY: `entry` is this open library's own `dylease_plugin_v1`, of the ABI's type
        // (see `Library::entry`); the ABI lets a host call it at any time.
        let descriptor = unsafe { entry() };
        // SAFETY: by the ABI, a non-NULL result points to a descriptor that lives as long as
        // the library, and `abi_version` is its first field in every ABI version.
        let Some(abi_version) = (unsafe { descriptor.cast::<u32>().as_ref() }).copied() else {
            return Err(DescriptorFault::Null);
        };
        if !(DYLEASE_OLDEST_ABI_VERSION..=DYLEASE_ABI_VERSION).contains(&abi_version) {
            return Err(DescriptorFault::Abi(abi_version));
        }
        // SAFETY: every accepted version's descriptor begins with version 1's fields.
        let plugin = unsafe { &*descriptor.cast::<dylease_plugin_abi1>() };
        let on_load = match abi_version {
            1 => None,
            // SAFETY: a version-2 descriptor has the layout of `dylease_plugin`.
            _ => unsafe { &*descriptor.cast::<dylease_plugin>() }.on_load,
        };
        // SAFETY: by the ABI the strings are NULL or NUL-terminated and live as long as the
        // library, which is open.
        let name = unsafe { c_text(plugin.name, max_text) };
        // SAFETY: as for the name.
        let version = unsafe { c_text(plugin.version, max_text) };
        self.plugin = Some(PluginFunctions {
            abi_version,
            register_passes: plugin.register_passes,
            on_load,
            on_unload: plugin.on_unload,
        });
        Ok(Described {
            abi_version,
            name,
            version,
            registers: plugin.register_passes.is_some(),
            has_on_load: on_load.is_some(),
        })
    }

    /// Runs the plugin's `on_load`, once: its code (0: success), or `None` if it has none,
    /// or it ran already.
    pub(crate) fn on_load(&mut self) -> Option<i32> {
        let on_load = self.plugin.as_mut()?.on_load.take()?;
        // SAFETY: `on_load` is a function of this open library's descriptor; taken above, it
        // runs once per library, as the ABI has it (before `register_passes`: the registry
        // starts an instance before any set registers on it).
        Some(unsafe { on_load() })
    }

    /// Calls the plugin's `register_passes` with `host`'s table and registrar: its code (0:
    /// success), or `None` if its descriptor was not read or has none.
    pub(crate) fn register_passes(&self, host: &mut impl HostApi) -> Option<i32> {
        let plugin = self.plugin.as_ref()?;
        let register = plugin.register_passes?;
        // SAFETY: `register` is a function of this open library's descriptor; the table and
        // the registrar are valid for the call (`HostApi`'s contract), and the table is of
        // the descriptor's own ABI version, one this host speaks (`descriptor` checked it).
        Some(host.with_call(plugin.abi_version, &mut |api, registrar| unsafe {
            register(api, registrar)
        }))
    }

    /// Runs the plugin's `on_unload`, once, if it has one (the caller decides whether it is
    /// owed: see `registry::opener`).
    pub(crate) fn on_unload(&mut self) {
        let Some(on_unload) = self.plugin.as_mut().and_then(|plugin| plugin.on_unload.take()) else {
            return;
        };
        // SAFETY: `on_unload` is a function of this open library's descriptor; taken above, it
        // runs once per library, after the last set using it (the registry's finish).
        unsafe { on_unload() };
    }

    /// Closes the library (`dlclose`), reporting the loader's complaint, if any. A zero from
    /// `dlclose` proves nothing: the returned [`Closed`] keeps the names the loader was given
    /// until [`Closed::settle`] looked for the mapping.
    pub(crate) fn close(mut self) -> (Result<(), String>, Closed) {
        self.close_inner()
    }

    fn close_inner(&mut self) -> (Result<(), String>, Closed) {
        let closed = match self.inner.take() {
            Some(inner) => inner.close().map_err(|e| loader_message(&e)),
            None => Ok(()),
        };
        let names = Closed {
            names: self.names.take(),
        };
        (closed, names)
    }
}

impl Drop for Library {
    /// A library dropped without [`Library::close`] (an extra handle of a mapping someone
    /// else holds, a failed start) closes and settles at once.
    fn drop(&mut self) {
        if self.inner.is_some() {
            let (closed, names) = self.close_inner();
            if let Err(reason) = closed {
                log::warn!("closing a plugin library failed: {reason}");
            }
            names.settle();
        }
    }
}

/// A closed library whose names the loader may still know: dropping it settles it.
#[derive(Debug)]
pub(crate) struct Closed {
    names: Option<imp::Names>,
}

impl Closed {
    /// Looks for the mapping in the loader's list (by its load address and name, while nothing
    /// else maps the file: the registry's busy mark, I1), and closes the names if it is gone;
    /// if it is still there (pinned, or held by a library that depends on it or by someone
    /// outside dylease), they stay open for the life of the process. Call it once every
    /// library closed with it is closed.
    pub(crate) fn settle(mut self) -> Unmapped {
        self.settle_now()
    }

    fn settle_now(&mut self) -> Unmapped {
        let Some(names) = self.names.take() else {
            return Unmapped { kept: None };
        };
        let kept = imp::still_mapped(&names);
        imp::release(names, kept);
        Unmapped { kept }
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu", not(loom)))]
impl Closed {
    /// The name the loader was given, while the names are held.
    fn given(&self) -> Option<std::path::PathBuf> {
        use std::os::unix::ffi::OsStrExt;
        let given = self.names.as_ref()?.given();
        Some(std::ffi::OsStr::from_bytes(given.to_bytes()).into())
    }
}

impl Drop for Closed {
    fn drop(&mut self) {
        self.settle_now();
    }
}

/// What closing a library left.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Unmapped {
    /// Whether the platform still maps the library after this close (`Some(true)`: pinned,
    /// or held by someone outside dylease); `None` where it cannot tell.
    pub(crate) kept: Option<bool>,
}

/// The file a loader's name of a library stands for, for messages: a name under
/// `/proc/self/fd` (dylease's own, see [`imp`]) resolved to the path it links to.
fn file_of(name: &std::ffi::CStr) -> String {
    let name = name.to_string_lossy();
    let name = Path::new(name.as_ref());
    std::fs::canonicalize(name)
        .or_else(|_| std::fs::read_link(name))
        .unwrap_or_else(|_| name.to_owned())
        .display()
        .to_string()
}

/// An I/O failure while naming a checked file for the loader.
fn io_message(path: &Path, error: &std::io::Error) -> String {
    format!(
        "cannot hand `{}` to the loader: {error}{}",
        path.display(),
        descriptor_hint(error)
    )
}

/// What a failure to get a file descriptor means for dylease, as a parenthesis to append to
/// the message (empty for other failures): every loaded library keeps one open.
pub(crate) fn descriptor_hint(error: &std::io::Error) -> &'static str {
    imp::descriptor_hint(error)
}

/// The bytes of a NUL-terminated string, reading at most `max + 1` of them: `None` if the
/// string is longer than `max` bytes. Never reads past the terminating NUL, so an absurdly
/// long string costs no more than a short one.
///
/// # Safety
///
/// `ptr` points to a NUL-terminated string that stays valid for `'a`.
pub(crate) unsafe fn bounded_c_str<'a>(ptr: *const c_char, max: usize) -> Option<&'a [u8]> {
    let mut len = 0;
    // SAFETY: the string is NUL-terminated and the loop stops at its NUL, so every byte read
    // is part of it (and `wrapping_add` stays within it).
    while unsafe { *ptr.wrapping_add(len) } != 0 {
        if len == max {
            return None;
        }
        len += 1;
    }
    // SAFETY: the `len` bytes before the NUL are part of the string, valid for `'a`.
    Some(unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) })
}

/// A descriptor's string, at most `max` bytes of it.
///
/// # Safety
///
/// `ptr` is NULL or points to a NUL-terminated string valid during the call.
unsafe fn c_text(ptr: *const c_char, max: usize) -> CText {
    if ptr.is_null() {
        return CText::Null;
    }
    // SAFETY: the caller's contract.
    match unsafe { bounded_c_str(ptr, max) } {
        None => CText::TooLong,
        Some(bytes) => CText::Bytes(bytes.to_vec()),
    }
}

/// The loader's own words, without libloading's wrapper text.
fn loader_message(error: &libloading::Error) -> String {
    use std::error::Error as _;
    match error.source() {
        Some(source) => source.to_string(),
        None => error.to_string(),
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu", not(loom)))]
mod tests {
    use super::*;
    use std::path::PathBuf;
    use std::process::Command;

    /// Compiles the C test plugin `source` (with `args`) to `out`.
    fn compile(source: &str, out: &Path, args: &[&str]) {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
        let output = Command::new(&cc)
            .args(["-shared", "-fPIC", "-I"])
            .arg(root.join("include"))
            .args(args)
            .arg(root.join("tests/plugins").join(source))
            .arg("-o")
            .arg(out)
            .output()
            .unwrap_or_else(|e| panic!("cannot run the C compiler {cc:?}: {e}"));
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    }

    /// A fresh directory of the test's own holding `libx.so` (from `arith.c`: the file
    /// checked, opened and its identity read) and `other.so` (from `ctor.c`: a file that may be
    /// renamed over it).
    struct Pair {
        dir: crate::test_dir::TestDir,
        checked_path: PathBuf,
        other: PathBuf,
        other_inode: u64,
        checked: File,
        identity: crate::sys::FileId,
    }

    fn pair(test: &str) -> Pair {
        pair_with(test, &[])
    }

    /// As [`pair`], the other library linked with `other_args`.
    fn pair_with(test: &str, other_args: &[&str]) -> Pair {
        let dir = crate::test_dir::TestDir::new(&format!("library-{test}"));
        let (checked_path, other) = (dir.join("libx.so"), dir.join("other.so"));
        compile("arith.c", &checked_path, &[]);
        compile("ctor.c", &other, other_args);
        let other_inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&other).unwrap());
        let checked = File::open(&checked_path).unwrap();
        let identity = crate::sys::file_id(&checked.metadata().unwrap()).unwrap();
        Pair {
            dir,
            checked_path,
            other,
            other_inode,
            checked,
            identity,
        }
    }

    /// Whether a file whose path holds `needle` is mapped into this process.
    fn mapped(needle: &str) -> bool {
        String::from_utf8_lossy(&std::fs::read("/proc/self/maps").unwrap())
            .into_owned()
            .contains(needle)
    }

    #[test]
    fn a_library_found_through_its_directory_is_never_mapped_if_another_file_took_its_name() {
        // The `$ORIGIN` mode gives the loader `/proc/self/fd/D/name`: a file renamed over the
        // name after the check would be what the loader maps, constructors first. The name
        // is compared with the checked descriptor before the loader sees it.
        let Pair {
            dir: _dir,
            checked_path,
            other,
            other_inode,
            checked,
            identity,
        } = pair("origin");
        std::fs::rename(&other, &checked_path).unwrap();
        let origin = Checked {
            file: &checked,
            identity: &identity,
            resolved: &checked_path,
            origin: true,
            loads: &[],
            strict: true,
            follow: false,
        };
        match Library::open(origin) {
            Err(OpenFailure::Replaced(why)) => assert!(why.contains("was replaced"), "{why}"),
            other => panic!("expected a replacement, got {other:?}"),
        }
        let maps = String::from_utf8_lossy(&std::fs::read("/proc/self/maps").unwrap()).into_owned();
        assert!(
            !maps.lines().any(|l| l.contains(&format!(" {other_inode} "))),
            "the renamed-in file was mapped"
        );
        // The same descriptor given as itself maps the checked file, whatever its name.
        let exact = Checked {
            origin: false,
            ..origin
        };
        let library = Library::open(exact).unwrap();
        assert!(mapped(&checked_path.display().to_string()));
        let (closed, names) = library.close();
        closed.unwrap();
        assert_eq!(names.settle().kept, Some(false), "the checked library stayed mapped");
    }

    /// A library dropped without `close` (a failed start, an extra handle) is closed and
    /// unmapped by its drop, and names dropped without `settle` release their descriptors.
    #[test]
    fn a_library_or_its_names_dropped_unsettled_are_closed_and_released() {
        let Pair {
            dir: _dir,
            checked_path: path,
            checked,
            identity,
            ..
        } = pair("drop");
        let shown = path.display().to_string();
        let exact = Checked {
            file: &checked,
            identity: &identity,
            resolved: &path,
            origin: false,
            loads: &[],
            strict: true,
            follow: false,
        };
        let library = Library::open(exact).unwrap();
        assert!(mapped(&shown));
        drop(library);
        assert!(!mapped(&shown), "a library dropped without close stayed mapped");

        let (closed, names) = Library::open(exact).unwrap().close();
        closed.unwrap();
        let given = names.given().expect("the names of a closed library");
        assert_eq!(
            std::fs::canonicalize(&given).ok(),
            Some(path.clone()),
            "{}",
            given.display()
        );
        drop(names);
        assert_ne!(
            std::fs::canonicalize(&given).ok(),
            Some(path.clone()),
            "names dropped unsettled kept their descriptor"
        );
    }

    /// A failure to hand a checked file to the loader names the file, the cause and, when
    /// the process is out of descriptors, why dylease needs one per library.
    #[test]
    fn a_file_that_cannot_be_handed_to_the_loader_is_named_with_the_cause_and_the_limit() {
        let message = io_message(
            Path::new("/plugins/libx.so"),
            &std::io::Error::from_raw_os_error(libc::EMFILE),
        );
        assert!(
            message.starts_with("cannot hand `/plugins/libx.so` to the loader: "),
            "{message}"
        );
        assert!(
            message.ends_with("dylease keeps one descriptor open per loaded library, so raise the limit)"),
            "{message}"
        );
        let other = io_message(Path::new("/p"), &std::io::Error::from_raw_os_error(libc::EACCES));
        assert!(!other.contains("ulimit"), "{other}");
    }

    thread_local! {
        /// Run by `Library::open` on this thread between the comparison of the name it gives
        /// the loader with the checked file and the loader's open: the instant in which only
        /// the directory's owner can rename another file in.
        pub(super) static BETWEEN_NAME_AND_LOADER: std::cell::Cell<Option<Box<dyn FnOnce()>>> =
            const { std::cell::Cell::new(None) };
    }

    #[test]
    fn a_file_renamed_in_after_the_name_was_compared_is_refused_once_the_mapping_is_compared() {
        // The `$ORIGIN` mode's last guard: the name is compared with the checked file, then
        // the loader opens it by name. A file renamed in between is what the loader maps
        // (its constructors run: that window belongs to the directory's owner), and the
        // mapping's comparison with the checked file refuses it and closes it. The second
        // file renamed in has its first segment at 0x10000, so that no mapping starts at its
        // load bias (`l_addr`): the comparison looks at the mapping that holds its dynamic
        // section (at `l_addr` it would find no mapping and let the file through).
        for (n, other_args) in [&[][..], &["-Wl,-Ttext-segment=0x10000"][..]].into_iter().enumerate() {
            renamed_in_after_the_name_was_compared(&format!("window{n}"), other_args);
        }
    }

    fn renamed_in_after_the_name_was_compared(test: &str, other_args: &[&str]) {
        let Pair {
            dir: _dir,
            checked_path,
            other,
            other_inode,
            checked,
            identity,
        } = pair_with(test, other_args);
        let (from, to) = (other.clone(), checked_path.clone());
        BETWEEN_NAME_AND_LOADER.with(|hook| hook.set(Some(Box::new(move || std::fs::rename(&from, &to).unwrap()))));
        let origin = Checked {
            file: &checked,
            identity: &identity,
            resolved: &checked_path,
            origin: true,
            loads: &[],
            strict: true,
            follow: false,
        };
        let result = Library::open(origin);
        assert!(
            BETWEEN_NAME_AND_LOADER.with(|hook| hook.take()).is_none(),
            "the hook did not run"
        );
        match result {
            Err(OpenFailure::Other(why)) => assert!(why.contains("was replaced while the loader mapped it"), "{why}"),
            other => panic!("expected the mapping to be refused, got {other:?}"),
        }
        let maps = String::from_utf8_lossy(&std::fs::read("/proc/self/maps").unwrap()).into_owned();
        assert!(
            !maps.lines().any(|l| l.contains(&format!(" {other_inode} "))),
            "the renamed-in file stayed mapped"
        );
    }
}
