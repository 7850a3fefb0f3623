#!/usr/bin/env bash
# Mutation testing of the protocol and trust files with cargo-mutants: every mutant (a small
# plausible bug the tool plants: an operator swapped, a condition forced, a body replaced) must
# make the fast test subset below fail. Not run by CI: hours on two cores. The latest numbers,
# and an argument for every mutant still missed, are in TESTING.md.
#
#   scripts/mutants.sh                            # every file below
#   scripts/mutants.sh src/host/generations.rs    # some of them
#   MUTANTS_TIMEOUT=120 scripts/mutants.sh        # the least test timeout per mutant, seconds
#   MUTANTS_ARGS="--re keep" scripts/mutants.sh   # more cargo-mutants options (here: a subset)
#   MUTANTS_TESTS="policy::" scripts/mutants.sh   # other integration modules to run
#   MUTANTS_TEST_THREADS=2 scripts/mutants.sh     # test threads per binary (default 8)
#   MUTANTS_FEATURES=python MUTANTS_TESTS="python:: load::python::" \
#     scripts/mutants.sh src/load/python/instance.rs   # the Python instance, with its feature
#
#   MUTANTS_RETRY_TIMEOUT=0 scripts/mutants.sh   # no second run of the mutants that timed out
#   MUTANTS_FEATURES=isolate MUTANTS_TESTS="isolate:: isolated::" \
#     scripts/mutants.sh src/isolate/frame.rs src/isolate/table.rs   # isolated sets' protocol
#
# A member crate instead of the host's: MUTANTS_PACKAGE names it, the files are its own, and
# its whole test suite runs (`cargo test -p`; the lists of test modules above do not apply):
#
#   MUTANTS_PACKAGE=dylease-elf scripts/mutants.sh dylease-elf/src/manifest.rs \
#     dylease-elf/src/fingerprint.rs              # the manifest reader and the fingerprint
#   MUTANTS_PACKAGE=dylease-sign scripts/mutants.sh dylease-sign/src/*.rs   # the provenance checks
#
# Prints caught / missed / timeout / unviable per file, then the missed mutants. A timeout
# counts as caught by cargo-mutants, but here it is reported apart: each mutant that timed out
# runs again alone with a long timeout, and one that times out then too is a missing deadline
# in a test (or a loop made endless). The full report is in target/mutants/mutants.out, the
# second run's in target/mutants/retry/mutants.out.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo-mutants >/dev/null; then
  echo "== installing cargo-mutants"
  cargo install cargo-mutants --locked
fi

files=("$@")
package="${MUTANTS_PACKAGE:-}"
if [ -n "$package" ] && [ "${#files[@]}" -eq 0 ]; then
  echo "MUTANTS_PACKAGE=$package: name the files of $package to mutate" >&2
  exit 1
fi
if [ "${#files[@]}" -eq 0 ]; then
  files=(src/host/generations.rs src/host/keeper.rs src/host/thread_cache.rs src/registry/mod.rs
    src/trust/mod.rs src/trust/walk.rs src/trust/deps.rs src/trust/policy.rs
    src/sys/library.rs src/sys/linux/loader.rs src/sys/linux/identity.rs
    src/sys/raw.rs src/sys/walk.rs src/host/lease.rs
    src/host/set.rs src/inspect/parse_cache.rs)
fi
file_args=()
for file in "${files[@]}"; do
  file_args+=(--file "$file")
done

# The fast subset: the library's unit tests, the modules of the integration binary that load
# (static and real) plugins and check the protocol, and the keeper's thread count. Not the
# doctests, the CLI tests (they build the tool), the threads churn, benches or loom models
# (loom-tests/run.sh plants its own bugs). Eight test threads on two cores: most of the
# subset's time is tests waiting (for a deadline, a settled file, a child), and eight
# halve the run of each mutant; every test keeps its own bound.
# The names are test-name filters for every binary run, the library's unit tests included:
# those of the mutated files (host::, registry::, trust::, sys::library::,
# parse_cache::, which also names the library's `inspect::parse_cache::tests`)
# must be listed too, or a filter leaves them out and their mutants show as missed.
# MUTANTS_TESTS replaces the list (say, "generation_protocol:: host::keeper::").
# shellcheck disable=SC2206 # a list of names
modules=(${MUTANTS_TESTS:-host:: registry:: sys::
  generation_protocol:: plugin_reentry:: swapped_after_check:: static_plugins:: policy::
  sharing:: reload:: reload_trust:: trust:: failure:: generations:: observability::
  discovery:: elf_headers:: typed:: waits:: dependencies:: identity:: attack:: manifest::
  abi_v2:: cpp_unload:: parse_cache:: on_demand:: inspect::parse_cache::})
# As root, the tests that need root too (`#[ignore = "needs root"]`: other users' files,
# mounts), as CI's root step runs them.
ignored=()
if [ "$(id -u)" = 0 ]; then
  ignored=(--include-ignored)
