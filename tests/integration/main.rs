//! dylease's integration tests: real C plugins, real unload (on Linux glibc), and static
//! plugins everywhere. One binary, one module per promise area; fixtures are built once per
//! process and every test works on copies of its own. The `dylease` command's tests are the
//! CLI crate's (`dylease-cli/tests/integration`).

// A test vouches for its own fixtures once per host it builds (`builder().file(a).file(b)`) and
// for the pass types it registered once per lookup group: one `// SAFETY:` reason covers the
// block, as the fixtures are this suite's own.
#![allow(clippy::multiple_unsafe_ops_per_block)]

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod support;

mod bounded;

/// Every `acquire()` of the suite waits at most a minute for other threads (another load of
/// its host, the previous set's unload): a bug that never finishes one (a set's drop that
/// never marks its unload) fails the tests that wait for it instead of hanging the suite. Set
/// before `main`, so before any test runs. `DYLEASE_TEST_ACQUIRE_BOUND_SECS` shortens it:
/// `scripts/mutants.sh` does, so that a mutant that never finishes an unload fails every test
/// waiting for one within cargo-mutants' timeout (each acquire of the suite waits for
/// milliseconds when nothing is broken).
#[cfg(target_os = "linux")]
#[used]
#[unsafe(link_section = ".init_array")]
static BOUND_ACQUIRES: extern "C" fn() = {
    extern "C" fn bound() {
        let secs = match std::env::var("DYLEASE_TEST_ACQUIRE_BOUND_SECS") {
            Err(_) => 60,
            Ok(secs) => match secs.parse::<u64>() {
                Ok(secs) if secs > 0 => secs,
                _ => panic!("DYLEASE_TEST_ACQUIRE_BOUND_SECS must be a whole number of seconds above 0"),
            },
        };
        dylease::set_acquire_bound(Some(std::time::Duration::from_secs(secs)));
    }
    bound
};

#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod abi_v2;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod attack;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod cpp_unload;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod dependencies;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod discovery;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod elf_headers;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod failure;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod generation_protocol;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod generations;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod header;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod identity;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod isolated;
mod logger;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod manifest;
mod observability;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod on_demand;
mod panic_abort;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod parse_cache;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod plugin_reentry;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod policy;
#[cfg(all(target_os = "linux", target_env = "gnu", feature = "python"))]
mod python;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod reload;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod rust_plugin;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod session_and_compiler;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod sharing;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod signed;
mod static_plugins;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod swapped_after_check;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod threads;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod trust;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod typed;
#[cfg(all(target_os = "linux", target_env = "gnu"))]
mod waits;
#[cfg(all(target_os = "linux", target_env = "gnu", feature = "watch"))]
mod watch;
