#!/usr/bin/env python3
"""check_tools_thin.py: the executables in tools/ stay thin (issue 39).

  1. No function of tools/**/*.c is longer than 150 lines (from the line of its opening
     brace to its closing brace). KNOWN_LONG may list a function still longer with its length
     (it may shrink, not grow; the check says when it is under the limit and can go); since
     issue 39 the list is empty.
  2. tools/ writes no file itself: every call that opens a file for writing (fopen with a
     "w", "a" or "+" mode, open/openat/creat with O_WRONLY, O_RDWR or O_CREAT, rename, unlink)
     must be in WRITES, which names the file, the function and what it writes. The formats
     libergon reads (frontier directories, plans, profiles, schedules, HLO, power traces) and
     the results of a simulated fleet day are written by library calls (erg_frontier_save_dir,
     erg_plan_write_*, erg_profile_write_csv, erg_power_trace_write_csv,
     erg_fleet_sim_*_write_*, ...), so a CLI that writes one of them itself fails here.

Usage: check_tools_thin.py [--src DIR]. Prints one line per violation (file:line) and exits 1,
or prints "ok" and exits 0.
"""
import argparse
import os
import re
import sys

LIMIT = 150

# (file, function) -> lines: functions over the limit that may only shrink (none)
KNOWN_LONG = {}

# (file, function) -> what it writes; none of them a format libergon reads
WRITES = {
    ("tools/ergon/cmd_compare.c", "compare_report"): "compare's report table (--out): text/CSV/"
    "markdown for people and spreadsheets, read by nothing of ergon",
}

FUNC_RE = re.compile(r"^(?:static\s+|inline\s+)*[A-Za-z_][\w\s\*]*?\b([A-Za-z_]\w*)\s*\([^;]*$")
WRITE_RES = [
    re.compile(r"\bfopen\s*\([^,]*,\s*\"[^\"]*[wa+][^\"]*\""),
    re.compile(r"\b(?:open|openat|creat)\s*\([^;]*\b(?:O_WRONLY|O_RDWR|O_CREAT)\b"),
    re.compile(r"\bcreat\s*\("),
    re.compile(r"\b(?:rename|renameat|unlink|unlinkat|truncate|ftruncate|mkstemp)\s*\("),
]


def functions(lines):
    """(name, first line, brace line, closing line) of every function defined at column 0."""
    out = []
    i = 0
    while i < len(lines):
        m = FUNC_RE.match(lines[i])
        if m and not lines[i].startswith((" ", "\t", "#", "/", "*", "}")):
            j = i
            while j < len(lines) and lines[j].rstrip() != "{" and not lines[j].rstrip().endswith(";"):
                if lines[j].rstrip().endswith("{") and j > i:
                    break
                j += 1
            if j < len(lines) and lines[j].rstrip() == "{":
                k = j + 1
                while k < len(lines) and lines[k].rstrip() != "}":
                    k += 1
                out.append((m.group(1), i + 1, j + 1, k + 1))
                i = k + 1
                continue
        i += 1
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", default=os.path.join(os.path.dirname(__file__), ".."))
    a = ap.parse_args()
    src = os.path.abspath(a.src)
    bad, seen_long, seen_writes = [], set(), set()
    for root, dirs, files in os.walk(os.path.join(src, "tools")):
        dirs.sort()
        for fn in sorted(files):
            if not fn.endswith(".c"):
                continue
            path = os.path.join(root, fn)
            rel = os.path.relpath(path, src)
            lines = open(path, encoding="utf-8").read().split("\n")
            funcs = functions(lines)
            for name, first, brace, close in funcs:
                n = close - brace + 1
                key = (rel, name)
                if key in KNOWN_LONG:
                    seen_long.add(key)
                    if n > KNOWN_LONG[key]:
                        bad.append(f"{rel}:{first}: {name} is {n} lines, more than the {KNOWN_LONG[key]} "
                                   f"it had (limit {LIMIT}): split it, do not grow it")
                    elif n <= LIMIT:
                        bad.append(f"{rel}:{first}: {name} is {n} lines now: take it off KNOWN_LONG "
                                   f"in tools/check_tools_thin.py")
                elif n > LIMIT:
                    bad.append(f"{rel}:{first}: {name} is {n} lines (limit {LIMIT}): split it")
            for no, line in enumerate(lines, 1):
                code = re.sub(r"\"(?:[^\"\\]|\\.)*\"", lambda m: m.group(0) if "fopen" in line else '""',
                              line.split("//")[0])
                if not any(r.search(code) for r in WRITE_RES):
                    continue
                owner = [f for f in funcs if f[1] <= no <= f[3]]
                key = (rel, owner[-1][0] if owner else "")
                if key in WRITES:
                    seen_writes.add(key)
                else:
                    bad.append(f"{rel}:{no}: writes a file itself ({line.strip()}): the library "
                               f"writes the formats it reads; a file for people goes in WRITES of "
                               f"tools/check_tools_thin.py with what it is")
    for key in sorted(set(KNOWN_LONG) - seen_long):
        bad.append(f"tools/check_tools_thin.py: KNOWN_LONG names {key[1]} in {key[0]}, which is "
                   f"not there: take it off")
    for key in sorted(set(WRITES) - seen_writes):
        bad.append(f"tools/check_tools_thin.py: WRITES names {key[1]} in {key[0]}, which writes "
                   f"nothing now: take it off")
    for b in bad:
        print(b)
    if bad:
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
