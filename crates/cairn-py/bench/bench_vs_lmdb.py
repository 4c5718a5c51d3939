"""Cairn's Python layer side by side with py-lmdb, in one run.

Runs the same workloads through ``cairn`` and ``lmdb`` (both imported as py-lmdb's API) on
fresh environments in a temporary directory and prints operations per second and the ratio
Cairn / py-lmdb (above 1.0: Cairn is faster). Each figure is the best of several rounds.

    python bench/bench_vs_lmdb.py [N]
"""

import os
import random
import shutil
import sys
import tempfile
import time

import cairn
import lmdb

N = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
ROUNDS = 5


def keys(n):
    rnd = random.Random(42)
    ks = [b"key-%012d" % i for i in range(n)]
    rnd.shuffle(ks)
    return ks


def best(fn):
    t = min(_timed(fn) for _ in range(ROUNDS))
    return N / t


def _timed(fn):
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def workloads(mod, root):
    path = os.path.join(root, mod.__name__)
    env = mod.open(path, map_size=1 << 30, sync=False)
    ks = keys(N)
    val = b"v" * 100
    items = [(k, val) for k in sorted(ks)]

    def put():
        with env.begin(write=True) as t:
            p = t.put
            for k in ks:
                p(k, val)

    def get():
        with env.begin() as t:
            g = t.get
            for k in ks:
                g(k)

    def iterate():
        with env.begin() as t:
            for _ in t.cursor():
                pass

    def putmulti():
        with env.begin(write=True) as t:
            t.cursor().putmulti(items)

    out = {"put": best(put), "get": best(get), "cursor iteration": best(iterate)}
    out["putmulti"] = best(putmulti)
    env.close()
    return out


def main():
    root = tempfile.mkdtemp(prefix="cairn-py-bench-")
    try:
        c = workloads(cairn, root)
        l = workloads(lmdb, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"N = {N}, best of {ROUNDS}; cairn {cairn.__version__}, py-lmdb {lmdb.__version__}")
    print(f"{'workload':<18}{'cairn ops/s':>14}{'py-lmdb ops/s':>16}{'ratio':>8}")
    worst = None
    for w in c:
        r = c[w] / l[w]
        worst = r if worst is None else min(worst, r)
        print(f"{w:<18}{c[w]:>14,.0f}{l[w]:>16,.0f}{r:>8.2f}")
    print(f"lowest ratio: {worst:.2f}")


if __name__ == "__main__":
    main()
