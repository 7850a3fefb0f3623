//! The state of one registration, which both registration routes fill: the safe
//! [`StaticRegistrar`](crate::StaticRegistrar) of static plugins and the C host API (`c_api`) of library
//! plugins. Here are the passes collected so far, the checks every pass goes through (name,
//! interface, duplicates) and the first refusal.

use core::ffi::c_void;
use std::collections::HashSet;

use crate::error::{Error, Origin};
use dylease_plugin::abi::dylease_fn;

/// An opaque pointer a plugin attaches to a pass, handed back by
/// [`Pass::user_data`](crate::Pass::user_data).
///
/// The plugin ABI requires it to stay valid, and usable from any thread, until the plugin
/// is unloaded; dylease itself never dereferences it (`Send` and `Sync` by that contract: see
/// `c_api`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct UserData(pub(crate) *mut c_void);

/// A pass's function as the plugin ABI carries it (`dylease_fn`, untyped), with the interface
/// it was registered under. Its type comes back through [`PassFunc::typed`], which checks
/// that interface, or through the `unsafe` [`PassFunc::untyped`], on the caller's word (both
/// in `c_api`).
#[derive(Debug)]
pub(crate) struct PassFunc {
    pub(super) func: dylease_fn,
    pub(super) interface: Option<Box<str>>,
    /// `false` for a Python pass, whose function is a placeholder (it has no native
    /// signature): never typed.
    pub(super) native: bool,
}

impl PassFunc {
    /// The pass `func`, registered under `interface`: made where a registration is recorded
    /// ([`Table::add_raw`], which both registration routes go through), so that the two stay
    /// together.
    fn registered(func: dylease_fn, interface: Option<Box<str>>) -> PassFunc {
        PassFunc {
            func,
            interface,
            native: true,
        }
    }

    /// A Python pass registered under `interface`: a placeholder that is never typed.
    #[cfg(feature = "python")]
    pub(crate) fn python(interface: Box<str>) -> PassFunc {
        PassFunc {
            func: crate::registrar::python::placeholder,
            interface: Some(interface),
            native: false,
        }
    }

    /// The interface it was registered under; `None` for an untyped pass.
    pub(crate) fn interface(&self) -> Option<&str> {
        self.interface.as_deref()
    }
}

/// One pass collected during registration.
#[derive(Debug)]
pub(crate) struct Collected {
    pub(crate) name: Box<str>,
    /// Its function, with the pass signature it implements (`PassFunc::interface`; `None`
    /// for an untyped pass).
    pub(crate) func: PassFunc,
    pub(crate) user_data: UserData,
    /// A Python pass's callable (then `func` is a placeholder).
    #[cfg(feature = "python")]
    pub(crate) python: Option<crate::registrar::python::PyCallable>,
}

pub(crate) type UnloadHook = Box<dyn FnOnce() + Send + 'static>;

/// The longest plugin, version or pass name the host accepts, in bytes. Names appear in
/// errors and logs; a plugin that sends a megabyte is broken, not descriptive.
pub(crate) const MAX_NAME_LEN: usize = 256;

/// What is wrong with a name longer than [`MAX_NAME_LEN`], as a phrase after "its name".
pub(crate) const TOO_LONG: &str = "is longer than 256 bytes";

/// The same, for a refused pass.
pub(crate) const NAME_TOO_LONG: &str = "the name is longer than 256 bytes";

/// The same, for a refused interface.
pub(crate) const INTERFACE_TOO_LONG: &str = "the interface is longer than 256 bytes";

/// How much of a message given to `report` the host keeps, in bytes.
pub(crate) const MAX_REPORT_LEN: usize = 1024;

/// The start of a name too long to show whole, lossily decoded, for errors.
pub(crate) fn shortened(bytes: &[u8]) -> String {
    let mut start = String::from_utf8_lossy(&bytes[..bytes.len().min(32)]).into_owned();
    start.push('…');
    start
}

/// The passes, unload hooks, first refusal and report of one plugin's registration.
pub(crate) struct Table {
    plugin: Origin,
    passes: Vec<Collected>,
    names: HashSet<Box<str>>,
    hooks: Vec<UnloadHook>,
    /// The first pass the host refused, kept so that a plugin that ignores `add_pass`'s
    /// return code still fails.
    refused: Option<Refusal>,
    /// The first message the plugin gave `report`: why its registration fails.
    report: Option<String>,
}

impl Table {
    pub(crate) fn new(plugin: Origin) -> Self {
        Table {
            plugin,
            passes: Vec::new(),
            names: HashSet::new(),
            hooks: Vec::new(),
            refused: None,
            report: None,
        }
    }

    /// The plugin being registered.
    pub(crate) fn plugin(&self) -> &Origin {
        &self.plugin
    }

