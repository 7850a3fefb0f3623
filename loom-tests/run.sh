#!/usr/bin/env bash
# Runs dylease's loom models: the crate's real code, built with `--cfg loom`, through every
# interleaving up to a preemption bound. Then checks that the models can fail: with each
# deliberately planted bug compiled in (a broken upgrade, a registry that reopens a busy file,
# a loader given the path, a generation published Relaxed), a model must catch it.
#
#   loom-tests/run.sh                          # the CI bound (4)
#   LOOM_MAX_PREEMPTIONS=5 loom-tests/run.sh   # a deeper run before a release
#
# Builds in release mode with debug assertions, into target/loom (its own directory, since
# `--cfg loom` changes every crate's build).
set -euo pipefail
cd "$(dirname "$0")/.."

export LOOM_MAX_PREEMPTIONS="${LOOM_MAX_PREEMPTIONS:-4}"
# A model that fails can abort (a second panic while loom objects unwind): keep its report.
export RUST_BACKTRACE=0
flags="--cfg loom -C debug-assertions"
target=target/loom
mkdir -p "$target"

echo "== loom models at LOOM_MAX_PREEMPTIONS=$LOOM_MAX_PREEMPTIONS"
started=$SECONDS
: >"$target/models.log"
failed=()
# Runs each test of one test binary (selected by the cargo arguments given) in a process of its
# own, so that a model that fails (or aborts) does not keep the models after it from running.
# `$1` keeps only the tests whose names contain it.
each_model() {
  local filter=$1 names name
  shift
  if ! names=$(RUSTFLAGS="$flags" cargo test --release --target-dir "$target" "$@" -- --list --format=terse \
    2>>"$target/models.log"); then
    failed+=("(cannot build or list: $*)")
    return
  fi
  for name in $(printf '%s\n' "$names" | sed -n 's/: test$//p' | grep -F -- "$filter"); do
    if ! RUSTFLAGS="$flags" cargo test --release --target-dir "$target" "$@" -- --exact "$name" \
      --test-threads=1 --nocapture >>"$target/models.log" 2>&1; then
      failed+=("$name")
    fi
  done
}
# The host protocol, through the public API (loom-tests/tests), then the library registry
# with a model of the platform loader (the crate's own loom tests, src/load/registry.rs).
each_model "" -p dylease-loom-tests --test models
each_model "" -p dylease-loom-tests --test recipe
each_model loom_models -p dylease --lib
# The report: each model's interleavings and time, the outcomes it saw, and the verdicts.
sed -nE 's/.*(loom model .*)/\1/p; /^    outcomes:|panicked|FAILED|^error/p' "$target/models.log"
if [ "${#failed[@]}" -ne 0 ]; then
  echo "loom models FAILED: ${failed[*]}; the end of the log:" >&2
  tail -40 "$target/models.log" >&2
  exit 1
fi
echo "== all loom models passed in $((SECONDS - started)) s"

# The model of the models: an upgrade that checks for zero and then increments (a race) must
# make model 2 fail. An aborted run counts as a failure, as loom failures can surface as one.
echo "== broken-upgrade check: model 2 must fail with --cfg dylease_broken_upgrade"
set +e
RUSTFLAGS="$flags --cfg dylease_broken_upgrade" cargo test --release --target-dir "$target/broken" \
  -p dylease-loom-tests --test models -- --test-threads=1 --nocapture model_2 >"$target/broken.log" 2>&1
broken=$?
set -e
if [ "$broken" -eq 0 ]; then
  echo "the loom models did NOT catch a broken upgrade: they cannot fail as they must" >&2
  tail -20 "$target/broken.log" >&2
  exit 1
fi
# Only a violation of what model 2 asserts counts: loom's data-race report, or I1/I2.
if ! grep -qE "Causality violation|I[12]: " "$target/broken.log"; then
  echo "model 2 failed with the broken upgrade, but not in a model (exit $broken):" >&2
  tail -20 "$target/broken.log" >&2
  exit 1
fi
echo "model 2 caught the broken upgrade (exit $broken):"
grep -m1 -E "Causality violation|I[12]: " "$target/broken.log" | cut -c1-200

# The same for the registry: without its wait for a busy file (I1), a registry model must fail.
echo "== planted registry bug: a registry model must fail with --cfg dylease_broken_registry"
set +e
RUSTFLAGS="$flags --cfg dylease_broken_registry" cargo test --release --target-dir "$target/broken" \
  -p dylease --lib -- --test-threads=1 --nocapture loom_models >"$target/broken-registry.log" 2>&1
broken=$?
set -e
if [ "$broken" -eq 0 ] || ! grep -qE "I1: |I7: " "$target/broken-registry.log"; then
  echo "the registry models did NOT catch a registry that reopens a busy file (exit $broken):" >&2
  tail -20 "$target/broken-registry.log" >&2
  exit 1
fi
echo "a registry model caught it:"
grep -m1 -E "I1: |I7: " "$target/broken-registry.log" | cut -c1-200
# And for I9: a loader given the path (not the checked descriptor) maps a file renamed in
# between; the rename model must catch it.
echo "== planted identity bug: the rename model must fail with --cfg dylease_broken_identity"
set +e
RUSTFLAGS="$flags --cfg dylease_broken_identity" cargo test --release --target-dir "$target/broken" \
  -p dylease --lib -- --test-threads=1 --nocapture loom_models::registry_a_file >"$target/broken-identity.log" 2>&1
broken=$?
set -e
if [ "$broken" -eq 0 ] || ! grep -qE "I9: " "$target/broken-identity.log"; then
  echo "the registry models did NOT catch a loader that maps the path instead of the checked file (exit $broken):" >&2
  tail -20 "$target/broken-identity.log" >&2
  exit 1
fi
echo "the rename model caught it:"
grep -m1 -E "I9: " "$target/broken-identity.log" | cut -c1-200
# And for the slot protocol's publication order: a generation number stored Relaxed (and read
# Relaxed by the thread cache) lets a thread that sees the new number get the older set from
# the slot; model 10b must catch it.
echo "== planted publication bug: model 10b must fail with --cfg dylease_broken_publication"
set +e
RUSTFLAGS="$flags --cfg dylease_broken_publication" cargo test --release --target-dir "$target/broken" \
  -p dylease-loom-tests --test models -- --test-threads=1 --nocapture model_10b >"$target/broken-publication.log" 2>&1
broken=$?
set -e
if [ "$broken" -eq 0 ] || ! grep -qE "I1: generation" "$target/broken-publication.log"; then
  echo "the loom models did NOT catch a generation number published without Release (exit $broken):" >&2
  tail -20 "$target/broken-publication.log" >&2
  exit 1
fi
echo "model 10b caught it:"
grep -m1 -E "I1: generation" "$target/broken-publication.log" | cut -c1-200
echo "== loom: $((SECONDS - started)) s in all"
