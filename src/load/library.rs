//! The one place that calls the platform loader. Everything here is `unsafe` by nature:
//! opening a library runs its initialisation routines, closing it runs its termination
//! routines, and a symbol is only as well-typed as the plugin ABI says it is.
// `unsafe` here: the only caller of the platform loader (`dlopen`, `dlsym`, `dladdr1`, `dl_iterate_phdr`).
#![allow(unsafe_code)]

use std::path::Path;

use crate::abi::{DYLEASE_ENTRY_SYMBOL, dylease_plugin_v1_fn};

/// An open shared library. Dropping it closes the library (`dlclose`).
#[derive(Debug)]
pub(crate) struct Library {
    inner: libloading::Library,
    /// The loader's handle: what identifies the mapping (on glibc, its `link_map`).
    handle: usize,
}

impl Library {
    /// Opens `path` with `RTLD_NOW | RTLD_LOCAL`: every undefined symbol is resolved now (a
    /// missing one fails here, not at a first call), and the library's symbols stay out of
    /// the global namespace so two plugins cannot clash.
    ///
    /// # Safety
    ///
    /// Opening a library runs its initialisation routines (and closing it later runs its
    /// termination routines). The caller vouches that running that code is sound, as for
    /// calling any unknown foreign function.
    pub(crate) unsafe fn open(path: &Path) -> Result<Library, String> {
        #[cfg(unix)]
        let opened = {
            use libloading::os::unix::{Library as Unix, RTLD_LOCAL, RTLD_NOW};
            // SAFETY: the caller vouches for the library's initialisation routines.
            unsafe { Unix::open(Some(path), RTLD_NOW | RTLD_LOCAL) }.map(|library| {
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
            unsafe { libloading::os::windows::Library::new(path) }.map(|library| {
                let raw = library.into_raw();
                // SAFETY: as on Unix: the module handle is taken back exactly once.
                let library = unsafe { libloading::os::windows::Library::from_raw(raw) };
                (libloading::Library::from(library), raw as usize)
            })
        };
        opened
            .map(|(inner, handle)| Library { inner, handle })
            .map_err(|e| loader_message(&e))
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
        let symbol = unsafe { self.inner.get::<dylease_plugin_v1_fn>(DYLEASE_ENTRY_SYMBOL.as_bytes()) };
        let entry = symbol.map(|s| *s).map_err(|e| loader_message(&e))?;
        match self.owner_of(entry as *const core::ffi::c_void) {
            Some(Err(owner)) => Err(format!(
                "the `{DYLEASE_ENTRY_SYMBOL}` the loader found belongs to `{}`, a library it depends on, \
                 not to the file itself",
                owner.to_string_lossy()
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

    /// Closes the library, reporting the loader's complaint, if any. A successful close does
    /// not prove the library left the address space: see [`still_loaded`].
    pub(crate) fn close(self) -> Result<(), String> {
        self.inner.close().map_err(|e| loader_message(&e))
    }
}

impl Library {
    /// The name the loader keeps for this library in its list of loaded objects (glibc's
    /// `l_name`: the path of whoever opened the file first), found through the entry point's
    /// address. Taken before closing, it lets [`still_loaded`] look for the library after.
    /// `None` where the platform cannot tell.
    pub(crate) fn loader_name(&self) -> Option<LoaderName> {
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            use std::ffi::{CStr, c_void};
            let entry = self.entry().ok()?;
            let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
            // SAFETY: `dladdr` only reads the loader's tables; `entry` is an address inside
            // this library, which is open, and `info` is writable.
            if unsafe { libc::dladdr(entry as *const c_void, info.as_mut_ptr()) } == 0 {
                return None;
            }
            // SAFETY: `dladdr` succeeded, so it filled `info` (zeroed before, so every pointer
            // is either set or NULL).
            let name = unsafe { info.assume_init() }.dli_fname;
            // SAFETY: a non-NULL `dli_fname` is the loader's NUL-terminated name of the object,
            // valid while the library is open; it is copied before anything closes it.
            (!name.is_null()).then(|| LoaderName(unsafe { CStr::from_ptr(name) }.to_owned()))
        }
        #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
        None
    }
}

/// A library's name in the loader's list of loaded objects; see [`Library::loader_name`].
#[derive(Debug)]
pub(crate) struct LoaderName(std::ffi::CString);

impl LoaderName {
    /// The name, lossily decoded, for messages.
    pub(crate) fn display(&self) -> String {
        self.0.to_string_lossy().into_owned()
    }
}

/// Whether the library that was called `name` is still loaded in this process: after this
/// host closed every handle it had to it, `Some(true)` means the platform pinned it (`-z
/// nodelete`, `RTLD_NODELETE`, a thread-local destructor, or another user of the same file).
/// `None` where the platform cannot tell: only glibc is asked (musl never unloads at all).
///
/// The check walks the loader's list of loaded objects (`dl_iterate_phdr`): no file is opened
/// and no library is mapped, so it costs next to nothing beside the `dlclose` before it.
pub(crate) fn still_loaded(name: Option<&LoaderName>) -> Option<bool> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::ffi::{CStr, c_int, c_void};

        /// Stops the walk (returns 1) at the object named `*data`.
        ///
        /// # Safety
        ///
        /// `data` points to a `&CStr` that outlives the walk, and `info` is the loader's.
        unsafe extern "C" fn is_named(info: *mut libc::dl_phdr_info, _size: usize, data: *mut c_void) -> c_int {
            // SAFETY: `data` is the `&CStr` passed below, alive for the whole walk.
            let wanted = unsafe { *data.cast::<&CStr>() };
            // SAFETY: the loader passes a valid `info` for the duration of the call.
            let name = unsafe { (*info).dlpi_name };
            // SAFETY: a non-NULL `dlpi_name` is the object's NUL-terminated name.
            c_int::from(!name.is_null() && unsafe { CStr::from_ptr(name) } == wanted)
        }

        let wanted: &CStr = &name?.0;
        // SAFETY: `is_named` only reads what the loader hands it and `wanted`, which lives on
        // this frame for the whole walk; it never unwinds.
        let found = unsafe { libc::dl_iterate_phdr(Some(is_named), (&raw const wanted).cast_mut().cast()) };
        Some(found != 0)
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = name;
        None
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

/// Whether the loader still has a library named `path` whose mapping is not of the file
/// `identity` names: a library the platform kept mapped (pinned) after its instance unloaded,
/// whose file was since replaced. `dlopen(path)` would return that old mapping by name. Asks
/// the loader's list first (cheap, no file opened), and only if the name is there reads the
/// kernel's `/proc/self/maps` for the mapped file's inode. `false` where the platform cannot
/// tell.
pub(crate) fn mapped_from_another_file(path: &Path, identity: &crate::load::candidate::Identity) -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::os::unix::ffi::OsStrExt;
        let Ok(name) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
            return false;
        };
        if still_loaded(Some(&LoaderName(name))) != Some(true) {
            return false;
        }
        let Ok(maps) = std::fs::read("/proc/self/maps") else {
            return false;
        };
        let wanted = path.as_os_str().as_bytes();
        maps.split(|&b| b == b'\n').any(|line| {
            // address perms offset dev inode path
            let mut fields = line.splitn(6, |&b| b == b' ');
            let inode = fields
                .nth(4)
                .and_then(|f| std::str::from_utf8(f).ok()?.parse::<u64>().ok());
            let mapped = fields.next().map(|rest| rest.trim_ascii_start());
            match (inode, mapped) {
                (Some(inode), Some(mapped)) if mapped == wanted => inode != identity.1,
                (Some(_), Some(mapped)) => mapped.strip_suffix(b" (deleted)") == Some(wanted),
                _ => false,
            }
        })
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        let _ = (path, identity);
        false
    }
}
