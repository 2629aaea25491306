"""test_constants.py: every constant of the binding equals its C definition.

The binding keeps the C constants it needs in python/ergon/_lib.py under the C name without
"ERG_" (FORWARD = ERG_FORWARD, SCHED_ZBV = ERG_SCHED_ZBV, EINVAL = ERG_EINVAL, ...). This test
reads include/ergon/*.h with a small parser (enums with their values, implicit ones counted;
ERG_STATUS_MAP's X(name, number, text) entries; #defines of integer literals) and fails when

  - a public upper-case int of ergon._lib has no C constant ERG_<name>, or another value;
  - an enumerator of an enum the binding mirrors (MIRRORED_ENUMS) or a #define of a mirrored
    group (MIRRORED_PREFIXES) has no Python name;
  - STATUS_NAMES or KIND_NAMES do not cover exactly their enum;
  - another module of the package copies a C constant by hand (a module-level int assigned
    to a name that is a C constant's, with or without a leading underscore);
  - the library's own names (erg_status_name, erg_instr_kind_name) differ from the
    binding's tables (needs $ERGON_LIBRARY; skipped without it, failed under CI=true).

A header construct the parser cannot read inside a mirrored enum is a failure, never a
pass. ERGON_INCLUDE_DIR overrides the headers' directory (tests/cli/python_constants.sh
points it at a modified copy for its negative controls); the package is the one on
PYTHONPATH.
"""
import ast
import ctypes
import glob
import os
import re
import unittest

import ergon
from ergon import _lib

INCLUDE_DIR = os.environ.get("ERGON_INCLUDE_DIR") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "include", "ergon")

#: enums whose every enumerator the binding must mirror
MIRRORED_ENUMS = ("erg_status", "erg_instr_kind", "erg_schedule_kind")
#: #define groups whose every member the binding must mirror
MIRRORED_PREFIXES = ("ERG_CLIENT_",)

INT_LITERAL = re.compile(r"^\(?\s*(-?\s*(?:0[xX][0-9a-fA-F]+|\d+))[uUlL]*\s*\)?$")


class ParseError(Exception):
    pass


def _int(text, where):
    m = INT_LITERAL.match(text.strip())
    if not m:
        raise ParseError("%s: %r is not an integer literal" % (where, text.strip()))
    return int(m.group(1).replace(" ", ""), 0)


