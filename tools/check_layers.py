#!/usr/bin/env python3
"""check_layers.py: fail on an #include that ARCHITECTURE.md's layer table forbids.

    tools/check_layers.py [--root DIR]

Reads the table between the "layers: begin" and "layers: end" markers of DIR/ARCHITECTURE.md
(module | public headers | may include), then every quoted #include of DIR/src/*/ (*.c, *.h),
DIR/include/ergon/*.h and DIR/tools/ (*.c, *.h), and reports each forbidden arrow as

    src/profile/sparse_check.c:5: profile -> planner (ergon/planner.h): profile may include core

The rules (ARCHITECTURE.md, "Layers"):
- a file of src/<m>/ may include the public headers (ergon/X.h) of m and of the modules m's row
  allows; its own module's private headers (m/...); and core/internal.h;
- a public header include/ergon/X.h may include only public headers of its own module or of
  the modules its module's row allows;
- a file of tools/ may include any public header and the headers of its own directory, and no
  private header of the library;
- every module a row allows must come on an earlier row (so the table itself has no cycle), and
  every public header must belong to exactly one module.
Exit status 0 when clean, 1 with the list of violations, 2 when the table cannot be read.
Python 3 standard library only.
"""
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')


def parse_table(path):
    """[(module, [headers], [allowed])] in table order; raises ValueError naming file:line."""
    try:
        lines = open(path, encoding="utf-8").read().split("\n")
    except OSError as e:
        raise ValueError(f"{path}: {e.strerror}")
    begin = next((i for i, l in enumerate(lines) if "layers: begin" in l), None)
    end = next((i for i, l in enumerate(lines) if "layers: end" in l), None)
    if begin is None or end is None or end < begin:
        raise ValueError(f"{path}: no 'layers: begin' ... 'layers: end' table")
    rows = []
    for i in range(begin + 1, end):
        line = lines[i].strip()
        if not line.startswith("|") or re.match(r"^\|[\s|:-]*\|$", line):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) != 3:
            raise ValueError(f"{path}:{i + 1}: a row needs 3 cells (module | public headers | "
                             f"may include), not {len(cells)}")
        if cells[0] == "module":
            continue
        split = lambda c: [x.strip().strip("`") for x in c.split(",") if x.strip()]
        rows.append((cells[0], split(cells[1]), split(cells[2]), i + 1))
    if not rows:
        raise ValueError(f"{path}: the layer table has no rows")
    seen, owner = set(), {}
    for module, headers, allowed, lineno in rows:
        for a in allowed:
            if a not in seen:
                raise ValueError(f"{path}:{lineno}: {module} may include '{a}', which is not on an "
                                 f"earlier row (the table must run one way)")
        for h in headers:
            if h in owner:
                raise ValueError(f"{path}:{lineno}: header {h} belongs to both {owner[h]} and "
                                 f"{module}")
            owner[h] = module
        seen.add(module)
    return rows


def sources(root, sub, exts):
    base = os.path.join(root, sub)
    for dirpath, _, files in sorted(os.walk(base)):
        for f in sorted(files):
            if f.endswith(exts):
                yield os.path.join(dirpath, f)


def check(root):
    rows = parse_table(os.path.join(root, "ARCHITECTURE.md"))
    allowed = {m: set(a) | {m} for m, _, a, _ in rows}
    listed = {m: a for m, _, a, _ in rows}
    owner = {h: m for m, hs, _, _ in rows for h in hs}
    modules = set(allowed)
    problems = []

    def rel(p):
        return os.path.relpath(p, root)

    def includes(path):
        with open(path, encoding="utf-8", errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if m:
                    yield n, m.group(1)

    def public(path, n, inc, who):
        """Check ergon/X.h included by module `who`; None = any module (tools)."""
        h = inc[len("ergon/"):]
        if h not in owner:
            problems.append(f"{rel(path)}:{n}: {inc} is not in ARCHITECTURE.md's layer table")
        elif who is not None and owner[h] not in allowed[who]:
            problems.append(f"{rel(path)}:{n}: {who} -> {owner[h]} ({inc}): {who} may include "
                            f"{', '.join(listed[who]) or 'nothing'}")

    # The library's modules.
    srcdir = os.path.join(root, "src")
    for path in sources(root, "src", (".c", ".h")):
        parts = os.path.relpath(path, srcdir).split(os.sep)
        if len(parts) != 2:
            problems.append(f"{rel(path)}: not in a module directory src/<module>/")
            continue
        mod = parts[0]
        if mod not in modules:
            problems.append(f"{rel(path)}: module '{mod}' is not in ARCHITECTURE.md's layer table")
            continue
        for n, inc in includes(path):
            if inc.startswith("ergon/"):
                public(path, n, inc, mod)
            elif "/" in inc:
                other = inc.split("/")[0]
                if other in modules and other != mod and inc != "core/internal.h":
                    problems.append(f"{rel(path)}:{n}: {mod} -> {other} private header ({inc}): "
                                    f"only {other}'s own files may include it; expose what is "
                                    f"needed through include/ergon/")
                elif other not in modules:
                    problems.append(f"{rel(path)}:{n}: {inc}: unknown directory '{other}'")
            # a bare "x.h" is a header of the same directory: the file's own module

    # Public headers.
    for path in sources(root, "include/ergon", (".h",)):
        h = os.path.basename(path)
        if h not in owner:
            problems.append(f"{rel(path)}: public header not in ARCHITECTURE.md's layer table")
            continue
        for n, inc in includes(path):
            if not inc.startswith("ergon/"):
                problems.append(f"{rel(path)}:{n}: public header includes {inc}: only "
                                f"include/ergon/ headers are installed")
            else:
                public(path, n, inc, owner[h])

    # The executables: public API only.
    for path in sources(root, "tools", (".c", ".h")):
        for n, inc in includes(path):
            if inc.startswith("ergon/"):
                public(path, n, inc, None)
            elif "/" in inc and inc.split("/")[0] in modules:
                problems.append(f"{rel(path)}:{n}: tools -> {inc}: the executables use the public "
                                f"API only (include/ergon/)")
    return rows, problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."),
                    help="the repository (default: this script's parent directory)")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    try:
        rows, problems = check(root)
    except ValueError as e:
        print(f"check_layers: {e}", file=sys.stderr)
        return 2
    if problems:
        for p in problems:
            print(p)
        print(f"check_layers: {len(problems)} include(s) against the layer table of "
              f"ARCHITECTURE.md", file=sys.stderr)
        return 1
    print(f"check_layers: ok ({len(rows)} modules, "
          f"{' -> '.join(m for m, _, _, _ in rows)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
