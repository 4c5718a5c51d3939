#!/usr/bin/env python3
"""py-lmdb's own test suite through an LMDB C library (Cairn's liblmdb.so.0, or Debian's).

Run by `make test-pylmdb-capi` (mk/pylmdb-capi.mk). Steps, each cached under --work:
  1. py-lmdb's sdist, downloaded once with pip (`--no-binary :all: --no-deps`);
  2. a venv of its own (pytest, setuptools), never the repository's .venv;
  3. py-lmdb's C extension built from the sdist with LMDB_FORCE_SYSTEM=1 against the given
     lmdb.h and liblmdb.so (rpath to the library's directory), rebuilt when lmdb.h changes;
  4. a check that the extension really maps the library it was built for (/proc/self/maps);
  5. py-lmdb's tests/ under pytest, cve_test.py left out (it crafts files in LMDB's byte
     format), compared with a ratchet: a file of test ids still expected to fail, each with a
     one-line reason. Any other failure fails the run, and so does a listed test that passes.

py-lmdb's code stays under --work (target/), never in the repository.
"""

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import venv

HERE = os.path.dirname(os.path.abspath(__file__))

# Tests whose outcome depends on the machine rather than the library: the test, and the path
# whose existence makes it fail on any LMDB. test_bad_paths expects lmdb.open of
# /doesnt/exist/at/all to fail, which it does not once some run (as root) has created that
# directory: Cairn's own Env::open creates missing directories, so the pure-Python face's run
# of the same suite leaves it behind.
MACHINE_DEPENDENT = {
    "tests/env_test.py::OpenTest::test_bad_paths": "/doesnt/exist/at/all",
}


def log(msg):
    print(f"pylmdb-capi: {msg}", flush=True)


def run(cmd, **kw):
    log("$ " + " ".join(cmd))
    subprocess.run(cmd, check=True, **kw)


def sdist(work, version):
    """py-lmdb's sdist, downloaded once into work/dist."""
    dist = os.path.join(work, "dist")
    name = f"lmdb-{version}.tar.gz"
    path = os.path.join(dist, name)
    if not os.path.exists(path):
        os.makedirs(dist, exist_ok=True)
        run([sys.executable, "-m", "pip", "download", "-q", "--no-binary", ":all:",
             "--no-deps", f"lmdb=={version}", "-d", dist])
    if not os.path.exists(path):
        sys.exit(f"pylmdb-capi: pip download left no {path}")
    return path


def make_venv(work):
    """A venv of its own with pytest and setuptools (setup.py needs it)."""
    vdir = os.path.join(work, "venv")
    py = os.path.join(vdir, "bin", "python")
    if not os.path.exists(py):
        venv.EnvBuilder(with_pip=True).create(vdir)
    ok = subprocess.run([py, "-c", "import pytest, setuptools"], capture_output=True)
    if ok.returncode != 0:
        run([py, "-m", "pip", "install", "-q", "pytest", "setuptools"])
    return py