def _clean(text):
    """Comments removed, continuation lines joined."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"(^|\s)//[^\n]*", r"\1", text)
    return text.replace("\\\n", " ")


def _read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def parse_headers(include_dir):
    """({C name: (value, header)}, {enum name: [C names in order] or a ParseError}, {C name
    of a #define: header}). An enum the parser cannot read is kept as its ParseError: a
    failure where the binding mirrors it, nothing elsewhere."""
    consts, enums, defines, xmaps = {}, {}, {}, {}
    headers = sorted(glob.glob(os.path.join(include_dir, "*.h")))
    if not headers:
        raise ParseError("no headers in %s" % include_dir)
    texts = {h: _clean(_read(h)) for h in headers}
    for h, text in texts.items():
        base = os.path.basename(h)
        # X-macro tables: #define ERG_..._MAP(X) X(NAME, NUMBER, ...) X(...)
        for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+(ERG_\w+)\(X\)(.*)$", text, re.M):
            try:
                xmaps[m.group(1)] = [(n, _int(v, "%s %s" % (base, m.group(1)))) for n, v in
                                     re.findall(r"\bX\(\s*(\w+)\s*,\s*([^,)]+)", m.group(2))]
            except ParseError as e:
                xmaps[m.group(1)] = e
        for m in re.finditer(r"^[ \t]*#[ \t]*define[ \t]+(ERG_\w+)[ \t]+(.+?)[ \t]*$", text, re.M):
            if INT_LITERAL.match(m.group(2)):
                consts[m.group(1)] = (_int(m.group(2), base), base)
                defines[m.group(1)] = base
    for h, text in texts.items():
        base = os.path.basename(h)
        for m in re.finditer(r"typedef\s+enum\s+(\w+)\s*\{(.*?)\}\s*\w+\s*;", text, re.S):
            try:
                members = _enum(m.group(1), m.group(2), base, xmaps)
            except ParseError as e:
                enums[m.group(1)] = e
                continue
            enums[m.group(1)] = [n for n, _ in members]
            consts.update((n, (v, base)) for n, v in members)
    return consts, enums, defines


def _enum(name, body, base, xmaps):
    """[(C name, value)] of one enum's body."""
    body = "\n".join(l for l in body.split("\n") if not l.strip().startswith("#"))
    members, nxt = [], 0
    for item in (i.strip() for i in body.split(",")):
        if not item:
            continue
        xm = re.match(r"^(ERG_\w+)\(\s*(\w+)\s*\)$", item)
        if xm:  # ERG_STATUS_MAP(ERG_X_ENUM): ERG_##name = num
            if xm.group(1) not in xmaps:
                raise ParseError("%s: enum %s uses %s, which no header defines"
                                 % (base, name, xm.group(1)))
            if isinstance(xmaps[xm.group(1)], ParseError):
                raise xmaps[xm.group(1)]
            for n, v in xmaps[xm.group(1)]:
                members.append(("ERG_" + n, v))
                nxt = v + 1
            continue
        em = re.match(r"^(\w+)\s*(?:=\s*(.+))?$", item, re.S)
        if not em:
            raise ParseError("%s: enum %s: cannot read %r" % (base, name, item))
        value = nxt if em.group(2) is None else \
            _int(em.group(2), "%s enum %s %s" % (base, name, em.group(1)))
        members.append((em.group(1), value))
        nxt = value + 1
    return members


def binding_constants(module):
    """{name: value} of a module's public upper-case ints (bool excluded)."""
    return {k: v for k, v in vars(module).items()
            if k.isupper() and not k.startswith("_") and isinstance(v, int)
            and not isinstance(v, bool)}


class ConstantsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.consts, cls.enums, cls.defines = parse_headers(INCLUDE_DIR)

    def mirrored_c_names(self):
        names = []
        for e in MIRRORED_ENUMS:
            self.assertIn(e, self.enums, "enum %s not found in %s" % (e, INCLUDE_DIR))
            if isinstance(self.enums[e], ParseError):
                self.fail("enum %s cannot be read: %s" % (e, self.enums[e]))
            self.assertTrue(self.enums[e], "enum %s has no enumerators" % e)
            names += self.enums[e]
        for p in MIRRORED_PREFIXES:
            group = [n for n in self.defines if n.startswith(p)]
            self.assertTrue(group, "no #define %s* in %s" % (p, INCLUDE_DIR))
            names += group
        return names

    def test_every_binding_constant_matches_the_headers(self):
        ours = binding_constants(_lib)
        self.assertIn("SCHED_ZBV", ours)  # the scan sees the constants at all
        bad = []
        for name, value in sorted(ours.items()):
            c = "ERG_" + name
            if c not in self.consts:
                bad.append("%s = %d in ergon/_lib.py: no %s in include/ergon/*.h" % (name, value, c))
            elif self.consts[c][0] != value:
                bad.append("%s = %d in ergon/_lib.py, but %s = %d in include/ergon/%s"
                           % (name, value, c, self.consts[c][0], self.consts[c][1]))
        self.assertEqual(bad, [], "\n" + "\n".join(bad))

    def test_every_mirrored_c_constant_has_a_python_name(self):
        ours = binding_constants(_lib)
        missing = ["%s (include/ergon/%s) has no %s in ergon/_lib.py"
                   % (c, self.consts[c][1], c[len("ERG_"):])
                   for c in self.mirrored_c_names() if c[len("ERG_"):] not in ours]
        self.assertEqual(missing, [], "\n" + "\n".join(missing))

    def test_package_reexports_the_same_values(self):
        for name, value in binding_constants(ergon).items():
            self.assertIs(getattr(_lib, name, None), value, "ergon.%s is not ergon._lib's" % name)
        for name in ergon.__all__:
            self.assertTrue(hasattr(ergon, name), "ergon.__all__ names %s, which is missing" % name)

    def test_status_and_kind_tables_cover_their_enums(self):
        self.mirrored_c_names()  # both enums read
        status = {self.consts[c][0]: c[len("ERG_"):] for c in self.enums["erg_status"]}
        self.assertEqual(_lib.STATUS_NAMES, status)
        kinds = {self.consts[c][0] for c in self.enums["erg_instr_kind"]}
        self.assertEqual(set(_lib.KIND_NAMES), kinds)

    def test_no_module_copies_a_constant_by_hand(self):
        pkg = os.path.dirname(os.path.abspath(ergon.__file__))
        copies = []
        for path in sorted(glob.glob(os.path.join(pkg, "**", "*.py"), recursive=True)):
            if os.path.basename(path) == "_lib.py" and os.path.dirname(path) == pkg:
                continue
            tree = ast.parse(_read(path), path)
            for node in tree.body:
                if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Constant):
                    continue
                if not isinstance(node.value.value, int) or isinstance(node.value.value, bool):
                    continue
                for t in node.targets:
                    if isinstance(t, ast.Name) and "ERG_" + t.id.lstrip("_") in self.consts:
                        copies.append("%s:%d: %s = %r copies %s: import it from ergon._lib"
                                      % (os.path.relpath(path, pkg), node.lineno, t.id,
                                         node.value.value, "ERG_" + t.id.lstrip("_")))
        self.assertEqual(copies, [], "\n" + "\n".join(copies))

    def test_library_names_agree(self):
        if not os.environ.get("ERGON_LIBRARY"):
            if os.environ.get("CI") == "true":
                self.fail("ERGON_LIBRARY is not set (CI=true): the library's names are unchecked")
            self.skipTest("ERGON_LIBRARY is not set")
        lib = _lib.use(_NAMES)
        for value, name in _lib.STATUS_NAMES.items():
            self.assertEqual(lib.erg_status_name(value).decode(), name)
        for kind, name in _lib.KIND_NAMES.items():
            self.assertEqual(lib.erg_instr_kind_name(kind).decode(), name)


_NAMES = {"erg_status_name": (ctypes.c_char_p, [ctypes.c_int]),
          "erg_instr_kind_name": (ctypes.c_char_p, [ctypes.c_int])}

if __name__ == "__main__":
    unittest.main()
