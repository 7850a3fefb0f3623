//! What a signature says its bytes are: a [`Release`] of a named plugin or library.

/// The longest name or version a signature holds, in bytes.
pub(crate) const MAX_TEXT_LEN: usize = 255;

/// What a signature says its bytes are: the release `version` of the plugin (or dependency
/// library, or Python package) `name`, with a `serial` number that orders the publisher's
/// releases of that name.
///
/// A [`Keyring`](crate::Keyring) refuses a release whose serial is below the minimum it holds
/// for the name ([`Keyring::require_serial`](crate::Keyring::require_serial)): a publisher
/// raises the serial with every release, and a host raises its minimum when an older release
/// must no longer load (a vulnerable one, say). The version string is the publisher's to
/// show; only the serial is compared.
///
/// `name` and `version` are each 1 to 255 bytes of UTF-8 without control characters.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Release {
    /// The plugin's (or library's, or package's) name, as the host knows it.
    pub name: String,
    /// The publisher's version string, for people.
    pub version: String,
    /// The release's serial number: higher is newer.
    pub serial: u64,
}

impl Release {
    /// The release `version` of `name`, with serial number `serial`.
    pub fn new(name: impl Into<String>, version: impl Into<String>, serial: u64) -> Release {
        Release {
            name: name.into(),
            version: version.into(),
            serial,
        }
    }

    /// Why this release cannot be signed, if it cannot.
    pub(crate) fn problem(&self) -> Option<String> {
        text_problem("name", &self.name).or_else(|| text_problem("version", &self.version))
    }
}

/// Why `text` cannot be a release's name or version (`what`), if it cannot.
pub(crate) fn text_problem(what: &str, text: &str) -> Option<String> {
    if text.is_empty() {
        Some(format!("the {what} is empty"))
    } else if text.len() > MAX_TEXT_LEN {
        Some(format!(
            "the {what} is {} bytes long, more than {MAX_TEXT_LEN}",
            text.len()
        ))
    } else if text.chars().any(char::is_control) {
        Some(format!("the {what} {text:?} holds a control character"))
    } else {
        None
    }
}
