//! What a load does when one plugin fails ([`LoadPolicy`]), and what it skipped
//! ([`LoadFailure`]).

use std::fmt;

use crate::error::{Error, Origin};

/// What a load does when one plugin fails.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum LoadPolicy {
    /// One failed plugin fails the whole [`acquire`](crate::PluginHost::acquire): every library the
    /// attempt opened is closed, nothing stays loaded, and the next `acquire` tries again.
    #[default]
    Strict,
    /// A plugin that fails (to be found, trusted, opened, verified or registered) is left
    /// out: whatever of it was opened is closed, and the failure is logged as a warning (once
    /// per host and cause; a later load that meets it again logs it at `debug`) and
    /// recorded in [`PluginSet::failures`](crate::PluginSet::failures); the others load. A pass whose name an earlier plugin registered is left
    /// out the same way, and its plugin stays: the first registration keeps the name.
    ///
    /// A directory that cannot be listed (missing, or not a directory; say one entry of a
    /// path variable) is left out the same way. An environment variable that lists a relative
    /// directory still fails the whole load: it is a configuration error, not a missing plugin.
    SkipFailed,
}

/// Something that went wrong in a load and was skipped under
/// [`LoadPolicy::SkipFailed`]: a plugin left out of the set, or a pass left out because an
/// earlier plugin had registered its name. See [`PluginSet::failures`](crate::PluginSet::failures).
#[derive(Debug)]
#[non_exhaustive]
pub struct LoadFailure {
    origin: Origin,
    error: Error,
}

impl LoadFailure {
    /// A failure of the plugin `origin`, skipped.
    pub(crate) fn new(origin: Origin, error: Error) -> Self {
        LoadFailure { origin, error }
    }

    /// The plugin the failure is about: the file (as discovered) or the static plugin.
    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// What went wrong: the error a [`LoadPolicy::Strict`] load would have failed with.
    pub fn error(&self) -> &Error {
        &self.error
    }
}

impl fmt::Display for LoadFailure {
    /// The error's message, which names the plugin.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}
