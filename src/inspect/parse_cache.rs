//! What parsing a library file decided, kept for the process and keyed by the file's status,
//! so that a file loaded again unchanged is not parsed again: the ELF structural check's
//! verdict, the linkage (the `DT_NEEDED` names and run paths the trust check's dependency walk
//! resolves), the manifest (or its refusal) and the pin prediction. Not a failure to read the
//! file (an I/O error is no verdict on its bytes), and never trust (below).
//!
//! # The key, and the fingerprint
//!
//! An entry is made for, and found by, the status of the descriptor that will be mapped (the
//! `fstat`/`statx` of that descriptor, `Opened::metadata`): device and inode, size,
//! modification and status-change times in nanoseconds, and the birth time where the file
//! system has one. An on-demand load also looks an entry up ([`find`], which never adds one)
//! by the status discovery read of a directory entry, to judge an unchanged file without
//! opening it; the first use opens the file and holds it to the identity judged, and the
//! mapping looks its entry up by the descriptor's status again. A strict load's trust check
//! looks the linkage up the same way, to resolve the file's dependencies without opening it;
//! the load opens the file and keeps that resolution only for a descriptor of that status
//! whose entry it found. A file replaced by rename is another inode; a file rewritten in place
//! with `write` changes its ctime (which no system call sets back: restoring the mtime with
//! `utimensat` changes the ctime too); a deleted file whose inode is reused has another birth
//! time, or ctime.
//!
//! A write through a shared mapping (`MAP_SHARED`) changes the bytes without the status
//! showing it: Linux updates the times only when a clean page is first written (ext4: a page
//! written again before writeback keeps them), and on tmpfs never. So every descriptor looked
//! up also reads again what the entry's ELF verdict, manifest and linkage were read from (its
//! ELF header and program headers, its note segments, its dynamic section and the linkage's
//! strings: a few KB, `dylease_elf::Elf::fingerprint`) and hashes it; the entry is used only
//! if that fingerprint is the one it was made with. A descriptor of the same status with
//! another fingerprint is parsed again, and its file is not cached again at that status (its
//! entry is kept as "unstable": found by neither [`lookup`] nor [`find`]): a file written
//! through a mapping is parsed at every load until its status changes. The hash is std's
//! SipHash, keyed once per process at random: not a cryptographic digest, which it need not
//! be, since only a user who may write the file (the trust check passes a file only if no
//! user but root and this process's own may) can change its bytes, and that user chooses the
//! code it runs anyway; the fingerprint keeps the host's own verdicts about the file true, and
//! a random key keeps even that user from crafting two files of one fingerprint in advance.
//!
//! **The racy rule.** Timestamps come from a coarse clock (a kernel tick, or a whole second
//! or two on ext3, HFS+, FAT and some network servers), so a same-size rewrite within one
//! tick of the last change can leave every field of the key as it was. As git's index does
//! ("racy clean"), an entry is stored only if the wall clock, read before any byte of the file
//! is read, is at least [`RACY_WINDOW`] past the file's ctime: any later write then falls in
//! a later tick and changes the ctime. A file changed less than that before it is opened is
//! parsed at each load until it is old enough (only a cost, never a wrong answer).
//!
//! Where neither the key nor the fingerprint sees a change, a cached verdict may describe
//! older bytes: the tables only the structural check and the pin prediction read (symbols,
//! hash tables, relocations, version records, unwind tables), on a file system that does not
//! update the ctime on writes (some FUSE and network file systems), NFS with attribute caching
//! (the client may serve an older status for `actimeo` seconds while another client rewrites
//! the file), through a shared mapping, on a file system whose clock is more than
//! [`RACY_WINDOW`] coarse, or under a wall clock stepped backwards. The structural check exists
//! to stop a corrupt file from crashing the process inside the loader, so there a corrupt
//! rewrite of those tables may reach the loader. The ABI gate, the manifest comparison and the
//! dependency walk always judge what the file holds when it is opened, a write racing the
//! load itself aside (the loader maps the file after any check could read it). Install
//! plugins by rename, as `dylease install` does: a new inode is never missed.
//!
//! # What it does not answer
//!
//! Trust. The owner and mode of the file, of every directory on the way to it, of the run-path
//! directories and of every dependency are judged at every load (`trust`), whatever is
//! cached: the cache answers "what does this exact file (by identity and status) contain",
//! never "may another user have chosen this code".
//!
//! # The bound
//!
//! At most [`MAX_ENTRIES`] files, one entry per (device, inode): an entry of a file whose
//! status changed is replaced by the new one, and when the cache is full the entry used
//! least recently (a file no longer loaded) is dropped. Only on ELF platforms, where the
//! checks run at all; elsewhere nothing is stored.

