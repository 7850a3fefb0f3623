#!/usr/bin/env bash
# Type-checks dylease for platforms this machine cannot run: the host library and the
# plugin-side crate dylease-plugin on Windows, macOS and musl Linux, and the `dylease check`
# tool on macOS. Nothing is run or linked: this proves the code compiles there, not that it
# works (`docs::testing`, "Platforms").
#
# A target is checked with whichever toolchain can: a nightly with the rust-src component
# (-Zbuild-std builds std for the target from source), or else the default toolchain if the
# target's standard library is installed (`rustup target list --installed`). A target neither
# can check is NOT checked, and the script says so by name.
#
#   scripts/cross-check.sh               every target below; fails if any cannot be checked
#   scripts/cross-check.sh --available   only the targets this machine can check; lists the
#                                        others as not checked and fails only on a real error
#   scripts/cross-check.sh TARGET...     only these (with or without --available)
set -euo pipefail
cd "$(dirname "$0")/.."

available_only=false
if [ "${1:-}" = "--available" ]; then
  available_only=true
  shift
fi
targets=(x86_64-pc-windows-msvc x86_64-apple-darwin aarch64-unknown-linux-musl)
cli_targets=(x86_64-apple-darwin)
[ $# -gt 0 ] && targets=("$@")

build_std=false
why_no_build_std=""
if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  why_no_build_std="no nightly toolchain"
elif ! rustup component list --toolchain nightly --installed 2>/dev/null | grep -q '^rust-src'; then
  why_no_build_std="the nightly has no rust-src component"
else
  build_std=true
fi
installed=$(rustup target list --installed 2>/dev/null || true)

step() { printf '\n== %s\n' "$*"; }
failed=()
checked=()
unchecked=()
check() {
  local target=$1 package=$2
  shift 2
  # One package (-p): the workspace's other members are Linux test and example crates.
  if $build_std; then
    step "cargo +nightly check -Zbuild-std --target $target -p $package $*"
    cargo +nightly check -Zbuild-std=std,core,alloc,panic_abort,panic_unwind \
      --target "$target" --target-dir target/cross -p "$package" "$@" || failed+=("$target $package $*")
  else
    step "cargo check --target $target -p $package $*"
    cargo check --target "$target" --target-dir target/cross -p "$package" "$@" || failed+=("$target $package $*")
  fi
  checked+=("$target -p $package $*")
}

for target in "${targets[@]}"; do
  if ! $build_std && ! grep -qx "$target" <<<"$installed"; then
    unchecked+=("$target ($why_no_build_std, and its standard library is not installed)")
    continue
  fi
  check "$target" dylease --lib
  # Isolated sets (their worker and socket code) exist only with the feature.
  check "$target" dylease --lib --features isolate
  check "$target" dylease-plugin --lib
  for cli in "${cli_targets[@]}"; do
    [ "$cli" = "$target" ] && check "$target" dylease-cli --bin dylease
  done
done

printf '\ncross-check: type-checked %d build(s):\n' "${#checked[@]}"
[ ${#checked[@]} -gt 0 ] && printf '  %s\n' "${checked[@]}"
if [ ${#unchecked[@]} -gt 0 ]; then
  printf 'cross-check: NOT checked (%d target(s)):\n' "${#unchecked[@]}"
  printf '  %s\n' "${unchecked[@]}"
  echo "  (install a nightly with rust-src: 'rustup toolchain install nightly --component rust-src')"
fi
if [ ${#failed[@]} -gt 0 ]; then
  printf 'cross-check: FAILED to type-check:\n' >&2
  printf '  %s\n' "${failed[@]}" >&2
  exit 1
fi
if [ ${#unchecked[@]} -gt 0 ] && ! $available_only; then
  echo "cross-check: failing: not every target was checked (pass --available to check only those this machine can)." >&2
  exit 1
fi
if [ ${#checked[@]} -eq 0 ]; then
  echo "cross-check: nothing was type-checked on this machine: no other platform is covered."
elif [ ${#unchecked[@]} -gt 0 ]; then
  echo "cross-check: every build that was checked type-checks; the targets above were not checked."
else
  echo "cross-check: every target type-checks."
fi
