//! Linux, the platform loader: the loader is given the checked descriptor (`dlopen` of a name
//! under `/proc/self/fd`), told where it mapped a library (the head of its `link_map`), asked
//! whether that mapping is of the checked file (the process's maps) and whether a closed
//! library stayed (`dl_iterate_phdr`). Safe code: the calls themselves are `sys::raw`'s.
//!
//! The loader is told which file to map by a name under `/proc/self/fd` of the checked
//! descriptor; why, and the three traps that shape [`Names`], are in `docs::internals` ("The
//! identity guarantee").

use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, IntoRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::PathBuf;

use crate::sys::id::FileId;
use crate::sys::linux::identity::Identity;
use crate::sys::raw::{self, LinkHead, ProcMaps};

crate::sync::lazy_static! {
    /// The name each kept (pinned) mapping was given, by its file's (dev, ino): the
    /// descriptor behind it stays open for the life of the process.
    static KEPT: crate::sync::Mutex<HashMap<(u64, u64), CString>> = crate::sync::Mutex::new(HashMap::new());
}

/// The descriptors behind the name one open gave the loader.
#[derive(Debug, Default)]
pub(crate) struct Names {
    fds: Vec<OwnedFd>,
    /// The name given to the loader.
    given: CString,
    /// The checked file's (dev, ino).
    file: (u64, u64),
    /// Where the loader mapped the library (`l_addr`), and its name in the loader's list
    /// (`l_name`), once open: `None` for the name given, another only if the open found a
    /// mapping that existed.
    base: Option<usize>,
    /// Where the mapped object's dynamic section is (`l_ld`): an address inside a mapping of
    /// the file the loader mapped, whatever its segments' virtual addresses.
    dynamic: Option<usize>,
    loaded_as: Option<CString>,
    /// Whether the loader was given the directory's name for it (`$ORIGIN`).
    through_dir: bool,
    /// Whether the open was resolved to a mapping that already existed under another name:
    /// the loader added this name to it, for as long as it lives.
    shared: bool,
}

impl Names {
    /// The names of a library given the name `given` for the checked file `file`, kept open
    /// by `fds`, before the open.
    fn new(given: CString, file: (u64, u64), fds: Vec<OwnedFd>) -> Names {
        Names {
            fds,
            given,
            file,
            base: None,
            dynamic: None,
            loaded_as: None,
            through_dir: false,
            shared: false,
        }
    }

    /// The loader's name of the mapping, once open (`l_name`).
    fn loaded_as(&self) -> &CStr {
        self.loaded_as.as_deref().unwrap_or(&self.given)
    }
}

#[cfg(all(test, target_env = "gnu", not(loom)))]
impl Names {
    /// The name given to the loader.
    pub(crate) fn given(&self) -> &std::ffi::CStr {
        &self.given
    }
}

/// The name to give the loader for the checked `file`, found at `resolved` (symlinks
/// resolved, unless `follow`); `origin`: whether its run paths or needed names use `$ORIGIN`;
/// `strict`: whether the trust check is on. A file whose mapping the platform kept is given
/// the name it was kept under. An `$ORIGIN` library is given its directory's name for it, once
/// the name is seen to still be the checked file (`NotFound` otherwise: the caller checks the
/// new one; with `follow`, the name may be a symlink to it), and refused under `strict`
/// (`PermissionDenied`) where others can create names.
pub(crate) fn name(
    file: &std::fs::File,
    checked: &Identity,
    resolved: &std::path::Path,
    origin: bool,
    follow: bool,
    strict: bool,
) -> io::Result<(PathBuf, Names)> {
    let identity = (checked.dev, checked.ino);
    if let Some(kept) = KEPT.lock().get(&identity) {
        // Pinned: the mapping is still there under this name (`docs::internals`).
        let name = PathBuf::from(std::ffi::OsStr::from_bytes(kept.as_bytes()));
        return Ok((name, Names::new(kept.clone(), identity, Vec::new())));
    }
    let fd = OwnedFd::from(file.try_clone()?);
    let exact = format!("/proc/self/fd/{}", fd.as_raw_fd());
    let mut names = Names::new(
        CString::new(exact.clone()).expect("a number holds no NUL"),
        identity,
        vec![fd],
    );
    let (Some(dir_path), Some(file_name), true) = (resolved.parent(), resolved.file_name(), origin) else {
        return Ok((PathBuf::from(exact), names));
    };
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_PATH | libc::O_DIRECTORY)
        .open(dir_path)?;
    // A sticky directory writable by its group or others lets them create names (another
    // user's file could take this name); without the sticky bit, the trust check refused it.
    let mode = dir.metadata()?.mode();
    if strict && mode & 0o1000 != 0 && mode & 0o022 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "its run path uses `$ORIGIN`, so the loader must find it by name in its directory `{}`, \
                 where other users can create names (sticky and writable by {}, mode {mode:04o}); move the \
                 plugin to a directory only this user or root can change",
                dir_path.display(),
                if mode & 0o002 != 0 { "others" } else { "its group" },
            ),
        ));
    }
    if stat_at(&dir, file_name, follow)? != identity {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("`{}` was replaced since it was checked", resolved.display()),
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

/// (dev, ino) of `name` in `dir`, following a symlink only if `follow`.
fn stat_at(dir: &std::fs::File, name: &std::ffi::OsStr, follow: bool) -> io::Result<(u64, u64)> {
    let name = CString::new(name.as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "the name holds a NUL byte"))?;
    let stat = raw::fstatat(dir.as_fd(), &name, follow)?;
    Ok((stat.st_dev, stat.st_ino))
}

