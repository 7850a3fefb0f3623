#!/usr/bin/env bash
# The published crate, tested alone: builds the .crate that `cargo publish` would upload,
# unpacks it into a temporary directory (no workspace, no git checkout, no
# examples/rust-plugin member, no dev-dependency of the crate on itself) and runs its tests and
# its demo there. Every test must pass from the package; the Rust-plugin test builds the example
# from its packaged source, saying so on stderr.
#
# The `dylease` command is the workspace member `dylease-cli`, a package of its own. It
# depends on this crate by version, so it is packaged together with it (cargo then builds it
# against the packaged dylease, not crates.io's): that build is all this script checks of it.
# Its tests are not in its package (they use this repository's test plugins and support code)
# and run from the workspace (`cargo test --workspace`).
#
# Dependencies come from cargo's cache, else crates.io. The package is unpacked and built in a
# temporary directory outside the workspace (about 40 s on 2 cores), removed afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

step() { printf '\n== %s\n' "$*"; }

step "cargo package (dylease, and dylease-cli built against it)"
cargo package -p dylease -p dylease-cli --allow-dirty --quiet
version=$(cargo metadata --format-version 1 --no-deps |
  grep -o '"name":"dylease","version":"[^"]*"' | sed 's/.*"version":"\([^"]*\)"/\1/')
crate="$root/target/package/dylease-$version.crate"
[ -f "$crate" ] || { echo "package-check: $crate was not built" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xzf "$crate" -C "$work"
cd "$work/dylease-$version"
export CARGO_TARGET_DIR="$work/target"

step "cargo test, in the unpacked package"
log="$work/test.log"
cargo test 2>&1 | tee "$log"
# Gated tests announce themselves: show that they ran the fallback rather than nothing.
grep -q "^test rust_plugin::a_rust_plugin_built_with_export_plugin_loads_and_its_pass_is_callable ... ok" "$log" || {
  echo "package-check: the Rust-plugin test did not run in the package" >&2
  exit 1
}

step "demo, in the unpacked package"
cargo run --quiet --example demo
