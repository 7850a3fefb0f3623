//! The parse cache: a library file loaded again unchanged is not parsed again (its ELF check,
//! manifest and pin prediction come from the process's cache, keyed by the file's status),
//! a file changed in any way the status shows is parsed again, and the trust check runs at
//! every load whatever is cached.
//!
//! The tests count the `trace` lines the host logs for each ELF check: "parsed `…`: the ELF
//! check" when it read the file, "… taken from the parse cache" when it did not.

use std::fs::{self, Permissions};
use std::os::unix::fs::{FileExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

use dylease::{Error, OpenCause, PluginHost};
use log::Level;

use crate::logger;
use crate::support::{TestDir, assert_unloaded, loader_has};

/// Longer than the cache's racy window (`inspect::parse_cache::RACY_WINDOW`, 2.1 s): a file last
/// changed this long ago is cached on its next load.
const SETTLE: Duration = Duration::from_millis(2300);

/// How many times the host read the file at `path` for its ELF check so far.
fn parsed(path: &Path) -> usize {
    logger::records(Level::Trace, &format!("parsed `{}`: the ELF check", path.display())).len()
}

/// How many times the host took the ELF check of `path` from the cache so far.
fn cached(path: &Path) -> usize {
    logger::records(
        Level::Trace,
        &format!("the ELF check of `{}` taken from the parse cache", path.display()),
    )
    .len()
}

fn host(lib: &Path) -> PluginHost {
    // SAFETY: the library is this suite's own fixture, whose initialisation code is sound.
    unsafe { PluginHost::builder().file(lib).build() }.unwrap()
}

/// One cold cycle: load the file, and unload it with the last lease.
fn cycle(host: &PluginHost, lib: &Path) {
    let lease = host.acquire().unwrap();
    assert_eq!(lease.plugins().len(), 1);
    drop(lease);
    assert_unloaded(lib);
}

/// `lib` rewritten so that it is built for another machine (its header's `e_machine`), its
/// size and modification time kept: only its ctime (and content) says it changed.
fn retarget(lib: &Path) {
    let before = fs::metadata(lib).unwrap();
    let file = fs::File::options().write(true).open(lib).unwrap();
    // EM_MIPS, far from any machine these tests run on.
    file.write_all_at(&8u16.to_le_bytes(), 18).unwrap();
    file.set_modified(before.modified().unwrap()).unwrap();
    drop(file);
    let after = fs::metadata(lib).unwrap();
    assert_eq!(after.len(), before.len());
    assert_eq!(after.modified().unwrap(), before.modified().unwrap());
}

#[track_caller]
fn assert_refused_by_the_elf_check(error: &Error, lib: &Path) {
    assert!(
        matches!(error, Error::Open { path, cause: OpenCause::Headers, .. } if path == lib),
        "not the ELF check's refusal: {error:?}"
    );
}

/// An unchanged file loaded in two cold cycles (acquire, drop, acquire, drop) is parsed once:
/// the second load takes the ELF check from the cache. Caught: nothing stored in the cache
/// (every `settled` false), or a key that differs between two opens of the same file (the
/// descriptor's number, say).
#[test]
fn an_unchanged_file_loaded_in_two_cold_cycles_is_parsed_once() {
    logger::install();
    let dir = TestDir::new("parse_cache_unchanged");
    let lib = dir.add("by_hand", "libcached.so");
    std::thread::sleep(SETTLE);
    let host = host(&lib);
    cycle(&host, &lib);
    cycle(&host, &lib);
    assert_eq!((parsed(&lib), cached(&lib)), (1, 1), "(parsed, cached)");
}

/// The racy rule: a file changed less than one timestamp tick (the cache's racy window)
/// before it is opened is parsed at each load, since a same-size rewrite within that tick
/// could keep its whole status. Caught: `settled` always true.
#[test]
fn a_file_changed_just_before_its_loads_is_parsed_at_each() {
    logger::install();
    let dir = TestDir::new("parse_cache_racy");
    let lib = dir.add("by_hand", "libracy.so");
    let host = host(&lib);
    // Each load follows a change of the file's status (a `chmod` to the same mode sets its
    // ctime to now), so each is within the window however slow the machine is.
    let touch = || {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    touch();
    cycle(&host, &lib);
    touch();
    cycle(&host, &lib);
    assert_eq!((parsed(&lib), cached(&lib)), (2, 0), "(parsed, cached)");
}

/// A cached file rewritten in place with the same size and the same modification time but
/// other bytes is parsed again (its ctime changed), and refused by the ELF check, as a fresh
/// load would refuse it. Caught: a key of size and mtime alone (the cached verdict then lets
/// the loader open a file built for another machine).
#[test]
fn a_same_size_rewrite_keeping_the_mtime_is_parsed_again() {
    logger::install();
    let dir = TestDir::new("parse_cache_rewrite");
    let lib = dir.add("by_hand", "librewritten.so");
    std::thread::sleep(SETTLE);
    let host = host(&lib);
    cycle(&host, &lib);
    retarget(&lib);
    let error = host.acquire().unwrap_err();
    assert_refused_by_the_elf_check(&error, &lib);
    assert_eq!((parsed(&lib), cached(&lib)), (2, 0), "(parsed, cached)");
}

/// A cached file replaced by rename (a new inode) with a file of the same size and
/// modification time is parsed again, and refused by the ELF check. Caught: a key without
/// the inode and ctime (size and mtime alone).
#[test]
fn a_file_replaced_by_rename_is_parsed_again() {
    logger::install();
    let dir = TestDir::new("parse_cache_renamed");
    let lib = dir.add("by_hand", "librenamed.so");
    std::thread::sleep(SETTLE);
    let host = host(&lib);
    cycle(&host, &lib);
    let next = dir.path().join("librenamed.so.new");
    fs::copy(&lib, &next).unwrap();
    fs::set_permissions(&next, Permissions::from_mode(0o755)).unwrap();
    let modified = fs::metadata(&lib).unwrap().modified().unwrap();
    fs::File::options()
        .write(true)
        .open(&next)
        .unwrap()
        .set_modified(modified)
        .unwrap();
    retarget(&next);
    fs::rename(&next, &lib).unwrap();
    let error = host.acquire().unwrap_err();
    assert_refused_by_the_elf_check(&error, &lib);
    assert_eq!((parsed(&lib), cached(&lib)), (2, 0), "(parsed, cached)");
}

/// A cached file whose directory becomes writable by others is refused by the trust check:
/// the cache answers what the file holds, never whether another user may have chosen it
/// (the directory's mode changes nothing of the file's status). Caught: a trust check that
/// passes a file whose status the cache knows.
#[test]
fn a_cached_file_whose_directory_becomes_world_writable_is_still_refused() {
    logger::install();
    let dir = TestDir::new("parse_cache_trust");
    let plugins = dir.sub("plugins");
    let lib = plugins.join("libtrusted.so");
    fs::copy(dir.add("by_hand", "libsource.so"), &lib).unwrap();
    fs::set_permissions(&lib, Permissions::from_mode(0o755)).unwrap();
    std::thread::sleep(SETTLE);
    let host = host(&lib);
    cycle(&host, &lib);
    cycle(&host, &lib);
    assert_eq!((parsed(&lib), cached(&lib)), (1, 1), "the file is cached");
    fs::set_permissions(&plugins, Permissions::from_mode(0o777)).unwrap();
    let refused = host.acquire().map(drop);
    fs::set_permissions(&plugins, Permissions::from_mode(0o755)).unwrap();
    let error = refused.unwrap_err();
    assert!(
        matches!(&error, Error::Untrusted { path, reason, .. } if path == &lib && reason.contains("writable by")),
        "{error:?}"
    );
    assert_unloaded(&lib);
    // And so is the file itself made world-writable (which changes its ctime, too).
    fs::set_permissions(&lib, Permissions::from_mode(0o777)).unwrap();
    let error = host.acquire().unwrap_err();
    assert!(matches!(&error, Error::Untrusted { .. }), "{error:?}");
}

/// How many times an on-demand acquire judged `path` from the cache, by the status discovery
/// read, without opening it.
fn judged_unopened(path: &Path) -> usize {
    logger::records(
        Level::Trace,
        &format!(
            "judged `{}` by its status from the parse cache, not opened",
            path.display()
        ),
    )
    .len()
}

/// An on-demand acquire judges an unchanged file whose parse the cache holds without opening
/// it (no ELF check of any descriptor at the acquire: neither parsed nor taken from the cache),
/// still judges its trust at every acquire, and still holds the first use to the file judged:
/// one replaced after the acquire is refused, none of its code run. Caught: the judgement by
/// status never used (the acquire opens the file and takes its ELF check from the cache),
/// the trust check skipped for a file judged by status, and a `Deferred` made by status that
/// does not keep the identity judged (the replacement is mapped).
#[test]
fn an_unchanged_on_demand_plugin_is_judged_without_being_opened_and_its_first_use_holds_it_to_that_file() {
    use crate::on_demand::IntOp;

    logger::install();
    let dir = TestDir::new("parse_cache_on_demand");
    let plugins = dir.sub("plugins");
    let lib = plugins.join("libr.so");
    fs::copy(dir.add("demand_r", "libsource.so"), &lib).unwrap();
    fs::set_permissions(&lib, Permissions::from_mode(0o755)).unwrap();
    let new = plugins.join("new.so.tmp");
    fs::copy(dir.add("demand_r_two", "libnew.so"), &new).unwrap();
    std::thread::sleep(SETTLE);
    // SAFETY: the directory holds this suite's own fixtures, whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().dir(&plugins) }
        .on_demand()
        .build()
        .unwrap();
    // The first acquire opens the file, parses it and caches what it decided.
    drop(host.acquire().unwrap());
    assert_eq!((parsed(&lib), cached(&lib), judged_unopened(&lib)), (1, 0, 0));

    // The second judges it by its status: no descriptor of it read at all.
    let lease = host.acquire().unwrap();
    assert_eq!((parsed(&lib), cached(&lib), judged_unopened(&lib)), (1, 0, 1));
    assert!(!lease.plugins()[0].is_mapped());
    // Its first use opens it, and takes the ELF check of that descriptor from the cache.
    // SAFETY: the lease is alive; the pass takes any `i32`.
    assert_eq!(unsafe { lease.get::<IntOp>("r_pass_a").unwrap()(1) }, 2);
    assert_eq!((parsed(&lib), cached(&lib)), (1, 1));
    drop(lease);
    assert_unloaded(&lib);

    // Trust is judged at every acquire, whatever is cached.
    fs::set_permissions(&plugins, Permissions::from_mode(0o777)).unwrap();
    let refused = host.acquire().map(drop);
    fs::set_permissions(&plugins, Permissions::from_mode(0o755)).unwrap();
    let error = refused.unwrap_err();
    assert!(
        matches!(&error, Error::Untrusted { path, reason, .. } if path == &lib && reason.contains("writable by")),
        "{error:?}"
    );

    // A set judged by status maps only the file it judged.
    let lease = host.acquire().unwrap();
    assert_eq!(judged_unopened(&lib), 2);
    let events = Path::new(&format!("{}.log", lib.display())).to_owned();
    let ran = fs::read_to_string(&events).unwrap();
    fs::rename(&new, &lib).unwrap();
    let error = lease.get::<IntOp>("r_pass_a").unwrap_err();
    crate::on_demand::assert_replaced_since_acquire(&error, &lib);
    assert!(!crate::support::mapped(&lib), "the replacement was mapped");
    assert_eq!(fs::read_to_string(&events).unwrap(), ran, "the replacement's code ran");
}

/// A file mapped shared and writable (`MAP_SHARED`), as its owner may map it: writes through
/// the mapping change the file's bytes without a `write` system call.
struct SharedMapping {
    at: *mut u8,
    len: usize,
    _file: fs::File,
}

impl SharedMapping {
    fn new(path: &Path) -> SharedMapping {
        let file = fs::File::options().read(true).write(true).open(path).unwrap();
        let len = file.metadata().unwrap().len() as usize;
        // SAFETY: a new mapping of an open descriptor, at an address the kernel chooses; the
        // result is checked.
        let at = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                std::os::fd::AsRawFd::as_raw_fd(&file),
                0,
            )
        };
        assert_ne!(at, libc::MAP_FAILED, "mmap: {}", std::io::Error::last_os_error());
        SharedMapping {
            at: at.cast(),
            len,
            _file: file,
        }
    }

    /// Writes `bytes` at `offset` through the mapping.
    fn write(&self, offset: usize, bytes: &[u8]) {
        assert!(offset + bytes.len() <= self.len);
        for (n, &byte) in bytes.iter().enumerate() {
            // SAFETY: inside the mapping (asserted), which is writable and lives as long as
            // `self`.
            unsafe { self.at.add(offset + n).write_volatile(byte) };
        }
    }
}