/// Records where the loader mapped the library (`head`, read from the handle it just
/// returned), and whether it gave an existing mapping.
pub(crate) fn opened(names: &mut Names, head: Option<LinkHead>) {
    let Some(head) = head else { return };
    names.base = Some(head.base);
    names.dynamic = head.dynamic;
    names.shared = head.name != names.given;
    names.loaded_as = names.shared.then_some(head.name);
}

/// Whether `address` lies in the opened mapping `names` describes, whose loadable segments
/// are `loads` (relative to its load address, `l_addr`); `None` where that is unknown.
pub(crate) fn lies_in(names: &Names, loads: &[std::ops::Range<u64>], address: usize) -> Option<bool> {
    let base = names.base.filter(|_| !loads.is_empty())?;
    // `l_addr` is what the loader added to every address of the file (wrapping, as it does).
    let vaddr = address.wrapping_sub(base) as u64;
    Some(loads.iter().any(|load| load.contains(&vaddr)))
}

/// Whether the mapping is of the checked file, where the loader was given another name for
/// it (read from `/proc/self/maps` at its load address); `Ok(None)` where it was given the
/// checked descriptor itself.
///
/// The mapping looked at is the one holding the object's dynamic section (`l_ld`), which
/// lies in the file the loader mapped, wherever that file's segments put it (`l_addr` is only
/// the load bias: no mapping starts there when the first segment's address is not 0). Fails
/// closed: no mapping there, or an anonymous one, is `Some(false)`, as another file is; and
/// `/proc/self/maps` that cannot be opened or read is an error of its own (out of
/// descriptors, most often), so that the refusal names what happened, not a replacement.
pub(crate) fn maps_checked_file(names: &Names) -> io::Result<Option<bool>> {
    if !names.through_dir {
        return Ok(None);
    }
    let Some(address) = names.dynamic else {
        return Ok(Some(false));
    };
    let maps = ProcMaps::open()?;
    let mapped = match maps.query(address) {
        Some(found) => found,
        None => mapping_in_text(maps.into_file(), address)?,
    };
    Ok(Some(mapped == Some(names.file)))
}

/// As `ProcMaps::query`, from the text of `/proc/self/maps` (`start-end perms offset
/// major:minor inode path`, one line per mapping): for kernels without the ioctl. `Ok(None)`
/// if nothing is mapped at `address`. Read as bytes: a path, the last field, is any bytes a
/// file name may hold, not necessarily UTF-8.
fn mapping_in_text(mut maps: std::fs::File, address: usize) -> io::Result<Option<(u64, u64)>> {
    let mut text = Vec::new();
    io::Read::read_to_end(&mut maps, &mut text)?;
    Ok(text
        .split(|&byte| byte == b'\n')
        .find_map(|line| mapping_at(line, address)))
}

/// The (dev, ino) of the mapping one line of `/proc/self/maps` describes, if it contains
/// `address`. The fields before the path are ASCII.
fn mapping_at(line: &[u8], address: usize) -> Option<(u64, u64)> {
    let mut fields = line
        .split(|&byte| byte == b' ')
        .filter(|field| !field.is_empty())
        .map(std::str::from_utf8);
    let (start, end) = fields.next()?.ok()?.split_once('-')?;
    let parse = |bound| usize::from_str_radix(bound, 16).ok();
    if !(parse(start)?..parse(end)?).contains(&address) {
        return None;
    }
    let mut fields = fields.skip(2);
    let (major, minor) = fields.next()?.ok()?.split_once(':')?;
    let dev = libc::makedev(
        u32::from_str_radix(major, 16).ok()?,
        u32::from_str_radix(minor, 16).ok()?,
    );
    let ino = fields.next()?.ok()?.parse::<u64>().ok()?;
    Some((dev, ino))
}

