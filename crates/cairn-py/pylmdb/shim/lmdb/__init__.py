"""`import lmdb` resolves to Cairn: this directory goes first on PYTHONPATH when py-lmdb's own
test suite runs against Cairn (mk/pylmdb.mk, crates/cairn-py/pylmdb/run.py).

The module replaces itself with the `cairn` package, so `lmdb is cairn` and
`lmdb.Environment is cairn.Environment`. A submodule (`lmdb.aio`, `lmdb.tool`) is Cairn's own
when Cairn's package has it; otherwise, when CAIRN_PYLMDB_PURE names the `lmdb` directory of
py-lmdb's unpacked sdist, py-lmdb's pure-Python module of that name is loaded, running over
Cairn (it imports its classes from the package, `from . import Environment`)."""

import importlib.machinery
import importlib.util
import os
import sys

import cairn

_PURE = os.environ.get("CAIRN_PYLMDB_PURE")


class _PureFallback:
    """Finds `lmdb.<name>` in py-lmdb's sdist when Cairn's package has no such module."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):
        if not _PURE or not fullname.startswith("lmdb.") or fullname.count(".") != 1:
            return None
        name = fullname.split(".", 1)[1]
        if importlib.machinery.PathFinder.find_spec(name, cairn.__path__) is not None:
            return None  # Cairn's own module wins (the path finder after us loads it)
        origin = os.path.join(_PURE, name + ".py")
        if not os.path.isfile(origin):
            return None
        return importlib.util.spec_from_file_location(fullname, origin)


sys.meta_path.insert(0, _PureFallback())
sys.modules[__name__] = cairn
