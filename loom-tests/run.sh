#!/usr/bin/env bash
# Runs dylease's loom models: the crate's real code, built with `--cfg loom`, through every
# interleaving up to a preemption bound. Then checks that the models can fail: with each
# deliberately planted bug (a broken upgrade, a registry that reopens a busy file, a loader
# given the path, a generation published Relaxed, an on-demand first use without the set's
# guard, an isolated worker's end that wakes no waiter), a model must catch it. The bugs are
# patches, scripts/planted/<name>.patch, applied to a copy of the tree in
# target/loom/planted/<name>: the shipped code holds none of them.
#
#   loom-tests/run.sh                          # the CI bound (4)
#   LOOM_MAX_PREEMPTIONS=5 loom-tests/run.sh   # a deeper run before a release
#
# Builds in release mode with debug assertions, into target/loom (its own directory, since
# `--cfg loom` changes every crate's build).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

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
# with a model of the platform loader, on-demand mapping and the isolated sets' side of the
# worker protocol with a model of the worker (the crate's own loom tests: src/registry/mod.rs,
# src/load/demand.rs, src/isolate/table.rs).
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

# The model of the models: with a bug planted (scripts/planted/$1.patch, applied to a copy
# of the working tree's files in target/loom/planted/$1), the tests the remaining cargo
# arguments select must fail, and with a violation of what they assert (a line matching $2),
# not some other failure; $3 says what the bug is. An aborted run counts as a failure, as loom
# failures can surface as one. A patch that no longer applies fails the script: remake it
# against the current source (TESTING.md, "Planted bugs").
planted() {
  local pattern=$2 what=$3 patch="scripts/planted/$1.patch" log="$target/$1.log" status
  local scratch="$target/planted/$1"
  shift 3
  echo "== planted bug $patch: $what"
  rm -rf "$scratch"
  mkdir -p "$scratch"
  # Every file of the working tree git would see (committed, changed or new, not ignored).
  git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' file; do [ -e "$file" ] && printf '%s\0' "$file"; done |
    tar --null -T - -cf - | tar -xf - -C "$scratch"
  # Applied as a plain patch of the copy: git looks for no repository above it.
  if ! (cd "$scratch" && GIT_CEILING_DIRECTORIES="$(cd .. && pwd)" git apply "$root/$patch"); then
    echo "$patch does not apply to the current source: remake it (TESTING.md, \"Planted bugs\")" >&2
    exit 1
  fi
  set +e
  (cd "$scratch" && RUSTFLAGS="$flags" cargo test --release --target-dir "$root/$target/broken" "$@") >"$log" 2>&1
  status=$?
  set -e
  if [ "$status" -eq 0 ] || ! grep -qE "$pattern" "$log"; then
    echo "the loom models did NOT catch it (exit $status; without a match of /$pattern/ it failed otherwise):" >&2
    tail -20 "$log" >&2
    exit 1
  fi
  echo "caught (exit $status):"
  grep -m1 -E "$pattern" "$log" | cut -c1-200
}
models=(-p dylease-loom-tests --test models -- --test-threads=1 --nocapture)
registry=(-p dylease --lib -- --test-threads=1 --nocapture)
# An upgrade that checks for zero and then increments (a race): loom's data-race report, or
# I1/I2.
planted upgrade "Causality violation|I[12]: " "an upgrade that races the last drop; model 2 must fail" \
  "${models[@]}" model_2
# Without its wait for a busy file (I1), a registry model must fail.
planted registry "I1: |I7: " "a registry that reopens a busy file; a registry model must fail" \
  "${registry[@]}" loom_models
# I9: a loader given the path (not the checked descriptor) maps a file renamed in between.
planted identity "I9: " "a loader that maps the path, not the checked file; the rename model must fail" \
  "${registry[@]}" loom_models::registry_a_file
# On-demand sets: a first use that maps without the set's guard (the Mapping state) maps the
# plugin twice when two first uses race.
planted on_demand "on-demand: " "a first use that maps without the set's guard; the on-demand model must fail" \
  "${registry[@]}" demand::loom_models
# Isolated sets: a worker's end that does not wake the calls waiting for their answers (nor the
# unload waiting for the end) leaves them waiting for ever: loom reports the deadlock.
planted isolate "deadlock" "a worker's end that wakes no waiter; the isolated models must fail" \
  "${registry[@]}" isolate::table::loom_models
# The slot protocol's publication order: a generation number stored Relaxed (and read Relaxed
# by the thread cache) lets a thread that sees the new number get the older set from the slot.
planted publication "I1: generation" "a generation published without Release; model 10b must fail" \
  "${models[@]}" model_10b
echo "== loom: $((SECONDS - started)) s in all"
