#!/usr/bin/env python3
"""check_architecture.py: spot-check what ARCHITECTURE.md claims against the tree.

  - every file it names (`name.c`, `src/x/y.h`, `tools/...`) exists in the repository;
  - every source file of the library (src/<module>/*.c) is named in it, so a module's
    paragraph cannot silently omit a file;
  - every module of the layer table has its directory src/<module>/ and its public headers
    in include/ergon/;
  - every library function the "Where each feature lives" table names (`erg_*`) is declared
    in a public header.

Usage: check_architecture.py [--src DIR]. Prints one line per broken claim (file:line) and
exits 1, or prints "ok" and exits 0.
"""
import argparse
import os
import re
import sys

FILE_RE = re.compile(r"(?<![\w/.%\\-])((?:[\w-]+/)*[\w.-]+\.(?:c|h|py|csv|sh|md|cmake))(?![\w])")


def tree_files(src):
    out = []
    for root, dirs, files in os.walk(src):
        dirs[:] = [d for d in dirs if not d.startswith(".") and not d.startswith("build")]
        for f in files:
            out.append(os.path.relpath(os.path.join(root, f), src))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", default=os.path.join(os.path.dirname(__file__), ".."))
    a = ap.parse_args()
    src = os.path.abspath(a.src)
    path = os.path.join(src, "ARCHITECTURE.md")
    lines = open(path, encoding="utf-8").read().split("\n")
    files = tree_files(src)
    names = set(os.path.basename(f) for f in files)
    suffixes = set()
    for f in files:
        parts = f.split(os.sep)
        for i in range(len(parts)):
            suffixes.add("/".join(parts[i:]))
    bad = []
    text = "\n".join(lines)
    # 1. files named exist
    for no, line in enumerate(lines, 1):
        for m in FILE_RE.finditer(line):
            name = m.group(1).rstrip(".")
            if name.startswith("http") or "*" in name:
                continue
            if "/" not in name and not name.endswith((".c", ".h", ".py", ".sh")):
                continue  # a file format's name (frontier-info.csv), not a file of ours
            if name in suffixes or name in names:
                continue
            bad.append(f"ARCHITECTURE.md:{no}: names '{name}', which is not in the repository")
    # 2. every library source file is named
    for f in sorted(files):
        p = f.split(os.sep)
        if len(p) == 3 and p[0] == "src" and p[2].endswith(".c"):
            if not re.search(r"(?<![\w.-])" + re.escape(p[2]) + r"(?![\w])", text):
                bad.append(f"ARCHITECTURE.md: {f} is part of the library but the map never names it")
    # 3. the layer table
    inside = False
    for no, line in enumerate(lines, 1):
        if "layers: begin" in line:
            inside = True
            continue
        if "layers: end" in line:
            inside = False
        if not inside or not line.startswith("|") or line.startswith("|---") or "public headers" in line:
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        mod, headers = cells[0], [h.strip() for h in cells[1].split(",") if h.strip()]
        if not os.path.isdir(os.path.join(src, "src", mod)):
            bad.append(f"ARCHITECTURE.md:{no}: module '{mod}' has no directory src/{mod}/")
        for h in headers:
            if not os.path.isfile(os.path.join(src, "include", "ergon", h)):
                bad.append(f"ARCHITECTURE.md:{no}: public header '{h}' is not in include/ergon/")
    # 4. functions of the feature table are public
    decls = ""
    incdir = os.path.join(src, "include", "ergon")
    for h in os.listdir(incdir):
        decls += open(os.path.join(incdir, h), encoding="utf-8").read()
    start = next((i for i, l in enumerate(lines) if l.startswith("## Where each feature lives")), None)
    if start is None:
        bad.append("ARCHITECTURE.md: the section '## Where each feature lives' is missing")
    else:
        for no in range(start + 1, len(lines)):
            line = lines[no]
            if line.startswith("## "):
                break
            for fn in re.findall(r"`(erg_[a-z0-9_]+)", line):
                if fn.endswith("_"):
                    continue
                if not re.search(r"\b" + fn + r"\s*\(", decls):
                    bad.append(f"ARCHITECTURE.md:{no + 1}: '{fn}' is not declared in include/ergon/")
    for b in bad:
        print(b)
    if bad:
        return 1
    print("ok: ARCHITECTURE.md's files, modules, headers and functions are there")
    return 0


if __name__ == "__main__":
    sys.exit(main())
