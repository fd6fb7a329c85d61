#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Check that tagdisk's includes point down the layers and form no cycle.

    check_layers.py [ROOT]

Layers, lowest first: src/common, then src/engine with its public headers in
include/tagdisk, then src/daemon and src/ctl side by side:

    common <- engine <- daemon
    common <- ctl

A quoted include names its layer ("common/log.h", "tagdisk/queue.h",
"daemon/config.h", "ctl/ctl_int.h"); a bare name ("admin_int.h") is a header
beside the including file. Two rules:

  1. a file includes only headers of its own layer or of a layer below it;
  2. headers do not include each other in a cycle, so every header can be
     read bottom-up. (A .c file may call back into the stage that calls it, as
     prep does into the queue: that is a callback, not a layering cycle.)

Prints one line per violation and exits 1 when there is any, 0 otherwise.
"""
import os
import re
import sys

ALLOWED = {
    "common": {"common"},
    "engine": {"common", "engine"},
    "daemon": {"common", "engine", "daemon"},
    "ctl": {"common", "ctl"},
}
PREFIX_LAYER = {"common": "common", "tagdisk": "engine", "daemon": "daemon", "ctl": "ctl"}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(path):
    parts = path.split(os.sep)
    if parts[:2] == ["include", "tagdisk"]:
        return "engine"
    if parts[0] == "src" and len(parts) > 2 and parts[1] in ALLOWED:
        return parts[1]
    return None


def resolve(includer, name):
    """Return (layer, repository path) of an included header."""
    head, _, _ = name.partition("/")
    if "/" in name and head in PREFIX_LAYER:
        if head == "tagdisk":
            return "engine", os.path.join("include", name)
        return PREFIX_LAYER[head], os.path.join("src", name)
    return layer_of(includer), os.path.join(os.path.dirname(includer), name)


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else "."
    os.chdir(root)
    files = []
    for top in ("src", "include"):
        for d, _, names in os.walk(top):
            files += [os.path.join(d, n) for n in names if n.endswith((".c", ".h"))]
    bad = []
    edges = {}
    for f in sorted(files):
        layer = layer_of(f)
        if layer is None:
            bad.append(f"{f}: not in a layer folder (src/common, src/engine, src/daemon, "
                       "src/ctl, include/tagdisk)")
            continue
        with open(f, encoding="utf-8") as fh:
            text = fh.read()
        for m in INCLUDE.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            to_layer, to_path = resolve(f, m.group(1))
            if not os.path.exists(to_path):
                bad.append(f'{f}:{line}: "{m.group(1)}" does not exist ({to_path})')
                continue
            if to_layer not in ALLOWED[layer]:
                bad.append(f'{f}:{line}: "{m.group(1)}" goes up from {layer} to {to_layer}')
            if f.endswith(".h"):
                edges.setdefault(os.path.normpath(f), set()).add(os.path.normpath(to_path))
    # Cycles between headers: depth-first search, reporting each cycle once.
    state = {}
    seen_cycles = set()

    def visit(node, stack):
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cyc = stack[stack.index(nxt):]
                key = frozenset(cyc)
                if key not in seen_cycles:
                    seen_cycles.add(key)
                    bad.append("include cycle: " + " -> ".join(cyc + [nxt]))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [])
    for b in bad:
        print(b)
    if not bad:
        print(f"layers: {len(files)} files, includes point down, no cycle")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
