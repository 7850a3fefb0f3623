//! Trust and failure behaviour: what dylease checks before a plugin's code runs, in which
//! order, what it cannot check, and the file-identity guarantee.
//!
//! A plugin is native code running in your process: loading it runs its constructors, and
//! dylease cannot sandbox it. Naming a directory or file as a plugin source is vouching for
//! the libraries in it, which is why the builder methods that do so are `unsafe fn`s. By
//! default ([`TrustPolicy::Strict`](crate::TrustPolicy::Strict)) dylease also refuses files
//! that other users could have changed. This crate uses `unsafe`, fenced in small modules,
//! each block with the reason it is sound; the crate denies `unsafe_code` and allows it only
//! in the platform layer's raw calls, the calls into a plugin's library, CPython's calls, the
//! registration side of the plugin ABI, the synchronisation shim's raw parts, the untyped
//! pass lookup, the call of a message pass and the worker of isolated sets, and the `unsafe`
//! builder methods, each with the reason (`grep -rn 'allow(unsafe_code)' src`).
//!
//! Every bad input is refused with an error that names the file (or static plugin) and the
//! cause, and a failed load has closed every library it opened: nothing stays loaded, and the
//! next `acquire()` tries again ([`api`](super::api#errors), which also covers
//! [`LoadPolicy::SkipFailed`](crate::LoadPolicy::SkipFailed)).
//!
//! # What dylease checks, in this order
//!
//! 1. **Discovery**, before any library opens: a missing or unreadable directory, a file
//!    where a directory was expected, a relative directory in an environment variable (the
//!    plugins would depend on the current directory), a dangling symlink, a symlink loop, a
//!    name too long for the file system. File names that are not UTF-8 load and are reported
//!    exactly.
//! 2. **Trust**, before any library opens (`TrustPolicy::Strict`, the default on Unix; set
//!    with [`HostBuilder::trust`](crate::HostBuilder::trust)): a file that another user could
//!    have chosen is refused with [`Error::Untrusted`](crate::Error::Untrusted) and none of
//!    its code runs. The path is resolved one component at a time on open directory
//!    descriptors (`openat`, `fstatat`, `readlinkat`; a relative path, even a bare
//!    `libx.so`, from the current directory), and everything traversed counts: every
//!    directory up to `/` on the way to the file and to each symlink's target, every symlink,
//!    and the file. Each must be owned by the effective user or root; the file and the
//!    directories must not be writable by group or others, except a directory with the sticky
//!    bit (like `/tmp`), where others cannot rename what they do not own. The error names the
//!    plugin as given, the directory, symlink or file at fault (and the symlinks that led to
//!    it), its owner or mode, and the `chmod` or `chown` that fixes it. The file is then
//!    opened once (not following a symlink, not blocking on a FIFO); a file whose device and
//!    inode differ from the one checked was replaced since, by this user or root (only they
//!    can change a directory that passed), so it is checked in its turn (up to 8
//!    replacements), and loaded if it passes. (An [on-demand](super::on_demand) plugin is held
//!    to the file judged at `acquire()` instead: at its first use its trust is judged again,
//!    and a file replaced, removed or rewritten since is refused with
//!    [`OpenCause::ReplacedSinceAcquire`](crate::OpenCause::ReplacedSinceAcquire).) **The
//!    loader maps that descriptor**: see [below](#the-file-that-runs-is-the-file-that-was-checked).
//!    **What a plugin pulls in is mapped by dylease, never searched for by the loader**: the
//!    libraries it needs are resolved once, in glibc's order, each one found in a run path
//!    checked on its descriptor like a plugin file and mapped from it before the plugin,
//!    dependencies first ([`sharing`](super::sharing#dependencies) lists what `Strict`
//!    covers, what it refuses and what stays outside it).
//!    [`TrustPolicy::Permissive`](crate::TrustPolicy::Permissive) turns the check off.
//! 3. **The ELF headers**, before `dlopen`: a file that is not ELF, a truncated library
//!    (glibc would map the missing pages, and the process would die of `SIGBUS` inside
//!    `dlopen`; every loadable segment is checked against the file's length wherever the
//!    program header table is, reading exactly that table), a library for another
//!    architecture (which glibc reports as "No such file or directory"), for the other word
//!    size or byte order, an object file or an executable. Then **the structure the loader
//!    relies on**, which glibc does not check and would crash on (`SIGSEGV`, `SIGBUS` or an
//!    assertion inside `dlopen`): PT_LOAD segments in order, disjoint, readable, with a
//!    power-of-two `p_align`, `p_offset ≡ p_vaddr (mod p_align)`, `p_filesz ≤ p_memsz`,
//!    inside the file; PT_DYNAMIC inside a file-backed part of a PT_LOAD and terminated by
//!    DT_NULL within it; PT_TLS, PT_GNU_RELRO, PT_PHDR, PT_NOTE, PT_GNU_PROPERTY and
//!    PT_GNU_EH_FRAME inside the image; the tables the loader dereferences (DT_STRTAB,
//!    DT_SYMTAB, DT_HASH, DT_GNU_HASH, DT_RELA, DT_REL, DT_RELR, DT_JMPREL, DT_INIT_ARRAY,
//!    DT_FINI_ARRAY, DT_VERSYM, DT_VERDEF, DT_VERNEED) aligned, with their sizes and entry
//!    sizes, inside loaded file-backed ranges; strings inside the string table; hash chains,
//!    symbol addresses, version indices, relocation targets (writable segments) and symbol
//!    indices, DT_RELACOUNT, and the init and fini arrays' slots (each relocated, to code);
//!    DT_INIT, DT_FINI and init/fini entries at a function's start by the unwind tables. The
//!    error names the file and the field. Not checked, as only the loader or the code itself
//!    could: which relocations there are and what they compute, symbol resolution, and code
//!    (a DT_INIT moved into code the unwind tables do not describe). A seeded property test
//!    loads 600 copies of real C, C++ and Rust plugins with header and dynamic-section fields
//!    mutated, each in a child process; the outcome table is in the repository's
//!    `BENCHMARKS.md` ("Corrupt files: the ELF structure check").
//! 4. **The loader**, with `RTLD_NOW`: a missing dependency or symbol fails the load, not a
//!    later call.
//! 5. **The descriptor**: no `dylease_plugin_v1` of the library's own (one that `dlsym` finds
//!    in a library it depends on, `DT_NEEDED`, is [`Error::MissingEntry`](crate::Error::MissingEntry)
//!    naming both: otherwise that plugin's code would run twice on one mapping), a NULL
//!    descriptor, an ABI version other than 1 or 2, a NULL, empty, non-UTF-8 or
//!    longer-than-256-byte name (at most 257 bytes are read), a NULL `register_passes`; a
//!    non-zero `on_load` (ABI v2), which fails the plugin before any registration and without
//!    `on_unload`. A plugin with a [manifest](super::manifests) has its ABI version judged
//!    before it is mapped.
//! 6. **Registration**: a non-zero return from `register_passes`; a refused `add_pass` (a
//!    NULL, empty, non-UTF-8 or over-long name, a NULL function, a name the plugin already
//!    used) fails the plugin even when the plugin ignores the refusal; `add_pass` through a
//!    registrar kept past its registration is refused; a pass name registered by two plugins
//!    is [`Error::DuplicatePass`](crate::Error::DuplicatePass), naming both.
//! 7. **Static plugins**: an error or a panic in the register function fails the load naming
//!    the plugin; a panic in an unload hook is caught, logged as an error naming the plugin,
//!    and the unload goes on. Either way the next `acquire()` works.
//! 8. **After an unload**, every library is looked for in the loader's list of loaded objects
//!    (`dl_iterate_phdr`, by load address and name; nothing is opened), once every library of
//!    the set is closed and before anything can map the file again: one the platform kept
//!    loaded (`-z nodelete`, GNU unique symbols, thread-local destructors, another user of the
//!    same file) is logged as a warning, once per file, with the cause its file showed before
//!    loading and the fix, and counted once per mapping in
//!    [`Stats::pinned_libraries`](crate::Stats::pinned_libraries). Its next load still
//!    registers its passes afresh.
//!
//! Each case is a test in `tests/integration/` (`failure`, `discovery`, `trust`,
//! `dependencies`, `elf_headers`, `policy`, `static_plugins`, `generations`; `corruption`,
//! which loads each damaged file in a `dylease check` process, is in
//! `dylease-cli/tests/integration/`) that fails if the protection is removed; the ones that
//! plant files as another user need root ([`testing`](super::testing#tests-that-need-root)).
//!
//! # What the checks decided is kept: the parse cache
//!
//! What the ELF checks (and the linkage, manifest and pin prediction) decided about a file is
//! kept for the process, keyed by the status of the descriptor to be mapped (device, inode,
//! size, modification and change times in ns, birth time), so a file loaded again unchanged
//! is not parsed again. A file changed less than 2.1 s before it is opened is not cached (a
//! same-size rewrite within one timestamp tick could keep its status). Since a write through a
//! shared mapping keeps the status, every load also reads again what the cached verdict,
//! manifest and linkage were read from (the headers, the note segments, the dynamic section
//! and its strings: a few KB) and parses the file again if those bytes changed: a manifest's
//! ABI version or a needed library written that way is judged at the next load. Where a file
//! system does not update the change time, or NFS caches attributes, a rewrite of the other
//! tables (symbols, relocations) can still hide from the key (a change only a user allowed to
//! write the file can make: root or this process's own user). Install by rename (as `dylease
//! install` does), which is never missed. The trust check is never cached: it runs at every
//! load, on what the linkage names. ([`internals`](super::internals) has the cache's
//! protocol.)
//!
//! # The file that runs is the file that was checked
//!
//! Each plugin file is opened once; the trust and ELF checks read that descriptor, the
//! process-wide registry knows the instance by its device and inode, and the platform loader
//! maps that same descriptor (given as `/proc/self/fd/N`), not the path. So a rename over the
//! path at any moment after the check cannot put another file's code under the checked
//! identity: the file whose code runs is the file the checks read, and no other file can ever
//! be taken for its instance (the descriptor stays open while it is mapped, so its inode
//! number is not reused).
//!
//! A library whose run path uses `$ORIGIN` is mapped through its directory's descriptor
//! instead (so that `$ORIGIN` is its directory; glibc has no way to map a descriptor under
//! another directory name): the loader then finds it by name, so the name is compared with
//! the checked file just before (a replaced file is checked first) and the mapping just
//! after; under `Strict` such a library is refused in a sticky directory others can write.
//! What is left is the instant between that comparison and the loader's open, in which only
//! the directory's owner or root can rename a file in (refused after its constructors ran).
//! The protocol, for maintainers, is I9 in [`internals`](super::internals).
//!
//! # What dylease does not do, and cannot
//!
//! - **Sandbox a plugin.** A plugin is native code: once opened, its constructors, passes and
//!   unload code run with all of the process's rights, and dylease cannot stop one from
//!   crashing, corrupting memory, calling `exit`, starting threads or keeping pointers into
//!   the host. It checks what a file is and who could have written it, never what its code
//!   does.
//! - **Check beyond ownership and modes.** The trust check looks at the library, its
//!   symlinks, every directory up to `/`, its run path and the libraries it needs as above,
//!   not at access control lists, signatures, `LD_LIBRARY_PATH` or the system's library
//!   directories. It protects against other users, not against root or this process's own
//!   user. On platforms other than Unix it checks nothing.
//! - **Vouch for the code.** No check shows that a plugin's code is sound, so the builder
//!   methods that name native code ([`HostBuilder::dir`](crate::HostBuilder::dir), `file`,
//!   `env`, and [`init_global`](crate::init_global) for the process-wide host) are
//!   `unsafe fn`s: their caller vouches for what the named libraries run, as
//!   `libloading::Library::new` asks. `acquire()`, `reload()` and static plugins stay safe
//!   ([`faq`](super::faq) gives the reasons). The default [`global()`](crate::global) host
//!   reads `DYLEASE_PLUGIN_PATH`, which it ignores in a process with elevated rights
//!   (`AT_SECURE`), like the platform loader.
//! - **Catch a lying descriptor.** A descriptor must hold what the ABI says: a name without
//!   its terminating NUL, or a descriptor pointer into garbage, is undefined behaviour that no
//!   check can catch.
//!
//! # Install plugins by rename, never in place
//!
//! A library rewritten while a host maps it or is mapping it (`cp new.so plugins/libx.so`
//! over the old file) kills that host with `SIGBUS` inside the loader, and no check can
//! prevent it: the ELF check covers files at rest. Use `dylease install FILE... DIR` (it
//! checks each file under a temporary name inside DIR, flushes it and renames it into place;
//! [`cli`](super::cli)), or copy the new file to a temporary name in the same directory and
//! `mv` it over the old one: the host then sees either the old file or the new one, whole.
//! GNU `install` does not do this: it removes the old file and writes the new one under its
//! final name. `dylease check` warns about a plugin file that a process has open for writing
//! (on Linux, among the processes whose descriptors the user running it may read).
