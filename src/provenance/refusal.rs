//! The refusals of signed plugins: [`Error::Signature`], naming the plugin, the file refused,
//! the key its signature names, and what the publisher or the host's operator can do.

use std::path::Path;

use dylease_sign::{Cause, KeyId, Keyring, SignatureError};

use crate::error::Error;

/// The refusal of the plugin `plugin` (as discovered) because the verification of one of its
/// files refused it: the verification's sentence (the file, the cause, the publisher's fix),
/// the key its signature names, and what the host's operator can do.
pub(crate) fn refused(plugin: &Path, refusal: SignatureError, keyring: &Keyring) -> Error {
    let key = refusal.key();
    let shown = refusal.path().display();
    let host_fix = match refusal.cause() {
        Cause::Unsigned => format!(
            "no signature was found; sign it with `dylease sign {shown} --key KEYFILE` (after `strip`, which \
             drops a signature) with a key this host trusts ({})",
            trusted(keyring)
        ),
        Cause::UnknownKey(id) => format!(
            "this host trusts {}; `dylease verify {shown} --keyring PUBFILE` tells whether a public key file \
             holds key {id}",
            trusted(keyring)
        ),
        Cause::RevokedKey(id) => format!(
            "key {id} is revoked by this host's keyring (`Keyring::revoke`): install a release signed with a \
             key this host trusts ({})",
            trusted(keyring)
        ),
        Cause::RolledBack { name, serial, minimum } => format!(
            "it is serial {serial} of `{name}`, signed by key {}, and this host's keyring requires serial \
             {minimum} or newer (`Keyring::require_serial`)",
            key_text(key)
        ),
        _ => format!("its signature names key {}", key_text(key)),
    };
    Error::Signature {
        path: plugin.to_owned(),
        key,
        reason: format!("{refusal}; {host_fix}"),
        refusal: Some(Box::new(refusal)),
    }
}

/// The refusal of the plugin `plugin` because the bytes of one of its files could not be held
/// still to be verified, or would not be the bytes mapped: `reason`, naming the file, with the
/// fix.
pub(crate) fn not_held(plugin: &Path, reason: String) -> Error {
    Error::Signature {
        path: plugin.to_owned(),
        key: None,
        reason,
        refusal: None,
    }
}

/// The keys `keyring` trusts, for messages.
fn trusted(keyring: &Keyring) -> String {
    let revoked: Vec<KeyId> = keyring.revoked().collect();
    let ids: Vec<String> = keyring
        .trusted()
        .filter(|id| !revoked.contains(id))
        .map(|id| id.to_string())
        .collect();
    match ids.len() {
        0 => "it trusts no key yet".to_owned(),
        1 => format!("key {}", ids[0]),
        _ => format!("keys {}", ids.join(", ")),
    }
}

fn key_text(key: Option<KeyId>) -> String {
    key.map_or_else(|| "(none read)".to_owned(), |id| id.to_string())
}