fi
out=target/mutants
mkdir -p "$(dirname "$out")"
echo "== cargo mutants on ${files[*]}"
set +e
# The unmutated run (which also compiles the C fixtures) sets each mutant's test timeout:
# five times its own time, and at least MUTANTS_TIMEOUT.
features=()
if [ -n "${MUTANTS_FEATURES:-}" ]; then
  features=(--features "$MUTANTS_FEATURES")
  # pyo3 builds against this interpreter's libpython.
  export PYO3_PYTHON="${PYO3_PYTHON:-/usr/bin/python3}"
fi
# Every acquire() of the suite waits at most this long (60 s otherwise): a mutant that never
# finishes an unload fails each test waiting for it, and the run ends within the timeout.
export DYLEASE_TEST_ACQUIRE_BOUND_SECS="${DYLEASE_TEST_ACQUIRE_BOUND_SECS:-10}"
# run OUTPUT TIMEOUT [cargo-mutants options...]
run() {
  local output=$1 timeout=$2
  shift 2
  if [ -n "$package" ]; then
    # The member's own suite: unit, integration and doc tests. (Not `--include-ignored`: it
    # would run the doctests marked `ignore` too, which are not meant to compile.)
    nice -n 19 cargo mutants --package "$package" "${file_args[@]}" "${features[@]}" --jobs 1 \
      --minimum-test-timeout "$timeout" --build-timeout 900 --output "$output" "$@"
    return
  fi
  nice -n 19 cargo mutants "${file_args[@]}" "${features[@]}" --jobs 1 --minimum-test-timeout "$timeout" \
    --build-timeout 900 --output "$output" "$@" \
    -- --lib --test integration --test keeper_thread -- "${ignored[@]}" \
    --test-threads "${MUTANTS_TEST_THREADS:-8}" "${modules[@]}" one_keeper_thread
}
# shellcheck disable=SC2086 # MUTANTS_ARGS is a list of options
run "$out" "${MUTANTS_TIMEOUT:-90}" ${MUTANTS_ARGS:-}
status=$?
set -e

# A mutant that breaks every unload makes each test that waits for one wait out its bound
# (60 s for some), and the suite's bounded waits add up past the timeout above. Each mutant
# that timed out runs again alone with MUTANTS_RETRY_TIMEOUT (default 900 s; 0: no retry): one
# caught then waited only with bounds; one that times out again waited without a bound, or
# loops. MUTANTS_ARGS is not given again: its filters chose these mutants already, and a
# `--re` of its own would add others to the exact names below (cargo-mutants ORs them).
retried=()
if [ -s "$out/mutants.out/timeout.txt" ] && [ "${MUTANTS_RETRY_TIMEOUT:-900}" != 0 ]; then
  while IFS= read -r name; do
    retried+=(--re "^$(printf '%s' "$name" | sed 's/[][\.*^$()+?{}|]/\\&/g')\$")
  done <"$out/mutants.out/timeout.txt"
  echo "== again, with a ${MUTANTS_RETRY_TIMEOUT:-900} s timeout: the $((${#retried[@]} / 2)) that timed out"
  rm -rf "$out/retry"
  set +e
  run "$out/retry" "${MUTANTS_RETRY_TIMEOUT:-900}" "${retried[@]}"
  retry_status=$?
  set -e
  # A miss of the first run stays the verdict (2); otherwise the second run's is.
  if [ "$status" != 2 ]; then
    status=$retry_status
  fi
fi

# Per file, from cargo-mutants' lists (each line starts with the mutated file's path).
report="$out/mutants.out"
count() { grep -c "^$1:" "$report/$2.txt" 2>/dev/null || true; }
printf '\n%-28s %7s %7s %8s %9s\n' file caught missed timeout unviable
for file in "${files[@]}"; do
  printf '%-28s %7s %7s %8s %9s\n' "$file" "$(count "$file" caught)" "$(count "$file" missed)" \
    "$(count "$file" timeout)" "$(count "$file" unviable)"
done
if [ -s "$report/missed.txt" ]; then
  echo
  echo "missed:"
  sed 's/^/  /' "$report/missed.txt"
fi
if [ -s "$report/timeout.txt" ]; then
  echo
  echo "timed out at first:"
  sed 's/^/  /' "$report/timeout.txt"
fi
if [ "${#retried[@]}" -ne 0 ]; then
  for outcome in caught missed timeout; do
    if [ -s "$out/retry/mutants.out/$outcome.txt" ]; then
      echo
      echo "run again alone: $outcome"
      sed 's/^/  /' "$out/retry/mutants.out/$outcome.txt"
    fi
  done
fi
# cargo-mutants exits 2 when a mutant was missed, 3 when one timed out (here: timed out again
# alone): the report says which.
exit "$status"
