//! Signatures (`dylease::sign`): `dylease keygen` makes a publisher's key pair, `dylease sign`
//! signs a plugin (a library: a block appended to it; a Python file or package: a signed index
//! of its sources), `dylease verify` verifies plugins against a keyring as a host that
//! requires signatures would (`HostBuilder::require_signed`). `inspect` shows who signed each
//! plugin, and `install --keyring` refuses a copy that does not verify, or that is older than
//! the plugin it replaces, before it runs any of its code.

use std::fmt::Write as _;
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use clap::Args;
use dylease::sign::{
    Claim, KeyId, Keyring, PublicKey, Release, SignatureError, SigningKey, Verified, file_index_path,
    package_index_path, read_claim, read_index_claim, sign_file, sign_index,
};
use dylease::{Manifest, PluginHost, TrustPolicy};

use crate::{check, inspect, names, python};

/// The keyring options of `verify`, `inspect` and `install`: what a host's
/// `HostBuilder::require_signed` would be given.
#[derive(Debug, Args, Default)]
pub(crate) struct KeyringArgs {
    /// A public key file to trust (`dylease keygen --out KEYFILE` writes KEYFILE.pub); repeat
    /// it for each key.
    #[arg(long = "keyring", value_name = "PUBFILE")]
    pub(crate) keyring: Vec<PathBuf>,

    /// A key id to refuse even if a --keyring file trusts it (16 hexadecimal digits, as
    /// `dylease verify` prints them); repeatable.
    #[arg(long, value_name = "ID")]
    pub(crate) revoke: Vec<String>,

    /// The oldest serial accepted for the plugin NAME (no rollback to an older signed
    /// release); repeatable.
    #[arg(long = "min-serial", value_name = "NAME=SERIAL")]
    pub(crate) min_serial: Vec<String>,
}

impl KeyringArgs {
    /// The keyring these options describe; `None` when no --keyring file is given.
    pub(crate) fn keyring(&self) -> Result<Option<Keyring>, String> {
        if self.keyring.is_empty() {
            if !self.revoke.is_empty() || !self.min_serial.is_empty() {
                return Err("--revoke and --min-serial refine a keyring: give the trusted keys with --keyring".into());
            }
            return Ok(None);
        }
        let mut keyring = Keyring::new();
        for file in &self.keyring {
            keyring.trust(PublicKey::read_file(file).map_err(|e| format!("--keyring: {e}"))?);
        }
        for id in &self.revoke {
            let id: KeyId = id
                .parse()
                .map_err(|_| format!("--revoke `{id}`: a key id is 16 lowercase hexadecimal digits"))?;
            keyring.revoke(id);
        }
        for pair in &self.min_serial {
            let parsed = pair
                .split_once('=')
                .and_then(|(name, serial)| Some((name, serial.parse::<u64>().ok()?)));
            let Some((name, serial)) = parsed.filter(|(name, _)| !name.is_empty()) else {
                return Err(format!(
                    "--min-serial `{pair}`: give NAME=SERIAL, SERIAL a whole number"
                ));
            };
            keyring.require_serial(name, serial);
        }
        Ok(Some(keyring))
    }
}

/// `dylease keygen --out KEYFILE`: a new key pair, the secret key in KEYFILE (mode 0600, never
/// over an existing file), the public key in KEYFILE.pub; the report names both and the id.
pub(crate) fn keygen(out: &Path) -> Result<String, String> {
    let public_path = public_key_path(out);
    if public_path.exists() {
        return Err(format!(
            "`{}` exists: a key pair is never written over another; choose another --out",
            names::escape(&public_path)
        ));
    }
    let key = SigningKey::generate().map_err(|e| e.to_string())?;
    key.write_new_file(out).map_err(|e| e.to_string())?;
    let public = key.public_key().to_string();
    let written = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&public_path)
        .and_then(|mut file| io::Write::write_all(&mut file, format!("{public}\n").as_bytes()));
    written.map_err(|e| format!("cannot write the public key to `{}`: {e}", names::escape(&public_path)))?;
    Ok(format!(
        "secret key:  `{}` (mode 0600: keep it secret; `dylease sign --key` signs with it)\n\
         public key:  `{}` (give it to the hosts: `--keyring`, `Keyring::trust(PublicKey::read_file(..))`)\n\
         key id:      {}\n{public}\n",
        names::escape(out),
        names::escape(&public_path),
        key.id()
    ))
}

