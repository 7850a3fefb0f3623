//! The platform layer's raw calls, in one file: the C library's and the platform loader's
//! functions that `linux`, `other`, `walk` and `library` are written over. Where a call is safe
//! to wrap (its arguments can be checked, or borrowed descriptors and C strings carry its
//! preconditions), it is wrapped here in a safe function, and the modules above it hold no
//! `unsafe`; where it is not (opening a library runs its code; a loader handle or an address
//! is only valid while its library is open), it stays an `unsafe fn` with its contract, called
//! from `library` alone. CPython's calls are `python`'s.
//!
//! - Unix: `openat`, `fstat`, `fstatat` and `readlinkat` on descriptors (the trust check's
//!   walk, `walk`), `geteuid`, and opening a library (`dlopen` through libloading).
//! - Linux: `getauxval(AT_SECURE)`, a read lease and its signal (`F_SETLEASE`, `F_SETSIG`),
//!   a sealable memfd and its seals (signed plugins' held bytes), the head of a loader handle (its `link_map`), a look-up
//!   by name that maps nothing (`dlopen` with `RTLD_NOLOAD`), the walk of the loader's list
//!   (`dl_iterate_phdr`), the object an address lies in (`dladdr1`, glibc) and the
//!   `PROCMAP_QUERY` ioctl of `/proc/self/maps`.
//! - Windows: opening a library (`LoadLibraryExW` through libloading).

#[cfg(unix)]
use std::ffi::CStr;
use std::ffi::CString;
#[cfg(target_os = "linux")]
use std::ffi::{c_int, c_void};
#[cfg(unix)]
use std::io;
#[cfg(unix)]
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// What the loader says of a library it just opened, read from the head of its handle (on
/// Linux, glibc's `struct link_map`, whose first fields musl's `struct dso` shares); `None`
/// elsewhere.
#[derive(Debug, Clone, Default)]
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
pub(crate) struct LinkHead {
    /// Where it mapped the library: the bias added to every address of the file (`l_addr`).
    pub(crate) base: usize,
    /// The address of the object's dynamic section, inside its own mapping (`l_ld`), if any.
    pub(crate) dynamic: Option<usize>,
    /// The loader's name of the object (`l_name`): the name it was opened by, or another if
    /// the open was resolved to a mapping that existed.
    pub(crate) name: CString,
}

/// A library the loader opened: libloading's handle of it, the loader's own handle (what
/// identifies the mapping: on glibc, its `link_map`) and, on Linux, what that handle's head
/// says.
#[derive(Debug)]
pub(crate) struct Opened {
    pub(crate) library: libloading::Library,
    pub(crate) handle: usize,
    pub(crate) head: Option<LinkHead>,
}

/// Opens the library the loader knows as `name` with `RTLD_NOW | RTLD_LOCAL`.
///
/// # Safety
///
/// Opening a library runs its initialisation routines (and closing it later runs its
/// termination routines): the caller vouches for that code.
#[cfg(unix)]
pub(crate) unsafe fn open(name: &std::path::Path) -> Result<Opened, libloading::Error> {
    use libloading::os::unix::{Library as Unix, RTLD_LOCAL, RTLD_NOW};
    // SAFETY: the caller vouches for the library's initialisation routines.
    let library = unsafe { Unix::open(Some(name), RTLD_NOW | RTLD_LOCAL) }?;
    let raw = library.into_raw();
    // SAFETY: `raw` was just returned by `into_raw` of an open library, and is taken back
    // exactly once.
    let library = unsafe { Unix::from_raw(raw) };
    // SAFETY: `raw` is the handle of the library just opened, which `library` keeps open.
    let head = unsafe { link_head(raw as usize) };
    Ok(Opened {
        library: libloading::Library::from(library),
        handle: raw as usize,
        head,
    })
}

/// Opens the library at `name` (the platform's default flags).
///
/// # Safety
///
/// Opening a library runs its initialisation routines (and closing it later runs its
/// termination routines): the caller vouches for that code.
#[cfg(windows)]
pub(crate) unsafe fn open(name: &std::path::Path) -> Result<Opened, libloading::Error> {
    // SAFETY: the caller vouches for the library's initialisation routines.
    let library = unsafe { libloading::os::windows::Library::new(name) }?;
    let raw = library.into_raw();
    // SAFETY: as on Unix: the module handle is taken back exactly once.
    let library = unsafe { libloading::os::windows::Library::from_raw(raw) };
    Ok(Opened {
        library: libloading::Library::from(library),
        handle: raw as usize,
        head: None,
    })
}

