"""Find libergon's file for the binding's one loader (ergon._lib.load_library).

Tried in order: an explicit path, $ERGON_LIBRARY (a relative path is made absolute against
the current directory at load time), the library directory recorded at install
time (ergon/_install.py, written by `cmake --install` and the python3-ergon package), then
libergon.so.0 / libergon.so on the dynamic loader's path (ldconfig, LD_LIBRARY_PATH)."""
import ctypes
import ctypes.util
import os

SONAME = "libergon.so.0"

MISSING_HINT = ("install libergon: the Debian package libergon0 (apt install libergon0, or "
                "dpkg -i the libergon0 .deb that `make deb` builds), or from source with "
                "`make install` (then run ldconfig), or set ERGON_LIBRARY to a built "
                "libergon.so.0")


def candidates(path=None):
    cands = [path] if path else []
    if os.environ.get("ERGON_LIBRARY"):
        cands.append(os.environ["ERGON_LIBRARY"])
    try:
        from . import _install
        if _install.LIBDIR:
            cands.append(os.path.join(_install.LIBDIR, SONAME))
    except ImportError:
        pass
    cands += [SONAME, "libergon.so", ctypes.util.find_library("ergon")]
    # A path (ERGON_LIBRARY=./libergon.so.0) is made absolute now: libergon finds its watchdog
    # beside itself, and a relative name would mean the current directory of later moments.
    return [os.path.abspath(c) if "/" in c else c for c in cands if c]


def load(path=None):
    """ctypes.CDLL of libergon, or OSError whose message says what to install."""
    errors = []
    for c in candidates(path):
        try:
            return ctypes.CDLL(c)
        except OSError as e:
            errors.append(str(e))
    raise OSError("cannot load libergon (%s); %s" % ("; ".join(dict.fromkeys(errors)) or "no candidate",
                                                     MISSING_HINT))
