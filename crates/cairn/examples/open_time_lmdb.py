"""LMDB's side of examples/open_time.rs (issue 22), through py-lmdb (the repo's venv, `make
py-venv`): the same file shape (16-byte keys, 100-byte values, random order, 100,000 puts a
write transaction, no per-commit flush while building) and the same timings: a clean
`lmdb.open` + first read transaction, and the open after a writer process (this script,
`writer DIR`) was SIGKILLed while committing small transactions in a loop (durable commits,
LMDB's default).

    .venv/bin/python crates/cairn/examples/open_time_lmdb.py build DIR N
    .venv/bin/python crates/cairn/examples/open_time_lmdb.py measure DIR [opens] [kills]
"""

import os
import random
import signal
import statistics
import subprocess
import sys
import time

import lmdb

MAP_SIZE = 1 << 40
VALUE = b"\x5a" * 100
BATCH = 100_000


def key(i, r):
    # 8 random bytes (the order), then i (uniqueness), as open_time.rs's keys.
    return r.getrandbits(64).to_bytes(8, "big") + i.to_bytes(8, "big")


def build(path, n):
    if os.path.exists(os.path.join(path, "data.mdb")):
        print(f"{path} exists: not rebuilt")
        return
    os.makedirs(path, exist_ok=True)
    t = time.perf_counter()
    env = lmdb.open(path, map_size=MAP_SIZE, sync=False, metasync=False)
    r = random.Random(1)
    i = 0
    while i < n:
        with env.begin(write=True) as w:
            for j in range(i, min(i + BATCH, n)):
                w.put(key(j, r), VALUE)
        i += BATCH
    env.sync(True)
    entries = env.stat()["entries"]
    env.close()
    size = os.path.getsize(os.path.join(path, "data.mdb"))
    print(f"built {entries} pairs in {time.perf_counter() - t:.1f} s: {size // 1_000_000} MB")


def timed_open(path):
    t = time.perf_counter()
    env = lmdb.open(path, map_size=MAP_SIZE)
    txn = env.begin()
    took = time.perf_counter() - t
    if txn.stat(env.open_db())["entries"] == 0:
        raise SystemExit("empty database after open")
    txn.abort()
    env.close()
    return took


def summary(name, v):
    v = sorted(v)
    ms = [x * 1e3 for x in v]
    print(
        f"{name:<14} n={len(v):<3} median {statistics.median(ms):>8.3f} ms  "
        f"min {ms[0]:>8.3f} ms  max {ms[-1]:>8.3f} ms"
    )


def writer(path):
    env = lmdb.open(path, map_size=MAP_SIZE)
    r = random.Random(os.getpid())
    i = 1 << 40
    first = True
    while True:
        with env.begin(write=True) as w:
            for _ in range(200):
                w.put(key(i, r), VALUE)
                i += 1
        if first:
            print("writing", flush=True)
            first = False


def measure(path, opens, kills):
    size = os.path.getsize(os.path.join(path, "data.mdb"))
    print(f"file: {size // 1_000_000} MB")
    timed_open(path)
    summary("clean", [timed_open(path) for _ in range(opens)])
    v = []
    for k in range(kills):
        child = subprocess.Popen(
            [sys.executable, __file__, "writer", path], stdout=subprocess.PIPE
        )
        line = child.stdout.readline().strip()
        if line != b"writing":
            child.kill()
            raise SystemExit(f"writer child said {line!r}")
        time.sleep(0.15 + random.Random(k).random() * 0.2)
        child.send_signal(signal.SIGKILL)
        child.wait()
        v.append(timed_open(path))
    summary("killed", v)


def main():
    a = sys.argv[1:]
    if len(a) >= 2 and a[0] == "build":
        build(a[1], int(a[2]) if len(a) > 2 else 1_000_000)
    elif len(a) >= 2 and a[0] == "measure":
        measure(a[1], int(a[2]) if len(a) > 2 else 21, int(a[3]) if len(a) > 3 else 9)
    elif len(a) >= 2 and a[0] == "writer":
        writer(a[1])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
