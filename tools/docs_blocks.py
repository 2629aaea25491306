#!/usr/bin/env python3
"""docs_blocks.py: every code block of README.md, docs/*.md and examples/*/README.md runs in CI
or says why not.

Each block (fenced with ``` or indented by four spaces after a blank line) must be preceded by
a marker comment (blank lines between are allowed):

    <!-- docs: run -->              this test runs it: bash -e, in a temporary directory shared
                                    by the file's run blocks in order, with the built ergon and
                                    ergond first on PATH, ERGON_SRC set, 120 s at most
    <!-- docs: run-by TEST -->      the test tests/DIR/TEST.sh runs it (DIR one of TEST_DIRS; that
                                    file must exist and name this document)
    <!-- docs: not-run KIND: why -->  not run here; KIND is one of
                                    synopsis (a usage line with placeholders), output (what a
                                    command prints), data (a file's contents), code (C or Python
                                    compiled or run by a test named in `why`), needs-gpu,
                                    service (a server or daemon that runs until stopped; the test
                                    that starts it so is named in `why`), needs-gpu, needs-root
                                    (installs into the system or needs systemd), long (minutes of
                                    CPU)

    python3 tools/docs_blocks.py --check            # every block marked (and run-by tests exist)
    python3 tools/docs_blocks.py --run BIN_DIR      # --check, then run the run blocks
    python3 tools/docs_blocks.py --list             # every block with its marker

Exit status: 0 all good, 1 a block unmarked, badly marked or failing (each named by file:line),
2 usage. Python 3 standard library only.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

# The folders of script tests (tests/CMakeLists.txt): CLI, end-to-end and static checks.
TEST_DIRS = ("cli", "e2e", "lint")
KINDS = ("synopsis", "output", "data", "code", "service", "needs-gpu", "needs-root", "long")
MARK = re.compile(r"^\s*<!--\s*docs:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^( {0,3})(```+)(.*)$")


def blocks(path):
    """(line, text, marker or None) for every code block of a Markdown file."""
    lines = open(path, encoding="utf-8").read().split("\n")
    out = []
    i = 0
    last_mark = None  # the marker of the latest non-blank line, if it was one

    def take_mark():
        nonlocal last_mark
        m = last_mark
        last_mark = None
        return m

    while i < len(lines):
        line = lines[i]
        f = FENCE.match(line)
        if f:
            indent, ticks = len(f.group(1)), f.group(2)
            start, body = i + 1, []
            i += 1
            while i < len(lines) and not lines[i].lstrip().startswith(ticks):
                body.append(lines[i][indent:] if lines[i][:indent].strip() == "" else lines[i])
                i += 1
            out.append((start, "\n".join(body), take_mark()))
            i += 1
            continue
        prev_blank = i == 0 or lines[i - 1].strip() == ""
        if prev_blank and line.startswith("    ") and line.strip():
            # an indented block, unless it continues a list item (the paragraph before it is
            # a list entry or itself indented)
            j = i - 1
            while j >= 0 and lines[j].strip() == "":
                j -= 1
            before = lines[j] if j >= 0 else ""
            in_list = bool(re.match(r"^\s*([-*+]|\d+[.)])\s", before)) or before.startswith(" ")
            if not in_list or MARK.match(before):
                start, body = i + 1, []
                while i < len(lines) and (lines[i].startswith("    ") or lines[i].strip() == ""):
                    body.append(lines[i][4:])
                    i += 1
                while body and not body[-1].strip():
                    body.pop()
                out.append((start, "\n".join(body), take_mark()))
                continue
        m = MARK.match(line)
        if m:
            last_mark = m.group(1)
        elif line.strip():
            last_mark = None
        i += 1
    return out


def check(src, files):
    errors, runs = [], []
    for path in files:
        rel = os.path.relpath(path, src)
        for line, text, mark in blocks(path):
            where = "%s:%d" % (rel, line)
            if mark is None:
                errors.append("%s: code block without a marker (<!-- docs: run --> or "
                              "run-by TEST or not-run KIND: why)" % where)
                continue
            words = mark.split(None, 1)
            if words[0] == "run" and len(words) == 1:
                runs.append((rel, line, text))
            elif words[0] == "run-by" and len(words) == 2:
                test = words[1].strip()
                tpaths = [os.path.join(src, "tests", d, test + ".sh") for d in TEST_DIRS]
                tpath = next((p for p in tpaths if os.path.isfile(p)), None)
                if tpath is None:
                    errors.append("%s: run-by %s, but no tests/{%s}/%s.sh exists" %
                                  (where, test, ",".join(TEST_DIRS), test))
                elif os.path.basename(rel) not in open(tpath, encoding="utf-8").read():
                    errors.append("%s: run-by %s, but that test does not name %s" %
                                  (where, test, os.path.basename(rel)))
            elif words[0] == "not-run" and len(words) == 2:
                kind = words[1].split(":", 1)[0].strip()
                if kind not in KINDS or ":" not in words[1] or not words[1].split(":", 1)[1].strip():
                    errors.append("%s: not-run needs 'KIND: why' with KIND one of %s, got '%s'" %
                                  (where, ", ".join(KINDS), words[1]))
            else:
                errors.append("%s: unknown marker '<!-- docs: %s -->'" % (where, mark))
    return errors, runs


def run(src, bin_dir, runs):
    failures = []
    env = dict(os.environ)
    env["PATH"] = os.path.abspath(bin_dir) + os.pathsep + env.get("PATH", "")
    env["ERGON_SRC"] = src
    env.setdefault("ERGON_NO_PROGRESS", "1")
    dirs = {}
    with tempfile.TemporaryDirectory() as top:
        for rel, line, text in runs:
            d = dirs.setdefault(rel, tempfile.mkdtemp(dir=top))
            try:
                p = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", text], cwd=d, env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=120)
                ok, out = p.returncode == 0, p.stdout.decode(errors="replace")
            except subprocess.TimeoutExpired:
                ok, out = False, "timed out after 120 s"
            print("%s %s:%d" % ("ok  " if ok else "FAIL", rel, line))
            if not ok:
                failures.append("%s:%d failed:\n%s\n%s" % (rel, line, text, out[-3000:]))
    return failures


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--check", action="store_true", help="every block marked")
    g.add_argument("--run", metavar="BIN_DIR", help="check, then run the run blocks")
    g.add_argument("--list", action="store_true", help="every block with its marker")
    ap.add_argument("--src", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    help="the source tree (default: this script's)")
    a = ap.parse_args()
    src = os.path.abspath(a.src)
    docs = os.path.join(src, "docs")
    examples = os.path.join(src, "examples")
    files = [os.path.join(src, "README.md")] + sorted(
        os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md")) + sorted(
        os.path.join(examples, d, "README.md") for d in (
            os.listdir(examples) if os.path.isdir(examples) else [])
        if os.path.isfile(os.path.join(examples, d, "README.md")))
    if a.list:
        for path in files:
            for line, text, mark in blocks(path):
                first = text.strip().split("\n")[0][:70] if text.strip() else ""
                print("%s:%d  [%s]  %s" % (os.path.relpath(path, src), line, mark, first))
        return 0
    errors, runs = check(src, files)
    for e in errors:
        print("FAIL " + e)
    if errors:
        return 1
    n = sum(len(blocks(p)) for p in files)
    print("%d code blocks in %d files, all marked; %d to run here" % (n, len(files), len(runs)))
    if a.run:
        failures = run(src, a.run, runs)
        for f in failures:
            print(f)
        if failures:
            return 1
        print("%d run blocks passed" % len(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