use std::collections::HashMap;
use std::fs::Metadata;
use std::hash::{BuildHasher, Hasher, RandomState};
use std::time::{Duration, SystemTime};

/// Whether a verdict is about the file's bytes, not a failure to read them: a refusal whose
/// reason holds `dylease_elf`'s "cannot read it: " (its documented wording of an I/O error)
/// is not stored.
pub(crate) fn about_the_bytes<T>(verdict: &Result<T, String>) -> bool {
    !matches!(verdict, Err(reason) if reason.contains("cannot read it: "))
}

use dylease_elf::{Elf, Linkage, ReadAt};

use crate::inspect::manifest::Manifest;
use crate::inspect::pinning::Pinning;
use crate::sync::{Arc, AtomicBool, Mutex, Ordering};

/// How many files the cache holds at most.
pub(crate) const MAX_ENTRIES: usize = 4096;

/// How long after a file's last status change its parse may be stored: longer than the
/// coarsest timestamp granularity of the file systems libraries live on (a kernel tick of 1
/// to 10 ms on Linux's native file systems with nanosecond timestamps; 1 s on ext3 and HFS+,
/// 2 s on FAT).
pub(crate) const RACY_WINDOW: Duration = Duration::from_millis(2100);

/// What parsing one file decided, shared by every `Opened` of that file (by its status). Each
/// part is filled when first asked for; the values are cloned out (the linkage and the
/// manifest are shared `Arc`s).
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    /// `Elf::check`: passed, or the refusal's reason.
    pub(crate) check: Slot<Result<(), String>>,
    /// `Elf::linkage` (also made by `Elf::check`): what the library makes the loader look up.
    pub(crate) linkage: Slot<Result<Arc<Linkage>, String>>,
    /// `Elf::manifest`, converted.
    pub(crate) manifest: Slot<Result<Option<Arc<Manifest>>, String>>,
    /// `Pinning::predict`.
    pub(crate) pinning: Slot<Pinning>,
}

impl Parsed {
    /// Whether every part was decided: a descriptor of the file at this status has nothing
    /// left to read for them.
    pub(crate) fn is_complete(&self) -> bool {
        self.check.is_known() && self.linkage.is_known() && self.manifest.is_known() && self.pinning.is_known()
    }
}

/// One decision, made once.
#[derive(Debug)]
pub(crate) struct Slot<T>(Mutex<Option<T>>);

impl<T> Default for Slot<T> {
    fn default() -> Self {
        Slot(Mutex::new(None))
    }
}

impl<T: Clone> Slot<T> {
    /// The decision, if it was made.
    pub(crate) fn known(&self) -> Option<T> {
        self.0.lock().clone()
    }

    /// Whether the decision was made.
    pub(crate) fn is_known(&self) -> bool {
        self.0.lock().is_some()
    }

    /// Stores `value` as the decision, unless one was made already (which stays).
    pub(crate) fn offer(&self, value: T) {
        self.0.lock().get_or_insert(value);
    }

    /// The decision, made by `decide` if it was not made yet; and whether it was made now.
    /// (Two threads asking at once may both decide; the first answer stored stays.)
    pub(crate) fn get_or(&self, decide: impl FnOnce() -> T) -> (T, bool) {
        self.get_or_keep(decide, |_| true)
    }

    /// As [`get_or`](Slot::get_or), but a decision for which `keep` is false is returned
    /// without being stored (the next call decides again).
    pub(crate) fn get_or_keep(&self, decide: impl FnOnce() -> T, keep: impl FnOnce(&T) -> bool) -> (T, bool) {
        if let Some(value) = &*self.0.lock() {
            return (value.clone(), false);
        }
        let value = decide();
        if !keep(&value) {
            return (value, true);
        }
        let mut slot = self.0.lock();
        (slot.get_or_insert(value).clone(), true)
    }
}

/// What identifies a file's content to the cache: see the module documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    birth: Option<SystemTime>,
}

