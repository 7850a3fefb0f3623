//! The build recipe for plugin authors, with the system's own tools: `dylease header
//! --install` writes the SDK, CMake's `find_package(dylease)` + `dylease_add_plugin` builds the
//! example plugins (`examples/plugins/CMakeLists.txt`), and `pkg-config` gives the flags for a
//! build without CMake; what they build loads and really unloads. These tests need `cmake`
//! and `pkg-config` (CI installs them): without them they fail, they do not skip.

use std::path::{Path, PathBuf};
use std::process::Command;

use dylease::PluginHost;

use crate::cli::binary;
use crate::support::{Graph, GraphPass, TestDir, assert_unloaded};

/// Runs `program` with `args`, failing the test with its output if it fails.
fn run(program: &str, args: &[&str], env: &[(&str, &Path)]) -> String {
    let mut command = Command::new(program);
    command.args(args);
    for (var, value) in env {
        command.env(var, value);
    }
    let output = command.output().unwrap_or_else(|e| {
        panic!("cannot run `{program}` ({e}): this test needs it installed (`.ci/run` installs it)")
    });
    assert!(
        output.status.success(),
        "`{program} {}` failed:\n{}{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

/// Writes the SDK under `prefix` with the real binary.
fn install_sdk(prefix: &Path) {
    let listing = run(
        binary().to_str().unwrap(),
        &["header", "--install", prefix.to_str().unwrap()],
        &[],
    );
    assert_eq!(listing.lines().count(), 5, "{listing}");
}

/// Loads every pass of `lib` on a worker thread (the layout plugin's thread-local then ends
/// with it), drops the last lease, and checks that the library left the process. Before
/// that, its manifest (read without running it) must be complete and declare exactly the
/// passes it then registers.
fn load_run_and_unload(lib: &Path) {
    // SAFETY: the library is the example plugin this test just built, whose code is sound.
    let host = unsafe { PluginHost::builder().file(lib) }.build().unwrap();
    let catalog = host.catalog().unwrap();
    let manifest = catalog[0].manifest().expect("the recipe's plugin carries a manifest");
    assert!(manifest.is_complete());
    let mut declared: Vec<_> = manifest
        .passes()
        .iter()
        .map(|p| (p.name.clone(), p.interface.clone()))
        .collect();
    declared.sort();
    let lease = host.acquire().unwrap();
    let mut registered: Vec<_> = lease
        .passes()
        .iter()
        .map(|p| (p.name().to_owned(), p.interface().map(str::to_owned)))
        .collect();
    registered.sort();
    assert_eq!(declared, registered, "{}", lib.display());
    assert_eq!(manifest.name(), lease.plugins()[0].name());
    assert!(
        !lease.plugins()[0].pinning().expected(),
        "{:?}",
        lease.plugins()[0].pinning()
    );
    let ran = std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let mut graph = Graph { nodes: 8, rewrites: 0 };
                for pass in lease.passes_of::<GraphPass>().expect("mapped") {
                    // SAFETY: `graph` is a valid `demo_graph`, and `lease` is alive.
                    unsafe { pass(&mut graph) };
                }
                graph.rewrites
            })
            .join()
            .unwrap()
    });
    assert!(ran > 0, "no pass ran");
    drop(lease);
    assert_unloaded(lib);
    assert_eq!(host.stats().pinned_libraries, 0);
}

/// A copy of a built library in a directory that passes the trust check.
fn placed(dir: &TestDir, built: &Path, name: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let to = dir.path().join(name);
    std::fs::copy(built, &to).unwrap();
    std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).unwrap();
    to
}

