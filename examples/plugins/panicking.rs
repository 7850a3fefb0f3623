//! A Rust plugin whose `register` panics: the panic is caught inside the plugin and its
//! message reaches the host's load error. Built as a library
//! (`cargo build -p dylease-example-rust-plugin --example panicking`); the integration tests
//! load it.

dylease_plugin::export_plugin! {
    name: "fragile",
    version: "0.1.0",
    register: |_reg| panic!("the NPU driver is too old"),
}