/// Whether the mapping is still there after its last `dlclose`: an object of the loader's
/// list at the same address under the same name (kept open, that name cannot be another
/// object's). Unlike `RTLD_NOLOAD`, the walk gives no mapping a name.
pub(crate) fn still_mapped(names: &Names) -> Option<bool> {
    let (base, name) = (names.base?, names.loaded_as());
    Some(raw::any_loaded_object(&mut |address, loaded| {
        loaded == Some(name) && address == base
    }))
}

/// Closes the descriptors, unless the loader may still match their names to a mapping: one
/// still there, or one the open was resolved to under another name. A kept mapping's name is
/// remembered for the next open of its file.
pub(crate) fn release(names: Names, kept: Option<bool>) {
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
pub(crate) fn descriptor_hint(error: &io::Error) -> &'static str {
    match error.raw_os_error() {
        Some(libc::EMFILE) => {
            " (EMFILE: this process has as many files open as `ulimit -n` allows; dylease keeps one \
             descriptor open per loaded library, so raise the limit)"
        }
        Some(libc::ENFILE) => " (ENFILE: the system's table of open files is full)",
        _ => "",
    }
}

/// Whether the loader answers a needed name with an object already loaded whose `DT_SONAME`
/// is that name, before it searches any directory (glibc's `_dl_map_object`): what lets
/// dylease map a plugin's dependencies itself. musl matches by path.
pub(crate) const MATCHES_SONAME: bool = cfg!(target_env = "gnu");

/// The file of the object the loader would answer the needed name `name` with now, if an
/// object already loaded answers it: `Some(Ok)` with its (dev, ino), `Some(Err)` with the
/// loader's name of an object whose file cannot be looked at, `None` if none does.
///
/// `dlopen(name, RTLD_NOLOAD)` matches as the loader matches a needed name (names and
/// sonames of loaded objects first); it maps nothing, so it runs no code, but it may open
/// files of the system's library directories to compare them with loaded objects.
pub(crate) fn answering(name: &std::ffi::OsStr) -> Option<Result<FileId, CString>> {
    let name = CString::new(name.as_bytes()).ok()?;
    let loaded_as = raw::loaded_as(&name)?;
    let file = std::fs::metadata(std::ffi::OsStr::from_bytes(loaded_as.as_bytes())).ok();
    Some(file.map_or(Err(loaded_as), |m| {
        Ok(FileId {
            dev: m.dev(),
            ino: m.ino(),
        })
    }))
}

