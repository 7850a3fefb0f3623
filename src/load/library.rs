//! The one place that calls the platform loader. Everything here is `unsafe` by nature:
//! opening a library runs its initialisation routines, closing it runs its termination
//! routines, and a symbol is only as well-typed as the plugin ABI says it is.
// `unsafe` here: the only caller of the platform loader (`dlopen`, `dlsym`, `dladdr1`, `dl_iterate_phdr`).
#![allow(unsafe_code)]

use std::fs::File;
use std::path::Path;

use crate::abi::{DYLEASE_ENTRY_SYMBOL, dylease_plugin_v1_fn};

/// The checked file a library is opened from: the descriptor the trust and ELF checks read,
/// and where it was found.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Checked<'a> {
    /// The descriptor the checks read: what the loader must map.
    pub(crate) file: &'a File,
    /// The path the file was found at, with symlinks resolved (for `$ORIGIN`, and messages).
    pub(crate) resolved: &'a Path,
    /// Whether the library's run paths or needed names use `$ORIGIN`.
    pub(crate) origin: bool,
}

/// An open shared library. Dropping it closes the library (`dlclose`).
#[derive(Debug)]
pub(crate) struct Library {
    inner: Option<libloading::Library>,
    /// The loader's handle: what identifies the mapping (on glibc, its `link_map`).
    handle: usize,
    /// The descriptors whose names the loader recorded for the mapping (see [`imp`]): each
    /// stays open while the mapping lives, for ever if the platform keeps it.
    names: imp::Names,
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
    /// # Safety
    ///
    /// Opening a library runs its initialisation routines (and closing it later runs its
    /// termination routines). The caller vouches that running that code is sound, as for
    /// calling any unknown foreign function.
    pub(crate) unsafe fn open(checked: Checked<'_>) -> Result<Library, String> {
        let (name, names) = imp::name(checked).map_err(|e| io_message(checked.resolved, &e))?;
        #[cfg(unix)]
        let opened = {
            use libloading::os::unix::{Library as Unix, RTLD_LOCAL, RTLD_NOW};
            // SAFETY: the caller vouches for the library's initialisation routines.
            unsafe { Unix::open(Some(&name), RTLD_NOW | RTLD_LOCAL) }.map(|library| {
                let raw = library.into_raw();
                // SAFETY: `raw` was just returned by `into_raw` of an open library, and is
                // taken back exactly once.
                let library = unsafe { Unix::from_raw(raw) };
                (libloading::Library::from(library), raw as usize)
            })
        };
        #[cfg(windows)]
        let opened = {
            // SAFETY: the caller vouches for the library's initialisation routines.
            unsafe { libloading::os::windows::Library::new(&name) }.map(|library| {
                let raw = library.into_raw();
                // SAFETY: as on Unix: the module handle is taken back exactly once.
                let library = unsafe { libloading::os::windows::Library::from_raw(raw) };
                (libloading::Library::from(library), raw as usize)
            })
        };
        let (inner, handle) = opened.map_err(|e| {
            // The loader's words name what it was given: name the file instead.
            let message = loader_message(&e).replace(&*name.to_string_lossy(), &checked.resolved.to_string_lossy());
            let hint = if message.contains("Too many open files") {
                descriptor_hint(&std::io::Error::from_raw_os_error(EMFILE))
            } else {
                ""
            };
            format!("{message}{hint}")
        })?;
        let library = Library {
            inner: Some(inner),
            handle,
            names,
        };
        if imp::maps_checked_file(&library.names, handle) == Some(false) {
            let (_, closed) = library.close();
            let Unmapped { kept, .. } = closed.settle();
            return Err(format!(
                "the file at `{}` was replaced while the loader mapped it (its directory's owner renamed \
                 another file in){}",
                checked.resolved.display(),
                if kept == Some(true) {
                    "; the platform keeps what it mapped"
                } else {
                    ""
                }
            ));
        }
        Ok(library)
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
    /// registration and unload code would run twice on one mapping. So the symbol's object is
    /// compared with this library (`dladdr1(RTLD_DL_LINKMAP)` against the handle, on glibc).
    ///
    /// The returned pointer is valid only while `self` is open; callers keep it next to the
    /// library and never past it.
    pub(crate) fn entry(&self) -> Result<dylease_plugin_v1_fn, String> {
        // SAFETY: the plugin ABI defines `dylease_plugin_v1` as a function of type
        // `dylease_plugin_v1_fn`; a library that exports the name with another type breaks
        // the ABI it claims to implement, which is the trust the host places in its plugins.
        let symbol = unsafe {
            self.open_library()
                .get::<dylease_plugin_v1_fn>(DYLEASE_ENTRY_SYMBOL.as_bytes())
        };
        let entry = symbol.map(|s| *s).map_err(|e| loader_message(&e))?;
        match self.owner_of(entry as *const core::ffi::c_void) {
            Some(Err(owner)) => Err(format!(
                "the `{DYLEASE_ENTRY_SYMBOL}` the loader found belongs to `{}`, a library it depends on, \
                 not to the file itself",
                file_of(&owner)
            )),
            Some(Ok(())) | None => Ok(entry),
        }
    }

    /// Whether `address` lies in this library: `Some(Ok)` if so, `Some(Err(name))` with the
    /// loader's name of the object it lies in otherwise, `None` where the platform cannot tell.
    fn owner_of(&self, address: *const core::ffi::c_void) -> Option<Result<(), std::ffi::CString>> {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            use std::ffi::{CStr, c_void};
            /// glibc's `RTLD_DL_LINKMAP` (dlfcn.h), which the `libc` crate does not declare.
            const RTLD_DL_LINKMAP: libc::c_int = 2;
            let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
            let mut link_map: *mut c_void = std::ptr::null_mut();
            // SAFETY: `dladdr1` only reads the loader's tables; `address` is the entry point the
            // loader just resolved in this open library; both out-pointers are writable, and
            // with RTLD_DL_LINKMAP the extra one receives a `struct link_map *`.
            let found = unsafe { libc::dladdr1(address, info.as_mut_ptr(), &mut link_map, RTLD_DL_LINKMAP) };
            if found == 0 || link_map.is_null() {
                return None;
            }
            // On glibc the handle `dlopen` returns is the object's `link_map`.
            if link_map as usize == self.handle {
                return Some(Ok(()));
            }
            // SAFETY: `dladdr1` succeeded, so it filled `info` (zeroed before: a pointer is
            // either set or NULL).
            let name = unsafe { info.assume_init() }.dli_fname;
            // SAFETY: a non-NULL `dli_fname` is the loader's NUL-terminated name of the object,
            // valid while it is loaded; it is copied at once.
            let name = (!name.is_null()).then(|| unsafe { CStr::from_ptr(name) }.to_owned());
            Some(Err(name.unwrap_or_default()))
        }
        #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
        {
            let _ = address;
            None
        }
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
            handle: self.handle,
            names: Some(std::mem::take(&mut self.names)),
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
    handle: usize,
    names: Option<imp::Names>,
}

impl Closed {
    /// Looks for the mapping by the checked file's own name (`RTLD_NOLOAD`, which finds this
    /// mapping and no other while nothing else maps the file: the registry's busy mark, I1),
    /// and closes the names if it is gone; if it is still there (pinned, or held by a library
    /// that depends on it or by someone outside dylease), they stay open for the life of the
    /// process. Call it once every library closed with it is closed.
    pub(crate) fn settle(mut self) -> Unmapped {
        self.settle_now()
    }

