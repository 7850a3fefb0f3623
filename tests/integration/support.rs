//! Fixtures: C plugins compiled once per test process, copied into a directory of each
//! test's own, and the checks that prove a library really left the address space.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

#[path = "../support/cc.rs"]
mod cc;

/// The C test plugins, by fixture name: sources and extra compiler arguments.
fn recipe(name: &str) -> (Vec<&'static str>, Vec<String>) {
    let numbered = |n: &str| {
        (
            vec!["numbered.c"],
            vec![format!("-DPLUGIN_NAME=\"{n}\""), format!("-DPASS_NAME=\"{n}_pass\"")],
        )
    };
    match name {
        "arith" => (vec!["arith.c"], vec![]),
        "ctor" => (vec!["ctor.c"], vec![]),
        "ctor_nodelete" => (vec!["ctor.c"], vec!["-Wl,-z,nodelete".into()]),
        "noentry" => (vec!["noentry.c"], vec![]),
        "by_hand" => (vec!["by_hand.c"], vec![]),
        "by_hand_abi2" => (vec!["by_hand.c"], vec!["-DABI=2".into()]),
        "by_hand_null_descriptor" => (vec!["by_hand.c"], vec!["-DNULL_DESCRIPTOR".into()]),
        "by_hand_null_name" => (vec!["by_hand.c"], vec!["-DNAME=0".into()]),
        "by_hand_empty_name" => (vec!["by_hand.c"], vec!["-DNAME=\"\"".into()]),
        "by_hand_bad_utf8_name" => (vec!["by_hand.c"], vec!["-DNAME=\"bad\\xff\"".into()]),
        "by_hand_null_register" => (vec!["by_hand.c"], vec!["-DNULL_REGISTER".into()]),
        "by_hand_register_fails" => (vec!["by_hand.c"], vec!["-DREGISTER_RESULT=-7".into()]),
        "by_hand_null_function" => (vec!["by_hand.c"], vec!["-DNULL_FUNCTION".into()]),
        "by_hand_unresolved" => (vec!["by_hand.c"], vec!["-DUNRESOLVED".into()]),
        "by_hand_stale" => (vec!["by_hand.c"], vec!["-DSTALE".into()]),
        "duplicate" => (vec!["duplicate.c"], vec![]),
        "noisy" => (vec!["noisy.c"], vec![]),
        "cpp_multi" => (vec!["multi_a.cpp", "multi_b.cpp"], vec![]),
        n if n.starts_with('p') => numbered(n),
        other => panic!("no test plugin called {other}"),
    }
}

/// The path of the compiled fixture `name`, building it on first use in this process.
pub fn fixture(name: &str) -> PathBuf {
    static BUILT: OnceLock<Mutex<HashMap<String, PathBuf>>> = OnceLock::new();
    let mut built = BUILT
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(path) = built.get(name) {
        return path.clone();
    }
    let out_dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fixtures");
    fs::create_dir_all(&out_dir).unwrap();
    let (sources, args) = recipe(name);
    let plugins = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/plugins");
    let sources: Vec<PathBuf> = sources.iter().map(|s| plugins.join(s)).collect();
    let sources: Vec<&Path> = sources.iter().map(PathBuf::as_path).collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = out_dir.join(format!("lib{name}.so"));
    let path = cc::compile_plugin(&sources, &out, &args).unwrap_or_else(|e| panic!("{e}"));
    built.insert(name.to_owned(), path.clone());
    path
}

/// A directory of one test's own, so its library copies have paths (and inodes) no other
/// test loads: glibc would otherwise hand back another test's mapping.
pub struct TestDir(PathBuf);

impl TestDir {
    pub fn new(test: &str) -> TestDir {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("t")
            .join(format!("{test}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&path);
        fs::create_dir_all(&path).unwrap();
        TestDir(path.canonicalize().unwrap())
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Copies fixture `name` into this directory as `file`.
    pub fn add(&self, name: &str, file: &str) -> PathBuf {
        let to = self.0.join(file);
        fs::copy(fixture(name), &to).unwrap();
        to
    }

    /// A subdirectory.
    #[allow(dead_code)]
    pub fn sub(&self, name: &str) -> PathBuf {
        let to = self.0.join(name);
        fs::create_dir_all(&to).unwrap();
        to
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Whether `path` is mapped into this process, from `/proc/self/maps`: the kernel's view,
/// which no loader bookkeeping can fake.
pub fn mapped(path: &Path) -> bool {
    let path = path.canonicalize().unwrap();
    let path = path.to_str().unwrap();
    let maps = fs::read_to_string("/proc/self/maps").unwrap();
    maps.lines()
        .any(|line| line.ends_with(path) && line[..line.len() - path.len()].ends_with(' '))
}

/// Whether the dynamic loader still has `path` loaded: `dlopen(path, RTLD_NOLOAD)` returns a
/// handle only for a loaded object (the handle is closed again).
pub fn loader_has(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let c_path = std::ffi::CString::new(path.as_os_str().as_bytes()).unwrap();
    // SAFETY: RTLD_NOLOAD never loads anything, so no library code runs; a returned handle is
    // closed at once, undoing the reference count it added.
    unsafe {
        let handle = libc::dlopen(c_path.as_ptr(), libc::RTLD_NOLOAD | libc::RTLD_LAZY);
        if handle.is_null() {
            false
        } else {
            libc::dlclose(handle);
            true
        }
    }
}

/// Asserts `path` is fully gone: unmapped and unknown to the loader.
#[track_caller]
pub fn assert_unloaded(path: &Path) {
    assert!(!mapped(path), "{} is still mapped", path.display());
    assert!(!loader_has(path), "the loader still has {}", path.display());
}

/// Asserts `path` is mapped and known to the loader.
#[track_caller]
pub fn assert_loaded(path: &Path) {
    assert!(mapped(path), "{} is not mapped", path.display());
    assert!(loader_has(path), "the loader does not have {}", path.display());
}