def header_digest(include):
    h = hashlib.sha256()
    with open(os.path.join(include, "lmdb.h"), "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def build(py, tarball, tree, include, libdir):
    """Extracts the sdist into `tree` and builds py-lmdb's C extension in place, against
    include/lmdb.h and libdir/liblmdb.so, with an rpath to libdir. Kept while lmdb.h,
    the library's directory and the sdist are the same."""
    stamp = os.path.join(tree, ".cairn-build-stamp")
    want = f"{os.path.basename(tarball)} {include} {libdir} {header_digest(include)}\n"
    if os.path.exists(stamp) and open(stamp).read() == want:
        return os.path.join(tree, os.path.basename(tarball)[: -len(".tar.gz")])
    shutil.rmtree(tree, ignore_errors=True)
    os.makedirs(tree)
    with tarfile.open(tarball) as t:
        t.extractall(tree, filter="data")
    src = os.path.join(tree, os.path.basename(tarball)[: -len(".tar.gz")])
    env = dict(os.environ)
    for k in ("LMDB_FORCE_CFFI", "LMDB_PURE"):
        env.pop(k, None)
    env.update(
        LMDB_FORCE_SYSTEM="1",
        LMDB_INCLUDEDIR=include,
        LMDB_LIBDIR=libdir,
        LDFLAGS=f"-Wl,-rpath,{libdir}",
    )
    run([py, "setup.py", "-q", "build_ext", "--inplace"], cwd=src, env=env)
    with open(stamp, "w") as f:
        f.write(want)
    return src


def check_loaded(py, src, libdir):
    """The extension must map liblmdb.so.0 from libdir, not some other LMDB."""
    code = (
        "import lmdb, lmdb.cpython as c\n"
        "maps = open('/proc/self/maps').read().split('\\n')\n"
        "libs = sorted({l.split()[-1] for l in maps if 'liblmdb' in l})\n"
        "print(c.__file__); print('\\n'.join(libs)); print(lmdb.version())\n"
    )
    env = dict(os.environ, PYTHONPATH=src, LMDB_FORCE_CPYTHON="1")
    env.pop("LD_LIBRARY_PATH", None)
    out = subprocess.run([py, "-c", code], cwd=src, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"pylmdb-capi: importing the extension failed:\n{out.stdout}{out.stderr}")
    lines = out.stdout.split("\n")
    libs = [x for x in lines[1:-2] if "liblmdb" in x]
    want = os.path.realpath(os.path.join(libdir, "liblmdb.so.0"))
    if [os.path.realpath(x) for x in libs] != [want]:
        sys.exit(f"pylmdb-capi: the extension maps {libs}, not {want}")
    log(f"{lines[0]} maps {libs[0]} (version {lines[-2]})")


def read_expected(path):
    """Test id -> reason, from lines `id  # reason` (blank lines and #-lines skipped)."""
    expected = {}
    if not path:
        return expected
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            tid, sep, reason = line.partition(" # ")
            if not sep or not reason.strip():
                sys.exit(f"pylmdb-capi: {path}:{n}: want `test-id # reason`")
            expected[tid.strip()] = reason.strip()
    return expected


def run_pytest(py, src, report):
    """py-lmdb's tests/ (without cve_test.py) in the venv; per-test outcomes go to report."""
    plugin = os.path.join(HERE, "outcomes.py")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([src, HERE]), LMDB_FORCE_CPYTHON="1",
               LMDB_FORCE_SYSTEM="1", CAIRN_PYLMDB_OUTCOMES=report)
    env.pop("LD_LIBRARY_PATH", None)
    assert os.path.exists(plugin)
    cmd = [py, "-m", "pytest", "-q", "-p", "outcomes", "-p", "no:cacheprovider",
           "-o", "addopts=", "--ignore=tests/cve_test.py", "tests"]
    log("$ " + " ".join(cmd))
    return subprocess.run(cmd, cwd=src, env=env).returncode


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--version", default="2.3.0")
    ap.add_argument("--work", required=True, help="cache directory (under target/)")
    ap.add_argument("--include", required=True, help="directory of the lmdb.h to build with")
    ap.add_argument("--libdir", required=True, help="directory of liblmdb.so / liblmdb.so.0")
    ap.add_argument("--name", required=True, help="build name (one tree per library)")
    ap.add_argument("--label", required=True, help="the library's name in the summary")
    ap.add_argument("--expect", help="the ratchet: test ids still expected to fail")
    a = ap.parse_args()

    work = os.path.abspath(a.work)
    os.makedirs(work, exist_ok=True)
    tarball = sdist(work, a.version)
    py = make_venv(work)
    src = build(py, tarball, os.path.join(work, a.name), a.include, a.libdir)
    check_loaded(py, src, a.libdir)

    report = os.path.join(work, f"{a.name}.outcomes")
    if os.path.exists(report):
        os.remove(report)
    rc = run_pytest(py, src, report)
    if not os.path.exists(report):
        sys.exit(f"pylmdb-capi: pytest exited {rc} and recorded no outcome")
    outcomes = {}
    with open(report) as f:
        for line in f:
            tid, outcome = line.rstrip("\n").rsplit(" ", 1)
            outcomes[tid] = outcome

    expected = read_expected(a.expect)
    for tid, path in MACHINE_DEPENDENT.items():
        if os.path.exists(path) and outcomes.get(tid) == "failed" and tid not in expected:
            log(f"{tid} not counted: {path} exists on this machine (it fails on any LMDB)")
            del outcomes[tid]
    passed = [t for t, o in outcomes.items() if o == "passed"]
    failed = [t for t, o in outcomes.items() if o == "failed"]
    skipped = [t for t, o in outcomes.items() if o == "skipped"]
    unexpected = sorted(t for t in failed if t not in expected)
    fixed = sorted(t for t in expected if outcomes.get(t) == "passed")
    gone = sorted(t for t in expected if t not in outcomes)
    xfail = sorted(t for t in failed if t in expected)

    for t in unexpected:
        print(f"UNEXPECTED FAILURE: {t}")
    for t in fixed:
        print(f"NOW PASSES (drop it from {a.expect}): {t}")
    for t in gone:
        print(f"LISTED BUT NOT RUN (drop it from {a.expect}): {t}")
    print(f"py-lmdb {a.version} suite through liblmdb.so.0 ({a.label}): {len(passed)} passed, "
          f"{len(xfail)} expected failures, {len(unexpected)} unexpected"
          + (f", {len(skipped)} skipped" if skipped else ""))
    if unexpected or fixed or gone:
        sys.exit(1)
    if rc not in (0, 1):
        sys.exit(f"pylmdb-capi: pytest exited {rc}")


if __name__ == "__main__":
    main()
