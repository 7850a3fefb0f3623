//! A Rust plugin whose device is missing: its `register` fails with an error of its own, which
//! reaches the host's load error. Built as a library
//! (`cargo build -p dylease-example-rust-plugin --example no_device`); the integration tests
//! load it. Its `register` is a closure, so its manifest lists no pass and is not complete.

dylease_plugin::export_plugin! {
    name: "npu",
    version: "0.1.0",
    register: |_reg| Err(dylease_plugin::RegisterError::custom("no NPU device found")),
    on_load: || Ok(()),
}