/// Where `keygen` writes the public key of the secret key file `out`: `out.pub`.
fn public_key_path(out: &Path) -> PathBuf {
    let mut path = out.as_os_str().to_owned();
    path.push(".pub");
    PathBuf::from(path)
}

/// `dylease sign`'s arguments.
#[derive(Debug, Args)]
pub(crate) struct SignArgs {
    /// The plugin to sign: a library (signed in place: a block appended, replacing any it
    /// had), or a Python `.py` file or package (a signed index written beside the file, or
    /// in the package).
    #[arg(value_name = "FILE_OR_DIR")]
    pub(crate) path: PathBuf,

    /// The secret key file (`dylease keygen`).
    #[arg(long, value_name = "KEYFILE")]
    pub(crate) key: PathBuf,

    /// The name to sign it as: by default its manifest's plugin name, which a host requires
    /// of a plugin with a manifest (a library without one, say one a plugin needs, must be
    /// given a name).
    #[arg(long)]
    pub(crate) name: Option<String>,

    /// The version to sign it as: by default its manifest's (or the serial).
    #[arg(long)]
    pub(crate) version: Option<String>,

    /// The release's serial number, which a host's minimum (`--min-serial`,
    /// `Keyring::require_serial`) is compared with: by default the current time in seconds
    /// since 1970, so that a later signing is a newer release.
    #[arg(long)]
    pub(crate) serial: Option<u64>,
}

/// `dylease sign`: the report of what was signed.
pub(crate) fn sign(args: &SignArgs) -> Result<String, String> {
    let key = SigningKey::read_file(&args.key).map_err(|e| e.to_string())?;
    let path = &args.path;
    let shown = names::escape(path);
    if let Err(e) = fs::metadata(path) {
        return Err(format!("cannot read `{shown}`: {e}"));
    }
    let python = python::is_plugin(path);
    let manifest = manifest_of(path, python);
    let name = match (&args.name, &manifest) {
        (Some(name), _) => name.clone(),
        (None, Some(manifest)) => manifest.name().to_owned(),
        (None, None) if python => stem(path),
        (None, None) => {
            return Err(format!(
                "`{shown}` has no manifest to take its name from (a library it needs, or one built without \
                 DYLEASE_PLUGIN or `export_plugin!`): give one with --name"
            ));
        }
    };
    let serial = args.serial.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_secs())
    });
    let version = args
        .version
        .clone()
        .or_else(|| {
            manifest
                .as_ref()
                .map(|m| m.version().to_owned())
                .filter(|v| !v.is_empty())
        })
        .unwrap_or_else(|| serial.to_string());
    let release = Release::new(name, version, serial);
    let what = if python {
        let (index_path, sources) = python_sources(path).map_err(|e| format!("cannot read `{shown}`: {e}"))?;
        let mut files = Vec::with_capacity(sources.len());
        for (relative, file) in &sources {
            let opened = File::open(file).map_err(|e| format!("cannot read `{}`: {e}", names::escape(file)))?;
            files.push((relative.clone(), opened));
        }
        let count = files.len();
        let index = sign_index(files, &release, &key).map_err(|e| e.to_string())?;
        write_beside(&index_path, &index)
            .map_err(|e| format!("cannot write the signed index `{}`: {e}", names::escape(&index_path)))?;
        format!(
            "its index `{}` lists {count} source {}",
            names::escape(&index_path),
            if count == 1 { "file" } else { "files" }
        )
    } else {
        sign_file(path, path, &release, &key).map_err(|e| e.to_string())?;
        "a signature block appended (sign again after `strip`, which drops it)".to_owned()
    };
    Ok(format!(
        "signed `{shown}` as `{}` version {} serial {} with key {}: {what}\n",
        release.name,
        release.version,
        release.serial,
        key.id()
    ))
}