#[test]
fn the_cmake_recipe_builds_the_cpp_example_plugin_with_its_manifest_so_that_it_unmaps_after_its_last_lease() {
    let dir = TestDir::new("cmake_recipe");
    let prefix = dir.path().join("sdk");
    install_sdk(&prefix);
    let build = dir.path().join("build");
    let examples = crate::support::crate_root().join("examples/plugins");
    run(
        "cmake",
        &[
            "-S",
            examples.to_str().unwrap(),
            "-B",
            build.to_str().unwrap(),
            &format!("-DCMAKE_PREFIX_PATH={}", prefix.display()),
        ],
        &[],
    );
    run("cmake", &["--build", build.to_str().unwrap()], &[]);
    let plugins = TestDir::new("cmake_recipe_plugins");
    for name in ["liblayout.so", "libfusion.so"] {
        load_run_and_unload(&placed(&plugins, &build.join(name), name));
    }
}

#[test]
fn pkg_config_gives_the_recipes_flags_to_a_build_without_cmake() {
    let dir = TestDir::new("pkg_config_recipe");
    let prefix = dir.path().join("sdk");
    install_sdk(&prefix);
    let pc_path = prefix.join("lib/pkgconfig");
    let flags = run(
        "pkg-config",
        &["--cflags", "--libs", "dylease"],
        &[("PKG_CONFIG_PATH", &pc_path)],
    );
    assert!(
        flags.contains("-fvisibility=hidden") && flags.contains("-Wl,--version-script="),
        "{flags}"
    );
    let examples = crate::support::crate_root().join("examples/plugins");
    let built = dir.path().join("liblayout.so");
    let cxx = std::env::var("CXX").unwrap_or_else(|_| "c++".into());
    let mut args: Vec<String> = vec!["-shared".into()];
    args.extend(flags.split_whitespace().map(str::to_owned));
    args.extend(
        ["layout.cpp", "layout_transpose.cpp"]
            .iter()
            .map(|source| examples.join(source).display().to_string()),
    );
    args.extend(["-o".into(), built.display().to_string()]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    run(&cxx, &args, &[]);
    let plugins = TestDir::new("pkg_config_recipe_plugins");
    load_run_and_unload(&placed(&plugins, &built, "liblayout.so"));
}

#[test]
fn the_cmake_recipe_with_sign_key_signs_the_plugin_after_its_build() {
    let dir = TestDir::new("cmake_recipe_signed");
    let prefix = dir.path().join("sdk");
    install_sdk(&prefix);
    let key = dir.path().join("publisher");
    run(
        binary().to_str().unwrap(),
        &["keygen", "--out", key.to_str().unwrap()],
        &[],
    );
    let project = dir.path().join("project");
    std::fs::create_dir(&project).unwrap();
    let fusion = crate::support::crate_root().join("examples/plugins/fusion.c");
    std::fs::write(
        project.join("CMakeLists.txt"),
        format!(
            "cmake_minimum_required(VERSION 3.13)\nproject(signed C)\nfind_package(dylease REQUIRED)\n\
             dylease_add_plugin(fusion SOURCES {} SIGN_KEY {})\n",
            fusion.display(),
            key.display()
        ),
    )
    .unwrap();
    let build = dir.path().join("build");
    run(
        "cmake",
        &[
            "-S",
            project.to_str().unwrap(),
            "-B",
            build.to_str().unwrap(),
            &format!("-DCMAKE_PREFIX_PATH={}", prefix.display()),
            &format!("-DDYLEASE_COMMAND={}", binary().display()),
        ],
        &[],
    );
    run("cmake", &["--build", build.to_str().unwrap()], &[]);
    let plugins = TestDir::new("cmake_recipe_signed_plugins");
    let lib = placed(&plugins, &build.join("libfusion.so"), "libfusion.so");
    let mut keyring = dylease::sign::Keyring::new();
    keyring.trust(dylease::sign::PublicKey::read_file(&key.with_file_name("publisher.pub")).unwrap());
    // SAFETY: the library is the example plugin this test just built, whose code is sound.
    let host = unsafe { PluginHost::builder().file(&lib) }
        .require_signed(keyring)
        .build()
        .unwrap();
    let lease = host.acquire().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(lease.plugins()[0].name(), "fusion");
}
