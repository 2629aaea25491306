"""python_dir.py PREFIX: print where a pure-Python package goes for this interpreter under
PREFIX, relative to PREFIX when it lies under it (packaging/install.cmake).

The first entry of sys.path that is PREFIX/lib/python3[.X]/{site,dist}-packages wins
(Debian: /usr -> lib/python3/dist-packages, /usr/local -> lib/python3.X/dist-packages);
otherwise the posix_prefix scheme's purelib for PREFIX (not on sys.path: PYTHONPATH needed)."""
import os
import re
import sys
import sysconfig

prefix = os.path.normpath(sys.argv[1])
pattern = re.compile(r"lib(64)?/python3(\.[0-9]+)?/(site|dist)-packages")
for p in sys.path:
    p = os.path.normpath(p) if p else ""
    if p.startswith(prefix + os.sep) and pattern.fullmatch(os.path.relpath(p, prefix)):
        break
else:
    p = sysconfig.get_path("purelib", "posix_prefix", vars={"base": prefix, "platbase": prefix})
print(os.path.relpath(p, prefix) if p.startswith(prefix + os.sep) else p)