impl Drop for SharedMapping {
    fn drop(&mut self) {
        // SAFETY: the mapping this value made, not used after this.
        unsafe { libc::munmap(self.at.cast(), self.len) };
    }
}

/// One cold cycle of a file this test maps itself (so only the loader's view says whether
/// the host unloaded it).
fn mapped_cycle(host: &PluginHost, lib: &Path) {
    let lease = host.acquire().unwrap();
    assert_eq!(lease.plugins().len(), 1);
    drop(lease);
    assert!(!loader_has(lib), "the loader still has {}", lib.display());
}

/// Where the ABI version of the plugin record of the manifest the header writes is in a
/// 64-bit little-endian library's bytes: `n_type` 1, the owner, format version 1, then ABI
/// version 2 (this test's own reading of the format, not the crate's).
fn manifest_abi_offset(bytes: &[u8]) -> usize {
    let record = [
        &1u32.to_le_bytes()[..],
        b"dylease\0",
        &1u32.to_le_bytes(),
        &2u32.to_le_bytes(),
    ]
    .concat();
    let at = bytes
        .windows(record.len())
        .position(|w| w == record)
        .expect("a plugin record");
    at + 16
}

/// Where the dynamic entry tagged `tag` is in a 64-bit little-endian library's bytes (the
/// last PT_DYNAMIC's entries, read by this test).
fn dynamic_entry(bytes: &[u8], tag: u64) -> usize {
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
    let (phoff, phnum) = (word(32) as usize, u16::from_le_bytes([bytes[56], bytes[57]]) as usize);
    let dynamic = (0..phnum)
        .map(|i| phoff + 56 * i)
        .filter(|&entry| u32::from_le_bytes(bytes[entry..entry + 4].try_into().unwrap()) == 2)
        .map(|entry| word(entry + 8) as usize)
        .next_back()
        .expect("a PT_DYNAMIC");
    (0..)
        .map(|i| dynamic + 16 * i)
        .take_while(|&at| word(at) != 0)
        .find(|&at| word(at) == tag)
        .unwrap_or_else(|| panic!("no dynamic entry tagged {tag}"))
}

