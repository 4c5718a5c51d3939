"""Cairn's Python layer side by side with py-lmdb, in one run.

Runs the same workloads through ``cairn`` and ``lmdb`` (py-lmdb; both used through py-lmdb's
API) on fresh environments in one temporary directory. Rounds alternate between the two
modules so that a change in machine load hits both alike; each figure is the best round,
timed in CPU time of this process (``time.process_time``, user + system, so commits' writes
count) rather than wall time, which other work on a shared machine distorts.
Prints operations per second and the ratio Cairn / py-lmdb (above 1.0: Cairn is faster).

Two groups:
- N random keys (16-byte keys, 100-byte values, N = 200,000 by default): get, put and
  putmulti in shuffled order, one transaction each, and cursor iteration over all of them.
  These include the engines' B-tree work.
- the binding itself: get and put of one key in a one-key database, and a get that misses
  in an empty database, where the engine does almost nothing and the cost is the Python
  layer's (argument parsing, transaction checks, object creation).

    python bench/bench_vs_lmdb.py [N] [ROUNDS]
"""

import os
import random
import shutil
import sys
import tempfile
import time

import cairn
import lmdb

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 5
HOT = 200_000
VAL = b"v" * 100


def timed(fn):
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def make(mod, root):
    """The workloads of one module: name -> (operations, function)."""
    env = mod.open(os.path.join(root, mod.__name__), map_size=4 << 30, sync=False, max_dbs=4)
    rnd = random.Random(42)
    ks = [b"key-%012d" % i for i in range(N)]
    rnd.shuffle(ks)
    items = [(k, VAL) for k in sorted(ks)]
    one = env.open_db(b"one")
    empty = env.open_db(b"empty")
    with env.begin(write=True) as t:
        t.put(b"key-000000000001", VAL, db=one)

    def put():
        with env.begin(write=True) as t:
            p = t.put
            for k in ks:
                p(k, VAL)

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

    def get_one():
        with env.begin(db=one) as t:
            g = t.get
            k = b"key-000000000001"
            for _ in range(HOT):
                g(k)

    def put_one():
        with env.begin(write=True, db=one) as t:
            p = t.put
            k = b"key-000000000001"
            for _ in range(HOT):
                p(k, VAL)

    def get_miss():
        with env.begin(db=empty) as t:
            g = t.get
            for _ in range(HOT):
                g(b"absent")

    put()  # the random-key workloads read and overwrite a full database
    return env, {
        "get": (N, get),
        "put": (N, put),
        "cursor iteration": (N, iterate),
        "putmulti": (N, putmulti),
        "get, 1-key db": (HOT, get_one),
        "put, 1-key db": (HOT, put_one),
        "get miss, empty db": (HOT, get_miss),
    }


def main():
    root = tempfile.mkdtemp(prefix="cairn-py-bench-")
    try:
        runs = {m: make(m, root) for m in (cairn, lmdb)}
        best = {m: {} for m in runs}
        for _ in range(ROUNDS):
            for name in runs[cairn][1]:
                for m in (cairn, lmdb):
                    n, fn = runs[m][1][name]
                    rate = n / timed(fn)
                    best[m][name] = max(best[m].get(name, 0.0), rate)
        for m in runs:
            runs[m][0].close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"N = {N}, best of {ROUNDS} alternating rounds; "
          f"cairn {cairn.__version__}, py-lmdb {lmdb.__version__}")
    print(f"{'workload':<22}{'cairn ops/s':>14}{'py-lmdb ops/s':>16}{'ratio':>8}")
    for name in best[cairn]:
        c, l = best[cairn][name], best[lmdb][name]
        print(f"{name:<22}{c:>14,.0f}{l:>16,.0f}{c / l:>8.2f}")


if __name__ == "__main__":
    main()
