#!/usr/bin/env python3
"""check_amdsmi_decl.py: our AMD SMI declarations (src/gpu/amdsmi_decl.h) against AMD's.

AMD's reference is amdsmi_wrapper.py from the PyPI package `amdsmi` (requirements.txt): a ctypes
binding that AMD generates from include/amd_smi/amdsmi.h, so it holds every enum value, every
struct's _fields_ (with the padding the C compiler put in, as PADDING_n fields) and every
function's argtypes and restype. No libamd_smi.so exists here, and the wrapper opens one with
ctypes.CDLL at import and reads one attribute of it per function at module level. So this script
EXECUTES the wrapper's text with ctypes.CDLL replaced, for the duration of that exec only, by a
stand-in library whose attributes are plain records: the wrapper's own assignments of restype
and argtypes land in them. Nothing is called; this reads AMD's declarations, it fakes no runtime.

Our side comes from the C compiler: amdsmi_decl_facts.c, compiled against the header under test
(--header, default src/gpu/amdsmi_decl.h), prints every status code, define, struct size, field
offset/size/type and call parameter type as the compiler sees them. Checked:
  - each code of ERG_AMDSMI_CODES equals amdsmi_status_t's value of that name;
  - each object-like ERG_AMDSMI_X macro equals AMDSMI_X (ERG_AMDSMI_MAX_NUM_FREQUENCIES: the
    length of amdsmi_frequencies_t.frequency, the array AMD's macro sizes; ERG_AMDSMI_NA_U32 is
    ours, no AMD name);
  - each struct erg_amdsmi_X has the sizeof of struct_amdsmi_X_t (ctypes lays it out as C does),
    and each field we name has the same offset, size and type (arrays: element type);
  - each call of ERG_AMDSMI_CALLS exists in the wrapper with as many parameters, each of the same
    size and kind (integer of that width and signedness, float, pointer, pointee, and the
    struct a pointer points to), and returns a 32-bit unsigned status as erg_amdsmi_ret is.
Exit 0 when all match, 1 on any difference (each printed as FAIL: ...), 2 when it cannot run.
"""
import argparse
import ctypes
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.dirname(os.path.dirname(HERE))
# Object-like macros of ours that name no AMD macro.
OURS = {"ERG_AMDSMI_NA_U32": "the N/A value of a 32-bit field (AMD documents N/A as the type's maximum)"}


class StandInFunction:
    """What the wrapper gets for lib.SYMBOL: it sets restype and argtypes on it, nothing else."""

    def __init__(self, name):
        self.name = name
        self.restype = ctypes.c_int  # ctypes' default, as a real function pointer has
        self.argtypes = None


class StandInLibrary:
    def __init__(self, name, *args, **kwargs):
        self._name = name

    def __getattr__(self, symbol):
        if symbol.startswith("__"):
            raise AttributeError(symbol)
        fn = StandInFunction(symbol)
        setattr(self, symbol, fn)
        return fn


def load_wrapper(path):
    with open(path, encoding="utf-8") as f:
        code = compile(f.read(), path, "exec")
    ns = {"__name__": "amdsmi_wrapper_declarations", "__file__": path}
    real = ctypes.CDLL
    ctypes.CDLL = StandInLibrary
    try:
        exec(code, ns)
    finally:
        ctypes.CDLL = real
    return ns


def amd_struct_of(ours):
    return "struct_amdsmi_" + ours[len("erg_amdsmi_"):] + "_t"


def kind(t):
    """The facts program's KIND of a ctypes type."""
    if t is None:
        return "v"
    if t is ctypes.c_void_p:
        return "p:v"
    if t is ctypes.c_char_p:
        return "p:c1"
    if issubclass(t, ctypes._Pointer):
        return "p:" + kind(t._type_)
    if issubclass(t, ctypes.Array):  # a struct field: the C side sees it decayed
        return "p:" + kind(t._type_)
    if issubclass(t, ctypes.Structure):
        m = re.fullmatch(r"struct_amdsmi_(\w+)_t", t.__name__)
        return "s:erg_amdsmi_" + m.group(1) if m else "s:(AMD's " + t.__name__ + ")"
    if issubclass(t, ctypes._SimpleCData):
        code = t._type_
        size = str(ctypes.sizeof(t))
        if code == "?":
            return "b" + size
        if code == "c":
            return "c" + size
        if code in "bhilq":
            return "i" + size
        if code in "BHILQ":
            return "u" + size
        if code in "fdg":
            return "f" + size
    return "?(" + getattr(t, "__name__", repr(t)) + ")"


