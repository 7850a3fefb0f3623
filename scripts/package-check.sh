#!/usr/bin/env bash
# The published crate, tested alone: builds the .crate that `cargo publish` would upload,
# unpacks it into a temporary directory (no workspace, no git checkout, no
# examples/rust-plugin member, no dev-dependency of the crate on itself) and runs its tests and
# its demo there. Every test must pass from the package; the Rust-plugin test builds the example
# from its packaged source, saying so on stderr.
#
# The `dylease` command is the workspace member `dylease-cli`, a package of its own: it is
# packaged too and built from its package against the packages of this workspace, which is all
# this script checks of it. Its tests are not in its package (they use this repository's test
# plugins and support code) and run from the workspace (`cargo test --workspace`).
#
# Dependencies come from cargo's cache, else crates.io, but for the workspace's crates that
# dylease depends on, dylease-elf (the ELF checks), dylease-sign (the provenance checks) and
# dylease-plugin (the plugin ABI), which are packaged too and used from their own .crate files,
# as crates.io would serve them after all are published. The packages are unpacked and built
# in a temporary directory outside the workspace (about 40 s on 2 cores), removed afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

step() { printf '\n== %s\n' "$*"; }

step "cargo package"
cargo package -p dylease -p dylease-elf -p dylease-sign -p dylease-plugin -p dylease-cli --allow-dirty --no-verify --quiet
version=$(cargo metadata --format-version 1 --no-deps |
  grep -o '"name":"dylease","version":"[^"]*"' | sed 's/.*"version":"\([^"]*\)"/\1/')
elf_version=$(cargo metadata --format-version 1 --no-deps |
  grep -o '"name":"dylease-elf","version":"[^"]*"' | sed 's/.*"version":"\([^"]*\)"/\1/')
sign_version=$(cargo metadata --format-version 1 --no-deps |
  grep -o '"name":"dylease-sign","version":"[^"]*"' | sed 's/.*"version":"\([^"]*\)"/\1/')
plugin_version=$(cargo metadata --format-version 1 --no-deps |
  grep -o '"name":"dylease-plugin","version":"[^"]*"' | sed 's/.*"version":"\([^"]*\)"/\1/')
crate="$root/target/package/dylease-$version.crate"
elf_crate="$root/target/package/dylease-elf-$elf_version.crate"
sign_crate="$root/target/package/dylease-sign-$sign_version.crate"
cli_version=$(cargo metadata --format-version 1 --no-deps |
  grep -o '"name":"dylease-cli","version":"[^"]*"' | sed 's/.*"version":"\([^"]*\)"/\1/')
plugin_crate="$root/target/package/dylease-plugin-$plugin_version.crate"
cli_crate="$root/target/package/dylease-cli-$cli_version.crate"
for built in "$crate" "$elf_crate" "$sign_crate" "$plugin_crate" "$cli_crate"; do
  [ -f "$built" ] || { echo "package-check: $built was not built" >&2; exit 1; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xzf "$crate" -C "$work"
tar -xzf "$elf_crate" -C "$work"
tar -xzf "$sign_crate" -C "$work"
tar -xzf "$plugin_crate" -C "$work"
tar -xzf "$cli_crate" -C "$work"
cd "$work/dylease-$version"
export CARGO_TARGET_DIR="$work/target"
# dylease-elf, dylease-sign and dylease-plugin from their packages, not from crates.io; the
# Rust-plugin tests build plugins against the unpacked dylease-plugin too.
printf '\n[patch.crates-io]\ndylease-elf = { path = "../dylease-elf-%s" }\ndylease-sign = { path = "../dylease-sign-%s" }\ndylease-plugin = { path = "../dylease-plugin-%s" }\n' \
  "$elf_version" "$sign_version" "$plugin_version" >>Cargo.toml
export DYLEASE_PLUGIN_CRATE="$work/dylease-plugin-$plugin_version"

# The package has no dev-dependency on itself, which turns `watch` and `isolate` on for the
# workspace's tests and examples: name them here, as a user running them would.
step "cargo test --features watch,isolate, in the unpacked package"
log="$work/test.log"
cargo test --features watch,isolate 2>&1 | tee "$log"
# Gated tests announce themselves: show that they ran the fallback rather than nothing.
grep -q "^test rust_plugin::a_rust_plugin_built_with_export_plugin_loads_and_its_pass_is_callable ... ok" "$log" || {
  echo "package-check: the Rust-plugin test did not run in the package" >&2
  exit 1
}

step "demo, in the unpacked package"
cargo run --quiet --features isolate --example demo

step "dylease-cli, built from its package against the packages above"
cd "$work/dylease-cli-$cli_version"
printf '\n[patch.crates-io]\ndylease = { path = "../dylease-%s" }\ndylease-elf = { path = "../dylease-elf-%s" }\ndylease-sign = { path = "../dylease-sign-%s" }\ndylease-plugin = { path = "../dylease-plugin-%s" }\n' \
  "$version" "$elf_version" "$sign_version" "$plugin_version" >>Cargo.toml
cargo build --quiet