/// The public head of the object `dlopen` returns: glibc's `struct link_map` (link.h), whose
/// first fields musl's `struct dso` shares.
#[cfg(target_os = "linux")]
#[repr(C)]
struct LinkMap {
    l_addr: usize,
    l_name: *const std::ffi::c_char,
    /// The address of the object's dynamic section, inside its own mapping.
    l_ld: *const c_void,
}

/// What the head of the loader handle `handle` says.
///
/// # Safety
///
/// `handle` is what `dlopen` returned for a library that stays open during the call.
#[cfg(target_os = "linux")]
unsafe fn link_head(handle: usize) -> Option<LinkHead> {
    // SAFETY: the handle is the library's `link_map`, valid while it is open (the caller's
    // contract); only its public head is read.
    let map = unsafe { &*(handle as *const LinkMap) };
    // SAFETY: `l_name` is the loader's NUL-terminated name of the object (or NULL), copied
    // at once while the library is open.
    let name = (!map.l_name.is_null()).then(|| unsafe { CStr::from_ptr(map.l_name) }.to_owned());
    Some(LinkHead {
        base: map.l_addr,
        dynamic: (!map.l_ld.is_null()).then_some(map.l_ld as usize),
        name: name.unwrap_or_default(),
    })
}

/// Other Unix platforms: their handles are not read.
///
/// # Safety
///
/// None needed: nothing is read.
#[cfg(all(unix, not(target_os = "linux")))]
unsafe fn link_head(_: usize) -> Option<LinkHead> {
    None
}

/// The loader's name of the object `address` lies in, if the loader can tell (glibc's
/// `dladdr1`); `None` on other platforms.
///
/// # Safety
///
/// `address` lies in a library that stays loaded during the call (a symbol the loader
/// resolved in an open library, or in one it depends on), so the name read is the loader's
/// until it is copied.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub(crate) unsafe fn object_of(address: *const c_void) -> Option<CString> {
    /// glibc's `RTLD_DL_LINKMAP` (dlfcn.h), which the `libc` crate does not declare.
    const RTLD_DL_LINKMAP: c_int = 2;
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    let mut link_map: *mut c_void = std::ptr::null_mut();
    // SAFETY: `dladdr1` only reads the loader's tables; both out-pointers are writable, and
    // with RTLD_DL_LINKMAP the extra one receives a `struct link_map *`.
    let found = unsafe { libc::dladdr1(address, info.as_mut_ptr(), &mut link_map, RTLD_DL_LINKMAP) };
    if found == 0 || link_map.is_null() {
        return None;
    }
    // SAFETY: `dladdr1` succeeded, so it filled `info` (zeroed before: a pointer is either set
    // or NULL).
    let name = unsafe { info.assume_init() }.dli_fname;
    // SAFETY: a non-NULL `dli_fname` is the loader's NUL-terminated name of the object, valid
    // while it is loaded (the caller's contract); it is copied at once.
    let name = (!name.is_null()).then(|| unsafe { CStr::from_ptr(name) }.to_owned());
    Some(name.unwrap_or_default())
}

/// Without glibc's `dladdr1` the loader cannot say which object a symbol lies in.
///
/// # Safety
///
/// None needed: nothing is read.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) unsafe fn object_of(_: *const std::ffi::c_void) -> Option<std::ffi::CString> {
    None
}

