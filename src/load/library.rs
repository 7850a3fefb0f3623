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
    /// Whether the trust check is on (`TrustPolicy::Strict`).
    pub(crate) strict: bool,
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
    /// What the loader was given, and the file it stands for, for messages.
    shown: Shown,
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
    /// `/proc/self/fd` (identity I9, `docs::sharing`): the file mapped is the file checked,
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
    pub(crate) unsafe fn open(checked: Checked<'_>) -> Result<Library, OpenFailure> {
        let failed = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::NotFound => OpenFailure::Replaced(e.to_string()),
            std::io::ErrorKind::PermissionDenied if checked.strict => OpenFailure::Untrusted(e.to_string()),
            _ => OpenFailure::Other(io_message(checked.resolved, &e)),
        };
        let (name, names) = imp::name(checked).map_err(failed)?;
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
        let shown = Shown {
            given: name.to_string_lossy().into_owned(),
            file: checked.resolved.to_owned(),
        };
        let (inner, handle) = opened.map_err(|e| {
            let message = shown.rewrite(&loader_message(&e));
            let hint = if message.contains("Too many open files") {
                descriptor_hint(&std::io::Error::from_raw_os_error(EMFILE))
            } else {
                ""
            };
            OpenFailure::Other(format!("{message}{hint}"))
        })?;
        let mut library = Library {
            inner: Some(inner),
            handle,
            names,
            shown,
        };
        // SAFETY: `handle` was just returned by the loader for this open library.
        unsafe { imp::opened(&mut library.names, handle) };
        if imp::maps_checked_file(&library.names, checked.file) == Some(false) {
            let (_, closed) = library.close();
            closed.settle();
            return Err(OpenFailure::Other(format!(
                "the file at `{}` was replaced while the loader mapped it (its directory's owner renamed \
                 another file in): refused",
                checked.resolved.display()
            )));
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
        let entry = symbol
            .map(|s| *s)
            .map_err(|e| self.shown.rewrite(&loader_message(&e)))?;
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
            return Unmapped { kept: None };
        };
        let kept = imp::still_mapped(&names);
        imp::release(names, kept);
        Unmapped { kept }
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

