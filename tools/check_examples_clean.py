#!/usr/bin/python3
"""check_examples_clean.py: examples/ holds what a user runs, no test machinery (issue 39).

    python3 tools/check_examples_clean.py [--src ROOT]

Exit 0 when every rule holds, 1 with one line per breach (FILE:LINE: what), 2 on bad use.
The rules, each checkable without running anything:
  1. no code file in examples/ (*.py, *.sh) names a facility that only the tests have:
     pacing or accounting the simulated GPU by hand (sim_set_activity, sim_account: the
     harness's pacer), the fake vendor libraries (fake_gpu_kernel, FAKE_GPU_ACTIVITY,
     FAKE_NVML_, FAKE_AMDSMI_), the load-independent verdicts (crosscheck), the deadlock and
     kill controls (--deadlock-check, shared-blocking, --block-marks, --stall-rank), the
     tests' multi-case runners (run_cases, --case, cases-%d.json: tests/e2e/harness/
     deepspeed_cases.py, megatron_cases.py);
  2. no code in examples/ reaches into tests/: no import of a tests module, no string (outside
     a docstring or a comment) with a path component `tests`;
  3. every file in examples/ is named (by its path below examples/ or its file name) in a
     user-facing text: README.md, ARCHITECTURE.md, docs/*.md, the Makefile, or another file of
     examples/; a file that only tests name belongs in tests/e2e/harness/;
  4. every top-level function and class of a Python file in examples/ is used (its name
     appears besides its definition) in examples/ or a user-facing text; a helper that only a
     test calls belongs to that test.
"""
import argparse
import ast
import os
import re
import sys

TEST_ONLY = re.compile(r"sim_set_activity|sim_account|fake_gpu_kernel|FAKE_GPU_ACTIVITY|"
                       r"FAKE_NVML_|FAKE_AMDSMI_|crosscheck|deadlock-check|shared-blocking|"
                       r"block-marks|stall-rank|run_cases|--case|cases-%d")
TESTS_PATH = re.compile(r"(^|/)tests(/|$)")
CODE = (".py", ".sh")


def example_files(src):
    out = []
    for d, dirs, files in os.walk(os.path.join(src, "examples")):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        out += [os.path.relpath(os.path.join(d, f), src) for f in sorted(files)
                if not f.endswith(".pyc")]
    return out


def rule_names(src, rel, text):
    return ["%s:%d: names %r, which only the tests have (tests/e2e/harness/)"
            % (rel, n, m.group(0)) for n, line in enumerate(text.splitlines(), 1)
            for m in [TEST_ONLY.search(line)] if m]


def docstring_nodes(tree):
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def rule_tests_py(rel, text):
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        return ["%s:%s: does not parse: %s" % (rel, e.lineno, e.msg)]
    docs, bad = docstring_nodes(tree), []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                id(node) not in docs and TESTS_PATH.search(node.value):
            bad.append("%s:%d: the string %r reaches into tests/" % (rel, node.lineno, node.value))
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
            [node.module or ""] if isinstance(node, ast.ImportFrom) else []
        bad += ["%s:%d: imports %s from the tests" % (rel, node.lineno, x) for x in names
                if x.split(".")[0] in ("tests", "harness", "trainer", "pacer", "crosscheck")]
    return bad


def rule_tests_sh(rel, text):
    return ["%s:%d: reaches into tests/: %s" % (rel, n, line.strip())
            for n, line in enumerate(text.splitlines(), 1)
            if not line.lstrip().startswith("#") and re.search(r"(^|[/\s\"'$])tests/", line)]


def user_texts(src, files):
    paths = ["README.md", "ARCHITECTURE.md", "Makefile"] + files
    docs = os.path.join(src, "docs")
    if os.path.isdir(docs):
        paths += [os.path.join("docs", f) for f in sorted(os.listdir(docs)) if f.endswith(".md")]
    out = {}
    for p in paths:
        try:
            with open(os.path.join(src, p), errors="replace") as f:
                out[p] = f.read()
        except OSError:
            pass
    return out


def rule_named(rel, texts):
    short = rel[len("examples/"):]
    base = os.path.basename(rel)
    for p, text in texts.items():
        if p != rel and (short in text or base in text):
            return []
    return ["%s:1: named by no user-facing text (README.md, ARCHITECTURE.md, docs/, Makefile, "
            "examples/): a file only the tests use belongs in tests/e2e/harness/" % rel]


def rule_used(rel, text, texts):
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []  # rule 2 reports it
    bad = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            word = re.compile(r"\b%s\b" % re.escape(node.name))
            if sum(len(word.findall(t)) for t in texts.values()) <= 1:
                bad.append("%s:%d: %s is used by no example and no user-facing text (only by "
                           "tests, or by nothing)" % (rel, node.lineno, node.name))
    return bad


def check(src):
    files = example_files(src)
    texts = user_texts(src, files)
    bad = []
    for rel in files:
        text = texts.get(rel, "")
        if rel.endswith(CODE):
            bad += rule_names(src, rel, text)
            bad += rule_tests_py(rel, text) if rel.endswith(".py") else rule_tests_sh(rel, text)
        if rel.endswith(".py"):
            bad += rule_used(rel, text, texts)
        bad += rule_named(rel, texts)
    return files, bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--src", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    a = ap.parse_args()
    if not os.path.isdir(os.path.join(a.src, "examples")):
        print("check_examples_clean: no examples/ in %s" % a.src, file=sys.stderr)
        return 2
    files, bad = check(a.src)
    for line in bad:
        print(line)
    if bad:
        return 1
    print("examples/: %d files, no test machinery" % len(files))
    return 0


if __name__ == "__main__":
    sys.exit(main())
