#!/usr/bin/env python3
"""Counts the public API of each library crate of the workspace, from its rustdoc output
(`cargo doc --no-deps` first): items (structs, enums, traits, functions, macros, constants,
type aliases, in every public module) and their methods (inherent methods, and a trait's
required and provided methods). Variants and fields are not counted. Items a crate re-exports
from a crate listed before it are counted in both and named as re-exported.

    cargo doc --no-deps -p dylease-plugin -p dylease-elf -p dylease && scripts/public-items.py
"""
import os
import re
import sys

KINDS = ("struct", "enum", "trait", "fn", "macro", "constant", "type", "union", "static")
# The sidebar's lists of inherent methods, and of a trait's required and provided methods.
SIDEBAR = re.compile(
    r'<h3><a href="#(implementations|required-methods|provided-methods)">[^<]*</a></h3><ul class="block[^"]*">(.*?)</ul>',
    re.S,
)


def count(doc_dir):
    """Each item page's path relative to `doc_dir`, with 1 + its number of methods."""
    pages = {}
    for root, _, files in os.walk(doc_dir):
        for name in files:
            if name.split(".", 1)[0] not in KINDS or not name.endswith(".html") or "!" in name:
                continue
            with open(os.path.join(root, name), encoding="utf-8") as page:
                text = page.read()
            if 'http-equiv="refresh"' in text:
                continue  # a redirect from a private module's path to the item's page
            methods = sum(block.count("<li>") for _, block in SIDEBAR.findall(text))
            pages[os.path.relpath(os.path.join(root, name), doc_dir)] = 1 + methods
    return pages


def main():
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(os.path.dirname(__file__), "..", "target"))
    seen = {}
    for crate in sys.argv[1:] or ["dylease_plugin", "dylease_elf", "dylease"]:
        doc_dir = os.path.join(target, "doc", crate)
        if not os.path.isdir(doc_dir):
            sys.exit(f"public-items: no documentation in {doc_dir}: run `cargo doc --no-deps` first")
        pages = count(doc_dir)
        total = sum(pages.values())
        items = len(pages)
        line = f"{crate}: {total} public items ({items} items, {total - items} methods)"
        for other, theirs in seen.items():
            shared = sum(weight for page, weight in pages.items() if page in theirs)
            if shared:
                line += f", {shared} of them re-exported from {other} ({total - shared} its own)"
        print(line)
        seen[crate] = pages


if __name__ == "__main__":
    main()