/// Writes `bytes` to `path` through a new hidden file beside it, renamed over it.
fn write_beside(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(format!(".writing-{}", std::process::id()));
    let temporary = PathBuf::from(temporary);
    let written = (|| {
        let mut file = fs::OpenOptions::new().write(true).create_new(true).open(&temporary)?;
        io::Write::write_all(&mut file, bytes)?;
        file.sync_all()?;
        fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    written
}

/// The name of a Python plugin without a manifest: its file's stem, or its package's name.
fn stem(path: &Path) -> String {
    path.file_stem().unwrap_or_default().to_string_lossy().into_owned()
}

/// What the plugin at `path` declares, read without running it (a host's catalog); `None`
/// for a file without a manifest (and for a Python plugin, without the `python` feature).
fn manifest_of(path: &Path, python: bool) -> Option<Manifest> {
    let options = check::Options {
        trust: TrustPolicy::Permissive,
        policy: dylease::LoadPolicy::Strict,
        python,
    };
    let builder = check::add_path(PluginHost::builder().name("dylease-sign"), python, path);
    let entries = inspect::catalog(builder, options).ok()?;
    entries.into_iter().next()?.manifest().cloned()
}

/// The signed index of the Python plugin `plugin` and the files a host executes of it, by
/// their paths relative to the index's directory: a `.py` file itself (by its name); a
/// package's `.py` files, in every directory below it, but not `__pycache__` nor names that
/// start with `.` (as `HostBuilder::python_dir` reads a package). A symlink in a package is
/// refused, as a host refuses it.
pub(crate) fn python_sources(plugin: &Path) -> io::Result<(PathBuf, Vec<(PathBuf, PathBuf)>)> {
    if !plugin.is_dir() {
        let name = PathBuf::from(plugin.file_name().unwrap_or_default());
        return Ok((file_index_path(plugin), vec![(name, plugin.to_owned())]));
    }
    let mut sources = Vec::new();
    sources_below(plugin, Path::new(""), &mut sources)?;
    Ok((package_index_path(plugin), sources))
}

fn sources_below(dir: &Path, relative: &Path, sources: &mut Vec<(PathBuf, PathBuf)>) -> io::Result<()> {
    let mut entries = fs::read_dir(dir)?.collect::<Result<Vec<_>, _>>()?;
    entries.sort_by_key(fs::DirEntry::file_name);
    for entry in entries {
        let name = entry.file_name();
        if name.as_encoded_bytes().starts_with(b".") || name == "__pycache__" {
            continue;
        }
        let (path, below) = (entry.path(), relative.join(&name));
        let kind = entry.file_type()?;
        if kind.is_symlink() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "`{}` is a symlink, which a host refuses in a package: copy the file in",
                    names::escape(&path)
                ),
            ));
        } else if kind.is_dir() {
            sources_below(&path, &below, sources)?;
        } else if kind.is_file() && name.as_encoded_bytes().ends_with(b".py") {
            sources.push((below, path));
        }
    }
    Ok(())
}

/// Verifies the plugin whose bytes are at `at` (`shown` names it in messages: the user's
/// file, for an install's copy) against `keyring`, as a host that requires signatures would:
/// under its manifest's name where it has one.
pub(crate) fn verify_plugin(keyring: &Keyring, at: &Path, shown: &Path) -> Result<Verified, String> {
    let python = python::is_plugin(at);
    let manifest = manifest_of(at, python);
    let expected = manifest.as_ref().map(Manifest::name);
    let refused = |error: SignatureError| {
        let message = error.to_string();
        names::in_message(
            &message.replace(&at.display().to_string(), &shown.display().to_string()),
            &[shown],
        )
    };
    if python {
        let (index_path, sources) =
            python_sources(at).map_err(|e| format!("cannot read `{}`: {e}", names::escape(shown)))?;
        let index = match File::open(&index_path) {
            Ok(index) => index,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(refused(SignatureError::new(at, dylease::sign::Cause::Unsigned)));
            }
            Err(e) => return Err(format!("cannot read `{}`: {e}", names::escape(&index_path))),
        };
        let mut files = Vec::with_capacity(sources.len());
        for (relative, file) in &sources {
            let opened = File::open(file).map_err(|e| format!("cannot read `{}`: {e}", names::escape(file)))?;
            files.push((relative.clone(), opened));
        }
        return keyring
            .verify_index(index, &index_path, expected, files)
            .map_err(refused);
    }
    let mut file = File::open(at).map_err(|e| format!("cannot read `{}`: {e}", names::escape(shown)))?;
    keyring.verify_file(&mut file, at, expected).map_err(refused)
}

