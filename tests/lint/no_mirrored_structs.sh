#!/usr/bin/env bash
# no_mirrored_structs.sh: the Python binding (python/ergon/**/*.py) declares no ctypes.Structure or
# Union, no _fields_ and no ctypes.sizeof of a C type it made up: a C struct copied field by field
# into Python silently breaks when the C layout changes (issue 25). The binding reaches C values
# through accessor functions and opaque handles instead (erg_error_size/erg_error_message,
# erg_schedule_new/get/set, erg_instr_get, erg_plan_schedule_ref, erg_srv_client_opts_set,
# erg_srv_client_register_job_json). A deliberately mirrored
# struct in a copy of a binding file must be caught.
#
# PENDING lists files that still mirror structs, each with its reason; the test fails when a
# pending file no longer mirrors any (take it off the list) and for any other file.
set -u
source "$(dirname "$0")/../lib/skip_lib.bash"
: "${ERGON_SRC:?}"
command -v python3 >/dev/null || {
  skip_or_fail "python3 missing"; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/scan.py" <<'PY'
import ast, sys

def mirrored(path):
    """(line, what) for every mirrored C struct in a Python file."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            for b in node.bases:
                name = ast.unparse(b)
                if name.split(".")[-1] in ("Structure", "Union", "BigEndianStructure",
                                           "LittleEndianStructure"):
                    out.append((node.lineno, "class %s(%s)" % (node.name, name)))
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if ast.unparse(t).split(".")[-1] == "_fields_":
                    out.append((node.lineno, "%s = [...]" % ast.unparse(t)))
    return out

status = 0
pending = dict(a.split("=", 1) for a in sys.argv[2:])
for path in sys.argv[1].split(":"):
    base = path.rsplit("/", 1)[-1]
    found = mirrored(path)
    if base in pending:
        if not found:
            print("FAIL: %s mirrors no struct any more: take it off PENDING" % path)
            status = 1
        else:
            print("pending: %s still mirrors %d C struct(s) (%s): %s" % (
                base, len([f for f in found if f[1].startswith("class")]), pending[base],
                ", ".join(w for _, w in found if w.startswith("class"))))
        continue
    for line, what in found:
        print("%s:%d: %s mirrors a C struct: use accessor functions or an opaque handle" % (
            path, line, what))
        status = 1
sys.exit(status)
PY
# Files that still mirror, and why (keep this list short; it is the work left).
PENDING=()
files=$(find "$ERGON_SRC/python/ergon" -name '*.py' | sort | tr '\n' ':'); files=${files%:}
[ -n "$files" ] || { echo "FAIL: no python/ergon/*.py"; exit 1; }
echo "scanning $(echo "$files" | tr ':' '\n' | wc -l) files of python/ergon"
python3 "$tmp/scan.py" "$files" ${PENDING[@]+"${PENDING[@]}"} || exit 1
# The binding's one loader reads errors through the library, and the modules use it (the scan
# saw them, they were not skipped).
grep -q "erg_error_message" "$ERGON_SRC/python/ergon/_lib.py" ||
  { echo "FAIL: python/ergon/_lib.py does not read errors with erg_error_message"; exit 1; }
for f in gpu.py client.py schedule.py server_client.py; do
  grep -q "new_error" "$ERGON_SRC/python/ergon/$f" ||
    { echo "FAIL: python/ergon/$f does not read errors through ergon._lib"; exit 1; }
done

# The scan must catch a struct put back: a copy of _lib.py with erg_schedule mirrored again.
cp "$ERGON_SRC/python/ergon/_lib.py" "$tmp/_lib.py"
cat >>"$tmp/_lib.py" <<'PY'


class _Schedule(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_int), ("max_inflight", ctypes.c_int),
                ("extra_warmup", ctypes.c_int * 64)]
PY
out=$(python3 "$tmp/scan.py" "$tmp/_lib.py" 2>&1) && { echo "FAIL: a mirrored struct was not caught: $out"; exit 1; }
echo "$out" | grep -q "_lib.py:[0-9]*: class _Schedule(ctypes.Structure) mirrors a C struct" ||
  { echo "FAIL: the report does not name the file, line and class: $out"; exit 1; }
echo "ok: a mirrored struct is caught: $(echo "$out" | head -1)"
echo "ok: no mirrored structs in python/ergon"
