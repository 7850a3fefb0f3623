#!/usr/bin/env bash
# Memory checks for dylease: the eight-thread churn test and the mission-scenario tests, with
# real C plugins loaded and unloaded, under valgrind memcheck (any memory error or definite
# leak fails the run), and optionally under AddressSanitizer.
#
#   scripts/memcheck.sh           valgrind (installed with apt-get if missing)
#   scripts/memcheck.sh --asan    valgrind, then AddressSanitizer (needs a nightly toolchain;
#                                 skipped with a message when there is none)
#
# DYLEASE_CHURN_ROUNDS sets the churn test's rounds: 500 by default under valgrind (which runs
# one thread at a time and is slow), 1000 under AddressSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."

asan=false
case "${1:-}" in
  --asan) asan=true ;;
  "") ;;
  *) echo "usage: $0 [--asan]" >&2; exit 2 ;;
esac

churn=threads::eight_threads_churning_their_only_leases_match_every_load_with_one_unload
filters=("$churn" mission::)

# Fails if the filters matched nothing: renamed tests must not make the check pass vacuously.
# (Whether they passed is the exit status.)
check_ran() {
  grep -q "^test $churn \.\.\. " "$1" && grep -q "^test mission::" "$1" || {
    echo "memcheck: the churn or mission tests did not run; update the filters in $0" >&2
    exit 1
  }
}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

step() { printf '\n== %s\n' "$*"; }

if ! command -v valgrind >/dev/null; then
  step "installing valgrind"
  apt-get update -qq && apt-get install -y -qq valgrind
fi

step "building the integration tests"
bin=$(cargo test --test integration --no-run --message-format=json |
  grep '"name":"integration"' | grep -o '"executable":"[^"]*"' | sed 's/^"executable":"\(.*\)"$/\1/' | tail -n 1)
[ -x "$bin" ] || { echo "memcheck: cannot find the integration test binary" >&2; exit 1; }

step "valgrind memcheck: churn and mission tests"
DYLEASE_CHURN_ROUNDS="${DYLEASE_CHURN_ROUNDS:-500}" valgrind --error-exitcode=1 \
  --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite \
  "$bin" --test-threads=1 --nocapture "${filters[@]}" 2>&1 | tee "$log"
check_ran "$log"

$asan || exit 0
step "AddressSanitizer: churn and mission tests"
if ! rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
  echo "skipped: AddressSanitizer needs a nightly toolchain (-Zsanitizer); none is installed."
  echo "Install one with 'rustup toolchain install nightly' to run this part."
  exit 0
fi
# --target keeps the sanitizer out of build scripts; a directory of its own keeps the
# instrumented build apart from the normal one. The C test plugins are not instrumented.
host=$(rustc -vV | sed -n 's/^host: //p')
RUSTFLAGS="-Zsanitizer=address" DYLEASE_CHURN_ROUNDS="${DYLEASE_CHURN_ROUNDS:-1000}" \
  cargo +nightly test --target "$host" --target-dir target/asan --test integration -- \
  --test-threads=1 --nocapture "${filters[@]}" 2>&1 | tee "$log"
check_ran "$log"