/// What the signature of the plugin at `path` claims, read without a keyring (`inspect`):
/// `Ok(None)` when it carries none.
pub(crate) fn claim(path: &Path) -> Result<Option<Claim>, String> {
    let unreadable = |path: &Path, e: &dyn std::fmt::Display| format!("cannot read `{}`: {e}", names::escape(path));
    if python::is_plugin(path) {
        let index = if path.is_dir() {
            package_index_path(path)
        } else {
            file_index_path(path)
        };
        return match File::open(&index) {
            Ok(file) => read_index_claim(file)
                .map(Some)
                .map_err(|cause| SignatureError::new(&index, cause).to_string()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(unreadable(&index, &e)),
        };
    }
    let mut file = File::open(path).map_err(|e| unreadable(path, &e))?;
    read_claim(&mut file).map_err(|cause| SignatureError::new(path, cause).to_string())
}

/// A signature as a phrase: "key K, `name` version V serial S".
pub(crate) fn describe(key: KeyId, release: &Release) -> String {
    format!(
        "key {key}, `{}` version {} serial {}",
        release.name, release.version, release.serial
    )
}

/// `dylease verify`: each plugin of `paths` (a library, a Python file or package, or every
/// plugin of a directory, as `dir` and `python_dir` find them) verified; the report, and
/// whether all passed.
pub(crate) fn verify(paths: &[PathBuf], keyring: &Keyring) -> (String, bool) {
    let (mut out, mut ok, mut count) = (String::new(), true, 0);
    for path in paths {
        let plugins = if path.is_dir() && !python::is_plugin(path) {
            match dylease::plugin_files_in(path) {
                Ok(mut files) => {
                    files.extend(python::plugins_in(path));
                    files
                }
                Err(error) => {
                    ok = false;
                    let _ = writeln!(out, "FAIL  {}\n        problem: {error}", names::escape(path));
                    continue;
                }
            }
        } else {
            vec![path.clone()]
        };
        for plugin in plugins {
            count += 1;
            match verify_plugin(keyring, &plugin, &plugin) {
                Ok(verified) => {
                    let _ = writeln!(
                        out,
                        "ok    {}\n        signature: {}",
                        names::escape(&plugin),
                        describe(verified.key, &verified.release)
                    );
                }
                Err(problem) => {
                    ok = false;
                    let _ = writeln!(out, "FAIL  {}\n        problem: {problem}", names::escape(&plugin));
                }
            }
        }
    }
    let _ = writeln!(
        out,
        "\n{count} {} verified: {}",
        if count == 1 { "plugin" } else { "plugins" },
        if ok {
            "every signature is by a trusted key, over the bytes it signs, at or above the minimum serial"
        } else {
            "refused ones (FAIL above) would not load in a host that requires signatures"
        }
    );
    (out, ok)
}

/// What `install --keyring` requires of the copy it installs.
#[derive(Debug, Default)]
pub(crate) struct Signing {
    /// The keyring the copy must verify against; `None`: no signature is required.
    pub(crate) keyring: Option<Keyring>,
    /// Whether a copy older (by serial) than the signed plugin it replaces may be installed.
    pub(crate) allow_rollback: bool,
}

impl Signing {
    /// Verifies the copy at `copy` of the user's `file`, to be installed as `to` (which it
    /// replaces if it exists): `Ok(None)` when no signature is required, `Ok(Some(line))`
    /// with the signature it carries, `Err` with why it is refused. Unless rollbacks are
    /// allowed, a copy whose serial is below that of the signed plugin of the same name it
    /// replaces is refused.
    pub(crate) fn check(&self, copy: &Path, file: &Path, to: &Path) -> Result<Option<String>, String> {
        let Some(keyring) = &self.keyring else {
            return Ok(None);
        };
        if python::is_plugin(copy) && !copy.is_dir() {
            return Err(format!(
                "`{}` is a single-file Python plugin, whose signed index lies beside it: no one rename installs \
                 both at once, so a host could read the new file with the old index; make it a package (a \
                 directory with `__init__.py`, whose index is inside it), or install it without --keyring",
                names::escape(file)
            ));
        }
        let mut keyring = keyring.clone();
        let installed = claim(to).ok().flatten();
        let copied = claim(copy).ok().flatten();
        let mut floor = None;
        if let (false, Some(installed), Some(copied)) = (self.allow_rollback, &installed, &copied)
            && installed.release.name == copied.release.name
        {
            let name = &installed.release.name;
            let minimum = keyring.minimum_serial(name).unwrap_or(0).max(installed.release.serial);
            keyring.require_serial(name, minimum);
            floor = Some(installed.release.serial);
        }
        match verify_plugin(&keyring, copy, file) {
            Ok(verified) => Ok(Some(format!(
                "signature: {} (verified)",
                describe(verified.key, &verified.release)
            ))),
            Err(problem) => Err(match floor {
                Some(serial) if problem.contains("no rollback") => format!(
                    "{problem} (the installed `{}` is serial {serial}: --allow-rollback installs an older release \
                     over it)",
                    names::escape(to)
                ),
                _ => problem,
            }),
        }
    }
}
