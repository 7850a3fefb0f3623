//! The platform calls of isolated sets, and every `unsafe` of them: the worker's early hook,
//! the spawn of a worker (`posix_spawn`, or the part of a `fork` that runs in the child
//! before `exec`) and the wait for its end (a process descriptor), the channel's
//! socket (`socketpair`, `sendmsg`/`recvmsg` with `SCM_RIGHTS`, whose descriptors std's Unix
//! sockets cannot carry on stable Rust), the sealed shared regions of large messages
//! (`memfd_create`, seals, a read-only mapping), and the call of a message pass.
//!
//! # The early hook
//!
//! A worker is a fork of the zygote (`isolate::zygote`), a new execution of the host's own
//! program (`/proc/self/exe`), or a new execution of the operator's
//! [`worker_command`](crate::HostBuilder::worker_command). Every program that
//! can spawn a worker carries [`WORKER_HOOK`], a function in the program's
//! `.init_array`, which the C runtime calls before `main`. It looks for `ZYGOTE_VAR`, then
//! [`CHANNEL_VAR`], in the environment; when the variable names a descriptor that is a Unix
//! `SOCK_SEQPACKET` socket, the process is a zygote or a worker: the hook runs it
//! (`isolate::zygote::serve`, which forks workers by [`fork_worker`], or `isolate::worker`)
//! and ends the process with `_exit`, so the program's `main` never runs there. Otherwise (no variable, or one that names anything else) it returns and the
//! program starts as usual. The hook sits in the same module as [`spawn`], which names it:
//! a program whose link keeps the code that spawns workers keeps the hook (and, as the linker
//! keeps `.init_array` with the object it is in, so does every program built with the crate
//! feature `isolate`; without it, none of this module's process code is compiled).

use std::ffi::c_void;

use crate::load::PassInfo;
use dylease_plugin::MessagePass;
use dylease_plugin::abi::{dylease_message_fn, dylease_out};

#[cfg(all(feature = "isolate", target_os = "linux", not(loom)))]
pub(crate) use process::{
    Channel, InputRegion, OutputMapping, OutputRegion, Process, Reaper, Region, Role, SIZE_SEALS, Spare, credentials,
    fork_worker, reap_child, sealed_region, seals, spawn,
};

/// What [`call_message`] got back from a message pass.
#[cfg_attr(not(all(feature = "isolate", target_os = "linux", not(loom))), allow(dead_code))]
#[derive(Debug)]
pub(crate) struct Called {
    /// What the pass returned: 0 for success.
    pub(crate) status: i32,
    /// What it appended, unless that is in the region the call was given.
    pub(crate) output: Vec<u8>,
    /// How many bytes it appended at the start of the region the call was given, where its
    /// output stays while it fits (`output` is then empty).
    pub(crate) in_region: usize,
    /// Whether it tried to append past the limit (and was refused).
    pub(crate) overflowed: bool,
}

/// The output of one call, behind `dylease_out::ctx`: at the start of `region` while it fits
/// there, then all of it in `output`.
struct Sink<'a> {
    region: &'a mut [u8],
    in_region: usize,
    output: Vec<u8>,
    limit: usize,
    overflowed: bool,
}

