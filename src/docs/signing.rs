//! Signed plugins: a host that loads only what a publisher it trusts signed
//! ([`HostBuilder::require_signed`](crate::HostBuilder::require_signed)), what that protects
//! against next to the ownership check ([`trust`](super::trust)), how to sign in a build, and
//! what it costs.
//!
//! # Turning it on
//!
//! The publisher makes a key pair once (`dylease keygen --out publisher.key`: the secret key,
//! mode 0600, and `publisher.key.pub`), signs each release (`dylease sign`), and ships the
//! public key with the host. The host trusts it:
//!
//! ```no_run
//! use dylease::sign::{Keyring, PublicKey};
//!
//! let mut keyring = Keyring::new();
//! keyring
//!     .trust(PublicKey::read_file("/etc/app/publisher.key.pub".as_ref())?)
//!     // No rollback below serial 14 of `greeter` (a vulnerable 13 is refused).
//!     .require_serial("greeter", 14);
//! // SAFETY: /opt/app/plugins holds this application's own plugins.
//! let host = unsafe { dylease::PluginHost::builder().dir("/opt/app/plugins") }
//!     .require_signed(keyring)
//!     .build()?;
//! let lease = host.acquire()?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! From then on every library plugin, every library a plugin needs that dylease maps itself
//! (under [`TrustPolicy::Strict`](crate::TrustPolicy::Strict): those found through a run
//! path; the system's libraries are the system's), and every source file of a Python plugin
//! must carry a valid signature by a trusted key, not revoked
//! ([`Keyring::revoke`](crate::sign::Keyring::revoke)), under the plugin's manifest name, at or
//! above the minimum serial for that name. Anything else is refused before any of its code
//! runs, with [`Error::Signature`](crate::Error::Signature): it names the file, the key its
//! signature names (or none) and the fix. [`PluginHost::catalog`](crate::PluginHost::catalog)
//! verifies too and shows the signer ([`CatalogEntry::signature`](crate::CatalogEntry::signature));
//! `dylease inspect` shows it, `dylease verify` gives the verdict, and `dylease install
//! --keyring` refuses a copy that does not verify, or that is older than the signed plugin it
//! replaces, before it runs any of it.
//!
//! # The threat model
//!
//! Ownership trust answers "could another user have chosen these bytes"; a signature answers
//! "did the publisher we trust produce these bytes, as this release". Each row is someone, and
//! what they can make a host run.
//!
//! | Who | Ownership trust (`Strict`) alone | Signatures alone (`require_signed`, `Permissive`) | Both |
//! |---|---|---|---|
//! | Another user who can write the plugin directory, or a directory on the way | refused: the directory is writable by others | cannot make unsigned or changed bytes run; can put in another signed plugin (refused if its name is not the one its manifest says), an older signed release (refused below the keyring's minimum serial), or delete plugins | refused |
//! | Another user who can write the plugin file itself | refused: the file is writable by others | the file is copied into a sealed memory file and verified there: their bytes never run, before or after the load | refused |
//! | Whoever controls the copy on its way (a mirror, an artifact store, a build cache), without the key | runs what arrived, once installed with the right owner and mode | refused unless the bytes are the ones signed | refused |
//! | The host's user or root rewriting a file in place during a load (an installer that writes over the file) | the loader may map half-written bytes (a `SIGBUS`, or other code) | the read lease holds the write back from before the digest until the library is mapped; a file already open for writing is refused. Once mapped, a later write reaches the mapped pages, as for any library | as signatures alone |
//! | A library the plugin needs, changed | found through a run path: checked for owner and mode like the plugin | verified only where dylease maps it: under `Permissive` none is, so a plugin with a run path is refused | each library found through a run path verified, held and mapped from its checked descriptor |
//! | The holder of a trusted secret key (a stolen one too) | — | anything signed loads, until the hosts revoke its id | as signatures alone |
//! | The host's own user or root (`LD_PRELOAD`, `ptrace`, editing the host) | nothing dylease checks helps | nothing helps | nothing helps |
//!
//! Not covered by either: the system's libraries and `LD_LIBRARY_PATH` (the process owner's
//! choice), a withheld newer release (a minimum serial is the host's configuration), and
//! what a plugin does once it runs (dylease cannot sandbox it; see
//! [isolated sets](super::isolation) for faults).
//!
//! # The bytes that run are the bytes verified
//!
//! The host digests the file it is about to have the loader map, on the descriptor the loader
//! is given (`/proc/self/fd/N`, the identity guarantee of [`internals`](super::internals)),
//! at every load: a verdict is never kept under a file's status, which a rewrite in place
//! within one timestamp tick would not change. Between the digest and the mapping the bytes
//! are held still by the kernel:
//!
//! - **A read lease** (`fcntl(F_SETLEASE, F_RDLCK)`) on that descriptor, taken before the
//!   digest and released once the loader returned: the kernel grants it only while nobody
//!   has the file open for writing (the load is then refused: "open for writing by another
//!   process"), and while it is held, any open for writing or truncation blocks until the
//!   release (at most `/proc/sys/fs/lease-break-time` seconds, after which the kernel breaks
//!   it; the loader maps the file within that). A writer's open makes the kernel signal the
//!   host: dylease asks for `SIGURG`, whose default action is to ignore it, instead of
//!   `SIGIO`, whose default ends the process. `$ORIGIN` and debuggers see what they see
//!   without signatures: the loader's name of the library is `/proc/self/fd/N` (or its
//!   directory's name for it, for a library whose run path uses `$ORIGIN`), and
//!   `/proc/PID/maps` shows the file's path.
//! - **A sealed copy** where no lease can be taken (the file is another user's and the host
//!   lacks `CAP_LEASE`, as for a root-owned plugin and a host that is not root; a file system
//!   without leases, such as NFS or FUSE), and for a file others can write (a lease would
//!   only hold them off until the release, and their later writes would reach the mapped
//!   pages): the file is copied into a `memfd` (`memfd_create`), sealed against every write,
//!   growth and shrinking (`F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL`), the
//!   copy is verified, and the loader maps the copy, never the file. The file's status after
//!   the copy must be the one read when it was opened (its ELF facts were read from it).
//!   The registry still knows the instance by the file's identity, so hosts share it as
//!   usual. What changes: the loader is given the copy's descriptor, so `$ORIGIN` is
//!   `/proc/self/fd` (a plugin whose run path uses `$ORIGIN` still loads under `Strict`,
//!   which maps its libraries before it, but its own later `dlopen("$ORIGIN/...")` finds
//!   nothing); `/proc/PID/maps`, `dladdr` and debuggers show `/memfd:dylease:NAME (deleted)`
//!   instead of the path (symbols by build id still resolve); and the copy's pages are
//!   private to the process, not shared with the page cache (memory: one copy of the file
//!   per process while it is mapped).
//!
//! Both are Linux's: on other platforms the loader opens files by path and nothing holds their
//! bytes still, so a host that requires signatures refuses every library plugin there, saying
//! so.
//!
//! A Python plugin's sources are read into memory from the checked descriptors before any of
//! them runs, checked against the signed index, and compiled from those bytes: no lease is
//! needed, nothing is read again.
//!
//! Isolated sets (`HostBuilder::isolated`, the `isolate` feature: [`isolation`](super::isolation))
//! verify in the host and map in the worker process: the host sends the worker the very
//! descriptor it verified, for the plugin and each library it needs (the leased checked
//! descriptor, or the sealed copy, which the worker checks is sealed and gives its loader as
//! `/proc/self/fd/N`), and holds each lease until the worker has answered; the worker opens
//! no path and verifies nothing itself. `/proc/PID/maps` of the worker shows what it would
//! show in the host.
//!
//! On-demand sets ([`HostBuilder::on_demand`](crate::HostBuilder::on_demand)) verify each
//! plugin when it is judged at `acquire()` (so an on-demand acquire reads every plugin file:
//! it is not judged by its status as without signatures), and again, held still, when a first
//! use maps it; a file changed in between is refused, as without signatures.
//!
//! # Signing in a build
//!
//! Sign last: `strip` rewrites the file from its ELF headers and drops the block, as does any
//! tool that rewrites the library. Signing is deterministic; signing a signed file again
//! replaces its block.
//!
//! CMake, with the package `dylease header --install` writes: `SIGN_KEY` adds a post-build
//! step that runs `dylease sign` (found on `PATH`, or named by `-DDYLEASE_COMMAND=...`):
//!
//! ```cmake
//! find_package(dylease REQUIRED)
//! dylease_add_plugin(greeter SOURCES greeter.c SIGN_KEY ${CMAKE_SOURCE_DIR}/keys/publisher.key)
//! ```
//!
//! Cargo has no post-build step: sign after the build, in the release script.
//!
//! ```sh
//! cargo build --release -p greeter
//! dylease sign target/release/libgreeter.so --key keys/publisher.key --serial 14
//! dylease verify target/release/libgreeter.so --keyring keys/publisher.key.pub
//! ```
//!
//! The name defaults to the manifest's plugin name (`export_plugin!`, `DYLEASE_PLUGIN`); a
//! library without a manifest (one a plugin needs) is signed with `--name`. The serial
//! defaults to the current time in seconds, so a later signing is a newer release; give it
//! explicitly to number releases yourself. A Python file or package is signed the same way:
//! `dylease sign greeter.py --key ...` writes `greeter.py.dylease-sig` beside it,
//! `dylease sign greeter/ --key ...` writes `greeter/.dylease-sig`, listing every `.py` file
//! below it. Install a signed package as a whole (`dylease install`, which exchanges the
//! trees); a single signed `.py` file and its index are two files, which `dylease install
//! --keyring` refuses to install one after the other (make it a package).
//!
//! # What it costs
//!
//! Per load, for each library verified: one streamed SHA-256 of the file (64 KiB reads from
//! the page cache; the `sha2` crate uses the processor's SHA instructions where it has them),
//! a lease taken and released (two `fcntl`s), and one Ed25519 check per signed statement the
//! process has not checked before: checks that passed are remembered for the process, keyed
//! by a digest of the key, the signature and the statement (which holds the image's digest),
//! never by a file's status, so a library loaded again costs its digest only. A sealed copy
//! adds a copy of the file. An on-demand acquire reads every plugin file. The measured ratios
//! (a first load of 16 signed plugins and a cold cycle against unsigned ones, the digest per
//! MiB against `sha2`'s raw speed) are in `BENCHMARKS.md` (`benches/compare.rs`, arm
//! `signed`).
//!
//! A future fast path: on a file system with fs-verity, the kernel keeps a Merkle tree of a
//! sealed file and answers its digest in constant time (`FS_IOC_MEASURE_VERITY`), and a file
//! with verity enabled cannot be written at all. dylease does not use it yet: the signed
//! digest would have to be fs-verity's (a SHA-256 Merkle root, not a flat SHA-256), and the
//! file systems this was measured on did not have it enabled (`EOPNOTSUPP`).