def header_names(text):
    """Our structs with the fields they name, and our object-like ERG_AMDSMI_ macros."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    defines = re.findall(r"^\s*#\s*define\s+(ERG_AMDSMI_\w+)(?=\s|$)", text, flags=re.M)
    structs = []
    for name, body in re.findall(r"typedef\s+struct\s+(erg_amdsmi_\w+)\s*\{(.*?)\}\s*\1\s*;", text, flags=re.S):
        fields = []
        for decl in body.split(";"):
            decl = decl.strip()
            if not decl:
                continue
            for d in decl.split(","):  # uint32_t a, b[2];
                d = re.sub(r"\[[^\]]*\]", "", d).strip()
                m = re.search(r"(\w+)\s*$", d)
                if not m:
                    raise SystemExit(f"cannot read a field name in '{decl}' of {name}")
                fields.append(m.group(1))
        structs.append((name, fields))
    return defines, structs


def compiler_facts(header, cc):
    with open(header, encoding="utf-8") as f:
        defines, structs = header_names(f.read())
    if not structs:
        raise SystemExit(f"{header}: no 'typedef struct erg_amdsmi_X {{...}} erg_amdsmi_X;' found")
    tmp = tempfile.mkdtemp(prefix="amdsmi_decl.")
    try:
        os.mkdir(os.path.join(tmp, "gpu"))
        shutil.copyfile(header, os.path.join(tmp, "gpu", "amdsmi_decl.h"))
        with open(os.path.join(tmp, "amdsmi_decl_structs.inc"), "w") as f:
            f.write("#define ERG_DECL_DEFINES(D) " + " ".join(f"D({d})" for d in defines) + "\n")
            f.write("#define ERG_DECL_STRUCTS(S, F) " + " ".join(
                f"S({s}) " + " ".join(f"F({s}, {fld})" for fld in fields) for s, fields in structs) + "\n")
            f.write("#define ERG_DECL_STRUCT_KINDS " + " ".join(
                f'KINDS({s}, "s:{s}"),' for s, _ in structs) + "\n")
        exe = os.path.join(tmp, "facts")
        cmd = cc.split() + ["-std=c11", "-Wall", "-Werror", "-I" + tmp,
                            os.path.join(HERE, "amdsmi_decl_facts.c"), "-o", exe]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"{header} does not compile into amdsmi_decl_facts.c:\n{r.stderr}")
        out = subprocess.run([exe], capture_output=True, text=True, check=True).stdout
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return [line.split("\t") for line in out.splitlines()]


def check(facts, w):
    fails = []
    counts = {}

    def fail(msg):
        fails.append(msg)

    def count(what):
        counts[what] = counts.get(what, 0) + 1

    status_names = set(w.get("amdsmi_status_t__enumvalues", {}).values())
    if not status_names:
        fail("the wrapper has no amdsmi_status_t__enumvalues")
    ret = None
    calls = {}
    for f in facts:
        tag = f[0]
        if tag == "code":
            name, value = f[1], int(f[2])
            count("status codes")
            if name not in status_names:
                fail(f"status code {name}: not a value of AMD's amdsmi_status_t")
            elif w[name] != value:
                fail(f"status code {name} = {value}, AMD's is {w[name]}")
        elif tag == "define":
            name, value = f[1], int(f[2])
            if name in OURS:
                continue
            count("defines")
            if name == "ERG_AMDSMI_MAX_NUM_FREQUENCIES":
                amd = w["struct_amdsmi_frequencies_t"].frequency.size // ctypes.sizeof(ctypes.c_uint64)
                where = "the length of amdsmi_frequencies_t.frequency"
            else:
                amd_name = name[len("ERG_"):]
                if not isinstance(w.get(amd_name), int):
                    fail(f"{name}: AMD's binding has no integer {amd_name} (a macro of ours? add it to OURS)")
                    continue
                amd, where = w[amd_name], amd_name
            if amd != value:
                fail(f"{name} = {value}, AMD's {where} is {amd}")
        elif tag == "ret":
            ret = (f[1], int(f[2]))
            if ret != ("u4", 4):
                fail(f"erg_amdsmi_ret is {f[1]} of {f[2]} bytes, amdsmi_status_t is a 32-bit unsigned enum")
        elif tag == "struct":
            name, size = f[1], int(f[2])
            count("structs")
            cls = w.get(amd_struct_of(name))
            if cls is None:
                fail(f"struct {name}: AMD's binding has no {amd_struct_of(name)}")
            elif ctypes.sizeof(cls) != size:
                fail(f"sizeof({name}) = {size}, sizeof({amd_struct_of(name)}) = {ctypes.sizeof(cls)}")
        elif tag == "field":
            name, field, off, size, k = f[1], f[2], int(f[3]), int(f[4]), f[5]
            count("fields")
            cls = w.get(amd_struct_of(name))
            if cls is None:
                continue  # reported with the struct
            types = dict(cls._fields_)
            if field not in types:
                fail(f"{name}.{field}: {amd_struct_of(name)} has no such field")
                continue
            desc = getattr(cls, field)
            amd_kind = kind(types[field])
            if (desc.offset, desc.size, amd_kind) != (off, size, k):
                fail(f"{name}.{field}: offset {off}, {size} bytes, {k}; AMD's: offset {desc.offset}, "
                     f"{desc.size} bytes, {amd_kind}")
        elif tag == "param":
            calls.setdefault(f[1], []).append((f[3], f[4], int(f[5])))
        elif tag == "call":
            symbol, n = f[1], int(f[2])
            params = calls.get(symbol, [])
            count("calls")
            fn = w.get(symbol)
            if not isinstance(fn, StandInFunction):
                fail(f"{symbol}: not a function of AMD's binding")
                continue
            argtypes = fn.argtypes or []
            if len(argtypes) != n:
                fail(f"{symbol}: {n} parameters, AMD's has {len(argtypes)}")
                continue
            for i, ((ctext, k, size), amd) in enumerate(zip(params, argtypes)):
                count("parameters")
                if (kind(amd), ctypes.sizeof(amd)) != (k, size):
                    fail(f"{symbol} parameter {i + 1} ({ctext}): {k} of {size} bytes; AMD's: "
                         f"{kind(amd)} of {ctypes.sizeof(amd)} bytes")
            if ret is not None and (kind(fn.restype), ctypes.sizeof(fn.restype)) != ret:
                fail(f"{symbol} returns {kind(fn.restype)}, ours erg_amdsmi_ret is {ret[0]}")
        else:
            fail(f"unexpected line from the facts program: {f}")
    for what in ("status codes", "defines", "structs", "fields", "calls", "parameters"):
        if not counts.get(what):
            fail(f"no {what} found in the header: nothing was checked")
    return fails, counts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--header", default=os.path.join(SRC, "src", "gpu", "amdsmi_decl.h"))
    ap.add_argument("--wrapper", help="amdsmi_wrapper.py (default: the amdsmi package this python finds)")
    ap.add_argument("--cc", default=os.environ.get("CC") or "cc")
    a = ap.parse_args()
    wrapper = a.wrapper
    if not wrapper:
        spec = importlib.util.find_spec("amdsmi")  # finds the package without importing it
        if spec is None or not spec.submodule_search_locations:
            print("no amdsmi package for this python (requirements.txt: make py-deps)")
            return 2
        wrapper = os.path.join(list(spec.submodule_search_locations)[0], "amdsmi_wrapper.py")
    try:
        from importlib.metadata import version
        ver = version("amdsmi")
    except Exception:
        ver = "?"
    print(f"AMD's declarations: {wrapper} (amdsmi {ver}); ours: {a.header}")
    try:
        w = load_wrapper(wrapper)
    except Exception as e:  # a wrapper this stand-in cannot read (another way of loading?)
        print(f"cannot read {wrapper} with a stand-in ctypes.CDLL: {type(e).__name__}: {e}")
        return 2
    try:
        facts = compiler_facts(a.header, a.cc)
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"cannot run the check: {e}")
        return 2
    except SystemExit as e:
        print(e)
        return 2
    fails, counts = check(facts, w)
    for msg in fails:
        print("FAIL: " + msg)
    if fails:
        return 1
    print("ok: " + ", ".join(f"{n} {what}" for what, n in counts.items()) + " match AMD's")
    return 0


if __name__ == "__main__":
    sys.exit(main())