    fn settle_now(&mut self) -> Unmapped {
        let Some(names) = self.names.take() else {
            return Unmapped {
                kept: None,
                handle: self.handle,
            };
        };
        let kept = imp::still_mapped(&names, self.handle);
        if kept != Some(false) {
            imp::keep_for_ever(names);
        }
        Unmapped {
            kept,
            handle: self.handle,
        }
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
    /// The loader's handle of the mapping (never reused while the mapping is kept).
    pub(crate) handle: usize,
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

/// `EMFILE`, the error of a process out of file descriptors.
#[cfg(unix)]
const EMFILE: i32 = libc::EMFILE;
#[cfg(not(unix))]
const EMFILE: i32 = 24;

/// The loader's own words, without libloading's wrapper text.
fn loader_message(error: &libloading::Error) -> String {
    use std::error::Error as _;
    match error.source() {
        Some(source) => source.to_string(),
        None => error.to_string(),
    }
}

/// How the loader is told which file to map, on Linux: by a name under `/proc/self/fd` of the
/// checked descriptor.
///
/// glibc has no `fdlopen`; `dlopen("/proc/self/fd/N")` maps the inode descriptor N is open on,
/// whatever was renamed over the path since. Three traps (measured, glibc 2.36):
/// - the loader records the name it was given, and matches a later `dlopen` of the same
///   string to that mapping without looking at the file: once N is closed and reused for
///   another file, `dlopen("/proc/self/fd/N")` returns the *old* library. So every name given
///   to the loader stays open while the mapping lives, and for ever if the platform keeps it;
/// - an open that the loader resolves to an existing mapping (same device and inode) adds the
///   name to it: the same rule covers it;
/// - `$ORIGIN` is the name's directory, `/proc/self/fd`: a library whose run path uses it is
///   given `/proc/self/fd/D/name`, D its directory's descriptor, and the mapping is then
///   compared with the checked file through `RTLD_NOLOAD` on the checked descriptor's name.
#[cfg(target_os = "linux")]
mod imp {
    use std::ffi::{CStr, CString, c_void};
    use std::io;
    use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::OpenOptionsExt;
    use std::path::PathBuf;

    use super::Checked;

    /// The descriptors behind the names one open gave the loader.
    #[derive(Debug, Default)]
    pub(super) struct Names {
        fds: Vec<OwnedFd>,
        /// `/proc/self/fd/N` of the checked file: finds exactly its mapping.
        exact: CString,
        /// Whether the loader was given another name (the directory's), so that the mapping
        /// must be compared with the checked file.
        through_dir: bool,
    }

    /// The name to give the loader for `checked`, and the descriptors behind it.
    pub(super) fn name(checked: Checked<'_>) -> io::Result<(PathBuf, Names)> {
        let file = OwnedFd::from(checked.file.try_clone()?);
        let exact = format!("/proc/self/fd/{}", file.as_raw_fd());
        let mut names = Names {
            exact: CString::new(exact.clone()).expect("a number holds no NUL"),
            fds: vec![file],
            through_dir: false,
        };
        let (Some(dir), Some(file_name), true) =
            (checked.resolved.parent(), checked.resolved.file_name(), checked.origin)
        else {
            return Ok((PathBuf::from(exact), names));
        };
        let dir = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open(dir)?;
        let mut name = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
        name.push(file_name);
        names.fds.push(dir.into());
        names.through_dir = true;
        debug_assert!(!name.as_os_str().as_bytes().contains(&0));
        Ok((name, names))
    }

    /// Whether the mapping `handle` is of the checked file, where the loader was given
    /// another name for it; `None` where it was given the checked descriptor itself.
    pub(super) fn maps_checked_file(names: &Names, handle: usize) -> Option<bool> {
        names.through_dir.then(|| loaded(&names.exact) == Some(handle))
    }

    /// Whether the mapping is still there after its last `dlclose`.
    pub(super) fn still_mapped(names: &Names, handle: usize) -> Option<bool> {
        if names.fds.is_empty() {
            return None;
        }
        Some(loaded(&names.exact) == Some(handle))
    }

    /// The handle of the loaded library `name` names, without loading anything: by the
    /// loader's record of the name, or by the device and inode of the file it opens.
    fn loaded(name: &CStr) -> Option<usize> {
        // SAFETY: `RTLD_NOLOAD` maps nothing and runs no initialisation routine: it returns a
        // library that is already loaded (one more reference) or NULL; `name` is
        // NUL-terminated.
        let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
        if handle.is_null() {
            return None;
        }
        // SAFETY: `handle` came from the `dlopen` above, whose reference this gives back; the
        // library stays loaded by its other references, so no termination routine runs.
        unsafe { libc::dlclose(handle.cast::<c_void>()) };
        Some(handle as usize)
    }

    /// What a failure to get a descriptor means here, for the message.
    pub(super) fn descriptor_hint(error: &io::Error) -> &'static str {
        match error.raw_os_error() {
            Some(libc::EMFILE) => {
                " (EMFILE: this process has as many files open as `ulimit -n` allows; dylease keeps one \
                 descriptor open per loaded library, so raise the limit)"
            }
            Some(libc::ENFILE) => " (ENFILE: the system's table of open files is full)",
            _ => "",
        }
    }

    /// Keeps the descriptors open for the life of the process: the loader may still match
    /// their names to a mapping it keeps.
    pub(super) fn keep_for_ever(names: Names) {
        for fd in names.fds {
            let _kept_open = fd.into_raw_fd();
        }
    }
}

/// Elsewhere the loader is given the resolved path, and a mapping cannot be looked for.
#[cfg(not(target_os = "linux"))]
mod imp {
    use std::io;
    use std::path::PathBuf;

