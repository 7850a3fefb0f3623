//! Isolated sets (crate feature `isolate`): a set's plugins in a worker process.
