#!/usr/bin/env bash
# What a default-features application pays for dylease, as a new user would measure it: two
# stripped release builds, an application that builds a host over a directory and acquires a
# lease, and the same application without dylease (it lists the directory instead). Prints
# the difference and fails if it exceeds the release budget below, so a change that grows it
# is seen; the figure in `docs::performance` ("Binary cost") is re-measured whenever this changes.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

# The budget, in bytes: what `docs::performance` ("Binary cost") accounts for, part by part.
budget=$((660 * 1024))

work="$root/target/binary-size"
mkdir -p "$work/with/src" "$work/without/src"
write_manifest() {
  cat >"$1/Cargo.toml" <<TOML
[package]
name = "$2"
version = "0.0.0"
edition = "2024"
publish = false

[dependencies]
$3

[profile.release]
strip = true

[workspace]
TOML
}
write_manifest "$work/with" with "dylease = { path = \"$root\" }"
write_manifest "$work/without" without ""
cat >"$work/with/src/main.rs" <<'RUST'
fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "plugins".into());
    // SAFETY: a measurement program; the directory's plugins are its caller's.
    let host = unsafe { dylease::PluginHost::builder().dir(dir) }.build().unwrap();
    match host.acquire() {
        Ok(lease) => println!("{} plugins", lease.plugins().len()),
        Err(error) => println!("{error}"),
    }
}
RUST
cat >"$work/without/src/main.rs" <<'RUST'
fn main() {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "plugins".into());
    println!("{}", std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0));
}
RUST
for app in with without; do
  cargo build --quiet --release --manifest-path "$work/$app/Cargo.toml" --target-dir "$work/target"
done
with=$(stat -c %s "$work/target/release/with")
without=$(stat -c %s "$work/target/release/without")
cost=$((with - without))
printf 'binary cost of dylease (default features, stripped release): %d bytes (%d KiB); budget %d KiB\n' \
  "$cost" $((cost / 1024)) $((budget / 1024))
if [ "$cost" -gt "$budget" ]; then
  echo "binary-size: over the budget: find what grew (cargo bloat --release --crates), or raise the budget with the account in docs::performance" >&2
  exit 1
fi