/// `dylease_out::write`: appends to the [`Sink`] of the call, up to its limit.
unsafe extern "C" fn append(out: *mut dylease_out, bytes: *const u8, len: usize) -> i32 {
    if out.is_null() {
        return -1;
    }
    // SAFETY: `out` is the `dylease_out` that `call_message` handed the pass, live during the
    // call (the ABI allows `write` only then, on its thread).
    let ctx = unsafe { (*out).ctx };
    // SAFETY: its `ctx` is that call's `Sink`, live and borrowed by nothing else meanwhile.
    let sink = unsafe { &mut *ctx.cast::<Sink<'_>>() };
    if len == 0 {
        return 0;
    }
    let written = sink.in_region + sink.output.len();
    if bytes.is_null() || len > sink.limit.saturating_sub(written) {
        sink.overflowed |= !bytes.is_null();
        return -1;
    }
    // SAFETY: the ABI: `bytes` points to `len` readable bytes for the duration of `write`;
    // they are the pass's, not the sink's.
    let bytes = unsafe { std::slice::from_raw_parts(bytes, len) };
    match sink.region.get_mut(sink.in_region..written + len) {
        Some(room) if sink.output.is_empty() => {
            room.copy_from_slice(bytes);
            sink.in_region += len;
        }
        _ => {
            // It no longer fits the region: what is there moves to `output`, with the rest.
            sink.output.reserve(written + len);
            sink.output.extend_from_slice(&sink.region[..sink.in_region]);
            sink.in_region = 0;
            sink.output.extend_from_slice(bytes);
        }
    }
    0
}

/// Calls `pass`, a message pass of a mapped plugin, with `input`, collecting at most `limit`
/// bytes of its output, at the start of `region` while they fit there (an empty region: in
/// a new `Vec`); `None` if it is not a native message pass (registered under
/// `dylease.message/1`) or its plugin is not mapped.
pub(crate) fn call_message_pass(pass: &PassInfo, input: &[u8], limit: usize, region: &mut [u8]) -> Option<Called> {
    let callable = pass.callable()?;
    // `typed` checks the interface it was registered under (and that it is native).
    let func = callable.func.typed::<MessagePass>()?;
    // SAFETY: a pass with a callable belongs to a mapped plugin, which stays mapped while its
    // set lives, and `pass` borrows from the set.
    Some(unsafe { call_message(func, callable.user_data.0, input, limit, region) })
}

/// Calls the message pass `pass` with `user_data` and `input`, collecting at most `limit`
/// bytes of output (at the start of `region` while they fit).
///
/// # Safety
///
/// The library `pass` belongs to stays mapped during the call, and `user_data` is the one it
/// was registered with.
unsafe fn call_message(
    pass: dylease_message_fn,
    user_data: *mut c_void,
    input: &[u8],
    limit: usize,
    region: &mut [u8],
) -> Called {
    let mut sink = Sink {
        region,
        in_region: 0,
        output: Vec::new(),
        limit,
        overflowed: false,
    };
    let mut out = dylease_out {
        ctx: (&raw mut sink).cast(),
        write: append,
    };
    // SAFETY: the caller's contract (the pass is mapped, `user_data` its own); `input` is
    // live for the call, and `out` with its `Sink` outlives it.
    let status = unsafe { pass(input.as_ptr(), input.len(), &raw mut out, user_data) };
    Called {
        status,
        output: sink.output,
        in_region: sink.in_region,
        overflowed: sink.overflowed,
    }
}

/// The worker process: its hook, its spawn and its channel (Linux only).
#[cfg(all(feature = "isolate", target_os = "linux", not(loom)))]
mod process {
    use std::fs::File;
    use std::io::{self, Read, Seek};
    use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::FileExt;
    use std::os::unix::process::CommandExt;
    use std::path::Path;
    use std::process::{Command, Stdio};
    use std::time::Duration;

    /// The environment variable that makes a process a worker: the number of its channel's
    /// descriptor. Removed from the worker's environment once read.
    pub(crate) const CHANNEL_VAR: &str = "DYLEASE_WORKER_CHANNEL";

    /// The environment variable that makes a process the zygote of a host's workers
    /// (`isolate::zygote`): the number of its channel's descriptor. Removed once read.
    const ZYGOTE_VAR: &str = "DYLEASE_WORKER_ZYGOTE";

    /// What a process the host starts is to be: a worker, or the zygote that forks workers.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub(crate) enum Role {
        /// A worker ([`CHANNEL_VAR`]): runs `isolate::worker`.
        Worker,
        /// A zygote ([`ZYGOTE_VAR`]): runs `isolate::zygote::serve`.
        Zygote,
    }

    impl Role {
        /// The environment variable that names the channel of a process of this role.
        fn var(self) -> &'static str {
            match self {
                Role::Worker => CHANNEL_VAR,
                Role::Zygote => ZYGOTE_VAR,
            }
        }
    }

    /// The descriptor a worker finds its channel at: the first after standard input, output and
    /// error.
    const CHANNEL_FD: RawFd = 3;

    /// The worker's early hook (see the module documentation). Not `#[used]`: [`spawn`] names
    /// it, so a program keeps it exactly when it can spawn workers.
    #[unsafe(link_section = ".init_array")]
    static WORKER_HOOK: extern "C" fn() = worker_hook;

    extern "C" fn worker_hook() {
        let Some((channel, role)) = channel_from_env() else {
            return;
        };
        // The worker (or zygote) dies with the host's thread that spawned it ([`spawn`]); a
        // host that ended before this closed its end of the channel, which the process reads
        // next, and exits.
        // SAFETY: `prctl` with these options takes plain integers.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
        exit_now(run_as(role, channel))
    }

    /// Runs the process as `role` on `channel`; returns its exit status. A panic must not
    /// unwind out of the C runtime's call (or out of a forked worker): it ends the process with
    /// status 101, which the host reports.
    fn run_as(role: Role, channel: Channel) -> i32 {
        std::panic::catch_unwind(|| match role {
            Role::Worker => super::super::worker::run(channel),
            Role::Zygote => super::super::zygote::serve(channel),
        })
        .unwrap_or(101)
    }

    /// The channel named by [`ZYGOTE_VAR`] or [`CHANNEL_VAR`], and the role the variable gives,
    /// if this process is a zygote or a worker: the variable holds a descriptor number, and that
    /// descriptor is a Unix `SOCK_SEQPACKET` socket. The variable is then removed (nothing a
    /// plugin starts inherits it) and the descriptor made close-on-exec.
    fn channel_from_env() -> Option<(Channel, Role)> {
        let (role, value) = [Role::Zygote, Role::Worker]
            .into_iter()
            .find_map(|role| Some((role, std::env::var_os(role.var())?)))?;
        let fd: RawFd = std::str::from_utf8(value.as_bytes()).ok()?.parse().ok()?;
        if fd < 0 || !is_seqpacket(fd) {
            return None;
        }
        // SAFETY: this runs from `.init_array`, before `main`: no thread of the program reads or
        // writes the environment concurrently (std's `remove_var` contract).
        unsafe { std::env::remove_var(role.var()) };
        // SAFETY: `fd` is open (it was just examined), and nothing else in this process owns it:
        // the host opened it for this process's channel alone.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: `F_SETFD` on a descriptor this function owns.
        if unsafe { libc::fcntl(owned.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
            return None;
        }
        Some((Channel(owned), role))
    }

    /// Whether `fd` is an open Unix socket of type `SOCK_SEQPACKET`.
    fn is_seqpacket(fd: RawFd) -> bool {
        let mut stat = std::mem::MaybeUninit::<libc::stat>::uninit();
        // SAFETY: `stat` is writable; `fstat` of a closed descriptor fails without harm.
        if unsafe { libc::fstat(fd, stat.as_mut_ptr()) } != 0 {
            return false;
        }
        // SAFETY: `fstat` succeeded, so it filled `stat`.
        if unsafe { stat.assume_init() }.st_mode & libc::S_IFMT != libc::S_IFSOCK {
            return false;
        }
        let option = |name: libc::c_int| {
            let mut value: libc::c_int = 0;
            let mut len = size_of::<libc::c_int>() as libc::socklen_t;
            // SAFETY: `fd` is a socket; `value` and `len` are writable and sized for an int.
            let done = unsafe { libc::getsockopt(fd, libc::SOL_SOCKET, name, (&raw mut value).cast(), &mut len) };
            (done == 0).then_some(value)
        };
        option(libc::SO_TYPE) == Some(libc::SOCK_SEQPACKET) && option(libc::SO_DOMAIN) == Some(libc::AF_UNIX)
    }

    /// The seals a region's reader relies on: its size can change no more.
    pub(crate) const SIZE_SEALS: libc::c_int = libc::F_SEAL_SHRINK | libc::F_SEAL_GROW;

    /// A new anonymous file (`memfd_create`, close-on-exec) holding `bytes`, sealed: its size
    /// and its bytes can change no more, nor its seals (`F_SEAL_SHRINK`, `F_SEAL_GROW`,
    /// `F_SEAL_WRITE`, `F_SEAL_SEAL`). The region of a message too large for a frame: the
    /// other side reads exactly what was written, and may map it without fear of a shrink.
    pub(crate) fn sealed_region(bytes: &[u8]) -> io::Result<File> {
        let file = anonymous_file(bytes.len())?;
        file.write_all_at(bytes, 0)?;
        add_seals(&file, SIZE_SEALS | libc::F_SEAL_WRITE | libc::F_SEAL_SEAL)?;
        Ok(file)
    }

    /// A new anonymous file of `len` zero bytes (`memfd_create`, close-on-exec, sealing
    /// allowed).
    fn anonymous_file(len: usize) -> io::Result<File> {
        // SAFETY: the name is a NUL-terminated string; the flags are plain integers.
        let fd =
            unsafe { libc::memfd_create(c"dylease-message".as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `memfd_create` just made `fd`, owned by nobody else.
        let file = File::from(unsafe { OwnedFd::from_raw_fd(fd) });
        file.set_len(len as u64)?;
        Ok(file)
    }

    /// Adds `seals` to `file`'s (an anonymous file this process made).
    fn add_seals(file: &File, seals: libc::c_int) -> io::Result<()> {
        // SAFETY: `F_ADD_SEALS` on an open descriptor takes an int.
        match unsafe { libc::fcntl(file.as_raw_fd(), libc::F_ADD_SEALS, seals) } {
            0 => Ok(()),
            _ => Err(io::Error::last_os_error()),
        }
    }

    /// A region the host writes the inputs of calls into, one call at a time, and hands the
    /// worker again for each: an anonymous file (`memfd_create`, close-on-exec) of a fixed
    /// `capacity`, mapped writable in the host once, then sealed: its size can change no more
    /// (`F_SEAL_SHRINK`, `F_SEAL_GROW`), nobody can gain write access to it any more
    /// (`F_SEAL_FUTURE_WRITE`: no `write`, no new writable mapping, no `mprotect` of a
    /// read-only one, whatever descriptor or reopening of it is used), nor change its seals
    /// (`F_SEAL_SEAL`). The host's own mapping, made before the seals, is then the only way
    /// to write its bytes: the worker, which holds the descriptor, can read them and nothing
    /// more, and the host's writes need no system call and touch no fresh page.
    #[derive(Debug)]
    pub(crate) struct InputRegion {
        file: File,
        start: *mut u8,
        capacity: usize,
    }

    // SAFETY: the mapping is owned by the region alone (written only through `&mut self`,
    // unmapped only by its drop), and no other process can write it (its seals): moving the
    // region to another thread moves that ownership with it.
    unsafe impl Send for InputRegion {}

    impl InputRegion {
        /// A new region of `capacity` bytes (> 0), its pages allocated. `Err` where the
        /// kernel cannot seal it so (`F_SEAL_FUTURE_WRITE` came with Linux 5.1): the caller
        /// then uses a [`sealed_region`] per call.
        pub(crate) fn new(capacity: usize) -> io::Result<InputRegion> {
            let file = anonymous_file(capacity)?;
            // SAFETY: a new shared mapping of the whole of an open file, placed by the kernel:
            // it overlaps nothing of this process's.
            let start = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    capacity,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED | libc::MAP_POPULATE,
                    file.as_raw_fd(),
                    0,
                )
            };
            if start == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            // Unmapped by its drop from here on, whatever fails next.
            let region = InputRegion {
                file,
                start: start.cast(),
                capacity,
            };
            add_seals(&region.file, SIZE_SEALS | libc::F_SEAL_FUTURE_WRITE | libc::F_SEAL_SEAL)?;
            Ok(region)
        }

        /// How many bytes it holds.
        pub(crate) fn capacity(&self) -> usize {
            self.capacity
        }

        /// Writes `bytes` at its start: `false` (and nothing written) if they do not fit.
        pub(crate) fn write(&mut self, bytes: &[u8]) -> bool {
            if bytes.len() > self.capacity {
                return false;
            }
            // SAFETY: `start` maps `capacity` writable bytes until `self` is dropped, and the
            // file's size is sealed, so no write to them faults. `&mut self` makes this the one
            // reference to them in this process, and no other process can write them (the
            // seals leave this mapping the only writable one): the slice aliases nothing.
            let mapped = unsafe { std::slice::from_raw_parts_mut(self.start, self.capacity) };
            mapped[..bytes.len()].copy_from_slice(bytes);
            true
        }

        /// The descriptor the worker is handed.
        pub(crate) fn file(&self) -> &File {
            &self.file
        }
    }

    impl Drop for InputRegion {
        fn drop(&mut self) {
            // SAFETY: `start` and `capacity` are the mapping `new` made, unmapped only here.
            unsafe { libc::munmap(self.start.cast(), self.capacity) };
        }
    }

    /// A region the host hands the worker beside a call with a large input, for the call's
    /// output, and reuses for the next such calls: an anonymous file (`memfd_create`,
    /// close-on-exec) of a fixed `capacity`, sealed against a change of size and of its seals
    /// (`F_SEAL_SHRINK`, `F_SEAL_GROW`, `F_SEAL_SEAL`), writable by the worker. The host never
    /// maps it: it reads the bytes the worker's reply announces with `pread`, so a worker
    /// that goes on writing changes what the host reads (bytes it vouches for anyway), never
    /// where, and never faults the host.
    #[derive(Debug)]
    pub(crate) struct OutputRegion {
        file: File,
        capacity: usize,
    }

    impl OutputRegion {
        /// A new region of `capacity` bytes (> 0), its size sealed.
        pub(crate) fn new(capacity: usize) -> io::Result<OutputRegion> {
            let file = anonymous_file(capacity)?;
            add_seals(&file, SIZE_SEALS | libc::F_SEAL_SEAL)?;
            Ok(OutputRegion { file, capacity })
        }

        /// Its first `len` bytes, read once: `Err` if `len` is more than it holds (what a
        /// hostile worker announces) or the read fails.
        pub(crate) fn read(&self, len: u64) -> Result<Vec<u8>, String> {
            let len = usize::try_from(len)
                .ok()
                .filter(|&len| len <= self.capacity)
                .ok_or_else(|| format!("it announced {len} bytes of output in a region of {}", self.capacity))?;
            // Read into the new `Vec`'s spare capacity: no zeroing of what the read overwrites.
            // A region is read by one call at a time, so its own offset is the caller's.
            let mut output = Vec::with_capacity(len);
            let mut file = &self.file;
            let read = file
                .seek(io::SeekFrom::Start(0))
                .and_then(|_| file.take(len as u64).read_to_end(&mut output));
            match read {
                Ok(read) if read == len => Ok(output),
                Ok(read) => Err(format!("its output region held {read} bytes, not {len}")),
                Err(e) => Err(format!("its output region could not be read: {e}")),
            }
        }

        /// The descriptor the worker is handed.
        pub(crate) fn file(&self) -> &File {
            &self.file
        }
    }

    /// The worker's writable shared mapping of an [`OutputRegion`], the whole file: unmapped
    /// when dropped. Written only through `&mut self`: the worker hands one mapping to one
    /// call at a time.
    #[derive(Debug)]
    pub(crate) struct OutputMapping {
        start: *mut u8,
        len: usize,
    }

    // SAFETY: the mapping is owned by the value alone (written only through `&mut self`,
    // unmapped only by its drop): moving it to another thread moves that ownership with it.
    unsafe impl Send for OutputMapping {}

    impl OutputMapping {
        /// Maps `file` whole, writable; it must be sealed against a change of size (a shrink
        /// would turn a write to the mapping into `SIGBUS`) and hold at least one byte.
        pub(crate) fn map(file: &File) -> io::Result<OutputMapping> {
            if seals(file)? & SIZE_SEALS != SIZE_SEALS {
                return Err(io::Error::other(
                    "the output region is not sealed against a change of its size",
                ));
            }
            let size = file.metadata()?.len();
            let size = usize::try_from(size).map_err(|_| io::Error::other("the region is larger than memory"))?;
            if size == 0 {
                return Err(io::Error::other("the output region is empty"));
            }
            // SAFETY: a new shared mapping of the whole of an open file, placed by the kernel:
            // it overlaps nothing of this process's.
            let start = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    size,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    file.as_raw_fd(),
                    0,
                )
            };
            if start == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            Ok(OutputMapping {
                start: start.cast(),
                len: size,
            })
        }

        /// Its bytes, to write a call's output into.
        pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
            // SAFETY: `start` maps `len` readable and writable bytes until `self` is dropped,
            // and the file's size is sealed, so no access to them faults; `&mut self` makes
            // this the one reference to them in this process. The host only reads the region
            // (`pread`, after the reply), and bytes are bytes whatever it does.
            unsafe { std::slice::from_raw_parts_mut(self.start, self.len) }
        }
    }

    impl Drop for OutputMapping {
        fn drop(&mut self) {
            // SAFETY: `start` and `len` are the mapping `map` made, unmapped only here.
            unsafe { libc::munmap(self.start.cast(), self.len) };
        }
    }

    /// The seals of `file` (`F_GET_SEALS`); an `Err` for a file that cannot have any.
    pub(crate) fn seals(file: &File) -> io::Result<libc::c_int> {
        // SAFETY: `F_GET_SEALS` on an open descriptor takes no argument.
        let seals = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
        match seals {
            -1 => Err(io::Error::last_os_error()),
            seals => Ok(seals),
        }
    }

    /// A read-only shared mapping of a region sealed against a change of size, the whole
    /// file: unmapped when dropped.
    #[derive(Debug)]
    pub(crate) struct Region {
        start: *const u8,
        len: usize,
    }

    // SAFETY: the mapping is read-only and owned by the region (unmapped only by its drop);
    // reading it from several threads, or from another thread than the one that mapped it,
    // is reading memory that lives as long as the region.
    unsafe impl Send for Region {}
    // SAFETY: as above: `&Region` only reads.
    unsafe impl Sync for Region {}

    impl Region {
        /// Maps `file` whole, which must be sealed against a change of size ([`SIZE_SEALS`]:
        /// a shrink would turn a read of the mapping into `SIGBUS`) and hold at least `len`
        /// bytes (`len` > 0; an [`InputRegion`] holds its capacity): `Err` saying which is
        /// not so.
        pub(crate) fn map(file: &File, len: usize) -> io::Result<Region> {
            if seals(file)? & SIZE_SEALS != SIZE_SEALS {
                return Err(io::Error::other(
                    "the region is not sealed against a change of its size",
                ));
            }
            let size = file.metadata()?.len();
            if size < len as u64 || len == 0 {
                return Err(io::Error::other(format!(
                    "the region holds {size} bytes, fewer than the {len} announced"
                )));
            }
            let size = usize::try_from(size).map_err(|_| io::Error::other("the region is larger than memory"))?;
            // SAFETY: a new read-only shared mapping of the whole of an open file, placed by
            // the kernel: it overlaps nothing of this process's.
            let start = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    size,
                    libc::PROT_READ,
                    libc::MAP_SHARED | libc::MAP_POPULATE,
                    file.as_raw_fd(),
                    0,
                )
            };
            if start == libc::MAP_FAILED {
                return Err(io::Error::last_os_error());
            }
            Ok(Region {
                start: start.cast::<u8>().cast_const(),
                len: size,
            })
        }

        /// The mapped bytes.
        pub(crate) fn bytes(&self) -> &[u8] {
            // SAFETY: `start` maps `len` readable bytes until `self` is dropped; the file's
            // size is sealed, so no read of them faults. A writer that could still change the
            // bytes (an unsealed writer; the host's own mapping of an `InputRegion`, which it
            // writes between calls) changes what is read, never where: bytes are bytes.
            unsafe { std::slice::from_raw_parts(self.start, self.len) }
        }
    }

    impl Drop for Region {
        fn drop(&mut self) {
            // SAFETY: `start` and `len` are the mapping `map` made, unmapped only here.
            unsafe { libc::munmap(self.start.cast_mut().cast(), self.len) };
        }
    }

    /// This process's credentials: its real, effective and saved user and group ids, then its
    /// supplementary groups.
    pub(crate) fn credentials() -> Vec<u32> {
        let (mut ids, mut gids) = ([0; 3], [0; 3]);
        // SAFETY: `getresuid` and `getresgid` write three ids each into the arrays given.
        unsafe {
            libc::getresuid(&mut ids[0], &mut ids[1], &mut ids[2]);
        }
        // SAFETY: as above.
        unsafe {
            libc::getresgid(&mut gids[0], &mut gids[1], &mut gids[2]);
        }
        let mut all: Vec<u32> = ids.into_iter().chain(gids).collect();
        // SAFETY: `getgroups` with a size of 0 only counts the groups.
        let count = unsafe { libc::getgroups(0, std::ptr::null_mut()) }.max(0) as usize;
        let mut groups = vec![0 as libc::gid_t; count];
        // SAFETY: `groups` has room for `count` ids; a list grown since fails, harmlessly.
        let got = unsafe { libc::getgroups(count as libc::c_int, groups.as_mut_ptr()) };
        groups.truncate(got.max(0) as usize);
        all.extend(groups);
        all
    }

    /// Ends the process now, with `code`, running none of the program's exit handlers: a worker
    /// never returns into the host program's code.
    pub(crate) fn exit_now(code: i32) -> ! {
        // SAFETY: `_exit` takes any status and does not return.
        unsafe { libc::_exit(code) }
    }

    /// One end of an isolated set's channel: a Unix `SOCK_SEQPACKET` socket, which keeps message
    /// boundaries (one frame, one message) and carries descriptors (`SCM_RIGHTS`).
    #[derive(Debug)]
    pub(crate) struct Channel(OwnedFd);

    /// What [`Channel::recv`] received.
    #[derive(Debug)]
    pub(crate) struct Received {
        /// The bytes of the message; 0 when the other end is closed.
        pub(crate) len: usize,
        /// The descriptors that came with it (each closed when dropped).
        pub(crate) fds: Vec<OwnedFd>,
        /// Whether the message or its descriptors did not fit (and were cut).
        pub(crate) truncated: bool,
    }

    /// The most descriptors one message carries: more are cut on receipt (`truncated`), never
    /// left open.
    pub(crate) const MAX_FDS: usize = 4;

    impl Channel {
        /// A connected pair: this end, and the other end's descriptor (both close-on-exec).
        pub(crate) fn pair() -> io::Result<(Channel, OwnedFd)> {
            let mut fds = [0 as libc::c_int; 2];
            // SAFETY: `fds` has room for the two descriptors `socketpair` writes.
            let done = unsafe {
                libc::socketpair(
                    libc::AF_UNIX,
                    libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                    0,
                    fds.as_mut_ptr(),
                )
            };
            if done != 0 {
                return Err(io::Error::last_os_error());
            }
            // SAFETY: `socketpair` succeeded: both descriptors are open and owned by nobody else.
            let ours = unsafe { OwnedFd::from_raw_fd(fds[0]) };
            // SAFETY: as above.
            let theirs = unsafe { OwnedFd::from_raw_fd(fds[1]) };
            Ok((Channel(ours), theirs))
        }

        /// Sends one message, and the descriptors `fds` with it (at most [`MAX_FDS`]). Never
        /// raises `SIGPIPE`: a closed other end is an `Err` (`BrokenPipe`). A send timeout
        /// (`set_timeouts`) is an `Err` too.
        pub(crate) fn send(&self, message: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
            if fds.len() > MAX_FDS {
                return Err(io::Error::other(format!(
                    "{} descriptors for one message, more than {MAX_FDS}",
                    fds.len()
                )));
            }
            let mut iov = libc::iovec {
                iov_base: message.as_ptr().cast_mut().cast(),
                iov_len: message.len(),
            };
            let mut control = [0u64; 8];
            // SAFETY: an all-zero `msghdr` is valid (no name, no control, no vectors).
            let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
            header.msg_iov = &raw mut iov;
            header.msg_iovlen = 1;
            if !fds.is_empty() {
                let bytes = size_of_val(fds) as u32;
                // SAFETY: `CMSG_SPACE` only computes a size.
                let space = unsafe { libc::CMSG_SPACE(bytes) } as usize;
                debug_assert!(space <= size_of_val(&control));
                header.msg_control = control.as_mut_ptr().cast();
                // `socklen_t` on musl, `size_t` on glibc.
                header.msg_controllen = space as _;
                // SAFETY: `msg_control` points to `control`, at least `space` bytes and aligned
                // for `cmsghdr`, so the first header fits.
                let cmsg = unsafe { libc::CMSG_FIRSTHDR(&header) };
                // SAFETY: `CMSG_LEN` only computes a size.
                let len = unsafe { libc::CMSG_LEN(bytes) } as usize;
                // SAFETY: `control` is large enough for one header and `MAX_FDS` ints, so
                // `CMSG_FIRSTHDR` returned a pointer to its start, aligned for `cmsghdr`.
                let control_message = unsafe { &mut *cmsg };
                control_message.cmsg_level = libc::SOL_SOCKET;
                control_message.cmsg_type = libc::SCM_RIGHTS;
                control_message.cmsg_len = len as _;
                // SAFETY: `CMSG_DATA` of that header points inside `control`, after it.
                let data = unsafe { libc::CMSG_DATA(cmsg) }.cast::<libc::c_int>();
                for (i, fd) in fds.iter().enumerate() {
                    // SAFETY: `fds.len()` ints fit at `data` (the space asked for above);
                    // unaligned, as `CMSG_DATA` promises no alignment.
                    unsafe { std::ptr::write_unaligned(data.wrapping_add(i), fd.as_raw_fd()) };
                }
            }
            loop {
                // SAFETY: `header` points to `iov` (the live `message`) and to `control`, both of
                // which outlive the call.
                let sent = unsafe { libc::sendmsg(self.0.as_raw_fd(), &header, libc::MSG_NOSIGNAL) };
                if sent >= 0 {
                    return match sent as usize == message.len() {
                        true => Ok(()),
                        false => Err(io::Error::other("the socket took part of a message")),
                    };
                }
                let error = io::Error::last_os_error();
                if error.kind() != io::ErrorKind::Interrupted {
                    return Err(error);
                }
            }
        }

        /// Receives one message into `buffer`, and the descriptors that came with it (made
        /// close-on-exec as they arrive). `len` 0: the other end closed.
        pub(crate) fn recv(&self, buffer: &mut [u8]) -> io::Result<Received> {
            let mut iov = libc::iovec {
                iov_base: buffer.as_mut_ptr().cast(),
                iov_len: buffer.len(),
            };
            let mut control = [0u64; 8];
            // SAFETY: `CMSG_SPACE` only computes a size.
            let space = unsafe { libc::CMSG_SPACE((MAX_FDS * size_of::<libc::c_int>()) as u32) } as usize;
            debug_assert!(space <= size_of_val(&control));
            // SAFETY: an all-zero `msghdr` is valid.
            let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
            header.msg_iov = &raw mut iov;
            header.msg_iovlen = 1;
            header.msg_control = control.as_mut_ptr().cast();
            header.msg_controllen = space as _;
            let len = loop {
                // SAFETY: `header` points to `buffer` and `control`, writable for the lengths it
                // gives, both outliving the call.
                let got = unsafe { libc::recvmsg(self.0.as_raw_fd(), &mut header, libc::MSG_CMSG_CLOEXEC) };
                if got >= 0 {
                    break got as usize;
                }
                let error = io::Error::last_os_error();
                if error.kind() != io::ErrorKind::Interrupted {
                    return Err(error);
                }
            };
            let mut fds = Vec::new();
            // SAFETY: `header` was filled by `recvmsg`; its control length says how much of
            // `control` holds messages.
            let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(&header) };
            while !cmsg.is_null() {
                // SAFETY: `cmsg` is a control message header inside `control` (the macros stop
                // at the length `recvmsg` wrote).
                let control_message = unsafe { &*cmsg };
                let (level, kind) = (control_message.cmsg_level, control_message.cmsg_type);
                // `socklen_t` on musl, `size_t` on glibc.
                let cmsg_len: usize = control_message.cmsg_len as _;
                if (level, kind) == (libc::SOL_SOCKET, libc::SCM_RIGHTS) {
                    // SAFETY: `CMSG_LEN` only computes a size.
                    let data = cmsg_len.saturating_sub(unsafe { libc::CMSG_LEN(0) } as usize);
                    // SAFETY: `CMSG_DATA` of a header inside `control` points after it.
                    let first = unsafe { libc::CMSG_DATA(cmsg) }.cast::<libc::c_int>();
                    for i in 0..data / size_of::<libc::c_int>() {
                        // SAFETY: the message's data holds `data` bytes of descriptors, inside
                        // `control`; read unaligned, as `CMSG_DATA` promises no alignment.
                        let fd = unsafe { std::ptr::read_unaligned(first.wrapping_add(i)) };
                        // SAFETY: the kernel installed `fd` in this process for this message:
                        // it is open and owned by nobody else.
                        fds.push(unsafe { OwnedFd::from_raw_fd(fd) });
                    }
                }
                // SAFETY: `cmsg` is a header of `header`'s control buffer.
                cmsg = unsafe { libc::CMSG_NXTHDR(&header, cmsg) };
            }
            let truncated = header.msg_flags & (libc::MSG_TRUNC | libc::MSG_CTRUNC) != 0;
            Ok(Received { len, fds, truncated })
        }

        /// Bounds each receive and each send: `None` waits as long as it takes.
        pub(crate) fn set_timeouts(&self, recv: Option<Duration>, send: Option<Duration>) -> io::Result<()> {
            for (option, timeout) in [(libc::SO_RCVTIMEO, recv), (libc::SO_SNDTIMEO, send)] {
                let timeout = timeout.unwrap_or_default();
                let value = libc::timeval {
                    // At most 68 years, which every `time_t` holds.
                    tv_sec: timeout.as_secs().min(i32::MAX as u64) as _,
                    // A bound of less than a microsecond would be read as none.
                    tv_usec: match (timeout.as_secs(), timeout.subsec_micros()) {
                        (0, 0) if !timeout.is_zero() => 1,
                        (_, micros) => micros as _,
                    },
                };
                // SAFETY: `value` is a `timeval`, the type these options take, and outlives the call.
                let done = unsafe {
                    libc::setsockopt(
                        self.0.as_raw_fd(),
                        libc::SOL_SOCKET,
                        option,
                        (&raw const value).cast(),
                        size_of::<libc::timeval>() as libc::socklen_t,
                    )
                };
                if done != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        }

        /// Shuts both directions down: a thread blocked receiving on this end returns at once.
        pub(crate) fn shutdown(&self) {
            // SAFETY: `shutdown` on an open socket; a failure (already shut) changes nothing.
            unsafe { libc::shutdown(self.0.as_raw_fd(), libc::SHUT_RDWR) };
        }
    }

    /// Starts a process of `role` (a worker, or a zygote): `program` (the host's own
    /// executable, or the operator's worker command) with `theirs` as its channel at
    /// descriptor 3, named in the role's variable; standard input from
    /// `/dev/null`, standard output and error the host's; every other descriptor closed before
    /// `exec`, so the worker inherits nothing but its standard streams and its channel; every
    /// `LD_*` variable left out of its environment unless `ld_passthrough`; and no set-user-id
    /// gain (`PR_SET_NO_NEW_PRIVS`, which the calling thread takes for good, and every process it
    /// starts with it: callers spawn from a thread of their own that does nothing else). The
    /// worker dies with the thread that spawned it (`PR_SET_PDEATHSIG(SIGKILL)`, which its hook
    /// sets, first thing, before it reads its channel: callers spawn from a thread that lives
    /// as long as the process).
    ///
    /// The start is a `posix_spawn` (the C library's `vfork`-like clone: no copy of the host's
    /// page tables) whose file actions place the channel and close the rest
    /// (`posix_spawn_file_actions_addclosefrom_np`, glibc 2.34). Where the C library has no
    /// such action, a `fork` whose child makes every descriptor above 3 close-on-exec
    /// (`close_range`) and sets the death signal itself before `exec`.
    pub(crate) fn spawn(program: &Path, theirs: OwnedFd, ld_passthrough: bool, role: Role) -> io::Result<Process> {
        // Names the hook: a link that keeps this function keeps the hook with it.
        std::hint::black_box(&WORKER_HOOK);
        // SAFETY: `prctl` with these options takes plain integers; it affects this thread (and
        // what it starts) alone.
        if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // The channel must be none of the standard streams, nor at 3 itself: the child gets a
        // copy at 3 made by `dup2`, which the closing of the rest leaves alone.
        let theirs = match theirs.as_raw_fd() {
            0..=CHANNEL_FD => dup_above(&theirs, CHANNEL_FD + 1)?,
            _ => theirs,
        };
        let pid = match close_from_action() {
            Some(close_from) => spawn_direct(program, &theirs, ld_passthrough, role, close_from)?,
            None => spawn_forked(program, theirs, ld_passthrough, role)?,
        };
        Ok(Process::new(pid))
    }

    /// `posix_spawn_file_actions_addclosefrom_np`, where the C library has it.
    type CloseFrom = unsafe extern "C" fn(*mut libc::posix_spawn_file_actions_t, libc::c_int) -> libc::c_int;

    /// The C library's `posix_spawn_file_actions_addclosefrom_np`, looked up once (the
    /// program runs wherever its C library lacks it).
    fn close_from_action() -> Option<CloseFrom> {
        static FOUND: std::sync::OnceLock<Option<CloseFrom>> = std::sync::OnceLock::new();
        *FOUND.get_or_init(|| {
            // SAFETY: `dlsym` with `RTLD_DEFAULT` and a NUL-terminated name only looks the name up.
            let symbol =
                unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"posix_spawn_file_actions_addclosefrom_np".as_ptr()) };
            // SAFETY: the symbol of that name is glibc's function of this signature
            // (`int (posix_spawn_file_actions_t *, int)`).
            (!symbol.is_null()).then(|| unsafe { std::mem::transmute::<*mut libc::c_void, CloseFrom>(symbol) })
        })
    }

    /// The environment of a process of `role`: the host's, less [`CHANNEL_VAR`],
    /// [`ZYGOTE_VAR`] and (unless `ld_passthrough`) every `LD_*` variable, plus the role's
    /// variable naming descriptor 3.
    fn worker_env(ld_passthrough: bool, role: Role) -> io::Result<Vec<std::ffi::CString>> {
        let mut env = Vec::new();
        for (key, value) in std::env::vars_os() {
            let key = key.as_bytes();
            let ours = [CHANNEL_VAR, ZYGOTE_VAR].iter().any(|var| key == var.as_bytes());
            if ours || (!ld_passthrough && key.starts_with(b"LD_")) {
                continue;
            }
            let variable = [key, b"=", value.as_bytes()].concat();
            env.push(std::ffi::CString::new(variable).map_err(io::Error::other)?);
        }
        env.push(std::ffi::CString::new(format!("{}={CHANNEL_FD}", role.var())).map_err(io::Error::other)?);
        Ok(env)
    }

    /// [`spawn`] by `posix_spawnp`, with `close_from` closing every descriptor above 3.
    fn spawn_direct(
        program: &Path,
        theirs: &OwnedFd,
        ld_passthrough: bool,
        role: Role,
        close_from: CloseFrom,
    ) -> io::Result<libc::pid_t> {
        let path = std::ffi::CString::new(program.as_os_str().as_bytes()).map_err(io::Error::other)?;
        let env = worker_env(ld_passthrough, role)?;
        let mut envp: Vec<*mut libc::c_char> = env.iter().map(|v| v.as_ptr().cast_mut()).collect();
        envp.push(std::ptr::null_mut());
        let argv = [c"dylease-worker".as_ptr().cast_mut(), std::ptr::null_mut()];
        let check = |code: libc::c_int| match code {
            0 => Ok(()),
            code => Err(io::Error::from_raw_os_error(code)),
        };
        let mut actions = std::mem::MaybeUninit::<libc::posix_spawn_file_actions_t>::uninit();
        // SAFETY: `actions` is writable; `init` fills it.
        check(unsafe { libc::posix_spawn_file_actions_init(actions.as_mut_ptr()) })?;
        let mut attributes = std::mem::MaybeUninit::<libc::posix_spawnattr_t>::uninit();
        // SAFETY: as above, for the attributes.
        if let Err(e) = check(unsafe { libc::posix_spawnattr_init(attributes.as_mut_ptr()) }) {
            // SAFETY: `actions` was initialised above and is destroyed once.
            unsafe { libc::posix_spawn_file_actions_destroy(actions.as_mut_ptr()) };
            return Err(e);
        }
        let (actions, attributes) = (actions.as_mut_ptr(), attributes.as_mut_ptr());
        let spawned = (|| {
            // SAFETY: `actions` is initialised; the path is NUL-terminated and outlives the call.
            check(unsafe {
                libc::posix_spawn_file_actions_addopen(actions, 0, c"/dev/null".as_ptr(), libc::O_RDONLY, 0)
            })?;
            // SAFETY: `actions` is initialised; `theirs` is open, and above 3.
            check(unsafe { libc::posix_spawn_file_actions_adddup2(actions, theirs.as_raw_fd(), CHANNEL_FD) })?;
            // SAFETY: `close_from` is glibc's action of this signature; `actions` is initialised.
            check(unsafe { close_from(actions, CHANNEL_FD + 1) })?;
            // The child starts with no signal blocked and `SIGPIPE` at its default, as
            // `std::process::Command` starts its children.
            let mut signals = std::mem::MaybeUninit::<libc::sigset_t>::uninit();
            // SAFETY: `signals` is writable; `sigemptyset` fills it.
            unsafe { libc::sigemptyset(signals.as_mut_ptr()) };
            // SAFETY: `attributes` is initialised, `signals` too, and is copied.
            check(unsafe { libc::posix_spawnattr_setsigmask(attributes, signals.as_ptr()) })?;
            // SAFETY: `signals` is initialised; `SIGPIPE` is a signal.
            unsafe { libc::sigaddset(signals.as_mut_ptr(), libc::SIGPIPE) };
            // SAFETY: as for the mask.
            check(unsafe { libc::posix_spawnattr_setsigdefault(attributes, signals.as_ptr()) })?;
            let flags = (libc::POSIX_SPAWN_SETSIGMASK | libc::POSIX_SPAWN_SETSIGDEF) as libc::c_short;
            // SAFETY: `attributes` is initialised.
            check(unsafe { libc::posix_spawnattr_setflags(attributes, flags) })?;
            let mut pid: libc::pid_t = 0;
            // SAFETY: every pointer is live for the call: the NUL-terminated path, `argv` and
            // `envp` (NUL-terminated strings, each list ended by a null pointer), the initialised
            // actions and attributes; `pid` is writable.
            check(unsafe {
                libc::posix_spawnp(
                    &mut pid,
                    path.as_ptr(),
                    actions,
                    attributes,
                    argv.as_ptr(),
                    envp.as_ptr(),
                )
            })?;
            Ok(pid)
        })();
        // SAFETY: initialised above, destroyed once, after its last use.
        unsafe { libc::posix_spawn_file_actions_destroy(actions) };
        // SAFETY: as above.
        unsafe { libc::posix_spawnattr_destroy(attributes) };
        spawned
    }

    /// [`spawn`] by `fork` and `exec` (`std::process::Command`), for a C library without the
    /// file action that closes the rest: the child sets what the worker's hook would and
    /// closes the rest itself.
    fn spawn_forked(program: &Path, theirs: OwnedFd, ld_passthrough: bool, role: Role) -> io::Result<libc::pid_t> {
        let raw = theirs.as_raw_fd();
        // SAFETY: `getpid` has no preconditions.
        let parent = unsafe { libc::getpid() };
        let mut command = Command::new(program);
        command
            .arg0("dylease-worker")
            .env_remove(CHANNEL_VAR)
            .env_remove(ZYGOTE_VAR)
            .env(role.var(), CHANNEL_FD.to_string())
            .stdin(Stdio::null());
        if !ld_passthrough {
            for (key, _) in std::env::vars_os() {
                if key.as_bytes().starts_with(b"LD_") {
                    command.env_remove(key);
                }
            }
        }
        // SAFETY: the closure runs in the forked child before `exec` and makes only
        // async-signal-safe system calls (`prctl`, `getppid`, `dup2`, `fcntl`, `close_range`,
        // `getrlimit`): no allocation, no lock, nothing another thread of the parent could hold.
        unsafe { command.pre_exec(move || in_child(raw, parent)) };
        // Its status is read by process id (`Process`), as the direct start's: std's handle
        // is not kept (dropping it neither waits nor kills).
        let child = command.spawn()?;
        drop(theirs);
        Ok(child.id() as libc::pid_t)
    }

    /// How a worker that is not this process's child is reaped: asked of the process whose
    /// child it is (its zygote), with its id; `Ok(None)` while it runs.
    pub(crate) type Reaper = std::sync::Arc<dyn Fn(u32) -> io::Result<Option<std::process::ExitStatus>> + Send + Sync>;

    /// A worker process, until reaped: its id, a descriptor of it where the kernel gives one
    /// (`pidfd_open`, Linux 5.3: its exit can be waited for with a bound, and it is signalled
    /// through it), its status once reaped (after which it is never signalled: its id may be
    /// another's), and, for a worker a zygote forked, how to reap it.
    pub(crate) struct Process {
        pid: libc::pid_t,
        pidfd: Option<OwnedFd>,
        status: std::sync::Mutex<Option<std::process::ExitStatus>>,
        /// `None`: a child of this process, reaped with `waitpid`.
        reaper: Option<Reaper>,
    }

    impl std::fmt::Debug for Process {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("Process")
                .field("pid", &self.pid)
                .field("pidfd", &self.pidfd)
                .field("status", &self.status)
                .field("forked", &self.reaper.is_some())
                .finish()
        }
    }

    impl Process {
        fn new(pid: libc::pid_t) -> Process {
            Process {
                pid,
                pidfd: pidfd_open(pid),
                status: std::sync::Mutex::new(None),
                reaper: None,
            }
        }

        /// The worker `pid` that this process's zygote forked, reaped by `reaper`. Its id stays
        /// its own until `reaper` reaps it, which only this `Process` asks for.
        pub(crate) fn forked(pid: u32, reaper: Reaper) -> io::Result<Process> {
            let pid = libc::pid_t::try_from(pid).map_err(io::Error::other)?;
            Ok(Process {
                pid,
                pidfd: pidfd_open(pid),
                status: std::sync::Mutex::new(None),
                reaper: Some(reaper),
            })
        }

        /// Its process id.
        pub(crate) fn id(&self) -> u32 {
            self.pid as u32
        }

        fn status(&self) -> std::sync::MutexGuard<'_, Option<std::process::ExitStatus>> {
            self.status.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
        }

        /// Sends it `SIGKILL`, unless it was reaped.
        pub(crate) fn kill(&self) {
            let status = self.status();
            if status.is_some() {
                return;
            }
            if let Some(pidfd) = &self.pidfd {
                // SAFETY: `pidfd_send_signal` takes an open process descriptor, a signal, a null
                // `siginfo` and no flags; the descriptor names this very process, reaped or not.
                unsafe {
                    libc::syscall(
                        libc::SYS_pidfd_send_signal,
                        pidfd.as_raw_fd(),
                        libc::SIGKILL,
                        std::ptr::null::<libc::siginfo_t>(),
                        0,
                    )
                };
            } else {
                // SAFETY: `kill` takes plain integers; the process is not reaped (checked under
                // the lock that the reap takes, and only this `Process` reaps it), so `pid` is
                // still its own.
                unsafe { libc::kill(self.pid, libc::SIGKILL) };
            }
        }

        /// Its status if it has ended (reaping it), `None` if it runs; `Err` if it cannot be
        /// waited for.
        pub(crate) fn try_wait(&self) -> io::Result<Option<std::process::ExitStatus>> {
            use std::os::unix::process::ExitStatusExt;
            let mut status = self.status();
            if let Some(ended) = *status {
                return Ok(Some(ended));
            }
            if let Some(reaper) = &self.reaper {
                return Ok(reaper(self.id())?.map(|ended| *status.insert(ended)));
            }
            let mut raw = 0;
            // SAFETY: `waitpid` of this child with `WNOHANG`; `raw` is writable.
            match unsafe { libc::waitpid(self.pid, &mut raw, libc::WNOHANG) } {
                0 => Ok(None),
                -1 => Err(io::Error::last_os_error()),
                _ => Ok(Some(*status.insert(std::process::ExitStatus::from_raw(raw)))),
            }
        }

        /// Waits at most `limit` for it to end: `true` if it may have (try [`try_wait`]),
        /// `false` if `limit` passed; `None` if it cannot be waited for so (no process
        /// descriptor): the caller sleeps instead.
        ///
        /// [`try_wait`]: Process::try_wait
        pub(crate) fn wait_exit(&self, limit: Duration) -> Option<bool> {
            let pidfd = self.pidfd.as_ref()?;
            let mut poll = libc::pollfd {
                fd: pidfd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            let millis = match limit.is_zero() {
                true => 0,
                false => limit.as_millis().clamp(1, libc::c_int::MAX as u128) as libc::c_int,
            };
            // SAFETY: `poll` is one writable `pollfd`, of an open descriptor.
            let ready = unsafe { libc::poll(&mut poll, 1, millis) };
            Some(ready != 0)
        }
    }

    /// A process descriptor of `pid` (`pidfd_open`), if the kernel gives one.
    fn pidfd_open(pid: libc::pid_t) -> Option<OwnedFd> {
        // SAFETY: `pidfd_open` takes plain integers; callers name a process not yet reaped,
        // whose id is still its own.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        // SAFETY: a descriptor `pidfd_open` just made, owned by nobody else.
        (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
    }

    /// In a zygote (which runs one thread): forks a worker on `channel`, its channel, and
    /// returns the worker's process id. The worker closes every descriptor but its channel
    /// (moved to descriptor 3), dies with the zygote (`PR_SET_PDEATHSIG`), and runs the worker
    /// with the zygote's environment, signals and limits; it never returns here.
    pub(crate) fn fork_worker(channel: OwnedFd) -> io::Result<u32> {
        // SAFETY: `getpid` has no preconditions.
        let zygote = unsafe { libc::getpid() };
        // SAFETY: a zygote runs from the early hook, before `main`, and starts no thread: the
        // child, a copy of its one thread, holds no lock another thread held.
        match unsafe { libc::fork() } {
            -1 => Err(io::Error::last_os_error()),
            0 => exit_now(match worker_after_fork(channel.as_raw_fd(), zygote) {
                Ok(channel) => run_as(Role::Worker, channel),
                Err(_) => 126,
            }),
            pid => Ok(pid as u32),
        }
    }

    /// A worker a zygote forked ahead, waiting for the channel it is to serve: the zygote
    /// forks the next while nobody waits for it, and a start is then a hand-over.
    #[derive(Debug)]
    pub(crate) struct Spare {
        pid: libc::pid_t,
        /// The zygote's end of the spare's own channel, on which its channel comes.
        handoff: Channel,
    }

    impl Spare {
        /// In a zygote (which runs one thread): forks a spare. The spare dies with the zygote
        /// (`PR_SET_PDEATHSIG`), waits for one descriptor on its own channel, and then runs
        /// as [`fork_worker`]'s worker on it; if the zygote closes its end first, it exits.
        pub(crate) fn fork() -> io::Result<Spare> {
            let (handoff, theirs) = Channel::pair()?;
            // SAFETY: `getpid` has no preconditions.
            let zygote = unsafe { libc::getpid() };
            // SAFETY: as in `fork_worker`: the zygote runs one thread.
            match unsafe { libc::fork() } {
                -1 => Err(io::Error::last_os_error()),
                0 => {
                    // The zygote's end is not the spare's: it sees the zygote's close.
                    drop(handoff);
                    // Raw: `worker_after_fork` closes every descriptor above 3, this among
                    // them, and nothing here may close one again.
                    let theirs = theirs.into_raw_fd();
                    exit_now(match spare_wait(theirs, zygote) {
                        Ok(Some(channel)) => run_as(Role::Worker, channel),
                        Ok(None) => 0,
                        Err(_) => 126,
                    })
                }
                pid => Ok(Spare { pid, handoff }),
            }
        }

        /// Hands the spare `channel`, its channel: the worker's process id.
        pub(crate) fn start(self, channel: &OwnedFd) -> io::Result<u32> {
            match self.handoff.send(b"W", &[channel.as_fd()]) {
                Ok(()) => Ok(self.pid as u32),
                Err(e) => {
                    // Dead, or as good as: ended, and reaped here, where nobody asks for it.
                    // SAFETY: `kill` and `waitpid` of this zygote's child, not reaped yet.
                    unsafe { libc::kill(self.pid, libc::SIGKILL) };
                    // SAFETY: as above; `waitpid` with no status wanted.
                    unsafe { libc::waitpid(self.pid, std::ptr::null_mut(), 0) };
                    Err(e)
                }
            }
        }
    }

    /// The spare's wait for its channel on `handoff` (see [`Spare::fork`]): `None` if the
    /// zygote closed its end first.
    fn spare_wait(handoff: RawFd, zygote: libc::pid_t) -> io::Result<Option<Channel>> {
        // The death signal first: a spare may wait long.
        // SAFETY: `prctl` with these options takes plain integers.
        if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `getppid` has no preconditions.
        if unsafe { libc::getppid() } != zygote {
            return Ok(None);
        }
        // SAFETY: `handoff` is this process's, open, and owned by nothing else in it.
        let handoff = Channel(unsafe { OwnedFd::from_raw_fd(handoff) });
        let mut buffer = [0u8; 4];
        let received = handoff.recv(&mut buffer)?;
        std::mem::forget(handoff);
        let Ok([channel]) = <[OwnedFd; 1]>::try_from(received.fds) else {
            return Ok(None);
        };
        worker_after_fork(channel.into_raw_fd(), zygote).map(Some)
    }

    /// The forked worker's set-up (see [`fork_worker`]): its channel at 3, close-on-exec, and
    /// nothing else open.
    fn worker_after_fork(channel: RawFd, zygote: libc::pid_t) -> io::Result<Channel> {
        let check = |done: libc::c_int| match done {
            -1 => Err(io::Error::last_os_error()),
            _ => Ok(()),
        };
        // SAFETY: `prctl` with these options takes plain integers.
        check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) })?;
        // The zygote may have died before the option was set: then nothing would kill this one.
        // SAFETY: `getppid` has no preconditions.
        if unsafe { libc::getppid() } != zygote {
            return Err(io::Error::other("the zygote exited while its worker started"));
        }
        // The zygote's own channel is at 3 (its spawn put it there), so the worker's is
        // elsewhere; `dup2` closes the zygote's here.
        // SAFETY: `dup2` of an open descriptor onto 3.
        check(unsafe { libc::dup2(channel, CHANNEL_FD) })?;
        // The descriptors above 3 belong to objects of the zygote's that this process never
        // uses again (it only exits).
        close_above_channel(0)?;
        // SAFETY: `dup2` just made descriptor 3 this process's channel, owned by nobody else.
        let owned = unsafe { OwnedFd::from_raw_fd(CHANNEL_FD) };
        // SAFETY: `F_SETFD` on a descriptor this function owns.
        check(unsafe { libc::fcntl(owned.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) })?;
        Ok(Channel(owned))
    }

    /// In a zygote: the status of its child `pid` if it ends within `wait` (reaping it),
    /// `None` if it runs on; `Err` if `pid` is not its child.
    pub(crate) fn reap_child(pid: u32, wait: Duration) -> io::Result<Option<i32>> {
        let pid = libc::pid_t::try_from(pid).map_err(io::Error::other)?;
        if pid <= 0 {
            return Err(io::Error::from_raw_os_error(libc::ECHILD));
        }
        let reap = || {
            let mut raw = 0;
            // SAFETY: `waitpid` of one process id with `WNOHANG`; `raw` is writable.
            match unsafe { libc::waitpid(pid, &mut raw, libc::WNOHANG) } {
                0 => Ok(None),
                -1 => Err(io::Error::last_os_error()),
                _ => Ok(Some(raw)),
            }
        };
        match reap()? {
            None => {
                // A child not reaped yet: its id is still its own.
                if let Some(ended) = Process::new(pid).wait_exit(wait)
                    && ended
                {
                    return reap();
                }
                Ok(None)
            }
            ended => Ok(ended),
        }
    }

    /// The child's side of [`spawn`], before `exec`.
    fn in_child(channel: RawFd, parent: libc::pid_t) -> io::Result<()> {
        let check = |done: libc::c_int| match done {
            -1 => Err(io::Error::last_os_error()),
            _ => Ok(()),
        };
        // SAFETY: `prctl` with these options takes plain integers.
        check(unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) })?;
        // SAFETY: as above.
        check(unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) })?;
        // The parent may have died before the option was set: then nothing would kill this child.
        // SAFETY: `getppid` has no preconditions.
        if unsafe { libc::getppid() } != parent {
            return Err(io::Error::other("the host exited while its worker started"));
        }
        if channel == CHANNEL_FD {
            // SAFETY: `F_SETFD` on the channel, which is open: it must survive `exec`.
            check(unsafe { libc::fcntl(channel, libc::F_SETFD, 0) })?;
        } else {
            // SAFETY: `dup2` of an open descriptor; the copy at 3 is not close-on-exec.
            check(unsafe { libc::dup2(channel, CHANNEL_FD) })?;
        }
        // Marked, not closed: std's own descriptors (its `exec` error pipe) keep working until
        // `exec`.
        close_above_channel(libc::CLOSE_RANGE_CLOEXEC)
    }

    /// Closes every descriptor above the channel's (3), or with `CLOSE_RANGE_CLOEXEC` as
    /// `flags` makes each close-on-exec: `close_range`, or on kernels before 5.11 each
    /// descriptor up to the limit, one by one. Only async-signal-safe system calls: it runs in
    /// a forked child.
    fn close_above_channel(flags: libc::c_uint) -> io::Result<()> {
        // SAFETY: the `close_range` system call takes plain integers; callers own every
        // descriptor above 3 (see theirs).
        let done = unsafe {
            libc::syscall(
                libc::SYS_close_range,
                (CHANNEL_FD + 1) as libc::c_uint,
                libc::c_uint::MAX,
                flags,
            )
        };
        if done == 0 {
            return Ok(());
        }
        // SAFETY: an all-zero `rlimit` is valid, and `getrlimit` writes it.
        let mut limit: libc::rlimit = unsafe { std::mem::zeroed() };
        // SAFETY: `limit` is writable.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
            return Err(io::Error::last_os_error());
        }
        let cloexec = flags & libc::CLOSE_RANGE_CLOEXEC != 0;
        for fd in CHANNEL_FD + 1..limit.rlim_cur.min(1 << 20) as RawFd {
            if cloexec {
                // SAFETY: `F_SETFD` of a descriptor the caller owns; one that is not open
                // fails with `EBADF`, harmlessly.
                unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
            } else {
                // SAFETY: as for `close_range`; a descriptor that is not open fails with
                // `EBADF`, harmlessly.
                unsafe { libc::close(fd) };
            }
        }
        Ok(())
    }

    /// A close-on-exec copy of `fd` at `lowest` or above.
    fn dup_above(fd: &OwnedFd, lowest: RawFd) -> io::Result<OwnedFd> {
        // SAFETY: `F_DUPFD_CLOEXEC` of an open descriptor.
        let copy = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, lowest) };
        if copy < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fcntl` just made `copy`, owned by nobody else.
        Ok(unsafe { OwnedFd::from_raw_fd(copy) })
    }

    #[cfg(test)]
    mod tests {
        use super::*;
        use crate::isolate::frame::{self, Kind};

        /// The start for a C library without `posix_spawn`'s close-from action (glibc before
        /// 2.34), which this machine's may have: the worker it starts greets as a worker,
        /// holds no descriptor but its standard streams and its channel, and exits cleanly
        /// when its channel closes.
        #[test]
        fn a_worker_started_by_fork_and_exec_greets_and_holds_only_its_channel() {
            if std::env::args().next().as_deref() == Some("dylease-worker") {
                // This test binary run as a worker that did not find its channel: not again.
                return;
            }
            // A descriptor of this process's, open and not close-on-exec, that the worker
            // must not inherit.
            let leak = std::fs::File::open("/dev/null").unwrap();
            // SAFETY: `F_SETFD` on a descriptor this test owns.
            assert_eq!(unsafe { libc::fcntl(leak.as_raw_fd(), libc::F_SETFD, 0) }, 0);
            let (channel, theirs) = Channel::pair().unwrap();
            let pid = spawn_forked(Path::new("/proc/self/exe"), theirs, false, Role::Worker).unwrap();
            let worker = Process::new(pid);
            let bound = Duration::from_secs(20);
            channel.set_timeouts(Some(bound), Some(bound)).unwrap();
            let hello = frame::encode(Kind::Hello, 0, &frame::greeting(std::process::id())).unwrap();
            channel.send(&hello, &[]).unwrap();
            let mut buffer = vec![0; frame::MAX_FRAME + 1];
            let received = channel.recv(&mut buffer).unwrap();
            let welcome = frame::decode(&buffer[..received.len]).unwrap();
            assert_eq!(welcome.kind, Kind::Welcome);
            assert_eq!(
                frame::read_greeting(welcome.payload).unwrap(),
                (frame::PROTOCOL, pid as u32)
            );
            let mut fds: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/fd"))
                .unwrap()
                .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
                .collect();
            fds.sort();
            assert_eq!(fds, ["0", "1", "2", "3"], "the worker's descriptors");
            drop(channel);
            assert_eq!(worker.wait_exit(bound), Some(true), "the worker exits");
            let status = worker.try_wait().unwrap().expect("the worker was reaped");
            assert!(status.success(), "the worker ended with {status}");
            drop(leak);
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// A message pass that writes its input back in pieces of 3 bytes.
    unsafe extern "C" fn in_pieces(input: *const u8, len: usize, out: *mut dylease_out, _: *mut c_void) -> i32 {
        // SAFETY: the caller hands `len` readable bytes at `input`.
        let input = unsafe { std::slice::from_raw_parts(input, len) };
        // SAFETY: `out` is the call's live `dylease_out`.
        let write = unsafe { (*out).write };
        for piece in input.chunks(3) {
            // SAFETY: `write` of the call's live `out`, called on its thread with a piece of
            // the input, readable for the call.
            if unsafe { write(out, piece.as_ptr(), piece.len()) } != 0 {
                return 1;
            }
        }
        0
    }

    /// `call_message` of [`in_pieces`] with `input`, a region of `room` bytes filled with
    /// `0xee`, and `limit`: what it returned, and the region after.
    fn called(input: &[u8], room: usize, limit: usize) -> (Called, Vec<u8>) {
        let mut region = vec![0xee; room];
        // SAFETY: `in_pieces` is a plain function with no library to stay mapped and no use
        // of its user data.
        let called = unsafe { call_message(in_pieces, std::ptr::null_mut(), input, limit, &mut region) };
        (called, region)
    }

    #[test]
    fn an_output_that_fits_the_region_stays_there_and_one_that_does_not_moves_whole() {
        let input: Vec<u8> = (0..10).collect();
        // It fits: all of it at the region's start, the rest of the region untouched.
        let (fits, region) = called(&input, 12, usize::MAX);
        assert_eq!((fits.status, fits.in_region, fits.output.len()), (0, 10, 0));
        assert_eq!(region[..10], input[..]);
        assert_eq!(region[10..], [0xee, 0xee]);
        // It outgrows the region after some pieces: all of it, in order, in the `Vec`.
        let (moved, _) = called(&input, 7, usize::MAX);
        assert_eq!((moved.status, moved.in_region), (0, 0));
        assert_eq!(moved.output, input);
        // No region: all in the `Vec`.
        let (none, _) = called(&input, 0, usize::MAX);
        assert_eq!((none.in_region, &none.output[..]), (0, &input[..]));
    }

    #[test]
    fn the_limit_counts_the_bytes_in_the_region_too() {
        let input: Vec<u8> = (0..10).collect();
        // 9 bytes allowed: the fourth piece is refused, wherever the first three went.
        for room in [0, 7, 12] {
            let (called, _) = called(&input, room, 9);
            assert!(called.overflowed, "room {room}");
            assert_eq!(called.status, 1, "room {room}");
            assert_eq!(called.in_region + called.output.len(), 9, "room {room}");
        }
    }
}