impl Key {
    /// The key of the file `metadata` describes (read from the descriptor to be mapped).
    #[cfg(unix)]
    pub(crate) fn of(metadata: &Metadata) -> Key {
        use std::os::unix::fs::MetadataExt;
        Key {
            dev: metadata.dev(),
            ino: metadata.ino(),
            size: metadata.size(),
            mtime: (metadata.mtime(), metadata.mtime_nsec()),
            ctime: (metadata.ctime(), metadata.ctime_nsec()),
            birth: metadata.created().ok(),
        }
    }

    /// The (device, inode) of the file.
    #[cfg_attr(not(all(unix, not(target_vendor = "apple"))), allow(dead_code))]
    pub(crate) fn id(&self) -> crate::sys::FileId {
        crate::sys::FileId {
            dev: self.dev,
            ino: self.ino,
        }
    }

    /// The file's last status change, as a time.
    fn changed(&self) -> Option<SystemTime> {
        let (secs, nanos) = self.ctime;
        let nanos = u32::try_from(nanos).ok()?;
        let since_epoch = Duration::new(secs.unsigned_abs(), nanos);
        if secs >= 0 {
            SystemTime::UNIX_EPOCH.checked_add(since_epoch)
        } else {
            SystemTime::UNIX_EPOCH
                .checked_sub(Duration::from_secs(secs.unsigned_abs()))?
                .checked_add(Duration::new(0, nanos))
        }
    }
}

/// Whether an entry for a file last changed at `changed` (its ctime), made at `made` (the
/// wall clock before the file is parsed), can be trusted later: `made` is at least `window`
/// past `changed`, so that a later write could not keep the ctime. A ctime in the future, or
/// one that cannot be read, is never trusted.
pub(crate) fn settled(changed: Option<SystemTime>, made: SystemTime, window: Duration) -> bool {
    changed
        .and_then(|changed| made.duration_since(changed).ok())
        .is_some_and(|age| age >= window)
}

crate::sync::lazy_static! {
    /// Whether the cache is used (`set_enabled`).
    static ENABLED: AtomicBool = AtomicBool::new(true);
}

/// Turns the process's parse cache on (the default) or off: off, every load parses every file
/// again, and neither reads nor adds entries (those stored stay, for when it is turned on
/// again: they still describe the files by their status). For benchmarks (a load that parses
/// everything, beside one that parses nothing); hidden, not part of the stable API.
pub fn set_enabled(enabled: bool) {
    ENABLED.store(enabled, Ordering::Relaxed);
}

crate::sync::lazy_static! {
    /// The process's entries.
    static CACHE: Mutex<Cache> = Mutex::new(Cache::default());
}

#[derive(Debug, Default)]
struct Cache {
    /// By (device, inode).
    entries: HashMap<(u64, u64), Entry>,
    /// Lookups so far.
    clock: u64,
}

/// One file's entry.
#[derive(Debug)]
struct Entry {
    /// The status the entry was made for.
    key: Key,
    /// The fingerprint of the bytes its parse reads ([`fingerprint`]); `None` once a
    /// descriptor of the file at this very status had another: the file's bytes change
    /// without its status showing it, and it is not cached at this status again.
    fingerprint: Option<u64>,
    parsed: Arc<Parsed>,
    /// When it was last used (a count of lookups).
    used: u64,
}

/// What a look-up found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Found {
    /// The entry for the status, made of bytes of the same fingerprint.
    Hit,
    /// None for the status (or one of a file not cached at this status).
    Miss,
    /// An entry for the status, but made of bytes of another fingerprint.
    Changed,
}

impl Cache {
    /// A new time of use, later than every one before.
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    /// The stored entry for `key`, if there is one.
    fn find(&mut self, key: &Key) -> Option<Arc<Parsed>> {
        let now = self.tick();
        let entry = self.entries.get_mut(&(key.dev, key.ino))?;
        if entry.key != *key || entry.fingerprint.is_none() {
            return None;
        }
        entry.used = now;
        Some(entry.parsed.clone())
    }

