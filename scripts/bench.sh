#!/usr/bin/env bash
# Runs every criterion bench of dylease, then prints, as markdown, one table per benchmark
# (dylease and its baselines) and the ratios the targets of the benchmark issue are stated in.
#
#   scripts/bench.sh                 run all benches once (about 5 minutes), then summarise
#   scripts/bench.sh --runs N        run them N times; each table shows the median over the
#                                    runs, each target ratio the median of the per-run ratios
#                                    (with every run's ratio beside it): steadier on a busy
#                                    machine
#   scripts/bench.sh --summary       summarise the last scripts/bench.sh run again (or, if
#                                    there is none, criterion's latest results)
#   scripts/bench.sh [--runs N] -- ARGS...
#                                    pass ARGS to criterion (a bench name filter, --quick, ...)
#
# Criterion keeps each result in target/criterion/<group>/<bench>/new/estimates.json; the
# summary reads `median.point_estimate` (nanoseconds per iteration) from those files, copying
# them after each run into target/criterion/bench-sh/. Needs python3.
set -euo pipefail
cd "$(dirname "$0")/.."

results="${CARGO_TARGET_DIR:-target}/criterion"
snapshots="$results/bench-sh"
runs=1
summary_only=false
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --summary) summary_only=true; shift ;;
    --) shift; break ;;
    *) echo "usage: $0 [--runs N] [--summary] [-- CRITERION_ARGS...]" >&2; exit 2 ;;
  esac
done

read -r -d '' summarise <<'PY' || true
import glob
import json
import os
import statistics
import sys

mode = sys.argv[1]

if mode == "snapshot":
    # Collects every bench's median of the last criterion run into one file.
    root, out = sys.argv[2], sys.argv[3]
    medians = {}
    for path in glob.glob(os.path.join(root, "**", "new", "estimates.json"), recursive=True):
        bench = os.path.relpath(os.path.dirname(os.path.dirname(path)), root)
        if bench.startswith("bench-sh"):
            continue
        with open(path) as f:
            medians[bench.replace(os.sep, "/")] = json.load(f)["median"]["point_estimate"]
    with open(out, "w") as f:
        json.dump(medians, f, indent=1, sort_keys=True)
    sys.exit(0)

runs = []
for path in sys.argv[2:]:
    with open(path) as f:
        runs.append(json.load(f))


def med(bench):
    """Median over the runs of this bench's median time per iteration (ns), or None."""
    values = [run[bench] for run in runs if bench in run]
    return statistics.median(values) if values else None


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


print(f"Medians of criterion's per-bench medians over {len(runs)} run(s).\n")

acq = ["dylease", "arc_clone", "arcswap_weak", "mutex_weak", "rwlock_weak", "counter"]
one = {b: med(f"acquire_hot/{b}/uncontended") for b in acq}
two = {b: med(f"acquire_hot/{b}/2_threads") for b in acq}
print("### acquire_hot (acquire + drop, a lease held elsewhere)\n")
table(
    ["design", "uncontended", "÷ Arc floor", "2 threads (per op per thread)", "÷ Arc floor, 2 threads",
     "÷ dylease, 2 threads"],
    [[b, fmt_time(one[b]), fmt_ratio(ratio(one[b], one["arc_clone"])), fmt_time(two[b]),
      fmt_ratio(ratio(two[b], two["arc_clone"])), fmt_ratio(ratio(two[b], two["dylease"]))] for b in acq],
)

print("### acquire_hosts (acquire + drop, n hosts each with a lease held elsewhere, used in turn)\n")
rows = []
for n in ["1", "4", "5", "8", "9"]:
    d, a = (med(f"acquire_hosts/{b}/{n}") for b in ["dylease", "arc_clone"])
    rows.append([n, fmt_time(d), fmt_time(a), fmt_ratio(ratio(d, a)),
                 fmt_ratio(ratio(d, med("acquire_hosts/dylease/1")))])
table(["hosts", "dylease", "`Arc`s in turn", "dylease ÷ Arc", "dylease ÷ dylease with 1 host"], rows)

lc = {b: med(f"lease_clone/{b}") for b in ["dylease", "arc_clone"]}
print("### lease_clone (clone + drop)\n")
table(["handle", "median", "÷ Arc"], [[b, fmt_time(lc[b]), fmt_ratio(ratio(lc[b], lc["arc_clone"]))] for b in lc])