/// This process's effective user.
#[cfg(unix)]
pub(crate) fn effective_uid() -> u32 {
    // SAFETY: `geteuid` has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

/// Whether this process runs with elevated rights given by its executable (set-user-ID,
/// set-group-ID, file capabilities): the platform loader's `AT_SECURE`.
#[cfg(target_os = "linux")]
pub(crate) fn secure_execution() -> bool {
    // SAFETY: `getauxval` only reads the auxiliary vector the kernel gave the process.
    unsafe { libc::getauxval(libc::AT_SECURE) != 0 }
}

/// `openat(dir, name, flags | O_CLOEXEC)`, relative to the current directory when `dir` is
/// `None`.
#[cfg(unix)]
pub(crate) fn openat(dir: Option<BorrowedFd<'_>>, name: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    let dir = dir.map_or(libc::AT_FDCWD, |dir| dir.as_raw_fd());
    // SAFETY: `name` is NUL-terminated and outlives the call; `dir` is an open descriptor
    // (borrowed for the call) or `AT_FDCWD`. Opening a directory or a file runs no code.
    let fd = unsafe { libc::openat(dir, name.as_ptr(), flags | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `openat` just returned this descriptor, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `fstat` of `fd`.
#[cfg(unix)]
pub(crate) fn fstat(fd: BorrowedFd<'_>) -> io::Result<libc::stat> {
    let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `fd` is open for the call and `stat` is writable memory of the right type.
    if unsafe { libc::fstat(fd.as_raw_fd(), stat.as_mut_ptr()) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fstat` succeeded, so it filled `stat`.
    Ok(unsafe { stat.assume_init() })
}

/// `fstatat` of `name` in `dir`, following a symlink in its last component only if `follow`.
#[cfg(unix)]
pub(crate) fn fstatat(dir: BorrowedFd<'_>, name: &CStr, follow: bool) -> io::Result<libc::stat> {
    let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
    let flags = if follow { 0 } else { libc::AT_SYMLINK_NOFOLLOW };
    // SAFETY: `dir` is open for the call, `name` is NUL-terminated, `stat` is writable.
    let done = unsafe { libc::fstatat(dir.as_raw_fd(), name.as_ptr(), stat.as_mut_ptr(), flags) };
    if done != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fstatat` succeeded, so it filled `stat`.
    Ok(unsafe { stat.assume_init() })
}

/// `readlinkat` of `name` in `dir` into `buffer`: how many bytes of the target it wrote (as
/// many as `buffer` holds if the target may have been cut).
#[cfg(unix)]
pub(crate) fn readlinkat(dir: BorrowedFd<'_>, name: &CStr, buffer: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `dir` is open for the call, `name` is NUL-terminated, and `buffer` has
    // `buffer.len()` writable bytes.
    let len = unsafe { libc::readlinkat(dir.as_raw_fd(), name.as_ptr(), buffer.as_mut_ptr().cast(), buffer.len()) };
    usize::try_from(len).map_err(|_| io::Error::last_os_error())
}

/// `fcntl(fd, F_SETSIG, signal)`: the signal the kernel sends this process when a lease of
/// this open file description is broken.
#[cfg(target_os = "linux")]
pub(crate) fn set_lease_signal(fd: BorrowedFd<'_>, signal: libc::c_int) -> io::Result<()> {
    /// `F_SETSIG` (`<asm-generic/fcntl.h>`, 10 on every architecture Rust builds for on
    /// Linux), which the `libc` crate does not declare for every target.
    const F_SETSIG: libc::c_int = 10;
    // SAFETY: `fd` is open for the call; F_SETSIG takes an int and only sets which signal
    // this open file description's lease breaks send, affecting no memory of this process.
    if unsafe { libc::fcntl(fd.as_raw_fd(), F_SETSIG, signal) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `fcntl(fd, F_SETLEASE, kind)`: places (`F_RDLCK`) or removes (`F_UNLCK`) this open file
/// description's lease on its file.
#[cfg(target_os = "linux")]
pub(crate) fn set_lease(fd: BorrowedFd<'_>, kind: libc::c_int) -> io::Result<()> {
    // SAFETY: `fd` is open for the call; F_SETLEASE takes an int and places or removes a
    // lease owned by this open file description (its close removes it too); no memory of
    // this process is touched.
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETLEASE, kind) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING)`: a new anonymous file in memory,
/// closed on exec, that can be sealed.
#[cfg(target_os = "linux")]
pub(crate) fn memfd_sealable(name: &CStr) -> io::Result<OwnedFd> {
    // SAFETY: `name` is NUL-terminated and outlives the call; the flags ask for a descriptor
    // closed on exec that can be sealed.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `memfd_create` just returned this descriptor, and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `fcntl(fd, F_ADD_SEALS, seals)`: adds `seals` to a memfd's.
#[cfg(target_os = "linux")]
pub(crate) fn add_seals(fd: BorrowedFd<'_>, seals: libc::c_int) -> io::Result<()> {
    // SAFETY: `fd` is open for the call; F_ADD_SEALS takes an int of seals and changes no
    // memory of this process (it fails while a writable shared mapping exists).
    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, seals) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The loader's name of the object already loaded that the loader would answer the needed
/// name `name` with now, if one does: `dlopen(name, RTLD_NOLOAD)` matches as the loader
/// matches a needed name (names and sonames of loaded objects first). It maps nothing, so it
/// runs no code, but it may open files of the system's library directories to compare them
/// with loaded objects.
#[cfg(target_os = "linux")]
pub(crate) fn loaded_as(name: &CStr) -> Option<CString> {
    // SAFETY: with RTLD_NOLOAD the loader maps nothing, so no initialisation routine runs;
    // `name` is NUL-terminated.
    let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
    if handle.is_null() {
        // SAFETY: clears the loader's message of the failed look-up, so that no later caller
        // reads it as its own; it has no preconditions.
        unsafe { libc::dlerror() };
        return None;
    }
    // SAFETY: the handle is the object's `link_map`, valid until the `dlclose` below.
    let head = unsafe { link_head(handle as usize) };
    // SAFETY: `handle` came from the `dlopen` above, which raised the object's count: this
    // drops it again, once; the object stays loaded for whoever loaded it.
    unsafe { libc::dlclose(handle) };
    Some(head.map(|head| head.name).unwrap_or_default())
}

/// Whether `wanted` answers `true` for an object of the loader's list, given its load
/// address (`dlpi_addr`) and its name (`None` if it has none): the walk (`dl_iterate_phdr`) stops at the first such
/// object. The loader holds its lock during the walk, so no object is unloaded meanwhile;
/// `wanted` runs under that lock and must not call into the loader, nor panic.
#[cfg(target_os = "linux")]
pub(crate) fn any_loaded_object(wanted: &mut dyn FnMut(usize, Option<&CStr>) -> bool) -> bool {
    /// What the walk looks for, and whether it found it.
    struct Walk<'a> {
        wanted: &'a mut dyn FnMut(usize, Option<&CStr>) -> bool,
        found: bool,
    }
    /// Stops the walk (returns 1) at an object `wanted` answers `true` for.
    ///
    /// # Safety
    ///
    /// `data` points to a `Walk` that outlives the walk, and `info` is the loader's.
    unsafe extern "C" fn visit(info: *mut libc::dl_phdr_info, _size: usize, data: *mut c_void) -> c_int {
        // SAFETY: `data` is the `Walk` passed below, alive and unaliased for the walk.
        let walk = unsafe { &mut *data.cast::<Walk<'_>>() };
        // SAFETY: the loader passes a valid `info` for the duration of the call.
        let info = unsafe { &*info };
        // SAFETY: a non-NULL `dlpi_name` is the object's NUL-terminated name, valid during the
        // call.
        let name = (!info.dlpi_name.is_null()).then(|| unsafe { CStr::from_ptr(info.dlpi_name) });
        walk.found = (walk.wanted)(info.dlpi_addr as usize, name);
        c_int::from(walk.found)
    }
    let mut walk = Walk { wanted, found: false };
    // SAFETY: `visit` only reads what the loader hands it and writes `walk`, which lives on
    // this frame for the whole walk; it never unwinds (`wanted` must not panic).
    unsafe { libc::dl_iterate_phdr(Some(visit), (&raw mut walk).cast()) };
    walk.found
}

/// The `struct procmap_query` of `<linux/fs.h>` (Linux 6.11).
#[cfg(target_os = "linux")]
#[repr(C)]
#[derive(Default)]
struct ProcmapQuery {
    size: u64,
    query_flags: u64,
    query_addr: u64,
    vma_start: u64,
    vma_end: u64,
    vma_flags: u64,
    vma_page_size: u64,
    vma_offset: u64,
    inode: u64,
    dev_major: u32,
    dev_minor: u32,
    vma_name_size: u32,
    build_id_size: u32,
    vma_name_addr: u64,
    build_id_addr: u64,
}

/// `PROCMAP_QUERY`: `_IOWR('f', 17, struct procmap_query)`.
#[cfg(target_os = "linux")]
const PROCMAP_QUERY: libc::c_ulong =
    (3 << 30) | ((size_of::<ProcmapQuery>() as libc::c_ulong) << 16) | (0x66 << 8) | 17;

/// This process's `/proc/self/maps`, open: asked for one mapping (the `PROCMAP_QUERY` ioctl)
/// or read as text. Only this file is ever given the ioctl, whose number other files may
/// read as another request.
#[cfg(target_os = "linux")]
#[derive(Debug)]
pub(crate) struct ProcMaps(std::fs::File);

#[cfg(target_os = "linux")]
impl ProcMaps {
    pub(crate) fn open() -> io::Result<ProcMaps> {
        std::fs::File::open("/proc/self/maps").map(ProcMaps)
    }

    /// The (dev, ino) of what is mapped at `address` ((0, 0) for an anonymous mapping), asked
    /// of the kernel for that one address instead of reading the whole table: `Some(None)` if
    /// nothing is mapped there, `None` if the kernel does not answer the ioctl (before 6.11).
    pub(crate) fn query(&self, address: usize) -> Option<Option<(u64, u64)>> {
        let mut query = ProcmapQuery {
            size: size_of::<ProcmapQuery>() as u64,
            query_addr: address as u64,
            ..ProcmapQuery::default()
        };
        // SAFETY: `self.0` is an open `/proc/self/maps`; `query` is a `struct procmap_query`
        // with its `size` set and no name or build-id buffer asked for (their sizes 0), which
        // the kernel reads and fills and does not keep. A kernel without the ioctl fails it
        // (ENOTTY) and writes nothing.
        let done = unsafe { libc::ioctl(self.0.as_raw_fd(), PROCMAP_QUERY as _, &raw mut query) };
        if done != 0 {
            return match io::Error::last_os_error().raw_os_error() {
                // No mapping contains the address.
                Some(libc::ENOENT) => Some(None),
                _ => None,
            };
        }
        // The mapping returned is the one that contains the address (no flag asks for the
        // next).
        Some(Some((libc::makedev(query.dev_major, query.dev_minor), query.inode)))
    }

    /// The file, to read its text.
    pub(crate) fn into_file(self) -> std::fs::File {
        self.0
    }
}

/// What the tests need of the platform beyond std: a FIFO, and a file's page mapped.
#[cfg(all(test, unix, not(loom)))]
pub(crate) mod testing {
    use std::ffi::CString;
    use std::os::fd::AsRawFd;
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    /// The seals of the memfd `file` (`F_GET_SEALS`).
    #[cfg(target_os = "linux")]
    pub(crate) fn seals(file: &std::fs::File) -> libc::c_int {
        // SAFETY: `file` is open; F_GET_SEALS reads its seals and writes no memory.
        let seals = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
        assert!(seals >= 0, "F_GET_SEALS: {}", std::io::Error::last_os_error());
        seals
    }

    /// Makes a FIFO at `path` (mode 0600).
    pub(crate) fn mkfifo(path: &Path) {
        let name = CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: `name` is NUL-terminated.
        let made = unsafe { libc::mkfifo(name.as_ptr(), 0o600) };
        assert_eq!(made, 0, "mkfifo {}", path.display());
    }

    /// The first page of a file, mapped private and read-only until dropped (never read).
    pub(crate) struct MappedPage(*mut libc::c_void);

    impl MappedPage {
        pub(crate) fn of(file: &std::fs::File) -> MappedPage {
            // SAFETY: a private read-only mapping of one page of an open file; it is only
            // looked up, never read, and unmapped by the drop.
            let address = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    4096,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE,
                    file.as_raw_fd(),
                    0,
                )
            };
            assert_ne!(address, libc::MAP_FAILED);
            MappedPage(address)
        }

        pub(crate) fn address(&self) -> usize {
            self.0 as usize
        }
    }

    impl Drop for MappedPage {
        fn drop(&mut self) {
            // SAFETY: `self.0` is the mapping made by `of`, of 4096 bytes, unused since.
            assert_eq!(unsafe { libc::munmap(self.0, 4096) }, 0);
        }
    }
}
