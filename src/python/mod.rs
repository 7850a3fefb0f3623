//! Python passes (the `python` feature), the user's side: the builder methods that name Python
//! sources, and typed Python passes of a lease ([`PyInterface`], [`PyPass`]). How Python
//! plugins load, are shared and unload is in `load::python`.

mod builder;
mod pass;

pub use pass::{PyInterface, PyPass};