/// `EMFILE`, the error of a process out of file descriptors.
pub(crate) const EMFILE: i32 = libc::EMFILE;

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sys::file_id;

    /// The text of `/proc/self/maps` is read as bytes: while a file whose name is not UTF-8 is
    /// mapped, a mapping is still found in it (the fallback for kernels without
    /// `PROCMAP_QUERY`, which would otherwise refuse every `$ORIGIN` plugin then): read as a
    /// `String`, any mapped path that is not UTF-8 would make it unreadable.
    #[test]
    fn a_mapping_is_found_in_the_text_while_a_file_with_a_name_that_is_not_utf_8_is_mapped() {
        use std::os::unix::fs::MetadataExt;
        let dir = crate::test_dir::TestDir::new("maps-not-utf-8");
        let path = dir.join(std::ffi::OsStr::from_bytes(b"mapped-\xff\xfe"));
        std::fs::write(&path, [7u8; 4096]).unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let metadata = file.metadata().unwrap();
        let page = crate::sys::raw::testing::MappedPage::of(&file);
        let found = mapping_in_text(std::fs::File::open("/proc/self/maps").unwrap(), page.address()).unwrap();
        drop(page);
        assert_eq!(found, Some((metadata.dev(), metadata.ino())));
    }

    /// The `PROCMAP_QUERY` ioctl answers as the text of `/proc/self/maps` does, for the file
    /// mappings of this process's binary and libc (at their start and inside them: that
    /// file's (dev, ino)) and for an address nothing maps; on a kernel from 6.11 on, it is
    /// answered (a wrong request number or layout fails the ioctl or reads other fields).
    #[test]
    fn the_kernel_query_of_one_mapping_agrees_with_the_text_of_the_maps() {
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
        let mut numbers = release
            .split(|c: char| !c.is_ascii_digit())
            .map(|n| n.parse::<u32>().unwrap_or(0));
        let version = (numbers.next().unwrap_or(0), numbers.next().unwrap_or(0));
        let maps = ProcMaps::open().unwrap();
        let text = String::from_utf8_lossy(&std::fs::read("/proc/self/maps").unwrap()).into_owned();
        let mut compared = 0;
        let exe = std::env::current_exe().unwrap();
        for line in text.lines() {
            let mut fields = line.split_ascii_whitespace();
            let range = fields.next().unwrap();
            let inode: u64 = fields.nth(3).unwrap().parse().unwrap();
            // The mappings of this test binary and of libc: no other test unmaps them meanwhile.
            let path = fields.next().unwrap_or("");
            if inode == 0 || !(std::path::Path::new(path) == exe || path.contains("/libc.so")) {
                continue;
            }
            let (start, end) = range.split_once('-').unwrap();
            let (start, end) = (
                usize::from_str_radix(start, 16).unwrap(),
                usize::from_str_radix(end, 16).unwrap(),
            );
            let Some(queried) = maps.query(start) else {
                assert!(version < (6, 11), "kernel {release:?} did not answer PROCMAP_QUERY");
                return;
            };
            let from_text = mapping_in_text(std::fs::File::open("/proc/self/maps").unwrap(), start).unwrap();
            assert_eq!(queried, from_text, "{line}");
            assert_eq!(queried.map(|(_, ino)| ino), Some(inode), "{line}");
            // An address inside the mapping finds it too.
            let inside = start + (end - start) / 2;
            assert_eq!(maps.query(inside), Some(queried), "{line}");
            let text_inside = mapping_in_text(std::fs::File::open("/proc/self/maps").unwrap(), inside).unwrap();
            assert_eq!(text_inside, queried, "{line}");
            compared += 1;
        }
        assert!(compared > 3, "this process maps few files: {text}");
        // Nothing is ever mapped at address 0 (`vm.mmap_min_addr`).
        assert_eq!(maps.query(0), Some(None));
        assert_eq!(
            mapping_in_text(std::fs::File::open("/proc/self/maps").unwrap(), 0).unwrap(),
            None
        );
    }

    /// A failure to get a descriptor says which limit was reached: the process's (EMFILE,
    /// with the fix) or the system's (ENFILE); another failure adds nothing. A test cannot
    /// fill the system's table; `sys::library`'s tests run out of the process's.
    #[test]
    fn a_descriptor_hint_names_the_limit_that_was_reached() {
        let hint = |errno| descriptor_hint(&io::Error::from_raw_os_error(errno));
        assert!(hint(libc::EMFILE).contains("ulimit -n"), "{}", hint(libc::EMFILE));
        assert!(hint(libc::ENFILE).contains("system's table of open files is full"));
        assert_eq!(hint(libc::ENOENT), "");
    }

    #[test]
    fn a_library_named_through_a_sticky_directory_its_group_or_others_can_write_is_refused_under_strict() {
        // Anyone allowed to create names there could take the library's name once it is free,
        // whether the group or others may write the directory.
        use std::os::unix::fs::PermissionsExt;
        let dir = crate::test_dir::TestDir::new("sticky-name");
        let path = dir.join("libx.so");
        std::fs::write(&path, b"not loaded: only named").unwrap();
        let file = std::fs::File::open(&path).unwrap();
        let checked = file_id(&file.metadata().unwrap()).unwrap();
        for (mode, refused) in [(0o1777, true), (0o1770, true), (0o1707, true), (0o1755, false)] {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode)).unwrap();
            let named = name(&file, &checked, &path, true, false, true);
            match named {
                Err(e) => assert!(refused && e.kind() == io::ErrorKind::PermissionDenied, "{mode:o}: {e}"),
                Ok(_) => assert!(!refused, "mode {mode:o} passed"),
            }
            // Not under Permissive.
            assert!(name(&file, &checked, &path, true, false, false).is_ok(), "{mode:o}");
        }
    }

    #[test]
    fn a_symbol_is_the_libraries_own_only_inside_one_of_its_loadable_segments() {
        // Mapped at 0x7000_0000: code at +0x1000..+0x3000, data at +0x5000..+0x6000.
        let names = Names {
            base: Some(0x7000_0000),
            ..Names::default()
        };
        let loads = [0x1000..0x3000, 0x5000..0x6000];
        let at = |offset: usize| lies_in(&names, &loads, 0x7000_0000 + offset);
        assert_eq!(at(0x1000), Some(true));
        assert_eq!(at(0x5fff), Some(true));
        // The gap between the segments, past the last, and below the mapping belong to
        // other objects.
        assert_eq!(at(0x4000), Some(false));
        assert_eq!(at(0x6000), Some(false));
        assert_eq!(lies_in(&names, &loads, 0x6fff_f000), Some(false));
        // Not opened, or no segments read: the platform cannot tell.
        assert_eq!(lies_in(&Names::default(), &loads, 0x1000), None);
        assert_eq!(lies_in(&names, &[], 0x7000_1000), None);
    }
}
