//! Loom models of dylease's lease lifecycle. The models are in `tests/models.rs` and exist only
//! under `--cfg loom`; run them with `loom-tests/run.sh`.
