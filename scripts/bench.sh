#!/usr/bin/env bash
# Runs every criterion bench of dylease, then prints, as markdown, one table per benchmark
# (dylease and its baselines, medians of this run) and the ratios the targets of the
# benchmark issue are stated in.
#
#   scripts/bench.sh                 run all benches (about 5 minutes), then summarise
#   scripts/bench.sh FILTER...       pass the arguments to criterion (e.g. a bench name filter)
#   scripts/bench.sh --summary       only summarise the last run's results
#
# Criterion keeps each result in target/criterion/<group>/<bench>/new/estimates.json; the
# summary reads `median.point_estimate` (nanoseconds per iteration) from those files.
# Needs python3 for the summary.
set -euo pipefail
cd "$(dirname "$0")/.."

results="${CARGO_TARGET_DIR:-target}/criterion"

if [ "${1:-}" != "--summary" ]; then
  start=$SECONDS
  cargo bench --bench lease --bench pass_lookup --bench load -- "$@"
  printf '\nbench run: %d s\n' "$((SECONDS - start))"
fi

python3 - "$results" <<'PY'
import json
import os
import sys

root = sys.argv[1]


def median(*path):
    """Median time per iteration in ns, or None when that bench has not run."""
    try:
        with open(os.path.join(root, *path, "new", "estimates.json")) as f:
            return json.load(f)["median"]["point_estimate"]
    except FileNotFoundError:
        return None


def fmt_time(ns):
    if ns is None:
        return "n/a"
    for unit, scale in (("s", 1e9), ("ms", 1e6), ("µs", 1e3)):
        if ns >= scale:
            return f"{ns / scale:.3g} {unit}"
    return f"{ns:.3g} ns"


def ratio(a, b):
    return None if a is None or b is None else a / b


def fmt_ratio(r):
    return "n/a" if r is None else f"{r:.2f}×"


def table(header, rows):
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join(" --- " for _ in header) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    print()


targets = []  # (target, measured ratio, limit, "le" or "ge")

# acquire_hot
acq = ["dylease", "arc_clone", "mutex_weak", "rwlock_weak", "counter"]
one = {b: median("acquire_hot", b, "uncontended") for b in acq}
two = {b: median("acquire_hot", b, "2_threads") for b in acq}
print("### acquire_hot (acquire + drop, a lease held elsewhere)\n")
table(
    ["design", "uncontended", "× Arc floor", "2 threads (per op, per thread)", "× Arc floor (2 threads)", "÷ dylease (2 threads)"],
    [
        [b, fmt_time(one[b]), fmt_ratio(ratio(one[b], one["arc_clone"])), fmt_time(two[b]),
         fmt_ratio(ratio(two[b], two["arc_clone"])), fmt_ratio(ratio(two[b], two["dylease"]))]
        for b in acq
    ],
)
targets += [
    ("acquire_hot uncontended ÷ Arc::clone floor", ratio(one["dylease"], one["arc_clone"]), 2.0, "le"),
    ("acquire_hot 2 threads ÷ Arc::clone floor (2 threads)", ratio(two["dylease"], two["arc_clone"]), 2.5, "le"),
    ("Mutex<Weak> ÷ acquire_hot, 2 threads", ratio(two["mutex_weak"], two["dylease"]), 2.0, "ge"),
    ("counter design ÷ acquire_hot, 2 threads", ratio(two["counter"], two["dylease"]), 2.0, "ge"),
]

# lease_clone
lc = {b: median("lease_clone", b) for b in ["dylease", "arc_clone"]}
print("### lease_clone (clone + drop)\n")
table(["handle", "median", "× Arc"], [[b, fmt_time(lc[b]), fmt_ratio(ratio(lc[b], lc["arc_clone"]))] for b in lc])
targets.append(("lease_clone ÷ Arc::clone", ratio(lc["dylease"], lc["arc_clone"]), 1.1, "le"))

# pass_lookup
print("### pass_lookup (lookup of the middle pass by name)\n")
rows = []
for n in ["10", "100", "1000"]:
    d, h, v = (median("pass_lookup", b, n) for b in ["dylease", "hashmap", "vec_scan"])
    rows.append([n, fmt_time(d), fmt_time(h), fmt_time(v), fmt_ratio(ratio(d, h)), fmt_ratio(ratio(v, h))])
    targets.append((f"pass_lookup ÷ HashMap, {n} passes", ratio(d, h), 1.3, "le"))
table(["passes", "dylease `Lease::pass`", "`HashMap<String, _>`", "`Vec<(String, _)>` scan", "dylease ÷ HashMap", "Vec ÷ HashMap"], rows)

# cold_cycle
cc = {b: median("cold_cycle", b) for b in ["dylease", "libloading"]}
print("### cold_cycle (load + unload of 16 C plugins)\n")
table(["side", "median", "× libloading"], [[b, fmt_time(cc[b]), fmt_ratio(ratio(cc[b], cc["libloading"]))] for b in cc])
targets.append(("cold_cycle ÷ raw libloading", ratio(cc["dylease"], cc["libloading"]), 1.15, "le"))

# load_scaling
print("### load_scaling (load + unload of n C plugins)\n")
per = {}
rows = []
for n in [1, 16, 128]:
    d, l = (median("load_scaling", b, str(n)) for b in ["dylease", "libloading"])
    per[("dylease", n)] = None if d is None else d / n
    per[("libloading", n)] = None if l is None else l / n
    rows.append([str(n), fmt_time(d), fmt_time(per[("dylease", n)]), fmt_time(l), fmt_time(per[("libloading", n)]),
                 fmt_ratio(ratio(d, l))])
table(["plugins", "dylease", "dylease per plugin", "libloading", "libloading per plugin", "dylease ÷ libloading"], rows)
print("per-plugin time at 128 ÷ at 16: dylease "
      + fmt_ratio(ratio(per[("dylease", 128)], per[("dylease", 16)]))
      + ", libloading " + fmt_ratio(ratio(per[("libloading", 128)], per[("libloading", 16)])) + "\n")
targets.append(("load_scaling per plugin, 128 ÷ 16", ratio(per[("dylease", 128)], per[("dylease", 16)]), 1.5, "le"))

print("### Targets\n")
rows = []
for name, r, limit, sense in targets:
    met = "n/a" if r is None else ("yes" if (r <= limit if sense == "le" else r >= limit) else "**no**")
    rows.append([name, fmt_ratio(r), ("≤ " if sense == "le" else "≥ ") + f"{limit}×", met])
table(["ratio", "measured", "target", "met"], rows)
PY
