//! Python passes (the `python` feature), the user's side: typed Python passes of a lease
//! ([`PyInterface`], [`PyPass`]). The builder methods that name Python sources are `unsafe
//! fn`s beside the native ones, in `host::sources`; how Python plugins load, are shared and
//! unload is in `load::python`.

mod pass;

pub use pass::{PyInterface, PyPass};
