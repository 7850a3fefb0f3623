#!/usr/bin/env bash
# Fuzzes the ELF checks of dylease-elf (dylease-elf/fuzz/fuzz_targets/elf_check.rs) with
# cargo-fuzz, seeded with the test plugins compiled here. Needs a nightly toolchain and
# `cargo install cargo-fuzz`; skips with a message otherwise. Not run in CI (the seeded property
# test in dylease-cli/tests/integration/corruption.rs is the CI's check of the same code).
#
#   scripts/fuzz.sh              fuzz for 60 seconds
#   scripts/fuzz.sh -- ARGS...   pass ARGS to libFuzzer (e.g. -max_total_time=600)
set -euo pipefail
cd "$(dirname "$0")/.."

if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  echo "skipped: cargo fuzz needs a nightly toolchain; none is installed ('rustup toolchain install nightly')."
  exit 0
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
  echo "skipped: cargo-fuzz is not installed ('cargo install cargo-fuzz')."
  exit 0
fi
[ "${1:-}" = "--" ] && shift
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(-max_total_time=60)

# A corpus of real libraries: the C test plugins, compiled once.
corpus=dylease-elf/fuzz/corpus/elf_check
mkdir -p "$corpus"
for source in tests/plugins/*.c; do
  name=$(basename "$source" .c)
  [ -e "$corpus/lib$name.so" ] && continue
  cc -shared -fPIC -O1 -Iinclude "$source" -o "$corpus/lib$name.so" 2>/dev/null || true
done

# cargo-fuzz runs in the fuzzed crate's directory, where the corpus is fuzz/corpus/elf_check.
cd dylease-elf
cargo +nightly fuzz run elf_check "${corpus#dylease-elf/}" -- "${args[@]}"
