//! [`HostBuilder::require_signed`]: the host's provenance policy (`provenance`).

use crate::host::builder::HostBuilder;
use crate::provenance::Signatures;
use crate::sync::Arc;
use dylease_sign::Keyring;

impl HostBuilder {
    /// Requires every plugin file this host runs to carry a valid signature by a key of
    /// `keyring` ([`docs::signing`](crate::docs::signing) has the threat model, the recipes
    /// and the costs): each library plugin, each library it needs that dylease maps itself
    /// (under [`TrustPolicy::Strict`](crate::TrustPolicy::Strict), those found through its run
    /// path: the system's libraries are the system's), and every source file of a Python
    /// plugin. A file that is unsigned, changed since it was signed, signed by a key the
    /// keyring does not trust or revokes, signed as another plugin, or older than the
    /// keyring's minimum serial for its name, is refused before any of its code runs, with
    /// [`Error::Signature`](crate::Error::Signature), which names the file, the key its
    /// signature names and the fix. [`LoadPolicy`](crate::LoadPolicy) decides, as for any
    /// failure, whether the load fails or leaves the plugin out.
    ///
    /// - A library is signed by a block appended to it (`dylease sign`, after `strip`): the
    ///   host digests the file it will map, on the descriptor the loader is given, at every
    ///   load, and holds its bytes still from before the digest until the loader mapped them
    ///   (a read lease on the descriptor; where none can be taken, or for a file other users
    ///   can write, a sealed copy in memory that the loader maps instead). A file open for
    ///   writing elsewhere is refused. A plugin with a manifest must be signed under its
    ///   manifest's plugin name.
    /// - A Python plugin is signed by an index beside it (`greeter.py.dylease-sig`, or
    ///   `.dylease-sig` in a package) listing each `.py` file and its digest: its sources are
    ///   read into memory, checked against the index, and executed from those bytes; a
    ///   source added, removed or changed since signing is refused.
    /// - Under [`TrustPolicy::Permissive`](crate::TrustPolicy::Permissive) no dependency is
    ///   mapped by dylease, so a plugin that names a run path (DT_RUNPATH, DT_RPATH) is
    ///   refused: the loader would search it for libraries nobody verified.
    /// - [`catalog`](crate::PluginHost::catalog) verifies too, without running any code, and
    ///   shows the signer ([`CatalogEntry::signature`](crate::CatalogEntry::signature)).
    /// - On-demand sets ([`on_demand`](HostBuilder::on_demand)) verify each plugin when it is
    ///   judged, at acquire, and again, holding its bytes still, when it is mapped.
    ///
    /// The keyring's revocations ([`Keyring::revoke`](crate::sign::Keyring::revoke)) and
    /// minimum serials ([`Keyring::require_serial`](crate::sign::Keyring::require_serial))
    /// hold for every load; to change them, build a new host. Static plugins are the host's
    /// own code and are not verified. Checking a signature is remembered for the process
    /// (keyed by the key, the signature and the signed statement, never by a file's status):
    /// a library loaded again costs the digest of its bytes.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use dylease::sign::{Keyring, PublicKey};
    ///
    /// let mut keyring = Keyring::new();
    /// keyring
    ///     .trust(PublicKey::read_file("/etc/app/publisher.pub".as_ref())?)
    ///     .require_serial("greeter", 14);
    /// // SAFETY: /opt/app/plugins holds this application's own plugins.
    /// let host = unsafe { dylease::PluginHost::builder().dir("/opt/app/plugins") }
    ///     .require_signed(keyring)
    ///     .build()?;
    /// let lease = host.acquire()?; // every plugin verified before any of its code ran
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn require_signed(mut self, keyring: Keyring) -> Self {
        self.signatures = Some(Arc::new(crate::load::verifier(Signatures::new(keyring))));
        self
    }
}