    use super::Checked;

    #[derive(Debug, Default)]
    pub(super) struct Names;

    pub(super) fn name(checked: Checked<'_>) -> io::Result<(PathBuf, Names)> {
        Ok((checked.resolved.to_owned(), Names))
    }

    pub(super) fn maps_checked_file(_: &Names, _: usize) -> Option<bool> {
        None
    }

    pub(super) fn still_mapped(_: &Names, _: usize) -> Option<bool> {
        None
    }

    pub(super) fn keep_for_ever(_: Names) {}

    pub(super) fn descriptor_hint(_: &io::Error) -> &'static str {
        ""
    }
}

#[cfg(all(test, target_os = "linux", target_env = "gnu", not(loom)))]
mod tests {
    use super::*;
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

    #[test]
    fn a_library_mapped_through_its_directory_is_refused_if_another_file_took_its_name() {
        // The `$ORIGIN` mode gives the loader `/proc/self/fd/D/name`: a file renamed over the
        // name after the check is what the loader maps. The mapping must be compared with
        // the checked descriptor and refused, and closed.
        let dir = std::env::temp_dir().join(format!("dylease-library-origin-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (checked_path, other) = (dir.join("libx.so"), dir.join("other.so"));
        compile("arith.c", &checked_path, &[]);
        compile("ctor.c", &other, &[]);
        let checked = File::open(&checked_path).unwrap();
        std::fs::rename(&other, &checked_path).unwrap();
        let origin = Checked {
            file: &checked,
            resolved: &checked_path,
            origin: true,
        };
        // SAFETY: both libraries are this crate's own test plugins, whose initialisation
        // routines are sound.
        let error = unsafe { Library::open(origin) }.unwrap_err();
        assert!(error.contains("was replaced while the loader mapped it"), "{error}");
        assert!(error.contains(&checked_path.display().to_string()), "{error}");
        // The same descriptor given as itself maps the checked file.
        let exact = Checked {
            origin: false,
            ..origin
        };
        // SAFETY: as above.
        let library = unsafe { Library::open(exact) }.unwrap();
        let (closed, names) = library.close();
        closed.unwrap();
        assert_eq!(names.settle().kept, Some(false), "the checked library stayed mapped");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