print("### pass_lookup (lookup of the middle pass by name)\n")
rows = []
for n in ["10", "100", "1000"]:
    d, g, h, v = (med(f"pass_lookup/{b}/{n}") for b in ["dylease", "dylease_get", "hashmap", "vec_scan"])
    rows.append([n, fmt_time(d), fmt_time(g), fmt_time(h), fmt_time(v), fmt_ratio(ratio(d, h)), fmt_ratio(ratio(g, h)),
                 fmt_ratio(ratio(v, h))])
table(["passes", "dylease `Lease::pass`", "dylease `Lease::get`", "`HashMap<String, _>`", "`Vec<(String, _)>` scan",
       "`pass` ÷ HashMap", "`get` ÷ HashMap", "Vec ÷ HashMap"], rows)

cc = {b: med(f"cold_cycle/{b}") for b in ["dylease", "dylease_permissive", "dylease_shared", "libloading",
                                         "libloading_discover", "libloading_discover_check"]}
print("### cold_cycle (load + unload of 16 C plugins)\n")
table(["side", "median", "÷ libloading"], [[b, fmt_time(cc[b]), fmt_ratio(ratio(cc[b], cc["libloading"]))] for b in cc])

print("### load_scaling (load + unload of n C plugins)\n")
rows = []
for n in [1, 16, 128]:
    d, l = (med(f"load_scaling/{b}/{n}") for b in ["dylease", "libloading"])
    rows.append([str(n), fmt_time(d), fmt_time(d and d / n), fmt_time(l), fmt_time(l and l / n), fmt_ratio(ratio(d, l))])
table(["plugins", "dylease", "dylease per plugin", "libloading", "libloading per plugin", "dylease ÷ libloading"], rows)

print("### reload (benches/reload.rs)\n")
rows = []
for group, benches, base in [
    ("acquire_hot_during_reloads", ["between_reloads", "while_reloading"], "between_reloads"),
    ("single_op", ["immediately", "after_1s", "hot"], "hot"),
    ("reload_latency", ["unchanged_16", "changed_16", "cold_16"], "cold_16"),
]:
    for b in benches:
        t = med(f"{group}/{b}")
        rows.append([f"{group}/{b}", fmt_time(t), f"{fmt_ratio(ratio(t, med(f'{group}/{base}')))} ({base})"])
table(["bench", "median", "÷ baseline"], rows)

