#!/usr/bin/env bash
# The house in numbers, against its limits: files of the host crate and the CLI that hold
# `unsafe` code (blocks and impls; attributes and comments do not count), the share of the
# workspace's code held by its largest room, the README's length, the public items of each
# library crate, and the binary cost of dylease to an application (scripts/binary-size.sh).
# Prints every figure; fails if one is over its limit, naming every figure over its limit.
#
#   scripts/house.sh              everything (builds the docs and binary-size.sh's release applications)
#   scripts/house.sh --quick      no docs and no binary sizes
set -euo pipefail
cd "$(dirname "$0")/.."
quick=false
[ "${1:-}" = "--quick" ] && quick=true

# The limits.
max_unsafe_files=8
max_room_percent=22
max_readme_lines=350

failed=()
# The figures the Python part finds over their limits, one a line.
over=$(mktemp)
trap 'rm -f "$over"' EXIT

python3 - "$max_unsafe_files" "$max_room_percent" "$over" <<'PY' || failed+=("the unsafe and room counts (the script failed)")
import collections, re, subprocess, sys

max_unsafe, max_share = int(sys.argv[1]), float(sys.argv[2])
files = subprocess.run(["git", "ls-files", "*.rs"], capture_output=True, text=True, check=True).stdout.split()

def code_lines(path):
    """The file's lines with line comments, and doc comments, taken out."""
    for line in open(path, encoding="utf-8"):
        stripped = line.strip()
        if stripped.startswith("//"):
            continue
        yield re.sub(r'"([^"\\]|\\.)*"', '""', stripped)

# `unsafe` code: in the host crate (src/) and the command-line tool (dylease-cli/src/).
unsafe_pattern = re.compile(r"\bunsafe\s*(\{|impl\b)")
with_unsafe = []
for path in files:
    if path.startswith("src/") or path.startswith("dylease-cli/src/"):
        blocks = sum(len(unsafe_pattern.findall(line)) for line in code_lines(path))
        if blocks:
            with_unsafe.append((path, blocks))
print(f"files with `unsafe` code (host crate and CLI): {len(with_unsafe)} (limit {max_unsafe})")
for path, blocks in with_unsafe:
    print(f"  {path}: {blocks}")

# Rooms: each crate's top-level modules (a directory under src/ with what it holds, or a file),
# over the shipped code of the workspace (every crate's src/, the documentation pages left out).
rooms = collections.Counter()
for path in files:
    match = re.match(r"^((?:dylease-[a-z]+/)?src)/([^/]+?)(?:\.rs)?(?:/|$)", path)
    if not match or "/docs/" in path or path.startswith("src/docs"):
        continue
    rooms[f"{match.group(1)}/{match.group(2)}"] += sum(1 for _ in open(path, encoding="utf-8"))
total = sum(rooms.values())
largest, lines = rooms.most_common(1)[0]
share = 100.0 * lines / total
print(f"largest room: {largest} with {lines} of {total} lines of shipped code ({share:.1f}%, limit {max_share:.0f}%)")
for room, count in rooms.most_common(8):
    print(f"  {room}: {count} ({100.0 * count / total:.1f}%)")
with open(sys.argv[3], "w", encoding="utf-8") as over:
    if len(with_unsafe) > max_unsafe:
        over.write(f"files with `unsafe` code ({len(with_unsafe)}, limit {max_unsafe})\n")
    if share > max_share:
        over.write(f"the largest room, {largest} ({share:.1f}%, limit {max_share:.0f}%)\n")
PY
while IFS= read -r figure; do failed+=("$figure"); done <"$over"

readme=$(wc -l <README.md)
echo "README.md: $readme lines (limit $max_readme_lines)"
[ "$readme" -le "$max_readme_lines" ] || failed+=("README.md ($readme lines, limit $max_readme_lines)")

if ! $quick; then
  if cargo doc --quiet --no-deps -p dylease-plugin -p dylease-elf -p dylease; then
    echo "public items:"
    python3 scripts/public-items.py | sed 's/^/  /'
  else
    failed+=("the documentation build (public items not counted)")
  fi
  bash scripts/binary-size.sh || failed+=("the binary cost (scripts/binary-size.sh, above)")
fi

if [ "${#failed[@]}" -ne 0 ]; then
  echo "house.sh: over the limit:" >&2
  printf '  %s\n' "${failed[@]}" >&2
  exit 1
fi
echo "house.sh: every figure within its limit"
