//! The python room, the highest (the `python` feature): the user API of Python passes above
//! the host. It may call every room below it (`host`, `load`, `registrar`, and the rest).
//!
//! Python passes (the `python` feature), the user's side: typed Python passes of a lease
//! ([`PyInterface`], [`PyPass`]). The builder methods that name Python sources are `unsafe
//! fn`s beside the native ones, in `host::sources`; how Python plugins load, are shared and
//! unload is in `load::python`.

mod pass;

pub use pass::{PyInterface, PyPass};