# The targets: (what, numerator, denominator, factor, limit, "le" or "ge"); a ratio is
# numerator / denominator * factor, computed within each run.
targets = [
    ("acquire_hot uncontended ÷ Arc floor", "acquire_hot/dylease/uncontended", "acquire_hot/arc_clone/uncontended", 1, 1.2, "le"),
    ("acquire_hot 2 threads ÷ Arc floor, 2 threads", "acquire_hot/dylease/2_threads", "acquire_hot/arc_clone/2_threads", 1, 1.5, "le"),
    ("(ArcSwapWeak load+upgrade ÷ acquire_hot, uncontended: what the cache saves)", "acquire_hot/arcswap_weak/uncontended",
     "acquire_hot/dylease/uncontended", 1, None, None),
    ("(ArcSwapWeak load+upgrade ÷ acquire_hot, 2 threads)", "acquire_hot/arcswap_weak/2_threads",
     "acquire_hot/dylease/2_threads", 1, None, None),
    ("(Mutex<Weak> ÷ acquire_hot, 2 threads)", "acquire_hot/mutex_weak/2_threads", "acquire_hot/dylease/2_threads", 1, None, None),
    ("(counter design ÷ acquire_hot, 2 threads)", "acquire_hot/counter/2_threads", "acquire_hot/dylease/2_threads", 1, None, None),
    # "No more per acquire than one host": 1.0×, with 5% for noise between two benches.
    ("acquire_hosts, 4 hosts in turn ÷ 1 host", "acquire_hosts/dylease/4", "acquire_hosts/dylease/1", 1, 1.05, "le"),
    ("acquire_hosts, 8 hosts in turn ÷ 1 host", "acquire_hosts/dylease/8", "acquire_hosts/dylease/1", 1, 1.05, "le"),
    ("(acquire_hosts, 5 hosts in turn ÷ 1 host)", "acquire_hosts/dylease/5", "acquire_hosts/dylease/1", 1, None, None),
    ("(acquire_hosts, 9 hosts in turn ÷ 1 host: past the 8-entry cache)", "acquire_hosts/dylease/9",
     "acquire_hosts/dylease/1", 1, None, None),
    # 1.0×, with 5% for noise.
    ("lease_clone ÷ Arc::clone", "lease_clone/dylease", "lease_clone/arc_clone", 1, 1.05, "le"),
] + [
    (f"pass_lookup ÷ HashMap, {n} passes", f"pass_lookup/dylease/{n}", f"pass_lookup/hashmap/{n}", 1, 1.3, "le")
    for n in ["10", "100", "1000"]
] + [
    ("cold_cycle ÷ raw libloading", "cold_cycle/dylease", "cold_cycle/libloading", 1, 1.25, "le"),
    ("(libloading + discovery ÷ raw libloading, diagnostic)", "cold_cycle/libloading_discover",
     "cold_cycle/libloading", 1, None, None),
    ("(libloading + discovery + trust and ELF checks by hand ÷ raw libloading, diagnostic)",
     "cold_cycle/libloading_discover_check", "cold_cycle/libloading", 1, None, None),
    ("(cold_cycle ÷ libloading with the same discovery and checks by hand: the machinery)",
     "cold_cycle/dylease", "cold_cycle/libloading_discover_check", 1, None, None),
    ("(cold_cycle permissive ÷ raw libloading)", "cold_cycle/dylease_permissive", "cold_cycle/libloading", 1, None, None),
    ("(cold_cycle of a second host sharing live instances ÷ raw libloading: no dlopen)",
     "cold_cycle/dylease_shared", "cold_cycle/libloading", 1, None, None),
    ("(pass_lookup Lease::get ÷ HashMap, 1000 passes)", "pass_lookup/dylease_get/1000", "pass_lookup/hashmap/1000", 1,
     None, None),
    ("(hot acquire while another thread reloads ÷ between reloads)", "acquire_hot_during_reloads/while_reloading",
     "acquire_hot_during_reloads/between_reloads", 1, None, None),
    ("(reload of 16 unchanged plugins ÷ a cold load of 16)", "reload_latency/unchanged_16", "reload_latency/cold_16", 1,
     None, None),
    ("load_scaling per plugin, 128 ÷ 16", "load_scaling/dylease/128", "load_scaling/dylease/16", 16 / 128, 1.5, "le"),
    ("(libloading per plugin, 128 ÷ 16, for reference)", "load_scaling/libloading/128", "load_scaling/libloading/16",
     16 / 128, None, None),
]
print("### Targets\n")
rows = []
for what, num, den, factor, limit, sense in targets:
    per_run = [run[num] / run[den] * factor for run in runs if num in run and den in run]
    r = statistics.median(per_run) if per_run else None
    if r is None or limit is None:
        met = "n/a" if limit is not None else ""
    else:
        met = "yes" if (r <= limit if sense == "le" else r >= limit) else "**no**"
    row = [what, fmt_ratio(r), "" if limit is None else ("≤ " if sense == "le" else "≥ ") + f"{limit}×", met]
    if len(runs) > 1:
        row.append(", ".join(f"{x:.2f}" for x in per_run))
    rows.append(row)
table(["ratio", "measured", "target", "met"] + (["each run"] if len(runs) > 1 else []), rows)
PY

mkdir -p "$snapshots"
if $summary_only; then
  if ! compgen -G "$snapshots/run-*.json" >/dev/null; then
    python3 -c "$summarise" snapshot "$results" "$snapshots/run-1.json"
  fi
  python3 -c "$summarise" summary "$snapshots"/run-*.json
  exit 0
fi

rm -f "$snapshots"/*.json
start=$SECONDS
for run in $(seq 1 "$runs"); do
  printf '\n== bench run %d of %d (%s)\n' "$run" "$runs" "$(uptime)"
  cargo bench --bench lease --bench pass_lookup --bench load --bench reload -- "$@"
  python3 -c "$summarise" snapshot "$results" "$snapshots/run-$run.json"
done
printf '\n%d bench run(s): %d s; %s\n\n' "$runs" "$((SECONDS - start))" "$(uptime)"
python3 -c "$summarise" summary "$snapshots"/run-*.json
