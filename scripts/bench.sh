#!/usr/bin/env bash
# Runs the interleaved comparisons (benches/compare.rs) N times, each in a process of its own,
# and prints their results as markdown: one table per group (every run's median ratio, the
# median over runs, the spread of the rounds, rounds kept and dropped), then the targets with
# a verdict. The machine's load (`uptime`) is printed before and after every run.
#
#   scripts/bench.sh                   3 runs (about 2 minutes on a 2-core machine)
#   scripts/bench.sh --runs N          N runs
#   scripts/bench.sh --min-overlap K   refuse a verdict unless every two-thread comparison kept
#                                      at least K overlapping rounds in every run (default 5)
#   scripts/bench.sh --summary         summarise the last runs again, without running
#   scripts/bench.sh --criterion       afterwards, also run the criterion benches (absolute
#                                      times; about 5 more minutes)
#   scripts/bench.sh [...] -- ARGS     pass ARGS to every run of benches/compare.rs
#                                      (--rounds N, --scale F, --quick, --only GROUP,...)
#
# A two-thread round counts only if both threads really ran at once (benches/compare.rs); if
# too few did, the script prints the tables, says which comparison fell short, writes no
# verdict and exits with status 1. The runs' raw lines stay in target/bench-sh/run-N.jsonl.
# Needs python3.
set -euo pipefail
cd "$(dirname "$0")/.."

out="${CARGO_TARGET_DIR:-target}/bench-sh"
runs=3
min_overlap=5
summary_only=false
criterion=false
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --min-overlap) min_overlap="$2"; shift 2 ;;
    --summary) summary_only=true; shift ;;
    --criterion) criterion=true; shift ;;
    --) shift; break ;;
    *) echo "usage: $0 [--runs N] [--min-overlap K] [--summary] [--criterion] [-- COMPARE_ARGS...]" >&2; exit 2 ;;
  esac
done

read -r -d '' summarise <<'PY' || true
import json
import statistics
import sys

min_overlap = int(sys.argv[1])
loads = []
runs = []
for path in sys.argv[2:]:
    lines, done = [], None
    with open(path) as f:
        for text in f:
            text = text.strip()
            if not text.startswith("{"):
                continue
            record = json.loads(text)
            if "load" in record:
                loads.append(record["load"])
            elif record.get("done"):
                done = record
            else:
                lines.append(record)
    if done is None:
        sys.exit(f"{path}: the run did not finish (no \"done\" line); see its output above")
    runs.append((lines, done))

# Targets of the benchmark issue: (group, threads, quantity prefix) -> (low, high, label).
def target(group, threads, quantity):
    if (group, threads, quantity) == ("acquire_hot", 1, "dylease ÷ arc_clone"):
        return (None, 1.2, "≤ 1.2×")
    if (group, threads, quantity) == ("acquire_hot", 2, "dylease ÷ arc_clone"):
        return (None, 1.5, "≤ 1.5× (overlapping rounds)")
    if (group, quantity) == ("cold_cycle", "dylease ÷ libloading"):
        # The repeated cold cycle of unchanged files (their parses cached).
        return (None, 1.5, "≤ 1.5×")
    if group == "cold_cycle" and quantity.startswith(("dylease_uncached ÷", "dylease_first_load ÷")):
        return (None, None, "reported")
    if group == "manifest" and quantity.startswith("catalog_"):
        return (None, 0.2, "≤ 1/5")
    if group == "manifest":
        return (None, None, "reported")
    if group == "load_scaling" and quantity.startswith("extra per plugin,"):
        return (0.9, 1.1, "1.0× ± 10% (flat)")
    if group == "on_demand" and quantity.startswith("on_demand ÷ eager_"):
        return (None, 0.05, "≤ 1/20")
    if group == "on_demand":
        return (None, None, "reported")
    if (group, quantity) == ("reload/tmpfs", "changed_reload ÷ cold"):
        return (None, 2.5, "≤ 2.5×")
    if group.startswith("reload/"):
        return (None, None, "reported")
    if (group, quantity) == ("isolated", "isolated_call ÷ socketpair_ping_pong"):
        return (None, 1.5, "≤ 1.5×")
    if (group, quantity) == ("isolated", "memcpy_1mib ÷ isolated_1mib_in"):
        # Throughput: memcpy's time over the call's.
        return (0.5, None, "≥ 0.5")
    if (group, quantity) == ("isolated_cold", "isolated_cycle ÷ (eager_cycle + spawn_wait)"):
        return (None, 1.3, "≤ 1.3×")
    if group.startswith("isolated"):
        return (None, None, "reported")
    return None


def fmt(value, unit):
    if value is None:
        return "n/a"
    # Three significant digits below 1 (a ratio of 0.047 against a target of 1/20 would show
    # as 0.05 with two decimals), two decimals above.
    text = f"{value:.3g}" if abs(value) < 1 else f"{value:.2f}"
    return f"{text}×" if unit == "×" else f"{text} {unit}"


