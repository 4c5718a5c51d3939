"""Writes LMDB environments with real LMDB (py-lmdb, or Debian's python3-lmdb) for the
reader's and `cairn migrate`'s tests, and what LMDB's own cursors read back from them.

    python gen_lmdb.py OUT_DIR SEED KIND

KIND:
  flags    one environment, OUT_DIR/env: a named database for each flag combination LMDB
           allows, random keys and values (big ones in overflow pages, keys with a few and
           with hundreds of duplicates: sub-pages and sub-trees), plain records in the main
           database beside the names, and random deletes in a second transaction (free pages,
           reused pages, shrunk trees)
  bigdup   OUT_DIR/env: one DUPSORT key with 100,000 values (a duplicate sub-tree of depth > 1)
  nosubdir OUT_DIR/env.mdb (MDB_NOSUBDIR): a few databases
  expect   only expected.txt, for OUT_DIR/env written by gen_reversedup.c
  big      OUT_DIR/env: N records (env var GEN_N, default 200000), 16-byte keys, 100-byte values

Each writes OUT_DIR/expected.txt: for the main database and each named one, a line
"db NAME" (or "db" for the main one) and then one line per pair, "KEYHEX VALUEHEX", in the
order LMDB's cursor gives (next, duplicates included).
"""

import os
import random
import struct
import sys

import lmdb

COMBOS = [
    ("plain", {}),
    ("rkey", {"reverse_key": True}),
    ("ikey8", {"integerkey": True}),
    ("ikey4", {"integerkey": True}),
    ("dup", {"dupsort": True}),
    ("dupfix", {"dupsort": True, "dupfixed": True}),
    ("idup", {"dupsort": True, "integerdup": True, "dupfixed": True}),
    ("idup4", {"dupsort": True, "integerdup": True, "dupfixed": True}),
    ("rdup", {"dupsort": True, "reverse_key": True}),
    ("ikey_dup", {"integerkey": True, "dupsort": True}),
]


def rnd(r, lo, hi):
    return bytes(r.getrandbits(8) for _ in range(r.randint(lo, hi)))


def key_for(r, name):
    if name in ("ikey8",):
        return struct.pack("=Q", r.getrandbits(40))
    if name in ("ikey4", "ikey_dup"):
        return struct.pack("=I", r.getrandbits(24))
    return rnd(r, 1, 60)


def val_for(r, name, big_ok):
    if name == "idup":
        return struct.pack("=Q", r.getrandbits(40))
    if name == "idup4":
        return struct.pack("=I", r.getrandbits(24))
    if name == "dupfix":
        return rnd(r, 12, 12)
    if name in ("dup", "rdup", "ikey_dup"):
        # (LMDB refuses some empty duplicates: MDB_BAD_VALSIZE.)
        return rnd(r, 1, 40)
    if big_ok and r.random() < 0.05:
        return rnd(r, 2000, 20000)
    return rnd(r, 0, 300)


def expected(env, names, out):
    with open(out, "w") as f, env.begin() as t:
        dbs = [(None, None)]
        for n in names:
            dbs.append((n, env.open_db(n.encode(), txn=t, create=False)))
        for n, db in dbs:
            f.write("db" + ("" if n is None else " " + n) + "\n")
            c = t.cursor(db) if db is not None else t.cursor()
            for k, v in c.iternext(keys=True, values=True):
                f.write(k.hex() + " " + v.hex() + "\n")


def gen_flags(out, seed):
    r = random.Random(seed)
    env = lmdb.open(os.path.join(out, "env"), max_dbs=64, map_size=1 << 30)
    dbs = {n: env.open_db(n.encode(), **o) for n, o in COMBOS}
    with env.begin(write=True) as t:
        for i in range(r.randint(20, 200)):
            t.put(b"main-" + rnd(r, 1, 20), rnd(r, 0, 100))
        for n, _ in COMBOS:
            db = dbs[n]
            dupsort = n in ("dup", "dupfix", "idup", "idup4", "rdup", "ikey_dup")
            for i in range(r.randint(50, 1500)):
                k = key_for(r, n)
                if dupsort and r.random() < 0.05:
                    # Many values: past a sub-page, into a sub-tree.
                    for j in range(r.randint(50, 700)):
                        t.put(k, val_for(r, n, False), db=db)
                else:
                    for j in range(r.randint(1, 4) if dupsort else 1):
                        t.put(k, val_for(r, n, not dupsort), db=db)
    with env.begin(write=True) as t:
        for n, _ in COMBOS:
            db = dbs[n]
            c = t.cursor(db)
            # One draw per key (a key with many values would almost surely go otherwise).
            doomed = [k for k in c.iternext_nodup(keys=True, values=False) if r.random() < 0.2]
            for k in doomed:
                t.delete(k, db=db)
    expected(env, sorted(n for n, _ in COMBOS), os.path.join(out, "expected.txt"))
    env.close()


def gen_bigdup(out, seed):
    env = lmdb.open(os.path.join(out, "env"), max_dbs=4, map_size=1 << 30)
    db = env.open_db(b"d", dupsort=True)
    with env.begin(write=True) as t:
        t.put(b"before", b"x", db=db)
        for i in range(100000):
            t.put(b"the-key", b"%09d" % i, db=db)
        t.put(b"zafter", b"y", db=db)
    expected(env, ["d"], os.path.join(out, "expected.txt"))
    env.close()


def gen_nosubdir(out, seed):
    r = random.Random(seed)
    env = lmdb.open(os.path.join(out, "env.mdb"), subdir=False, max_dbs=4, map_size=1 << 28)
    a = env.open_db(b"a")
    b = env.open_db(b"b", dupsort=True)
    with env.begin(write=True) as t:
        for i in range(500):
            t.put(rnd(r, 1, 30), rnd(r, 0, 3000), db=a)
            t.put(rnd(r, 1, 5), rnd(r, 1, 20), db=b)
    expected(env, ["a", "b"], os.path.join(out, "expected.txt"))
    env.close()


def gen_expect(out, seed):
    """Only expected.txt, for OUT_DIR/env written by another program (gen_reversedup.c)."""
    env = lmdb.open(os.path.join(out, "env"), max_dbs=64, readonly=True, lock=False)
    with env.begin() as t:
        names = [k.decode() for k, _ in t.cursor().iternext()]
    expected(env, names, os.path.join(out, "expected.txt"))
    env.close()


def gen_big(out, seed):
    n = int(os.environ.get("GEN_N", "200000"))
    r = random.Random(seed)
    env = lmdb.open(os.path.join(out, "env"), map_size=64 << 30, writemap=True, sync=False)
    batch = 100000
    i = 0
    while i < n:
        with env.begin(write=True) as t:
            c = t.cursor()
            for j in range(i, min(n, i + batch)):
                c.put(b"%016d" % j, r.randbytes(100) if hasattr(r, "randbytes") else os.urandom(100), append=True)
        i += batch
    env.sync(True)
    env.close()


if __name__ == "__main__":
    out, seed, kind = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    os.makedirs(out, exist_ok=True)
    {"flags": gen_flags, "bigdup": gen_bigdup, "nosubdir": gen_nosubdir, "big": gen_big,
     "expect": gen_expect}[kind](out, seed)
