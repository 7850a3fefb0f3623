//! `dylease header --install PREFIX`: what a plugin's build needs, written under a prefix, as
//! `make install` of a C library would: the header and the linker version script, the CMake
//! package and the pkg-config file.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::{HEADER, VERSION_SCRIPT};

const CMAKE_CONFIG: &str = include_str!("../cmake/dyleaseConfig.cmake");
const CMAKE_VERSION: &str = include_str!("../cmake/dyleaseConfigVersion.cmake");
const PKG_CONFIG: &str = include_str!("../cmake/dylease.pc.in");

/// Writes the files under `prefix` (created if missing) and lists them on standard output.
/// `Ok(false)` (after a message on standard error naming the file) when one cannot be
/// written.
pub(crate) fn install(prefix: &Path) -> io::Result<bool> {
    let prefix = match fs::create_dir_all(prefix).and_then(|()| fs::canonicalize(prefix)) {
        Ok(prefix) => prefix,
        Err(error) => {
            eprintln!("dylease: cannot create the prefix `{}`: {error}", prefix.display());
            return Ok(false);
        }
    };
    let Some(prefix_text) = prefix.to_str() else {
        eprintln!(
            "dylease: the prefix `{}` is not UTF-8, which dylease.pc cannot name",
            prefix.display()
        );
        return Ok(false);
    };
    let pc = PKG_CONFIG.replace("@PREFIX@", prefix_text);
    let files: [(PathBuf, &str); 5] = [
        (prefix.join("include/dylease.h"), HEADER),
        (prefix.join("include/dylease.map"), VERSION_SCRIPT),
        (prefix.join("lib/cmake/dylease/dyleaseConfig.cmake"), CMAKE_CONFIG),
        (
            prefix.join("lib/cmake/dylease/dyleaseConfigVersion.cmake"),
            CMAKE_VERSION,
        ),
        (prefix.join("lib/pkgconfig/dylease.pc"), &pc),
    ];
    let mut listing = String::new();
    for (path, text) in &files {
        let written = path
            .parent()
            .map_or(Ok(()), fs::create_dir_all)
            .and_then(|()| fs::write(path, text));
        if let Err(error) = written {
            eprintln!("dylease: cannot write `{}`: {error}", path.display());
            return Ok(false);
        }
        listing.push_str(&format!("installed {}\n", path.display()));
    }
    crate::print(&listing)?;
    Ok(true)
}