    /// How many passes and unload hooks were collected so far.
    pub(crate) fn counts(&self) -> (usize, usize) {
        (self.passes.len(), self.hooks.len())
    }

    /// Adds an unload hook: see [`StaticRegistrar::on_unload`](crate::StaticRegistrar::on_unload).
    pub(crate) fn add_hook(&mut self, hook: UnloadHook) {
        self.hooks.push(hook);
    }

    /// Whether the plugin gave `report` a message already: only the first is kept.
    pub(crate) fn reported(&self) -> bool {
        self.report.is_some()
    }

    /// Keeps `message` as the plugin's report, unless it gave one before.
    pub(crate) fn report(&mut self, message: String) {
        self.report.get_or_insert(message);
    }

    /// The common path of both registration routes. `name` and `interface` are `Err` with
    /// the raw bytes when they are not UTF-8; `interface` is `None` for an untyped pass.
    pub(crate) fn add_raw(
        &mut self,
        name: Result<&str, &[u8]>,
        interface: Option<Result<&str, &[u8]>>,
        func: Option<dylease_fn>,
        user_data: UserData,
    ) -> Result<(), Error> {
        if let (Ok(name), Some(interface)) = (name, interface) {
            let reason = match interface {
                Err(_) => Some("the interface is not valid UTF-8"),
                Ok("") => Some("the interface is empty"),
                Ok(interface) if interface.len() > MAX_NAME_LEN => Some(INTERFACE_TOO_LONG),
                Ok(_) => None,
            };
            // A bad name is reported first (below); a good name with a bad interface here.
            if let Some(reason) = reason.filter(|_| !name.is_empty() && name.len() <= MAX_NAME_LEN) {
                return Err(self.refuse(Refusal::Invalid(name.to_owned(), reason)));
            }
        }
        let interface = interface.and_then(Result::ok);
        let refusal = match (name, func) {
            (Err(bytes), _) => Refusal::Invalid(
                String::from_utf8_lossy(bytes).into_owned(),
                "the name is not valid UTF-8",
            ),
            (Ok(""), _) => Refusal::Invalid(String::new(), "the name is empty"),
            (Ok(name), _) if name.len() > MAX_NAME_LEN => Refusal::Invalid(shortened(name.as_bytes()), NAME_TOO_LONG),
            (Ok(name), None) => Refusal::Invalid(name.to_owned(), "the function pointer is NULL"),
            (Ok(name), Some(_)) if self.names.contains(name) => Refusal::Duplicate(name.to_owned()),
            (Ok(name), Some(func)) => {
                self.names.insert(name.into());
                self.passes.push(Collected {
                    name: name.into(),
                    func: PassFunc::registered(func, interface.map(Into::into)),
                    user_data,
                    #[cfg(feature = "python")]
                    python: None,
                });
                return Ok(());
            }
        };
        Err(self.refuse(refusal))
    }

    /// Records a refusal (the first one is what the load fails with) and returns its error.
    pub(crate) fn refuse(&mut self, refusal: Refusal) -> Error {
        let error = refusal.to_error(&self.plugin);
        self.refused.get_or_insert(refusal);
        error
    }

    /// Ends registration: the passes and unload hooks, or the first refusal (which the plugin
    /// may have ignored), and the message the plugin gave `report`, if any. On refusal the
    /// hooks are handed back so they can still run.
    pub(crate) fn finish(self) -> Finished {
        let passes = match &self.refused {
            None => Ok(self.passes),
            Some(refusal) => Err(refusal.to_error(&self.plugin)),
        };
        Finished {
            passes,
            hooks: self.hooks,
            report: self.report,
        }
    }
}

/// What registration produced; see [`Table::finish`].
pub(crate) struct Finished {
    /// The passes, or the first refusal.
    pub(crate) passes: Result<Vec<Collected>, Error>,
    /// A static plugin's unload hooks.
    pub(crate) hooks: Vec<UnloadHook>,
    /// The first message the plugin gave `report`.
    pub(crate) report: Option<String>,
}

/// Why the host refused a pass.
#[derive(Debug)]
pub(crate) enum Refusal {
    /// The pass name (lossily decoded) and the reason.
    Invalid(String, &'static str),
    /// A name this plugin registered already.
    Duplicate(String),
}

impl Refusal {
    fn to_error(&self, plugin: &Origin) -> Error {
        match self {
            Refusal::Invalid(pass, reason) => Error::InvalidPass {
                plugin: plugin.clone(),
                pass: pass.clone(),
                reason: (*reason).to_owned(),
            },
            Refusal::Duplicate(pass) => Error::DuplicatePass {
                pass: pass.clone(),
                first: plugin.clone(),
                second: plugin.clone(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_length_limit_and_its_messages_agree() {
        let limit = MAX_NAME_LEN.to_string();
        assert!(TOO_LONG.contains(&limit) && NAME_TOO_LONG.ends_with(TOO_LONG));
    }
}
