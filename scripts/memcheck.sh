#!/usr/bin/env bash
# Memory checks for dylease: the eight-thread churn test and the session-and-compiler tests, with
# real C plugins loaded and unloaded, under valgrind memcheck (any memory error or definite
# leak fails the run), and optionally under AddressSanitizer, ThreadSanitizer and Miri.
#
#   scripts/memcheck.sh           valgrind (installed with apt-get if missing)
#   scripts/memcheck.sh --asan    also AddressSanitizer: churn and session-and-compiler tests (needs a nightly
#                                 toolchain; skipped with a message when there is none)
#   scripts/memcheck.sh --tsan    also ThreadSanitizer: the thread tests and the static-plugin
#                                 tests (needs a nightly with the rust-src component, for
#                                 -Zbuild-std: an uninstrumented std makes TSan report races
#                                 inside std; skipped with a message otherwise)
#   scripts/memcheck.sh --miri    also Miri: the static-plugin tests (no dlopen, so they are the
#                                 ones Miri can run; needs `cargo +nightly miri`; skipped with a
#                                 message otherwise)
#
# Flags combine (`--asan --tsan --miri`). CI runs valgrind only: the others rebuild std or
# interpret the tests, which takes minutes.
#
# ThreadSanitizer does not model fences: a hand-written reference count that drops with a
# Release decrement then an Acquire fence (std's `Arc` algorithm) shows up as a false race.
# std's `Arc` itself switches to an Acquire load under `cfg(sanitize = "thread")`; any such
# count in this crate must do the same, or this check reports noise.
#
# DYLEASE_CHURN_ROUNDS sets the churn test's rounds: 500 by default under valgrind (which runs
# one thread at a time and is slow), 1000 under AddressSanitizer.
set -euo pipefail
cd "$(dirname "$0")/.."

asan=false tsan=false miri=false
for arg in "$@"; do
  case "$arg" in
    --asan) asan=true ;;
    --tsan) tsan=true ;;
    --miri) miri=true ;;
    *) echo "usage: $0 [--asan] [--tsan] [--miri]" >&2; exit 2 ;;
  esac
done

churn=threads::eight_threads_churning_their_only_leases_match_every_load_with_one_unload
filters=("$churn" session_and_compiler::)

# Fails if the filters matched nothing: renamed tests must not make the check pass vacuously.
# (Whether they passed is the exit status.)
check_ran() {
  grep -q "^test $churn \.\.\. " "$1" && grep -q "^test session_and_compiler::" "$1" || {
    echo "memcheck: the churn or session-and-compiler tests did not run; update the filters in $0" >&2
    exit 1
  }
}
# The same for the module filters of the TSan and Miri runs: each module must have run tests.
check_modules_ran() {
  local log=$1
  shift
  for module in "$@"; do
    grep -q "^test $module" "$log" || {
      echo "memcheck: no test of $module ran; update the filters in $0" >&2
      exit 1
    }
  done
}
nightly() { rustup toolchain list 2>/dev/null | grep -q '^nightly'; }
nightly_has() { rustup component list --toolchain nightly --installed 2>/dev/null | grep -q "^$1"; }
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

step "valgrind memcheck: churn and session-and-compiler tests"
DYLEASE_CHURN_ROUNDS="${DYLEASE_CHURN_ROUNDS:-500}" valgrind --error-exitcode=1 \
  --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite \
  "$bin" --test-threads=1 --nocapture "${filters[@]}" 2>&1 | tee "$log"
check_ran "$log"

host=$(rustc -vV | sed -n 's/^host: //p')

if $asan; then
  step "AddressSanitizer: churn and session-and-compiler tests"
  if ! nightly; then
    echo "skipped: AddressSanitizer needs a nightly toolchain (-Zsanitizer); none is installed."
    echo "Install one with 'rustup toolchain install nightly' to run this part."
  else
    # --target keeps the sanitizer out of build scripts; a directory of its own keeps the
    # instrumented build apart from the normal one. The C test plugins are not instrumented.
    RUSTFLAGS="-Zsanitizer=address" DYLEASE_CHURN_ROUNDS="${DYLEASE_CHURN_ROUNDS:-1000}" \
      cargo +nightly test --target "$host" --target-dir target/asan --test integration -- \
      --test-threads=1 --nocapture "${filters[@]}" 2>&1 | tee "$log"
    check_ran "$log"
  fi
fi

if $tsan; then
  step "ThreadSanitizer: thread and static-plugin tests"
  if ! nightly || ! nightly_has rust-src; then
    echo "skipped: ThreadSanitizer needs a nightly toolchain with the rust-src component"
    echo "(-Zsanitizer=thread with -Zbuild-std, so that std is instrumented too); this machine has"
    echo "$(nightly && echo 'a nightly without rust-src' || echo 'no nightly')."
    echo "Install with 'rustup toolchain install nightly --component rust-src' to run this part."
  else
    # Several test threads: races between tests' hosts are what TSan is for here.
    RUSTFLAGS="-Zsanitizer=thread" TSAN_OPTIONS="halt_on_error=1" \
      cargo +nightly test -Zbuild-std --target "$host" --target-dir target/tsan --test integration -- \
      threads:: static_plugins:: 2>&1 | tee "$log"
    check_modules_ran "$log" threads:: static_plugins::
  fi
fi

if $miri; then
  step "Miri: static-plugin tests"
  if ! nightly || ! cargo +nightly miri --version >/dev/null 2>&1; then
    echo "skipped: Miri needs a nightly toolchain with the miri component (cargo +nightly miri);"
    echo "this machine has $(nightly && echo 'a nightly without miri' || echo 'no nightly')."
    echo "Install with 'rustup +nightly component add miri' to run this part."
  else
    # Static plugins only: Miri cannot dlopen. Isolation off: the tests read the clock.
    MIRIFLAGS="-Zmiri-disable-isolation" cargo +nightly miri test --test integration -- \
      static_plugins:: 2>&1 | tee "$log"
    check_modules_ran "$log" static_plugins::
  fi
fi