/// Everything of `path`'s status the parse cache's key holds (device, inode, size, times in
/// nanoseconds), read now.
fn status_of(path: &Path) -> [i64; 8] {
    use std::os::unix::fs::MetadataExt;
    let m = fs::metadata(path).unwrap();
    [
        m.dev() as i64,
        m.ino() as i64,
        m.size() as i64,
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
        m.nlink() as i64,
    ]
}

/// Whether `dir` is on a tmpfs.
fn on_tmpfs(dir: &Path) -> bool {
    let name = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(dir.as_os_str())).unwrap();
    let mut stat = std::mem::MaybeUninit::<libc::statfs>::uninit();
    // SAFETY: `name` is NUL-terminated, `stat` writable.
    if unsafe { libc::statfs(name.as_ptr(), stat.as_mut_ptr()) } != 0 {
        return false;
    }
    // SAFETY: `statfs` succeeded and filled it.
    unsafe { stat.assume_init() }.f_type == libc::TMPFS_MAGIC
}

/// A tmpfs directory this process may create files in: `/dev/shm`, else another tmpfs mount
/// point from `/proc/self/mounts`. None: the test fails, naming the root-only test that mounts
/// a tmpfs of its own.
fn a_tmpfs() -> std::path::PathBuf {
    let writable = |dir: &Path| {
        let name = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(dir.as_os_str())).unwrap();
        // SAFETY: `name` is NUL-terminated.
        unsafe { libc::access(name.as_ptr(), libc::W_OK | libc::X_OK) == 0 }
    };
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let candidates = std::iter::once("/dev/shm".to_owned()).chain(
        mounts
            .lines()
            .filter_map(|line| line.split_whitespace().nth(1).map(str::to_owned)),
    );
    candidates
        .map(std::path::PathBuf::from)
        .find(|dir| on_tmpfs(dir) && writable(dir))
        .expect(
            "no tmpfs this process can write to (/dev/shm is none): run the root-only \
             `parse_cache::writes_through_a_shared_mapping_on_a_tmpfs_of_its_own_are_seen` \
             (cargo test -- --ignored)",
        )
}