    /// The entry for `key` if its bytes have `fingerprint`; otherwise a new one, stored if
    /// `settled` (and the file was not seen changing at this status).
    fn entry(&mut self, key: Key, fingerprint: u64, settled: bool) -> (Arc<Parsed>, Found) {
        let now = self.tick();
        let id = (key.dev, key.ino);
        if let Some(entry) = self.entries.get_mut(&id) {
            if entry.key == key {
                entry.used = now;
                return match entry.fingerprint {
                    Some(made) if made == fingerprint => (entry.parsed.clone(), Found::Hit),
                    Some(_) => {
                        // Written without its status showing it: never trusted at this
                        // status again, by a look-up or by `find`.
                        entry.fingerprint = None;
                        (Arc::new(Parsed::default()), Found::Changed)
                    }
                    None => (Arc::new(Parsed::default()), Found::Miss),
                };
            }
            // The file changed since: its entry can never be found again.
            self.entries.remove(&id);
        }
        let parsed = Arc::new(Parsed::default());
        if settled {
            if self.entries.len() >= MAX_ENTRIES {
                let oldest = self
                    .entries
                    .iter()
                    .min_by_key(|(_, entry)| entry.used)
                    .map(|(id, _)| *id);
                if let Some(oldest) = oldest {
                    self.entries.remove(&oldest);
                }
            }
            self.entries.insert(
                id,
                Entry {
                    key,
                    fingerprint: Some(fingerprint),
                    parsed: parsed.clone(),
                    used: now,
                },
            );
        }
        (parsed, Found::Miss)
    }
}

crate::sync::lazy_static! {
    /// The key of the fingerprints' hash, drawn once per process.
    static KEYS: RandomState = RandomState::new();
}

/// The fingerprint of what the checks of `elf` read (`Elf::fingerprint`, hashed with this
/// process's key); `None` if there is none (the file cannot be read, or is larger in those
/// parts than the readers walk).
pub(crate) fn fingerprint<S: ReadAt>(elf: &Elf<S>) -> Option<u64> {
    let mut state = KEYS.build_hasher();
    elf.fingerprint(&mut state).ok()?;
    Some(state.finish())
}

/// What parsing the file `metadata` describes decided so far, shared with every other
/// descriptor of it opened at the same status whose bytes have the same fingerprint; and
/// whether it came from the cache. `fingerprint` reads the file (`fingerprint` of the
/// descriptor's reader): call this right after reading `metadata` from the descriptor, before
/// reading any of the file.
pub(crate) fn lookup(metadata: &Metadata, fingerprint: impl FnOnce() -> Option<u64>) -> (Arc<Parsed>, bool) {
    #[cfg(all(unix, not(target_vendor = "apple")))]
    if ENABLED.load(Ordering::Relaxed) {
        return lookup_at(metadata, SystemTime::now(), fingerprint);
    }
    let _ = (metadata, fingerprint);
    (Arc::new(Parsed::default()), false)
}

/// [`lookup`], at the wall-clock time `now`, read before any byte of the file.
#[cfg(all(unix, not(target_vendor = "apple")))]
fn lookup_at(metadata: &Metadata, now: SystemTime, fingerprint: impl FnOnce() -> Option<u64>) -> (Arc<Parsed>, bool) {
    let key = Key::of(metadata);
    let settled = settled(key.changed(), now, RACY_WINDOW);
    let Some(fingerprint) = fingerprint() else {
        return (Arc::new(Parsed::default()), false);
    };
    let (parsed, found) = CACHE.lock().entry(key, fingerprint, settled);
    if found == Found::Changed {
        log::debug!(
            "{}the file of device {} inode {} changed without its status showing it (a write through a \
             shared mapping?): parsed again, and not cached at this status",
            crate::log_scope::prefix(),
            key.dev,
            key.ino
        );
    }
    (parsed, found == Found::Hit)
}

/// The key of the file `metadata` describes, where the cache is kept (ELF platforms).
pub(crate) fn key(metadata: &Metadata) -> Option<Key> {
    #[cfg(all(unix, not(target_vendor = "apple")))]
    return Some(Key::of(metadata));
    #[cfg(not(all(unix, not(target_vendor = "apple"))))]
    {
        let _ = metadata;
        None
    }
}

