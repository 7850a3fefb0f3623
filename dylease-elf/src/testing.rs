//! What the tests over real libraries share: a scratch directory, the C and C++ test plugins
//! of the workspace compiled into it, and a file that counts the reads made of it.

use std::path::{Path, PathBuf};

use crate::ReadAt;
use std::process::Command;

/// A directory of a test's own under the system's temporary directory, removed with it.
pub(crate) struct Scratch(pub(crate) PathBuf);

impl Scratch {
    pub(crate) fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("dylease-elf-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Compiles the workspace's test plugin `sources` (paths from the workspace's root; C, or C++
/// when the first ends in `.cpp`) with `args` into a library in `dir`, and returns its bytes.
pub(crate) fn compile(dir: &Path, sources: &[&str], args: &[&str]) -> Vec<u8> {
    // The workspace's root, which holds the test plugins and their headers.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let stem = Path::new(sources[0]).file_stem().unwrap().to_string_lossy();
    let out = dir.join(format!("lib{stem}.so"));
    let cpp = sources[0].ends_with(".cpp");
    let compiler = if cpp { "CXX" } else { "CC" };
    let cc = std::env::var_os(compiler).unwrap_or_else(|| if cpp { "c++" } else { "cc" }.into());
    let output = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O1", "-I"])
        .arg(root.join("include"))
        .arg("-I")
        .arg(root.join("examples/plugins"))
        .args(args)
        .args(sources.iter().map(|source| root.join(source)))
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap_or_else(|e| panic!("cannot run the compiler {cc:?}: {e}"));
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    std::fs::read(&out).unwrap()
}

/// A file counting the reads made of it.
pub(crate) struct Counted {
    pub(crate) bytes: Vec<u8>,
    pub(crate) reads: std::cell::Cell<usize>,
}

impl ReadAt for Counted {
    fn read_at(&self, buffer: &mut [u8], offset: u64) -> std::io::Result<usize> {
        self.reads.set(self.reads.get() + 1);
        self.bytes.as_slice().read_at(buffer, offset)
    }
}