/// A directory of this test's own, mode 0755, under `base`, removed on drop.
struct Under(std::path::PathBuf);

impl Under {
    fn new(base: &Path, test: &str) -> Under {
        let dir = base.join(format!("dylease-{test}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        fs::set_permissions(&dir, Permissions::from_mode(0o755)).unwrap();
        Under(dir)
    }

    fn sub(&self, name: &str, mode: u32) -> std::path::PathBuf {
        let dir = self.0.join(name);
        fs::create_dir_all(&dir).unwrap();
        fs::set_permissions(&dir, Permissions::from_mode(mode)).unwrap();
        dir
    }
}

impl Drop for Under {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A cached plugin whose manifest's ABI version is changed from 2 to 99 through a shared
/// mapping of its file on `base` (a tmpfs: no write there changes the file's times) is
/// refused at its next load, naming version 99, before any of its code runs; and at the one
/// after it (the file is not cached at that status again). An on-demand host, which judges an
/// unchanged status from the cache without opening the file, refuses its first use the same
/// way.
fn an_abi_version_written_through_a_shared_mapping_is_judged(base: &Path) {
    logger::install();
    assert!(on_tmpfs(base), "{} is not a tmpfs", base.display());
    let dir = Under::new(base, "parse-cache-mapped-abi");
    let plugins = dir.sub("plugins", 0o755);
    let lib = plugins.join("libmapped.so");
    fs::copy(crate::support::fixture("by_hand_marker_manifest"), &lib).unwrap();
    fs::set_permissions(&lib, Permissions::from_mode(0o755)).unwrap();
    let demand = plugins.join("libdemand.so");
    fs::copy(crate::support::fixture("demand_mapped"), &demand).unwrap();
    fs::set_permissions(&demand, Permissions::from_mode(0o755)).unwrap();
    let marker = crate::support::beside(&lib, ".ran");
    let (abi, demand_abi) = (
        manifest_abi_offset(&fs::read(&lib).unwrap()),
        manifest_abi_offset(&fs::read(&demand).unwrap()),
    );
    let (mapping, demand_mapping) = (SharedMapping::new(&lib), SharedMapping::new(&demand));
    // The owner's first write through the mapping (of the same value): on a disk file system
    // the one that could change the file's times, before the racy window passes.
    mapping.write(abi, &2u32.to_le_bytes());
    demand_mapping.write(demand_abi, &2u32.to_le_bytes());
    std::thread::sleep(SETTLE);

    let host = host(&lib);
    mapped_cycle(&host, &lib);
    mapped_cycle(&host, &lib);
    assert_eq!((parsed(&lib), cached(&lib)), (1, 1), "the file is cached");
    // SAFETY: the directory holds this suite's own fixtures, whose initialisation code is sound.
    let on_demand = unsafe { PluginHost::builder().file(&demand) }
        .on_demand()
        .build()
        .unwrap();
    drop(on_demand.acquire().unwrap());
    drop(on_demand.acquire().unwrap());
    fs::remove_file(&marker).unwrap();

    let before = (status_of(&lib), status_of(&demand));
    mapping.write(abi, &99u32.to_le_bytes());
    demand_mapping.write(demand_abi, &99u32.to_le_bytes());
    assert_eq!(
        (status_of(&lib), status_of(&demand)),
        before,
        "the writes through the mapping changed the files' status: the test proves nothing"
    );
    for load in ["the next load", "the load after it"] {
        let error = host.acquire().map(drop).unwrap_err();
        assert!(
            matches!(&error, Error::AbiMismatch { path, found: 99, declared: true, .. } if path == &lib),
            "{load}: {error:?}"
        );
        assert!(error.to_string().contains("99"), "{error}");
        assert!(!marker.exists(), "{load}: the plugin's constructor ran");
        assert!(!loader_has(&lib), "{load}: the loader has it");
    }
    assert_eq!(parsed(&lib), 3, "the rewritten file was not parsed at each load");

    let lease = on_demand.acquire().unwrap();
    let events = crate::support::beside(&demand, ".log");
    let ran = fs::read_to_string(&events).unwrap_or_default();
    // SAFETY: the pass is an `int (*)(int)`; it is looked up, not called.
    let error = unsafe { lease.pass::<unsafe extern "C" fn(i32) -> i32>("mapped_pass") }.unwrap_err();
    let Error::MapFailed { cause, .. } = &error else {
        panic!("{error:?}")
    };
    assert!(
        matches!(&**cause, Error::AbiMismatch { path, found: 99, .. } if path == &demand),
        "{cause:?}"
    );
    assert_eq!(fs::read_to_string(&events).unwrap_or_default(), ran, "its code ran");
    drop(lease);
    drop((mapping, demand_mapping));
    assert_unloaded(&lib);
    assert_unloaded(&demand);
}

/// A cached plugin whose dynamic section gains a DT_NEEDED through a shared mapping of its
/// file on `base` (its DT_SONAME entry, naming a library by path in a directory other users
/// may write, retagged) has that library judged at its next load: refused (the trust check
/// refuses a needed library named by path), and the planted library never runs.
fn a_needed_library_written_through_a_shared_mapping_is_judged(base: &Path) {
    logger::install();
    assert!(on_tmpfs(base), "{} is not a tmpfs", base.display());
    let dir = Under::new(base, "parse-cache-mapped-needed");
    let open = dir.sub("open", 0o777);
    let planted = crate::support::compile_settled(
        "dep.c",
        &open.join("libplanted.so"),
        &["-DDEP_VALUE=9", "-DMARK_CONSTRUCTOR", "-Wl,--no-as-needed", "-ldl"],
    );
    let planted_marker = crate::support::beside(&planted, ".ran");
    let plugins = dir.sub("plugins", 0o755);
    let lib = crate::support::compile_settled(
        "by_hand.c",
        &plugins.join("libsoname.so"),
        &[&format!("-Wl,-soname,{}", planted.display())],
    );
    let tag = dynamic_entry(&fs::read(&lib).unwrap(), 14);
    let mapping = SharedMapping::new(&lib);
    mapping.write(tag, &14u64.to_le_bytes());
    std::thread::sleep(SETTLE);

    let host = host(&lib);
    mapped_cycle(&host, &lib);
    mapped_cycle(&host, &lib);
    assert_eq!((parsed(&lib), cached(&lib)), (1, 1), "the file is cached");
    let before = status_of(&lib);
    // DT_SONAME (14) becomes DT_NEEDED (1): the plugin now needs the planted library, by path.
    mapping.write(tag, &1u64.to_le_bytes());
    assert_eq!(
        status_of(&lib),
        before,
        "the write through the mapping changed the file's status: the test proves nothing"
    );
    let error = host.acquire().map(drop).unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(&error, Error::Untrusted { path, .. } if path == &lib)
            && message.contains(&format!("the needed library `{}`", planted.display())),
        "{error:?}"
    );
    assert!(!planted_marker.exists(), "the planted library ran");
    assert!(!crate::support::mapped(&planted), "the planted library is mapped");
    drop(mapping);
    assert_unloaded(&lib);
}

/// The interface `test.int_op/2`: what a rewritten manifest may declare a pass of
/// `demand.c` as, which registers it under `test.int_op/1`.
struct IntOp2;
// SAFETY: never called; a lookup under it must fail.
unsafe impl dylease::Interface for IntOp2 {
    const ID: &'static str = "test.int_op/2";
    type Fn = unsafe extern "C" fn(i32) -> i32;
}

/// An on-demand plugin judged at its acquire by a manifest declaring its pass
/// `mapped_pass_a` of interface `test.int_op/2`, whose manifest is written back through a
/// shared mapping on `base` to the interface it registers (`test.int_op/1`) before its first
/// use: the set lists what the acquire judged, and the mapping must declare the same, or the
/// callable registered under one interface would be handed out under the other. The first
/// use is refused as a file changed since the acquire.
fn a_manifest_rewritten_after_an_on_demand_acquire_is_refused_at_first_use(base: &Path) {
    logger::install();
    assert!(on_tmpfs(base), "{} is not a tmpfs", base.display());
    let dir = Under::new(base, "parse-cache-mapped-demand");
    let plugins = dir.sub("plugins", 0o755);
    let lib = plugins.join("libretyped.so");
    fs::copy(crate::support::fixture("demand_retyped"), &lib).unwrap();
    fs::set_permissions(&lib, Permissions::from_mode(0o755)).unwrap();
    // The pass record of `retyped_pass_a`: its name (14 bytes, padded to 16), then its
    // interface, `test.int_op/1` (14 bytes).
    let record = b"retyped_pass_a\0\0\x0e\0\0\0test.int_op/";
    let bytes = fs::read(&lib).unwrap();
    let version = bytes
        .windows(record.len())
        .position(|w| w == record)
        .expect("the pass record")
        + record.len();
    assert_eq!(bytes[version], b'1');
    let mapping = SharedMapping::new(&lib);
    mapping.write(version, b"2");
    std::thread::sleep(SETTLE);
    // SAFETY: the directory holds this suite's own fixtures, whose initialisation code is sound.
    let host = unsafe { PluginHost::builder().file(&lib) }.on_demand().build().unwrap();
    let lease = host.acquire().unwrap();
    assert_eq!(
        lease
            .passes()
            .iter()
            .find(|p| p.name() == "retyped_pass_a")
            .and_then(|p| p.interface()),
        Some("test.int_op/2")
    );
    let before = status_of(&lib);
    mapping.write(version, b"1");
    assert_eq!(
        status_of(&lib),
        before,
        "the write changed the file's status: the test proves nothing"
    );
    // SAFETY: the pass is an `int (*)(int)`; it is looked up, not called.
    let error = unsafe { lease.pass::<unsafe extern "C" fn(i32) -> i32>("retyped_pass_a") }.map(drop);
    let typed = lease.get::<IntOp2>("retyped_pass_a").map(drop);
    let error = error.unwrap_err();
    crate::on_demand::assert_replaced_since_acquire(&error, &lib);
    assert!(
        typed.is_err(),
        "a pass registered as `test.int_op/1` was handed out as `test.int_op/2`"
    );
    drop(lease);
    drop(mapping);
    assert_unloaded(&lib);
}

/// A manifest rewritten through a shared mapping between an on-demand acquire and the first
/// use. Caught: the mapping's manifest not compared with the one the set was built from (the
/// pass is handed out under the interface the acquire judged, not the one it registered).
#[test]
fn a_manifest_written_through_a_shared_mapping_after_an_on_demand_acquire_is_refused_at_first_use() {
    a_manifest_rewritten_after_an_on_demand_acquire_is_refused_at_first_use(&a_tmpfs());
}

/// A manifest's ABI version written through a shared mapping (`MAP_SHARED`), which on a
/// tmpfs changes no time of the file (on ext4, only the first write to a clean page does): the
/// parse cache must not take the file's unchanged status for unchanged bytes. Caught: the
/// cached manifest used without reading again what it was read from (ABI version 99 is
/// accepted).
#[test]
fn an_abi_version_written_through_a_shared_mapping_is_refused_at_the_next_load() {
    an_abi_version_written_through_a_shared_mapping_is_judged(&a_tmpfs());
}

/// A DT_NEEDED written through a shared mapping, as above. Caught: the cached linkage used
/// without reading again what it was read from (the new DT_NEEDED goes unjudged, and the
/// planted library runs).
#[test]
fn a_needed_library_written_through_a_shared_mapping_is_judged_at_the_next_load() {
    a_needed_library_written_through_a_shared_mapping_is_judged(&a_tmpfs());
}

/// All three, on a tmpfs this test mounts in a mount namespace of its thread: for a machine whose
/// `/dev/shm` is not a tmpfs (and none other is writable).
#[test]
#[ignore = "needs root"]
fn writes_through_a_shared_mapping_on_a_tmpfs_of_its_own_are_seen() {
    crate::bounded::bounded("the tmpfs of its own", Duration::from_secs(60), || {
        // SAFETY: `unshare` has no memory preconditions; CLONE_NEWNS gives this thread (and
        // only it: it also unshares the file system attributes) a mount namespace of its own.
        let unshared = unsafe { libc::unshare(libc::CLONE_NEWNS) };
        assert_eq!(
            unshared,
            0,
            "unshare: {} (run as root)",
            std::io::Error::last_os_error()
        );
        let c = |s: &str| std::ffi::CString::new(s).unwrap();
        // SAFETY: NUL-terminated strings that outlive the call, or NULL.
        let private = unsafe {
            libc::mount(
                c("none").as_ptr(),
                c("/").as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            )
        };
        assert_eq!(private, 0, "mount: {}", std::io::Error::last_os_error());
        let scratch = crate::support::TestDir::new("own_tmpfs");
        let base = scratch.path().to_owned();
        let target = std::ffi::CString::new(std::os::unix::ffi::OsStrExt::as_bytes(base.as_os_str())).unwrap();
        // SAFETY: as above.
        let mounted = unsafe {
            libc::mount(
                c("tmpfs").as_ptr(),
                target.as_ptr(),
                c("tmpfs").as_ptr(),
                0,
                c("mode=0755").as_ptr().cast(),
            )
        };
        assert_eq!(mounted, 0, "mount tmpfs: {}", std::io::Error::last_os_error());
        an_abi_version_written_through_a_shared_mapping_is_judged(&base);
        a_needed_library_written_through_a_shared_mapping_is_judged(&base);
        a_manifest_rewritten_after_an_on_demand_acquire_is_refused_at_first_use(&base);
        // SAFETY: a NUL-terminated path that outlives the call.
        unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    });
}