/// What parsing the file whose status is `key` decided, if the cache holds an entry for
/// exactly that status (made by an earlier [`lookup`]); nothing is added. For a caller that
/// read the status without opening the file (discovery's: an `fstatat` of the entry, or a
/// `stat` of a symlink's target), and that opens the file and holds it to the same identity
/// before it maps it (where [`lookup`] compares the fingerprint of the descriptor's bytes).
pub(crate) fn find(key: &Key) -> Option<Arc<Parsed>> {
    if !ENABLED.load(Ordering::Relaxed) {
        return None;
    }
    CACHE.lock().find(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(ino: u64, ctime: i64) -> Key {
        Key {
            dev: 1,
            ino,
            size: 100,
            mtime: (ctime, 0),
            ctime: (ctime, 0),
            birth: None,
        }
    }

    /// The racy rule, on an injected clock: an entry made within one window of the file's
    /// last change (or before it, by a clock behind the file system's) is not trusted; one
    /// made a window or more after is (a same-tick rewrite must not keep a stale entry).
    #[test]
    fn an_entry_made_within_one_window_of_the_change_is_not_trusted() {
        let changed = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let window = Duration::from_millis(10);
        assert!(!settled(Some(changed), changed, window), "made in the same tick");
        assert!(!settled(Some(changed), changed + Duration::from_millis(9), window));
        assert!(
            !settled(Some(changed), changed - Duration::from_secs(1), window),
            "a ctime in the future"
        );
        assert!(!settled(None, changed, window), "an unreadable ctime");
        assert!(settled(Some(changed), changed + window, window));
        assert!(settled(Some(changed), changed + Duration::from_secs(60), window));
        assert_eq!(key(1, 1_000_000).changed(), Some(changed));
    }

    /// An unsettled entry is not stored (the next lookup parses again); a settled one is
    /// found again for the same status, and not for another ctime or inode; a changed file's
    /// old entry is dropped.
    #[test]
    fn only_settled_entries_are_found_again_and_only_for_the_same_status() {
        let mut cache = Cache::default();
        let (first, found) = cache.entry(key(7, 10), 1, false);
        assert_eq!(found, Found::Miss);
        let (again, found) = cache.entry(key(7, 10), 1, true);
        assert_eq!(found, Found::Miss, "an unsettled entry was stored");
        assert!(!Arc::ptr_eq(&first, &again));
        let (same, found) = cache.entry(key(7, 10), 1, true);
        assert!(found == Found::Hit && Arc::ptr_eq(&same, &again));
        let (changed, found) = cache.entry(key(7, 11), 1, true);
        assert!(
            found == Found::Miss && !Arc::ptr_eq(&changed, &again),
            "a rewritten file (new ctime) was found"
        );
        assert_eq!(cache.entries.len(), 1, "the changed file's old entry stayed");
        let (other, found) = cache.entry(key(8, 11), 1, true);
        assert!(
            found == Found::Miss && !Arc::ptr_eq(&other, &changed),
            "another inode was found"
        );
        // `find` answers only for the stored status, and adds nothing.
        assert!(
            cache
                .find(&key(7, 11))
                .is_some_and(|found| Arc::ptr_eq(&found, &changed))
        );
        assert!(cache.find(&key(7, 12)).is_none(), "another status was found");
        assert!(cache.find(&key(9, 11)).is_none());
        assert_eq!(cache.entries.len(), 2, "find added an entry");
    }

    /// An entry is used only for bytes of the fingerprint it was made with: a descriptor of
    /// the same status with another fingerprint (a write through a shared mapping) gets a
    /// fresh parse, and the file is not cached at that status again, not even for the first
    /// fingerprint (the bytes may be written back) nor through `find`; a new status stores
    /// it again (a load that resolved the linkage by status from the first entry must not
    /// take a second one for it).
    #[test]
    fn an_entry_is_used_only_for_bytes_of_its_fingerprint() {
        let mut cache = Cache::default();
        let (made, _) = cache.entry(key(7, 10), 1, true);
        assert_eq!(cache.entry(key(7, 10), 1, true).1, Found::Hit);
        let (other, found) = cache.entry(key(7, 10), 2, true);
        assert!(
            found == Found::Changed && !Arc::ptr_eq(&other, &made),
            "the stale parse was used"
        );
        for fingerprint in [2, 1] {
            let (parsed, found) = cache.entry(key(7, 10), fingerprint, true);
            assert!(
                found == Found::Miss && !Arc::ptr_eq(&parsed, &made) && !Arc::ptr_eq(&parsed, &other),
                "fingerprint {fingerprint}: a file seen changing at this status was cached"
            );
        }
        assert!(cache.find(&key(7, 10)).is_none(), "found by status");
        let (changed, _) = cache.entry(key(7, 11), 3, true);
        let (again, found) = cache.entry(key(7, 11), 3, true);
        assert!(
            found == Found::Hit && Arc::ptr_eq(&changed, &again),
            "a new status not cached"
        );
    }

    /// The racy rule at the cache's own window, on an injected clock: a file loaded two
    /// seconds after its last change (FAT's timestamps are two seconds coarse) is parsed
    /// again at its next load at that time, and one loaded a window after its change is
    /// cached (a rewrite in the same coarse tick must not keep a stale entry).
    #[test]
    #[cfg(all(unix, not(target_vendor = "apple"), not(loom)))]
    fn a_file_loaded_within_the_racy_window_of_its_change_is_parsed_again() {
        let dir = crate::test_dir::TestDir::new("racy-window");
        let path = dir.join("lib.so");
        std::fs::write(&path, b"bytes").unwrap();
        let metadata = std::fs::metadata(&path).unwrap();
        let changed = Key::of(&metadata).changed().unwrap();
        let within = changed + Duration::from_secs(2);
        let (first, _) = lookup_at(&metadata, within, || Some(1));
        let (again, hit) = lookup_at(&metadata, within, || Some(1));
        assert!(
            !hit && !Arc::ptr_eq(&first, &again),
            "a file loaded within the racy window of its change was cached"
        );
        let past = changed + RACY_WINDOW;
        let (stored, _) = lookup_at(&metadata, past, || Some(1));
        let (found, hit) = lookup_at(&metadata, past, || Some(1));
        assert!(hit && Arc::ptr_eq(&stored, &found), "a settled file was not cached");
    }

    /// The cache holds at most `MAX_ENTRIES` files and drops the one used least recently.
    #[test]
    fn the_least_recently_used_entry_goes_when_the_cache_is_full() {
        let mut cache = Cache::default();
        for ino in 0..MAX_ENTRIES as u64 {
            cache.entry(key(ino, 10), 1, true);
        }
        // Inode 0 is used again (found, as an on-demand acquire finds it): inode 1 is now the
        // least recently used.
        assert!(cache.find(&key(0, 10)).is_some());
        cache.entry(key(u64::MAX, 10), 1, true);
        assert_eq!(cache.entries.len(), MAX_ENTRIES);
        assert_eq!(
            cache.entry(key(0, 10), 1, true).1,
            Found::Hit,
            "the entry just used was dropped"
        );
        assert!(
            !cache.entries.contains_key(&(1, 1)),
            "the least recently used entry stayed"
        );
    }

    /// Turned off (`set_enabled(false)`, the benches' uncached arm), the cache neither
    /// answers nor keeps: every look-up of a settled file is a new entry; turned on again, it
    /// keeps and answers.
    #[test]
    fn a_cache_turned_off_neither_answers_nor_keeps() {
        // The root directory: its status changed long before this test (its key is all the
        // cache looks at).
        let metadata = std::fs::metadata("/").unwrap();
        assert!(settled(Key::of(&metadata).changed(), SystemTime::now(), RACY_WINDOW));
        set_enabled(false);
        let unread = || -> Option<u64> { panic!("the cache read the file while off") };
        let (first, hit) = lookup(&metadata, unread);
        let (second, again) = lookup(&metadata, unread);
        set_enabled(true);
        assert!(
            !hit && !again && !Arc::ptr_eq(&first, &second),
            "the cache answered while off"
        );
        let (kept, _) = lookup(&metadata, || Some(1));
        let (found, hit) = lookup(&metadata, || Some(1));
        assert!(
            hit && Arc::ptr_eq(&kept, &found),
            "the cache did not answer once on again"
        );
    }

    /// A slot decides once and then answers with the stored decision; a failure to read the
    /// file is no decision.
    #[test]
    fn a_slot_decides_once() {
        let slot = Slot::default();
        assert_eq!(slot.get_or(|| 1), (1, true));
        assert_eq!(slot.get_or(|| 2), (1, false));
        // A decision that is not kept (a failure to read) is decided again.
        let unread = Slot::default();
        let failed = || Err::<(), _>("its headers: cannot read it: EIO".to_owned());
        assert!(unread.get_or_keep(failed, about_the_bytes).1);
        assert_eq!(unread.get_or_keep(|| Ok(()), about_the_bytes), (Ok(()), true));
        assert_eq!(unread.get_or(|| Err("x".to_owned())), (Ok(()), false));
    }
}
