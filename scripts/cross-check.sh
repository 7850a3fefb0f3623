#!/usr/bin/env bash
# Type-checks dylease for platforms this machine cannot run: the library (default features,
# and none: the plugin-only build) on Windows, macOS and musl Linux, and the `dylease check`
# tool on macOS. Nothing is run or linked: this proves the code compiles there, not that it
# works (README, "Platforms").
#
# Needs a nightly toolchain with the rust-src component: -Zbuild-std builds std for each
# target from source, so no target needs to be installed. Skips with a message otherwise.
#
#   scripts/cross-check.sh            every target below
#   scripts/cross-check.sh TARGET...  only these
set -euo pipefail
cd "$(dirname "$0")/.."

targets=(x86_64-pc-windows-msvc x86_64-apple-darwin aarch64-unknown-linux-musl)
cli_targets=(x86_64-apple-darwin)
[ $# -gt 0 ] && targets=("$@")

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  echo "skipped: type-checking other platforms needs a nightly toolchain (-Zbuild-std); none is installed."
  echo "Install one with 'rustup toolchain install nightly --component rust-src'."
  exit 0
fi
if ! rustup component list --toolchain nightly --installed 2>/dev/null | grep -q '^rust-src'; then
  echo "skipped: type-checking other platforms needs the nightly's rust-src component (-Zbuild-std);"
  echo "this nightly has none. Install it with 'rustup component add --toolchain nightly rust-src'."
  exit 0
fi

step() { printf '\n== %s\n' "$*"; }
failed=()
check() {
  local target=$1
  shift
  step "cargo +nightly check --target $target $*"
  # The package alone (-p): the workspace's other members are Linux test and example crates.
  cargo +nightly check -Zbuild-std=std,core,alloc,panic_abort,panic_unwind \
    --target "$target" --target-dir target/cross -p dylease "$@" || failed+=("$target $*")
}

for target in "${targets[@]}"; do
  check "$target" --lib
  check "$target" --lib --no-default-features
  for cli in "${cli_targets[@]}"; do
    [ "$cli" = "$target" ] && check "$target" --features cli --bin dylease
  done
done

if [ ${#failed[@]} -gt 0 ]; then
  printf '\ncross-check: failed to type-check:\n' >&2
  printf '  %s\n' "${failed[@]}" >&2
  exit 1
fi
printf '\ncross-check: every target type-checks.\n'
