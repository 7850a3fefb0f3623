//! Unloading plugins: what one plugin's unload takes ([`Teardown`]: its unload hooks, its
//! library instance), and [`teardown_all`], which unloads a set's plugins in reverse load
//! order.

use std::panic::{AssertUnwindSafe, catch_unwind};

use crate::error::{Origin, panic_text};
use crate::inspect::pinning::Pinning;
use crate::registrar::UnloadHook;
use crate::registry::LibraryInstance;
use crate::registry::opener::Dlopen;
use crate::sync::Arc;
use crate::sys::library::Unmapped;

/// What unloading one plugin takes: its unload code, then closing its library.
pub(crate) struct Teardown {
    origin: Origin,
    hooks: Vec<UnloadHook>,
    instance: Option<Arc<LibraryInstance<Dlopen>>>,
    /// What its file predicted, to compare with what the loader does on unload.
    pinning: Pinning,
}

impl std::fmt::Debug for Teardown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Teardown")
            .field("origin", &self.origin)
            .field("hooks", &self.hooks.len())
            .field("instance", &self.instance)
            .finish()
    }
}

impl Teardown {
    /// A plugin file's: closing its library instance, whose file predicted `pinning`.
    pub(crate) fn of_instance(origin: Origin, instance: Arc<LibraryInstance<Dlopen>>, pinning: Pinning) -> Self {
        Teardown {
            origin,
            hooks: Vec::new(),
            instance: Some(instance),
            pinning,
        }
    }

    /// A plugin without a library (a static or Python plugin): only its unload code.
    pub(crate) fn with_hooks(origin: Origin, hooks: Vec<UnloadHook>) -> Self {
        Teardown {
            origin,
            hooks,
            instance: None,
            pinning: Pinning::default(),
        }
    }
}

/// Unloads plugins given in load order: every static plugin's unload hooks in reverse load
/// order (a panicking hook is caught and logged; teardown goes on), then every library
/// instance released in reverse load order. An instance no other set uses unloads now: its
/// `on_unload` runs and its library is closed (see the [registry](super::registry)).
///
/// Then, with every handle closed (one plugin's library may hold another's), each library
/// this teardown closed is looked for by its own checked descriptor, before anything maps its
/// file again: one the platform kept loaded is logged as a warning, the first time its mapping
/// is seen kept (see [`after_unload`](crate::inspect::pinning::after_unload)). Returns how many
/// were kept and not reported before.
pub(crate) fn teardown_all(plugins: Vec<Teardown>) -> usize {
    let mut instances = Vec::with_capacity(plugins.len());
    for plugin in plugins.into_iter().rev() {
        let Teardown {
            origin,
            hooks,
            instance,
            pinning,
        } = plugin;
        for hook in hooks.into_iter().rev() {
            if let Err(panic) = catch_unwind(AssertUnwindSafe(hook)) {
                log::error!(
                    "{}unload hook of {origin} panicked: {}",
                    crate::log_scope::prefix(),
                    panic_text(&*panic)
                );
            }
        }
        instances.extend(instance.map(|instance| (origin, pinning, instance)));
    }
    // Every instance closed first (one plugin's library may hold another's), each file still
    // marked busy, so nothing maps it again before it is looked for.
    let released: Vec<_> = instances
        .into_iter()
        .filter_map(|(origin, pinning, instance)| {
            // `Identity` is `Copy` on Unix and a path elsewhere: one spelling for both.
            #[allow(clippy::clone_on_copy)]
            let file = instance.identity().clone();
            Some((origin, pinning, file, LibraryInstance::release(instance)?))
        })
        .collect();
    let mut pinned = 0;
    for (origin, pinning, file, released) in released {
        let Some(Unmapped { kept, .. }) = released.settle() else {
            continue;
        };
        // Warned about and counted once per kept mapping (one per file: a later load of a
        // kept file shares it), with the causes its file shows.
        if crate::inspect::pinning::after_unload(&origin, &pinning, &file, kept) {
            pinned += 1;
        }
    }
    pinned
}