def fmt_ns(ns):
    if ns is None:
        return "n/a"
    for unit, scale in (("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"


# Every quantity, in the order of the first run, with its lines from every run.
order, by_key = [], {}
for lines, _ in runs:
    for record in lines:
        key = (record["group"], record["threads"], record["quantity"])
        if key not in by_key:
            order.append(key)
            by_key[key] = []
        by_key[key].append(record)

done = runs[0][1]
print(f"{len(runs)} run(s) of `benches/compare.rs`, {done['rounds']} rounds each "
      f"(twice as many with two threads), iterations × {done['scale']}; a two-thread round counts "
      f"if each thread's CPU time is ≥ {done['overlap']:.0%} of the round's wall time. Each run took "
      + ", ".join(f"{d['seconds']:.0f} s" for _, d in runs) + ".\n")
print("Load (`uptime`) before and after each run:\n")
for line in loads:
    print(f"- {line}")
print()

rows_by_group = {}
short = []
thin = []
verdicts = []
for key in order:
    group, threads, quantity = key
    records = by_key[key]
    unit = records[0]["unit"]
    medians = [r["median"] for r in records]
    present = [m for m in medians if m is not None]
    overall = statistics.median(present) if present else None
    lows = [r["min"] for r in records if r["min"] is not None]
    highs = [r["max"] for r in records if r["max"] is not None]
    kept = sum(r["kept"] for r in records)
    dropped = sum(r["dropped"] for r in records)
    times = {}
    for r in records:
        for arm, ns in r["times_ns"].items():
            if ns is not None:
                times.setdefault(arm, []).append(ns)
    time_text = ", ".join(f"{arm} {fmt_ns(statistics.median(v))}" for arm, v in times.items())
    row = [quantity, fmt(overall, unit), ", ".join(fmt(m, unit).rstrip("×") for m in medians),
           f"{fmt(min(lows) if lows else None, unit)} – {fmt(max(highs) if highs else None, unit)}",
           f"{kept} / {dropped}", time_text]
    rows_by_group.setdefault((group, threads), []).append(row)
    goal = target(group, threads, quantity)
    if threads > 1 and any(r["kept"] < min_overlap for r in records):
        line = (f"{group} ({threads} threads) {quantity}: kept "
                + ", ".join(str(r["kept"]) for r in records) + f" rounds per run (< {min_overlap})")
        # A verdict needs enough overlapping rounds; a diagnostic comparison without them is
        # shown, marked, and noted, but does not withhold the verdicts.
        if goal is not None:
            short.append(line)
        else:
            row[0] += " (few overlapping rounds)"
            thin.append(line)
    if goal is not None:
        low, high, label = goal
        if low is None and high is None:
            met = "(reported)"
        elif overall is None:
            met = "n/a"
        else:
            ok = (low is None or overall >= low) and (high is None or overall <= high)
            met = "yes" if ok else "**no**"
        verdicts.append([f"{group}{f' ({threads} threads)' if threads > 1 else ''}: {quantity}", fmt(overall, unit),
                         label, met, ", ".join(fmt(m, unit).rstrip("×") for m in medians)])


def table(header, rows):
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(" --- " for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()


for (group, threads), rows in rows_by_group.items():
    print(f"### {group}, {threads} thread{'s' if threads > 1 else ''}\n")
    table(["quantity", "median of runs", "each run's median", "rounds: min – max", "rounds kept / dropped",
           "median times per iteration"], rows)

if thin:
    print("Diagnostic two-thread comparisons with few overlapping rounds (no target rests on them):\n")
    for line in thin:
        print(f"- {line}")
    print()

if short:
    print("No verdict: a two-thread comparison kept too few rounds in which both threads ran at once:",
          file=sys.stderr)
    for line in short:
        print(f"  {line}", file=sys.stderr)
    print("The machine is too busy for two-thread numbers; run again when it is quieter (see the load above).",
          file=sys.stderr)
    sys.exit(1)

print("### Targets\n")
table(["ratio", "median of runs", "target", "met", "each run"], verdicts)
PY

mkdir -p "$out"
if ! $summary_only; then
  rm -f "$out"/run-*.jsonl
  start=$SECONDS
  for run in $(seq 1 "$runs"); do
    file="$out/run-$run.jsonl"
    printf '{"load": "run %d, before: %s"}\n' "$run" "$(uptime | sed 's/^ *//')" > "$file"
    printf '== compare run %d of %d (%s)\n' "$run" "$runs" "$(uptime | sed 's/^ *//')" >&2
    cargo bench --bench compare -- "$@" >> "$file"
    printf '{"load": "run %d, after: %s"}\n' "$run" "$(uptime | sed 's/^ *//')" >> "$file"
  done
  printf '== %d run(s): %d s (%s)\n\n' "$runs" "$((SECONDS - start))" "$(uptime | sed 's/^ *//')" >&2
fi
if ! compgen -G "$out/run-*.jsonl" >/dev/null; then
  echo "$0: no runs in $out to summarise; run without --summary first" >&2
  exit 1
fi
status=0
python3 -c "$summarise" "$min_overlap" $(ls "$out"/run-*.jsonl | sort -V) || status=$?
if $criterion; then
  cargo bench --bench lease --bench pass_lookup --bench load --bench reload
fi
exit "$status"
