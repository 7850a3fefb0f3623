#!/usr/bin/env bash
# The library's import graph, from its source: each module's imports of other modules of the
# crate (`use crate::…`, `crate::…` paths, `super::…`, and a child module's items), one line
# per module. Fails if the graph has a circle, or an arrow that points up the rooms (a lower
# room naming a higher one): sync <- sys <- log_scope <- inspect <- provenance <- trust <- registrar <-
# registry <- load <- isolate <- host <- python, with `error` the shared vocabulary below them all.
#
# Arrows listed in scripts/imports.known (each with its reason) are left out of the circle
# check; the script fails if one of them no longer exists.
#
# A module is a file: inline modules count as their file's, and the crate root (`lib.rs`, which
# only declares and re-exports) is left out; so is test code (from a file's first
# `#[cfg(...test...)]` line on) and the documentation pages (`src/docs/`).
#
#   scripts/imports.sh        the listing and the verdict
#   scripts/imports.sh -q     the verdict only
set -euo pipefail
cd "$(dirname "$0")/.."
quiet=false
[ "${1:-}" = "-q" ] && quiet=true

# Every file module, as `path module`.
modules=$(find src -name '*.rs' -not -path 'src/docs/*' -not -path src/lib.rs | sort |
  sed -E 's#^src/##; s#\.rs$##; s#/mod$##' | awk '{ m = $0; gsub("/", "::", m); print m }')

edges=$(for module in $modules; do
  file="src/${module//:://}.rs"
  [ -f "$file" ] || file="src/${module//:://}/mod.rs"
  awk -v self="$module" -v known="$(echo $modules)" '
    BEGIN {
      n = split(known, list, " "); for (i = 1; i <= n; i++) is_module[list[i]] = 1
      parent = self; sub(/(::)?[a-z_0-9]+$/, "", parent)
    }
    # The longest module that prefixes `path`: what `path` names, or the module it lies in.
    function owner(path,   best, parts, k, i, candidate) {
      best = ""; k = split(path, parts, "::"); candidate = ""
      for (i = 1; i <= k; i++) {
        candidate = (i == 1 ? parts[1] : candidate "::" parts[i])
        if (candidate in is_module) best = candidate
      }
      return best
    }
    function edge(path,   to) {
      to = owner(path)
      if (to != "" && to != self) print self, to
    }
    /^#\[cfg\(.*test/ { exit }
    /^[ \t]*\/\// { next }
    /^[ \t]*(pub(\([a-z]+\))? )?mod [a-z_0-9]+;/ { child[$0] = 1; m = $0; sub(/.*mod /, "", m); sub(/;.*/, "", m); children[m] = 1; next }
    {
      line = $0
      while (match(line, /crate::[a-z_0-9:]+/)) {
        edge(substr(line, RSTART + 7, RLENGTH - 7)); line = substr(line, RSTART + RLENGTH)
      }
      line = $0
      while (match(line, /super::[A-Za-z_0-9:{*]*/)) {
        rest = substr(line, RSTART + 7, RLENGTH - 7); sub(/[:{*]+$/, "", rest)
        # Inside an inline module (indented), `super` is the file module itself.
        base = ($0 ~ /^[ \t]/) ? self : parent
        if (rest == "" || rest ~ /^[A-Z]/) edge(base); else edge(base "::" rest)
        line = substr(line, RSTART + RLENGTH)
      }
      if (match($0, /^[ \t]*(pub(\([a-z]+\))? )?use [a-z_0-9]+(::| as |;)/)) {
        first = $0; sub(/^[ \t]*(pub(\([a-z]+\))? )?use /, "", first); sub(/(::| as |;).*/, "", first)
        if (first in children) edge(self "::" first)
      }
    }
  ' "$file"
done | sort -u)

if ! $quiet; then
  echo "== intra-crate imports, per module (module -> the modules it names)"
  for module in $modules; do
    printf '%-28s -> %s\n' "$module" "$(awk -v m="$module" '$1 == m { printf "%s ", $2 }' <<<"$edges")"
  done
fi

status=0
# The rooms, lowest first (docs::internals has the table); a room may name only rooms below
# it. `error` (0) is the shared vocabulary and names none; `test_dir` is test code, and
# `guarantees` the compile-time checks of the public surface (no code runs). A top-level
# module missing from this list fails, so that a new room is placed on purpose.
rooms="error sync sys log_scope inspect provenance trust registrar registry load isolate host python"
layer() {
  local top=${1%%::*} i=0
  case "$top" in test_dir | guarantees) echo 0; return ;; esac
  for room in $rooms; do
    [ "$room" = "$top" ] && { echo $i; return; }
    i=$((i + 1))
  done
  echo -1
}
for module in $modules; do
  if [ "$(layer "$module")" -lt 0 ]; then
    echo "imports: $module is in no room: add its top-level module to \$rooms in scripts/imports.sh"
    status=1
  fi
done
upward=$(while read -r from to; do
  [ -z "$from" ] && continue
  lf=$(layer "$from"); lt=$(layer "$to")
  if [ "$lt" -gt "$lf" ]; then echo "  $from -> $to"; fi
done <<<"$edges")
if [ -n "$upward" ]; then
  echo "imports: arrows up the rooms ($rooms, lowest first):"
  echo "$upward"
  status=1
fi

# Known arrows that close a circle today (scripts/imports.known) are left out of the circle
# check, and listed; one that no longer exists fails, so the list cannot go stale.
known=$(sed -e 's/#.*//' -e 's/->/ /' scripts/imports.known | awk 'NF == 2 { print $1, $2 }')
while read -r from to; do
  [ -z "$from" ] && continue
  if ! grep -qx "$from $to" <<<"$edges"; then
    echo "imports: scripts/imports.known lists $from -> $to, which no longer exists: remove it."
    status=1
  fi
done <<<"$known"
if [ -n "$known" ]; then
  $quiet || echo "imports: known arrows left out of the circle check (scripts/imports.known):"
  $quiet || sed 's/^/  /' <<<"$known"
  edges=$(grep -vxF -f <(printf '%s\n' "$known") <<<"$edges" || true)
fi

# Circles: modules that reach themselves. For each module, the modules it reaches.
circles=""
declare -A reach
for module in $modules; do
  seen=" "; frontier="$module"
  while [ -n "$frontier" ]; do
    next=""
    for m in $frontier; do
      for to in $(awk -v m="$m" '$1 == m { print $2 }' <<<"$edges"); do
        case "$seen" in *" $to "*) continue ;; esac
        seen="$seen$to "; next="$next $to"
      done
    done
    frontier=$next
  done
  case "$seen" in *" $module "*)
    circles="$circles  $module reaches itself through: $(for to in $seen; do
      awk -v a="$to" -v b="$module" '$1 == a && $2 == b { found = 1 } END { exit !found }' <<<"$edges" 2>/dev/null &&
        printf '%s ' "$to"; done; true)-> $module"$'\n'
  esac
done
if [ -n "$circles" ]; then
  echo "imports: circles (a module that reaches itself; listed with the modules that name it back):"
  printf '%s' "$circles"
  status=1
fi
if [ $status -eq 0 ]; then
  if [ -n "$known" ]; then
    echo "imports: no circle (but the known arrows above); every arrow points down the rooms."
  else
    echo "imports: no circle; every arrow points down the rooms ($rooms, lowest first)."
  fi
fi
exit $status