/// How the loader is told which file to map, on Linux with glibc: by a name under
/// `/proc/self/fd` of the checked descriptor.
///
/// glibc has no `fdlopen`; `dlopen("/proc/self/fd/N")` maps the inode descriptor N is open on,
/// whatever was renamed over the path since. Its traps (measured, glibc 2.36; see
/// `docs::sharing`):
/// - the loader records the name it was given, and matches a later `dlopen` of the same
///   string to that mapping without looking at the file: once N is closed and reused for
///   another file, `dlopen("/proc/self/fd/N")` returns the *old* library. So every name given
///   to the loader stays open while the mapping lives, and for ever if the platform keeps it;
/// - an open that the loader resolves to an existing mapping (same device and inode) adds the
///   name to it, for as long as that mapping lives: such a name is kept for ever. A file whose
///   mapping the platform kept (pinned) is opened again by the name it was kept under, so that
///   reloading a pinned plugin adds no name;
/// - `$ORIGIN` is the name's directory, `/proc/self/fd`: a library whose run path uses it is
///   given `/proc/self/fd/D/name`, D its directory's descriptor, after checking that the name
///   still is the checked file (and refused in a directory where others can create names), and
///   the mapping is then compared with the checked file through `/proc/self/maps`.
///
/// Whether a mapping is still there is asked of the loader's list (`dl_iterate_phdr`, by its
/// load address and name), which, unlike `RTLD_NOLOAD`, gives no mapping a name.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod imp {
    use std::collections::HashMap;
    use std::ffi::{CStr, CString, c_char, c_int, c_void};
    use std::fs::File;
    use std::io;
    use std::os::fd::{AsRawFd, IntoRawFd, OwnedFd};
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    use std::path::PathBuf;

    use super::Checked;
    use crate::sync::Mutex;

    crate::sync::lazy_static! {
        /// The name each kept (pinned) mapping was given, by its file's (dev, ino): the
        /// descriptor behind it stays open for the life of the process.
        static KEPT: Mutex<HashMap<(u64, u64), CString>> = Mutex::new(HashMap::new());
    }

    /// The descriptors behind the name one open gave the loader.
    #[derive(Debug, Default)]
    pub(super) struct Names {
        fds: Vec<OwnedFd>,
        /// The name given to the loader.
        given: CString,
        /// The checked file's (dev, ino).
        file: (u64, u64),
        /// Where the loader mapped the library (`l_addr`), and its name in the loader's list
        /// (`l_name`: the name given, unless the open found a mapping that existed), once open.
        base: Option<usize>,
        loaded_as: CString,
        /// Whether the loader was given the directory's name for it (`$ORIGIN`).
        through_dir: bool,
        /// Whether the open was resolved to a mapping that already existed under another
        /// name: the loader added this name to it, for as long as it lives.
        shared: bool,
    }

    /// The name to give the loader for `checked`, and the descriptors behind it.
    pub(super) fn name(checked: Checked<'_>) -> io::Result<(PathBuf, Names)> {
        let metadata = checked.file.metadata()?;
        let file = (metadata.dev(), metadata.ino());
        if let Some(kept) = KEPT.lock().get(&file) {
            // Pinned: the mapping is still there under this name (see the module docs).
            let name = PathBuf::from(std::ffi::OsStr::from_bytes(kept.as_bytes()));
            let names = Names {
                given: kept.clone(),
                file,
                ..Names::default()
            };
            return Ok((name, names));
        }
        let fd = OwnedFd::from(checked.file.try_clone()?);
        let exact = format!("/proc/self/fd/{}", fd.as_raw_fd());
        let mut names = Names {
            given: CString::new(exact.clone()).expect("a number holds no NUL"),
            file,
            fds: vec![fd],
            ..Names::default()
        };
        let (Some(dir_path), Some(file_name), true) =
            (checked.resolved.parent(), checked.resolved.file_name(), checked.origin)
        else {
            return Ok((PathBuf::from(exact), names));
        };
        let dir = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
            .open(dir_path)?;
        let dir_metadata = dir.metadata()?;
        if checked.strict && dir_metadata.mode() & 0o1002 == 0o1002 {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "its run path uses `$ORIGIN`, so the loader must find it by name in its directory `{}`, \
                     where other users can create names (sticky and writable by others); move the plugin \
                     to a directory only this user or root can change",
                    dir_path.display()
                ),
            ));
        }
        // The name still is the checked file (another file renamed in meanwhile is checked
        // first, by the caller): `NotFound` tells it.
        let at_name = stat_at(&dir, file_name)?;
        if at_name != file {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("`{}` was replaced since it was checked", checked.resolved.display()),
            ));
        }
        let mut name = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
        name.push(file_name);
        names.given = CString::new(name.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "the name holds a NUL byte"))?;
        names.fds.push(dir.into());
        names.through_dir = true;
        Ok((name, names))
    }

    /// (dev, ino) of `name` in `dir`, not following a symlink.
    fn stat_at(dir: &File, name: &std::ffi::OsStr) -> io::Result<(u64, u64)> {
        let name = CString::new(name.as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "the name holds a NUL byte"))?;
        let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: `dir` is open, `name` is NUL-terminated, `stat` is writable.
        let done = unsafe {
            libc::fstatat(
                dir.as_raw_fd(),
                name.as_ptr(),
                stat.as_mut_ptr(),
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if done != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fstatat` succeeded, so it filled `stat`.
        let stat = unsafe { stat.assume_init() };
        Ok((stat.st_dev, stat.st_ino))
    }

    /// glibc's `struct link_map`, its public head (link.h): what `dlopen` returns.
    #[repr(C)]
    struct LinkMap {
        l_addr: usize,
        l_name: *const c_char,
    }

    /// Records where the loader mapped the library, and whether it gave an existing mapping.
    ///
    /// # Safety
    ///
    /// `handle` is what glibc's `dlopen` just returned for an open library (a `link_map`).
    pub(super) unsafe fn opened(names: &mut Names, handle: usize) {
        // SAFETY: on glibc the handle is the library's `link_map`, valid while it is open
        // (the caller's contract); only its public head is read.
        let map = unsafe { &*(handle as *const LinkMap) };
        names.base = Some(map.l_addr);
        // SAFETY: `l_name` is the loader's NUL-terminated name of the object (or NULL).
        let name = (!map.l_name.is_null()).then(|| unsafe { CStr::from_ptr(map.l_name) });
        names.loaded_as = name.map(CStr::to_owned).unwrap_or_default();
        names.shared = name != Some(names.given.as_c_str());
    }

    /// Whether the mapping is of the checked file, where the loader was given another name
    /// for it; `None` where it was given the checked descriptor itself.
    pub(super) fn maps_checked_file(names: &Names, _checked: &File) -> Option<bool> {
        if !names.through_dir {
            return None;
        }
        let base = names.base?;
        let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
        // `start-end perms offset major:minor inode path`: the mapping at the load address.
        let line = maps.lines().find(|line| {
            line.split('-')
                .next()
                .and_then(|start| usize::from_str_radix(start, 16).ok())
                == Some(base)
        });
        let mut fields = line?.split_ascii_whitespace().skip(3);
        let (major, minor) = fields.next()?.split_once(':')?;
        let dev = libc::makedev(
            u32::from_str_radix(major, 16).ok()?,
            u32::from_str_radix(minor, 16).ok()?,
        );
        let ino = fields.next()?.parse::<u64>().ok()?;
        Some((dev, ino) == names.file)
    }

    /// Whether the mapping is still there after its last `dlclose`: an object of the
    /// loader's list at the same address under the same name (kept open, that name cannot be
    /// another object's).
    pub(super) fn still_mapped(names: &Names) -> Option<bool> {
        /// What the walk looks for, and whether it found it.
        struct Wanted<'a> {
            base: usize,
            name: &'a CStr,
            found: bool,
        }
        /// Stops the walk (returns 1) at the object wanted.
        ///
        /// # Safety
        ///
        /// `data` points to a `Wanted` that outlives the walk, and `info` is the loader's.
        unsafe extern "C" fn is_wanted(info: *mut libc::dl_phdr_info, _size: usize, data: *mut c_void) -> c_int {
            // SAFETY: `data` is the `Wanted` passed below, alive and unaliased for the walk.
            let wanted = unsafe { &mut *data.cast::<Wanted<'_>>() };
            // SAFETY: the loader passes a valid `info` for the duration of the call.
            let info = unsafe { &*info };
            // SAFETY: a non-NULL `dlpi_name` is the object's NUL-terminated name.
            let named = !info.dlpi_name.is_null() && unsafe { CStr::from_ptr(info.dlpi_name) } == wanted.name;
            wanted.found = named && info.dlpi_addr as usize == wanted.base;
            c_int::from(wanted.found)
        }
        let mut wanted = Wanted {
            base: names.base?,
            name: &names.loaded_as,
            found: false,
        };
        // SAFETY: `is_wanted` only reads what the loader hands it and writes `wanted`, which
        // lives on this frame for the whole walk; it never unwinds.
        unsafe { libc::dl_iterate_phdr(Some(is_wanted), (&raw mut wanted).cast()) };
        Some(wanted.found)
    }

    /// Closes the descriptors, unless the loader may still match their names to a mapping:
    /// one still there, or one the open was resolved to under another name. A kept mapping's
    /// name is remembered for the next open of its file.
    pub(super) fn release(names: Names, kept: Option<bool>) {
        if kept == Some(false) && !names.shared {
            return;
        }
        if kept != Some(false) && !names.fds.is_empty() && !names.through_dir {
            KEPT.lock().entry(names.file).or_insert_with(|| names.given.clone());
        }
        for fd in names.fds {
            let _kept_open = fd.into_raw_fd();
        }
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
}

/// Elsewhere the loader is given the resolved path, and a mapping cannot be looked for.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
mod imp {
    use std::fs::File;
    use std::io;
    use std::path::PathBuf;

    use super::Checked;

    #[derive(Debug, Default)]
    pub(super) struct Names;

    pub(super) fn name(checked: Checked<'_>) -> io::Result<(PathBuf, Names)> {
        Ok((checked.resolved.to_owned(), Names))
    }

    /// # Safety
    ///
    /// None needed: nothing is read.
    pub(super) unsafe fn opened(_: &mut Names, _: usize) {}

    pub(super) fn maps_checked_file(_: &Names, _: &File) -> Option<bool> {
        None
    }

    pub(super) fn still_mapped(_: &Names) -> Option<bool> {
        None
    }

    pub(super) fn release(_: Names, _: Option<bool>) {}

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

    /// Whether a file whose path holds `needle` is mapped into this process.
    fn mapped(needle: &str) -> bool {
        std::fs::read_to_string("/proc/self/maps").unwrap().contains(needle)
    }

    #[test]
    fn a_library_found_through_its_directory_is_never_mapped_if_another_file_took_its_name() {
        // The `$ORIGIN` mode gives the loader `/proc/self/fd/D/name`: a file renamed over the
        // name after the check would be what the loader maps, constructors first. The name
        // is compared with the checked descriptor before the loader sees it.
        let dir = std::env::temp_dir().join(format!("dylease-library-origin-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let (checked_path, other) = (dir.join("libx.so"), dir.join("other.so"));
        compile("arith.c", &checked_path, &[]);
        compile("ctor.c", &other, &[]);
        let other_inode = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&other).unwrap());
        let checked = File::open(&checked_path).unwrap();
        std::fs::rename(&other, &checked_path).unwrap();
        let origin = Checked {
            file: &checked,
            resolved: &checked_path,
            origin: true,
            strict: true,
        };
        // SAFETY: both libraries are this crate's own test plugins, whose initialisation
        // routines are sound.
        match unsafe { Library::open(origin) } {
            Err(OpenFailure::Replaced(why)) => assert!(why.contains("was replaced"), "{why}"),
            other => panic!("expected a replacement, got {other:?}"),
        }
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        assert!(
            !maps.lines().any(|l| l.contains(&format!(" {other_inode} "))),
            "the renamed-in file was mapped"
        );
        // The same descriptor given as itself maps the checked file, whatever its name.
        let exact = Checked {
            origin: false,
            ..origin
        };
        // SAFETY: as above.
        let library = unsafe { Library::open(exact) }.unwrap();
        assert!(mapped(&checked_path.display().to_string()));
        let (closed, names) = library.close();
        closed.unwrap();
        assert_eq!(names.settle().kept, Some(false), "the checked library stayed mapped");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
